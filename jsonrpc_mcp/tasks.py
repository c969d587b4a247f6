"""Tasks (2026-07-28, the ``io.modelcontextprotocol/tasks`` extension, SEP-2663): long-running tools answered at
once with a task the client follows.

::

    from jsonrpc_mcp.tasks import SqliteTaskStore, Tasks

    server = Server("demo", extensions=[Tasks(SqliteTaskStore("tasks.db"), ttl=3600)])

    @server.tool(task="optional")
    async def build(ctx: Context, target: str) -> str:
        ...

    async with Client.connect_http(url, extensions=[ClientTasks()]) as client:
        result = await client.call_tool("build", {"target": "docs"}, progress=show)  # followed to its end

The server side: :mod:`jsonrpc_mcp.mcp.tasks`; the client side: :mod:`jsonrpc_mcp.mcp.task_client`; the stores:
:mod:`jsonrpc_mcp.mcp.task_store` (the interface, and the in-memory default) and
:mod:`jsonrpc_mcp.storage.sqlite_tasks` (a file that survives a restart). A guide: docs/tasks.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .mcp.task_client import ClientTasks, CoreTaskHandle, TaskCancelled, TaskHandle
from .mcp.task_state import EXTENSION_ID, TaskRecord
from .mcp.task_store import ListsTasks, MemoryTaskStore, TaskStore
from .mcp.tasks import TaskContext, Tasks, TooManyTasks

if TYPE_CHECKING:
    from .storage.sqlite_tasks import SqliteTaskStore

__all__ = (
    "EXTENSION_ID",
    "Tasks",
    "TaskContext",
    "TooManyTasks",
    "TaskStore",
    "ListsTasks",
    "TaskRecord",
    "MemoryTaskStore",
    "SqliteTaskStore",
    "ClientTasks",
    "TaskHandle",
    "CoreTaskHandle",
    "TaskCancelled",
)


def __getattr__(name: str) -> Any:
    if name == "SqliteTaskStore":  # (sqlite3 is loaded by the servers that keep their tasks in a file only)
        from .storage.sqlite_tasks import SqliteTaskStore

        return SqliteTaskStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
