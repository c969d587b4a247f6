"""The tasks of one dispatcher (and of the HTTP session table), spawned on the running event loop directly (L3).

An anyio task group spawns a task with ~8x the work of the event loop's own primitive (a task state, a cancel
scope, weak references, a done callback that re-checks every scope). A handler task needs none of it: it is
cancelled alone (``notifications/cancelled``) or with the whole connection, and the dispatcher waits for the
ones still running before it returns. :func:`open_handler_tasks` gives exactly that, on whichever event loop
runs: an asyncio task per handler (cancelled through the task), or a task in a trio nursery (cancelled through
a cancel scope of its own). anyio code inside a handler works the same in both: anyio runs in tasks it did
not spawn.

A task cancelled before it has started still starts: its handler runs up to its first suspension and is
cancelled there, as in a task group. (asyncio would otherwise throw into the coroutine before its first line,
where no ``finally`` of ours has begun yet; so that cancellation is put off by one pass of the loop.)

Most dispatchers never spawn a task (sync handlers are answered inline), and every Streamable HTTP session has
a dispatcher: on asyncio nothing is made before the first spawn.

On asyncio a task is made with ``asyncio.Task`` itself, not ``loop.create_task``: a task factory set on the
loop is not used. An eager one (Python 3.12+) would run a handler inside the spawn, before the dispatcher has
registered it; the tasks here always start at the loop's next pass.

:func:`loop_sleep` is the same idea for waiting: the running loop's own ``sleep``, for code that takes several
scheduler passes in a row (``anyio.lowlevel.checkpoint`` finds the event loop again on every call).

:func:`new_signal` is the same idea for waking one task: on asyncio a bare future (an ``anyio.Event`` there wraps
an ``asyncio.Event``, whose queue of waiters is a deque of ~0.7 KiB made with it), on trio an ``anyio.Event``
(trio's own, which is light). An idle connection waits on one all the time.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any

import anyio

__all__ = ("HandlerTasks", "Signal", "loop_sleep", "new_signal", "open_handler_tasks")

logger = logging.getLogger(__name__)


def open_handler_tasks() -> HandlerTasks:
    """The tasks of one connection on the running event loop (to be entered with ``async with``; leaving cancels
    the tasks still running and waits for them, shielded: a handler always gets to clean up)."""
    trio = _running_trio()
    if trio is not None:
        return _TrioTasks(trio)
    return _AsyncioTasks()


def loop_sleep() -> Callable[[float], Awaitable[None]]:
    """The running loop's own ``sleep``, whose ``sleep(0)`` is a checkpoint (a pass of the scheduler, where a
    cancellation is delivered), for a loop that takes several: ``anyio.lowlevel.checkpoint`` looks the event loop
    up again on every call."""
    trio = _running_trio()
    if trio is not None:
        return trio.sleep  # type: ignore[no-any-return]
    import asyncio  # loaded already: its loop runs

    return asyncio.sleep


def new_signal() -> Signal:
    """A wake-up for one task: ``set`` it once; ``wait`` returns once it is set (at once if it is already). A
    waiter cancelled while it waits leaves it usable.

    One waiter at a time: on asyncio the waiters would share the future, and cancelling one would cancel it for
    all. (Where several tasks may wait, an ``anyio.Event`` gives each its own.)"""
    if _running_trio() is not None:
        return anyio.Event()
    import asyncio  # loaded already: its loop runs

    return _FutureSignal(asyncio.get_running_loop())


class _FutureSignal:
    __slots__ = ("_future", "_set")

    def __init__(self, loop: Any) -> None:
        self._future = loop.create_future()
        self._set = False

    def set(self) -> None:
        self._set = True
        future = self._future
        if not future.done():
            future.set_result(None)
        elif future.cancelled():  # its waiter was cancelled: the next wait is to return at once
            future = self._future = future.get_loop().create_future()
            future.set_result(None)

    def is_set(self) -> bool:
        return self._set

    def wait(self) -> Awaitable[None]:
        """The future itself (no coroutine of its own, which an idle connection would hold while it waits)."""
        future = self._future
        if future.cancelled():  # an earlier waiter was cancelled (which cancels the future it awaited)
            future = self._future = future.get_loop().create_future()
        return future  # type: ignore[no-any-return]


def _running_trio() -> Any:
    """The ``trio`` module when trio runs this code, else None (anything else is asyncio; trio is never imported
    here if the caller has not)."""
    trio = sys.modules.get("trio")
    return trio if trio is not None and trio.lowlevel.in_trio_run() else None


class _AsyncioTasks:
    __slots__ = ("_live", "_loop", "_task")

    def __init__(self) -> None:
        self._loop: Any = None
        self._task: Any = None
        self._live: set[Any] | None = None  # asyncio itself holds tasks only weakly

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> object:
        """Start ``coro`` in a new task; returns the token :meth:`cancel` and :meth:`forget` take."""
        live = self._live
        if live is None:
            import asyncio

            self._loop = asyncio.get_running_loop()
            self._task = asyncio.Task
            live = self._live = set()
        task = self._task(coro, loop=self._loop, name=name)
        live.add(task)  # until forget(): a done callback would cost a trip through the loop per task
        return task

    def forget(self, token: object) -> None:
        """The task of ``token`` is finishing (called from its own ``finally``): no need to wait for it."""
        self._live.discard(token)  # type: ignore[union-attr]  # (spawn made it)

    def start_soon(self, coro: Coroutine[Any, Any, None], name: str) -> object:
        """Start ``coro`` in a task that does not call :meth:`forget` (a long-lived one: an HTTP session's); returns
        the token :meth:`cancel` takes. It must not raise; what escapes it is logged (on trio it ends the nursery).
        """
        task: Any = self.spawn(coro, name)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: Any) -> None:
        self.forget(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("task %r failed", task.get_name(), exc_info=task.exception())

    def cancel(self, token: object, still_running: Callable[[], bool] | None = None) -> None:
        """Cancel the task of ``token`` while its handler runs; ``still_running`` tells, if the cancellation has
        to wait for the task to start, whether it still applies then (by default it does)."""
        task: Any = token
        if _started(task):
            task.cancel()
        else:  # its first step is already queued: this runs after it
            self._loop.call_soon(_cancel_later, task, still_running or _always)

    def cancel_all(self) -> None:
        for task in self._live or ():
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


def _started(task: Any) -> bool:
    """The task's coroutine has begun and not finished (Python 3.11+ coroutines tell ``cr_suspended``)."""
    coro = task.get_coro()
    return bool(coro.cr_running or coro.cr_suspended)


def _cancel_later(task: Any, still_running: Callable[[], bool]) -> None:
    if still_running() and not task.done():
        task.cancel()


def _always() -> bool:
    return True


class _TrioTasks:
    __slots__ = ("_manager", "_nursery", "_trio")

    def __init__(self, trio: Any) -> None:
        self._trio = trio
        self._manager = trio.open_nursery()
        self._nursery: Any = None

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> object:
        scope = self._trio.CancelScope()
        self._nursery.start_soon(_in_scope, scope, coro, name=name)
        return scope

    def cancel(self, token: object, still_running: Callable[[], bool] | None = None) -> None:
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


#: The tasks of one connection: the same methods on either event loop.
HandlerTasks = _AsyncioTasks | _TrioTasks

#: What :func:`new_signal` makes: ``set()``, ``is_set()``, ``await wait()``.
Signal = _FutureSignal | anyio.Event
