"""The Streamable HTTP building blocks on their own: SSE codec, Host/Origin guard, content negotiation, outlets and
the session stream's routing, the session table, the event store, and the stateless-era checks (no sockets)."""

from __future__ import annotations

import tracemalloc
from typing import Any, cast

import anyio
import msgspec
import pytest

from jsonrpc_mcp.errors import RpcError
from jsonrpc_mcp.jsonrpc.streams import NOTIFICATION, Outgoing
from jsonrpc_mcp.jsonrpc.streams import RESPONSE as ANSWER
from jsonrpc_mcp.jsonrpc.wire import Request
from jsonrpc_mcp.mcp.eras import Call, meta_problem, read_call
from jsonrpc_mcp.mcp.headers import mirrored_header_problem
from jsonrpc_mcp.transports import _heap, _http_io, _http_session_table
from jsonrpc_mcp.transports._http_handshake_session import SessionStream
from jsonrpc_mcp.transports._http_io import Headers, accepts, body_type_problem
from jsonrpc_mcp.transports._http_outlet import FINAL, OTHER, RESPONSE, Outlet
from jsonrpc_mcp.transports._http_security import HostGuard, split_host
from jsonrpc_mcp.transports._http_stateless import status_of
from jsonrpc_mcp.transports.events import EventStore, InMemoryEventStore
from jsonrpc_mcp.transports.sse import SseParser, SseTooLarge, encode_comment, encode_event, encode_retry

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
    """Loopback as jsonrpc_mcp.addresses tells it (a page whose Host is one of these is on this host already)."""
    guard = HostGuard()
    for ok in ("localhost", "localhost:1", "127.0.0.1:8000", "[::1]:8000", "127.0.0.2", "app.localhost:3000", None):
        assert guard.host_ok(ok)
    for bad in ("evil.example.com", "evil.example.com:8000", "localhost.evil.com", "0.0.0.0:8000", "[::ffff:10.0.0.1]"):
        assert not guard.host_ok(bad)
    assert guard.origin_ok(None, "localhost:1")
    assert guard.origin_ok("http://localhost:3000", "localhost:8000")
    assert guard.origin_ok("http://[::1]:3000", "[::1]:8000")
    assert guard.origin_ok("http://app.localhost:5173", "localhost:8000")
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
    raw = accept.encode() if accept is not None else None
    assert accepts(raw, ("application/json", "text/event-stream")) is ok
    assert accepts(raw, ("application/json", "text/event-stream")) is ok  # (the verdict kept)


def test_the_accept_verdicts_are_bounded() -> None:
    for i in range(3 * 256):
        assert accepts(b"application/json, text/event-stream, x/%d" % i, _http_io.JSON_AND_SSE)
    assert accepts.cache_info().currsize <= 256
    assert not accepts(b"text/event-stream", _http_io.JSON_AND_SSE)


def test_content_type_and_headers() -> None:
    assert body_type_problem(b"Application/JSON; charset=utf-8") is None
    assert body_type_problem(b"application/json-seq") and body_type_problem(None)
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
        return mirrored_header_problem(headers.values, _call("ping", {"_meta": META}), lambda name: None)

    assert problem(b"ping") is None and problem(b" \tping\t ") is None
    assert "does not match" in (problem(b"pi\tng") or "")  # a tab inside is a valid character: just not "ping"
    for bad in (b"pi\x00ng", b"ping\x7f", b"p\xe9ng", b"pi\nng"):
        assert "characters not allowed" in (problem(bad) or ""), bad


# --- a session's inbound queue ---


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
    frames = []
    while True:
        try:
            frames.append((await again.receive()).frame)
        except anyio.EndOfStream:
            break
    assert frames == [b"3"]


