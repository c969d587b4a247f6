"""Tasks kept in a SQLite file, so that they survive a restart of the server (L6).

::

    from jsonrpc_mcp.tasks import SqliteTaskStore, Tasks

    server = Server("demo", extensions=[Tasks(SqliteTaskStore("tasks.db"))])

What it promises:

* **A task never vanishes.** Every change is committed before the request that made it is answered. A task that
  was working (or waiting for input) when the process stopped — a crash, ``kill -9``, a restart — reads as
  ``failed`` with the message "The server stopped while the task was running" when the store is opened again,
  and is then kept ``ttl`` seconds like any finished task.
* **One process owns the file.** It is opened in SQLite's exclusive locking mode, held until the store is
  closed (or the process ends: the operating system releases the lock); a second process opening it is refused
  with a clear error (:class:`TaskStoreInUse`) rather than sharing tasks it cannot run. Several worker processes
  share a store built for that (Redis), not a file.
* **Bounded** as any store: tasks per client and in all (``max_per_client`` and ``max_total`` of :meth:`create`,
  the oldest finished giving way first), and finished ones deleted when they expire (met on a read, or swept
  when a task is created).

SQLite is blocking: every statement runs on a worker thread, one at a time (one connection, in WAL mode).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import anyio
import anyio.to_thread
import msgspec

from ..jsonrpc.codes import INTERNAL_ERROR
from ..mcp import task_state as ts
from ..mcp.task_state import TaskRecord, is_expired
from ..mcp.task_store import Change, ChangeSignals, listed_order

__all__ = ("SqliteTaskStore", "TaskStoreInUse", "STOPPED_MESSAGE")

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: What a task that was running when its process stopped says, once the store is opened again.
STOPPED_MESSAGE: Final = "The server stopped while the task was running"
_SCHEMA_VERSION: Final = 2
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    status TEXT NOT NULL,
    expires_at REAL,
    record BLOB NOT NULL,
    client TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner);
CREATE INDEX IF NOT EXISTS tasks_by_client ON tasks (client, expires_at);
CREATE INDEX IF NOT EXISTS tasks_by_expiry ON tasks (expires_at) WHERE expires_at IS NOT NULL;
"""
#: A file of schema 1 (tasks counted by owner) becomes one of schema 2 (by client: its owner, for its old tasks).
_FROM_1: Final = """
ALTER TABLE tasks ADD COLUMN client TEXT NOT NULL DEFAULT '';
UPDATE tasks SET client = owner;
CREATE INDEX IF NOT EXISTS tasks_by_client ON tasks (client, expires_at);
"""
_encode: Final = msgspec.json.Encoder().encode
_decode: Final = msgspec.json.Decoder(TaskRecord).decode


class TaskStoreInUse(RuntimeError):
    """The SQLite file is held by another process (or cannot be opened): one process owns a task file."""


