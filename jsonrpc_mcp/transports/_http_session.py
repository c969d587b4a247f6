"""One handshake-era Streamable HTTP session (2024-11-05 .. 2025-11-25): a ServerSession and its Dispatcher,
fed by POST bodies and answered on outlets (L6 helper).

:class:`HttpSession` owns the session's :class:`~jsonrpc_mcp.jsonrpc.dispatch.Dispatcher`, which runs in a task
of the app's session table once the session needs it (until then, and for every request whose handler answers
at once, the POSTs' own tasks answer). POSTed frames go into its inbound queue; every frame it writes arrives at
:meth:`SessionStream.send` with the id of the inbound request it belongs to, and is routed:

* to the :class:`Exchange` of that request (the POST waiting for it): notifications and server-to-client
  requests first, the response last — after which the exchange is done;
* otherwise to the session's standalone stream (the GET stream), for messages unrelated to any request.

Outlets of exchanges whose connection dropped before their answer was written stay here (bounded) until the
client resumes them with ``GET`` + ``Last-Event-ID``, or the session ends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from time import monotonic
from typing import TYPE_CHECKING, Final

import anyio
import anyio.abc
from msgspec import UNSET

from ..errors import RpcError
from ..jsonrpc._tasks import Signal, new_signal
from ..jsonrpc.dispatch import Dispatcher
from ..jsonrpc.streams import MessageStream
from ..jsonrpc.wire import RequestId, decode_frame
from ..mcp.session import ServerSession
from ._http_events import EventStore
from ._http_io import HeaderList, Headers
from ._http_outlet import FINAL, OTHER, RESPONSE, Outlet

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


def _is_response(frame: bytes) -> bool:
    try:
        return decode_frame(frame).method is UNSET
    except RpcError:
        return False


class SessionStream(MessageStream):
    """The session's side of its dispatcher: inbound frames from POSTs, outbound frames routed to outlets."""

    gathers_replies = False  # every answer goes to its own POST: nothing to gain by waiting for others

    def __init__(self, owner: HttpSession, buffer: int) -> None:
        self.owner = owner
        self.buffer = buffer
        # The inbound queue: a list, and a signal (``_tasks.new_signal``) made only while someone waits. (An anyio
        # memory object stream costs ~4.5 KiB per session, mostly for the machinery of its waiting receiver, and
        # every session's dispatcher waits in receive while the session is idle.)
        self._queue: list[tuple[bytes, Exchange | None]] = []
        self._arrived: Signal | None = None  # the dispatcher waits for frames
        self._room: anyio.Event | None = None  # POSTs wait for room in a full queue
        self._ended = False  # no more frames will be pushed (the session ended)
        self._closed = False  # the dispatcher is gone: frames pushed now are refused
        self._handed: list[Exchange] = []

    async def receive(self) -> Sequence[bytes]:
        # The dispatcher asks for more only once it has handled what it got (and written the answers it had at
        # once): an exchange among those still unanswered is waiting for an async handler.
        if self._handed:
            self._hint_handed()
        while not self._queue:
            if self._ended or self._closed:
                raise anyio.EndOfStream
            arrived = self._arrived = new_signal()
            await arrived.wait()
        items, self._queue = self._queue, []
        self._wake_senders()
        frames: list[bytes] = []
        for frame, exchange in items:
            frames.append(frame)
            if exchange is not None and (not self._handed or self._handed[-1] is not exchange):
                self._handed.append(exchange)
        return frames

    def _hint_handed(self) -> None:
        # (a function of its own: a loop variable in ``receive`` would keep the last exchange, its headers
        # included, alive for as long as the session sits idle)
        for handed in self._handed:
            if handed.waiting:
                handed.outlet.hint_pending()
        self._handed.clear()

    async def push(self, frame: bytes, exchange: Exchange | None) -> None:
        """Queue one inbound frame (waiting while ``buffer`` frames are queued); ClosedResourceError once the
        session has ended, BrokenResourceError once its dispatcher is gone."""
        while True:
            if self._closed:
                raise anyio.BrokenResourceError
            if self._ended:
                raise anyio.ClosedResourceError
            if len(self._queue) < self.buffer:
                break
            room = self._room
            if room is None:
                room = self._room = anyio.Event()  # (several POSTs may wait: not a one-waiter signal)
            await room.wait()
        self._queue.append((frame, exchange))
        arrived = self._arrived
        if arrived is not None:
            self._arrived = None
            arrived.set()

    def end_input(self) -> None:
        """No more frames: the dispatcher gets what is queued, then the end of the stream."""
        self._ended = True
        self._wake_receiver()
        self._wake_senders()

    def close_input(self) -> None:
        """The dispatcher is gone: what is queued is dropped, later pushes are refused."""
        self._closed = True
        self._queue = []
        self._wake_receiver()
        self._wake_senders()

    def _wake_receiver(self) -> None:
        arrived = self._arrived
        if arrived is not None:
            self._arrived = None
            arrived.set()

    def _wake_senders(self) -> None:
        room = self._room
        if room is not None:
            self._room = None
            room.set()

    async def send(self, frame: bytes, related: RequestId | None = None) -> None:
        await self._route(frame, related, None)

    async def send_replies(self, frames: Sequence[tuple[bytes, RequestId | None]]) -> None:
        for frame, related in frames:
            await self._route(frame, related, True)

    async def _route(self, frame: bytes, related: RequestId | None, answer: bool | None) -> None:
        """Put ``frame`` where it belongs: the exchange of ``related`` (a response is its last frame once it awaits
        nothing else), else the standalone stream. ``answer``: the frame is known to be a response (``None``: it
        is read to tell)."""
        owner = self.owner
        exchange = owner.exchanges.get(related) if related is not None else None
        if exchange is None or related is None:
            await owner.standalone.put(frame)
        elif answer or (answer is None and _is_response(frame)):
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
        exchange = self.owner.exchanges.get(request_id)
        return exchange.request_headers() if exchange is not None else None

    def close_sse_stream(self, request_id: RequestId) -> None:
        """SEP-1699 polling: close the connection of this request's SSE stream; the client resumes with GET."""
        exchange = self.owner.exchanges.get(request_id)
        if exchange is not None and exchange.outlet.resumable:
            exchange.outlet.drop_connection()

    async def aclose(self) -> None:
        self.end_input()
        self.close_input()


