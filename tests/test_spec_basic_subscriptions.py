"""2026-07-28 basic/patterns/subscriptions: listen streams across connections, and the acknowledged filter on the
client's side (the ids are in conformance/spec/coverage/basic.toml)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from helpers import RawPeer, raw_server, request_frame

from jsonrpc_mcp import Client, Server
from jsonrpc_mcp.transports.memory import memory_pair

pytestmark = pytest.mark.anyio

V5 = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V5, "io.modelcontextprotocol/clientCapabilities": {}}
SUB = "io.modelcontextprotocol/subscriptionId"


def listening_server() -> Server:
    server = Server("changing", "1")

    @server.tool()
    def one() -> str:
        return "1"

    return server


def listen(ident: int) -> bytes:
    return request_frame(ident, "subscriptions/listen", {"notifications": {"toolsListChanged": True}, "_meta": META})


async def test_a_new_connection_hears_nothing_until_it_listens_again() -> None:
    """ "if the connection is terminated and then re-established, the client MUST re-send subscriptions/listen to
    re-establish its subscriptions — the server holds no subscription state across reconnections"."""
    server = listening_server()
    async with raw_server(server) as peer:
        await peer.send(listen(1))
        ack = await peer.recv_json()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
    async with raw_server(server) as peer:
        await server.notify_list_changed("tools")
        assert await peer.sync() == []  # the old subscription did not follow the client here
        await peer.send(listen(2))
        ack = await peer.recv_json()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        await server.notify_list_changed("tools")
        note = await peer.recv_json()
    assert note["method"] == "notifications/tools/list_changed"
    assert note["params"]["_meta"][SUB] == 2


async def test_the_client_is_handed_the_filter_the_server_acknowledged_not_the_one_it_asked_for() -> None:
    """ "The client SHOULD check the acknowledged filter against what it requested and handle any unsupported
    types gracefully": a server that honours part of the filter still opens the stream, and the caller learns
    which part."""
    ours, theirs = memory_pair()
    peer = RawPeer(theirs)
    asked: list[dict[str, Any]] = []
    discover = {"supportedVersions": [V5], "capabilities": {"tools": {"listChanged": True}}}

    async def serve() -> None:
        while True:
            message = await peer.recv_json(timeout=30)
            if message.get("method") == "server/discover":
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": discover}
                await peer.send(json.dumps(reply).encode())
            elif message.get("method") == "subscriptions/listen":
                asked.append(message["params"]["notifications"])
                params = {"notifications": {"toolsListChanged": True}, "_meta": {SUB: message["id"]}}
                ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": params}
                await peer.send(json.dumps(ack).encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        async with Client.connect(ours) as client, client.listen(tools=True, prompts=True) as acknowledged:
            assert acknowledged == {"toolsListChanged": True}
        tg.cancel_scope.cancel()
    await ours.aclose()
    await theirs.aclose()
    assert asked == [{"toolsListChanged": True, "promptsListChanged": True}]
