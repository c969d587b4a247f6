"""Field-level sentences of the schema (schema/<revision>/schema.ts) not pinned elsewhere, each pinned by a test
whose assertion is about it (the ids are in conformance/spec/coverage/schema.toml): error messages, the metadata
fields of 2026-07-28 requests and results, the input-required result, the tool-use content of sampling."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from helpers import RawPeer, raw_server, request_frame

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp import types as t
from jsonrpc_mcp.errors import ProtocolViolation
from jsonrpc_mcp.transports.memory import memory_pair

TRANSCRIPTS = Path(__file__).resolve().parent.parent / "jsonrpc_mcp" / "transcripts"
META = "io.modelcontextprotocol/"


def test_every_error_message_of_the_golden_transcripts_is_one_concise_sentence() -> None:
    """Error ``message``: "The message SHOULD be limited to a concise single sentence": of every error the server
    answers in the golden transcripts, none holds a second sentence, a line break or more than 200 characters."""
    messages = set()
    for path in TRANSCRIPTS.glob("*.txt"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith(("<<< {", "<<< [")):
                frame = json.loads(line[4:])
                for reply in frame if isinstance(frame, list) else [frame]:
                    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
                        messages.add(reply["error"]["message"])
    assert len(messages) > 30
    long_or_several = [m for m in messages if len(m) > 200 or "\n" in m or re.search(r"[.!?] +[A-Z]", m)]
    assert long_or_several == []


def test_the_meta_of_tool_use_and_tool_result_content_is_kept_for_the_next_request() -> None:
    """2025-11-25 ToolUseContent and ToolResultContent ``_meta``: "Clients SHOULD preserve this field when including
    tool uses (and tool results) in subsequent sampling requests": what a model's answer carried goes out again,
    field for field, when a handler puts it in the next request's messages."""
    answer = {
        "role": "assistant",
        "model": "m",
        "stopReason": "toolUse",
        "content": [{"type": "tool_use", "id": "u1", "name": "lookup", "input": {"q": 1}, "_meta": {"cache": "k1"}}],
    }
    result = msgspec.convert(answer, t.CreateMessageResult)
    use = result.content[0]  # type: ignore[index]
    back = t.ToolResultContent(tool_use_id="u1", content=[t.TextContent(text="found")], meta={"cache": "k2"})
    follow_up = t.CreateMessageRequestParams(
        messages=[
            t.SamplingMessage(role="assistant", content=[use]),
            t.SamplingMessage(role="user", content=[back]),
        ],
        max_tokens=10,
    )
    sent = msgspec.to_builtins(follow_up)
    assert sent["messages"][0]["content"][0] == answer["content"][0]  # type: ignore[index]
    assert sent["messages"][1]["content"][0]["_meta"] == {"cache": "k2"}


def echo_server() -> Server:
    server = Server("echo", "1")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool()
    async def ask(ctx: Context) -> str:
        return (await ctx.elicit("Name?", {"type": "object", "properties": {}}, key="name")).action

    return server


def call(ident: int, name: str, capabilities: dict[str, Any], **meta: Any) -> bytes:
    fields = {f"{META}protocolVersion": "2026-07-28", f"{META}clientCapabilities": capabilities, **meta}
    arguments = {"a": 1, "b": 2} if name == "add" else {}
    return request_frame(ident, "tools/call", {"name": name, "arguments": arguments, "_meta": fields})


@pytest.mark.anyio
async def test_the_server_neither_infers_capabilities_nor_heeds_client_info_or_unknown_reserved_keys() -> None:
    """2026-07-28 request ``_meta``: "Servers MUST NOT infer capabilities from prior requests" (a request that
    declares no elicitation is never asked for one, after one that did); clientInfo: "Servers SHOULD NOT use it to
    change their behavior"; MetaObject: "implementations MUST NOT make assumptions about values at these keys" (a
    reserved key it does not know changes nothing)."""
    elicitation = {"elicitation": {"form": {}}}
    async with raw_server(echo_server()) as peer:
        asked = (await peer.call(call(1, "ask", elicitation)))["result"]
        after = (await peer.call(call(2, "ask", {})))["error"]
        plain = (await peer.call(call(3, "add", {})))["result"]
        named = await peer.call(call(4, "add", {}, **{f"{META}clientInfo": {"name": "official", "version": "9"}}))
        other = await peer.call(call(5, "add", {}, **{f"{META}clientInfo": {"name": "x", "version": "0"}}))
        unknown = (await peer.call(call(6, "add", {}, **{f"{META}somethingNew": {"any": ["value"]}})))["result"]
    assert asked["resultType"] == "input_required"
    assert after["code"] == -32021 and after["data"] == {"requiredCapabilities": {"elicitation": {}}}
    assert named["result"] == other["result"] == plain == unknown


@pytest.mark.anyio
async def test_an_input_required_result_names_what_it_needs_and_one_naming_nothing_is_refused() -> None:
    """2026-07-28 InputRequiredResult: "At least one of inputRequests or requestState MUST be present": ours always
    carries them; our client refuses a result of neither (never retrying a request with nothing to add)."""
    async with raw_server(echo_server()) as peer:
        ours = (await peer.call(call(1, "ask", {"elicitation": {}})))["result"]
    assert ours["resultType"] == "input_required" and list(ours["inputRequests"]) == ["name"]

    client_end, server_end = memory_pair()
    raw = RawPeer(server_end)
    calls: list[str] = []

    async def serve() -> None:
        while True:
            request = await raw.recv_json(timeout=30)
            if "id" not in request:
                continue
            calls.append(request["method"])
            if request["method"] == "server/discover":
                result: dict[str, Any] = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
            elif request["method"] == "tools/list":
                result = {"resultType": "complete", "tools": []}
            else:
                result = {"resultType": "input_required"}
            await raw.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        async with Client.connect(client_end) as client:
            with pytest.raises(ProtocolViolation, match="neither inputRequests nor requestState"):
                await client.call_tool("anything")
        tg.cancel_scope.cancel()
    await client_end.aclose()
    await server_end.aclose()
    assert calls.count("tools/call") == 1
