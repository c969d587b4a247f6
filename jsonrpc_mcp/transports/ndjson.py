"""A :class:`MessageStream` over any byte stream with newline-delimited JSON framing (L6).

Reads in large chunks (one read can carry many frames, all handled before the next read), and writes every
answer produced from one read in a single write. Used by stdio and by TCP and Unix sockets.
"""

from __future__ import annotations

import abc
import errno
import os
import select
import socket
import stat
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any, Final, Literal

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from ..jsonrpc.streams import MessageStream, Network, Outgoing
from .framing import DEFAULT_MAX_FRAME, LineFramer

try:
    import fcntl
except ImportError:  # (Windows)
    fcntl = None  # type: ignore[assignment]

__all__ = ("NdjsonStream", "FdByteStream", "BlockingByteStream", "PIPE", "PIPE_SIZE", "socket_network", "widen_pipe")

_CHUNK = 256 * 1024
_GONE = frozenset({errno.EBADF, errno.EIO, errno.ECONNRESET, errno.ENOTCONN, errno.ETIMEDOUT})  # a read's end


#: What carries stdio's frames, and a server process's (:data:`~jsonrpc_mcp.jsonrpc.streams.Network`).
PIPE: Final[Network] = MappingProxyType({"network.transport": "pipe"})


def socket_network(family: int, address: Any, *, peer: Literal["server", "client"]) -> Network:
    """What carries a socket's frames: ``tcp`` and the peer's host and port, or ``unix`` and its path where it has
    one (``peer``: what the other end is, ``"server"`` on a client, ``"client"`` on a server)."""
    if family == socket.AF_UNIX:
        if isinstance(address, str) and address:
            return {"network.transport": "unix", f"{peer}.address": address}
        return {"network.transport": "unix"}
    if isinstance(address, tuple) and len(address) >= 2:
        return {"network.transport": "tcp", f"{peer}.address": str(address[0]), f"{peer}.port": int(address[1])}
    return {"network.transport": "tcp"}


class NdjsonStream(MessageStream):
    """NDJSON frames over an anyio byte stream (or anything with ``receive``/``send``/``aclose``); ``network``:
    what carries them, where it is known."""

    def __init__(
        self, byte_stream: anyio.abc.ByteStream, *, max_frame: int = DEFAULT_MAX_FRAME, network: Network | None = None
    ) -> None:
        self._bytes = byte_stream
        self._framer = LineFramer(max_frame)
        if network is not None:
            self.network = network

    async def receive(self) -> Sequence[bytes]:
        while True:
            try:
                data = await self._bytes.receive(_CHUNK)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise anyio.EndOfStream from None
            frames = self._framer.feed(data)
            if frames:
                return frames

    async def send(self, frames: Sequence[Outgoing]) -> None:
        await self._bytes.send(_lines(frames))

    def receive_sync(self) -> Sequence[bytes]:
        """:meth:`receive` without an event loop, blocking (the byte stream must be a :class:`BlockingByteStream`)."""
        assert isinstance(self._bytes, BlockingByteStream)
        while True:
            frames = self._framer.feed(self._bytes.receive_sync(_CHUNK))
            if frames:
                return frames

    def send_sync(self, frames: Sequence[Outgoing]) -> None:
        """:meth:`send` without an event loop, blocking (the byte stream must be a :class:`BlockingByteStream`)."""
        assert isinstance(self._bytes, BlockingByteStream)
        self._bytes.send_sync(_lines(frames))

    async def aclose(self) -> None:
        await self._bytes.aclose()


def _lines(frames: Sequence[Outgoing]) -> bytes:
    """The frames as NDJSON, in one allocation of the exact size (a growing bytearray over-allocates, then
    ``bytes()`` copies it again)."""
    if len(frames) == 1:
        return frames[0].frame + b"\n"
    parts = [out.frame for out in frames]
    parts.append(b"")
    return b"\n".join(parts)


#: What :func:`widen_pipe` asks for: the most Linux lets a process without privileges ask for, by default.
PIPE_SIZE: Final = 1024 * 1024


def widen_pipe(fd: int) -> None:
    """Ask for a pipe of :data:`PIPE_SIZE` bytes (Linux), so that the answers of one busy read, more than a default
    pipe holds, go out in one write rather than waiting for the peer to read the first part (docs/performance.md).
    Where the system refuses (another platform, a lower limit, a user's pipes over their quota), the pipe stays as
    it is."""
    if fcntl is None or not hasattr(fcntl, "F_SETPIPE_SZ"):
        return
    try:
        if fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < PIPE_SIZE:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        pass


