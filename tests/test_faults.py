"""Faults, as an operator meets them: two workers sharing a real Redis (tests/redis_support.py's ``own_redis``, one
per test, to stop, pause and start again empty), each a uvicorn of its own (tests/scale_support.py). What must
hold: every task reaches a terminal state that is stored, within a bound after Redis is back; a progress write
that fails never fails the tool. Nothing here waits for a time: each step waits for what it needs (an event, a log
line, an answer), bounded by ``anyio.fail_after``."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import pytest
from fault_support import FaultRun
from helpers import FIXTURES
from http_support import open_session
from redis_support import RedisProcess, own_redis, prefix  # noqa: F401 (fixtures)
from scale_support import Workers, call_v5
from scale_support import http as http

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp.backends.redis import RedisBackend
from jsonrpc_mcp.backends.redis_tasks import STOPPED_MESSAGE, RedisTaskStore
from jsonrpc_mcp.mcp import task_state as ts
from jsonrpc_mcp.tasks import Tasks
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

# Redis stopped, paused and restarted; several workers: once, in the `once` leg of .ci/run (make test-once).
pytestmark = [pytest.mark.anyio, pytest.mark.once]

#: Seconds a step may take at most (each is a few round trips; the bound only catches a hang).
STEP = 15.0
#: The workers' deadline for a Redis command: short, so that a paused Redis is an outage within moments.
REDIS_TIMEOUT = 0.5
WORKER = FIXTURES / "fault_worker.py"


class Seen(logging.Handler):
    """Sets :attr:`event` at the first log record whose message holds ``words`` (from any thread)."""

    def __init__(self, words: str) -> None:
        super().__init__()
        self.words = words
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.words in record.getMessage():
            self.event.set()


@pytest.fixture
def seen() -> Iterator[Any]:
    """``seen(words, logger_name)``: a :class:`Seen` on that logger (``jsonrpc_mcp`` by default), which hears
    its debug lines too."""
    watched: list[tuple[logging.Logger, Seen, int]] = []

    def watch(words: str, name: str = "jsonrpc_mcp") -> Seen:
        handler, log = Seen(words), logging.getLogger(name)
        watched.append((log, handler, log.level))
        log.addHandler(handler)
        if name != "jsonrpc_mcp":
            log.setLevel(logging.DEBUG)
        return handler

    yield watch
    for log, handler, level in reversed(watched):
        log.removeHandler(handler)
        log.setLevel(level)


class Steps:
    """What the ``step`` tool of every worker does: it says it started, waits for ``go``, reports progress and
    returns ``"done"``."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.returned = threading.Event()


def fault_worker(url: str, key_prefix: str, steps: Steps) -> McpAsgiApp:
    backend = RedisBackend(url, prefix=key_prefix, timeout=REDIS_TIMEOUT)
    server = Server("faults", "1.0", extensions=[Tasks(poll_interval=0.05)])

    @server.tool(task="optional")
    async def step(ctx: Context) -> str:
        steps.started.set()
        await anyio.to_thread.run_sync(steps.go.wait, STEP)
        await ctx.report_progress(1, 2, "half way")
        steps.returned.set()
        return "done"

    return McpAsgiApp(server, backend=backend)


@pytest.fixture
def steps() -> Steps:
    return Steps()


@pytest.fixture
def two(own_redis: RedisProcess, prefix: str, steps: Steps) -> Iterator[Workers]:  # noqa: F811
    group = Workers(fault_worker(own_redis.url, prefix, steps) for _ in range(2))
    yield group
    group.stop()


async def until_ended(http: Any, url: str, task_id: str) -> dict[str, Any]:
    """``tasks/get`` until the task has ended (answers -31012 while Redis is away are read again)."""
    with anyio.fail_after(STEP):
        while True:
            reply = await call_v5(http, url, "tasks/get", {"taskId": task_id})
            task = reply.get("result")
            if task is not None and task["status"] in ts.TERMINAL:
                return task  # type: ignore[no-any-return]


async def test_a_task_that_ends_while_redis_is_paused_is_stored_once_it_is_back(
    two: Workers,
    own_redis: RedisProcess,  # noqa: F811
    steps: Steps,
    http: Any,
    seen: Any,
) -> None:
    created = await call_v5(http, two.url(0), "tools/call", {"name": "step", "arguments": {}})
    task_id = created["result"]["taskId"]
    assert await anyio.to_thread.run_sync(steps.started.wait, STEP)
    unstored = seen("could not be stored")
    own_redis.pause()
    try:
        steps.go.set()  # its progress write meets no Redis; then its end does not either
        assert await anyio.to_thread.run_sync(unstored.event.wait, STEP)
    finally:
        own_redis.resume()
    task = await until_ended(http, two.url(1), task_id)  # read through the other worker
    assert task["status"] == "completed", task
    assert task["result"]["content"] == [{"type": "text", "text": "done"}]


