"""basic/lifecycle (2024-11-05 .. 2025-11-25): what the server sends before the client's
``notifications/initialized`` (the ids are in conformance/spec/coverage/basic.toml)."""

from __future__ import annotations

import json

import pytest
from helpers import HANDSHAKE_VERSIONS, init_frame, notification_frame, raw_server, request_frame

from jsonrpc_mcp import Context, Server

pytestmark = pytest.mark.anyio


def asking_server() -> Server:
    server = Server("asks", "1")

    @server.tool()
    async def roots(ctx: Context) -> str:
        listed = await ctx.list_roots()
        return ",".join(root.uri for root in listed.roots)

    return server


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
async def test_no_request_of_the_server_before_the_client_is_initialized(version: str) -> None:
    """ "The server SHOULD NOT send requests other than pings and logging before receiving the initialized
    notification": a handler asking the client for its roots before then fails (decision 10a) and nothing is sent
    to the client; once initialized, the same call asks and is answered."""
    async with raw_server(asking_server()) as peer:
        await peer.send(init_frame(version, "init", {"roots": {}}))
        assert "result" in await peer.recv_json()
        early = await peer.call(request_frame(2, "tools/call", {"name": "roots", "arguments": {}}))
        assert await peer.sync() == []  # no roots/list went out
        await peer.send(notification_frame("notifications/initialized"))
        await peer.send(request_frame(3, "tools/call", {"name": "roots", "arguments": {}}))
        asked = await peer.recv_json()
        assert asked["method"] == "roots/list"
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": [{"uri": "file:///work"}]}}
        await peer.send(json.dumps(answer).encode())
        done = await peer.recv_json()
    assert early["error"]["code"] == -32603 and "notifications/initialized" in early["error"]["message"]
    assert done["id"] == 3 and done["result"]["content"][0]["text"] == "file:///work"
