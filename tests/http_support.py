"""Support for the Streamable HTTP tests: a fixture server, uvicorn in a thread, SSE and raw-HTTP helpers.

uvicorn runs asyncio, so it gets its own thread and event loop; the tests themselves run on asyncio *and* trio
and talk to it over real loopback sockets with httpx. The listening socket is bound and listening before the
thread starts, so the server is "ready" at once: early connections wait in the kernel's backlog (no polling).
Tools never sleep: ``slow(key)`` blocks until ``release(key)`` is called (in the server's own event loop).
"""

from __future__ import annotations

import gc
import itertools
import json
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
import uvicorn

from jsonrpc_mcp import Context, Server, ToolError
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.sse import SseEvent, SseParser

TIMEOUT = 10.0

#: httpx and httpcore iterate response bodies with nested async generators; leaving an SSE stream before its end
#: (which these tests do on purpose) closes only the outermost, and trio's finalizer warns about the inner ones
#: when they are collected. Apply to HTTP test modules, with ``collect_garbage`` so the warnings land in them.
HTTPX_GENERATORS = pytest.mark.filterwarnings(
    r"ignore:Exception ignored in. <async_generator object "
    r"(Response\.aiter_\w+|AsyncHTTP11Connection\._receive_\w+|HTTP11ConnectionByteStream\.__aiter__|"
    r"PoolByteStream\.__aiter__|BoundAsyncStream\.__aiter__|ResponseStream\.__aiter__|.*aiter.*):"
    r"pytest.PytestUnraisableExceptionWarning"
)


@pytest.fixture(autouse=False)
def collect_garbage() -> Iterator[None]:
    yield
    gc.collect()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    """The everything app under a real uvicorn, one per test module that imports this fixture."""
    thread = start_app()
    yield thread
    thread.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    # keepalive_expiry below uvicorn's 5 s keep-alive: a request never goes out on a connection the server is
    # closing as idle (both at 5 s, httpx's default, that race resets the request on a loaded machine)
    limits = httpx.Limits(keepalive_expiry=2.0)
    async with httpx.AsyncClient(timeout=10, verify=False, limits=limits) as client:
        yield client


ACCEPT = "application/json, text/event-stream"
JSON_HEADERS = {"Accept": ACCEPT, "Content-Type": "application/json"}
STATELESS = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}

REGION_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "flag": {"type": "boolean", "x-mcp-header": "Flag"},
        "query": {"type": "string"},
    },
    "required": ["region"],
}


def make_server() -> Server:
    """A server with tools for every HTTP behaviour under test."""
    server = Server("http-fixture", "1.0.0")
    gates: dict[str, anyio.Event] = {}
    state: dict[str, str] = {}

    def gate(key: str) -> anyio.Event:
        if key not in gates:
            gates[key] = anyio.Event()
        return gates[key]

    @server.tool()
    def add(a: int, b: int = 0) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def progress(steps: int, ctx: Context) -> str:
        """Report progress ``steps`` times."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
        return f"{steps} steps"

    @server.tool()
    async def slow(key: str, ctx: Context) -> str:
        """Progress 1, then wait for release(key), then progress 2."""
        await ctx.report_progress(1, 2)
        await gate(key).wait()
        await ctx.report_progress(2, 2)
        return f"released {key}"

    @server.tool()
    async def wait_for(key: str, ctx: Context) -> str:
        """Wait for release(key) (progress 0 once waiting, if asked); records whether it was cancelled."""
        state[key] = "running"
        await ctx.report_progress(0)
        try:
            await gate(key).wait()
        except anyio.get_cancelled_exc_class():
            state[key] = "cancelled"
            raise
        state[key] = "done"
        return f"released {key}"

    @server.tool(inline=True)  # (it sets an event of the event loop: it must run there)
    def release(key: str) -> str:
        """Unblock slow(key) / wait_for(key)."""
        gate(key).set()
        return f"set {key}"

    @server.tool()
    def status(key: str) -> str:
        """What wait_for(key) went through."""
        return state.get(key, "unknown")

    @server.tool()
    async def poll(key: str, ctx: Context) -> str:
        """SEP-1699: close this request's SSE connection, then answer once released."""
        await ctx.close_sse_stream()
        await gate(key).wait()
        return f"polled {key}"

    @server.tool()
    async def ask(question: str, ctx: Context) -> str:
        """Ask the user (elicitation)."""
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
        result = await ctx.elicit(question, schema)
        content = result.content if isinstance(result.content, dict) else {}
        return f"{result.action}: {content.get('answer')}"

    @server.tool()
    async def sample(prompt: str, ctx: Context) -> str:
        """Ask the client's model (sampling)."""
        result = await ctx.sample(prompt, max_tokens=16)
        content: Any = result.content
        block = content[0] if isinstance(content, list) else content
        return f"{result.model}: {getattr(block, 'text', '?')}"

    @server.tool()
    def fail(message: str) -> str:
        """Fail on purpose."""
        raise ToolError(message)

    @server.tool()
    def crash() -> str:
        """Raise an unexpected exception whose text must never reach the client."""
        raise RuntimeError("secret detail in /home/someone/.ssh/id_rsa")

    @server.tool()
    def grow(name: str) -> str:
        """Register a new tool (the tool list changes)."""
        server.add_tool(lambda: name, name=name, description="Grown at run time.")
        return f"grew {name}"

    def region(region: str, query: str = "", count: int = 0, flag: bool = False) -> str:
        return f"{region}:{query}:{count}:{flag}"

    server.add_tool(
        region, name="region", description="Mirrors region/count/flag in headers.", input_schema=REGION_SCHEMA
    )

    @server.resource("text://hello", mime_type="text/plain")
    def hello() -> str:
        return "Hello, world"

    return server


