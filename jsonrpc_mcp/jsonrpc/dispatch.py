"""A concurrent JSON-RPC 2.0 peer (L3): the one place where a request becomes an answer.

One :class:`Dispatcher` owns one connection. Every inbound request, on every transport, goes through
:meth:`Dispatcher.answer_request`, which alone

* refuses an id already in use and a request beyond the bound on requests in flight,
* calls the handler, and turns a failure into the error reply (:func:`_failure_reply`, nowhere else; every error
  reply is made by :func:`error_reply`, which a transport that refuses a request before any dispatcher takes it
  uses too: an HTTP POST without its session),
* returns the answer at once when the handler had it (``bytes``: the whole response frame), or a :class:`Pending`
  whose coroutine runs in the connection's tasks (:meth:`Dispatcher._run_handlers`), registered so that
  ``notifications/cancelled`` stops exactly that request (never answered then), its answer written when it comes.

What arrives comes in by one of three verbs, besides :meth:`Dispatcher.run` (the read loop over a stream):
:meth:`~Dispatcher.answer_request` (a request that arrived alone: its answer, or a :class:`Pending`),
:meth:`~Dispatcher.answer_frames` (the frames of one read: the answers ready at once appended, how many frames it
took) and :meth:`~Dispatcher.deliver` (a notification or a response that arrived alone: nothing to answer).

``answer_request`` needs no event loop: a transport may answer what handlers answer at once before it starts one
(stdio's first frames, an HTTP POST in its own task), and the work that has to wait is kept until tasks exist
(:meth:`run`, :meth:`use_tasks`). Transports only decide where the bytes go.

Bounds: at most ``max_in_flight`` handlers wait at once, and the answers waiting to be written hold at most
``max_queued_bytes``; past either, :meth:`run` stops reading, so that a peer that floods us, or never reads its
answers, fills its own pipe rather than our memory.
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextvars import copy_context
from types import CoroutineType
from typing import Any, Final, NamedTuple

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import msgspec
from msgspec import Raw

from ..errors import ConnectionClosed, RequestTimeout, RpcError, error_for_code
from . import codes
from .concurrency import HandlerTasks, WriteLock, continue_in_task, open_handler_tasks
from .streams import NOTIFICATION, REQUEST, RESPONSE, Arrival, MessageStream, Outgoing
from .wire import (
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    decode_batch,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
    is_batch,
    read_message,
)
from .workers import POOL, OneArgJob, ParkedCalls, SyncCall

__all__ = (
    "Dispatcher",
    "DispatcherStatistics",
    "ErrorReply",
    "error_reply",
    "Pending",
    "failure_error",
    "RequestHandler",
    "NotificationHandler",
    "BUSY",
)

logger = logging.getLogger(__name__)

#: ``on_request(request, context)``: the encoded result, or a coroutine producing it (or a :class:`.workers.SyncCall`:
#: a plain function on a worker thread does, the sync lane); raises
#: :class:`~jsonrpc_mcp.errors.RpcError` to answer with an error. ``context`` is the one value that came with the
#: request: what the transport passed to :meth:`Dispatcher.answer_request` (what it already learned of the request, its
#: :class:`~.streams.Intake` included), or from the read loop the :class:`~.streams.Intake` of the frames'
#: :class:`~.streams.Arrival` (``None`` when they came with nothing).
RequestHandler = Callable[[Request, Any], "bytes | Coroutine[Any, Any, bytes] | SyncCall"]
NotificationHandler = Callable[[Notification], "Coroutine[Any, Any, None] | None"]

#: The code of our capacity refusals (too many requests in flight): :data:`~.codes.BUSY`, the code of every refusal
#: for "too many" (Streamable HTTP answers it with 429).
BUSY: Final = codes.BUSY

_HANDLER_TASK: Final = "jsonrpc-mcp request handler"
_OTHER_TASK: Final = "jsonrpc-mcp connection task"

#: What a new :class:`Dispatcher` becomes while the tests run against the plain reference runner (see
#: :func:`._reference.plain_runner`); ``None`` otherwise.
_reference: type[Dispatcher] | None = None


class ErrorReply(bytes):
    """An error response made by the dispatcher: the frame, with its ``code``; ``refused`` says the request was
    not taken at all (``"duplicate"`` id, or ``"busy"``), which some transports answer differently."""

    code: int = codes.INTERNAL_ERROR
    refused: str | None = None


def _error_reply(ident: RequestId | None, code: int, message: str, data: Any = None) -> ErrorReply:
    reply = ErrorReply(encode_error(ident, code, message, data))
    reply.code = code
    return reply


def error_reply(ident: RequestId | None, error: RpcError) -> ErrorReply:
    """The error response to request ``ident`` (``None``: one that cannot be attributed) refused with ``error``: the
    one builder of error replies, for the dispatcher and for a transport that refuses a request before it reaches
    one (an HTTP POST without its session, say)."""
    return _error_reply(ident, error.code, error.message, error.data)


def _refusal(ident: RequestId, reason: str, code: int, message: str) -> ErrorReply:
    reply = _error_reply(ident, code, message)
    reply.refused = reason
    return reply


def _failure_reply(req: Request, exc: Exception) -> ErrorReply:
    """The answer to ``req`` whose handler raised ``exc`` (see :func:`failure_error`)."""
    code, message, data = failure_error(req.method, exc)
    return _error_reply(req.id, code, message, data)


def failure_error(method: str, exc: Exception) -> tuple[int, str, Any]:
    """The JSON-RPC error (code, message, data) of a handler of ``method`` that raised ``exc``: its own when it is
    an :class:`RpcError`; otherwise -32603 "Internal error", the exception logged with its traceback and never
    shown to the peer. An error of ours about an exchange (``local``: a timeout or a closed connection of the
    handler's own outgoing request, an HTTP answer that was none; codes that only mean something here) is an
    internal error too, logged as a warning. (A request's answer, and the error of a
    task that ran one: the one rule for both.)"""
    if isinstance(exc, RpcError) and exc.local:  # (an error of ours about an exchange: its code never goes out)
        logger.warning("handler for %r failed: %s", method, exc.message)
    elif isinstance(exc, RpcError):
        return exc.code, exc.message, exc.data
    else:
        logger.error("handler for %r failed", method, exc_info=exc)
    return codes.INTERNAL_ERROR, "Internal error", None


def _answer_sync(pending: Pending) -> bytes:
    """On a worker thread: the answer frame of a request on the sync lane (its handler's :class:`SyncCall`), or its
    error reply, made as :meth:`Dispatcher._run_request` makes them."""
    req = pending.request
    sync: SyncCall = pending.coro  # type: ignore[assignment]
    try:
        return encode_result(req.id, sync.run())
    except Exception as exc:
        return _failure_reply(req, exc)


def _null_handler(req: Request, context: Any) -> bytes:
    raise RpcError("Method not found", code=codes.METHOD_NOT_FOUND)


def _never() -> bool:
    return False


class _StreamHooks:
    """What a dispatcher gives the stream it reads (:attr:`.MessageStream.fail_request`,
    :attr:`.MessageStream.peer_replaced`), reaching the dispatcher through a weak reference: the stream, which the
    dispatcher holds, does not hold it in turn, and both are freed by reference counting once the connection is
    over (not left in a cycle for the cyclic collector). With the dispatcher gone, they do nothing."""

    __slots__ = ("_dispatcher",)

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = weakref.ref(dispatcher)

    def fail_request(self, ident: RequestId, error: Exception) -> bool:
        dispatcher = self._dispatcher()
        return dispatcher is not None and dispatcher.fail(ident, error)

    def peer_replaced(self) -> None:
        dispatcher = self._dispatcher()
        if dispatcher is not None:
            dispatcher.peer_replaced()


class Pending(msgspec.Struct):
    """A request whose handler has to wait. Its answer arrives through the stream (``related`` = its id)."""

    request: Request
    coro: Coroutine[Any, Any, bytes] | SyncCall  # (a SyncCall: the sync lane, see Dispatcher._run_handlers)
    batch: _Batch | None = None  # the batch it came in, and its place there
    slot: int = 0
    token: object = None  # the task that is its own, once it has waited (see Dispatcher._run_handlers)
    cancelled: bool = False  # by the peer: it is never answered
    answering: bool = False  # its handler has returned: it can no longer be cancelled

    @property
    def on_worker_thread(self) -> bool:
        """Whether the request is on the sync lane: its answer comes once a worker thread has run it, never within
        the loop's next few passes (as an ``async def`` handler's often does)."""
        return type(self.coro) is SyncCall


class _Run(list[Pending]):
    """Handlers started together, in one task (:meth:`Dispatcher._run_handlers`), whose token is ``token``."""

    __slots__ = ("token",)
    token: object


class _Batch:
    """The answers of one batch, in the order of its requests: the array is written when the last one is done."""

    __slots__ = ("replies", "waiting")

    def __init__(self, size: int) -> None:
        self.replies: list[bytes | None] = [None] * size
        self.waiting = 1  # (held until every item is taken, so that an early answer cannot complete it)

    def add(self, slot: int, reply: bytes | None) -> bytes | None:
        """The request in ``slot`` is done (``None``: unanswered); the whole answer once the last one is."""
        if reply is not None:
            self.replies[slot] = reply
        self.waiting -= 1
        if self.waiting:
            return None
        replies = [reply for reply in self.replies if reply is not None]
        return b"[" + b",".join(replies) + b"]" if replies else None


class DispatcherStatistics(NamedTuple):
    """What :meth:`Dispatcher.statistics` reports."""

    in_flight: int  #: requests taken and not yet answered (their answer not yet handed to the stream)
    queued_bytes: int  #: bytes of answers made and not yet written
    reading_paused: bool  #: the read loop waits for room before it reads again


class _Waiter:
    __slots__ = ("error", "event", "result", "timeout")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.result: Raw | None = None
        self.error: Exception | None = None
        self.timeout: anyio.CancelScope | None = None  # the request's timeout, while it waits (see postpone)


class Dispatcher:
    """One JSON-RPC connection: inbound requests handled concurrently, outbound requests correlated.

    :param stream: the transport.
    :param on_request: see :data:`RequestHandler`.
    :param on_notification: called with each notification; may return a coroutine (run in a task).
    :param allow_batch: asked for each batch frame; ``False`` answers it with -32600.
    :param cancel_frame: builds the notification that tells the peer we gave up on one of our requests.
    :param max_in_flight: bound on handlers waiting at once (of requests and of notifications).
    :param max_queued_bytes: bound on the bytes of answers made and not yet written.
    :param drain_timeout: after the peer's end of stream, how long running handlers may still finish.
    :param request_timeout: how long our own requests wait for their answer by default.
    """

    def __init__(
        self,
        stream: MessageStream,
        on_request: RequestHandler = _null_handler,
        on_notification: NotificationHandler | None = None,
        *,
        allow_batch: Callable[[], bool] = _never,
        cancel_frame: Callable[[RequestId, str], bytes | None] | None = None,
        max_in_flight: int = 128,
        max_queued_bytes: int = 16 * 1024 * 1024,
        drain_timeout: float = 5.0,
        request_timeout: float | None = 300.0,
    ) -> None:
        if max_in_flight < 1 or max_queued_bytes < 1:
            raise ValueError("max_in_flight and max_queued_bytes must be at least 1")
        self.stream = stream
        if stream is not None:  # (a dispatcher that only answers, given no stream, as in tests)
            hooks = _StreamHooks(self)
            stream.fail_request = hooks.fail_request
            stream.peer_replaced = hooks.peer_replaced
        self.on_request = on_request
        self.on_notification = on_notification
        self.allow_batch = allow_batch
        self.cancel_frame = cancel_frame
        self.max_in_flight = max_in_flight
        self.max_queued_bytes = max_queued_bytes
        self.drain_timeout = drain_timeout
        self.request_timeout = request_timeout
        #: Asked for each request and each frame that would be answered with an error: ``False`` drops it unanswered
        #: (logged), for a peer that must not send us requests (a 2026-07-28 client never answers its server). ``None``:
        #: every one is answered.
        self.answers: Callable[[], bool] | None = None
        #: Asked for each error response to one of our requests: ``True`` when the session is of the handshake era,
        #: whose errors :func:`~jsonrpc_mcp.errors.error_for_code` reads with the codes of earlier releases too
        #: (set by the client, which decides the era).
        self.handshake: Callable[[], bool] = _never
        #: Asked before the answer of a request of the sync lane is written, with its id: an awaitable to await first
        #: (what the layer above must send before an answer: a request's progress held back), or ``None``.
        self.before_answer: Callable[[RequestId], Awaitable[None] | None] | None = None
        #: Prefixed to the ids of our outgoing requests (strings then): ids unique across processes that speak to one
        #: peer (workers serving one session).
        self.id_prefix: str | None = None
        self._tasks: HandlerTasks | None = None
        self._next_run: _Run | None = None  # handlers begun since a run last started (or before tasks exist)
        self._inflight: dict[RequestId, Pending] = {}
        self._kept: list[tuple[Callable[..., Coroutine[Any, Any, Any]], tuple[Any, ...]]] = []  # until tasks exist
        self._loop: tuple[int, anyio.lowlevel.EventLoopToken] | None = None  # the tasks' thread, and its loop
        self._running = 0  # tasks of this connection not yet done (their answer written)
        self._notes = 0  # notification handlers started and not yet done (they count in max_in_flight)
        self._unwritten = 0  # bytes of answers made and not yet written
        self._replies: list[Outgoing] = []  # answers gathered for the next write (see _reply)
        self._read_loop_writes = False  # it writes the answers queued now, for a stream that gathers them
        self._room: anyio.Event | None = None  # the reader waits for room (in flight, or bytes)
        self._idle: anyio.Event | None = None  # a drain waits for the last task
        self._write_lock = WriteLock()  # frames go out one writer at a time, first come first served
        self._pending: dict[RequestId, _Waiter] = {}
        self._next_id = 0
        self._closed = False
        if _reference is not None and type(self) is Dispatcher:
            self.__class__ = _reference  # the plain reference runner, in tests (jsonrpc/_reference.py)

    # --- the one request path ------------------------------------------------------------------------------

    def answer_request(self, req: Request, context: Any = None) -> bytes | Pending:
        """Answer a request that arrived alone (``context``: what came with it, see :data:`RequestHandler`): its
        whole answer frame when it is ready at once (an :class:`ErrorReply` for an error), else a :class:`Pending`
        whose answer the stream will carry. Never raises."""
        ident = req.id
        if ident in self._inflight:
            return _refusal(ident, "duplicate", codes.INVALID_REQUEST, "Invalid Request: id is already in use")
        if len(self._inflight) >= self.max_in_flight:
            return _refusal(ident, "busy", BUSY, "Too many requests in flight: retry later")
        try:
            result = self.on_request(req, context)
        except Exception as exc:
            return _failure_reply(req, exc)
        if type(result) is bytes:
            return encode_result(ident, result)
        if type(result) is not CoroutineType and type(result) is not SyncCall and not isinstance(result, Coroutine):
            logger.error("handler for %r returned %s, not bytes or a coroutine", req.method, type(result).__name__)
            return _error_reply(ident, codes.INTERNAL_ERROR, "Internal error")
        pending = Pending(req, result)
        self._inflight[ident] = pending
        self._start(pending)
        return pending

    def deliver(self, msg: Message) -> None:
        """Hand on a message that is not a request: a notification to its handler, a response or an error response
        to the request of ours it answers. Nothing is answered (a request is :meth:`answer_request`'s: one given here
        is logged and dropped). Never raises."""
        if type(msg) is Notification:
            self._notification(msg)
        elif type(msg) is Response:
            self._resolve(msg.id, msg.result, None)
        elif type(msg) is ErrorResponse:
            if msg.id is None:
                logger.warning("peer sent an error without id: %s %.200r", msg.code, msg.message)
            else:
                self._resolve(msg.id, None, error_for_code(msg.code, msg.message, msg.data, handshake=self.handshake()))
        else:
            logger.error("a request was handed to Dispatcher.deliver, which answers nothing; it is dropped")

    def _unanswered(self, what: str) -> None:
        logger.warning("dropped %s of the peer unanswered: this side must not answer it", what)

    def _feed(self, frame: bytes, context: Any) -> bytes | Pending | None:
        """One frame that is not a batch: its answer as :meth:`answer_request` returns it, the error reply to a frame
        that is not a message, or ``None`` (nothing to answer: :meth:`deliver`'s, or a malformed notification)."""
        try:
            msg = read_message(frame)
        except RpcError as exc:
            ident = getattr(exc, "request_id", None)
            logger.debug("rejected frame: %s", exc.message)
            if getattr(exc, "silent", False):
                if ident in self._pending:  # a malformed answer to one of our requests: that call fails now
                    self._resolve(ident, None, RpcError(exc.message, code=exc.code))
                return None  # a malformed notification or response is never answered
            if ident in self._pending and frame.find(b'"method"') < 0:
                # An answer to one of our own requests we cannot read (too big, too deep): fail that call now.
                self._resolve(ident, None, RpcError(exc.message, code=codes.INVALID_REQUEST))
                return None
            if self.answers is not None and not self.answers():
                self._unanswered("an invalid message")
                return None
            return _error_reply(ident, exc.code, exc.message, exc.data)
        if type(msg) is Request:
            if self.answers is not None and not self.answers():
                self._unanswered(f"a request ({msg.method[:80]!r})")
                return None
            return self.answer_request(msg, context)
        self.deliver(msg)
        return None

    def _feed_batch(self, frame: bytes, context: Any) -> bytes | None:
        if self.answers is not None and not self.answers():
            self._unanswered("a batch")
            return None
        try:
            items = decode_batch(frame)  # first: an array that is not JSON ("[1,") is a parse error, batches or not
        except RpcError as exc:
            return _error_reply(None, exc.code, exc.message)
        if not self.allow_batch():
            return _error_reply(None, codes.INVALID_REQUEST, "Invalid Request: batches are not supported")
        if not items:
            return _error_reply(None, codes.INVALID_REQUEST, "Invalid Request: empty batch")
        batch = _Batch(len(items))
        for slot, item in enumerate(items):
            answer = self._feed(bytes(item), context)
            if type(answer) is Pending:  # (its handler has not started yet: it runs in a task)
                answer.batch = batch
                answer.slot = slot
                batch.waiting += 1
            elif answer is not None:
                batch.replies[slot] = answer  # type: ignore[assignment]
        return batch.add(0, None)  # the whole array now, unless some items are still pending

    def _notification(self, note: Notification) -> None:
        if self.on_notification is None:
            return
        try:
            result = self.on_notification(note)
        except Exception:
            logger.exception("notification handler for %r failed", note.method)
            return
        if result is not None and not self.spawn(self._run_notification, note, result):
            result.close()
            logger.warning("notification %r dropped: the connection has ended", note.method)
        elif result is not None:
            self._notes += 1

    async def _run_notification(self, note: Notification, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except Exception:
            logger.exception("notification handler for %r failed", note.method)
        finally:
            self._notes -= 1
            self._make_room()

    def cancel_inbound(self, request_id: Any, reason: Any = None) -> bool:
        """Cancel the handler of an inbound request; it will not be answered. False if it is not waiting.
        ``reason``: the one the peer gave, logged at DEBUG (shortened; never trusted as text)."""
        if type(request_id) is not str and type(request_id) is not int:
            return False
        pending = self._inflight.get(request_id)
        if pending is None or pending.cancelled or pending.answering:
            return False
        if reason is not None and logger.isEnabledFor(logging.DEBUG):
            logger.debug("request %r cancelled by the peer: %r", request_id, str(reason)[:200])
        pending.cancelled = True
        if pending.token is not None and self._tasks is not None:
            self._tasks.cancel(pending.token)
        return True

    def in_flight(self) -> int:
        return len(self._inflight)

    def still_wanted(self, request_id: RequestId) -> bool:
        """False once the inbound request ``request_id`` was cancelled or is no longer awaited (its handler task
        ended while a worker thread it started runs on): for a handler that the cancellation cannot interrupt."""
        pending = self._inflight.get(request_id)
        return pending is not None and not pending.cancelled

    def serving(self, request_id: Any) -> bool:
        """True while the inbound request ``request_id`` is being handled here."""
        return request_id in self._inflight

    def expects(self, request_id: Any) -> bool:
        """True while our outgoing request ``request_id`` waits for its answer."""
        return request_id in self._pending

    def statistics(self) -> DispatcherStatistics:
        return DispatcherStatistics(len(self._inflight), self._unwritten, self._room is not None)

    # --- tasks ---------------------------------------------------------------------------------------------

    @property
    def needs_tasks(self) -> bool:
        """True when work is kept that only tasks can carry out (see :meth:`run`, :meth:`use_tasks`)."""
        return bool(self._kept) or (self._tasks is None and self._next_run is not None)

    def use_tasks(self, tasks: HandlerTasks) -> None:
        """Run this connection's handlers among ``tasks`` (shared with other connections: an HTTP app's); kept
        work starts now. :meth:`close` cancels this connection's own."""
        self._tasks = tasks
        self._loop = (threading.get_ident(), anyio.lowlevel.current_token())
        if self._next_run is not None:
            self._spawn(self._next_run)  # (one cancelled meanwhile is cancelled where it first waits)
        kept, self._kept = self._kept, []
        for fn, args in kept:
            tasks.start_soon(fn(*args), _OTHER_TASK)

    def _start(self, pending: Pending) -> None:
        """Start the request's handler with the others begun before the loop's next pass, in one task."""
        self._running += 1
        if self._next_run is None:
            self._next_run = _Run()
            if self._tasks is not None:
                self._spawn(self._next_run)
        self._next_run.append(pending)

    def _spawn(self, run: _Run) -> None:
        assert self._tasks is not None
        run.token = self._tasks.spawn(self._run_handlers(run), _HANDLER_TASK)

    async def _run_handlers(self, run: _Run) -> None:
        """One task for the handlers of ``run``, each started here in a context of its own; most finish in that step
        (a task each costs more than they do: docs/performance.md). The first that waits keeps this task for good (its
        ``current_task`` and cancel scopes are its own), and the handlers after it go on in a new task. A request on
        the sync lane (its handler answered with a :class:`.workers.SyncCall`) has no coroutine at all: the calls of
        the lane go to the pool together once the others have taken their first step, each in its request's own
        context, and their answers are written as they come back (:meth:`_answer_lane`)."""
        if self._next_run is run:
            self._next_run = None
        lane: ParkedCalls | None = None  # the calls of the sync lane
        waiting: Pending | None = None  # the handler that keeps this task, once one waits
        try:
            for at, pending in enumerate(run):
                if type(pending.coro) is SyncCall:
                    if lane is None:
                        lane = ParkedCalls()
                    job = OneArgJob(_answer_sync, pending, POOL)  # (in a copy of the context: the request's own)
                    lane.add(job, job.context)
                    continue
                handler = self._run_request(pending)
                context = copy_context()
                try:
                    waits_for = context.run(handler.send, None)
                except StopIteration:
                    continue
                except anyio.get_cancelled_exc_class():  # (it cancelled itself: it ends, as a task of its own would)
                    continue
                if at + 1 < len(run):
                    self._spawn(_Run(run[at + 1 :]))
                if lane is not None:  # (this task is the waiting handler's from now on)
                    lane.send()
                    self._tasks.start_soon(self._answer_lane(lane), _HANDLER_TASK)  # type: ignore[union-attr]
                    lane = None
                pending.token, waiting = run.token, pending
                if pending.cancelled:  # (by the peer before it started: cancelled where it waits, as a task is)
                    self._tasks.cancel(run.token)  # type: ignore[union-attr]
                await continue_in_task(handler, waits_for, context)
                return
            if lane is not None:
                lane.send()
                await self._answer_lane(lane)
        finally:
            self._tasks.forget(run.token)  # type: ignore[union-attr]
            # The task ends here; a cancelled one keeps its CancelledError, whose traceback holds this frame and so
            # ``run`` and its requests: without their hold on the task, that is no reference cycle.
            run.token = None
            if waiting is not None:
                waiting.token = None

    async def _answer_lane(self, lane: ParkedCalls) -> None:
        """Answer the requests of the sync lane whose calls are in ``lane``, as their calls come back: those back in
        one wake-up of the loop answered together. If this task is cancelled (the connection ends), the calls are
        waited for, and their requests are never answered."""
        try:
            while lane.left:
                await lane.arrival()
                await self._write_lane_answers(lane.take_all())
        except BaseException:
            with anyio.CancelScope(shield=True):
                while lane.left:
                    await lane.arrival()
                    while lane.done:
                        pending = lane.take().arg
                        pending.answering = True
                        if pending.cancelled:
                            self.stream.finished(pending.request.id)
                        self._forget_request(pending.request)
            raise

    async def _write_lane_answers(self, jobs: list[OneArgJob]) -> None:
        """Write the answers of the sync lane's ``jobs`` (done), as :meth:`_run_request` would (:meth:`_reply`'s
        gathering: one write for them and those of the other handlers of this pass of the loop)."""
        writes = False
        try:
            for job in jobs:
                pending: Pending = job.arg
                req = pending.request
                pending.answering = True
                if self.before_answer is not None:
                    first = self.before_answer(req.id)
                    if first is not None:
                        await first
                if job.error is not None:  # (the pool was shut down, or the call raised a BaseException)
                    error, job.error = job.error, None
                    if not isinstance(error, Exception):
                        raise error
                    reply: bytes | None = _failure_reply(req, error)
                else:
                    reply = job.value
                if pending.cancelled:  # the peer cancelled it while it ran, and it finished without noticing
                    reply = None
                    self.stream.finished(req.id)
                ident: RequestId | None = req.id
                if pending.batch is not None:
                    reply, ident = pending.batch.add(pending.slot, reply), None
                if reply is not None:
                    writes = self._queue_reply(Outgoing(reply, ident, RESPONSE)) or writes
            if writes:
                await self._write_gathered()
        finally:
            for job in jobs:
                self._forget_request(job.arg.request)

    def _forget_request(self, req: Request) -> None:
        """``req`` is answered (its answer handed to the stream) or never will be: its id is free again."""
        del self._inflight[req.id]
        self._make_room()
        self._running -= 1
        if not self._running and self._idle is not None:
            self._idle.set()

    async def _run_request(self, pending: Pending) -> None:
        """Run the handler, then answer. The id stays in use until the answer is handed to the stream."""
        req = pending.request
        try:
            try:
                reply: bytes | None = encode_result(req.id, await pending.coro)
            except Exception as exc:
                reply = _failure_reply(req, exc)
            except BaseException:  # cancelled: by the peer, or the connection is ending
                pending.answering = True
                if pending.cancelled:
                    self.stream.finished(req.id)
                    if pending.batch is not None:
                        with anyio.CancelScope(shield=True):  # the batch still gets its answer
                            await self._answer_batch(pending, None)
                raise
            pending.answering = True
            if pending.cancelled:  # the peer cancelled it while it ran, and it finished without noticing
                reply = None
                self.stream.finished(req.id)
            if pending.batch is not None:
                await self._answer_batch(pending, reply)
            elif reply is not None:
                await self._reply(Outgoing(reply, req.id, RESPONSE))
        finally:
            # Only now, with the answer written, may a draining run() consider this request done.
            self._forget_request(req)

    async def _answer_batch(self, pending: Pending, reply: bytes | None) -> None:
        assert pending.batch is not None
        whole = pending.batch.add(pending.slot, reply)
        if whole is not None:
            await self._reply(Outgoing(whole, None, RESPONSE))

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> bool:
        """Run ``fn(*args)`` in a task of this connection (cancelled when it ends); kept until the connection has
        tasks when it has none yet. False once the connection has ended. ``fn`` must not raise (what escapes is
        logged on asyncio, and ends the connection's tasks on trio). Called on another thread (a plain tool on a
        worker thread that changes the server's lists), it waits for the event loop's thread to start the task."""
        if self._closed:
            return False
        loop = self._loop
        if loop is not None and threading.get_ident() != loop[0]:
            return anyio.from_thread.run_sync(self.spawn, fn, *args, token=loop[1])
        if self._tasks is None:
            self._kept.append((fn, args))
        else:
            self._tasks.start_soon(fn(*args), _OTHER_TASK)
        return True

    # --- serving a stream ----------------------------------------------------------------------------------

    async def run(
        self, *, unread: Sequence[bytes] = (), task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve the connection until the peer ends it; returns after running handlers have finished (or
        ``drain_timeout`` has passed). ``unread``: frames already read from the stream, taken first."""
        async with open_handler_tasks() as tasks:
            self.use_tasks(tasks)
            task_status.started()
            try:
                await self._take_all(unread)
                await self._read_loop()
            except anyio.get_cancelled_exc_class():
                tasks.cancel_all()  # as a task group's children would be: at once, not after the drain
                raise
            finally:
                self._closed = True
                self._fail_pending()
                await self._drain()
            # (leaving the block cancels and waits for what still runs)

    async def _read_loop(self) -> None:
        receive = self.stream.receive
        while True:
            await self._wait_for_room()  # (the frames a full connection does not read wait in the peer's pipe)
            try:
                frames = await receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            running = self._running
            await self._take_all(frames, frames.intake if type(frames) is Arrival else None)
            del frames  # (an idle connection holds no frame while it waits)
            if self._running > running:  # (handlers this read started still run)
                await self._let_new_handlers_run()

    async def _let_new_handlers_run(self) -> None:
        """One pass of the event loop after a read that started handlers, and one write of the answers of those that
        finished in it, before the next read (rather than reading again at once, a few frames at a time)."""
        self._read_loop_writes = self.stream.gathers_replies
        try:
            await anyio.lowlevel.checkpoint()
        finally:
            self._read_loop_writes = False
        await self._write_replies()

    async def _take_all(self, frames: Sequence[bytes], context: Any = None) -> None:
        taken = 0
        while taken < len(frames):
            out: list[Outgoing] = []
            taken += self.answer_frames(frames[taken:], out, context)
            if out:
                await self._write(out)
            if taken < len(frames):
                await self._wait_for_room()

    def answer_frames(self, frames: Sequence[bytes], out: list[Outgoing], context: Any = None) -> int:
        """Answer the frames of one read, in order (``context``: what came with them; a batch frame answered as one),
        the answers ready at once appended to ``out``; returns how many frames were taken: it stops early when the
        bounds are reached, or when work is kept that needs tasks the connection does not have yet (a transport that
        starts its event loop only then: stdio). Never raises."""
        taken = 0
        inflight = self._inflight
        limit = self.max_in_flight
        for frame in frames:
            if (
                len(inflight) + self._notes >= limit
                or self._unwritten > self.max_queued_bytes
                or (self._tasks is None and (self._kept or self._next_run))
            ):
                break
            taken += 1
            if frame.startswith(b"{") or not is_batch(frame):
                answer = self._feed(frame, context)
            else:
                answer = self._feed_batch(frame, context)
            if answer is not None and type(answer) is not Pending:
                out.append(Outgoing(answer, None, RESPONSE))  # type: ignore[arg-type]
        return taken

    async def _wait_for_room(self) -> None:
        while len(self._inflight) + self._notes >= self.max_in_flight or self._unwritten > self.max_queued_bytes:
            self._room = anyio.Event()
            await self._room.wait()

    def _make_room(self) -> None:
        room = self._room
        if room is not None:
            self._room = None
            room.set()

    async def _drain(self) -> None:
        with anyio.move_on_after(self.drain_timeout, shield=True):
            while self._running:
                self._idle = anyio.Event()
                await self._idle.wait()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """End the connection now (a transport without a read loop: an HTTP session that ended): its handlers
        are cancelled and never answered, its outgoing requests fail, kept work is dropped."""
        if self._closed:
            return
        self._closed = True
        if self._tasks is None and self._next_run is not None:
            for pending in self._next_run:
                pending.coro.close()
                self._inflight.pop(pending.request.id, None)
            self._running -= len(self._next_run)
            self._next_run = None
        self._kept = []
        for pending in list(self._inflight.values()):
            self.cancel_inbound(pending.request.id)
        self._fail_pending()

    def forget_handlers(self) -> None:
        """Let go of the handlers the layer above gave (``on_request``, ``on_notification``, ``allow_batch``,
        ``before_answer``, ``cancel_frame``, ``answers``, ``handshake``), when it is done with the connection: they
        hold their owner (a session), which holds this dispatcher, and the two are freed by reference counting then,
        not left in a cycle for the cyclic collector. A request that still came would be answered -32601, a
        notification dropped."""
        self.on_request = _null_handler
        self.on_notification = None
        self.allow_batch = _never
        self.before_answer = None
        self.cancel_frame = None
        self.answers = None
        self.handshake = _never

    # --- writing -------------------------------------------------------------------------------------------

    async def _write(self, frames: Sequence[Outgoing]) -> bool:
        """Write under the connection's write lock, first come first served; False when the peer has gone."""
        await self._write_lock.acquire()
        try:
            await self.stream.send(frames)
            return True
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("peer went away before %d frames could be written", len(frames))
            return False
        finally:
            self._write_lock.release()

    async def _reply(self, answer: Outgoing) -> None:
        """Write an answer of a handler task. The answers of the handlers that finish in one pass of the event loop
        go out in one write: the first queues its answer and yields once, the others add theirs, and the first
        writes them, unless the read loop will (:meth:`_let_new_handlers_run`). They count in ``max_queued_bytes``."""
        if self._queue_reply(answer):
            await self._write_gathered()

    def _queue_reply(self, answer: Outgoing) -> bool:
        """Queue an answer for :meth:`_reply`'s write: True when the caller is to write (:meth:`_write_gathered`),
        False when the task that queued the first one writes them, or the read loop."""
        self._unwritten += len(answer.frame)
        self._replies.append(answer)
        return len(self._replies) == 1 and not self._read_loop_writes

    async def _write_gathered(self) -> None:
        """Write the answers queued, with those that the other handlers of this pass of the loop add."""
        if len(self._inflight) > 1 and self.stream.gathers_replies:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        await self._write_replies()

    async def _write_replies(self) -> None:
        """Write the answers queued by :meth:`_reply`, if any."""
        queue, self._replies = self._replies, []
        if not queue:
            return
        try:
            await self._write(queue)
        finally:
            for out in queue:
                self._unwritten -= len(out.frame)

    async def send_frame(self, frame: bytes, related: RequestId | None = None, kind: int = NOTIFICATION) -> None:
        """Write a pre-encoded frame. Raises :class:`ConnectionClosed` when the stream is gone."""
        await anyio.lowlevel.checkpoint_if_cancelled()  # (a cancelled handler sends nothing more)
        if not await self._write((Outgoing(frame, related, kind),)):
            raise ConnectionClosed()

    async def notify(self, method: str, params: bytes | None = None, *, related: RequestId | None = None) -> None:
        """Send a notification (``params`` is an encoded JSON object or ``None``)."""
        await self.send_frame(encode_notification(method, params), related, NOTIFICATION)

    def next_request_id(self) -> RequestId:
        self._next_id += 1
        return self._next_id if self.id_prefix is None else f"{self.id_prefix}{self._next_id}"

    async def request(
        self,
        method: str,
        params: bytes | None = None,
        *,
        timeout: float | object | None = ...,
        related: RequestId | None = None,
        ident: RequestId | None = None,
    ) -> Raw:
        """Send a request and wait for its result (raw JSON).

        Raises :class:`RpcError` with the peer's code when it answers with an error, :class:`RequestTimeout`
        after ``timeout`` seconds (a cancellation is then sent), :class:`ConnectionClosed` when the connection ends.
        If the caller is cancelled, a cancellation is sent to the peer too.
        """
        if self._closed:
            raise ConnectionClosed()
        if ident is None:
            ident = self.next_request_id()
        limit = self.request_timeout if timeout is ... else timeout
        waiter = _Waiter()
        self._pending[ident] = waiter
        try:
            await self.send_frame(encode_request(ident, method, params), related, REQUEST)
            with anyio.fail_after(math.inf if limit is None else limit) as waiter.timeout:  # type: ignore[arg-type]
                await waiter.event.wait()
        except TimeoutError:
            await self._send_cancel(ident, "Request timed out", related)
            raise RequestTimeout(f"{method}: no response within {limit} s") from None
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._send_cancel(ident, "Request cancelled", related)
            raise
        finally:
            self._pending.pop(ident, None)
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        return waiter.result

    def postpone(self, ident: RequestId, deadline: float) -> None:
        """Move the timeout of our pending request ``ident`` to ``deadline`` (on :func:`anyio.current_time`'s
        clock), never earlier: the peer reported progress on it. Nothing happens once it is answered."""
        waiter = self._pending.get(ident)
        if waiter is not None and waiter.timeout is not None and deadline > waiter.timeout.deadline:
            waiter.timeout.deadline = deadline

    async def _send_cancel(self, ident: RequestId, reason: str, related: RequestId | None) -> None:
        if self.cancel_frame is None or self._closed:
            return
        logger.debug("cancelling our request %r: %s", ident, reason)
        frame = self.cancel_frame(ident, reason)
        if frame is None:
            return
        try:
            with anyio.move_on_after(5):
                await self.send_frame(frame, related)
        except ConnectionClosed:
            pass

    def fail(self, ident: RequestId, error: Exception) -> bool:
        """End our pending request ``ident`` by raising ``error`` to its caller (its transport could not carry it,
        or its answer). False when no request of that id is pending."""
        if ident not in self._pending:
            return False
        self._resolve(ident, None, error)
        return True

    def peer_replaced(self) -> None:
        """The peer behind the stream was replaced by a new one (a stdio server process started again): our
        requests waiting for an answer fail with :class:`ConnectionClosed` (the new peer never saw them, and they
        are not sent again: they may have run), and the handlers of the old peer's requests are cancelled (their
        answers would reach a peer that never asked)."""
        for pending in list(self._inflight.values()):
            self.cancel_inbound(pending.request.id)
        self._fail_pending()

    def _resolve(self, ident: RequestId, result: Raw | None, error: Exception | None) -> None:
        waiter = self._pending.pop(ident, None)
        if waiter is None:
            logger.warning("ignoring a response to unknown request id %.80r", ident)
            return
        waiter.result = result
        waiter.error = error
        waiter.event.set()

    def _fail_pending(self) -> None:
        for waiter in self._pending.values():
            waiter.error = ConnectionClosed()
            waiter.event.set()
        self._pending.clear()
