"""Streamable HTTP as a plain ASGI 3 application, both eras on one endpoint (L6).

::

    from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

    app = McpAsgiApp(server)                     # uvicorn module:app, hypercorn module:app, ...

    # inside Starlette / FastAPI, which do not pass the lifespan on to mounted apps:
    mcp = McpAsgiApp(server, path=None)
    web = Starlette(routes=[Mount("/mcp", app=mcp)], lifespan=lambda _: mcp.lifespan())

What a request gets, decided per request (SPEC_MAP §6.3):

* **stateless era** (2026-07-28) — a POST whose ``MCP-Protocol-Version`` header is a stateless version, or whose
  ``params._meta`` names a protocol version: validated (SPEC_MAP §2.6), then served on its own by a fresh
  session; no ``Mcp-Session-Id``. JSON, or SSE carrying its notifications and then its response; closing the
  stream cancels it. ``subscriptions/listen`` gets a long-lived SSE stream. GET and DELETE carrying a stateless
  version header → 405.
* **handshake era** (2024-11-05 .. 2025-11-25) — ``initialize`` (without ``Mcp-Session-Id``) mints a session;
  later requests need its id (400 without, 404 once it ended or expired). Each POSTed request is answered as
  JSON when its response is the first thing it produces, else as a resumable SSE stream (priming event,
  ``retry``, ids ``"<stream>-<n>"``) carrying its notifications and server-to-client requests before its
  response. GET opens the session's standalone stream (one at a time; 409 for a second); GET with
  ``Last-Event-ID`` resumes any stream of the session; DELETE ends the session. 2025-03-26 sessions accept batches.

Each session is one :class:`~jsonrpc_mcp.mcp.session.ServerSession` with its dispatcher, running in a task group
the app owns. The app enters that task group on the ASGI ``lifespan`` startup (and ends every session at
shutdown). When no lifespan arrives — ``--lifespan off``, or mounted in a framework that keeps the lifespan to
itself — the first session starts it lazily in a background task (``asyncio`` task or trio system task);
:meth:`McpAsgiApp.aclose` stops it. Embedders may also enter :meth:`McpAsgiApp.lifespan` themselves.

Limits: ``max_body`` (413), ``max_sessions`` (503 + ``Retry-After``), ``max_in_flight_per_session`` (429);
sessions idle for ``session_idle_timeout`` seconds are ended. ``Host`` and ``Origin`` are checked against
allow-lists (403); by default only loopback names pass — set ``allowed_hosts`` (``["*"]`` for any) when
serving other names. Error bodies are JSON-RPC errors with a plain sentence; details go to the log only.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc

from ..errors import RpcError
from ..jsonrpc import codes
from ..jsonrpc.wire import (
    Notification,
    Request,
    RequestId,
    classify,
    decode_batch,
    decode_frame,
    encode_error,
    is_batch,
)
from ..mcp.versions import BATCH_VERSIONS, HANDSHAKE_VERSIONS, META_PROTOCOL_VERSION, STATELESS_VERSIONS
from ._http_events import EventStore, InMemoryEventStore
from ._http_io import (
    BUSY,
    BodyTooLarge,
    ClientGone,
    HeaderList,
    Headers,
    Receive,
    Scope,
    Send,
    accepts,
    is_json_content,
    read_body,
    send_bytes,
    send_empty,
    send_error,
)
from ._http_outlet import FINAL, RESPONSE, Item, Preference, answer_at_once, write_stream
from ._http_security import HostGuard
from ._http_session import Exchange, HttpSession
from ._http_stateless import check_headers, check_meta, decode_params, serve_one, watch_disconnect
from .framing import DEFAULT_MAX_FRAME

if TYPE_CHECKING:
    from ..mcp.server import Server

__all__ = ("McpAsgiApp", "EventStore", "InMemoryEventStore")

logger = logging.getLogger(__name__)

_PV_NEEDLE: Final = META_PROTOCOL_VERSION.encode()
_JSON_AND_SSE: Final = ("application/json", "text/event-stream")
_ALLOW_ALL: Final[HeaderList] = [(b"allow", b"GET, POST, DELETE")]
_ALLOW_POST: Final[HeaderList] = [(b"allow", b"POST")]


class _SessionGone(Exception):
    pass


class McpAsgiApp:
    """Serve a :class:`~jsonrpc_mcp.Server` over Streamable HTTP (module docstring: what, how, limits).

    :param path: the MCP endpoint (``None``: any path, for mounting under a prefix).
    :param allowed_hosts: host names (``"name"``, ``"name:port"``, ``"*"``) accepted in ``Host``/``Origin`` besides
        the loopback names.
    :param allowed_origins: extra ``Origin`` values accepted (``"https://app.example"``, or ``"*"``).
    :param session_idle_timeout: seconds without traffic (and nothing running) after which a session ends.
    :param max_sessions: concurrent handshake-era sessions; more are refused with 503.
    :param max_body: largest request body in bytes (413 beyond).
    :param max_in_flight_per_session: requests of one session awaiting their answers (429 beyond).
    :param event_store: where resumable SSE events wait for reconnecting clients (default: bounded, in memory).
    :param json_response_preference: ``"auto"`` (JSON when the response comes first, else SSE), ``"json"``
        (always JSON; a request's side messages go to the standalone stream, or are dropped when stateless),
        ``"sse"`` (always SSE).
    :param sse_retry_ms: the ``retry`` field sent on SSE streams (reconnection delay for the client).
    :param sse_keepalive: seconds of silence after which an SSE stream gets a comment line (and an ``"auto"``
        answer still pending becomes SSE).
    :param request_timeout: how long server-to-client requests (sampling, elicitation, roots) may take.
    """

    def __init__(
        self,
        server: Server,
        *,
        path: str | None = "/mcp",
        allowed_hosts: Sequence[str] | None = None,
        allowed_origins: Sequence[str] | None = None,
        session_idle_timeout: float = 1800.0,
        max_sessions: int = 10_000,
        max_body: int = DEFAULT_MAX_FRAME,
        max_in_flight_per_session: int = 64,
        event_store: EventStore | None = None,
        json_response_preference: Preference = "auto",
        sse_retry_ms: int = 1000,
        sse_keepalive: float = 15.0,
        request_timeout: float | None = 300.0,
    ) -> None:
        if json_response_preference not in ("auto", "json", "sse"):
            raise ValueError('json_response_preference must be "auto", "json" or "sse"')
        if session_idle_timeout <= 0 or max_sessions < 1 or max_body < 1 or max_in_flight_per_session < 1:
            raise ValueError("timeouts and limits must be positive")
        self.server = server
        self.path = None if path is None else "/" + path.strip("/")
        self.guard = HostGuard(allowed_hosts, allowed_origins)
        self.session_idle_timeout = session_idle_timeout
        self.max_sessions = max_sessions
        self.max_body = max_body
        self.max_in_flight = max_in_flight_per_session
        self.store: EventStore = event_store if event_store is not None else InMemoryEventStore()
        self.preference: Preference = json_response_preference
        self.retry_ms = sse_retry_ms
        self.keepalive = sse_keepalive
        self.request_timeout = request_timeout
        self._sessions: dict[str, HttpSession] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._ready: anyio.Event | None = None
        self._stop: anyio.Event | None = None
        self._stopped: anyio.Event | None = None
        self._detached: Any = None

    @property
    def session_count(self) -> int:
        """Handshake-era sessions alive right now."""
        return len(self._sessions)

    # --- running: the task group the sessions live in ------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[McpAsgiApp]:
        """Own the sessions' task group for the duration of the block; every session ends when it exits."""
        if self._tg is not None:
            raise RuntimeError("this McpAsgiApp is already running")
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self._ready is None:
                self._ready = anyio.Event()
            self._ready.set()
            tg.start_soon(self._sweep)
            try:
                yield self
            finally:
                self._tg = None
                self._ready = None
                for session in list(self._sessions.values()):
                    session.terminate()
                self._sessions.clear()
                tg.cancel_scope.cancel()

    async def aclose(self) -> None:
        """End every session, and stop the task group if it was started lazily (waiting until it has)."""
        stop, stopped = self._stop, self._stopped
        if stop is not None:
            stop.set()
        if stopped is not None:
            await stopped.wait()
        for session in list(self._sessions.values()):
            session.terminate()
        self._sessions.clear()

    async def _ensure_running(self) -> anyio.abc.TaskGroup:
        if self._tg is not None:
            return self._tg
        if self._ready is None:
            self._ready = anyio.Event()
            self._stop = anyio.Event()
            self._stopped = anyio.Event()
            self._detached = _spawn_detached(self._run_detached)
            logger.debug("no ASGI lifespan: started the session task group lazily")
        await self._ready.wait()
        if self._tg is None:
            raise RuntimeError("the session task group stopped")
        return self._tg

    async def _run_detached(self) -> None:
        ready, stop, stopped = self._ready, self._stop, self._stopped
        try:
            async with self.lifespan():
                if stop is not None:
                    await stop.wait()
        except Exception:
            logger.exception("the lazily started session task group failed")
        finally:
            self._stop = self._stopped = self._detached = None
            if ready is not None:
                ready.set()  # anyone still waiting sees that it is not running
            if stopped is not None:
                stopped.set()

    async def _sweep(self) -> None:
        interval = min(max(self.session_idle_timeout / 4, 0.05), 30.0)
        while True:
            await anyio.sleep(interval)
            self._expire()

    def _expire(self) -> None:
        now = anyio.current_time()
        timeout = self.session_idle_timeout
        for sid, session in list(self._sessions.items()):
            if session.closed or session.idle(now, timeout):
                del self._sessions[sid]
                session.terminate()
                logger.debug("session expired after %.1f s idle", timeout)

    def _session(self, sid: str) -> HttpSession | None:
        session = self._sessions.get(sid.strip())
        if session is None:
            return None
        if session.closed or session.idle(anyio.current_time(), self.session_idle_timeout):
            self._sessions.pop(session.id, None)
            session.terminate()
            return None
        return session

    # --- ASGI ----------------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan_protocol(receive, send)
            return
        if kind != "http":
            return
        started = False

        async def tracked(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self._http(scope, receive, tracked)
        except (ClientGone, OSError):
            logger.debug("the client went away")
        except Exception:
            logger.exception("unexpected failure serving %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await send_error(send, 500, "Internal error", code=codes.INTERNAL_ERROR)

    async def _lifespan_protocol(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        try:
            async with self.lifespan():
                await send({"type": "lifespan.startup.complete"})
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception as exc:
            logger.exception("lifespan failed")
            await send({"type": "lifespan.shutdown.failed", "message": type(exc).__name__})
            return
        await send({"type": "lifespan.shutdown.complete"})

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        if self.path is not None and path.rstrip("/") != self.path.rstrip("/"):
            await send_bytes(send, 404, b"Not Found", content_type=b"text/plain; charset=utf-8")
            return
        headers = Headers(scope.get("headers", ()))
        host = headers.get("host")
        if not self.guard.host_ok(host):
            logger.info("refused a request for host %r (DNS rebinding protection; see allowed_hosts)", host)
            await send_error(send, 403, "Forbidden: this Host is not allowed")
            return
        if not self.guard.origin_ok(headers.get("origin"), host):
            logger.info("refused a request from origin %r (see allowed_origins)", headers.get("origin"))
            await send_error(send, 403, "Forbidden: this Origin is not allowed")
            return
        method = scope.get("method", "GET")
        if method == "POST":
            await self._post(headers, receive, send)
        elif method == "GET":
            await self._get(headers, receive, send)
        elif method == "DELETE":
            await self._delete(headers, send)
        else:
            await send_error(send, 405, f"Method not allowed: {method}", headers=_ALLOW_ALL)

    # --- POST ----------------------------------------------------------------------------------------------

    async def _post(self, headers: Headers, receive: Receive, send: Send) -> None:
        if not accepts(headers.get("accept"), *_JSON_AND_SSE):
            await send_error(send, 406, "Not Acceptable: Accept must list application/json and text/event-stream")
            return
        if not is_json_content(headers.get("content-type")):
            await send_error(send, 415, "Unsupported Media Type: the body must be application/json")
            return
        try:
            body = await read_body(receive, headers, self.max_body)
        except BodyTooLarge:
            await send_error(send, 413, f"Payload Too Large: the body exceeds {self.max_body} bytes")
            return
        version = _header_version(headers)
        if is_batch(body):
            await self._post_batch(headers, version, body, receive, send)
            return
        try:
            msg = classify(decode_frame(body))
        except RpcError as exc:
            await send_error(send, 400, exc.message, code=exc.code, ident=getattr(exc, "request_id", None))
            return
        if version in STATELESS_VERSIONS or (
            isinstance(msg, Request | Notification) and _PV_NEEDLE in body and _names_version(msg)
        ):
            await self._post_stateless(headers, body, msg, receive, send)
            return
        if version is not None and version not in HANDSHAKE_VERSIONS:
            await send_error(send, 400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")
            return
        sid = headers.get("mcp-session-id")
        if sid is None:
            if type(msg) is Request and msg.method == "initialize":
                await self._initialize(msg, body, send)
                return
            await send_error(send, 400, "Bad Request: the Mcp-Session-Id header is required (initialize first)")
            return
        session = self._session(sid)
        if session is None:
            await send_error(send, 404, "Not Found: this session does not exist or has ended")
            return
        session.touch()
        if not isinstance(msg, Request):
            await self._push_or_404(session, [body], send)
            return
        request = msg
        if request.id in session.exchanges:
            await send_error(send, 400, "Invalid Request: this id is already in use", ident=request.id)
            return
        if len(session.exchanges) >= self.max_in_flight:
            await _busy(send, 429, "Too Many Requests: too many requests in flight for this session", request.id)
            return
        exchange = self._open_exchange(session, [request.id], batch=False)
        await self._serve_exchange(session, exchange, [body], receive, send)

    async def _post_stateless(self, headers: Headers, body: bytes, msg: Any, receive: Receive, send: Send) -> None:
        if type(msg) is Notification:
            await send_empty(send, 202)
            return
        if type(msg) is not Request:
            await send_error(send, 400, "Invalid Request: only requests and notifications may be sent", ident=msg.id)
            return
        request: Request = msg
        params = decode_params(request)
        problem = check_meta(params)
        if problem is not None:
            await send_error(send, 400, problem, code=codes.INVALID_PARAMS, ident=request.id)
            return
        problem = check_headers(headers, request.method, params, self._tool_schema)
        if problem is not None:
            await send_error(send, 400, problem, code=codes.HEADER_MISMATCH, ident=request.id)
            return
        await serve_one(self.server, body, request, receive, send, preference=self.preference, keepalive=self.keepalive)

    async def _initialize(self, request: Request, body: bytes, send: Send) -> None:
        if len(self._sessions) >= self.max_sessions:
            self._expire()
            if len(self._sessions) >= self.max_sessions:
                wait = self._retry_after()
                await _busy(send, 503, "Service Unavailable: too many sessions", request.id, retry_after=wait)
                return
        tg = await self._ensure_running()
        sid = secrets.token_urlsafe(24)
        session = HttpSession(
            self.server,
            sid,
            store=self.store,
            max_in_flight=self.max_in_flight,
            request_timeout=self.request_timeout,
        )
        self._sessions[sid] = session
        tg.start_soon(self._run_session, session)
        exchange = session.open_exchange([request.id], resumable=False, json_only=True, batch=False)
        connection = exchange.outlet.connect()
        session.active += 1
        answer: bytes | None = None
        try:
            await session.push([body])
            async for item in connection:
                if item.kind == FINAL:
                    answer = item.frame
                    break
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            answer = None
        finally:
            session.active -= 1
            exchange.outlet.disconnect(connection)
            session.touch()
        if answer is None:
            self._sessions.pop(sid, None)
            session.terminate()
            await send_error(send, 503, "Service Unavailable: the session ended during initialize", ident=request.id)
            return
        extra: HeaderList = []
        if session.mcp.initialized:
            extra.append((b"mcp-session-id", sid.encode()))
            logger.debug("session started (%d open)", len(self._sessions))
        else:
            self._sessions.pop(sid, None)
            session.terminate()
        await send_bytes(send, 200, answer, extra)

    async def _run_session(self, session: HttpSession) -> None:
        try:
            await session.run()
        except Exception:
            logger.exception("a session ended with an error")
        finally:
            if self._sessions.get(session.id) is session:
                del self._sessions[session.id]

    def _retry_after(self) -> int:
        now = anyio.current_time()
        waits = [s.last_seen + self.session_idle_timeout - now for s in self._sessions.values() if s.active == 0]
        return max(1, math.ceil(min(waits))) if waits else max(1, math.ceil(self.session_idle_timeout))

    def _open_exchange(self, session: HttpSession, ids: Sequence[RequestId], *, batch: bool) -> Exchange:
        json_only = self.preference == "json"
        return session.open_exchange(ids, resumable=not json_only, json_only=json_only, batch=batch)

    async def _serve_exchange(
        self,
        session: HttpSession,
        exchange: Exchange,
        frames: Sequence[bytes],
        receive: Receive,
        send: Send,
        answered: Sequence[bytes] = (),
    ) -> None:
        """Push the frames to the session and write what the exchange yields (``answered``: batch replies
        made here, e.g. errors for malformed items)."""
        outlet = exchange.outlet
        after = outlet.seq
        connection = outlet.connect()
        session.active += 1
        delivered = False
        try:
            for reply in answered:
                await outlet.put(reply, RESPONSE)
            try:
                await session.push(frames, exchange)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                await send_error(send, 404, "Not Found: this session has ended")
                return
            headers = [(b"mcp-session-id", session.id.encode())]
            early: list[Item | None] = []
            if self.preference != "sse":
                delivered, early = await answer_at_once(send, connection, outlet, headers=headers)
                if delivered:
                    return
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_disconnect, receive, tg.cancel_scope)
                delivered = await write_stream(
                    send,
                    connection,
                    outlet,
                    after=after,
                    preference=self.preference,
                    headers=headers,
                    retry_ms=self.retry_ms,
                    keepalive=self.keepalive,
                    early=early,
                )
                tg.cancel_scope.cancel()
        finally:
            outlet.disconnect(connection)
            session.active -= 1
            session.touch()
            with anyio.CancelScope(shield=True):
                await session.settle(outlet, delivered)

    async def _push_or_404(self, session: HttpSession, frames: Sequence[bytes], send: Send) -> None:
        try:
            await session.push(frames)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await send_error(send, 404, "Not Found: this session has ended")
            return
        await send_empty(send, 202)

    async def _post_batch(
        self, headers: Headers, version: str | None, body: bytes, receive: Receive, send: Send
    ) -> None:
        sid = headers.get("mcp-session-id")
        session = self._session(sid) if sid is not None else None
        if sid is not None and session is None:
            await send_error(send, 404, "Not Found: this session does not exist or has ended")
            return
        if session is None or session.mcp.version not in BATCH_VERSIONS or version in STATELESS_VERSIONS:
            await send_error(send, 400, "Invalid Request: batches exist only in 2025-03-26 sessions")
            return
        try:
            items = decode_batch(body)
        except RpcError as exc:
            await send_error(send, 400, exc.message, code=exc.code)
            return
        if not items:
            await send_error(send, 400, "Invalid Request: empty batch")
            return
        session.touch()
        frames: list[bytes] = []
        errors: list[bytes] = []
        ids: list[RequestId] = []
        for raw in items:
            frame = bytes(raw)
            try:
                msg = classify(decode_frame(frame))
            except RpcError as exc:
                errors.append(encode_error(getattr(exc, "request_id", None), exc.code, exc.message))
                continue
            if type(msg) is Request:
                if msg.method == "initialize":
                    errors.append(
                        encode_error(msg.id, codes.INVALID_REQUEST, "Invalid Request: initialize is never batched")
                    )
                    continue
                if msg.id in session.exchanges or msg.id in ids:
                    errors.append(
                        encode_error(msg.id, codes.INVALID_REQUEST, "Invalid Request: this id is already in use")
                    )
                    continue
                ids.append(msg.id)
            frames.append(frame)
        if not ids:
            await self._push_or_empty(session, frames, errors, send)
            return
        if len(session.exchanges) + len(ids) > self.max_in_flight:
            await _busy(send, 429, "Too Many Requests: too many requests in flight for this session", None)
            return
        exchange = self._open_exchange(session, ids, batch=True)
        await self._serve_exchange(session, exchange, frames, receive, send, answered=errors)

    async def _push_or_empty(self, session: HttpSession, frames: list[bytes], errors: list[bytes], send: Send) -> None:
        try:
            await session.push(frames)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await send_error(send, 404, "Not Found: this session has ended")
            return
        if errors:
            await send_bytes(send, 200, b"[" + b",".join(errors) + b"]")
        else:
            await send_empty(send, 202)

    # --- GET and DELETE ------------------------------------------------------------------------------------

    async def _get(self, headers: Headers, receive: Receive, send: Send) -> None:
        version = _header_version(headers)
        if version in STATELESS_VERSIONS:
            await send_error(send, 405, "Method Not Allowed: 2026-07-28 has no GET stream", headers=_ALLOW_POST)
            return
        if not accepts(headers.get("accept"), "text/event-stream"):
            await send_error(send, 406, "Not Acceptable: Accept must list text/event-stream")
            return
        session = await self._session_of(headers, version, send)
        if session is None:
            return
        last_event_id = headers.get("last-event-id")
        if last_event_id is not None:
            found = session.resumable_outlet(last_event_id)
            if found is None:
                await send_error(send, 400, "Bad Request: Last-Event-ID names no resumable stream of this session")
                return
            outlet, after = found
        else:
            outlet = session.standalone
            if outlet.connected:
                await send_error(send, 409, "Conflict: this session's GET stream is already open")
                return
            after = outlet.written
        connection = outlet.connect()
        session.active += 1
        delivered = False
        try:
            replay = await self.store.replay(outlet.store_key, after) if outlet.seq > after else []
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_disconnect, receive, tg.cancel_scope)
                delivered = await write_stream(
                    send,
                    connection,
                    outlet,
                    after=after,
                    preference="sse",
                    headers=[(b"mcp-session-id", session.id.encode())],
                    retry_ms=self.retry_ms,
                    keepalive=self.keepalive,
                    replay=replay,
                )
                tg.cancel_scope.cancel()
        finally:
            outlet.disconnect(connection)
            session.active -= 1
            session.touch()
            with anyio.CancelScope(shield=True):
                await session.settle(outlet, delivered)

    async def _delete(self, headers: Headers, send: Send) -> None:
        version = _header_version(headers)
        if version in STATELESS_VERSIONS:
            await send_error(send, 405, "Method Not Allowed: 2026-07-28 has no sessions", headers=_ALLOW_POST)
            return
        session = await self._session_of(headers, version, send)
        if session is None:
            return
        self._sessions.pop(session.id, None)
        session.terminate()
        logger.debug("session ended by DELETE (%d open)", len(self._sessions))
        await send_empty(send, 200)

    async def _session_of(self, headers: Headers, version: str | None, send: Send) -> HttpSession | None:
        sid = headers.get("mcp-session-id")
        if sid is None:
            await send_error(send, 400, "Bad Request: the Mcp-Session-Id header is required")
            return None
        if version is not None and version not in HANDSHAKE_VERSIONS:
            await send_error(send, 400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")
            return None
        session = self._session(sid)
        if session is None:
            await send_error(send, 404, "Not Found: this session does not exist or has ended")
            return None
        session.touch()
        return session

    # --- helpers -------------------------------------------------------------------------------------------

    def _tool_schema(self, name: str) -> Mapping[str, Any] | None:
        tools = getattr(self.server, "_tools", None)
        if isinstance(tools, dict):
            entry = tools.get(name)
            tool = getattr(entry, "tool", None)
        else:
            tool = next((t for t in self.server.list_tools() if t.name == name), None)
        schema = getattr(tool, "input_schema", None)
        return schema if isinstance(schema, dict) else None


def _header_version(headers: Headers) -> str | None:
    value = headers.get("mcp-protocol-version")
    return value.strip(" \t") if value is not None else None


def _names_version(msg: Request | Notification) -> bool:
    """True when the params' ``_meta`` names a protocol version (the request asks for the stateless era)."""
    if msg.params is None:
        return False
    try:
        params = decode_params(msg)
    except Exception:
        return False
    meta = params.get("_meta") if params is not None else None
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


async def _busy(send: Send, status: int, message: str, ident: RequestId | None, retry_after: int = 1) -> None:
    await send_error(send, status, message, code=BUSY, ident=ident, headers=[(b"retry-after", b"%d" % retry_after)])


def _spawn_detached(fn: Callable[[], Coroutine[Any, Any, None]]) -> Any:
    """Start ``fn()`` in the background of the running event loop, outside any request's task (an asyncio task,
    or a trio system task); returns the task handle to keep (asyncio only holds weak references)."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        import trio

        trio.lowlevel.spawn_system_task(fn)
        return None
    return loop.create_task(fn())
