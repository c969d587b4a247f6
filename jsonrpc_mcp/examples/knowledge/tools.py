"""The knowledge server's tools: store, update, query, delete, relate, query_graph, undo, history, import_entries
(L7).

Each tool gathers and checks its input first (asking through elicitation, or answering ``needsInput:v1``), and
writes last: in the 2026-07-28 stateless era a tool that elicits runs again from the start when the answer
comes back, so nothing may have been written by then.
"""

from __future__ import annotations

from typing import Annotated, Any, Final
from urllib.parse import urlencode

import msgspec
from msgspec import UNSET

from ...apps import tool_meta
from ...mcp import types as t
from ...mcp.context import Context, call_on_worker_thread
from ...presentation import (
    ErrorCode,
    Format,
    InputField,
    InputOption,
    NeedsInput,
    Presented,
    ToolFailure,
    ask,
    presented_tool,
    resolve_format,
)
from .app import ENTRIES, HISTORY, READ_SCOPE, TRIPLES, WRITE_SCOPE, Knowledge, entry_uri
from .models import Entry, RowId, parse_id
from .store import ImportCancelled, NewEntry, SearchFilters, normalize_tags, search_terms
from .ui import GRAPH_VIEW
from .views import (
    EntriesImported,
    EntryDeleted,
    EntrySearchResults,
    EntryStored,
    EntryUpdated,
    GraphResults,
    SearchEcho,
    TransactionHistory,
    TripleRelated,
    UndoResult,
)

__all__ = ("register_tools", "ImportItem", "IMPORT_MAX")

_encode: Final = msgspec.json.Encoder().encode
_EMBEDDED_MAX: Final = 3
_QUERY_LIMIT: Final = 100
_GRAPH_LIMIT: Final = 200
_EMBED_SIZE: Final = 2000

TopicArg = Annotated[str, msgspec.Meta(max_length=200, description="What the fact is about, e.g. 'python/gil'.")]
ContentArg = Annotated[str, msgspec.Meta(max_length=20_000, description="The fact itself, in a sentence or two.")]
ConfidenceArg = Annotated[float, msgspec.Meta(ge=0, le=1, description="How sure the fact is, 0 to 1.")]
TagsArg = Annotated[
    list[Annotated[str, msgspec.Meta(max_length=50)]],
    msgspec.Meta(max_length=20, description="Short labels (lower-cased)."),
]
TextArg = Annotated[
    str, msgspec.Meta(max_length=500, description="Words that must all appear (in topic, content or tags).")
]
NodeArg = Annotated[str, msgspec.Meta(max_length=200)]
EntryIdArg = Annotated[RowId, msgspec.Meta(description="The id of an existing entry.")]
FormatArg = Annotated[
    Format | None,
    msgspec.Meta(
        description="markdown (default; or the X-Response-Format header over HTTP), json, or both. "
        "The JSON block is the machine contract."
    ),
]

#: At most this many entries in one import_entries call.
IMPORT_MAX: Final = 10_000


