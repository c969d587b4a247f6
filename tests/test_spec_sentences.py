"""Single sentences of the specification, each pinned by a test whose assertion is about it (the ids are in
conformance/spec/coverage/*.toml): capabilities declared by what a party supports, progress that increases and
ends with its request, pages of any size, roots that are file:// URIs, modes of elicitation, tools in sampling."""

from __future__ import annotations

import json
from typing import Any

import anyio
import msgspec
import pytest
from helpers import CLIENT_INFO, RawPeer, raw_server, request_frame

from jsonrpc_mcp import Client, Context, MissingClientCapability, Server
from jsonrpc_mcp import types as t
from jsonrpc_mcp.jsonrpc.streams import RESPONSE
from jsonrpc_mcp.transports.memory import memory_pair

pytestmark = pytest.mark.anyio

HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
EVERY = (*HANDSHAKE, "2026-07-28")


# --- capabilities: declared by what a party supports, and only then ------------------------------------------


def tools_only() -> Server:
    server = Server("tools-only", "1")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    return server


def everything() -> Server:
    server = tools_only()

    @server.resource("mem://a")
    def a() -> str:
        return "a"

    @server.prompt()
    def greet(name: str) -> str:
        return f"Hello {name}"

    return server


@pytest.mark.parametrize("version", HANDSHAKE)
async def test_a_server_declares_the_capability_of_each_feature_it_supports_and_no_other(version: str) -> None:
    """ "Servers that support tools/resources/prompts/completions MUST declare the ... capability"; one that emits
    log messages declares logging. A feature it lacks is not declared."""
    async with raw_server(tools_only()) as peer:
        only = (await peer.initialize(version))["capabilities"]
    async with raw_server(everything()) as peer:
        full = (await peer.initialize(version))["capabilities"]
    assert set(only) == {"tools", "logging"}
    completions = {"completions"} if version >= "2025-03-26" else set()  # its flag arrived in 2025-03-26
    assert set(full) == {"tools", "resources", "prompts", "logging"} | completions


async def test_a_stateless_server_declares_its_capabilities_in_discover() -> None:
    """2026-07-28: "Servers that support prompts MUST declare the prompts capability in their DiscoverResult"
    (tools, resources, completions alike)."""
    async with Client.connect_server(tools_only()) as client:
        only = msgspec.to_builtins(client.server_capabilities)
    async with Client.connect_server(everything()) as client:
        full = msgspec.to_builtins(client.server_capabilities)
        assert client.stateless
    assert set(only) == {"tools", "logging"}
    assert set(full) == {"tools", "resources", "prompts", "logging", "completions"}


def capability_echo() -> Server:
    server = Server("echo", "1")

    @server.tool()
    def declared(ctx: Context) -> list[str]:
        return sorted(ctx.client_capabilities)

    return server


async def answer_sampling(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
    return t.CreateMessageResult(role="assistant", content=t.TextContent(text="hi"), model="m")


async def answer_elicitation(params: t.ElicitRequestParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"answer": "yes"})


@pytest.mark.parametrize("version", EVERY)
async def test_the_client_declares_each_capability_it_supports_on_every_revision(version: str) -> None:
    """Clients that support sampling, roots or elicitation MUST declare the capability (in initialize; in 2026-07-28
    in each request's _meta clientCapabilities); without the handler, nothing is declared."""
    roots = [t.Root(uri="file:///work")]
    options: dict[str, Any] = {"sampling": answer_sampling, "elicitation": answer_elicitation, "roots": roots}
    async with Client.connect_server(capability_echo(), protocol_version=version, **options) as client:
        full = (await client.call_tool("declared")).structured_content
    async with Client.connect_server(capability_echo(), protocol_version=version) as client:
        bare = (await client.call_tool("declared")).structured_content
    assert full == {"result": ["elicitation", "roots", "sampling"]}
    assert bare == {"result": []}


async def test_a_client_that_elicits_declares_one_mode_at_least() -> None:
    """2025-11-25: "Clients declaring the elicitation capability MUST support at least one mode (form or url)"."""
    ours, theirs = memory_pair()
    try:
        with pytest.raises(ValueError, match="one mode at least"):
            Client(ours, elicitation=answer_elicitation, elicitation_modes=())
    finally:
        await ours.aclose()
        await theirs.aclose()


# --- progress -------------------------------------------------------------------------------------------------


