"""Logical response streams and the writer that puts them on the wire as JSON or SSE (L6 helper).

An :class:`Outlet` is one logical stream of server frames: the answer to one POST (its request's notifications,
server-to-client requests and finally its response), or a session's standalone GET stream. Frames are *put*
into it by the dispatcher's writes; an HTTP response *connected* to it takes them out (:func:`respond`).

A resumable outlet numbers its frames 1, 2, 3… and appends each to the :class:`EventStore` before handing it to
the connection; its SSE event ids are ``"<key>-<n>"``, unique in the session and naming their stream. When the
connection drops (or the server closes it, SEP-1699 polling) frames keep going to the store, and a later
``GET`` with ``Last-Event-ID`` connects a new response that replays what was missed and then continues live.

:func:`respond` writes an HTTP response from an outlet and chooses its format: a request whose first frame is its
response gets plain ``application/json`` (the common, fast case); as soon as anything else comes first — or nothing
comes within the keep-alive interval — the answer becomes an SSE stream.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Literal, NamedTuple

import anyio
import msgspec

from ..jsonrpc.concurrency import BoundedQueue, loop_sleep
from ._http_io import HeaderList, Receive, Send, send_bytes, send_empty
from .events import EventStore
from .sse import encode_comment, encode_event, encode_retry

__all__ = (
    "Outlet",
    "Feed",
    "Item",
    "OTHER",
    "RESPONSE",
    "FINAL",
    "respond",
    "ResponseFormat",
    "Preference",
    "SSE_HEADERS",
)

logger = logging.getLogger(__name__)

Preference = Literal["auto", "json", "sse"]

#: Item kinds: a notification or request; a response that is not the last one awaited; the last response.
OTHER: Final = 0
RESPONSE: Final = 1
FINAL: Final = 2
#: Made by :func:`respond` for :func:`_write_stream`, never put: the handler did not answer within its patience
#: (an ``"auto"`` answer becomes SSE at once).
_SPENT: Final = 3

#: How many scheduler passes an "auto" answer first gives a handler that had to wait (a quick async one answers
#: within them, and no timer is set) ...
_PATIENCE: Final = 8
#: ... and then how many seconds more, before it becomes SSE (a tool on a worker thread, a short wait).
_PATIENCE_SECONDS: Final = 0.1

SSE_HEADERS: Final[HeaderList] = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


class ResponseFormat(NamedTuple):
    """How an endpoint writes its responses (:func:`respond`): ``preference``: ``"sse"`` starts the event stream at
    once; ``"json"`` and ``"auto"`` answer with JSON when the first frames are responses, and ``"auto"`` switches
    to SSE when anything else comes first, when a handler does not answer within a few scheduler passes, or after
    ``keepalive`` seconds of silence (which a stream fills with a comment line); ``retry_ms``: the SSE ``retry``
    field; ``status_of(frame)``: the HTTP status of a JSON answer (default 200); ``cancelled_status``: the answer
    to a request cancelled before anything was written."""

    preference: Preference
    retry_ms: int
    keepalive: float
    status_of: Callable[[bytes], int] | None = None
    cancelled_status: int = 202


class Item(msgspec.Struct, frozen=True, gc=False):
    """A frame as an HTTP response takes it from its outlet (a Struct: made for every frame, in C)."""

    seq: int  # 0 when the outlet is not resumable
    frame: bytes
    kind: int


#: What one HTTP response reads from its outlet.
Feed = BoundedQueue[Item]


class Outlet:
    """One logical stream of frames. Not thread-safe; all use is in one event loop."""

    __slots__ = (
        "_conn",
        "answered",
        "batch",
        "buffer",
        "done",
        "final_seq",
        "key",
        "seq",
        "store",
        "store_key",
        "written",
    )

    def __init__(
        self,
        key: str | None,
        *,
        store: EventStore | None = None,
        store_key: str = "",
        buffer: int = 64,
        batch: bool = False,
    ) -> None:
        self.key = key
        self.store = store if key is not None else None
        self.store_key = store_key
        self.buffer = buffer
        self.batch = batch
        self.seq = 0
        self.written = 0  # the highest number written to some connection
        self.final_seq = 0  # the number of the final frame, once put
        self.done = False  # no more frames will come (final frame put, or the request was cancelled)
        self.answered = False  # the final frame was put
        self._conn: Feed | None = None

    @property
    def resumable(self) -> bool:
        return self.store is not None

    def event_id(self, seq: int) -> str:
        return f"{self.key}-{seq}"

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def connect(self) -> Feed:
        """A new connection takes over (a previous one, if any, is ended: its writer stops)."""
        self.drop_connection()
        feed: Feed = BoundedQueue(self.buffer)
        if self.done:
            feed.end()
        else:
            self._conn = feed
        return feed

    def disconnect(self, feed: Feed) -> None:
        """The connection reading ``feed`` is gone; frames put from now on only go to the store."""
        feed.close()
        if self._conn is feed:
            self._conn = None

    def drop_connection(self) -> None:
        """Close the current connection without ending the stream (the client resumes with GET)."""
        if self._conn is not None:
            self._conn.end()
            self._conn = None

    async def put(self, frame: bytes, kind: int = OTHER) -> None:
        if self.done:
            logger.debug("dropping a frame for the finished stream %s", self.key)
            return
        seq = 0
        if self.store is not None:
            self.seq += 1
            seq = self.seq
            await self.store.append(self.store_key, seq, frame)
        if kind == FINAL:
            self.done = True
            self.answered = True
            self.final_seq = seq
        conn = self._conn
        if conn is not None:
            # Without a trip through the event loop when the connection has room: the dispatcher writes the
            # answers of one loop pass in a row, and with a checkpoint per answer the last of 64 would reach its
            # POST only 64 passes later (past the patience of "auto", so as SSE).
            item = Item(seq, frame, kind)
            try:
                try:
                    conn.send_nowait(item)
                except anyio.WouldBlock:
                    await conn.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                if self._conn is conn:
                    self._conn = None
        if self.done:
            self.drop_connection()

    def finish(self) -> None:
        """No answer will come (the request was cancelled, or the session ended)."""
        self.done = True
        self.drop_connection()

    async def discard(self) -> None:
        if self.store is not None:
            await self.store.discard(self.store_key)


async def respond(
    send: Send,
    receive: Receive,
    outlet: Outlet,
    feed: Feed,
    fmt: ResponseFormat,
    *,
    headers: HeaderList,
    waiting: bool = False,
    soon: bool = True,
    after: int = 0,
    replay: Sequence[tuple[int, bytes]] = (),
    on_end: Callable[[bool], Awaitable[None]] | None = None,
    until: float | None = None,
) -> bool:
    """Write what ``outlet`` yields through ``feed`` as the HTTP response, in the endpoint's ``fmt``, with
    ``headers``; True when its final frame was written.

    ``waiting``: a handler has yet to answer; unless SSE is preferred it gets a little time to answer first, as JSON,
    without the machinery of a stream. ``soon``: the answer may come within the loop's next few passes (an ``async def``
    handler's first steps), so it is looked for there before the wait with a timeout; ``False`` for an answer that takes
    a worker thread's hop, which waits with the timeout at once. A stream runs beside a task that watches for the client
    going away (which stops it); ``on_end(delivered)`` runs as soon as the stream has stopped, before that task is left
    (which yields). ``after`` is the number of the last frame the client has (the outlet's count when ``feed`` was
    connected, or the ``Last-Event-ID`` of a resumption, whose missed events come in ``replay``). ``until``: when a
    stream ends at the latest (``time.time()`` seconds: the request's admission, an access token's expiry), as when the
    server closes it; a JSON answer waits for its handler all the same.
    """
    early: list[Item | None] = []
    if waiting and fmt.preference != "sse":  # a little time for the handler, then its answer as JSON at once
        early = await _glance(feed) if soon else []
        if not early:
            with anyio.move_on_after(_PATIENCE_SECONDS):
                try:
                    early = [await feed.receive()]
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    early = [None]
        if not early:
            early = [Item(0, b"", _SPENT)]  # (no answer in time: the sign for an "auto" answer to start SSE)
        elif (first := early[0]) is not None and first.kind == FINAL and not outlet.batch:
            await _write_json(send, outlet, [first], headers, fmt.status_of)
            return True
    delivered = False
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch_disconnect, receive, tg.cancel_scope)
        try:
            delivered = await _write_stream(
                send, feed, outlet, fmt, headers=headers, after=after, replay=replay, early=early, until=until
            )
        finally:
            tg.cancel_scope.cancel()
            if on_end is not None:
                await on_end(delivered)
    return delivered


async def _watch_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` when the client goes away (the request body has already been read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def _write_stream(
    send: Send,
    receive: Feed,
    outlet: Outlet,
    fmt: ResponseFormat,
    *,
    headers: HeaderList,
    after: int,
    replay: Sequence[tuple[int, bytes]],
    early: Sequence[Item | None],
    until: float | None = None,
) -> bool:
    """The writer of :func:`respond` once the answer may become a stream (``early``: what :func:`respond` took
    from ``receive`` already)."""
    preference, retry_ms = fmt.preference, fmt.retry_ms
    started = False
    pending: list[Item] = []
    last = after

    async def body(chunk: bytes) -> None:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def start() -> None:
        nonlocal started
        started = True
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + headers})
        if outlet.resumable:
            # SEP-1699 priming: an id and empty data first, so the client can resume before the first real event.
            await body(encode_event(b"", event_id=outlet.event_id(after), retry_ms=retry_ms))
        for item in pending:
            await event(item)
        pending.clear()

    async def event(item: Item) -> None:
        nonlocal last
        if item.seq:
            last = item.seq
            await body(encode_event(item.frame, event_id=outlet.event_id(item.seq)))
            if item.seq > outlet.written:
                outlet.written = item.seq
        else:
            await body(encode_event(item.frame))

    async def end() -> None:
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    if preference == "sse" or replay:
        await start()
    for seq, frame in replay:
        final = outlet.answered and seq == outlet.final_seq
        await event(Item(seq, frame, FINAL if final else OTHER))
        if final:
            await end()
            return True

    lookahead: list[Item | None] = list(reversed(early))
    while True:
        if until is not None and (started or preference != "json") and time.time() >= until:
            # The admission ended (the access token expired): the stream ends as when the server closes it.
            if not started:
                await start()
            elif outlet.resumable and not outlet.done:
                await body(encode_retry(retry_ms))
            await end()
            return False
        item: Item | None = None
        timed_out = False
        if lookahead:
            item = lookahead.pop()
        else:
            try:
                # What is queued already is taken without a timeout scope, which costs more than writing the
                # event: the scope (and the keep-alive it times) is for waiting on an empty queue.
                item = receive.receive_nowait()
            except anyio.WouldBlock:
                wait = fmt.keepalive
                if until is not None and (started or preference != "json"):  # (woken at the deadline too)
                    wait = min(wait, max(until - time.time(), 0.0))
                with anyio.move_on_after(wait) as timer:
                    try:
                        item = await receive.receive()
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        item = None
                timed_out = timer.cancelled_caught
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                item = None
        if item is not None and item.kind == _SPENT:
            if not started and preference == "auto":
                await start()
            continue
        if timed_out:
            if not started:
                if preference != "json":
                    await start()
            else:
                await body(encode_comment())
            continue
        if item is None:
            # The connection was closed under us: by the server (polling), or the stream ended unanswered.
            if not started:
                if outlet.done and not outlet.answered:
                    await send_empty(send, fmt.cancelled_status, headers)
                    return False
                await start()
            elif outlet.resumable and not outlet.done:
                await body(encode_retry(retry_ms))
            await end()
            return False
        if item.seq and item.seq <= last:
            continue  # already replayed
        if not started and item.kind != OTHER:
            pending.append(item)
            if item.kind == FINAL:
                await _write_json(send, outlet, pending, headers, fmt.status_of)
                return True
            continue
        if not started:
            if preference == "json":
                continue  # a JSON answer carries no side messages
            await start()
        await event(item)
        if item.kind == FINAL:
            await end()
            return True


async def _glance(receive: Feed) -> list[Item | None]:
    """Let a just-started async handler run a little: its first item if one comes (``[None]`` at the end)."""
    sleep = loop_sleep()
    for _ in range(_PATIENCE):
        await sleep(0)
        try:
            return [receive.receive_nowait()]
        except anyio.WouldBlock:
            continue
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return [None]
    return []


async def _write_json(
    send: Send, outlet: Outlet, items: list[Item], headers: HeaderList, status_of: Callable[[bytes], int] | None
) -> None:
    final = items[-1]
    if outlet.batch:
        payload = b"[" + b",".join(item.frame for item in items) + b"]"
        status = 200
    else:
        payload = final.frame
        status = status_of(payload) if status_of is not None else 200
    await send_bytes(send, status, payload, headers)
    if final.seq > outlet.written:
        outlet.written = final.seq
