"""Byte streams over two file descriptors, for stdio on every platform (L6).

:func:`pipe_byte_stream` picks the stream by what the descriptors support, never by the platform's name:

* :class:`~jsonrpc_mcp.transports.ndjson.FdByteStream` when the event loop can wait on them (pipes and sockets
  on POSIX; regular files and terminals too, which it reads without waiting on them);
* :class:`ThreadedPipeStream` otherwise: pipes that ``select`` refuses (on Windows it takes only sockets, and so
  do the event loops built on it), read and written by blocking calls on worker threads.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import stat
import threading
from typing import Any

import anyio
import anyio.to_thread

from .ndjson import BlockingByteStream, FdByteStream

__all__ = ("ThreadedPipeStream", "pipe_byte_stream", "fd_polling_works")

logger = logging.getLogger(__name__)

_CHUNK = 256 * 1024
#: Errors that mean the other end is gone (EINVAL: what Windows answers for a write to a pipe closed at the far end).
_GONE = frozenset({errno.EBADF, errno.EIO, errno.ECONNRESET, errno.ENOTCONN, errno.EPIPE, errno.EINVAL})


def fd_polling_works(fd: int, *, for_writing: bool = False) -> bool:
    """True when an event loop can wait on ``fd`` the way :class:`FdByteStream` does (or need not wait on it).

    Regular files, directories and terminals are never polled by :class:`FdByteStream` (it reads them directly,
    or on a thread); for anything else ``select`` is asked, and the descriptor must be one that can be switched
    to non-blocking mode.
    """
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISCHR(mode):
        return True
    if getattr(os, "set_blocking", None) is None:
        return False
    try:
        if for_writing:
            select.select([], [fd], [], 0)
        else:
            select.select([fd], [], [], 0)
    except (OSError, ValueError):
        return False
    return True


def pipe_byte_stream(read_fd: int, write_fd: int, *, close_fds: bool = False) -> BlockingByteStream:
    """A byte stream over ``read_fd`` and ``write_fd``: polled where the event loop can wait on them, on worker
    threads where it cannot (see the module's docstring)."""
    if fd_polling_works(read_fd) and fd_polling_works(write_fd, for_writing=True):
        return FdByteStream(read_fd, write_fd, close_fds=close_fds)
    logger.debug(
        "descriptors %d and %d cannot be polled: reading and writing them on worker threads", read_fd, write_fd
    )
    return ThreadedPipeStream(read_fd, write_fd, close_fds=close_fds)


class ThreadedPipeStream(BlockingByteStream):
    """A byte stream over two blocking file descriptors, read and written on worker threads (asyncio and trio).

    One daemon thread reads: it reads a chunk, hands it over, and reads the next only once that one was taken, so
    at most one chunk waits and a slow reader holds back the writer at the other end. A receive takes the chunk
    waiting, or waits for one on a worker thread (a cancelled receive loses nothing: the chunk stays for the next
    one). A send writes on a worker thread, the whole item under a lock, so two items never interleave; a
    cancelled send stops waiting, and its item is still written whole.
    """

    def __init__(self, read_fd: int, write_fd: int, *, close_fds: bool = False) -> None:
        self._rfd = read_fd
        self._wfd = write_fd
        self._close_fds = close_fds
        for fd in {read_fd, write_fd}:
            _binary_mode(fd)
        self._reader: _PipeReader | None = None
        self._write_lock = threading.Lock()
        self._closed = False

    def _chunks(self) -> _PipeReader:
        if self._closed:
            raise anyio.ClosedResourceError
        reader = self._reader
        if reader is None:
            reader = self._reader = _PipeReader(self._rfd, _CHUNK)
        return reader

    async def receive(self, max_bytes: int = 65536) -> bytes:
        reader = self._chunks()
        while True:
            data = reader.take(max_bytes)
            if data is not None:
                return data
            await anyio.to_thread.run_sync(reader.wait, abandon_on_cancel=True)
            if self._closed:
                raise anyio.ClosedResourceError

    def receive_sync(self, max_bytes: int = 65536) -> bytes:
        """:meth:`receive` without an event loop, blocking (``anyio.EndOfStream`` at the end)."""
        reader = self._chunks()
        while True:
            data = reader.take(max_bytes)
            if data is not None:
                return data
            reader.wait()
            if self._closed:
                raise anyio.ClosedResourceError

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        await anyio.to_thread.run_sync(self.send_sync, item, abandon_on_cancel=True)

    def send_sync(self, item: bytes) -> None:
        """:meth:`send` without an event loop, blocking while the pipe is full."""
        if self._closed:
            raise anyio.ClosedResourceError
        view = memoryview(item)
        with self._write_lock:
            while view:
                try:
                    written = os.write(self._wfd, view)
                except OSError as exc:
                    if isinstance(exc, BrokenPipeError) or exc.errno in _GONE:
                        raise anyio.BrokenResourceError from None
                    raise
                view = view[written:]

    async def send_eof(self) -> None:
        """With ``close_fds``, close the write descriptor: the reader at the other end sees the end of its input."""
        if self._close_fds:
            self._close_write()

    def _close_write(self) -> None:
        """Close the write descriptor once (a write going on meets -1 at its next step: a broken stream)."""
        fd, self._wfd = self._wfd, -1
        if fd >= 0 and fd != self._rfd:
            _close(fd)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reader is not None:
            self._reader.stop_waiting()  # its thread reads no more once its current read returns
        if self._close_fds:
            self._close_write()
            _close(self._rfd)


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class _PipeReader:
    """The reading thread of a :class:`ThreadedPipeStream` and the one chunk it hands over at a time."""

    def __init__(self, fd: int, chunk: int) -> None:
        self._fd = fd
        self._chunk = chunk
        self._ready = threading.Condition()
        self._data: bytes | None = None  # read and not yet taken; b"" once the input has ended (kept for good)
        self._error: OSError | None = None
        self._stopped = False
        threading.Thread(target=self._run, name="jsonrpc-mcp pipe reader", daemon=True).start()

    def _run(self) -> None:
        ready = self._ready
        while True:
            try:
                data = os.read(self._fd, self._chunk)
            except OSError as exc:
                if exc.errno not in _GONE:
                    self._error = exc
                data = b""
            with ready:
                self._data = data
                ready.notify_all()
                if not data:
                    return
                while self._data is not None and not self._stopped:
                    ready.wait()
                if self._stopped:
                    return

    def take(self, max_bytes: int) -> bytes | None:
        """The bytes waiting (at most ``max_bytes``; the rest stays), or None when none are; ``anyio.EndOfStream``
        at the end of the input."""
        with self._ready:
            data = self._data
            if data is None:
                return None
            if not data:
                if self._error is not None:
                    raise anyio.BrokenResourceError from self._error
                raise anyio.EndOfStream
            if len(data) > max_bytes:
                self._data = data[max_bytes:]
                return data[:max_bytes]
            self._data = None
            self._ready.notify_all()
            return data

    def wait(self) -> None:
        """Block until bytes (or the end of the input) are waiting, or the stream is closed."""
        with self._ready:
            while self._data is None and not self._stopped:
                self._ready.wait()

    def stop_waiting(self) -> None:
        """The stream is closed: release every wait, and let the thread end after its current read."""
        with self._ready:
            self._stopped = True
            self._ready.notify_all()


def _binary_mode(fd: int) -> None:
    """On Windows a C runtime descriptor translates line ends unless switched to binary mode (a no-op elsewhere)."""
    try:
        import msvcrt
    except ImportError:
        return
    setmode: Any = getattr(msvcrt, "setmode", None)
    binary = getattr(os, "O_BINARY", None)
    if setmode is not None and binary is not None:
        setmode(fd, binary)
