"""Assembling the knowledge server (L7)."""

from __future__ import annotations

import os
from typing import Final

from ...mcp.server import Server
from ...mcp.tasks import Tasks
from .app import ENTRIES, HISTORY, SCOPE_HIERARCHY, TRIPLES, Knowledge
from .prompts import register_prompts
from .resources import register_resources
from .store import KnowledgeStore
from .tools import register_tools
from .ui import register_views

__all__ = ("KnowledgeServer", "create_server", "INSTRUCTIONS")

INSTRUCTIONS: Final = (
    "A long-term memory of facts (entries: topic, content, confidence 0-1, tags) and relations (triples). "
    "Search with query before storing to avoid duplicates; correct facts with update rather than storing a "
    "contradiction. Every write returns a transaction id (txId) that undo reverts; history lists them. Tools "
    "answer in markdown by default; pass format='json' for the machine contract (structuredContent always "
    "carries it). A result of kind needsInput:v1 means: ask the user for the listed fields, then call again."
)


class KnowledgeServer(Server):
    """The knowledge server: a :class:`~jsonrpc_mcp.Server` with its store (``close()`` releases the file)."""

    def __init__(self, db_path: str | os.PathLike[str] = "knowledge.db") -> None:
        super().__init__(
            "knowledge",
            "1.0.0",
            title="Knowledge server",
            description="Facts and relations with history and undo, on embedded SQLite.",
            instructions=INSTRUCTIONS,
            scope_hierarchy=SCOPE_HIERARCHY,
            extensions=[Tasks(poll_interval=0.5)],  # (import_entries runs as a task where the client allows it)
        )
        self.store = KnowledgeStore(db_path)
        self.knowledge = Knowledge(self, self.store)
        register_tools(self.knowledge)
        register_resources(self.knowledge)
        register_prompts(self.knowledge)
        register_views(self)

    async def accepts_subscription(self, uri: str) -> bool:
        """The three collections, and each entry that exists (``knowledge://entries/7``: its own changes)."""
        return uri in (ENTRIES, TRIPLES, HISTORY) or await self.knowledge.entry_exists(uri)

    def close(self) -> None:
        self.store.close()


def create_server(db_path: str | os.PathLike[str] = "knowledge.db") -> KnowledgeServer:
    """The knowledge server on the SQLite file ``db_path`` (created if missing).

    Raises :class:`~jsonrpc_mcp.examples.knowledge.KnowledgeStoreError` when the file cannot be used (not a
    database, corrupt, another application's, read-only): nothing in it is changed.
    """
    return KnowledgeServer(db_path)
