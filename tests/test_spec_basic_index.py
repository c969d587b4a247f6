"""basic/index (2025-06-18 .. 2026-07-28): schema dialects, reserved `_meta` keys, statelessness across
connections, and what a stateless server never sends (the ids are in conformance/spec/coverage/basic.toml)."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import pytest
from helpers import ROOT, raw_server, request_frame

from jsonrpc_mcp import Context, Server
from jsonrpc_mcp.mcp.tools import RawSchemaValidator

pytestmark = pytest.mark.anyio

V5 = "2026-07-28"
CAPS = {"elicitation": {"form": {}}}
DIALECTS = {
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft 7": "http://json-schema.org/draft-07/schema#",
    "draft 6": "http://json-schema.org/draft-06/schema#",
    "draft 4": "http://json-schema.org/draft-04/schema#",
}


def meta(**extra: Any) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": V5, "io.modelcontextprotocol/clientCapabilities": CAPS, **extra}


def test_a_schema_is_valid_by_its_dialect_and_checked_by_its_rules() -> None:
    """ "Schemas MUST be valid according to their declared or default dialect"; "Clients and servers MUST validate
    schemas according to their declared or default dialect": the same tuple schema is draft 7's and is refused as
    2020-12 (whose `items` is one schema), and draft 7's tuple rules are the ones applied."""
    tuple_items = {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]}
    with pytest.raises(ValueError, match="invalid input schema"):
        RawSchemaValidator(tuple_items)  # no $schema: 2020-12
    with pytest.raises(ValueError, match="invalid input schema"):
        RawSchemaValidator({"type": "string", "minLength": -1})
    draft7 = RawSchemaValidator({"$schema": DIALECTS["draft 7"], **tuple_items})
    assert draft7.errors([1, "a"]) is None
    assert draft7.errors(["a", 1]) is not None


def test_the_dialects_documented_are_the_ones_supported() -> None:
    """ "Clients and servers SHOULD document which schema dialects they support": docs/tools.md names them, and
    each one named is accepted."""
    said = " ".join((ROOT / "docs" / "tools.md").read_text(encoding="utf-8").split())
    assert "The dialects supported are 2020-12, 2019-09, draft 7, draft 6 and draft 4;" in said
    for uri in DIALECTS.values():
        RawSchemaValidator({"$schema": uri, "type": "object"})


def echo_server() -> Server:
    server = Server("echo", "1")

    @server.tool()
    def echo(word: str) -> str:
        return word

    @server.tool()
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("Sure?", {"type": "object", "properties": {}})
        return answer.action

    @server.tool()
    async def wait(ctx: Context) -> str:
        await anyio.sleep_forever()
        return "never"  # pragma: no cover

    return server


