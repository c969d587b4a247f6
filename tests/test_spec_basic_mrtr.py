"""2026-07-28 basic/patterns/mrtr: the multi round-trip request, sentence by sentence (the ids are in
conformance/spec/coverage/basic.toml). The server's side over a raw peer; the client's side against a scripted
server that records what the client sends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from helpers import RawPeer, raw_server, request_frame

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp import types as t
from jsonrpc_mcp.transports.memory import memory_pair

pytestmark = pytest.mark.anyio

V5 = "2026-07-28"
CAPS = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
INPUT_KINDS = {"elicitation/create", "sampling/createMessage", "roots/list"}


def call(ident: Any, name: str, **params: Any) -> bytes:
    meta = {"io.modelcontextprotocol/protocolVersion": V5, "io.modelcontextprotocol/clientCapabilities": CAPS}
    return request_frame(ident, "tools/call", {"name": name, "arguments": {}, "_meta": meta, **params})


ANSWERS = {
    "elicitation/create": {"action": "accept", "content": {"ok": True}},
    "sampling/createMessage": {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},
    "roots/list": {"roots": [{"uri": "file:///work"}]},
}


def asking_server(ended: list[str] | None = None) -> Server:
    server = Server("asking", "1")

    @server.tool()
    async def survey(ctx: Context) -> str:
        try:
            await ctx.elicit("first?", {"type": "object", "properties": {}})
            await ctx.elicit("second?", {"type": "object", "properties": {}})
            await ctx.sample("third?")
            await ctx.list_roots()
            return "done"
        finally:
            if ended is not None:
                ended.append("survey")

    @server.tool()
    async def ask_all(ctx: Context) -> str:
        answers = await ctx.request_inputs(
            {
                "e": ("elicitation/create", {"message": "?", "requestedSchema": {"type": "object"}}),
                "s": ("sampling/createMessage", {"messages": [], "maxTokens": 5}),
                "r": ("roots/list", None),
            }
        )
        return ",".join(sorted(answers))

    @server.tool()
    async def ask_a_ping(ctx: Context) -> str:
        await ctx.request_inputs({"p": ("ping", None)})
        return "never"

    return server


async def test_each_round_asks_under_keys_of_its_own_with_a_state_and_only_the_three_kinds() -> None:
    """ "inputRequests keys are server assigned identifiers and MUST be unique within the scope of the request";
    "Servers MUST include at least one of inputRequests or requestState in every InputRequiredResult"; "inputRequests
    values are request objects that MUST be one of ElicitRequest, CreateMessageRequest, or ListRootsRequest"."""
    keys: list[str] = []
    async with raw_server(asking_server()) as peer:
        answers: dict[str, Any] = {}
        state: str | None = None
        for ident in range(1, 10):
            extra: dict[str, Any] = {} if state is None else {"inputResponses": answers, "requestState": state}
            result = (await peer.call(call(ident, "survey", **extra)))["result"]
            if result["resultType"] == "complete":
                break
            assert isinstance(result["requestState"], str) and result["requestState"]
            asked = result["inputRequests"]
            assert {request["method"] for request in asked.values()} <= INPUT_KINDS
            keys.extend(asked)
            answers = {key: ANSWERS[request["method"]] for key, request in asked.items()}
            state = result["requestState"]
    assert result["content"][0]["text"] == "done"
    assert len(keys) == 4 and len(set(keys)) == 4


async def test_a_stateless_server_asks_in_its_result_and_sends_no_request_of_its_own() -> None:
    """ "Servers MUST NOT initiate JSON-RPC requests" (2026-07-28 patterns); "Servers MUST send server-to-client
    requests (such as roots/list, sampling/createMessage, or elicitation/create) using the MRTR pattern": all a
    request that needs every kind of input produces is its own answer, an InputRequiredResult naming them."""
    async with raw_server(asking_server()) as peer:
        await peer.send(call(1, "ask_all"))
        answer, before = await peer.recv_until(lambda m: m.get("id") == 1)
        after = [json.loads(f) for f in await peer.sync()]
    assert before == [] and after == []  # nothing but the answer: no request, no notification
    assert "method" not in answer
    asked = answer["result"]["inputRequests"]
    assert {key: request["method"] for key, request in asked.items()} == {
        "e": "elicitation/create",
        "s": "sampling/createMessage",
        "r": "roots/list",
    }


async def test_a_handler_cannot_ask_the_client_for_anything_but_the_three_kinds() -> None:
    """The same sentence from the handler's side: asking for another method fails the handler (a tool's failure,
    ``isError``), and no InputRequiredResult names it."""
    async with raw_server(asking_server()) as peer:
        result = (await peer.call(call(1, "ask_a_ping")))["result"]
    assert result["resultType"] == "complete" and result["isError"] is True
    assert "inputRequests" not in result


async def test_the_server_holds_nothing_waiting_for_the_client_to_answer() -> None:
    """ "Servers MUST NOT assume that clients will fulfill the inputRequests or retry the original request": the
    handler has ended by the time its InputRequiredResult is out; a client that never retries leaves nothing
    behind waiting for it."""
    ended: list[str] = []
    async with raw_server(asking_server(ended), max_in_flight=1) as peer:
        for ident in range(1, 4):  # three requests left unanswered, one at a time allowed in flight
            result = (await peer.call(call(ident, "survey")))["result"]
            assert result["resultType"] == "input_required"
            assert ended == ["survey"] * ident


