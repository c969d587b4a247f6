"""Streamable HTTP limits and lifecycle: in-flight (429), session count (503), idle expiry of thousands of
abandoned sessions with bounded memory, the ASGI lifespan, and the lazily started task group when no lifespan
is sent (driven in-process, so on asyncio *and* trio).
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import itertools
import json
import tracemalloc
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from helpers import left_in_cycles_by
from http_support import (
    HTTPX_GENERATORS,
    JSON_HEADERS,
    ServerThread,
    SseReader,
    asgi_request,
    call_body,
    init_body,
    make_server,
    open_session,
    response_of,
    start_app,
    stateless_body,
    stateless_headers,
    unique,
)
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Context, Server
from jsonrpc_mcp.errors import RequestTimeout
from jsonrpc_mcp.jsonrpc.dispatch import Dispatcher, Pending
from jsonrpc_mcp.mcp.session import ServerSession
from jsonrpc_mcp.transports._http_handshake_session import HttpSession, SessionStream
from jsonrpc_mcp.transports.events import InMemoryEventStore
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.http_serve import make_uvicorn_server

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]


@pytest.fixture
async def http() -> Any:
    # Idle connections are dropped by the client before uvicorn's 5 s keep-alive drops them: with both at 5 s
    # (httpx's default), a request sent on a connection as the server closes it is reset (seen under load).
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64, keepalive_expiry=2.0)
    async with httpx.AsyncClient(timeout=20, verify=False, limits=limits) as client:
        yield client


async def wait_until(predicate: Any, timeout: float = 10.0) -> None:
    """Poll a condition of the server thread's state (bounded; no fixed sleeps)."""
    with anyio.fail_after(timeout):
        for _ in range(100_000):
            if predicate():
                return
            await anyio.sleep(0.02)


