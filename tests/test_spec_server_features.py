"""Sentences of the server-features pages (prompts, resources, tools, completion, logging, pagination, caching,
discover), each pinned by a test whose assertion is about it (the ids are in
conformance/spec/coverage/server-features.toml and schema.toml): the errors each feature answers, the change
notifications it sends, the hints and fields its results carry."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from helpers import RawPeer, raw_server, request_frame
from msgspec import UNSET

from jsonrpc_mcp import CacheHint, Client, Server, ToolError
from jsonrpc_mcp import types as t
from jsonrpc_mcp.errors import RpcError
from jsonrpc_mcp.transports.memory import memory_pair

pytestmark = pytest.mark.anyio

HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
EVERY = (*HANDSHAKE, "2026-07-28")
META = "io.modelcontextprotocol/"


def stateless(ident: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    meta = {f"{META}protocolVersion": "2026-07-28", f"{META}clientCapabilities": {}}
    return request_frame(ident, method, {**(params or {}), "_meta": meta})


async def call(peer: RawPeer, version: str, ident: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    frame = stateless(ident, method, params) if version == "2026-07-28" else request_frame(ident, method, params)
    reply: dict[str, Any] = await peer.call(frame)
    return reply


def served(version: str) -> Any:
    return raw_server(features(), version=None if version == "2026-07-28" else version)


def features() -> Server:
    server = Server("features", "1")

    @server.prompt()
    def greet(name: str) -> str:
        return f"Hello {name}"

    @server.prompt()
    def broken() -> str:
        raise RuntimeError("the prompt's own failure, /srv/secret/path")

    @server.resource("mem://broken")
    def broken_resource() -> str:
        raise RuntimeError("the resource's own failure, /srv/secret/path")

    @server.resource("mem://a")
    def a() -> str:
        return "a"

    @server.completion()
    def names(ref: Any, argument: str, value: str, context: Any = None) -> list[str]:
        if value == "boom":
            raise RuntimeError("the completion's own failure")
        return [n for n in ("alice", "bob") if n.startswith(value)]

    return server


# --- prompts --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", EVERY)
async def test_prompts_get_answers_the_standard_errors_and_validates_its_arguments(version: str) -> None:
    """ "Servers SHOULD return standard JSON-RPC errors for common failure cases: Invalid prompt name: -32602;
    Missing required arguments: -32602; Internal errors: -32603"; "Servers SHOULD validate prompt arguments before
    processing" and "Implementations MUST carefully validate all prompt inputs and outputs": an argument that is not
    a string is refused before the prompt runs, and a failing prompt leaks nothing of itself."""
    async with served(version) as peer:
        unknown = await call(peer, version, 1, "prompts/get", {"name": "nope"})
        missing = await call(peer, version, 2, "prompts/get", {"name": "greet", "arguments": {}})
        not_text = await call(peer, version, 3, "prompts/get", {"name": "greet", "arguments": {"name": 7}})
        failing = await call(peer, version, 4, "prompts/get", {"name": "broken"})
        good = await call(peer, version, 5, "prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})
    assert unknown["error"]["code"] == -32602 and "nope" in unknown["error"]["message"]
    assert missing["error"]["code"] == -32602 and "name" in missing["error"]["message"]
    assert not_text["error"]["code"] == -32602
    assert failing["error"] == {"code": -32603, "message": "Internal error"}
    assert good["result"]["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hello Ada"}}]


@pytest.mark.parametrize("version", EVERY)
async def test_a_prompt_with_binary_content_sends_it_base64_encoded_with_its_mime_type(version: str) -> None:
    """ "The image data MUST be base64-encoded and include a valid MIME type" (audio alike, 2025-03-26 on); an
    embedded resource "MUST include a valid resource URI, the appropriate MIME type, either text content or
    base64-encoded blob data": the content types hold each field, and what a prompt returns goes out with them."""
    server = Server("media", "1")
    png = b"\x89PNG\r\n\x1a\n"

    @server.prompt()
    def media() -> list[t.PromptMessage]:
        return [
            t.PromptMessage(role="user", content=t.ImageContent.from_bytes(png, "image/png")),
            t.PromptMessage(
                role="user",
                content=t.EmbeddedResource(resource=t.BlobResourceContents.from_bytes("mem://logo", png, "image/png")),
            ),
        ]

    async with raw_server(server, version=None if version == "2026-07-28" else version) as peer:
        reply = await call(peer, version, 1, "prompts/get", {"name": "media"})
    image, embedded = (m["content"] for m in reply["result"]["messages"])
    assert image == {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    assert embedded == {
        "type": "resource",
        "resource": {"uri": "mem://logo", "mimeType": "image/png", "blob": "iVBORw0KGgo="},
    }
    with pytest.raises(ValueError, match="MIME type"):
        t.ImageContent.from_bytes(png, "png")
    with pytest.raises(ValueError, match="MIME type"):
        t.AudioContent.from_bytes(b"RIFF", "")


@pytest.mark.parametrize("version", HANDSHAKE)
async def test_prompts_and_resources_changed_at_runtime_notify_the_client(version: str) -> None:
    """ "When the list of available prompts changes, servers that declared the listChanged capability SHOULD send a
    notification" (resources alike): adding and removing either at runtime sends its list_changed."""
    server = features()
    heard: list[str] = []
    changed = anyio.Event()

    def on_note(method: str, params: dict[str, Any]) -> None:
        heard.append(method)
        changed.set()

    async with Client.connect_server(server, protocol_version=version, on_notification=on_note) as client:
        assert client.server_capabilities.prompts.list_changed is True  # type: ignore[union-attr]
        assert client.server_capabilities.resources.list_changed is True  # type: ignore[union-attr]
        server.add_prompt(lambda: "new", name="fresh")
        with anyio.fail_after(5):
            await changed.wait()
        changed = anyio.Event()
        server.add_resource(lambda: "b", uri="mem://b")
        with anyio.fail_after(5):
            await changed.wait()
        assert "fresh" in [p.name for p in await client.list_prompts()]
        changed = anyio.Event()
        server.remove_prompt("fresh")
        with anyio.fail_after(5):
            await changed.wait()
    assert heard == [
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
    ]


async def test_a_2026_listen_stream_hears_prompt_and_resource_list_changes() -> None:
    """2026-07-28: "servers that declared the listChanged capability SHOULD send a notification to clients that
    have opened a subscriptions/listen stream with promptsListChanged: true" (resources alike)."""
    server = features()
    heard: list[tuple[str, Any]] = []
    both = anyio.Event()

    def on_note(method: str, params: dict[str, Any]) -> None:
        if method.endswith("/list_changed"):
            heard.append((method, params["_meta"][f"{META}subscriptionId"]))
        if len(heard) == 2:
            both.set()

    async with (
        Client.connect_server(server, on_notification=on_note) as client,
        client.listen(prompts=True, resources=True) as ack,
    ):
        assert ack == {"promptsListChanged": True, "resourcesListChanged": True}
        server.add_prompt(lambda: "new", name="fresh")
        server.add_resource(lambda: "b", uri="mem://b")
        with anyio.fail_after(5):
            await both.wait()
    assert sorted(method for method, _ in heard) == [
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
    ]
    assert heard[0][1] is not None and heard[0][1] == heard[1][1]


# --- resources ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", EVERY)
async def test_resources_read_answers_the_standard_errors(version: str) -> None:
    """ "Servers SHOULD return standard JSON-RPC errors for common failure cases: Resource not found: -32002;
    Internal errors: -32603" (2026-07-28: not found is -32602, and "Servers SHOULD return -32603 for internal
    errors"): a failing resource leaks nothing of itself."""
    async with served(version) as peer:
        unknown = await call(peer, version, 1, "resources/read", {"uri": "mem://nope"})
        failing = await call(peer, version, 2, "resources/read", {"uri": "mem://broken"})
    assert unknown["error"]["code"] == (-32602 if version == "2026-07-28" else -32002)
    assert unknown["error"]["data"] == {"uri": "mem://nope"}
    assert failing["error"] == {"code": -32603, "message": "Internal error"}


async def test_a_resource_uri_is_an_rfc_3986_uri() -> None:
    """ "Custom URI schemes MUST be in accordance with RFC3986": a resource or template whose URI has no scheme, or
    a scheme RFC 3986 does not allow, is refused at registration."""
    server = Server("uris", "1")
    for uri in ("no-scheme", "1mem://a", "me m://a", "mem:// a"):
        with pytest.raises(ValueError, match="URI"):
            server.add_resource(lambda: "x", uri=uri)
    server.add_resource(lambda: "x", uri="my-scheme+v1.2://a/b?c#d")
    async with Client.connect_server(server, protocol_version="2025-06-18") as client:
        listed = [r.uri for r in await client.list_resources()]
    assert listed == ["my-scheme+v1.2://a/b?c#d"]


# --- tools ----------------------------------------------------------------------------------------------------


async def test_tool_names_are_case_sensitive_and_unique() -> None:
    """2025-11-25: "Tool names SHOULD be considered case-sensitive" and "SHOULD be unique within a server": Add and
    add are two tools, ADD none; registering a name again replaces the tool (a listing never names one twice)."""
    server = Server("names", "1")
    server.add_tool(lambda: "upper", name="Add")
    server.add_tool(lambda: "first", name="add")
    server.add_tool(lambda: "lower", name="add")
    async with Client.connect_server(server, protocol_version="2025-11-25") as client:
        names = [tool.name for tool in await client.list_tools()]
        upper = await client.call_tool("Add")
        lower = await client.call_tool("add")
        with pytest.raises(RpcError) as unknown:
            await client.call_tool("ADD")
    assert names == ["Add", "add"]
    assert (upper.content[0].text, lower.content[0].text) == ("upper", "lower")  # type: ignore[union-attr]
    assert unknown.value.code == -32602


# --- completion -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ("2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"))
async def test_completion_answers_the_standard_errors_and_validates_its_inputs(version: str) -> None:
    """ "Servers SHOULD return standard JSON-RPC errors for common failure cases: Method not found: -32601
    (Capability not supported); Invalid prompt name: -32602; Missing required arguments: -32602; Internal errors:
    -32603"; "Implementations MUST: Validate all completion inputs"."""
    ref = {"type": "ref/prompt", "name": "greet"}
    async with served(version) as peer:
        good = await call(
            peer, version, 1, "completion/complete", {"ref": ref, "argument": {"name": "name", "value": "a"}}
        )
        unknown = await call(
            peer,
            version,
            2,
            "completion/complete",
            {"ref": {**ref, "name": "nope"}, "argument": {"name": "n", "value": ""}},
        )
        no_argument = await call(peer, version, 3, "completion/complete", {"ref": ref})
        bad_ref = await call(peer, version, 4, "completion/complete", {"ref": {"type": "ref/other"}, "argument": {}})
        not_text = await call(
            peer, version, 5, "completion/complete", {"ref": ref, "argument": {"name": "name", "value": 7}}
        )
        failing = await call(
            peer, version, 6, "completion/complete", {"ref": ref, "argument": {"name": "name", "value": "boom"}}
        )
    bare = Server("bare", "1")
    bare.add_tool(lambda: "x", name="x")
    async with raw_server(bare, version=None if version == "2026-07-28" else version) as peer:
        unsupported = await call(
            peer, version, 7, "completion/complete", {"ref": ref, "argument": {"name": "n", "value": ""}}
        )
    assert good["result"]["completion"]["values"] == ["alice"]
    for reply in (unknown, no_argument, bad_ref, not_text):
        assert reply["error"]["code"] == -32602, reply
    assert failing["error"] == {"code": -32603, "message": "Internal error"}
    assert unsupported["error"]["code"] == -32601


@pytest.mark.parametrize("version", ("2024-11-05",))
async def test_completion_validates_its_inputs_in_2024_11_05(version: str) -> None:
    """2024-11-05 (completion has no capability flag yet): "Implementations MUST: Validate all completion inputs":
    an unknown prompt, a missing argument or a reference of no known type is -32602."""
    ref = {"type": "ref/prompt", "name": "greet"}
    async with served(version) as peer:
        unknown = await call(
            peer,
            version,
            1,
            "completion/complete",
            {"ref": {**ref, "name": "nope"}, "argument": {"name": "n", "value": ""}},
        )
        no_argument = await call(peer, version, 2, "completion/complete", {"ref": ref})
        bad_ref = await call(peer, version, 3, "completion/complete", {"ref": {"type": "ref/other"}, "argument": {}})
    for reply in (unknown, no_argument, bad_ref):
        assert reply["error"]["code"] == -32602, reply


async def test_the_client_takes_a_completion_without_total_or_has_more() -> None:
    """ "Clients SHOULD: Handle missing or partial results gracefully": a completion with only its values (no
    total, no hasMore) is a result like any other."""
    server = Server("partial", "1")

    @server.prompt()
    def greet(name: str) -> str:
        return name

    @server.completion()
    def partial(ref: Any, argument: str, value: str, context: Any) -> t.CompleteResult:
        return t.CompleteResult(completion=t.Completion(values=["ada"]))

    async with Client.connect_server(server, protocol_version="2025-11-25") as client:
        out = await client.complete(t.PromptReference(name="greet"), "name", "a")
    assert out.completion.values == ["ada"]
    assert out.completion.total is UNSET and out.completion.has_more is UNSET


# --- logging --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", HANDSHAKE)
async def test_logging_set_level_answers_the_standard_errors(version: str) -> None:
    """ "Servers SHOULD return standard JSON-RPC errors for common failure cases: Invalid log level: -32602";
    "Implementations SHOULD: Validate all data fields": a level of another name or type changes nothing."""
    server = features()
    async with raw_server(server, version=version) as peer:
        loud = await peer.call(request_frame(1, "logging/setLevel", {"level": "loud"}))
        number = await peer.call(request_frame(2, "logging/setLevel", {"level": 3}))
        none = await peer.call(request_frame(3, "logging/setLevel", {}))
        good = await peer.call(request_frame(4, "logging/setLevel", {"level": "error"}))
    for reply in (loud, number, none):
        assert reply["error"]["code"] == -32602, reply
    assert loud["error"]["message"] == "Invalid params: unknown log level 'loud'"
    assert good["result"] == {}


# --- pagination and caching (2026-07-28) ----------------------------------------------------------------------


async def test_every_page_of_a_listing_carries_the_same_cache_scope_and_a_ttl_of_zero_or_more() -> None:
    """2026-07-28: "Servers MUST apply the same cacheScope to all response pages for a given list request" ("if the
    first page of a tools/list response has cacheScope private, all subsequent pages ... MUST also be private");
    "Servers MUST provide a ttlMs value that is >= 0"; "Servers MUST include caching hints on results with
    resultType complete" of the listings, reads and discover."""
    server = Server("pages", "1", page_size=2, cache=CacheHint(ttl_ms=5_000, scope="private"))
    for name in "abcde":
        server.add_tool(lambda: "x", name=name)
    server.add_resource(lambda: "r", uri="mem://r")
    hints = []
    async with raw_server(server) as peer:
        cursor: str | None = None
        for ident in range(1, 10):
            page = (await peer.call(stateless(ident, "tools/list", {"cursor": cursor} if cursor else {})))["result"]
            hints.append((page["ttlMs"], page["cacheScope"]))
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        read = (await peer.call(stateless(20, "resources/read", {"uri": "mem://r"})))["result"]
        discover = (await peer.call(stateless(21, "server/discover")))["result"]
    assert hints == [(5_000, "private")] * 3
    assert (read["ttlMs"], read["cacheScope"]) == (5_000, "private")
    assert (discover["ttlMs"], discover["cacheScope"]) == (5_000, "private")
    with pytest.raises(ValueError, match=">= 0"):
        CacheHint(ttl_ms=-1)


# --- discover (2026-07-28) ------------------------------------------------------------------------------------


async def test_the_server_answers_server_discover_with_its_versions_capabilities_and_info() -> None:
    """2026-07-28: "Servers MUST implement server/discover" (the schema: "Servers MUST implement server/discover");
    serverInfo: "Servers SHOULD include this field"."""
    async with raw_server(features()) as peer:
        reply = (await peer.call(stateless(1, "server/discover")))["result"]
    assert reply["supportedVersions"] == ["2026-07-28"]
    assert set(reply["capabilities"]) >= {"prompts", "resources", "completions"}
    assert reply["_meta"][f"{META}serverInfo"] == {"name": "features", "version": "1"}


async def test_the_client_discovers_first_and_serverinfo_changes_nothing_it_sends() -> None:
    """2026-07-28: "A client that supports both modern and legacy servers SHOULD send server/discover first";
    serverInfo: "Clients SHOULD NOT use it to change their behavior": two servers that differ only in the
    serverInfo they report get the very same requests."""
    seen: dict[str, list[tuple[str, Any]]] = {}

    async def session(name: str) -> None:
        ours, theirs = memory_pair()
        peer = RawPeer(theirs)
        info = {"name": name, "version": "99" if name == "official" else "0"}
        results = {
            "server/discover": {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "_meta": {f"{META}serverInfo": info},
            },
            "tools/list": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "resultType": "complete"},
            "tools/call": {"content": [{"type": "text", "text": "x"}], "resultType": "complete"},
        }
        got: list[tuple[str, Any]] = []

        async def serve() -> None:
            while True:
                request = await peer.recv_json(timeout=30)
                params = dict(request.get("params") or {})
                meta = dict(params.pop("_meta", None) or {})
                meta.pop(f"{META}clientInfo", None)
                got.append((request["method"], {**params, "_meta": meta}))
                if "id" in request:
                    reply = {"jsonrpc": "2.0", "id": request["id"], "result": results[request["method"]]}
                    await peer.send(json.dumps(reply).encode())

        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            async with Client.connect(ours) as client:
                assert client.server_info is not None and client.server_info.name == name
                await client.list_tools()
                await client.call_tool("t")
            tg.cancel_scope.cancel()
        await ours.aclose()
        await theirs.aclose()
        seen[name] = got

    await session("official")
    await session("someone-else")
    assert seen["official"][0][0] == "server/discover"
    assert seen["official"] == seen["someone-else"]


