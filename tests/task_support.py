"""What every task store must do at its bounds, for the tests of each store (tests/test_task_quotas.py, and the
Redis one in tests/test_scale_tasks.py)."""

from __future__ import annotations

import time

from jsonrpc_mcp.mcp import task_state as ts
from jsonrpc_mcp.tasks import ListsTasks, TaskStore


def record(task_id: str, client: str, now: float) -> ts.TaskRecord:
    return ts.new_record(task_id, "", "tools/call", now=now, ttl=60, poll_interval=1, client=client)


async def finish(store: TaskStore, task_id: str, now: float) -> None:
    assert await store.modify(task_id, lambda r: ts.finish(r, "completed", now, result={})) is not None


async def bounded(store: TaskStore) -> None:
    """What every store does at its bounds (two per client, three in all)."""
    now = time.time()
    assert await store.create(record("a1", "a", now), max_per_client=2, max_total=3)
    assert await store.create(record("a2", "a", now), max_per_client=2, max_total=3)
    assert not await store.create(record("a3", "a", now), max_per_client=2, max_total=3)  # both working
    await finish(store, "a2", now + 1)
    await finish(store, "a1", now + 2)
    assert await store.create(record("a3", "a", now), max_per_client=2, max_total=3)
    assert await store.get("a2") is None and await store.get("a1") is not None  # the oldest finished gave way
    assert await store.create(record("b1", "b", now), max_per_client=2, max_total=3)  # (b's own quota)
    assert await store.create(record("c1", "c", now), max_per_client=2, max_total=3)  # a1 gives way: 3 in all
    assert await store.get("a1") is None
    assert not await store.create(record("d1", "d", now), max_per_client=2, max_total=3)  # all three working
    assert [await store.get(t) is not None for t in ("a3", "b1", "c1", "d1")] == [True, True, True, False]
    # A client's tasks, as 2025-11-25's tasks/list reads them: those kept (not those that gave way), oldest first.
    assert isinstance(store, ListsTasks)
    assert await store.create(record("b0", "b", now - 1), max_per_client=2, max_total=None)
    assert [(r.task_id, r.client) for r in await store.owned("b")] == [("b0", "b"), ("b1", "b")]
    assert [r.task_id for r in await store.owned("a")] == ["a3"]
    assert await store.owned("d") == []
