"""Several worker processes serving one listening socket (POSIX; L6): ``jsonrpc-mcp serve --http ... --workers N``.

The parent binds the socket, starts ``N`` workers that inherit it (each a whole ``jsonrpc-mcp serve`` with its own
event loop and uvicorn), and watches them: a worker that dies is replaced (unless workers keep dying within a second
of their start, which stops everything: a server that cannot start will not start by retrying); SIGINT or SIGTERM
tells every worker to stop (uvicorn's graceful shutdown) and returns when they have. Each worker also holds the read
end of a pipe whose write end only the parent has: when the parent is gone, however it went, the pipe reads its end
and the worker stops itself, so no worker outlives its parent.

Workers share nothing by themselves: what a client of one must find on another (sessions, notifications,
``requestState`` keys) needs a shared backend (``--backend redis://...``; :mod:`jsonrpc_mcp.backends`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType

__all__ = ("supervise", "stop_with_parent")

logger = logging.getLogger(__name__)

#: A worker that dies sooner than this after its start counts as failing to start.
QUICK_DEATH = 1.0
#: That many failed starts in a row stop the whole server.
MAX_QUICK_DEATHS = 5


def supervise(command: Callable[[int, int], Sequence[str]], sock: socket.socket, workers: int) -> int:
    """Run ``workers`` processes, each ``command(socket_fd, parent_fd)`` (the fds it inherits), until SIGINT or
    SIGTERM; returns the exit status (0, or 1 when workers kept failing to start)."""
    if sys.platform == "win32":  # pragma: no cover - no descriptor inheritance of sockets there
        raise RuntimeError("several workers need a POSIX system; on Windows run one process per port behind a balancer")
    if workers < 1:
        raise ValueError("workers must be at least 1")
    parent_read, parent_write = os.pipe()  # (parent_write is never inherited: non-inheritable by default)
    fds = (sock.fileno(), parent_read)
    running: dict[int, subprocess.Popen[bytes]] = {}  # slot -> its process
    started: dict[int, float] = {}
    stopping = False
    quick_deaths = 0
    status = 0

    def start(slot: int) -> None:
        running[slot] = subprocess.Popen(list(command(*fds)), pass_fds=fds)
        started[slot] = time.monotonic()

    def stop_all(signum: int = signal.SIGTERM, frame: FrameType | None = None) -> None:
        nonlocal stopping
        stopping = True
        for proc in running.values():
            if proc.returncode is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass

    previous = {sig: signal.signal(sig, stop_all) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for slot in range(workers):
            start(slot)
        logger.info("%d workers started", workers)
        while running:
            try:
                pid, wait_status = os.wait()
            except ChildProcessError:
                break
            ended = next((s for s, proc in running.items() if proc.pid == pid), None)
            if ended is None:
                continue
            proc = running.pop(ended)
            code = proc.returncode = os.waitstatus_to_exitcode(wait_status)
            if stopping:
                continue
            quick_deaths = quick_deaths + 1 if time.monotonic() - started[ended] < QUICK_DEATH else 0
            if quick_deaths >= MAX_QUICK_DEATHS:
                logger.error("workers keep exiting as they start (the last %s); stopping", _exit(code))
                status = 1
                stop_all()
                continue
            logger.warning("worker %d %s; starting another", ended + 1, _exit(code))
            start(ended)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(parent_read)
        os.close(parent_write)
    return status


def _exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def stop_with_parent(parent_fd: int) -> None:
    """In a worker: stop this process (SIGTERM to itself, uvicorn's graceful shutdown) once the parent is gone."""

    def watch() -> None:
        try:
            while os.read(parent_fd, 1):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="jsonrpc-mcp parent watch", daemon=True).start()
