"""``notifications/tasks`` with several workers sharing a real Redis: a client listening on one worker hears of a
task that another worker runs, each change once and in order, and only of its own tasks; what carries them, an
extension's events (``Server.publish_to_extension`` → ``Extension.deliver`` on every worker). The workers are those
of tests/scale_support.py; a task that waits does so until the test releases it, never for a time."""

from __future__ import annotations

import itertools
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import httpx
import msgspec
import pytest
from http_support import JSON_HEADERS, SseReader, response_of
from redis_support import RedisProcess, own_redis, prefix, redis_server, redis_url  # noqa: F401 (fixtures)
from scale_support import TIMEOUT, Workers, redis_app, workers_fixture
from scale_support import http as http

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp.auth import AccessToken, InvalidToken, ProtectedResource
from jsonrpc_mcp.backends.redis import RedisBackend
from jsonrpc_mcp.backends.redis_tasks import STOPPED_MESSAGE, RedisTaskStore
from jsonrpc_mcp.extensions import Extension
from jsonrpc_mcp.mcp import task_state as ts
from jsonrpc_mcp.tasks import MemoryTaskStore, Tasks
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = pytest.mark.anyio

V5 = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
CAPS = {"elicitation": {}, "extensions": {TASKS: {}}}
META = {"io.modelcontextprotocol/protocolVersion": V5, "io.modelcontextprotocol/clientCapabilities": CAPS}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
RESOURCE = "http://127.0.0.1/mcp"
_ids = itertools.count(1)


class Tokens:
    """A token verifier: the token is the subject's name."""

    async def verify(self, token: str) -> AccessToken:
        if token not in ("alice", "bob"):
            raise InvalidToken()
        return AccessToken(subject=token, client_id="cli", audience=(RESOURCE,))


def worker(tasks: Tasks) -> Server:
    server = Server("scaled-task-notes", "1.0", extensions=[tasks])
    gates: dict[str, anyio.Event] = {}

    def gate(key: str) -> anyio.Event:
        return gates.setdefault(key, anyio.Event())

    @server.tool(task="optional")
    async def ask_name_when_released(key: str, ctx: Context) -> str:
        await gate(key).wait()
        answer = await ctx.elicit("Your name?", NAME, key="name")
        await gate(f"{key}-answered").wait()  # (so that "working" is told before "completed", never both at once)
        return f"Hello, {(answer.content or {}).get('name')}!"

    @server.tool(task="optional")
    async def wait_for(key: str) -> str:
        await gate(key).wait()
        return f"released {key}"

    @server.tool()
    async def release(key: str) -> str:
        gate(key).set()
        return "released"

    @server.tool()
    async def lose_lease() -> str:
        # (this worker's lease lapses now, and is renewed no more: to the others, as if it had been killed — the
        # tasks it runs go on here, and it writes nothing of them)
        store = tasks.store
        assert isinstance(store, RedisTaskStore)
        key = f"{store.backend.prefix}:runner:{store.runner}"
        store.backend.drop_lease(key)
        await store.backend.client.delete(key)
        return "lost"

    return server


def app(url: str, key_prefix: str, tasks: Tasks | None = None, *, lease: float | None = None) -> McpAsgiApp:
    """A worker (``lease``: its tasks kept in Redis with a lease of that many seconds, also how often it sweeps
    for the tasks of workers whose lease lapsed)."""
    policy = ProtectedResource(resource=RESOURCE, authorization_servers=["https://as.example"], verifier=Tokens())
    backend = RedisBackend(url, prefix=key_prefix)
    if tasks is None:
        tasks = Tasks(RedisTaskStore(backend, lease=lease) if lease is not None else None, poll_interval=0.1)
    return McpAsgiApp(worker(tasks), backend=backend, http_policy=policy)


def headers(method: str, params: dict[str, Any], token: str) -> dict[str, str]:
    found = {**JSON_HEADERS, "MCP-Protocol-Version": V5, "Mcp-Method": method, "Authorization": f"Bearer {token}"}
    name = params.get("name") or params.get("taskId")
    if isinstance(name, str):
        found["Mcp-Name"] = name
    return found


async def call(http: httpx.AsyncClient, url: str, token: str, method: str, params: dict[str, Any]) -> Any:
    ident = next(_ids)
    body = {"jsonrpc": "2.0", "id": ident, "method": method, "params": {**params, "_meta": META}}
    reply = response_of(await http.post(url, json=body, headers=headers(method, params, token)), ident)
    assert "result" in reply, reply
    return reply["result"]


