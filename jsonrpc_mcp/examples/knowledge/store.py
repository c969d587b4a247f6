"""The knowledge store: entries, triples and transactions on SQLite, with undo (L7; synchronous, thread-safe).

Every method is a short blocking call; the server runs them on worker threads (``anyio.to_thread``) so the
event loop never waits for the disk or for another process's write lock. Writes are serialised (one writer
connection, ``BEGIN IMMEDIATE``) and read-modify-write happens inside the write transaction, so concurrent
writers never lose an update; ``expected_version`` adds optimistic concurrency for callers that read first.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from .db import Database, KnowledgeStoreError
from .graph import neighbourhood
from .journal import Journal, load_image, now_iso, row_image, same_data
from .models import Change, ChangedIds, Entry, Transaction, Triple

__all__ = (
    "KnowledgeStore",
    "Write",
    "UndoOutcome",
    "SearchFilters",
    "GraphFilters",
    "HistoryFilters",
    "Filters",
    "Neighbourhood",
    "StoreNotFound",
    "StoreConflict",
    "StoreUnavailable",
    "KnowledgeStoreError",
    "NewEntry",
    "Imported",
    "ImportCancelled",
    "IMPORT_CHUNK",
    "search_terms",
    "normalize_tags",
)

T = TypeVar("T")

_CHANGED_IDS_MAX = 20
_TERM = re.compile(r"[\w][\w.+#/-]*", re.UNICODE)


class StoreNotFound(LookupError):
    def __init__(self, what: str, ident: int) -> None:
        super().__init__(f"no {what} has id {ident}")
        self.what = what
        self.ident = ident


class StoreConflict(Exception):
    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class StoreUnavailable(Exception):
    """SQLite could not do it: locked by another writer past the busy timeout (``retryable``), or the file or
    disk refused (read-only, full, I/O error)."""

    def __init__(self, exc: sqlite3.OperationalError) -> None:
        text = str(exc).lower()
        self.retryable = "locked" in text or "busy" in text
        super().__init__("the knowledge database is busy" if self.retryable else "the knowledge database failed")


def _unavailable(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return any(word in text for word in ("locked", "busy", "readonly", "read-only", "disk", "full"))


@dataclass(slots=True)
class Write(Generic[T]):
    """What a write did: its transaction id (``None`` when nothing changed), the value, the changed rows."""

    tx_id: int | None
    value: T
    changes: list[Change] = field(default_factory=list)


#: ``import_entries`` reports its progress, and checks whether it is to stop, once per this many entries.
IMPORT_CHUNK = 50


class ImportCancelled(Exception):
    """An import was asked to stop: its transaction was rolled back, and nothing of it was written."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"the import was cancelled after {done} of {total} entries; nothing was written")
        self.done = done
        self.total = total


@dataclass(frozen=True, slots=True)
class NewEntry:
    """An entry to store: what ``store`` takes."""

    topic: str
    content: str
    confidence: float = 0.8
    tags: Sequence[str] = ()


@dataclass(slots=True)
class Imported:
    """What an import did: the ids of the entries it stored, in the order given, and how many it skipped (the
    same topic and content stored already, or given twice)."""

    entry_ids: list[int]
    skipped: int


