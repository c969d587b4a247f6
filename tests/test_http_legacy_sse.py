"""The 2024-11-05 HTTP+SSE transport, server side (``McpAsgiApp(legacy_sse=True)``), against a real uvicorn on a
loopback port: the ``endpoint`` event, messages POSTed to it and answered on the stream, the session's life, and
the checks it shares with Streamable HTTP (Host, Origin, body type and size, session bounds, the HTTP policy)."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from http_support import HTTPX_GENERATORS, ServerThread, SseReader, init_body, make_server, start_app
from http_support import http as http

from jsonrpc_mcp import Client, ConnectionClosed, Context, RpcError, Server
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.http_policy import HttpPolicy

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS]

TIMEOUT = 10.0
SSE_ACCEPT = {"Accept": "text/event-stream"}
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def legacy() -> Iterator[ServerThread]:
    thread = start_app(legacy_sse=True, max_body=64 * 1024)
    yield thread
    thread.stop()


def root(thread: ServerThread) -> str:
    return f"http://{thread.host}:{thread.port}"


class Stream:
    """One open ``GET /sse``: the messages URL its ``endpoint`` event named, and its events."""

    def __init__(self, reader: SseReader, messages_url: str) -> None:
        self.reader = reader
        self.messages_url = messages_url

    async def next_message(self) -> dict[str, Any]:
        while True:
            event = await self.reader.next(TIMEOUT)
            if event.event == "message":
                return json.loads(event.data)  # type: ignore[no-any-return]


@asynccontextmanager
async def open_stream(
    http: httpx.AsyncClient, base: str, headers: dict[str, str] | None = None
) -> AsyncIterator[Stream]:
    async with http.stream("GET", base + "/sse", headers={**SSE_ACCEPT, **(headers or {})}) as response:
        assert response.status_code == 200, response.status_code
        assert response.headers["content-type"] == "text/event-stream"
        async with SseReader(response) as reader:
            first = await reader.next(TIMEOUT)
            assert first.event == "endpoint"
            yield Stream(reader, base + first.data.decode())


async def initialized(http: httpx.AsyncClient, stream: Stream, version: str = "2024-11-05") -> dict[str, Any]:
    posted = await http.post(stream.messages_url, json=init_body(version, 1), headers=JSON)
    assert posted.status_code == 202
    answer = await stream.next_message()
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(stream.messages_url, json=note, headers=JSON)).status_code == 202
    return answer


async def test_the_stream_opens_with_an_endpoint_event_and_posted_requests_are_answered_on_it(
    legacy: ServerThread, http: httpx.AsyncClient
) -> None:
    async with open_stream(http, root(legacy)) as stream:
        assert stream.messages_url.startswith(root(legacy) + "/messages/?session_id=")
        answer = await initialized(http, stream)
        assert answer["id"] == 1 and answer["result"]["protocolVersion"] == "2024-11-05"
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2}}}
        posted = await http.post(stream.messages_url, json=call, headers=JSON)
        assert posted.status_code == 202 and posted.content == b""
        answer = await stream.next_message()
        assert answer["id"] == 2 and answer["result"]["structuredContent"] == {"result": 2}


async def test_the_exchange_docs_deploy_md_documents_is_the_one_served(
    legacy: ServerThread, http: httpx.AsyncClient
) -> None:
    """docs/deploy.md says how a session of this transport is set up and how its messages go; the routes do
    what it says."""
    deploy = (Path(__file__).parent.parent / "docs" / "deploy.md").read_text(encoding="utf-8")
    section = deploy.split("## Older clients: the HTTP+SSE transport", 1)[1].split("\n## ", 1)[0]
    said = " ".join(section.split())
    for step in (
        "`GET /sse` opens the session's stream, whose first event, `endpoint`, names the URL the client POSTs its "
        "messages to (`/messages/?session_id=...`); every answer comes back on the stream",
        "When the connection drops, the session is gone",
    ):
        assert step in said
    async with open_stream(http, root(legacy)) as stream:  # (its first event: endpoint)
        assert stream.messages_url.startswith(root(legacy) + "/messages/?session_id=")
        await initialized(http, stream)  # (POSTed, 202, answered on the stream)


async def test_notifications_and_progress_of_a_request_come_on_the_stream_before_its_answer(
    legacy: ServerThread, http: httpx.AsyncClient
) -> None:
    async with open_stream(http, root(legacy)) as stream:
        await initialized(http, stream, "2025-03-26")
        call = {
            "jsonrpc": "2.0",
            "id": "p",
            "method": "tools/call",
            "params": {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": "t"}},
        }
        assert (await http.post(stream.messages_url, json=call, headers=JSON)).status_code == 202
        first, second, answer = [await stream.next_message() for _ in range(3)]
        assert [first["method"], second["method"]] == ["notifications/progress"] * 2
        assert [first["params"]["progress"], second["params"]["progress"]] == [1, 2]
        assert answer["id"] == "p" and answer["result"]["content"][0]["text"] == "2 steps"


async def test_a_frame_that_is_not_json_is_accepted_and_answered_on_the_stream_with_a_parse_error(
    legacy: ServerThread, http: httpx.AsyncClient
) -> None:
    async with open_stream(http, root(legacy)) as stream:
        posted = await http.post(stream.messages_url, content=b"{not json", headers=JSON)
        assert posted.status_code == 202
        answer = await stream.next_message()
        assert answer["error"]["code"] == -32700
        # the session goes on
        assert (await initialized(http, stream))["result"]["protocolVersion"] == "2024-11-05"


async def test_posts_need_a_live_session_of_the_stream_and_end_with_it(
    legacy: ServerThread, http: httpx.AsyncClient
) -> None:
    base = root(legacy)
    missing = await http.post(base + "/messages/", json=init_body("2024-11-05", 1), headers=JSON)
    assert missing.status_code == 400 and "session_id" in missing.json()["error"]["message"]
    unknown = await http.post(base + "/messages/?session_id=nope", json=init_body("2024-11-05", 1), headers=JSON)
    assert unknown.status_code == 404
    async with open_stream(http, base) as stream:
        url = stream.messages_url
        await initialized(http, stream)
    with anyio.fail_after(TIMEOUT):  # the stream's end ends the session
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        while (await http.post(url, json=ping, headers=JSON)).status_code != 404:
            await anyio.lowlevel.checkpoint()


async def test_each_stream_is_a_session_of_its_own(legacy: ServerThread, http: httpx.AsyncClient) -> None:
    async with open_stream(http, root(legacy)) as one, open_stream(http, root(legacy)) as two:
        assert one.messages_url != two.messages_url
        await initialized(http, one)
        ping = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}
        assert (await http.post(two.messages_url, json=ping, headers=JSON)).status_code == 202
        refused = await two.next_message()  # the second session has not been initialized
        assert refused["id"] == 5 and "error" in refused


async def test_the_routes_check_what_streamable_http_checks(legacy: ServerThread, http: httpx.AsyncClient) -> None:
    base = root(legacy)
    assert (await http.get(base + "/sse", headers={"Accept": "application/json"})).status_code == 406
    assert (await http.post(base + "/sse", json={}, headers=JSON)).status_code == 405
    assert (await http.get(base + "/messages/?session_id=x")).status_code == 405
    assert (await http.get(base + "/sse", headers={**SSE_ACCEPT, "Origin": "https://evil.example"})).status_code == 403
    assert (await http.get(base + "/sse", headers={**SSE_ACCEPT, "Host": "evil.example"})).status_code == 403
    async with open_stream(http, base) as stream:
        text = await http.post(stream.messages_url, content=b"{}", headers={"Content-Type": "text/plain"})
        assert text.status_code == 415
        huge = await http.post(stream.messages_url, content=b"[" + b" " * (100 * 1024) + b"]", headers=JSON)
        assert huge.status_code == 413
        other_origin = await http.post(
            stream.messages_url, json=init_body("2024-11-05", 1), headers={**JSON, "Origin": "https://evil.example"}
        )
        assert other_origin.status_code == 403


async def test_sessions_are_bounded(http: httpx.AsyncClient) -> None:
    thread = start_app(legacy_sse=True, max_sessions=2)
    try:
        base = root(thread)
        async with open_stream(http, base), open_stream(http, base):
            full = await http.get(base + "/sse", headers=SSE_ACCEPT)
            assert full.status_code == 503 and full.headers["retry-after"]
    finally:
        thread.stop()


async def test_off_by_default(http: httpx.AsyncClient) -> None:
    thread = start_app()
    try:
        assert (await http.get(root(thread) + "/sse", headers=SSE_ACCEPT)).status_code == 404
    finally:
        thread.stop()


class Tokens(HttpPolicy):
    """A bearer token per caller: no token is a 401; the token is the caller's principal."""

    async def admit(self, scope: Any, headers: Any, send: Any) -> Any:
        token = headers.get("authorization")
        if token is None:
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return None
        headers.auth = token
        return send

    def session_owner(self, headers: Any) -> str | None:
        return headers.get("authorization")


