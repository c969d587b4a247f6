"""Interop over Streamable HTTP with the official MCP Python SDK (``mcp``, a dev-only dependency).

* the SDK's client against our ASGI app (handshake era and its ``auto`` mode, which probes the stateless era);
* our client against the SDK's Streamable HTTP server (a Starlette app, here on uvicorn), also mounted in a
  Starlette app, which redirects ``/mcp`` to ``/mcp/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers import paced
from http_support import HTTPX_GENERATORS, ServerThread, start_app
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Client, RpcError
from jsonrpc_mcp import types as t

mcp = pytest.importorskip("mcp")

from mcp.server.mcpserver import Context as SdkContext  # noqa: E402 - after the importorskip
from mcp.server.mcpserver import MCPServer  # noqa: E402
from pydantic import BaseModel  # noqa: E402

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.interop,
    HTTPX_GENERATORS,
    pytest.mark.usefixtures("collect_garbage"),
    # The SDK's own deprecation notices (e.g. for the handshake era) are not ours to fix.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]


# --- the SDK's client, our server ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ours() -> Iterator[ServerThread]:
    thread = start_app()
    yield thread
    thread.stop()


def _text(result: Any) -> str:
    return str(result.content[0].text)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_client_against_our_server(ours: ServerThread, mode: str) -> None:
    from mcp import types as sdk

    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_elicit(context: Any, params: Any) -> Any:
        return sdk.ElicitResult(action="accept", content={"answer": "Grace"})

    async with mcp.Client(ours.url, mode=mode, elicitation_callback=on_elicit) as client:
        tools = await client.list_tools()
        assert {"add", "progress", "ask"} <= {tool.name for tool in tools.tools}
        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert added.structured_content == {"result": 5}
        done = await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
        assert _text(done) == "3 steps"
        asked = await client.call_tool("ask", {"question": "Who?"})
        assert _text(asked) == "accept: Grace"
        failed = await client.call_tool("fail", {"message": "nope"})
        assert failed.is_error is True
    assert paced(progress, [1, 2, 3])


async def test_sdk_sse_client_against_our_legacy_sse_transport() -> None:
    """The SDK's HTTP+SSE client (the 2024-11-05 transport) against ``McpAsgiApp(legacy_sse=True)``."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    thread = start_app(legacy_sse=True)
    try:
        progress: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        async with (
            sse_client(f"http://{thread.host}:{thread.port}/sse") as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = await session.list_tools()
            assert {"add", "progress"} <= {tool.name for tool in tools.tools}
            added = await session.call_tool("add", {"a": 2, "b": 3})
            assert added.structured_content == {"result": 5}
            done = await session.call_tool("progress", {"steps": 2}, progress_callback=on_progress)
            assert _text(done) == "2 steps"
            failed = await session.call_tool("fail", {"message": "nope"})
            assert failed.is_error is True
        assert progress == [1, 2]
    finally:
        thread.stop()


# --- our client, the SDK's server ----------------------------------------------------------------------------------


class Answer(BaseModel):
    answer: str


def _sdk_app(path: str = "/mcp") -> Any:
    server = MCPServer("sdk-server")

    @server.tool()
    def add(a: int, b: int = 0) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def count(steps: int, ctx: SdkContext) -> str:
        """Report progress."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps)
        return f"counted {steps}"

    @server.tool()
    async def ask(question: str, ctx: SdkContext) -> str:
        """Elicit an answer."""
        result = await ctx.elicit(question, Answer)
        data = getattr(result, "data", None)
        return f"{result.action}: {data.answer if data is not None else None}"

    return server.streamable_http_app(streamable_http_path=path)


@pytest.fixture(scope="module")
def theirs() -> Iterator[ServerThread]:
    thread = ServerThread(_sdk_app())
    yield thread
    thread.stop()


async def answer(params: t.ElicitRequestParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"answer": "Lovelace"})


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "auto"])
async def test_our_client_against_the_sdk_server(theirs: ServerThread, version: str) -> None:
    steps: list[float] = []
    async with Client.connect_http(theirs.url, protocol_version=version, elicitation=answer) as client:
        names = {tool.name for tool in await client.list_tools()}
        assert {"add", "count", "ask"} <= names
        added = await client.call_tool("add", {"a": 40, "b": 2})
        assert "42" in _text(added)
        counted = await client.call_tool("count", {"steps": 3}, progress=lambda p, total, msg: steps.append(p))
        assert _text(counted) == "counted 3"
        if not client.stateless:  # the SDK's ctx.elicit needs a back-channel; the stateless era has none
            asked = await client.call_tool("ask", {"question": "Who?"})
            assert _text(asked) == "accept: Lovelace"
        assert client.stateless is (version == "auto")
        with pytest.raises(RpcError):
            await client.request("no/such/method")
    assert paced(steps, [1, 2, 3])


@pytest.fixture(scope="module")
def mounted() -> Iterator[ServerThread]:
    """The SDK's app mounted at ``/mcp`` in Starlette: a request to ``/mcp`` gets a 307 to ``/mcp/``. (Built
    outside the async tests: the SDK makes anyio primitives when the app is made, for the loop that serves it.)"""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    inner = _sdk_app("/")
    outer = Starlette(routes=[Mount("/mcp", app=inner)], lifespan=lambda app: inner.router.lifespan_context(inner))
    thread = ServerThread(outer)
    yield thread
    thread.stop()


@pytest.mark.parametrize("version", ["2025-11-25", "auto"])
async def test_our_client_through_a_framework_mount_redirect(mounted: ServerThread, version: str) -> None:
    async with Client.connect_http(mounted.url, protocol_version=version, elicitation=answer) as client:
        added = await client.call_tool("add", {"a": 40, "b": 2})
        assert "42" in _text(added)
        if not client.stateless:
            asked = await client.call_tool("ask", {"question": "Who?"})
            assert _text(asked) == "accept: Lovelace"
        assert client.stream.url == mounted.url  # type: ignore[attr-defined]  # a 307 does not move the endpoint


def _sdk_sse_app() -> Any:
    """The SDK's server on its HTTP+SSE transport (``run("sse")``): ``GET /sse``, ``POST /messages/``."""
    server = MCPServer("sdk-sse-server")

    @server.tool()
    def add(a: int, b: int = 0) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def count(steps: int, ctx: SdkContext) -> str:
        """Report progress."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps)
        return f"counted {steps}"

    return server.sse_app()


async def test_our_client_falls_back_to_the_sdk_servers_legacy_sse_transport() -> None:
    """Streamable HTTP's first POST gets 405 from the SDK's SSE server: connect_http goes on over HTTP+SSE."""
    thread = ServerThread(_sdk_sse_app())
    try:
        url = f"http://{thread.host}:{thread.port}/sse"
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        async with Client.connect_http(url) as client:
            assert client.server_info.name == "sdk-sse-server"
            added = await client.call_tool("add", {"a": 2, "b": 3})
            assert added.structured_content == {"result": 5}
            counted = await client.call_tool("count", {"steps": 2}, progress=on_progress)
            assert counted.content[0].text == "counted 2" and sorted(seen) == [1, 2]
        async with Client.connect_sse(url, protocol_version="2024-11-05") as client:
            assert client.protocol_version == "2024-11-05"
            assert (await client.call_tool("add", {"a": 1})).structured_content == {"result": 1}
    finally:
        thread.stop()
