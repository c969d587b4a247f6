"""Streamable HTTP as a plain ASGI 3 application, both eras on one endpoint (L6).

::

    from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

    app = McpAsgiApp(server)                     # uvicorn module:app, hypercorn module:app, ...

    # inside Starlette / FastAPI, which do not pass the lifespan on to mounted apps
    # (the endpoint is then /mcp/; Starlette answers /mcp with a 307 to it):
    mcp = McpAsgiApp(server, path=None)
    web = Starlette(routes=[Mount("/mcp", app=mcp)], lifespan=mcp.lifespan)

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

Limits: ``max_body`` (413), ``body_timeout`` (408), ``max_sessions`` (when full, the least recently used idle
session gives way; 503 + ``Retry-After`` only when every session is busy), ``max_in_flight_per_session`` (429);
sessions idle for ``session_idle_timeout`` seconds are ended. ``Host`` and ``Origin`` are checked against
allow-lists (403); by default only loopback names pass — set ``allowed_hosts`` (``["*"]`` for any) when
serving other names. Error bodies are JSON-RPC errors with a plain sentence; details go to the log only.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import anyio

from ..errors import RpcError
from ..jsonrpc import codes
from ..jsonrpc.wire import Message, Notification, Request, is_batch, read_message
from ..mcp.eras import Call, meta_problem, notification_is_stateless, read_call
from ..mcp.headers import mirrored_header_problem
from ..mcp.versions import STATELESS_VERSIONS
from ._http_cors import Cors
from ._http_handshake import HandshakeEndpoint
from ._http_handshake_session import HttpSession
from ._http_io import (
    JSON_AND_SSE,
    ClientGone,
    HeaderList,
    Headers,
    HttpRefusal,
    Receive,
    Scope,
    Send,
    accepts,
    body_type_problem,
    read_body_or_refuse,
    refuse,
    repeated_header_problem,
    send_bytes,
    send_empty,
    send_error,
)
from ._http_legacy_sse import LegacySseEndpoint, Serve
from ._http_outlet import Preference, ResponseFormat
from ._http_security import HostGuard
from ._http_session_table import SessionTable
from ._http_stateless import serve_alone, status_of
from .events import EventStore, InMemoryEventStore
from .framing import DEFAULT_MAX_FRAME
from .http_options import check_app_options
from .http_policy import HttpPolicy
from .session_store import SharedBackend

if TYPE_CHECKING:
    from ..mcp.server import Server

__all__ = ("McpAsgiApp", "EventStore", "InMemoryEventStore")

logger = logging.getLogger(__name__)

_ALLOW_ALL: Final[HeaderList] = [(b"allow", b"GET, POST, DELETE")]
_ALLOW_POST: Final[HeaderList] = [(b"allow", b"POST")]
_SSE: Final = ("text/event-stream",)


class McpAsgiApp:
    """Serve a :class:`~jsonrpc_mcp.Server` over Streamable HTTP (module docstring: what, how, limits).

    :param path: the MCP endpoint (``None``: any path, for mounting under a prefix).
    :param allowed_hosts: host names (``"name"``, ``"name:port"``, ``"*"``) accepted in ``Host``/``Origin`` besides
        the loopback names.
    :param allowed_origins: extra ``Origin`` values accepted (``"https://app.example"``, or ``"*"``).
    :param cors_origins: browser origins allowed cross-origin requests (CORS, off by default): preflights are
        answered and responses carry the CORS headers; each is also an allowed ``Origin``.
    :param session_idle_timeout: seconds without traffic (and nothing running) after which a session ends.
    :param max_sessions: concurrent handshake-era sessions; when full, the least recently used idle one is ended
        to make room (503 when every session has something under way).
    :param max_sessions_per_client: concurrent handshake-era sessions of one client, when the ``http_policy``
        tells clients apart (``ProtectedResource``: per principal); past it, that client's least recently used idle
        session is ended (503 when all of them have something under way). ``None``: no bound per client.
    :param max_body: largest request body in bytes (413 beyond).
    :param body_timeout: seconds a body that comes in several messages may take from its first to its last (408
        beyond, and the connection is closed); ``None`` for no deadline.
    :param max_in_flight_per_session: requests of one session awaiting their answers (429 beyond).
    :param event_store: where resumable SSE events wait for reconnecting clients (default: bounded, in memory).
    :param json_response_preference: ``"auto"`` (JSON when the response comes first, else SSE), ``"json"``
        (always JSON; a request's side messages go to the standalone stream, or are dropped when stateless),
        ``"sse"`` (always SSE).
    :param sse_retry_ms: the ``retry`` field sent on SSE streams (reconnection delay for the client).
    :param sse_keepalive: seconds of silence after which an SSE stream gets a comment line (and an ``"auto"``
        answer still pending becomes SSE).
    :param request_timeout: how long server-to-client requests (sampling, elicitation, roots) may take.
    :param sessions: ``False`` serves every handshake-era POST on its own, without sessions (as the official
        SDK's ``stateless_http=True`` does): any worker of several can answer any request. ``initialize`` is
        answered without an ``Mcp-Session-Id``; a request is served as if ``initialize`` had settled the version
        of its ``MCP-Protocol-Version`` header (2025-03-26 when it has none), for a client that declared no
        capabilities, so nothing is asked of it (sampling, elicitation and roots are unavailable); there is no GET
        stream (405) and nothing to DELETE (405); notifications get 202. The 2026-07-28 era needs no sessions.
    :param backend: what several workers serving this URL share (:mod:`jsonrpc_mcp.backends`): a
        ``redis://`` URL or a backend object. It carries the server's notifications to every worker's clients,
        its ``requestState`` keys and single-use claims, and the handshake-era sessions, so that any worker can
        serve any request. Runs while the app's task group does (the ASGI lifespan).
    :param trim_memory: after a burst of sessions (256 or more at once) has ended, hand the process's free heap
        memory back to the operating system (glibc's ``malloc_trim``; a few ms, once per burst). Off by default:
        it acts on the whole process, which may not be ours alone.
    :param http_policy: decisions before the endpoint serves a request (:mod:`.http_policy`), e.g. OAuth bearer
        tokens with :class:`jsonrpc_mcp.auth.ProtectedResource`.
    :param legacy_sse: also serve the 2024-11-05 HTTP+SSE transport, ``GET /sse`` and ``POST /messages/``
        (:mod:`._http_legacy_sse`), for clients that speak nothing else; behind the same checks and bounds
        (``max_sessions``, ``max_sessions_per_client``, ``max_body``, ``body_timeout``, the policy). Off by default.
    """

    def __init__(
        self,
        server: Server,
        *,
        path: str | None = "/mcp",
        allowed_hosts: Sequence[str] | None = None,
        allowed_origins: Sequence[str] | None = None,
        cors_origins: Sequence[str] | None = None,
        session_idle_timeout: float = 1800.0,
        max_sessions: int = 10_000,
        max_sessions_per_client: int | None = 100,
        max_body: int = DEFAULT_MAX_FRAME,
        body_timeout: float | None = 30.0,
        max_in_flight_per_session: int = 64,
        event_store: EventStore | None = None,
        json_response_preference: Preference = "auto",
        sse_retry_ms: int = 1000,
        sse_keepalive: float = 15.0,
        request_timeout: float | None = 300.0,
        trim_memory: bool = False,
        sessions: bool = True,
        http_policy: HttpPolicy | None = None,
        backend: SharedBackend | str | None = None,
        legacy_sse: bool = False,
    ) -> None:
        check_app_options(locals())  # a wrong setting fails here, by its name (never on a request)
        self.server = server
        self.path = None if path is None else "/" + path.strip("/")
        self._endpoint = None if self.path is None else self.path.rstrip("/")  # what the request path must match
        self.guard = HostGuard(allowed_hosts, [*(allowed_origins or ()), *(cors_origins or ())])
        self.cors = Cors(cors_origins) if cors_origins else None  # (off unless origins are named)
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.store: EventStore = event_store if event_store is not None else InMemoryEventStore()
        fmt = ResponseFormat(json_response_preference, sse_retry_ms, sse_keepalive)
        #: How a 2026-07-28 request is answered: its JSON-RPC errors carry their own HTTP statuses.
        self.stateless = ResponseFormat(json_response_preference, 0, sse_keepalive, status_of, 204)
        self.table = SessionTable(
            idle_timeout=session_idle_timeout,
            max_sessions=max_sessions,
            max_per_owner=max_sessions_per_client,
            trim_memory=trim_memory,
        )
        self.handshake = HandshakeEndpoint(
            server,
            self.table,
            self.store,
            fmt,
            max_in_flight=max_in_flight_per_session,
            request_timeout=request_timeout,
            sessions=sessions,
        )
        #: The 2024-11-05 HTTP+SSE transport's routes, when served (``legacy_sse``).
        self.legacy: LegacySseEndpoint | None = None
        if legacy_sse:
            self.legacy = LegacySseEndpoint(
                server,
                max_sessions=max_sessions,
                max_per_owner=max_sessions_per_client,
                max_body=max_body,
                body_timeout=body_timeout,
                max_in_flight=max_in_flight_per_session,
                request_timeout=request_timeout,
                keepalive=sse_keepalive,
            )
        self.http_policy = http_policy
        if http_policy is not None:
            http_policy.attach(self)
            self.handshake.policy = http_policy
            if self.legacy is not None:
                self.legacy.policy = http_policy
        self.backend: SharedBackend | None = None
        if backend is not None:
            from ._http_shared_sessions import share

            self.backend = share(self, backend)

    @property
    def session_count(self) -> int:
        """Handshake-era sessions alive right now."""
        return len(self.table)

    @property
    def sessions(self) -> Mapping[str, HttpSession]:
        """The live handshake-era sessions by id (read-only)."""
        return self.table.view

    @property
    def running(self) -> bool:
        """True while the sessions' task group is running (lifespan, embedder, or lazily started)."""
        return self.table.running

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Own the sessions' task group for the duration of the block; every session ends when it exits. It yields
        nothing, and takes the framework's app (ignored), so it can be a framework's lifespan as it is:
        ``Starlette(..., lifespan=mcp.lifespan)``, ``FastAPI(lifespan=mcp.lifespan)``."""
        try:
            async with self.table.run():
                try:
                    yield
                finally:
                    await self.end_streams()
        finally:
            if self.legacy is not None:
                self.legacy.close_all()

    async def aclose(self) -> None:
        """End every session, and stop the task group if it was started lazily (waiting until it has)."""
        await self.end_streams()
        if self.legacy is not None:
            self.legacy.close_all()
        await self.table.aclose()

    async def end_streams(self) -> None:
        """The server is stopping: its 2026-07-28 ``subscriptions/listen`` streams are ended as that revision says
        (``notifications/cancelled`` referencing each, then its result; :meth:`~jsonrpc_mcp.Server.end_listens`).
        Called when the app closes, and by :func:`~jsonrpc_mcp.transports.http_serve.serve_http` as soon as uvicorn
        begins its shutdown (which waits for open streams before the lifespan ends)."""
        with anyio.CancelScope(shield=True):
            await self.server.end_listens()

    # --- ASGI ----------------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http":
            if kind == "lifespan":
                await self._lifespan_protocol(receive, send)
            return
        started = False

        def tracked(message: Any) -> Awaitable[None]:
            # (not a coroutine: it hands back the server's own awaitable, so a send costs no extra coroutine)
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            return send(message)

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

    def _http(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # (a plain function returning what the caller awaits: every branch ends in one await, and a coroutine less
        # per request is worth having)
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        serve: Serve = self._serve
        if self.legacy is not None and (legacy := self.legacy.route(path)) is not None:
            serve = legacy  # (the HTTP+SSE transport's routes, behind the same checks)
        elif self._endpoint is not None and path != self._endpoint and path.rstrip("/") != self._endpoint:
            if self.http_policy is not None and (route := self.http_policy.route(path)) is not None:
                return route(scope, receive, send)
            return send_bytes(send, 404, b"Not Found", content_type=b"text/plain; charset=utf-8")
        headers = Headers(scope.get("headers", ()))
        headers.peer = scope.get("client")
        raw_host = headers.raw(b"host")
        host = raw_host.decode("latin-1") if raw_host is not None else None
        if not self.guard.host_ok(host):
            logger.info("refused a request for host %r (DNS rebinding protection; see allowed_hosts)", host)
            return send_error(send, 403, "Forbidden: this Host is not allowed")
        origin = headers.raw(b"origin")
        if origin is not None and not self.guard.origin_ok(origin.decode("latin-1"), host):
            logger.info("refused a request from origin %r (see allowed_origins)", origin.decode("latin-1"))
            return send_error(send, 403, "Forbidden: this Origin is not allowed")
        method = scope.get("method", "GET")
        if self.cors is not None and origin is not None:
            if method == "OPTIONS":
                return self.cors.preflight(origin, headers, send)
            send = self.cors.wrap(origin, send)
        if headers.repeats and (problem := repeated_header_problem(headers)) is not None:
            return send_error(send, 400, problem)
        if self.http_policy is not None:
            return self._admit(serve, method, scope, headers, receive, send)
        return serve(method, scope, headers, receive, send)

    def _serve(self, method: str, scope: Scope, headers: Headers, receive: Receive, send: Send) -> Awaitable[None]:
        if method == "POST":
            return self._post(headers, receive, send)
        if method == "GET":
            return self._get(headers, receive, send)
        if method == "DELETE":
            return self._delete(headers, send)
        return send_error(send, 405, f"Method not allowed: {method}", headers=_ALLOW_ALL)

    async def _admit(
        self, serve: Serve, method: str, scope: Scope, headers: Headers, receive: Receive, send: Send
    ) -> None:
        policy = self.http_policy
        assert policy is not None
        admitted = await policy.admit(scope, headers, send)
        if admitted is None:
            return
        headers.until = policy.admitted_until(headers)  # (the streams of the response end then)
        await serve(method, scope, headers, receive, admitted)

    # --- POST ----------------------------------------------------------------------------------------------

    async def _post(self, headers: Headers, receive: Receive, send: Send) -> None:
        if not accepts(headers.raw(b"accept"), JSON_AND_SSE):
            await send_error(send, 406, "Not Acceptable: Accept must list application/json and text/event-stream")
            return
        content_type = headers.raw(b"content-type")
        if content_type != b"application/json" and (problem := body_type_problem(content_type)) is not None:
            await send_error(send, 415, problem)
            return
        message = await receive()
        body = message.get("body", b"")
        if message["type"] != "http.request" or message.get("more_body", False) or len(body) > self.max_body:
            # (the usual body comes whole in one message, read above without another coroutine)
            read = await read_body_or_refuse(receive, headers, send, self.max_body, self.body_timeout, message)
            if read is None:
                return
            body = read
        version = _header_version(headers)
        if not body.startswith(b"{") and is_batch(body):
            try:
                await self.handshake.post_batch(headers, version, body, receive, send)
            except HttpRefusal as refusal:  # (refused before a session's dispatcher took it)
                await refuse(send, refusal)
            return
        try:
            msg = read_message(body)
        except RpcError as exc:
            # (a notification or a response is never answered: its refusal carries no id)
            ident = None if getattr(exc, "silent", False) else getattr(exc, "request_id", None)
            await send_error(send, 400, exc.message, code=exc.code, ident=ident)
            return
        if self.http_policy is not None and not await self.http_policy.admit_message(headers, msg, send):
            return
        call = read_call(self.server.methods, msg, version, headers) if type(msg) is Request else None
        if (
            version in STATELESS_VERSIONS
            or (call is not None and call.stateless)
            or (type(msg) is Notification and notification_is_stateless(msg))
        ):
            await self._post_stateless(headers, msg, call, receive, send)
            return
        try:
            await self.handshake.post(headers, version, msg, call, receive, send)
        except HttpRefusal as refusal:  # (refused before a session's dispatcher took it)
            await refuse(send, refusal)

    async def _post_stateless(
        self, headers: Headers, msg: Message, call: Call | None, receive: Receive, send: Send
    ) -> None:
        if type(msg) is Notification:
            await send_empty(send, 202)
            return
        if type(msg) is not Request or call is None:
            ident = getattr(msg, "id", None)
            await send_error(send, 400, "Invalid Request: only requests and notifications may be sent", ident=ident)
            return
        problem = meta_problem(call.meta)
        if problem is not None:
            await send_error(send, 400, problem.message, code=problem.code, ident=msg.id)
            return
        mismatch = mirrored_header_problem(headers.values, call, self.server.get_tool)
        if mismatch is not None:
            await send_error(send, 400, mismatch, code=codes.HEADER_MISMATCH, ident=msg.id)
            return
        await serve_alone(
            self.server,
            call,
            headers,
            receive,
            send,
            self.stateless,
            detached=self.table.start_detached,
        )

    # --- GET and DELETE ------------------------------------------------------------------------------------

    async def _get(self, headers: Headers, receive: Receive, send: Send) -> None:
        version = _header_version(headers)
        if version in STATELESS_VERSIONS:
            await send_error(send, 405, "Method Not Allowed: 2026-07-28 has no GET stream", headers=_ALLOW_POST)
            return
        if not accepts(headers.raw(b"accept"), _SSE):
            await send_error(send, 406, "Not Acceptable: Accept must list text/event-stream")
            return
        try:
            await self.handshake.get(headers, version, receive, send)
        except HttpRefusal as refusal:
            await refuse(send, refusal)

    async def _delete(self, headers: Headers, send: Send) -> None:
        version = _header_version(headers)
        if version in STATELESS_VERSIONS:
            await send_error(send, 405, "Method Not Allowed: 2026-07-28 has no sessions", headers=_ALLOW_POST)
            return
        try:
            await self.handshake.delete(headers, version, send)
        except HttpRefusal as refusal:
            await refuse(send, refusal)


def _header_version(headers: Headers) -> str | None:
    value = headers.raw(b"mcp-protocol-version")
    return value.decode("latin-1").strip(" \t") if value is not None else None
