"""2026-07-28 basic/index, "Error Codes": what this library emits from the range MCP reserves (the ids are in
conformance/spec/coverage/basic.toml)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from helpers import ROOT, raw_server, request_frame

from jsonrpc_mcp import Context, Server
from jsonrpc_mcp.errors import ResourceNotFound, UrlElicitationRequired
from jsonrpc_mcp.jsonrpc import codes

pytestmark = pytest.mark.anyio

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
#: The codes of -32020..-32099 the specification defines (-32042: 2025-11-25's URL elicitation required).
DEFINED = {
    -32020: "HEADER_MISMATCH",
    -32021: "MISSING_REQUIRED_CLIENT_CAPABILITY",
    -32022: "UNSUPPORTED_PROTOCOL_VERSION",
}


def finding_server() -> Server:
    server = Server("finds", "1")

    @server.resource("mem://notes/{name}")
    def note(name: str) -> str:
        raise ResourceNotFound(f"mem://notes/{name}")

    @server.method("custom/find", eras="both")
    def find(ctx: Context, params: Any) -> dict[str, Any]:
        raise ResourceNotFound("mem://elsewhere")

    return server


async def test_a_2026_07_28_request_never_gets_32002_whichever_handler_raised_it() -> None:
    """ "Implementations of this protocol version MUST NOT emit these codes: -32002 — resource not found (2025-11-25
    and earlier; replaced by -32602)": a resource function and a method of the application's own that raise
    ResourceNotFound answer a stateless request with -32602 and the URI; a handshake session keeps -32002."""
    async with raw_server(finding_server()) as peer:
        read = await peer.call(request_frame(1, "resources/read", {"uri": "mem://notes/a", "_meta": META}))
        custom = await peer.call(request_frame(2, "custom/find", {"_meta": META}))
    assert read["error"] == {"code": -32602, "message": "Resource not found", "data": {"uri": "mem://notes/a"}}
    assert custom["error"] == {"code": -32602, "message": "Resource not found", "data": {"uri": "mem://elsewhere"}}
    async with raw_server(finding_server(), version="2025-11-25") as peer:
        legacy = await peer.call(request_frame(3, "custom/find", {}))
    assert legacy["error"]["code"] == -32002


def test_the_mcp_sub_range_holds_the_specifications_codes_only() -> None:
    """ "-32020 to -32099 — reserved for the MCP specification ... Implementations MUST NOT emit any code from this
    sub-range that is not defined by this specification and MUST use defined codes only with their specified
    meanings": the library's codes of that range are the three 2026-07-28 defines (and 2025-11-25's -32042, raised
    only as its error class, which a 2026-07-28 request never answers with: below), and no other number of the range
    is written anywhere in its source."""
    ours = {value: name for name, value in vars(codes).items() if isinstance(value, int) and -32099 <= value <= -32020}
    assert ours == {**DEFINED, -32042: "URL_ELICITATION_REQUIRED"}
    literal = re.compile(r"(?<![\w.])-320([2-9]\d)(?!\d)")
    stray = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in (ROOT / "jsonrpc_mcp").rglob("*.py")
        for match in literal.finditer(path.read_text(encoding="utf-8"))
        if int(match.group(0)) not in (*DEFINED, -32042)
    ]
    assert stray == []
    raised = [
        path.relative_to(ROOT)
        for path in (ROOT / "jsonrpc_mcp").rglob("*.py")
        if "URL_ELICITATION_REQUIRED" in path.read_text(encoding="utf-8") and path.name != "codes.py"
    ]
    assert [str(path) for path in raised] == ["jsonrpc_mcp/errors.py"]  # (UrlElicitationRequired, and nothing else)


async def test_url_elicitation_required_is_never_32042_in_2026_07_28() -> None:
    """2026-07-28 defines no -32042: a handler raising ``UrlElicitationRequired`` answers a stateless request with
    an ``input_required`` result whose input requests are those URL-mode elicitations; 2025-11-25 keeps -32042."""
    server = Server("asks", "1")
    wanted = {"mode": "url", "elicitationId": "e1", "message": "Sign in", "url": "https://example.com/sign-in"}

    @server.tool()
    def sign_in() -> str:
        raise UrlElicitationRequired([wanted])

    call = {"name": "sign_in", "arguments": {}}
    async with raw_server(server) as peer:
        stateless = await peer.call(request_frame(1, "tools/call", {**call, "_meta": META}))
    assert "error" not in stateless, stateless
    result = stateless["result"]
    assert result["resultType"] == "input_required"
    assert result["inputRequests"] == {"e1": {"method": "elicitation/create", "params": wanted}}
    async with raw_server(server, version="2025-11-25") as peer:
        legacy = await peer.call(request_frame(2, "tools/call", call))
    assert legacy["error"]["code"] == -32042 and legacy["error"]["data"] == {"elicitations": [wanted]}