class BlockingByteStream(anyio.abc.ByteStream):
    """A byte stream that can also be read and written without an event loop, blocking (``run_stdio``'s loop)."""

    @abc.abstractmethod
    def receive_sync(self, max_bytes: int = 65536) -> bytes: ...

    @abc.abstractmethod
    def send_sync(self, item: bytes) -> None: ...


class FdByteStream(BlockingByteStream):
    """A byte stream over two raw file descriptors (stdin/stdout, or a child's pipes), on asyncio and trio.

    Pipes and sockets are switched to non-blocking mode and waited on with :func:`anyio.wait_readable` /
    :func:`anyio.wait_writable`, so reading costs no thread hop. Regular files (a server fed from ``< file``)
    cannot be polled and are read directly: such reads never block for long. Pipes are widened where the system
    lets us (:func:`widen_pipe`).
    """

    def __init__(self, read_fd: int, write_fd: int, *, close_fds: bool = False) -> None:
        self._rfd = read_fd
        self._wfd = write_fd
        self._close_fds = close_fds
        self._r_mode = self._prepare(read_fd)
        self._w_mode = self._prepare(write_fd)
        self._eof = False
        self._closed = False

    @staticmethod
    def _prepare(fd: int) -> str:
        """How to wait on ``fd``: ``poll`` (pipes, sockets), ``direct`` (regular files), ``thread`` (terminals)."""
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            return "direct"
        if stat.S_ISCHR(mode):
            return "thread"
        os.set_blocking(fd, False)
        if stat.S_ISFIFO(mode):
            widen_pipe(fd)
        return "poll"

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._closed:
            raise anyio.ClosedResourceError
        while True:
            if self._r_mode == "thread":
                data = await anyio.to_thread.run_sync(self._read, max_bytes, abandon_on_cancel=True)
            else:
                data = self._read(max_bytes)
            if data is None:
                await anyio.wait_readable(self._rfd)
                continue
            if self._r_mode == "direct":
                await anyio.lowlevel.checkpoint()
            return data

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        data: bytes | memoryview = item
        while data:
            rest = self._write(data)
            if rest is None:
                await anyio.wait_writable(self._wfd)
                continue
            data = rest

    def receive_sync(self, max_bytes: int = 65536) -> bytes:
        """:meth:`receive` without an event loop: waits in ``select`` (``anyio.EndOfStream`` at the end)."""
        if self._closed:
            raise anyio.ClosedResourceError
        while True:
            data = self._read(max_bytes)
            if data is not None:
                return data
            select.select([self._rfd], [], [])

    def send_sync(self, item: bytes) -> None:
        """:meth:`send` without an event loop: waits in ``select`` while the pipe is full."""
        if self._closed:
            raise anyio.ClosedResourceError
        data: bytes | memoryview = item
        while data:
            rest = self._write(data)
            if rest is None:
                select.select([], [self._wfd], [])
                continue
            data = rest

    def _read(self, max_bytes: int) -> bytes | None:
        """One read: the bytes, or None when none are ready; ``anyio.EndOfStream`` at the end of the input (or
        once the peer is gone)."""
        if self._eof:
            raise anyio.EndOfStream
        try:
            data = os.read(self._rfd, max_bytes)
        except BlockingIOError:
            return None
        except OSError as exc:
            if exc.errno not in _GONE:
                raise
            data = b""
        if not data:
            self._eof = True
            raise anyio.EndOfStream
        return data

    def _write(self, data: bytes | memoryview) -> bytes | memoryview | None:
        """One write: what is left to write (``b""`` once all of it is), or None when the pipe is full. A view is
        made only after a partial write (most writes are whole)."""
        try:
            written = os.write(self._wfd, data)
        except BlockingIOError:
            return None
        except (BrokenPipeError, ConnectionResetError):
            raise anyio.BrokenResourceError from None
        return memoryview(data)[written:] if written < len(data) else b""

    async def send_eof(self) -> None:
        if self._close_fds:
            os.close(self._wfd)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._close_fds:
            for fd in {self._rfd, self._wfd}:
                try:
                    os.close(fd)
                except OSError:
                    pass
