"""Several workers behind one URL, sharing a real Redis (tests/scale_support.py): a client that sends each request
to another worker sees one server: sessions, notifications and requestState keys are shared
(jsonrpc_mcp.backends)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from auth_server import AuthServer, running_auth_server
from auth_support import jwt_policy
from http_support import (
    JSON_HEADERS,
    SseReader,
    call_body,
    init_body,
    open_session,
    response_of,
    stateless_body,
    stateless_headers,
)
from redis_support import RedisProcess, own_redis, prefix, redis_server, redis_url  # noqa: F401 (fixtures)
from scale_support import TIMEOUT, Workers, redis_app, workers_fixture
from scale_support import http as http

from jsonrpc_mcp import Context, Server
from jsonrpc_mcp.auth import ProtectedResource
from jsonrpc_mcp.backends.redis import RedisBackend

pytestmark = pytest.mark.anyio

WAITING = threading.Event()  # the "wait" tool started, on some worker
STOPPED = threading.Event()  # and was cancelled
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


def worker(label: str) -> Server:
    """What every worker runs: the same tools and resources (a separate Server object for each)."""
    server = Server("scaled", "1.0")

    @server.tool(inline=True)
    def whoami() -> str:
        return label

    @server.tool()
    async def shout(ctx: Context) -> str:
        await ctx.warning("a warning")
        await ctx.error("an error")
        return "done"

    @server.tool()
    async def touch(uri: str) -> str:
        await server.notify_resource_updated(uri)
        return "touched"

    @server.tool()
    async def announce() -> str:
        await server.notify_list_changed("tools")
        return "announced"

    @server.tool(single_use_state=True)
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("Go on?", CONFIRM, key="confirm")
        return f"{label}: {answer.action}"

    @server.tool()
    async def wait(ctx: Context) -> str:
        WAITING.set()
        try:
            await anyio.sleep_forever()
        finally:
            STOPPED.set()
        return "never"

    @server.resource("note://a", mime_type="text/plain")
    def note() -> str:
        return "A"

    return server


def workers_on(
    url: str, key_prefix: str, count: int = 2, policy: Callable[[], ProtectedResource] | None = None
) -> Workers:
    """``count`` workers ``w0``, ``w1``... sharing the Redis at ``url``, each guarded by a ``policy()`` of its own."""
    apps = [
        redis_app(worker(f"w{i}"), url, key_prefix, http_policy=policy() if policy is not None else None)
        for i in range(count)
    ]
    return Workers(apps)


workers = workers_fixture(workers_on)


def text_of(message: dict[str, Any]) -> str:
    return str(message["result"]["content"][0]["text"])


# --- handshake-era sessions ------------------------------------------------------------------------------------


def test_a_backend_given_as_a_url_is_the_redis_backend_the_package_opens() -> None:
    """``McpAsgiApp(backend="redis://...")``: the transport imports no backend; the opener the package gives it
    makes a RedisBackend of the URL (nothing connects until the app runs), and a URL it cannot serve is refused."""
    from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

    server = Server("s")
    app = McpAsgiApp(server, backend="redis://127.0.0.1:1/0")
    assert isinstance(app.backend, RedisBackend) and server.backend is app.backend
    with pytest.raises(ValueError, match=r"^url must be redis://host:port/db"):
        McpAsgiApp(Server("s"), backend="memcached://127.0.0.1/")


async def test_a_session_started_on_one_worker_is_served_by_the_other(workers: Workers, http: Any) -> None:
    session = await open_session(http, workers.url(0))
    session.url = workers.url(1)  # every request from now on goes to the other worker
    assert text_of(await session.call(2, "whoami", {})) == "w1"
    session.url = workers.url(0)
    assert text_of(await session.call(3, "whoami", {})) == "w0"


async def test_an_unknown_session_is_404_on_every_worker(workers: Workers, http: Any) -> None:
    for i in (0, 1):
        headers = {**JSON_HEADERS, "Mcp-Session-Id": "no-such-session", "MCP-Protocol-Version": "2025-11-25"}
        response = await http.post(workers.url(i), json=call_body(1, "whoami", {}), headers=headers)
        assert response.status_code == 404


async def test_delete_on_one_worker_ends_the_session_on_every_worker(workers: Workers, http: Any) -> None:
    session = await open_session(http, workers.url(0))
    session.url = workers.url(1)
    await session.call(2, "whoami", {})  # both workers now hold a copy
    response = await http.delete(workers.url(1), headers=session.headers)
    assert response.status_code == 200
    for i in (0, 1):
        session.url = workers.url(i)
        assert (await session.post(call_body(3, "whoami", {}))).status_code == 404


async def test_max_sessions_holds_across_workers_the_least_recently_used_giving_way(
    redis_url: str,  # noqa: F811
    prefix: str,  # noqa: F811
    http: Any,
) -> None:
    with Workers(redis_app(worker(f"w{i}"), redis_url, prefix, max_sessions=3) for i in range(2)) as group:
        first = await open_session(http, group.url(0))
        second = await open_session(http, group.url(1))
        third = await open_session(http, group.url(0))
        first.url = group.url(1)
        assert text_of(await first.call(2, "whoami", {})) == "w1"  # the second is now the least recently used
        fourth = await open_session(http, group.url(1))  # each worker holds two: the bound is of all of them
        for i in (0, 1):
            second.url = group.url(i)
            assert (await second.post(call_body(3, "whoami", {}))).status_code == 404
        for n, session in enumerate((first, third, fourth)):
            assert (await session.post(call_body(10 + n, "whoami", {}))).status_code == 200
        backend = RedisBackend(redis_url, prefix=prefix)

        async def kept() -> int:
            count: int = await backend.client.zcard(f"{prefix}:sessions")
            await backend.aclose()
            return count

        assert await anyio.to_thread.run_sync(lambda: anyio.run(kept, backend="asyncio")) == 3


async def test_the_log_level_set_on_one_worker_holds_on_the_other(workers: Workers, http: Any) -> None:
    session = await open_session(http, workers.url(0))
    session.url = workers.url(1)
    await session.call(2, "whoami", {})  # worker 1 holds a copy made before the level changes
    session.url = workers.url(0)
    level = await session.post({"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "error"}})
    assert level.status_code == 200 and level.json()["result"] == {}
    session.url = workers.url(1)
    async with session.stream(call_body(4, "shout", {})) as response:
        events = await SseReader(response).rest()
    sent = [json.loads(e.data) for e in events if e.data]
    logs = [m["params"]["level"] for m in sent if m.get("method") == "notifications/message"]
    assert logs == ["error"]
    assert text_of(sent[-1]) == "done"


async def test_a_resource_update_published_by_one_worker_reaches_a_get_stream_on_the_other(
    workers: Workers, http: Any
) -> None:
    session = await open_session(http, workers.url(0))
    subscribed = await session.post(
        {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "note://a"}}
    )
    assert subscribed.status_code == 200 and subscribed.json()["result"] == {}
    async with session.stream(None, method="GET", Accept="text/event-stream") as stream:
        assert stream.status_code == 200
        reader = SseReader(stream)
        session.url = workers.url(1)
        assert text_of(await session.call(3, "touch", {"uri": "note://a"})) == "touched"
        update = await reader.next_message()
        assert update == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "note://a"},
        }


RESOURCE = "https://notes.example.com/mcp"


async def test_a_session_belongs_to_its_principal_on_every_worker(
    redis_url: str,  # noqa: F811
    prefix: str,  # noqa: F811
    http: Any,
) -> None:
    with running_auth_server() as auth, workers_on(redis_url, prefix, policy=lambda: protected_by(auth)) as group:
        alice = {"Authorization": f"Bearer {auth.mint(aud=RESOURCE, scope='notes:read')}"}
        opened = await http.post(group.url(0), json=init_body(), headers={**JSON_HEADERS, **alice})
        assert opened.status_code == 200
        session = {
            **JSON_HEADERS,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        bob = {"Authorization": f"Bearer {auth.mint(aud=RESOURCE, scope='notes:read', sub='bob')}"}
        for i in (1, 0):
            stolen = await http.post(group.url(i), json=call_body(2, "whoami", {}), headers={**session, **bob})
            assert stolen.status_code == 404
        served = await http.post(group.url(1), json=call_body(3, "whoami", {}), headers={**session, **alice})
        assert text_of(response_of(served, 3)) == "w1"


def protected_by(auth: AuthServer) -> ProtectedResource:
    return jwt_policy(auth, RESOURCE)


async def test_a_cancellation_sent_to_another_worker_stops_the_request(workers: Workers, http: Any) -> None:
    WAITING.clear()
    STOPPED.clear()
    session = await open_session(http, workers.url(0))
    async with session.stream(call_body(9, "wait", {})) as stream:
        assert stream.status_code == 200
        assert await anyio.to_thread.run_sync(WAITING.wait, TIMEOUT)
        session.url = workers.url(1)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
        assert (await session.post(cancel)).status_code == 202
        assert await anyio.to_thread.run_sync(STOPPED.wait, TIMEOUT)


# --- 2026-07-28 ---------------------------------------------------------------------------------------------


async def stateless_call(http: Any, url: str, ident: int, name: str, arguments: dict[str, Any], **extra: Any) -> Any:
    caps = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    body = stateless_body(ident, "tools/call", {"name": name, "arguments": arguments, **extra}, **caps)
    response = await http.post(url, json=body, headers=stateless_headers("tools/call", name))
    return response, response_of(response, ident)


async def test_an_input_round_sealed_by_one_worker_is_answered_on_the_other(workers: Workers, http: Any) -> None:
    _, first = await stateless_call(http, workers.url(0), 1, "confirm", {})
    result = first["result"]
    assert result["resultType"] == "input_required"
    answers = {"confirm": {"action": "accept", "content": {"ok": True}}}
    _, second = await stateless_call(
        http, workers.url(1), 2, "confirm", {}, inputResponses=answers, requestState=result["requestState"]
    )
    assert text_of(second) == "w1: accept"
    # single use: the same state answered again, on either worker, is refused
    for i in (0, 1):
        _, again = await stateless_call(
            http, workers.url(i), 3, "confirm", {}, inputResponses=answers, requestState=result["requestState"]
        )
        assert again["error"]["code"] == -32602
        assert "single-use" in again["error"]["message"]


async def test_a_list_change_announced_by_one_worker_reaches_a_listen_stream_on_the_other(
    workers: Workers, http: Any
) -> None:
    body = stateless_body(7, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    async with http.stream(
        "POST", workers.url(0), json=body, headers=stateless_headers("subscriptions/listen")
    ) as stream:
        reader = SseReader(stream)
        acknowledged = await reader.next_message()
        assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
        _, answer = await stateless_call(http, workers.url(1), 8, "announce", {})
        assert text_of(answer) == "announced"
        changed = await reader.next_message()
        assert changed["method"] == "notifications/tools/list_changed"
        assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7


# --- Redis away -------------------------------------------------------------------------------------------------


async def test_while_redis_is_away_requests_get_503_and_service_returns_with_it(
    own_redis: RedisProcess,  # noqa: F811
    prefix: str,  # noqa: F811
    http: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with workers_on(own_redis.url, prefix, count=1) as group:
        session = await open_session(http, group.url(0))
        own_redis.stop()
        with caplog.at_level(logging.WARNING, logger="jsonrpc_mcp.backends.redis"):
            for ident in (2, 3):
                with anyio.fail_after(TIMEOUT):
                    response = await session.post(call_body(ident, "whoami", {}))
                assert response.status_code == 503
                assert response.headers["retry-after"] == "1"
                assert response.json()["error"]["code"] == -31012
                assert response.json()["error"]["data"] == {"retryAfter": 1}
            response = await http.post(group.url(0), json=init_body(), headers=JSON_HEADERS)
            assert response.status_code == 503
            own_redis.start()  # (an empty one: this test's Redis keeps nothing on disk)
            with anyio.fail_after(TIMEOUT):
                again = await open_session(http, group.url(0))
            assert text_of(await again.call(4, "whoami", {})) == "w0"
        down = [r for r in caplog.records if "cannot be reached" in r.getMessage()]
        assert len(down) == 1  # one line per outage, not one per request
        assert "unix:" in down[0].getMessage()


# --- bursts -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # (redis-py's asyncio client)
async def test_a_burst_of_commands_waits_for_the_backends_connections_instead_of_failing(
    own_redis: RedisProcess,  # noqa: F811
) -> None:
    backend = RedisBackend(own_redis.url, max_connections=4)
    record = b'{"version":"2025-11-25"}'
    burst = 300  # (redis-py's own pool holds 100 connections at most by default, and fails past them)
    try:
        await backend.save_session("s", record, 60.0, changed=False)
        found: list[bytes | None] = []

        async def load() -> None:
            found.append(await backend.load_session("s", 60.0))

        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:
                for _ in range(burst):
                    tg.start_soon(load)
        assert found == [record] * burst
        assert len(await backend.client.client_list()) <= backend.max_connections  # (this Redis has no other client)
    finally:
        await backend.aclose()


# --- a client of the caller's --------------------------------------------------------------------------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # (redis-py's asyncio client)
async def test_a_client_given_to_the_backend_is_used_and_left_open(redis_url: str, prefix: str) -> None:  # noqa: F811
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(redis_url)
    backend = RedisBackend(prefix=prefix, client=client)
    record = b'{"version":"2025-11-25"}'
    try:
        with anyio.fail_after(TIMEOUT):
            await backend.save_session("s", record, 60.0, changed=False)
            assert await backend.load_session("s", 60.0) == record
            await backend.aclose()
            assert await client.ping()  # the caller's to close
            assert await backend.load_session("s", 60.0) == record
    finally:
        await client.aclose()


def test_a_blocking_client_a_url_beside_a_client_and_a_url_of_no_redis_are_refused_at_once(
    redis_url: str,  # noqa: F811
) -> None:
    import redis
    import redis.asyncio

    blocking = redis.Redis.from_url(redis_url)
    with pytest.raises(TypeError, match=r"must be a redis\.asyncio\.Redis \(its commands are awaited\)"):
        RedisBackend(client=blocking)  # (was: a TypeError on the first command, logged as Redis out of reach)
    blocking.close()
    with pytest.raises(ValueError, match="give url or client, not both"):
        RedisBackend(redis_url, client=redis.asyncio.Redis.from_url(redis_url))
    for url, scheme in (("localhost:6379", "localhost"), ("http://user:secret@cache:6379/0", "http")):
        with pytest.raises(
            ValueError, match=f"url must be redis://host:port/db, .*\\(its scheme: '{scheme}'\\)$"
        ) as caught:
            RedisBackend(url)  # (was: "cannot be reached" on every request)
        assert "secret" not in str(caught.value)
    assert RedisBackend("rediss://cache.example:6380/1").url == "rediss://cache.example:6380/1"


def test_a_client_that_decodes_replies_to_text_is_refused_at_once(redis_url: str) -> None:  # noqa: F811
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    with pytest.raises(ValueError, match="decode_responses"):
        RedisBackend(client=client)
