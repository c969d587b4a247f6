"""stdio, server side: NDJSON on this process's stdin and stdout (L6).

:func:`run_stdio` (what ``jsonrpc-mcp serve`` runs) and :func:`serve_stdio` serve a :class:`~jsonrpc_mcp.Server`
on this process's own stdin/stdout and return when stdin reaches EOF (a clean shutdown: exit code 0). Nothing
but MCP frames is ever written to stdout; logs go to stderr. The client side — starting a server process and
talking to it — is :mod:`.spawn` (its names are here too).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

from ..jsonrpc.streams import Outgoing
from .framing import DEFAULT_MAX_FRAME
from .ndjson import PIPE, NdjsonStream
from .pipes import pipe_byte_stream
from .runner import run
from .spawn import DEFAULT_ENV_VARS, ProcessStream, RestartingProcessStream, RestartPolicy, default_environment, spawn

if TYPE_CHECKING:
    from ..mcp.server import Server
    from ..mcp.session import ServerSession

__all__ = (
    "run_stdio",
    "serve_stdio",
    "stdio_stream",
    "spawn",
    "ProcessStream",
    "RestartingProcessStream",
    "RestartPolicy",
    "DEFAULT_ENV_VARS",
    "default_environment",
)

logger = logging.getLogger(__name__)


def stdio_stream(*, max_frame: int = DEFAULT_MAX_FRAME) -> NdjsonStream:
    """This process's stdin/stdout as a message stream."""
    return NdjsonStream(pipe_byte_stream(sys.stdin.fileno(), sys.stdout.fileno()), max_frame=max_frame, network=PIPE)


async def serve_stdio(server: Server, *, max_frame: int = DEFAULT_MAX_FRAME) -> None:
    """Serve ``server`` on stdin/stdout until stdin is closed."""
    sys.stdout.flush()
    await server.serve(stdio_stream(max_frame=max_frame))


def run_stdio(server: Server, *, max_frame: int = DEFAULT_MAX_FRAME, backend: str = "asyncio") -> None:
    """Serve ``server`` on stdin/stdout until stdin is closed, starting the event loop only once it is needed.

    Frames are read in a plain blocking loop and answered by the session's dispatcher as they come, as its own read
    loop would answer them; the event loop (``backend``; on asyncio, uvloop's when it is installed), and asyncio's
    import with it, starts at the first thing that needs it — a handler that has to wait, a notification handler's
    coroutine, work the server spawns into its sessions — and the dispatcher's read loop goes on from there. A
    client that only asks for what is answered at once (``initialize``, the listings, ``inline`` tools) never waits
    for an event loop to start.
    """
    sys.stdout.flush()
    stream = stdio_stream(max_frame=max_frame)
    session = server.open_session(stream)
    dispatcher = session.dispatcher
    unread: Sequence[bytes] = ()
    try:
        while not dispatcher.needs_tasks:
            try:
                frames = stream.receive_sync()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            out: list[Outgoing] = []
            taken = dispatcher.answer_frames(frames, out)
            if out:
                stream.send_sync(out)
            unread = frames[taken:]
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        logger.debug("the client went away")
        session.close()
        return
    except BaseException:
        session.close()
        raise
    if not dispatcher.needs_tasks:  # the end of stdin, nothing left to do
        session.close()
        return
    run(_serve_session, session, unread, backend=backend)


async def _serve_session(session: ServerSession, unread: Sequence[bytes]) -> None:
    try:
        await session.dispatcher.run(unread=unread)
    finally:
        session.close()
