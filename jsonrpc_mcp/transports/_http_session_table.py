"""The handshake-era sessions of the Streamable HTTP app, and the tasks they run in (L6 helper).

:class:`SessionTable` owns both. Its task group (a sweeper, and the handler tasks every session shares) is entered
by :meth:`SessionTable.run` — from the ASGI lifespan, or by an embedder — or, when neither happened by the time
it is first needed, lazily in a background task of the running event loop (an asyncio task, or a trio system
task) that :meth:`SessionTable.aclose` stops.

Sessions idle for ``idle_timeout`` seconds are ended by the sweeper, and on lookup, so that an expired session
answers 404 even between sweeps. When the table is full, the least recently used session with nothing under way
gives way to a new one: a client that opens sessions and leaves them idle cannot lock others out (the client whose
session was ended gets 404 at its next request and starts a new one, as the spec says it must).
"""

from __future__ import annotations

import logging
import math
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from time import monotonic
from types import MappingProxyType
from typing import Any, Final

import anyio
import anyio.abc

from ..jsonrpc.concurrency import HandlerTasks, open_handler_tasks
from ._heap import find_malloc_trim, release_memory
from ._http_handshake_session import HttpSession

__all__ = ("SessionTable",)

logger = logging.getLogger(__name__)

_SESSION_TASK: Final = "jsonrpc-mcp HTTP session"
_DETACHED_TASK: Final = "jsonrpc-mcp detached work"

#: With ``trim_memory``: when this many sessions or more were open at once and the last of them has ended, free
#: heap memory is handed back to the OS (see :func:`release_memory`).
TRIM_AFTER: Final = 256


class SessionTable:
    def __init__(
        self, *, idle_timeout: float, max_sessions: int, max_per_owner: int | None = None, trim_memory: bool = False
    ) -> None:
        #: Started in the task group before any session is served (``task_status.started()`` when it is ready),
        #: cancelled with it: the app's shared backend, when it has one.
        self.companion: Callable[..., Coroutine[Any, Any, None]] | None = None
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self.max_per_owner = max_per_owner
        self._owned: Counter[str] = Counter()  # sessions per owner (those with one)
        self.trim_memory = trim_memory
        self._sessions: OrderedDict[str, HttpSession] = OrderedDict()  # least recently used first
        self.view: Mapping[str, HttpSession] = MappingProxyType(self._sessions)
        self._tasks: HandlerTasks | None = None
        self._ready: anyio.Event | None = None
        self._stop: anyio.Event | None = None
        self._stopped: anyio.Event | None = None
        self._detached: Any = None
        self._burst = 0  # the most sessions at once since the table was last empty

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def running(self) -> bool:
        return self._tasks is not None

    # --- the task group ----------------------------------------------------------------------------------

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Own the task group for the duration of the block; every session ends when it exits."""
        if self._tasks is not None:
            raise RuntimeError("the sessions' task group is already running")
        if self.trim_memory:
            find_malloc_trim()  # now, not after a burst: see there
        async with anyio.create_task_group() as tg, open_handler_tasks() as tasks:
            if self.companion is not None:
                await tg.start(self.companion)
            self._tasks = tasks
            if self._ready is None:
                self._ready = anyio.Event()
            self._ready.set()
            tg.start_soon(self._sweep)
            try:
                yield
            finally:
                self.end_all()
                self._tasks = None
                self._ready = None
                tg.cancel_scope.cancel()

    async def aclose(self) -> None:
        """End every session, and stop the task group if it was started lazily (waiting until it has)."""
        stop, stopped = self._stop, self._stopped
        if stop is not None:
            stop.set()
        if stopped is not None:
            await stopped.wait()
        self.end_all()

    async def tasks(self) -> HandlerTasks:
        """The handler tasks the sessions share (the task group is started lazily if it does not run)."""
        if self._tasks is not None:
            return self._tasks
        if self._ready is None:
            self._ready = anyio.Event()
            self._stop = anyio.Event()
            self._stopped = anyio.Event()
            self._detached = _spawn_detached(self._run_detached)
            logger.debug("no ASGI lifespan: started the session task group lazily")
        await self._ready.wait()
        if self._tasks is None:
            raise RuntimeError("the session task group stopped")
        return self._tasks

    async def start_detached(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        """Run ``fn(*args)`` among the handler tasks (work that outlives its request: a task's, 2026-07-28); the
        task group is started lazily if it does not run. ``fn`` must not raise."""
        tasks = await self.tasks()
        tasks.start_soon(fn(*args), _DETACHED_TASK)

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

    def admit(self, owner: str | None = None) -> bool:
        """Make room for a new session of ``owner``: True when there is (after ending expired sessions and, when the
        table or the owner's share of it is still full, the least recently used one of the table or of that owner
        with nothing under way)."""
        limit = self.max_per_owner
        if owner is not None and limit is not None and self._owned[owner] >= limit:
            self.expire()
            if self._owned[owner] >= limit:
                idle = next((s for s in self._sessions.values() if s.owner == owner and not s.busy()), None)
                if idle is None:
                    return False
                logger.info("a client has its most sessions: ended its least recently used idle one")
                self.end(idle)
        if len(self._sessions) < self.max_sessions:
            return True
        self.expire()
        if len(self._sessions) < self.max_sessions:
            return True
        for session in self._sessions.values():
            if not session.busy():
                logger.info("the session table is full: ended the least recently used idle session")
                self.end(session)
                return True
        return False

    def add(self, session: HttpSession) -> None:
        self._sessions[session.id] = session
        if session.owner is not None:
            self._owned[session.owner] += 1
        if len(self._sessions) > self._burst:
            self._burst = len(self._sessions)

    def get(self, sid: str) -> HttpSession | None:
        """The live session with this id (an expired one is ended here and now); it becomes the most recently used."""
        sid = sid.strip()
        session = self._sessions.get(sid)
        if session is None:
            return None
        if session.closed or session.idle(monotonic(), self.idle_timeout):
            self.end(session)
            return None
        self._sessions.move_to_end(sid)
        return session

    def end(self, session: HttpSession) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
            if session.owner is not None:
                self._owned[session.owner] -= 1
                if not self._owned[session.owner]:
                    del self._owned[session.owner]
        self._ended(session)

    def end_all(self) -> None:
        sessions = list(self._sessions.values())
        self._sessions.clear()
        self._owned.clear()
        for session in sessions:
            self._ended(session)

    def _ended(self, session: HttpSession) -> None:
        if session.closed:
            return
        session.terminate()
        if session.outlets and self._tasks is not None:  # (a GET stream's events in the store)
            self._tasks.start_soon(session.discard_outlets(), _SESSION_TASK)
        if not self._sessions and self._burst >= TRIM_AFTER and self.trim_memory:
            self._burst = 0
            release_memory()

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
        """Seconds until a session could expire (a ``Retry-After`` for a refused initialize)."""
        now = monotonic()
        waits = [s.last_seen + self.idle_timeout - now for s in self._sessions.values()]
        return max(1, math.ceil(min(waits))) if waits else max(1, math.ceil(self.idle_timeout))


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
