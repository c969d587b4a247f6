"""Streamable HTTP, handshake era (2024-11-05 .. 2025-11-25), against a real uvicorn on a loopback port.

Sessions (minting, 400/404, DELETE), the security checks (Host, Origin), content negotiation and size limits,
JSON vs SSE answers, SSE priming/retry/resumption, concurrent streams, progress, server-to-client requests
answered by POST, the standalone GET stream, batches on 2025-03-26, and cancellation.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from helpers import BOTH_RUNNERS, paced
from http_support import (
    ACCEPT,
    HTTPX_GENERATORS,
    JSON_HEADERS,
    ServerThread,
    SseReader,
    call_body,
    init_body,
    messages,
    open_session,
    parse_sse,
    response_of,
    start_app,
    stateless_body,
    stateless_headers,
    unique,
)
from http_support import collect_garbage as collect_garbage
from http_support import http as http

from jsonrpc_mcp import Context, Server
from jsonrpc_mcp.transports.events import InMemoryEventStore

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]


@pytest.fixture(scope="module")
def server(runner: str) -> Iterator[ServerThread]:
    """The everything app under a real uvicorn, one per runner of the dispatcher (its sessions' tasks are the
    runner's): the tests of ``BOTH_RUNNERS``, where handlers wait, run, answer and are cancelled concurrently, run
    against the plain reference too."""
    thread = start_app()
    yield thread
    thread.stop()


# --- sessions ------------------------------------------------------------------------------------------------


async def test_initialize_mints_a_visible_ascii_session_id(server: ServerThread, http: httpx.AsyncClient) -> None:
    response = await http.post(server.url, json=init_body(), headers=JSON_HEADERS)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    sid = response.headers["mcp-session-id"]
    assert len(sid) >= 32 and all(0x21 <= ord(ch) <= 0x7E for ch in sid)
    result = response.json()["result"]
    assert result["protocolVersion"] == "2025-11-25" and result["serverInfo"]["name"] == "http-fixture"
    other = await http.post(server.url, json=init_body(), headers=JSON_HEADERS)
    assert other.headers["mcp-session-id"] != sid


async def test_unsupported_initialize_version_is_countered_not_refused(
    server: ServerThread, http: httpx.AsyncClient
) -> None:
    response = await http.post(server.url, json=init_body("1999-01-01"), headers=JSON_HEADERS)
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"


async def test_failed_initialize_mints_no_session(server: ServerThread, http: httpx.AsyncClient) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
    response = await http.post(server.url, json=body, headers=JSON_HEADERS)
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32602
    assert "mcp-session-id" not in response.headers


async def test_missing_session_id_is_400_and_unknown_is_404(server: ServerThread, http: httpx.AsyncClient) -> None:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    missing = await http.post(server.url, json=body, headers={**JSON_HEADERS, "MCP-Protocol-Version": "2025-11-25"})
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == -32600
    unknown = await http.post(
        server.url, json=body, headers={**JSON_HEADERS, "Mcp-Session-Id": "nope", "MCP-Protocol-Version": "2025-11-25"}
    )
    assert unknown.status_code == 404
    assert "error" in unknown.json() and "id" not in unknown.json()


async def test_delete_ends_the_session(server: ServerThread, http: httpx.AsyncClient) -> None:
    session = await open_session(http, server.url)
    assert (await session.call(2, "add", {"a": 1}))["result"]["structuredContent"] == {"result": 1}
    deleted = await http.delete(
        server.url, headers={"Mcp-Session-Id": session.id, "MCP-Protocol-Version": "2025-11-25"}
    )
    assert deleted.status_code == 200
    after = await session.post({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert after.status_code == 404
    again = await http.delete(server.url, headers={"Mcp-Session-Id": session.id})
    assert again.status_code == 404
    get = await http.get(server.url, headers={"Accept": "text/event-stream", "Mcp-Session-Id": session.id})
    assert get.status_code == 404


async def test_notifications_and_responses_get_202(server: ServerThread, http: httpx.AsyncClient) -> None:
    session = await open_session(http, server.url)
    note = await session.post({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
    assert note.status_code == 202 and note.content == b""
    stray = await session.post({"jsonrpc": "2.0", "id": 99, "result": {}})
    assert stray.status_code == 202


async def test_protocol_version_header_is_checked(server: ServerThread, http: httpx.AsyncClient) -> None:
    session = await open_session(http, server.url)
    bad = await session.post(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, **{"MCP-Protocol-Version": "2099-01-01"}
    )
    assert bad.status_code == 400
    assert "MCP-Protocol-Version" in bad.json()["error"]["message"]
    headers = {**JSON_HEADERS, "Mcp-Session-Id": session.id}  # absent: assumed 2025-03-26, accepted
    absent = await http.post(server.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=headers)
    assert absent.status_code == 200 and "result" in absent.json()


# --- security and HTTP rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Origin", "http://evil.example.com"),
        ("Origin", "null"),
        ("Host", "evil.example.com"),
        ("Host", "evil.example.com:80"),
    ],
)
async def test_dns_rebinding_is_refused_with_403(
    server: ServerThread, http: httpx.AsyncClient, header: str, value: str
) -> None:
    response = await http.post(server.url, json=init_body(), headers={**JSON_HEADERS, header: value})
    assert response.status_code == 403
    body = response.json()
    assert body["error"]["code"] == -32600 and "id" not in body
    assert "mcp-session-id" not in response.headers


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]"])
async def test_loopback_hosts_and_origins_are_accepted(
    server: ServerThread, http: httpx.AsyncClient, host: str
) -> None:
    value = f"{host}:{server.port}"
    headers = {**JSON_HEADERS, "Host": value, "Origin": f"http://{value}"}
    response = await http.post(server.url, json=init_body(), headers=headers)
    assert response.status_code == 200, response.text


async def test_allowed_hosts_extend_the_allow_list(http: httpx.AsyncClient) -> None:
    thread = start_app(allowed_hosts=["mcp.example.com"], allowed_origins=["https://app.example"])
    try:
        ok = {**JSON_HEADERS, "Host": "mcp.example.com", "Origin": "https://app.example"}
        assert (await http.post(thread.url, json=init_body(), headers=ok)).status_code == 200
        same_origin = {**JSON_HEADERS, "Host": "mcp.example.com:8443", "Origin": "https://mcp.example.com:8443"}
        assert (await http.post(thread.url, json=init_body(), headers=same_origin)).status_code == 200
        other = {**JSON_HEADERS, "Host": "other.example.com"}
        assert (await http.post(thread.url, json=init_body(), headers=other)).status_code == 403
    finally:
        thread.stop()


async def test_content_negotiation_errors(server: ServerThread, http: httpx.AsyncClient) -> None:
    body = json.dumps(init_body()).encode()
    only_json = await http.post(
        server.url, content=body, headers={"Accept": "application/json", "Content-Type": "application/json"}
    )
    assert only_json.status_code == 406
    assert only_json.json()["error"]["code"] == -32600
    wildcard = await http.post(server.url, content=body, headers={"Accept": "*/*", "Content-Type": "application/json"})
    assert wildcard.status_code == 200
    text = await http.post(server.url, content=body, headers={"Accept": ACCEPT, "Content-Type": "text/plain"})
    assert text.status_code == 415
    charset = {"Accept": ACCEPT, "Content-Type": "application/json; charset=utf-8"}
    assert (await http.post(server.url, content=body, headers=charset)).status_code == 200
    get = await http.get(server.url, headers={"Accept": "application/json", "Mcp-Session-Id": "x"})
    assert get.status_code == 406
    put = await http.put(server.url, content=body, headers=JSON_HEADERS)
    assert put.status_code == 405 and "POST" in put.headers["allow"]
    elsewhere = await http.post(server.url.replace("/mcp", "/other"), content=body, headers=JSON_HEADERS)
    assert elsewhere.status_code == 404


async def test_oversized_body_is_413(http: httpx.AsyncClient) -> None:
    thread = start_app(max_body=1024)
    try:
        big = init_body()
        big["params"]["clientInfo"]["name"] = "x" * 2000
        response = await http.post(thread.url, json=big, headers=JSON_HEADERS)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == -32600

        async def chunks() -> Any:  # no Content-Length: the limit applies while reading
            for _ in range(10):
                yield b" " * 200

        streamed = await http.post(thread.url, content=chunks(), headers=JSON_HEADERS)
        assert streamed.status_code == 413
    finally:
        thread.stop()


async def test_malformed_bodies(server: ServerThread, http: httpx.AsyncClient) -> None:
    parse = await http.post(server.url, content=b'{"jsonrpc": "2.0", "id": 1, "method": ', headers=JSON_HEADERS)
    assert parse.status_code == 400
    assert parse.json() == {"jsonrpc": "2.0", "error": {"code": -32700, "message": parse.json()["error"]["message"]}}
    invalid = await http.post(server.url, content=b'{"jsonrpc": "1.0", "id": 7, "method": "x"}', headers=JSON_HEADERS)
    assert invalid.status_code == 400
    assert invalid.json()["error"]["code"] == -32600 and invalid.json()["id"] == 7
    scalar = await http.post(server.url, content=b"42", headers=JSON_HEADERS)
    assert scalar.status_code == 400 and scalar.json()["error"]["code"] == -32600


async def test_no_traceback_or_path_reaches_the_client(server: ServerThread, http: httpx.AsyncClient) -> None:
    session = await open_session(http, server.url)
    reply = await session.call(2, "crash", {})
    text = json.dumps(reply)
    assert reply["result"]["isError"] is True
    assert "secret" not in text and "/home" not in text and "Traceback" not in text


# --- answers: JSON and SSE -----------------------------------------------------------------------------------


@BOTH_RUNNERS
async def test_sync_answers_are_json(server: ServerThread, http: httpx.AsyncClient) -> None:
    session = await open_session(http, server.url)
    response = await session.post(call_body(2, "add", {"a": 2, "b": 3}))
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["structuredContent"] == {"result": 5}
    assert response.headers["mcp-session-id"] == session.id


async def test_progress_streams_over_sse_with_priming_and_retry(server: ServerThread, http: httpx.AsyncClient) -> None:
    session = await open_session(http, server.url)
    body = call_body(2, "progress", {"steps": 3})
    body["params"]["_meta"] = {"progressToken": "tok"}
    async with session.stream(body) as response:
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["x-accel-buffering"] == "no"
        async with SseReader(response) as reader:
            priming = await reader.next()
            assert priming.data == b"" and priming.id is not None
            assert reader.parser.retry_ms == 1000
            events = await reader.rest()
    msgs = messages(events)
    assert paced([m["params"]["progress"] for m in msgs[:-1]], [1, 2, 3])
    assert all(m["params"]["progressToken"] == "tok" for m in msgs[:-1])
    assert msgs[-1]["id"] == 2 and msgs[-1]["result"]["content"][0]["text"] == "3 steps"
    ids = [priming.id] + [e.id for e in events]
    assert len(set(ids)) == len(ids) and all(
        i is not None and i.startswith(priming.id.split("-")[0] + "-") for i in ids
    )


async def test_dropped_stream_is_resumed_with_last_event_id(server: ServerThread, http: httpx.AsyncClient) -> None:
    resume_key = unique("resume")
    session = await open_session(http, server.url)
    body = call_body(2, "slow", {"key": resume_key})
    body["params"]["_meta"] = {"progressToken": 7}
    async with session.stream(body) as response, SseReader(response) as reader:
        first = await reader.next_message()
        assert first["params"]["progress"] == 1
        last_id = reader.parser.last_event_id
    # The connection is gone; the tool goes on and its remaining messages wait in the event store.
    assert (await session.call(3, "release", {"key": resume_key}))["result"]["content"][0][
        "text"
    ] == f"set {resume_key}"
    assert last_id is not None
    async with session.stream(None, "GET", **{"Accept": "text/event-stream", "Last-Event-ID": last_id}) as resumed:
        assert resumed.status_code == 200
        msgs = messages(await SseReader(resumed).rest())
    assert msgs[0]["params"]["progress"] == 2
    assert msgs[-1]["id"] == 2 and msgs[-1]["result"]["content"][0]["text"] == f"released {resume_key}"
    # Delivered: the stream is forgotten.
    gone = await http.get(
        server.url, headers={**session.headers, "Accept": "text/event-stream", "Last-Event-ID": last_id}
    )
    assert gone.status_code == 400


class WaitingStore(InMemoryEventStore):
    """The built-in store, except that discarding waits first, as a store on disk or across a network would."""

    def __init__(self) -> None:
        super().__init__()
        self.discarded = threading.Event()  # set in the server's thread, waited for in the test's

    async def discard(self, stream: str) -> None:
        await anyio.lowlevel.checkpoint()
        await super().discard(stream)
        self.discarded.set()


async def test_a_store_that_waits_still_forgets_a_delivered_stream(http: httpx.AsyncClient) -> None:
    """The stream is forgotten after the response's task group was cancelled: the settling is shielded for any
    store but the built-in one, whose methods never wait."""
    store = WaitingStore()
    thread = start_app(event_store=store)
    try:
        session = await open_session(http, thread.url)
        body = call_body(2, "progress", {"steps": 2})
        body["params"]["_meta"] = {"progressToken": 1}
        async with session.stream(body) as response:
            assert response.headers["content-type"] == "text/event-stream"
            msgs = messages(await SseReader(response).rest())
        assert msgs[-1]["id"] == 2
        with anyio.fail_after(10):
            assert await anyio.to_thread.run_sync(store.discarded.wait, 10)
        assert len(store) == 0
    finally:
        thread.stop()


async def test_server_closes_the_stream_and_the_client_polls(server: ServerThread, http: httpx.AsyncClient) -> None:
    polling_key = unique("polling")
    session = await open_session(http, server.url)
    async with session.stream(call_body(2, "poll", {"key": polling_key})) as response:
        assert response.headers["content-type"] == "text/event-stream"
        reader = SseReader(response)
        events = await reader.rest()  # the server ends the connection
        assert messages(events) == []  # closed before the answer, priming event only
        assert reader.parser.retry_ms == 1000
        last_id = reader.parser.last_event_id
    assert last_id is not None
    await session.call(3, "release", {"key": polling_key})
    async with session.stream(None, "GET", **{"Accept": "text/event-stream", "Last-Event-ID": last_id}) as resumed:
        msgs = messages(await SseReader(resumed).rest())
    assert msgs == [
        {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": f"polled {polling_key}"}]}}
    ]


async def test_resumption_before_the_answer_continues_live(server: ServerThread, http: httpx.AsyncClient) -> None:
    live_key = unique("live")
    session = await open_session(http, server.url)
    async with session.stream(call_body(2, "poll", {"key": live_key})) as response:
        reader = SseReader(response)
        await reader.rest()
        last_id = reader.parser.last_event_id
    assert last_id is not None
    async with session.stream(None, "GET", **{"Accept": "text/event-stream", "Last-Event-ID": last_id}) as resumed:
        await session.call(3, "release", {"key": live_key})
        msgs = messages(await SseReader(resumed).rest())
    assert msgs[-1]["result"]["content"][0]["text"] == f"polled {live_key}"


@BOTH_RUNNERS
async def test_two_concurrent_post_streams(server: ServerThread, http: httpx.AsyncClient) -> None:
    one_key = unique("one")
    two_key = unique("two")
    session = await open_session(http, server.url)
    first_call = call_body("a", "slow", {"key": one_key}, meta={"progressToken": "a"})
    second_call = call_body("b", "slow", {"key": two_key}, meta={"progressToken": "b"})
    async with session.stream(first_call) as one, session.stream(second_call) as two:
        first, second = SseReader(one), SseReader(two)
        a0, b0 = await first.next(), await second.next()  # both read to the end below
        assert a0.id != b0.id and a0.id.split("-")[0] != b0.id.split("-")[0]
        await session.call(3, "release", {"key": two_key})
        rest_two = messages(await second.rest())
        await session.call(4, "release", {"key": one_key})
        rest_one = messages(await first.rest())
    assert rest_two[-1]["id"] == "b" and rest_two[-1]["result"]["content"][0]["text"] == f"released {two_key}"
    assert rest_one[-1]["id"] == "a" and rest_one[-1]["result"]["content"][0]["text"] == f"released {one_key}"
    assert all(m.get("id") != "a" for m in rest_two) and all(m.get("id") != "b" for m in rest_one)


async def test_elicitation_request_over_sse_answered_by_post(server: ServerThread, http: httpx.AsyncClient) -> None:
    session = await open_session(http, server.url, elicitation={})
    call = call_body(2, "ask", {"question": "Name?"})
    async with session.stream(call) as response, SseReader(response) as reader:
        request = await reader.next_message()
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Name?"
        result = {"action": "accept", "content": {"answer": "Ada"}}
        posted = await session.post({"jsonrpc": "2.0", "id": request["id"], "result": result})
        assert posted.status_code == 202
        final = await reader.next_message()
    assert final["id"] == 2 and final["result"]["content"][0]["text"] == "accept: Ada"


@BOTH_RUNNERS
async def test_sampling_request_over_sse_answered_by_post(server: ServerThread, http: httpx.AsyncClient) -> None:
    session = await open_session(http, server.url, sampling={})
    async with session.stream(call_body(2, "sample", {"prompt": "hi"})) as response, SseReader(response) as reader:
        request = await reader.next_message()
        assert request["method"] == "sampling/createMessage"
        result = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m1"}
        assert (await session.post({"jsonrpc": "2.0", "id": request["id"], "result": result})).status_code == 202
        final = await reader.next_message()
    assert final["result"]["content"][0]["text"] == "m1: hello"


async def test_standalone_get_stream(server: ServerThread, http: httpx.AsyncClient) -> None:
    session = await open_session(http, server.url)
    headers = {"Accept": "text/event-stream"}
    async with session.stream(None, "GET", **headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        async with SseReader(response) as reader:
            priming = await reader.next()
            assert priming.data == b"" and priming.id is not None
            second = await http.get(server.url, headers={**session.headers, **headers})
            assert second.status_code == 409


@BOTH_RUNNERS
async def test_cancelled_request_gets_no_answer(server: ServerThread, http: httpx.AsyncClient) -> None:
    key = unique("cancel-me")
    session = await open_session(http, server.url)
    async with session.stream(call_body(2, "wait_for", {"key": key}, meta={"progressToken": 1})) as response:
        reader = SseReader(response)
        assert (await reader.next_message())["method"] == "notifications/progress"  # it is waiting
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        assert (await session.post(cancel)).status_code == 202
        rest = messages(await reader.rest())  # the stream ends, unanswered
    assert rest == []
    state = await session.call(3, "status", {"key": key})
    assert state["result"]["content"][0]["text"] == "cancelled"


async def test_disconnect_is_not_cancellation_in_the_handshake_era(
    server: ServerThread, http: httpx.AsyncClient
) -> None:
    key = unique("keep-going")
    session = await open_session(http, server.url)
    async with session.stream(call_body(2, "wait_for", {"key": key})) as response, SseReader(response) as reader:
        priming = await reader.next()  # no progress token: SSE because the handler is asynchronous
        assert priming.data == b"" and priming.id is not None
    await session.call(3, "release", {"key": key})
    async with session.stream(None, "GET", **{"Accept": "text/event-stream", "Last-Event-ID": priming.id}) as resumed:
        msgs = messages(await SseReader(resumed).rest())
    assert msgs[-1]["result"]["content"][0]["text"] == f"released {key}"
    assert (await session.call(4, "status", {"key": key}))["result"]["content"][0]["text"] == "done"


@BOTH_RUNNERS
async def test_duplicate_in_flight_id_is_refused(server: ServerThread, http: httpx.AsyncClient) -> None:
    dup_key = unique("dup")
    session = await open_session(http, server.url)
    async with session.stream(call_body(2, "wait_for", {"key": dup_key})):
        again = await session.post(call_body(2, "add", {"a": 1}))
        assert again.status_code == 400 and again.json()["id"] == 2
        await session.call(3, "release", {"key": dup_key})


# --- batches (2025-03-26 only) -------------------------------------------------------------------------------


@BOTH_RUNNERS
async def test_batches_on_2025_03_26(server: ServerThread, http: httpx.AsyncClient) -> None:
    session = await open_session(http, server.url, "2025-03-26")
    assert session.version == "2025-03-26"
    batch = [
        call_body(1, "add", {"a": 1, "b": 1}),
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        call_body(2, "add", {"a": 2, "b": 2}),
        {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {}},
    ]
    response = await session.post(batch)
    assert response.status_code == 200
    replies = {r["id"]: r for r in response.json()}
    assert replies[1]["result"]["structuredContent"] == {"result": 2}
    assert replies[2]["result"]["structuredContent"] == {"result": 4}
    assert replies[3]["error"]["code"] == -32600
    only_notes = await session.post([{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}])
    assert only_notes.status_code == 202
    empty = await session.post([])
    assert empty.status_code == 400


async def test_batches_are_refused_on_later_revisions(server: ServerThread, http: httpx.AsyncClient) -> None:
    session = await open_session(http, server.url, "2025-06-18")
    response = await session.post([call_body(1, "add", {"a": 1})])
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


async def test_every_revision_handshakes(server: ServerThread, http: httpx.AsyncClient) -> None:
    for version in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"):
        session = await open_session(http, server.url, version)
        assert session.version == version
        reply = await session.call(2, "add", {"a": 40, "b": 2})
        assert "result" in reply


# --- preferences -----------------------------------------------------------------------------------------------


async def test_json_preference_never_streams(http: httpx.AsyncClient) -> None:
    thread = start_app(json_response_preference="json")
    try:
        session = await open_session(http, thread.url)
        body = call_body(2, "progress", {"steps": 2})
        body["params"]["_meta"] = {"progressToken": 1}
        response = await session.post(body)
        assert response.headers["content-type"] == "application/json"
        assert response.json()["result"]["content"][0]["text"] == "2 steps"
    finally:
        thread.stop()


async def test_sse_preference_always_streams(http: httpx.AsyncClient) -> None:
    thread = start_app(json_response_preference="sse")
    try:
        session = await open_session(http, thread.url)
        response = await session.post(call_body(2, "add", {"a": 1, "b": 2}))
        assert response.headers["content-type"] == "text/event-stream"
        assert response_of(response, 2)["result"]["structuredContent"] == {"result": 3}
    finally:
        thread.stop()


async def test_handlers_read_the_headers_of_their_post_in_both_eras(http: httpx.AsyncClient) -> None:
    """``Context.request_headers``: a handler answered at once, one that has to wait, both eras."""
    probe = Server("headers", "1")

    @probe.tool(inline=True)
    def now(ctx: Context) -> str:
        return ctx.request_headers.get("x-probe", "none")

    @probe.tool()
    async def later(ctx: Context) -> str:
        return ctx.request_headers.get("x-probe", "none")

    thread = start_app(probe)
    try:
        session = await open_session(http, thread.url)
        for ident, tool in enumerate(("now", "later"), start=2):
            reply = await session.post(call_body(ident, tool, {}), **{"x-probe": tool})
            assert response_of(reply, ident)["result"]["content"][0]["text"] == tool
            body = stateless_body(ident, "tools/call", {"name": tool, "arguments": {}})
            headers = {**stateless_headers("tools/call", tool), "x-probe": tool}
            reply = await http.post(thread.url, json=body, headers=headers)
            assert response_of(reply, ident)["result"]["content"][0]["text"] == tool
    finally:
        thread.stop()


@BOTH_RUNNERS
async def test_a_batch_of_many_ready_answers_and_one_pending_is_answered_whole(
    server: ServerThread, http: httpx.AsyncClient
) -> None:
    """More answers ready at once than a stream's buffer holds, and one that is not: the POST still gets them all."""
    session = await open_session(http, server.url, "2025-03-26")
    pings = [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(1, 201)]
    with anyio.fail_after(10):
        response = await session.post([*pings, call_body(999, "add", {"a": 1, "b": 1})])
    assert response.status_code == 200
    if response.headers["content-type"].startswith("application/json"):
        replies = {r["id"]: r for r in response.json()}
    else:
        replies = {r["id"]: r for r in messages(parse_sse(response.content))}
    assert len(replies) == 201 and replies[999]["result"]["structuredContent"] == {"result": 2}
