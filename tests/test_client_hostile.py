"""Our client against servers that misbehave: what a server the user does not control can do to the client.

Real peers: a stdio server process (``fixtures/hostile_stdio.py``, standard library only) and an ASGI endpoint on
a real uvicorn that answers the handshake and then misbehaves. Each test fails without the limit or the check it
pins: the call gets a clear error at once, rather than a bare decoding error, an endless read, or a hang until
its timeout.
"""

from __future__ import annotations

import json
import logging
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from helpers import FIXTURES, PYTHON
from http_support import HTTPX_GENERATORS, ServerThread, read_body
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Client, ConnectionClosed, RequestTimeout, RpcError
from jsonrpc_mcp.errors import ProtocolViolation

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]

MiB = 1024 * 1024


def hostile_stdio(mode: str) -> list[str]:
    return [PYTHON, str(FIXTURES / "hostile_stdio.py"), mode]


# --- stdio -----------------------------------------------------------------------------------------------------


async def test_a_result_of_the_wrong_shape_is_a_protocol_violation_naming_the_method() -> None:
    async with Client.connect_stdio(hostile_stdio("shape"), protocol_version="2025-11-25") as client:
        with anyio.fail_after(10), pytest.raises(ProtocolViolation) as info:
            await client.list_tools()
    message = str(info.value)
    assert message.startswith("tools/list: the server's result is not a valid ListToolsResult: ")
    assert "$.tools" in message


async def test_an_initialize_result_of_the_wrong_shape_is_a_protocol_violation() -> None:
    with anyio.fail_after(10), pytest.raises(ProtocolViolation) as info:
        async with Client.connect_stdio(hostile_stdio("initialize-shape"), protocol_version="2025-11-25"):
            pass
    assert str(info.value).startswith("initialize: the server's result is not a valid InitializeResult: ")


async def test_an_answer_nested_too_deeply_fails_its_call_at_once() -> None:
    async with Client.connect_stdio(hostile_stdio("deep"), protocol_version="2025-11-25") as client:
        with anyio.fail_after(10), pytest.raises(RpcError) as info:  # (the call's own timeout is 300 s)
            await client.list_tools()
        assert info.type is RpcError and "nested too deeply" in info.value.message
        with anyio.fail_after(10), pytest.raises(RpcError):  # the connection goes on
            await client.list_tools()


async def test_stray_answers_are_logged_in_one_short_line_each(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="jsonrpc_mcp")
    async with Client.connect_stdio(hostile_stdio("stray"), protocol_version="2025-11-25") as client:
        with anyio.fail_after(10):
            assert await client.list_tools() == []
    lines = [record.getMessage() for record in caplog.records]
    assert any(line.startswith("ignoring a response to unknown request id 'xxx") for line in lines)
    assert any(line.startswith("peer sent an error without id: -32603 'it failed\\nWARNING") for line in lines)
    assert all(len(line) < 400 and "\n" not in line for line in lines)


@pytest.mark.parametrize("stderr", [subprocess.PIPE, subprocess.STDOUT], ids=["PIPE", "STDOUT"])
async def test_a_stderr_nothing_reads_is_refused_before_the_server_starts(stderr: int) -> None:
    """A pipe nobody reads would stop a server that writes more than 64 KiB of logs (and with it the client)."""
    with pytest.raises(ValueError, match=r"stderr must be None \(inherited\), subprocess.DEVNULL or a file descriptor"):
        async with Client.connect_stdio(hostile_stdio("garbage"), stderr=stderr):
            pass


async def test_answers_to_no_request_or_twice_to_one_are_logged_and_change_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="jsonrpc_mcp")
    async with Client.connect_stdio(hostile_stdio("twice"), protocol_version="2025-11-25") as client:
        with anyio.fail_after(10):
            assert await client.list_tools() == []
            assert await client.list_tools() == []
    lines = [record.getMessage() for record in caplog.records]
    assert "ignoring a response to unknown request id 'never-used'" in lines
    assert "ignoring a response to unknown request id 2" in lines  # the second answer to the first tools/list


async def test_garbage_on_stdout_is_skipped_and_the_call_answered() -> None:
    async with Client.connect_stdio(hostile_stdio("garbage"), protocol_version="2025-11-25") as client:
        with anyio.fail_after(10):
            assert await client.list_tools() == []
            assert await client.list_tools() == []


