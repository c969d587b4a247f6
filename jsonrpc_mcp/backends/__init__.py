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

from typing import Protocol

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
from ..transports.session_store import SharedBackend

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


class Backend(SharedBackend, Protocol):
    """What a :class:`~jsonrpc_mcp.Server` and its HTTP app need from the service their workers share: the
    server's :class:`~jsonrpc_mcp.mcp.bus.Bus` (``publish``, ``state_keys``, ``claim``, ``task_store``) and the
    app's :class:`~jsonrpc_mcp.transports.session_store.SessionStore` (``load_session``, ``save_session``,
    ``end_session``), with ``run`` and ``aclose`` (:class:`~jsonrpc_mcp.transports.session_store.SharedBackend`).

    Methods that reach the service raise :class:`~jsonrpc_mcp.errors.Unavailable` when it cannot be reached
    (never hang: each has a deadline)."""