async def test_too_many_requests_in_flight_is_429(http: httpx.AsyncClient) -> None:
    thread = start_app(max_in_flight_per_session=2)
    try:
        session = await open_session(http, thread.url)
        first, second = unique("busy"), unique("busy")
        async with (
            session.stream(call_body("a", "wait_for", {"key": first})) as one,
            session.stream(call_body("b", "wait_for", {"key": second})) as two,
        ):
            assert one.status_code == two.status_code == 200
            refused = await session.post(call_body("c", "add", {"a": 1}))
            assert refused.status_code == 429
            assert refused.headers["retry-after"] == "1"
            assert refused.json()["id"] == "c" and refused.json()["error"]["code"] == -31010
            note = await session.post({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
            assert note.status_code == 202  # notifications are not requests in flight
            for key in (first, second):  # release through a fresh session (this one is full)
                other = await open_session(http, thread.url)
                await other.call("rel", "release", {"key": key})
            await one.aread()
            await two.aread()
        assert (await session.call("d", "add", {"a": 1}))["result"]["structuredContent"] == {"result": 1}
    finally:
        thread.stop()


async def test_a_full_table_makes_room_by_ending_the_least_recently_used_idle_session(
    http: httpx.AsyncClient,
) -> None:
    """One client opening sessions and leaving them idle cannot lock others out: when the table is full, the least
    recently used idle session gives way (its client gets 404 next time, and starts again, as the spec says)."""
    thread = start_app(max_sessions=3, session_idle_timeout=600)
    try:
        first, second, third = [await open_session(http, thread.url) for _ in range(3)]
        assert (await first.call(1, "add", {"a": 1})) is not None  # first is now the most recently used
        newcomer = await open_session(http, thread.url)
        assert (await newcomer.call(1, "add", {"a": 1}))["result"]["structuredContent"] == {"result": 1}
        gone = await second.post(call_body(2, "add", {"a": 1}))
        assert gone.status_code == 404
        assert (await first.call(2, "add", {"a": 2}))["result"]["structuredContent"] == {"result": 2}
        assert (await third.call(2, "add", {"a": 3}))["result"]["structuredContent"] == {"result": 3}
    finally:
        thread.stop()


async def test_when_every_session_is_busy_a_newcomer_gets_503_with_retry_after(http: httpx.AsyncClient) -> None:
    thread = start_app(max_sessions=2, session_idle_timeout=600)
    key = unique("busy")
    try:
        one, two = await open_session(http, thread.url), await open_session(http, thread.url)
        # (a stream's headers arrive once its request is under way: both sessions are busy inside the block)
        async with (
            one.stream(call_body(1, "wait_for", {"key": key})),
            two.stream(call_body(1, "wait_for", {"key": key})),
        ):
            refused = await http.post(thread.url, json=init_body(ident=9), headers=JSON_HEADERS)
            assert refused.status_code == 503
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.json()["error"]["code"] == -31010 and refused.json()["id"] == 9
            assert "mcp-session-id" not in refused.headers
            await one.call(3, "release", {"key": key})
    finally:
        thread.stop()


@pytest.mark.slow
async def test_thousands_of_abandoned_sessions_expire_and_memory_stays_bounded(http: httpx.AsyncClient) -> None:
    store = InMemoryEventStore(max_events=500, max_per_stream=50)
    app = McpAsgiApp(make_server(), max_sessions=400, session_idle_timeout=0.3, event_store=store)
    thread = ServerThread(app)
    try:
        accepted = refused = 0
        highest = 0
        body = json.dumps(init_body()).encode()

        async def initialize() -> None:
            nonlocal accepted, refused, highest
            response = await http.post(thread.url, content=body, headers=JSON_HEADERS)
            if response.status_code == 200:
                accepted += 1
                sid = response.headers["mcp-session-id"]
                if accepted % 10:
                    return
                # Now and then leave a stream's events in the store: they must go when the session goes.
                await http.post(
                    thread.url,
                    json=call_body(2, "progress", {"steps": 2}, meta={"progressToken": 1}),
                    headers={**JSON_HEADERS, "Mcp-Session-Id": sid},
                )
            else:
                assert response.status_code == 503 and response.headers["retry-after"]
                refused += 1
            highest = max(highest, app.session_count)

        for _ in range(40):  # 2,000 initialize requests, 50 at a time, none ever DELETEd
            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(initialize)
        assert accepted + refused == 2000
        assert highest <= 400
        assert accepted > 400  # expired sessions made room for new ones while we went on
        await wait_until(lambda: app.session_count == 0)
        assert len(store) <= 500
        await wait_until(lambda: len(store) == 0)
        gc.collect()
        alive = [obj for obj in gc.get_objects() if isinstance(obj, HttpSession)]
        assert len(alive) < 50  # the sessions' objects are gone (a few may still be finishing)
    finally:
        thread.stop()


async def test_lifespan_shutdown_ends_every_session(http: httpx.AsyncClient) -> None:
    app = McpAsgiApp(make_server())
    thread = ServerThread(app)
    session = await open_session(http, thread.url)
    assert app.session_count == 1 and session.id in app.sessions
    thread.stop()
    assert app.session_count == 0


async def test_without_lifespan_the_task_group_starts_lazily_under_uvicorn(http: httpx.AsyncClient) -> None:
    thread = start_app(lifespan="off")
    try:
        session = await open_session(http, thread.url)
        reply = await session.call(2, "progress", {"steps": 2})
        assert reply["result"]["content"][0]["text"] == "2 steps"
        call = call_body(3, "progress", {"steps": 2}, meta={"progressToken": 1})
        async with session.stream(call) as response, SseReader(response) as reader:
            assert (await reader.next_message())["method"] == "notifications/progress"
    finally:
        thread.stop()


async def test_serve_http_runs_on_uvloop_when_installed_and_sends_no_server_header(http: httpx.AsyncClient) -> None:
    """What ``serve_http`` runs: uvicorn on uvloop (the http extra installs it), without the X-Forwarded-*
    middleware or a ``server`` header."""
    server = Server("loop-probe")

    @server.tool()
    async def loop() -> str:
        """The module of the event loop serving this request."""
        return type(asyncio.get_running_loop()).__module__.partition(".")[0]

    uv_server, app = make_uvicorn_server(server, "127.0.0.1", 0)
    assert uv_server.config.proxy_headers is False
    thread = ServerThread(app, uv_server=uv_server)
    try:
        session = await open_session(http, thread.url)
        response = await session.post(call_body(2, "loop", {}))
        assert "server" not in response.headers
        expected = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
        assert response_of(response, 2)["result"]["content"][0]["text"] == expected
    finally:
        thread.stop()


async def test_a_body_in_several_messages_is_read_whole_and_bounded() -> None:
    """ASGI servers hand a large body over in pieces: they are joined, and the limit counts all of them."""
    app = McpAsgiApp(make_server(), max_body=4096)
    try:
        body = json.dumps(init_body()).encode()
        pieces = [body[:10], body[10:40], body[40:]]
        status, headers, reply = await asgi_request(app, "POST", JSON_HEADERS, pieces)
        assert status == 200, reply
        assert json.loads(reply)["result"]["protocolVersion"] == "2025-11-25" and "mcp-session-id" in headers
        status, _, reply = await asgi_request(app, "POST", JSON_HEADERS, [b" " * 3000, b" " * 3000, body])
        assert status == 413 and json.loads(reply)["error"]["code"] == -32600
        status, _, reply = await asgi_request(app, "POST", JSON_HEADERS, b" " * 5000)
        assert status == 413
    finally:
        await app.aclose()


async def test_an_unexpected_failure_is_a_500_before_the_response_and_nothing_more_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failure of ours while serving a request: a JSON-RPC shaped 500 that names nothing of it when no response
    has begun; when one has, no second response start (the server would refuse it), only the log."""
    app = McpAsgiApp(make_server())
    body = json.dumps(init_body()).encode()

    async def fails_at_once(*args: Any) -> None:
        raise RuntimeError("/srv/secret.key")

    async def fails_midway(headers: Any, version: Any, msg: Any, raw: bytes, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
        raise RuntimeError("/srv/secret.key")

    try:
        app.handshake.post = fails_at_once  # type: ignore[method-assign]
        status, headers, reply = await asgi_request(app, "POST", JSON_HEADERS, body)
        assert status == 500 and headers["content-type"] == "application/json"
        assert json.loads(reply)["error"] == {"code": -32603, "message": "Internal error"}
        app.handshake.post = fails_midway  # type: ignore[method-assign]
        status, headers, reply = await asgi_request(app, "POST", JSON_HEADERS, body)
        assert (status, headers["content-type"], reply) == (200, "text/plain", b"partial")
    finally:
        await app.aclose()
    failures = [r for r in caplog.records if r.getMessage().startswith("unexpected failure serving POST")]
    assert len(failures) == 2 and all(r.exc_info is not None for r in failures)


async def test_a_client_gone_before_its_body_gets_nothing_and_the_app_goes_on() -> None:
    """The first ASGI message is the disconnect (or it comes after part of the body): nothing is sent, nothing is
    raised to the server, and the next request is served as usual."""
    app = McpAsgiApp(make_server())
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in {"host": "127.0.0.1:9", **JSON_HEADERS}.items()],
    }
    try:
        for messages in (
            [{"type": "http.disconnect"}],
            [{"type": "http.request", "body": b'{"jsonrpc":', "more_body": True}, {"type": "http.disconnect"}],
        ):
            pending = list(messages)
            sent: list[Any] = []

            async def receive(pending: list[Any] = pending) -> Any:
                return pending.pop(0)

            async def send(message: Any, sent: list[Any] = sent) -> None:
                sent.append(message)

            with anyio.fail_after(10):
                await app(scope, receive, send)
            assert sent == [] and pending == []
        status, _, body = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
        assert status == 200 and json.loads(body)["result"]["protocolVersion"] == "2025-11-25"
    finally:
        await app.aclose()


async def test_without_lifespan_in_process_on_this_backend() -> None:
    """No server at all: the ASGI app driven in this event loop (asyncio task or trio system task)."""
    app = McpAsgiApp(make_server())
    try:
        status, headers, body = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
        assert status == 200, body
        sid = headers["mcp-session-id"]
        call = json.dumps(call_body(2, "add", {"a": 20, "b": 22})).encode()
        status, headers, body = await asgi_request(app, "POST", {**JSON_HEADERS, "Mcp-Session-Id": sid}, call)
        assert status == 200
        assert json.loads(body)["result"]["structuredContent"] == {"result": 42}
        # An async tool answered within the patience given to it (scheduler passes of this loop): JSON.
        quick = json.dumps(call_body(3, "progress", {"steps": 2})).encode()
        status, headers, body = await asgi_request(app, "POST", {**JSON_HEADERS, "Mcp-Session-Id": sid}, quick)
        assert status == 200 and headers["content-type"] == "application/json"
        assert json.loads(body)["result"]["content"][0]["text"] == "2 steps"
        # With a progress token its notifications come first: SSE.
        streamed = call_body(4, "progress", {"steps": 2})
        streamed["params"]["_meta"] = {"progressToken": "p"}
        status, headers, body = await asgi_request(
            app, "POST", {**JSON_HEADERS, "Mcp-Session-Id": sid}, json.dumps(streamed).encode()
        )
        assert status == 200 and headers["content-type"] == "text/event-stream"
        assert b'"progress":2' in body and b'"2 steps"' in body
        assert app.session_count == 1
    finally:
        await app.aclose()
    assert app.session_count == 0 and not app.running


async def gone_after_progress(app: McpAsgiApp, body: dict[str, Any]) -> list[Any]:
    """POST the 2026-07-28 call ``body`` (of ``wait_for``, with a progress token) straight to the ASGI app, whose
    client goes away (``http.disconnect``) once the handler's first progress is sent; what the app sent."""
    raw = [(k.lower().encode(), v.encode()) for k, v in stateless_headers("tools/call", "wait_for").items()]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "root_path": "", "http_version": "1.1"}
    scope["headers"] = [(b"host", b"127.0.0.1:9"), *raw]
    messages = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]
    streaming = anyio.Event()
    sent: list[Any] = []

    async def receive() -> Any:
        if messages:
            return messages.pop()
        await streaming.wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)
        if b"notifications/progress" in message.get("body", b""):  # (the handler reported, and now waits)
            streaming.set()

    with anyio.fail_after(10):
        await app(scope, receive, send)
    return sent


