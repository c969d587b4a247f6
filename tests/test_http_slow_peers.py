"""Slow and surplus peers over real sockets against a real uvicorn: a connection that trickles its headers, a body
that never ends (or never starts), and one connection more than the cap. Each waits for the server's close (EOF)
under ``fail_after``, never a sleep; the deadlines are set short here, the defaults are the safe ones."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
import uvicorn
from helpers import serve_command
from http_support import JSON_HEADERS, ServerThread, asgi_request, free_port, init_body, make_server

from jsonrpc_mcp.transports._uvicorn_guard import BODY_GRACE, default_max_connections, guarded_protocol
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.http_serve import make_uvicorn_server

pytestmark = pytest.mark.anyio

SHORT = 0.3  # the deadlines under test
PATIENCE = 10.0  # how long a test waits for the server's close before failing


def start(
    *, header_timeout: float = SHORT, body_timeout: float | None = SHORT, max_connections: int | None = None
) -> ServerThread:
    uv_server, app = make_uvicorn_server(
        make_server(),
        "127.0.0.1",
        0,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        max_connections=max_connections,
    )
    return ServerThread(app, uv_server=uv_server)


@pytest.fixture(scope="module")
def guarded() -> Iterator[ServerThread]:
    thread = start()
    yield thread
    thread.stop()


@pytest.fixture(scope="module")
def guarded_h11() -> Iterator[ServerThread]:
    """The same deadlines on uvicorn's other HTTP parser (h11), which reports no per-header callbacks."""
    app = McpAsgiApp(make_server(), body_timeout=SHORT)
    protocol = guarded_protocol(header_timeout=SHORT, body_timeout=SHORT, max_connections=100, flavour="h11")
    config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False, http=protocol)
    thread = ServerThread(app, uv_server=uvicorn.Server(config))
    yield thread
    thread.stop()


@pytest.fixture(params=["httptools", "h11"])
def thread(request: pytest.FixtureRequest, guarded: ServerThread, guarded_h11: ServerThread) -> ServerThread:
    return guarded if request.param == "httptools" else guarded_h11


async def read_until_closed(conn: anyio.abc.SocketStream) -> bytes:
    """Everything the server sends until it closes the connection (EOF or reset)."""
    data = b""
    with anyio.fail_after(PATIENCE):
        while True:
            try:
                data += await conn.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return data


def head(thread: ServerThread, extra: str) -> bytes:
    return (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{thread.port}\r\n{extra}").encode()


async def test_a_connection_that_trickles_its_headers_is_closed(thread: ServerThread) -> None:
    async with await anyio.connect_tcp("127.0.0.1", thread.port) as conn:
        await conn.send(head(thread, "Accept: application/json, text/event-"))  # half the headers, never the rest
        assert await read_until_closed(conn) == b""  # closed, with nothing written


async def test_a_connection_that_sends_nothing_is_closed(thread: ServerThread) -> None:
    async with await anyio.connect_tcp("127.0.0.1", thread.port) as conn:
        assert await read_until_closed(conn) == b""


async def test_the_header_deadline_applies_to_each_request_of_a_kept_alive_connection(thread: ServerThread) -> None:
    body = json.dumps(init_body()).encode()
    first = head(thread, "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n")
    first += b"Content-Length: %d\r\n\r\n" % len(body) + body
    async with await anyio.connect_tcp("127.0.0.1", thread.port) as conn:
        await conn.send(first + b"POST /mcp HTTP/1.1\r\nHost: 127")  # a whole request, then the next one stalls
        data = await read_until_closed(conn)
    assert data.startswith(b"HTTP/1.1 200") and b'"protocolVersion"' in data  # the first was served


async def test_a_chunked_body_that_never_ends_gets_408_and_is_closed(thread: ServerThread) -> None:
    headers = "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
    request = head(thread, headers + "Transfer-Encoding: chunked\r\n\r\n") + b'a\r\n{"jsonrpc"\r\n'
    async with await anyio.connect_tcp("127.0.0.1", thread.port) as conn:
        await conn.send(request)
        data = await read_until_closed(conn)
    status, _, body = data.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 408")
    assert json.loads(body) == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Request Timeout: the request body did not arrive within 0.3 seconds"},
    }


async def test_a_body_that_never_starts_is_closed(thread: ServerThread) -> None:
    headers = "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
    async with await anyio.connect_tcp("127.0.0.1", thread.port) as conn:
        await conn.send(head(thread, headers + "Content-Length: 100\r\n\r\n"))  # and not one byte of it
        with anyio.fail_after(SHORT + BODY_GRACE + PATIENCE):
            assert await read_until_closed(conn) == b""


async def test_a_request_within_the_deadlines_is_served(thread: ServerThread) -> None:
    async with httpx.AsyncClient(timeout=PATIENCE) as http:
        response = await http.post(thread.url, json=init_body(), headers=JSON_HEADERS)
    assert response.status_code == 200 and response.headers["mcp-session-id"]


async def test_the_app_answers_408_under_any_asgi_server() -> None:
    """Without uvicorn (the app driven in this event loop, asyncio or trio): the first piece of the body, then none."""
    app = McpAsgiApp(make_server(), body_timeout=SHORT)
    never = anyio.Event()
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"accept", b"application/json, text/event-stream"), (b"content-type", b"application/json")],
    }
    sent: list[dict[str, Any]] = []
    pieces = [{"type": "http.request", "body": b'{"jsonrpc":', "more_body": True}]

    async def receive() -> dict[str, Any]:
        if pieces:
            return pieces.pop()
        await never.wait()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(PATIENCE):
        await app(scope, receive, send)
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["error"]["message"].startswith("Request Timeout")
    # a body whole in one message, or in pieces that all come, is read as before
    status, _, _ = await asgi_request(
        app, "POST", JSON_HEADERS, [b'{"jsonrpc":"2.0","id":1,', b'"method":"ping"}'], timeout=PATIENCE
    )
    assert status == 400  # (no session: but the body was read whole)


