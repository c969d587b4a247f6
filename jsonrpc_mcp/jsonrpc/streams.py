"""The seam between the dispatcher and a transport: a stream of whole JSON-RPC frames (L3).

A transport is something that moves frames, and nothing more. :class:`MessageStream` is the whole contract:

* :meth:`MessageStream.receive` returns the next frames (one or more, as read in one go) and raises
  :class:`anyio.EndOfStream` when the peer is gone;
* :meth:`MessageStream.send` writes one frame; ``related`` names the inbound request the frame belongs to (its
  response, or a notification or request emitted while handling it) so that a transport with several channels
  (Streamable HTTP) can route it; byte-stream transports ignore it;
* :meth:`MessageStream.finished` tells the transport a request ended without a response (it was cancelled).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .wire import RequestId

__all__ = ("MessageStream", "MemoryMessageStream", "memory_pair")


class MessageStream(ABC):
    """A bidirectional stream of JSON-RPC frames (bytes without framing)."""

    #: The dispatcher gathers the answers of handlers that finish in the same pass of the event loop into one
    #: :meth:`send_replies` (one write on a byte stream), at the cost of one pass. A stream whose frames each go
    #: their own way anyway (a Streamable HTTP session: one POST each) sets this False: answers go out at once.
    gathers_replies: bool = True

    @abstractmethod
    async def receive(self) -> Sequence[bytes]:
        """Return the next frames; raise :class:`anyio.EndOfStream` at the end."""

    @abstractmethod
    async def send(self, frame: bytes, related: RequestId | None = None) -> None:
        """Write one frame."""

    async def send_many(self, frames: Sequence[tuple[bytes, RequestId | None]]) -> None:
        """Write several frames; byte-stream transports override this to write them in one go."""
        for frame, related in frames:
            await self.send(frame, related)

    async def send_replies(self, frames: Sequence[tuple[bytes, RequestId | None]]) -> None:
        """Write answers (responses and error responses, ``related`` naming the request each answers, or batch
        answers): what :meth:`send_many` writes. A transport that routes answers otherwise than other frames
        overrides it to skip reading each frame again to tell which it is."""
        await self.send_many(frames)

    def finished(self, request_id: RequestId) -> None:  # noqa: B027 - optional hook, a no-op by default
        """An inbound request ended without a response (cancelled); multi-channel transports close its channel."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release the stream; later ``receive`` calls raise :class:`anyio.EndOfStream`."""


class MemoryMessageStream(MessageStream):
    """One end of an in-memory pair: what one end sends, the other receives. Bounded, with back-pressure."""

    def __init__(self, send: MemoryObjectSendStream[bytes], receive: MemoryObjectReceiveStream[bytes]) -> None:
        self._send = send
        self._receive = receive

    async def receive(self) -> Sequence[bytes]:
        try:
            first = await self._receive.receive()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise anyio.EndOfStream from None
        frames = [first]
        while True:
            try:
                frames.append(self._receive.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return frames

    async def send(self, frame: bytes, related: RequestId | None = None) -> None:
        try:
            await self._send.send(bytes(frame))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise anyio.BrokenResourceError from None

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()


def memory_pair(buffer: int = 256) -> tuple[MemoryMessageStream, MemoryMessageStream]:
    """Two connected in-memory streams (for tests and for embedding a server and a client in one process)."""
    if buffer <= 0 or buffer == math.inf:
        raise ValueError("buffer must be a positive, finite size")
    a_send, b_recv = anyio.create_memory_object_stream[bytes](buffer)
    b_send, a_recv = anyio.create_memory_object_stream[bytes](buffer)
    return MemoryMessageStream(a_send, a_recv), MemoryMessageStream(b_send, b_recv)
