"""Tasks of 2025-11-25 (that revision's experimental core ``tasks``), served by the tasks extension's store (L5).

2025-11-25 had tasks in the core protocol; 2026-07-28 moved them to the ``io.modelcontextprotocol/tasks``
extension. Both are served by one :class:`~jsonrpc_mcp.mcp.tasks.Tasks`: the extension makes every task, runs its
work, keeps it in its store and ends it (one owner for a task's life); this module is the 2025-11-25 face of it,
a thin layer that reads and changes its records through the extension and shows them in that revision's shapes:

* the server declares ``tasks: {list, cancel, requests: {tools: {call}}}`` at 2025-11-25 (only; ``list`` only to
  a session whose transport authenticated a principal), and a tool's ``execution.taskSupport`` in ``tools/list``;
* a ``tools/call`` with ``params.task`` (``{ttl?}``) on a tool registered with ``task="optional"`` or
  ``"required"`` is answered with a ``CreateTaskResult`` (``{"task": Task}``); one with ``params.task`` on a
  tool that forbids it, or without it on a tool that requires it, is refused with -32601;
* ``tasks/get`` answers the ``Task``; ``tasks/result`` blocks until the task ends and answers what the call would
  have (its result, with ``_meta["io.modelcontextprotocol/related-task"]``, or its JSON-RPC error);
  ``tasks/list`` pages through the principal's tasks (-32601 without one); ``tasks/cancel`` ends the task
  ``cancelled`` before it answers (a finished one is refused with -32602); ``notifications/tasks/status`` tells
  the session that made a task of each change of its status.

Inside such a task the tool's :class:`~jsonrpc_mcp.Context` is a :class:`CoreTaskContext`: the session is still
there, so what the tool asks (``ctx.elicit()``, ``ctx.sample()``, ...) goes to the client as the session's own
requests, with the task's id in their ``_meta`` (the task is ``input_required`` until they are answered), and
``ctx.report_progress()`` sends ``notifications/progress`` on the call's token as well as setting the task's
``statusMessage``.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec
from msgspec import UNSET

from ..errors import ConnectionClosed, InvalidParams, MethodNotFound, RpcError
from . import task_state as ts
from . import types as t
from .context import Context, _typed
from .extensions import WrapNext
from .methods import BOTH, HANDSHAKE_ONLY, MethodSpec
from .pagination import paginate
from .task_store import ListsTasks
from .tasks import TaskContext, Tasks, _TaskIdParams, _too_many_tasks
from .versions import CORE_TASKS_VERSION

if TYPE_CHECKING:
    from .server import Server
    from .tools import ToolDef

__all__ = ("RELATED_TASK", "CoreTasks", "CoreTaskContext", "core_task")

logger = logging.getLogger(__name__)

RELATED_TASK: Final = ts.RELATED_TASK
_CANCELLED: Final = "The task was cancelled"
#: How long a wait for a task's change re-reads the store at the latest.
_RECHECK: Final = 30.0


class _ListParams(msgspec.Struct, rename="camel"):
    cursor: str | None = None
    meta: dict[str, Any] | None = msgspec.field(default=None, name="_meta")


def core_task(record: ts.TaskRecord) -> dict[str, Any]:
    """A record as 2025-11-25's ``Task``: ``ttl`` and ``pollInterval`` in milliseconds, and a tool call that
    ended with an ``isError`` result ``failed`` (as that revision says; it has no ``DetailedTask``)."""
    status = record.status
    if status == "completed" and isinstance(record.result, dict) and record.result.get("isError") is True:
        status = "failed"
    ttl_end = record.expires_at if record.expires_at is not None else record.created_at + record.ttl
    task: dict[str, Any] = {"taskId": record.task_id, "status": status}
    if record.status_message is not None:
        task["statusMessage"] = record.status_message
    task["createdAt"] = ts.iso(record.created_at)
    task["lastUpdatedAt"] = ts.iso(record.updated_at)
    task["ttl"] = max(1, round((ttl_end - record.created_at) * 1000))
    task["pollInterval"] = record.poll_interval_ms
    return task


class CoreTaskContext(TaskContext, kw_only=True):
    """The :class:`~jsonrpc_mcp.Context` of a tool running as a 2025-11-25 task (see the module docstring)."""

    def _related(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        out = dict(params or {})
        out["_meta"] = {**(out.get("_meta") or {}), RELATED_TASK: {"taskId": self.run.task_id}}
        return out

    async def _pass_progress(self, progress: float, total: float | None, message: str | None) -> None:
        """The task's ``statusMessage`` (as in a task of the extension), and ``notifications/progress`` on the
        call's token, which stays the client's until the task ends: none once it is cancelled or has ended (paced
        as a task's reports are: ``report_progress`` of the extension's task)."""
        await super()._pass_progress(progress, total, message)
        run = self.run
        if self.progress_token is None or run.stopped or run.cancel_requested or run.ending is not None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.send_notification("notifications/progress", params)

    async def send_notification(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Sent on the session (the call has been answered: there is no request stream to send it on); dropped
        once the session is gone."""
        try:
            await self.session.send_notification(method, self._related(params))
        except ConnectionClosed:
            pass

    @property
    def _asks_in_rounds(self) -> bool:
        return False  # (a request of the session, as in any handshake-era handler)

    async def _send_input_request(self, method: str, params: dict[str, Any] | None, timeout: float | None) -> Any:
        key = await self.tasks.waiting(self.run, method, params)  # (input_required while the client answers)
        try:
            raw = await self.session.send_request(method, self._related(params), timeout=timeout)
        finally:
            with anyio.CancelScope(shield=True):
                await self.tasks.answered(self.run, key)
        return _typed(method, msgspec.json.decode(raw))