def progress_server() -> tuple[Server, list[Context]]:
    server = Server("progress", "1")
    kept: list[Context] = []

    @server.tool()
    async def twice(ctx: Context) -> str:
        await ctx.report_progress(1, None, "first")
        try:
            await ctx.report_progress(1, None, "again")
        except ValueError as exc:
            return str(exc)
        return "sent twice"

    @server.tool()
    async def keep(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        kept.append(ctx)
        return "kept"

    @server.tool()
    async def late() -> str:
        await kept[0].report_progress(2, 2)
        return "late"

    return server, kept


@pytest.mark.parametrize("version", HANDSHAKE)
async def test_progress_increases_with_each_notification(version: str) -> None:
    """ "The progress value MUST increase with each notification, even if the total is unknown"."""
    server, _ = progress_server()
    async with raw_server(server, version=version) as peer:
        await peer.send(request_frame(1, "tools/call", {"name": "twice", "_meta": {"progressToken": "p"}}))
        reply, before = await peer.recv_until(lambda m: m.get("id") == 1)
    assert [m["params"]["progress"] for m in before] == [1]
    assert reply["result"]["content"][0]["text"] == "progress must increase with each report"


@pytest.mark.parametrize("version", HANDSHAKE)
async def test_progress_stops_when_its_request_is_answered(version: str) -> None:
    """ "Progress notifications MUST stop after completion" and "MUST only reference tokens that ... are associated
    with an in-progress operation": a handler's Context kept past its answer sends nothing more."""
    server, kept = progress_server()
    async with raw_server(server, version=version) as peer:
        await peer.send(request_frame(1, "tools/call", {"name": "keep", "_meta": {"progressToken": "k"}}))
        _, before = await peer.recv_until(lambda m: m.get("id") == 1)
        assert [m["params"] for m in before] == [{"progressToken": "k", "progress": 1, "total": 2}]
        await peer.send(request_frame(2, "tools/call", {"name": "late"}))
        late, before = await peer.recv_until(lambda m: m.get("id") == 2)
        assert before == []  # nothing but the answer: no progress for the finished request
        assert await peer.sync() == []
    assert late["result"]["content"][0]["text"] == "late"
    assert kept


# --- pagination -----------------------------------------------------------------------------------------------


def paging_server() -> Server:
    """tools/list in pages of 3, 1 and 2 tools, the second cursor an empty string."""
    server = Server("pages", "1")
    pages: dict[Any, tuple[list[str], str | None]] = {
        None: (["a", "b", "c"], ""),
        "": (["d"], "next"),
        "next": (["e", "f"], None),
    }

    @server.method("tools/list", capability="tools")
    def tools_list(ctx: Context, params: dict[str, Any] | None) -> dict[str, Any]:
        names, cursor = pages[(params or {}).get("cursor")]
        result: dict[str, Any] = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names]}
        if cursor is not None:
            result["nextCursor"] = cursor
        return result

    server.add_tool(lambda: "x", name="a")
    return server


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25", "2026-07-28"])
async def test_the_client_reads_pages_of_any_size_and_an_empty_cursor_is_a_cursor(version: str) -> None:
    """ "Clients MUST NOT assume a fixed page size"; 2026-07-28: "an empty string is a valid cursor and thus MUST NOT
    be treated as the end of results"."""
    async with Client.connect_server(paging_server(), protocol_version=version) as client:
        tools = await client.list_tools()
    assert [tool.name for tool in tools] == ["a", "b", "c", "d", "e", "f"]


# --- roots ----------------------------------------------------------------------------------------------------


async def test_a_root_is_a_file_uri() -> None:
    """Root: "This MUST be a file:// URI": the client refuses any other, given as a list or by its provider."""
    ours, theirs = memory_pair()
    try:
        with pytest.raises(ValueError, match="file://"):
            Client(ours, roots=[t.Root(uri="https://example.com/repo")])
    finally:
        await ours.aclose()
        await theirs.aclose()

    async def provider() -> list[t.Root]:
        return [t.Root(uri="file:///ok"), t.Root(uri="s3://bucket")]

    server = Server("roots", "1")

    @server.tool()
    async def roots(ctx: Context) -> str:
        try:
            await ctx.list_roots()
        except Exception as exc:
            return type(exc).__name__ + f" {getattr(exc, 'code', '')}"
        return "listed"

    async with Client.connect_server(server, protocol_version="2025-11-25", roots=provider) as client:
        out = await client.call_tool("roots")
    assert out.content[0].text == "InternalError -32603"  # type: ignore[union-attr]


