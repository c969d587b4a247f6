"""One handshake-era Streamable HTTP session (2024-11-05 .. 2025-11-25): a ServerSession, its Dispatcher, and where
what it writes goes (L6 helper).

The POSTs of a session hand their messages to its :class:`~jsonrpc_mcp.jsonrpc.dispatch.Dispatcher` themselves
(``begin``, ``take``); a handler that has to wait runs among the app's handler tasks. Every frame the dispatcher
writes arrives at :meth:`SessionStream.send` with its kind and the id of the inbound request it belongs to, and is
routed:

* to the :class:`Exchange` of that request (the POST waiting for it): notifications and server-to-client
  requests first, the response last — after which the exchange is done;
* otherwise to the session's standalone stream (the GET stream), for messages unrelated to any request.

Outlets of exchanges whose connection dropped before their answer was written stay here (bounded) until the
client resumes them with ``GET`` + ``Last-Event-ID``, or the session ends.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from time import monotonic
from typing import TYPE_CHECKING, Final

import anyio

from ..jsonrpc._concurrency import HandlerTasks
from ..jsonrpc.dispatch import Dispatcher
from ..jsonrpc.streams import RESPONSE as ANSWER
from ..jsonrpc.streams import MessageStream, Outgoing
from ..jsonrpc.wire import RequestId
from ..mcp.bus import SessionRecord
from ..mcp.session import ServerSession
from ._http_io import HeaderList, Headers
from ._http_outlet import FINAL, OTHER, RESPONSE, Outlet
from .events import EventStore

if TYPE_CHECKING:
    from ..mcp.session import ServerApp

__all__ = ("HttpSession", "Exchange", "SessionStream")

logger = logging.getLogger(__name__)

STANDALONE: Final = "0"


class Exchange:
    """The requests of one POST body (one, or several in a 2025-03-26 batch) awaiting their responses.

    Its :attr:`outlet` is made on first use: a request answered at once in its POST never needs one."""

    __slots__ = ("_batch", "_outlet", "_resumable", "_session", "headers", "json_only", "waiting")

    def __init__(
        self,
        session: HttpSession,
        ids: Iterable[RequestId],
        resumable: bool,
        json_only: bool,
        batch: bool,
        headers: Headers | Mapping[str, str] | None = None,
    ) -> None:
        # (one per POST of a request: made with positional arguments, which a class call takes for less)
        self._session = session
        self._resumable = resumable
        self._batch = batch
        self._outlet: Outlet | None = None
        self.waiting = set(ids)
        self.json_only = json_only
        self.headers = headers

    @property
    def outlet(self) -> Outlet:
        """Where this exchange's frames go (made, and numbered in its session, on first use)."""
        outlet = self._outlet
        if outlet is None:
            outlet = self._outlet = self._session.new_outlet(resumable=self._resumable, batch=self._batch)
        return outlet

    def request_headers(self) -> Mapping[str, str]:
        """The POST's headers as ``Context.request_headers`` shows them (built on first use)."""
        headers = self.headers
        if headers is None:
            return {}
        return headers.as_dict() if isinstance(headers, Headers) else headers


