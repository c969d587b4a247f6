"""Where tasks are kept: the :class:`TaskStore` interface, and the in-memory store (L5).

A store keeps :class:`~jsonrpc_mcp.mcp.task_state.TaskRecord` values by task id, and nothing more: the rules of
a task's life are pure functions of a record (:mod:`.task_state`) that the tasks extension hands to
:meth:`TaskStore.modify`, which applies one atomically. Five async methods, so that a store shared by several
processes (Redis: a read-change-write under ``WATCH``, and pub/sub for :meth:`TaskStore.wait`) implements the same
interface as the in-memory one:

* :meth:`~TaskStore.create` — the task exists from now on (a ``tasks/get`` finds it: the extension's "durably
  created" before the ``CreateTaskResult`` is sent), unless its client already has ``max_per_client`` tasks
  kept, or the store ``max_total``, none of them finished (the oldest finished one gives way first);
* :meth:`~TaskStore.get` — the record, or ``None`` (unknown, or expired: a finished task is kept ``ttl`` seconds
  after it finished, then it is gone);
* :meth:`~TaskStore.modify` — apply a change atomically;
* :meth:`~TaskStore.wait` — until the record changes (an answer arrived, a cancellation was asked), or a timeout;
* :meth:`~TaskStore.aclose`;

and, as :class:`ListsTasks`, :meth:`~ListsTasks.owned` (a client's tasks, for 2025-11-25's ``tasks/list``).

:class:`MemoryTaskStore` is the default: bounded by the clients' and the total limits, expired tasks dropped as
they are met and swept as new ones are made. It lives and dies with the process. The SQLite store
(:class:`jsonrpc_mcp.storage.sqlite_tasks.SqliteTaskStore`) keeps tasks across restarts.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

import anyio

from .task_state import TaskRecord, is_expired

__all__ = ("TaskStore", "ListsTasks", "TellsStopped", "MemoryTaskStore", "Change", "ChangeSignals", "listed_order")

#: A change of a record: the new record, or ``None`` to leave it as it is.
Change = Callable[[TaskRecord], "TaskRecord | None"]


@runtime_checkable
class TaskStore(Protocol):
    """Keeps tasks by id. Every method may be called concurrently from tasks of one event loop."""

    async def create(self, record: TaskRecord, *, max_per_client: int | None, max_total: int | None = None) -> bool:
        """Keep a new task. When its client (``record.client``) already has ``max_per_client`` tasks that have
        not expired, or the store ``max_total``, the oldest finished one among them is dropped to make room;
        ``False`` (and nothing kept, nothing dropped) when all of them are working. Once this returns ``True``,
        :meth:`get` finds the task, from any process sharing the store."""
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task, or ``None`` when it is unknown or has expired."""
        ...

    async def modify(self, task_id: str, change: Change) -> TaskRecord | None:
        """Apply ``change`` to the task atomically (no other change comes between its read and its write) and
        return the record as it then is; ``None`` when the task is unknown or has expired. A change that returns
        ``None`` writes nothing."""
        ...

    async def wait(self, task_id: str, after_version: int, timeout: float) -> TaskRecord | None:
        """The task once its ``version`` is past ``after_version``, or as it is when ``timeout`` seconds have
        passed; ``None`` when it is gone."""
        ...

    async def aclose(self) -> None:
        """Release what the store holds (a file, a connection)."""
        ...


@runtime_checkable
class ListsTasks(Protocol):
    """A store that lists a client's tasks (every store here does): what 2025-11-25's ``tasks/list`` reads, from
    every process sharing the store. Without it, ``tasks/list`` lists the tasks this process made."""

    async def owned(self, client: str) -> list[TaskRecord]:
        """The tasks kept for ``client`` (:attr:`TaskRecord.client`) that have not expired, oldest first (by
        :func:`listed_order`); at most the ``max_per_client`` of their :meth:`TaskStore.create`."""
        ...


def listed_order(record: TaskRecord) -> tuple[float, str]:
    """The order in which a client's tasks are listed: by creation (the task id settling a tie)."""
    return (record.created_at, record.task_id)


@runtime_checkable
class TellsStopped(Protocol):
    """A store that fails a task by itself when it finds that the process running it stopped (one shared by
    several workers: :class:`~jsonrpc_mcp.backends.redis_tasks.RedisTaskStore`), or that this process no longer
    runs it (its end could not be stored), and tells of it."""

    def tell_stopped(
        self, listener: Callable[[TaskRecord], Awaitable[None]], *, running: Callable[[str], bool] | None = None
    ) -> None:
        """Call ``listener(record)`` with each task the store fails so (once per task); ``running(task_id)``
        says whether this process still runs a task it made (one it no longer runs, still working in the store,
        is failed too)."""
        ...


