"""The messages the workers of one server pass each other through their backend, a session's record, and what a
:class:`~jsonrpc_mcp.Server` asks of that backend (:class:`Bus`) (L2).

See :mod:`jsonrpc_mcp.backends` for what is shared and why. Events travel as JSON with a ``type`` tag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import msgspec

if TYPE_CHECKING:
    from .task_store import TaskStore

__all__ = (
    "Bus",
    "BusEvent",
    "ResourceUpdated",
    "ListChanged",
    "LogMessage",
    "SessionChanged",
    "SessionEnded",
    "ClientMessage",
    "TaskChanged",
    "ExtensionEvent",
    "SessionRecord",
    "encode_event",
    "decode_event",
)


class Bus(Protocol):
    """What a :class:`~jsonrpc_mcp.Server` needs from the service its workers share (``Server.use_backend``;
    :class:`~jsonrpc_mcp.backends.Backend` is the whole of it, the HTTP app's part included).

    Methods that reach the service raise :class:`~jsonrpc_mcp.errors.Unavailable` when it cannot be reached
    (never hang: each has a deadline)."""

    async def publish(self, event: BusEvent) -> None:
        """Send ``event`` to every worker (this one included)."""

    def state_keys(self) -> tuple[bytes, ...]:
        """The keys that open ``requestState``, the one that seals first (empty before it connected)."""

    async def claim(self, nonce: str, expires: float) -> bool:
        """Spend a single-use state's nonce (valid until ``expires``, a UNIX time): True the first time only."""

    def task_store(self) -> TaskStore:
        """A task store that every worker sharing this backend reads and changes (the tasks extension takes it
        when it was given no store of its own)."""


class ResourceUpdated(msgspec.Struct, tag="resource-updated"):
    """``Server.notify_resource_updated`` on some worker."""

    uri: str
    meta: dict[str, Any] | None = None
    exact: bool = False


class ListChanged(msgspec.Struct, tag="list-changed"):
    """``Server.notify_list_changed`` on some worker."""

    kind: str


class LogMessage(msgspec.Struct, tag="log"):
    """``Server.broadcast_log`` on some worker."""

    level: str
    data: Any
    logger: str | None = None


class SessionChanged(msgspec.Struct, tag="session-changed"):
    """The record of a handshake-era session changed (its log level, its subscriptions): reload it."""

    id: str


class SessionEnded(msgspec.Struct, tag="session-ended"):
    """A handshake-era session was ended (``DELETE``): every worker ends its copy."""

    id: str


class ClientMessage(msgspec.Struct, tag="client-message"):
    """What a client POSTed to one worker for another: its answer to a request that worker sent it, or its
    cancellation of a request that worker is serving."""

    session: str
    frame: msgspec.Raw


class TaskChanged(msgspec.Struct, tag="task-changed"):
    """A task of the shared task store changed (its workers' waits for it wake)."""

    task_id: str


class ExtensionEvent(msgspec.Struct, tag="extension"):
    """``Server.publish_to_extension`` on some worker: ``data`` (JSON) for the extension ``extension`` of every
    worker (:meth:`~jsonrpc_mcp.extensions.Extension.deliver`)."""

    extension: str
    data: Any


BusEvent = (
    ResourceUpdated
    | ListChanged
    | LogMessage
    | SessionChanged
    | SessionEnded
    | ClientMessage
    | TaskChanged
    | ExtensionEvent
)

_event_encoder = msgspec.json.Encoder()
_event_decoder: msgspec.json.Decoder[BusEvent] = msgspec.json.Decoder(BusEvent)


def encode_event(event: BusEvent) -> bytes:
    return _event_encoder.encode(event)


def decode_event(data: bytes) -> BusEvent:
    """Raises :class:`msgspec.DecodeError` (or ``ValidationError``) for anything that is not an event."""
    return _event_decoder.decode(data)


class SessionRecord(msgspec.Struct, kw_only=True):
    """What a handshake-era session's ``initialize`` (and what came after it) settled: all another worker needs
    to serve its next request."""

    version: str
    capabilities: dict[str, Any] = {}
    client_info: dict[str, Any] = {}
    ready: bool = False  #: ``notifications/initialized`` received
    log_level: str | None = "info"
    subscriptions: list[str] = []
    #: Who the session belongs to when the server authenticates its clients (an opaque key), else ``None``.
    owner: str | None = None
