"""Streamable HTTP, handshake era (2024-11-05 .. 2025-11-25): what a session's requests get (L6 helper).

:class:`HandshakeEndpoint` serves the requests the app has routed to this era: ``initialize`` (which mints a
session), POSTs of requests (an exchange answered as JSON or a resumable SSE stream), notifications and
responses (202), 2025-03-26 batches, ``GET`` (the standalone stream, or a resumption with ``Last-Event-ID``)
and ``DELETE``. Sessions live in the app's :class:`~._http_sessions.SessionTable`.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import RpcError
from ..jsonrpc import codes
from ..jsonrpc.dispatch import failure_reply
from ..jsonrpc.wire import (
    Message,
    Notification,
    Request,
    RequestId,
    classify,
    decode_batch,
    decode_frame,
    encode_error,
    encode_result,
)
from ..mcp.versions import BATCH_VERSIONS, HANDSHAKE_VERSIONS, STATELESS_VERSIONS
from ._http_events import EventStore, InMemoryEventStore
from ._http_io import HeaderList, Headers, Receive, Send, send_busy, send_bytes, send_empty, send_error
from ._http_outlet import RESPONSE, Feed, Item, Outlet, Preference, answer_at_once, write_stream
from ._http_session import Exchange, HttpSession
from ._http_sessions import SessionTable
from ._http_stateless import watch_disconnect

if TYPE_CHECKING:
    from ..mcp.session import ServerApp

__all__ = ("HandshakeEndpoint",)

logger = logging.getLogger(__name__)


class HandshakeEndpoint:
    """The handshake-era half of the app (its settings are the app's)."""

    def __init__(
        self,
        server: ServerApp,
        table: SessionTable,
        store: EventStore,
        *,
        max_in_flight: int,
        preference: Preference,
        retry_ms: int,
        keepalive: float,
        request_timeout: float | None,
    ) -> None:
        self.server = server
        self.table = table
        self.store = store
        self.max_in_flight = max_in_flight
        self.preference = preference
        self.retry_ms = retry_ms
        self.keepalive = keepalive
        self.request_timeout = request_timeout

    async def post(
        self, headers: Headers, version: str | None, msg: Message, body: bytes, receive: Receive, send: Send
    ) -> None:
        """One JSON-RPC message POSTed outside the stateless era."""
        if version is not None and version not in HANDSHAKE_VERSIONS:
            await send_error(send, 400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")
            return
        sid = headers.raw(b"mcp-session-id")
        if sid is None:
            if type(msg) is Request and msg.method == "initialize":
                await self._initialize(msg, send)
                return
            await send_error(send, 400, "Bad Request: the Mcp-Session-Id header is required (initialize first)")
            return
        session = self.table.get(sid.decode("latin-1"))
        if session is None:
            await send_error(send, 404, "Not Found: this session does not exist or has ended")
            return
        session.touch()
        if not isinstance(msg, Request):
            if session.task is None and type(msg) is Notification and msg.method == "notifications/initialized":
                # Nothing is queued before it (the session has no task yet): handled here, it starts none.
                session.mcp.on_notification(msg)
                await send_empty(send, 202)
                return
            await self._push_or_404(session, [body], send)
            return
        request = msg
        if request.id in session.exchanges:
            await send_error(send, 400, "Invalid Request: this id is already in use", ident=request.id)
            return
        if len(session.exchanges) >= self.max_in_flight:
            await send_busy(send, 429, "Too Many Requests: too many requests in flight for this session", request.id)
            return
        # The outlet is registered with the session only when the answer has to wait (SSE, resumable); an answer
        # written at once never needs it.
        exchange = self._open_exchange(session, (request.id,), batch=False, headers=headers, register=False)
        if (
            self.preference == "sse"
            or request.method == "initialize"
            or not session.mcp.initialized
            # (a task started but not running yet may have frames queued: this request comes after them)
            or (session.task is not None and not session.dispatcher.running)
        ):
            session.register(exchange.outlet)
            await self._serve_exchange(session, exchange, [body], receive, send)
            return
        # The fast path: call the handler here. An answer ready at once is written as JSON without a hop through
        # the session's dispatcher task; a handler that has to wait is handed to the dispatcher (SSE), whose task
        # is started for it if the session has none yet.
        answer = _answer_now(session, request)
        if not isinstance(answer, bytes):
            if not session.dispatcher.running:
                try:
                    await session.ensure_running()
                except BaseException:
                    answer.close()
                    session.exchanges.pop(request.id, None)
                    raise
            if session.dispatcher.adopt(request, answer):
                session.register(exchange.outlet)
                await self._serve_exchange(session, exchange, [], receive, send, pending=True)
                return
            answer = encode_error(request.id, codes.INTERNAL_ERROR, "Internal error")
            session.touch()  # (it waited for the dispatcher; an answer made at once took no time since the touch)
        session.exchanges.pop(request.id, None)
        await send_bytes(send, 200, answer, session.id_header)

    async def _initialize(self, request: Request, send: Send) -> None:
        if self.table.full():
            wait = self.table.retry_after()
            await send_busy(send, 503, "Service Unavailable: too many sessions", request.id, retry_after=wait)
            return
        session = HttpSession(
            self.server,
            secrets.token_urlsafe(24),
            store=self.store,
            max_in_flight=self.max_in_flight,
            request_timeout=self.request_timeout,
        )
        await self.table.start(session)
        # ``initialize`` is answered at once (the session answers it synchronously): no trip through the session's
        # dispatcher task, nothing made to wait on (which, for a burst of sessions, is what raises the peak).
        answer = _answer_now(session, request)
        if not isinstance(answer, bytes):  # pragma: no cover - initialize never has an async handler
            answer.close()
            answer = encode_error(request.id, codes.INTERNAL_ERROR, "Internal error")
        session.touch()
        extra: HeaderList = []
        if session.mcp.initialized:
            extra.append((b"mcp-session-id", session.id.encode()))
            logger.debug("session started (%d open)", len(self.table))
        else:
            self.table.end(session)  # a failed initialize mints no session
        await send_bytes(send, 200, answer, extra)

    def _open_exchange(
        self,
        session: HttpSession,
        ids: Sequence[RequestId],
        *,
        batch: bool,
        headers: Headers | None = None,
        register: bool = True,
    ) -> Exchange:
        json_only = self.preference == "json"
        return session.open_exchange(
            ids, resumable=not json_only, json_only=json_only, batch=batch, headers=headers, register=register
        )

    async def _serve_exchange(
        self,
        session: HttpSession,
        exchange: Exchange,
        frames: Sequence[bytes],
        receive: Receive,
        send: Send,
        answered: Sequence[bytes] = (),
        *,
        pending: bool = False,
    ) -> None:
        """Push the frames to the session and write what the exchange yields (``answered``: batch replies
        made here, e.g. errors for malformed items)."""
        outlet = exchange.outlet
        after = outlet.seq
        connection = outlet.connect()
        session.active += 1
        delivered = False
        released = False
        try:
            for reply in answered:
                await outlet.put(reply, RESPONSE)
            try:
                await session.push(frames, exchange)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                await send_error(send, 404, "Not Found: this session has ended")
                return
            headers = session.id_header
            early: list[Item | None] = []
            if self.preference != "sse":
                # pending: the handler was handed to the dispatcher, its task is started (no hint needed, nor the
                # scheduler pass that taking one costs)
                delivered, early = await answer_at_once(send, connection, outlet, headers=headers, pending=pending)
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
                released = True
                await _release(session, outlet, connection, delivered)  # before the task group's exit yields
        finally:
            if not released:
                await _release(session, outlet, connection, delivered)

    async def _push_or_404(self, session: HttpSession, frames: Sequence[bytes], send: Send) -> None:
        try:
            await session.push(frames)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await send_error(send, 404, "Not Found: this session has ended")
            return
        await send_empty(send, 202)

    async def post_batch(
        self, headers: Headers, version: str | None, body: bytes, receive: Receive, send: Send
    ) -> None:
        sid = headers.get("mcp-session-id")
        session = self.table.get(sid) if sid is not None else None
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
            await send_busy(send, 429, "Too Many Requests: too many requests in flight for this session", None)
            return
        exchange = self._open_exchange(session, ids, batch=True, headers=headers)
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

    async def get(self, headers: Headers, version: str | None, receive: Receive, send: Send) -> None:
        """The standalone stream, or the resumption of any stream of the session with ``Last-Event-ID``."""
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
        released = False
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
                # A delivered stream is forgotten before this task yields again (closing the task group does), so
                # a client that resumes it right after reading its end finds it gone.
                released = True
                await _release(session, outlet, connection, delivered)
        finally:
            if not released:
                await _release(session, outlet, connection, delivered)

    async def delete(self, headers: Headers, version: str | None, send: Send) -> None:
        """End the session."""
        session = await self._session_of(headers, version, send)
        if session is None:
            return
        self.table.end(session)
        logger.debug("session ended by DELETE (%d open)", len(self.table))
        await send_empty(send, 200)

    async def _session_of(self, headers: Headers, version: str | None, send: Send) -> HttpSession | None:
        sid = headers.get("mcp-session-id")
        if sid is None:
            await send_error(send, 400, "Bad Request: the Mcp-Session-Id header is required")
            return None
        if version is not None and version not in HANDSHAKE_VERSIONS:
            await send_error(send, 400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")
            return None
        session = self.table.get(sid)
        if session is None:
            await send_error(send, 404, "Not Found: this session does not exist or has ended")
            return None
        session.touch()
        return session


def _answer_now(session: HttpSession, request: Request) -> bytes | Coroutine[Any, Any, bytes]:
    """Call the session's handler for ``request`` in this task: the encoded answer (a failure included), or the
    coroutine of a handler that has yet to run."""
    try:
        result = session.mcp.on_request(request)
    except Exception as exc:
        return failure_reply(request, exc)
    if isinstance(result, bytes):
        return encode_result(request.id, result)
    return result


async def _release(session: HttpSession, outlet: Outlet, connection: Feed, delivered: bool) -> None:
    """After one HTTP response of ``session`` ended: detach it from its outlet and settle the outlet's fate."""
    outlet.disconnect(connection)
    session.active -= 1
    session.touch()
    if type(session.store) is InMemoryEventStore:
        # Its methods never wait, so nothing can interrupt the settling (a cancellation is delivered only where a
        # task waits): no shield, whose cancel scope costs ~8% of an async handler's POST.
        await session.settle(outlet, delivered)
        return
    with anyio.CancelScope(shield=True):  # a store of the caller's may wait, even under a cancelled scope
        await session.settle(outlet, delivered)
