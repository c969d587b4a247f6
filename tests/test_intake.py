"""What arrives with a message besides its frame (its headers, its principal, its connection) comes in one value
with it, an ``Intake``: into the dispatcher with the frame, and from it to the handler's ``Context``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest

from jsonrpc_mcp import Context, Server
from jsonrpc_mcp.jsonrpc.dispatch import Dispatcher
from jsonrpc_mcp.jsonrpc.streams import NO_INTAKE, REQUEST, Arrival, Intake, MessageStream, Outgoing
from jsonrpc_mcp.jsonrpc.wire import Request
from jsonrpc_mcp.transports import _http_handshake_session
from jsonrpc_mcp.transports.memory import MemoryMessageStream, memory_pair

pytestmark = pytest.mark.anyio

TIMEOUT = 10


class Came(Intake):
    __slots__ = ("auth", "headers")

    def __init__(self, headers: dict[str, str], auth: Any) -> None:
        self.headers = headers
        self.auth = auth

    def request_headers(self) -> dict[str, str]:
        return self.headers

    def connection(self) -> str:
        return "10.0.0.1:4242"


class WithIntake(MemoryMessageStream):
    """A stream whose frames, as read, come with an intake (as an HTTP+SSE POST's do)."""

    intake: Intake | None = None

    async def receive(self) -> Sequence[bytes]:
        frames = await super().receive()
        return frames if self.intake is None else Arrival(frames, self.intake)


def _with_intake(buffer: int = 16) -> tuple[WithIntake, MemoryMessageStream]:
    a_send, b_recv = anyio.create_memory_object_stream[bytes](buffer)
    b_send, a_recv = anyio.create_memory_object_stream[bytes](buffer)
    return WithIntake(a_send, a_recv), MemoryMessageStream(b_send, b_recv)


@asynccontextmanager
async def _closing(*streams: MessageStream) -> AsyncIterator[None]:
    try:
        yield
    finally:
        for stream in streams:
            await stream.aclose()


async def test_the_read_loop_hands_the_intake_of_what_it_read_to_the_handler() -> None:
    seen: list[Any] = []

    def handler(req: Request, context: Any) -> bytes:
        seen.append(context)
        return b"{}"

    theirs, ours = _with_intake()
    came = Came({}, None)
    with anyio.fail_after(TIMEOUT):
        async with _closing(theirs, ours), anyio.create_task_group() as tg:
            tg.start_soon(Dispatcher(theirs, handler, drain_timeout=0).run)
            await ours.send([Outgoing(b'{"jsonrpc":"2.0","id":1,"method":"a"}', None, REQUEST)])
            await ours.receive()
            theirs.intake = came
            await ours.send([Outgoing(b'{"jsonrpc":"2.0","id":2,"method":"b"}', None, REQUEST)])
            await ours.receive()
            tg.cancel_scope.cancel()
    assert seen == [None, came]


def _server() -> Server:
    server = Server("intake")

    @server.tool()
    def probe(ctx: Context) -> str:
        """What came with the request."""
        shared = ctx.intake is NO_INTAKE
        return f"{shared} {ctx.request_headers.get('x-probe')} {ctx.auth}"

    return server


async def _call(theirs: MessageStream, ours: MemoryMessageStream) -> str:
    from jsonrpc_mcp import Client

    async with _closing(theirs, ours), anyio.create_task_group() as tg:
        tg.start_soon(_server().serve, theirs)
        async with Client.connect(ours, protocol_version="2025-06-18") as client:
            result = await client.call_tool("probe", {})
        tg.cancel_scope.cancel()
    text: str = msgspec.to_builtins(result)["content"][0]["text"]
    return text


async def test_context_reads_headers_and_principal_from_the_intake() -> None:
    theirs, ours = _with_intake()
    theirs.intake = Came({"x-probe": "yes"}, "carol")
    with anyio.fail_after(TIMEOUT):
        assert await _call(theirs, ours) == "False yes carol"


async def test_a_message_that_came_with_nothing_shares_one_empty_intake() -> None:
    theirs, ours = memory_pair()
    with anyio.fail_after(TIMEOUT):
        assert await _call(theirs, ours) == "True None None"


def test_the_stream_contract_keeps_only_what_every_transport_has() -> None:
    for hook in ("request_headers", "request_auth", "request_peer"):
        assert not hasattr(MessageStream, hook)
    # The Streamable HTTP server's streams hand their messages to the dispatcher themselves: nothing to receive.
    assert "receive" not in vars(_http_handshake_session.SessionStream)

    class Session:  # (what a SessionStream needs of its session to be made)
        id = "s1"

    assert not hasattr(_http_handshake_session.SessionStream(Session()), "arriving")  # type: ignore[arg-type]
