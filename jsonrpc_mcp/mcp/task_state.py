"""A task of the tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) as data (L2: sans I/O, no clock).

:class:`TaskRecord` is what a task store keeps of one task; the functions here are the rules of its life, each a
pure change of a record (the store applies it atomically, :meth:`~jsonrpc_mcp.mcp.task_store.TaskStore.modify`),
and how a record looks on the wire (a ``CreateTaskResult``, a ``DetailedTask``). Times are seconds since the
epoch, passed in by the caller.

Statuses: ``working`` → ``input_required`` ⇄ ``working`` → one of ``completed``, ``failed``, ``cancelled``,
which are final: a change of a finished task is refused (:func:`finish` returns ``None``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final, Literal

import msgspec

__all__ = (
    "EXTENSION_ID",
    "RELATED_TASK",
    "TaskRecord",
    "TaskStatus",
    "TERMINAL",
    "new_record",
    "is_expired",
    "ask",
    "deliver",
    "take_answers",
    "request_cancel",
    "report",
    "finish",
    "create_result",
    "detailed",
    "iso",
)

EXTENSION_ID: Final = "io.modelcontextprotocol/tasks"
#: The ``_meta`` key of a 2025-11-25 message related to a task (its value: ``{"taskId": ...}``).
RELATED_TASK: Final = "io.modelcontextprotocol/related-task"

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})


class TaskRecord(msgspec.Struct, kw_only=True):
    """One task, as a store keeps it (encoded with msgspec: JSON in a file or a Redis value)."""

    task_id: str
    owner: str  #: who may see it: the authenticated principal ("" when the transport authenticated nobody)
    #: whose quota it counts against: the principal when there is one, else the session or the connection
    client: str = ""
    method: str  #: the request it answers (``tools/call``)
    status: TaskStatus = "working"
    status_message: str | None = None
    created_at: float
    updated_at: float
    ttl: float  #: seconds a finished task is kept after it finished
    poll_interval_ms: int
    expires_at: float | None = None  #: set when it finishes; gone from then on
    #: Input the task waits for: key -> ``{"method", "params"}``; answered keys move to ``answers``.
    input_requests: dict[str, dict[str, Any]] = {}
    answers: dict[str, Any] = {}
    asked: list[str] = []  #: every key the task ever asked (a key is used once in a task's life)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    progress: float | None = None
    total: float | None = None
    cancel_requested: bool = False
    version: int = 0  #: bumped by every change (a store waits on it)


def new_record(
    task_id: str,
    owner: str,
    method: str,
    *,
    now: float,
    ttl: float,
    poll_interval: float,
    status_message: str | None = None,
    client: str | None = None,
) -> TaskRecord:
    """A new task, working. ``client``: whose quota it counts against (its ``owner``'s when not given)."""
    return TaskRecord(
        task_id=task_id,
        owner=owner,
        client=owner if client is None else client,
        method=method,
        status_message=status_message,
        created_at=now,
        updated_at=now,
        ttl=ttl,
        poll_interval_ms=max(1, round(poll_interval * 1000)),
    )


def is_expired(record: TaskRecord, now: float) -> bool:
    return record.expires_at is not None and now >= record.expires_at


def _changed(record: TaskRecord, now: float, **fields: Any) -> TaskRecord:
    return msgspec.structs.replace(record, updated_at=now, version=record.version + 1, **fields)


def ask(record: TaskRecord, requests: dict[str, dict[str, Any]], now: float) -> TaskRecord | None:
    """The task waits for these inputs (keys new in its life): ``input_required``. ``None`` once it finished."""
    if record.status in TERMINAL:
        return None
    return _changed(
        record,
        now,
        status="input_required",
        input_requests={**record.input_requests, **requests},
        asked=[*record.asked, *requests],
    )


def deliver(record: TaskRecord, responses: dict[str, Any], now: float) -> TaskRecord | None:
    """``tasks/update``: answers to keys the task waits for are taken (others are ignored, as the extension says);
    when none is left it is ``working`` again. ``None`` when nothing changes."""
    taken = {key: value for key, value in responses.items() if key in record.input_requests}
    if not taken or record.status in TERMINAL:
        return None
    waiting = {key: req for key, req in record.input_requests.items() if key not in taken}
    status: TaskStatus = "input_required" if waiting else "working"
    return _changed(record, now, input_requests=waiting, answers={**record.answers, **taken}, status=status)


def take_answers(record: TaskRecord, keys: set[str], now: float) -> TaskRecord | None:
    """The task has read these answers: they leave the record. ``None`` when it holds none of them."""
    if not keys & record.answers.keys():
        return None
    return _changed(record, now, answers={k: v for k, v in record.answers.items() if k not in keys})


def request_cancel(record: TaskRecord, now: float) -> TaskRecord | None:
    """``tasks/cancel``: the work is asked to stop (cooperatively). ``None`` when finished or asked already."""
    if record.status in TERMINAL or record.cancel_requested:
        return None
    return _changed(record, now, cancel_requested=True)


def report(
    record: TaskRecord, now: float, *, message: str | None, progress: float | None = None, total: float | None = None
) -> TaskRecord | None:
    """Progress of a working task: its ``statusMessage``, and how far it got."""
    if record.status in TERMINAL:
        return None
    fields: dict[str, Any] = {"status_message": message if message is not None else record.status_message}
    if progress is not None:
        fields["progress"] = progress
        fields["total"] = total
    return _changed(record, now, **fields)


def finish(
    record: TaskRecord,
    status: Literal["completed", "failed", "cancelled"],
    now: float,
    *,
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    message: str | None = None,
) -> TaskRecord | None:
    """The task's end: kept ``ttl`` seconds from now, then gone. ``None`` when it had ended already."""
    if record.status in TERMINAL:
        return None
    return _changed(
        record,
        now,
        status=status,
        result=result,
        error=error,
        status_message=message if message is not None else record.status_message,
        input_requests={},
        answers={},
        expires_at=now + record.ttl,
    )


def iso(moment: float) -> str:
    """An ISO 8601 timestamp in UTC, to the millisecond (``2026-07-28T10:30:00.123Z``)."""
    stamp = dt.datetime.fromtimestamp(moment, dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def _task(record: TaskRecord) -> dict[str, Any]:
    """The ``Task`` fields every shape carries. ``ttlMs`` counts from creation (as the extension says): while the
    task works it is its kept-for duration, and once it has finished it reaches its expiry."""
    ttl_end = record.expires_at if record.expires_at is not None else record.created_at + record.ttl
    task: dict[str, Any] = {"taskId": record.task_id, "status": record.status}
    if record.status_message is not None:
        task["statusMessage"] = record.status_message
    task["createdAt"] = iso(record.created_at)
    task["lastUpdatedAt"] = iso(record.updated_at)
    task["ttlMs"] = max(1, round((ttl_end - record.created_at) * 1000))
    task["pollIntervalMs"] = record.poll_interval_ms
    return task


def create_result(record: TaskRecord) -> dict[str, Any]:
    """The ``CreateTaskResult`` answering the request that made the task (``Result & Task``, flat)."""
    return {"resultType": "task", **_task(record)}


def detailed(record: TaskRecord) -> dict[str, Any]:
    """The ``DetailedTask`` of ``tasks/get`` and ``notifications/tasks``: the task, and by status its
    ``inputRequests``, ``result`` or ``error``; how far a working task got is in ``_meta.progress``."""
    task = _task(record)
    if record.status == "input_required":
        task["inputRequests"] = dict(record.input_requests)
    elif record.status == "completed":
        task["result"] = record.result if record.result is not None else {}
    elif record.status == "failed":
        task["error"] = record.error if record.error is not None else {"code": -32603, "message": "Internal error"}
    if record.progress is not None and record.status not in TERMINAL:
        progress: dict[str, Any] = {"progress": record.progress}
        if record.total is not None:
            progress["total"] = record.total
        task["_meta"] = {"progress": progress}
    return task
