"""Streamable HTTP, handshake era (2024-11-05 .. 2025-11-25): what a session's requests get (L6 helper).

:class:`HandshakeEndpoint` serves the requests the app has routed to this era: ``initialize`` (which mints a
session), POSTs of requests (answered as JSON when the answer is ready at once, else as an exchange answered as
JSON or a resumable SSE stream), notifications and responses (202), 2025-03-26 batches, ``GET`` (the standalone
stream, or a resumption with ``Last-Event-ID``) and ``DELETE``. Sessions live in the app's
:class:`~._http_session_table.SessionTable`; every message goes to its session's dispatcher.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from ..errors import RpcError, Unavailable
from ..jsonrpc import codes
from ..jsonrpc.dispatch import Pending, error_reply
from ..jsonrpc.wire import Message, Request, RequestId, classify, decode_batch, decode_frame
from ..mcp.eras import Call, read_call
from ..mcp.versions import BATCH_VERSIONS, HANDSHAKE_VERSIONS, STATELESS_VERSIONS
from ._http_handshake_session import HttpSession
from ._http_io import (
    HeaderList,
    Headers,
    HttpRefusal,
    Receive,
    Send,
    answer_status,
    send_bytes,
    send_empty,
    unavailable,
)
from ._http_outlet import FINAL, RESPONSE, Outlet, ResponseFormat, respond
from ._http_session_table import SessionTable
from ._http_stateless import serve_alone
from .events import EventStore

if TYPE_CHECKING:
    from ..mcp.session import ServerApp
    from ._http_shared_sessions import SharedSessions
    from .http_policy import HttpPolicy

__all__ = ("HandshakeEndpoint",)

logger = logging.getLogger(__name__)

_ENDED = "Not Found: this session does not exist or has ended"
_RETRY_AFTER = (b"retry-after", b"1")
#: The revision of a request without an MCP-Protocol-Version header (the spec's rule for servers).
_WITHOUT_HEADER = "2025-03-26"
_NO_SESSIONS = "Method Not Allowed: this server keeps no sessions (no GET stream, nothing to DELETE)"
_BATCHED_INITIALIZE = RpcError("Invalid Request: initialize is never batched", code=codes.INVALID_REQUEST)


class HandshakeEndpoint:
    """The handshake-era half of the app (its settings are the app's)."""

    def __init__(
        self,
        server: ServerApp,
        table: SessionTable,
        store: EventStore,
        fmt: ResponseFormat,
        *,
        max_in_flight: int,
        request_timeout: float | None,
        sessions: bool = True,
    ) -> None:
        self.server = server
        self.sessions = sessions
        self.table = table
        self.store = store
        self.max_in_flight = max_in_flight
        self.format = fmt
        self.get_format = fmt._replace(preference="sse")  # (a GET stream is always one)
        #: How a request is answered by a session of its own (without sessions).
        self.alone = fmt._replace(retry_ms=0, cancelled_status=204)
        self.request_timeout = request_timeout
        #: The sessions as every worker sees them, when a backend shares them (set by the app).
        self.shared: SharedSessions | None = None
        #: The app's HTTP policy (it names the owners of sessions), set by the app.
        self.policy: HttpPolicy | None = None

    async def post(
        self, headers: Headers, version: str | None, msg: Message, call: Call | None, receive: Receive, send: Send
    ) -> None:
        """One JSON-RPC message POSTed outside the stateless era (``call``: the request as the app read it). Raises
        :class:`HttpRefusal` for a POST refused before its session's dispatcher takes it."""
        if version is not None and version not in HANDSHAKE_VERSIONS:
            raise HttpRefusal(f"Bad Request: unsupported MCP-Protocol-Version {version!r}", status=400)
        if not self.sessions:  # served on its own, as if initialize had settled its version
            if type(msg) is not Request or call is None:
                await send_empty(send, 202)  # (a notification, or an answer to a request no one here made)
            else:
                await serve_alone(
                    self.server, call, headers, receive, send, self.alone, handshake_version=version or _WITHOUT_HEADER
                )
            return
        sid = headers.raw(b"mcp-session-id")
        if sid is None:
            if type(msg) is Request and msg.method == "initialize":
                await self._initialize(msg, call, headers, send)
                return
            raise HttpRefusal("Bad Request: the Mcp-Session-Id header is required (initialize first)", status=400)
        session = await self._session(sid.decode("latin-1"), headers, getattr(msg, "id", None))
        try:
            if type(msg) is not Request:  # a notification, or the client's answer to one of our requests
                if self.shared is not None:
                    await self.shared.take(session, msg)
                    await self.shared.save(session)
                else:
                    session.dispatcher.deliver(msg)
                await send_empty(send, 202)
                return
            answer = session.dispatcher.answer_request(msg, call)
            if self.shared is not None:
                await self.shared.save(session)  # (what the request settled is shared before it is answered)
        except Unavailable as exc:
            raise unavailable(exc, getattr(msg, "id", None)) from None
        if type(answer) is Pending:
            outlet = self._open_exchange(session, (msg.id,))
            soon = not answer.on_worker_thread
            await self._respond(session, outlet, receive, send, waiting=True, soon=soon, until=headers.until)
            return
        reply: bytes = answer  # type: ignore[assignment]
        status = answer_status(reply, stateless=False)
        if status != 200:  # (a request the dispatcher refused; too many in flight, or a rate limit: 429)
            extra = [*session.id_header, _RETRY_AFTER] if status == 429 else session.id_header
            await send_bytes(send, status, reply, extra)
        elif self.format.preference == "sse":  # an answer made at once, sent as a stream all the same
            outlet = self._open_exchange(session, ())
            await self._respond(session, outlet, receive, send, answered=[(reply, FINAL)], until=headers.until)
        else:
            await send_bytes(send, 200, reply, session.id_header)

    async def _initialize(self, request: Request, call: Call | None, headers: Headers, send: Send) -> None:
        owner = self.policy.session_owner(headers) if self.policy is not None else None
        if not self.table.admit(owner):
            raise HttpRefusal(
                "Service Unavailable: too many sessions",
                status=503,
                code=codes.BUSY,
                ident=request.id,
                headers=[(b"retry-after", b"%d" % self.table.retry_after())],
            )
        session = await self.new_session(secrets.token_urlsafe(24))
        session.owner = owner
        answer = session.dispatcher.answer_request(request, call)  # (initialize is answered at once)
        extra: HeaderList = []
        if session.mcp.initialized:
            self.table.add(session)
            if self.shared is not None:
                self.shared.started(session)
                try:
                    await self.shared.save(session)
                except Unavailable as exc:
                    self.table.end(session)
                    raise unavailable(exc, request.id) from None
            extra.append((b"mcp-session-id", session.id.encode()))
            logger.debug("session started (%d open)", len(self.table))
        else:
            session.terminate()  # a failed initialize mints no session
        await send_bytes(send, 200, answer, extra)  # type: ignore[arg-type]

    async def new_session(self, sid: str) -> HttpSession:
        return HttpSession(
            self.server,
            sid,
            store=self.store,
            tasks=await self.table.tasks(),
            max_in_flight=self.max_in_flight,
            request_timeout=self.request_timeout,
        )

    def _open_exchange(self, session: HttpSession, ids: Sequence[RequestId], *, batch: bool = False) -> Outlet:
        """The outlet of a new exchange of ``session`` awaiting the answers to ``ids``."""
        json_only = self.format.preference == "json"
        return session.open_exchange(ids, resumable=not json_only, json_only=json_only, batch=batch)

    async def _respond(
        self,
        session: HttpSession,
        outlet: Outlet,
        receive: Receive,
        send: Send,
        *,
        fmt: ResponseFormat | None = None,
        after: int = 0,
        waiting: bool = False,
        soon: bool = True,
        answered: Sequence[tuple[bytes, int]] = (),
        until: float | None = None,
    ) -> None:
        """Write what ``outlet`` yields as this response of the session: ``after`` is the number of the last frame the
        client has (those after it in the store are replayed first); ``waiting``: a handler has yet to answer (``soon``:
        as for :func:`respond`); ``answered``: answers made at once, as (frame, item kind), put first; ``until``: when
        the stream ends at the latest (the request's admission, :attr:`Headers.until`). A delivered stream is forgotten
        as soon as it ends, before this task yields again, so that a client that resumes it right after reading its end
        finds it gone."""
        outlet.buffer += len(answered)  # they are put before anything reads them: a batch's many must all fit
        connection = session.connect(outlet)
        release = partial(session.release, outlet, connection)
        delivered = False
        try:
            replay = await self.store.replay(outlet.store_key, after) if outlet.seq > after else []
            for frame, kind in answered:
                await outlet.put(frame, kind)
            delivered = await respond(
                send,
                receive,
                outlet,
                connection,
                fmt or self.format,
                headers=session.id_header,
                waiting=waiting,
                soon=soon,
                after=after,
                replay=replay,
                on_end=release,
                until=until,
            )
        finally:
            await release(delivered)  # (nothing is left to do when the stream's end did it)

    async def post_batch(
        self, headers: Headers, version: str | None, body: bytes, receive: Receive, send: Send
    ) -> None:
        try:
            items = decode_batch(body)  # first: an array that is not JSON ("[1,") is a parse error, batches or not
        except RpcError as exc:
            raise HttpRefusal(exc.message, status=400, code=exc.code) from None
        sid = headers.get("mcp-session-id")
        session = await self._session(sid, headers) if sid is not None else None
        if session is None or session.mcp.version not in BATCH_VERSIONS or version in STATELESS_VERSIONS:
            raise HttpRefusal("Invalid Request: batches exist only in 2025-03-26 sessions", status=400)
        if not items:
            raise HttpRefusal("Invalid Request: empty batch", status=400)
        answered: list[bytes] = []
        ids: list[RequestId] = []
        for raw in items:
            try:
                msg = classify(decode_frame(bytes(raw)))
            except RpcError as exc:
                if not getattr(exc, "silent", False):  # a malformed notification or response is never answered
                    answered.append(error_reply(getattr(exc, "request_id", None), exc))
                continue
            if type(msg) is not Request:
                session.dispatcher.deliver(msg)
            elif msg.method == "initialize":
                answered.append(error_reply(msg.id, _BATCHED_INITIALIZE))
            else:
                answer = session.dispatcher.answer_request(msg, read_call(self.server.methods, msg, version, headers))
                if type(answer) is Pending:
                    ids.append(msg.id)
                else:
                    answered.append(answer)  # type: ignore[arg-type]
        if ids:
            outlet = self._open_exchange(session, ids, batch=True)
            replies = [(reply, RESPONSE) for reply in answered]
            await self._respond(session, outlet, receive, send, waiting=True, answered=replies, until=headers.until)
        elif answered:
            await send_bytes(send, 200, b"[" + b",".join(answered) + b"]", session.id_header)
        else:
            await send_empty(send, 202)

    async def get(self, headers: Headers, version: str | None, receive: Receive, send: Send) -> None:
        """The standalone stream, or the resumption of any stream of the session with ``Last-Event-ID``."""
        session = await self._session_of(headers, version)
        last_event_id = headers.get("last-event-id")
        if last_event_id is not None:
            found = session.resumable_outlet(last_event_id)
            if found is None:
                raise HttpRefusal("Bad Request: Last-Event-ID names no resumable stream of this session", status=400)
            outlet, after = found
        else:
            outlet = session.standalone
            if outlet.connected:
                raise HttpRefusal("Conflict: this session's GET stream is already open", status=409)
            after = outlet.written
        await self._respond(session, outlet, receive, send, fmt=self.get_format, after=after, until=headers.until)

    async def delete(self, headers: Headers, version: str | None, send: Send) -> None:
        """End the session."""
        session = await self._session_of(headers, version)
        if self.shared is not None:
            try:
                await self.shared.end(session)
            except Unavailable as exc:
                raise unavailable(exc) from None
        self.table.end(session)
        logger.debug("session ended by DELETE (%d open)", len(self.table))
        await send_empty(send, 200)

    async def _session_of(self, headers: Headers, version: str | None) -> HttpSession:
        """The session a GET or DELETE names; else :class:`HttpRefusal`."""
        sid = headers.get("mcp-session-id")
        if not self.sessions:
            raise HttpRefusal(_NO_SESSIONS, status=405, headers=[(b"allow", b"POST")])
        if sid is None:
            raise HttpRefusal("Bad Request: the Mcp-Session-Id header is required", status=400)
        if version is not None and version not in HANDSHAKE_VERSIONS:
            raise HttpRefusal(f"Bad Request: unsupported MCP-Protocol-Version {version!r}", status=400)
        return await self._session(sid, headers)

    async def _session(self, sid: str, headers: Headers, ident: RequestId | None = None) -> HttpSession:
        """The live session ``sid`` of the request's owner (from the shared backend when there is one), touched;
        else :class:`HttpRefusal`: 404, or 503 when the shared backend cannot be reached (with ``ident``, the id of
        the request read, if any)."""
        try:
            session = await self.shared.find(sid.strip()) if self.shared is not None else self.table.get(sid)
        except Unavailable as exc:
            raise unavailable(exc, ident) from None
        if session is not None and self.policy is not None and session.owner != self.policy.session_owner(headers):
            logger.warning("refused a request for a session that belongs to another client")
            session = None
        if session is None:
            raise HttpRefusal(_ENDED, status=404)
        session.touch()
        return session
