"""basic/transports and transports/stdio: our own socket transport as docs/deploy.md documents it, and a stdio
server's stderr taken for what it is (the ids are in conformance/spec/coverage/transports.toml)."""

from __future__ import annotations

import json
import sys
import textwrap

import anyio
import pytest
from helpers import ROOT, TIMEOUT

from jsonrpc_mcp import Client, Server
from jsonrpc_mcp.transports.socket import serve_tcp

pytestmark = pytest.mark.anyio


async def test_the_socket_transport_is_the_one_docs_deploy_md_documents() -> None:
    """ "Custom transports SHOULD document their specific connection establishment and message exchange patterns"
    (2026-07-28: "connection establishment, message framing, and cancellation patterns"): docs/deploy.md says how
    a TCP connection is a session of newline-framed messages, cancelled with notifications/cancelled; a raw
    socket speaking exactly that is served."""
    deploy = " ".join((ROOT / "docs" / "deploy.md").read_text(encoding="utf-8").split())
    section = deploy.split("## TCP and Unix sockets", 1)[1].split(" ## ", 1)[0]
    for said in (
        "each connection is one session",
        "one JSON-RPC message per line, UTF-8, a newline after each and none inside",
        "To cancel a request, send `notifications/cancelled` naming its id",
    ):
        assert said in section
    server = Server("sockets", "1")

    @server.tool()
    def hello() -> str:
        return "hello"

    async with anyio.create_task_group() as tg:
        port = await tg.start(serve_tcp, server)
        async with await anyio.connect_tcp("127.0.0.1", port) as sock:
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
            lines = [
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hello", "arguments": {}}},
            ]
            await sock.send(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
            received = b""
            with anyio.fail_after(TIMEOUT):
                while received.count(b"\n") < 2:
                    received += await sock.receive()
        tg.cancel_scope.cancel()
    first, second = (json.loads(line) for line in received.splitlines())
    assert first["id"] == 1 and first["result"]["protocolVersion"] == "2025-11-25"
    assert second == {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "hello"}]}}


NOISY = textwrap.dedent(
    """
    import sys
    from jsonrpc_mcp import Server
    from jsonrpc_mcp.transports.stdio import run_stdio

    server = Server("noisy", "1")

    @server.tool()
    def hello() -> str:
        print("ERROR: not really an error, only chatter", file=sys.stderr, flush=True)
        return "hello"

    print("Traceback (most recent call last): chatter that looks alarming", file=sys.stderr, flush=True)
    run_stdio(server)
    """
)


async def test_what_a_stdio_server_writes_on_stderr_is_not_taken_for_an_error(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """ "The client MAY capture, forward, or ignore the server's stderr output and SHOULD NOT assume stderr output
    indicates error conditions": a server chattering on stderr, alarming words and all, is used as any other, and
    what it wrote is forwarded."""
    with anyio.fail_after(TIMEOUT * 3):
        async with Client.connect_stdio([sys.executable, "-c", NOISY]) as client:
            result = await client.call_tool("hello")
    assert result.content[0].text == "hello"  # type: ignore[union-attr]
    assert result.is_error is not True
    assert "ERROR: not really an error" in capfd.readouterr().err
