"""The Streamable HTTP building blocks on their own: SSE codec, Host/Origin guard, content negotiation, the
event store, and the stateless-era checks (no sockets)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
import pytest

from jsonrpc_mcp.transports import _http_io, _http_sessions
from jsonrpc_mcp.transports._http_events import EventStore, InMemoryEventStore
from jsonrpc_mcp.transports._http_io import Headers, accepts, accepts_json_and_sse, is_json_content
from jsonrpc_mcp.transports._http_outlet import FINAL, OTHER, RESPONSE, Feed, Item, Outlet
from jsonrpc_mcp.transports._http_security import HostGuard, split_host
from jsonrpc_mcp.transports._http_session import SessionStream
from jsonrpc_mcp.transports._http_stateless import check_headers, check_meta, status_of
from jsonrpc_mcp.transports._sse import SseParser, SseTooLarge, encode_comment, encode_event, encode_retry

# --- SSE ---------------------------------------------------------------------------------------------------------


def test_sse_round_trip_with_ids_retry_and_multiline_data() -> None:
    wire = (
        encode_event(b"", event_id="3-0", retry_ms=500)
        + encode_comment(b" keep-alive")
        + encode_event(b'{"a":1}', event_id="3-1")
        + encode_event(b"line one\nline two")
        + encode_retry(250)
    )
    parser = SseParser()
    events = parser.feed(wire)
    assert [(e.id, e.data) for e in events] == [("3-0", b""), ("3-1", b'{"a":1}'), ("3-1", b"line one\nline two")]
    assert parser.retry_ms == 250 and parser.last_event_id == "3-1"


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_sse_line_endings_and_byte_by_byte_feeding(newline: bytes) -> None:
    wire = b"id: 7" + newline + b"event: message" + newline + b"data: x" + newline + newline
    parser = SseParser()
    events = []
    for i in range(len(wire)):
        events += parser.feed(wire[i : i + 1])
    assert [(e.id, e.data, e.event) for e in events] == [("7", b"x", "message")]


def test_sse_event_without_data_is_not_dispatched_and_size_is_bounded() -> None:
    parser = SseParser(max_event=16)
    assert parser.feed(b"id: 1\n\n") == []
    assert parser.last_event_id == "1"
    with pytest.raises(SseTooLarge):
        parser.feed(b"data: " + b"x" * 32 + b"\n")
    with pytest.raises(SseTooLarge):
        SseParser(max_event=16).feed(b"data: " + b"y" * 32)  # an unterminated line


# --- Host and Origin -----------------------------------------------------------------------------------------------


def test_split_host() -> None:
    assert split_host("LocalHost:8000") == ("localhost", "8000")
    assert split_host("[::1]:9") == ("[::1]", "9")
    assert split_host("::1") == ("[::1]", None)
    assert split_host("example.com") == ("example.com", None)


def test_host_guard_defaults_to_loopback() -> None:
    guard = HostGuard()
    for ok in ("localhost", "localhost:1", "127.0.0.1:8000", "[::1]:8000", None):
        assert guard.host_ok(ok)
    for bad in ("evil.example.com", "evil.example.com:8000", "127.0.0.2", "localhost.evil.com"):
        assert not guard.host_ok(bad)
    assert guard.origin_ok(None, "localhost:1")
    assert guard.origin_ok("http://localhost:3000", "localhost:8000")
    assert guard.origin_ok("http://[::1]:3000", "[::1]:8000")
    for bad in ("http://evil.example.com", "null", "file://", "javascript:alert(1)", "http://user@localhost"):
        assert not guard.origin_ok(bad, "localhost:8000")


def test_host_guard_configuration() -> None:
    guard = HostGuard(["mcp.example.com", "api.example.com:8443"], ["https://app.example"])
    assert guard.host_ok("mcp.example.com:1234") and guard.host_ok("api.example.com:8443")
    assert not guard.host_ok("api.example.com:8444")
    assert guard.origin_ok("https://app.example/", "mcp.example.com")
    assert guard.origin_ok("https://mcp.example.com", "mcp.example.com")
    assert not guard.origin_ok("https://other.example", "mcp.example.com")
    public = HostGuard(["*"])
    assert public.host_ok("anything.example")
    assert public.origin_ok("https://anything.example", "anything.example")  # same origin
    assert not public.origin_ok("https://attacker.example", "anything.example")
    assert HostGuard(allowed_origins=["*"]).origin_ok("https://attacker.example", "localhost")


# --- content negotiation -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "ok"),
    [
        ("application/json, text/event-stream", True),
        ("text/event-stream;q=0.9, application/json", True),
        ("*/*", True),
        ("application/*, text/*", True),
        ("application/json", False),
        ("application/json, text/event-stream;q=0", False),
        (None, False),
    ],
)
def test_accepts(accept: str | None, ok: bool) -> None:
    assert accepts(accept, "application/json", "text/event-stream") is ok
    if accept is not None:  # a POST's check: the same verdict from the raw bytes, cached by them
        assert accepts_json_and_sse(accept.encode()) is ok
        assert accepts_json_and_sse(accept.encode()) is ok


def test_the_post_accept_verdicts_are_bounded() -> None:
    for i in range(3 * _http_io._ACCEPT_CACHE_SIZE):
        assert accepts_json_and_sse(b"application/json, text/event-stream, x/%d" % i)
    assert len(_http_io._json_and_sse_verdicts) <= _http_io._ACCEPT_CACHE_SIZE
    assert not accepts_json_and_sse(b"text/event-stream")


def test_content_type_and_headers() -> None:
    assert is_json_content("Application/JSON; charset=utf-8")
    assert not is_json_content("application/json-seq") and not is_json_content(None)
    headers = Headers([(b"Mcp-Name", b"a"), (b"mcp-name", b"b")])
    assert headers.get("mcp-name") == "a" and headers.repeated(b"mcp-name")
    lower = Headers(iter([(b"host", b"h"), (b"x-a", b"1"), (b"x-a", b"2"), (b"accept", b"*/*")]))
    assert lower.get("x-a") == "1" and lower.repeated(b"x-a") and lower.get("nope") is None
    assert not lower.repeated(b"host") and not lower.repeated(b"nope")
    assert list(lower.as_dict().items()) == [("host", "h"), ("x-a", "1"), ("accept", "*/*")]
    assert Headers([]).as_dict() == {} and Headers([]).get("host") is None
    single = Headers([(b"host", b"h"), (b"mcp-name", b"n")])  # no name sent twice: the quick path of repeated
    assert single.raw(b"mcp-name") == b"n" and not single.repeated(b"mcp-name") and single.raw(b"mcp-method") is None


def test_header_values_may_hold_visible_ascii_and_tabs_only() -> None:
    def problem(value: bytes) -> str | None:
        headers = Headers([(b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", value)])
        return check_headers(headers, "ping", {"_meta": META}, lambda name: None)

    assert problem(b"ping") is None and problem(b" \tping\t ") is None
    assert "does not match" in (problem(b"pi\tng") or "")  # a tab inside is a valid character: just not "ping"
    for bad in (b"pi\x00ng", b"ping\x7f", b"p\xe9ng", b"pi\nng"):
        assert "characters not allowed" in (problem(bad) or ""), bad


# --- a session's inbound queue ---


async def _read_then_end(receive: Callable[[], Awaitable[Any]], got: list[Any]) -> None:
    """What a reader gets: one item, then ``"end"`` once :class:`anyio.EndOfStream` is raised."""
    got.append(await receive())
    try:
        await receive()
    except anyio.EndOfStream:
        got.append("end")


@pytest.mark.anyio
async def test_session_inbound_queue_waits_for_room_and_ends() -> None:
    stream = SessionStream(cast(Any, None), buffer=2)
    await stream.push(b"1", None)
    await stream.push(b"2", None)
    pushed: list[bytes] = []

    async def push(frame: bytes) -> None:
        await stream.push(frame, None)
        pushed.append(frame)

    async with anyio.create_task_group() as tg:
        tg.start_soon(push, b"3")
        await anyio.wait_all_tasks_blocked()
        assert pushed == []  # full: the POST waits for the dispatcher
        assert await stream.receive() == [b"1", b"2"]
    assert pushed == [b"3"]
    received: list[Any] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read_then_end, stream.receive, received)
        await anyio.wait_all_tasks_blocked()
        assert received == [[b"3"]]  # waiting for more
        stream.end_input()
    assert received == [[b"3"], "end"]
    with pytest.raises(anyio.ClosedResourceError):
        await stream.push(b"4", None)
    stream.close_input()
    with pytest.raises(anyio.BrokenResourceError):
        await stream.push(b"5", None)


async def _drain(feed: Feed) -> list[bytes]:
    """The frames a feed hands out until its end."""
    frames = []
    while True:
        try:
            frames.append((await feed.receive()).frame)
        except anyio.EndOfStream:
            return frames


@pytest.mark.anyio
async def test_feed_hands_items_in_order_waits_for_room_and_ends_after_draining() -> None:
    feed = Feed(2)
    with pytest.raises(anyio.WouldBlock):
        feed.receive_nowait()
    feed.send_nowait(Item(1, b"a", OTHER))
    feed.send_nowait(Item(2, b"b", OTHER))
    with pytest.raises(anyio.WouldBlock):
        feed.send_nowait(Item(3, b"c", FINAL))  # full
    sent: list[int] = []

    async def send_third() -> None:
        await feed.send(Item(3, b"c", FINAL))
        sent.append(3)

    async with anyio.create_task_group() as tg:
        tg.start_soon(send_third)
        await anyio.wait_all_tasks_blocked()
        assert sent == []  # waits for room
        assert feed.receive_nowait().frame == b"a"
    assert sent == [3]
    feed.end()
    with pytest.raises(anyio.ClosedResourceError):
        feed.send_nowait(Item(4, b"d", OTHER))
    assert await _drain(feed) == [b"b", b"c"]  # what was queued, then the end
    with pytest.raises(anyio.EndOfStream):
        feed.receive_nowait()


@pytest.mark.anyio
async def test_feed_wakes_a_waiting_reader_and_refuses_items_once_the_reader_is_gone() -> None:
    feed = Feed(4)
    got: list[Any] = []

    async def frame() -> bytes:
        return (await feed.receive()).frame

    async with anyio.create_task_group() as tg:
        tg.start_soon(_read_then_end, frame, got)
        await anyio.wait_all_tasks_blocked()
        feed.send_nowait(Item(0, b"x", FINAL))
        await anyio.wait_all_tasks_blocked()
        assert got == [b"x"]
        feed.end()
    assert got == [b"x", "end"]

    feed = Feed(4)
    feed.send_nowait(Item(0, b"dropped", OTHER))
    feed.close()
    with pytest.raises(anyio.ClosedResourceError):
        feed.receive_nowait()
    with pytest.raises(anyio.BrokenResourceError):
        feed.send_nowait(Item(0, b"late", OTHER))


@pytest.mark.anyio
async def test_a_blocked_outlet_put_ends_when_its_connection_goes() -> None:
    outlet = Outlet(None, buffer=1)
    feed = outlet.connect()
    await outlet.put(b"1")
    done: list[bool] = []

    async def put() -> None:
        await outlet.put(b"2")  # no room: waits for the reader
        done.append(outlet.connected)

    async with anyio.create_task_group() as tg:
        tg.start_soon(put)
        await anyio.wait_all_tasks_blocked()
        assert done == []
        outlet.disconnect(feed)
    assert done == [False]  # the frame had nowhere to go, and the put did not hang
    again = outlet.connect()
    await outlet.put(b"3", FINAL)
    assert outlet.done and not outlet.connected
    assert await _drain(again) == [b"3"]


async def _writers_waiting_for_room(
    put: Callable[[bytes], Awaitable[None]], take: Callable[[], Awaitable[bytes]]
) -> None:
    """Two writers wait for room in a full queue of one (``put`` fills it first); one of them gives up (its task
    is cancelled): that does not wake or fail the other, which gets its frame in once the reader ``take``s."""
    await put(b"first")
    done: list[bytes] = []

    async def write(frame: bytes) -> None:
        await put(frame)
        done.append(frame)

    async with anyio.create_task_group() as tg:
        gone = anyio.CancelScope()

        async def write_then_go() -> None:
            with gone:
                await write(b"gone")

        tg.start_soon(write_then_go)
        tg.start_soon(write, b"second")
        await anyio.wait_all_tasks_blocked()
        gone.cancel()
        await anyio.wait_all_tasks_blocked()
        assert done == []  # still waiting: no room yet
        assert await take() == b"first"
    assert done == [b"second"]
    assert await take() == b"second"


@pytest.mark.anyio
async def test_posts_waiting_for_room_in_a_full_session_queue_are_independent() -> None:
    """POSTs of one session waiting for room in its inbound queue (one of them gone with its client)."""
    stream = SessionStream(cast(Any, object()), buffer=1)

    async def take() -> bytes:
        return (await stream.receive())[0]

    await _writers_waiting_for_room(lambda frame: stream.push(frame, None), take)


@pytest.mark.anyio
async def test_a_feed_with_several_writers_waiting_for_room() -> None:
    """The same for a response's feed (a batch's handlers, or several notifications, writing to one stream)."""
    feed = Feed(1)

    async def take() -> bytes:
        return (await feed.receive()).frame

    await _writers_waiting_for_room(lambda frame: feed.send(Item(0, frame, OTHER)), take)


@pytest.mark.anyio
async def test_session_stream_routes_answers_without_reading_them() -> None:
    class Owner:
        def __init__(self) -> None:
            self.exchanges: dict[Any, Any] = {}
            self.standalone = Outlet(None)

    class Exchange:
        def __init__(self, ids: set[Any]) -> None:
            self.waiting = ids
            self.outlet = Outlet(None)

    owner = Owner()
    stream = SessionStream(cast(Any, owner), buffer=4)
    batch = Exchange({1, 2})
    owner.exchanges.update({1: batch, 2: batch})
    first, last = batch.outlet.connect(), owner.standalone.connect()
    # Answers are routed by the id they answer: the first of a batch is not the exchange's last frame.
    await stream.send_replies([(b"answer-1", 1), (b"[parse error]", None), (b"answer-2", 2)])
    assert [(i.frame, i.kind) for i in (first.receive_nowait(), first.receive_nowait())] == [
        (b"answer-1", RESPONSE),
        (b"answer-2", FINAL),
    ]
    assert last.receive_nowait().frame == b"[parse error]"
    assert owner.exchanges == {} and batch.outlet.done


@pytest.mark.anyio
async def test_memory_is_released_when_a_burst_of_sessions_has_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    releases: list[int] = []
    monkeypatch.setattr(_http_sessions, "TRIM_AFTER", 2)
    monkeypatch.setattr(_http_sessions, "release_memory", lambda: releases.append(1))

    class Fake:
        def __init__(self, sid: str) -> None:
            self.id = sid
            self.task: object = None
            self.closed = False
            self.outlets: dict[str, Any] = {}
            self.done = anyio.Event()

        async def run(self) -> None:
            await self.done.wait()

        def terminate(self) -> None:
            self.closed = True

        end_untasked = terminate

    table = _http_sessions.SessionTable(idle_timeout=60.0, max_sessions=10)
    async with table.run():
        first, second = Fake("a"), Fake("b")
        await table.start(cast(Any, first))
        await table.start(cast(Any, second))
        table.spawn(cast(Any, first))  # one session with a task (its dispatcher ran)...
        await anyio.wait_all_tasks_blocked()
        first.done.set()
        await anyio.wait_all_tasks_blocked()
        assert releases == []  # one still lives
        table.end(cast(Any, second))  # ...and one without, ended here
        assert releases == [1] and second.closed  # the burst is over
        lone = Fake("c")
        await table.start(cast(Any, lone))
        table.end(cast(Any, lone))
        assert releases == [1]  # one session is no burst


def test_release_memory_runs_anywhere() -> None:
    _http_sessions.release_memory()
    _http_sessions.release_memory()


@pytest.mark.anyio
async def test_the_heap_trimmer_is_looked_up_before_any_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Looked up (importing ctypes on glibc) when the table starts, not in the middle of a burst's end, where the
    import's long-lived objects would keep the burst's freed arenas from going back to the OS."""
    monkeypatch.setattr(_http_sessions, "_malloc_trim", None)
    table = _http_sessions.SessionTable(idle_timeout=60.0, max_sessions=10)
    async with table.run():
        assert _http_sessions._malloc_trim is not None
        assert len(table) == 0