async def start_task(http: httpx.AsyncClient, url: str, token: str, tool: str, key: str) -> str:
    created = await call(http, url, token, "tools/call", {"name": tool, "arguments": {"key": key}})
    assert created["resultType"] == "task"
    return str(created["taskId"])


@asynccontextmanager
async def listening(
    http: httpx.AsyncClient, url: str, token: str, task_ids: list[str], subscription: str
) -> AsyncIterator[tuple[SseReader, dict[str, Any]]]:
    """A ``subscriptions/listen`` stream asking for ``task_ids``: its reader, and what it acknowledged."""
    params = {"notifications": {"taskIds": task_ids}}
    body = {"jsonrpc": "2.0", "id": subscription, "method": "subscriptions/listen", "params": {**params, "_meta": META}}
    async with http.stream("POST", url, json=body, headers=headers("subscriptions/listen", params, token)) as stream:
        assert stream.status_code == 200
        reader = SseReader(stream)
        ack = await reader.next_message()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"][SUBSCRIPTION_ID] == subscription
        try:
            yield reader, ack["params"]["notifications"]
        finally:
            await reader.aclose()


async def told(reader: SseReader, subscription: str) -> dict[str, Any]:
    """The next ``notifications/tasks`` of a listen stream (nothing else comes on it here), its params."""
    message = await reader.next_message()
    assert message["method"] == "notifications/tasks", message
    params: dict[str, Any] = message["params"]
    assert params["_meta"][SUBSCRIPTION_ID] == subscription
    return params


workers = workers_fixture(lambda url, key_prefix: Workers(app(url, key_prefix) for _ in range(2)))


async def test_a_client_listening_on_one_worker_hears_each_change_of_its_task_running_on_the_other(
    workers: Workers, http: httpx.AsyncClient
) -> None:
    here, there = workers.url(0), workers.url(1)  # the streams listen here, the tasks run there
    task_id = await start_task(http, there, "alice", "ask_name_when_released", "ask")
    last_of_alice = await start_task(http, there, "alice", "wait_for", "alice-last")
    last_of_bob = await start_task(http, there, "bob", "wait_for", "bob-last")
    async with (
        listening(http, here, "alice", [task_id, last_of_alice], "alice-listens") as (alice, alice_acked),
        listening(http, here, "bob", [task_id, last_of_bob], "bob-listens") as (bob, bob_acked),
    ):
        assert alice_acked == {"taskIds": [task_id, last_of_alice]}
        assert bob_acked == {"taskIds": [last_of_bob]}  # alice's task is not bob's to hear of

        await call(http, there, "alice", "tools/call", {"name": "release", "arguments": {"key": "ask"}})
        asked = await told(alice, "alice-listens")
        assert asked["taskId"] == task_id and asked["status"] == "input_required"
        assert asked["inputRequests"]["name"]["method"] == "elicitation/create"
        assert asked["inputRequests"]["name"]["params"]["message"] == "Your name?"

        answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
        await call(http, here, "alice", "tasks/update", {"taskId": task_id, "inputResponses": answer})
        working = await told(alice, "alice-listens")
        assert working["taskId"] == task_id and working["status"] == "working"
        assert "inputRequests" not in working
        await call(http, there, "alice", "tools/call", {"name": "release", "arguments": {"key": "ask-answered"}})
        done = await told(alice, "alice-listens")
        assert done["taskId"] == task_id and done["status"] == "completed"
        assert done["result"]["content"][0]["text"] == "Hello, Ada!"

        # Each change was told once: what alice hears next is the end of her other task, released now
        await call(http, there, "alice", "tools/call", {"name": "release", "arguments": {"key": "alice-last"}})
        last = await told(alice, "alice-listens")
        assert last["taskId"] == last_of_alice and last["status"] == "completed"
        assert last["result"]["content"][0]["text"] == "released alice-last"

        # Bob heard nothing of alice's task: the first thing his stream tells is the end of his own, released
        # after every change of hers was published
        await call(http, there, "bob", "tools/call", {"name": "release", "arguments": {"key": "bob-last"}})
        his = await told(bob, "bob-listens")
        assert his["taskId"] == last_of_bob and his["status"] == "completed"


