"""Hostile and careless peers cannot exhaust or freeze a server: bounded answers for a peer that never reads, plain
functions off the event loop, odd numbers answered like any other bad input (real sockets, real uvicorn)."""

from __future__ import annotations

import json
import logging
import socket
import threading
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import httpx
import pytest
from helpers import add_patient_tool, init_frame, raw_server, request_frame
from http_support import HTTPX_GENERATORS, ServerThread, stateless_headers

from jsonrpc_mcp import Client, Server
from jsonrpc_mcp.mcp import tools
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.socket import serve_tcp

pytestmark = pytest.mark.anyio

ANSWER = "x" * 65536


def chatty_server() -> tuple[Server, list[int]]:
    server = Server("chatty", "1")
    handled: list[int] = []

    @server.tool()
    async def big(n: int) -> str:
        handled.append(n)
        await anyio.lowlevel.checkpoint()  # (it waits: its answer comes from its task, on every event loop)
        return ANSWER

    return server, handled


async def test_a_tcp_peer_that_never_reads_its_answers_cannot_grow_the_server() -> None:
    """A client sends calls to an ``async def`` tool and reads nothing: the answers that cannot be written count
    against the connection's bound, past which it stops reading (the client's calls wait in the sockets); once
    the client reads, every call is answered."""
    server, handled = chatty_server()
    calls = 1000
    bound = 256 * 1024
    frames = [request_frame(i, "tools/call", {"name": "big", "arguments": {"n": i}}) for i in range(1, calls + 1)]
    data = b"\n".join([init_frame(), *frames, b""])
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda task_status: serve_tcp(server, port=0, task_status=task_status, max_queued_bytes=bound)
        )
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)  # (a small window: the server's writes block)
        sock.setblocking(False)
        sent = 0
        with anyio.fail_after(60):
            while not _paused_past(server, bound):
                if sent < len(data):
                    try:
                        sent += sock.send(data[sent : sent + 65536])
                    except BlockingIOError:
                        pass
                await anyio.lowlevel.checkpoint()  # (a pass of the loop: the server reads and answers until it pauses)
        stats = server.sessions()[0].dispatcher.statistics()
        # What crossed the bound, plus the answers of the handlers that were running when the reading stopped:
        assert stats.queued_bytes <= bound + 128 * (len(ANSWER) + 100)
        assert len(handled) < calls // 4, len(handled)  # the rest wait, unread, in the sockets
        # Now the client reads: the server goes on, and every call gets its answer.
        received = b""
        answered: set[int] = set()
        with anyio.fail_after(120):
            while len(answered) < calls + 1:
                if sent < len(data):
                    try:
                        sent += sock.send(data[sent : sent + 65536])
                    except BlockingIOError:
                        pass
                try:
                    chunk = sock.recv(1 << 20)
                except BlockingIOError:
                    await anyio.wait_readable(sock)
                    continue
                assert chunk, "the server closed the connection"
                received += chunk
                *lines, received = received.split(b"\n")
                answered.update(int(line[len(b'{"jsonrpc":"2.0","id":') :].partition(b",")[0]) for line in lines)
        assert answered == set(range(calls + 1)) and len(handled) == calls
        sock.close()
        tg.cancel_scope.cancel()


def _paused_past(server: Server, bound: int) -> bool:
    """The connection's reading has stopped because its unwritten answers crossed ``bound`` (not because its
    handlers are all busy: fewer than the default 128 are in flight)."""
    sessions = server.sessions()
    if not sessions:
        return False
    stats = sessions[0].dispatcher.statistics()
    return stats.reading_paused and stats.in_flight < 128 and stats.queued_bytes > bound


async def test_a_blocking_plain_tool_does_not_stop_other_connections(sync_path: str) -> None:
    """A plain ``def`` tool that blocks (here on a threading event: a network call, a sleep) runs on a worker
    thread: another connection of the same process is served meanwhile."""
    server = Server("blocking", "1")
    release = threading.Event()
    entered = threading.Event()

    @server.tool()
    def wait_for_release() -> str:
        entered.set()
        release.wait(30)
        return "released"

    async with anyio.create_task_group() as tg:
        port = await tg.start(lambda task_status: serve_tcp(server, port=0, task_status=task_status))
        async with (
            Client.connect_tcp("127.0.0.1", port, protocol_version="2025-11-25") as first,
            Client.connect_tcp("127.0.0.1", port, protocol_version="2025-11-25") as second,
        ):
            results: list[Any] = []
            done = anyio.Event()

            async def call() -> None:
                results.append(await first.call_tool("wait_for_release"))
                done.set()

            tg.start_soon(call)
            with anyio.fail_after(10):
                await anyio.to_thread.run_sync(entered.wait)
                await second.ping()  # answered while the tool blocks its thread
                assert results == []
            release.set()
            with anyio.fail_after(10):
                await done.wait()
            assert results[0].content[0].text == "released"
        tg.cancel_scope.cancel()


async def test_a_plain_tool_on_its_worker_thread_sees_that_it_was_cancelled(sync_path: str) -> None:
    server = Server("patient", "1")
    started, saw, give_up = add_patient_tool(server)

    try:
        async with Client.connect_server(server) as client:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(client.call_tool, "patient", {})
                    assert await anyio.to_thread.run_sync(started.wait, 10)
                    scope.cancel()  # the client gives up: notifications/cancelled
            assert await anyio.to_thread.run_sync(saw.wait, 10)
    finally:
        give_up.set()  # the worker thread ends whatever happened


async def test_an_inline_tool_that_holds_the_loop_is_named_in_a_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "INLINE_WARNING_AFTER", -1.0)  # (any time held counts)
    server = Server("inline", "1")

    @server.tool(inline=True)
    def quick() -> str:
        return "done"

    @server.tool()
    def threaded() -> str:
        return "done"

    caplog.set_level(logging.WARNING, logger="jsonrpc_mcp.mcp.tools")
    async with Client.connect_server(server, protocol_version="2025-11-25") as client:
        assert (await client.call_tool("quick")).content[0].text == "done"
        assert (await client.call_tool("threaded")).content[0].text == "done"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "tool quick held the event loop" in warnings[0], warnings


@HTTPX_GENERATORS
@pytest.mark.parametrize(
    "params",
    [
        b'{"name":"echo","arguments":{"text":"a"},"extra":1e400}',
        b'{"name":"echo","arguments":{"text":"a"},"extra":' + b"9" * 4301 + b"}",
        b'{"name":"echo","arguments":{"text":1e400}}',
    ],
    ids=["float-out-of-range", "huge-integer", "in-arguments"],
)
async def test_numbers_no_float_holds_are_bad_input_never_a_500(params: bytes) -> None:
    """The same frame over HTTP as over stdio: -32602 (or a tool error for the tool's own arguments), never 500."""
    server = Server("numbers", "1")

    @server.tool()
    def echo(text: str) -> str:
        return text

    meta = (
        b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        b'"io.modelcontextprotocol/clientCapabilities":{}}'
    )
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":' + params[:-1] + b"," + meta + b"}}"
    thread = ServerThread(McpAsgiApp(server))
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            headers = {**stateless_headers("tools/call", "echo"), "Content-Type": "application/json"}
            response = await http.post(thread.url, content=body, headers=headers)
        assert response.status_code == 200, response.text
        async with raw_server(server) as peer:
            await peer.send(body)
            over_stdio = json.loads(await peer.recv())
        assert response.json() == over_stdio
        assert "error" in over_stdio or over_stdio["result"].get("isError") or over_stdio["result"]["content"]
    finally:
        thread.stop()
