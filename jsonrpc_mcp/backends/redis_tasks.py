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
* **A task whose worker died is failed, and told.** The worker that created a task runs it, and holds a lease
  in Redis while it lives (renewed by the backend several times per lease); a task still working or waiting for
  input whose worker's lease has lapsed is failed with "The server stopped while the task was running" — by the
  first worker that reads it, or at the latest by the next sweep: every worker looks once per lease period for
  workers whose lease lapsed with tasks still running (one Redis round trip when there are none) and fails those
  tasks, at most :data:`SWEEP_MOST` per sweep. A lease found lapsed while Redis is away, or within a lease after
  it came back, is not taken for a death (a pause, a stop: no worker could renew its lease meanwhile, and those
  that live have renewed theirs by then; so a lease should be several times the backend's command deadline, as
  the defaults are: 10 s and 2 s). The sweep also fails the tasks this living worker
  made and no longer runs (their work ended and its end could not be stored: the worker stopped retrying it,
  stopping). Whichever worker's write wins (a change under ``WATCH``; the others find the task failed already)
  tells the tasks extension (:meth:`RedisTaskStore.tell_stopped`), which publishes ``notifications/tasks`` to the
  listen streams of every worker, once, as for any other change.
* **Bounded**: the tasks of one client, and all the tasks, are counted in sorted sets scored by expiry (working
  ones: never; finished ones leave them as they expire). A task made when its client's set, or the whole, is full
  takes the place of the oldest finished one there (its record is deleted), and is refused when all of them are
  working: one script, atomic across the workers.

