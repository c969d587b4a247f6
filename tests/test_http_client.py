"""Our client over Streamable HTTP (``Client.connect_http``) against our server on a real uvicorn.

Both eras end to end (tools, progress, elicitation), custom headers on every HTTP request, the standalone GET
stream, SSE resumption after the server closes a stream, DELETE on close, and the errors a user sees when the
session ends under them or the server is unreachable.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from helpers import paced
from http_support import HTTPX_GENERATORS, ServerThread, make_server, unique
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Client, RpcError, ServerUnreachable
from jsonrpc_mcp import types as t
from jsonrpc_mcp.jsonrpc.streams import Outgoing
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.http_client import connect_http

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]

ERAS = [pytest.param("2025-11-25", id="handshake"), pytest.param("auto", id="stateless")]


class Recorder:
    """ASGI middleware that remembers the method and headers of every request."""

    def __init__(self, app: McpAsgiApp) -> None:
        self.app = app
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.get_answered: set[str] = set()  # sessions whose GET stream has its response headers

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.seen.append((scope["method"], headers))
        if scope["method"] != "GET":
            await self.app(scope, receive, send)
            return

        async def noting(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.start" and "mcp-session-id" in headers:
                self.get_answered.add(headers["mcp-session-id"])

        await self.app(scope, receive, noting)


class UnansweredGet:
    """ASGI middleware under which a GET is never answered (it waits for the client to go)."""

    def __init__(self, app: McpAsgiApp) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder(McpAsgiApp(make_server(), sse_retry_ms=20))


@pytest.fixture(scope="module")
def server(recorder: Recorder) -> Iterator[ServerThread]:
    thread = ServerThread(recorder)
    yield thread
    thread.stop()


async def answer(params: t.ElicitRequestParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"answer": "Ada"})


@pytest.mark.parametrize("version", ERAS)
async def test_tools_progress_and_elicitation(server: ServerThread, version: str) -> None:
    steps: list[float] = []
    async with Client.connect_http(server.url, protocol_version=version, elicitation=answer) as client:
        assert client.stateless is (version == "auto")
        names = [tool.name for tool in await client.list_tools()]
        assert {"add", "progress", "ask", "region"} <= set(names)
        result = await client.call_tool("add", {"a": 2, "b": 40})
        assert result.structured_content == {"result": 42}
        done = await client.call_tool("progress", {"steps": 3}, progress=lambda p, total, msg: steps.append(p))
        assert done.content[0].text == "3 steps"  # type: ignore[union-attr]
        asked = await client.call_tool("ask", {"question": "Name?"})
        assert asked.content[0].text == "accept: Ada"  # type: ignore[union-attr]
        failed = await client.call_tool("fail", {"message": "nope"})
        assert failed.is_error is True
        with pytest.raises(RpcError) as info:
            await client.call_tool("no_such_tool", {})
        assert info.value.code == -32602
    assert paced(steps, [1, 2, 3])


async def test_mcp_param_headers_are_mirrored(server: ServerThread) -> None:
    async with Client.connect_http(server.url) as client:
        assert client.stateless
        await client.list_tools()  # learns the x-mcp-header annotations
        result = await client.call_tool("region", {"region": "zürich", "count": 3, "flag": True, "query": "q"})
        assert result.content[0].text == "zürich:q:3:True"  # type: ignore[union-attr]


async def test_custom_headers_go_with_every_request(server: ServerThread, recorder: Recorder) -> None:
    token = unique("token")
    headers = {"Authorization": f"Bearer {token}"}
    async with Client.connect_http(server.url, headers=headers, protocol_version="2025-11-25") as client:
        await client.call_tool("add", {"a": 1})
        sid = client.stream.session_id  # type: ignore[attr-defined]
        assert sid is not None
    ours = [(method, h) for method, h in recorder.seen if h.get("mcp-session-id") == sid]
    assert {method for method, _ in ours} >= {"POST", "DELETE"}  # and GET, once the standalone stream opened
    assert all(h.get("authorization") == f"Bearer {token}" for _, h in ours)
    mine = [(method, h) for method, h in recorder.seen if h.get("authorization") == f"Bearer {token}"]
    assert mine[0][0] == "POST"
    first_post = mine[0][1]
    assert first_post["accept"] == "application/json, text/event-stream"
    assert "mcp-session-id" not in first_post and "mcp-protocol-version" not in first_post
    later = [h for m, h in mine[1:] if m == "POST"]
    assert later and all(h["mcp-session-id"] == sid and h["mcp-protocol-version"] == "2025-11-25" for h in later)


async def test_stateless_requests_carry_the_standard_headers(server: ServerThread, recorder: Recorder) -> None:
    token = unique("stateless")
    async with Client.connect_http(server.url, headers={"X-Test": token}) as client:
        await client.call_tool("add", {"a": 1})
    mine = [h for method, h in recorder.seen if h.get("x-test") == token]
    assert all("mcp-session-id" not in h for h in mine)
    call = next(h for h in mine if h.get("mcp-method") == "tools/call")
    assert call["mcp-name"] == "add" and call["mcp-protocol-version"] == "2026-07-28"
    # every message a new POST, each accepting both answers (2026-07-28: no GET, no session)
    sent = [(method, h) for method, h in recorder.seen if h.get("x-test") == token]
    assert sent and all(method == "POST" and h["accept"] == "application/json, text/event-stream" for method, h in sent)


async def test_delete_on_close(server: ServerThread, recorder: Recorder) -> None:
    app = recorder.app
    async with Client.connect_http(server.url, protocol_version="2025-11-25") as client:
        sid = client.stream.session_id  # type: ignore[attr-defined]
        assert sid in app.sessions
    assert sid not in app.sessions


async def test_standalone_stream_delivers_unrelated_notifications(server: ServerThread, recorder: Recorder) -> None:
    changed = anyio.Event()

    def on_notification(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tools/list_changed":
            changed.set()

    async with Client.connect_http(server.url, protocol_version="2025-11-25", on_notification=on_notification) as c:
        # The handshake ends once the server has answered the GET, so the first notification already finds it.
        assert c.stream.session_id in recorder.get_answered  # type: ignore[attr-defined]
        await c.call_tool("grow", {"name": unique("tool").replace("-", "_")})
        with anyio.fail_after(10):
            await changed.wait()


async def test_a_get_never_answered_holds_the_handshake_only_so_long() -> None:
    thread = ServerThread(UnansweredGet(McpAsgiApp(make_server())))
    try:
        options = {"http_options": {"get_stream_wait": 0.2}, "protocol_version": "2025-11-25"}
        with anyio.fail_after(10):
            async with Client.connect_http(thread.url, **options) as client:  # type: ignore[arg-type]
                result = await client.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"result": 5}
    finally:
        thread.stop()


async def test_a_closed_stream_is_resumed(server: ServerThread) -> None:
    key = unique("client-poll")
    async with Client.connect_http(server.url, protocol_version="2025-11-25") as client:
        async with anyio.create_task_group() as tg:
            results: list[t.CallToolResult] = []

            async def polled() -> None:
                results.append(await client.call_tool("poll", {"key": key}))

            tg.start_soon(polled)
            await client.call_tool("release", {"key": key})
        assert results[0].content[0].text == f"polled {key}"  # type: ignore[union-attr]


async def test_a_session_ended_under_a_bare_stream_fails_each_request_saying_so(server: ServerThread) -> None:
    """With no client above it to start a new session (the stream alone), every request fails with an error
    response made by the stream (tests/test_http_session_renewal.py: the client starts a new one)."""
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    with anyio.fail_after(10):
        async with connect_http(server.url) as stream:
            await stream.send(
                [
                    Outgoing(
                        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).encode(),
                        None,
                        2,
                    )
                ]
            )
            assert json.loads((await stream.receive())[0])["id"] == 1
            await stream.send([Outgoing(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', None, 1)])
            async with httpx.AsyncClient() as http:
                assert (await http.delete(server.url, headers={"Mcp-Session-Id": stream.session_id})).status_code == 200
            for ident in (2, 3):  # every later request fails fast, with the same reason
                await stream.send([Outgoing(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % ident, None, 2)])
                answer = json.loads((await stream.receive())[0])
                assert answer == {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "error": {"code": -32000, "message": "the server ended the MCP session (HTTP 404)"},
                }


async def test_an_unreachable_server_fails_fast() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()  # nothing listens there now
    with anyio.fail_after(10), pytest.raises(ServerUnreachable) as info:
        async with Client.connect_http(f"http://127.0.0.1:{port}/mcp"):
            pass
    assert str(info.value) == (
        f"cannot connect to 127.0.0.1:{port} (http://127.0.0.1:{port}/mcp): connection refused (is the server running?)"
    )


@pytest.mark.parametrize("preference", ["json", "sse"])
async def test_response_preferences(preference: str) -> None:
    thread = ServerThread(McpAsgiApp(make_server(), json_response_preference=preference))  # type: ignore[arg-type]
    try:
        for version in ("2025-11-25", "auto"):
            async with Client.connect_http(thread.url, protocol_version=version) as client:
                assert (await client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}
                done = await client.call_tool("progress", {"steps": 2})
                assert done.content[0].text == "2 steps"  # type: ignore[union-attr]
    finally:
        thread.stop()


async def test_leaving_a_listen_ends_the_subscription_on_the_server() -> None:
    """2026-07-28 over HTTP: leaving ``listen()`` closes its response stream, which is the cancellation the spec
    asks for: the server ends the subscription, and a later listen with another filter hears nothing of the
    old one."""
    from jsonrpc_mcp import Server

    server = Server("listening", "1")
    added = 0

    @server.tool(inline=True)  # (it changes the server: on the event loop)
    def add_tool() -> str:
        """Register one more tool (tools/list_changed)."""
        nonlocal added
        added += 1
        server.tool(name=f"extra_{added}")(lambda: "x")
        return "added"

    @server.tool(inline=True)
    def add_prompt() -> str:
        """Register a prompt (prompts/list_changed)."""
        server.prompt(name=f"prompt_{added}")(lambda: "hi")
        return "added"

    @server.prompt(inline=True)
    def greet() -> str:
        return "hello"

    @server.tool(inline=True)
    def listening() -> int:
        """How many subscriptions/listen streams the server serves."""
        return sum(1 for session in server.sessions() if session.listeners)

    heard: list[str] = []
    prompts_changed = anyio.Event()

    async def on_notification(method: str, params: dict[str, Any]) -> None:
        heard.append(method)
        if method == "notifications/prompts/list_changed":
            prompts_changed.set()

    thread = ServerThread(McpAsgiApp(server))
    try:
        async with Client.connect_http(thread.url, on_notification=on_notification) as client:
            assert client.stateless
            async with client.listen(tools=True, prompts=True):
                assert (await client.call_tool("listening")).structured_content == {"result": 1}
            with anyio.fail_after(10):  # (the server hears the stream close as soon as it reads the socket)
                while (await client.call_tool("listening")).structured_content != {"result": 0}:
                    pass
            heard.clear()
            async with client.listen(prompts=True):
                await client.call_tool("add_tool")  # a change the old subscription asked for, not this one
                await client.call_tool("add_prompt")
                with anyio.fail_after(10):
                    await prompts_changed.wait()
            assert "notifications/tools/list_changed" not in heard, heard
    finally:
        thread.stop()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"timeout": 0}, "timeout must be a positive number of seconds, not 0"),
        ({"timeout": float("nan")}, "timeout must be a positive number of seconds"),
        ({"http_options": {"sse_read_timeout": -1}}, "sse_read_timeout must be a positive number of seconds"),
        ({"http_options": {"max_reconnects": -1}}, "max_reconnects must be a whole number, zero or more"),
    ],
)
async def test_a_timeout_that_would_fail_every_request_is_refused_before_connecting(
    setting: dict[str, Any], message: str
) -> None:
    with anyio.fail_after(10), pytest.raises(ValueError, match=message):  # (was: every request timed out at once)
        async with Client.connect_http("http://127.0.0.1:9/mcp", **setting):
            pass  # pragma: no cover