class HttpSession:
    """One handshake-era session: its dispatcher task, its exchanges and its resumable streams."""

    def __init__(
        self,
        server: ServerApp,
        session_id: str,
        *,
        store: EventStore,
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
        self.stream = SessionStream(self, buffer)
        # The HTTP layer refuses requests beyond ``max_in_flight`` (429); the dispatcher's own bound is one higher
        # so that at the limit it still comes back to ``receive`` (which is what tells exchanges their handler is
        # asynchronous).
        self.dispatcher = Dispatcher(
            self.stream, max_in_flight=max_in_flight + 1, request_timeout=request_timeout, drain_timeout=1.0
        )
        self.mcp = ServerSession(server, self.dispatcher)
        self.exchanges: dict[RequestId, Exchange] = {}
        self.outlets: dict[str, Outlet] = {}
        self.closed = False
        self._standalone: Outlet | None = None  # made on first use: most sessions never have a GET stream
        self._next_key = 1
        self.active = 0  # HTTP requests of this session being served right now
        self.last_seen = monotonic()
        # The session's task runs its dispatcher, and is started on demand (see need_task) by ``spawner`` (the
        # session table), which keeps its token here and cancels it when it ends the session. A session answered
        # only at once, in its POSTs' own tasks, never has one.
        self.spawner: Callable[[HttpSession], None] | None = None
        self.task: object = None
        self._running: Signal | None = None  # someone waits for the dispatcher to run (see ensure_running)
        self.dispatcher.wake = self.need_task  # work the server spawns into the session needs the task too

    # --- lifetime ------------------------------------------------------------------------------------------

    def need_task(self) -> None:
        """Have the session's task started, if it is not yet (and the session has not ended)."""
        if self.task is None and not self.closed and self.spawner is not None:
            self.spawner(self)

    async def ensure_running(self) -> None:
        """Start the session's task if need be and wait until its dispatcher runs (or the session has ended)."""
        self.need_task()
        while not (self.dispatcher.running or self.closed or self.dispatcher.closed or self.task is None):
            running = self._running = new_signal()
            await running.wait()

    def started(self, value: None = None) -> None:
        """(the dispatcher's ``task_status``: it runs)"""
        running = self._running
        if running is not None:
            self._running = None
            running.set()

    async def run(self) -> None:
        """The session's task: serve its dispatcher until the session is terminated."""
        try:
            await self.dispatcher.run(task_status=self)
        finally:
            self.started()  # (anyone still waiting for it to run sees that it has ended)
            self._wind_up()
            if self.outlets:  # (most sessions end with none: no cancel scope, and anyio's state for this task)
                with anyio.CancelScope(shield=True):
                    await self.discard_outlets()

    def end_untasked(self) -> None:
        """What :meth:`run` does when it ends, for a terminated session whose task never started (the outlets'
        discards excepted: see :meth:`discard_outlets`)."""
        self.dispatcher.abandon()
        self._wind_up()

    def _wind_up(self) -> None:
        self.terminate()
        self.stream.close_input()
        self.mcp.close()

    async def discard_outlets(self) -> None:
        for outlet in list(self.outlets.values()):
            try:
                await outlet.discard()
            except Exception:
                logger.exception("the event store failed to discard a stream")
        self.outlets.clear()

    def terminate(self) -> None:
        """End the session (DELETE, expiry, shutdown): its open streams end, and its dispatcher at its next read
        (the session table also cancels the session's task, so its running handlers stop at once)."""
        if self.closed:
            return
        self.closed = True
        self.stream.end_input()
        for exchange in self.exchanges.values():
            exchange.outlet.finish()
        self.exchanges.clear()
        for outlet in self.outlets.values():
            outlet.finish()

    def touch(self) -> None:
        self.last_seen = monotonic()

    def idle(self, now: float, timeout: float) -> bool:
        return now - self.last_seen > timeout and self.active == 0 and self.dispatcher.in_flight() == 0

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

    async def push(self, frames: Iterable[bytes], exchange: Exchange | None = None) -> None:
        self.need_task()  # (the frames wait in the queue until it runs)
        for frame in frames:
            await self.stream.push(frame, exchange)
