"""The handshake lifecycle: initialize/initialized, negotiated capabilities enforced both ways, ping any time."""

from __future__ import annotations

import gc
import json
from typing import Any

import anyio
import pytest
from fixtures.everything import make_server
from helpers import BOTH_RUNNERS, init_frame, notification_frame, raw_server, request_frame, send_raw

from jsonrpc_mcp import Client, Context, MissingClientCapability, RpcError, Server
from jsonrpc_mcp import types as t
from jsonrpc_mcp.jsonrpc.dispatch import Dispatcher
from jsonrpc_mcp.jsonrpc.streams import MessageStream
from jsonrpc_mcp.mcp.session import ServerSession
from jsonrpc_mcp.transports.memory import memory_pair

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("runner"), BOTH_RUNNERS]


def probe_server() -> tuple[Server, list[str]]:
    """Tools that try every server-to-client request and report what happened, in ``events``."""
    server = Server("probe", "1")
    events: list[str] = []

    @server.tool()
    async def try_sample(ctx: Context) -> str:
        try:
            await ctx.sample("hi")
        except MissingClientCapability as exc:
            events.append(f"refused locally: {exc.capability} {exc.code}")
            return "no sampling"
        return "sampled"

    @server.tool()
    async def try_elicit_url(ctx: Context) -> str:
        try:
            await ctx.elicit_url("Log in", "https://example.com/login")
        except MissingClientCapability as exc:
            events.append(f"refused locally: {exc.data}")
            return "no url elicitation"
        return "elicited"

    @server.tool()
    async def force(method: str, ctx: Context) -> str:
        """Send a server-to-client request without the capability check, to see the client refuse it."""
        try:
            params = {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e"}
            raw = await ctx.session.send_request(method, params)
        except RpcError as exc:
            return f"{exc.code}: {exc.message}"
        return json.loads(bytes(raw)).__class__.__name__

    @server.tool()
    async def ping_client(ctx: Context) -> str:
        raw = await ctx.session.send_request("ping", None)
        return bytes(raw).decode()

    @server.tool()
    async def roots(ctx: Context) -> list[str]:
        result = await ctx.list_roots()
        return [r.uri for r in result.roots]

    return server, events


async def test_initialize_then_initialized() -> None:
    server = make_server()
    async with raw_server(server) as peer:
        assert server.sessions() == []
        await peer.send(init_frame("2025-06-18", 1, {"roots": {}}))
        reply = json.loads(await peer.recv())
        assert reply["result"]["protocolVersion"] == "2025-06-18"
        assert set(reply["result"]["capabilities"]) == {"tools", "resources", "prompts", "logging", "completions"}
        assert reply["result"]["serverInfo"] == {"name": "everything", "version": "1.0.0"}
        (session,) = server.sessions()
        assert (session.initialized, session.ready, session.version) == (True, False, "2025-06-18")
        assert session.client_capabilities == {"roots": {}}
        assert session.client_info == {"name": "raw", "version": "1"}
        # requests already work between the initialize response and the initialized notification
        assert (await peer.call(request_frame(2, "tools/list")))["result"]["tools"]
        assert await peer.exchange(notification_frame("notifications/initialized")) == []
        assert session.ready
    assert server.sessions() == []  # detached when the connection ended


async def test_capabilities_follow_the_negotiated_version() -> None:
    async with raw_server(make_server()) as peer:
        reply = await peer.call(init_frame("2024-11-05", 1))
    # completions got its capability flag in 2025-03-26
    assert set(reply["result"]["capabilities"]) == {"tools", "resources", "prompts", "logging"}


async def test_double_initialize_keeps_the_first_session() -> None:
    async with raw_server(make_server(), version="2025-03-26") as peer:
        again = await peer.call(init_frame("2025-11-25", 9))
        assert again["error"]["code"] == -32600
        # still 2025-03-26: batches are still accepted
        batch = await peer.exchange(b"[" + request_frame(1, "ping") + b"]")
        assert json.loads(batch[0]) == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


async def test_ping_works_at_any_time() -> None:
    async with raw_server(make_server()) as peer:
        assert (await peer.call(request_frame("a", "ping")))["result"] == {}
        await peer.send(init_frame("2025-11-25", 1))
        await peer.recv()
        assert (await peer.call(request_frame("b", "ping")))["result"] == {}
        await peer.send(notification_frame("notifications/initialized"))
        assert (await peer.call(request_frame("c", "ping", {"_meta": {"progressToken": 1}})))["result"] == {}


async def test_server_pings_client() -> None:
    server, _events = probe_server()
    async with Client.connect_server(server, protocol_version="2025-11-25") as client:
        assert (await client.call_tool("ping_client")).content[0].text == "{}"  # type: ignore[union-attr]


async def test_server_never_sends_sampling_to_a_client_without_the_capability() -> None:
    server, events = probe_server()
    async with raw_server(server, version="2025-11-25", capabilities={"roots": {}}) as peer:
        reply = await peer.call(request_frame(3, "tools/call", {"name": "try_sample"}))
        assert reply["result"]["content"][0]["text"] == "no sampling"
        # nothing but the reply came: no sampling/createMessage request reached the client
        assert await peer.sync() == []
    assert events == ["refused locally: sampling -32021"]


async def test_undeclared_elicitation_mode_is_refused_by_the_server() -> None:
    server, events = probe_server()
    # an empty elicitation capability means form mode only
    async with raw_server(server, version="2025-11-25", capabilities={"elicitation": {}}) as peer:
        reply = await peer.call(request_frame(3, "tools/call", {"name": "try_elicit_url"}))
        assert reply["result"]["content"][0]["text"] == "no url elicitation"
        assert await peer.sync() == []
    assert events == ["refused locally: {'requiredCapabilities': {'elicitation': {'url': {}}}}"]


async def test_uncaught_missing_capability_is_an_error_response() -> None:
    server = make_server()  # its sample tool does not catch MissingClientCapability
    async with raw_server(server, version="2025-11-25") as peer:
        reply = await peer.call(request_frame(3, "tools/call", {"name": "sample", "arguments": {"prompt": "x"}}))
        assert await peer.sync() == []
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}


