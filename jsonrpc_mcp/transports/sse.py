"""Server-Sent Events: encoding events, and an incremental parser for reading them (L6, no I/O; public for those
who read or write MCP's event streams themselves, as ``jsonrpc-mcp check`` does).

Only what MCP needs of the WHATWG ``text/event-stream`` format: ``id``, ``data`` (possibly on several lines),
``event``, ``retry``, and ``:`` comments. The parser accepts ``\\n``, ``\\r\\n`` and ``\\r`` line endings and
bounds the size of one event, so a peer cannot grow our memory by never ending an event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ("SseEvent", "SseParser", "SseTooLarge", "encode_event", "encode_comment", "encode_retry")

_DEFAULT_MAX_EVENT: Final = 16 * 1024 * 1024


def encode_event(
    data: bytes, *, event_id: str | None = None, retry_ms: int | None = None, event: str | None = None
) -> bytes:
    """One event. ``data`` may hold newlines (each line becomes its own ``data:`` field); ``event``: its type
    (absent: ``message``, the reader's default)."""
    parts: list[bytes] = []
    if event is not None:
        parts.append(b"event: " + event.encode("ascii") + b"\n")
    if event_id is not None:
        parts.append(b"id: " + event_id.encode("ascii") + b"\n")
    if retry_ms is not None:
        parts.append(b"retry: %d\n" % retry_ms)
    if b"\n" in data or b"\r" in data:
        lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        parts.extend(b"data: " + line + b"\n" for line in lines)
    else:
        parts.append(b"data: " + data + b"\n")
    parts.append(b"\n")
    return b"".join(parts)


def encode_comment(text: bytes = b"") -> bytes:
    """A comment line (a keep-alive: readers ignore it)."""
    return b":" + text + b"\n\n"


def encode_retry(retry_ms: int) -> bytes:
    """A ``retry`` field on its own: sets the reader's reconnection delay without dispatching an event."""
    return b"retry: %d\n\n" % retry_ms


@dataclass(slots=True)
class SseEvent:
    data: bytes
    event: str = "message"
    id: str | None = None


class SseTooLarge(ValueError):
    """An event (or a line) exceeded the parser's size limit."""


class SseParser:
    """Feed bytes as they arrive; get back the complete events.

    ``last_event_id`` and ``retry_ms`` follow the standard: the last ``id`` field seen (it persists across
    events) and the last valid ``retry`` field. An event with no ``data`` field is not dispatched (the priming
    event of MCP: an ``id`` and an empty ``data`` *is* dispatched, with empty data).
    """

    def __init__(self, max_event: int = _DEFAULT_MAX_EVENT) -> None:
        self.max_event = max_event
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self._size = 0
        self._has_data = False
        self._event = ""
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        buf = self._buffer
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = False
        buf += chunk
        events: list[SseEvent] = []
        start = 0
        n = len(buf)
        while start < n:
            nl = buf.find(b"\n", start)
            cr = buf.find(b"\r", start, nl if nl >= 0 else n)
            if cr >= 0:
                end, nxt = cr, cr + 1
                if nxt < n and buf[nxt] == 0x0A:
                    nxt += 1
                elif nxt == n:
                    self._pending_cr = True
            elif nl >= 0:
                end, nxt = nl, nl + 1
            else:
                break
            self._line(bytes(buf[start:end]), events)
            start = nxt
        del buf[:start]
        if len(buf) > self.max_event:
            raise SseTooLarge(f"an SSE line exceeds {self.max_event} bytes")
        return events

    def _line(self, line: bytes, events: list[SseEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line[0] == 0x3A:  # ":" comment
            return
        field, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            self._size += len(value) + 1
            if self._size > self.max_event:
                raise SseTooLarge(f"an SSE event exceeds {self.max_event} bytes")
            self._data.append(value)
            self._has_data = True
        elif field == b"id":
            if b"\x00" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif field == b"event":
            self._event = value.decode("utf-8", "replace")
        elif field == b"retry" and value.isdigit():
            self.retry_ms = int(value)

    def _dispatch(self, events: list[SseEvent]) -> None:
        if self._has_data:
            events.append(SseEvent(b"\n".join(self._data), self._event or "message", self.last_event_id))
        self._data = []
        self._size = 0
        self._has_data = False
        self._event = ""