# --- tools: x-mcp-header, input rounds (2026-07-28) -----------------------------------------------------------


def header_server() -> Server:
    server = Server("headers", "1")

    def region(count: int) -> str:
        return str(count)

    def bad(**kwargs: Any) -> str:
        return "never"

    schema = {"type": "object", "properties": {"count": {"type": "integer", "x-mcp-header": "Count"}}}
    server.add_tool(region, name="region", input_schema=schema)
    bad_schema = {"type": "object", "properties": {"x": {"type": "number", "x-mcp-header": "X"}}}
    server.add_tool(bad, name="bad", input_schema=bad_schema)
    return server


async def test_an_integer_mirrored_in_a_header_stays_in_the_safe_range(caplog: pytest.LogCaptureFixture) -> None:
    """2026-07-28 x-mcp-header: "Integer values MUST be within the safe range for integers represented using IEEE754
    double-precision floating point numbers": a call whose mirrored integer is beyond ±(2**53 - 1) is refused before
    anything is sent; "Clients SHOULD log a warning when rejecting a tool definition, including the tool name and
    the reason for rejection"."""
    ours, theirs = memory_pair()
    ours.tool_headers = {}  # type: ignore[attr-defined]  # (what the HTTP transport keeps, as it does)
    async with anyio.create_task_group() as tg:
        tg.start_soon(header_server().serve, theirs)
        async with Client.connect(ours) as client:
            with caplog.at_level("WARNING", logger="jsonrpc_mcp.mcp.client"):
                names = [tool.name for tool in await client.list_tools()]
            fine = await client.call_tool("region", {"count": 2**53 - 1})
            with pytest.raises(ValueError, match=r"within ±\(2\*\*53 - 1\), not 9007199254740992"):
                await client.call_tool("region", {"count": 2**53})
            negative = await client.call_tool("region", {"count": -(2**53) + 1})
        tg.cancel_scope.cancel()
    await ours.aclose()
    await theirs.aclose()
    assert names == ["region"]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and warnings[0].startswith("ignoring tool 'bad': ") and "number" in warnings[0]
    assert fine.content[0].text == str(2**53 - 1)  # type: ignore[union-attr]
    assert negative.content[0].text == str(-(2**53) + 1)  # type: ignore[union-attr]


