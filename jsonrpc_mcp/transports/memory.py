"""In-memory transport: a connected pair of message streams in one process (L6), for tests and embedding."""

from __future__ import annotations

from ..jsonrpc.streams import MemoryMessageStream, memory_pair

__all__ = ("memory_pair", "MemoryMessageStream")
