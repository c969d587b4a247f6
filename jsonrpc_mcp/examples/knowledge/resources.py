"""The knowledge server's resources: three paginated collections and one entry by id (L7).

``knowledge://entries``, ``knowledge://graph/triples`` and ``knowledge://history/transactions`` read as
``{"resource_uri", "as_of_tx_id", "items", "next_cursor"}`` (``next_cursor`` is null on the last page), items in
ascending id order so pages stay stable while writes go on. URI query parameters: ``limit`` (1-200, default
50) and ``cursor`` (opaque, from ``next_cursor``); ``knowledge://entries`` also filters with ``topic``,
``text``, ``tags`` (comma-separated) and ``min_confidence``, ``knowledge://graph/triples`` with ``node``, ``depth``
and ``predicate`` (the neighbourhood ``query_graph`` walks), ``knowledge://history/transactions`` with
``entry_id``. A cursor we did not issue, or one used with other
filters or on another collection, is invalid params (-32602). ``knowledge://entries/{id}`` reads one entry as
``{"resource_uri", "as_of_tx_id", "item"}``.

The schema version of these documents is in each resource's ``_meta`` as ``{"version": "1"}``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any, Final

import msgspec

from ...errors import InvalidParams, ResourceNotFound
from ...mcp.server import Server
from .app import ENTRIES, ENTRY_TEMPLATE, HISTORY, READ_SCOPE, TRIPLES, Knowledge, entry_uri
from .models import parse_id
from .store import Filters, GraphFilters, HistoryFilters, SearchFilters, normalize_tags, search_terms

__all__ = (
    "register_resources",
    "encode_cursor",
    "decode_cursor",
    "entry_filters",
    "graph_filters",
    "history_filters",
    "RESOURCE_VERSION",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
)

RESOURCE_VERSION: Final = "1"
DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 200
_META: Final = {"version": RESOURCE_VERSION}


def _digest(table: str, filters: Filters | None) -> str:
    key = f"{table}|{filters.key() if filters is not None else ''}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def encode_cursor(table: str, after: int, filters: Filters | None = None) -> str:
    """An opaque cursor: the last id seen, bound to the collection and its filters."""
    raw = f"v1:{table}:{after}:{_digest(table, filters)}".encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, table: str, filters: Filters | None = None) -> int:
    """The last id seen; :class:`InvalidParams` (-32602) for anything we did not issue for these filters."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        raise InvalidParams("Invalid params: invalid cursor", {"cursor": cursor}) from None
    parts = text.split(":")
    after = parse_id(parts[2]) if len(parts) == 4 else None
    if after is None or parts[0] != "v1" or parts[1] != table or parts[3] != _digest(table, filters):
        raise InvalidParams("Invalid params: invalid cursor", {"cursor": cursor})
    return after


def _limit(query: dict[str, str]) -> int:
    value = query.get("limit")
    if value is None:
        return DEFAULT_LIMIT
    digits = value.lstrip("0") if value.isascii() and value.isdigit() else ""
    if not digits:
        raise InvalidParams(f"Invalid params: limit must be a positive integer (at most {MAX_LIMIT})", {"limit": value})
    if len(digits) > len(str(MAX_LIMIT)):  # capped like any large value, without int() on thousands of digits
        return MAX_LIMIT
    return min(int(digits), MAX_LIMIT)


