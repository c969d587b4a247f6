"""Several workers of one Streamable HTTP app behind one URL, sharing a backend (L6 helper).

:func:`share` makes an app one of them (``McpAsgiApp(backend=...)``): the server's notifications, its
``requestState`` keys and single-use claims go through the backend, which runs beside the app's sessions; and
the handshake-era sessions become :class:`SharedSessions`, which any worker can serve.

A session lives where ``initialize`` made it, and in the backend as a :class:`~jsonrpc_mcp.mcp.bus.SessionRecord`
(what that ``initialize`` and later requests settled). A worker that gets a request for a session it does not hold
makes a copy from the record and serves it; a request that changes what the record says (``logging/setLevel``,
``resources/subscribe``, ``notifications/initialized``) is saved before it is answered, and the workers holding a
copy reload it (:class:`~jsonrpc_mcp.mcp.bus.SessionChanged`). ``DELETE`` ends it everywhere
(:class:`~jsonrpc_mcp.mcp.bus.SessionEnded`). The backend forgets a session unused for the idle timeout; a worker's
copy is only a cache (its own idle timeout or the table's bound drop it, not the session).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc
import msgspec

from ..errors import Unavailable
from ..jsonrpc.wire import (
    ErrorResponse,
    Message,
    Notification,
    Response,
    encode_message,
    read_message,
)
from ..mcp.bus import BusEvent, ClientMessage, SessionChanged, SessionEnded, SessionRecord
from ..mcp.session import ServerSession
from ._http_handshake_session import HttpSession
from ._http_session_table import SessionTable
from .session_store import SharedBackend, open_backend

if TYPE_CHECKING:
    from .http_asgi import McpAsgiApp

__all__ = ("SharedSessions", "record_of", "share")

logger = logging.getLogger(__name__)

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(SessionRecord).decode

#: The ids of the requests this process sends to clients start with it: unique among the workers of a session.
WORKER_TAG: Final = secrets.token_hex(4) + "-"


class _Cancelled(msgspec.Struct):
    requestId: Any = None


_cancelled = msgspec.json.Decoder(_Cancelled).decode


def share(app: McpAsgiApp, backend: SharedBackend | str) -> SharedBackend:
    """Make ``app`` one of the workers sharing ``backend`` (an object, or a ``redis://`` URL); returns the backend.
    It runs while the app's sessions' task group does: bus events for shared sessions act on them, the others go
    to the server."""
    shared = open_backend(backend)
    app.server.use_backend(shared)
    sessions = None
    if app.handshake.sessions:
        sessions = app.handshake.shared = SharedSessions(shared, app.table, app.handshake.new_session)

    async def deliver(event: BusEvent) -> None:
        if sessions is None or not await sessions.deliver(event):
            await app.server.deliver(event)

    async def run(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(shared.run, deliver)
                if sessions is not None:
                    tg.start_soon(sessions.keep_alive)
                task_status.started()
        finally:
            await shared.aclose()

    app.table.companion = run
    return shared


def record_of(session: ServerSession, owner: str | None = None) -> SessionRecord:
    """What ``session`` has settled so far."""
    assert session.version is not None
    return SessionRecord(
        version=session.version,
        capabilities=session.client_capabilities,
        client_info=session.client_info,
        ready=session.ready,
        log_level=session.log_level,
        subscriptions=sorted(session.subscriptions),
        owner=owner,
    )


def _apply(session: ServerSession, record: SessionRecord) -> None:
    if not session.initialized:
        session.resume(record.version, record.capabilities, record.client_info)
    session.ready = record.ready
    session.log_level = record.log_level
    session.subscriptions = set(record.subscriptions)


class SharedSessions:
    """The sessions of one HTTP app as every worker sees them (``make`` builds a fresh local session)."""

    def __init__(
        self, backend: SharedBackend, table: SessionTable, make: Callable[[str], Awaitable[HttpSession]]
    ) -> None:
        self.backend = backend
        self.table = table
        self.make = make

    @property
    def ttl(self) -> float:
        return self.table.idle_timeout

    async def find(self, sid: str) -> HttpSession | None:
        """The session ``sid`` as the backend knows it now (a local copy made or brought up to date), or ``None``
        when it does not exist. Raises :class:`Unavailable` when the backend cannot be reached."""
        data = await self.backend.load_session(sid, self.ttl)
        local = self.table.get(sid)
        record = self._read(sid, data) if data is not None else None
        if record is None:
            if local is not None:
                self.table.end(local)
            return None
        if local is None:
            if not self.table.admit(record.owner):
                raise Unavailable(self.table.retry_after())
            local = await self.make(sid)
            local.dispatcher.id_prefix = WORKER_TAG
            local.owner = record.owner
            self.table.add(local)
            logger.debug("serving a session started elsewhere (%d here)", len(self.table))
        if record != local.record:
            _apply(local.mcp, record)
            local.record = record
        return local

    def _read(self, sid: str, data: bytes) -> SessionRecord | None:
        try:
            return _decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            logger.error("the backend holds a session record this server cannot read; the session is ended")
            return None

    def started(self, session: HttpSession) -> None:
        """A session ``initialize`` made here: the requests it sends carry this worker's ids."""
        session.dispatcher.id_prefix = WORKER_TAG

    async def take(self, session: HttpSession, msg: Message) -> None:
        """A client's answer or notification for ``session``: taken here when it belongs here, else handed to the
        worker it belongs to (the one waiting for that answer, or serving the request it cancels)."""
        if _belongs(session, msg):
            session.dispatcher.deliver(msg)
        else:
            await self.backend.publish(ClientMessage(session.id, msgspec.Raw(encode_message(msg))))

    async def save(self, session: HttpSession) -> None:
        """Store what ``session`` has settled, when it changed (the workers with a copy are told). Raises
        :class:`Unavailable` when the backend cannot be reached."""
        if session.closed or not session.mcp.initialized:
            return
        record = record_of(session.mcp, session.owner)
        if record == session.record:
            return
        new = session.record is None  # (a new session counts against the bound of all the workers' sessions)
        most = self.table.max_sessions if new else None
        await self.backend.save_session(session.id, _encode(record), self.ttl, changed=not new, most=most)
        session.record = record

    async def end(self, session: HttpSession) -> None:
        """``DELETE``: the session ends on every worker."""
        self.table.end(session)
        await self.backend.end_session(session.id)

    async def deliver(self, event: BusEvent) -> bool:
        """Act on a session event of the bus; False for any other event."""
        if type(event) is SessionEnded:
            local = self.table.view.get(event.id)
            if local is not None:
                self.table.end(local)
            return True
        if type(event) is ClientMessage:
            local = self.table.view.get(event.session)
            if local is not None and not local.closed:
                msg = read_message(bytes(event.frame))
                if _belongs(local, msg):
                    local.dispatcher.deliver(msg)
            return True
        if type(event) is SessionChanged:
            local = self.table.view.get(event.id)
            if local is not None and not local.closed:
                try:
                    await self.find(event.id)
                except Unavailable:
                    pass  # (its next request brings it up to date)
            return True
        return False

    async def keep_alive(self) -> None:
        """Runs for the app's lifetime: the backend forgets sessions unused for the idle timeout, so the sessions
        busy here (a GET stream open, a handler running) are marked used a few times per timeout."""
        while True:
            await anyio.sleep(max(self.ttl / 4, 0.05))
            for session in list(self.table.view.values()):
                if session.busy() and not session.closed:
                    try:
                        if await self.backend.load_session(session.id, self.ttl) is None:
                            self.table.end(session)
                    except Unavailable:
                        break


def _belongs(session: HttpSession, msg: Message) -> bool:
    """Whether this worker's copy of ``session`` is where ``msg`` is taken: an answer to a request it sent, the
    cancellation of a request it serves, or any other notification (whichever worker gets it)."""
    if type(msg) is Response or type(msg) is ErrorResponse:
        return msg.id is None or session.dispatcher.expects(msg.id)
    if type(msg) is Notification and msg.method == "notifications/cancelled" and msg.params is not None:
        try:
            return session.dispatcher.serving(_cancelled(msg.params).requestId)
        except msgspec.DecodeError:
            return True  # (malformed: the session's own handling logs it)
    return True
