"""The knowledge server: facts and relations on embedded SQLite, with history, undo, paginated resources,
subscriptions and prompts — the reference application of jsonrpc-mcp (L7). See docs/knowledge-server.md.

::

    jsonrpc-mcp serve                      # KNOWLEDGE_DB=./knowledge.db by default

    from jsonrpc_mcp.examples.knowledge import create_server
    server = create_server("memory.db")

Modules, one job each: ``db`` (opening the file safely, connections), ``journal`` (transactions and row images),
``store`` (the operations), ``graph`` (walking triples), ``views`` (result kinds), ``app`` (threads and change
notifications), ``tools``, ``resources``, ``prompts``, ``server``.
"""

from __future__ import annotations

from .db import KnowledgeStoreError
from .server import KnowledgeServer, create_server
from .store import KnowledgeStore

__all__ = ("create_server", "KnowledgeServer", "KnowledgeStore", "KnowledgeStoreError")
