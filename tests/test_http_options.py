"""The Streamable HTTP app's settings: each wrong one refused by ``McpAsgiApp(...)`` naming it, and the timing
settings no other test exercised (the SSE keep-alive, the server-to-client request timeout) doing what they say,
against a real uvicorn on a loopback port."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from http_support import (
    HTTPX_GENERATORS,
    SseReader,
    call_body,
    make_server,
    open_session,
    start_app,
)
from http_support import collect_garbage as collect_garbage
from http_support import http as http

from jsonrpc_mcp.transports.events import InMemoryEventStore
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"sse_keepalive": 0}, "sse_keepalive must be positive"),
        ({"sse_keepalive": -1.0}, "sse_keepalive must be positive"),
        ({"sse_keepalive": float("nan")}, "sse_keepalive must be positive"),
        ({"sse_retry_ms": -1}, "sse_retry_ms must be zero or more"),
        ({"request_timeout": 0}, r"request_timeout must be positive \(or None\)"),
        ({"session_idle_timeout": 0}, "session_idle_timeout must be positive"),
        ({"max_sessions": 0}, "max_sessions must be positive"),
        ({"max_sessions_per_client": 0}, r"max_sessions_per_client must be positive \(or None\)"),
        ({"max_body": -5}, "max_body must be positive"),
        ({"max_in_flight_per_session": 0}, "max_in_flight_per_session must be positive"),
        ({"body_timeout": 0}, r"body_timeout must be positive \(or None\)"),
        ({"json_response_preference": "xml"}, "json_response_preference must be"),
        ({"path": "https://mcp.example.com/mcp"}, r"path is the endpoint's path \(/mcp\), not a URL"),
        ({"path": "/mcp?x=1"}, "path is the endpoint's path"),
    ],
)
def test_a_wrong_limit_or_timeout_is_refused_by_name(setting: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        McpAsgiApp(make_server(), **setting)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"max_body": "1000000"}, "max_body must be a whole number"),
        ({"max_sessions": 1.5}, "max_sessions must be a whole number"),
        ({"sse_retry_ms": 0.5}, "sse_retry_ms must be a whole number"),
        ({"sse_keepalive": "15"}, "sse_keepalive must be a number"),
        ({"request_timeout": True}, "request_timeout must be a number"),
        ({"allowed_hosts": "mcp.example.com"}, r"allowed_hosts is a list of names, not a string"),
        ({"allowed_origins": "https://app.example"}, r"allowed_origins is a list of names, not a string"),
        ({"cors_origins": "https://app.example"}, r"cors_origins is a list of names, not a string"),
        ({"allowed_hosts": [b"mcp.example.com"]}, "allowed_hosts holds strings, not bytes"),
        ({"event_store": InMemoryEventStore}, r"event_store must be an event store \(InMemoryEventStore\(\), or your"),
        ({"event_store": {}}, "event_store must be an event store"),
    ],
)
def test_a_setting_of_the_wrong_type_is_refused_by_name(setting: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        McpAsgiApp(make_server(), **setting)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"allowed_hosts": ["https://mcp.example.com"]}, "allowed_hosts holds host names .*, not URLs: 'https://mcp"),
        ({"allowed_hosts": ["mcp.example.com/mcp"]}, "allowed_hosts holds host names"),
        ({"allowed_origins": ["app.example"]}, r"allowed_origins holds origins \(https://app.example: a scheme and"),
        ({"allowed_origins": ["https://app.example/page"]}, "allowed_origins holds origins"),
        ({"cors_origins": ["app.example:3000"]}, "cors_origins holds origins"),
    ],
)
def test_a_name_that_could_never_match_a_request_is_refused(setting: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):  # (was: taken, and every request it was meant for got 403)
        McpAsgiApp(make_server(), **setting)


def test_the_settings_that_may_be_none_or_zero_are_accepted() -> None:
    app = McpAsgiApp(
        make_server(), sse_retry_ms=0, request_timeout=None, body_timeout=None, max_sessions_per_client=None
    )
    assert app.body_timeout is None
    McpAsgiApp(make_server(), allowed_hosts=("mcp.example.com",), cors_origins=["*"], sse_keepalive=0.5)
    origins = ["https://app.example/", "http://localhost:3000", "chrome-extension://abcdef", "null"]
    McpAsgiApp(make_server(), allowed_hosts=["*", "api.example.com:8443", "[::1]"], allowed_origins=origins)


@pytest.mark.anyio
async def test_a_silent_sse_stream_gets_a_comment_line_every_sse_keepalive_seconds(http: httpx.AsyncClient) -> None:
    thread = start_app(sse_keepalive=0.05)
    try:
        session = await open_session(http, thread.url)
        async with session.stream(None, "GET", Accept="text/event-stream") as response:
            assert response.status_code == 200
            received = b""
            with anyio.fail_after(10):  # (the default keep-alive, 15 s, would not come in time)
                chunks = response.aiter_raw()
                while received.count(b":\n\n") < 2:  # two keep-alives, after the priming event
                    received += await chunks.__anext__()
                await chunks.aclose()  # type: ignore[attr-defined]
            assert received.startswith(b"id: ") and b"\n\n:\n\n" in received
    finally:
        thread.stop()


@pytest.mark.anyio
async def test_a_server_to_client_request_unanswered_for_request_timeout_fails_the_tool(
    http: httpx.AsyncClient,
) -> None:
    thread = start_app(request_timeout=0.2)
    try:
        session = await open_session(http, thread.url, elicitation={})
        async with (
            session.stream(call_body(2, "ask", {"question": "Name?"})) as response,
            SseReader(response) as reader,
        ):
            request = await reader.next_message()
            assert request["method"] == "elicitation/create"  # never answered
            cancelled = await reader.next_message()  # (the default, 300 s, would not come in time)
            final = await reader.next_message()
        assert cancelled["method"] == "notifications/cancelled"
        assert cancelled["params"] == {"requestId": request["id"], "reason": "Request timed out"}
        assert final["id"] == 2 and final["result"]["isError"] is True
        assert final["result"]["content"][0]["text"].endswith("elicitation/create: no response within 0.2 s")
    finally:
        thread.stop()
