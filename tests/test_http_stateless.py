"""Streamable HTTP, stateless era (2026-07-28), against a real uvicorn on a loopback port.

The validation order of SPEC_MAP §2.6 (``_meta`` → -32602/400, mirrored headers → -32020/400, version →
-32022/400, method → -32601/404), SEP-2243 headers (case rules, whitespace, base64, ``Mcp-Param-*``), GET and
DELETE → 405, SSE that carries only notifications then the response, disconnect = cancellation, and the
long-lived ``subscriptions/listen`` stream.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import httpx
import pytest
from helpers import left_in_cycles_by, paced
from http_support import (
    HTTPX_GENERATORS,
    JSON_HEADERS,
    META,
    STATELESS,
    ServerThread,
    SseReader,
    asgi_request,
    make_server,
    messages,
    parse_sse,
    raw_post,
    reply_of,
    start_app,
    stateless_body,
    stateless_headers,
    unique,
)
from http_support import collect_garbage as collect_garbage
from http_support import http as http
from http_support import server as server

from jsonrpc_mcp.jsonrpc.dispatch import Dispatcher
from jsonrpc_mcp.jsonrpc.streams import MessageStream
from jsonrpc_mcp.mcp.session import ServerSession
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]


async def post(http: httpx.AsyncClient, url: str, body: Any, headers: dict[str, str]) -> httpx.Response:
    return await http.post(url, content=json.dumps(body).encode(), headers=headers)


def call(ident: Any, name: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return stateless_body(ident, "tools/call", {"name": name, "arguments": arguments}, **meta)


async def test_a_stateless_request_is_served_without_a_session(server: ServerThread, http: httpx.AsyncClient) -> None:
    response = await post(http, server.url, stateless_body(1, "tools/list"), stateless_headers("tools/list"))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert "mcp-session-id" not in response.headers
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "http-fixture"
    assert "add" in [tool["name"] for tool in result["tools"]]
    discover = await post(http, server.url, stateless_body(2, "server/discover"), stateless_headers("server/discover"))
    assert discover.status_code == 200 and STATELESS in discover.json()["result"]["supportedVersions"]


async def test_a_session_id_is_ignored(server: ServerThread, http: httpx.AsyncClient) -> None:
    headers = stateless_headers("tools/list", **{"Mcp-Session-Id": "whatever"})
    response = await post(http, server.url, stateless_body(1, "tools/list"), headers)
    assert response.status_code == 200 and "mcp-session-id" not in response.headers


@pytest.mark.parametrize(
    "meta",
    [
        None,
        {"io.modelcontextprotocol/clientCapabilities": {}},
        {"io.modelcontextprotocol/protocolVersion": STATELESS},
        {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": []},
        {
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/logLevel": "loud",
        },
    ],
)
async def test_missing_meta_fields_are_32602_and_400(
    server: ServerThread, http: httpx.AsyncClient, meta: dict[str, Any] | None
) -> None:
    params = {} if meta is None else {"_meta": meta}
    body = {"jsonrpc": "2.0", "id": 104, "method": "server/discover", "params": params}
    response = await post(http, server.url, body, stateless_headers("server/discover"))
    assert response.status_code == 400
    reply = response.json()
    assert reply["id"] == 104 and reply["error"]["code"] == -32602


async def test_client_info_is_optional(server: ServerThread, http: httpx.AsyncClient) -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 105, "method": "server/discover", "params": {"_meta": meta}}
    response = await post(http, server.url, body, stateless_headers("server/discover"))
    assert response.status_code == 200 and "result" in response.json()


async def test_version_header_mismatch_is_32020_before_the_version_check(
    server: ServerThread, http: httpx.AsyncClient
) -> None:
    body = stateless_body(302, "server/discover", **{"io.modelcontextprotocol/protocolVersion": "v999.0.0"})
    response = await post(http, server.url, body, stateless_headers("server/discover"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020 and response.json()["id"] == 302
    headers = {**JSON_HEADERS, "Mcp-Method": "server/discover"}  # no MCP-Protocol-Version at all
    absent = await post(http, server.url, stateless_body(303, "server/discover"), headers)
    assert absent.status_code == 400 and absent.json()["error"]["code"] == -32020


async def test_unsupported_version_is_32022_with_supported_and_requested(
    server: ServerThread, http: httpx.AsyncClient
) -> None:
    body = stateless_body(301, "server/discover", **{"io.modelcontextprotocol/protocolVersion": "v999.0.0"})
    headers = stateless_headers("server/discover", **{"MCP-Protocol-Version": "v999.0.0"})
    response = await post(http, server.url, body, headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"]["requested"] == "v999.0.0" and STATELESS in error["data"]["supported"]


@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "unknown/x"]
)
async def test_removed_and_unknown_methods_are_32601_and_404(
    server: ServerThread, http: httpx.AsyncClient, method: str
) -> None:
    response = await post(http, server.url, stateless_body(500, method), stateless_headers(method))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32601 and response.json()["id"] == 500


async def test_unknown_tool_is_32602_with_200(server: ServerThread, http: httpx.AsyncClient) -> None:
    response = await post(http, server.url, call(1, "nope", {}), stateless_headers("tools/call", "nope"))
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32602


async def test_missing_capability_is_32021_and_400(server: ServerThread, http: httpx.AsyncClient) -> None:
    response = await post(http, server.url, call(1, "ask", {"question": "?"}), stateless_headers("tools/call", "ask"))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32021 and error["data"]["requiredCapabilities"] == {"elicitation": {}}


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Mcp-Method": "prompts/list"}, 400),
        ({"Mcp-Method": None}, 400),
        ({"Mcp-Method": "TOOLS/LIST"}, 400),
        ({"mcp-method": "tools/list"}, 200),
        ({"MCP-METHOD": "tools/list"}, 200),
    ],
)
async def test_mcp_method_header(
    server: ServerThread, http: httpx.AsyncClient, headers: dict[str, str | None], expected: int
) -> None:
    sent = {**JSON_HEADERS, "MCP-Protocol-Version": STATELESS}
    sent.update({k: v for k, v in headers.items() if v is not None})
    response = await post(http, server.url, stateless_body(7, "tools/list"), sent)
    assert response.status_code == expected
    if expected == 400:
        assert response.json()["error"]["code"] == -32020 and response.json()["id"] == 7


async def test_mcp_name_header(server: ServerThread, http: httpx.AsyncClient) -> None:
    body = call(1, "add", {"a": 1})
    wrong = await post(http, server.url, body, stateless_headers("tools/call", "wrong_tool_name"))
    assert wrong.status_code == 400 and wrong.json()["error"]["code"] == -32020
    missing = await post(http, server.url, body, stateless_headers("tools/call"))
    assert missing.status_code == 400 and missing.json()["error"]["code"] == -32020
    encoded = "=?base64?" + base64.b64encode(b"add").decode() + "?="
    ok = await post(http, server.url, body, stateless_headers("tools/call", encoded))
    assert ok.status_code == 200 and ok.json()["result"]["structuredContent"] == {"result": 1}
    uri = "text://hello"
    read = await post(
        http, server.url, stateless_body(2, "resources/read", {"uri": uri}), stateless_headers("resources/read", uri)
    )
    assert read.status_code == 200 and read.json()["result"]["contents"][0]["text"] == "Hello, world"


async def test_whitespace_around_header_values_is_trimmed(server: ServerThread) -> None:
    body = json.dumps(call(1, "add", {"a": 2})).encode()
    headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", f" {STATELESS} "),
        ("Mcp-Method", "\ttools/call "),
        ("Mcp-Name", "  add  "),
    ]
    status, response_headers, reply = await raw_post(server.url, headers, body)
    assert status == 200, reply
    assert reply_of(response_headers["content-type"], reply, 1)["result"]["structuredContent"] == {"result": 2}


async def test_non_ascii_header_value_is_refused(server: ServerThread) -> None:
    body = json.dumps(call(1, "region", {"region": "zürich"})).encode()
    headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", STATELESS),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "region"),
        ("Mcp-Param-Region", "zürich"),
    ]
    raw = [(k, v.encode("utf-8").decode("latin-1")) for k, v in headers]
    status, _, reply = await raw_post(server.url, raw, body)
    assert status == 400 and json.loads(reply)["error"]["code"] == -32020


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


@pytest.mark.parametrize(
    ("arguments", "params", "expected"),
    [
        ({"region": "Hello"}, {"Region": b64("Hello")}, 200),  # valid base64
        ({"region": "Hello"}, {"Region": "=?base64?SGVsbG8?="}, 400),  # bad padding
        ({"region": "Hello"}, {"Region": "=?base64?SGVs!!!bG8=?="}, 400),  # not the alphabet
        ({"region": "SGVsbG8="}, {"Region": "SGVsbG8="}, 200),  # no sentinel: literal
        ({"region": "=?base64?SGVsbG8="}, {"Region": "=?base64?SGVsbG8="}, 200),  # no suffix: literal
        ({"region": "us-west1"}, {}, 400),  # value in the body, header omitted
        ({"region": "us-west1"}, {"Region": "eu-west1"}, 400),  # mismatch
        ({"region": "us-west1"}, {"region": "us-west1"}, 200),  # header names are case-insensitive
        ({"region": "us-west1", "count": 42}, {"Region": "us-west1", "Count": "42.0"}, 200),  # numeric
        ({"region": "us-west1", "count": 42}, {"Region": "us-west1", "Count": "43"}, 400),
        ({"region": "us-west1", "count": 42}, {"Region": "us-west1", "Count": "forty-two"}, 400),
        ({"region": "us-west1", "flag": True}, {"Region": "us-west1", "Flag": "true"}, 200),
        ({"region": "us-west1", "flag": True}, {"Region": "us-west1", "Flag": "True"}, 400),
        ({"region": "us-west1"}, {"Region": "us-west1", "Count": "1"}, 400),  # header without a body value
        ({"region": "us-west1", "count": None}, {"Region": "us-west1"}, 200),  # null: no header expected
        ({"region": "héllo wörld"}, {"Region": b64("héllo wörld")}, 200),
    ],
)
async def test_mcp_param_headers(
    server: ServerThread, http: httpx.AsyncClient, arguments: dict[str, Any], params: dict[str, str], expected: int
) -> None:
    headers = stateless_headers("tools/call", "region", **{f"Mcp-Param-{k}": v for k, v in params.items()})
    response = await post(http, server.url, call(9, "region", arguments), headers)
    assert response.status_code == expected, response.text
    if expected == 400:
        assert response.json()["error"]["code"] == -32020 and response.json()["id"] == 9
    else:
        assert "result" in response.json()


async def test_get_and_delete_are_405(server: ServerThread, http: httpx.AsyncClient) -> None:
    headers = {"Accept": "text/event-stream", "MCP-Protocol-Version": STATELESS}
    get = await http.get(server.url, headers=headers)
    assert get.status_code == 405 and get.headers["allow"] == "POST"
    delete = await http.delete(server.url, headers={"MCP-Protocol-Version": STATELESS})
    assert delete.status_code == 405


async def test_notifications_get_202_and_responses_400(server: ServerThread, http: httpx.AsyncClient) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "_meta": META}}
    response = await post(http, server.url, note, stateless_headers("notifications/cancelled"))
    assert response.status_code == 202 and response.content == b""
    answer = {"jsonrpc": "2.0", "id": 1, "result": {}}
    refused = await post(http, server.url, answer, stateless_headers("x"))
    assert refused.status_code in (400, 404)


async def test_sse_carries_notifications_then_the_response(server: ServerThread, http: httpx.AsyncClient) -> None:
    body = call(3, "progress", {"steps": 3}, progressToken="p")
    response = await post(http, server.url, body, stateless_headers("tools/call", "progress"))
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert "mcp-session-id" not in response.headers
    events = parse_sse(response.content)
    assert all(event.id is None for event in events)  # not resumable in this era
    msgs = messages(events)
    assert paced([m["params"]["progress"] for m in msgs[:-1]], [1, 2, 3])
    assert {m["method"] for m in msgs[:-1]} == {"notifications/progress"}
    assert msgs[-1]["id"] == 3 and msgs[-1]["result"]["resultType"] == "complete"
    assert all("method" not in m or m["method"].startswith("notifications/") for m in msgs)


async def test_input_is_asked_in_the_result_never_by_request(server: ServerThread, http: httpx.AsyncClient) -> None:
    body = call(4, "ask", {"question": "Name?"}, **{"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})
    response = await post(http, server.url, body, stateless_headers("tools/call", "ask"))
    reply = (
        response.json()
        if response.headers["content-type"] == "application/json"
        else messages(parse_sse(response.content))[-1]
    )
    result = reply["result"]
    assert result["resultType"] == "input_required"
    (request,) = result["inputRequests"].values()
    assert request["method"] == "elicitation/create"


async def test_closing_the_stream_cancels_the_request(server: ServerThread, http: httpx.AsyncClient) -> None:
    key = unique("stateless-cancel")
    body = call(5, "wait_for", {"key": key}, progressToken=1)
    headers = stateless_headers("tools/call", "wait_for")
    content = json.dumps(body).encode()
    async with http.stream("POST", server.url, content=content, headers=headers) as response, SseReader(response) as r:
        assert (await r.next_message())["method"] == "notifications/progress"
    status_headers = stateless_headers("tools/call", "status")
    with anyio.fail_after(10):
        while True:
            reply = await post(http, server.url, call(6, "status", {"key": key}), status_headers)
            if reply.json()["result"]["content"][0]["text"] == "cancelled":
                break


async def test_listen_is_a_long_lived_stream(server: ServerThread, http: httpx.AsyncClient) -> None:
    body = stateless_body(8, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    headers = stateless_headers("subscriptions/listen")
    async with http.stream("POST", server.url, content=json.dumps(body).encode(), headers=headers) as response:
        assert response.headers["content-type"] == "text/event-stream"
        async with SseReader(response) as reader:
            ack = await reader.next_message()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"] == {"toolsListChanged": True}
            assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 8
            name = unique("grown").replace("-", "_")
            grown = await post(
                http, server.url, call(9, "grow", {"name": name}), stateless_headers("tools/call", "grow")
            )
            assert grown.status_code == 200
            changed = await reader.next_message()
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 8


async def test_json_preference_drops_side_messages(http: httpx.AsyncClient) -> None:
    thread = start_app(json_response_preference="json")
    try:
        body = call(3, "progress", {"steps": 2}, progressToken="p")
        response = await post(http, thread.url, body, stateless_headers("tools/call", "progress"))
        assert response.headers["content-type"] == "application/json"
        assert response.json()["result"]["content"][0]["text"] == "2 steps"
    finally:
        thread.stop()


async def test_a_stateless_post_leaves_no_cycles_behind() -> None:
    """The session of a stateless POST, its dispatcher and its stream are freed by reference counting once it is
    answered (at once, on a worker thread, after a wait, as SSE with progress): with the cyclic collector off, none
    of them is left behind (each POST left ~20 objects in cycles for the collector to find)."""
    app = McpAsgiApp(make_server(), path="/mcp")
    calls = [("release", {"key": "k"}), ("add", {"a": 1}), ("progress", {"steps": 0}), ("progress", {"steps": 2})]

    async def post_each() -> None:
        for ident, (name, arguments) in enumerate(calls):
            body = json.dumps(call(ident, name, arguments, progressToken=ident)).encode()
            status, _, reply = await asgi_request(app, "POST", stateless_headers("tools/call", name), body)
            assert status == 200 and b'"complete"' in reply, reply

    async with app.lifespan():
        left = await left_in_cycles_by(post_each, ServerSession, Dispatcher, MessageStream)
    assert left == []
