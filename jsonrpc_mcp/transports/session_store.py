"""What the Streamable HTTP app needs from a backend its workers share (L6): the store of the handshake-era
sessions (:class:`SessionStore`), and with the server's :class:`~jsonrpc_mcp.mcp.bus.Bus` the whole of what
``McpAsgiApp(backend=...)`` takes (:class:`SharedBackend`).

A session lives where ``initialize`` made it, and in the store as the bytes of its
:class:`~jsonrpc_mcp.mcp.bus.SessionRecord`: any worker serves its next request from there.
:class:`~jsonrpc_mcp.backends.redis.RedisBackend` implements both.

A backend given as a URL (``McpAsgiApp(backend="redis://...")``) is opened by the opener given to
:func:`open_backends_with` (the package gives one that makes a ``RedisBackend``, importing it then): the transport
never imports a backend.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from ..mcp.bus import Bus, BusEvent

if TYPE_CHECKING:
    import anyio.abc

__all__ = ("SessionStore", "SharedBackend", "open_backend", "open_backends_with")


class SessionStore(Protocol):
    """The handshake-era sessions of every worker. Each method raises :class:`~jsonrpc_mcp.errors.Unavailable`
    when the store cannot be reached (never hang: each has a deadline)."""

    async def load_session(self, sid: str, ttl: float) -> bytes | None:
        """A session's record (and ``ttl`` more seconds of life for it), or ``None`` when it does not exist."""

    async def save_session(
        self, sid: str, record: bytes, ttl: float, *, changed: bool, most: int | None = None
    ) -> None:
        """Store a session's record for ``ttl`` seconds; ``changed``: tell the workers holding a copy. ``most``
        (a new session): the most sessions kept across the workers — past it, the least recently used ones give
        way (ended, and every worker told, :class:`~jsonrpc_mcp.mcp.bus.SessionEnded`)."""

    async def end_session(self, sid: str) -> None:
        """Forget a session, and tell every worker (:class:`~jsonrpc_mcp.mcp.bus.SessionEnded`)."""


class SharedBackend(Bus, SessionStore, Protocol):
    """What ``McpAsgiApp(backend=...)`` takes: the server's bus and the sessions' store, run by the app while its
    sessions' task group runs."""

    async def run(
        self,
        deliver: Callable[[BusEvent], Awaitable[None]],
        *,
        task_status: anyio.abc.TaskStatus[None] = ...,
    ) -> None:
        """Receive the bus until cancelled, each event handed to ``deliver`` (this worker's own included);
        reconnects after a failure. Started once it has connected (or failed to, the first time)."""

    async def aclose(self) -> None:
        """Let go of the connections."""


#: What makes a backend of a URL (:func:`open_backends_with`).
_opener: Callable[[str], SharedBackend] | None = None


def open_backends_with(opener: Callable[[str], SharedBackend] | None) -> None:
    """Where a backend given as a URL comes from: ``opener(url)`` makes it (``None``: URLs are refused)."""
    global _opener
    _opener = opener


def open_backend(backend: SharedBackend | str) -> SharedBackend:
    """``backend`` itself, or the backend its URL names; :class:`ValueError` when no opener makes one of a URL."""
    if not isinstance(backend, str):
        return backend
    if _opener is None:
        raise ValueError("a backend given as a URL needs an opener (open_backends_with); give a backend object")
    return _opener(backend)
