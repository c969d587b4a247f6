"""What the tools, resources and prompts share: the store, run off the event loop, and change notifications (L7).

Store calls are short blocking SQLite calls; :meth:`Knowledge.call` runs them on a worker thread with
``anyio.to_thread.run_sync`` (not abandoned on cancellation, so a write that started always finishes and is
reported consistently), which keeps the event loop free while SQLite waits for the disk or another writer's lock.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import anyio.to_thread

from ...errors import InternalError
from ...mcp.server import Server
from ...presentation import ErrorCode, ToolFailure
from .db import KnowledgeStoreError
from .models import TABLE_RESOURCES, ChangeType, parse_id
from .store import KnowledgeStore, StoreConflict, StoreNotFound, StoreUnavailable, Write

__all__ = (
    "Knowledge",
    "ENTRIES",
    "TRIPLES",
    "HISTORY",
    "ENTRY_TEMPLATE",
    "CHANGED_IDS_MAX",
    "READ_SCOPE",
    "WRITE_SCOPE",
    "SCOPE_HIERARCHY",
    "entry_uri",
)

T = TypeVar("T")

ENTRIES: Final = "knowledge://entries"
TRIPLES: Final = "knowledge://graph/triples"
HISTORY: Final = "knowledge://history/transactions"
ENTRY_TEMPLATE: Final = "knowledge://entries/{id}"
#: At most this many ids in one change notification (``changed_count`` has the full number).
CHANGED_IDS_MAX: Final = 50

#: The OAuth scopes of a protected knowledge server (served over HTTP with authorization): reading (the query
#: tools, every resource and prompt) and writing (the tools that change the store); writing implies reading.
#: Without authorization (stdio, sockets, HTTP without a policy) they do not apply.
READ_SCOPE: Final = "knowledge:read"
WRITE_SCOPE: Final = "knowledge:write"
SCOPE_HIERARCHY: Final = {WRITE_SCOPE: (READ_SCOPE,)}


def entry_uri(entry_id: int) -> str:
    return f"{ENTRIES}/{entry_id}"


def _conflict_steps(exc: StoreConflict) -> list[str]:
    details = exc.details
    if "current_version" in details:
        return [
            f"Read entry {details['id']} again (it is at version {details['current_version']}) and retry with "
            f"expected_version={details['current_version']} if your change still applies."
        ]
    if "table" in details:
        return ["An equal row was added since: undo that later transaction first, or leave this one as it is."]
    return []  # the undo tool names the transactions in the way


@dataclass(slots=True)
class Knowledge:
    server: Server
    store: KnowledgeStore

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a store method for a tool; store failures become ``toolError:v1`` (:class:`ToolFailure`)."""
        try:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
        except StoreNotFound as exc:
            raise ToolFailure(
                ErrorCode.NOT_FOUND,
                f"No {exc.what} has id {exc.ident}.",
                details={exc.what: exc.ident},
                next_steps=[f"It is gone (deleted meanwhile?): find the {exc.what} again with query or history."],
            ) from None
        except StoreConflict as exc:
            raise ToolFailure(
                ErrorCode.CONFLICT, exc.message, details=exc.details, next_steps=_conflict_steps(exc)
            ) from None
        except StoreUnavailable as exc:
            if exc.retryable:
                message, step = "The knowledge database is busy; try again shortly.", "Call again in a moment."
            else:
                message = "The knowledge database could not complete the request."
                step = "Nothing was written; the server's operator should check its disk and database file."
            raise ToolFailure(ErrorCode.DEPENDENCY_ERROR, message, retryable=exc.retryable, next_steps=[step]) from None
        except KnowledgeStoreError:
            raise ToolFailure(
                ErrorCode.DEPENDENCY_ERROR,
                "The knowledge database is not available.",
                retryable=False,
                next_steps=["Nothing was written; the server's operator should check its database file."],
            ) from None

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a store read for a resource or prompt; a store failure is a JSON-RPC internal error."""
        try:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
        except (StoreUnavailable, KnowledgeStoreError):
            raise InternalError("The knowledge database is not available") from None

    async def publish(self, write: Write[Any], history_ids: Sequence[int] = ()) -> None:
        """Tell subscribers what a committed write changed: one ``notifications/resources/updated`` per
        collection and change type, with ``resource_uri``, ``tx_id``, ``change_type`` and ``changed_ids`` in
        its ``_meta``; one per changed entry to the subscribers of that entry (``knowledge://entries/{id}``) only;
        and one for ``knowledge://history/transactions``."""
        if write.tx_id is None:
            return
        groups: dict[tuple[str, ChangeType], list[int]] = {}
        entries: dict[int, ChangeType] = {}
        for change in write.changes:
            ids = groups.setdefault((TABLE_RESOURCES[change.table], change.change_type), [])
            if change.row_id not in ids:
                ids.append(change.row_id)
            if change.table == "entries":
                entries[change.row_id] = change.change_type  # the last change of the row says how it ends
        for (uri, change_type), ids in groups.items():
            await self._notify(uri, write.tx_id, change_type, ids)
        for entry_id, change_type in entries.items():
            await self._notify(entry_uri(entry_id), write.tx_id, change_type, [entry_id], exact=True)
        await self._notify(HISTORY, write.tx_id, "upsert", [write.tx_id, *history_ids])

    async def _notify(
        self, uri: str, tx_id: int, change_type: ChangeType, ids: list[int], *, exact: bool = False
    ) -> None:
        meta = {
            "resource_uri": uri,
            "tx_id": tx_id,
            "change_type": change_type,
            "changed_ids": ids[:CHANGED_IDS_MAX],
            "changed_count": len(ids),
        }
        await self.server.notify_resource_updated(uri, meta=meta, exact=exact)

    async def entry_exists(self, uri: str) -> bool:
        """Is ``uri`` exactly the URI of an entry that exists now (``knowledge://entries/7``, never ``/07``)?"""
        prefix = ENTRIES + "/"
        wanted = parse_id(uri[len(prefix) :]) if uri.startswith(prefix) else None
        if wanted is None or uri != entry_uri(wanted):
            return False
        entry, _ = await self.read(self.store.get_entry, wanted)
        return entry is not None