async def test_stateless_async_handlers_in_process_on_this_backend() -> None:
    """2026-07-28: an async tool's task on this event loop: JSON when quick, SSE when it notifies first, and
    cancelled (and waited for) when the client goes away mid-call."""
    app = McpAsgiApp(make_server())
    try:
        headers = stateless_headers("tools/call", "progress")
        quick = stateless_body(1, "tools/call", {"name": "progress", "arguments": {"steps": 2}})
        status, out, body = await asgi_request(app, "POST", headers, json.dumps(quick).encode())
        assert status == 200 and out["content-type"] == "application/json"
        assert json.loads(body)["result"]["content"][0]["text"] == "2 steps"
        streamed = stateless_body(2, "tools/call", {"name": "progress", "arguments": {"steps": 2}}, progressToken="p")
        status, out, body = await asgi_request(app, "POST", headers, json.dumps(streamed).encode())
        assert status == 200 and out["content-type"] == "text/event-stream"
        assert b'"progress":2' in body and b'"2 steps"' in body

        key = "gone-mid-call"
        waiting = stateless_body(3, "tools/call", {"name": "wait_for", "arguments": {"key": key}}, progressToken=1)
        sent = await gone_after_progress(app, waiting)
        assert sent[0]["status"] == 200 and sent[-1].get("more_body", True)  # never finished: the client left
        status_headers = stateless_headers("tools/call", "status")
        check = stateless_body(4, "tools/call", {"name": "status", "arguments": {"key": key}})
        _, _, body = await asgi_request(app, "POST", status_headers, json.dumps(check).encode())
        assert json.loads(body)["result"]["content"][0]["text"] == "cancelled"  # before the POST's task ended
    finally:
        await app.aclose()


