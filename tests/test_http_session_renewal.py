"""Our HTTP client when the server ends its session under it (handshake era), against our server on a real uvicorn.

A 404 for the session means the server ended it: restarted (a new process, knowing no session), or forgot it. The
client MUST start a new session with a new ``initialize`` and no session id (Streamable HTTP, session management,
2025-03-26 .. 2025-11-25); it does so by itself, once per session ended, with the same capabilities and client
info, then asks the new session for what the old one had (the log level, the resource subscriptions) and opens its
GET stream. The request the server refused with 404 never ran, so it is sent once more in the new session; a call
under way in the ended session may have run: it fails with ``SessionExpired``, never a bare ``RpcError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from http_support import HTTPX_GENERATORS, ServerThread, make_server, unique
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Client, ConnectionClosed, Context, RpcError, Server, ServerUnreachable, SessionExpired
from jsonrpc_mcp import types as t
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]

HANDSHAKE = "2025-11-25"
HELLO = "text://hello"


def fixture_server() -> Server:
    """The HTTP fixture server, with a tool that tells the subscribers of a URI it changed and one that logs."""
    server = make_server()

    @server.tool()
    async def touch(uri: str) -> str:
        """Tell the subscribers of ``uri`` that it changed."""
        await server.notify_resource_updated(uri)
        return f"touched {uri}"

    @server.tool()
    async def murmur(ctx: Context, text: str) -> str:
        """Log ``text`` at debug level (heard only by a session that asked for debug)."""
        await ctx.debug(text)
        return "said"

    return server


class Door:
    """ASGI middleware in front of the app: counts the requests that start a session (a POST without a session id)
    and, while ``refusing``, answers 404 to every request naming a session and 503 to those starting one."""

    def __init__(self, app: McpAsgiApp) -> None:
        self.app = app
        self.starts = 0
        self.refusing = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        names = {k.decode().lower() for k, _ in scope["headers"]}
        starting = scope["method"] == "POST" and "mcp-session-id" not in names
        self.starts += starting
        if self.refusing:
            status = 503 if starting else 404
            await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


@pytest.fixture
def door() -> Iterator[tuple[Door, ServerThread]]:
    door = Door(McpAsgiApp(fixture_server(), sse_retry_ms=20))
    thread = ServerThread(door)
    yield door, thread
    thread.stop()


async def end_session(url: str, sid: str) -> None:
    """End the session ``sid`` as the server does when it forgets one: DELETE it from another HTTP client."""
    async with httpx.AsyncClient() as http:
        assert (await http.delete(url, headers={"Mcp-Session-Id": sid})).status_code == 200


async def test_a_restarted_server_gets_a_new_session_with_the_old_ones_subscriptions_and_log_level() -> None:
    first = ServerThread(McpAsgiApp(fixture_server(), sse_retry_ms=20))
    updated, heard = anyio.Event(), anyio.Event()
    logs: list[Any] = []

    async def on_notification(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/resources/updated" and params.get("uri") == HELLO:
            updated.set()

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)
        heard.set()

    roots = [t.Root(uri="file:///home/me/project", name="project")]
    options: dict[str, Any] = {"on_notification": on_notification, "on_log": on_log, "name": "renewing", "roots": roots}
    second: ServerThread | None = None
    try:
        async with Client.connect_http(first.url, protocol_version=HANDSHAKE, **options) as client:
            await client.subscribe(HELLO)
            await client.set_logging_level("debug")
            old = client.stream.session_id
            first.stop()  # every connection ends; the process that knew the session is gone
            second = ServerThread(McpAsgiApp(fixture_server(), sse_retry_ms=20), port=first.port)
            with anyio.fail_after(10):
                result = await client.call_tool("add", {"a": 2, "b": 3})
                assert result.structured_content == {"result": 5}  # (answered 404, then again in the new session)
                assert client.stream.session_id not in (None, old)
                assert client.protocol_version == HANDSHAKE
                await client.call_tool("touch", {"uri": HELLO})  # the new session has the subscription...
                await updated.wait()  # ...and its GET stream, where the notification comes
                await client.call_tool("murmur", {"text": "still debug"})
                await heard.wait()
            assert logs == ["still debug"]  # (the new session's level is "info" unless asked again)
            [session] = second.app.server.sessions()
            info = session.client_info
            assert (info.name if isinstance(info, t.Implementation) else info["name"]) == "renewing"
            assert msgspec.to_builtins(session.client_capabilities) == {"roots": {"listChanged": True}}
            assert session.subscriptions == {HELLO} and session.log_level == "debug"
    finally:
        first.stop()
        if second is not None:
            second.stop()


async def test_a_session_ended_by_the_server_is_started_again_once_for_all_the_requests_it_refused(
    door: tuple[Door, ServerThread],
) -> None:
    gate, thread = door
    async with Client.connect_http(thread.url, protocol_version=HANDSHAKE) as client:
        assert gate.starts == 1
        old = client.stream.session_id
        await end_session(thread.url, old)  # type: ignore[arg-type]
        results: list[t.CallToolResult] = []

        async def call(a: int) -> None:
            results.append(await client.call_tool("add", {"a": a, "b": 1}))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for a in range(5):
                    tg.start_soon(call, a)
        assert sorted(r.structured_content["result"] for r in results) == [1, 2, 3, 4, 5]  # type: ignore[index]
        assert gate.starts == 2  # one new session, for all five
        assert client.stream.session_id not in (None, old)


async def test_a_call_under_way_when_the_session_ends_fails_with_session_expired(
    door: tuple[Door, ServerThread],
) -> None:
    _, thread = door
    key = unique("renewal")
    waiting = anyio.Event()
    failures: list[Exception] = []
    async with Client.connect_http(thread.url, protocol_version=HANDSHAKE) as client:

        async def under_way() -> None:
            try:
                await client.call_tool("wait_for", {"key": key}, progress=lambda *_: waiting.set())
            except Exception as exc:
                failures.append(exc)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(under_way)
                await waiting.wait()
                await end_session(thread.url, client.stream.session_id)  # type: ignore[arg-type]
            [failure] = failures
            assert type(failure) is SessionExpired and isinstance(failure, ConnectionClosed)
            assert failure.message == "the server ended the MCP session (HTTP 404) while this request was under way"
            assert (await client.call_tool("status", {"key": key})).content[0].text == "cancelled"  # type: ignore[union-attr]


async def test_a_new_session_that_cannot_be_started_fails_the_call_and_the_next_call_tries_again(
    door: tuple[Door, ServerThread],
) -> None:
    gate, thread = door
    async with Client.connect_http(thread.url, protocol_version=HANDSHAKE) as client:
        gate.refusing = True
        with anyio.fail_after(10), pytest.raises(SessionExpired) as refused:
            await client.call_tool("add", {"a": 1})
        assert refused.value.message == (
            "the server ended the MCP session (HTTP 404), and a new session could not be started: "
            "the server answered HTTP 503"
        )
        assert gate.starts == 2  # once for that 404, not again and again
        gate.refusing = False
        with anyio.fail_after(10):
            result = await client.call_tool("add", {"a": 1, "b": 1})
        assert result.structured_content == {"result": 2}
        assert gate.starts == 3


async def test_a_server_that_is_gone_is_server_unreachable() -> None:
    thread = ServerThread(McpAsgiApp(make_server()))
    try:
        async with Client.connect_http(thread.url, protocol_version=HANDSHAKE) as client:
            thread.stop()
            with anyio.fail_after(10), pytest.raises(ServerUnreachable) as info:
                await client.call_tool("add", {"a": 1})
            assert "connection refused" in str(info.value)
            assert not isinstance(info.value, RpcError)
    finally:
        thread.stop()
