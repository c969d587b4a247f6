"""Handler tasks of one dispatcher, spawned on the running event loop directly (L3).

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
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio

__all__ = ("HandlerTasks", "open_handler_tasks")

logger = logging.getLogger(__name__)


class HandlerTasks(Protocol):
    """Spawns handler tasks; cancels one, or all when the dispatcher stops."""

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> object:
        """Start ``coro`` in a new task; returns the token :meth:`cancel` takes."""
        ...

    def cancel(self, token: object, still_running: Callable[[], bool]) -> None:
        """Cancel the task of ``token`` while its handler runs; ``still_running`` tells, if the cancellation has
        to wait for the task to start, whether it still applies then."""
        ...

    def cancel_all(self) -> None: ...


class _AsyncioTasks:
    __slots__ = ("_call_soon", "_create", "_done", "_live")

    def __init__(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        self._create = loop.create_task
        self._call_soon = loop.call_soon
        self._live: set[asyncio.Task[None]] = set()  # asyncio itself holds tasks only weakly
        live = self._live

        def done(task: asyncio.Task[None]) -> None:
            live.discard(task)
            if not task.cancelled() and task.exception() is not None:  # pragma: no cover - handlers catch all
                logger.error("handler task failed", exc_info=task.exception())

        self._done = done

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> object:
        task = self._create(coro, name=name)
        self._live.add(task)
        task.add_done_callback(self._done)
        return task

    def cancel(self, token: object, still_running: Callable[[], bool]) -> None:
        task: Any = token
        if _started(task):
            task.cancel()
        else:  # its first step is already queued: this runs after it
            self._call_soon(_cancel_later, task, still_running)

    def cancel_all(self) -> None:
        for task in self._live:
            if _started(task):
                task.cancel()
            else:
                self._call_soon(_cancel_later, task, _always)

    async def wait_all(self) -> None:
        import asyncio

        while self._live:
            await asyncio.wait(list(self._live))


def _cancel_later(task: Any, still_running: Callable[[], bool]) -> None:
    if still_running() and not task.done():
        task.cancel()


def _always() -> bool:
    return True


def _started(task: Any) -> bool:
    """The task's coroutine has begun and not finished (Python 3.11+ coroutines tell ``cr_suspended``)."""
    coro = task.get_coro()
    return bool(coro.cr_running or coro.cr_suspended)


class _TrioTasks:
    __slots__ = ("_nursery", "_trio")

    def __init__(self, nursery: Any, trio: Any) -> None:
        self._nursery = nursery
        self._trio = trio

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> object:
        scope = self._trio.CancelScope()
        self._nursery.start_soon(_in_scope, scope, coro, name=name)
        return scope

    def cancel(self, token: object, still_running: Callable[[], bool]) -> None:
        scope: Any = token
        scope.cancel()  # a task not started yet runs up to its first checkpoint, as anyio's would

    def cancel_all(self) -> None:
        self._nursery.cancel_scope.cancel()


async def _in_scope(scope: Any, coro: Coroutine[Any, Any, None]) -> None:
    with scope:
        await coro


@asynccontextmanager
async def open_handler_tasks() -> AsyncIterator[HandlerTasks]:
    """Handler tasks on the running event loop. On leaving, those still running are cancelled and waited for
    (shielded from an outer cancellation: a handler always gets to run its clean-up)."""
    trio = sys.modules.get("trio")
    if trio is not None and _in_trio(trio):
        async with trio.open_nursery() as nursery:
            tasks = _TrioTasks(nursery, trio)
            try:
                yield tasks
            finally:
                tasks.cancel_all()
        return
    loop_tasks = _AsyncioTasks()
    try:
        yield loop_tasks
    finally:
        loop_tasks.cancel_all()
        with anyio.CancelScope(shield=True):
            await loop_tasks.wait_all()


def _in_trio(trio: Any) -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True