async def test_quick_async_answers_are_json_with_many_posts_in_flight() -> None:
    """64 POSTs at once to an async tool that does not wait, in either era: each answer still comes within the
    patience its POST gives it, as JSON (not SSE)."""
    app = McpAsgiApp(make_server())
    try:
        _, headers, _ = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
        session = {**JSON_HEADERS, "Mcp-Session-Id": headers["mcp-session-id"]}
        await asgi_request(app, "POST", session, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        answers: list[tuple[int, str, Any]] = []

        async def call(ident: int, stateless: bool) -> None:
            if stateless:
                body = stateless_body(ident, "tools/call", {"name": "progress", "arguments": {"steps": 1}})
                sent = stateless_headers("tools/call", "progress")
            else:
                body, sent = call_body(ident, "progress", {"steps": 1}), session
            status, headers, raw = await asgi_request(app, "POST", sent, json.dumps(body).encode())
            answers.append((status, headers["content-type"], json.loads(raw)))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for ident in range(128):
                    tg.start_soon(call, ident, ident % 2 == 1)
        assert len(answers) == 128
        assert {(status, kind) for status, kind, _ in answers} == {(200, "application/json")}
        assert sorted(answer["id"] for _, _, answer in answers) == list(range(128))
        assert {answer["result"]["content"][0]["text"] for _, _, answer in answers} == {"1 steps"}
    finally:
        await app.aclose()


async def test_a_local_only_error_escaping_a_handler_is_an_internal_error_on_every_http_path() -> None:
    """A timeout of the handler's own outgoing request has a code that only means something to the server: the
    client gets -32603 "Internal error", whether the handler answered at once or as a task, in either era."""
    server = make_server()

    @server.method("custom/local")
    def local(ctx: Context, params: Any) -> Any:
        raise RequestTimeout("sampling/createMessage: no response within 1 s")

    @server.method("custom/local-async")
    async def local_async(ctx: Context, params: Any) -> Any:
        await anyio.lowlevel.checkpoint()
        raise RequestTimeout("sampling/createMessage: no response within 1 s")

    app = McpAsgiApp(server)
    try:
        _, headers, _ = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
        session = {**JSON_HEADERS, "Mcp-Session-Id": headers["mcp-session-id"]}
        await asgi_request(app, "POST", session, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        for ident, method in enumerate(("custom/local", "custom/local-async")):
            request = {"jsonrpc": "2.0", "id": ident, "method": method}
            for sent, body in ((session, request), (stateless_headers(method), stateless_body(ident, method))):
                status, _, raw = await asgi_request(app, "POST", sent, json.dumps(body).encode())
                assert status == 200
                assert json.loads(raw)["error"] == {"code": -32603, "message": "Internal error"}, (method, sent)
    finally:
        await app.aclose()


async def test_an_async_call_right_after_initialize_is_answered() -> None:
    """initialize is answered in its own POST; the session's dispatcher task may not have run yet when the next
    request comes (here: with no pass of the event loop in between). An async tool is then answered anyway."""
    app = McpAsgiApp(make_server())
    async with app.lifespan():
        for ident in range(5):
            _, headers, _ = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
            session = {**JSON_HEADERS, "Mcp-Session-Id": headers["mcp-session-id"]}
            call = json.dumps(call_body(ident, "progress", {"steps": 1})).encode()
            status, _, body = await asgi_request(app, "POST", session, call)
            assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == "1 steps"


async def test_an_idle_session_keeps_nothing_of_its_last_request() -> None:
    """Between requests a session's dispatcher waits for the next one: neither the last request's body nor its
    POST's headers stay referenced meanwhile (an idle session costs the same whatever it was last sent)."""
    server = Server("idle")

    @server.tool()
    def first(text: str) -> str:
        return text[:1]

    app = McpAsgiApp(server, json_response_preference="sse")  # every request goes through the dispatcher
    async with app.lifespan():
        _, headers, _ = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
        session = {**JSON_HEADERS, "Mcp-Session-Id": headers["mcp-session-id"]}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await asgi_request(app, "POST", session, json.dumps(initialized).encode())
        await asgi_request(app, "POST", session, json.dumps(call_body(1, "first", {"text": "warm"})).encode())
        await anyio.wait_all_tasks_blocked()
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            call = json.dumps(call_body(2, "first", {"text": "b" * 300_000})).encode()
            status, _, raw = await asgi_request(app, "POST", {**session, "X-Padding": "h" * 300_000}, call)
            assert status == 200 and b'"text":"b"' in raw
            await anyio.wait_all_tasks_blocked()  # the dispatcher waits for the next request
            del call, raw
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert kept < 100_000


async def test_delete_cancels_the_sessions_running_handlers_at_once() -> None:
    """DELETE (like expiry and shutdown) cancels what the session still runs, without the drain a connection
    that ends gets."""
    server = Server("delete")
    started = anyio.Event()
    ended: list[str] = []

    @server.tool()
    async def block() -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            ended.append("cancelled")
        return "never"

    app = McpAsgiApp(server)
    async with app.lifespan():
        _, headers, _ = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
        session = {**JSON_HEADERS, "Mcp-Session-Id": headers["mcp-session-id"]}
        async with anyio.create_task_group() as tg:
            tg.start_soon(asgi_request, app, "POST", session, json.dumps(call_body(1, "block", {})).encode())
            await started.wait()
            status, _, _ = await asgi_request(app, "DELETE", session)
            assert status == 200
            await anyio.wait_all_tasks_blocked()
            assert ended == ["cancelled"]
        assert app.session_count == 0


async def test_work_the_server_spawns_into_a_session_reaches_its_get_stream() -> None:
    """A session's messages are handled in their POSTs' own tasks (a session runs no task of its own); work the
    server spawns into its sessions runs among the app's tasks: here a tools/list_changed, which reaches the
    session's GET stream."""
    server = Server("lazy")

    @server.tool(inline=True)
    def echo(text: str) -> str:
        return text

    app = McpAsgiApp(server)
    async with app.lifespan():
        _, headers, _ = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
        sid = headers["mcp-session-id"]
        session = {**JSON_HEADERS, "Mcp-Session-Id": sid}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await asgi_request(app, "POST", session, json.dumps(initialized).encode()))[0] == 202
        status, _, body = await asgi_request(
            app, "POST", session, json.dumps(call_body(2, "echo", {"text": "a"})).encode()
        )
        assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == "a"
        live = app.sessions[sid]
        await anyio.wait_all_tasks_blocked()
        assert live.mcp.ready

        announced = anyio.Event()
        get_headers = [(b"host", b"127.0.0.1:9"), (b"accept", b"text/event-stream"), (b"mcp-session-id", sid.encode())]
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "path": "/mcp",
                 "root_path": "", "headers": get_headers, "server": ("127.0.0.1", 9)}  # fmt: skip

        async def receive() -> Any:
            await anyio.sleep_forever()

        async def send(message: Any) -> None:
            if b"notifications/tools/list_changed" in message.get("body", b""):
                announced.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(app, scope, receive, send)
            await anyio.wait_all_tasks_blocked()

            @server.tool()
            def added() -> str:
                return "x"

            with anyio.fail_after(10):
                await announced.wait()
            tg.cancel_scope.cancel()
        deleted, _, _ = await asgi_request(app, "DELETE", session)
        assert deleted == 200 and app.session_count == 0


