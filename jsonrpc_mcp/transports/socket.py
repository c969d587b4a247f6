"""TCP and Unix sockets: NDJSON framing, one MCP session per connection, many connections (L6)."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from .framing import DEFAULT_MAX_FRAME
from .ndjson import NdjsonStream

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

    async def handle(conn: anyio.abc.ByteStream) -> None:
        async with conn:
            try:
                await server.serve(NdjsonStream(conn, max_frame=max_frame))
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
) -> None:
    """Serve on TCP; ``task_status.started()`` reports the bound port (useful with ``port=0``)."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    bound = listener.extra(anyio.abc.SocketAttribute.local_port)
    logger.info("serving MCP on tcp://%s:%d", host, bound)

    async def ready(task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        await serve_listener(server, listener, max_frame=max_frame, task_status=task_status)

    async with anyio.create_task_group() as tg:
        await tg.start(ready)
        task_status.started(bound)


async def serve_unix(
    server: Server,
    path: str,
    *,
    max_frame: int = DEFAULT_MAX_FRAME,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve on a Unix socket at ``path`` (a stale socket file there is replaced; the file is removed at exit)."""
    _remove_stale_socket(path)
    listener = await anyio.create_unix_listener(path)
    logger.info("serving MCP on unix:%s", path)
    try:
        await serve_listener(server, listener, max_frame=max_frame, task_status=task_status)
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


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
    async with stream:
        yield NdjsonStream(stream, max_frame=max_frame)


@asynccontextmanager
async def connect_unix(path: str, *, max_frame: int = DEFAULT_MAX_FRAME) -> AsyncIterator[NdjsonStream]:
    stream = await anyio.connect_unix(path)
    async with stream:
        yield NdjsonStream(stream, max_frame=max_frame)