@pytest.mark.anyio
async def test_session_stream_routes_frames_by_their_kind_and_request() -> None:
    class Owner:
        def __init__(self) -> None:
            self.id = "s1"
            self.exchanges: dict[Any, Any] = {}
            self.standalone = Outlet(None)
            self.record = None  # (served by this worker alone)

    class Exchange:
        def __init__(self, ids: set[Any]) -> None:
            self.waiting = ids
            self.outlet = Outlet(None)
            self.json_only = False

    owner = Owner()
    stream = SessionStream(cast(Any, owner))
    batch = Exchange({1, 2})
    owner.exchanges.update({1: batch, 2: batch})
    first, last = batch.outlet.connect(), owner.standalone.connect()
    # A request's notification goes to its exchange; answers are routed by the id they answer (the first of a
    # batch is not the exchange's last frame); what belongs to no request goes to the standalone stream.
    await stream.send(
        [
            Outgoing(b"progress-1", 1, NOTIFICATION),
            Outgoing(b"answer-1", 1, ANSWER),
            Outgoing(b"[parse error]", None, ANSWER),
            Outgoing(b"answer-2", 2, ANSWER),
        ]
    )
    assert [(i.frame, i.kind) for i in (first.receive_nowait(), first.receive_nowait(), first.receive_nowait())] == [
        (b"progress-1", OTHER),
        (b"answer-1", RESPONSE),
        (b"answer-2", FINAL),
    ]
    assert last.receive_nowait().frame == b"[parse error]"
    assert owner.exchanges == {} and batch.outlet.done


class _FakeSession:
    def __init__(self, sid: str, busy: bool = False) -> None:
        self.id = sid
        self.closed = False
        self.outlets: dict[str, Any] = {}
        self._busy = busy
        self.last_seen = 0.0
        self.owner = None  # (no HTTP policy names owners)

    def busy(self) -> bool:
        return self._busy

    def idle(self, now: float, timeout: float) -> bool:
        return False

    def terminate(self) -> None:
        self.closed = True


@pytest.mark.anyio
async def test_a_full_table_ends_its_least_recently_used_idle_session() -> None:
    """A full table makes room for a newcomer: the least recently used session with nothing under way gives way
    (being looked up makes a session the most recently used); when every session is busy, there is no room."""
    table = _http_session_table.SessionTable(idle_timeout=60.0, max_sessions=3)
    async with table.run():
        a, b, c = _FakeSession("a"), _FakeSession("b", busy=True), _FakeSession("c")
        for session in (a, b, c):
            table.add(cast(Any, session))
        assert table.get("a") is cast(Any, a)  # a is now the most recently used: c is the oldest idle one
        assert table.admit() and c.closed and not a.closed and len(table) == 2
        table.add(cast(Any, _FakeSession("d", busy=True)))
        assert table.admit() and a.closed  # b and d are busy: a gives way
        table.add(cast(Any, _FakeSession("e", busy=True)))
        assert not table.admit() and len(table) == 3  # every session is busy


@pytest.mark.anyio
async def test_memory_is_released_after_a_burst_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    releases: list[int] = []
    monkeypatch.setattr(_http_session_table, "TRIM_AFTER", 2)
    monkeypatch.setattr(_http_session_table, "release_memory", lambda: releases.append(1))
    for trim in (False, True):
        table = _http_session_table.SessionTable(idle_timeout=60.0, max_sessions=10, trim_memory=trim)
        async with table.run():
            first, second = _FakeSession("a"), _FakeSession("b")
            table.add(cast(Any, first))
            table.add(cast(Any, second))
            table.end(cast(Any, first))
            assert releases == []  # one still lives
            table.end(cast(Any, second))
            assert releases == ([1] if trim else []) and second.closed  # the burst is over
            lone = _FakeSession("c")
            table.add(cast(Any, lone))
            table.end(cast(Any, lone))
            assert releases == ([1] if trim else [])  # one session is no burst


def test_release_memory_runs_anywhere() -> None:
    _heap.release_memory()
    _heap.release_memory()


