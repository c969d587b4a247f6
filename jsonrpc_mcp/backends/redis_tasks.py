"""Tasks kept in Redis, shared by every worker of a :class:`~jsonrpc_mcp.backends.redis.RedisBackend` (L6; the
``redis`` extra).

::

    app = McpAsgiApp(server, backend="redis://localhost:6379/0")  # a Tasks() given no store takes this one

Any worker answers ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` for a task that another worker runs: the
record lives in Redis, a change is made under ``WATCH`` (read, change, write, retried when another worker wrote
in between), and :class:`~jsonrpc_mcp.mcp.bus.TaskChanged` on the backend's bus wakes the worker waiting for it
(an input that arrived, a cancellation).

What it promises, as the other stores do:

* **A task is there before its CreateTaskResult is sent**, and a finished one is kept ``ttl`` seconds (Redis
  expires the key).
* **A task whose worker died reads as failed.** The worker that created a task runs it, and holds a lease in
  Redis while it lives (renewed by the backend's bus loop); a task still working or waiting for input whose
  worker's lease has lapsed is failed with "The server stopped while the task was running" when it is next read.
* **Bounded**: the tasks of one owner are counted in a sorted set (finished ones leave it as they expire).

Keys: ``{prefix}:task:{id}`` (the record), ``{prefix}:tasks-of:{owner digest}`` (the owner's tasks, scored by
expiry), ``{prefix}:runner:{id}`` (a worker's lease).
"""

from __future__ import annotations

import hashlib
import math
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..jsonrpc.codes import INTERNAL_ERROR
from ..mcp import task_state as ts
from ..mcp.bus import TaskChanged
from ..mcp.task_state import TaskRecord, is_expired
from ..mcp.task_store import Change, ChangeSignals

if TYPE_CHECKING:
    from .redis import RedisBackend

__all__ = ("RedisTaskStore",)

#: What a task whose worker stopped while it ran says.
STOPPED_MESSAGE: Final = "The server stopped while the task was running"
_ACTIVE: Final = ("working", "input_required")


class _Stored(msgspec.Struct):
    """A task as it is kept: its record, and the worker that runs it."""

    runner: str
    record: TaskRecord


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(_Stored).decode


class RedisTaskStore:
    """A :class:`~jsonrpc_mcp.mcp.task_store.TaskStore` in the Redis of ``backend``.

    :param backend: the :class:`~jsonrpc_mcp.backends.redis.RedisBackend` of the app (its connections, its key
        prefix, its bus; the app runs it).
    :param lease: seconds a worker's tasks outlive the worker's last sign of life before they read as failed.
    """

    def __init__(self, backend: RedisBackend, *, lease: float = 10.0, clock: Callable[[], float] = time.time) -> None:
        if lease <= 0:
            raise ValueError("lease must be positive")
        self.backend = backend
        self.lease = lease
        self.runner = secrets.token_hex(8)
        self._clock = clock
        self._signals = ChangeSignals()
        self._stop_listening: Callable[[], None] | None = backend.on_task_changed(self._signals.changed)
        backend.hold_lease(self._lease_key(self.runner), lease)

    def _key(self, task_id: str) -> str:
        return f"{self.backend.prefix}:task:{task_id}"

    def _owned_key(self, owner: str) -> str:
        digest = hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return f"{self.backend.prefix}:tasks-of:{digest}"

    def _lease_key(self, runner: str) -> str:
        return f"{self.backend.prefix}:runner:{runner}"

    # --- the TaskStore interface ---------------------------------------------------------------------------

    async def create(self, record: TaskRecord, *, max_per_owner: int | None) -> bool:
        client = self.backend.client
        owned = self._owned_key(record.owner)
        await self.backend._call(client.zremrangebyscore, owned, "-inf", self._clock())  # the expired ones

        async def attempt(pipe: Any) -> bool:
            if max_per_owner is not None and await pipe.zcard(owned) >= max_per_owner:
                return False
            pipe.multi()
            pipe.set(self._lease_key(self.runner), b"1", px=_ms(self.lease))
            pipe.zadd(owned, {record.task_id: _score(record)})
            pipe.set(self._key(record.task_id), _encode(_Stored(self.runner, record)), **_expiry(record))
            return True

        created: bool = await self.backend._call(client.transaction, attempt, owned, value_from_callable=True)
        return created

    async def get(self, task_id: str) -> TaskRecord | None:
        raw = await self.backend._call(self.backend.client.get, self._key(task_id))
        if raw is None:
            return None
        stored = _decode(raw)
        if is_expired(stored.record, self._clock()):
            return None
        if stored.record.status in _ACTIVE and stored.runner != self.runner and not await self._alive(stored.runner):
            return await self.modify(task_id, self._stopped)
        return stored.record

    async def modify(self, task_id: str, change: Change) -> TaskRecord | None:
        key = self._key(task_id)
        outcome: list[Any] = [None, False]

        async def attempt(pipe: Any) -> None:
            outcome[:] = [None, False]
            raw = await pipe.get(key)
            if raw is None:
                return
            stored = _decode(raw)
            if is_expired(stored.record, self._clock()):
                return
            changed = change(stored.record)
            if changed is None:
                outcome[0] = stored.record
                return
            pipe.multi()
            pipe.set(key, _encode(_Stored(stored.runner, changed)), **_expiry(changed))
            if changed.expires_at is not None:
                pipe.zadd(self._owned_key(changed.owner), {task_id: _score(changed)})
            outcome[:] = [changed, True]

        await self.backend._call(self.backend.client.transaction, attempt, key)
        record, changed = outcome
        if changed:
            self._signals.changed(task_id)
            await self.backend.publish(TaskChanged(task_id))
        return record  # type: ignore[no-any-return]

    async def wait(self, task_id: str, after_version: int, timeout: float) -> TaskRecord | None:
        return await self._signals.wait(lambda: self.get(task_id), task_id, after_version, timeout)

    async def aclose(self) -> None:
        """Stop listening and let this worker's lease lapse (its tasks still running read as failed after it)."""
        self._signals.release_all()
        if self._stop_listening is not None:
            self._stop_listening()
            self._stop_listening = None
        self.backend.drop_lease(self._lease_key(self.runner))

    # --- the workers' leases -------------------------------------------------------------------------------

    async def _alive(self, runner: str) -> bool:
        return bool(await self.backend._call(self.backend.client.exists, self._lease_key(runner)))

    def _stopped(self, record: TaskRecord) -> TaskRecord | None:
        error = {"code": INTERNAL_ERROR, "message": STOPPED_MESSAGE}
        return ts.finish(record, "failed", self._clock(), error=error, message=STOPPED_MESSAGE)


def _score(record: TaskRecord) -> float:
    """Where a task sits in its owner's set: its expiry (running ones: never)."""
    return math.inf if record.expires_at is None else record.expires_at


def _expiry(record: TaskRecord) -> dict[str, Any]:
    """The SET options that make Redis forget a finished task when it expires."""
    if record.expires_at is None:
        return {}
    return {"pxat": max(1, math.ceil(record.expires_at * 1000))}


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))
