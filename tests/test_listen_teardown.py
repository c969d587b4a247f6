"""2026-07-28: a ``subscriptions/listen`` stream the server tears down (it stops) gets ``notifications/cancelled``
referencing the listen request, then that request's result (graceful closure); the server sends
``notifications/cancelled`` for nothing else: not for a listen the client ended, nor for other requests."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from helpers import raw_server, request_frame
from http_support import META, ServerThread, SseReader, messages, stateless_headers

from jsonrpc_mcp import Server
from jsonrpc_mcp.transports.http_serve import make_uvicorn_server

pytestmark = pytest.mark.anyio

STATELESS_META = META
SUB = "io.modelcontextprotocol/subscriptionId"


def listening_server() -> Server:
    server = Server("listening", "1")

    @server.tool()
    async def slow() -> str:
        """Waits until it is told to go on."""
        await gate.wait()
        return "done"

    gate = anyio.Event()
    server.gate = gate  # type: ignore[attr-defined]
    return server


def listen_frame(ident: Any) -> bytes:
    return request_frame(
        ident, "subscriptions/listen", {"notifications": {"toolsListChanged": True}, "_meta": STATELESS_META}
    )


async def test_the_server_ends_each_listen_stream_it_tears_down_with_a_cancellation_referencing_it() -> None:
    server = listening_server()
    async with raw_server(server) as peer:
        await peer.send(listen_frame("listen-1"))
        await peer.send(listen_frame(7))
        acks = [await peer.recv_json(), await peer.recv_json()]
        assert {a["params"]["_meta"][SUB] for a in acks} == {"listen-1", 7}
        call = {"name": "slow", "arguments": {}, "_meta": STATELESS_META}
        await peer.send(request_frame("call-1", "tools/call", call))
        ended: list[int] = []

        async def end() -> None:
            ended.append(await server.end_listens("going away"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(end)
            frames = [await peer.recv_json() for _ in range(4)]
        assert ended == [2]
        server.gate.set()  # type: ignore[attr-defined]
        answer, before = await peer.recv_until(lambda m: m.get("id") == "call-1")
    for ident in ("listen-1", 7):
        mine = [f for f in frames if f.get("params", {}).get("requestId") == ident or f.get("id") == ident]
        assert mine == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": ident, "reason": "going away"},
            },
            {"jsonrpc": "2.0", "id": ident, "result": mine[1]["result"]},
        ]
        assert mine[1]["result"]["_meta"][SUB] == ident
    # The tool call in flight is not cancelled, and nothing else was: a cancellation only ever ends a listen.
    assert answer["result"]["content"][0]["text"] == "done" and before == []
    assert await server.end_listens() == 0


async def test_a_listen_the_client_cancels_gets_no_cancellation_from_the_server() -> None:
    server = listening_server()
    async with raw_server(server) as peer:
        await peer.send(listen_frame(3))
        assert (await peer.recv_json())["method"] == "notifications/subscriptions/acknowledged"
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
        await peer.send(json.dumps(cancel).encode())
        await peer.send(request_frame("d", "server/discover", {"_meta": STATELESS_META}))
        answer, before = await peer.recv_until(lambda m: m.get("id") == "d")
        assert "result" in answer and before == []  # (nothing for the listen: neither a cancellation nor a result)
        await server.end_listens()  # (its handler may still be ending: the answer above does not wait for it)
        await peer.send(request_frame("e", "server/discover", {"_meta": STATELESS_META}))
        answer, before = await peer.recv_until(lambda m: m.get("id") == "e")
        assert "result" in answer and before == []  # torn down now or not, a listen the client ended gets nothing


async def test_a_listen_stream_over_http_ends_with_the_cancellation_and_its_result_when_uvicorn_stops() -> None:
    """Under uvicorn the stream is ended as the shutdown begins, not cut off when its grace period is over."""
    server = listening_server()
    uv_server, app = make_uvicorn_server(server, graceful_timeout=30)
    thread = ServerThread(app, uv_server=uv_server)
    body = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": True}, "_meta": STATELESS_META},
    }
    stopped = False
    try:
        content, headers = json.dumps(body).encode(), stateless_headers("subscriptions/listen")
        async with (
            httpx.AsyncClient(timeout=10) as http,
            http.stream("POST", thread.url, content=content, headers=headers) as response,
            SseReader(response) as reader,
        ):
            assert (await reader.next_message())["method"] == "notifications/subscriptions/acknowledged"
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, thread.stop)
                rest = messages(await reader.rest())
                stopped = True
    finally:
        if not stopped:
            thread.stop()
    assert rest == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 5, "reason": "The server is shutting down"},
        },
        {"jsonrpc": "2.0", "id": 5, "result": rest[1]["result"]},
    ]
    assert rest[1]["result"]["_meta"][SUB] == 5
