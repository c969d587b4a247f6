"""The 2024-11-05 HTTP+SSE transport, server side (L6): ``GET /sse`` and ``POST /messages/?session_id=…``.

The client opens an SSE stream with ``GET /sse``. Its first event, ``endpoint``, names the URL the client POSTs
its messages to (``/messages/?session_id=<id>``, the paths the official SDKs use). Each POSTed message is answered
``202 Accepted`` and handed to the session's dispatcher, which answers it as it answers a frame read from stdio;
everything the server sends (responses, error replies, notifications, its own requests) goes out as ``message``
events on that one stream. A session lasts as long as its stream: when the client goes away, or the app stops, the
session ends and its id is a 404.

It is served by :class:`~jsonrpc_mcp.transports.http_asgi.McpAsgiApp` (``legacy_sse=True``), behind the same checks
as Streamable HTTP: ``Host`` and ``Origin``, the HTTP policy (authorization; a session belongs to whoever opened its
stream, and a POST of anyone else gets the 404 of a session that does not exist), the body's type, size and
deadline, and the app's session bounds. Deprecated since 2025-03-26: for clients that speak nothing else.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs

import anyio

from ..errors import RpcError
from ..jsonrpc.streams import Arrival, MessageStream, Outgoing
from ..jsonrpc.wire import read_message
from ._http_io import HeaderList, Headers, Receive, Scope, Send, accepts, read_body_or_refuse, send_empty, send_error
from .sse import encode_comment, encode_event

if TYPE_CHECKING:
    from ..mcp.server import Server
    from .http_policy import HttpPolicy

__all__ = ("LegacySseEndpoint", "SSE_PATH", "MESSAGES_PATH")

logger = logging.getLogger(__name__)

#: Where the stream is opened, and where messages are posted (relative to the app's root path).
SSE_PATH: Final = "/sse"
MESSAGES_PATH: Final = "/messages/"
_SSE: Final = ("text/event-stream",)
_STREAM_HEADERS: Final[HeaderList] = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),  # (a proxy that buffers would hold every event back)
]

#: ``(method, scope, headers, receive, send)``: how the app hands a request on (its ``_serve``'s signature).
Serve = Callable[[str, Scope, Headers, Receive, Send], Awaitable[None]]


class LegacyStream(MessageStream):
    """One HTTP+SSE session: the frames POSTed to it in (each with its POST's headers, the
    :class:`~jsonrpc_mcp.jsonrpc.wire.Intake` its handler reads), ``message`` events on its GET stream out."""

    def __init__(
        self, session_id: str, owner: str | None, write: Callable[[bytes], Awaitable[None]], buffer: int
    ) -> None:
        self.session_id = session_id
        self.owner = owner
        self._write = write
        self.inbox, self._inbox = anyio.create_memory_object_stream[tuple[bytes, Headers]](buffer)

    async def receive(self) -> Sequence[bytes]:
        """The next POSTed frame, with its POST's headers."""
        try:
            frame, headers = await self._inbox.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise anyio.EndOfStream from None
        return Arrival((frame,), headers)

    async def send(self, frames: Sequence[Outgoing]) -> None:
        await self._write(b"".join(encode_event(out.frame, event="message") for out in frames))

    async def aclose(self) -> None:
        self.inbox.close()
        self._inbox.close()