Keys: ``{prefix}:task:{id}`` (the record), ``{prefix}:tasks-of:{client digest}`` (the client's tasks, scored by
expiry), ``{prefix}:tasks`` (every task, so scored), ``{prefix}:runner:{id}`` (a worker's lease),
``{prefix}:running:{id}`` (the tasks a worker runs that have not finished), ``{prefix}:runners`` (the workers that
have such tasks).
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..jsonrpc.codes import INTERNAL_ERROR
from ..mcp import task_state as ts
from ..mcp.bus import TaskChanged
from ..mcp.task_state import TaskRecord, is_expired
from ..mcp.task_store import Change, ChangeSignals, listed_order

if TYPE_CHECKING:
    from .redis import RedisBackend

__all__ = ("RedisTaskStore",)

logger = logging.getLogger(__name__)

#: What a task whose worker stopped while it ran says.
STOPPED_MESSAGE: Final = "The server stopped while the task was running"
#: The tasks of stopped workers one sweep fails at most (the rest at the next sweeps).
SWEEP_MOST: Final = 100
_ACTIVE: Final = ("working", "input_required")

#: The workers in ``KEYS[1]`` (a set) whose lease (``ARGV[1]`` + id) lapsed while they had tasks running
#: (``ARGV[2]`` + id, a set); a worker with none left is taken out of the set. One round trip, atomic: a worker
#: that makes a task at the same moment is put back in the set before or after, never lost.
_LAPSED_SCRIPT: Final = """
local lapsed = {}
for _, runner in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1] .. runner) == 0 then
    if redis.call('SCARD', ARGV[2] .. runner) == 0 then
      redis.call('SREM', KEYS[1], runner)
    else
      table.insert(lapsed, runner)
    end
  end
end
return lapsed
"""

#: Make a task, within the bounds. ``KEYS``: the client's set, the set of all, the record's key, the worker's
#: running set, the set of workers, the worker's lease. ``ARGV``: now, the most per client, the most in all (-1: no
#: bound), the task id, the stored record, the lease in milliseconds, the worker, the start of a record's key, "1"
#: when the task is working. Returns 1 when made, 0 when refused. A finished task that gives way leaves both sets
#: (another client's set keeps its id until it expires there: it counts against that client a little longer).
_CREATE_SCRIPT: Final = """
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local function full(set, most)
  return most >= 0 and redis.call('ZCARD', set) >= most
end
local function give_way(set)
  local oldest = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
  if #oldest == 0 or oldest[2] == 'inf' or oldest[2] == '+inf' then
    return false
  end
  redis.call('DEL', ARGV[8] .. oldest[1])
  redis.call('ZREM', KEYS[1], oldest[1])
  redis.call('ZREM', KEYS[2], oldest[1])
  return true
end
if full(KEYS[1], tonumber(ARGV[2])) and not give_way(KEYS[1]) then
  return 0
end
if full(KEYS[2], tonumber(ARGV[3])) and not give_way(KEYS[2]) then
  return 0
end
redis.call('SET', KEYS[6], '1', 'PX', ARGV[6])
redis.call('ZADD', KEYS[1], 'inf', ARGV[4])
redis.call('ZADD', KEYS[2], 'inf', ARGV[4])
redis.call('SET', KEYS[3], ARGV[5])
if ARGV[9] == '1' then
  redis.call('SADD', KEYS[4], ARGV[4])
  redis.call('SADD', KEYS[5], ARGV[7])
end
return 1
"""

#: What is told of a task that the store found failed because its worker stopped.
StoppedListener = Callable[[TaskRecord], Awaitable[None]]


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
    :param lease: seconds a worker's tasks outlive the worker's last sign of life before they read as failed (and
        how often this worker sweeps for the tasks of workers whose lease lapsed).
    """

    def __init__(self, backend: RedisBackend, *, lease: float = 10.0, clock: Callable[[], float] = time.time) -> None:
        if lease <= 0:
            raise ValueError("lease must be positive")
        self.backend = backend
        self.lease = lease
        self.runner = secrets.token_hex(8)
        self._clock = clock
        self._signals = ChangeSignals()
        self._stopped_listeners: list[StoppedListener] = []
        self._running_here: Callable[[str], bool] | None = None
        self._stop_listening: Callable[[], None] | None = backend.on_task_changed(self._signals.changed)
        self._stop_sweeping: Callable[[], None] | None = backend.every(lease, self.sweep, "sweeping for stopped tasks")
        backend.hold_lease(self._lease_key(self.runner), lease)

    def tell_stopped(self, listener: StoppedListener, *, running: Callable[[str], bool] | None = None) -> None:
        """Call ``listener(record)`` with each task this store fails because the worker running it stopped (once
        per task, on the worker whose write won); ``running(task_id)``: does this worker still run a task it
        made? (The sweep fails those it no longer runs.)"""
        self._stopped_listeners.append(listener)
        if running is not None:
            self._running_here = running

    def _key(self, task_id: str) -> str:
        return f"{self.backend.prefix}:task:{task_id}"

    def _owned_key(self, client: str) -> str:
        digest = hashlib.sha256(client.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return f"{self.backend.prefix}:tasks-of:{digest}"

    @property
    def _all_key(self) -> str:
        return f"{self.backend.prefix}:tasks"

    def _lease_key(self, runner: str) -> str:
        return f"{self.backend.prefix}:runner:{runner}"

    def _running_key(self, runner: str) -> str:
        return f"{self.backend.prefix}:running:{runner}"

    @property
    def _runners_key(self) -> str:
        return f"{self.backend.prefix}:runners"

    # --- the TaskStore interface ---------------------------------------------------------------------------

    async def create(self, record: TaskRecord, *, max_per_client: int | None, max_total: int | None = None) -> bool:
        created = await self.backend._call(
            self.backend.client.eval,
            _CREATE_SCRIPT,
            6,
            self._owned_key(record.client),
            self._all_key,
            self._key(record.task_id),
            self._running_key(self.runner),
            self._runners_key,
            self._lease_key(self.runner),
            repr(self._clock()),
            -1 if max_per_client is None else max_per_client,
            -1 if max_total is None else max_total,
            record.task_id,
            _encode(_Stored(self.runner, record)),
            _ms(self.lease),
            self.runner,
            self._key(""),
            "1" if record.status in _ACTIVE else "0",
        )
        return bool(created)

    async def get(self, task_id: str) -> TaskRecord | None:
        raw = await self.backend._call(self.backend.client.get, self._key(task_id))
        if raw is None:
            return None
        stored = _decode(raw)
        if is_expired(stored.record, self._clock()):
            return None
        if stored.record.status in _ACTIVE and stored.runner != self.runner and not await self._alive(stored.runner):
            record, _ = await self._fail_stopped(task_id)
            return record
        return stored.record

    async def modify(self, task_id: str, change: Change) -> TaskRecord | None:
        record, _ = await self._modify(task_id, change)
        return record

    async def _modify(self, task_id: str, change: Change) -> tuple[TaskRecord | None, bool]:
        """:meth:`modify`, and whether this call wrote the change (``False``: the change left it as it was)."""
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
                pipe.zadd(self._owned_key(changed.client), {task_id: _score(changed)}, xx=True)
                pipe.zadd(self._all_key, {task_id: _score(changed)}, xx=True)
            if changed.status not in _ACTIVE:
                pipe.srem(self._running_key(stored.runner), task_id)
            outcome[:] = [changed, True]

        await self.backend._call(self.backend.client.transaction, attempt, key)
        record, changed = outcome
        if changed:
            self._signals.changed(task_id)
            await self.backend.publish(TaskChanged(task_id))
        return record, changed

    async def wait(self, task_id: str, after_version: int, timeout: float) -> TaskRecord | None:
        return await self._signals.wait(lambda: self.get(task_id), task_id, after_version, timeout)

    async def owned(self, client: str) -> list[TaskRecord]:
        """The client's tasks from its set (those not expired: working ones score ``inf``), whichever worker made
        them; two round trips. A task running on another worker is read as :meth:`get` reads it (failed if its
        worker died)."""
        redis = self.backend.client
        now = self._clock()
        ids = [
            i.decode()
            for i in await self.backend._call(redis.zrangebyscore, self._owned_key(client), f"({now!r}", "+inf")
        ]
        if not ids:
            return []
        raws = await self.backend._call(redis.mget, [self._key(task_id) for task_id in ids])
        records: list[TaskRecord] = []
        for task_id, raw in zip(ids, raws, strict=True):
            if raw is None:
                continue
            stored = _decode(raw)
            record: TaskRecord | None = stored.record
            if is_expired(stored.record, now):
                continue
            if stored.record.status in _ACTIVE and stored.runner != self.runner:
                record = await self.get(task_id)
            if record is not None and record.client == client:
                records.append(record)
        return sorted(records, key=listed_order)

    async def aclose(self) -> None:
        """Stop listening and let this worker's lease lapse (its tasks still running read as failed after it)."""
        self._signals.release_all()
        if self._stop_listening is not None:
            self._stop_listening()
            self._stop_listening = None
        if self._stop_sweeping is not None:
            self._stop_sweeping()
            self._stop_sweeping = None
        self.backend.drop_lease(self._lease_key(self.runner))

    # --- the workers' leases -------------------------------------------------------------------------------

    async def _alive(self, runner: str) -> bool:
        """Does ``runner`` live? Its lease is set; or it may (:meth:`_lapsed`)."""
        present = bool(await self.backend._call(self.backend.client.exists, self._lease_key(runner)))
        return not self._lapsed(present)

    def _lapsed(self, present: bool) -> bool:
        """Is a worker whose lease is ``present`` (or not) gone? Not while Redis is away, nor for a lease after this
        worker saw it come back: meanwhile no worker could renew its lease, and those that live renew theirs
        within a lease (several times a lease, each renewal waiting the Redis deadline at most)."""
        return not present and not self.backend.back_within(self.lease)

    async def sweep(self) -> int:
        """Fail the tasks still running of the workers whose lease lapsed (at most :data:`SWEEP_MOST`), each told
        as :meth:`tell_stopped` says; how many this call failed. The backend runs it once per lease period; one
        Redis round trip when no worker's lease lapsed with tasks running."""
        client = self.backend.client
        found = await self.backend._call(
            client.eval, _LAPSED_SCRIPT, 1, self._runners_key, self._lease_key(""), self._running_key("")
        )
        failed, left = await self._sweep_here(SWEEP_MOST)
        for raw in found:
            if left <= 0:
                break
            runner = raw.decode()
            if runner == self.runner or not self._lapsed(False):
                continue  # (this worker lives; the others' leases may have lapsed in an outage, see _lapsed)
            running = self._running_key(runner)
            task_ids = await self.backend._call(client.srandmember, running, left)
            for task in task_ids:
                task_id = task.decode()
                left -= 1
                record, changed = await self._fail_stopped(task_id)
                if record is None or record.status not in _ACTIVE:
                    await self.backend._call(client.srem, running, task_id)  # (finished, or gone)
                failed += changed
        return failed

    async def _sweep_here(self, most: int) -> tuple[int, int]:
        """Fail the tasks this worker made, still running in Redis, that it no longer runs (at most ``most``):
        how many this call failed, and how many more the sweep may fail."""
        running = self._running_here
        if running is None:
            return 0, most
        client = self.backend.client
        mine = self._running_key(self.runner)
        failed = 0
        for task in await self.backend._call(client.smembers, mine):
            task_id = task.decode()
            if most <= 0:
                break
            if running(task_id):
                continue
            most -= 1
            record, changed = await self._fail_stopped(task_id)
            if record is None or record.status not in _ACTIVE:
                await self.backend._call(client.srem, mine, task_id)
            failed += changed
        return failed, most

    async def _fail_stopped(self, task_id: str) -> tuple[TaskRecord | None, bool]:
        """Fail a task whose worker stopped (the record as it then is, and whether this call failed it); the
        worker whose write wins tells the listeners."""
        record, changed = await self._modify(task_id, self._stopped)
        if changed and record is not None:
            for listener in list(self._stopped_listeners):
                try:
                    await listener(record)
                except Exception as exc:
                    logger.error("telling that task %s failed did not work (%s)", task_id, type(exc).__name__)
        return record, changed

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