class ServerThread:
    """uvicorn serving an ASGI app on a free loopback port, in a thread with its own asyncio loop."""

    def __init__(
        self, app: Any, *, lifespan: str = "on", host: str = "127.0.0.1", uv_server: Any = None, port: int = 0
    ) -> None:
        """``port``: 0 for a free one; the port of a server stopped a moment ago to start it again there."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(1024)
        self.port: int = self.sock.getsockname()[1]
        self.app = app
        if uv_server is None:  # ``uv_server``: one configured elsewhere (make_uvicorn_server), serving ``app``
            config = uvicorn.Config(
                app, lifespan=lifespan, log_level="warning", access_log=False, timeout_graceful_shutdown=1
            )
            uv_server = uvicorn.Server(config)
        self.server = uv_server
        # uvicorn leaves the servers it started open when told to exit before its start-up is over (it returns
        # without shutting down): stop() waits for the start-up first. (On uvloop, which uvicorn 0.30 installs, the
        # loop warns of the open server whenever it is collected, in whichever test is running then.)
        self._started = threading.Event()
        startup = uv_server.startup

        async def startup_then_say_so(sockets: Any = None) -> None:
            try:
                await startup(sockets=sockets)
            finally:
                self._started.set()

        uv_server.startup = startup_then_say_so
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.host = f"[{host}]" if ":" in host else host

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    def _run(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self._started.set()  # (a server that failed before its start-up is over)

    def stop(self) -> None:
        self._started.wait(10)
        self.server.should_exit = True
        self.thread.join(10)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(5)
        self.sock.close()


def free_port() -> int:
    """A loopback port free right now (for a server started as a subprocess, which binds it itself)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unique(prefix: str) -> str:
    """A gate key no other test (or backend run) uses."""
    return f"{prefix}-{next(_keys)}"


_keys = itertools.count(1)


def start_app(server: Server | None = None, *, lifespan: str = "on", **options: Any) -> ServerThread:
    return ServerThread(McpAsgiApp(server or make_server(), **options), lifespan=lifespan)


# --- requests ------------------------------------------------------------------------------------------------


async def read_body(receive: Callable[[], Awaitable[dict[str, Any]]]) -> bytes:
    """The whole body of an ASGI request, as its ``http.request`` messages bring it."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def init_body(
    version: str = "2025-11-25", ident: Any = 1, capabilities: dict[str, Any] | None = None
) -> dict[str, Any]:
    params = {
        "protocolVersion": version,
        "capabilities": capabilities or {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": ident, "method": "initialize", "params": params}


def stateless_body(ident: Any, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    body_params = dict(params or {})
    body_params["_meta"] = {**META, **meta}
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": body_params}


def stateless_headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": STATELESS, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    headers.update(extra)
    return headers


def call_body(ident: Any, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


class Session:
    """A raw handshake-era session: the headers a client sends after initialize."""

    def __init__(self, http: httpx.AsyncClient, url: str, sid: str, version: str) -> None:
        self.http = http
        self.url = url
        self.id = sid
        self.version = version

    @property
    def headers(self) -> dict[str, str]:
        return {**JSON_HEADERS, "Mcp-Session-Id": self.id, "MCP-Protocol-Version": self.version}

    async def post(self, body: Any, **headers: str) -> httpx.Response:
        return await self.http.post(self.url, json=body, headers={**self.headers, **headers})

    async def call(self, ident: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tools/call whose answer is read whole (JSON, or the response event of an SSE stream)."""
        response = await self.post(call_body(ident, name, arguments))
        assert response.status_code == 200, response.text
        return response_of(response, ident)

    @asynccontextmanager
    async def stream(self, body: Any, method: str = "POST", **headers: str) -> AsyncIterator[httpx.Response]:
        kwargs: dict[str, Any] = {"headers": {**self.headers, **headers}}
        if body is not None:
            kwargs["json"] = body
        async with self.http.stream(method, self.url, **kwargs) as response:
            yield response