async def test_a_task_cancelled_through_one_worker_is_told_cancelled_on_a_stream_of_the_other(
    workers: Workers, http: httpx.AsyncClient
) -> None:
    task_id = await start_task(http, workers.url(0), "alice", "wait_for", "never")
    async with listening(http, workers.url(1), "alice", [task_id], "follows") as (stream, acked):
        assert acked == {"taskIds": [task_id]}
        await call(http, workers.url(1), "alice", "tasks/cancel", {"taskId": task_id})
        cancelled = await told(stream, "follows")
    assert cancelled["taskId"] == task_id and cancelled["status"] == "cancelled"


async def test_while_redis_is_away_the_streams_of_the_worker_that_runs_the_task_are_still_told(
    own_redis: RedisProcess,  # noqa: F811
    prefix: str,  # noqa: F811
    http: httpx.AsyncClient,
) -> None:
    with Workers([app(own_redis.url, prefix, Tasks(MemoryTaskStore()))]) as one:  # (the tasks kept without Redis)
        url = one.url(0)
        task_id = await start_task(http, url, "alice", "wait_for", "later")
        async with listening(http, url, "alice", [task_id], "local") as (stream, acked):
            assert acked == {"taskIds": [task_id]}
            own_redis.stop()
            await call(http, url, "alice", "tools/call", {"name": "release", "arguments": {"key": "later"}})
            done = await told(stream, "local")
        assert done["taskId"] == task_id and done["status"] == "completed"


