"""Streamable HTTP without sessions (``McpAsgiApp(sessions=False)``): every handshake-era POST is served on its
own, so that any worker of several can answer any request (real uvicorn, two app instances for two workers)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from http_support import (
    HTTPX_GENERATORS,
    JSON_HEADERS,
    ServerThread,
    call_body,
    init_body,
    make_server,
    response_of,
)
from http_support import collect_garbage as collect_garbage
from http_support import http as http

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]


def sessionless(server: Server | None = None) -> ServerThread:
    return ServerThread(McpAsgiApp(server or make_server(), sessions=False))


async def test_a_handshake_client_is_served_by_whichever_worker_gets_each_request(http: httpx.AsyncClient) -> None:
    """initialize on one worker, the calls on another: no session id is minted, and none is needed."""
    one, two = sessionless(), sessionless()
    try:
        init = await http.post(one.url, json=init_body(), headers=JSON_HEADERS)
        assert init.status_code == 200 and "mcp-session-id" not in init.headers
        assert init.json()["result"]["protocolVersion"] == "2025-11-25"
        headers = {**JSON_HEADERS, "MCP-Protocol-Version": "2025-11-25"}
        note = await http.post(two.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        assert note.status_code == 202
        for ident, worker in enumerate((two, one, two), start=2):
            reply = await http.post(worker.url, json=call_body(ident, "add", {"a": ident, "b": 1}), headers=headers)
            assert response_of(reply, ident)["result"]["structuredContent"] == {"result": ident + 1}
        # A session id a client sends anyway is not looked up.
        reply = await http.post(
            two.url, json=call_body(9, "add", {"a": 1}), headers={**headers, "Mcp-Session-Id": "from-elsewhere"}
        )
        assert response_of(reply, 9)["result"]["structuredContent"] == {"result": 1}
        get = await http.get(one.url, headers={"Accept": "text/event-stream", "MCP-Protocol-Version": "2025-11-25"})
        delete = await http.delete(one.url, headers={"MCP-Protocol-Version": "2025-11-25"})
        assert get.status_code == 405 and delete.status_code == 405 and get.headers["allow"] == "POST"
    finally:
        one.stop()
        two.stop()


async def test_without_a_version_header_a_request_is_served_as_2025_03_26(http: httpx.AsyncClient) -> None:
    """The spec's rule when ``MCP-Protocol-Version`` is absent; that revision has no resource links, so a tool's
    link comes back as a text block naming it (the result fitted to the revision)."""
    server = Server("links", "1")

    @server.tool(inline=True)
    def link() -> Any:
        from jsonrpc_mcp import types as t

        return [t.ResourceLink(uri="file:///a.txt", name="a")]

    thread = sessionless(server)
    try:
        reply = await http.post(thread.url, json=call_body(1, "link", {}), headers=JSON_HEADERS)
        content = response_of(reply, 1)["result"]["content"]
        assert content[0]["type"] == "text"
        with_header = {**JSON_HEADERS, "MCP-Protocol-Version": "2025-11-25"}
        reply = await http.post(thread.url, json=call_body(2, "link", {}), headers=with_header)
        assert response_of(reply, 2)["result"]["content"][0]["type"] == "resource_link"
    finally:
        thread.stop()


async def test_nothing_is_asked_of_a_client_without_a_session(http: httpx.AsyncClient) -> None:
    """With no session, no capability of the client is known and nothing can be sent to it: a tool that needs
    elicitation gets -32021 at once instead of a request that could never be answered."""
    server = Server("asks", "1")

    @server.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return str(answer.content)

    thread = sessionless(server)
    try:
        headers = {**JSON_HEADERS, "MCP-Protocol-Version": "2025-11-25"}
        with anyio.fail_after(10):
            reply = await http.post(thread.url, json=call_body(1, "ask", {}), headers=headers)
        assert response_of(reply, 1)["error"]["code"] == -32021
    finally:
        thread.stop()


async def test_our_client_in_the_handshake_era_works_against_it() -> None:
    thread = sessionless()
    try:
        async with Client.connect_http(thread.url, protocol_version="2025-11-25") as client:
            assert not client.stateless
            assert (await client.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}
            assert [tool.name for tool in await client.list_tools()][:1] == ["add"]
            progress: list[float] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(value)

            done = await client.call_tool("progress", {"steps": 2}, progress=on_progress)
            assert done.content[0].text == "2 steps" and sorted(progress) == [1, 2]  # type: ignore[union-attr]
    finally:
        thread.stop()