async def test_a_client_whose_roots_change_tells_the_server() -> None:
    """ "When roots change, clients that support listChanged MUST send a notification"."""
    server = Server("roots", "1")
    heard = anyio.Event()

    @server.on_notification("notifications/roots/list_changed")
    def changed(session: Any, params: dict[str, Any]) -> None:
        heard.set()

    async with Client.connect_server(server, protocol_version="2025-06-18", roots=[t.Root(uri="file:///a")]) as client:
        assert client.capabilities()["roots"] == {"listChanged": True}
        await client.notify_roots_changed()
        with anyio.fail_after(5):
            await heard.wait()


# --- elicitation and sampling ---------------------------------------------------------------------------------


async def test_a_request_without_mode_is_form_mode_for_the_client() -> None:
    """2025-11-25: "Clients MUST treat requests without a mode field as form mode": a client that declared form
    mode only answers one."""
    server = Server("modeless", "1")

    @server.tool()
    async def ask(ctx: Context) -> str:
        params = {"message": "Your name?", "requestedSchema": {"type": "object", "properties": {}}}
        raw = await ctx.session.send_request("elicitation/create", params)
        return str(json.loads(bytes(raw))["action"])

    async with Client.connect_server(
        server, protocol_version="2025-11-25", elicitation=answer_elicitation, elicitation_modes=("form",)
    ) as client:
        out = await client.call_tool("ask")
    assert out.content[0].text == "accept"  # type: ignore[union-attr]


def sampling_server() -> tuple[Server, list[str]]:
    server = Server("sampling", "1")
    refused: list[str] = []

    @server.tool()
    async def with_tools(ctx: Context) -> str:
        tool = {"name": "lookup", "inputSchema": {"type": "object"}}
        try:
            await ctx.sample("Look it up", tools=[tool], timeout=5)
        except MissingClientCapability as exc:
            refused.append(f"{exc.message} {exc.data}")
            return "refused"
        return "sent"

    return server, refused


@pytest.mark.parametrize(
    ("version", "sampling", "sent"),
    [
        ("2025-11-25", {}, False),
        ("2025-11-25", {"tools": {}}, True),
        ("2025-06-18", {"tools": {}}, False),  # tools in sampling arrived in 2025-11-25
    ],
)
async def test_tool_enabled_sampling_only_to_a_client_that_declared_sampling_tools(
    version: str, sampling: dict[str, Any], sent: bool
) -> None:
    """2025-11-25: "Servers MUST NOT send tool-enabled sampling requests to Clients that have not declared support
    for tool use via the sampling.tools capability"."""
    server, refused = sampling_server()
    async with raw_server(server, version=version, capabilities={"sampling": sampling}) as peer:
        await peer.send(request_frame(1, "tools/call", {"name": "with_tools"}))
        first = await peer.recv_json()
        if sent:
            assert first["method"] == "sampling/createMessage"
            assert first["params"]["tools"] == [{"name": "lookup", "inputSchema": {"type": "object"}}]
            return
        assert first["id"] == 1 and first["result"]["content"][0]["text"] == "refused"
        assert await peer.sync() == []
    assert len(refused) == 1 and "{'requiredCapabilities': {'sampling': {'tools': {}}}}" in refused[0]


async def test_elicitation_requests_carry_the_parameters_of_their_mode() -> None:
    """2025-11-25: "All elicitation requests MUST include" a message; form mode "MUST either specify mode: form or
    omit the mode field" and carry requestedSchema; URL mode "MUST specify mode: url, a message" and the url and
    elicitationId; "The url parameter MUST contain a valid URL" (a relative one is refused before anything is
    sent)."""
    server = Server("modes", "1")
    refused: list[str] = []

    @server.tool()
    async def both(ctx: Context) -> str:
        try:
            await ctx.elicit_url("Log in", "/login")
        except ValueError as exc:
            refused.append(str(exc))
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
        await ctx.elicit("Your name?", schema)
        await ctx.elicit_url("Log in", "https://example.com/login", elicitation_id="e-1")
        return "done"

    capabilities = {"elicitation": {"form": {}, "url": {}}}
    async with raw_server(server, version="2025-11-25", capabilities=capabilities) as peer:
        await peer.send(request_frame(1, "tools/call", {"name": "both"}))
        form = await peer.recv_json()
        await peer.send(json.dumps({"jsonrpc": "2.0", "id": form["id"], "result": {"action": "cancel"}}).encode())
        url = await peer.recv_json()
        await peer.send(json.dumps({"jsonrpc": "2.0", "id": url["id"], "result": {"action": "accept"}}).encode())
        done = await peer.recv_json()
    assert form["params"] == {
        "mode": "form",
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}},
    }
    assert url["params"] == {
        "mode": "url",
        "message": "Log in",
        "url": "https://example.com/login",
        "elicitationId": "e-1",
    }
    assert done["result"]["content"][0]["text"] == "done"
    assert refused == ["elicit_url needs an absolute URL (a scheme and a host), not '/login'"]