class CoreTasks:
    """The 2025-11-25 face of a server's :class:`~jsonrpc_mcp.mcp.tasks.Tasks` (the server makes one with it)."""

    def __init__(self, tasks: Tasks, server: Server) -> None:
        self.tasks = tasks
        self.server = server
        #: The tasks made for 2025-11-25 sessions, by owner, oldest first: what ``tasks/list`` pages through when
        #: the store cannot list a client's tasks (every store here can: :class:`~.task_store.ListsTasks`).
        self._made: dict[str, OrderedDict[str, None]] = {}

    # --- what the server declares --------------------------------------------------------------------------

    def capability(self, identified: bool) -> dict[str, Any]:
        """``capabilities.tasks`` of a 2025-11-25 server: ``list`` only for a session whose transport authenticated
        a principal at ``initialize`` (``identified``), as one that cannot tell requestors apart would list the
        tasks of every unauthenticated client to any of them."""
        caps: dict[str, Any] = {"list": {}} if identified else {}
        caps.update({"cancel": {}, "requests": {"tools": {"call": {}}}})
        return caps

    def tools(self, entries: list[ToolDef]) -> list[t.Tool]:
        """The tools as 2025-11-25 lists them: ``execution.taskSupport`` on those that may run as tasks."""
        out: list[t.Tool] = []
        for entry in entries:
            tool = entry.tool
            if entry.task != "forbidden":
                tool = msgspec.structs.replace(tool, execution=t.ToolExecution(task_support=entry.task))
            out.append(tool)
        return out

    def methods(self, table: Mapping[str, MethodSpec]) -> dict[str, MethodSpec]:
        """The method table with 2025-11-25's ``tasks/*`` added, ``tasks/get`` and ``tasks/cancel`` answered by
        revision (the extension's at 2026-07-28), and ``tools/call`` taking ``params.task`` at 2025-11-25."""
        out = dict(table)
        since = CORE_TASKS_VERSION
        for name, handler in (("tasks/get", self._get), ("tasks/cancel", self._cancel)):
            later = out.get(name)
            dispatch = _by_revision(handler, later.handler if later is not None else None)
            out[name] = MethodSpec(name, dispatch, _TaskIdParams, None, eras=BOTH, min_version=since)
        only_here: dict[str, tuple[Any, type]] = {
            "tasks/result": (self._result, _TaskIdParams),
            "tasks/list": (self._list, _ListParams),
        }
        for name, (answer, params) in only_here.items():
            dispatch = _by_revision(answer, None)
            out[name] = MethodSpec(name, dispatch, params, None, eras=HANDSHAKE_ONLY, min_version=since)
        call = out["tools/call"]
        call_next = call.handler

        def call_tool(ctx: Context, params: Any) -> Any:
            if ctx.version != CORE_TASKS_VERSION:
                return call_next(ctx, params)
            return self._call_tool(ctx, params, call_next)

        out["tools/call"] = msgspec.structs.replace(call, handler=call_tool)
        return out

    # --- tools/call ----------------------------------------------------------------------------------------

    def _call_tool(self, ctx: Context, params: Any, call_next: WrapNext) -> Any:
        entry = self.server.tool_definition(params.name)
        if entry is None:
            return call_next(ctx, params)  # (unknown: -32602, as ever)
        asked = getattr(params, "task", UNSET)
        if asked is UNSET:
            if entry.task == "required":
                raise MethodNotFound(f"Method not found: tool {params.name} must be called as a task (params.task)")
            return call_next(ctx, params)
        if entry.task == "forbidden":
            raise MethodNotFound(f"Method not found: tool {params.name} cannot be called as a task")
        ttl = asked.get("ttl") if isinstance(asked, dict) else None
        if not isinstance(asked, dict) or (
            ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl >= 0)
        ):
            raise InvalidParams('Invalid params: "task" must be an object, its "ttl" a number of milliseconds')
        return self._create(ctx, params, call_next, ttl / 1000 if isinstance(ttl, int | float) else None)

    async def _create(self, ctx: Context, params: Any, call_next: WrapNext, ttl: float | None) -> dict[str, Any]:
        record = await self.tasks.start(ctx, params, call_next, ttl=ttl, context=CoreTaskContext)
        if record is None:
            raise _too_many_tasks()
        if not isinstance(self.tasks.store, ListsTasks):
            made = self._made.setdefault(record.owner, OrderedDict())
            made[record.task_id] = None
            while len(made) > self.tasks.max_per_client:
                made.popitem(last=False)
        try:
            await ctx.session.start_detached(self._tell, ctx.session, record)
        except ConnectionClosed:
            pass  # (the task is made and runs; its status is there to be asked for)
        return {"task": core_task(record)}

    async def _tell(self, session: Any, record: ts.TaskRecord) -> None:
        """``notifications/tasks/status`` to the session that made the task, at each change of its status (told
        on a best-effort basis, as the notification is optional)."""
        status = core_task(record)["status"]
        version = record.version
        try:
            while status not in ts.TERMINAL:
                changed = await self.tasks.store.wait(record.task_id, version, _RECHECK)
                if changed is None:
                    return
                version = changed.version
                task = core_task(changed)
                if task["status"] != status:
                    status = task["status"]
                    await session.send_notification("notifications/tasks/status", task)
        except ConnectionClosed:
            return
        except Exception:  # (a store that cannot be read: the client still polls with tasks/get)
            logger.debug("task %s: its status could not be told", record.task_id, exc_info=True)

    # --- tasks/get, tasks/result, tasks/list, tasks/cancel -------------------------------------------------

    async def _get(self, ctx: Context, params: _TaskIdParams) -> dict[str, Any]:
        return core_task(await self.tasks.find(ctx, params.task_id))

    async def _result(self, ctx: Context, params: _TaskIdParams) -> dict[str, Any]:
        record = await self.tasks.find(ctx, params.task_id)
        while record.status not in ts.TERMINAL:
            waited = await self.tasks.store.wait(record.task_id, record.version, _RECHECK)
            if waited is None:
                raise InvalidParams("Failed to retrieve task: Task not found (unknown, or expired)")
            record = waited
        if record.status == "completed":
            result = {k: v for k, v in (record.result or {}).items() if k != "resultType"}
            result["_meta"] = {**(result.get("_meta") or {}), RELATED_TASK: {"taskId": record.task_id}}
            return result
        if record.status == "cancelled":
            raise InvalidParams(f"The task was cancelled: task {record.task_id} has no result")
        error = record.error or {}
        raise RpcError(str(error.get("message") or "Internal error"), error.get("data"), code=error.get("code", -32603))

    async def _list(self, ctx: Context, params: _ListParams) -> dict[str, Any]:
        if ctx.auth is None:
            raise MethodNotFound("Method not found: tasks/list needs an authenticated requestor (not declared)")
        owner = self.tasks.owner_of(ctx)
        store = self.tasks.store
        records: list[ts.TaskRecord] = []
        if isinstance(store, ListsTasks):  # (every process's tasks of this principal, in a shared store)
            records = [r for r in await store.owned(self.tasks.client_of(ctx)) if r.owner == owner]
        else:
            made = self._made.get(owner, OrderedDict())
            for task_id in list(made):
                record = await store.get(task_id)
                if record is None or record.owner != owner:
                    made.pop(task_id, None)  # (expired)
                else:
                    records.append(record)
        page, nxt = paginate(records, params.cursor, self.server.page_size)
        out: dict[str, Any] = {"tasks": [core_task(r) for r in page]}
        if nxt is not None:
            out["nextCursor"] = nxt
        return out

    async def _cancel(self, ctx: Context, params: _TaskIdParams) -> dict[str, Any]:
        record = await self.tasks.find(ctx, params.task_id)
        if record.status not in ts.TERMINAL:
            ended = await self.tasks.cancel_now(record.task_id, _CANCELLED)
            if ended is not None:
                return core_task(ended)
            record = await self.tasks.find(ctx, params.task_id)  # (it ended meanwhile)
        raise InvalidParams(f"Cannot cancel task: already in terminal status {core_task(record)['status']!r}")


def _by_revision(handler: Any, later: Any) -> Any:
    """``handler`` at 2025-11-25, ``later`` (the extension's) at 2026-07-28; -32601 where neither is defined."""

    def dispatch(ctx: Context, params: Any) -> Any:
        if ctx.version == CORE_TASKS_VERSION:
            return handler(ctx, params)
        if later is not None and ctx.stateless:
            return later(ctx, params)
        raise MethodNotFound(f"Method not found: {ctx.method}")

    return dispatch