async def test_the_http_policy_admits_both_routes_and_a_session_belongs_to_whoever_opened_it(
    http: httpx.AsyncClient,
) -> None:
    server = Server("owned")

    @server.tool()
    async def whoami(ctx: Context) -> str:
        return f"{ctx.auth} {ctx.request_headers.get('x-trace') if ctx.request_headers else None}"

    thread = ServerThread(McpAsgiApp(server, legacy_sse=True, http_policy=Tokens()))
    try:
        base = root(thread)
        assert (await http.get(base + "/sse", headers=SSE_ACCEPT)).status_code == 401
        async with open_stream(http, base, {"Authorization": "alice"}) as stream:
            hello = init_body("2024-11-05", 1)
            assert (await http.post(stream.messages_url, json=hello, headers=JSON)).status_code == 401
            stolen = await http.post(stream.messages_url, json=hello, headers={**JSON, "Authorization": "bob"})
            assert stolen.status_code == 404
            mine = {**JSON, "Authorization": "alice", "X-Trace": "t-1"}
            assert (await http.post(stream.messages_url, json=hello, headers=mine)).status_code == 202
            await stream.next_message()
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
            assert (await http.post(stream.messages_url, json=call, headers=mine)).status_code == 202
            answer = await stream.next_message()
            assert answer["result"]["content"][0]["text"] == "alice t-1"
    finally:
        thread.stop()


