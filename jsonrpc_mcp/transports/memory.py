"""In-memory transport: a connected pair of message streams in one process (L6), for tests and embedding."""

from __future__ import annotations

import math
from collections.abc import Sequence

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..jsonrpc.streams import MessageStream, Outgoing

__all__ = ("memory_pair", "MemoryMessageStream", "receive_frames")


async def receive_frames(inbox: MemoryObjectReceiveStream[bytes]) -> list[bytes]:
    """What a stream whose frames arrive through ``inbox`` receives: the next frame (waited for), then every frame
    already there; :class:`anyio.EndOfStream` once ``inbox`` is closed at either end and empty."""
    try:
        frames = [await inbox.receive()]
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        raise anyio.EndOfStream from None
    while True:
        try:
            frames.append(inbox.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            return frames


class MemoryMessageStream(MessageStream):
    """One end of an in-memory pair: what one end sends, the other receives. Bounded, with back-pressure."""

    def __init__(self, send: MemoryObjectSendStream[bytes], receive: MemoryObjectReceiveStream[bytes]) -> None:
        self._send = send
        self._receive = receive

    async def receive(self) -> Sequence[bytes]:
        return await receive_frames(self._receive)

    async def send(self, frames: Sequence[Outgoing]) -> None:
        try:
            for out in frames:
                await self._send.send(bytes(out.frame))
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