RESERVED = {
    "io.modelcontextprotocol/not-yet-defined": {"any": ["shape", 1, None]},
    "dev.mcp/flag": None,
    "com.mcp.tools/x": 12,
}


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", V5])
async def test_values_at_reserved_meta_keys_are_not_assumed(version: str) -> None:
    """ "Certain key names are reserved by MCP for protocol-level metadata ...; implementations MUST NOT make
    assumptions about values at these keys": a request whose _meta carries reserved keys this implementation does
    not know, with values of any shape, is served as it would be without them."""
    params: dict[str, Any] = {"name": "echo", "arguments": {"word": "hi"}}
    async with raw_server(echo_server(), version=None if version == V5 else version) as peer:
        body = {**params, "_meta": meta(**RESERVED) if version == V5 else dict(RESERVED)}
        reply = await peer.call(request_frame(1, "tools/call", body))
    assert reply["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert reply["result"].get("isError") is not True


async def test_related_requests_need_neither_the_same_connection_nor_one_at_a_time() -> None:
    """ "Servers SHOULD NOT require that a client reuse the same connection or process to perform related
    operations"; "State that needs to span multiple requests ... MUST be referenced by an explicit identifier the
    client passes on each request"; "Servers SHOULD be prepared to handle requests associated with multiple tasks,
    threads, or conversations": two conversations' rounds interleaved, each retried on another connection with the
    state it was given, each ends with its own answer."""
    server = echo_server()
    call = {"name": "confirm", "arguments": {}}
    async with raw_server(server) as first:
        one = (await first.call(request_frame(1, "tools/call", {**call, "_meta": meta()})))["result"]
        two = (await first.call(request_frame(2, "tools/call", {**call, "_meta": meta()})))["result"]
    answers = {"accept": {"action": "accept", "content": {}}, "decline": {"action": "decline"}}
    async with raw_server(server) as second:  # a new connection: nothing of the first is needed
        done: dict[str, Any] = {}
        for ident, (state, action) in enumerate([(two, "decline"), (one, "accept")], start=3):
            (key,) = state["inputRequests"]
            retry = {**call, "_meta": meta(), "inputResponses": {key: answers[action]}}
            retry["requestState"] = state["requestState"]
            done[action] = (await second.call(request_frame(ident, "tools/call", retry)))["result"]
    assert {action: result["content"][0]["text"] for action, result in done.items()} == {
        "accept": "accept",
        "decline": "decline",
    }


async def test_a_stateless_server_sends_no_cancellation_of_its_own() -> None:
    """2026-07-28 patterns/cancellation: "Servers MUST NOT send notifications/cancelled for any other purpose"
    (than ending a subscription stream): a request the client cancels, and a listen stream it cancels, get none
    back."""
    async with raw_server(echo_server()) as peer:
        await peer.send(request_frame(1, "tools/call", {"name": "wait", "arguments": {}, "_meta": meta()}))
        listen = {"notifications": {"toolsListChanged": True}, "_meta": meta()}
        await peer.send(request_frame(2, "subscriptions/listen", listen))
        ack = await peer.recv_json()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        for ident in (1, 2):
            note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": ident}}
            await peer.send(json.dumps(note).encode())
        after = [json.loads(frame) for frame in await peer.sync()]
        answered = await peer.call(
            request_frame(3, "tools/call", {"name": "echo", "arguments": {"word": "x"}, "_meta": meta()})
        )
    assert [m for m in after if m.get("method") == "notifications/cancelled"] == []
    assert [m for m in after if m.get("id") in (1, 2)] == []  # (cancelled: never answered)
    assert answered["result"]["content"][0]["text"] == "x"


async def test_the_trace_context_in_meta_follows_the_w3c_formats() -> None:
    """2026-07-28: the traceparent, tracestate and baggage keys of _meta: "When present, their values MUST follow
    W3C Trace Context and W3C Baggage formats respectively": what our client puts there is version-traceid-
    parentid-flags in lowercase hex, and key=value pairs with their values percent-encoded."""
    from opentelemetry import baggage, context
    from opentelemetry.sdk.trace import TracerProvider

    from jsonrpc_mcp import Client
    from jsonrpc_mcp.otel import Tracing

    provider = TracerProvider()
    received: list[dict[str, Any]] = []
    server = Server("plain", "1", tracing=False)

    @server.tool()
    def seen(ctx: Context) -> str:
        received.append(dict(ctx.meta))
        return "ok"

    async with Client.connect_server(server, tracing=Tracing(tracer_provider=provider)) as client:
        assert client.stateless
        with provider.get_tracer("test").start_as_current_span("agent"):
            token = context.attach(baggage.set_baggage("user", "Ada Lovelace; née Byron"))
            try:
                await client.call_tool("seen")
            finally:
                context.detach(token)
    (meta_seen,) = received
    assert re.fullmatch(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}", meta_seen["traceparent"])
    assert "tracestate" not in meta_seen or re.fullmatch(r"[^=,\s]+=[^,]*(,[^=,\s]+=[^,]*)*", meta_seen["tracestate"])
    assert re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+=[^\s,;\\\"]*", meta_seen["baggage"])
    assert meta_seen["baggage"].startswith("user=Ada")


async def test_trace_context_in_meta_changes_nothing_of_what_is_served() -> None:
    """2026-07-28: the trace context keys: "Implementations SHOULD NOT use them to change the behavior of the
    client or server, and SHOULD NOT rely on them for security decisions": a request carrying any traceparent,
    tracestate or baggage (malformed, or claiming a role) is answered exactly as the same request without them."""
    claims = {"traceparent": "not-a-trace", "tracestate": "vendor=x", "baggage": "role=admin,user=root"}
    replies = []
    async with raw_server(echo_server()) as peer:
        for ident, extra in enumerate([{}, claims], start=1):
            body = {"name": "echo", "arguments": {"word": "hi"}, "_meta": meta(**extra)}
            replies.append((await peer.call(request_frame(ident, "tools/call", body)))["result"])
    assert replies[0] == replies[1]


def test_a_schema_too_deep_or_too_large_is_refused_before_it_is_compiled() -> None:
    """2026-07-28: "Implementations SHOULD apply reasonable bounds, such as a maximum schema depth, a cap on the
    total number of subschemas, or a per-validation time budget, to prevent a malicious schema from acting as a
    Denial-of-Service vector against the validator": 64 levels, 10,000 objects and arrays (decision 17f)."""
    from jsonrpc_mcp.mcp.output_schemas import MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES

    deep: dict[str, Any] = {"type": "object"}
    for _ in range(MAX_SCHEMA_DEPTH):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(ValueError, match="nested deeper than 64 levels"):
        RawSchemaValidator(deep)
    wide = {"type": "object", "anyOf": [{"type": "object"} for _ in range(MAX_SCHEMA_NODES)]}
    with pytest.raises(ValueError, match="more than 10000 objects and arrays"):
        RawSchemaValidator(wide)
    within = {"type": "object", "anyOf": [{"type": "object"} for _ in range(100)]}
    RawSchemaValidator(within)