# --- the event store -----------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_in_memory_event_store_is_bounded() -> None:
    store = InMemoryEventStore(max_events=5, max_per_stream=3)
    assert isinstance(store, EventStore)
    for seq in range(1, 5):
        await store.append("s/1", seq, b"%d" % seq)
    assert await store.replay("s/1", 0) == [(2, b"2"), (3, b"3"), (4, b"4")]
    assert await store.replay("s/1", 3) == [(4, b"4")]
    for seq in range(1, 4):
        await store.append("s/2", seq, b"x")
    assert len(store) == 5  # the oldest stream lost its oldest event
    assert await store.replay("s/1", 0) == [(3, b"3"), (4, b"4")]
    await store.discard("s/1")
    assert len(store) == 3 and await store.replay("s/1", 0) == []
    with pytest.raises(ValueError):
        InMemoryEventStore(max_events=0)


# --- stateless checks ----------------------------------------------------------------------------------------------

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def test_check_meta() -> None:
    assert check_meta({"_meta": META}) is None
    assert check_meta(None) is not None
    assert check_meta({"_meta": {**META, "io.modelcontextprotocol/protocolVersion": ""}}) is not None
    assert check_meta({"_meta": {**META, "io.modelcontextprotocol/logLevel": "info"}}) is None


def test_check_headers_order_and_task_names() -> None:
    def headers(**values: str) -> Headers:
        return Headers((k.replace("_", "-").encode(), v.encode()) for k, v in values.items())

    params = {"taskId": "t1", "_meta": META}
    good = headers(mcp_protocol_version="2026-07-28", mcp_method="tasks/get", mcp_name="t1")
    assert check_headers(good, "tasks/get", params, lambda name: None) is None
    wrong = headers(mcp_protocol_version="2026-07-28", mcp_method="tasks/get", mcp_name="t2")
    assert "Mcp-Name" in (check_headers(wrong, "tasks/get", params, lambda name: None) or "")
    twice = Headers([(b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", b"a"), (b"mcp-method", b"a")])
    assert "more than once" in (check_headers(twice, "a", {"_meta": META}, lambda name: None) or "")


def test_status_of() -> None:
    assert status_of(b'{"jsonrpc":"2.0","id":1,"result":{}}') == 200
    assert status_of(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}') == 404
    assert status_of(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x"}}') == 400
    assert status_of(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}') == 200
    assert status_of(b'{"jsonrpc":"2.0","id":1,"result":{"text":"\\"error\\""}}') == 200
