"""Where SSE events wait for a client that lost its connection (Streamable HTTP, handshake era; L6).

Every event the server writes on a resumable stream is appended here first, under its stream's key and its
sequence number within that stream. A client that comes back with ``GET`` + ``Last-Event-ID`` gets the events
after that number replayed. The default store keeps them in memory, bounded in count (per stream and in total),
in bytes and in age; a deployment may plug in another (anything with these three methods).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import msgspec

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


class _Event(msgspec.Struct, gc=False):
    seq: int
    data: bytes
    at: float


class InMemoryEventStore:
    """The default: events in memory, bounded four ways, the oldest events going first past any bound.

    :param max_events: events kept in total.
    :param max_per_stream: events kept per stream (a stream past it loses its own oldest event).
    :param max_bytes: bytes of event data kept in total (64 MiB by default). An event larger than this on its own
        is not kept at all.
    :param max_age: seconds an event is kept (300 by default): older events are never replayed, and are dropped
        whenever the store is used.
    :param clock: the time source for ``max_age`` (monotonic seconds).

    Memory stays bounded whatever clients do; a client resuming after an eviction misses what was evicted (it
    gets the events still kept, in order). Every operation is O(1) amortized: events sit in one queue in the
    order they were appended, besides their stream's own.
    """

    def __init__(
        self,
        *,
        max_events: int = 10_000,
        max_per_stream: int = 1_000,
        max_bytes: int = 64 * 1024 * 1024,
        max_age: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_events < 1 or max_per_stream < 1 or max_bytes < 1 or not max_age > 0:
            raise ValueError("event store bounds must be positive")
        self.max_events = max_events
        self.max_per_stream = max_per_stream
        self.max_bytes = max_bytes
        self.max_age = max_age
        self._clock = clock
        self._streams: dict[str, deque[_Event]] = {}
        # Every event once, in the order appended, as (stream, seq); an entry whose event already left its stream
        # (per-stream bound, discard) is skipped when it reaches the front, and the queue is compacted when such
        # entries outnumber the live ones.
        self._order: deque[tuple[str, int]] = deque()
        self._count = 0
        self._bytes = 0
        #: No event kept expires before this time (the oldest one's expiry, when last looked at; discards only make
        #: it later), so an append before it has nothing to check for age.
        self._next_expiry = clock() + max_age

    def __len__(self) -> int:
        """Events kept right now."""
        return self._count

    @property
    def size(self) -> int:
        """Bytes of event data kept right now."""
        return self._bytes

    async def append(self, stream: str, seq: int, data: bytes) -> None:
        now = self._clock()
        events = self._streams.get(stream)
        if events is None:
            events = self._streams[stream] = deque()
        elif len(events) >= self.max_per_stream:
            self._forget(events.popleft())
            self._compact()  # (its entry in the order queue stays behind)
        events.append(_Event(seq, data, now))
        self._order.append((stream, seq))
        self._count += 1
        self._bytes += len(data)
        if self._count > self.max_events or self._bytes > self.max_bytes or now >= self._next_expiry:
            self._evict(now)

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]]:
        self._evict(self._clock())
        events = self._streams.get(stream)
        if not events:
            return []
        return [(event.seq, event.data) for event in events if event.seq > after]

    async def discard(self, stream: str) -> None:
        events = self._streams.pop(stream, None)
        if events is not None:
            self._count -= len(events)
            for event in events:
                self._bytes -= len(event.data)
        self._compact()

    def _forget(self, event: _Event) -> None:
        self._count -= 1
        self._bytes -= len(event.data)

    def _evict(self, now: float) -> None:
        """Drop the oldest events while any bound is passed (count, bytes) or they are older than ``max_age``."""
        expired = now - self.max_age
        order = self._order
        while order:
            stream, seq = order[0]
            events = self._streams.get(stream)
            if events is None or events[0].seq != seq:
                order.popleft()  # already gone from its stream
                continue
            first = events[0]
            if self._count <= self.max_events and self._bytes <= self.max_bytes and first.at > expired:
                self._next_expiry = first.at + self.max_age
                break
            order.popleft()
            events.popleft()
            self._forget(first)
            if not events:
                del self._streams[stream]
        if not order:
            self._next_expiry = now + self.max_age  # (what is appended next is no older)
        self._compact()

    def _compact(self) -> None:
        if len(self._order) > 2 * self._count + 64:
            live = {(stream, event.seq) for stream, events in self._streams.items() for event in events}
            self._order = deque(entry for entry in self._order if entry in live)