async def test_a_deleted_session_is_wound_up() -> None:
    """DELETE of a session: it ends, its ServerSession and dispatcher close (the server no longer counts it), and a
    request that names it gets 404."""
    server = Server("ended")
    app = McpAsgiApp(server)
    async with app.lifespan():
        _, headers, _ = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
        session = {**JSON_HEADERS, "Mcp-Session-Id": headers["mcp-session-id"]}
        live = app.sessions[headers["mcp-session-id"]]
        assert server.sessions() == [live.mcp]
        assert (await asgi_request(app, "DELETE", session))[0] == 200
        assert live.closed and live.mcp.closed and live.dispatcher.closed and server.sessions() == []
        ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
        assert (await asgi_request(app, "POST", session, json.dumps(ping).encode()))[0] == 404


async def test_a_deleted_session_leaves_no_cycles_behind() -> None:
    """A session DELETEd (after a call on a worker thread, after progress over SSE, or while a handler waits) is
    freed by reference counting: with the cyclic collector off, none of its objects is left in a cycle (each such
    session left ~20 objects behind, its stream holding the session that holds it)."""
    app = McpAsgiApp(make_server())
    calls = [("add", {"a": 1}), ("progress", {"steps": 2}), ("wait_for", {"key": "never"})]

    async def each_deleted() -> None:
        for ident, (name, arguments) in enumerate(calls):
            _, headers, _ = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
            session = {**JSON_HEADERS, "Mcp-Session-Id": headers["mcp-session-id"]}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await asgi_request(app, "POST", session, json.dumps(initialized).encode())
            body = json.dumps(call_body(ident, name, arguments, meta={"progressToken": ident})).encode()
            async with anyio.create_task_group() as tg:
                tg.start_soon(asgi_request, app, "POST", session, body)
                await anyio.wait_all_tasks_blocked()  # (answered, or its handler waits)
                assert (await asgi_request(app, "DELETE", session))[0] == 200
            await anyio.wait_all_tasks_blocked()

    async with app.lifespan():
        left = await left_in_cycles_by(each_deleted, HttpSession, SessionStream, ServerSession, Dispatcher)
    assert app.session_count == 0
    assert left == []


