"""The concurrency pieces of the request path, each a small class (L3).

* :func:`open_handler_tasks` — the tasks of a connection (or of every HTTP session of an app), spawned on the
  running event loop directly: an asyncio task, or a task in one trio nursery with a cancel scope of its own. A
  task is cancelled alone (``notifications/cancelled``) or with all of them, and leaving the block waits for what
  still runs. An anyio task group gives the same with a task state, a cancel scope and a done callback per task,
  none of which a handler needs; anyio works inside these tasks as anywhere.
* :class:`BoundedQueue` — a queue between one writer and one reader with a bound on the items it holds: what an
  HTTP response reads from the logical stream it serves.
* :class:`WriteLock` — a connection's write lock, taken without a pass through the event loop when it is free.
* :func:`continue_in_task` — a coroutine whose first step was taken by hand, run on by the current task.
* :func:`loop_sleep` — the running loop's own ``sleep``, for code that takes several scheduler passes in a row.

Everything here is used in one event loop; none of it is thread-safe.
"""

from __future__ import annotations

import logging
import sys
import types
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from contextvars import Context
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio
import anyio.lowlevel

__all__ = ("BoundedQueue", "HandlerTasks", "WriteLock", "continue_in_task", "loop_sleep", "open_handler_tasks")

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: What :func:`open_handler_tasks` makes while the tests run against the plain reference runner (see
#: :func:`._reference.plain_runner`); ``None`` otherwise.
_reference: Callable[[], HandlerTasks] | None = None


def open_handler_tasks() -> HandlerTasks:
    """The tasks of one owner on the running event loop (to be entered with ``async with``; leaving cancels the
    tasks still running and waits for them, shielded: a handler always gets to clean up).

    A task cancelled before it has started still starts: its handler runs up to its first suspension and is
    cancelled there, as in a task group. On asyncio a task is made with ``asyncio.Task`` itself, not
    ``loop.create_task``: a task factory set on the loop could start a handler before its owner is ready."""
    if _reference is not None:
        return _reference()
    trio = _running_trio()
    if trio is not None:
        return _TrioTasks(trio)
    return _AsyncioTasks()


@types.coroutine
def continue_in_task(coro: Coroutine[Any, Any, T], waits_for: Any, context: Context) -> Generator[Any, Any, T]:
    """Run ``coro`` on in the current task from where its first step, taken by hand in ``context``, left it waiting
    for ``waits_for``: each step in that context, with what the task is sent or thrown, as if the task ran it."""
    while True:
        try:
            try:
                sent = yield waits_for
            except BaseException as exc:
                waits_for = context.run(coro.throw, exc)
            else:
                try:
                    waits_for = context.run(coro.send, sent)
                finally:
                    # (trio sends an outcome: kept here, one holding the exception that ends the coroutine would be
                    # a reference cycle, this frame being in the exception's traceback)
                    del sent
        except StopIteration as end:
            return end.value  # type: ignore[no-any-return]


def loop_sleep() -> Callable[[float], Awaitable[None]]:
    """The running loop's own ``sleep``, whose ``sleep(0)`` is one pass of the scheduler (where a cancellation is
    delivered), for code that takes several in a row."""
    trio = _running_trio()
    if trio is not None:
        return trio.sleep  # type: ignore[no-any-return]
    import asyncio  # loaded already: its loop runs

    return asyncio.sleep


def _running_trio() -> Any:
    """The ``trio`` module when trio runs this code, else None (trio is never imported here if the caller has
    not; one that another thread is importing right now has no ``lowlevel`` yet, and runs nothing here)."""
    trio = sys.modules.get("trio")
    lowlevel = getattr(trio, "lowlevel", None)
    return trio if lowlevel is not None and lowlevel.in_trio_run() else None


class _AsyncioTasks:
    __slots__ = ("_all_cancelled", "_live", "_loop", "_task")

    def __init__(self) -> None:
        import asyncio  # loaded already: its loop runs

        self._loop: Any = asyncio.get_running_loop()
        self._task: Any = asyncio.Task
        self._live: set[Any] = set()  # asyncio itself holds tasks only weakly
        self._all_cancelled = False

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> object:
        """Start ``coro`` in a task on the loop's next pass (cancelled at once after :meth:`cancel_all`, as in a task
        group); returns the token of :meth:`cancel`, and of :meth:`forget`, which ``coro`` calls as it finishes."""
        task = self._task(coro, loop=self._loop, name=name)
        self._live.add(task)
        if self._all_cancelled:
            self.cancel(task)
        return task

    def forget(self, token: object) -> None:
        """The task of ``token`` is finishing (called from its own ``finally``): no need to wait for it."""
        self._live.discard(token)

    def start_soon(self, coro: Coroutine[Any, Any, None], name: str) -> object:
        """Start ``coro`` in a task that does not call :meth:`forget` itself; returns its token. It must not raise;
        what escapes it is logged (on trio it ends the nursery)."""
        task: Any = self.spawn(coro, name)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: Any) -> None:
        self.forget(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("task %r failed", task.get_name(), exc_info=task.exception())

    def cancel(self, token: object) -> None:
        """Cancel the task of ``token``."""
        task: Any = token
        coro = task.get_coro()
        if coro.cr_running or coro.cr_suspended:
            task.cancel()
        else:  # not started: its first step is queued already, and the cancellation must come after it
            self._loop.call_soon(_cancel_unless_done, task)

    def cancel_all(self) -> None:
        self._all_cancelled = True
        for task in list(self._live):
            self.cancel(task)

    async def __aenter__(self) -> _AsyncioTasks:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        live = self._live
        if not live:
            return
        import asyncio

        self.cancel_all()
        with anyio.CancelScope(shield=True):
            while live:
                done, _ = await asyncio.wait(list(live))
                live.difference_update(done)  # (one that never ran its finally, e.g. cancelled by asyncio.run)


def _cancel_unless_done(task: Any) -> None:
    if not task.done():
        task.cancel()


class _TrioTasks:
    __slots__ = ("_manager", "_nursery", "_trio")

    def __init__(self, trio: Any) -> None:
        self._trio = trio
        self._manager = trio.open_nursery()
        self._nursery: Any = None

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> object:
        scope = self._trio.CancelScope()  # (inside the nursery's, which cancel_all cancels)
        self._nursery.start_soon(_in_scope, scope, coro, name=name)
        return scope

    def cancel(self, token: object) -> None:
        scope: Any = token
        scope.cancel()  # a task not started yet runs up to its first checkpoint, as anyio's would

    def cancel_all(self) -> None:
        self._nursery.cancel_scope.cancel()

    def forget(self, token: object) -> None:
        pass  # the nursery keeps track

    def start_soon(self, coro: Coroutine[Any, Any, None], name: str) -> object:
        return self.spawn(coro, name)

    async def __aenter__(self) -> _TrioTasks:
        self._nursery = await self._manager.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self.cancel_all()
        result: bool | None = await self._manager.__aexit__(exc_type, exc, tb)
        return result


async def _in_scope(scope: Any, coro: Coroutine[Any, Any, None]) -> None:
    with scope:
        await coro


#: The tasks of one owner: the same methods on either event loop.
HandlerTasks = _AsyncioTasks | _TrioTasks


class BoundedQueue(Generic[T]):
    """A queue with one writer side and one reader side, holding at most ``size`` items.

    It raises what an anyio memory object stream pair raises — :class:`anyio.WouldBlock` when full (writer) or
    empty (reader), :class:`anyio.EndOfStream` once ended and drained, :class:`anyio.ClosedResourceError` on a
    side used after it closed, :class:`anyio.BrokenResourceError` for a writer whose reader is gone — and costs
    a fraction of one: nothing is made to wait on until somebody waits.
    """

    __slots__ = ("_arrived", "_ended", "_items", "_room", "_size", "closed")

    def __init__(self, size: int) -> None:
        self._items: deque[T] = deque()
        self._size = max(1, size)
        self._ended = False  # the writer's side is closed: the reader gets what is queued, then EndOfStream
        self.closed = False  #: the reader's side is closed (:meth:`close`): the writer's sends fail
        self._arrived: anyio.Event | None = None  # the reader waits for an item
        self._room: anyio.Event | None = None  # writers wait for room

    def __len__(self) -> int:
        return len(self._items)

    # --- the writer's side ---------------------------------------------------------------------------------

    def send_nowait(self, item: T) -> None:
        if self._ended:
            raise anyio.ClosedResourceError
        if self.closed:
            raise anyio.BrokenResourceError
        if len(self._items) >= self._size:
            raise anyio.WouldBlock
        self._items.append(item)
        arrived = self._arrived
        if arrived is not None:
            self._arrived = None
            arrived.set()

    async def send(self, item: T) -> None:
        while True:
            try:
                self.send_nowait(item)
                return
            except anyio.WouldBlock:
                room = self._room
                if room is None:
                    room = self._room = anyio.Event()
                await room.wait()

    def end(self) -> None:
        """No more items: the reader gets what is queued, then :class:`anyio.EndOfStream`."""
        self._ended = True
        self._wake()

    # --- the reader's side ---------------------------------------------------------------------------------

    def receive_nowait(self) -> T:
        if self.closed:
            raise anyio.ClosedResourceError
        items = self._items
        if items:
            item = items.popleft()
            room = self._room
            if room is not None:
                self._room = None
                room.set()
            return item
        if self._ended:
            raise anyio.EndOfStream
        raise anyio.WouldBlock

    async def receive(self) -> T:
        if self._items or self._ended or self.closed:
            return self.receive_nowait()
        # One pass first: a writer that is ready puts its item in that pass, and nothing is made to wait on.
        await anyio.lowlevel.checkpoint()
        while True:
            try:
                return self.receive_nowait()
            except anyio.WouldBlock:
                arrived = self._arrived
                if arrived is None:
                    arrived = self._arrived = anyio.Event()
                await arrived.wait()

    def close(self) -> None:
        """The reader is gone: what is queued is dropped, the writer's sends fail from now on."""
        self.closed = True
        self._items.clear()
        self._wake()

    def _wake(self) -> None:
        for event in (self._arrived, self._room):
            if event is not None:
                event.set()
        self._arrived = self._room = None


class WriteLock:
    """A lock, first come first served, as cheap as can be when it is free (the case of almost every write of a
    connection): nothing is asked of the event loop then, and a waiter's event is made only when somebody waits.
    (``anyio.Lock(fast_acquire=True)`` looks up the current task and checks for a cancellation on every acquisition,
    and ``async with`` costs a coroutine more: docs/performance.md.) A task cancelled while it waits leaves the
    queue, or passes the lock on when it was handed to it meanwhile.
    """

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters: deque[anyio.Event] = deque()

    async def acquire(self) -> None:
        if self._held:
            await self._wait()
        else:
            self._held = True

    def release(self) -> None:
        if self._waiters:
            self._waiters.popleft().set()  # (held still: passed on)
        else:
            self._held = False

    async def _wait(self) -> None:
        turn = anyio.Event()
        self._waiters.append(turn)
        try:
            await turn.wait()  # set by the holder before us: the lock is ours (it stayed held)
        except BaseException:
            if turn.is_set():
                self.release()  # handed to us as we were cancelled: pass it on
            else:
                self._waiters.remove(turn)
            raise
