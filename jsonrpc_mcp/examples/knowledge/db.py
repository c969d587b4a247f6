"""Opening the SQLite file safely, its schema, and the connections (L7; stdlib sqlite3 only).

Start-up refuses, with a clear :class:`KnowledgeStoreError` and without writing a byte, a file that is not a
SQLite database, a corrupt one, another application's database, a newer schema, or a read-only file or
directory (write permission bits are checked too, so a file marked read-only is respected even by root).

Connections: one writer, guarded by a lock, whose every write is ``BEGIN IMMEDIATE … COMMIT`` (SQLite's write
lock, so writers in other processes queue behind ``busy_timeout`` too); a small pool of ``query_only``
readers, each read in one transaction so it sees one snapshot (WAL lets reads run beside the writer).
``synchronous=FULL``: a commit is on disk before the tool answers.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

__all__ = ("KnowledgeStoreError", "Database", "SCHEMA_VERSION")

SCHEMA_VERSION: Final = 1
_HEADER: Final = b"SQLite format 3\x00"
_BUSY_MS: Final = 5000
_READERS: Final = 4

_SCHEMA: Final = (
    "CREATE TABLE kb_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE transactions(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        op TEXT NOT NULL,
        summary TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        undoes INTEGER REFERENCES transactions(id),
        undone_by INTEGER REFERENCES transactions(id))""",
    """CREATE TABLE entries(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        topic TEXT NOT NULL,
        content TEXT NOT NULL,
        confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
        tags TEXT NOT NULL DEFAULT '[]',
        recorded_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        version INTEGER NOT NULL,
        tx_id INTEGER NOT NULL REFERENCES transactions(id))""",
    "CREATE INDEX entries_topic ON entries(topic COLLATE NOCASE)",
    """CREATE TABLE triples(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        subject TEXT NOT NULL,
        predicate TEXT NOT NULL,
        object TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        tx_id INTEGER NOT NULL REFERENCES transactions(id),
        UNIQUE (subject, predicate, object))""",
    "CREATE INDEX triples_object ON triples(object)",
    """CREATE TABLE changes(
        tx_id INTEGER NOT NULL REFERENCES transactions(id),
        seq INTEGER NOT NULL,
        tbl TEXT NOT NULL,
        row_id INTEGER NOT NULL,
        before TEXT,
        after TEXT,
        PRIMARY KEY (tx_id, seq))""",
    "CREATE INDEX changes_row ON changes(tbl, row_id)",
)


class KnowledgeStoreError(RuntimeError):
    """The knowledge database cannot be used; the message says why and what to do."""


def _check_file(path: Path) -> None:
    where = str(path)
    parent = path.parent if str(path.parent) else Path(".")
    if path.exists():
        if not path.is_file():
            raise KnowledgeStoreError(f"knowledge database {where} is not a regular file")
        mode = path.stat().st_mode
        if not os.access(path, os.R_OK | os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
            raise KnowledgeStoreError(
                f"knowledge database {where} is read-only; make it writable or set KNOWLEDGE_DB to another file"
            )
        if path.stat().st_size > 0:
            with path.open("rb") as f:
                if f.read(len(_HEADER)) != _HEADER:
                    raise KnowledgeStoreError(
                        f"{where} is not a SQLite database (or its header is corrupt); it was left untouched"
                    )
    elif not parent.is_dir():
        raise KnowledgeStoreError(f"cannot create knowledge database {where}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise KnowledgeStoreError(
            f"the directory of knowledge database {where} is not writable (SQLite needs it for its WAL files)"
        )


def _connect(path: Path, *, readonly: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=_BUSY_MS / 1000)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
        if readonly:
            conn.execute("PRAGMA query_only = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _prepare(conn: sqlite3.Connection, where: str) -> None:
    """Check the file is sound and ours, then switch to WAL and create the schema if it is new."""
    check = conn.execute("PRAGMA quick_check").fetchone()[0]
    if check != "ok":
        raise KnowledgeStoreError(f"knowledge database {where} is corrupt ({check}); it was left untouched")
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tables.discard("sqlite_sequence")
    if tables and "kb_meta" not in tables:
        raise KnowledgeStoreError(f"{where} is another application's SQLite database; it was left untouched")
    if "kb_meta" in tables:
        row = conn.execute("SELECT value FROM kb_meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row is not None and str(row[0]).isdigit() else None
        if version is None or version > SCHEMA_VERSION:
            raise KnowledgeStoreError(
                f"knowledge database {where} has schema version {row[0] if row else 'unknown'}; "
                f"this server understands version {SCHEMA_VERSION}"
            )
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise KnowledgeStoreError(f"knowledge database {where} cannot use write-ahead logging (mode {mode})")
    conn.execute("PRAGMA synchronous = FULL")
    if not tables:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("INSERT INTO kb_meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


class Database:
    """The open file: :meth:`write` and :meth:`read` hand out a connection inside a transaction."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        where = str(self.path)
        _check_file(self.path)
        try:
            self._writer = _connect(self.path, readonly=False)
        except sqlite3.Error as exc:
            raise KnowledgeStoreError(f"cannot open knowledge database {where}: {exc}") from None
        try:
            _prepare(self._writer, where)
        except sqlite3.Error as exc:
            self._writer.close()
            raise KnowledgeStoreError(f"cannot use knowledge database {where}: {exc}; it was left untouched") from None
        except BaseException:
            self._writer.close()
            raise
        self._write_lock = threading.Lock()
        self._readers: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._all_readers: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._closed = False

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): committed when the block ends, rolled back on error."""
        with self._write_lock:
            self._check_open()
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement in the block sees the same snapshot."""
        self._check_open()
        conn = self._reader()
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
        finally:
            self._readers.put(conn)

    def _reader(self) -> sqlite3.Connection:
        try:
            return self._readers.get_nowait()
        except queue.Empty:
            pass
        with self._pool_lock:
            if len(self._all_readers) < _READERS:
                conn = _connect(self.path, readonly=True)
                self._all_readers.append(conn)
                return conn
        return self._readers.get()

    def _check_open(self) -> None:
        if self._closed:
            raise KnowledgeStoreError("the knowledge database is closed")

    def close(self) -> None:
        """Close every connection (idempotent). Call it when no reads or writes are running."""
        if self._closed:
            return
        self._closed = True
        with self._write_lock:
            self._writer.close()
        for conn in self._all_readers:
            conn.close()
