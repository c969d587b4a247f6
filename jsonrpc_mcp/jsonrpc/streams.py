"""The seam between the dispatcher and a transport: a stream of whole JSON-RPC frames (L3).

A transport is something that moves frames, and nothing more. :class:`MessageStream` is the whole contract:

* :meth:`MessageStream.receive` returns the next frames (one or more, as read in one go) and raises
  :class:`anyio.EndOfStream` when the peer is gone (a transport that hands frames to the dispatcher itself, as
  Streamable HTTP does, never has it called);
* :meth:`MessageStream.send` writes frames, each an :class:`Outgoing`: the bytes, what kind of message they are,
  and ``related``, the inbound request the frame belongs to (its response, or a notification or request emitted
  while handling it), so that a transport with several channels (Streamable HTTP) can route it; byte-stream
  transports ignore both;
* the optional hooks below, with no-op defaults, for what only some transports have.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Final

import msgspec

from .wire import RequestId

__all__ = ("MessageStream", "Outgoing", "RESPONSE", "NOTIFICATION", "REQUEST", "Network", "NO_NETWORK")

#: What an outgoing frame is: an answer (a response, an error response, or a batch of them), a notification, or a
#: request of ours.
RESPONSE: Final = 0
NOTIFICATION: Final = 1
REQUEST: Final = 2

#: What carries the frames of a stream, under the names of OpenTelemetry's general attributes
#: (``network.transport``: ``"pipe"``, ``"tcp"`` or ``"unix"``; ``network.protocol.name``; the peer's address as
#: ``server.address``/``server.port`` on a client, ``client.address``/``client.port`` on a server).
Network = Mapping[str, str | int]
NO_NETWORK: Final[Network] = MappingProxyType({})


class Outgoing(msgspec.Struct, frozen=True, gc=False):
    """One frame the dispatcher writes (a Struct: made for every answer, its constructor is msgspec's, in C)."""

    frame: bytes
    related: RequestId | None
    kind: int


class MessageStream(ABC):
    """A bidirectional stream of JSON-RPC frames (bytes without framing)."""

    #: The dispatcher gathers the answers of handlers that finish in the same pass of the event loop into one
    #: :meth:`send` (one write on a byte stream), at the cost of one pass. A stream whose frames each go their own
    #: way anyway (a Streamable HTTP session: one POST each) sets this False: answers go out at once.
    gathers_replies: bool = True
    #: The transport's session id (a Streamable HTTP ``Mcp-Session-Id``), where the transport has one.
    session_id: str | None = None
    #: What carries the frames (:data:`Network`), for the tracing to record; empty in memory.
    network: Network = NO_NETWORK
    #: Set by the :class:`~jsonrpc_mcp.jsonrpc.dispatch.Dispatcher` that reads this stream: ``fail_request(ident,
    #: error)`` ends one of its pending requests by raising ``error`` to its caller, for a transport that could not
    #: carry the request or its answer (False: no such request is pending). None: no dispatcher reads it.
    fail_request: Callable[[RequestId, Exception], bool] | None = None
    #: Set by the protocol layer above, for a transport whose session can end under it (a Streamable HTTP server
    #: that answers 404 for it): starts a new session (the handshake again). None: the session stays ended.
    restart_session: Callable[[], Awaitable[None]] | None = None

    @abstractmethod
    async def receive(self) -> Sequence[bytes]:
        """Return the next frames; raise :class:`anyio.EndOfStream` at the end."""

    @abstractmethod
    async def send(self, frames: Sequence[Outgoing]) -> None:
        """Write the frames, in order (a byte stream writes them in one go)."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release the stream; later ``receive`` calls raise :class:`anyio.EndOfStream`."""

    # --- optional hooks ------------------------------------------------------------------------------------

    def finished(self, request_id: RequestId) -> None:  # noqa: B027 - optional hook, a no-op by default
        """An inbound request ended without a response (cancelled); multi-channel transports close its channel."""

    def request_headers(self, request_id: RequestId) -> Mapping[str, str] | None:
        """The transport-level headers of the message that carried ``request_id`` (names in lower case), or
        ``None`` on transports without headers."""
        return None

    def request_auth(self, request_id: RequestId) -> object | None:
        """What the transport authenticated about the sender of ``request_id`` (``None``: nothing)."""
        return None

    def request_ends_at(self, request_id: RequestId) -> float | None:
        """When the transport will end the stream carrying ``request_id``'s answer by itself, in ``time.time()``
        seconds (Streamable HTTP under an authorization policy: the access token's expiry), or ``None``."""
        return None

    def request_peer(self, request_id: RequestId) -> str | None:
        """The connection ``request_id`` came on, where one stream carries the requests of many (an HTTP
        request's TCP connection, ``host:port``); ``None``: the stream is the connection."""
        return None

    def close_request_stream(self, request_id: RequestId) -> bool:
        """End the connection carrying ``request_id``'s answer without ending the answer, so that the client
        resumes it (Streamable HTTP, SEP-1699). False where the transport has no such thing."""
        return False