class ImportItem(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One fact of an import, as store takes it."""

    topic: TopicArg
    content: ContentArg
    confidence: ConfidenceArg = 0.8
    tags: TagsArg = msgspec.field(default_factory=list)


ImportArg = Annotated[
    list[ImportItem],
    msgspec.Meta(min_length=1, max_length=IMPORT_MAX, description="The facts to store (topic, content, ...)."),
]

_WRITE = t.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
_READ = t.ToolAnnotations(read_only_hint=True, open_world_hint=False)
_READS: Final = (READ_SCOPE,)  # the OAuth scopes of the tools that only read
_WRITES: Final = (WRITE_SCOPE,)  # and of those that change the store


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _too_long(name: str, value: str, most: int) -> None:
    if len(value) > most:
        raise ToolFailure(
            ErrorCode.VALIDATION_ERROR,
            f"{name} is {len(value)} characters long; at most {most} are allowed.",
            details={"field": name, "max_length": most},
            next_steps=[f"Shorten {name} to at most {most} characters and call again."],
        )


def _entry_choice(entry_id: int, hint: str | None, nearest: list[Entry], tool: str, args: dict[str, Any]) -> NeedsInput:
    """A needs-input for an unknown entry id, suggesting the nearest entries."""
    if not nearest:
        return NeedsInput(
            summary=f"No entry has id {entry_id}; the store is empty",
            reason=f"There is no entry {entry_id}: nothing has been stored yet.",
            fields=[InputField(name="id", type="integer", description="The id of an existing entry.")],
            next_steps=["Store an entry first with the store tool."],
        )
    return NeedsInput(
        summary=f"No entry has id {entry_id}",
        reason=f"There is no entry {entry_id}{f' (hint: {hint!r})' if hint else ''}. Which entry did you mean?",
        fields=[
            InputField(
                name="id",
                type="integer",
                description="The id of an existing entry.",
                options=[str(e.id) for e in nearest],
                suggestions=[e.id for e in nearest],
            )
        ],
        options=[InputOption(label=f"#{e.id} {e.topic}", tool=tool, arguments={**args, "id": e.id}) for e in nearest],
        next_steps=[f"Call {tool} again with one of the suggested ids, or query to find the entry."],
    )


async def _resolve_entry(
    ctx: Context, kb: Knowledge, entry_id: int, hint: str | None, tool: str, args: dict[str, Any]
) -> Entry | NeedsInput:
    """The entry ``entry_id``, or the user's pick among the nearest ones, or a needs-input."""
    entry, _ = await kb.call(kb.store.get_entry, entry_id)
    if entry is not None:
        return entry
    nearest = await kb.call(kb.store.nearest_entries, entry_id, hint)
    need = _entry_choice(entry_id, hint, nearest, tool, args)
    if not nearest:
        return need
    answers = await ask(ctx, need, key=f"{tool}-id")
    picked = str(answers.get("id", "")) if answers else ""
    picked_id = parse_id(picked)
    if picked_id is None:
        return need
    entry, _ = await kb.call(kb.store.get_entry, picked_id)
    return entry if entry is not None else need


def _embedded(entries: list[Entry], as_of: int) -> list[t.ContentBlock]:
    """The top entries as embedded JSON resources, exactly as ``knowledge://entries/{id}`` reads them."""
    blocks: list[t.ContentBlock] = []
    for e in entries[:_EMBEDDED_MAX]:
        uri = entry_uri(e.id)
        text = _encode({"resource_uri": uri, "as_of_tx_id": as_of, "item": e}).decode()
        if len(text) <= _EMBED_SIZE:
            blocks.append(
                t.EmbeddedResource(resource=t.TextResourceContents(uri=uri, text=text, mime_type="application/json"))
            )
    return blocks


def _graph_link(node: str, depth: int, predicate: str | None) -> str:
    """The whole neighbourhood ``query_graph`` shows the start of, on the triples collection."""
    params = [("node", node), ("depth", str(depth)), *([("predicate", predicate)] if predicate else [])]
    return f"{TRIPLES}?{urlencode(params)}"


def _entries_link(filters: SearchFilters, text: str | None) -> str:
    params: list[tuple[str, str]] = []
    if filters.topic:
        params.append(("topic", filters.topic))
    if text:
        params.append(("text", text))
    if filters.tags:
        params.append(("tags", ",".join(filters.tags)))
    if filters.min_confidence is not None:
        params.append(("min_confidence", f"{filters.min_confidence:g}"))
    return f"{ENTRIES}?{urlencode(params)}" if params else ENTRIES


def register_tools(kb: Knowledge) -> None:
    server = kb.server
    store = kb.store

    @presented_tool(server, EntryStored, name="store", annotations=_WRITE, title="Store a fact", scopes=_WRITES)
    async def store_entry(
        ctx: Context,
        topic: TopicArg,
        content: ContentArg,
        confidence: ConfidenceArg = 0.8,
        tags: TagsArg | None = None,
        format: FormatArg = None,
    ) -> Any:
        """Remember a fact: a topic, the content, how confident it is, and tags. An identical fact (same topic
        and content) is not stored twice. Returns the entry and the transaction id (undo it with undo)."""
        topic, content = topic.strip(), content.strip()
        if not topic or not content:
            need = NeedsInput(
                summary="store needs a topic and the content",
                reason="A fact needs both a topic and its content; "
                + ("the topic" if not topic else "the content")
                + " is empty.",
                fields=[
                    InputField(name="topic", description="What the fact is about.", required=not topic),
                    InputField(name="content", description="The fact itself.", required=not content),
                ],
            )
            answers = await ask(ctx, need, key="store-input")
            if answers is None:
                return need
            topic = topic or _text(answers.get("topic"))
            content = content or _text(answers.get("content"))
            if not topic or not content:
                return need
            _too_long("topic", topic, 200)
            _too_long("content", content, 20_000)
        write = await kb.call(store.add_entry, topic, content, confidence, tags or [])
        await kb.publish(write)
        entry = write.value
        if write.tx_id is None:
            return EntryStored(
                status="info",
                summary=f"Already known as #{entry.id}; nothing written",
                tx_id=None,
                created=False,
                entry=entry,
                next_steps=[f"Use update with id {entry.id} to change it."],
            )
        return EntryStored(
            summary=f"Stored #{entry.id} ({entry.topic}) in tx {write.tx_id}",
            tx_id=write.tx_id,
            created=True,
            entry=entry,
            next_steps=[f"Undo with undo(tx_id={write.tx_id}) if this was a mistake."],
        )

    @presented_tool(server, EntryUpdated, annotations=_WRITE, title="Update a fact", scopes=_WRITES)
    async def update(
        ctx: Context,
        id: EntryIdArg,
        topic: TopicArg | None = None,
        content: ContentArg | None = None,
        confidence: ConfidenceArg | None = None,
        tags: TagsArg | None = None,
        add_tags: TagsArg | None = None,
        remove_tags: TagsArg | None = None,
        expected_version: Annotated[
            RowId | None, msgspec.Meta(description="Fail with CONFLICT unless the entry is at this version.")
        ] = None,
        format: FormatArg = None,
    ) -> Any:
        """Change fields of an entry by id: topic, content, confidence, tags (replace), add_tags, remove_tags.
        Read-modify-write happens in one transaction, so concurrent updates never lose each other's changes."""
        new_topic = topic.strip() if topic is not None else None
        new_content = content.strip() if content is not None else None
        if new_topic == "" or new_content == "":
            raise ToolFailure(
                ErrorCode.VALIDATION_ERROR,
                "topic and content cannot be made empty.",
                next_steps=["Leave topic or content out to keep it, or give the new text; delete removes an entry."],
            )
        given = {"topic": new_topic, "content": new_content, "confidence": confidence, "tags": tags}
        args = {k: v for k, v in {**given, "add_tags": add_tags, "remove_tags": remove_tags}.items() if v}
        found = await _resolve_entry(ctx, kb, id, new_topic, "update", args)
        if isinstance(found, NeedsInput):
            return found
        if all(v is None for v in given.values()) and not add_tags and not remove_tags:
            need = NeedsInput(
                summary=f"Nothing to change in #{found.id}",
                reason=f"Say what to change in entry #{found.id} ({found.topic}).",
                fields=[
                    InputField(name="topic", required=False, suggestions=[found.topic]),
                    InputField(name="content", required=False),
                    InputField(name="confidence", type="number", required=False, suggestions=[found.confidence]),
                ],
            )
            answers = await ask(ctx, need, key="update-fields") or {}
            new_topic = _text(answers.get("topic")) or None
            new_content = _text(answers.get("content")) or None
            value = answers.get("confidence")
            confidence = float(value) if isinstance(value, (int, float)) and 0 <= value <= 1 else None
            if new_topic is None and new_content is None and confidence is None:
                return need
        write = await kb.call(
            store.update_entry,
            found.id,
            topic=new_topic,
            content=new_content,
            confidence=confidence,
            tags=tags,
            add_tags=add_tags or (),
            remove_tags=remove_tags or (),
            expected_version=expected_version,
        )
        await kb.publish(write)
        entry = write.value
        changed = [k for k in ("topic", "content", "confidence", "tags") if getattr(found, k) != getattr(entry, k)]
        if write.tx_id is None:
            return EntryUpdated(
                status="info", summary=f"#{entry.id} already says that", tx_id=None, changed_fields=[], entry=entry
            )
        return EntryUpdated(
            summary=f"Updated #{entry.id} ({', '.join(changed)}) in tx {write.tx_id}",
            tx_id=write.tx_id,
            changed_fields=changed,
            entry=entry,
            next_steps=[f"Undo with undo(tx_id={write.tx_id}) to restore the previous version."],
        )

    @presented_tool(
        server, EntrySearchResults, annotations=_READ, title="Search facts", estimate_tokens=True, scopes=_READS
    )
    async def query(
        ctx: Context,
        topic: TopicArg | None = None,
        text: TextArg | None = None,
        tags: TagsArg | None = None,
        min_confidence: ConfidenceArg | None = None,
        limit: Annotated[int, msgspec.Meta(ge=1, le=_QUERY_LIMIT, description="At most this many entries.")] = 10,
        format: FormatArg = None,
    ) -> Any:
        """Find entries by topic (substring) and/or free text, optionally only with all of ``tags`` and a minimum
        confidence; most confident first. Results embed each top entry as a JSON resource."""
        topic = _text(topic) or None
        terms = search_terms(text)
        wanted_tags = tuple(normalize_tags(tags or []))
        if topic is None and not terms and not wanted_tags:
            known = await kb.call(store.topics, "", 8)
            reason = (
                "The query is empty: give a topic or some words to look for."
                if not _text(text)
                else "The words are too short to search for (two characters or more)."
            )
            need = NeedsInput(
                summary="query needs a topic or text",
                reason=reason,
                fields=[
                    InputField(name="topic", required=False, description="A topic (substring).", suggestions=known),
                    InputField(name="text", required=False, description="Words that must appear."),
                ],
                options=[
                    InputOption(label=f"Entries about {k}", tool="query", arguments={"topic": k}) for k in known[:3]
                ],
            )
            answers = await ask(ctx, need, key="query-scope")
            if answers is None:
                return need
            topic = _text(answers.get("topic")) or None
            text = _text(answers.get("text")) or None
            terms = search_terms(text)
            if topic is None and not terms:
                return need
        filters = SearchFilters(topic=topic, terms=terms, tags=wanted_tags, min_confidence=min_confidence)
        entries, total, as_of = await kb.call(store.search, filters, limit)
        echo = SearchEcho(
            topic=topic if topic is not None else UNSET,
            text=text if text is not None else UNSET,
            terms=list(terms),
            tags=list(wanted_tags),
            min_confidence=min_confidence if min_confidence is not None else UNSET,
            limit=limit,
            format=resolve_format(ctx, format),
        )
        what = " ".join(filter(None, [f"topic {topic!r}" if topic else "", f"text {text!r}" if terms else ""]))
        link = _entries_link(filters, text if terms else None)
        steps = []
        if total > len(entries):
            wider = f"call again with limit={min(total, _QUERY_LIMIT)}, or " if limit < _QUERY_LIMIT else ""
            steps.append(f"{total - len(entries)} more match: {wider}read {link} (every match, a page at a time).")
        if not entries:
            steps.append("Try fewer words, a shorter topic, or no tag filter.")
        payload = EntrySearchResults(
            status="ok" if entries else "info",
            summary=f"{total} {'entry matches' if total == 1 else 'entries match'} {what or 'the tags'}",
            query=echo,
            total=total,
            as_of_tx_id=as_of,
            entries=entries,
            next_steps=steps,
        )
        return Presented(
            payload,
            full_uri=link,
            full_name="matching entries",
            blocks=_embedded(entries, as_of),
            more=total > len(entries),
        )

    @presented_tool(
        server,
        EntryDeleted,
        annotations=t.ToolAnnotations(destructive_hint=True, idempotent_hint=False, open_world_hint=False),
        title="Delete a fact",
        scopes=_WRITES,
    )
    async def delete(ctx: Context, id: EntryIdArg, format: FormatArg = None) -> Any:
        """Delete an entry by id. Undo brings it back (undo(tx_id) with the transaction id this returns)."""
        found = await _resolve_entry(ctx, kb, id, None, "delete", {})
        if isinstance(found, NeedsInput):
            return found
        write = await kb.call(store.delete_entry, found.id)
        await kb.publish(write)
        assert write.tx_id is not None
        return EntryDeleted(
            summary=f"Deleted #{found.id} ({found.topic}) in tx {write.tx_id}",
            tx_id=write.tx_id,
            entry=write.value,
            next_steps=[f"Undo with undo(tx_id={write.tx_id}) to bring it back."],
        )

    @presented_tool(
        server,
        TripleRelated,
        annotations=t.ToolAnnotations(read_only_hint=False, idempotent_hint=True, open_world_hint=False),
        title="Relate two things",
        scopes=_WRITES,
    )
    async def relate(
        ctx: Context, subject: NodeArg, predicate: NodeArg, object: NodeArg, format: FormatArg = None
    ) -> Any:
        """Record a relation ``subject --predicate--> object`` in the knowledge graph (idempotent)."""
        parts = {"subject": subject.strip(), "predicate": predicate.strip(), "object": object.strip()}
        empty = [k for k, v in parts.items() if not v]
        if empty:
            need = NeedsInput(
                summary=f"relate needs {', '.join(empty)}",
                reason="A relation needs a subject, a predicate and an object; some are empty.",
                fields=[InputField(name=k, required=True) for k in empty],
            )
            answers = await ask(ctx, need, key="relate-input")
            if answers is None:
                return need
            parts.update({k: _text(answers.get(k)) for k in empty})
            if not all(parts.values()):
                return need
            for k, v in parts.items():
                _too_long(k, v, 200)
        write = await kb.call(store.relate, parts["subject"], parts["predicate"], parts["object"])
        await kb.publish(write)
        triple = write.value
        line = f"{triple.subject} {triple.predicate} {triple.object}"
        if write.tx_id is None:
            return TripleRelated(
                status="info", summary=f"Already known: {line}", tx_id=None, created=False, triple=triple
            )
        return TripleRelated(summary=f"Related {line}", tx_id=write.tx_id, created=True, triple=triple)

    @presented_tool(
        server,
        GraphResults,
        annotations=_READ,
        title="Explore the graph",
        scopes=_READS,
        meta=tool_meta(GRAPH_VIEW),
    )
    async def query_graph(
        ctx: Context,
        node: Annotated[NodeArg, msgspec.Meta(description="The node to start from.")],
        depth: Annotated[int, msgspec.Meta(ge=1, le=4, description="How many hops to walk.")] = 1,
        target: Annotated[NodeArg | None, msgspec.Meta(description="Find shortest paths to this node.")] = None,
        predicate: Annotated[NodeArg | None, msgspec.Meta(description="Follow only this predicate.")] = None,
        limit: Annotated[
            int, msgspec.Meta(ge=1, le=_GRAPH_LIMIT, description="At most this many triples, nearest first.")
        ] = 50,
        format: FormatArg = None,
    ) -> Any:
        """The relations around a node up to ``depth`` hops (both directions), and with ``target`` the shortest
        paths from ``node`` to it."""
        start = node.strip()
        found = await kb.call(store.neighbourhood, start, depth, predicate or None, limit)
        if not found.triples:
            similar = [n for n in await kb.call(store.similar_nodes, start or "", 5) if n != start]
            need = NeedsInput(
                summary=f"No relations for {start!r}" if start else "query_graph needs a node",
                reason=f"Nothing is related to {start!r}." if start else "Give the node to start from.",
                fields=[
                    InputField(
                        name="node",
                        description="A node with relations.",
                        options=similar or UNSET,
                        suggestions=similar,
                    )
                ],
                options=[
                    InputOption(label=f"Explore {n}", tool="query_graph", arguments={"node": n, "depth": depth})
                    for n in similar
                ],
                next_steps=[
                    "Call query_graph again with one of the suggested nodes, or relate this node first."
                    if similar
                    else "Record relations with relate first."
                ],
            )
            answers = await ask(ctx, need, key="graph-node") if similar else None
            start = _text(answers.get("node")) if answers else ""
            if not start:
                return need
            found = await kb.call(store.neighbourhood, start, depth, predicate or None, limit)
            if not found.triples:
                return need
        triples, total = found.triples, found.total
        hops = f"{depth} hop{'s' if depth > 1 else ''}"
        payload = GraphResults(
            summary=f"{total} relations within {hops} of {start}"
            + (f" (the first {len(triples)})" if total > len(triples) else ""),
            node=start,
            depth=depth,
            total=total,
            nodes=found.nodes,
            triples=triples,
        )
        link = _graph_link(start, depth, predicate or None)
        if total > len(triples):
            more = f"{total - len(triples)} more relations within {hops}"
            if limit < _GRAPH_LIMIT:
                wider = f"call again with limit={min(total, _GRAPH_LIMIT)}"
                payload.next_steps = [f"{more}: {wider}, or read {link} (all {total}, a page at a time)."]
            else:
                payload.next_steps = [f"{more}: read {link} (all {total}, a page at a time)."]
        if target:
            from .graph import shortest_paths

            paths = shortest_paths(start, target.strip(), triples, depth)
            payload.target = target.strip()
            payload.paths = paths
            payload.summary = (
                f"{len(paths)} shortest path(s) from {start} to {target.strip()}"
                if paths
                else f"No path from {start} to {target.strip()} within {depth} hops"
            )
            payload.status = "ok" if paths else "info"
            if not paths and total > len(triples):
                payload.next_steps.append(
                    "Paths are looked for among the relations returned: a wider limit may find one."
                )
        return Presented(payload, full_uri=link, full_name="the whole neighbourhood", more=total > len(triples))

    @presented_tool(
        server,
        UndoResult,
        annotations=t.ToolAnnotations(destructive_hint=True, idempotent_hint=False, open_world_hint=False),
        title="Undo a transaction",
        scopes=_WRITES,
    )
    async def undo(
        ctx: Context,
        tx_id: Annotated[RowId | None, msgspec.Meta(description="The transaction to revert (see history).")] = None,
        format: FormatArg = None,
    ) -> Any:
        """Revert a transaction as a new transaction, which can be undone in turn (undo of an undo redoes).
        Fails with CONFLICT when later transactions changed the same rows, naming them."""
        target = await kb.call(store.transaction, tx_id) if tx_id is not None else None
        if target is None:
            recent = await kb.call(store.recent_transactions, 5)
            need = NeedsInput(
                summary="Which transaction?" if tx_id is None else f"No transaction has id {tx_id}",
                reason="Name the transaction to undo." if tx_id is None else f"There is no transaction {tx_id}.",
                fields=[
                    InputField(
                        name="tx_id",
                        type="integer",
                        description="A transaction id from history.",
                        options=[str(tx.id) for tx in recent] if recent else UNSET,
                        suggestions=[tx.id for tx in recent],
                    )
                ],
                options=[
                    InputOption(label=f"tx {tx.id}: {tx.summary}", tool="undo", arguments={"tx_id": tx.id})
                    for tx in recent
                ],
            )
            answers = await ask(ctx, need, key="undo-tx") if recent else None
            picked = str(answers.get("tx_id", "")) if answers else ""
            picked_id = parse_id(picked)
            target = await kb.call(store.transaction, picked_id) if picked_id is not None else None
            if target is None:
                return need
        try:
            write = await kb.call(store.undo, target.id)
        except ToolFailure as failure:
            payload = failure.payload
            if payload.code is ErrorCode.CONFLICT and isinstance(payload.details, dict):
                if payload.details.get("undone_by") is not None:
                    payload.next_steps = [f"Undo transaction {payload.details['undone_by']} to redo it."]
                elif payload.details.get("conflicting_tx_ids"):
                    later = payload.details["conflicting_tx_ids"]
                    payload.next_steps = [f"Undo the later transactions first, newest first: {later[::-1]}."]
            raise
        await kb.publish(write, history_ids=[target.id])
        outcome = write.value
        return UndoResult(
            summary=f"Undid tx {target.id} ({target.op}) in tx {write.tx_id}",
            tx_id=outcome.transaction.id,
            undone=outcome.undone,
            transaction=outcome.transaction,
            next_steps=[f"Undo tx {outcome.transaction.id} to redo it."],
        )

    @presented_tool(server, TransactionHistory, annotations=_READ, title="Transaction history", scopes=_READS)
    async def history(
        ctx: Context,
        limit: Annotated[int, msgspec.Meta(ge=1, le=100, description="At most this many transactions.")] = 20,
        entry_id: Annotated[
            RowId | None, msgspec.Meta(description="Only transactions that touched this entry.")
        ] = None,
        format: FormatArg = None,
    ) -> Any:
        """The latest transactions, newest first: what each did, and whether it was undone (and by which)."""
        transactions, total, as_of = await kb.call(store.history, limit, entry_id)
        scope = f" touching #{entry_id}" if entry_id is not None else ""
        link = f"{HISTORY}?entry_id={entry_id}" if entry_id is not None else HISTORY
        payload = TransactionHistory(
            status="ok" if transactions else "info",
            summary=f"{total} transaction{'s' if total != 1 else ''}{scope}"
            + (f" (the latest {len(transactions)})" if total > len(transactions) else ""),
            entry_id=entry_id,
            as_of_tx_id=as_of,
            total=total,
            transactions=transactions,
        )
        if total > len(transactions):
            more = f"{total - len(transactions)} older transactions"
            wider = f"call again with limit={min(total, 100)}, or " if limit < 100 else ""
            payload.next_steps = [f"{more}: {wider}read {link} (oldest first, a page at a time)."]
        return Presented(payload, full_uri=link, full_name="transaction history", more=total > len(transactions))

    @presented_tool(
        server,
        EntriesImported,
        name="import_entries",
        annotations=_WRITE,
        title="Import many facts",
        scopes=_WRITES,
        task="optional",
    )
    async def import_entries(ctx: Context, entries: ImportArg, format: FormatArg = None) -> Any:
        """Store many facts at once (up to 10,000), in one transaction: all of them, or none. A fact whose topic
        and content are stored already is skipped. Where the client supports tasks (2026-07-28) the import runs
        as a task: it reports how far it got, and cancelling it writes nothing. Returns the new entries' ids and
        the transaction id (undo it with undo)."""
        items: list[NewEntry] = []
        for index, item in enumerate(entries):
            topic, content = item.topic.strip(), item.content.strip()
            if not topic or not content:
                empty = "topic" if not topic else "content"
                raise ToolFailure(
                    ErrorCode.VALIDATION_ERROR,
                    f"entries[{index}] has an empty {empty}; nothing was imported.",
                    details={"field": f"entries[{index}].{empty}"},
                    next_steps=["Give every entry a topic and its content, and call again."],
                )
            items.append(NewEntry(topic, content, item.confidence, item.tags))
        total = len(items)

        def progress(done: int) -> None:  # (on the import's worker thread)
            ctx.report_progress(done, total, f"{done} of {total} entries")  # (sent from the loop, waited for)

        def cancelled() -> bool:
            return ctx.cancelled

        arguments = {"entries": items, "progress": progress, "cancelled": cancelled}
        try:
            write = await kb.call(call_on_worker_thread, store.import_entries, arguments)
        except ImportCancelled as stopped:
            return EntriesImported(
                status="info",
                summary=f"Import cancelled after {stopped.done} of {stopped.total} entries; nothing written",
                tx_id=None,
                imported=0,
                skipped=0,
                entry_ids=[],
                next_steps=["Call import_entries again to import them."],
            )
        await kb.publish(write)
        outcome = write.value
        imported = len(outcome.entry_ids)
        known = f", {outcome.skipped} known already" if outcome.skipped else ""
        if write.tx_id is None:
            return EntriesImported(
                status="info",
                summary=f"All {total} entries are known already; nothing written",
                tx_id=None,
                imported=0,
                skipped=outcome.skipped,
                entry_ids=[],
            )
        return EntriesImported(
            summary=f"Imported {imported} entries{known} in tx {write.tx_id}",
            tx_id=write.tx_id,
            imported=imported,
            skipped=outcome.skipped,
            entry_ids=outcome.entry_ids,
            next_steps=[f"Undo with undo(tx_id={write.tx_id}) to remove them all."],
        )
