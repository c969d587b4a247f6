"""TCP and Unix sockets: NDJSON framing, one MCP session per connection, many connections (L6)."""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from .framing import DEFAULT_MAX_FRAME
from .ndjson import FdByteStream, NdjsonStream, socket_network
from .serve_options import check_serve_options

if TYPE_CHECKING:
    from ..mcp.server import Server

__all__ = ("serve_tcp", "serve_unix", "serve_listener", "connect_tcp", "connect_unix")

logger = logging.getLogger(__name__)


async def serve_listener(
    server: Server,
    listener: anyio.abc.Listener[anyio.abc.ByteStream],
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Accept connections forever; each gets its own session. A failing connection never affects the others."""
    check_serve_options(max_frame, {})

    async def handle(conn: anyio.abc.ByteStream) -> None:
        family = conn.extra(anyio.abc.SocketAttribute.family, None)
        network = None
        if family is not None:
            network = socket_network(family, conn.extra(anyio.abc.SocketAttribute.remote_address), peer="client")
        async with conn:
            try:
                await server.serve(NdjsonStream(conn, max_frame=max_frame, network=network))
            except Exception:
                logger.exception("connection ended with an error")

    async with listener:
        task_status.started()
        await listener.serve(handle)


async def serve_tcp(
    server: Server,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
    **limits: Any,
) -> None:
    """Serve on TCP; ``task_status.started()`` reports the bound port (useful with ``port=0``). ``limits`` are
    :meth:`Server.serve`'s, for each connection (``max_in_flight``, ``max_queued_bytes``, ...)."""
    check_serve_options(max_frame, limits)
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    bound = listener.extra(anyio.abc.SocketAttribute.local_port)
    logger.info("serving MCP on tcp://%s:%d", host, bound)
    async with listener:
        await _serve_sockets(
            server, _raw_sockets(listener), max_frame, tcp=True, task_status=task_status, ready=bound, limits=limits
        )


async def serve_unix(
    server: Server,
    path: str,
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    **limits: Any,
) -> None:
    """Serve on a Unix socket at ``path`` (a stale socket file there is replaced; the file is removed at exit).
    ``limits``: as for :func:`serve_tcp`."""
    check_serve_options(max_frame, limits)
    _remove_stale_socket(path)
    listener = await anyio.create_unix_listener(path)
    logger.info("serving MCP on unix:%s", path)
    try:
        async with listener:
            await _serve_sockets(
                server, _raw_sockets(listener), max_frame, tcp=False, task_status=task_status, limits=limits
            )
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _raw_sockets(listener: anyio.abc.Listener[Any]) -> list[socket.socket]:
    """The listening sockets behind an anyio listener (one, or several for a host with IPv4 and IPv6)."""
    parts = getattr(listener, "listeners", None) or [listener]
    return [part.extra(anyio.abc.SocketAttribute.raw_socket) for part in parts]


async def _serve_sockets(
    server: Server,
    socks: list[socket.socket],
    max_frame: int,
    *,
    tcp: bool,
    task_status: anyio.abc.TaskStatus[Any],
    ready: Any = None,
    limits: Mapping[str, Any],
) -> None:
    """Accept on the listening sockets ourselves and serve each connection on its file descriptor directly.

    The connection is read and written with ``os.read``/``os.write`` when the event loop says it is ready (as on
    stdio), not through the event loop's stream transport: no protocol object, buffer copy or future per read.
    """

    async def handle(conn: socket.socket, address: Any) -> None:
        network = socket_network(conn.family, address, peer="client")
        fd = conn.detach()  # the stream owns the descriptor from now on, and closes it
        stream = FdByteStream(fd, fd, close_fds=True)
        try:
            await server.serve(NdjsonStream(stream, max_frame=max_frame, network=network), **limits)
        except Exception:
            logger.exception("connection ended with an error")
        finally:
            await stream.aclose()

    async def accept_loop(sock: socket.socket) -> None:
        sock.setblocking(False)
        while True:
            await anyio.wait_readable(sock)
            try:
                conn, address = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                continue  # another accept took it, or the peer gave up before we got to it
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise
                # Out of descriptors: connections wait in the backlog until one of ours closes.
                logger.error("cannot accept a connection: %s", exc)
                await anyio.sleep(0.1)
                continue
            conn.setblocking(False)
            if tcp:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tg.start_soon(handle, conn, address)

    async with anyio.create_task_group() as tg:
        for sock in socks:
            tg.start_soon(accept_loop, sock)
        task_status.started(ready)


def _remove_stale_socket(path: str) -> None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(f"{path} exists and is not a socket")
    os.unlink(path)


@asynccontextmanager
async def connect_tcp(host: str, port: int, *, max_frame: int = DEFAULT_MAX_FRAME) -> AsyncIterator[NdjsonStream]:
    stream = await anyio.connect_tcp(host, port)
    family = stream.extra(anyio.abc.SocketAttribute.family)
    network = socket_network(family, (host, port), peer="server")  # (the host as given, not the address it named)
    async with stream:
        yield NdjsonStream(stream, max_frame=max_frame, network=network)


@asynccontextmanager
async def connect_unix(path: str, *, max_frame: int = DEFAULT_MAX_FRAME) -> AsyncIterator[NdjsonStream]:
    stream = await anyio.connect_unix(path)
    async with stream:
        yield NdjsonStream(stream, max_frame=max_frame, network=socket_network(socket.AF_UNIX, path, peer="server"))
