"""basic/transports, Streamable HTTP of the handshake revisions (2025-03-26 .. 2025-11-25), sentence by sentence
(the ids are in conformance/spec/coverage/transports.toml): what our client sends, and which stream the server
writes each message on. A real uvicorn on a loopback port (http_support)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from http_support import (
    HTTPX_GENERATORS,
    ServerThread,
    SseReader,
    call_body,
    make_server,
    messages,
    open_session,
    unique,
)
from http_support import collect_garbage as collect_garbage
from http_support import http as http
from http_support import server as server

from jsonrpc_mcp import Client
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]

HANDSHAKE_HTTP = ("2025-03-26", "2025-06-18", "2025-11-25")


class BodyRecorder:
    """ASGI middleware that remembers the method, headers and body of every HTTP request."""

    def __init__(self, app: McpAsgiApp) -> None:
        self.app = app
        self.seen: list[tuple[str, dict[str, str], bytearray]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        body = bytearray()
        self.seen.append((scope["method"], headers, body))

        async def reading() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
            return message

        await self.app(scope, reading, send)


@pytest.fixture(scope="module")
def recorder() -> BodyRecorder:
    return BodyRecorder(McpAsgiApp(make_server()))


@pytest.fixture(scope="module")
def recorded(recorder: BodyRecorder) -> Iterator[ServerThread]:
    thread = ServerThread(recorder)
    yield thread
    thread.stop()


@pytest.mark.parametrize("version", HANDSHAKE_HTTP)
async def test_each_message_of_the_client_is_a_post_of_its_own_and_its_get_accepts_an_event_stream(
    recorded: ServerThread, recorder: BodyRecorder, version: str
) -> None:
    """ "The client MUST use HTTP POST to send JSON-RPC messages to the MCP endpoint"; "Every JSON-RPC message sent
    from the client MUST be a new HTTP POST request to the MCP endpoint"; on the GET that opens the server's
    stream, "The client MUST include an Accept header, listing text/event-stream as a supported content type"."""
    async with Client.connect_http(recorded.url, protocol_version=version) as client:
        await client.call_tool("add", {"a": 1, "b": 2})
        await client.list_tools()
        sid = client.stream.session_id  # type: ignore[attr-defined]
    ours = [(method, h, bytes(body)) for method, h, body in recorder.seen if h.get("mcp-session-id") == sid]
    first = next(i for i, (m, h, body) in enumerate(recorder.seen) if m == "POST" and b'"initialize"' in body)
    sent = [(m, json.loads(body)) for m, _, body in [recorder.seen[first], *ours] if body]
    assert all(method == "POST" for method, _ in sent)
    assert all(isinstance(message, dict) for _, message in sent)  # one message per POST, never two in one body
    methods = [m.get("method") for _, m in sent]
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/call"] and methods[-1] == "tools/list"
    gets = [h for method, h, _ in ours if method == "GET"]
    assert gets and all("text/event-stream" in h["accept"].split(", ") for h in gets)
    assert {method for method, _, _ in ours} <= {"POST", "GET", "DELETE"}


async def test_a_resumed_stream_replays_its_own_messages_only(server: ServerThread, http: httpx.AsyncClient) -> None:
    """ "The server MUST NOT replay messages that would have been delivered on a different stream": two streams cut
    off mid-way, each resumed with its own Last-Event-ID, get their own request's messages and nothing of the
    other's; every event id of the session's streams is its own, and names its stream."""
    session = await open_session(http, server.url)
    keys = {"a": unique("replay-a"), "b": unique("replay-b")}
    last: dict[str, str] = {}
    event_ids: list[str | None] = []
    for ident, key in keys.items():
        body = call_body(ident, "slow", {"key": key}, meta={"progressToken": ident})
        async with session.stream(body) as response, SseReader(response) as reader:
            event_ids.append((await reader.next()).id)  # priming
            assert (await reader.next_message())["params"]["progressToken"] == ident
            assert reader.parser.last_event_id is not None
            last[ident] = reader.parser.last_event_id
            event_ids.append(last[ident])
    for n, key in enumerate(keys.values()):
        await session.call(10 + n, "release", {"key": key})
    replayed: dict[str, list[dict[str, Any]]] = {}
    for ident in keys:
        headers = {"Accept": "text/event-stream", "Last-Event-ID": last[ident]}
        async with session.stream(None, "GET", **headers) as resumed:
            events = await SseReader(resumed).rest()
        event_ids.extend(event.id for event in events if event.data)
        replayed[ident] = messages(events)
    # "If present, the ID MUST be globally unique across all streams within that session"
    assert None not in event_ids and len(set(event_ids)) == len(event_ids)
    for ident, got in replayed.items():
        assert got[-1]["id"] == ident and "result" in got[-1]
        assert all(m.get("id", ident) == ident for m in got)
        assert all(m["params"]["progressToken"] == ident for m in got if m.get("method") == "notifications/progress")


async def test_the_get_stream_carries_no_answer_and_nothing_of_another_stream(
    server: ServerThread, http: httpx.AsyncClient
) -> None:
    """ "The server MUST NOT send a JSON-RPC response on the stream unless resuming a stream associated with a
    previous client request"; "The server MUST send each of its JSON-RPC messages on only one of the connected
    streams; that is, it MUST NOT broadcast the same message across multiple streams": with the standalone GET
    stream open, a request whose own stream was cut off is answered on its resumed stream, never on the GET
    stream, whose next message is the unrelated notification that came after."""
    session = await open_session(http, server.url)
    key = unique("get-stream")
    async with (
        session.stream(None, "GET", Accept="text/event-stream") as standalone,
        SseReader(standalone) as listening,
    ):
        assert (await listening.next()).data == b""  # primed
        body = call_body(2, "slow", {"key": key}, meta={"progressToken": "p"})
        async with session.stream(body) as response, SseReader(response) as reader:
            assert (await reader.next_message())["params"]["progress"] == 1
            last_id = reader.parser.last_event_id
        assert last_id is not None
        await session.call(3, "release", {"key": key})
        headers = {"Accept": "text/event-stream", "Last-Event-ID": last_id}
        async with session.stream(None, "GET", **headers) as resumed:
            replay = messages(await SseReader(resumed).rest())
        assert replay[-1]["id"] == 2 and replay[-1]["result"]["content"][0]["text"] == f"released {key}"
        await session.call(4, "grow", {"name": unique("grown").replace("-", "_")})
        unrelated = await listening.next_message()
    assert unrelated == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


async def test_the_session_id_goes_only_to_its_endpoint_and_never_to_a_log(
    recorded: ServerThread, recorder: BodyRecorder, caplog: pytest.LogCaptureFixture
) -> None:
    """2025-11-25: "The client MUST handle the session ID in a secure manner": it is sent to the endpoint that
    gave it and nowhere else, and no log line of this library (the client's or the server's) shows it, at any
    level. (httpcore's own DEBUG trace lists response headers, the session id among them.)"""
    caplog.set_level(logging.DEBUG)
    async with Client.connect_http(recorded.url, protocol_version="2025-11-25") as client:
        await client.call_tool("add", {"a": 1, "b": 2})
        sid = client.stream.session_id  # type: ignore[attr-defined]
    assert isinstance(sid, str) and len(sid) >= 32
    carrying = [h for _, h, _ in recorder.seen if sid in " ".join(h.values())]
    assert carrying and all(h["mcp-session-id"] == sid and h["host"] == recorded.url.split("/")[2] for h in carrying)
    ours = [r for r in caplog.records if r.name.startswith("jsonrpc_mcp")]
    assert ours and [r.getMessage() for r in ours if sid in r.getMessage()] == []


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18"])
async def test_before_2025_11_25_the_stream_stays_open_until_its_answer(
    server: ServerThread, http: httpx.AsyncClient, version: str
) -> None:
    """2025-03-26 and 2025-06-18: "The server SHOULD NOT close the SSE stream before sending the JSON-RPC response
    for the received JSON-RPC request, unless the session expires": a handler asking to close it early (SEP-1699
    polling, which 2025-11-25 allows) is told no, and the answer comes on the stream that was open."""
    key = unique(f"open-{version}")
    session = await open_session(http, server.url, version)
    async with session.stream(call_body(2, "poll", {"key": key}, meta={"progressToken": 1})) as response:
        assert response.headers["content-type"] == "text/event-stream"
        async with SseReader(response) as reader:
            await session.call(3, "release", {"key": key})
            answer = await reader.next_message()
    assert answer == {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": f"polled {key}"}]}}


async def test_the_get_stream_gives_a_retry_and_can_be_resumed_after_the_server_closes_it(
    server: ServerThread, http: httpx.AsyncClient
) -> None:
    """2025-11-25: "If the server closes the connection without terminating the stream, it SHOULD follow the same
    polling behavior as described for POST requests: sending a retry field and allowing the client to reconnect":
    the standalone stream is primed with an event id and a retry, and a GET with that Last-Event-ID after the
    connection is gone reconnects to it and receives what was sent meanwhile."""
    session = await open_session(http, server.url)
    async with session.stream(None, "GET", Accept="text/event-stream") as first, SseReader(first) as reader:
        primed = await reader.next()
        assert primed.data == b"" and primed.id is not None
        assert reader.parser.retry_ms is not None and reader.parser.retry_ms > 0
    await session.call(2, "grow", {"name": unique("regrown").replace("-", "_")})
    headers = {"Accept": "text/event-stream", "Last-Event-ID": primed.id}
    async with session.stream(None, "GET", **headers) as again, SseReader(again) as resumed:
        assert again.status_code == 200
        note = await resumed.next_message()
    assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
