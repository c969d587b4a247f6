"""One handshake-era Streamable HTTP session (2024-11-05 .. 2025-11-25): a ServerSession, its Dispatcher, and where
what it writes goes (L6 helper).

The POSTs of a session hand their messages to its :class:`~jsonrpc_mcp.jsonrpc.dispatch.Dispatcher` themselves
(``answer_request``, with the request's call and the POST's headers in it; ``deliver``); a handler that has to wait
runs among the app's handler tasks. Every frame the dispatcher writes arrives at :meth:`SessionStream.send` with
its kind and the id of the inbound request it belongs to, and is routed:

* to the :class:`Exchange` of that request (the POST waiting for it): notifications and server-to-client
  requests first, the response last — after which the exchange is done;
* otherwise to the session's standalone stream (the GET stream), for messages unrelated to any request.

Outlets of exchanges whose connection dropped before their answer was written stay here (bounded) until the
client resumes them with ``GET`` + ``Last-Event-ID``, or the session ends.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from time import monotonic
from typing import TYPE_CHECKING, Final

import anyio
import msgspec

from ..jsonrpc.concurrency import HandlerTasks
from ..jsonrpc.dispatch import Dispatcher
from ..jsonrpc.streams import RESPONSE as ANSWER
from ..jsonrpc.streams import MessageStream, Outgoing
from ..jsonrpc.wire import RequestId
from ..mcp.bus import SessionRecord
from ..mcp.session import ServerSession
from ._http_io import HTTP_NETWORK, HeaderList
from ._http_outlet import FINAL, OTHER, RESPONSE, Feed, Outlet
from .events import EventStore, InMemoryEventStore

if TYPE_CHECKING:
    from ..mcp.session import ServerApp

__all__ = ("HttpSession", "Exchange", "SessionStream")

logger = logging.getLogger(__name__)

STANDALONE: Final = "0"


class Exchange(msgspec.Struct):
    """The requests of one POST body (one, or several in a 2025-03-26 batch) awaiting their responses, and the
    outlet their frames go to (a Struct: made for every POST that has to wait, in C)."""

    outlet: Outlet
    waiting: set[RequestId]
    json_only: bool


class SessionStream(MessageStream):
    """Where a session's dispatcher writes: each frame goes to the outlet it belongs to.

    It reaches its session through a weak reference: the session holds the stream (and the dispatcher that holds it
    too), so an ended session is freed by reference counting, not left in a cycle for the cyclic collector. A frame
    written once the session is gone (by a handler winding up after DELETE) has nowhere to go and is dropped."""

    gathers_replies = False  # every answer goes to its own POST: nothing to gain by waiting for others
    network = HTTP_NETWORK

    def __init__(self, owner: HttpSession) -> None:
        self._owner = weakref.ref(owner)
        self.session_id = owner.id

    async def send(self, frames: Sequence[Outgoing]) -> None:
        owner = self._owner()
        if owner is None:
            return
        for out in frames:
            frame, related, kind = out.frame, out.related, out.kind
            exchange = owner.exchanges.get(related) if related is not None else None
            if exchange is None or related is None:
                if owner.record is None or owner.standalone.connected:
                    await owner.standalone.put(frame)
                # (a session several workers serve gets what concerns no request on its open GET stream, only on the
                # worker that holds that stream)
            elif kind == ANSWER:
                exchange.waiting.discard(related)
                del owner.exchanges[related]
                await exchange.outlet.put(frame, RESPONSE if exchange.waiting else FINAL)
            elif exchange.json_only:
                await owner.standalone.put(frame)
            else:
                await exchange.outlet.put(frame, OTHER)

    def finished(self, request_id: RequestId) -> None:
        owner = self._owner()
        exchange = None if owner is None else owner.exchanges.pop(request_id, None)
        if exchange is None:
            return
        exchange.waiting.discard(request_id)
        if not exchange.waiting:
            exchange.outlet.finish()

    def close_request_stream(self, request_id: RequestId) -> bool:
        """SEP-1699 polling: close the connection of this request's SSE stream; the client resumes with GET."""
        owner = self._owner()
        exchange = None if owner is None else owner.exchanges.get(request_id)
        if exchange is None or not exchange.outlet.resumable:
            return False
        exchange.outlet.drop_connection()
        return True

    async def aclose(self) -> None:
        pass