async def test_connections_past_the_cap_are_refused_and_a_freed_slot_serves_again() -> None:
    thread = start(header_timeout=60.0, max_connections=3)
    state = thread.server.server_state
    try:
        idle = [await anyio.connect_tcp("127.0.0.1", thread.port) for _ in range(3)]
        await wait_for(lambda: len(state.connections) == 3)
        async with await anyio.connect_tcp("127.0.0.1", thread.port) as fourth:
            assert await read_until_closed(fourth) == b""  # refused at once: nothing read, nothing written
        async with httpx.AsyncClient(timeout=PATIENCE) as http:
            with pytest.raises(httpx.TransportError):
                await http.post(thread.url, json=init_body(), headers=JSON_HEADERS)
            await idle.pop().aclose()  # a slot frees
            await wait_for(lambda: len(state.connections) == 2)
            response = await http.post(thread.url, json=init_body(), headers=JSON_HEADERS)
            assert response.status_code == 200
        for conn in idle:
            await conn.aclose()
    finally:
        thread.stop()


async def wait_for(predicate: Any) -> None:
    """A condition of the server thread's state, polled (bounded) until it holds."""
    with anyio.fail_after(PATIENCE):
        for _ in range(100_000):
            if predicate():
                return
            await anyio.sleep(0.01)


def test_the_defaults_are_safe_and_settings_are_checked() -> None:
    uv_server, app = make_uvicorn_server(make_server(), "127.0.0.1", 0)
    protocol = uv_server.config.http
    assert protocol.header_timeout == 10.0 and protocol.body_timeout == app.body_timeout == 30.0
    assert protocol.max_connections == default_max_connections() >= 16
    assert uv_server.config.timeout_keep_alive == 5.0
    assert make_uvicorn_server(make_server(), keep_alive=120.0)[0].config.timeout_keep_alive == 120.0
    with pytest.raises(ValueError):
        make_uvicorn_server(make_server(), keep_alive=0)
    for bad in ({"header_timeout": 0}, {"body_timeout": -1}, {"max_connections": 0}):
        settings: dict[str, Any] = {"header_timeout": 1.0, "body_timeout": 1.0, "max_connections": 1, **bad}
        with pytest.raises(ValueError):
            guarded_protocol(**settings)
    with pytest.raises(ValueError):
        McpAsgiApp(make_server(), body_timeout=0)


@asynccontextmanager
async def cli_server(*options: str) -> AsyncIterator[int]:
    """``jsonrpc-mcp serve FIXTURE --http 127.0.0.1:PORT OPTIONS...`` in a subprocess, once it accepts connections."""
    port = free_port()
    command = [*serve_command(), "--http", f"127.0.0.1:{port}", *options]
    async with await anyio.open_process(command, stderr=subprocess.DEVNULL) as process:
        try:
            with anyio.fail_after(30):
                while True:
                    try:
                        probe = await anyio.connect_tcp("127.0.0.1", port)
                    except OSError:
                        assert process.returncode is None, "the server exited"
                        await anyio.sleep(0.05)
                        continue
                    await probe.aclose()
                    break
            yield port
        finally:
            process.terminate()
            with anyio.fail_after(PATIENCE):
                await process.wait()


async def test_the_cli_takes_the_deadlines_and_the_cap() -> None:
    async with cli_server("--header-timeout", "0.3", "--body-timeout", "0.3", "--max-connections", "2") as port:
        async with await anyio.connect_tcp("127.0.0.1", port) as slow:
            await slow.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAcc")
            assert await read_until_closed(slow) == b""
        async with await anyio.connect_tcp("127.0.0.1", port) as one, await anyio.connect_tcp("127.0.0.1", port) as two:
            await one.send(b"GET /mcp HTTP/1.1\r\n")  # two connections held (for 0.3 s) ...
            await two.send(b"GET /mcp HTTP/1.1\r\n")
            async with await anyio.connect_tcp("127.0.0.1", port) as third:
                assert await read_until_closed(third) == b""  # ... so a third is refused
        async with httpx.AsyncClient(timeout=PATIENCE) as http:
            url = f"http://127.0.0.1:{port}/mcp"
            for _ in range(100):  # served again once the server has seen the two go (bounded)
                try:
                    response = await http.post(url, json=init_body(), headers=JSON_HEADERS)
                    break
                except httpx.TransportError:
                    await anyio.sleep(0.05)
            assert response.status_code == 200


async def test_the_cli_takes_the_keep_alive() -> None:
    async with cli_server("--keep-alive", "0.3") as port, await anyio.connect_tcp("127.0.0.1", port) as conn:
        await conn.send(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # answered, then idle
        with anyio.fail_after(4.0):  # (uvicorn's default keeps an idle connection 5 s)
            answer = await read_until_closed(conn)
        assert answer.startswith(b"HTTP/1.1 ")


@pytest.mark.parametrize(
    "bad",
    [["--header-timeout", "0"], ["--body-timeout", "x"], ["--max-connections", "0"], ["--keep-alive", "-1"]],
)
def test_the_cli_refuses_settings_that_are_not_positive(bad: list[str]) -> None:
    done = subprocess.run([*serve_command(), "--http", "127.0.0.1:9", *bad], capture_output=True, timeout=60)
    assert done.returncode == 2 and b"expected a positive" in done.stderr and b"Traceback" not in done.stderr