async def test_a_server_that_closes_its_stdout_and_runs_on_is_named_so() -> None:
    """(Not started again: what is pinned is how the end is named.)"""
    async with Client.connect_stdio(
        hostile_stdio("close-stdout"), protocol_version="2025-11-25", restart=False
    ) as client:
        with anyio.fail_after(10), pytest.raises(ConnectionClosed) as info:
            await client.list_tools()
    assert info.value.message == "the server process closed its stdout before answering tools/list"


async def test_a_flood_of_notifications_waits_for_the_async_callbacks_and_loses_none() -> None:
    """An async ``on_notification`` runs in a task of its own; those running count in the connection's bound on
    handlers (128), so a flood stops being read while they are busy (it waits in the server's pipe), rather than
    becoming ten thousand tasks; every notification is still delivered."""
    state = {"running": 0, "peak": 0, "seen": 0}
    full, release, all_seen = anyio.Event(), anyio.Event(), anyio.Event()

    async def on_notification(method: str, params: dict[str, Any]) -> None:
        state["seen"] += 1
        state["running"] += 1
        state["peak"] = max(state["peak"], state["running"])
        if state["running"] >= 128:
            full.set()
        await release.wait()
        state["running"] -= 1
        if state["seen"] == 10_000 and not state["running"]:
            all_seen.set()

    options: Any = {"protocol_version": "2025-11-25", "on_notification": on_notification}
    async with Client.connect_stdio(hostile_stdio("flood"), **options) as client:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.list_tools)
                await full.wait()
                release.set()
            await all_seen.wait()
    assert state["peak"] == 128


async def test_a_server_that_never_answers_initialize_times_out_and_is_not_sent_a_cancellation() -> None:
    """The spec: a client must not cancel ``initialize``. The caller gets the timeout, the server nothing more."""
    with tempfile.TemporaryFile() as stderr:
        with anyio.fail_after(10), pytest.raises(RequestTimeout) as info:
            options: Any = {"stderr": stderr.fileno(), "request_timeout": 0.2, "protocol_version": "2025-11-25"}
            async with Client.connect_stdio(hostile_stdio("mute"), **options):
                pass
        stderr.seek(0)
        received = json.loads(stderr.read())
    assert info.value.message == "initialize: no response within 0.2 s"
    assert received == ["initialize"]


async def test_endless_pagination_stops_at_max_pages() -> None:
    async with Client.connect_stdio(hostile_stdio("pages"), protocol_version="2025-11-25") as client:
        with anyio.fail_after(30), pytest.raises(ProtocolViolation) as info:
            await client.list_tools()
        assert str(info.value) == "tools/list: the server went on paginating past 1000 pages (max_pages)"
        client.max_pages = 3
        with anyio.fail_after(10), pytest.raises(ProtocolViolation, match="past 3 pages"):
            await client.list_tools()


# --- Streamable HTTP -------------------------------------------------------------------------------------------