# --- the client's side -------------------------------------------------------------------------------------


Script = Callable[[dict[str, Any]], dict[str, Any]]


@asynccontextmanager
async def scripted(script: Script, **options: Any) -> AsyncIterator[tuple[Client, list[dict[str, Any]]]]:
    """A client connected to a server that answers ``tools/call`` with ``script(request)`` and records every
    ``tools/call`` request it receives."""
    ours, theirs = memory_pair()
    peer = RawPeer(theirs)
    calls: list[dict[str, Any]] = []
    discover = {"supportedVersions": [V5], "capabilities": {"tools": {}}}

    async def serve() -> None:
        while True:
            request = await peer.recv_json(timeout=30)
            if "id" not in request:
                continue
            if request["method"] == "tools/call":
                calls.append(request)
                result = script(request)
            elif request["method"] == "tools/list":
                result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("greet", "slow", "other")]}
            else:
                result = discover
            await peer.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        try:
            async with Client.connect(ours, protocol_version=V5, **options) as client:
                yield client, calls
        finally:
            tg.cancel_scope.cancel()
            await ours.aclose()
            await theirs.aclose()


def done(text: str) -> dict[str, Any]:
    return {"resultType": "complete", "content": [{"type": "text", "text": text}]}


ELICIT = {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {"type": "object"}}}
#: Not base64, not JSON, not ASCII: a client that parses, normalises or re-encodes it would send something else.
OPAQUE = ' {"looks": "like json"} but is not…  ☃ \\u0000 ='


async def test_the_retry_is_a_new_request_with_the_answers_and_the_state_exactly_as_sent() -> None:
    """ "the client MUST construct the requested inputs before retrying"; "MUST echo back the exact value of
    that field"; "MUST NOT inspect, parse, modify, or make any assumptions about the requestState contents";
    "The JSON-RPC id MUST be different between the initial request and the retry"."""
    asked: list[str] = []

    async def elicit(params: t.ElicitRequestParams) -> t.ElicitResult:
        asked.append(params.message)
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    def script(request: dict[str, Any]) -> dict[str, Any]:
        if "requestState" not in request["params"]:
            return {"resultType": "input_required", "inputRequests": {"who": ELICIT}, "requestState": OPAQUE}
        return done("thanks")

    async with scripted(script, elicitation=elicit) as (client, calls):
        out = await client.call_tool("greet", {"x": 1})
    first, retry = calls
    assert out.content[0].text == "thanks"  # type: ignore[union-attr]
    assert asked == ["name?"]
    assert retry["id"] != first["id"]
    assert retry["params"]["requestState"] == OPAQUE
    assert retry["params"]["inputResponses"] == {"who": {"action": "accept", "content": {"name": "Ada"}}}
    assert retry["params"]["name"] == "greet" and retry["params"]["arguments"] == {"x": 1}


async def test_a_retry_carries_a_state_only_when_the_server_gave_one() -> None:
    """ "If the InputRequiredResult does not contain a requestState field, the client MUST NOT include one in the
    retry" (and a result with only a state is retried with that state and no answers)."""
    rounds = iter(
        [
            {"resultType": "input_required", "inputRequests": {"who": ELICIT}},
            {"resultType": "input_required", "requestState": "s2"},
            done("ok"),
        ]
    )

    async def elicit(params: t.ElicitRequestParams) -> t.ElicitResult:
        return t.ElicitResult(action="decline")

    async with scripted(lambda request: next(rounds), elicitation=elicit) as (client, calls):
        await client.call_tool("greet")
    first, second, third = (c["params"] for c in calls)
    assert "requestState" not in first and "inputResponses" not in first
    assert "requestState" not in second and second["inputResponses"] == {"who": {"action": "decline"}}
    assert third["requestState"] == "s2" and "inputResponses" not in third


async def test_the_answers_and_state_of_one_request_go_with_its_retry_only() -> None:
    """ "They MUST NOT be used for any other request that the client may be sending in parallel": a call begun
    while another one's input is being gathered carries neither its answers nor its state."""
    asking = anyio.Event()
    go_on = anyio.Event()

    async def elicit(params: t.ElicitRequestParams) -> t.ElicitResult:
        asking.set()
        await go_on.wait()
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    def script(request: dict[str, Any]) -> dict[str, Any]:
        params = request["params"]
        if params["name"] == "slow" and "requestState" not in params:
            return {"resultType": "input_required", "inputRequests": {"who": ELICIT}, "requestState": "slow-state"}
        return done(params["name"])

    async with scripted(script, elicitation=elicit) as (client, calls), anyio.create_task_group() as tg:
        tg.start_soon(client.call_tool, "slow")
        with anyio.fail_after(10):
            await asking.wait()
        await client.call_tool("other")
        go_on.set()
    by_name = [(c["params"]["name"], c["params"].get("requestState"), c["params"].get("inputResponses")) for c in calls]
    assert ("other", None, None) in by_name
    assert ("slow", None, None) in by_name
    assert ("slow", "slow-state", {"who": {"action": "accept", "content": {"name": "Ada"}}}) in by_name
