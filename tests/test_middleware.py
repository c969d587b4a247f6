"""Middleware around every inbound request and notification: both eras, every transport, what it may see and do,
and the middleware that ships (logging, rate limit, response size)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from helpers import init_frame, raw_server, request_frame
from http_support import JSON_HEADERS, ServerThread, call_body, init_body, stateless_body, stateless_headers

from jsonrpc_mcp import Client, Context, RpcError, Server
from jsonrpc_mcp import types as t
from jsonrpc_mcp.errors import InvalidRequest
from jsonrpc_mcp.middleware import (
    CallNext,
    Message,
    RateLimited,
    RateLimiter,
    ResponseSizeLimit,
    by_header,
    log_requests,
)
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = pytest.mark.anyio

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def recording_server(seen: list[tuple[str, str, str]]) -> Server:
    def record(message: Message, call_next: CallNext) -> Any:
        seen.append((message.kind, message.method, message.era))
        return call_next(message)

    server = Server("mw", "1", middleware=[record])

    @server.tool(inline=True)
    def add(a: int, b: int = 0) -> int:
        return a + b

    return server


async def test_a_middleware_sees_every_request_and_notification_of_both_eras() -> None:
    seen: list[tuple[str, str, str]] = []
    async with raw_server(recording_server(seen)) as peer:
        await peer.call(request_frame(1, "ping"))
        await peer.call(init_frame())
        await peer.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        await peer.call(request_frame(2, "tools/call", {"name": "add", "arguments": {"a": 1}}))
        await peer.call(request_frame(3, "no/such/method"))
        await peer.call(request_frame(4, "server/discover", {"_meta": META}))
        await peer.call(request_frame(5, "tools/call", {"name": "add", "arguments": {"a": 2}, "_meta": META}))
    assert seen == [
        ("request", "ping", "handshake"),
        ("request", "initialize", "handshake"),
        ("notification", "notifications/initialized", "handshake"),
        ("request", "tools/call", "handshake"),
        ("request", "no/such/method", "handshake"),
        ("request", "server/discover", "stateless"),
        ("request", "tools/call", "stateless"),
    ]


async def test_a_middleware_may_change_params_pass_state_answer_early_or_refuse() -> None:
    async def policy(message: Message, call_next: CallNext) -> Any:
        if message.method == "tools/call":
            params = dict(message.params)
            if params.get("name") == "forbidden":
                raise InvalidRequest("Invalid Request: not for you")
            if params.get("name") == "cached":
                return t.CallToolResult(content=[t.TextContent(text="from the cache")])
            params["arguments"] = {**params.get("arguments", {}), "b": 100}  # change what the tool gets
            message.params = params
            message.state["caller"] = "checked"
        return await call_next(message)

    server = Server("mw", "1", middleware=[policy])

    @server.tool()
    async def add(ctx: Context, a: int, b: int = 0) -> str:
        return f"{a + b} ({ctx.state.get('caller')})"

    async with Client.connect_server(server) as client:
        assert (await client.call_tool("add", {"a": 1})).content[0].text == "101 (checked)"  # type: ignore[union-attr]
        assert (await client.call_tool("cached")).content[0].text == "from the cache"  # type: ignore[union-attr]
        with pytest.raises(RpcError) as refused:
            await client.call_tool("forbidden")
        assert refused.value.code == -32600 and refused.value.message == "Invalid Request: not for you"


async def test_an_async_middleware_sees_the_outcome() -> None:
    outcomes: list[Any] = []

    async def observe(message: Message, call_next: CallNext) -> Any:
        try:
            result = await call_next(message)
        except RpcError as exc:
            outcomes.append((message.method, "error", exc.code))
            raise
        if isinstance(result, t.CallToolResult):
            outcomes.append((message.method, "isError" if result.is_error else "ok"))
        return result

    server = Server("mw", "1", middleware=[observe])

    @server.tool()
    def fails() -> str:
        raise RuntimeError("boom")

    @server.tool()
    async def works() -> str:
        return "fine"

    async with Client.connect_server(server, protocol_version="2025-11-25") as client:
        await client.call_tool("works")
        await client.call_tool("fails")
        with pytest.raises(RpcError):
            await client.call_tool("unknown")
    assert outcomes == [
        ("tools/call", "ok"),
        ("tools/call", "isError"),
        ("tools/call", "error", -32602),
    ]


async def test_plain_middleware_keep_the_loop_less_answers_of_a_stdio_server(tmp_path: Path) -> None:
    """Two plain-function middleware around a server of inline tools: ``run_stdio`` still answers everything
    without starting an event loop."""
    (tmp_path / "mw_server.py").write_text(
        "import sys\n"
        "from jsonrpc_mcp import Server\n"
        "from jsonrpc_mcp.transports.stdio import run_stdio\n"
        "def one(message, call_next):\n    return call_next(message)\n"
        "def two(message, call_next):\n    return call_next(message)\n"
        "server = Server('mw', '1', middleware=[one, two])\n"
        "@server.tool(inline=True)\n"
        "def loop_started() -> bool:\n    return 'asyncio' in sys.modules\n"
        "run_stdio(server)\n"
    )
    frames = [init_frame(), request_frame(1, "tools/call", {"name": "loop_started", "arguments": {}})]
    with anyio.fail_after(30):
        result = await anyio.run_process(
            [sys.executable, str(tmp_path / "mw_server.py")], input=b"\n".join(frames) + b"\n", check=True
        )
    answers = {answer["id"]: answer for answer in map(json.loads, result.stdout.splitlines())}
    assert answers[1]["result"]["structuredContent"] == {"result": False}


async def test_middleware_runs_over_http_in_both_eras() -> None:
    seen: list[tuple[str, str, str]] = []
    thread = ServerThread(McpAsgiApp(recording_server(seen)))
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            init = await http.post(thread.url, json=init_body(), headers=JSON_HEADERS)
            headers = {**JSON_HEADERS, "Mcp-Session-Id": init.headers["mcp-session-id"]}
            await http.post(thread.url, json=call_body(2, "add", {"a": 1}), headers=headers)
            body = stateless_body(3, "tools/call", {"name": "add", "arguments": {"a": 1}})
            await http.post(thread.url, json=body, headers=stateless_headers("tools/call", "add"))
    finally:
        thread.stop()
    assert seen == [
        ("request", "initialize", "handshake"),
        ("request", "tools/call", "handshake"),
        ("request", "tools/call", "stateless"),
    ]


# --- what ships -------------------------------------------------------------------------------------------------


async def test_log_requests_logs_method_outcome_and_time(caplog: pytest.LogCaptureFixture) -> None:
    server = Server("mw", "1", middleware=[log_requests()])

    @server.tool()
    async def fails() -> str:
        raise RuntimeError("secret detail")

    @server.tool(inline=True)
    def works(text: str) -> str:
        return text

    caplog.set_level(logging.INFO, logger="jsonrpc_mcp.requests")
    async with Client.connect_server(server, protocol_version="2025-11-25") as client:
        await client.call_tool("works", {"text": "private words"})
        await client.call_tool("fails")
        with pytest.raises(RpcError):
            await client.call_tool("unknown")
    lines = [r.getMessage() for r in caplog.records if r.name == "jsonrpc_mcp.requests"]
    assert any(line.startswith("initialize id=") and ": ok in " in line for line in lines), lines
    calls = [line for line in lines if line.startswith("tools/call")]
    assert [line.split(": ")[1].split(" in ")[0] for line in calls] == ["ok", "tool error", "error -32602"]
    assert not any("private words" in line or "secret" in line for line in lines)


async def test_a_rate_limiter_refuses_past_its_burst_and_tells_when_to_retry() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=0.5, burst=2, clock=lambda: now[0])
    server = Server("mw", "1", middleware=[limiter])

    @server.tool(inline=True)
    def ping_tool() -> str:
        return "pong"

    call = {"name": "ping_tool", "arguments": {}}
    async with raw_server(server) as peer:
        assert "result" in await peer.call(init_frame())  # the first token
        assert "result" in await peer.call(request_frame(1, "tools/call", call))
        refused = await peer.call(request_frame(2, "tools/call", call))
        assert refused["error"] == {
            "code": -31010,
            "message": "Too many requests: retry after 2 s",
            "data": {"retryAfter": 2},
        }
        await peer.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')  # (never limited)
        now[0] += 2.0  # one token back
        assert "result" in await peer.call(request_frame(3, "tools/call", call))


def test_a_factory_or_a_class_given_in_a_middlewares_place_is_refused_when_registered() -> None:
    with pytest.raises(TypeError, match=r"^log_requests makes a middleware: give the one it makes, log_requests\(\)$"):
        Server("mw", "1", middleware=[log_requests])  # (was: every message failed with "Internal error")
    with pytest.raises(
        TypeError, match=r"^RateLimiter is a class: give a middleware made of it, RateLimiter\(\.\.\.\)$"
    ):
        Server("mw", "1").add_middleware(RateLimiter)  # type: ignore[arg-type]
    server = Server("mw", "1", tracing=False)  # (no tracing in its chain)
    with pytest.raises(TypeError, match="a middleware is a function"):
        server.middleware = [log_requests(), "log"]  # type: ignore[list-item]
    assert server.middleware == ()  # (nothing was changed)
    server.add_middleware(log_requests())
    assert len(server.middleware) == 1


async def test_a_rate_limiter_given_methods_limits_those_only() -> None:
    limiter = RateLimiter(rate=0.001, burst=1, methods=["tools/call"])
    server = Server("mw", "1", middleware=[limiter])

    @server.tool(inline=True)
    def ping_tool() -> str:
        return "pong"

    call = {"name": "ping_tool", "arguments": {}}
    async with raw_server(server) as peer:
        assert "result" in await peer.call(init_frame())
        for ident in (1, 2, 3):
            assert "result" in await peer.call(request_frame(ident, "tools/list", {}))  # (not limited)
        assert "result" in await peer.call(request_frame(4, "tools/call", call))
        assert (await peer.call(request_frame(5, "tools/call", call)))["error"]["code"] == -31010


def test_a_rate_limiter_keeps_max_keys_buckets_the_least_recently_used_going_first() -> None:
    limiter = RateLimiter(rate=0.001, burst=1, max_keys=2, clock=lambda: 0.0)
    limiter.take("a")
    limiter.take("b")
    with pytest.raises(RateLimited):
        limiter.take("a")  # (and "a" is now the most recently used)
    limiter.take("c")  # a third key: "b"'s bucket goes
    limiter.take("b")  # a new bucket, full
    with pytest.raises(RateLimited):
        limiter.take("c")


def test_a_rate_limiter_refuses_a_key_factory_and_a_string_of_methods() -> None:
    with pytest.raises(TypeError, match=r'key=by_header\("x-api-key"\)'):
        RateLimiter(rate=1, burst=1, key=by_header)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="methods is a set of method names, not a string"):
        RateLimiter(rate=1, burst=1, methods="tools/call")  # type: ignore[arg-type]
    for bad in ({"rate": 0}, {"rate": float("nan")}, {"burst": 0}, {"max_keys": 0}):
        (name,) = bad
        with pytest.raises(ValueError, match=f"^{name} must be positive, not "):
            RateLimiter(**{"rate": 1, "burst": 1, **bad})  # type: ignore[arg-type]


async def test_a_rate_limit_over_http_is_429_in_both_eras() -> None:
    limiter = RateLimiter(rate=0.001, burst=2, key=by_header("x-caller"))
    server = Server("mw", "1", middleware=[limiter])

    @server.tool(inline=True)
    def ping_tool() -> str:
        return "pong"

    thread = ServerThread(McpAsgiApp(server))
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            mine = {"x-caller": "a"}
            init = await http.post(thread.url, json=init_body(), headers={**JSON_HEADERS, **mine})
            session = {**JSON_HEADERS, **mine, "Mcp-Session-Id": init.headers["mcp-session-id"]}
            ok = await http.post(thread.url, json=call_body(2, "ping_tool", {}), headers=session)
            over = await http.post(thread.url, json=call_body(3, "ping_tool", {}), headers=session)
            assert ok.status_code == 200 and over.status_code == 429 and over.json()["error"]["code"] == -31010
            body = stateless_body(4, "tools/call", {"name": "ping_tool", "arguments": {}})
            stateless = {**stateless_headers("tools/call", "ping_tool"), **mine}
            refused = await http.post(thread.url, json=body, headers=stateless)
            other = await http.post(thread.url, json=body, headers={**stateless, "x-caller": "b"})
            assert refused.status_code == 429 and other.status_code == 200  # a bucket per key
    finally:
        thread.stop()


async def test_a_response_size_limit_turns_a_big_answer_into_an_error() -> None:
    server = Server("mw", "1", middleware=[ResponseSizeLimit(1000)])

    @server.tool()
    async def big(n: int) -> str:
        return "x" * n

    @server.resource("text://big", inline=True)
    def big_resource() -> str:
        return "y" * 5000

    async with Client.connect_server(server, protocol_version="2025-11-25") as client:
        assert (await client.call_tool("big", {"n": 10})).content[0].text == "x" * 10  # type: ignore[union-attr]
        over = await client.call_tool("big", {"n": 5000})
        assert over.is_error and "over this server's limit of 1000 bytes" in over.content[0].text  # type: ignore[union-attr]
        with pytest.raises(RpcError) as refused:
            await client.read_resource("text://big")
        assert refused.value.code == -32603


async def test_a_client_middleware_sees_what_the_client_sends_and_receives() -> None:
    seen: list[tuple[str, str, str]] = []

    async def stamp(message: Any, call_next: Any) -> Any:
        seen.append((message.direction, message.kind, message.method))
        if message.direction == "outgoing" and message.method == "tools/call":
            message.params = {**message.params, "_meta": {**message.params.get("_meta", {}), "trace": "t-1"}}
        return await call_next(message)

    server = Server("mw", "1")

    @server.tool()
    async def whoami(ctx: Context) -> str:
        answer = await ctx.sample("hi")
        return f"{ctx.meta.get('trace')} {answer.content.text}"  # type: ignore[union-attr]

    async def sampling(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        return t.CreateMessageResult(role="assistant", content=t.TextContent(text="sampled"), model="m")

    async with Client.connect_server(
        server, protocol_version="2025-11-25", middleware=[stamp], sampling=sampling
    ) as client:
        result = await client.call_tool("whoami")
    assert result.content[0].text == "t-1 sampled"  # type: ignore[union-attr]
    assert ("outgoing", "request", "initialize") in seen
    assert ("outgoing", "notification", "notifications/initialized") in seen
    assert ("outgoing", "request", "tools/call") in seen
    assert ("incoming", "request", "sampling/createMessage") in seen