def _confidence(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number <= 1:
        raise InvalidParams("Invalid params: min_confidence must be a number from 0 to 1", {"min_confidence": value})
    return number


def _bounded(query: dict[str, str], name: str, most: int) -> str:
    """A text parameter, at most ``most`` characters long (the same bounds as the ``query`` tool's arguments)."""
    value = query.get(name) or ""
    if len(value) > most:
        raise InvalidParams(f"Invalid params: {name} is longer than {most} characters", {name: value[:50] + "…"})
    return value


def entry_filters(query: dict[str, str]) -> SearchFilters:
    """The ``knowledge://entries`` filters in a URI's query parameters."""
    tags = normalize_tags(_bounded(query, "tags", 20 * 51).split(","))
    if len(tags) > 20 or any(len(tag) > 50 for tag in tags):
        raise InvalidParams("Invalid params: at most 20 tags of at most 50 characters", {"tags": len(tags)})
    return SearchFilters(
        topic=_bounded(query, "topic", 200).strip() or None,
        terms=search_terms(_bounded(query, "text", 500)),
        tags=tuple(tags),
        min_confidence=_confidence(query.get("min_confidence")),
    )


def graph_filters(query: dict[str, str]) -> GraphFilters | None:
    """The ``knowledge://graph/triples`` neighbourhood filter (``node``, ``depth`` 1-4, ``predicate``), if any."""
    if "node" not in query:
        return None
    depth = query.get("depth", "1")
    if depth not in ("1", "2", "3", "4"):
        raise InvalidParams("Invalid params: depth must be 1, 2, 3 or 4", {"depth": depth[:20]})
    predicate = _bounded(query, "predicate", 200).strip() or None
    return GraphFilters(_bounded(query, "node", 200).strip(), int(depth), predicate)


def history_filters(query: dict[str, str]) -> HistoryFilters | None:
    """The ``knowledge://history/transactions`` filter (``entry_id``: the transactions that touched it), if any."""
    value = query.get("entry_id")
    if value is None:
        return None
    entry_id = parse_id(value)
    if entry_id is None:
        raise InvalidParams("Invalid params: entry_id must be an entry id", {"entry_id": value[:20]})
    return HistoryFilters(entry_id)


def _page(uri: str, as_of: int, items: list[Any], next_cursor: str | None) -> dict[str, Any]:
    return {
        "resource_uri": uri,
        "as_of_tx_id": as_of,
        "items": msgspec.to_builtins(items),
        "next_cursor": next_cursor,
    }


def register_resources(kb: Knowledge) -> None:
    server: Server = kb.server

    async def read_page(uri: str, table: str, query: dict[str, str], filters: Filters | None) -> dict[str, Any]:
        limit = _limit(query)
        cursor = query.get("cursor")
        after = decode_cursor(cursor, table, filters) if cursor else 0
        items, more, as_of = await kb.read(kb.store.page, table, after, limit, filters)
        nxt = encode_cursor(table, items[-1].id, filters) if more and items else None
        return _page(uri, as_of, items, nxt)

    @server.resource(
        ENTRIES,
        name="entries",
        title="Knowledge entries",
        description="Every entry, oldest first, a page at a time. Query parameters: limit (1-200), cursor, "
        "topic, text, tags (comma-separated), min_confidence. Subscribe to hear of committed changes.",
        mime_type="application/json",
        meta=_META,
        scopes=[READ_SCOPE],
    )
    async def entries(query: dict[str, str]) -> dict[str, Any]:
        return await read_page(ENTRIES, "entries", query, entry_filters(query))

    @server.resource(
        TRIPLES,
        name="triples",
        title="Knowledge graph triples",
        description="Every relation (subject, predicate, object), oldest first. Query parameters: limit, cursor; "
        "node, depth (1-4) and predicate: only the relations within depth hops of node (query_graph's walk).",
        mime_type="application/json",
        meta=_META,
        scopes=[READ_SCOPE],
    )
    async def triples(query: dict[str, str]) -> dict[str, Any]:
        return await read_page(TRIPLES, "triples", query, graph_filters(query))

    @server.resource(
        HISTORY,
        name="transactions",
        title="Transaction history",
        description="Every committed write, oldest first, with what it changed and whether it was undone. "
        "Query parameters: limit, cursor; entry_id: only the transactions that touched that entry.",
        mime_type="application/json",
        meta=_META,
        scopes=[READ_SCOPE],
    )
    async def transactions(query: dict[str, str]) -> dict[str, Any]:
        return await read_page(HISTORY, "transactions", query, history_filters(query))

    @server.resource(
        ENTRY_TEMPLATE,
        name="entry",
        title="One knowledge entry",
        description="One entry by id, as {resource_uri, as_of_tx_id, item}.",
        mime_type="application/json",
        meta=_META,
        scopes=[READ_SCOPE],
    )
    async def entry(id: str) -> dict[str, Any]:
        uri = f"{ENTRIES}/{id}"
        wanted = parse_id(id)
        if wanted is None:  # no entry can have this id: "abc", "0", "²", beyond 2**63 - 1
            raise ResourceNotFound(uri)
        found, as_of = await kb.read(kb.store.get_entry, wanted)
        if found is None:
            raise ResourceNotFound(uri)
        return {"resource_uri": entry_uri(found.id), "as_of_tx_id": as_of, "item": msgspec.to_builtins(found)}

    @server.completion()
    async def complete(ref: dict[str, Any], argument: str, value: str, context: dict[str, Any]) -> list[str]:
        if ref.get("type") == "ref/resource" and ref.get("uri") == ENTRY_TEMPLATE and argument == "id":
            recent, _, _ = await kb.read(kb.store.page, "entries", 0, MAX_LIMIT, None)
            return [str(e.id) for e in recent if str(e.id).startswith(value)]
        return []