async def test_client_refuses_requests_for_capabilities_it_did_not_declare() -> None:
    server, _events = probe_server()
    async with Client.connect_server(server, protocol_version="2025-11-25") as client:
        assert client.capabilities() == {}
        for method in ("sampling/createMessage", "elicitation/create", "roots/list", "unknown/thing"):
            out = await client.call_tool("force", {"method": method})
            assert out.content[0].text == f"-32601: Method not found: {method}"  # type: ignore[union-attr]


async def test_client_refuses_undeclared_elicitation_mode() -> None:
    server, _events = probe_server()

    async def elicitation(params: t.ElicitRequestParams) -> t.ElicitResult:
        raise AssertionError("must not be called")

    async with Client.connect_server(
        server, protocol_version="2025-11-25", elicitation=elicitation, elicitation_modes=("form",)
    ) as client:
        assert client.capabilities() == {"elicitation": {"form": {}}}
        out = await client.call_tool("force", {"method": "elicitation/create"})
        assert out.content[0].text == "-32602: Invalid params: elicitation mode 'url' was not declared"  # type: ignore[union-attr]


async def test_client_answers_roots_when_it_has_them() -> None:
    server, _events = probe_server()
    roots = [t.Root(uri="file:///work", name="work"), t.Root(uri="file:///tmp")]
    async with Client.connect_server(server, protocol_version="2025-06-18", roots=roots) as client:
        assert client.capabilities() == {"roots": {"listChanged": True}}
        out = await client.call_tool("roots")
        assert out.structured_content == {"result": ["file:///work", "file:///tmp"]}


async def test_client_requests_each_handshake_version() -> None:
    for version in ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"):
        async with Client.connect_server(make_server(), protocol_version=version) as client:
            assert client.protocol_version == version
            assert not client.stateless