class HttpSession:
    """One handshake-era session: its dispatcher, its exchanges and its resumable streams."""

    def __init__(
        self,
        server: ServerApp,
        session_id: str,
        *,
        store: EventStore,
        tasks: HandlerTasks,
        max_in_flight: int,
        request_timeout: float | None,
        max_parked: int = 64,
    ) -> None:
        self.id = session_id
        self.id_header: HeaderList = [(b"mcp-session-id", session_id.encode())]  # never mutated: shared by answers
        self.store = store
        self.max_parked = max_parked
        self.stream = SessionStream(self)
        self.dispatcher = Dispatcher(self.stream, max_in_flight=max_in_flight, request_timeout=request_timeout)
        self.dispatcher.use_tasks(tasks)
        self.mcp = ServerSession(server, self.dispatcher)
        self.exchanges: dict[RequestId, Exchange] = {}
        self.outlets: dict[str, Outlet] = {}
        self.closed = False
        self._standalone: Outlet | None = None  # made on first use: most sessions never have a GET stream
        self._next_key = 1
        self.active = 0  # HTTP requests of this session being served right now
        self.last_seen = monotonic()
        #: What the shared backend holds for this session, when several workers serve it (``None``: this one only).
        self.record: SessionRecord | None = None
        #: Whom the session belongs to (``HttpPolicy.session_owner`` of its ``initialize``), or ``None``.
        self.owner: str | None = None

    # --- lifetime ------------------------------------------------------------------------------------------

    def terminate(self) -> None:
        """End the session (DELETE, expiry, shutdown): its handlers are cancelled, its open streams end."""
        if self.closed:
            return
        self.closed = True
        for exchange in self.exchanges.values():
            exchange.outlet.finish()
        self.exchanges.clear()
        for outlet in self.outlets.values():
            outlet.finish()
        self.mcp.close()

    async def discard_outlets(self) -> None:
        """Forget the session's streams in the event store (after it ended)."""
        for outlet in list(self.outlets.values()):
            try:
                await outlet.discard()
            except Exception:
                logger.exception("the event store failed to discard a stream")
        self.outlets.clear()

    def touch(self) -> None:
        self.last_seen = monotonic()

    def idle(self, now: float, timeout: float) -> bool:
        return now - self.last_seen > timeout and not self.busy()

    def busy(self) -> bool:
        """Something of this session is under way: an HTTP request served, or a handler running."""
        return self.active > 0 or self.dispatcher.in_flight() > 0

    # --- streams -------------------------------------------------------------------------------------------

    @property
    def standalone(self) -> Outlet:
        """The session's standalone stream (the GET stream), for messages unrelated to any request."""
        outlet = self._standalone
        if outlet is None:
            outlet = self._standalone = self._new_outlet(STANDALONE, resumable=True, batch=False)
        return outlet

    def _new_outlet(self, key: str, *, resumable: bool, batch: bool) -> Outlet:
        """An outlet of this session; a resumable one is registered (for resumption, and to end with the session)."""
        outlet = Outlet(key if resumable else None, store=self.store, store_key=f"{self.id}/{key}", batch=batch)
        if resumable:
            self.outlets[key] = outlet
            if self.closed:
                outlet.finish()
        return outlet

    def open_exchange(self, ids: Sequence[RequestId], *, resumable: bool, json_only: bool, batch: bool) -> Outlet:
        """The outlet of a new exchange of a POST's requests, numbered next in the session."""
        key = str(self._next_key)
        self._next_key += 1
        exchange = Exchange(self._new_outlet(key, resumable=resumable, batch=batch), set(ids), json_only)
        for ident in ids:
            self.exchanges[ident] = exchange
        return exchange.outlet

    def connect(self, outlet: Outlet) -> Feed:
        """An HTTP response of this session takes ``outlet``'s frames from now on (see :meth:`release`)."""
        self.active += 1
        return outlet.connect()

    async def release(self, outlet: Outlet, connection: Feed, delivered: bool) -> None:
        """An HTTP response of this session has ended: detach it from its outlet and settle the outlet's fate (once
        per connection: a second call does nothing)."""
        if connection.closed:
            return
        outlet.disconnect(connection)
        self.active -= 1
        self.touch()
        if type(self.store) is InMemoryEventStore:
            # Its methods never wait, so nothing can interrupt the settling (a cancellation is delivered only where a
            # task waits): no shield needed.
            await self.settle(outlet, delivered)
            return
        with anyio.CancelScope(shield=True):  # a store of the caller's may wait, even under a cancelled scope
            await self.settle(outlet, delivered)

    async def settle(self, outlet: Outlet, delivered: bool) -> None:
        """After a connection of ``outlet`` ended: forget it when it needs no resumption, else park it (bounded)."""
        if outlet.key is None or outlet.key == STANDALONE:
            return
        if delivered or (outlet.done and not outlet.answered):
            if self.outlets.pop(outlet.key, None) is not None:
                await outlet.discard()
            return
        parked = [(key, o) for key, o in self.outlets.items() if key != STANDALONE and not o.connected and o.done]
        for key, old in parked[: max(0, len(parked) - self.max_parked)]:
            self.outlets.pop(key, None)
            await old.discard()

    def resumable_outlet(self, last_event_id: str) -> tuple[Outlet, int] | None:
        """The outlet a ``Last-Event-ID`` names, and the number of the last event the client has."""
        key, sep, number = last_event_id.strip().rpartition("-")
        if not sep or not number.isdigit():
            return None
        outlet = self.standalone if key == STANDALONE else self.outlets.get(key)
        if outlet is None:
            return None
        seq = int(number)
        if seq > outlet.seq:
            return None
        return outlet, seq
