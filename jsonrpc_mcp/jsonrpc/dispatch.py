"""A concurrent JSON-RPC 2.0 peer over a :class:`MessageStream` (L3: the first anyio import).

One :class:`Dispatcher` owns one connection. It reads frames, answers requests through a handler, correlates the
answers to its own outgoing requests, and never lets a bad frame end the connection.

How a request is run (the fast path matters: most requests never block):

* the handler is called synchronously with the :class:`~.wire.Request`;
* if it returns ``bytes`` (an encoded result) the response is queued at once, in the reader's task, and written
  together with every other answer produced from the same read;
* if it returns a coroutine, the coroutine runs in its own task, spawned on the event loop directly (see
  :mod:`._tasks`), so a slow request never holds up a fast one and ``cancel_inbound`` can stop exactly that
  request, which is then never answered.

Back-pressure: at most ``max_in_flight`` handler tasks run at once; while that many are busy the reader stops
reading, so a flooding peer fills its own pipe rather than our memory.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Coroutine, Sequence
from types import CoroutineType
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
from msgspec import Raw

from ..errors import ConnectionClosed, RequestTimeout, RpcError, error_for_code
from . import codes
from ._tasks import HandlerTasks, Signal, new_signal, open_handler_tasks
from .streams import MessageStream
from .wire import (
    ErrorResponse,
    Notification,
    OversizedFrame,
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

__all__ = ("Dispatcher", "RequestHandler", "NotificationHandler", "failure_reply")

logger = logging.getLogger(__name__)

RequestHandler = Callable[[Request], "bytes | Coroutine[Any, Any, bytes]"]
NotificationHandler = Callable[[Notification], "Coroutine[Any, Any, None] | None"]
Outgoing = list[tuple[bytes, RequestId | None]]
_NOT_STARTED: Any = object()  # the in-flight token of a handler kept by answer_now until run starts it


class _Waiter:
    __slots__ = ("error", "event", "result", "timeout")

    def __init__(self) -> None:
        self.event = new_signal()
        self.result: Raw | None = None
        self.error: RpcError | None = None
        self.timeout: anyio.CancelScope | None = None  # the request's timeout, while it waits (see postpone)


class _Batch:
    """Collects the answers of one batch; the array is written when the last request finishes."""

    __slots__ = ("replies", "waiting")

    def __init__(self) -> None:
        self.replies: list[bytes] = []
        self.waiting = 0


class _NoWaiter:
    """Stands for a signal nobody waits on yet: ``run`` makes a real one before waiting. Most
    dispatchers never wait, and every HTTP session and stateless request has one."""

    __slots__ = ()

    def set(self) -> None:
        pass


_NO_WAITER = _NoWaiter()

#: Errors about our own outgoing requests; their codes are local-only and never go on the wire.
_LOCAL_ONLY = (RequestTimeout, ConnectionClosed)
_TASK_NAME = "jsonrpc-mcp request handler"
_NOTIFICATION_TASK = "jsonrpc-mcp notification handler"
_SPAWNED_TASK = "jsonrpc-mcp connection task"


def failure_reply(req: Request, exc: Exception) -> bytes:
    """The answer to ``req`` whose handler raised ``exc``: its JSON-RPC error when it is an :class:`RpcError`;
    otherwise -32603 "Internal error", the exception logged with its traceback and never shown to the peer. A
    timeout or a closed connection of the handler's own outgoing request (codes that only mean something here)
    is an internal error too, logged as a warning. Transports that call ``on_request`` themselves use it, so every
    path answers a failure the same way."""
    if isinstance(exc, _LOCAL_ONLY):
        logger.warning("handler for %r failed: %s", req.method, exc.message)
        return encode_error(req.id, codes.INTERNAL_ERROR, "Internal error")
    if isinstance(exc, RpcError):
        return encode_error(req.id, exc.code, exc.message, exc.data)
    logger.error("handler for %r failed", req.method, exc_info=exc)
    return encode_error(req.id, codes.INTERNAL_ERROR, "Internal error")


def _null_handler(req: Request) -> bytes:
    raise RpcError("Method not found", code=codes.METHOD_NOT_FOUND)


class Dispatcher:
    """One JSON-RPC connection: inbound requests handled concurrently, outbound requests correlated.

    :param stream: the transport.
    :param on_request: called with each request; returns encoded result bytes, or a coroutine producing them;
        raises :class:`~jsonrpc_mcp.errors.RpcError` to answer with an error.
    :param on_notification: called with each notification; may return a coroutine (run in its own task).
    :param allow_batch: asked for each batch frame; ``False`` answers it with -32600.
    :param cancel_frame: builds the notification that tells the peer we gave up on one of our requests.
    :param max_in_flight: bound on concurrently running handler tasks (back-pressure beyond it).
    :param drain_timeout: after the peer's end of stream, how long running handlers may still finish.
    """

    def __init__(
        self,
        stream: MessageStream,
        on_request: RequestHandler = _null_handler,
        on_notification: NotificationHandler | None = None,
        *,
        allow_batch: Callable[[], bool] = lambda: False,
        cancel_frame: Callable[[RequestId, str], bytes | None] | None = None,
        max_in_flight: int = 128,
        drain_timeout: float = 5.0,
        request_timeout: float | None = 300.0,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.stream = stream
        self.on_request = on_request
        self.on_notification = on_notification
        self.allow_batch = allow_batch
        self.cancel_frame = cancel_frame
        self.max_in_flight = max_in_flight
        self.drain_timeout = drain_timeout
        self.request_timeout = request_timeout
        self._writing = False  # a task writes (holds the write lock)
        self._writers: list[Signal] = []  # the tasks waiting to write, first come first served
        self._handlers: HandlerTasks | None = None  # every task of this connection (see _tasks), while it runs
        self._inflight: dict[RequestId, object] = {}  # the handler tasks' cancel tokens, by request id
        self._cancelled: set[RequestId] = set()  # those the peer cancelled (they are never answered)
        self._tasks = 0  # handler tasks not yet done, their reply included
        self._replies: Outgoing = []  # answers of handler tasks waiting for the one write (see _reply)
        self._idle: Signal | _NoWaiter = _NO_WAITER
        self._capacity: Signal | _NoWaiter = _NO_WAITER
        self._pending: dict[RequestId, _Waiter] = {}
        self._next_id = 0
        self._closed = False
        #: Called when work needs :meth:`run` and it has not started (a transport that starts it on demand);
        #: :meth:`spawn` then keeps the work for it.
        self.wake: Callable[[], None] | None = None
        self._deferred: list[tuple[Callable[..., Coroutine[Any, Any, Any]], tuple[Any, ...]]] | None = None
        # Handlers that have to wait, met by answer_now before run started: run starts them first.
        self._waiting: list[tuple[Request, Coroutine[Any, Any, bytes], _Batch | None]] = []

    # --- running -----------------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the connection until the peer ends it; returns after running handlers have finished."""
        receive = self.stream.receive
        process_all = self._process_all
        async with open_handler_tasks() as handlers:
            self._handlers = handlers
            task_status.started()
            waiting, self._waiting = self._waiting, []
            for req, coro, batch in waiting:
                del self._inflight[req.id]  # (it held _NOT_STARTED)
                self._start(req, coro, batch)
                if req.id in self._cancelled:  # cancelled by the peer before it could start
                    self.cancel_inbound(req.id)
            deferred, self._deferred = self._deferred, None
            for fn, args in deferred or ():
                handlers.start_soon(fn(*args), _SPAWNED_TASK)
            try:
                # The read loop (here, not in a coroutine of its own: an idle connection waits with one less).
                while True:
                    try:
                        out = process_all(await receive())
                    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                        break
                    if out:
                        await self._write_replies(out)
                    # (no frame, request or answer stays referenced while this waits: an idle connection holds none)
                    del out
                    while len(self._inflight) >= self.max_in_flight:
                        self._capacity = new_signal()
                        await self._capacity.wait()
            except anyio.get_cancelled_exc_class():
                handlers.cancel_all()  # as a task group's children would be: at once, not after the drain
                raise
            finally:
                self._closed = True
                self._fail_pending()
                if self._tasks:
                    with anyio.move_on_after(self.drain_timeout, shield=True):
                        while self._tasks:
                            self._idle = new_signal()
                            await self._idle.wait()
            # (leaving the block cancels and waits for what still runs: notification and spawned tasks too)
        self._handlers = None

    @property
    def closed(self) -> bool:
        return self._closed

    def answer_now(self, frames: Sequence[bytes]) -> Outgoing:
        """Handle frames before :meth:`run` has started, for a transport that answers what it can before it starts
        an event loop: the answers made at once are returned (to be written in order), and what has to wait — a
        handler's coroutine, a notification handler's, work spawned meanwhile — is kept for :meth:`run`, which
        starts it first (:attr:`wake` is called; see :attr:`needs_run`). Never raises for a bad frame."""
        return self._process_all(frames)

    @property
    def needs_run(self) -> bool:
        """True when :meth:`answer_now` or :meth:`spawn` kept work that only :meth:`run` can carry out."""
        return bool(self._waiting or self._deferred)

    @property
    def running(self) -> bool:
        """True while :meth:`run` serves the connection: from then on :meth:`adopt` takes handlers."""
        return self._handlers is not None and not self._closed

    # --- inbound -----------------------------------------------------------------------------------------------

    def _process_all(self, frames: Sequence[bytes]) -> Outgoing:
        out: Outgoing = []
        process = self._process
        for frame in frames:
            process(frame, out)
        return out

    def _process(self, frame: bytes, out: Outgoing, batch: _Batch | None = None) -> None:
        """Handle one frame; immediate answers go to ``out``. Never raises."""
        try:
            if batch is None and not frame.startswith(b"{") and is_batch(frame):
                self._process_batch(frame, out)
                return
            msg = read_message(frame)
        except RpcError as exc:
            ident = getattr(exc, "request_id", None)
            logger.debug("rejected frame: %s", exc.message)
            if getattr(exc, "silent", False):
                return  # a malformed notification is never answered
            if type(frame) is OversizedFrame and ident in self._pending and frame.find(b'"method"') < 0:
                # The answer to one of our own requests was too big to read: fail that call now, tell no one.
                self._resolve(ident, None, RpcError(exc.message, code=codes.INVALID_REQUEST))
                return
            reply = encode_error(ident, exc.code, exc.message, exc.data)
            if batch is not None:
                batch.replies.append(reply)
            else:
                out.append((reply, ident))
            return
        except Exception:  # pragma: no cover - defensive: classification itself must not fail
            logger.exception("unexpected failure decoding a frame")
            return
        if isinstance(msg, Request):
            self._handle_request(msg, out, batch)
        elif isinstance(msg, Notification):
            self._handle_notification(msg)
        elif isinstance(msg, Response):
            self._resolve(msg.id, msg.result, None)
        else:
            err: ErrorResponse = msg
            if err.id is None:
                logger.warning("peer sent an error without id: %s %s", err.code, err.message)
            else:
                self._resolve(err.id, None, error_for_code(err.code, err.message, err.data))

    def _process_batch(self, frame: bytes, out: Outgoing) -> None:
        if not self.allow_batch():
            out.append(
                (
                    encode_error(None, codes.INVALID_REQUEST, "Invalid Request: batches are not supported"),
                    None,
                )
            )
            return
        items = decode_batch(frame)
        if not items:
            out.append((encode_error(None, codes.INVALID_REQUEST, "Invalid Request: empty batch"), None))
            return
        batch = _Batch()
        for item in items:
            self._process(bytes(item), out, batch)
        if batch.waiting == 0 and batch.replies:
            out.append((b"[" + b",".join(batch.replies) + b"]", None))

    def _handle_request(self, req: Request, out: Outgoing, batch: _Batch | None) -> None:
        ident = req.id
        if ident in self._inflight:
            reply = encode_error(ident, codes.INVALID_REQUEST, "Invalid Request: id is already in use")
            self._queue(reply, ident, out, batch)
            return
        try:
            result = self.on_request(req)
        except Exception as exc:
            self._queue(failure_reply(req, exc), ident, out, batch)
            return
        if type(result) is bytes:
            self._queue(encode_result(ident, result), ident, out, batch)
            return
        if type(result) is not CoroutineType and not isinstance(result, Coroutine):
            logger.error("handler for %r returned %s, not bytes or a coroutine", req.method, type(result).__name__)
            self._queue(encode_error(ident, codes.INTERNAL_ERROR, "Internal error"), ident, out, batch)
            return
        if batch is not None:
            batch.waiting += 1
        self._start(req, result, batch)

    def _start(self, req: Request, coro: Coroutine[Any, Any, bytes], batch: _Batch | None) -> None:
        if self._handlers is None:  # answer_now, before run: run starts it
            self._waiting.append((req, coro, batch))
            self._inflight[req.id] = _NOT_STARTED
            if self.wake is not None:
                self.wake()
            return
        self._tasks += 1
        self._inflight[req.id] = self._handlers.spawn(self._run_request(req, coro, batch), _TASK_NAME)

    def _queue(self, reply: bytes, ident: RequestId, out: Outgoing, batch: _Batch | None) -> None:
        if batch is not None:
            batch.replies.append(reply)
        else:
            out.append((reply, ident))

    async def _run_request(self, req: Request, coro: Coroutine[Any, Any, bytes], batch: _Batch | None) -> None:
        """A handler task: run the handler, then answer (one coroutine, not two: this is per request)."""
        ident = req.id
        token = self._inflight[ident]  # (registered by _start before this task could run)
        try:
            try:
                try:
                    result = await coro
                except Exception as exc:
                    reply = failure_reply(req, exc)
                else:
                    reply = encode_result(ident, result)
            except BaseException:
                # Cancelled: by the peer or by shutdown.
                coro.close()  # (a no-op once it has run; it always has by now)
                if self._end(ident):
                    await self._unanswered(ident, batch)
                raise
            if self._end(ident):
                # The peer cancelled it while it ran, and it finished without noticing.
                await self._unanswered(ident, batch)
            elif batch is not None:
                await self._answered(batch, reply)
            else:
                await self._reply(reply, ident)
        finally:
            # Only now, with the reply written, may a draining run() consider this request done.
            assert self._handlers is not None
            self._handlers.forget(token)
            self._tasks -= 1
            if not self._tasks:
                self._idle.set()

    def _end(self, ident: RequestId) -> bool:
        """The handler of ``ident`` is done: it can no longer be cancelled. True when the peer had cancelled it."""
        del self._inflight[ident]
        self._capacity.set()
        if ident not in self._cancelled:
            return False
        self._cancelled.discard(ident)
        return True

    async def _unanswered(self, ident: RequestId, batch: _Batch | None) -> None:
        """A request the peer cancelled is never answered: the transport hears it ended; its batch goes on."""
        self.stream.finished(ident)
        if batch is not None:
            with anyio.CancelScope(shield=True):  # the task's own scope is cancelled: only a shield may wait here
                await self._answered(batch, None)

    async def _answered(self, batch: _Batch, reply: bytes | None) -> None:
        """One request of a batch is done: the batch's answers go out together once all of them are."""
        if reply is not None:
            batch.replies.append(reply)
        batch.waiting -= 1
        if batch.waiting == 0 and batch.replies:
            await self._reply(b"[" + b",".join(batch.replies) + b"]", None)

    async def _reply(self, frame: bytes, related: RequestId | None) -> None:
        """Write an answer. A peer gone meanwhile has nobody left to tell: the late answer is dropped.

        Answers of handlers that finish in the same pass of the event loop go out in one write: the first one
        queues its answer and yields once; the others add theirs to its queue and return. That first task is
        still counted in ``_tasks`` until all of them are written, so a draining ``run()`` waits for every one.
        A stream that does not gather (``gathers_replies`` False) gets each answer at once, without the pass.
        """
        queue = self._replies
        queue.append((frame, related))
        if len(queue) > 1:
            return
        try:
            if self.stream.gathers_replies:
                await anyio.lowlevel.cancel_shielded_checkpoint()
            self._replies = []
            # No cancellation check: the answers are made (some of other tasks, gathered here), and a request the
            # peer cancelled was already left out; what a cancellation now means is the connection closing.
            await self._lock_writes(check=False)
            try:
                await self.stream.send_replies(queue)
            finally:
                self._unlock_writes()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("peer went away before %d answers could be written", len(queue))

    def _handle_notification(self, note: Notification) -> None:
        if self.on_notification is None:
            return
        try:
            result = self.on_notification(note)
        except Exception:
            logger.exception("notification handler for %r failed", note.method)
            return
        if result is not None:
            if self._handlers is None:  # answer_now, before run: run starts it
                if not self.spawn(self._run_notification, note, result):
                    result.close()
                    logger.warning("notification %r dropped: the connection is not served", note.method)
                return
            self._handlers.start_soon(self._run_notification(note, result), _NOTIFICATION_TASK)

    async def _run_notification(self, note: Notification, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except Exception:
            logger.exception("notification handler for %r failed", note.method)

    def cancel_inbound(self, request_id: Any) -> bool:
        """Cancel the handler of an inbound request; it will not be answered. False if it is not running."""
        if type(request_id) is not str and type(request_id) is not int:
            return False
        token = self._inflight.get(request_id)
        if token is None:
            return False
        self._cancelled.add(request_id)
        if token is _NOT_STARTED:
            return True  # run cancels it as it starts it (its task's own cleanup then runs, batch included)
        assert self._handlers is not None
        self._handlers.cancel(token, lambda: self._inflight.get(request_id) is token)
        return True

    def adopt(self, req: Request, coro: Coroutine[Any, Any, bytes]) -> bool:
        """Run a handler coroutine that a transport obtained by calling ``on_request`` itself (an HTTP request
        answered in its own task when the handler does not block) as if the read loop had started it: among this
        connection's handler tasks, cancellable by ``notifications/cancelled``, answered through the stream."""
        if self._handlers is None or self._closed or req.id in self._inflight:
            coro.close()
            return False
        self._start(req, coro, None)  # counted like the read loop's own: a draining run() waits for it
        return True

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> bool:
        """Run ``fn(*args)`` in a task of this connection (cancelled when it ends). False if not running (unless
        :attr:`wake` is set: then it runs once :meth:`run` has started). ``fn`` must not raise (what escapes is
        logged on asyncio, and ends the connection on trio)."""
        if self._closed:
            return False
        handlers = self._handlers
        if handlers is None:
            wake = self.wake
            if wake is None:
                return False
            if self._deferred is None:
                self._deferred = []
            self._deferred.append((fn, args))
            wake()
            return True
        handlers.start_soon(fn(*args), _SPAWNED_TASK)
        return True

    def abandon(self) -> None:
        """For a dispatcher whose :meth:`run` never started and never will: our pending requests fail with
        :class:`ConnectionClosed`, work kept for it is dropped, and it counts as closed."""
        self._closed = True
        self._deferred = None
        waiting, self._waiting = self._waiting, []
        for req, coro, _ in waiting:
            coro.close()
            self._inflight.pop(req.id, None)
        self._fail_pending()

    def in_flight(self) -> int:
        return len(self._inflight)

    # --- outbound ----------------------------------------------------------------------------------------------

    async def _lock_writes(self, *, check: bool = True) -> None:
        """Take the write lock (released with :meth:`_unlock_writes`). Uncontended it costs no trip through the event
        loop (an ``anyio.Lock`` yields once even then, and carries a ~0.7 KiB waiter queue on asyncio); a cancelled
        task still stops here (``check``)."""
        if check:
            await anyio.lowlevel.checkpoint_if_cancelled()
        if self._writing:
            await self._wait_to_write()
        else:
            self._writing = True

    async def _wait_to_write(self) -> None:
        turn = new_signal()
        self._writers.append(turn)
        try:
            await turn.wait()  # set by the writer before us: the lock passed to us
        except BaseException:
            if turn.is_set():
                self._unlock_writes()  # passed to us as we were cancelled: pass it on
            else:
                self._writers.remove(turn)
            raise

    def _unlock_writes(self) -> None:
        writers = self._writers
        if writers:
            writers.pop(0).set()  # the lock passes on (stays taken)
        else:
            self._writing = False

    async def _write(self, frame: bytes, related: RequestId | None) -> None:
        await self._lock_writes()
        try:
            await self.stream.send(frame, related)
        finally:
            self._unlock_writes()

    async def _write_replies(self, frames: Outgoing) -> None:
        try:
            await self._lock_writes()
            try:
                await self.stream.send_replies(frames)
            finally:
                self._unlock_writes()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("peer went away before %d frames could be written", len(frames))

    async def send_frame(self, frame: bytes, related: RequestId | None = None) -> None:
        """Write a pre-encoded frame. Raises :class:`ConnectionClosed` when the stream is gone."""
        try:
            await self._write(frame, related)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise ConnectionClosed() from None

    async def notify(self, method: str, params: bytes | None = None, *, related: RequestId | None = None) -> None:
        """Send a notification (``params`` is an encoded JSON object or ``None``)."""
        await self.send_frame(encode_notification(method, params), related)

    def next_request_id(self) -> int:
        self._next_id += 1
        return self._next_id

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
            await self.send_frame(encode_request(ident, method, params), related)
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
        frame = self.cancel_frame(ident, reason)
        if frame is None:
            return
        try:
            with anyio.move_on_after(5):
                await self._write(frame, related)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    def _resolve(self, ident: RequestId, result: Raw | None, error: RpcError | None) -> None:
        waiter = self._pending.pop(ident, None)
        if waiter is None:
            logger.warning("ignoring a response to unknown request id %r", ident)
            return
        waiter.result = result
        waiter.error = error
        waiter.event.set()

    def _fail_pending(self) -> None:
        for waiter in self._pending.values():
            waiter.error = ConnectionClosed()
            waiter.event.set()
        self._pending.clear()
