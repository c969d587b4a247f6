"""Mounting ``McpAsgiApp`` under a prefix in a framework (Starlette under a real uvicorn): its ``path`` is relative to
the mount point, ``path=None`` answers at the mount point itself, and the app's own lifespan can be the
framework's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from helpers import EVERYTHING
from http_support import HTTPX_GENERATORS, ServerThread, collect_garbage  # noqa: F401  (a fixture)

from jsonrpc_mcp import Client
from jsonrpc_mcp.cli import load_app
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

starlette = pytest.importorskip("starlette")
from starlette.applications import Starlette  # noqa: E402
from starlette.routing import Mount  # noqa: E402

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    """One Starlette app: the MCP app at /tools (its endpoint /tools/mcp) and again at /bare with path=None."""
    tools = McpAsgiApp(load_app(str(EVERYTHING)))
    bare = McpAsgiApp(load_app(str(EVERYTHING)), path=None)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with tools.lifespan(), bare.lifespan():
            yield

    app = Starlette(routes=[Mount("/tools", app=tools), Mount("/bare", app=bare)], lifespan=lifespan)
    thread = ServerThread(app)
    try:
        yield f"http://127.0.0.1:{thread.port}"
    finally:
        thread.stop()


@pytest.mark.parametrize("endpoint", ["/tools/mcp", "/bare/", "/bare"])  # /bare: Starlette's 307, followed
@pytest.mark.parametrize("version", ["2025-11-25", "auto"])
async def test_a_mounted_app_answers_under_its_prefix(web: str, endpoint: str, version: str) -> None:
    async with Client.connect_http(web + endpoint, protocol_version=version) as client:
        assert "add" in {tool.name for tool in await client.list_tools()}
        assert (await client.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}


def mounted(framework: str, mcp: McpAsgiApp) -> Any:
    """The app mounted at /tools of a Starlette or FastAPI app whose lifespan is ``mcp.lifespan``, as it is."""
    if framework == "fastapi":
        fastapi = pytest.importorskip("fastapi")
        api = fastapi.FastAPI(lifespan=mcp.lifespan)
        api.mount("/tools", mcp)
        return api
    return Starlette(routes=[Mount("/tools", app=mcp)], lifespan=mcp.lifespan)


@pytest.mark.parametrize("framework", ["starlette", "fastapi"])
async def test_the_apps_lifespan_is_the_frameworks_as_it_is(framework: str) -> None:
    """``lifespan=mcp.lifespan``: the framework calls it with its app; handshake-era sessions live in the task group
    it runs, and end when uvicorn shuts the framework down."""
    mcp = McpAsgiApp(load_app(str(EVERYTHING)))
    thread = ServerThread(mounted(framework, mcp))
    try:
        with anyio.fail_after(30):
            async with Client.connect_http(
                f"http://127.0.0.1:{thread.port}/tools/mcp", protocol_version="2025-11-25"
            ) as client:
                assert (await client.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}
                assert mcp.running and len(mcp.sessions) == 1  # the framework's lifespan runs the app's task group
    finally:
        thread.stop()
    assert not mcp.running and len(mcp.sessions) == 0


async def test_the_apps_lifespan_can_be_the_frameworks() -> None:
    """``lifespan=lambda app: mcp.lifespan()``: it yields no state for Starlette to read."""
    mcp = McpAsgiApp(load_app(str(EVERYTHING)))
    thread = ServerThread(Starlette(routes=[Mount("/tools", app=mcp)], lifespan=lambda app: mcp.lifespan()))
    try:
        async with Client.connect_http(f"http://127.0.0.1:{thread.port}/tools/mcp") as client:
            assert "add" in {tool.name for tool in await client.list_tools()}
            assert mcp.running  # the framework's lifespan runs the app's task group
    finally:
        thread.stop()
    assert not mcp.running