async def test_a_client_waiting_for_its_task_while_redis_is_paused_gets_its_result(
    two: Workers,
    own_redis: RedisProcess,  # noqa: F811
    steps: Steps,
    seen: Any,
) -> None:
    async with Client.connect_http(two.url(1)) as client:
        handle = await client.start_tool_task("step")
        assert await anyio.to_thread.run_sync(steps.started.wait, STEP)
        asked_again = seen("unavailable; asking again", "jsonrpc_mcp.mcp.task_client")
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                results.append(await handle.wait(timeout=STEP))

            own_redis.pause()
            try:
                tg.start_soon(wait)
                steps.go.set()
                assert await anyio.to_thread.run_sync(asked_again.event.wait, STEP)  # a tasks/get met -31012
            finally:
                own_redis.resume()
        assert [r.content[0].text for r in results] == ["done"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # (redis-py's asyncio client, on a loop of its own)
async def test_the_sweep_ends_the_tasks_a_living_worker_no_longer_runs(
    own_redis: RedisProcess,  # noqa: F811
    prefix: str,  # noqa: F811
) -> None:
    async def scenario() -> None:  # redis-py's asyncio client: on an asyncio loop of its own
        backend = RedisBackend(own_redis.url, prefix=prefix)
        store = RedisTaskStore(backend, lease=60)
        runs = {"t2"}
        told: list[ts.TaskRecord] = []

        async def tell(record: ts.TaskRecord) -> None:
            told.append(record)

        store.tell_stopped(tell, running=runs.__contains__)
        for task_id in ("t1", "t2"):
            record = ts.new_record(task_id, "", "tools/call", now=time.time(), ttl=60, poll_interval=1)
            assert await store.create(record, max_per_client=None)
        # t1's run ended here and its end was never stored (its worker lives: its lease holds)
        assert await store.sweep() == 1
        ended, running = await store.get("t1"), await store.get("t2")
        assert ended is not None and ended.status == "failed" and ended.status_message == STOPPED_MESSAGE
        assert running is not None and running.status == "working"
        assert [r.task_id for r in told] == ["t1"]
        assert await store.sweep() == 0  # (once)
        await store.aclose()
        await backend.aclose()

    await anyio.to_thread.run_sync(lambda: anyio.run(scenario, backend="asyncio"))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # (redis-py's asyncio client, on a loop of its own)
async def test_the_bus_goes_on_when_redis_fails_between_its_subscription_and_its_keys(
    own_redis: RedisProcess,  # noqa: F811
    prefix: str,  # noqa: F811
) -> None:
    import redis.asyncio

    from jsonrpc_mcp.mcp.bus import SessionEnded, encode_event

    async def scenario() -> None:  # redis-py's asyncio client: on an asyncio loop of its own
        backend = RedisBackend(own_redis.url, prefix=prefix, timeout=REDIS_TIMEOUT)
        admin = redis.asyncio.Redis.from_url(own_redis.url)
        heard = anyio.Event()

        async def deliver(event: Any) -> None:
            heard.set()

        # writes wait for 1.5 s: the bus subscribes (no write), then cannot make the requestState keys (writes)
        await admin.execute_command("CLIENT", "PAUSE", 1500, "WRITE")
        async with anyio.create_task_group() as tg:
            await tg.start(backend.run, deliver)
            with anyio.fail_after(STEP):
                while not heard.is_set():  # (each publish waits for the pause to end; then until the bus is back)
                    await admin.publish(f"{prefix}:bus", encode_event(SessionEnded("s")))
            assert backend.state_keys()  # the keys were read once Redis took writes again
            tg.cancel_scope.cancel()
        await backend.aclose()
        await admin.aclose()

    await anyio.to_thread.run_sync(lambda: anyio.run(scenario, backend="asyncio"))


@asynccontextmanager
async def worker_process(redis_url: str, key_prefix: str) -> AsyncIterator[tuple[Any, str]]:
    """A worker process of tests/fixtures/fault_worker.py (its tasks' lease: 4 s), and its URL."""
    proc = await anyio.open_process(
        [sys.executable, str(WORKER), redis_url, key_prefix], stdin=subprocess.DEVNULL, stderr=None
    )
    try:
        assert proc.stdout is not None
        seen = b""
        with anyio.fail_after(STEP):
            while b"\n" not in seen:
                seen += await proc.stdout.receive()
        line = seen.split(b"\n", 1)[0].decode()
        assert line.startswith("listening on "), line
        yield proc, line.removeprefix("listening on ")
    finally:
        if proc.returncode is None:
            proc.kill()
        with anyio.CancelScope(shield=True):
            await proc.wait()
            await proc.aclose()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # (worker processes: the test's own loop matters not)
async def test_a_worker_killed_with_sigkill_costs_its_tasks_failed_within_the_lease_and_no_session(
    own_redis: RedisProcess,  # noqa: F811
    prefix: str,  # noqa: F811
    http: Any,
) -> None:
    async with (
        worker_process(own_redis.url, prefix) as (doomed, there),
        worker_process(own_redis.url, prefix) as (
            _,
            here,
        ),
    ):
        created = await call_v5(http, there, "tools/call", {"name": "hold", "arguments": {}})
        task_id = created["result"]["taskId"]
        session = await open_session(http, there)
        assert (await call_v5(http, here, "tasks/get", {"taskId": task_id}))["result"]["status"] == "working"
        os.kill(doomed.pid, signal.SIGKILL)
        await doomed.wait()
        task = await until_ended(http, here, task_id)  # (within its 4 s lease, and a read)
        assert task["status"] == "failed" and task["statusMessage"] == STOPPED_MESSAGE
        session.url = here
        answered = await session.call(2, "ping", {})  # its session goes on, under the same id
        assert answered["result"]["content"][0]["text"] == "pong"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # (worker processes: the test's own loop matters not)
async def test_a_pause_of_redis_longer_than_the_lease_fails_no_task_of_a_living_worker(
    own_redis: RedisProcess,  # noqa: F811
    prefix: str,  # noqa: F811
    http: Any,
) -> None:
    async with worker_process(own_redis.url, prefix) as (_, there), worker_process(own_redis.url, prefix) as (_, here):
        created = await call_v5(http, there, "tools/call", {"name": "hold", "arguments": {}})
        task_id = created["result"]["taskId"]
        own_redis.pause()
        try:
            for _ in range(9):  # each answer waits for the worker's deadline (0.5 s): past the 4 s lease in all
                reply = await call_v5(http, here, "tasks/get", {"taskId": task_id})
                assert reply["error"]["code"] == -31012
        finally:
            own_redis.resume()
        for url in (here, there, here):
            with anyio.fail_after(STEP):
                while "result" not in (reply := await call_v5(http, url, "tasks/get", {"taskId": task_id})):
                    assert reply["error"]["code"] == -31012  # (until the worker's connection is back)
            assert reply["result"]["status"] == "working", reply  # its worker lives: its lease is renewed


async def test_redis_restarted_empty_under_a_running_task_leaves_nothing_stuck(
    two: Workers,
    own_redis: RedisProcess,  # noqa: F811
    steps: Steps,
    http: Any,
) -> None:
    created = await call_v5(http, two.url(0), "tools/call", {"name": "step", "arguments": {}})
    task_id = created["result"]["taskId"]
    assert await anyio.to_thread.run_sync(steps.started.wait, STEP)
    own_redis.stop()
    own_redis.start()  # (empty: the task is forgotten)
    steps.go.set()
    assert await anyio.to_thread.run_sync(steps.returned.wait, STEP)  # its progress found no task: it went on
    with anyio.fail_after(STEP):
        while True:
            reply = await call_v5(http, two.url(1), "tasks/get", {"taskId": task_id})
            if reply.get("error", {}).get("code") != -31012:  # (until the worker's connections are back)
                break
    assert reply["error"]["code"] == -32602  # gone, as an expired task: never working for ever
    again = await call_v5(http, two.url(1), "tools/call", {"name": "step", "arguments": {}})
    assert (await until_ended(http, two.url(0), again["result"]["taskId"]))["status"] == "completed"


#: The seed of the run below (``make soak`` takes its own: ``SOAK_SEED``).
SEED = 35


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # (worker processes: the test's own loop matters not)
async def test_a_seeded_run_of_faults_leaves_no_task_working_and_the_sessions_bounded(
    own_redis: RedisProcess,  # noqa: F811
    prefix: str,  # noqa: F811
    http: Any,
) -> None:
    async with FaultRun(own_redis, prefix, SEED) as run:
        for _ in range(4):
            await run.round(http)
    figures = run.figures
    assert figures.rounds == 4 and sum(figures.ended.values()) == figures.started > 0
    assert figures.kept_sessions <= 50  # (FAULT_MAX_SESSIONS: across both workers)