async def test_client_refuses_a_version_it_does_not_speak() -> None:
    ours, theirs = memory_pair()
    errors: list[BaseException] = []

    async def fake_server() -> None:
        frames = await theirs.receive()
        request = json.loads(frames[0])
        result = {"protocolVersion": "1999-01-01", "capabilities": {}, "serverInfo": {"name": "old", "version": "0"}}
        await send_raw(theirs, json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(fake_server)
        try:
            with anyio.fail_after(10):
                async with Client.connect(ours, protocol_version="2025-11-25"):
                    pass
        except RpcError as exc:
            errors.append(exc)
    await ours.aclose()
    await theirs.aclose()
    assert len(errors) == 1 and "1999-01-01" in str(errors[0])


async def test_sessions_notified_only_after_initialize() -> None:
    """list_changed goes to initialized sessions; a connection that never initialized gets nothing."""
    server = make_server()
    async with raw_server(server) as bare, raw_server(server, version="2025-11-25") as ready:
        server.add_tool(lambda: "x", name="added")
        got, _ = await ready.recv_until(lambda m: m.get("method") == "notifications/tools/list_changed")
        assert got == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        assert await bare.sync() == []


async def test_unknown_client_notifications_reach_registered_handlers() -> None:
    server = make_server()
    seen: list[tuple[str, dict[str, Any]]] = []

    @server.on_notification("notifications/roots/list_changed")
    def changed(session: Any, params: dict[str, Any]) -> None:
        seen.append(("roots", params))

    async with raw_server(server, version="2025-11-25") as peer:
        assert await peer.exchange(notification_frame("notifications/roots/list_changed")) == []
        assert await peer.exchange(notification_frame("notifications/other", {"x": 1})) == []
    assert seen == [("roots", {})]


async def test_unanswered_server_request_never_leaks_a_local_error_code() -> None:
    """A client that never answers sampling: the tool fails (isError) and a prompt is an internal error; the
    local-only codes of RequestTimeout (-32001) and ConnectionClosed (-32000) never reach the wire."""
    server = Server("s")
    asked = anyio.Event()

    @server.tool()
    async def ask(ctx: Context) -> str:
        await ctx.sample("hi", timeout=0.05)
        return "answered"  # pragma: no cover

    @server.prompt()
    async def prompt_that_asks(ctx: Context) -> str:
        await ctx.sample("hi", timeout=0.05)
        return "answered"  # pragma: no cover

    @server.method("custom/ask")
    async def custom(ctx: Context, params: Any) -> Any:
        await ctx.sample("hi", timeout=0.05)
        return {}  # pragma: no cover

    async def silent_sampling(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async with Client.connect_server(server, protocol_version="2025-11-25", sampling=silent_sampling) as client:
        result = await client.call_tool("ask")
        assert result.is_error is True
        assert result.content[0].text == "Tool ask failed: sampling/createMessage: no response within 0.05 s"  # type: ignore[union-attr]
        assert asked.is_set()
        for call in (client.get_prompt("prompt_that_asks"), client.request("custom/ask")):
            with pytest.raises(RpcError) as info:
                await call
            assert (info.value.code, info.value.message) == (-32603, "Internal error")


async def test_cancellation_end_to_end_both_ways() -> None:
    """The client gives up on a call: the server's handler is cancelled. The server gives up on a sampling
    request: the client's sampling handler is cancelled."""
    server = Server("s")
    tool_started, tool_cancelled = anyio.Event(), anyio.Event()
    sampling_cancelled = anyio.Event()

    @server.tool()
    async def slow() -> str:
        tool_started.set()
        try:
            await anyio.sleep_forever()
        finally:
            tool_cancelled.set()
        return "never"  # pragma: no cover

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            await ctx.sample("hi", timeout=0.05)
        except RpcError:
            return "gave up"
        return "answered"  # pragma: no cover

    async def sampling(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        try:
            await anyio.sleep_forever()
        finally:
            sampling_cancelled.set()
        raise AssertionError  # pragma: no cover

    async with Client.connect_server(server, protocol_version="2025-11-25", sampling=sampling) as client:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "slow")
                await tool_started.wait()
                tg.cancel_scope.cancel()  # the caller gives up: notifications/cancelled goes to the server
            await tool_cancelled.wait()
            assert (await client.call_tool("ask")).content[0].text == "gave up"  # type: ignore[union-attr]
            await sampling_cancelled.wait()


async def test_a_connection_that_ends_leaves_no_cycles_behind() -> None:
    """A connection's session, dispatcher and stream are freed by reference counting once it has ended (both eras:
    a handler that answers at once, one that waits): with the cyclic collector off, none of them is left behind."""
    server = Server("cycles", "1")

    @server.tool(inline=True)
    def now() -> str:
        return "now"

    @server.tool()
    async def later() -> str:
        await anyio.lowlevel.checkpoint()
        return "later"

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}

    async def connection(frames: list[bytes]) -> None:
        ours, theirs = memory_pair()
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, theirs)
            for frame in frames:
                await send_raw(ours, frame)
                with anyio.fail_after(10):
                    (reply,) = await ours.receive()
                assert b'"result"' in reply, reply
            await ours.aclose()
        await theirs.aclose()

    calls = [request_frame(n, "tools/call", {"name": name}) for n, name in enumerate(("now", "later"))]
    stateless = [
        request_frame(n, "tools/call", {"name": name, "_meta": meta}) for n, name in enumerate(("now", "later"))
    ]
    kinds = (ServerSession, Dispatcher, MessageStream)
    await connection([init_frame(), *calls])  # (what the first connection makes once, the server keeps)
    gc.collect()
    gc.disable()
    try:
        before = sum(1 for obj in gc.get_objects() if isinstance(obj, kinds))
        await connection([init_frame(), *calls])
        await connection(stateless)
        left = sum(1 for obj in gc.get_objects() if isinstance(obj, kinds)) - before
    finally:
        gc.enable()
    assert left == 0
