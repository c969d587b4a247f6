"""The handshake-era sessions of the Streamable HTTP app and the task group they run in (L6 helper).

:class:`SessionTable` owns both. The task group is entered by :meth:`SessionTable.running` — from the ASGI
lifespan, or by an embedder — or, when neither happened by the time the first session starts, lazily in a
background task of the running event loop (an asyncio task, or a trio system task) that :meth:`aclose` stops.
A session that needs its dispatcher to run (a handler that has to wait, a frame to queue, work the server spawns
into it) gets a task of its own, spawned on the event loop directly (:mod:`..jsonrpc._tasks`), which the table
cancels and waits for when it stops; a session answered only at once, in its POSTs' tasks, never has one. A
sweeper in the task group ends sessions idle for ``idle_timeout`` seconds; lookups check expiry too, so an
expired session answers 404 even between sweeps. Idle times are measured with :func:`time.monotonic` (the clock
of asyncio's loop; a fraction of the cost of asking anyio for the backend's clock on every request).
"""

from __future__ import annotations

import gc
import logging
import math
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from time import monotonic
from types import MappingProxyType
from typing import Any, Final

import anyio
import anyio.abc

from ..jsonrpc._tasks import HandlerTasks, open_handler_tasks
from ._http_session import HttpSession

__all__ = ("SessionTable",)

logger = logging.getLogger(__name__)


class SessionTable:
    def __init__(self, *, idle_timeout: float, max_sessions: int) -> None:
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._sessions: dict[str, HttpSession] = {}
        self.view: Mapping[str, HttpSession] = MappingProxyType(self._sessions)
        self._tg: anyio.abc.TaskGroup | None = None
        self._session_tasks: HandlerTasks | None = None  # spawned on the loop directly: ~2.6 KiB less each
        self._ready: anyio.Event | None = None
        self._stop: anyio.Event | None = None
        self._stopped: anyio.Event | None = None
        self._detached: Any = None
        self._live_sessions = 0  # sessions started and not yet finished (their task, if they have one, included)
        self._burst = 0  # the most live sessions at once since the last time there were none

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def running(self) -> bool:
        return self._tg is not None

    # --- the task group ----------------------------------------------------------------------------------

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Own the task group for the duration of the block; every session ends when it exits."""
        if self._tg is not None:
            raise RuntimeError("the sessions' task group is already running")
        _find_malloc_trim()  # now, not after a burst: see there
        async with anyio.create_task_group() as tg, open_handler_tasks() as session_tasks:
            self._tg = tg
            self._session_tasks = session_tasks
            if self._ready is None:
                self._ready = anyio.Event()
            self._ready.set()
            tg.start_soon(self._sweep)
            try:
                yield
            finally:
                self._tg = None
                self._session_tasks = None
                self._ready = None
                self.end_all()
                tg.cancel_scope.cancel()

    async def aclose(self) -> None:
        """End every session, and stop the task group if it was started lazily (waiting until it has)."""
        stop, stopped = self._stop, self._stopped
        if stop is not None:
            stop.set()
        if stopped is not None:
            await stopped.wait()
        self.end_all()

    async def _task_group(self) -> anyio.abc.TaskGroup:
        if self._tg is not None:
            return self._tg
        if self._ready is None:
            self._ready = anyio.Event()
            self._stop = anyio.Event()
            self._stopped = anyio.Event()
            self._detached = _spawn_detached(self._run_detached)
            logger.debug("no ASGI lifespan: started the session task group lazily")
        await self._ready.wait()
        if self._tg is None:
            raise RuntimeError("the session task group stopped")
        return self._tg

    async def _run_detached(self) -> None:
        ready, stop, stopped = self._ready, self._stop, self._stopped
        try:
            async with self.run():
                if stop is not None:
                    await stop.wait()
        except Exception:
            logger.exception("the lazily started session task group failed")
        finally:
            self._stop = self._stopped = self._detached = None
            if ready is not None:
                ready.set()  # anyone still waiting sees that it is not running
            if stopped is not None:
                stopped.set()

    # --- sessions ----------------------------------------------------------------------------------------

    def full(self) -> bool:
        """True when no session can be added (after ending the expired ones)."""
        if len(self._sessions) < self.max_sessions:
            return False
        self.expire()
        return len(self._sessions) >= self.max_sessions

    async def start(self, session: HttpSession) -> None:
        """Add the session. Its task (its dispatcher) is started when it first needs one (:meth:`spawn`): a session
        whose requests are all answered at once in their POSTs never does."""
        await self._task_group()  # (running from here on)
        self._sessions[session.id] = session
        session.spawner = self.spawn
        self._live_sessions += 1
        if self._live_sessions > self._burst:
            self._burst = self._live_sessions

    def spawn(self, session: HttpSession) -> None:
        """Start the session's task (once; not after the task group has stopped)."""
        tasks = self._session_tasks
        if tasks is None or session.task is not None:
            return
        session.task = tasks.start_soon(self._run_session(session), _SESSION_TASK)

    async def _run_session(self, session: HttpSession) -> None:
        try:
            await session.run()
        except Exception:
            logger.exception("a session ended with an error")
        finally:
            self._ended(session)

    def _ended(self, session: HttpSession) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
        self._live_sessions -= 1
        if self._live_sessions == 0 and self._burst >= TRIM_AFTER:
            self._burst = 0
            release_memory()

    def get(self, sid: str) -> HttpSession | None:
        """The live session with this id (an expired one is ended here and now)."""
        session = self._sessions.get(sid.strip())
        if session is None:
            return None
        if session.closed or session.idle(monotonic(), self.idle_timeout):
            self.end(session)
            return None
        return session

    def end(self, session: HttpSession) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
        self._terminate(session)

    def end_all(self) -> None:
        for session in list(self._sessions.values()):
            self._terminate(session)
        self._sessions.clear()

    def _terminate(self, session: HttpSession) -> None:
        """End the session and cancel its task: its running handlers stop now, not after a drain. (Once the task
        group has stopped there is nothing to cancel: leaving it cancelled every session's task.) A session that
        never had a task is wound up here."""
        if session.closed:
            return
        token, tasks = session.task, self._session_tasks
        if token is None:
            session.end_untasked()
            if session.outlets and tasks is not None:  # (a GET stream's events in the store)
                session.task = tasks.start_soon(session.discard_outlets(), _SESSION_TASK)
            self._ended(session)
            return
        session.terminate()
        if tasks is not None:
            tasks.cancel(token)

    def expire(self) -> None:
        now = monotonic()
        for session in list(self._sessions.values()):
            if session.closed or session.idle(now, self.idle_timeout):
                self.end(session)
                logger.debug("session expired after %.1f s idle", self.idle_timeout)

    async def _sweep(self) -> None:
        interval = min(max(self.idle_timeout / 4, 0.05), 30.0)
        while True:
            await anyio.sleep(interval)
            self.expire()

    def retry_after(self) -> int:
        """Seconds until an idle session could expire (a ``Retry-After`` for a refused initialize)."""
        now = monotonic()
        waits = [s.last_seen + self.idle_timeout - now for s in self._sessions.values() if s.active == 0]
        return max(1, math.ceil(min(waits))) if waits else max(1, math.ceil(self.idle_timeout))


