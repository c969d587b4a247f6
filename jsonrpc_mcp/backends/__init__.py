"""What several workers of one MCP server share, and the messages they pass each other (L6).

One process serves its own connections; behind a load balancer, several processes (on one host or many) serve one
URL. They must agree on a few things, which a *backend* shares between them (:class:`Backend`;
:class:`~jsonrpc_mcp.backends.redis.RedisBackend` is the one that ships):

* notifications: a resource update, a list change or a log message that any worker publishes reaches the
  subscribers of every worker (:class:`ResourceUpdated`, :class:`ListChanged`, :class:`LogMessage` on the bus);
* the keys that seal 2026-07-28 ``requestState`` (a state sealed by one worker opens on any other), and the
  single-use states already answered;
* what ``initialize`` settled for a handshake-era session (:class:`SessionRecord`), so that any worker can serve
  its next request; :class:`SessionChanged` and :class:`SessionEnded` tell the workers that hold a copy;
* the tasks of the tasks extension (:meth:`Backend.task_store`), so that any worker answers ``tasks/get``,
  ``tasks/update`` and ``tasks/cancel`` for a task another worker runs (:class:`TaskChanged` wakes its runner);
* what an extension tells its counterparts on every worker (:class:`ExtensionEvent`): the tasks extension's
  change of a task's status, for the ``subscriptions/listen`` streams of every worker that asked for it.

What stays with one worker: a request in flight, its SSE stream, and the requests it sends to the client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import anyio.abc

from ..mcp.bus import (
    BusEvent,
    ClientMessage,
    ExtensionEvent,
    ListChanged,
    LogMessage,
    ResourceUpdated,
    SessionChanged,
    SessionEnded,
    SessionRecord,
    TaskChanged,
    decode_event,
    encode_event,
)

if TYPE_CHECKING:
    from ..mcp.task_store import TaskStore

__all__ = (
    "Backend",
    "BusEvent",
    "ResourceUpdated",
    "ListChanged",
    "LogMessage",
    "SessionChanged",
    "SessionEnded",
    "ClientMessage",
    "TaskChanged",
    "ExtensionEvent",
    "SessionRecord",
    "encode_event",
    "decode_event",
)


class Backend(Protocol):
    """What a :class:`~jsonrpc_mcp.Server` and its HTTP app need from the service their workers share.

    Methods that reach the service raise :class:`~jsonrpc_mcp.errors.Unavailable` when it cannot be reached
    (never hang: each has a deadline)."""

    async def run(
        self,
        deliver: Callable[[BusEvent], Awaitable[None]],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Receive the bus until cancelled, each event handed to ``deliver`` (this worker's own included);
        reconnects after a failure. Started once it has connected (or failed to, the first time)."""

    async def publish(self, event: BusEvent) -> None:
        """Send ``event`` to every worker (this one included, through :meth:`run`)."""

    def state_keys(self) -> tuple[bytes, ...]:
        """The keys that open ``requestState``, the one that seals first (empty before :meth:`run` connected)."""

    async def claim(self, nonce: str, expires: float) -> bool:
        """Spend a single-use state's nonce (valid until ``expires``, a UNIX time): True the first time only."""

    async def load_session(self, sid: str, ttl: float) -> bytes | None:
        """A session's record (and ``ttl`` more seconds of life for it), or ``None`` when it does not exist."""

    async def save_session(
        self, sid: str, record: bytes, ttl: float, *, changed: bool, most: int | None = None
    ) -> None:
        """Store a session's record for ``ttl`` seconds; ``changed``: tell the workers holding a copy. ``most``
        (a new session): the most sessions kept across the workers — past it, the least recently used ones give
        way (ended, and every worker told, :class:`SessionEnded`)."""

    async def end_session(self, sid: str) -> None:
        """Forget a session, and tell every worker (:class:`SessionEnded`)."""

    def task_store(self) -> TaskStore:
        """A task store that every worker sharing this backend reads and changes (the tasks extension takes it
        when it was given no store of its own)."""

    async def aclose(self) -> None:
        """Let go of the connections."""
