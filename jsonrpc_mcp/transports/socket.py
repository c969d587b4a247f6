"""TCP and Unix sockets: NDJSON framing, one MCP session per connection, many connections (L6)."""

from __future__ import annotations

import errno
import logging
import os
import socket
import ssl
import stat
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.streams.tls

from ..addresses import is_loopback_host
from .framing import DEFAULT_MAX_FRAME
from .ndjson import FdByteStream, NdjsonStream, socket_network
from .serve_options import check_serve_options

if TYPE_CHECKING:
    from ..mcp.server import Server

__all__ = (
    "serve_tcp",
    "serve_unix",
    "serve_listener",
    "connect_tcp",
    "connect_unix",
    "check_listen_host",
    "RemoteListenRefused",
    "OWNER_ONLY",
)

#: The permissions of a Unix socket ``serve_unix`` creates: its owner only may connect.
OWNER_ONLY = 0o600


class RemoteListenRefused(ValueError):
    """``serve_tcp`` was asked to listen beyond the loopback interface without ``allow_remote=True``."""


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
    async with listener:
        task_status.started()
        await listener.serve(_connection_handler(server, max_frame, {}))


def _connection_handler(
    server: Server, max_frame: int, limits: Mapping[str, Any]
) -> Callable[[anyio.abc.ByteStream], Awaitable[None]]:
    """What serves one connection of an anyio listener: its own session, its failure logged and kept to itself."""

    async def handle(conn: anyio.abc.ByteStream) -> None:
        family = conn.extra(anyio.abc.SocketAttribute.family, None)
        network = None
        if family is not None:
            network = socket_network(family, conn.extra(anyio.abc.SocketAttribute.remote_address), peer="client")
        async with conn:
            try:
                await server.serve(NdjsonStream(conn, max_frame=max_frame, network=network), **limits)
            except Exception:
                logger.exception("connection ended with an error")

    return handle


async def serve_tcp(
    server: Server,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
    ssl_context: ssl.SSLContext | None = None,
    allow_remote: bool = False,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
    **limits: Any,
) -> None:
    """Serve on TCP; ``task_status.started()`` reports the bound port (useful with ``port=0``). ``limits`` are
    :meth:`Server.serve`'s, for each connection (``max_in_flight``, ``max_queued_bytes``, ...).

    A connection carries no credentials: whoever reaches the port may call every tool. So a ``host`` beyond the
    loopback interface (``0.0.0.0``, a LAN address, a host name) is refused with :class:`RemoteListenRefused` unless
    ``allow_remote=True`` says that is meant. ``ssl_context`` (a server-side :class:`ssl.SSLContext`) serves TLS;
    with ``verify_mode = ssl.CERT_REQUIRED`` and the clients' CA loaded it also authenticates the clients."""
    check_serve_options(max_frame, limits)
    check_listen_host(host, allow_remote=allow_remote)
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    bound = listener.extra(anyio.abc.SocketAttribute.local_port)
    logger.info("serving MCP on %s://%s:%d", "tls" if ssl_context else "tcp", host, bound)
    if ssl_context is not None:
        tls = anyio.streams.tls.TLSListener(listener, ssl_context, standard_compatible=False)
        async with tls:
            task_status.started(bound)
            await tls.serve(_connection_handler(server, max_frame, limits))
        return
    async with listener:
        await _serve_sockets(
            server, _raw_sockets(listener), max_frame, tcp=True, task_status=task_status, ready=bound, limits=limits
        )


def check_listen_host(host: str, *, allow_remote: bool) -> None:
    """Refuse a listening address beyond loopback unless the caller allows it (:class:`RemoteListenRefused`)."""
    if allow_remote or is_loopback_host(host):
        return
    raise RemoteListenRefused(
        f"refusing to serve MCP over TCP on {host or 'every interface'}: a connection carries no credentials, so "
        "anyone who can reach the port could call every tool; pass allow_remote=True (jsonrpc-mcp serve "
        "--allow-remote) if that is meant, or serve on 127.0.0.1, or use Streamable HTTP with authorization"
    )


async def serve_unix(
    server: Server,
    path: str,
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
    mode: int = OWNER_ONLY,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    **limits: Any,
) -> None:
    """Serve on a Unix socket at ``path`` (a stale socket file there is replaced; the file is removed at exit).
    The socket has the permissions ``mode`` from its first moment (connecting needs write permission: the default
    lets its owner only connect; ``0o660`` its group too). ``limits``: as for :func:`serve_tcp`."""
    check_serve_options(max_frame, limits)
    _remove_stale_socket(path)
    sock = _bind_unix(path, mode)
    logger.info("serving MCP on unix:%s", path)
    try:
        with sock:
            await _serve_sockets(server, [sock], max_frame, tcp=False, task_status=task_status, limits=limits)
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _bind_unix(path: str, mode: int) -> socket.socket:
    """A listening Unix socket at ``path`` that nobody could reach with other permissions than ``mode``: bound in a
    directory of its own that only its owner may enter, given ``mode`` there, then moved into place (the same
    socket; a rename within the directory's file system)."""
    folder = tempfile.mkdtemp(prefix=".mcp-", dir=os.path.dirname(os.path.abspath(path)))
    staged = os.path.join(folder, "s")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(staged)
        os.chmod(staged, mode)
        os.rename(staged, path)
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    finally:
        if os.path.lexists(staged):
            os.unlink(staged)
        os.rmdir(folder)
    return sock


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
async def connect_tcp(
    host: str, port: int, *, max_frame: int = DEFAULT_MAX_FRAME, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[NdjsonStream]:
    """NDJSON over TCP; with ``ssl_context`` (a client-side :class:`ssl.SSLContext`, e.g.
    :func:`ssl.create_default_context`) over TLS, the server's certificate checked against ``host``."""
    stream: anyio.abc.ByteStream
    if ssl_context is None:
        stream = await anyio.connect_tcp(host, port)
    else:
        stream = await anyio.connect_tcp(host, port, ssl_context=ssl_context, tls_standard_compatible=False)
    family = stream.extra(anyio.abc.SocketAttribute.family)
    network = socket_network(family, (host, port), peer="server")  # (the host as given, not the address it named)
    async with stream:
        yield NdjsonStream(stream, max_frame=max_frame, network=network)


@asynccontextmanager
async def connect_unix(path: str, *, max_frame: int = DEFAULT_MAX_FRAME) -> AsyncIterator[NdjsonStream]:
    stream = await anyio.connect_unix(path)
    async with stream:
        yield NdjsonStream(stream, max_frame=max_frame, network=socket_network(socket.AF_UNIX, path, peer="server"))