async def test_a_stateless_post_whose_client_goes_away_mid_call_leaves_no_cycles_behind() -> None:
    """2026-07-28: a POST whose client disconnects while its handler waits cancels the handler, and what the request
    made (its pending entry, its context, the session and dispatcher that served it) is freed by reference
    counting: with the cyclic collector off, none of it is left in a cycle."""
    app = McpAsgiApp(make_server())
    rounds = itertools.count(1)

    async def gone_mid_call() -> None:
        key = f"gone-{next(rounds)}"
        waiting = stateless_body(1, "tools/call", {"name": "wait_for", "arguments": {"key": key}}, progressToken=1)
        await gone_after_progress(app, waiting)
        check = stateless_body(2, "tools/call", {"name": "status", "arguments": {"key": key}})
        _, _, body = await asgi_request(
            app, "POST", stateless_headers("tools/call", "status"), json.dumps(check).encode()
        )
        assert json.loads(body)["result"]["content"][0]["text"] == "cancelled"
        await anyio.wait_all_tasks_blocked()

    try:
        left = await left_in_cycles_by(gone_mid_call, Pending, Context, ServerSession, Dispatcher)
    finally:
        await app.aclose()
    assert left == []


async def test_stateless_async_answers_with_the_sse_preference_are_streams() -> None:
    """json_response_preference="sse": a stateless request whose handler is async is answered as an SSE stream
    at once (no patience for a JSON answer), carrying its response."""
    app = McpAsgiApp(make_server(), json_response_preference="sse")
    try:
        body = stateless_body(1, "tools/call", {"name": "progress", "arguments": {"steps": 1}})
        sent = stateless_headers("tools/call", "progress")
        status, headers, raw = await asgi_request(app, "POST", sent, json.dumps(body).encode())
        assert status == 200 and headers["content-type"] == "text/event-stream"
        events = [line[len(b"data: ") :] for line in raw.splitlines() if line.startswith(b"data: ")]
        assert [json.loads(data)["result"]["content"][0]["text"] for data in events if data] == ["1 steps"]
    finally:
        await app.aclose()