async def test_each_retry_of_an_input_round_has_an_id_of_its_own() -> None:
    """2026-07-28: "Note that the JSON-RPC id MUST be different between the initial request and the retry"."""
    ours, theirs = memory_pair()
    peer = RawPeer(theirs)
    ids: list[Any] = []

    async def serve() -> None:
        while True:
            request = await peer.recv_json(timeout=30)
            if "id" not in request:
                continue
            method = request["method"]
            if method == "server/discover":
                result: dict[str, Any] = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
            elif method == "tools/list":
                result = {"resultType": "complete", "tools": []}
            elif "inputResponses" not in request["params"]:
                ids.append(request["id"])
                ask = {"method": "roots/list", "params": {}}
                result = {"resultType": "input_required", "inputRequests": {"r": ask}, "requestState": "s"}
            else:
                ids.append(request["id"])
                result = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
            await peer.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        async with Client.connect(ours, roots=[t.Root(uri="file:///w")]) as client:
            out = await client.call_tool("anything")
        tg.cancel_scope.cancel()
    await ours.aclose()
    await theirs.aclose()
    assert out.content[0].text == "done"  # type: ignore[union-attr]
    assert len(ids) == 2 and ids[0] != ids[1]


@pytest.mark.parametrize("version", ("2025-11-25", "2026-07-28"))
async def test_a_tool_execution_error_comes_back_as_a_result_the_model_can_read(version: str) -> None:
    """2025-11-25: "Clients SHOULD provide tool execution errors to language models to enable self-correction": a
    tool's own failure is no exception in the client but a result with isError and the tool's message, ready to be
    handed to the model as any other result; a protocol error (an unknown tool) raises."""
    server = Server("failing", "1")

    @server.tool()
    def divide(a: int, b: int) -> float:
        if b == 0:
            raise ToolError("cannot divide by zero: pass another b")
        return a / b

    async with Client.connect_server(server, protocol_version=version) as client:
        failed = await client.call_tool("divide", {"a": 1, "b": 0})
        with pytest.raises(RpcError):
            await client.call_tool("nope")
    assert failed.is_error is True
    assert failed.content[0].text == "cannot divide by zero: pass another b"  # type: ignore[union-attr]