class SqliteTaskStore:
    """Tasks in a SQLite file (see the module docstring). Opened, and its stopped tasks marked failed, at once.

    :param path: the database file (created if missing).
    :param busy_timeout: seconds to wait for the file's lock at opening before refusing (another process has it).
    """

    def __init__(self, path: str | Path, *, busy_timeout: float = 1.0, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self._clock = clock
        self._signals = ChangeSignals()
        self._lock = threading.Lock()  # one statement at a time on the one connection
        self._db: sqlite3.Connection | None = _open(self.path, busy_timeout, clock())

    # --- the TaskStore interface ---------------------------------------------------------------------------

    async def create(self, record: TaskRecord, *, max_per_client: int | None, max_total: int | None = None) -> bool:
        return await self._run(self._create, record, max_per_client, max_total)

    async def get(self, task_id: str) -> TaskRecord | None:
        return await self._run(self._get, task_id)

    async def modify(self, task_id: str, change: Change) -> TaskRecord | None:
        record, changed = await self._run(self._modify, task_id, change)
        if changed:
            self._signals.changed(task_id)
        return record

    async def wait(self, task_id: str, after_version: int, timeout: float) -> TaskRecord | None:
        return await self._signals.wait(lambda: self.get(task_id), task_id, after_version, timeout)

    async def owned(self, client: str) -> list[TaskRecord]:
        return await self._run(self._owned, client)

    async def aclose(self) -> None:
        self._signals.release_all()
        await anyio.to_thread.run_sync(self.close)

    def close(self) -> None:
        """Close the file (its lock is released); a blocking call, for code without an event loop."""
        self._signals.release_all()
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # --- on a worker thread --------------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(self._locked, fn, args)

    def _locked(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        with self._lock:
            if self._db is None:
                raise RuntimeError("the task store is closed")
            return fn(self._db, *args)

    def _create(
        self, db: sqlite3.Connection, record: TaskRecord, max_per_client: int | None, max_total: int | None
    ) -> bool:
        now = self._clock()
        with db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM tasks WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,))
            if max_per_client is not None:
                (count,) = db.execute("SELECT count(*) FROM tasks WHERE client = ?", (record.client,)).fetchone()
                if count >= max_per_client and not _drop_oldest_finished(db, "WHERE client = ? AND", (record.client,)):
                    return False
            if max_total is not None:
                (count,) = db.execute("SELECT count(*) FROM tasks").fetchone()
                if count >= max_total and not _drop_oldest_finished(db, "WHERE", ()):
                    return False
            db.execute(
                "INSERT INTO tasks (task_id, owner, client, status, expires_at, record) VALUES (?, ?, ?, ?, ?, ?)",
                (record.task_id, record.owner, record.client, record.status, record.expires_at, _encode(record)),
            )
        return True

    def _owned(self, db: sqlite3.Connection, client: str) -> list[TaskRecord]:
        now = self._clock()
        rows = db.execute(
            "SELECT record FROM tasks WHERE client = ? AND (expires_at IS NULL OR expires_at > ?)", (client, now)
        ).fetchall()
        found = (_decode(row[0]) for row in rows)
        return sorted((record for record in found if not is_expired(record, now)), key=listed_order)

    def _get(self, db: sqlite3.Connection, task_id: str) -> TaskRecord | None:
        row = db.execute("SELECT record FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
        if row is None:
            return None
        record = _decode(row[0])
        if is_expired(record, self._clock()):
            with db:
                db.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))
            return None
        return record

    def _modify(self, db: sqlite3.Connection, task_id: str, change: Change) -> tuple[TaskRecord | None, bool]:
        with db:  # (one transaction: no other change between the read and the write)
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT record FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
            if row is None:
                return None, False
            record = _decode(row[0])
            if is_expired(record, self._clock()):
                db.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))
                return None, False
            changed = change(record)
            if changed is None:
                return record, False
            db.execute(
                "UPDATE tasks SET status = ?, expires_at = ?, record = ? WHERE task_id = ?",
                (changed.status, changed.expires_at, _encode(changed), task_id),
            )
        return changed, True


def _drop_oldest_finished(db: sqlite3.Connection, where: str, args: tuple[Any, ...]) -> bool:
    """Delete the finished task (among those ``where`` picks) that expires first; False when there is none."""
    row = db.execute(
        f"SELECT task_id FROM tasks {where} expires_at IS NOT NULL ORDER BY expires_at LIMIT 1", args
    ).fetchone()
    if row is None:
        return False
    db.execute("DELETE FROM tasks WHERE task_id = ?", row)
    return True


def _open(path: Path, busy_timeout: float, now: float) -> sqlite3.Connection:
    """Open the file, take it for this process, and mark failed the tasks its last owner left running."""
    try:
        db = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise TaskStoreInUse(f"cannot open the task store {path}: {exc}") from None
    try:
        db.execute("PRAGMA locking_mode = EXCLUSIVE")
        db.execute("BEGIN EXCLUSIVE")  # the file's lock, held from now until the store is closed
        db.execute("COMMIT")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version == 0:
            db.executescript(f"BEGIN; {_SCHEMA} PRAGMA user_version = {_SCHEMA_VERSION}; COMMIT;")
        elif version == 1:
            db.executescript(f"BEGIN; {_FROM_1} PRAGMA user_version = {_SCHEMA_VERSION}; COMMIT;")
        elif version != _SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"its schema is version {version}, this library reads {_SCHEMA_VERSION}")
        _fail_the_stopped(db, now)
    except sqlite3.OperationalError as exc:
        db.close()
        if "locked" in str(exc) or "busy" in str(exc):
            raise TaskStoreInUse(
                f"the task store {path} is in use by another process: a task file serves one process "
                "(for several, use a store they can share)"
            ) from None
        raise TaskStoreInUse(f"cannot open the task store {path}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        db.close()
        raise TaskStoreInUse(f"{path} is not a task store: {exc}") from None
    return db


def _fail_the_stopped(db: sqlite3.Connection, now: float) -> None:
    """The tasks the file's last owner left working or waiting: failed, with a message that says why."""
    error = {"code": INTERNAL_ERROR, "message": STOPPED_MESSAGE}
    with db:
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM tasks WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,))
        rows = db.execute("SELECT task_id, record FROM tasks WHERE status IN ('working', 'input_required')").fetchall()
        for task_id, blob in rows:
            record = ts.finish(_decode(blob), "failed", now, error=error, message=STOPPED_MESSAGE)
            if record is not None:
                db.execute(
                    "UPDATE tasks SET status = ?, expires_at = ?, record = ? WHERE task_id = ?",
                    (record.status, record.expires_at, _encode(record), task_id),
                )
    if rows:
        logger.warning("%d task(s) the last server process left running are now failed", len(rows))
