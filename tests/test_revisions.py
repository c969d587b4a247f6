"""What each revision defines, on a session of that revision: the server sends only the requests and notifications
it defines, the fields later revisions added go out as open schemas allow, and a repeated ``initialize`` is
answered as the first one was."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from fixtures.everything import make_server
from helpers import init_frame, raw_server, request_frame

from jsonrpc_mcp import Context, MissingClientCapability, Server
from jsonrpc_mcp import types as t
from jsonrpc_mcp.mcp.methods import undefined_in

pytestmark = pytest.mark.anyio

#: Every capability a client can declare, so that only the revision can keep a request from going out.
EVERY_CAPABILITY: dict[str, Any] = {"sampling": {}, "roots": {}, "elicitation": {"form": {}, "url": {}}}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}}


def asking_server() -> tuple[Server, list[str]]:
    """Tools that ask the client for each kind of input; what refused one goes to ``refused``."""
    server = Server("asking", "1")
    refused: list[str] = []

    async def attempt(ask: Any) -> str:
        try:
            await ask
        except MissingClientCapability as exc:
            refused.append(exc.message)
            return "refused"
        return "sent"

    @server.tool()
    async def elicit(ctx: Context) -> str:
        return await attempt(ctx.elicit("Your name?", SCHEMA, timeout=5))

    @server.tool()
    async def elicit_url(ctx: Context) -> str:
        return await attempt(ctx.elicit_url("Log in", "https://example.com/login", timeout=5))

    @server.tool()
    async def elicitation_complete(ctx: Context) -> str:
        return await attempt(ctx.send_notification("notifications/elicitation/complete", {"elicitationId": "e"}))

    @server.tool()
    async def elicit_uncaught(ctx: Context) -> str:
        await ctx.elicit("Your name?", SCHEMA, timeout=5)
        return "sent"

    return server, refused


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
async def test_a_session_is_never_sent_elicitation_before_the_revision_that_defines_it(version: str) -> None:
    """2024-11-05 and 2025-03-26 define no elicitation/create: a client that declared elicitation anyway (an open
    capabilities object allows it) is never sent one, and the handler learns why, the revision named."""
    server, refused = asking_server()
    async with raw_server(server, version=version, capabilities=EVERY_CAPABILITY) as peer:
        reply = await peer.call(request_frame(1, "tools/call", {"name": "elicit"}))
        assert reply["result"]["content"] == [{"type": "text", "text": "refused"}]
        assert await peer.sync() == []  # the reply was all: no elicitation/create reached the client
        uncaught = await peer.call(request_frame(2, "tools/call", {"name": "elicit_uncaught"}))
        assert await peer.sync() == []
    assert refused == [
        f"Missing required client capability: protocol revision {version} does not define elicitation/create"
        " (it needs 2025-06-18 or later)"
    ]
    assert uncaught["error"]["code"] == -32021
    assert f"protocol revision {version} does not define elicitation/create" in uncaught["error"]["message"]


async def test_url_mode_elicitation_and_its_notification_only_where_they_are_defined() -> None:
    """URL mode and notifications/elicitation/complete arrived in 2025-11-25 (2026-07-28 dropped the
    notification): a 2025-06-18 session gets form-mode elicitation only."""
    server, refused = asking_server()
    async with raw_server(server, version="2025-06-18", capabilities=EVERY_CAPABILITY) as peer:
        for ident, name in enumerate(("elicit_url", "elicitation_complete")):
            reply = await peer.call(request_frame(ident, "tools/call", {"name": name}))
            assert reply["result"]["content"] == [{"type": "text", "text": "refused"}]
            assert await peer.sync() == []
        await peer.send(request_frame(9, "tools/call", {"name": "elicit"}))
        asked = await peer.recv_json()
    assert asked["method"] == "elicitation/create"  # form mode is 2025-06-18's
    assert "mode" not in asked["params"]
    assert refused == [
        "Missing required client capability: protocol revision 2025-06-18 does not define "
        "elicitation/create (url) (it needs 2025-11-25 or later)",
        "Missing required client capability: protocol revision 2025-06-18 does not define "
        "notifications/elicitation/complete (only 2025-11-25 defines it)",
    ]


async def test_a_request_sent_past_the_context_is_held_to_the_revision_too() -> None:
    """The session refuses it itself, so nothing that bypasses the Context's helpers sends what the revision
    lacks."""
    server = Server("direct", "1")
    seen: list[str] = []

    @server.tool()
    async def direct(ctx: Context) -> str:
        try:
            await ctx.session.send_request("elicitation/create", {"message": "m", "requestedSchema": SCHEMA})
        except MissingClientCapability as exc:
            seen.append(exc.message)
        return "done"

    async with raw_server(server, version="2024-11-05", capabilities=EVERY_CAPABILITY) as peer:
        reply = await peer.call(request_frame(1, "tools/call", {"name": "direct"}))
        assert await peer.sync() == []
    assert reply["result"]["content"][0]["text"] == "done"
    assert seen and "2024-11-05 does not define elicitation/create" in seen[0]


def test_which_revisions_define_what_the_server_sends() -> None:
    """The one table of what a revision lets the server send (the schemas' ServerRequest and ServerNotification)."""
    for version in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"):
        for method in ("ping", "sampling/createMessage", "roots/list", "notifications/progress"):
            assert undefined_in(method, version) is None
    assert undefined_in("elicitation/create", "2025-03-26") == "it needs 2025-06-18 or later"
    assert undefined_in("elicitation/create", "2025-06-18") is None
    assert undefined_in("elicitation/create", "2026-07-28") is None
    assert undefined_in("elicitation/create", "2025-06-18", "url") == "it needs 2025-11-25 or later"
    assert undefined_in("elicitation/create", "2025-11-25", "url") is None
    assert undefined_in("notifications/elicitation/complete", "2025-11-25") is None
    assert undefined_in("notifications/elicitation/complete", "2026-07-28") == "only 2025-11-25 defines it"


# --- fields later revisions added -----------------------------------------------------------------------------


def later_fields_server() -> Server:
    server = Server("later", "1", title="Later fields")

    @server.tool(title="Add", annotations=t.ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool()
    async def steps(ctx: Context) -> str:
        await ctx.report_progress(1, 2, "half way")
        return "done"

    return server


async def test_fields_later_revisions_added_go_out_on_a_2024_11_05_session() -> None:
    """Every revision's schema leaves its objects open, so a 2024-11-05 session gets the fields of later ones as
    they are (docs/spec-decisions.md #22b): a tool's title, annotations and outputSchema, a result's
    structuredContent, a progress message, serverInfo's title."""
    async with raw_server(later_fields_server()) as peer:
        init = await peer.initialize("2024-11-05")
        (tool, _) = (await peer.call(request_frame(1, "tools/list")))["result"]["tools"]
        call = await peer.call(request_frame(2, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}))
        await peer.send(request_frame(3, "tools/call", {"name": "steps", "_meta": {"progressToken": "p"}}))
        progress, _ = await peer.recv_until(lambda m: m.get("method") == "notifications/progress")
    assert init["protocolVersion"] == "2024-11-05"
    assert init["serverInfo"]["title"] == "Later fields"  # 2025-06-18
    assert tool["title"] == "Add"  # 2025-06-18
    assert tool["annotations"]["readOnlyHint"] is True  # 2025-03-26
    assert tool["outputSchema"]["properties"] == {"result": {"type": "integer"}}  # 2025-06-18
    assert call["result"]["structuredContent"] == {"result": 3}  # 2025-06-18
    assert progress["params"]["message"] == "half way"  # 2025-03-26


# --- initialize again -----------------------------------------------------------------------------------------


async def test_the_same_initialize_again_is_answered_with_requests_in_flight() -> None:
    """A client (or a checker whose slow calls timed out on its side) asking the negotiated version again gets the
    first answer, though earlier calls still run; they carry on and the session is unchanged. Another version
    keeps its -32600."""
    server = make_server()
    async with raw_server(server) as peer:
        await peer.send(init_frame("2025-06-18", 1, {"roots": {}}))
        first = await peer.recv_json()
        await peer.send(request_frame(2, "tools/call", {"name": "wait_for", "arguments": {"key": "k"}}))
        await peer.send(request_frame(3, "tools/call", {"name": "wait_for", "arguments": {"key": "k"}}))
        (session,) = server.sessions()
        with anyio.fail_after(5):
            while session.dispatcher.in_flight() < 2:
                await anyio.lowlevel.checkpoint()
        again = await peer.call(init_frame("2025-06-18", 4, {"elicitation": {}}))
        other = await peer.call(init_frame("2025-11-25", 5))
        assert session.dispatcher.in_flight() == 2  # neither answer cancelled or answered the calls
        released = await peer.call(request_frame(6, "tools/call", {"name": "release", "arguments": {"key": "k"}}))
        answers = [await peer.recv_json(), await peer.recv_json()]
    assert again["result"] == first["result"]
    assert other["error"] == {"code": -32600, "message": "Invalid Request: the session is already initialized"}
    assert released["result"]["content"][0]["text"] == "set k"
    assert sorted(json.dumps(a["id"]) for a in answers) == ["2", "3"]
    assert all(a["result"]["content"][0]["text"] == "released k" for a in answers)
    assert (session.version, session.client_capabilities) == ("2025-06-18", {"roots": {}})