class HostileEndpoint:
    """An MCP endpoint (ASGI) that answers the handshake, ``ping`` and ``tools/list`` well, and ``tools/call``
    as ``mode`` says:

    * ``endless-json``: ``application/json`` headers, then a body that never ends;
    * ``big-json``: a valid result of ``size`` bytes of text;
    * ``silent-sse``: an SSE stream with one comment and then nothing, until the client goes;
    * ``html-502``: a proxy's error page;
    * ``bad-session-id``: a session id that is not visible ASCII;
    * ``sse-for-notifications``: every notification answered by an event stream that stays open and silent;
    * ``text-plain``: a ``200`` in ``text/plain``;
    * ``huge-retry``: an event stream with an event id and a ``retry`` of 400 digits, closed at once; the
      standalone GET stream the same, with a ``ping`` request for the client (``answered`` once it is answered).
    """

    def __init__(self, mode: str, size: int = 0) -> None:
        self.mode = mode
        self.size = size
        self.answered = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] == "GET" and self.mode == "huge-retry":
            headers = [(b"content-type", b"text/event-stream")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            ping = b'{"jsonrpc":"2.0","id":"s1","method":"ping"}'
            await send(
                {"type": "http.response.body", "body": b"retry: 1" + b"0" * 400 + b"\nid: g1\ndata: " + ping + b"\n\n"}
            )
            return
        if scope["method"] != "POST":
            await _plain(send, 405)
            return
        body = await read_body(receive)
        request = json.loads(body)
        method, ident = request.get("method"), request.get("id")
        if method is None and ident == "s1":
            self.answered.set()
            await _plain(send, 202)
        elif ident is None and self.mode == "sse-for-notifications":
            await self._silent(receive, send)
        elif ident is None:
            await _plain(send, 202)
        elif method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
            sid = "séance".encode("latin-1") if self.mode == "bad-session-id" else b"s1"
            await _json(send, {"jsonrpc": "2.0", "id": ident, "result": result}, [(b"mcp-session-id", sid)])
        elif method == "tools/call" and self.mode == "endless-json":
            await self._endless(receive, send)
        elif method == "tools/call" and self.mode == "text-plain":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"OK"})
        elif method == "tools/call" and self.mode == "huge-retry":
            headers = [(b"content-type", b"text/event-stream")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"id: 1\nretry: 1" + b"0" * 400 + b"\ndata:\n\n"})
        elif method == "tools/call" and self.mode == "silent-sse":
            await self._silent(receive, send)
        elif method == "tools/call" and self.mode == "html-502":
            page = b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body>\x1b[2J" + b"x" * 99_999
            headers = [(b"content-type", b"text/html; charset=utf-8")]
            await send({"type": "http.response.start", "status": 502, "headers": headers})
            await send({"type": "http.response.body", "body": page})
        elif method == "tools/call":
            text = {"type": "text", "text": "x" * self.size}
            await _json(send, {"jsonrpc": "2.0", "id": ident, "result": {"content": [text]}})
        elif method == "tools/list":
            await _json(send, {"jsonrpc": "2.0", "id": ident, "result": {"tools": []}})
        else:
            await _json(send, {"jsonrpc": "2.0", "id": ident, "result": {}})

    async def _endless(self, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        gone = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_note_disconnect, receive, gone)
            await send({"type": "http.response.body", "body": b'{"jsonrpc":"2.0","id":2,"result":"', "more_body": True})
            while not gone.is_set():
                await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})
                await anyio.lowlevel.checkpoint()

    async def _silent(self, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b": still here\n\n", "more_body": True})
        gone = anyio.Event()
        await _note_disconnect(receive, gone)


