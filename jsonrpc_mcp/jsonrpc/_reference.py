"""The plain reference runner (L3): the dispatcher's scheduling as its simple rule, for the tests only.

The rule: **each handler runs in a task of the connection's task group.** A request that has to wait gets a task
of its own, cancelled alone by ``notifications/cancelled`` (its cancel scope) or with the others when the
connection ends; its answer is written by that task, under the connection's write lock, when it comes. The read
loop reads, takes what it read, and reads again.

:class:`~.dispatch.Dispatcher` is an optimisation of that rule, and behaves the same: the handlers of one read
share a task until one waits, a request on the sync lane (a plain call on a worker thread) has no task, the answers
of the handlers that finish in one pass of the event loop go out in one write, and the tasks are the event loop's
own (:func:`.concurrency.open_handler_tasks`) rather than anyio's. Here none of that: :class:`PlainDispatcher`
overrides only the scheduling, on anyio's task group and cancel scopes (:class:`PlainTasks`); taking a message,
refusing it, answering and failing are the dispatcher's own, shared.

What the two may do differently, and what is therefore *not* the contract (no test asserts it):

* the order in which the answers of one read are written (a peer matches answers by id; JSON-RPC 2.0 §6 allows
  a batch's answers in any order too, and the dispatcher keeps the batch's order anyway) and how many writes
  carry them;
* whether a handler that was begun starts before or after the next handler of the same read (both start once
  the read is taken, without a further read).

The contract, for both: every request gets exactly one answer unless the peer cancelled it; a handler that waits
never holds up another; a cancelled one is cancelled where it waits and is never answered; the bounds on requests
in flight and bytes queued hold; ending the connection cancels what runs and waits for it.

:func:`plain_runner` makes every dispatcher and handler-task set made inside it the plain ones (a class swapped at
construction: the fast path has no branch for it). The tests that run against both (``BOTH_RUNNERS`` of
tests/helpers.py, the ``runner`` fixture of tests/conftest.py), chosen in-process (the CI runs the suite four times):

* tests/test_dispatch.py, all of it: the dispatcher over in-memory streams;
* tests/test_lifecycle.py, all of it: a server session over in-memory pairs and raw frames;
* tests/test_transports.py, but for its stdio servers (subprocesses): the in-memory pair, TCP and Unix sockets;
* tests/test_concurrency.py, the handler tasks;
* tests/test_http_server.py, the tests where handlers wait, answer and are cancelled concurrently (two POST
  streams, a server request answered by POST, cancellation, a duplicate id, batches), on an app of each runner.

A test of what only the fast one does (the writes of one pass, a read's shared task) is marked ``fast_runner``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, cast

import anyio
import anyio.from_thread
import anyio.lowlevel

from . import concurrency, dispatch
from .concurrency import HandlerTasks
from .dispatch import Dispatcher, Pending
from .streams import Outgoing

__all__ = ("PlainDispatcher", "PlainTasks", "plain_runner")


@contextmanager
def plain_runner() -> Iterator[None]:
    """Within the block, every :class:`~.dispatch.Dispatcher` made is a :class:`PlainDispatcher`, and every set of
    handler tasks opened is a :class:`PlainTasks`."""
    dispatch._reference = PlainDispatcher
    concurrency._reference = cast("Callable[[], HandlerTasks]", PlainTasks)
    try:
        yield
    finally:
        dispatch._reference = concurrency._reference = None


class PlainTasks:
    """The tasks of one owner, on an anyio task group: a task each, in a cancel scope of its own (its token). A
    task asked for on another thread (a plain tool on a worker thread that changes the server's tool list) is
    started on the event loop's."""

    def __init__(self) -> None:
        self._group = anyio.create_task_group()
        self._thread = 0
        self._loop: anyio.lowlevel.EventLoopToken | None = None

    async def __aenter__(self) -> HandlerTasks:
        await self._group.__aenter__()
        self._thread = threading.get_ident()
        self._loop = anyio.lowlevel.current_token()
        return cast(HandlerTasks, self)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self.cancel_all()  # (leaving cancels what still runs, and waits for it)
        return await self._group.__aexit__(exc_type, exc, tb)

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> object:
        if threading.get_ident() != self._thread:
            return anyio.from_thread.run_sync(self.spawn, coro, name, token=self._loop)
        scope = anyio.CancelScope()
        self._group.start_soon(_in_scope, scope, coro, name=name)
        return scope

    start_soon = spawn

    def cancel(self, token: object) -> None:
        cast(anyio.CancelScope, token).cancel()

    def cancel_all(self) -> None:
        self._group.cancel_scope.cancel()

    def forget(self, token: object) -> None:
        pass  # the task group keeps track


async def _in_scope(scope: anyio.CancelScope, coro: Coroutine[Any, Any, None]) -> None:
    with scope:
        await coro


class PlainDispatcher(Dispatcher):
    """A :class:`~.dispatch.Dispatcher` whose handlers each run in a task of their own, answered by that task."""

    def _start(self, pending: Pending) -> None:
        self._running += 1
        if self._tasks is None:  # kept until the connection has tasks (use_tasks spawns them)
            if self._next_run is None:
                self._next_run = dispatch._Run()
            self._next_run.append(pending)
        else:
            self._spawn_one(pending)

    def _spawn(self, run: Sequence[Pending]) -> None:
        if self._next_run is run:
            self._next_run = None
        for pending in run:
            self._spawn_one(pending)

    def _spawn_one(self, pending: Pending) -> None:
        tasks = cast(HandlerTasks, self._tasks)
        pending.token = tasks.spawn(self._handle(pending, tasks), dispatch._HANDLER_TASK)
        if pending.cancelled:  # (by the peer before it started: cancelled where it first waits)
            tasks.cancel(pending.token)

    async def _handle(self, pending: Pending, tasks: HandlerTasks) -> None:
        try:
            await self._run_request(pending)
        finally:
            tasks.forget(pending.token)

    async def _reply(self, answer: Outgoing) -> None:
        self._unwritten += len(answer.frame)
        try:
            await self._write((answer,))
        finally:
            self._unwritten -= len(answer.frame)

    async def _read_loop(self) -> None:
        while True:
            await self._wait_for_room()
            try:
                frames = await self.stream.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            await self._take_all(frames)
            del frames
