"""2026-07-28 basic/transports/streamable-http: the standard and `Mcp-Param-*` headers, sentence by sentence (the
ids are in conformance/spec/coverage/transports.toml). The client's headers are computed by
``jsonrpc_mcp.mcp.headers``; the server's check runs under a real uvicorn (http_support)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from http_support import HTTPX_GENERATORS, ServerThread, read_body, stateless_body, stateless_headers
from http_support import collect_garbage as collect_garbage
from http_support import http as http
from http_support import server as server

from jsonrpc_mcp import Client, RpcError, Server
from jsonrpc_mcp.mcp.headers import decode_header_value, param_headers, standard_headers
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]

SAFE = 2**53 - 1


def test_a_name_that_is_not_a_plain_ascii_header_value_is_sent_base64() -> None:
    """ "If the Mcp-Name source value cannot be safely represented as a plain ASCII header value, clients MUST
    encode it using the Base64 sentinel format"; a name in the safe set goes as it is."""
    for name in ("wetter-zürich", " padded", "tab\tin", "line\nbreak", "=?base64?looks-encoded?="):
        header = standard_headers("tools/call", {"name": name})["Mcp-Name"]
        assert header.startswith("=?base64?") and header.endswith("?=") and header.isascii()
        assert decode_header_value(header) == name
    assert standard_headers("tools/call", {"name": "get_weather"})["Mcp-Name"] == "get_weather"
    assert standard_headers("resources/read", {"uri": "file:///tmp/é.txt"})["Mcp-Name"].startswith("=?base64?")


def test_no_header_for_a_parameter_the_arguments_do_not_have() -> None:
    """ "Parameter not in arguments: Client MUST omit the header" (at any depth of the property path)."""
    annotations = {("region",): "Region", ("count",): "Count", ("where", "zone"): "Zone"}
    assert param_headers(annotations, {"region": "eu"}) == {"Mcp-Param-Region": "eu"}
    assert param_headers(annotations, {"where": {}}) == {}
    assert param_headers(annotations, None) == {}


async def post(http: httpx.AsyncClient, url: str, arguments: dict[str, Any], **params: str) -> httpx.Response:
    body = stateless_body(7, "tools/call", {"name": "region", "arguments": arguments})
    headers = stateless_headers("tools/call", "region", **{f"Mcp-Param-{k}": v for k, v in params.items()})
    return await http.post(url, json=body, headers=headers)


async def test_the_server_expects_no_header_for_a_parameter_the_arguments_do_not_have(
    server: ServerThread, http: httpx.AsyncClient
) -> None:
    """ "Parameter not in arguments: ... Server MUST NOT expect the header": the call without `count` and `flag`
    (each with an x-mcp-header) and without their headers is served."""
    response = await post(http, server.url, {"region": "eu"}, Region="eu")
    assert response.status_code == 200, response.text
    assert response.json()["result"]["content"][0]["text"] == "eu::0:False"


@pytest.mark.parametrize("count", [SAFE + 1, -(SAFE + 1), 2**64])
async def test_an_integer_header_argument_outside_the_safe_range_is_refused(
    server: ServerThread, http: httpx.AsyncClient, count: int
) -> None:
    """ "Integer values MUST be within the safe range for JavaScript (-2^53+1 to 2^53-1)": an argument mirrored
    in a header outside it is refused (-32020, HTTP 400: decision 34ga), even with a header that matches it
    digit for digit; one at the bound is served."""
    refused = await post(http, server.url, {"region": "eu", "count": count}, Region="eu", Count=str(count))
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32020
    assert "safe range" in refused.json()["error"]["message"]
    bound = await post(http, server.url, {"region": "eu", "count": SAFE}, Region="eu", Count=str(SAFE))
    assert bound.status_code == 200 and "result" in bound.json()


async def test_after_a_header_mismatch_the_client_lists_the_tools_again_and_retries() -> None:
    """ "If the server rejects a request with a HeaderMismatch error because required Mcp-Param- headers are
    missing or do not match the body, the client SHOULD call tools/list to check for changes to the tool's
    inputSchema, then retry the original request with the appropriate headers": a tool that gained an
    x-mcp-header after the client listed it is called once the client has listed it again."""
    app = Server("changing", "1")
    plain = {"type": "object", "properties": {"region": {"type": "string"}}, "required": ["region"]}
    app.add_tool(lambda region: f"plain {region}", name="where", input_schema=plain)
    thread = ServerThread(McpAsgiApp(app))
    try:
        async with Client.connect_http(thread.url) as client:
            assert client.stateless
            await client.list_tools()  # no header to mirror yet
            app.remove_tool("where")
            annotated = {**plain, "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
            app.add_tool(lambda region: f"annotated {region}", name="where", input_schema=annotated)
            result = await client.call_tool("where", {"region": "eu"})
    finally:
        thread.stop()
    assert result.content[0].text == "annotated eu"  # type: ignore[union-attr]


class RefusingDiscover:
    """An ASGI app standing for a modern server that answers server/discover with HTTP 400 and a JSON-RPC error of
    2026-07-28 (``refusal``), and records the methods it is sent."""

    def __init__(self, refusal: dict[str, Any]) -> None:
        self.refusal = refusal
        self.methods: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        request = json.loads(body) if body else {}
        self.methods.append(f"{scope['method']} {request.get('method')}")
        reply = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": self.refusal}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(reply)).encode())]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": reply})


@pytest.mark.parametrize(
    "refusal",
    [
        {"code": -32021, "message": "Missing required client capability", "data": {"requiredCapabilities": {"x": {}}}},
        {"code": -32020, "message": "Header mismatch: Mcp-Method"},
    ],
    ids=["-32021", "-32020"],
)
async def test_a_400_with_a_modern_error_is_not_taken_for_an_older_server(refusal: dict[str, Any]) -> None:
    """ "On 400 Bad Request, the client SHOULD inspect the response body before falling back: modern servers also
    use 400 for UnsupportedProtocolVersionError, MissingRequiredClientCapabilityError, and header-validation
    failures": such a refusal of server/discover is raised to the caller, with no initialize (nor HTTP+SSE) tried.
    (An unsupported version is retried with one the server lists: test_spec_basic_versioning.py.)"""
    app = RefusingDiscover(refusal)
    thread = ServerThread(app)
    try:
        with pytest.raises(RpcError) as raised:
            async with Client.connect_http(thread.url):
                pass  # pragma: no cover
    finally:
        thread.stop()
    assert raised.value.code == refusal["code"]
    assert app.methods == ["POST server/discover"]