# --- the base protocol ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", HANDSHAKE)
async def test_the_client_sends_initialized_after_initialize(version: str) -> None:
    """ "After successful initialization, the client MUST send an initialized notification"."""
    server = tools_only()
    async with Client.connect_server(server, protocol_version=version) as client:
        await client.call_tool("add", {"a": 1, "b": 2})
        (session,) = server.sessions()
        assert (session.version, session.ready) == (version, True)


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_a_requestor_never_uses_a_request_id_twice(version: str) -> None:
    """ "The request ID MUST NOT have been previously used by the requestor within the same session" (2026-07-28:
    "MUST NOT match the ID of any other request the sender has issued and not yet received a response for"): the
    client's requests, the concurrent ones too, and the server's requests to the client."""
    server = Server("ids", "1")
    seen: list[Any] = []

    @server.tool()
    async def record(ctx: Context) -> str:
        seen.append(ctx.request_id)
        if not ctx.stateless:
            for _ in range(3):
                await ctx.session.send_request("ping", None)
        return "ok"

    async with Client.connect_server(server, protocol_version=version) as client:
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(client.call_tool, "record")
        await client.call_tool("record")
    assert len(seen) == 6 and len(set(seen)) == 6
    async with raw_server(server, version="2025-11-25") as peer:
        await peer.send(request_frame(1, "tools/call", {"name": "record"}))
        asked = []
        for _ in range(3):
            ping = await peer.recv_json()
            asked.append(ping["id"])
            await peer.send(json.dumps({"jsonrpc": "2.0", "id": ping["id"], "result": {}}).encode())
        await peer.recv_until(lambda m: m.get("id") == 1)
    assert len(set(asked)) == 3


def test_the_meta_keys_this_library_defines_are_well_formed() -> None:
    """_meta key names: a prefix "MUST be a series of labels separated by dots, followed by a slash"; labels "MUST
    start with a letter and end with a letter or digit"; the name "MUST begin and end with an alphanumeric
    character"."""
    import re

    from jsonrpc_mcp.mcp import versions

    label = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    name = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
    keys = [getattr(versions, n) for n in dir(versions) if n.startswith("META_")]
    assert len(keys) == 6
    for key in keys:
        assert re.fullmatch(rf"(?:{label}(?:\.{label})*/)?{name}", key), key
        assert key.startswith("io.modelcontextprotocol/")


async def test_each_listing_is_the_set_available_now_and_the_same_for_every_client() -> None:
    """2026-07-28: a server "MUST respond to tools/list (resources/list, prompts/list) requests with the set ...
    currently available"; the set "MAY change over time ... but MUST NOT vary per-connection or as a side effect of
    other requests on the connection"."""
    server = everything()

    async def listings(client: Client) -> tuple[list[str], list[str], list[str]]:
        tools = [tool.name for tool in await client.list_tools()]
        resources = [resource.uri for resource in await client.list_resources()]
        prompts = [prompt.name for prompt in await client.list_prompts()]
        return tools, resources, prompts

    async with Client.connect_server(server) as one, Client.connect_server(server) as other:
        assert one.stateless and other.stateless
        before = await listings(one)
        await one.call_tool("add", {"a": 1, "b": 2})  # a request on the connection changes nothing
        assert await listings(one) == await listings(other) == before == (["add"], ["mem://a"], ["greet"])
        server.add_tool(lambda: "new", name="later")
        server.add_resource(lambda: "b", uri="mem://b")
        assert await listings(other) == await listings(one) == (["add", "later"], ["mem://a", "mem://b"], ["greet"])


def stateless_call(ident: int, name: str, capabilities: dict[str, Any]) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    return request_frame(ident, "tools/call", {"name": name, "arguments": {}, "_meta": meta})


