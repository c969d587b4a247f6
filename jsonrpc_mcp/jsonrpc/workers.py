"""Plain functions on worker threads, off the event loop (L3): a small pool with a queue of its own.

:func:`run_in_worker` runs ``fn(*args)`` on a thread of :data:`POOL` and waits for it in the calling task, on
asyncio and trio. It costs a fraction of a thread of anyio's per call (``anyio.to_thread.run_sync``, the plain
path it is checked against in the tests): a call is put on the pool's queue and, when a worker is already
running, wakes nothing — the worker takes it when it is done with the one before; the results of the calls
done while the event loop was busy come back in one wake-up of the loop (:class:`_Inbox`). A handler may also
answer with a :class:`SyncCall` (the *sync lane*): the dispatcher then makes no coroutine for its request, hands
the calls of one read to the pool in one go (:class:`ParkedCalls`), and writes each answer when its call is done. A
thread that has more calls queued behind the one it ran keeps its result and hands back those of the calls it runs
one after another together, in one wake-up of the loop (:meth:`WorkerPool._done`).

What a thread is for is kept:

* **A call that blocks never holds up the others.** A worker takes the next call when it is done with its own;
  an idle worker watches the queue while calls run (and on while calls keep coming), and takes the first one
  waiting when no call was taken for :attr:`WorkerPool.handoff` seconds (the running ones may all be blocked);
  when it looks, the results kept by a thread still running go back. A result is kept at most ``handoff``
  seconds. Whenever a thread goes to work with
  calls queued behind it and none watches, an idle one is woken to watch, or a new one started (up to
  :attr:`WorkerPool.max_threads`).
* **Cancellation** does not interrupt the thread: the caller's cancellation waits until the function returns
  (its result dropped), as ``anyio.to_thread.run_sync`` does by default. A function that runs long looks at the
  request's own state (``ctx.cancelled``).
* **Context variables** (a tracing span, say) flow into the call: it runs in a copy of the caller's context (on
  the sync lane, each request's own: the dispatcher's copy for it).

Threads are started when the first call comes, end after :attr:`WorkerPool.idle_timeout` seconds without
work, end at once when the process exits (:meth:`WorkerPool.shutdown`, registered with :mod:`atexit`), and are
forgotten by a forked child (whose copy of the pool starts afresh).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Generator
from contextvars import Context, copy_context
from typing import Any, Final, TypeVar

import anyio

__all__ = (
    "POOL",
    "Job",
    "OneArgJob",
    "ParkedCalls",
    "SyncCall",
    "WorkerPool",
    "run_in_worker",
)

T = TypeVar("T")


class _Job:
    """One call: what to run, its outcome, and how the waiting task hears that it is done."""

    __slots__ = ("args", "context", "done", "error", "fn", "inbox", "owner", "pool", "value", "waiter", "wake")

    def __init__(
        self, fn: Callable[..., Any], args: tuple[Any, ...], inbox: Any, pool: WorkerPool, context: Any = None
    ) -> None:
        self.fn = fn
        self.args = args
        # (a call of ParkedCalls gets its inbox when it is sent)
        self.context: Context = copy_context() if context is None else context
        self.inbox: _Inbox = inbox
        self.pool = pool
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None
        # an asyncio future, a trio task, (a cancelled asyncio caller's) an anyio.Event, or a call's ParkedCalls
        self.waiter: Any = None
        self.wake: Callable[[_Job], None] = _set_result  # called on the loop when the call is done
        self.owner: Any = None  # a call of ParkedCalls: what its taker gets when it is done

    def run(self) -> None:
        """On a worker thread: the call (its outcome goes back to the caller's event loop: WorkerPool._done)."""
        try:
            self.value = self.context.run(self.fn, *self.args)
        except BaseException as exc:  # (the caller re-raises it)
            self.error = exc


class OneArgJob(_Job):
    """A call of ``fn(arg)``: :class:`Job`'s with its one argument kept as it is (the sync lane's, one per request
    in flight: no tuple made for it)."""

    __slots__ = ("arg",)

    def __init__(self, fn: Callable[[Any], Any], arg: Any, pool: WorkerPool) -> None:
        super().__init__(fn, (), None, pool)
        self.arg = arg

    def run(self) -> None:
        """On a worker thread: the call (see :meth:`Job.run`)."""
        try:
            self.value = self.context.run(self.fn, self.arg)
        except BaseException as exc:  # (the caller re-raises it)
            self.error = exc


class _Inbox:
    """The calls of one event loop that are done: handed back in one wake-up of the loop for all those done while
    it was busy (a loop's thread-safe callback costs a write to its wake-up pipe)."""

    __slots__ = ("_done", "_scheduled", "_wake_loop", "loop")

    def __init__(self, loop: object, call_soon_threadsafe: Callable[[Callable[[], None]], Any]) -> None:
        self.loop = loop
        self._wake_loop = call_soon_threadsafe
        self._done: deque[_Job] = deque()
        self._scheduled = False

    def put(self, job: _Job) -> None:
        """On a worker thread: ``job`` is done, and the loop is woken for it."""
        self._done.append(job)
        self.flush()

    def keep(self, job: _Job) -> None:
        """On a worker thread: ``job`` is done; the loop is woken for it by a later :meth:`flush`."""
        self._done.append(job)

    def flush(self) -> None:
        """On a worker thread: wake the loop, unless a wake-up is on its way, for the calls done."""
        if not self._scheduled:
            self._scheduled = True
            try:
                self._wake_loop(self._hand_back)
            except RuntimeError:  # the loop has ended (trio's RunFinishedError is one): nobody waits any more
                pass

    def _hand_back(self) -> None:
        """On the event loop: wake the caller of every call done."""
        self._scheduled = False  # (first: a call done from now on schedules another pass)
        done = self._done
        while done:
            job = done.popleft()
            job.done = True
            job.wake(job)


def _set_result(job: _Job) -> None:
    if not job.waiter.done():
        job.waiter.set_result(None)


def _set_event(job: _Job) -> None:
    job.waiter.set()


def _reschedule(job: _Job) -> None:
    _trio().lowlevel.reschedule(job.waiter)


class WorkerPool:
    """Threads that run plain functions, taking them from one queue (see the module's docstring).

    :param max_threads: at most this many threads (calls beyond wait in the queue).
    :param idle_timeout: a thread without work for this long ends.
    :param handoff: seconds without a call taken from a non-empty queue after which an idle thread takes one.
    """

    def __init__(self, max_threads: int = 40, *, idle_timeout: float = 10.0, handoff: float = 0.005) -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self.max_threads = max_threads
        self.idle_timeout = idle_timeout
        self.handoff = handoff
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)  # idle threads wait here
        self._watch_cv = threading.Condition(self._lock)  # and the one that watches here
        self._jobs: deque[_Job] = deque()
        self._threads = 0  # alive
        self._idle = 0  # waiting for work
        self._busy = 0  # running a call
        self._watching = 0  # idle, and looking at the queue every `handoff` seconds
        self._taken = 0  # calls taken from the queue so far
        self._wakeup_sent = False  # a thread was woken for the queue and has not taken a call yet
        self._unflushed: list[_Inbox] = []  # inboxes holding calls done whose loop is not woken yet
        self._kept_since = 0.0  # when the first of those was kept
        self._closed = False
        self._alive: weakref.WeakSet[threading.Thread] = weakref.WeakSet()

    @property
    def threads(self) -> int:
        """Threads alive now."""
        return self._threads

    @property
    def queued(self) -> int:
        """Calls waiting for a thread now."""
        return len(self._jobs)

    def submit(self, job: _Job) -> None:
        """Queue ``job`` (from the event loop's thread)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is shut down")
            self._jobs.append(job)
            self._wake_for_work()

    def submit_many(self, jobs: list[_Job]) -> None:
        """Queue ``jobs`` together (from the event loop's thread): one hand-off for all, taken one after another by
        the thread that wakes for them (and by an idle one that watches, when a call runs long)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is shut down")
            self._jobs.extend(jobs)
            self._wake_for_work()

    def _wake_for_work(self) -> None:
        """Calls were queued (the lock held): a thread to take them, if none will."""
        if self._busy:  # a running thread takes it next, or a watching one if they all stay busy
            if not self._watching and self._idle:
                self._cv.notify()
            elif not self._idle and self._threads < self.max_threads:
                self._start()
        elif not self._wakeup_sent:
            self._wakeup_sent = True
            if self._idle > self._watching:  # (one that does not watch: the watcher watches on)
                self._cv.notify()
            elif self._idle:
                self._watch_cv.notify()
            elif self._threads < self.max_threads:
                self._start()
            else:
                self._wakeup_sent = False

    def shutdown(self) -> None:
        """Idle threads end now, busy ones when their call (and the calls queued) returns; later calls are refused
        (:exc:`RuntimeError`)."""
        with self._lock:
            self._closed = True
            self._cv.notify_all()
            self._watch_cv.notify_all()

    def join(self, timeout: float | None = None) -> bool:
        """Wait (blocking) until every thread has ended, at most ``timeout`` seconds; True if they have."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                alive = [thread for thread in self._alive if thread.is_alive()]
            if not alive:
                return True
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            alive[0].join(left)

    def _start(self) -> None:
        self._threads += 1
        thread = threading.Thread(target=self._work, name="jsonrpc-mcp worker", daemon=True)
        self._alive.add(thread)
        thread.start()

    def _work(self) -> None:
        cv, watch_cv = self._cv, self._watch_cv
        jobs = self._jobs
        with cv:
            just_done = False
            kept_watching = False  # this thread watched, and calls were taken meanwhile: it watches on
            while True:
                # Take a call: after one's own (it was next), or when nobody runs one, or when nobody took one for
                # `handoff` seconds while this thread watched.
                if jobs and (just_done or not self._busy):
                    self._go_to_work(jobs.popleft())
                    just_done = True
                    continue
                if (just_done or self._closed) and self._unflushed:  # (none to go on with: the loop hears of ours)
                    self._flush()
                if self._closed:
                    break
                just_done = False
                # Watch while calls run, and on while calls keep coming (a thread woken to watch for each batch of
                # calls would cost more than looking every `handoff` seconds).
                watch = (bool(self._busy) or kept_watching) and not self._watching
                taken = self._taken
                self._idle += 1
                self._watching += watch
                try:
                    notified = watch_cv.wait(self.handoff) if watch else cv.wait(self.idle_timeout)
                finally:
                    self._idle -= 1
                    self._watching -= watch
                kept_watching = notified or (watch and self._taken != taken)  # (woken to watch: it does)
                if watch and not notified and self._unflushed:  # a call ran long: the others' results go back
                    self._flush()
                if watch and jobs and self._taken == taken and not notified:
                    self._go_to_work(jobs.popleft())  # the running calls all kept at it: this one goes on
                    just_done = True
                    continue
                if not watch and not notified and not jobs:
                    break  # a whole idle_timeout without work
            self._threads -= 1
            self._alive.discard(threading.current_thread())

    def _go_to_work(self, job: _Job) -> None:
        """Run ``job`` on this thread (called and returning with the lock held)."""
        self._taken += 1
        self._busy += 1
        self._wakeup_sent = False
        if not self._watching and (self._jobs or self._unflushed) and not self._closed:
            # somebody watches the calls behind this one, and the results kept, should this one run long
            if self._idle:
                self._cv.notify()
            elif self._threads < self.max_threads:
                self._start()
        self._lock.release()
        try:
            job.run()
        finally:
            self._lock.acquire()
            self._busy -= 1
            self._done(job)

    def _done(self, job: _Job) -> None:
        """``job`` has run (the lock held): its result goes back now, or with those of the calls that follow it on
        this thread — while there are some, for at most :attr:`handoff` seconds from the first one kept."""
        inbox = job.inbox
        inbox.keep(job)
        unflushed = self._unflushed
        if not unflushed:
            self._kept_since = time.monotonic()
        if inbox not in unflushed:
            unflushed.append(inbox)
        if (
            self._jobs
            and not self._closed
            # (and another thread not running a call watches, or one can be started to: see _go_to_work)
            and (self._threads - self._busy > 1 or self._threads < self.max_threads)
            and time.monotonic() - self._kept_since < self.handoff
        ):
            return  # (this thread takes the next call: its result goes back with this one)
        self._flush()

    def _flush(self) -> None:
        """Wake the loops of the results kept (the lock held)."""
        unflushed, self._unflushed = self._unflushed, []
        for inbox in unflushed:
            inbox.flush()


#: The process's pool, for :func:`run_in_worker`.
POOL: Final = WorkerPool()
atexit.register(POOL.shutdown)
_local = threading.local()  # the inbox of the event loop this thread runs


def _after_fork() -> None:
    POOL._reset()  # the child has none of the parent's threads, nor their calls
    _local.__dict__.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


async def run_in_worker(fn: Callable[..., T], *args: Any, pool: WorkerPool = POOL) -> T:
    """Call ``fn(*args)`` on a thread of ``pool``, in a copy of the caller's context, and return what it returns
    (or raise what it raised). A cancelled caller waits for the function to return, then is cancelled."""
    loop = _running_asyncio_loop()
    if loop is not None:
        job = _Job(fn, args, _inbox(loop), pool)
        await _wait_asyncio(job, loop, pool)
    else:
        trio = _trio()
        job = _Job(fn, args, _inbox(None, trio), pool)
        await _wait_trio(job, trio, pool)
    if job.error is not None:
        error, job.error = job.error, None
        raise error
    value: T = job.value
    return value


class SyncCall:
    """A handler's result that a plain function makes on a worker thread: ``fn(*args)`` returns it (or raises).

    The *sync lane*: a handler that returns one needs nothing of the event loop for the rest of its request, so the
    dispatcher makes no coroutine for it; it hands the calls of one read to the pool together, each in its request's
    own context, and writes their answers as they come back (``Dispatcher._run_handlers``). Anywhere else it is an
    awaitable like any other: awaited, the call runs on a worker thread as :func:`run_in_worker` runs it (a wrapper
    around a handler, a task that runs it, the plain reference runner).

    What the layers above add to the call (:meth:`rescue_with`, :meth:`finish_with`) are plain functions with their
    arguments, not bound methods or wrappers: a call parked on the lane holds as few objects as it can (a request in
    flight keeps them alive, and enough of them alive at once start the garbage collector's passes)."""

    __slots__ = ("args", "fn", "rescue", "rescue_arg", "then", "then_arg", "then_target")

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.fn = fn
        self.args = args
        self.rescue: Callable[[Any, Exception], Any] | None = None
        self.rescue_arg: Any = None
        self.then: Callable[[Any, Any, Any], Any] | None = None
        self.then_target: Any = None
        self.then_arg: Any = None

    def rescue_with(self, rescue: Callable[[Any, Exception], Any], arg: Any) -> None:
        """Have ``rescue(arg, exc)`` made the call's result when ``fn`` raises ``exc`` (an :exc:`Exception`; what
        ``rescue`` raises in turn is raised)."""
        self.rescue = rescue
        self.rescue_arg = arg

    def finish_with(self, then: Callable[[Any, Any, Any], Any], target: Any, arg: Any) -> None:
        """Have ``then(target, arg, result)`` made of the result on the worker thread too (what the caller does with
        it: ``then`` a plain function, an unbound method with its instance as ``target`` say)."""
        self.then = then
        self.then_target = target
        self.then_arg = arg

    def run(self) -> Any:
        """On a worker thread: the call, and what :meth:`rescue_with` and :meth:`finish_with` asked for."""
        try:
            value = self.fn(*self.args)
        except Exception as exc:
            rescue = self.rescue
            if rescue is None:
                raise
            value = rescue(self.rescue_arg, exc)
        then = self.then
        return value if then is None else then(self.then_target, self.then_arg, value)

    def __await__(self) -> Generator[Any, None, Any]:
        return run_in_worker(self.run).__await__()

    def close(self) -> None:
        """Nothing to close (a coroutine's :meth:`close`, for a handler's result that is never awaited)."""


#: A call on a worker thread: ``Job(fn, args, None, pool)`` runs ``fn(*args)`` in a copy of the caller's context,
#: once added to a :class:`ParkedCalls` and sent.
Job = _Job


def _inbox(loop: Any, trio: Any = None) -> _Inbox:
    """The inbox of the running event loop (``loop``: asyncio's, else trio's), made on its first call."""
    inbox: _Inbox | None = getattr(_local, "inbox", None)
    if loop is not None:
        if inbox is None or inbox.loop is not loop:
            inbox = _local.inbox = _Inbox(loop, loop.call_soon_threadsafe)
        return inbox
    token = trio.lowlevel.current_trio_token()
    if inbox is None or inbox.loop is not token:
        inbox = _local.inbox = _Inbox(token, token.run_sync_soon)
    return inbox


class ParkedCalls:
    """Calls handed to the pool together (the sync lane's of one read), with what their taker gets for each (its
    ``owner``), and those of them done, not yet taken.

    :meth:`add` each call, :meth:`send` them to the pool together (each runs in the context given with it: its
    request's own), then :meth:`arrival` waits until one is done and :meth:`take` gives the owner of each done.
    The calls sent together take one hand-off to the pool, and their results come back in as few wake-ups of the
    loop as their threads allow (:meth:`WorkerPool.submit_many`). Used on one event loop, asyncio's or trio's."""

    __slots__ = ("_done", "_loop", "_unsent", "_waiter", "left")

    def __init__(self) -> None:
        self.left = 0  # added, not taken
        self._unsent: list[_Job] = []
        self._done: deque[_Job] = deque()
        self._waiter: Any = None  # the task waiting in arrival(): an asyncio future, or a trio task
        self._loop: Any = _UNKNOWN  # the asyncio loop, None on trio

    @property
    def done(self) -> bool:
        """Whether a call is done that was not taken."""
        return bool(self._done)

    def add(self, job: Job, context: Context, owner: object = None) -> None:
        """Add ``job``, to run in ``context``; :meth:`take` gives ``owner`` for it once it is done (the job itself
        when ``None``: a job that named itself its owner would be a reference cycle, freed only by the garbage
        collector)."""
        # (the lane as the job's waiter, and a plain function to wake it: no bound method made per call)
        job.context, job.owner, job.waiter, job.wake = context, owner, self, _arrived_in_lane
        self._unsent.append(job)
        self.left += 1

    def send(self) -> None:
        """The calls added since the last send go to their pool, together. A call whose pool is shut down is done at
        once, its error the :exc:`RuntimeError` :func:`run_in_worker` raises."""
        if not self._unsent:
            return
        jobs, self._unsent = self._unsent, []
        loop = self._loop
        if loop is _UNKNOWN:
            loop = self._loop = _running_asyncio_loop()
        inbox = _inbox(loop, None if loop is not None else _trio())
        pool = jobs[0].pool
        one_pool = True
        for job in jobs:
            job.inbox = inbox
            one_pool = one_pool and job.pool is pool
        if one_pool:
            _submit(pool, jobs)
        else:
            for job in jobs:
                _submit(job.pool, [job])

    def _arrived(self, job: _Job) -> None:
        self._done.append(job)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if self._loop is not None:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                _trio().lowlevel.reschedule(waiter)

    async def arrival(self) -> None:
        """Wait until a call is done that was not taken (a cancellation ends the wait)."""
        if self._done:
            return
        loop = self._loop
        if loop is _UNKNOWN:
            loop = self._loop = _running_asyncio_loop()
        if loop is not None:
            self._waiter = loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        else:
            trio = _trio()
            self._waiter = trio.lowlevel.current_task()

            def abort(_: Any) -> Any:
                self._waiter = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)

    def take(self) -> Any:
        """The owner of a call done (there must be one: :attr:`done`)."""
        self.left -= 1
        job = self._done.popleft()
        return job if job.owner is None else job.owner

    def take_all(self) -> list[Any]:
        """The owners of every call done (none: an empty list)."""
        done = self._done
        owners = [job if job.owner is None else job.owner for job in done]
        done.clear()
        self.left -= len(owners)
        return owners


_UNKNOWN: Final = object()


def _arrived_in_lane(job: _Job) -> None:
    job.waiter._arrived(job)


def _submit(pool: WorkerPool, jobs: list[_Job]) -> None:
    try:
        pool.submit_many(jobs)
    except RuntimeError as exc:  # (shut down)
        for job in jobs:
            job.error = exc
            job.inbox.put(job)


def _running_asyncio_loop() -> Any:
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _trio() -> Any:
    import trio  # (runs this code: imported already)

    return trio


async def _wait_asyncio(job: _Job, loop: Any, pool: WorkerPool) -> None:
    import asyncio  # (runs this code: imported already)

    job.waiter = loop.create_future()
    pool.submit(job)
    try:
        await job.waiter
    except asyncio.CancelledError:
        if not job.done:  # the thread runs on: wait for it, out of the cancellation's reach, then be cancelled
            job.waiter, job.wake = anyio.Event(), _set_event
            with anyio.CancelScope(shield=True):
                await job.waiter.wait()
        raise


async def _wait_trio(job: _Job, trio: Any, pool: WorkerPool) -> None:
    job.waiter, job.wake = trio.lowlevel.current_task(), _reschedule
    pool.submit(job)
    # Abort.FAILED: a cancellation cannot end the wait; it is delivered at the next checkpoint, after the call.
    await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
    await trio.lowlevel.checkpoint_if_cancelled()