async def _note_disconnect(receive: Any, gone: anyio.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


async def _plain(send: Any, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _json(send: Any, document: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(document).encode()
    start = [(b"content-type", b"application/json"), *(headers or [])]
    await send({"type": "http.response.start", "status": 200, "headers": start})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def endpoint(request: pytest.FixtureRequest) -> Iterator[tuple[HostileEndpoint, ServerThread]]:
    app = HostileEndpoint(*request.param)
    thread = ServerThread(app, lifespan="off")
    yield app, thread
    thread.stop()


@pytest.mark.parametrize("endpoint", [("endless-json",)], indirect=True)
async def test_a_json_answer_that_never_ends_fails_its_call_past_the_limit(
    endpoint: tuple[HostileEndpoint, ServerThread],
) -> None:
    _, thread = endpoint
    async with Client.connect_http(thread.url, protocol_version="2025-11-25") as client:
        with anyio.fail_after(30), pytest.raises(RpcError) as info:
            await client.call_tool("anything")
        assert info.value.message == f"the server's answer exceeds {16 * MiB} bytes (max_event)"
        await client.ping()  # the session goes on


@pytest.mark.parametrize("endpoint", [("big-json", 4 * MiB)], indirect=True)
async def test_a_json_answer_of_several_mib_is_read_whole(endpoint: tuple[HostileEndpoint, ServerThread]) -> None:
    _, thread = endpoint
    async with Client.connect_http(thread.url, protocol_version="2025-11-25") as client:
        with anyio.fail_after(30):
            result = await client.call_tool("anything")
    assert len(result.content[0].text) == 4 * MiB  # type: ignore[union-attr]


@pytest.mark.parametrize("endpoint", [("big-json", 64 * 1024)], indirect=True)
async def test_the_limit_of_a_json_answer_is_max_event(endpoint: tuple[HostileEndpoint, ServerThread]) -> None:
    _, thread = endpoint
    options: Any = {"http_options": {"max_event": 32 * 1024}, "protocol_version": "2025-11-25"}
    async with Client.connect_http(thread.url, **options) as client:
        with anyio.fail_after(10), pytest.raises(RpcError, match=r"exceeds 32768 bytes \(max_event\)"):
            await client.call_tool("anything")


@pytest.mark.parametrize("endpoint", [("silent-sse",)], indirect=True)
async def test_calls_given_up_on_a_silent_stream_close_it_and_hold_no_post(
    endpoint: tuple[HostileEndpoint, ServerThread],
) -> None:
    """Every call times out on a stream that never answers; each closes its stream, so with two concurrent POSTs
    allowed a third call and a ping still go out (without that, they would wait for a free POST for ever)."""
    _, thread = endpoint
    options: Any = {"http_options": {"max_concurrent_posts": 2}, "protocol_version": "2025-11-25"}
    async with Client.connect_http(thread.url, **options) as client:
        with anyio.fail_after(20):
            for _ in range(3):
                with pytest.raises(RequestTimeout):
                    await client.call_tool("anything", timeout=0.2)
            await client.ping()


@pytest.mark.parametrize("endpoint", [("html-502",)], indirect=True)
async def test_an_html_error_page_is_told_by_its_title(endpoint: tuple[HostileEndpoint, ServerThread]) -> None:
    _, thread = endpoint
    async with Client.connect_http(thread.url, protocol_version="2025-11-25") as client:
        with anyio.fail_after(10), pytest.raises(RpcError) as info:
            await client.call_tool("anything")
    assert info.value.message == "the server answered HTTP 502: 502 Bad Gateway"


@pytest.mark.parametrize("endpoint", [("bad-session-id",)], indirect=True)
async def test_a_session_id_that_is_not_visible_ascii_fails_the_handshake(
    endpoint: tuple[HostileEndpoint, ServerThread],
) -> None:
    _, thread = endpoint
    with anyio.fail_after(10), pytest.raises(RpcError) as info:
        async with Client.connect_http(thread.url, protocol_version="2025-11-25"):
            pass
    assert info.value.message == "the server's Mcp-Session-Id is not visible ASCII (0x21 to 0x7E), as it must be"


@pytest.mark.parametrize("endpoint", [("sse-for-notifications",)], indirect=True)
async def test_an_event_stream_answering_a_notification_holds_nothing(
    endpoint: tuple[HostileEndpoint, ServerThread], caplog: pytest.LogCaptureFixture
) -> None:
    """The spec wants 202 for a notification; a stream that never ends there would hold the handshake (its
    notifications/initialized) and, one notification at a time, every concurrent POST."""
    _, thread = endpoint
    options: Any = {"http_options": {"max_concurrent_posts": 1}, "protocol_version": "2025-11-25"}
    with anyio.fail_after(20):
        async with Client.connect_http(thread.url, **options) as client:
            await client.notify_roots_changed()
            await client.ping()
    warning = "the server answered notifications/initialized with an event stream, where 202 is due: not read"
    assert warning in [record.getMessage() for record in caplog.records]


@pytest.mark.parametrize("endpoint", [("huge-retry",)], indirect=True)
async def test_a_retry_of_hundreds_of_digits_is_only_a_long_wait(
    endpoint: tuple[HostileEndpoint, ServerThread],
) -> None:
    """The stream ends before its answer with an absurd ``retry``: the call waits (at most an hour, here its own
    timeout) to resume it, and the session goes on; converting the delay used to fail and end the connection."""
    _, thread = endpoint
    async with Client.connect_http(thread.url, protocol_version="2025-11-25") as client:
        with anyio.fail_after(10):
            with pytest.raises(RequestTimeout):
                await client.call_tool("anything", timeout=0.3)
            await client.ping()


@pytest.mark.parametrize("endpoint", [("huge-retry",)], indirect=True)
async def test_a_get_stream_ending_with_a_retry_of_hundreds_of_digits_leaves_the_session_whole(
    endpoint: tuple[HostileEndpoint, ServerThread],
) -> None:
    """The standalone stream ends right after a request for us and an absurd ``retry``: the client answers, waits
    (at most an hour) to resume it, and goes on; converting the delay used to fail and end the whole connection."""
    app, thread = endpoint
    async with Client.connect_http(thread.url, protocol_version="2025-11-25") as client:
        with anyio.fail_after(10):
            assert await anyio.to_thread.run_sync(app.answered.wait, 10)
            await client.ping()
            await client.ping()


@pytest.mark.parametrize("endpoint", [("text-plain",)], indirect=True)
async def test_an_answer_of_another_content_type_fails_its_call(endpoint: tuple[HostileEndpoint, ServerThread]) -> None:
    _, thread = endpoint
    async with Client.connect_http(thread.url, protocol_version="2025-11-25") as client:
        with anyio.fail_after(10), pytest.raises(RpcError) as info:
            await client.call_tool("anything")
        assert info.value.message == "unexpected content type 'text/plain' in the answer"
        await client.ping()
