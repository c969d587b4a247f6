"""The bounds on tasks (io.modelcontextprotocol/tasks): each client has its own quota (the principal, else the
session, else the connection), all of them together a server-wide cap, and a full quota makes its oldest finished
results give way before it refuses. Over Streamable HTTP under uvicorn with several clients on connections of
their own, and the stores themselves (in memory, and a SQLite file, one made by the previous schema among them)."""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import msgspec
import pytest
from http_support import HTTPX_GENERATORS, JSON_HEADERS, ServerThread, response_of
from http_support import collect_garbage as collect_garbage
from task_support import bounded, record

from jsonrpc_mcp import Server
from jsonrpc_mcp.mcp import task_state as ts
from jsonrpc_mcp.tasks import MemoryTaskStore, SqliteTaskStore, Tasks
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]

TIMEOUT = 10.0
V5 = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
META = {
    "io.modelcontextprotocol/protocolVersion": V5,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
}
_ids = itertools.count(1)


class Gates:
    """``hold(key)`` waits (on a worker thread of the server) until ``release(key)``."""

    def __init__(self) -> None:
        self._gates: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def __call__(self, key: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(key, threading.Event())


def quota_app(gates: Gates, **bounds: Any) -> McpAsgiApp:
    server = Server("quotas", "1.0", extensions=[Tasks(poll_interval=0.05, **bounds)])

    @server.tool(task="optional")
    async def hold(key: str) -> str:
        await anyio.to_thread.run_sync(gates(key).wait, TIMEOUT)
        return f"held {key}"

    @server.tool(task="required")
    async def must(key: str) -> str:
        await anyio.to_thread.run_sync(gates(key).wait, TIMEOUT)
        return f"held {key}"

    return McpAsgiApp(server)


@pytest.fixture
def gates() -> Gates:
    return Gates()


@pytest.fixture
def per_client(gates: Gates) -> Iterator[ServerThread]:
    thread = ServerThread(quota_app(gates, max_per_client=1, max_tasks=3))
    yield thread
    for key in ("a", "b", "c", "d"):
        gates(key).set()
    thread.stop()


@pytest.fixture
async def clients() -> AsyncIterator[list[httpx.AsyncClient]]:
    """Three HTTP clients, each on a connection of its own (kept open between its requests)."""
    made = [httpx.AsyncClient(timeout=TIMEOUT, limits=httpx.Limits(max_connections=1)) for _ in range(3)]
    try:
        yield made
    finally:
        for client in made:
            await client.aclose()


async def call(http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    ident = next(_ids)
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": V5, "Mcp-Method": method}
    name = params.get("name") or params.get("taskId")
    if isinstance(name, str):
        headers["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": ident, "method": method, "params": {**params, "_meta": META}}
    return response_of(await http.post(url, json=body, headers=headers), ident)


async def until(http: httpx.AsyncClient, url: str, task_id: str, status: str) -> dict[str, Any]:
    with anyio.fail_after(TIMEOUT):
        while True:
            task = (await call(http, url, "tasks/get", {"taskId": task_id}))["result"]
            if task["status"] == status:
                return task  # type: ignore[no-any-return]


async def test_one_unauthenticated_client_with_its_quota_full_locks_no_other_out(
    per_client: ServerThread, clients: list[httpx.AsyncClient], gates: Gates
) -> None:
    url = per_client.url
    first, second, _ = clients
    held = (await call(first, url, "tools/call", {"name": "hold", "arguments": {"key": "a"}}))["result"]
    assert held["resultType"] == "task"
    refused = await call(first, url, "tools/call", {"name": "must", "arguments": {"key": "a"}})
    assert refused["error"]["code"] == -31010  # this client has its one task working
    other = (await call(second, url, "tools/call", {"name": "must", "arguments": {"key": "b"}}))["result"]
    assert other["resultType"] == "task"  # another client has a quota of its own
    seen = (await call(second, url, "tasks/get", {"taskId": held["taskId"]}))["result"]
    assert seen["status"] == "working"  # who may read a task is as it was: a task id read elsewhere works
    gates("a").set()
    gates("b").set()
    assert (await until(second, url, held["taskId"], "completed"))["result"]["content"][0]["text"] == "held a"


async def test_the_server_wide_cap_bounds_all_clients_and_its_oldest_finished_task_gives_way(
    gates: Gates, clients: list[httpx.AsyncClient]
) -> None:
    thread = ServerThread(quota_app(gates, max_per_client=5, max_tasks=2))
    try:
        url = thread.url
        first, second, third = clients
        done = (await call(first, url, "tools/call", {"name": "must", "arguments": {"key": "done"}}))["result"]
        gates("done").set()
        await until(first, url, done["taskId"], "completed")
        working = await call(second, url, "tools/call", {"name": "must", "arguments": {"key": "w"}})
        assert working["result"]["resultType"] == "task"  # the server keeps two: one finished, one working
        made = await call(third, url, "tools/call", {"name": "must", "arguments": {"key": "w"}})
        assert made["result"]["resultType"] == "task"  # the finished one gave way, whoever's it was
        gone = await call(first, url, "tasks/get", {"taskId": done["taskId"]})
        assert gone["error"]["code"] == -32602
        refused = await call(first, url, "tools/call", {"name": "must", "arguments": {"key": "w"}})
        assert refused["error"]["code"] == -31010  # two working: nothing gives way
        inline = await call(first, url, "tools/call", {"name": "hold", "arguments": {"key": "done"}})
        assert inline["result"]["content"][0]["text"] == "held done"  # optional: answered in its request
        gates("w").set()
    finally:
        gates("w").set()
        thread.stop()


# --- the stores ---------------------------------------------------------------------------------------------


async def test_the_memory_store_keeps_the_bounds() -> None:
    await bounded(MemoryTaskStore())


async def test_the_sqlite_store_keeps_the_bounds(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    try:
        await bounded(store)
    finally:
        await store.aclose()


async def test_a_task_file_of_the_previous_schema_counts_its_tasks_against_their_owner(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = ts.new_record("t1", "alice", "tools/call", now=time.time(), ttl=60, poll_interval=1)
    fields = msgspec.to_builtins(old)
    del fields["client"]  # (schema 1 knew no client: a task counted against its owner)
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE tasks (task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, status TEXT NOT NULL, expires_at REAL,"
        " record BLOB NOT NULL); PRAGMA user_version = 1;"
    )
    db.execute("INSERT INTO tasks VALUES (?, ?, ?, ?, ?)", ("t1", "alice", "working", None, json.dumps(fields)))
    db.commit()
    db.close()
    store = SqliteTaskStore(path)  # (its working task is failed: its process stopped)
    try:
        assert (await store.get("t1")).status == "failed"  # type: ignore[union-attr]
        assert await store.create(record("t2", "bob", time.time()), max_per_client=1)
        assert await store.get("t1") is not None  # not bob's
        assert await store.create(record("t3", "alice", time.time()), max_per_client=1)
        assert await store.get("t1") is None  # alice's: her finished task gave way
    finally:
        await store.aclose()