async def test_the_end_of_the_apps_lifespan_ends_every_stream() -> None:
    app = McpAsgiApp(make_server(), legacy_sse=True)
    sent, read = anyio.create_memory_object_stream[dict[str, Any]](16)
    disconnect = anyio.Event()

    async def receive() -> dict[str, Any]:
        await disconnect.wait()
        return {"type": "http.disconnect"}

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/sse",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), (b"accept", b"text/event-stream")],
    }
    with sent, read, anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            async with app.lifespan():
                tg.start_soon(app, scope, receive, sent.send)
                assert (await read.receive())["status"] == 200
                assert b"event: endpoint" in (await read.receive())["body"]
                assert app.legacy is not None and len(app.legacy.sessions) == 1
            last = await read.receive()  # the lifespan's end closed the stream
            assert last["type"] == "http.response.body" and not last["more_body"]
            assert not app.legacy.sessions
            disconnect.set()


# --- the client side ------------------------------------------------------------------------------------------


async def test_our_client_speaks_the_legacy_transport_outright(legacy: ServerThread) -> None:
    async with Client.connect_sse(root(legacy) + "/sse") as client:
        assert client.protocol_version == "2025-11-25"
        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert added.structured_content == {"result": 5}
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        done = await client.call_tool("progress", {"steps": 2}, progress=on_progress)
        assert done.content[0].text == "2 steps" and sorted(seen) == [1, 2]


async def test_a_post_the_server_refuses_fails_its_request_at_once_with_an_error_of_ours(legacy: ServerThread) -> None:
    """A request whose POST is refused (here 413: larger than ``max_body``) fails at once with an error made in this
    process (-32000, ``local``), never one that looks like the server's; the session goes on."""
    async with Client.connect_sse(root(legacy) + "/sse") as client:
        with anyio.fail_after(TIMEOUT), pytest.raises(RpcError) as refused:
            await client.call_tool("add", {"a": 1, "b": 2, "pad": "x" * 100_000})
        assert (type(refused.value), refused.value.code, refused.value.local) == (RpcError, -32000, True)
        assert "the server answered HTTP 413" in refused.value.message
        assert (await client.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}


async def test_connect_http_falls_back_to_the_legacy_transport_when_the_first_post_is_refused(
    legacy: ServerThread,
) -> None:
    """POST to the event stream's URL is a 405 there: the client GETs it and goes on over HTTP+SSE."""
    async with Client.connect_http(root(legacy) + "/sse") as client:
        assert type(client.stream).__name__ == "SseClientStream"
        assert (await client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}


async def test_connect_http_keeps_the_first_failure_when_there_is_no_legacy_transport_either() -> None:
    thread = start_app()  # no /sse route: the POST and the GET both get 404
    try:
        with pytest.raises(RpcError, match="HTTP 404"):
            async with Client.connect_http(root(thread) + "/nowhere"):
                pass
        with pytest.raises(RpcError, match="HTTP 404"):
            async with Client.connect_http(root(thread) + "/sse", legacy_sse=False):
                pass
    finally:
        thread.stop()


async def test_an_endpoint_event_naming_another_origin_is_not_followed() -> None:
    async def hostile(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        event = b"event: endpoint\ndata: https://collector.example/messages/?session_id=1\n\n"
        await send({"type": "http.response.body", "body": event, "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass

    thread = ServerThread(hostile, lifespan="off")
    try:
        with pytest.raises(ConnectionClosed, match="another origin"):
            async with Client.connect_sse(root(thread) + "/sse"):
                pass
    finally:
        thread.stop()


async def test_the_end_of_the_event_stream_fails_what_is_waiting(http: httpx.AsyncClient) -> None:
    server = Server("ends")
    entered = threading.Event()  # (set on the server's own loop, in its thread)

    @server.tool()
    async def hang() -> str:
        entered.set()
        await anyio.sleep_forever()
        return "never"

    app = McpAsgiApp(server, legacy_sse=True)
    thread = ServerThread(app)
    try:
        failures: list[Exception] = []
        with anyio.fail_after(TIMEOUT):
            await _call_until_the_server_goes(thread, entered, failures)
        assert len(failures) == 1
    finally:
        thread.stop()


async def _call_until_the_server_goes(
    thread: ServerThread, entered: threading.Event, failures: list[Exception]
) -> None:
    async with Client.connect_sse(root(thread) + "/sse") as client:

        async def call() -> None:
            try:
                await client.call_tool("hang", {})
            except ConnectionClosed as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            assert await anyio.to_thread.run_sync(entered.wait, TIMEOUT)
            await anyio.to_thread.run_sync(thread.stop)  # the server goes away, and its stream with it