@dataclass(slots=True)
class UndoOutcome:
    undone: Transaction
    transaction: Transaction


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Entry filters shared by the ``query`` tool and the ``knowledge://entries`` resource."""

    topic: str | None = None
    terms: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    min_confidence: float | None = None

    def sql(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.topic:
            clauses.append("topic LIKE ? ESCAPE '\\'")
            params.append(f"%{_like(self.topic)}%")
        for term in self.terms:
            clauses.append("(content LIKE ? ESCAPE '\\' OR topic LIKE ? ESCAPE '\\' OR tags LIKE ? ESCAPE '\\')")
            params += [f"%{_like(term)}%"] * 3
        for tag in self.tags:
            clauses.append("EXISTS (SELECT 1 FROM json_each(entries.tags) WHERE value = ?)")
            params.append(tag)
        if self.min_confidence is not None:
            clauses.append("confidence >= ?")
            params.append(self.min_confidence)
        return (" AND ".join(clauses) or "1"), params

    def key(self) -> str:
        return json.dumps([self.topic, self.terms, self.tags, self.min_confidence])


class Filters(Protocol):
    """A collection's filter: its SQL condition and a key that binds cursors to it."""

    def sql(self) -> tuple[str, list[Any]]: ...

    def key(self) -> str: ...


# The nodes within ``hops`` of a start node, walking triples both ways (following one predicate when given): the
# same walk as graph.neighbourhood, in SQL. UNION keeps it finite: each (node, hops) once, hops bounded.
_WALK = (
    "WITH RECURSIVE walk(node, hops) AS (SELECT ?, 0 UNION "
    "SELECT CASE WHEN t.subject = w.node THEN t.object ELSE t.subject END, w.hops + 1 "
    "FROM walk w JOIN triples t ON (t.subject = w.node OR t.object = w.node){predicate} WHERE w.hops < ?) "
    "SELECT node FROM walk"
)


@dataclass(frozen=True, slots=True)
class GraphFilters:
    """The triples within ``depth`` hops of ``node`` (the ``query_graph`` neighbourhood), on
    ``knowledge://graph/triples``."""

    node: str
    depth: int = 1
    predicate: str | None = None

    def sql(self) -> tuple[str, list[Any]]:
        walk = _WALK.format(predicate=" AND t.predicate = ?" if self.predicate else "")
        walk_params: list[Any] = [self.node, *([self.predicate] if self.predicate else []), self.depth - 1]
        clause = f"(subject IN ({walk}) OR object IN ({walk}))"
        params = [*walk_params, *walk_params]
        if self.predicate:
            clause += " AND predicate = ?"
            params.append(self.predicate)
        return clause, params

    def key(self) -> str:
        return json.dumps(["graph", self.node, self.depth, self.predicate])


@dataclass(frozen=True, slots=True)
class HistoryFilters:
    """The transactions that touched entry ``entry_id``, on ``knowledge://history/transactions``."""

    entry_id: int

    def sql(self) -> tuple[str, list[Any]]:
        return "id IN (SELECT tx_id FROM changes WHERE tbl = 'entries' AND row_id = ?)", [self.entry_id]

    def key(self) -> str:
        return json.dumps(["history", self.entry_id])


@dataclass(frozen=True, slots=True)
class Neighbourhood:
    """What ``query_graph`` shows: the first triples, nearest first, the nodes they connect, how many triples
    the whole neighbourhood has, and the as-of transaction id (all one snapshot)."""

    nodes: list[str]
    triples: list[Triple]
    total: int
    as_of_tx_id: int


def search_terms(text: str | None, limit: int = 16) -> tuple[str, ...]:
    """The words of a free-text query worth matching (two characters or more, at most ``limit``)."""
    words = [w for w in _TERM.findall(text or "") if len(w) >= 2]
    return tuple(dict.fromkeys(w.lower() for w in words))[:limit]


def normalize_tags(tags: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(t.strip().lower() for t in tags if t.strip()))


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _entry(row: sqlite3.Row | dict[str, Any]) -> Entry:
    data = dict(row)
    data["tags"] = json.loads(data["tags"]) if isinstance(data["tags"], str) else data["tags"]
    return msgspec.convert(data, Entry)


def _triple(row: sqlite3.Row | dict[str, Any]) -> Triple:
    return msgspec.convert(dict(row), Triple)


class KnowledgeStore:
    """The store on one SQLite file (created if missing). Raises :class:`KnowledgeStoreError` when the file
    cannot be used, without changing it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.db = Database(path)
        self.path = self.db.path

    def close(self) -> None:
        self.db.close()

    # --- writes ------------------------------------------------------------------------------------------

    @contextmanager
    def _journal(self, op: str, undoes: int | None = None) -> Iterator[Journal]:
        try:
            with self.db.write() as conn:
                yield Journal(conn, op, undoes=undoes)
        except sqlite3.OperationalError as exc:
            if not _unavailable(exc):
                raise
            raise StoreUnavailable(exc) from exc

    def add_entry(self, topic: str, content: str, confidence: float, tags: Sequence[str]) -> Write[Entry]:
        """Store a new entry; an entry with the same topic and content is returned as it is (no transaction)."""
        with self._journal("store") as j:
            same = j.conn.execute(
                "SELECT * FROM entries WHERE topic = ? AND content = ? ORDER BY id LIMIT 1", (topic, content)
            ).fetchone()
            if same is not None:
                return Write(None, _entry(same))
            now = j.recorded_at
            image = {
                "id": None,
                "topic": topic,
                "content": content,
                "confidence": confidence,
                "tags": json.dumps(normalize_tags(tags)),
                "recorded_at": now,
                "updated_at": now,
                "version": 1,
            }
            row = j.put("entries", image)
            j.finish(f"store #{row['id']} {topic}")
            return Write(j.tx_id, _entry(row), j.changes)

    def update_entry(
        self,
        entry_id: int,
        *,
        topic: str | None = None,
        content: str | None = None,
        confidence: float | None = None,
        tags: Sequence[str] | None = None,
        add_tags: Sequence[str] = (),
        remove_tags: Sequence[str] = (),
        expected_version: int | None = None,
    ) -> Write[Entry]:
        """Change the given fields of an entry, read and written in one transaction (no lost update)."""
        with self._journal("update") as j:
            current = row_image(j.conn, "entries", entry_id)
            if current is None:
                raise StoreNotFound("entry", entry_id)
            if expected_version is not None and current["version"] != expected_version:
                raise StoreConflict(
                    f"entry {entry_id} is at version {current['version']}, not {expected_version}",
                    {"id": entry_id, "current_version": current["version"], "expected_version": expected_version},
                )
            new_tags = normalize_tags(tags) if tags is not None else json.loads(current["tags"])
            new_tags = normalize_tags([*new_tags, *add_tags])
            gone = set(normalize_tags(remove_tags))
            new_tags = [t for t in new_tags if t not in gone]
            image = dict(current)
            image.update(
                topic=topic if topic is not None else current["topic"],
                content=content if content is not None else current["content"],
                confidence=confidence if confidence is not None else current["confidence"],
                tags=json.dumps(new_tags),
            )
            if all(image[k] == current[k] for k in ("topic", "content", "confidence", "tags")):
                return Write(None, _entry(current))
            image.update(version=current["version"] + 1, updated_at=j.recorded_at)
            row = j.put("entries", image)
            j.finish(f"update #{entry_id} {row['topic']}")
            return Write(j.tx_id, _entry(row), j.changes)

    def delete_entry(self, entry_id: int) -> Write[Entry]:
        with self._journal("delete") as j:
            before = j.remove("entries", entry_id)
            if before is None:
                raise StoreNotFound("entry", entry_id)
            j.finish(f"delete #{entry_id} {before['topic']}")
            return Write(j.tx_id, _entry(before), j.changes)

    def import_entries(
        self,
        entries: Sequence[NewEntry],
        *,
        progress: Callable[[int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Write[Imported]:
        """Store many entries in one transaction: all of them, or none. An entry whose topic and content are
        stored already (or given earlier in ``entries``) is skipped, as ``store`` would. Every
        :data:`IMPORT_CHUNK` entries (and at the end) ``cancelled()`` is asked — true: the transaction is rolled
        back and :class:`ImportCancelled` raised — and ``progress(done)`` told how many were handled."""
        total = len(entries)
        with self._journal("import") as j:
            ids: list[int] = []
            skipped = 0
            for done, item in enumerate(entries, 1):
                same = j.conn.execute(
                    "SELECT id FROM entries WHERE topic = ? AND content = ? LIMIT 1", (item.topic, item.content)
                ).fetchone()
                if same is not None:
                    skipped += 1
                else:
                    image = {
                        "id": None,
                        "topic": item.topic,
                        "content": item.content,
                        "confidence": item.confidence,
                        "tags": json.dumps(normalize_tags(item.tags)),
                        "recorded_at": j.recorded_at,
                        "updated_at": j.recorded_at,
                        "version": 1,
                    }
                    ids.append(j.put("entries", image)["id"])
                if done % IMPORT_CHUNK == 0 or done == total:
                    if cancelled is not None and cancelled():
                        raise ImportCancelled(done, total)  # (the write transaction is rolled back)
                    if progress is not None:
                        progress(done)
            j.finish(f"import {len(ids)} entries" + (f" ({skipped} known already)" if skipped else ""))
            return Write(j.tx_id, Imported(ids, skipped), j.changes)

    def relate(self, subject: str, predicate: str, obj: str) -> Write[Triple]:
        """Add a triple; an existing one is returned as it is (no transaction)."""
        with self._journal("relate") as j:
            same = j.conn.execute(
                "SELECT * FROM triples WHERE subject = ? AND predicate = ? AND object = ?", (subject, predicate, obj)
            ).fetchone()
            if same is not None:
                return Write(None, _triple(same))
            image = {"id": None, "subject": subject, "predicate": predicate, "object": obj}
            row = j.put("triples", {**image, "recorded_at": j.recorded_at})
            j.finish(f"relate {subject} {predicate} {obj}")
            return Write(j.tx_id, _triple(row), j.changes)

    def undo(self, tx_id: int) -> Write[UndoOutcome]:
        """Revert transaction ``tx_id`` as a new transaction (which can itself be undone)."""
        with self._journal("undo", undoes=tx_id) as j:
            conn = j.conn
            target = conn.execute("SELECT * FROM transactions WHERE id = ?", (tx_id,)).fetchone()
            if target is None:
                raise StoreNotFound("transaction", tx_id)
            if target["undone_by"] is not None:
                raise StoreConflict(
                    f"transaction {tx_id} was already undone by transaction {target['undone_by']}",
                    {"tx_id": tx_id, "undone_by": target["undone_by"]},
                )
            changes = conn.execute(
                "SELECT tbl, row_id, before, after FROM changes WHERE tx_id = ? ORDER BY seq DESC", (tx_id,)
            ).fetchall()
            _check_untouched(conn, tx_id, changes)
            for change in changes:
                _restore(j, change["tbl"], change["row_id"], load_image(change["before"]))
            new_id = j.begin()
            conn.execute("UPDATE transactions SET undone_by = ? WHERE id = ?", (new_id, tx_id))
            if target["undoes"] is not None:  # undoing an undo: what it reverted stands again
                revived = target["undoes"]
                conn.execute("UPDATE transactions SET undone_by = NULL WHERE id = ?", (revived,))
                again = conn.execute("SELECT undoes FROM transactions WHERE id = ?", (revived,)).fetchone()
                if again is not None and again["undoes"] is not None:
                    conn.execute("UPDATE transactions SET undone_by = ? WHERE id = ?", (revived, again["undoes"]))
            j.finish(f"undo transaction {tx_id} ({target['op']})")
            outcome = UndoOutcome(_transaction(conn, tx_id), _transaction(conn, new_id))
            return Write(new_id, outcome, j.changes)

    # --- reads -------------------------------------------------------------------------------------------

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            with self.db.read() as conn:
                return fn(conn)
        except sqlite3.OperationalError as exc:
            if not _unavailable(exc):
                raise
            raise StoreUnavailable(exc) from exc

    def last_tx_id(self) -> int:
        return self._read(_last_tx)

    def get_entry(self, entry_id: int) -> tuple[Entry | None, int]:
        def run(conn: sqlite3.Connection) -> tuple[Entry | None, int]:
            row = conn.execute("SELECT * FROM entries WHERE id = ?", (entry_id,)).fetchone()
            return (_entry(row) if row is not None else None), _last_tx(conn)

        return self._read(run)

    def search(self, filters: SearchFilters, limit: int) -> tuple[list[Entry], int, int]:
        """Matching entries, most confident and most recent first: (page, total matches, as-of tx id)."""

        def run(conn: sqlite3.Connection) -> tuple[list[Entry], int, int]:
            where, params = filters.sql()
            total = conn.execute(f"SELECT count(*) FROM entries WHERE {where}", params).fetchone()[0]
            rows = conn.execute(
                f"SELECT * FROM entries WHERE {where} ORDER BY confidence DESC, updated_at DESC, id DESC LIMIT ?",
                [*params, limit],
            ).fetchall()
            return [_entry(r) for r in rows], int(total), _last_tx(conn)

        return self._read(run)

    def page(self, table: str, after: int, limit: int, filters: Filters | None = None) -> tuple[list[Any], bool, int]:
        """One page of ``entries``, ``triples`` or ``transactions`` by ascending id after ``after``:
        (items, whether more follow, as-of tx id), all from one snapshot."""

        def run(conn: sqlite3.Connection) -> tuple[list[Any], bool, int]:
            where, params = filters.sql() if filters is not None else ("1", [])
            rows = conn.execute(
                f"SELECT * FROM {table} WHERE id > ? AND {where} ORDER BY id LIMIT ?", [after, *params, limit + 1]
            ).fetchall()
            more = len(rows) > limit
            rows = rows[:limit]
            if table == "entries":
                items: list[Any] = [_entry(r) for r in rows]
            elif table == "triples":
                items = [_triple(r) for r in rows]
            else:
                items = [_transaction(conn, r["id"]) for r in rows]
            return items, more, _last_tx(conn)

        if table not in ("entries", "triples", "transactions"):
            raise ValueError(table)
        return self._read(run)

    def history(self, limit: int, entry_id: int | None = None) -> tuple[list[Transaction], int, int]:
        """The latest transactions, newest first (only those touching ``entry_id`` when given): (page, how many
        there are in all, as-of tx id)."""

        def run(conn: sqlite3.Connection) -> tuple[list[Transaction], int, int]:
            where, params = HistoryFilters(entry_id).sql() if entry_id is not None else ("1", [])
            ids = conn.execute(
                f"SELECT id FROM transactions WHERE {where} ORDER BY id DESC LIMIT ?", [*params, limit]
            ).fetchall()
            total = conn.execute(f"SELECT count(*) FROM transactions WHERE {where}", params).fetchone()[0]
            return [_transaction(conn, r["id"]) for r in ids], int(total), _last_tx(conn)

        return self._read(run)

    def transaction(self, tx_id: int) -> Transaction | None:
        def run(conn: sqlite3.Connection) -> Transaction | None:
            exists = conn.execute("SELECT 1 FROM transactions WHERE id = ?", (tx_id,)).fetchone()
            return _transaction(conn, tx_id) if exists else None

        return self._read(run)

    def nearest_entries(self, entry_id: int, hint: str | None = None, limit: int = 5) -> list[Entry]:
        """Entries whose topic matches ``hint`` first, then those with the closest ids: suggestions for a
        mistyped id."""

        def run(conn: sqlite3.Connection) -> list[Entry]:
            found: dict[int, Entry] = {}
            if hint:
                for row in conn.execute(
                    "SELECT * FROM entries WHERE topic LIKE ? ESCAPE '\\' ORDER BY id DESC LIMIT ?",
                    (f"%{_like(hint)}%", limit),
                ):
                    found.setdefault(row["id"], _entry(row))
            for row in conn.execute("SELECT * FROM entries ORDER BY abs(id - ?), id DESC LIMIT ?", (entry_id, limit)):
                found.setdefault(row["id"], _entry(row))
            return list(found.values())[:limit]

        return self._read(run)

    def topics(self, prefix: str = "", limit: int = 10) -> list[str]:
        """Known topics starting with ``prefix`` (case-insensitive), most used first."""

        def run(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT topic, count(*) AS n FROM entries WHERE topic LIKE ? ESCAPE '\\' "
                "GROUP BY topic ORDER BY n DESC, topic LIMIT ?",
                (f"{_like(prefix)}%", limit),
            ).fetchall()
            return [r["topic"] for r in rows]

        return self._read(run)

    def recent_transactions(self, limit: int = 5, live_only: bool = True) -> list[Transaction]:
        def run(conn: sqlite3.Connection) -> list[Transaction]:
            where = "WHERE undone_by IS NULL" if live_only else ""
            rows = conn.execute(f"SELECT id FROM transactions {where} ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
            return [_transaction(conn, r["id"]) for r in rows]

        return self._read(run)

    def neighbourhood(self, node: str, depth: int, predicate: str | None = None, limit: int = 200) -> Neighbourhood:
        """The first ``limit`` triples within ``depth`` hops of ``node``, nearest first (see
        :func:`~.graph.neighbourhood`), the nodes they connect, and how many triples are within ``depth`` hops in
        all (:class:`GraphFilters`), from one snapshot."""

        def run(conn: sqlite3.Connection) -> Neighbourhood:
            def edges(nodes: Sequence[str], known: Collection[int]) -> list[Triple]:
                return _edges(conn, nodes, predicate, known, limit + 1)

            nodes, triples, capped = neighbourhood(node, depth, edges, limit)
            total = len(triples)
            if capped:
                where, params = GraphFilters(node, depth, predicate).sql()
                total = int(conn.execute(f"SELECT count(*) FROM triples WHERE {where}", params).fetchone()[0])
            return Neighbourhood(nodes, triples, total, _last_tx(conn))

        return self._read(run)

    def similar_nodes(self, name: str, limit: int = 5) -> list[str]:
        def run(conn: sqlite3.Connection) -> list[str]:
            pattern = f"%{_like(name)}%"
            rows = conn.execute(
                "SELECT node FROM (SELECT subject AS node FROM triples UNION SELECT object FROM triples) "
                "WHERE node LIKE ? ESCAPE '\\' ORDER BY length(node), node LIMIT ?",
                (pattern, limit),
            ).fetchall()
            if not rows:
                rows = conn.execute(
                    "SELECT node, max(id) AS last FROM (SELECT subject AS node, id FROM triples "
                    "UNION ALL SELECT object, id FROM triples) GROUP BY node ORDER BY last DESC LIMIT ?",
                    (limit,),
                ).fetchall()
            return [r["node"] for r in rows]

        return self._read(run)


# --- helpers used inside transactions ------------------------------------------------------------------------


def _last_tx(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM transactions").fetchone()[0])


def _edges(
    conn: sqlite3.Connection, nodes: Sequence[str], predicate: str | None, known: Collection[int], most: int
) -> list[Triple]:
    """Up to ``most`` triples with any of ``nodes`` as subject or object, other than the ``known`` ids."""
    if not nodes:
        return []
    marks = ", ".join("?" for _ in nodes)
    sql = f"SELECT * FROM triples WHERE (subject IN ({marks}) OR object IN ({marks}))"
    params: list[Any] = [*nodes, *nodes]
    if known:
        sql += f" AND id NOT IN ({', '.join('?' for _ in known)})"
        params += list(known)
    if predicate:
        sql += " AND predicate = ?"
        params.append(predicate)
    return [_triple(r) for r in conn.execute(sql + " ORDER BY id LIMIT ?", [*params, most])]


def _transaction(conn: sqlite3.Connection, tx_id: int) -> Transaction:
    row = conn.execute("SELECT * FROM transactions WHERE id = ?", (tx_id,)).fetchone()
    changed = ChangedIds()
    for change in conn.execute("SELECT DISTINCT tbl, row_id FROM changes WHERE tx_id = ? ORDER BY seq", (tx_id,)):
        ids = changed.entries if change["tbl"] == "entries" else changed.triples
        if len(ids) < _CHANGED_IDS_MAX and change["row_id"] not in ids:
            ids.append(change["row_id"])
    return Transaction(
        id=row["id"],
        op=row["op"],
        summary=row["summary"],
        recorded_at=row["recorded_at"],
        undoes=row["undoes"],
        undone_by=row["undone_by"],
        changed_ids=changed,
    )


def _check_untouched(conn: sqlite3.Connection, tx_id: int, changes: Sequence[sqlite3.Row]) -> None:
    """Every row must still hold what ``tx_id`` left in it; else name the later transactions that changed it."""
    seen: set[tuple[str, int]] = set()
    moved: list[tuple[str, int]] = []
    for change in changes:  # newest first: the first image per row is the one the transaction left
        key = (change["tbl"], change["row_id"])
        if key in seen:
            continue
        seen.add(key)
        if not same_data(key[0], row_image(conn, *key), load_image(change["after"])):
            moved.append(key)
    if not moved:
        return
    later = sorted(
        {
            row[0]
            for tbl, row_id in moved
            for row in conn.execute(
                "SELECT DISTINCT tx_id FROM changes WHERE tbl = ? AND row_id = ? AND tx_id > ?", (tbl, row_id, tx_id)
            )
        }
    )
    raise StoreConflict(
        f"transaction {tx_id} cannot be undone: later transactions changed the same rows",
        {"tx_id": tx_id, "conflicting_tx_ids": later, "rows": [{"table": t, "id": i} for t, i in moved]},
    )


def _restore(j: Journal, table: str, row_id: int, image: dict[str, Any] | None) -> None:
    if image is None:
        j.remove(table, row_id)
        return
    if table == "entries":
        current = row_image(j.conn, table, row_id)
        version = (current or image)["version"] + 1
        image = {**image, "version": version, "updated_at": now_iso()}
    try:
        j.put(table, image)
    except sqlite3.IntegrityError:
        raise StoreConflict(
            f"cannot restore {table} row {row_id}: an equal row was added since",
            {"table": table, "id": row_id},
        ) from None
