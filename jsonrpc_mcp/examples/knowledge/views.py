"""The knowledge server's result kinds and how each reads as markdown (L7).

Every kind is a :class:`~jsonrpc_mcp.presentation.Payload`: the envelope (camelCase) plus the kind's fields; the
records inside (entries, triples, transactions) keep their snake_case names, the same as in resources.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec
from msgspec import UNSET, UnsetType

from ...presentation import Format, Payload
from .models import Entry, Transaction, Triple

__all__ = (
    "EntryStored",
    "EntryUpdated",
    "EntryDeleted",
    "EntriesImported",
    "EntrySearchResults",
    "SearchEcho",
    "TripleRelated",
    "GraphResults",
    "UndoResult",
    "TransactionHistory",
    "entry_line",
)

_SNIPPET = 280


def _cut(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1].rstrip() + "…"


def entry_line(e: Entry) -> str:
    tags = f"; tags: {', '.join(e.tags)}" if e.tags else ""
    return f"- **#{e.id}** *{e.topic}* — {_cut(e.content, _SNIPPET)} (confidence {e.confidence:g}{tags}; v{e.version})"


def _entries(entries: list[Entry]) -> str:
    """Entry lines, and a note when a content is longer than the markdown shows (the structured result has it)."""
    lines = [entry_line(e) for e in entries]
    if any(len(e.content) > _SNIPPET for e in entries):
        lines += ["", f"_Contents over {_SNIPPET} characters end in … here; the structured result has them whole._"]
    return "\n".join(lines)


def _triple_line(t: Triple) -> str:
    return f"- `{t.subject}` —*{t.predicate}*→ `{t.object}` (#{t.id})"


def _tx_line(tx: Transaction) -> str:
    state = f"; undone by tx {tx.undone_by}" if tx.undone_by is not None else ""
    return f"- **tx {tx.id}** `{tx.op}` — {tx.summary} ({tx.recorded_at}{state})"


class EntryStored(Payload, tag="entryStored:v1"):
    """``store``: the entry as stored. ``created`` is false (and ``txId`` null) when an identical entry existed."""

    tx_id: int | None
    created: bool
    entry: Entry

    def markdown(self) -> str:
        where = f"Transaction {self.tx_id}." if self.tx_id is not None else "Nothing was written."
        return f"{_entries([self.entry])}\n\n{where}"


class EntryUpdated(Payload, tag="entryUpdated:v1"):
    """``update``: the entry after the change and which fields changed (``txId`` null when none did)."""

    tx_id: int | None
    changed_fields: list[str]
    entry: Entry

    def markdown(self) -> str:
        changed = ", ".join(self.changed_fields) or "nothing"
        where = f"transaction {self.tx_id}" if self.tx_id is not None else "no transaction"
        return f"{_entries([self.entry])}\n\nChanged: {changed} ({where})."


class EntryDeleted(Payload, tag="entryDeleted:v1"):
    """``delete``: the entry as it was before it was deleted."""

    tx_id: int
    entry: Entry

    def markdown(self) -> str:
        return f"{_entries([self.entry])}\n\nDeleted in transaction {self.tx_id}."


class EntriesImported(Payload, tag="entriesImported:v1"):
    """``import_entries``: the ids of the entries stored (in the order given), how many were skipped as known
    already, and the one transaction that stored them all (``txId`` null when nothing was new)."""

    tx_id: int | None
    imported: int
    skipped: int
    entry_ids: list[int]

    trim_field: ClassVar[str | None] = "entry_ids"

    def markdown(self) -> str:
        where = f"in transaction {self.tx_id}" if self.tx_id is not None else "nothing written"
        known = f", {self.skipped} known already" if self.skipped else ""
        shown = ", ".join(f"#{i}" for i in self.entry_ids[:20])
        more = f" and {len(self.entry_ids) - 20} more" if len(self.entry_ids) > 20 else ""
        return f"{self.imported} entries imported{known} ({where}){': ' + shown + more if shown else ''}."


class SearchEcho(msgspec.Struct, kw_only=True, rename="camel"):
    """The query as understood: ``terms`` are the words of ``text`` that were matched, ``format`` the format of
    this answer (the argument, else the ``X-Response-Format`` header, else markdown). Filters not given are left
    out."""

    topic: str | UnsetType = UNSET
    text: str | UnsetType = UNSET
    terms: list[str] = msgspec.field(default_factory=list)
    tags: list[str] = msgspec.field(default_factory=list)
    min_confidence: float | UnsetType = UNSET
    limit: int = 10
    format: Format = "markdown"


class EntrySearchResults(Payload, tag="entrySearchResults:v1"):
    """``query``: matching entries, most confident first. ``total`` counts every match, ``entries`` holds the
    first ``limit`` of them, each whole (fewer only when ``truncated``: see ``omitted``)."""

    query: SearchEcho
    total: int
    as_of_tx_id: int
    entries: list[Entry]

    trim_field: ClassVar[str | None] = "entries"

    def markdown(self) -> str:
        if not self.entries:
            return "No entries match."
        return _entries(self.entries)


class TripleRelated(Payload, tag="tripleRelated:v1"):
    """``relate``: the triple. ``created`` is false (and ``txId`` null) when it already existed."""

    tx_id: int | None
    created: bool
    triple: Triple

    def markdown(self) -> str:
        return _triple_line(self.triple)


class GraphResults(Payload, tag="graphResults:v1"):
    """``query_graph``: the first ``limit`` triples within ``depth`` hops of ``node``, nearest first, the
    ``nodes`` they connect (``node`` first), ``total`` (how many triples are within ``depth`` hops: the rest are
    at ``fullResult``) and, with a ``target``, the shortest ``paths`` to it among these triples (each a list of
    triple ids, in walking order)."""

    node: str
    depth: int
    total: int
    nodes: list[str]
    triples: list[Triple]
    target: str | UnsetType = UNSET
    paths: list[list[int]] | UnsetType = UNSET

    trim_field: ClassVar[str | None] = "triples"

    def keep_first(self, count: int) -> GraphResults:
        """The first ``count`` triples, the nodes they connect, and the paths made of them only."""
        kept = self.triples[:count]
        ids = {t.id for t in kept}
        touched = {n for t in kept for n in (t.subject, t.object)} | {self.node}
        nodes = [n for n in self.nodes if n in touched]
        paths = [p for p in self.paths if set(p) <= ids] if isinstance(self.paths, list) else self.paths
        return msgspec.structs.replace(self, triples=kept, nodes=nodes, paths=paths)

    def markdown(self) -> str:
        lines = [_triple_line(t) for t in self.triples] or ["No relations."]
        if isinstance(self.paths, list) and isinstance(self.target, str):
            by_id = {t.id: t for t in self.triples}
            lines += ["", f"**Paths to `{self.target}`**"]
            for path in self.paths:
                hops = [by_id[i] for i in path if i in by_id]
                lines.append("- " + " ; ".join(f"{h.subject} {h.predicate} {h.object}" for h in hops))
            if not self.paths:
                lines.append(f"- none within {self.depth} hops")
        return "\n".join(lines)


class UndoResult(Payload, tag="undoResult:v1"):
    """``undo``: the new transaction that reverted ``undone`` (undo it in turn to redo)."""

    tx_id: int
    undone: Transaction
    transaction: Transaction

    def markdown(self) -> str:
        return f"{_tx_line(self.transaction)}\n{_tx_line(self.undone)}"


class TransactionHistory(Payload, tag="transactionHistory:v1"):
    """``history``: the latest ``limit`` transactions, newest first; ``total`` counts them all (those touching
    ``entry_id`` when given)."""

    entry_id: int | None = None
    as_of_tx_id: int
    total: int
    transactions: list[Transaction]

    trim_field: ClassVar[str | None] = "transactions"

    def markdown(self) -> str:
        return "\n".join(_tx_line(tx) for tx in self.transactions) or "No transactions yet."