async def test_input_requests_of_2026_07_28_follow_the_modes_and_capabilities_the_request_declares() -> None:
    """2026-07-28: form-mode requests carry mode "form" and requestedSchema, URL-mode ones mode "url", message and
    url; no mode the client did not declare is asked for ("Servers MUST NOT send elicitation requests with modes
    that are not supported by the client"), nor tool-enabled sampling of a client without sampling.tools."""
    server, refused = sampling_server()

    @server.tool()
    async def form(ctx: Context) -> str:
        await ctx.elicit("Your name?", {"type": "object", "properties": {}}, key="name")
        return "done"

    @server.tool()
    async def url(ctx: Context) -> str:
        try:
            await ctx.elicit_url("Log in", "https://example.com/login", key="login")
        except MissingClientCapability:
            return "no url mode"
        return "done"

    both = {"elicitation": {"form": {}, "url": {}}, "sampling": {}}
    async with raw_server(server) as peer:
        asked_form = (await peer.call(stateless_call(1, "form", both)))["result"]
        asked_url = (await peer.call(stateless_call(2, "url", both)))["result"]
        form_only = (await peer.call(stateless_call(3, "url", {"elicitation": {}})))["result"]
        no_tools = (await peer.call(stateless_call(4, "with_tools", both)))["result"]
    assert asked_form["resultType"] == "input_required"
    assert asked_form["inputRequests"]["name"] == {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Your name?", "requestedSchema": {"type": "object", "properties": {}}},
    }
    assert asked_url["inputRequests"]["login"]["params"] == {
        "mode": "url",
        "message": "Log in",
        "url": "https://example.com/login",
    }
    assert form_only["content"][0]["text"] == "no url mode"
    assert no_tools["content"][0]["text"] == "refused" and len(refused) == 1


async def test_the_client_takes_a_result_without_result_type_as_complete() -> None:
    """2026-07-28: "clients MUST treat an absent resultType as complete" (servers of earlier revisions send none)."""
    ours, theirs = memory_pair()
    peer = RawPeer(theirs)
    results = {
        "server/discover": {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}},
        "tools/list": {"tools": [{"name": "anything", "inputSchema": {"type": "object"}}]},
        "tools/call": {"content": [{"type": "text", "text": "plain"}]},
    }

    async def serve() -> None:
        while True:
            request = await peer.recv_json(timeout=30)
            if "id" in request:
                reply = {"jsonrpc": "2.0", "id": request["id"], "result": results[request["method"]]}
                await peer.send(json.dumps(reply).encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        async with Client.connect(ours, protocol_version="2026-07-28") as client:
            tools = await client.list_tools()
            out = await client.call_tool("anything")
        tg.cancel_scope.cancel()
    await ours.aclose()
    await theirs.aclose()
    assert [tool.name for tool in tools] == ["anything"]
    assert out.content[0].text == "plain"  # type: ignore[union-attr]


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25"])
async def test_the_client_sends_nothing_but_initialize_until_it_is_answered(version: str) -> None:
    """ "The client SHOULD NOT send requests other than pings before the server has responded to the initialize
    request": what it sends comes in this order, whatever the caller asked for at once."""
    ours, theirs = memory_pair()
    peer = RawPeer(theirs)
    methods: list[str] = []
    capabilities = {"tools": {}}

    async def serve() -> None:
        while True:
            request = await peer.recv_json(timeout=30)
            methods.append(request["method"])
            if "id" not in request:
                continue
            result: dict[str, Any] = {"tools": [], "content": []}
            if request["method"] == "initialize":
                result = {"protocolVersion": version, "capabilities": capabilities, "serverInfo": CLIENT_INFO}
            await peer.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        async with Client.connect(ours, protocol_version=version) as client:
            await client.list_tools()
        tg.cancel_scope.cancel()
    await ours.aclose()
    await theirs.aclose()
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/list"]


def test_a_ref_to_a_network_uri_is_never_fetched() -> None:
    """2026-07-28: "Implementations MUST NOT automatically dereference $ref values that resolve to a network URI":
    a tool whose schema has one is refused at registration, and nothing connects to the URI; references within
    the schema resolve."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    server = Server("refs", "1")
    try:
        remote = {"type": "object", "properties": {"a": {"$ref": f"http://127.0.0.1:{port}/a.json"}}}
        with pytest.raises(ValueError, match="not fetched"):
            server.add_tool(lambda **kw: "x", name="remote", input_schema=remote)
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection was made to the URI
    finally:
        listener.close()
    local = {"type": "object", "$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}
    server.add_tool(lambda **kw: "x", name="local", input_schema=local)


def test_schemas_are_json_schema_2020_12_unless_they_say_otherwise() -> None:
    """2025-11-25: "Clients and servers MUST support JSON Schema 2020-12 for schemas without an explicit $schema
    field" and "MUST handle unsupported dialects gracefully by returning an appropriate error"."""
    from jsonrpc_mcp.mcp.tools import RawSchemaValidator

    pairs = RawSchemaValidator({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]})
    assert pairs.errors([1, "a"]) is None
    assert pairs.errors(["a", 1]) is not None  # prefixItems is 2020-12's
    with pytest.raises(ValueError, match="invalid input schema: Unknown meta-schema"):
        RawSchemaValidator({"$schema": "https://example.com/no-such-dialect", "type": "object"})