async def test_lifespan_entered_by_an_embedder() -> None:
    app = McpAsgiApp(make_server())
    async with app.lifespan():
        status, _, _ = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
        assert status == 200 and app.session_count == 1
        with pytest.raises(RuntimeError):
            async with app.lifespan():
                pass
    assert app.session_count == 0


async def test_lifespan_protocol_messages() -> None:
    app = McpAsgiApp(make_server())
    to_app_send, to_app = anyio.create_memory_object_stream[dict[str, Any]](4)
    from_app_send, from_app = anyio.create_memory_object_stream[dict[str, Any]](4)
    async with to_app_send, to_app, from_app_send, from_app, anyio.create_task_group() as tg:
        tg.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}}, to_app.receive, from_app_send.send)
        await to_app_send.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        assert app.running
        await to_app_send.send({"type": "lifespan.shutdown"})
        assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"
    assert not app.running


async def test_mounted_under_a_prefix_with_any_path() -> None:
    app = McpAsgiApp(make_server(), path=None)
    try:
        status, _, _ = await asgi_request(app, "POST", JSON_HEADERS, json.dumps(init_body()).encode(), path="/x/y")
        assert status == 200
    finally:
        await app.aclose()


def big_answer_server() -> Server:
    server = Server("big-answers", "1")

    @server.tool()
    async def big(mib: int, ctx: Context) -> str:
        """Close this request's SSE connection (the client is gone), then answer with ``mib`` MiB of text."""
        await ctx.close_sse_stream()
        await anyio.lowlevel.checkpoint()
        return "x" * (mib << 20)

    return server


