"""stdio: NDJSON on a process's stdin and stdout (L6).

Server side: :func:`serve_stdio` serves a :class:`~jsonrpc_mcp.Server` on this process's own stdin/stdout and
returns when stdin reaches EOF (a clean shutdown: exit code 0). Nothing but MCP frames is ever written to stdout;
logs go to stderr. Client side: :func:`spawn` starts a server process and gives a stream to talk to it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.abc
from anyio.streams.stapled import StapledByteStream

from .framing import DEFAULT_MAX_FRAME
from .ndjson import FdByteStream, NdjsonStream

if TYPE_CHECKING:
    from ..mcp.server import Server
    from ..mcp.session import ServerSession

__all__ = ("run_stdio", "serve_stdio", "stdio_stream", "spawn")

logger = logging.getLogger(__name__)


def stdio_stream(*, max_frame: int = DEFAULT_MAX_FRAME) -> NdjsonStream:
    """This process's stdin/stdout as a message stream."""
    return NdjsonStream(FdByteStream(sys.stdin.fileno(), sys.stdout.fileno()), max_frame=max_frame)


async def serve_stdio(server: Server, *, max_frame: int = DEFAULT_MAX_FRAME) -> None:
    """Serve ``server`` on stdin/stdout until stdin is closed."""
    sys.stdout.flush()
    await server.serve(stdio_stream(max_frame=max_frame))


def run_stdio(server: Server, *, max_frame: int = DEFAULT_MAX_FRAME, backend: str = "asyncio") -> None:
    """Serve ``server`` on stdin/stdout until stdin is closed, starting the event loop only once it is needed.

    What handlers answer at once (``initialize``, the listings, sync tools, ...) is answered in a plain blocking
    read loop, as the event loop's read loop would answer it; the event loop (``backend``), and asyncio's import
    with it, starts at the first thing that needs it: a handler that has to wait, a notification handler's
    coroutine, work the server spawns into its sessions. From then on this is :func:`serve_stdio`. A client
    that only asks for what is answered at once never waits for an event loop to start.
    """
    sys.stdout.flush()
    stream = stdio_stream(max_frame=max_frame)
    session = server.open_session(stream)
    dispatcher = session.dispatcher
    dispatcher.wake = _nothing  # work spawned before run is kept for it (answer_now's loop sees needs_run)
    try:
        while not dispatcher.needs_run:
            try:
                frames = stream.receive_sync()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            out = dispatcher.answer_now(frames)
            if out:
                stream.send_many_sync(out)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        logger.debug("the client went away")
        session.close()
        return
    except BaseException:
        session.close()
        raise
    if not dispatcher.needs_run:  # the end of stdin, nothing left to do
        session.close()
        return
    anyio.run(_serve_session, session, backend=backend)


async def _serve_session(session: ServerSession) -> None:
    try:
        await session.dispatcher.run()
    finally:
        session.close()


def _nothing() -> None:
    pass


@asynccontextmanager
async def spawn(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stderr: int | None = None,
    max_frame: int = DEFAULT_MAX_FRAME,
    shutdown_timeout: float = 5.0,
) -> AsyncIterator[NdjsonStream]:
    """Start ``command`` and yield a message stream over its stdin/stdout.

    On exit: close its stdin, wait up to ``shutdown_timeout``, then SIGTERM, then SIGKILL (the spec's order).
    The child's stderr is inherited unless ``stderr`` says otherwise.
    """
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    process = await anyio.open_process(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=full_env,
        cwd=cwd,
        start_new_session=True,
    )
    assert process.stdin is not None and process.stdout is not None
    stream = NdjsonStream(StapledByteStream(process.stdin, process.stdout), max_frame=max_frame)
    try:
        yield stream
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process, shutdown_timeout)


async def _stop(process: anyio.abc.Process, timeout: float) -> None:
    try:
        if process.stdin is not None:
            await process.stdin.aclose()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    with anyio.move_on_after(timeout):
        await process.wait()
        return
    if process.returncode is None:
        _signal(process, signal.SIGTERM)
        with anyio.move_on_after(timeout):
            await process.wait()
            return
    if process.returncode is None:
        _signal(process, signal.SIGKILL)
        await process.wait()


def _signal(process: anyio.abc.Process, sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            process.send_signal(sig)
        except ProcessLookupError:
            pass