async def test_log_messages_never_go_to_a_listen_stream() -> None:
    """2026-07-28: "notifications/message is request-scoped: the server MUST NOT deliver it on a
    subscriptions/listen stream": a log the server broadcasts reaches its handshake sessions only, while the
    listen stream still hears the change that follows it."""
    server = tools_only()
    got: list[str] = []
    arrived = anyio.Event()

    def on_note(method: str, params: dict[str, Any]) -> None:
        got.append(method)
        if method == "notifications/tools/list_changed":
            arrived.set()

    logs: list[Any] = []

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    listening = Client.connect_server(server, on_notification=on_note)
    settled = Client.connect_server(server, protocol_version="2025-11-25", on_log=on_log)
    async with listening as client, client.listen(tools=True), settled as handshake:
        await handshake.call_tool("add", {"a": 1, "b": 1})  # (the session is settled)
        await server.broadcast_log("warning", "to the handshake sessions")
        server.add_tool(lambda: "new", name="later")
        with anyio.fail_after(5):
            await arrived.wait()
        await handshake.call_tool("add", {"a": 1, "b": 1})  # answered after the log message: it has arrived
    assert "notifications/message" not in got
    assert logs == ["to the handshake sessions"]


async def test_the_client_never_answers_a_request_of_a_stateless_server(caplog: pytest.LogCaptureFixture) -> None:
    """2026-07-28: "The client MUST NOT send JSON-RPC responses" (Streamable HTTP) and "The client MUST NOT write
    JSON-RPC responses" (stdio): a server of that era that sends a request anyway (a ping, an elicitation, a frame
    that is no message, a batch) gets no answer of any kind; the client logs and drops each, and goes on."""
    ours, theirs = memory_pair()
    peer = RawPeer(theirs)
    sent_kinds: list[int] = []
    send = ours.send

    async def recording(frames: Any) -> None:
        sent_kinds.extend(out.kind for out in frames)
        await send(frames)

    ours.send = recording  # type: ignore[method-assign]
    unwanted = [
        request_frame("s1", "ping"),
        request_frame("s2", "elicitation/create", {"message": "?", "requestedSchema": {"type": "object"}}),
        b'{"jsonrpc":"2.0","id":"s3","method":7}',
        b'[{"jsonrpc":"2.0","id":"s4","method":"ping"}]',
    ]
    seen: list[dict[str, Any]] = []

    async def serve() -> None:
        while True:
            request = await peer.recv_json(timeout=30)
            seen.append(request)
            result: dict[str, Any] = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
            if request.get("method") == "tools/list":
                result = {"tools": []}
                for frame in unwanted if len(seen) == 2 else ():  # (read before the answer that follows them)
                    await peer.send(frame)
            await peer.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode())

    caplog.set_level("WARNING", logger="jsonrpc_mcp.jsonrpc.dispatch")
    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        async with Client.connect(ours, protocol_version="2026-07-28", elicitation=_accept) as client:
            assert client.stateless
            assert await client.list_tools() == []
            assert await client.list_tools() == []  # (a read later: whatever the first one made has been written)
        tg.cancel_scope.cancel()
    await ours.aclose()
    await theirs.aclose()
    assert [m.get("method") for m in seen] == ["server/discover", "tools/list", "tools/list"]
    assert all("result" not in m and "error" not in m for m in seen)
    assert RESPONSE not in sent_kinds
    dropped = [r.getMessage() for r in caplog.records if "must not answer" in r.getMessage()]
    assert [m.split(" of the peer")[0] for m in dropped] == [
        "dropped a request ('ping')",
        "dropped a request ('elicitation/create')",
        "dropped an invalid message",
        "dropped a batch",
    ]


async def _accept(params: Any) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={})  # pragma: no cover - never asked