class SessionStream(MessageStream):
    """Where a session's dispatcher writes: each frame goes to the outlet it belongs to."""

    gathers_replies = False  # every answer goes to its own POST: nothing to gain by waiting for others

    def __init__(self, owner: HttpSession) -> None:
        self.owner = owner
        #: The request a POST is handing to the dispatcher right now, and its headers (``begin`` is synchronous:
        #: a handler that answers at once reads them from here, one that has to wait from its exchange).
        self.arriving: tuple[RequestId, Headers] | None = None

    @property
    def session_id(self) -> str:  # type: ignore[override]  # (read only: the session's)
        return self.owner.id

    async def receive(self) -> Sequence[bytes]:
        raise anyio.EndOfStream  # (the POSTs hand their messages to the dispatcher directly)

    async def send(self, frames: Sequence[Outgoing]) -> None:
        owner = self.owner
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
        owner = self.owner
        exchange = owner.exchanges.pop(request_id, None)
        if exchange is None:
            return
        exchange.waiting.discard(request_id)
        if not exchange.waiting:
            exchange.outlet.finish()

    def request_headers(self, request_id: RequestId) -> Mapping[str, str] | None:
        """The HTTP headers of the POST that carried ``request_id`` (read by ``Context.request_headers``)."""
        arriving = self.arriving
        if arriving is not None and arriving[0] == request_id:
            return arriving[1].as_dict()
        exchange = self.owner.exchanges.get(request_id)
        return exchange.request_headers() if exchange is not None else None

    def request_auth(self, request_id: RequestId) -> object | None:
        """The principal an HTTP policy authenticated the POST that carried ``request_id`` as (``Context.auth``)."""
        arriving = self.arriving
        if arriving is not None and arriving[0] == request_id:
            principal: object | None = arriving[1].auth
            return principal
        exchange = self.owner.exchanges.get(request_id)
        return getattr(exchange.headers, "auth", None) if exchange is not None else None

    def close_request_stream(self, request_id: RequestId) -> bool:
        """SEP-1699 polling: close the connection of this request's SSE stream; the client resumes with GET."""
        exchange = self.owner.exchanges.get(request_id)
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
        buffer: int = 64,
        max_parked: int = 64,
    ) -> None:
        self.id = session_id
        self.id_header: HeaderList = [(b"mcp-session-id", session_id.encode())]  # never mutated: shared by answers
        self.store = store
        self.buffer = buffer
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
            outlet = self._standalone = self._outlet(STANDALONE)
        return outlet

    def _outlet(self, key: str, *, resumable: bool = True, batch: bool = False, register: bool = True) -> Outlet:
        outlet = Outlet(
            key if resumable else None,
            store=self.store,
            store_key=f"{self.id}/{key}",
            buffer=self.buffer,
            batch=batch,
        )
        if register:
            self.register(outlet)
        return outlet

    def register(self, outlet: Outlet) -> None:
        """Make a resumable outlet known to the session (resumption, ending with the session). An exchange answered
        at once in its POST's task never needs it: its outlet is registered only when the answer has to wait."""
        if outlet.key is None:
            return
        self.outlets[outlet.key] = outlet
        if self.closed:
            outlet.finish()

    def new_outlet(self, *, resumable: bool, batch: bool) -> Outlet:
        """A fresh outlet with the session's next stream number (not registered)."""
        key = str(self._next_key)
        self._next_key += 1
        return self._outlet(key, resumable=resumable, batch=batch, register=False)

    def open_exchange(
        self,
        ids: Sequence[RequestId],
        *,
        resumable: bool,
        json_only: bool,
        batch: bool,
        headers: Headers | Mapping[str, str] | None = None,
        register: bool = True,
    ) -> Exchange:
        """The exchange of a POST's requests; ``register``: make its outlet now and register it (otherwise the
        outlet is made on first use and registered by the caller when the answer has to wait)."""
        exchange = Exchange(self, ids, resumable, json_only, batch, headers)
        if register:
            self.register(exchange.outlet)
        for ident in ids:
            self.exchanges[ident] = exchange
        return exchange

    async def settle(self, outlet: Outlet, delivered: bool) -> None:
        """After a connection of ``outlet`` ended: forget it when it needs no resumption, else park it (bounded)."""
        if outlet.key is None or outlet.key == STANDALONE:
            return
        if delivered or (outlet.done and not outlet.answered):
            if self.outlets.pop(outlet.key, None) is not None:
                await outlet.discard()
            return
        parked = [o for key, o in self.outlets.items() if key != STANDALONE and not o.connected and o.done]
        for old in parked[: max(0, len(parked) - self.max_parked)]:
            if old.key is not None:
                self.outlets.pop(old.key, None)
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
