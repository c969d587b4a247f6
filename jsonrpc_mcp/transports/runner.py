"""Starting an event loop for a server (L6 helper)."""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

import anyio
import anyio.abc

__all__ = ("run", "run_until_stopped", "STOP_SIGNALS")

T = TypeVar("T")

logger = logging.getLogger(__name__)

#: What asks a served process to stop: Ctrl-C, and the signal supervisors (systemd, docker, kill) send.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


def run(fn: Callable[..., Awaitable[T]], *args: Any, backend: str = "asyncio") -> T:
    """``anyio.run(fn, *args)``; an asyncio loop is uvloop's when uvloop is installed (the ``http`` extra installs
    it), as uvicorn chooses for HTTP: a faster loop for the same code."""
    options: dict[str, Any] = {}
    if backend == "asyncio" and importlib.util.find_spec("uvloop") is not None:
        options["use_uvloop"] = True
    return anyio.run(fn, *args, backend=backend, backend_options=options)


def run_until_stopped(
    fn: Callable[..., Awaitable[object]],
    *args: Any,
    backend: str = "asyncio",
    stopping: Callable[[], Awaitable[object]] | None = None,
) -> signal.Signals | None:
    """Run a server, ``fn(*args)``, until it returns or SIGINT or SIGTERM asks the process to stop; return that
    signal (``None`` when ``fn`` returned).

    A stop signal cancels ``fn``: its listeners close, its sessions end, a Unix socket's file is removed. The
    handlers are installed whatever the process inherited: a shell without job control starts a background job
    with SIGINT ignored, and a server started that way would otherwise never stop on ``kill -INT`` (uvicorn, which
    serves ``--http``, takes both signals the same way). The handlers are removed as soon as one signal arrives,
    so a second Ctrl-C while the server stops interrupts at once. ``stopping()`` is awaited when a signal arrives,
    before ``fn`` is cancelled (what the server says to its peers as it stops: ``Server.end_listens``). Off the
    main thread, or where the event loop cannot take signals (not POSIX), it is :func:`run`, and Ctrl-C is
    ``KeyboardInterrupt`` as usual.
    """
    if os.name != "posix" or threading.current_thread() is not threading.main_thread():
        run(fn, *args, backend=backend)
        return None
    stopped: list[signal.Signals] = []
    run(_serve_until_signal, fn, args, stopped, stopping, backend=backend)
    return stopped[0] if stopped else None


async def _serve_until_signal(
    fn: Callable[..., Awaitable[object]],
    args: Sequence[Any],
    stopped: list[signal.Signals],
    stopping: Callable[[], Awaitable[object]] | None,
) -> None:
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        # (listening before the server says it is ready)
        await tg.start(_cancel_on_signal, tg.cancel_scope, stopped, stopping)
        try:
            await fn(*args)
        except Exception as exc:
            failure = exc  # raised below as itself, not wrapped in the task group's ExceptionGroup
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def _cancel_on_signal(
    scope: anyio.CancelScope,
    stopped: list[signal.Signals],
    stopping: Callable[[], Awaitable[object]] | None = None,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        task_status.started()
        async for signum in signals:
            logger.info("stopping on %s", signum.name)
            stopped.append(signum)
            break
    # (the handlers are gone: a second signal interrupts at once, whatever ``stopping`` does)
    if stopping is not None:
        try:
            await stopping()
        except Exception:
            logger.exception("stopping failed")
    scope.cancel()
