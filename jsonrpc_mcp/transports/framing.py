"""Newline-delimited JSON framing, sans I/O (L2).

Feed it bytes as they arrive; it returns whole frames. One JSON-RPC message per line, UTF-8, no embedded
newlines. CRLF endings and blank lines (nothing but JSON whitespace: space, tab, CR, LF) are tolerated; a line
holding anything else (a form feed, a vertical tab) is a frame, and its parse error is answered. A line longer
than ``max_frame`` is never buffered whole: its first bytes are kept (to find its id for the error reply), the
rest is skipped up to the next newline, and an :class:`~jsonrpc_mcp.jsonrpc.wire.OversizedFrame` stands in its
place so the dispatcher answers it.
"""

from __future__ import annotations

from ..jsonrpc.wire import OversizedFrame

__all__ = ("LineFramer", "DEFAULT_MAX_FRAME")

DEFAULT_MAX_FRAME = 16 * 1024 * 1024
_KEEP = 4096
_JSON_WHITESPACE = b" \t\r\n"  # (bytes.strip() alone would also drop \f, \v and \x1c-\x1f)


class LineFramer:
    """Splits a byte stream into frames at ``\\n``."""

    __slots__ = ("_buf", "_skip_prefix", "_skipping", "max_frame")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if max_frame < 2:
            raise ValueError("max_frame must be at least 2 bytes")
        self.max_frame = max_frame
        self._buf = bytearray()
        self._skipping = False
        self._skip_prefix = b""

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes; return the frames they complete (possibly none)."""
        frames: list[bytes] = []
        if self._skipping:
            nl = data.find(b"\n")
            if len(self._skip_prefix) < _KEEP:
                # keep the same prefix however the line was chunked (its id may be in it)
                head = data if nl < 0 else data[:nl]
                self._skip_prefix += head[: _KEEP - len(self._skip_prefix)]
            if nl < 0:
                return frames
            frames.append(self._oversized(self._skip_prefix))
            self._skipping = False
            self._skip_prefix = b""
            data = data[nl + 1 :]
        # Split the whole chunk at once (C speed); the last piece is an unfinished line, kept for the next chunk.
        lines = data.split(b"\n")
        rest = lines.pop()
        buf = self._buf
        if lines and buf:
            lines[0] = bytes(buf) + lines[0]
            buf.clear()
        max_frame = self.max_frame
        for line in lines:
            if len(line) > max_frame:
                frames.append(self._oversized(line[:_KEEP]))
            elif line.startswith(b"{") and not line.endswith(b"\r"):
                frames.append(line)  # the usual frame: nothing to trim, not blank
            else:
                self._append(frames, line)
        if rest:
            buf += rest
            if len(buf) > max_frame:
                self._skipping = True
                self._skip_prefix = bytes(buf[:_KEEP])
                buf.clear()
        return frames

    def _append(self, frames: list[bytes], line: bytes) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip(_JSON_WHITESPACE):
            frames.append(line)

    def _oversized(self, prefix: bytes) -> bytes:
        frame = OversizedFrame(prefix)
        frame.limit = self.max_frame
        return frame

    def pending(self) -> int:
        """Bytes of an unfinished line held so far."""
        return len(self._buf)