class ChangeSignals:
    """Who waits for which task to change, in this process: what :meth:`TaskStore.wait` needs of a store that
    hears of every change (made here: in memory, or a file one process owns; or told by the other workers)."""

    def __init__(self) -> None:
        self._waiters: dict[str, list[anyio.Event]] = {}

    def listen(self, task_id: str) -> anyio.Event:
        """An event set at the next change of ``task_id`` (call :meth:`forget` when no longer waiting)."""
        event = anyio.Event()
        self._waiters.setdefault(task_id, []).append(event)
        return event

    def forget(self, task_id: str, event: anyio.Event) -> None:
        waiting = self._waiters.get(task_id)
        if waiting is not None and event in waiting:
            waiting.remove(event)
            if not waiting:
                del self._waiters[task_id]

    def changed(self, task_id: str) -> None:
        for event in self._waiters.pop(task_id, ()):
            event.set()

    def release_all(self) -> None:
        for events in self._waiters.values():
            for event in events:
                event.set()
        self._waiters.clear()

    async def wait(
        self, read: Callable[[], Awaitable[TaskRecord | None]], task_id: str, after_version: int, timeout: float
    ) -> TaskRecord | None:
        """:meth:`TaskStore.wait` for a store that calls :meth:`changed` at each change (``read`` reads the
        record): listening starts before the first read, so a change made meanwhile still wakes it."""
        event = self.listen(task_id)
        try:
            record = await read()
            if record is None or record.version > after_version:
                return record
            with anyio.move_on_after(timeout):
                await event.wait()
        finally:
            self.forget(task_id, event)
        return await read()


class MemoryTaskStore:
    """Tasks in this process's memory (the default store): fast, and gone with the process."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._records: dict[str, TaskRecord] = {}
        self._owned: dict[str, set[str]] = {}
        self._expiries: list[tuple[float, str]] = []  # a heap of (expires_at, task id) of finished tasks
        self._signals = ChangeSignals()

    def __len__(self) -> int:
        return len(self._records)

    async def create(self, record: TaskRecord, *, max_per_client: int | None, max_total: int | None = None) -> bool:
        self._sweep()
        owned = self._owned.get(record.client, set())
        if max_per_client is not None and len(owned) >= max_per_client:
            finished = [self._records[t] for t in owned if self._records[t].expires_at is not None]
            if not finished:
                return False
            self._drop(min(finished, key=_finished_at).task_id)
        if max_total is not None and len(self._records) >= max_total:
            oldest = self._oldest_finished()
            if oldest is None:
                return False
            self._drop(oldest)
        self._records[record.task_id] = record
        self._owned.setdefault(record.client, set()).add(record.task_id)
        return True

    async def get(self, task_id: str) -> TaskRecord | None:
        return self._live(task_id)

    async def modify(self, task_id: str, change: Change) -> TaskRecord | None:
        record = self._live(task_id)
        if record is None:
            return None
        changed = change(record)
        if changed is None:
            return record
        self._records[task_id] = changed
        if changed.expires_at is not None and record.expires_at is None:
            heapq.heappush(self._expiries, (changed.expires_at, task_id))
        self._signals.changed(task_id)
        return changed

    async def wait(self, task_id: str, after_version: int, timeout: float) -> TaskRecord | None:
        record = self._live(task_id)
        if record is None or record.version > after_version:
            return record
        event = self._signals.listen(task_id)
        try:
            with anyio.move_on_after(timeout):
                await event.wait()
        finally:
            self._signals.forget(task_id, event)
        return self._live(task_id)

    async def owned(self, client: str) -> list[TaskRecord]:
        found = (self._live(task_id) for task_id in list(self._owned.get(client, ())))
        return sorted((record for record in found if record is not None), key=listed_order)

    async def aclose(self) -> None:
        self._signals.release_all()

    def _live(self, task_id: str) -> TaskRecord | None:
        record = self._records.get(task_id)
        if record is not None and is_expired(record, self._clock()):
            self._drop(task_id)
            return None
        return record

    def _drop(self, task_id: str) -> None:
        record = self._records.pop(task_id, None)
        if record is None:
            return
        owned = self._owned.get(record.client)
        if owned is not None:
            owned.discard(task_id)
            if not owned:
                del self._owned[record.client]

    def _oldest_finished(self) -> str | None:
        """The finished task that expires first (the one that finished first), if any."""
        heap = self._expiries
        while heap:
            expires_at, task_id = heap[0]
            record = self._records.get(task_id)
            if record is not None and record.expires_at == expires_at:
                return task_id
            heapq.heappop(heap)  # (gone already)
        return None

    def _sweep(self) -> None:
        """Drop the finished tasks whose time is up (those nobody asked about since)."""
        now = self._clock()
        heap = self._expiries
        while heap and heap[0][0] <= now:
            _, task_id = heapq.heappop(heap)
            record = self._records.get(task_id)
            if record is not None and is_expired(record, now):
                self._drop(task_id)


def _finished_at(record: TaskRecord) -> float:
    """When a finished task expires: the order in which finished tasks give way (with one ``ttl``, the order in
    which they finished)."""
    assert record.expires_at is not None
    return record.expires_at
