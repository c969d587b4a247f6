"""Where SSE events wait for a client that lost its connection (Streamable HTTP, handshake era; L6 helper).

Every event the server writes on a resumable stream is appended here first, under its stream's key and its
sequence number within that stream. A client that comes back with ``GET`` + ``Last-Event-ID`` gets the events
after that number replayed. The default store keeps them in memory, bounded per stream and in total; a
deployment may plug in another (anything with these three methods).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Protocol, runtime_checkable

__all__ = ("EventStore", "InMemoryEventStore")


@runtime_checkable
class EventStore(Protocol):
    """Storage for resumable SSE streams. ``stream`` is an opaque key, unique across sessions."""

    async def append(self, stream: str, seq: int, data: bytes) -> None:
        """Keep event number ``seq`` (1, 2, 3… per stream) of ``stream``."""

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]]:
        """The kept events of ``stream`` numbered above ``after``, in order (fewer if some were evicted)."""

    async def discard(self, stream: str) -> None:
        """Forget ``stream`` (it was delivered, or its session ended)."""


class InMemoryEventStore:
    """The default: events in memory, at most ``max_per_stream`` per stream and ``max_events`` in total.

    Past either bound the oldest events go first (the least recently written stream loses its events first), so
    memory stays bounded whatever clients do; a client resuming after an eviction misses what was evicted.
    """

    def __init__(self, *, max_events: int = 10_000, max_per_stream: int = 1_000) -> None:
        if max_events < 1 or max_per_stream < 1:
            raise ValueError("event store bounds must be positive")
        self.max_events = max_events
        self.max_per_stream = max_per_stream
        self._streams: OrderedDict[str, deque[tuple[int, bytes]]] = OrderedDict()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    async def append(self, stream: str, seq: int, data: bytes) -> None:
        events = self._streams.get(stream)
        if events is None:
            events = self._streams[stream] = deque()
        else:
            self._streams.move_to_end(stream)
        if len(events) >= self.max_per_stream:
            events.popleft()
            self._count -= 1
        events.append((seq, data))
        self._count += 1
        while self._count > self.max_events:
            oldest_key, oldest = next(iter(self._streams.items()))
            oldest.popleft()
            self._count -= 1
            if not oldest:
                del self._streams[oldest_key]

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]]:
        events = self._streams.get(stream)
        if not events:
            return []
        return [(seq, data) for seq, data in events if seq > after]

    async def discard(self, stream: str) -> None:
        events = self._streams.pop(stream, None)
        if events is not None:
            self._count -= len(events)