async def test_a_change_older_than_one_already_told_is_not_told() -> None:
    # (changes made on two workers may cross on the bus: a stream never sees its task go back)
    tasks = Tasks()
    server = Server("in-order", extensions=[tasks])

    @server.tool(task="required")
    async def forever() -> str:
        await anyio.sleep_forever()
        return "never"

    heard: list[str] = []
    third = anyio.Event()

    def on_notification(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tasks":
            heard.append(params["statusMessage"])
            if params["statusMessage"] == "third":
                third.set()

    async with Client.connect_server(server, on_notification=on_notification) as client:
        handle = await client.start_tool_task("forever")
        assert handle.task_id is not None
        record = await tasks.store.get(handle.task_id)
        assert record is not None
        async with client.listen(task_ids=[handle.task_id]):
            for later, message in ((2, "second"), (1, "first"), (3, "third")):
                changed = msgspec.structs.replace(record, version=record.version + later, status_message=message)
                await tasks.deliver({"version": changed.version, "task": ts.detailed(changed)})
            with anyio.fail_after(TIMEOUT):
                await third.wait()
    assert heard == ["second", "third"]


async def started(http: httpx.AsyncClient, url: str) -> None:
    """Returns once the worker at ``url`` answers (its bus and its sweeps started with it)."""
    ident = next(_ids)
    body = {"jsonrpc": "2.0", "id": ident, "method": "server/discover", "params": {"_meta": META}}
    assert "result" in response_of(
        await http.post(url, json=body, headers=headers("server/discover", {}, "alice")), ident
    )


@asynccontextmanager
async def a_dead_workers_task(http: httpx.AsyncClient, urls: list[str]) -> AsyncIterator[tuple[SseReader, str, str]]:
    """On the workers at ``urls``: a task of the first that never ends, a task of the second that waits for its key
    ``later``, and a stream on the second that follows both; then the first worker loses its lease, as a dead
    worker's lapses. Yields the stream, the first task's id and the second's."""
    for url in urls:
        await started(http, url)
    doomed, alive = urls[0], urls[1]
    task_id = await start_task(http, doomed, "alice", "wait_for", "never")
    later = await start_task(http, alive, "alice", "wait_for", "later")
    async with listening(http, alive, "alice", [task_id, later], "follows") as (stream, acked):
        assert acked == {"taskIds": [task_id, later]}
        await call(http, doomed, "alice", "tools/call", {"name": "lose_lease", "arguments": {}})
        yield stream, task_id, later


async def next_told_is_the_other_task_ending(http: httpx.AsyncClient, url: str, stream: SseReader, later: str) -> None:
    """The failure was told once: what the stream tells next is the end of the other task, released now."""
    await call(http, url, "alice", "tools/call", {"name": "release", "arguments": {"key": "later"}})
    done = await told(stream, "follows")
    assert done["taskId"] == later and done["status"] == "completed"


async def test_a_task_whose_worker_died_is_told_failed_once_on_a_stream_of_another_worker_by_its_sweep(
    redis_url: str,  # noqa: F811
    prefix: str,  # noqa: F811
    http: httpx.AsyncClient,
) -> None:
    # Nobody reads the task: the other worker's sweep (once per lease, 2 s here) finds that its worker's lease
    # lapsed, fails it, and the stream hears of it
    with Workers(app(redis_url, prefix, lease=2.0) for _ in range(2)) as group:
        alive = group.url(1)
        async with a_dead_workers_task(http, [group.url(0), alive]) as (stream, task_id, later):
            failed = await told(stream, "follows")
            assert failed["taskId"] == task_id and failed["status"] == "failed"
            assert failed["statusMessage"] == STOPPED_MESSAGE
            assert failed["error"]["message"] == STOPPED_MESSAGE
            await next_told_is_the_other_task_ending(http, alive, stream, later)
        got = await call(http, alive, "alice", "tasks/get", {"taskId": task_id})
        assert got["status"] == "failed" and got["statusMessage"] == STOPPED_MESSAGE


async def test_a_task_whose_worker_died_read_on_two_workers_at_once_is_told_failed_once(
    redis_url: str,  # noqa: F811
    prefix: str,  # noqa: F811
    http: httpx.AsyncClient,
) -> None:
    # A lease of a minute: no sweep comes before the reads (each worker sweeps as it starts, then once a minute)
    with Workers(app(redis_url, prefix, lease=60.0) for _ in range(3)) as group:
        here, there = group.url(1), group.url(2)
        async with a_dead_workers_task(http, [group.url(0), here, there]) as (stream, task_id, later):
            read: list[str] = []

            async def get(url: str) -> None:
                read.append((await call(http, url, "alice", "tasks/get", {"taskId": task_id}))["status"])

            async with anyio.create_task_group() as tg:
                tg.start_soon(get, here)
                tg.start_soon(get, there)
            assert read == ["failed", "failed"]
            failed = await told(stream, "follows")
            assert failed["taskId"] == task_id and failed["status"] == "failed"
            assert failed["statusMessage"] == STOPPED_MESSAGE
            await next_told_is_the_other_task_ending(http, here, stream, later)  # (not a second "failed")


class Heard(Extension):
    """An extension that keeps what it is delivered (on the worker's own thread: read once ``all_heard`` is set)."""

    def __init__(self, expected: int) -> None:
        super().__init__("com.example/heard")
        self.expected = expected
        self.heard: list[Any] = []
        self.all_heard = threading.Event()

    async def deliver(self, data: Any) -> None:
        self.heard.append(data)
        if len(self.heard) == self.expected:
            self.all_heard.set()


async def test_an_extension_event_published_on_one_worker_is_delivered_once_in_order_on_every_worker(
    redis_url: str,  # noqa: F811
    prefix: str,  # noqa: F811
    http: httpx.AsyncClient,
) -> None:
    extensions = [Heard(expected=3) for _ in range(2)]
    servers = [Server("heard", "1.0", extensions=[extension]) for extension in extensions]

    @servers[0].tool()
    async def announce() -> str:
        for n in range(3):
            await servers[0].publish_to_extension("com.example/heard", {"n": n, "tuple": ("a", n)})
        return "announced"

    group = Workers(redis_app(server, redis_url, prefix) for server in servers)

    async def request(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        ident = next(_ids)
        body = {"jsonrpc": "2.0", "id": ident, "method": method, "params": {**params, "_meta": META}}
        hdrs = {**JSON_HEADERS, "MCP-Protocol-Version": V5, "Mcp-Method": method}
        if "name" in params:
            hdrs["Mcp-Name"] = params["name"]
        return response_of(await http.post(url, json=body, headers=hdrs), ident)

    with group:
        for i in range(2):  # (a worker answers once it started, its bus with it)
            assert "result" in await request(group.url(i), "server/discover", {})
        reply = await request(group.url(0), "tools/call", {"name": "announce"})
        assert reply["result"]["content"][0]["text"] == "announced"
        for extension in extensions:
            assert await anyio.to_thread.run_sync(extension.all_heard.wait, TIMEOUT)
            # each once, in order, as JSON decodes it (the publishing worker's own through the bus too)
            assert extension.heard == [{"n": n, "tuple": ["a", n]} for n in range(3)]
