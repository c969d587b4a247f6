"""basic/utilities and basic/patterns: cancellation reasons logged on both sides, the 2026-07-28 SSE response
headers, and the warning for a tool the client rejects (the ids are in conformance/spec/coverage/utilities.toml
and transports.toml)."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import httpx
import pytest
from helpers import raw_server, request_frame
from http_support import HTTPX_GENERATORS, ServerThread, stateless_body, stateless_headers
from http_support import collect_garbage as collect_garbage
from http_support import http as http
from http_support import server as server

from jsonrpc_mcp import Client, Context, RequestTimeout, Server

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]


def waiting_server(started: anyio.Event) -> Server:
    server = Server("waits", "1")

    @server.tool()
    async def wait(ctx: Context) -> str:
        started.set()
        await anyio.sleep_forever()
        return "never"  # pragma: no cover

    return server


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_both_parties_log_the_reason_of_a_cancellation(version: str, caplog: pytest.LogCaptureFixture) -> None:
    """ "Both parties SHOULD log cancellation reasons for debugging": the client that gives up on its request
    logs why it cancels it, and the server logs the reason the cancellation carried."""
    caplog.set_level(logging.DEBUG, "jsonrpc_mcp")
    started = anyio.Event()
    async with Client.connect_server(waiting_server(started), protocol_version=version) as client:
        with pytest.raises(RequestTimeout):
            await client.call_tool("wait", timeout=0.2)
    said = [record.getMessage() for record in caplog.records]
    assert any(m.startswith("cancelling our request") and m.endswith(": Request timed out") for m in said), said
    assert any("cancelled by the peer: 'Request timed out'" in m for m in said), said


async def test_a_raw_cancellation_reason_is_logged_shortened_and_quoted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "jsonrpc_mcp")
    started = anyio.Event()
    async with raw_server(waiting_server(started), version="2025-11-25") as peer:
        await peer.send(request_frame(2, "tools/call", {"name": "wait", "arguments": {}}))
        with anyio.fail_after(10):
            await started.wait()
        reason = "user pressed stop\nFAKE LOG LINE " + "x" * 500
        note = {"requestId": 2, "reason": reason}
        await peer.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": note}).encode())
        await peer.sync()
    (line,) = [r.getMessage() for r in caplog.records if "cancelled by the peer" in r.getMessage()]
    assert "\n" not in line and "user pressed stop\\nFAKE LOG LINE" in line and len(line) < 300


async def test_a_stateless_sse_response_says_not_to_buffer_it(server: ServerThread, http: httpx.AsyncClient) -> None:
    """2026-07-28: "When initiating an SSE stream, servers SHOULD include the X-Accel-Buffering: no header"."""
    body = stateless_body(3, "tools/call", {"name": "progress", "arguments": {"steps": 2}}, progressToken="p")
    response = await http.post(server.url, json=body, headers=stateless_headers("tools/call", "progress"))
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["x-accel-buffering"] == "no"


async def test_a_rejected_tool_definition_is_named_in_a_warning_with_its_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """2026-07-28: "Clients SHOULD log a warning when rejecting a tool definition, including the tool name and the
    reason for rejection"."""
    caplog.set_level(logging.WARNING, "jsonrpc_mcp")
    server = Server("h")
    schema: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "number", "x-mcp-header": "X"}}}
    server.add_tool(lambda **kwargs: "never", name="bad_header", input_schema=schema)
    async with Client.connect_server(server) as client:
        assert [tool.name for tool in await client.list_tools()] == []
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING and "bad_header" in r.getMessage()]
    assert "x-mcp-header" in warning.getMessage() or "number" in warning.getMessage()
