"""Sentences of the client-features pages (sampling, elicitation, roots) and of their schema fields, each pinned by
a test whose assertion is about it (the ids are in conformance/spec/coverage/client-features.toml and schema.toml):
the answers the library client gives a server's requests, and what the server does with what comes back."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import msgspec
import pytest
from helpers import RawPeer, raw_server, request_frame

from jsonrpc_mcp import Client, Context, InternalError, InvalidParams, Server
from jsonrpc_mcp import types as t
from jsonrpc_mcp.errors import MissingClientCapability, RpcError, UrlElicitationRequired
from jsonrpc_mcp.transports.memory import memory_pair

pytestmark = pytest.mark.anyio

HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
EVERY = (*HANDSHAKE, "2026-07-28")
LOOKUP = {"name": "lookup", "inputSchema": {"type": "object"}}
MISMATCH = 'age: "old" is not of type "integer"'
AGE = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}


def relay() -> Server:
    """A server whose tool ``ask`` sends the client the request it is given as it is (past the server's own checks),
    and returns what came back: the result, or the error's code and message."""
    server = Server("relay", "1")

    @server.tool()
    async def ask(ctx: Context, method: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            raw = await ctx.session.send_request(method, params, timeout=5)
        except RpcError as exc:
            return {"code": exc.code, "message": exc.message}
        return {"result": json.loads(bytes(raw))}

    return server


async def relayed(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    out = await client.call_tool("ask", {"method": method, "params": params})
    assert isinstance(out.structured_content, dict), out
    return out.structured_content


async def sample(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
    return t.CreateMessageResult(role="assistant", content=t.TextContent(text="hi"), model="m")


async def old_enough(params: t.ElicitRequestParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"age": "old"})


# --- sampling -------------------------------------------------------------------------------------------------


SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 10}


@pytest.mark.parametrize("field", ["tools", "toolChoice"])
async def test_the_client_refuses_tools_in_sampling_unless_it_declared_sampling_tools(field: str) -> None:
    """2025-11-25 schema: "The client MUST return an error if this field is provided but
    ClientCapabilities.sampling.tools is not declared" (tools, and toolChoice in 2026-07-28); "Clients MUST declare
    support for tool use via the sampling.tools capability to receive tool-enabled sampling requests": the one that
    declared it gets the request through to its handler."""
    extra = {"tools": [LOOKUP]} if field == "tools" else {"toolChoice": {"mode": "auto"}}
    async with Client.connect_server(relay(), protocol_version="2025-11-25", sampling=sample) as client:
        refused = await relayed(client, "sampling/createMessage", {**SAMPLE, **extra})
    declared = {"sampling": {"tools": {}}}
    async with Client.connect_server(
        relay(), protocol_version="2025-11-25", sampling=sample, capabilities=declared
    ) as client:
        answered = await relayed(client, "sampling/createMessage", {**SAMPLE, **extra})
    assert refused == {
        "code": -32602,
        "message": "Invalid params: tools in sampling, but this client did not declare sampling.tools",
    }
    assert answered["result"]["model"] == "m"


async def test_a_2026_input_request_with_tools_is_refused_by_a_client_without_sampling_tools() -> None:
    """2026-07-28 schema: the same MUST for ``tools`` and ``toolChoice`` of an input request."""
    server = Server("inputs", "1")

    @server.tool()
    async def with_tools(ctx: Context) -> str:
        params = {**SAMPLE, "tools": [LOOKUP], "toolChoice": {"mode": "required"}}
        await ctx.request_inputs({"s": ("sampling/createMessage", params)})
        return "answered"

    async with Client.connect_server(server, sampling=sample) as client:
        assert client.stateless
        with pytest.raises(InvalidParams, match=r"did not declare sampling\.tools"):
            await client.call_tool("with_tools")
    async with Client.connect_server(server, sampling=sample, capabilities={"sampling": {"tools": {}}}) as client:
        out = await client.call_tool("with_tools")
    assert out.content[0].text == "answered"  # type: ignore[union-attr]


@pytest.mark.parametrize("version", HANDSHAKE)
async def test_the_client_returns_errors_for_the_failure_cases_of_sampling(version: str) -> None:
    """ "Clients SHOULD return errors for common failure cases": a user's rejection is the handler's error (-1, as
    the page's example), a malformed request -32602; "Both parties SHOULD validate message content" and (2026-07-28)
    "Sampling messages MUST contain a role field of user or assistant": a message of another role is refused."""

    async def rejecting(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        raise RpcError("User rejected sampling request", code=-1)

    async with Client.connect_server(relay(), protocol_version=version, sampling=rejecting) as client:
        rejected = await relayed(client, "sampling/createMessage", SAMPLE)
    bad = {"messages": [{"role": "system", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 10}
    async with Client.connect_server(relay(), protocol_version=version, sampling=sample) as client:
        malformed = await relayed(client, "sampling/createMessage", bad)
        no_content = await relayed(client, "sampling/createMessage", {"messages": [{"role": "user"}], "maxTokens": 1})
    assert rejected == {"code": -1, "message": "User rejected sampling request"}
    assert malformed["code"] == -32602 and "role" in malformed["message"]
    assert no_content["code"] == -32602 and "content" in no_content["message"]


async def test_a_2026_client_refuses_a_sampling_input_request_with_malformed_messages() -> None:
    """2026-07-28: "Sampling messages MUST contain a role field of user or assistant; and a content field" and
    "Both parties SHOULD validate message content": an input request with another role, or no content, is -32602
    at the client, its handler never called."""
    server = Server("inputs", "1")
    called: list[Any] = []

    @server.tool()
    async def ask(ctx: Context, message: dict[str, Any]) -> str:
        await ctx.request_inputs({"s": ("sampling/createMessage", {"messages": [message], "maxTokens": 5})})
        return "answered"

    async def handler(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        called.append(params)
        return await sample(params)

    async with Client.connect_server(server, sampling=handler) as client:
        with pytest.raises(InvalidParams, match="role"):
            await client.call_tool("ask", {"message": {"role": "system", "content": {"type": "text", "text": "x"}}})
        with pytest.raises(InvalidParams, match="content"):
            await client.call_tool("ask", {"message": {"role": "user"}})
        out = await client.call_tool("ask", {"message": {"role": "user", "content": {"type": "text", "text": "x"}}})
    assert out.content[0].text == "answered"  # type: ignore[union-attr]
    assert len(called) == 1


async def test_the_server_reads_a_sampling_answer_strictly() -> None:
    """ "Both parties SHOULD validate message content": a client's answer whose message has no valid role is an
    error in the handler, never a result it works on."""
    server = Server("strict", "1")

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            await ctx.sample("Hi")
        except Exception as exc:
            return type(exc).__name__
        return "taken"

    async with raw_server(server, version="2025-06-18", capabilities={"sampling": {}}) as peer:
        await peer.send(request_frame(1, "tools/call", {"name": "ask"}))
        asked = await peer.recv_json()
        answer = {"role": "system", "content": {"type": "text", "text": "x"}, "model": "m"}
        await peer.send(json.dumps({"jsonrpc": "2.0", "id": asked["id"], "result": answer}).encode())
        done = await peer.recv_json()
    assert done["result"]["content"][0]["text"] == "ValidationError"


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_a_context_other_than_none_only_to_a_client_that_declared_sampling_context(version: str) -> None:
    """2025-11-25 schema: includeContext "thisServer"/"allServers": "Servers SHOULD only use these values if the
    client declares ClientCapabilities.sampling.context" (2026-07-28: "If not declared, servers SHOULD only use
    includeContext none"); before 2025-11-25 no such capability exists and the value goes out."""
    server = Server("context", "1")

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            await ctx.sample("Hi", includeContext="thisServer", key="s")
        except MissingClientCapability as exc:
            return f"refused {exc.data}"
        return "sent"

    async with Client.connect_server(server, protocol_version=version, sampling=sample) as client:
        refused = await client.call_tool("ask")
    context = {"sampling": {"context": {}}}
    async with Client.connect_server(server, protocol_version=version, sampling=sample, capabilities=context) as c:
        sent = await c.call_tool("ask")
    async with Client.connect_server(server, protocol_version="2025-06-18", sampling=sample) as client:
        earlier = await client.call_tool("ask")
    assert refused.content[0].text == "refused {'requiredCapabilities': {'sampling': {'context': {}}}}"  # type: ignore[union-attr]
    assert sent.content[0].text == "sent"  # type: ignore[union-attr]
    assert earlier.content[0].text == "sent"  # type: ignore[union-attr]


# --- elicitation ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_the_client_checks_an_accepted_form_against_the_requested_schema(version: str) -> None:
    """ "Clients SHOULD validate all responses against the provided schema" ("Both parties SHOULD validate
    elicitation content against the provided schema", 2025-06-18): content that does not match is not sent, an
    error naming the problem is; content that matches is."""

    async def of_age(params: t.ElicitRequestParams) -> t.ElicitResult:
        return t.ElicitResult(action="accept", content={"age": 42})

    params = {"message": "Your age?", "requestedSchema": AGE}
    async with Client.connect_server(relay(), protocol_version=version, elicitation=old_enough) as client:
        refused = await relayed(client, "elicitation/create", params)
    async with Client.connect_server(relay(), protocol_version=version, elicitation=of_age) as client:
        taken = await relayed(client, "elicitation/create", params)
    assert refused == {
        "code": -32603,
        "message": "Internal error: the answer does not match the requested schema: " + MISMATCH,
    }
    assert taken == {"result": {"action": "accept", "content": {"age": 42}}}


async def test_a_2026_client_checks_an_accepted_form_against_the_requested_schema() -> None:
    """2026-07-28: "Clients SHOULD validate all responses against the provided schema", for an input request."""
    server = Server("form", "1")

    @server.tool()
    async def ask(ctx: Context) -> str:
        return (await ctx.elicit("Your age?", AGE, key="age")).action

    async with Client.connect_server(server, elicitation=old_enough) as client:
        assert client.stateless
        with pytest.raises(InternalError, match="does not match the requested schema"):
            await client.call_tool("ask")


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_the_server_checks_an_accepted_form_against_the_requested_schema(version: str) -> None:
    """ "Servers SHOULD validate received data matches the requested schema" (2025-06-18: both parties): an answer
    that does not match is -32602 naming the problem, never content the handler works on."""
    server = Server("form", "1")

    @server.tool()
    async def ask(ctx: Context) -> str:
        return str((await ctx.elicit("Your age?", AGE)).content)

    async with raw_server(server, version=version, capabilities={"elicitation": {}}) as peer:
        await peer.send(request_frame(1, "tools/call", {"name": "ask"}))
        asked = await peer.recv_json()
        answer = {"action": "accept", "content": {"age": "old"}}
        await peer.send(json.dumps({"jsonrpc": "2.0", "id": asked["id"], "result": answer}).encode())
        bad = await peer.recv_json()
        await peer.send(request_frame(2, "tools/call", {"name": "ask"}))
        asked = await peer.recv_json()
        answer = {"action": "accept", "content": {"age": 7}}
        await peer.send(json.dumps({"jsonrpc": "2.0", "id": asked["id"], "result": answer}).encode())
        good = await peer.recv_json()
    assert bad["error"]["code"] == -32602
    assert bad["error"]["message"] == (
        "Invalid params: the elicitation answer does not match the requested schema: " + MISMATCH
    )
    assert good["result"]["content"][0]["text"] == "{'age': 7}"


async def test_a_2026_server_checks_an_accepted_form_and_takes_decline_and_cancel_as_answers() -> None:
    """2026-07-28: "Servers SHOULD validate received data matches the requested schema"; "Servers SHOULD NOT assume
    that elicitation requests will always succeed, and MUST handle cases where the user declines or cancels the
    elicitation, or where the client fails to process the request": each comes to the handler as what it is."""
    server = Server("form", "1")

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            result = await ctx.elicit("Your age?", AGE, key="age")
        except RpcError as exc:
            return f"failed {exc.code}"
        return result.action

    def call(ident: int, answer: dict[str, Any] | None) -> bytes:
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        }
        params: dict[str, Any] = {"name": "ask", "arguments": {}, "_meta": meta}
        if answer is not None:
            params["inputResponses"] = {"age": answer}
        return request_frame(ident, "tools/call", params)

    async with raw_server(server) as peer:
        asked = (await peer.call(call(1, None)))["result"]
        declined = (await peer.call(call(2, {"action": "decline"})))["result"]
        cancelled = (await peer.call(call(3, {"action": "cancel"})))["result"]
        wrong = await peer.call(call(4, {"action": "accept", "content": {"age": "old"}}))
        broken = await peer.call(call(5, {"nothing": "here"}))
    assert asked["resultType"] == "input_required"
    assert declined["content"][0]["text"] == "decline"
    assert cancelled["content"][0]["text"] == "cancel"
    assert wrong["result"]["content"][0]["text"] == "failed -32602"
    assert broken["result"]["content"][0]["text"] == "failed -32602"


async def test_a_2026_input_request_without_mode_is_form_mode_for_the_client() -> None:
    """2026-07-28: "Clients MUST treat requests without a mode field as form mode": a client that declared form
    mode only answers an input request that names no mode."""
    server = Server("modeless", "1")

    @server.tool()
    async def ask(ctx: Context) -> str:
        params = {"message": "Your age?", "requestedSchema": AGE}
        answers = await ctx.request_inputs({"age": ("elicitation/create", params)})
        return str(answers["age"].action)

    async def of_age(params: t.ElicitRequestParams) -> t.ElicitResult:
        return t.ElicitResult(action="accept", content={"age": 42})

    async with Client.connect_server(server, elicitation=of_age, elicitation_modes=("form",)) as client:
        assert client.stateless
        out = await client.call_tool("ask")
    assert out.content[0].text == "accept"  # type: ignore[union-attr]


def url_server() -> Server:
    server = Server("url", "1")

    @server.tool()
    async def login(ctx: Context) -> str:
        result = await ctx.elicit_url("Log in", "https://example.com/login", elicitation_id="e-1")
        refused = []
        try:
            await ctx.complete_elicitation("e-2")
        except ValueError:
            refused.append("e-2")
        complete = "notifications/elicitation/complete"
        await ctx.send_notification(complete, {"elicitationId": "e-2"})  # (past the check: the client ignores it)
        await ctx.complete_elicitation("e-1")
        try:
            await ctx.complete_elicitation("e-1")
        except ValueError:
            refused.append("e-1 again")
        await ctx.send_notification(complete, {"elicitationId": "e-1"})  # (a repeat past the check, ignored too)
        return f"{result.action} {refused}"

    @server.tool()
    def needs_login() -> str:
        raise UrlElicitationRequired(
            [{"mode": "url", "elicitationId": "e-9", "message": "Log in", "url": "https://example.com/login"}],
            "This request requires more information.",
        )

    return server


async def accept(params: t.ElicitRequestParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept")


async def test_a_completion_reaches_only_its_client_once_and_unknown_ids_are_ignored() -> None:
    """2025-11-25: "Servers MUST bind elicitation requests to the client and user identity" and the completion
    notification "MUST only be sent to the client that initiated the elicitation request" (the request's own
    session) and "MUST include the elicitationId established in the original elicitation/create request"
    (``complete_elicitation`` refuses any other, and a second time); the client "MUST ignore notifications
    referencing unknown or already-completed IDs": of a completion for an unknown id, and one repeated, the
    application hears nothing."""
    heard: dict[str, list[Any]] = {"one": [], "other": []}
    done = anyio.Event()

    def listener(name: str) -> Any:
        def on_note(method: str, params: dict[str, Any]) -> None:
            if method == "notifications/elicitation/complete":
                heard[name].append(params["elicitationId"])

        return on_note

    async def accepting(params: t.ElicitRequestParams) -> t.ElicitResult:
        done.set()
        return t.ElicitResult(action="accept")

    server = url_server()
    async with (
        Client.connect_server(
            server, protocol_version="2025-11-25", elicitation=accepting, on_notification=listener("one")
        ) as one,
        Client.connect_server(
            server, protocol_version="2025-11-25", elicitation=accept, on_notification=listener("other")
        ) as other,
    ):
        out = await one.call_tool("login")
        await one.ping()
        await other.ping()
    assert out.content[0].text == "accept ['e-2', 'e-1 again']"  # type: ignore[union-attr]
    assert done.is_set()
    assert heard == {"one": ["e-1"], "other": []}


async def test_url_elicitation_required_lists_url_mode_elicitations_only() -> None:
    """2025-11-25: "Servers MUST return standard JSON-RPC errors for common failure cases: ... -32042"; "The error
    MUST include a list of elicitations that are required"; "Any elicitations returned in the error MUST be URL mode
    elicitations and have an elicitationId property"; "The server MUST NOT return this error except when URL mode
    elicitation is required": the error cannot be built without one such elicitation."""
    async with Client.connect_server(url_server(), protocol_version="2025-11-25", elicitation=accept) as client:
        with pytest.raises(UrlElicitationRequired) as caught:
            await client.call_tool("needs_login")
    assert caught.value.code == -32042
    assert caught.value.elicitations == [
        {"mode": "url", "elicitationId": "e-9", "message": "Log in", "url": "https://example.com/login"}
    ]
    form = {"mode": "form", "message": "Age?", "requestedSchema": AGE}
    for wrong in ([], [form], [{"mode": "url", "message": "Log in", "url": "https://example.com/login"}]):
        with pytest.raises(ValueError, match="URL"):
            UrlElicitationRequired(wrong)


# --- roots ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", HANDSHAKE)
async def test_a_client_without_roots_answers_roots_list_with_method_not_found(version: str) -> None:
    """ "Clients SHOULD return standard JSON-RPC errors for common failure cases: Client does not support roots:
    -32601 (Method not found)"; one with roots answers its file:// roots."""
    async with Client.connect_server(relay(), protocol_version=version) as client:
        refused = await relayed(client, "roots/list", {})
    async with Client.connect_server(relay(), protocol_version=version, roots=[t.Root(uri="file:///w")]) as client:
        listed = await relayed(client, "roots/list", {})
    assert refused == {"code": -32601, "message": "Method not found: roots/list"}
    assert listed == {"result": {"roots": [{"uri": "file:///w"}]}}


@pytest.mark.parametrize("version", EVERY)
async def test_the_server_checks_for_the_roots_capability_before_asking(version: str) -> None:
    """ "Servers SHOULD: Check for roots capability before usage": a client that did not declare roots is never
    sent roots/list (the handler gets the error at once: a client asked would have answered -32601)."""
    server = Server("roots", "1")

    @server.tool()
    async def roots(ctx: Context) -> str:
        try:
            listed = await ctx.list_roots()
        except MissingClientCapability as exc:
            return exc.message
        return ",".join(root.uri for root in listed.roots)

    async with Client.connect_server(server, protocol_version=version) as client:
        refused = await client.call_tool("roots")
    async with Client.connect_server(server, protocol_version=version, roots=[t.Root(uri="file:///w")]) as client:
        listed = await client.call_tool("roots")
    assert refused.content[0].text == "Missing required client capability: roots"  # type: ignore[union-attr]
    assert listed.content[0].text == "file:///w"  # type: ignore[union-attr]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_the_client_bounds_the_server_requests_it_works_on_at_once(version: str) -> None:
    """ "Clients SHOULD implement rate limiting" (sampling, elicitation): at most 128 server requests reach the
    handlers at once; the next waits, unread, until one is answered (the server's flood fills its own pipe)."""
    ours, theirs = memory_pair()
    peer = RawPeer(theirs)
    release = anyio.Event()
    full = anyio.Event()
    early: list[bool] = []

    async def slow(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        early.append(not release.is_set())
        if len(early) == 128:
            full.set()
        await release.wait()
        return await sample(params)

    async def serve() -> None:
        init = await peer.recv_json()
        result = {"protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "raw", "version": "1"}}
        await peer.send(json.dumps({"jsonrpc": "2.0", "id": init["id"], "result": result}).encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        async with Client.connect(ours, protocol_version=version, sampling=slow):
            for ident in range(130):
                await peer.send(request_frame(ident, "sampling/createMessage", SAMPLE))
            with anyio.fail_after(5):
                await full.wait()
            release.set()
            answers = set()
            while len(answers) < 130:
                message = await peer.recv_json()
                if "result" in message:
                    answers.add(message["id"])
        tg.cancel_scope.cancel()
    await ours.aclose()
    await theirs.aclose()
    assert early == [True] * 128 + [False] * 2
    assert answers == set(range(130))


# --- sampling conversations with tools ------------------------------------------------------------------------


def use(ident: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": ident, "name": "lookup", "input": {}}


def result(ident: str) -> dict[str, Any]:
    return {"type": "tool_result", "toolUseId": ident, "content": [{"type": "text", "text": "42"}]}


TEXT = {"type": "text", "text": "Hi"}
GOOD = [
    {"role": "user", "content": TEXT},
    {"role": "assistant", "content": [use("a"), use("b")]},
    {"role": "user", "content": [result("b"), result("a")]},
]
BROKEN = {
    "missing": [GOOD[0], GOOD[1], {"role": "user", "content": [result("a")]}],
    "mixed": [GOOD[0], GOOD[1], {"role": "user", "content": [result("a"), result("b"), TEXT]}],
    "unasked": [GOOD[0], {"role": "user", "content": [result("z")]}],
    "last": [GOOD[0], GOOD[1]],
}


@pytest.mark.parametrize("case", sorted(BROKEN))
async def test_the_client_refuses_tool_results_that_break_the_conversation_rules(case: str) -> None:
    """2025-11-25: "every assistant message containing ToolUseContent blocks MUST be followed by a user message that
    consists entirely of ToolResultContent blocks, with each tool use matched"; "When a user message contains tool
    results, it MUST contain ONLY tool results"; ToolResultContent.toolUseId: "This MUST match the ID from a
    previous ToolUseContent"; the error table: "Tool result missing in request: -32602; Tool results mixed with other
    content: -32602"; the handler never sees such a request."""
    called: list[Any] = []

    async def handler(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        called.append(params)
        return await sample(params)

    declared = {"sampling": {"tools": {}}}
    async with Client.connect_server(
        relay(), protocol_version="2025-11-25", sampling=handler, capabilities=declared
    ) as client:
        refused = await relayed(client, "sampling/createMessage", {"messages": BROKEN[case], "maxTokens": 5})
        taken = await relayed(client, "sampling/createMessage", {"messages": GOOD, "maxTokens": 5})
    assert refused["code"] == -32602, refused
    assert len(called) == 1 and taken["result"]["model"] == "m"


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_the_server_sends_no_conversation_that_breaks_the_tool_rules(version: str) -> None:
    """2025-11-25: "Servers MUST ensure that when replying to a stopReason toolUse, each ToolUseContent item is
    responded to with a ToolResultContent item with a matching toolUseId, and that the user message contains only
    tool results": ``ctx.sample`` refuses such messages before anything is sent."""
    server = Server("conversation", "1")

    @server.tool()
    async def ask(ctx: Context, case: str) -> str:
        messages = [msgspec.convert(m, t.SamplingMessage) for m in (GOOD if case == "good" else BROKEN[case])]
        try:
            await ctx.sample(messages, tools=[LOOKUP], key="s")
        except ValueError as exc:
            return str(exc)
        return "sent"

    declared = {"sampling": {"tools": {}}}
    async with Client.connect_server(
        server, protocol_version=version, sampling=sample, capabilities=declared
    ) as client:
        outcomes = {case: (await client.call_tool("ask", {"case": case})).content[0].text for case in BROKEN}
        good = await client.call_tool("ask", {"case": "good"})
    assert outcomes == {
        "last": "sample: the last message asks for tools: a user message of their results must follow it",
        "missing": "sample: message 2: no tool result for b",
        "mixed": "sample: message 2: the tool uses before it need a user message of their results only",
        "unasked": "sample: message 1: the tool result for 'z' answers no tool use",
    }
    assert good.content[0].text == "sent"  # type: ignore[union-attr]


@pytest.mark.parametrize("version", EVERY)
async def test_model_preferences_reach_the_sampling_handler_as_the_server_sent_them(version: str) -> None:
    """ "Clients SHOULD respect model preference hints": the library client hands the handler the hints in their
    order and the priorities as sent (choosing the model is the host's)."""
    seen: list[Any] = []

    async def handler(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        seen.append(msgspec.to_builtins(params.model_preferences))
        return await sample(params)

    server = Server("preferences", "1")
    preferences = {
        "hints": [{"name": "claude-3-5-sonnet"}, {"name": "sonnet"}, {"name": "claude"}],
        "costPriority": 0.3,
        "speedPriority": 0.8,
        "intelligencePriority": 0.5,
    }

    @server.tool()
    async def ask(ctx: Context) -> str:
        return (await ctx.sample("Hi", modelPreferences=preferences, key="s")).model

    async with Client.connect_server(server, protocol_version=version, sampling=handler) as client:
        out = await client.call_tool("ask")
    assert out.content[0].text == "m"  # type: ignore[union-attr]
    assert seen == [preferences]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "2026-07-28"])
async def test_a_user_declines_or_cancels_an_elicitation_and_the_server_hears_which(version: str) -> None:
    """ "Clients SHOULD allow users to decline elicitation requests at any time": the handler's decline or cancel
    goes back as that action (no content), and the server's handler gets it as an answer."""
    server = Server("decline", "1")

    @server.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Your age?", AGE, key="age")
        return f"{answer.action} {answer.content is msgspec.UNSET}"

    outcomes = []
    for action in ("decline", "cancel"):

        async def handler(params: t.ElicitRequestParams, action: Any = action) -> t.ElicitResult:
            return t.ElicitResult(action=action)

        async with Client.connect_server(server, protocol_version=version, elicitation=handler) as client:
            outcomes.append((await client.call_tool("ask")).content[0].text)  # type: ignore[union-attr]
    assert outcomes == ["decline True", "cancel True"]


async def test_a_url_elicitation_goes_to_an_https_url() -> None:
    """2025-11-25 URL mode: servers "SHOULD use HTTPS URLs for non-development environments": ``elicit_url``
    refuses a plain http:// URL to another host (this host's, for development, goes out)."""
    server = Server("https", "1")

    @server.tool()
    async def ask(ctx: Context, url: str) -> str:
        try:
            return (await ctx.elicit_url("Log in", url)).action
        except ValueError as exc:
            return str(exc)

    async with Client.connect_server(server, protocol_version="2025-11-25", elicitation=accept) as client:
        plain = await client.call_tool("ask", {"url": "http://example.com/login"})
        local = await client.call_tool("ask", {"url": "http://127.0.0.1:8000/login"})
        secure = await client.call_tool("ask", {"url": "https://example.com/login"})
    assert plain.content[0].text == (  # type: ignore[union-attr]
        "elicit_url sends the user to an https:// URL (http:// only to this host), not 'http://example.com/login'"
    )
    assert local.content[0].text == secure.content[0].text == "accept"  # type: ignore[union-attr]


@pytest.mark.parametrize("uri", ["file:///w/../etc", "file:///w/%2E%2E/etc", "file:///./w", "file://../w"])
async def test_a_root_with_a_dot_segment_is_refused(uri: str) -> None:
    """Roots: "Clients MUST: ... Validate all root URIs to prevent path traversal": a root whose path has a . or ..
    segment (percent-encoded too) is refused, given as a list or by a provider."""
    ours, theirs = memory_pair()
    try:
        with pytest.raises(ValueError, match=r"without \. or \.\. segments"):
            Client(ours, roots=[t.Root(uri=uri)])
    finally:
        await ours.aclose()
        await theirs.aclose()

    async def provider() -> list[t.Root]:
        return [t.Root(uri="file:///ok"), t.Root(uri=uri)]

    async with Client.connect_server(relay(), protocol_version="2025-06-18", roots=provider) as client:
        refused = await relayed(client, "roots/list", {})
    async with Client.connect_server(relay(), protocol_version="2025-06-18", roots=[t.Root(uri="file:///w/a.b")]) as c:
        kept = await relayed(c, "roots/list", {})
    assert refused["code"] == -32603
    assert kept == {"result": {"roots": [{"uri": "file:///w/a.b"}]}}


def test_a_requested_schema_that_cannot_be_compiled_is_logged_on_one_line_and_not_checked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An elicitation's ``requestedSchema`` that is not a schema cannot be checked against: the answer goes
    unchecked, and a warning of one line says so."""
    from jsonrpc_mcp.mcp.output_schemas import schema_problems

    caplog.set_level(logging.WARNING, "jsonrpc_mcp")
    assert schema_problems({"type": 12}, {"a": 1}) is None
    (record,) = [r for r in caplog.records if "cannot be compiled" in r.getMessage()]
    assert "\n" not in record.getMessage() and "not checked" in record.getMessage()