async def open_session(http: httpx.AsyncClient, url: str, version: str = "2025-11-25", **caps: Any) -> Session:
    response = await http.post(url, json=init_body(version, capabilities=caps or None), headers=JSON_HEADERS)
    assert response.status_code == 200, response.text
    sid = response.headers["mcp-session-id"]
    session = Session(http, url, sid, response.json()["result"]["protocolVersion"])
    note = await session.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202
    return session


def response_of(response: httpx.Response, ident: Any) -> dict[str, Any]:
    return reply_of(response.headers["content-type"], response.content, ident)


def reply_of(content_type: str, body: bytes, ident: Any) -> dict[str, Any]:
    """The answer to ``ident`` in a body of either kind a client that accepts both may get: JSON, or an SSE stream
    (a handler that takes longer than the server's patience is answered on one)."""
    if content_type.startswith("application/json"):
        return json.loads(body)  # type: ignore[no-any-return]
    for event in parse_sse(body):
        if event.data:
            msg = json.loads(event.data)
            if msg.get("id") == ident and ("result" in msg or "error" in msg):
                return msg  # type: ignore[no-any-return]
    raise AssertionError(f"no response to {ident!r} in {body!r}")


def parse_sse(data: bytes) -> list[SseEvent]:
    return SseParser().feed(data + b"\n\n")


class SseReader:
    """Read the events of a streaming httpx response one at a time (with their ids and the retry field)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.parser = SseParser()
        self._chunks = response.aiter_bytes()
        self._ready: list[SseEvent] = []

    async def __aenter__(self) -> SseReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._chunks.aclose()  # type: ignore[attr-defined]

    async def next(self, timeout: float = TIMEOUT) -> SseEvent:
        with anyio.fail_after(timeout):
            while not self._ready:
                chunk = await self._chunks.__anext__()
                self._ready.extend(self.parser.feed(chunk))
        return self._ready.pop(0)

    async def next_message(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The next event that carries a JSON-RPC message (skipping priming events)."""
        while True:
            event = await self.next(timeout)
            if event.data:
                return json.loads(event.data)  # type: ignore[no-any-return]

    async def rest(self, timeout: float = TIMEOUT) -> list[SseEvent]:
        """Every remaining event until the server ends the stream."""
        with anyio.fail_after(timeout):
            async for chunk in self._chunks:
                self._ready.extend(self.parser.feed(chunk))
        events, self._ready = self._ready, []
        return events


def messages(events: list[SseEvent]) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in events if e.data]


# --- raw HTTP (header values httpx would refuse to send) -----------------------------------------------------


async def raw_post(
    url: str, headers: list[tuple[str, str]], body: bytes, timeout: float = TIMEOUT
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 POST written byte for byte (e.g. header values with surrounding whitespace)."""
    parts = httpx.URL(url)
    lines = [f"POST {parts.raw_path.decode()} HTTP/1.1", f"Host: {parts.host}:{parts.port}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines.append(f"Content-Length: {len(body)}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    with anyio.fail_after(timeout):
        async with await anyio.connect_tcp(parts.host, parts.port) as conn:
            await conn.send(request)
            data = b""
            while True:
                try:
                    data += await conn.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    response_headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        response_headers[name.strip().lower()] = value.strip()
    if response_headers.get("transfer-encoding") == "chunked":
        rest = _unchunked(rest)
    return int(status_line.split()[1]), response_headers, rest


def _unchunked(data: bytes) -> bytes:
    """The body of an HTTP/1.1 chunked transfer coding (RFC 9112 section 7.1), without trailers."""
    body = b""
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return body
        body, data = body + data[:size], data[size + 2 :]


# --- driving the ASGI app in-process (no server: for trio and the no-lifespan path) -------------------------


async def asgi_request(
    app: Callable[..., Any],
    method: str,
    headers: dict[str, str],
    body: bytes | list[bytes] = b"",
    path: str = "/mcp",
    timeout: float = TIMEOUT,
) -> tuple[int, dict[str, str], bytes]:
    """One request through the ASGI app, in this event loop; the whole response is returned. A list ``body`` is
    sent as that many ``http.request`` messages."""
    raw_headers = [(k.lower().encode(), v.encode()) for k, v in {"host": "127.0.0.1:9", **headers}.items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "path": path,
        "root_path": "",
        "headers": raw_headers,
        "server": ("127.0.0.1", 9),
    }
    pieces = [body] if isinstance(body, bytes) else list(body)
    finished = anyio.Event()
    status = 0
    out_headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if pieces:
            return {"type": "http.request", "body": pieces.pop(0), "more_body": len(pieces) > 0}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            out_headers.update({k.decode(): v.decode() for k, v in message["headers"]})
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                finished.set()

    with anyio.fail_after(timeout):
        await app(scope, receive, send)
    finished.set()
    return status, out_headers, b"".join(chunks)
