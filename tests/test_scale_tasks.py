"""Tasks (io.modelcontextprotocol/tasks) with several workers sharing a real Redis: a task that one worker runs is
read, answered and cancelled through another (jsonrpc_mcp.backends.redis_tasks). The workers are those of
tests/scale_support.py; a task that waits does so until the test acts, never for a time."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from helpers import PrincipalStream
from redis_support import RedisProcess, own_redis, prefix, redis_server, redis_url  # noqa: F401 (fixtures)
from scale_support import TIMEOUT, Workers, call_v5, redis_app, workers_fixture
from scale_support import http as http
from task_support import bounded

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp.auth import AccessToken
from jsonrpc_mcp.backends.redis import RedisBackend
from jsonrpc_mcp.backends.redis_tasks import STOPPED_MESSAGE, RedisTaskStore
from jsonrpc_mcp.errors import Unavailable
from jsonrpc_mcp.mcp import task_state as ts
from jsonrpc_mcp.tasks import MemoryTaskStore, Tasks
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.memory import MemoryMessageStream

pytestmark = pytest.mark.anyio

TASKS = "io.modelcontextprotocol/tasks"
CAPS = {"elicitation": {}, "extensions": {TASKS: {}}}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def worker(started: threading.Event, stopped: threading.Event) -> Server:
    server = Server("scaled-tasks", "1.0", extensions=[Tasks(poll_interval=0.1)])

    @server.tool(task="optional")
    async def wait(ctx: Context) -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return "never"

    @server.tool(task="optional")
    async def ask_name(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", NAME, key="name")
        return f"Hello, {(answer.content or {}).get('name')}!"

    return server


class TaskWorkers(Workers):
    """Two workers sharing the Redis at ``url``; ``started`` and ``stopped`` tell of the ``wait`` tool on either."""

    def __init__(self, url: str, key_prefix: str) -> None:
        self.started, self.stopped = threading.Event(), threading.Event()
        super().__init__(redis_app(worker(self.started, self.stopped), url, key_prefix) for _ in range(2))

    async def call(self, http: httpx.AsyncClient, i: int, method: str, params: dict[str, Any]) -> Any:
        reply = await call_v5(http, self.url(i), method, params, CAPS)
        assert "result" in reply, reply
        return reply["result"]

    async def until(self, http: httpx.AsyncClient, i: int, task_id: str, status: str) -> Any:
        """``tasks/get`` on worker ``i`` until the task has ``status`` (each answer a round trip)."""
        with anyio.fail_after(TIMEOUT):
            while True:
                task = await self.call(http, i, "tasks/get", {"taskId": task_id})
                if task["status"] == status:
                    return task
                assert task["status"] in ("working", "input_required"), task


workers = workers_fixture(TaskWorkers)


def test_a_tasks_extension_given_no_store_keeps_its_tasks_in_the_backend(redis_url: str, prefix: str) -> None:  # noqa: F811
    given, default = Tasks(MemoryTaskStore()), Tasks()
    for tasks in (given, default):
        McpAsgiApp(Server("s", "1", extensions=[tasks]), backend=RedisBackend(redis_url, prefix=prefix))
    assert type(given.store) is MemoryTaskStore  # a store chosen is kept
    assert type(default.store) is RedisTaskStore


async def test_a_task_run_by_one_worker_is_cancelled_through_the_other(workers: TaskWorkers, http: Any) -> None:
    created = await workers.call(http, 0, "tools/call", {"name": "wait", "arguments": {}})
    task_id = created["taskId"]
    assert created["resultType"] == "task"
    assert await anyio.to_thread.run_sync(workers.started.wait, TIMEOUT)
    assert (await workers.call(http, 1, "tasks/get", {"taskId": task_id}))["status"] == "working"
    ack = await workers.call(http, 1, "tasks/cancel", {"taskId": task_id})
    assert ack["resultType"] == "complete"
    await workers.until(http, 1, task_id, "cancelled")
    assert await anyio.to_thread.run_sync(workers.stopped.wait, TIMEOUT)  # the work itself stopped, on worker 0


async def test_a_task_asks_on_one_worker_and_is_answered_through_the_other(workers: TaskWorkers, http: Any) -> None:
    task_id = (await workers.call(http, 0, "tools/call", {"name": "ask_name", "arguments": {}}))["taskId"]
    asking = await workers.until(http, 1, task_id, "input_required")
    assert asking["inputRequests"]["name"]["params"]["message"] == "Your name?"
    answer = {"action": "accept", "content": {"name": "Ada"}}
    await workers.call(http, 1, "tasks/update", {"taskId": task_id, "inputResponses": {"name": answer}})
    done = await workers.until(http, 1, task_id, "completed")
    assert done["result"]["content"][0]["text"] == "Hello, Ada!"
    assert (await workers.call(http, 0, "tasks/get", {"taskId": task_id}))["status"] == "completed"


async def test_the_store_bounds_a_client_across_workers_and_fails_the_tasks_of_a_worker_that_died(
    redis_url: str,  # noqa: F811
    prefix: str,  # noqa: F811
) -> None:
    async def scenario() -> None:  # redis-py's asyncio client: on an asyncio loop of its own
        one, two = RedisBackend(redis_url, prefix=prefix), RedisBackend(redis_url, prefix=prefix)
        first, second = one.task_store(), two.task_store()

        async def deliver(event: Any) -> None:
            pass

        def record(task_id: str) -> ts.TaskRecord:
            return ts.new_record(task_id, "alice", "tools/call", now=time.time(), ttl=60, poll_interval=1)

        async with anyio.create_task_group() as tg:
            await tg.start(one.run, deliver)
            await tg.start(two.run, deliver)
            assert await first.create(record("t1"), max_per_client=1)
            assert not await second.create(record("t2"), max_per_client=1)  # alice has one task kept already
            assert await second.get("t2") is None
            assert (await second.get("t1")).status == "working"  # type: ignore[union-attr]

            seen = (await first.get("t1")).version  # type: ignore[union-attr]
            woken = anyio.Event()

            async def waits() -> None:
                changed = await first.wait("t1", seen, TIMEOUT)  # on the first worker, told through the bus
                assert changed is not None and changed.cancel_requested
                woken.set()

            tg.start_soon(waits)
            await second.modify("t1", lambda r: ts.request_cancel(r, time.time()))
            with anyio.fail_after(TIMEOUT):
                await woken.wait()

            await first.aclose()  # the first worker is gone: its lease lapses (here at once)
            await one.client.delete(f"{prefix}:runner:{first.runner}")
            failed = await second.get("t1")
            assert failed is not None and failed.status == "failed"
            assert failed.status_message == STOPPED_MESSAGE
            assert await second.create(record("t3"), max_per_client=2)  # a failed task counts until it expires,
            assert await second.create(record("t4"), max_per_client=2)  # or gives way to a new one
            assert await second.get("t1") is None
            assert not await second.create(record("t5"), max_per_client=2)  # (two working)
            tg.cancel_scope.cancel()
        await one.aclose()
        await two.aclose()

    await anyio.to_thread.run_sync(lambda: anyio.run(scenario, backend="asyncio"))


async def test_the_redis_store_keeps_the_bounds_of_every_store(redis_url: str, prefix: str) -> None:  # noqa: F811
    async def scenario() -> None:  # redis-py's asyncio client: on an asyncio loop of its own
        backend = RedisBackend(redis_url, prefix=prefix)
        store = RedisTaskStore(backend)
        try:
            await bounded(store)
        finally:
            await store.aclose()
            await backend.aclose()

    await anyio.to_thread.run_sync(lambda: anyio.run(scenario, backend="asyncio"))


async def test_a_sweep_while_redis_is_away_is_logged_and_the_worker_sweeps_again_once_it_is_back(
    own_redis: RedisProcess,  # noqa: F811
    prefix: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:  # redis-py's asyncio client: on an asyncio loop of its own
        living, dead = (
            RedisBackend(own_redis.url, prefix=prefix, timeout=1.0),
            RedisBackend(own_redis.url, prefix=prefix),
        )
        store, dead_store = RedisTaskStore(living, lease=0.3), RedisTaskStore(dead, lease=60)
        told: list[ts.TaskRecord] = []
        missed, failed = anyio.Event(), anyio.Event()

        async def tell(record: ts.TaskRecord) -> None:
            told.append(record)
            failed.set()

        store.tell_stopped(tell)

        async def sweep() -> None:  # (the store's own sweep, run by the backend as the store's is, and watched)
            try:
                await store.sweep()
            except Unavailable:
                missed.set()
                raise

        living.every(0.3, sweep, "the watched sweep")
        record = ts.new_record("t1", "alice", "tools/call", now=time.time(), ttl=60, poll_interval=1)

        async def deliver(event: Any) -> None:
            pass

        async with anyio.create_task_group() as tg:
            await tg.start(living.run, deliver)
            own_redis.stop()
            with anyio.fail_after(TIMEOUT):
                await missed.wait()  # a sweep met no Redis: the worker goes on
            own_redis.start()  # (empty: nothing is saved)
            assert await dead_store.create(record, max_per_client=None)
            await dead.client.delete(f"{prefix}:runner:{dead_store.runner}")  # its worker died
            with anyio.fail_after(TIMEOUT):
                await failed.wait()
            tg.cancel_scope.cancel()
        await living.aclose()
        await dead.aclose()
        assert [(r.task_id, r.status, r.status_message) for r in told] == [("t1", "failed", STOPPED_MESSAGE)]

    await anyio.to_thread.run_sync(lambda: anyio.run(scenario, backend="asyncio"))
    lines = [r for r in caplog.records if r.name.startswith("jsonrpc_mcp")]
    assert any("cannot be reached" in r.getMessage() for r in lines)
    assert all(r.exc_info is None for r in lines)  # (one line per outage, no traceback)


@asynccontextmanager
async def _client_as(server: Server, subject: str) -> AsyncIterator[Client]:
    """Our 2025-11-25 client, authenticated as ``subject`` by its transport, served by ``server``."""
    send_a, receive_a = anyio.create_memory_object_stream[bytes](64)
    send_b, receive_b = anyio.create_memory_object_stream[bytes](64)
    theirs = PrincipalStream(send_a, receive_b)
    theirs.principal = AccessToken(subject=subject, client_id="c")
    async with send_a, receive_a, send_b, receive_b, anyio.create_task_group() as tg:
        tg.start_soon(server.serve, theirs)
        async with Client.connect(MemoryMessageStream(send_b, receive_a), protocol_version="2025-11-25") as client:
            yield client
        tg.cancel_scope.cancel()


async def test_tasks_list_holds_the_requestors_tasks_made_by_every_worker(redis_url: str, prefix: str) -> None:  # noqa: F811
    """2025-11-25: two servers sharing one Redis (two workers, in one process): ``tasks/list`` on either lists
    every task of the requestor's principal, whichever made it, page by page, and nobody else's."""

    async def scenario() -> None:  # redis-py's asyncio client: on an asyncio loop of its own
        backends = [RedisBackend(redis_url, prefix=prefix) for _ in range(2)]
        stores = [RedisTaskStore(backend) for backend in backends]
        servers = [Server(f"worker-{i}", "1", extensions=[Tasks(store)], page_size=1) for i, store in enumerate(stores)]
        for server in servers:

            @server.tool(task="required")
            async def must(word: str) -> str:
                return word

        try:
            with anyio.fail_after(TIMEOUT):
                async with (
                    _client_as(servers[0], "alice") as alice_0,
                    _client_as(servers[1], "alice") as alice_1,
                    _client_as(servers[1], "bob") as bob_1,
                ):
                    made = [(await alice_0.start_tool_task("must", {"word": "zero"})).task_id]
                    made.append((await alice_1.start_tool_task("must", {"word": "one"})).task_id)
                    theirs = (await bob_1.start_tool_task("must", {"word": "bob"})).task_id
                    assert [t.task_id async for t in alice_0.iter_tasks()] == made
                    assert [t.task_id async for t in alice_1.iter_tasks()] == made
                    assert [t.task_id async for t in bob_1.iter_tasks()] == [theirs]
                    first = await alice_1.list_tasks()
                    assert [t.task_id for t in first.tasks] == made[:1] and isinstance(first.next_cursor, str)
        finally:
            for store in stores:
                await store.aclose()
            for backend in backends:
                await backend.aclose()

    await anyio.to_thread.run_sync(lambda: anyio.run(scenario, backend="asyncio"))
