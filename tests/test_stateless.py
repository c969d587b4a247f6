"""The 2026-07-28 stateless era over a real server: `_meta` rules, discover, removed methods, input-required
round trips with a sealed requestState, caching hints, listen streams, and the client's side of all of it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sys
from typing import Any

import anyio
import pytest
from helpers import ROOT, raw_server, request_frame

from jsonrpc_mcp import Client, Context, MethodNotFound, Server, types

sys.path.insert(0, str(ROOT / "conformance"))
from everything_server import create_server

pytestmark = pytest.mark.anyio

V5 = "2026-07-28"
ALL_CAPS = {"elicitation": {}, "sampling": {}, "roots": {}}


def meta(caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": V5,
        "io.modelcontextprotocol/clientCapabilities": ALL_CAPS if caps is None else caps,
    }
    m.update(extra)
    return m


_ids = iter(range(1, 10_000))


def call(method: str, params: dict[str, Any] | None = None, **meta_extra: Any) -> bytes:
    body = dict(params or {})
    body.setdefault("_meta", meta(**meta_extra))
    return request_frame(next(_ids), method, body)


def tool(name: str, **params: Any) -> bytes:
    return call("tools/call", {"name": name, "arguments": {}, **params})


async def test_discover_lists_the_stateless_versions_and_identity() -> None:
    async with raw_server(create_server()) as peer:
        reply = await peer.call(call("server/discover"))
    result = reply["result"]
    assert result["supportedVersions"] == [V5]
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "jsonrpc-mcp-everything-server"
    assert {"tools", "resources", "prompts"} <= set(result["capabilities"])
    assert result["ttlMs"] >= 0 and result["cacheScope"] in ("public", "private")


@pytest.mark.parametrize("drop", ["io.modelcontextprotocol/clientCapabilities"])
async def test_missing_meta_fields_are_invalid_params(drop: str) -> None:
    m = meta()
    del m[drop]
    async with raw_server(create_server()) as peer:
        frame = request_frame(41, "tools/list", {"_meta": m})
        reply = await peer.call(frame)
    assert reply["id"] == 41 and reply["error"]["code"] == -32602


async def test_client_info_is_optional() -> None:
    async with raw_server(create_server()) as peer:
        reply = await peer.call(call("tools/list"))
    assert reply["result"]["tools"]


async def test_unsupported_version_names_what_we_support() -> None:
    m = meta()
    m["io.modelcontextprotocol/protocolVersion"] = "1999-01-01"
    async with raw_server(create_server()) as peer:
        reply = await peer.call(request_frame(7, "tools/list", {"_meta": m}))
    assert reply["error"]["code"] == -32022
    assert reply["error"]["data"] == {"supported": [V5], "requested": "1999-01-01"}


@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "no/such"]
)
async def test_removed_and_unknown_methods_are_method_not_found(method: str) -> None:
    async with raw_server(create_server()) as peer:
        reply = await peer.call(call(method, {"uri": "test://static-text", "level": "info"}))
    assert reply["error"]["code"] == -32601


async def test_every_result_has_result_type_identity_and_cache_hints_where_cacheable() -> None:
    async with raw_server(create_server()) as peer:
        for method, params in [
            ("tools/list", {}),
            ("prompts/list", {}),
            ("resources/list", {}),
            ("resources/templates/list", {}),
            ("resources/read", {"uri": "test://static-text"}),
        ]:
            result = (await peer.call(call(method, params)))["result"]
            assert result["resultType"] == "complete", method
            assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0, method
            assert result["cacheScope"] in ("public", "private"), method
            assert "io.modelcontextprotocol/serverInfo" in result["_meta"], method
        done = (await peer.call(tool("test_simple_text")))["result"]
    assert done["resultType"] == "complete" and "ttlMs" not in done


async def test_unknown_resource_is_invalid_params_with_the_uri_never_empty_contents() -> None:
    async with raw_server(create_server()) as peer:
        reply = await peer.call(call("resources/read", {"uri": "test://missing"}))
    assert reply["error"] == {"code": -32602, "message": "Resource not found", "data": {"uri": "test://missing"}}


async def test_input_required_then_complete() -> None:
    async with raw_server(create_server()) as peer:
        first = (await peer.call(tool("test_input_required_result_elicitation")))["result"]
        assert first["resultType"] == "input_required"
        request = first["inputRequests"]["user_name"]
        assert request["method"] == "elicitation/create"
        assert isinstance(first["requestState"], str)
        answer = {"action": "accept", "content": {"name": "Ada"}}
        retry = tool(
            "test_input_required_result_elicitation",
            inputResponses={"user_name": answer},
            requestState=first["requestState"],
        )
        done = (await peer.call(retry))["result"]
    assert done["resultType"] == "complete"
    assert done["content"][0]["text"] == "Hello, Ada!"


async def test_multi_round_carries_earlier_answers_in_the_state() -> None:
    name = "test_input_required_result_multi_round"
    async with raw_server(create_server()) as peer:
        r1 = (await peer.call(tool(name)))["result"]
        assert list(r1["inputRequests"]) == ["step1"]
        step1 = {"step1": {"action": "accept", "content": {"name": "Ada"}}}
        r2 = (await peer.call(tool(name, inputResponses=step1, requestState=r1["requestState"])))["result"]
        assert list(r2["inputRequests"]) == ["step2"]
        step2 = {"step2": {"action": "accept", "content": {"color": "green"}}}
        r3 = (await peer.call(tool(name, inputResponses=step2, requestState=r2["requestState"])))["result"]
    assert r3["content"][0]["text"] == "Multi-round complete for Ada who likes green"


async def test_missing_answer_asks_again_and_extra_keys_are_ignored() -> None:
    name = "test_input_required_result_elicitation"
    async with raw_server(create_server()) as peer:
        r1 = (await peer.call(tool(name)))["result"]
        extra = {"unrelated": {"action": "accept", "content": {"name": "Mallory"}}}
        r2 = (await peer.call(tool(name, inputResponses=extra, requestState=r1["requestState"])))["result"]
    assert r2["resultType"] == "input_required" and "user_name" in r2["inputRequests"]


async def test_tampered_state_is_rejected() -> None:
    name = "test_input_required_result_tampered_state"
    async with raw_server(create_server()) as peer:
        r1 = (await peer.call(tool(name)))["result"]
        body, mac = r1["requestState"].split(".")
        forged = body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + mac
        answers = {"confirm": {"action": "accept", "content": {"ok": True}}}
        reply = await peer.call(tool(name, inputResponses=answers, requestState=forged))
    assert reply["error"]["code"] == -32602


async def test_state_of_another_request_or_expired_is_rejected() -> None:
    server = create_server()
    async with raw_server(server) as peer:
        other = (await peer.call(tool("test_input_required_result_request_state")))["result"]
        answers = {"user_name": {"action": "accept", "content": {"name": "x"}}}
        reply = await peer.call(
            tool("test_input_required_result_elicitation", inputResponses=answers, requestState=other["requestState"])
        )
        assert reply["error"]["code"] == -32602
        server.request_state_ttl = -1.0
        stale = (await peer.call(tool("test_input_required_result_elicitation")))["result"]
        reply = await peer.call(
            tool("test_input_required_result_elicitation", inputResponses=answers, requestState=stale["requestState"])
        )
    assert reply["error"]["code"] == -32602


@pytest.mark.parametrize("bad", [12345, None])
async def test_malformed_input_responses_are_a_protocol_error(bad: Any) -> None:
    params: dict[str, Any] = {"inputResponses": {"user_name": bad} if bad is not None else None}
    async with raw_server(create_server()) as peer:
        reply = await peer.call(tool("test_input_required_result_elicitation", **params))
    assert reply["error"]["code"] == -32602


async def test_undeclared_client_capability() -> None:
    async with raw_server(create_server()) as peer:
        reply = await peer.call(call("tools/call", {"name": "test_missing_capability", "arguments": {}}, caps={}))
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}


async def test_only_declared_capabilities_are_asked_for() -> None:
    async with raw_server(create_server()) as peer:
        first = await peer.call(
            call(
                "tools/call",
                {"name": "test_input_required_result_capabilities", "arguments": {}},
                caps={"sampling": {}},
            )
        )
    assert list(first["result"]["inputRequests"]) == ["sample_input"]


async def test_input_from_a_method_that_may_not_ask_is_an_internal_error() -> None:
    server = Server("s")

    @server.tool()
    def noop() -> str:
        return "x"

    @server.method("custom/ask", eras="stateless")
    async def ask(ctx: Context, params: Any) -> dict[str, Any]:
        await ctx.elicit("?", {"type": "object", "properties": {}})
        return {}

    async with raw_server(server) as peer:
        reply = await peer.call(call("custom/ask"))
    assert reply["error"]["code"] == -32603


async def test_logs_only_when_the_request_asks_for_them() -> None:
    async with raw_server(create_server()) as peer:
        quiet = tool("test_logging_tool")
        await peer.send(quiet)
        ident = json.loads(quiet)["id"]
        _, before = await peer.recv_until(lambda m: m.get("id") == ident)
        assert not [m for m in before if m.get("method") == "notifications/message"]
        loud = call(
            "tools/call",
            {"name": "test_logging_tool", "arguments": {}},
            **{"io.modelcontextprotocol/logLevel": "debug"},
        )
        await peer.send(loud)
        ident = json.loads(loud)["id"]
        _, before = await peer.recv_until(lambda m: m.get("id") == ident)
    assert [m["params"]["level"] for m in before if m.get("method") == "notifications/message"] == ["info"]


async def test_progress_goes_to_the_request_that_asked() -> None:
    async with raw_server(create_server()) as peer:
        frame = call("tools/call", {"name": "test_tool_with_progress", "arguments": {}}, progressToken="tok")
        await peer.send(frame)
        ident = json.loads(frame)["id"]
        reply, before = await peer.recv_until(lambda m: m.get("id") == ident)
    progress = [m["params"] for m in before if m.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [0, 50, 100]
    assert {p["progressToken"] for p in progress} == {"tok"}
    assert reply["result"]["content"][0]["text"] == "tok"


async def test_listen_acknowledges_first_and_tags_what_it_was_asked_for() -> None:
    server = create_server()
    async with raw_server(server) as peer:
        listen = call("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        sub_id = json.loads(listen)["id"]
        await peer.send(listen)
        ack = await peer.recv_json()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == sub_id
        await server.notify_list_changed("prompts")  # not asked for: must not arrive
        await server.notify_list_changed("tools")
        note = await peer.recv_json()
    assert note["method"] == "notifications/tools/list_changed"
    assert note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == sub_id


async def test_stateless_request_on_a_handshake_connection_leaves_the_session_alone() -> None:
    async with raw_server(create_server(), version="2025-11-25") as peer:
        reply = await peer.call(request_frame(5, "logging/setLevel", {"level": "error"}))
        assert reply["result"] == {}
        stateless = await peer.call(call("tools/list"))
        assert stateless["result"]["resultType"] == "complete"
        legacy = await peer.call(request_frame(6, "tools/list"))
    assert "resultType" not in legacy["result"]


# --- the client's side -------------------------------------------------------------------------------------


async def test_client_is_stateless_by_default_and_answers_input_requests() -> None:
    seen: list[str] = []

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada", "color": "teal"})

    async with Client.connect_server(create_server(), elicitation=elicit) as client:
        assert client.stateless and client.protocol_version == V5
        assert client.server_info is not None and client.server_info.name == "jsonrpc-mcp-everything-server"
        result = await client.call_tool("test_input_required_result_multi_round", {})
    assert seen == ["Step 1: What is your name?", "Step 2: What is your favorite color?"]
    assert result.content[0].text == "Multi-round complete for Ada who likes teal"  # type: ignore[union-attr]


async def test_client_falls_back_to_the_handshake() -> None:
    server = Server("old")

    @server.tool()
    def hello() -> str:
        return "hi"

    @server.method("server/discover", eras="both")
    def no_discover(ctx: Context, params: Any) -> dict[str, Any]:
        raise MethodNotFound("Method not found: server/discover")

    async with Client.connect_server(server) as client:
        assert not client.stateless
        assert client.protocol_version == "2025-11-25"
        assert (await client.call_tool("hello")).content[0].text == "hi"  # type: ignore[union-attr]


async def test_client_listen_receives_tagged_changes() -> None:
    server = create_server()
    got: list[tuple[str, dict[str, Any]]] = []
    arrived = anyio.Event()

    def on_note(method: str, params: dict[str, Any]) -> None:
        got.append((method, params))
        if method == "notifications/tools/list_changed":
            arrived.set()

    async with Client.connect_server(server, on_notification=on_note) as client, client.listen(tools=True) as ack:
        assert ack == {"toolsListChanged": True}
        await client.call_tool("test_trigger_tool_change", {})
        with anyio.fail_after(5):
            await arrived.wait()
    assert got[-1][1]["_meta"]["io.modelcontextprotocol/subscriptionId"] is not None


def _dict_route(result: Any, server_info: dict[str, Any] | None) -> bytes:
    """How a stateless result was always encoded: to builtins, add ``resultType`` and our ``_meta``, encode."""
    import msgspec

    if getattr(result, "result_type", msgspec.UNSET) is msgspec.UNSET:
        result.result_type = "complete"
    data = dict(msgspec.to_builtins(result))
    data.setdefault("resultType", "complete")
    if server_info is not None:
        meta = dict(data.get("_meta") or {})
        meta.setdefault("io.modelcontextprotocol/serverInfo", server_info)
        data["_meta"] = meta
    return msgspec.json.encode(data)


@pytest.mark.parametrize("with_info", [True, False])
@pytest.mark.parametrize(
    "make",
    [
        lambda: types.CallToolResult(content=[types.TextContent(text="é☃ " * 50)]),
        lambda: types.CallToolResult(
            content=[types.TextContent(text="{}", annotations=types.Annotations(priority=0.5))],
            structured_content={"a": [1, 2.5, None]},
            is_error=True,
        ),
        lambda: types.CallToolResult(content=[], meta={}),
        lambda: types.CallToolResult(content=[], meta={"x": 1}),
        lambda: types.CallToolResult(content=[], meta={"io.modelcontextprotocol/serverInfo": {"name": "kept"}}),
        lambda: types.ListToolsResult(tools=[types.Tool(name="t", input_schema={"type": "object"})], next_cursor="c2"),
        lambda: types.GetPromptResult(
            messages=[types.PromptMessage(role="user", content=types.TextContent(text="hi"))]
        ),
        lambda: types.ReadResourceResult(contents=[types.BlobResourceContents(uri="x://1", blob="AAAA")]),
    ],
)
def test_a_stateless_result_struct_is_encoded_as_the_dict_route_encodes_it(make: Any, with_info: bool) -> None:
    """Result Structs go straight to the encoder in the stateless era; the bytes stay those of the dict route
    (``_meta`` in its place when the result has one, last when it does not)."""
    from jsonrpc_mcp.mcp.session import encode_stateless_result

    info = {"name": "srv", "version": "1"} if with_info else None
    assert encode_stateless_result(make(), server_info=info) == _dict_route(make(), info)


# --- single-use states: the nonce and the set of spent ones ------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_state_carries_a_nonce_and_states_sealed_without_one_still_open() -> None:
    from jsonrpc_mcp.mcp.request_state import StatePayload, new_nonce, open_state, seal

    key = b"k" * 32
    nonce = new_nonce()
    assert len(nonce) >= 22 and nonce != new_nonce()
    sealed = seal(key, StatePayload("d", 100.0, {"a": 1}, ["b"], nonce))
    assert open_state(key, sealed, digest="d", now=1.0).nonce == nonce
    # a state sealed before the field existed (four items) reads as before, with no nonce
    body = json.dumps(["d", 100.0, {"a": 1}, ["b"]], separators=(",", ":")).encode()
    old = f"{b64(body)}.{b64(hmac.new(key, body, hashlib.sha256).digest())}"
    opened = open_state(key, old, digest="d", now=1.0)
    assert (opened.answers, opened.asked, opened.nonce) == ({"a": 1}, ["b"], "")


def test_a_state_opens_only_for_the_principal_it_was_issued_to() -> None:
    from jsonrpc_mcp.auth import AccessToken
    from jsonrpc_mcp.errors import InvalidParams
    from jsonrpc_mcp.mcp.request_state import StatePayload, open_state, principal_digest, seal

    key = b"k" * 32
    alice = principal_digest(AccessToken(subject="alice", client_id="app", issuer="https://as"))
    renewed = principal_digest(AccessToken(subject="alice", client_id="app", issuer="https://as", scopes={"x"}))
    assert alice == renewed  # a fresh token of the same principal: the same binding
    others = [
        principal_digest(AccessToken(subject="bob", client_id="app", issuer="https://as")),
        principal_digest(AccessToken(subject="alice", client_id="other-app", issuer="https://as")),
        principal_digest(AccessToken(subject="alice", client_id="app", issuer="https://other-as")),
        principal_digest(None),
    ]
    assert principal_digest(None) == "" and len(set(others)) == len(others) and alice not in others
    assert "alice" not in alice  # the client can read the state: it names nobody
    sealed = seal(key, StatePayload("d", 100.0, {}, ["b"], principal=alice))
    assert open_state(key, sealed, digest="d", now=1.0, principal=renewed).asked == ["b"]
    for other in others:
        with pytest.raises(InvalidParams, match="issued to another principal"):
            open_state(key, sealed, digest="d", now=1.0, principal=other)
    unbound = seal(key, StatePayload("d", 100.0, {}, ["b"]))  # a server without authorization
    assert open_state(key, unbound, digest="d", now=1.0).asked == ["b"]
    with pytest.raises(InvalidParams, match="issued to another principal"):
        open_state(key, unbound, digest="d", now=1.0, principal=alice)


def test_a_nonce_is_claimed_once_until_its_state_expires() -> None:
    from jsonrpc_mcp.mcp.request_state import SeenNonces

    seen = SeenNonces()
    assert seen.claim("n1", expires=10.0, now=0.0)
    assert not seen.claim("n1", expires=10.0, now=5.0)  # a replay
    assert "n1" in seen and len(seen) == 1
    assert seen.claim("n2", expires=20.0, now=11.0)  # n1's state expired: it is forgotten
    assert "n1" not in seen and len(seen) == 1


def test_the_set_of_spent_nonces_is_bounded_forgetting_the_soonest_to_expire() -> None:
    from jsonrpc_mcp.mcp.request_state import SeenNonces

    seen = SeenNonces(max_size=3)
    for n, expires in (("a", 30.0), ("b", 10.0), ("c", 20.0)):
        assert seen.claim(n, expires=expires, now=0.0)
    assert seen.claim("d", expires=40.0, now=1.0)
    assert len(seen) == 3 and "b" not in seen and all(n in seen for n in "acd")
    with pytest.raises(ValueError):
        SeenNonces(max_size=0)


@pytest.mark.parametrize("single_use", [True, False])
async def test_a_single_use_request_state_is_answered_once(single_use: bool) -> None:
    """A replayed requestState runs its handler again (docs/design.md); a tool registered with
    ``single_use_state=True`` acts once per answered round: the replay is -32602."""
    server = Server("once", "1")
    sent: list[str] = []

    @server.tool(single_use_state=single_use)
    async def send_mail(ctx: Context, to: str) -> str:
        answer = await ctx.elicit("Send it?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        if answer.action == "accept":
            sent.append(to)
        return f"sent to {to}"

    caps = {"elicitation": {}}
    async with raw_server(server) as peer:
        params: dict[str, Any] = {"name": "send_mail", "arguments": {"to": "ann"}, "_meta": meta(caps)}
        first = (await peer.call(request_frame(1, "tools/call", params)))["result"]
        assert first["resultType"] == "input_required"
        (key,) = first["inputRequests"]
        retry = {**params, "inputResponses": {key: {"action": "accept", "content": {"ok": True}}}}
        retry["requestState"] = first["requestState"]
        done = await peer.call(request_frame(2, "tools/call", retry))
        assert done["result"]["content"][0]["text"] == "sent to ann" and sent == ["ann"]
        replay = await peer.call(request_frame(3, "tools/call", retry))
    if single_use:
        assert replay["error"]["code"] == -32602 and "single-use" in replay["error"]["message"]
        assert sent == ["ann"]
    else:
        assert replay["result"]["content"][0]["text"] == "sent to ann" and sent == ["ann", "ann"]
