"""The knowledge server's records, the same in tool results, resources and notifications (L7).

Records use snake_case field names (``recorded_at``, ``tx_id``); the presentation envelope around them is
camelCase like the rest of MCP.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

__all__ = (
    "Entry",
    "Triple",
    "Transaction",
    "ChangedIds",
    "Change",
    "ChangeType",
    "TABLE_RESOURCES",
    "MAX_ID",
    "RowId",
    "parse_id",
    "to_record",
)

ChangeType = Literal["upsert", "delete"]

#: Every id (entries, triples, transactions, versions) is a SQLite INTEGER: 1 to 2**63 - 1.
MAX_ID: Final = 2**63 - 1
#: An id argument: anything outside 1..MAX_ID is the caller's mistake, refused before it reaches SQLite.
RowId = Annotated[int, msgspec.Meta(ge=1, le=MAX_ID)]


def parse_id(text: str) -> int | None:
    """The id written in ``text`` (ASCII digits, 1 to :data:`MAX_ID`), else ``None``: ``"²"``, ``"-1"``, ``"0"``
    and a number no SQLite row can have are no ids."""
    text = text.strip()
    if not text.isascii() or not text.isdigit() or len(text) > len(str(MAX_ID)):
        return None
    number = int(text)
    return number if 1 <= number <= MAX_ID else None


class Entry(msgspec.Struct, kw_only=True):
    """One remembered fact."""

    id: int
    topic: str
    content: str
    confidence: float
    tags: list[str]
    recorded_at: str
    updated_at: str
    version: int
    tx_id: int


class Triple(msgspec.Struct, kw_only=True):
    """One relation ``subject --predicate--> object`` of the knowledge graph."""

    id: int
    subject: str
    predicate: str
    object: str
    recorded_at: str
    tx_id: int


class ChangedIds(msgspec.Struct, kw_only=True):
    entries: list[int] = msgspec.field(default_factory=list)
    triples: list[int] = msgspec.field(default_factory=list)


class Transaction(msgspec.Struct, kw_only=True):
    """One committed write. ``undoes`` names the transaction an undo reverted; ``undone_by`` the undo that
    reverted this one (``None`` while its effect stands)."""

    id: int
    op: str
    summary: str
    recorded_at: str
    undoes: int | None = None
    undone_by: int | None = None
    changed_ids: ChangedIds = msgspec.field(default_factory=ChangedIds)


class Change(msgspec.Struct, frozen=True):
    """A row a transaction wrote: which table, which id, and whether it now exists."""

    table: Literal["entries", "triples"]
    row_id: int
    change_type: ChangeType


#: The collection resource each table is listed in.
TABLE_RESOURCES: dict[str, str] = {
    "entries": "knowledge://entries",
    "triples": "knowledge://graph/triples",
}


def to_record(value: Any) -> Any:
    """A record (or list of them) as JSON-able builtins."""
    return msgspec.to_builtins(value)