@pytest.mark.anyio
async def test_the_heap_trimmer_is_looked_up_before_any_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Looked up (importing ctypes on glibc) when the table starts, not in the middle of a burst's end, where the
    import's long-lived objects would keep the burst's freed arenas from going back to the OS."""
    monkeypatch.setattr(_heap, "_malloc_trim", None)
    table = _http_session_table.SessionTable(idle_timeout=60.0, max_sessions=10, trim_memory=True)
    async with table.run():
        assert _heap._malloc_trim is not None
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
    for bad in ({"max_bytes": 0}, {"max_age": 0}, {"max_per_stream": 0}):
        with pytest.raises(ValueError):
            InMemoryEventStore(**bad)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_in_memory_event_store_is_bounded_in_bytes_the_oldest_going_first() -> None:
    store = InMemoryEventStore(max_bytes=100)
    for seq in range(1, 4):
        await store.append("old", seq, b"a" * 30)
    assert (len(store), store.size) == (3, 90)
    await store.append("new", 1, b"b" * 30)  # 120 bytes: the oldest event goes
    assert (len(store), store.size) == (3, 90)
    assert [seq for seq, _ in await store.replay("old", 0)] == [2, 3]
    await store.append("new", 2, b"c" * 70)  # 160 bytes: the two next oldest go, whatever their stream
    assert store.size == 100 and await store.replay("old", 0) == []
    assert await store.replay("new", 0) == [(1, b"b" * 30), (2, b"c" * 70)]
    await store.append("huge", 1, b"x" * 101)  # larger than the whole bound: not kept, and it evicts nothing else
    assert await store.replay("huge", 0) == []
    assert store.size <= 100
    await store.discard("new")
    assert (len(store), store.size) == (0, 0)


@pytest.mark.anyio
async def test_in_memory_event_store_drops_events_past_their_age() -> None:
    now = [1000.0]
    store = InMemoryEventStore(max_age=60, clock=lambda: now[0])
    await store.append("left", 1, b"1")
    now[0] += 30
    await store.append("left", 2, b"2")
    await store.append("live", 1, b"x")
    now[0] += 31  # "left" 1 is 61 s old
    assert await store.replay("left", 0) == [(2, b"2")]
    assert len(store) == 2
    now[0] += 30  # everything is past 60 s
    assert await store.replay("live", 0) == [] and await store.replay("left", 0) == []
    assert (len(store), store.size) == (0, 0)
    await store.append("live", 2, b"y")  # a stream goes on after its old events expired
    assert await store.replay("live", 0) == [(2, b"y")]


@pytest.mark.anyio
async def test_in_memory_event_store_bookkeeping_stays_small_under_churn() -> None:
    """Per-stream evictions and discards leave entries behind in the order queue; they are compacted away."""
    store = InMemoryEventStore(max_per_stream=2)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        await store.append("anchor", 1, b"a")  # the oldest event, kept throughout: the queue's front stays put
        for seq in range(1, 20_001):
            await store.append("busy", seq, b"e")
            if seq % 10 == 0:
                await store.append(f"short-{seq}", 1, b"s")
                await store.discard(f"short-{seq}")
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(store) == 3 and await store.replay("busy", 0) == [(19_999, b"e"), (20_000, b"e")]
    assert grown < 100_000  # (22,000 entries left behind would hold well over 1 MB)
    alone = InMemoryEventStore(max_per_stream=2)  # per-stream evictions only: no discard, no other bound passed
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for seq in range(1, 20_001):
            await alone.append("busy", seq, b"e")
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(alone) == 2 and grown < 100_000


# --- stateless checks ----------------------------------------------------------------------------------------------

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def test_meta_problem() -> None:
    assert meta_problem(META) is None
    assert meta_problem(None) is not None
    assert meta_problem({**META, "io.modelcontextprotocol/protocolVersion": ""}) is not None
    assert meta_problem({**META, "io.modelcontextprotocol/logLevel": "info"}) is None
    assert meta_problem({**META, "io.modelcontextprotocol/logLevel": "loud"}) is not None


def _call(method: str, params: dict[str, Any]) -> Call:
    return read_call({}, Request(1, method, msgspec.Raw(msgspec.json.encode(params))))


def test_mirrored_header_problem_order_and_task_names() -> None:
    def headers(**values: str) -> Headers:
        return Headers((k.replace("_", "-").encode(), v.encode()) for k, v in values.items())

    task = _call("tasks/get", {"taskId": "t1", "_meta": META})
    good = headers(mcp_protocol_version="2026-07-28", mcp_method="tasks/get", mcp_name="t1")
    assert mirrored_header_problem(good.values, task, lambda name: None) is None
    wrong = headers(mcp_protocol_version="2026-07-28", mcp_method="tasks/get", mcp_name="t2")
    assert "Mcp-Name" in (mirrored_header_problem(wrong.values, task, lambda name: None) or "")
    twice = Headers([(b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", b"a"), (b"mcp-method", b"a")])
    assert "more than once" in (
        mirrored_header_problem(twice.values, _call("a", {"_meta": META}), lambda name: None) or ""
    )


def test_status_of() -> None:
    from jsonrpc_mcp.jsonrpc.dispatch import Dispatcher

    dispatcher = Dispatcher(cast(Any, None), lambda req, context: _raise(req.method))
    assert status_of(b'{"jsonrpc":"2.0","id":1,"result":{}}') == 200
    assert status_of(dispatcher.answer_request(Request(1, "-32601"))) == 404  # type: ignore[arg-type]
    assert status_of(dispatcher.answer_request(Request(2, "-32022"))) == 400  # type: ignore[arg-type]
    assert status_of(dispatcher.answer_request(Request(3, "-32602"))) == 200  # type: ignore[arg-type]


def _raise(code: str) -> bytes:
    raise RpcError("x", code=int(code))


# --- bounded body reads ------------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("chunks", "read", "whole", "pulled"),
    [
        ((b"abc", b"de"), b"abcde", True, 2),  # exactly the bound: whole
        ((b"abc", b"def", b"never read"), b"abcde", False, 2),  # one byte more: not whole, the rest never read
        ((b"abcdef",), b"abcde", False, 1),
    ],
)
async def test_an_answer_of_exactly_the_bound_is_read_whole_and_one_byte_more_is_not(
    chunks: tuple[bytes, ...], read: bytes, whole: bool, pulled: int
) -> None:
    """The one bounded read of a peer's answer (the HTTP and SSE clients, the OAuth client): ``limit`` bytes are
    allowed, the byte past them is not, and nothing after the chunk that passed the bound is read."""
    import httpx

    from jsonrpc_mcp.transports.http_bodies import read_limited

    taken: list[bytes] = []

    async def body() -> Any:
        for chunk in chunks:
            taken.append(chunk)
            yield chunk

    assert await read_limited(httpx.Response(200, content=body()), 5) == (read, whole)
    assert len(taken) == pulled


def test_one_table_gives_the_http_status_of_answers_and_refusals() -> None:
    from jsonrpc_mcp.jsonrpc.dispatch import BUSY, Dispatcher, Pending

    dispatcher = Dispatcher(cast(Any, None), lambda req, context: _raise(req.method), max_in_flight=1)
    unknown = dispatcher.answer_request(Request(1, "-32601"))
    assert _http_io.answer_status(unknown, stateless=True) == 404  # type: ignore[arg-type]
    assert _http_io.answer_status(unknown, stateless=False) == 200  # type: ignore[arg-type]  # (a session's answer)
    busy = dispatcher.answer_request(Request(2, str(BUSY)))
    assert _http_io.answer_status(busy, stateless=False) == 429  # type: ignore[arg-type]

    async def wait() -> bytes:
        await anyio.sleep_forever()
        return b"{}"

    dispatcher.on_request = lambda req, context: wait()
    assert type(dispatcher.answer_request(Request(3, "slow"))) is Pending
    refused = dispatcher.answer_request(Request(4, "more"))  # (one in flight at most)
    assert _http_io.answer_status(refused, stateless=False) == 429  # type: ignore[arg-type]
    duplicate = dispatcher.answer_request(Request(3, "again"))
    assert _http_io.answer_status(duplicate, stateless=False) == 400  # type: ignore[arg-type]
    dispatcher.close()
    # A refusal before dispatch: the table's status for its code, 400 where the table has none, or its own.
    assert _http_io.HttpRefusal("x").status == 400
    assert _http_io.HttpRefusal("x", code=-31012).status == 503
    assert _http_io.HttpRefusal("x", code=-32602).status == 400
    assert _http_io.HttpRefusal("gone", status=404).status == 404


@pytest.mark.anyio
async def test_a_refusal_is_answered_with_the_dispatchers_error_reply() -> None:
    from jsonrpc_mcp.errors import Unavailable

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    await _http_io.refuse(send, _http_io.unavailable(Unavailable(7), "r1"))
    assert sent[0]["status"] == 503 and (b"retry-after", b"7") in sent[0]["headers"]
    assert msgspec.json.decode(sent[1]["body"]) == {
        "jsonrpc": "2.0",
        "id": "r1",
        "error": {"code": -31012, "message": "Service unavailable: retry in 7 s", "data": {"retryAfter": 7}},
    }


def test_only_the_dispatcher_builds_an_error_reply_on_the_server_side() -> None:
    """The HTTP server's modules refuse a request by raising :class:`HttpRefusal`, answered with the dispatcher's
    ``error_reply``: none of them encodes an error frame itself."""
    from pathlib import Path

    import jsonrpc_mcp

    root = Path(jsonrpc_mcp.__file__).parent
    modules = [*root.glob("transports/_http_*.py"), root / "transports/http_asgi.py", root / "auth/resource.py"]
    assert len(modules) > 8
    for module in modules:
        assert "encode_error" not in module.read_text(), module.name
