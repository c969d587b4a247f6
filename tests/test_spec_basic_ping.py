"""basic/utilities/ping (2024-11-05 .. 2025-11-25): the client's keep-alive (``ping_interval``, ``ping_timeout``)
against a scripted server (the ids are in conformance/spec/coverage/utilities.toml)."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from helpers import TIMEOUT, RawPeer

from jsonrpc_mcp import Client, ConnectionClosed
from jsonrpc_mcp.mcp.groups import unwrap_group
from jsonrpc_mcp.transports.memory import memory_pair

pytestmark = pytest.mark.anyio

V = "2025-11-25"
INITIALIZED = {"protocolVersion": V, "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}
#: How the scripted server answers a ping: a result, an ``{"error": ...}``, or ``None`` (never).
PingAnswer = Callable[[int], dict[str, Any] | None]


@asynccontextmanager
async def scripted(
    answer_ping: PingAnswer, want: int = 1, **options: Any
) -> AsyncIterator[tuple[Client, list[float], anyio.Event]]:
    """A client connected to a server that answers initialize, never tools/call, and pings as told; yields the
    times the pings arrived, and an event set once ``want`` of them have."""
    ours, theirs = memory_pair()
    peer = RawPeer(theirs)
    pings: list[float] = []
    enough = anyio.Event()

    async def serve() -> None:
        while True:
            try:
                message = await peer.recv_json(timeout=30)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the client closed the connection
            method = message.get("method")
            if method == "initialize":
                answer: dict[str, Any] | None = {"result": INITIALIZED}
            elif method == "ping":
                pings.append(anyio.current_time())
                if len(pings) >= want:
                    enough.set()
                answer = answer_ping(len(pings))
            else:
                answer = None
            if answer is not None and "id" in message:
                await peer.send(json.dumps({"jsonrpc": "2.0", "id": message["id"], **answer}).encode())

    with unwrap_group():
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            try:
                async with Client.connect(ours, protocol_version=V, **options) as client:
                    yield client, pings, enough
            finally:
                tg.cancel_scope.cancel()
                await ours.aclose()
                await theirs.aclose()


async def test_pinging_is_off_unless_asked_and_its_settings_are_checked() -> None:
    """ "Excessive pinging SHOULD be avoided": no pings by default; the frequency and the timeout are settings."""
    ours, theirs = memory_pair()
    try:
        assert Client(ours).ping_interval is None
        for bad in ({"ping_interval": 0}, {"ping_interval": -1.0}, {"ping_timeout": 0}):
            with pytest.raises(ValueError, match="must be positive"):
                Client(ours, **bad)
    finally:
        await ours.aclose()
        await theirs.aclose()


async def test_pings_go_at_the_interval_asked() -> None:
    """ "Implementations SHOULD periodically issue pings to detect connection health"; "The frequency of pings
    SHOULD be configurable": three pings, each at least the interval after the one before."""
    async with scripted(lambda n: {"result": {}}, 3, ping_interval=0.02) as (_, pings, enough):
        with anyio.fail_after(TIMEOUT):
            await enough.wait()
    assert all(later - earlier >= 0.015 for earlier, later in itertools.pairwise(pings))


async def test_a_ping_without_answer_is_a_failed_connection_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """ "Timeouts SHOULD be treated as connection failures"; "Timeouts SHOULD be appropriate for the network
    environment" (``ping_timeout``); "Implementations SHOULD log ping failures for diagnostics": a request still
    waiting when a ping goes unanswered fails with ConnectionClosed, and a warning says why."""
    caplog.set_level(logging.WARNING, "jsonrpc_mcp")
    with anyio.fail_after(TIMEOUT):
        async with scripted(lambda n: None, ping_interval=0.01, ping_timeout=0.05) as (client, pings, _):
            with pytest.raises(ConnectionClosed):
                await client.call_tool("never_answered")
    assert len(pings) == 1
    assert any("ping: no answer within 0.05 s" in record.getMessage() for record in caplog.records)


async def test_a_ping_answered_with_an_error_is_logged_and_pinging_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    """A ping refused by the server is a failure to log, not a dead connection (the server answered)."""
    caplog.set_level(logging.WARNING, "jsonrpc_mcp")
    refusal = {"error": {"code": -32603, "message": "busy"}}
    async with scripted(lambda n: refusal if n == 1 else {"result": {}}, 2, ping_interval=0.01) as (_, _, enough):
        with anyio.fail_after(TIMEOUT):
            await enough.wait()
    assert any("ping failed: busy (-32603)" in record.getMessage() for record in caplog.records)
