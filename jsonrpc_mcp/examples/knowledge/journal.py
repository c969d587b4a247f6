"""The write journal: every write is a transaction row plus before/after images of the rows it changed (L7).

:class:`Journal` is used inside one ``BEGIN IMMEDIATE`` transaction. Its first change creates the
``transactions`` row (so a write that changes nothing leaves no transaction); each change records the row's
image before and after as JSON in ``changes``. Undo replays the before images — after checking that every row
still looks exactly as the transaction left it — as a new transaction of its own, so an undo can be undone.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any, Final

from .models import Change

__all__ = ("Journal", "now_iso", "row_image", "load_image", "same_data", "COLUMNS", "DATA_COLUMNS")

COLUMNS: Final = {
    "entries": ("id", "topic", "content", "confidence", "tags", "recorded_at", "updated_at", "version", "tx_id"),
    "triples": ("id", "subject", "predicate", "object", "recorded_at", "tx_id"),
}

#: The columns that make a row's content; bookkeeping (version, times, tx_id) is left out when comparing.
DATA_COLUMNS: Final = {
    "entries": ("topic", "content", "confidence", "tags"),
    "triples": ("subject", "predicate", "object"),
}


def same_data(table: str, a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Do two row images (or absences) hold the same content?"""
    if a is None or b is None:
        return a is b
    return all(a[c] == b[c] for c in DATA_COLUMNS[table])


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds and ``Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def row_image(conn: sqlite3.Connection, table: str, row_id: int) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {', '.join(COLUMNS[table])} FROM {table} WHERE id = ?", (row_id,)).fetchone()
    return dict(row) if row is not None else None


class Journal:
    """Changes made in one write transaction, journalled as they happen."""

    def __init__(self, conn: sqlite3.Connection, op: str, *, undoes: int | None = None) -> None:
        self.conn = conn
        self.op = op
        self.undoes = undoes
        self.tx_id: int | None = None
        self.recorded_at = now_iso()
        self.changes: list[Change] = []

    def begin(self) -> int:
        """The id of this transaction (created on first use)."""
        if self.tx_id is None:
            cur = self.conn.execute(
                "INSERT INTO transactions(op, summary, recorded_at, undoes) VALUES (?, '', ?, ?)",
                (self.op, self.recorded_at, self.undoes),
            )
            self.tx_id = int(cur.lastrowid or 0)
        return self.tx_id

    def put(self, table: str, image: dict[str, Any]) -> dict[str, Any]:
        """Insert or replace the row ``image`` (``id`` may be ``None`` for a new row); returns the written row."""
        tx_id = self.begin()
        row_id = image.get("id")
        before = row_image(self.conn, table, row_id) if row_id is not None else None
        values = {**image, "tx_id": tx_id}
        cols = [c for c in COLUMNS[table] if c != "id" or row_id is not None]
        sql = f"INSERT INTO {table}({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
        if row_id is not None:  # an upsert on the id only: a clash on another UNIQUE key raises, never replaces
            sql += " ON CONFLICT(id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in cols if c != "id")
        cur = self.conn.execute(sql, [values[c] for c in cols])
        new_id = int(row_id if row_id is not None else cur.lastrowid or 0)
        after = row_image(self.conn, table, new_id)
        assert after is not None
        self._record(table, new_id, before, after)
        return after

    def remove(self, table: str, row_id: int) -> dict[str, Any] | None:
        """Delete a row; returns its last image (``None`` if it did not exist)."""
        before = row_image(self.conn, table, row_id)
        if before is None:
            return None
        self.begin()
        self.conn.execute(f"DELETE FROM {table} WHERE id = ?", (row_id,))
        self._record(table, row_id, before, None)
        return before

    def _record(self, table: str, row_id: int, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
        self.conn.execute(
            "INSERT INTO changes(tx_id, seq, tbl, row_id, before, after) VALUES (?, ?, ?, ?, ?, ?)",
            (self.tx_id, len(self.changes), table, row_id, _dump(before), _dump(after)),
        )
        self.changes.append(Change(table, row_id, "delete" if after is None else "upsert"))  # type: ignore[arg-type]

    def finish(self, summary: str) -> None:
        if self.tx_id is not None:
            self.conn.execute("UPDATE transactions SET summary = ? WHERE id = ?", (summary[:200], self.tx_id))


def _dump(image: dict[str, Any] | None) -> str | None:
    return None if image is None else json.dumps(image, sort_keys=True, separators=(",", ":"))


def load_image(text: str | None) -> dict[str, Any] | None:
    return None if text is None else dict(json.loads(text))