class LegacySseEndpoint:
    """The two routes of the HTTP+SSE transport, and the sessions their streams hold."""

    def __init__(
        self,
        server: Server,
        *,
        max_sessions: int,
        max_per_owner: int | None,
        max_body: int,
        body_timeout: float | None,
        max_in_flight: int,
        request_timeout: float | None,
        keepalive: float,
    ) -> None:
        self.server = server
        self.max_sessions = max_sessions
        self.max_per_owner = max_per_owner
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.max_in_flight = max_in_flight
        self.request_timeout = request_timeout
        self.keepalive = keepalive
        self.policy: HttpPolicy | None = None
        self.sessions: dict[str, LegacyStream] = {}
        self._scopes: dict[str, anyio.CancelScope] = {}

    def route(self, path: str) -> Serve | None:
        """The handler of ``path`` when it is one of the transport's two routes, else ``None``."""
        if path == SSE_PATH:
            return self._sse
        if path.rstrip("/") == MESSAGES_PATH.rstrip("/"):
            return self._messages
        return None

    def close_all(self) -> None:
        """End every session (the app is stopping): each stream is ended, and its POSTs get 404 from now on."""
        for scope in list(self._scopes.values()):
            scope.cancel()

    # --- GET /sse --------------------------------------------------------------------------------------------

    async def _sse(self, method: str, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        if method != "GET":
            await send_error(send, 405, f"Method not allowed: {method}", headers=[(b"allow", b"GET")])
            return
        if not accepts(headers.raw(b"accept"), _SSE):
            await send_error(send, 406, "Not Acceptable: Accept must list text/event-stream")
            return
        owner = self.policy.session_owner(headers) if self.policy is not None else None
        if (problem := self._full(owner)) is not None:
            await send_error(send, 503, problem, headers=[(b"retry-after", b"1")])
            return
        session_id = secrets.token_hex(16)
        lock = anyio.Lock()

        async def write(chunk: bytes) -> None:
            async with lock:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})

        stream = LegacyStream(session_id, owner, write, self.max_in_flight)
        endpoint = f"{scope.get('root_path', '')}{MESSAGES_PATH}?session_id={session_id}"
        await send({"type": "http.response.start", "status": 200, "headers": _STREAM_HEADERS})
        await write(encode_event(endpoint.encode(), event="endpoint"))
        self.sessions[session_id] = stream
        try:
            with anyio.CancelScope() as cancel:
                self._scopes[session_id] = cancel
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_cancel_when_gone, receive, cancel)
                    tg.start_soon(_keep_alive, write, self.keepalive)
                    await self.server.serve(
                        stream, max_in_flight=self.max_in_flight, request_timeout=self.request_timeout
                    )
                    tg.cancel_scope.cancel()
        finally:
            self.sessions.pop(session_id, None)
            self._scopes.pop(session_id, None)
            await stream.aclose()
        # (the end of the response: the client went away, or the app is stopping; a server that knows the client has
        # gone ignores it)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _full(self, owner: str | None) -> str | None:
        if len(self.sessions) >= self.max_sessions:
            return "Service Unavailable: too many sessions; try again later"
        if owner is not None and self.max_per_owner is not None and self._count(owner) >= self.max_per_owner:
            return "Service Unavailable: too many sessions of this client; close one first"
        return None

    def _count(self, owner: str) -> int:
        return sum(1 for stream in self.sessions.values() if stream.owner == owner)

    # --- POST /messages/ -------------------------------------------------------------------------------------

    async def _messages(self, method: str, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        if method != "POST":
            await send_error(send, 405, f"Method not allowed: {method}", headers=[(b"allow", b"POST")])
            return
        ids = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_id")
        if not ids:
            await send_error(send, 400, "Bad Request: session_id is required (the endpoint event names the URL)")
            return
        stream = self.sessions.get(ids[0])
        if stream is None or (self.policy is not None and self.policy.session_owner(headers) != stream.owner):
            await send_error(send, 404, "Not Found: no such session (open a new one with GET /sse)")
            return
        body = await read_body_or_refuse(receive, headers, send, self.max_body, self.body_timeout)
        if body is None:
            return
        message = None
        if body.startswith(b"{"):
            try:
                message = read_message(body)
            except RpcError:
                pass  # (the dispatcher answers it, on the stream, as it answers a bad frame from stdio)
        policy = self.policy
        if message is not None and policy is not None and not await policy.admit_message(headers, message, send):
            return
        try:
            stream.inbox.send_nowait((body, headers))
        except anyio.WouldBlock:
            await send_error(send, 429, "Too Many Requests: the session has too many messages waiting")
            return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await send_error(send, 404, "Not Found: the session has ended (open a new one with GET /sse)")
            return
        await send_empty(send, 202)


async def _cancel_when_gone(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _keep_alive(write: Callable[[bytes], Awaitable[None]], every: float) -> None:
    """A comment line after each ``every`` seconds, so that proxies and clients do not take a quiet stream for a
    dead one."""
    while True:
        await anyio.sleep(every)
        await write(encode_comment())