_SESSION_TASK: Final = "jsonrpc-mcp HTTP session"


#: When this many sessions or more ran at once and the last of them has ended, free heap memory is handed back to
#: the OS (see :func:`release_memory`).
TRIM_AFTER: Final = 256

_malloc_trim: Any = None


def release_memory() -> None:
    """After a burst of sessions: collect the cycles they left, then hand the free pages of the C heap back to the
    OS with glibc's ``malloc_trim`` (Linux with glibc only; elsewhere just the collection). Takes a few ms, once
    per burst. CPython's own arenas are returned by CPython when they empty; this is for the rest."""
    gc.collect()
    trim = _find_malloc_trim()
    if trim:
        trim(0)


def _find_malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or False. Looked up when the sessions' task group starts: importing ``ctypes``
    after a burst would put its long-lived objects in the free slots the burst's sessions left, and CPython can
    return an arena only when nothing in it is alive (measured: 3 of the 15 arenas a burst of 1,000 sessions
    leaves behind were kept by it)."""
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _malloc_trim = ctypes.CDLL(None).malloc_trim
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                logger.debug("no malloc_trim here: freed C-heap pages stay with the process")
    return _malloc_trim


def _spawn_detached(fn: Callable[[], Coroutine[Any, Any, None]]) -> Any:
    """Start ``fn()`` in the background of the running event loop, outside any request's task (an asyncio task,
    or a trio system task); returns the task handle to keep (asyncio only holds weak references)."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        import trio

        trio.lowlevel.spawn_system_task(fn)
        return None
    return loop.create_task(fn())
