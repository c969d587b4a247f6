"""The knowledge server's prompts: ingest memory, retrieve context, correct a stale fact (L7).

Each is ready to run: it states the task, names the tools to call and in what order, and embeds what the store
already holds when that helps. None of them writes anything; they say plainly that nothing is saved until a
tool call returns ``status: ok`` with a transaction id.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import msgspec

from ...mcp import types as t
from .app import READ_SCOPE, Knowledge, entry_uri
from .models import Entry, parse_id
from .store import SearchFilters, search_terms

__all__ = ("register_prompts",)

_encode: Final = msgspec.json.Encoder().encode
_NO_SILENT_WRITES: Final = (
    "Nothing is saved until a tool call returns status ok with a transaction id (txId): never say a fact was "
    "stored, changed or deleted unless that call succeeded, and quote its txId."
)


def _user(text: str) -> t.PromptMessage:
    return t.PromptMessage(role="user", content=t.TextContent(text=text))


def _embedded(entry: Entry, as_of: int) -> t.PromptMessage:
    uri = entry_uri(entry.id)
    text = _encode({"resource_uri": uri, "as_of_tx_id": as_of, "item": entry}).decode()
    resource = t.TextResourceContents(uri=uri, text=text, mime_type="application/json")
    return t.PromptMessage(role="user", content=t.EmbeddedResource(resource=resource))


# Prompt arguments are strings; each has a bound, so an oversized one is -32602 instead of a huge prompt.
Material = Annotated[str, msgspec.Meta(max_length=100_000)]
Topic = Annotated[str, msgspec.Meta(max_length=200)]
Question = Annotated[str, msgspec.Meta(max_length=2_000)]
Correction = Annotated[str, msgspec.Meta(max_length=20_000)]
Short = Annotated[str, msgspec.Meta(max_length=20)]

_STOPWORD_TEXT: Final = (
    "a an and are as at be but by can could did do does for from had has have how in into is it its not of on "
    "or should that the their there this to was were what when where which who why will with would you your"
)
_STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())


async def _best_matches(kb: Knowledge, question: str, topic: str | None, most: int = 5) -> tuple[list[Entry], int, int]:
    """Entries matching the most of the question's longest words (any of them, stop words aside), within
    ``topic``."""
    words = sorted((w for w in search_terms(question) if w not in _STOPWORDS), key=len, reverse=True)[:4]
    hits: dict[int, tuple[int, Entry]] = {}
    as_of = 0
    for word in words or [""]:
        filters = SearchFilters(topic=topic, terms=(word,) if word else ())
        if filters.topic is None and not filters.terms:
            break
        found, _, as_of = await kb.read(kb.store.search, filters, most)
        for entry in found:
            count = hits.get(entry.id, (0, entry))[0]
            hits[entry.id] = (count + 1, entry)
    ranked = sorted(hits.values(), key=lambda pair: (-pair[0], -pair[1].confidence, -pair[1].id))
    return [entry for _, entry in ranked[:most]], len(hits), as_of


def register_prompts(kb: Knowledge) -> None:
    server = kb.server

    async def complete_topic(value: str, context: dict[str, Any]) -> list[str]:
        topics: list[str] = await kb.read(kb.store.topics, value, 20)
        return topics

    @server.prompt(
        title="Ingest into memory",
        description="Turn material (notes, a conversation, a document) into stored facts, without duplicates.",
        complete={"topic": complete_topic},
        scopes=[READ_SCOPE],
    )
    def ingest_memory(material: Material, topic: Topic = "", confidence: Short = "0.8") -> list[t.PromptMessage]:
        """Args:
        material: The text to learn facts from.
        topic: A topic to file the facts under (optional; else choose one per fact).
        confidence: Confidence for facts the material states plainly, 0 to 1 (default 0.8).
        """
        where = f'under the topic "{topic}"' if topic else "each under a short, specific topic"
        return [
            _user(
                "Extract the durable facts from the material below and store them in the knowledge server.\n\n"
                "For each fact:\n"
                f"1. Call `query` with its topic and key words (format json) to see whether it is already known.\n"
                "2. If an entry says the same, skip it; if one says something older or different, call `update` "
                "with that entry's id (and expected_version from the query result) instead of storing a duplicate.\n"
                f"3. Otherwise call `store` {where}, with the fact as one or two sentences, confidence {confidence} "
                "(lower it for hedged or second-hand claims) and a few tags.\n"
                "4. For facts that relate two named things, also call `relate` (subject, predicate, object).\n\n"
                f"{_NO_SILENT_WRITES} Finish with a list of what was stored or updated, by entry id and txId.\n\n"
                f"<material>\n{material}\n</material>"
            )
        ]

    @server.prompt(
        title="Retrieve context",
        description="Answer a question from stored knowledge, citing entry ids; the best matches are embedded.",
        complete={"topic": complete_topic},
        scopes=[READ_SCOPE],
    )
    async def retrieve_context(question: Question, topic: Topic = "") -> list[t.PromptMessage]:
        """Args:
        question: The question to answer from memory.
        topic: Narrow the search to a topic (optional).
        """
        entries, total, as_of = await _best_matches(kb, question, topic.strip() or None)
        found = (
            f"The {len(entries)} best matching entries (of {total} found) are embedded below."
            if entries
            else "No stored entry matched the question's words yet."
        )
        messages = [
            _user(
                f"Answer this question from the knowledge server's memory: {question}\n\n"
                f"{found} Call `query` (topic and/or text) for more, and `query_graph` for how things relate. "
                "Cite the entry ids you rely on, prefer higher confidence and newer entries, and say plainly when "
                "memory has no answer. This is a read-only task: do not call store, update, delete, relate or undo."
            )
        ]
        messages += [_embedded(e, as_of) for e in entries]
        return messages

    @server.prompt(
        title="Correct a stale fact",
        description="Find the entry that is out of date and correct it through update (or delete), with undo.",
        complete={"topic": complete_topic},
        scopes=[READ_SCOPE],
    )
    async def correct_stale_fact(topic: Topic, correction: Correction, entry_id: Short = "") -> list[t.PromptMessage]:
        """Args:
        topic: The topic of the stale fact.
        correction: What is true now.
        entry_id: The id of the stale entry, if known.
        """
        messages: list[t.PromptMessage] = []
        known = ""
        wanted = parse_id(entry_id)
        if wanted is not None:
            entry, as_of = await kb.read(kb.store.get_entry, wanted)
            if entry is not None:
                known = f" Entry #{entry.id} is embedded below (version {entry.version})."
                messages.append(_embedded(entry, as_of))
        if entry_id.strip() and not known:
            known = f" There is no entry #{entry_id.strip()}; find the right one with query."
        steps = (
            f'A stored fact about "{topic}" is out of date. What is true now: {correction}\n\n'
            f"1. Find the stale entry: call `query` with the topic (format json).{known}\n"
            "2. Confirm with the user which entry is stale if more than one could be.\n"
            "3. Call `update` with its id, the corrected content, an honest confidence and expected_version set "
            "to the version you read (a CONFLICT error means it changed meanwhile: read it again). If the fact is "
            "simply wrong and nothing replaces it, call `delete` instead.\n"
            "4. Report the txId; the change can be reverted with `undo` and that txId.\n\n"
            f"{_NO_SILENT_WRITES}"
        )
        return [_user(steps), *messages]