@pytest.mark.slow
async def test_answers_for_clients_that_left_stay_within_the_event_stores_byte_bound(http: httpx.AsyncClient) -> None:
    """60 answers of 4 MiB that nobody reads: the default store keeps at most its 64 MiB, the newest answers first."""
    app = McpAsgiApp(big_answer_server())
    thread = ServerThread(app)
    store = app.store
    assert isinstance(store, InMemoryEventStore) and store.max_bytes == 64 << 20
    try:
        last_ids: list[str] = []
        sessions = []
        for n in range(60):
            session = await open_session(http, thread.url)
            sessions.append(session)
            async with session.stream(call_body(n, "big", {"mib": 4})) as response:
                reader = SseReader(response)
                assert [e for e in await reader.rest() if e.data] == []  # closed before the answer
                assert reader.parser.last_event_id is not None
                last_ids.append(reader.parser.last_event_id)
            assert store.size <= store.max_bytes
        assert store.size > 48 << 20  # the newest answers are kept, up to the bound
        # The newest answer can still be resumed; the oldest was evicted to make room.
        newest, oldest = sessions[-1], sessions[0]
        headers = {"Accept": "text/event-stream", "Last-Event-ID": last_ids[-1]}
        async with newest.stream(None, "GET", **headers) as resumed:
            events = [e for e in await SseReader(resumed).rest() if e.data]
        assert len(events) == 1 and len(events[0].data) > 4 << 20
        async with oldest.stream(None, "GET", **{**headers, "Last-Event-ID": last_ids[0]}) as resumed:
            assert resumed.status_code == 200
            assert [e for e in await SseReader(resumed).rest() if e.data] == []
    finally:
        thread.stop()
