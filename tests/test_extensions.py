"""The extension API (SEP-2133), server and client, through real transports: a stdio subprocess and uvicorn.

The app (tests/fixtures/extensions_app.py) offers ``com.example/audit`` at every revision (a method and a
``tools/call`` wrapper), ``com.example/later`` at 2026-07-28 only (a result kind, redeemed by a method of its own)
and ``com.example/rogue``, which answers with its result kind where it is not negotiated.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from helpers import FIXTURES, TIMEOUT, RawPeer, init_frame, notification_frame, request_frame, serve_command
from http_support import ServerThread, stateless_headers

from jsonrpc_mcp import Client, Context, MethodNotFound, RpcError, Server
from jsonrpc_mcp.cli import load_app
from jsonrpc_mcp.errors import ProtocolViolation
from jsonrpc_mcp.extensions import Extension, ExtensionResult, WrapNext
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.spawn import spawn

pytestmark = pytest.mark.anyio

APP = FIXTURES / "extensions_app.py"
V5 = "2026-07-28"
AUDIT = "com.example/audit"
LATER = "com.example/later"


def meta(extensions: dict[str, Any] | None = None) -> dict[str, Any]:
    caps: dict[str, Any] = {}
    if extensions is not None:
        caps["extensions"] = extensions
    return {"io.modelcontextprotocol/protocolVersion": V5, "io.modelcontextprotocol/clientCapabilities": caps}


@asynccontextmanager
async def stdio_peer() -> AsyncIterator[RawPeer]:
    async with spawn(serve_command(APP)) as stream:
        yield RawPeer(stream)


async def handshake(peer: RawPeer, version: str, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    await peer.send(init_frame(version, "init", capabilities))
    reply, _ = await peer.recv_until(lambda m: m.get("id") == "init")
    await peer.send(notification_frame("notifications/initialized"))
    return reply["result"]  # type: ignore[no-any-return]


# --- the server: declared per revision, negotiated per session or per request ---------------------------------


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2024-11-05"])
async def test_an_extension_is_declared_in_initialize_at_the_revisions_it_is_defined_for(version: str) -> None:
    async with stdio_peer() as peer:
        result = await handshake(peer, version)
    assert result["capabilities"]["extensions"] == {AUDIT: {"level": "calls"}}  # (later and rogue: 2026-07-28)


async def test_server_discover_declares_every_extension_of_2026_07_28() -> None:
    async with stdio_peer() as peer:
        reply = await peer.call(request_frame(1, "server/discover", {"_meta": meta()}))
    assert reply["result"]["capabilities"]["extensions"] == {
        AUDIT: {"level": "calls"},
        LATER: {},
        "com.example/rogue": {},
    }


async def test_a_handshake_session_negotiates_once_in_initialize() -> None:
    async with stdio_peer() as peer:
        await handshake(peer, "2025-11-25")
        refused = await peer.call(request_frame(2, "audit/recent"))
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"] == {"requiredCapabilities": {"extensions": {AUDIT: {}}}}
    async with stdio_peer() as peer:
        await handshake(peer, "2025-11-25", {"extensions": {AUDIT: {}}})
        called = await peer.call(request_frame(3, "tools/call", {"name": "slow_sum", "arguments": {}}))
        recent = await peer.call(request_frame(4, "audit/recent"))
    assert isinstance(called["result"]["_meta"][AUDIT], int)  # stamped: the extension is negotiated
    assert recent["result"]["calls"][-1] == {"tool": "slow_sum", "negotiated": True, "version": "2025-11-25"}


async def test_a_stateless_request_negotiates_with_its_own_meta() -> None:
    async with stdio_peer() as peer:
        refused = await peer.call(request_frame(1, "audit/recent", {"_meta": meta()}))
        plain = await peer.call(request_frame(2, "tools/call", {"name": "slow_sum", "arguments": {}, "_meta": meta()}))
        declared = meta({AUDIT: {}})
        call = {"name": "slow_sum", "arguments": {}, "_meta": declared}
        stamped = await peer.call(request_frame(3, "tools/call", call))
        recent = await peer.call(request_frame(4, "audit/recent", {"_meta": declared}))
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"]["requiredCapabilities"] == {"extensions": {AUDIT: {}}}
    assert AUDIT not in plain["result"]["_meta"]  # the wrapper ran, the extension was not negotiated
    assert isinstance(stamped["result"]["_meta"][AUDIT], int)
    assert [c["negotiated"] for c in recent["result"]["calls"][-2:]] == [False, True]


async def test_a_method_of_an_extension_not_defined_at_the_revision_does_not_exist() -> None:
    async with stdio_peer() as peer:
        await handshake(peer, "2025-11-25", {"extensions": {LATER: {}}})
        reply = await peer.call(request_frame(2, "later/redeem", {"ticket": "t1"}))
    assert reply["error"]["code"] == -32601


async def test_a_result_kind_is_only_answered_where_its_extension_is_negotiated() -> None:
    async with stdio_peer() as peer:
        plain = await peer.call(request_frame(1, "tools/call", {"name": "slow_sum", "arguments": {}, "_meta": meta()}))
        ticket = await peer.call(
            request_frame(2, "tools/call", {"name": "slow_sum", "arguments": {}, "_meta": meta({LATER: {}})})
        )
        rogue = await peer.call(request_frame(3, "tools/call", {"name": "rogue", "arguments": {}, "_meta": meta()}))
    assert plain["result"]["resultType"] == "complete" and plain["result"]["content"][0]["text"] == "sum=42"
    assert ticket["result"]["resultType"] == "ticket" and ticket["result"]["ticket"].startswith("t")
    # A server bug (a kind the client never declared) is never put on the wire: the client gets -32603.
    assert rogue["error"] == {"code": -32603, "message": "Internal error"}


# --- the client: declares what it was given, follows result kinds -----------------------------------------------


def later_client() -> Extension:
    extension = Extension(LATER, versions=[V5], result_types=["ticket"])

    @extension.on_result("ticket")
    async def redeem(answer: ExtensionResult) -> Any:
        assert answer.method == "tools/call" and answer.params["name"] == "slow_sum"
        return await answer.session.request("later/redeem", {"ticket": answer.result["ticket"]})

    return extension


@pytest.fixture(scope="module")
def http_app() -> Any:
    thread = ServerThread(McpAsgiApp(load_app(str(APP))))
    yield thread
    thread.stop()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_client_declares_its_extensions_in_both_eras(transport: str, http_app: ServerThread) -> None:
    for version in ("2025-11-25", V5):
        options: dict[str, Any] = {"protocol_version": version, "extensions": [Extension(AUDIT)]}
        if transport == "stdio":
            opened = Client.connect_stdio(serve_command(APP), **options)
        else:
            opened = Client.connect_http(http_app.url, **options)
        async with opened as client:
            assert client.server_extension(AUDIT) == {"level": "calls"}
            assert client.server_extension(LATER) == ({} if version == V5 else None)
            result = await client.call_tool("capabilities_seen", {})
            assert result.structured_content["extensions"] == {AUDIT: {}}  # type: ignore[index]
            recent = await client.request("audit/recent")
            assert recent["calls"][-1]["negotiated"] is True


async def test_the_client_turns_a_result_of_an_extension_kind_into_the_methods_result(http_app: ServerThread) -> None:
    async with Client.connect_http(http_app.url, extensions=[later_client()]) as client:
        result = await client.call_tool("slow_sum", {})
    assert result.content[0].text == "sum=42"  # type: ignore[union-attr]


async def test_the_client_refuses_a_result_kind_no_extension_of_it_handles(http_app: ServerThread) -> None:
    # The client declares the extension (so the server answers with a ticket) but has nothing to redeem it with.
    declared_only = Extension(LATER, versions=[V5], result_types=["ticket"])
    async with Client.connect_http(http_app.url, extensions=[declared_only]) as client:
        with pytest.raises(ProtocolViolation, match="'ticket' result, which no extension of this client handles"):
            await client.call_tool("slow_sum", {})


async def test_over_http_the_required_capability_refusal_is_a_400(http_app: ServerThread) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "audit/recent", "params": {"_meta": meta()}}
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        response = await http.post(http_app.url, json=body, headers=stateless_headers("audit/recent"))
    assert response.status_code == 400
    assert response.json()["error"]["data"] == {"requiredCapabilities": {"extensions": {AUDIT: {}}}}


# --- a user's own extension, end to end in one process ----------------------------------------------------------


async def test_a_plain_wrapper_keeps_an_inline_tool_answered_at_once() -> None:
    calls: list[str] = []
    extension = Extension("com.example/count")

    @extension.wrap("tools/call")
    def count(ctx: Context, params: Any, call_next: WrapNext) -> Any:
        calls.append(params.name)
        return call_next(ctx, params)

    server = Server("inline", extensions=[extension])

    @server.tool(inline=True)
    def ping_tool() -> str:
        return "pong"

    out = server.methods["tools/call"].handler  # the wrapped handler answers without a coroutine
    assert callable(out)
    async with Client.connect_server(server) as client:
        result = await client.call_tool("ping_tool", {})
    assert result.content[0].text == "pong" and calls == ["ping_tool"]  # type: ignore[union-attr]


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25", V5])
async def test_the_core_capabilities_an_extension_needs_are_declared_without_overriding_the_servers(
    version: str,
) -> None:
    glossary = Extension("com.example/glossary", server_capabilities=["prompts", "resources"])
    server = Server("needs", capabilities={"resources": {}})  # resources declared by the user, without the options
    assert not server.advertises("prompts")
    server.add_extension(glossary)
    assert server.advertises("prompts") and server.advertises("resources")
    with anyio.fail_after(TIMEOUT):
        async with Client.connect_server(server, protocol_version=version) as client:
            declared = msgspec.to_builtins(client.server_capabilities)
            assert client.server_extension("com.example/glossary") == {}
            assert declared["prompts"] == {"listChanged": True}  # as the server declares prompts
            assert declared["resources"] == {}  # as the user declared it: no option added
            assert await client.list_prompts() == [] and await client.list_resources() == []
            with pytest.raises(RpcError) as unknown:
                await client.get_prompt("nothing")
    assert unknown.value.code == -32602


async def test_an_extension_has_its_core_capabilities_declared_only_at_the_revisions_it_is_defined_for() -> None:
    notes = Extension("com.example/notes", versions=[V5], server_capabilities="resources")
    server = Server("later", extensions=[notes])
    assert "resources" not in server.capabilities("2025-11-25")
    assert server.capabilities(V5)["resources"] == {"subscribe": True, "listChanged": True}
    with anyio.fail_after(TIMEOUT):
        async with Client.connect_server(server, protocol_version="2025-11-25") as old:
            assert "resources" not in msgspec.to_builtins(old.server_capabilities)
            assert old.server_extension("com.example/notes") is None
            with pytest.raises(MethodNotFound) as undeclared:  # (the raw request: the client's own check aside)
                await old.request("resources/list")
        async with Client.connect_server(server, protocol_version=V5) as new:
            assert msgspec.to_builtins(new.server_capabilities)["resources"] == {"subscribe": True, "listChanged": True}
            assert await new.list_resources() == []
    assert undeclared.value.code == -32601


async def test_the_methods_of_a_capability_an_extension_needs_answer_only_where_the_extension_is_defined() -> None:
    notes = Extension("com.example/notes", versions=["2025-11-25"], server_capabilities=["resources"])
    server = Server("some revisions", extensions=[notes])  # no resource of its own
    assert server.advertises("resources", version="2025-11-25")
    assert not server.advertises("resources", version="2025-06-18") and not server.advertises("resources", version=V5)
    refused: list[RpcError] = []
    with anyio.fail_after(TIMEOUT):
        async with Client.connect_server(server, protocol_version="2025-11-25") as defined:
            assert msgspec.to_builtins(defined.server_capabilities)["resources"] == {
                "subscribe": True,
                "listChanged": True,
            }
            assert await defined.list_resources() == [] and await defined.list_resource_templates() == []
        for version in ("2025-06-18", V5):  # the handshake era's session, the stateless era's request
            async with Client.connect_server(server, protocol_version=version) as other:
                assert "resources" not in msgspec.to_builtins(other.server_capabilities)
                for method in ("resources/list", "resources/templates/list"):
                    with pytest.raises(MethodNotFound) as unknown:
                        await other.request(method)
                    refused.append(unknown.value)
                with pytest.raises(MethodNotFound) as unknown:
                    await other.request("resources/read", {"uri": "note://1"})
                refused.append(unknown.value)
        server.add_resource(lambda: "Buy milk", "note://1", name="first note")  # now declared at every revision
        async with Client.connect_server(server, protocol_version="2025-06-18") as older:
            assert [r.uri for r in await older.list_resources()] == ["note://1"]
    assert [error.code for error in refused] == [-32601] * 6


def test_an_extension_identifier_needs_a_vendor_prefix() -> None:
    for bad in ("tasks", "/tasks", "com.example/", "com.example/my ext"):
        with pytest.raises(ValueError, match="vendor-prefix/name"):
            Extension(bad)
    with pytest.raises(ValueError, match="core result kinds"):
        Extension("com.example/x", result_types=["complete"])
    with pytest.raises(ValueError, match="unknown protocol revisions"):
        Extension("com.example/x", versions=["2030-01-01"])
    with pytest.raises(ValueError, match="not core server capabilities: sampling"):
        Extension("com.example/x", server_capabilities=["resources", "sampling"])  # (a client capability)


def test_an_extension_cannot_take_over_a_method_or_wrap_one_that_does_not_exist() -> None:
    taken = Extension("com.example/taken")
    taken.method("tools/list")(lambda ctx, params: {})
    with pytest.raises(ValueError, match="adds tools/list, which the server answers already"):
        Server("x", extensions=[taken])
    wraps = Extension("com.example/wraps")
    wraps.wrap("nothing/here")(lambda ctx, params, call_next: call_next(ctx, params))
    with pytest.raises(ValueError, match="wraps nothing/here, which the server does not answer"):
        Server("x", extensions=[wraps])
    server = Server("x", extensions=[Extension("com.example/once")])
    with pytest.raises(ValueError, match=r"offers com\.example/once already"):
        server.add_extension(Extension("com.example/once"))


async def test_an_unknown_method_stays_unknown_whatever_the_extensions() -> None:
    async with stdio_peer() as peer:
        reply = await peer.call(request_frame(1, "audit/nothing", {"_meta": meta({AUDIT: {}})}))
    assert reply["error"]["code"] == -32601
    with anyio.fail_after(TIMEOUT):
        async with Client.connect_stdio(serve_command(APP), protocol_version=V5) as client:
            with pytest.raises(MethodNotFound):
                await client.request("audit/nothing")
            with pytest.raises(RpcError) as refused:
                await client.request("audit/recent")
    assert refused.value.code == -32021
    assert json.dumps(refused.value.data) == json.dumps({"requiredCapabilities": {"extensions": {AUDIT: {}}}})


async def test_without_a_backend_an_extension_event_is_delivered_to_the_extension_of_this_server() -> None:
    heard: list[Any] = []

    class Heard(Extension):
        async def deliver(self, data: Any) -> None:
            heard.append(data)

    server = Server("heard", extensions=[Heard("com.example/heard")])
    await server.publish_to_extension("com.example/heard", {"n": 1})
    await server.publish_to_extension("com.example/heard", {"n": 2})
    assert heard == [{"n": 1}, {"n": 2}]
    with pytest.raises(ValueError, match=r"no extension 'com\.example/other'"):
        await server.publish_to_extension("com.example/other", {})


def test_an_extension_decorator_used_without_its_call_is_refused() -> None:
    extension = Extension("com.example/forgetful")
    with pytest.raises(
        TypeError, match=r'^Extension\.method is called to make the decorator: @extension\.method\("x/name"\)$'
    ):

        @extension.method  # type: ignore[arg-type]
        def ping(ctx: Context, params: Any) -> dict[str, Any]:
            return {}

    with pytest.raises(
        TypeError, match=r'^Extension\.wrap is called to make the decorator: @extension\.wrap\("tools/call"\)$'
    ):

        @extension.wrap  # type: ignore[arg-type]
        def around(ctx: Context, params: Any, call_next: WrapNext) -> Any:
            return call_next(params)

    assert extension.methods == {} and extension.wrappers == {}  # (was: nothing added, no error)
