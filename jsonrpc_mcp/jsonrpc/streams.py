"""The seam between the dispatcher and a transport: a stream of whole JSON-RPC frames (L3).

A transport is something that moves frames, and nothing more. :class:`MessageStream` is the whole contract:

* :meth:`MessageStream.send` writes frames, each an :class:`Outgoing`: the bytes, what kind of message they are,
  and ``related``, the inbound request the frame belongs to (its response, or a notification or request emitted
  while handling it), so that a transport with several channels (Streamable HTTP) can route it; byte-stream
  transports ignore both;
* :meth:`MessageStream.receive`, for a stream the dispatcher reads (:meth:`~.dispatch.Dispatcher.run`), returns the
  next frames (one or more, as read in one go) and raises :class:`anyio.EndOfStream` when the peer is gone; a
  transport that hands its messages to the dispatcher itself (a Streamable HTTP server) has none;
* the optional hooks below, with no-op defaults, for what only some transports have.

What arrives with a message besides its frame (an HTTP request's headers, the principal its transport
authenticated, the connection it came on) is an :class:`Intake`: one value that comes with the message into the
dispatcher (``Dispatcher.answer_request(request, context)``, or an :class:`Arrival` that ``receive`` returns) and
from it to the handler; nothing reaches back into the stream for it. Where nothing comes with it, it is
:data:`NO_INTAKE`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Final

import anyio
import msgspec

from .wire import NO_INTAKE, Intake, RequestId

__all__ = (
    "MessageStream",
    "Outgoing",
    "RESPONSE",
    "NOTIFICATION",
    "REQUEST",
    "Network",
    "NO_NETWORK",
    "Intake",
    "NO_INTAKE",
    "Arrival",
)

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


class Arrival(list[bytes]):
    """Frames read together that came with one :class:`Intake` (an HTTP+SSE POST's): what
    :meth:`MessageStream.receive` returns where the transport has an intake to hand over with them."""

    __slots__ = ("intake",)

    def __init__(self, frames: Iterable[bytes], intake: Intake) -> None:
        super().__init__(frames)
        self.intake = intake


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
    #: Set by the :class:`~jsonrpc_mcp.jsonrpc.dispatch.Dispatcher` that reads this stream, for a transport that
    #: starts its peer again (a stdio server process that exited): called once the old peer is gone, it fails what
    #: waits for the old peer's answer and cancels what answers the old peer's requests (nothing is sent again).
    peer_replaced: Callable[[], None] | None = None
    #: Set by the protocol layer above, for a transport whose session can end under it (a Streamable HTTP server
    #: that answers 404 for it): starts a new session (the handshake again). None: the session stays ended.
    restart_session: Callable[[], Awaitable[None]] | None = None

    async def receive(self) -> Sequence[bytes]:
        """Return the next frames (an :class:`Arrival` when an :class:`Intake` comes with them); raise
        :class:`anyio.EndOfStream` at the end. Only a stream the dispatcher reads has it."""
        raise anyio.EndOfStream

    @abstractmethod
    async def send(self, frames: Sequence[Outgoing]) -> None:
        """Write the frames, in order (a byte stream writes them in one go)."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release the stream; later ``receive`` calls raise :class:`anyio.EndOfStream`."""

    # --- optional hooks ------------------------------------------------------------------------------------

    def finished(self, request_id: RequestId) -> None:  # noqa: B027 - optional hook, a no-op by default
        """An inbound request ended without a response (cancelled); multi-channel transports close its channel."""

    def close_request_stream(self, request_id: RequestId) -> bool:
        """End the connection carrying ``request_id``'s answer without ending the answer, so that the client
        resumes it (Streamable HTTP, SEP-1699). False where the transport has no such thing."""
        return False
