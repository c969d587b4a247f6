"""The knowledge server's resources (pagination, cursors, the entry template), subscriptions in both eras, and
prompts (with completions), over a real client on a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_knowledge_helpers import ERAS, HANDSHAKE, Notes, knowledge

from jsonrpc_mcp import RpcError, types
from jsonrpc_mcp.examples.knowledge.resources import encode_cursor

pytestmark = pytest.mark.anyio

ENTRIES = "knowledge://entries"
TRIPLES = "knowledge://graph/triples"
HISTORY = "knowledge://history/transactions"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "knowledge.db"


async def test_resources_are_listed_with_name_description_mime_type_and_version(db: Path) -> None:
    async with knowledge(db) as kb:
        listed = {r.uri: r for r in await kb.client.list_resources()}
        assert set(listed) == {ENTRIES, TRIPLES, HISTORY, "ui://knowledge/graph"}
        view = listed.pop("ui://knowledge/graph")  # the graph view (MCP Apps), listed for every client to inspect
        assert view.mime_type == "text/html;profile=mcp-app" and view.name == "knowledge-graph"
        for resource in listed.values():
            assert resource.name and isinstance(resource.description, str) and resource.description
            assert resource.mime_type == "application/json"
            assert resource.meta == {"version": "1"}
        (template,) = await kb.client.list_resource_templates()
        assert template.uri_template == "knowledge://entries/{id}"
        assert template.mime_type == "application/json" and template.meta == {"version": "1"}


@pytest.mark.parametrize("version", ERAS)
async def test_collections_page_with_limit_and_cursor_until_next_cursor_is_null(db: Path, version: str) -> None:
    async with knowledge(db, protocol_version=version) as kb:
        for i in range(7):
            await kb.store(f"topic {i}", f"fact {i}")
        seen: list[int] = []
        uri = f"{ENTRIES}?limit=3"
        pages = 0
        while True:
            page = await kb.read(uri)
            pages += 1
            assert set(page) == {"resource_uri", "as_of_tx_id", "items", "next_cursor"}
            assert page["resource_uri"] == ENTRIES and page["as_of_tx_id"] == 7
            seen += [item["id"] for item in page["items"]]
            if page["next_cursor"] is None:
                break
            uri = f"{ENTRIES}?limit=3&cursor={page['next_cursor']}"
        assert seen == list(range(1, 8)) and pages == 3
        everything = await kb.read(ENTRIES)
        assert len(everything["items"]) == 7 and everything["next_cursor"] is None
        exact = await kb.read(f"{ENTRIES}?limit=7")
        assert exact["next_cursor"] is None


async def test_triples_and_transactions_read_the_same_way(db: Path) -> None:
    async with knowledge(db) as kb:
        await kb.call("relate", subject="a", predicate="is", object="b")
        await kb.call("relate", subject="b", predicate="is", object="c")
        await kb.store("t", "c")
        triples = await kb.read(f"{TRIPLES}?limit=1")
        assert triples["resource_uri"] == TRIPLES and triples["as_of_tx_id"] == 3
        assert [(t["id"], t["subject"], t["object"]) for t in triples["items"]] == [(1, "a", "b")]
        rest = await kb.read(f"{TRIPLES}?limit=1&cursor={triples['next_cursor']}")
        assert [t["id"] for t in rest["items"]] == [2] and rest["next_cursor"] is None
        history = await kb.read(HISTORY)
        assert [(tx["id"], tx["op"]) for tx in history["items"]] == [(1, "relate"), (2, "relate"), (3, "store")]
        assert history["items"][2]["changed_ids"] == {"entries": [1], "triples": []}


async def test_entries_filter_by_query_parameters(db: Path) -> None:
    async with knowledge(db) as kb:
        await kb.store("python/gil", "The GIL", confidence=0.9, tags=["cpython"])
        await kb.store("python/typing", "Gradual typing", confidence=0.5)
        await kb.store("rust", "Ownership", confidence=0.9, tags=["cpython"])
        assert [e["id"] for e in (await kb.read(f"{ENTRIES}?topic=python"))["items"]] == [1, 2]
        assert [e["id"] for e in (await kb.read(f"{ENTRIES}?text=gradual"))["items"]] == [2]
        assert [e["id"] for e in (await kb.read(f"{ENTRIES}?tags=cpython"))["items"]] == [1, 3]
        assert [e["id"] for e in (await kb.read(f"{ENTRIES}?min_confidence=0.8&topic=py"))["items"]] == [1]
        page = await kb.read(f"{ENTRIES}?topic=python&limit=1")
        assert [e["id"] for e in (await kb.read(f"{ENTRIES}?topic=python&cursor={page['next_cursor']}"))["items"]] == [
            2
        ]


@pytest.mark.parametrize("version", ERAS)
@pytest.mark.parametrize(
    "query",
    [
        "cursor=not-a-cursor",
        "cursor=" + encode_cursor("triples", 1),  # another collection's cursor
        "cursor=" + encode_cursor("entries", 1, None).replace("A", "B"),
        "limit=0",
        "limit=ten",
        "limit=%C2%B2",  # "²" is a digit to str.isdigit, but no number
        "limit=-1",
        "cursor=" + encode_cursor("entries", 2**70, None),  # a well-formed cursor no row can follow
        "cursor=" + encode_cursor("entries", 0, None),
        "min_confidence=2",
        "min_confidence=nan",
        "topic=" + "t" * 201,
        "text=" + "w" * 501,
        "tags=" + ",".join(f"t{i}" for i in range(21)),
    ],
)
async def test_invalid_cursors_and_parameters_are_invalid_params(db: Path, version: str, query: str) -> None:
    async with knowledge(db, protocol_version=version) as kb:
        await kb.store("t", "c")
        with pytest.raises(RpcError) as raised:
            await kb.read(f"{ENTRIES}?{query}")
        assert raised.value.code == -32602


async def test_a_cursor_is_bound_to_its_filters(db: Path) -> None:
    async with knowledge(db) as kb:
        for i in range(3):
            await kb.store("python", f"fact {i}")
        page = await kb.read(f"{ENTRIES}?topic=python&limit=1")
        with pytest.raises(RpcError) as raised:
            await kb.read(f"{ENTRIES}?topic=rust&limit=1&cursor={page['next_cursor']}")
        assert raised.value.code == -32602
        huge = await kb.read(f"{ENTRIES}?limit=100000")
        assert len(huge["items"]) == 3  # limit is capped at 200, not refused
        digits = await kb.read(f"{ENTRIES}?limit={'9' * 5000}")  # more digits than int() takes by default
        assert len(digits["items"]) == 3


@pytest.mark.parametrize("version", ERAS)
async def test_the_entry_template_reads_one_entry(db: Path, version: str) -> None:
    async with knowledge(db, protocol_version=version) as kb:
        entry = (await kb.store("t", "c", tags=["x"]))["entry"]
        doc = await kb.read(f"{ENTRIES}/{entry['id']}")
        assert doc == {"resource_uri": f"{ENTRIES}/1", "as_of_tx_id": 1, "item": entry}
        for missing in ("2", "abc", "0", "99999999999999999999999", "%C2%B2"):
            with pytest.raises(RpcError) as raised:
                await kb.read(f"{ENTRIES}/{missing}")
            assert raised.value.code == (-32002 if version == HANDSHAKE else -32602)
            assert raised.value.data == {"uri": f"{ENTRIES}/{missing}"}


async def test_subscribers_hear_of_committed_changes_until_they_unsubscribe(db: Path) -> None:
    notes = Notes()
    async with knowledge(db, protocol_version=HANDSHAKE, on_notification=notes) as kb:
        await kb.client.subscribe(ENTRIES)
        await kb.client.subscribe(HISTORY)
        entry_id = (await kb.store("t", "c"))["entry"]["id"]
        entries = await notes.next()
        assert entries == {
            "uri": ENTRIES,
            "_meta": {
                "resource_uri": ENTRIES,
                "tx_id": 1,
                "change_type": "upsert",
                "changed_ids": [entry_id],
                "changed_count": 1,
            },
        }
        history = await notes.next()
        assert history["uri"] == HISTORY and history["_meta"]["changed_ids"] == [1]
        await kb.call("delete", id=entry_id)
        deleted = await notes.next()
        assert deleted["_meta"]["change_type"] == "delete" and deleted["_meta"]["tx_id"] == 2
        await notes.next()  # history
        await kb.call("undo", tx_id=2)
        restored = await notes.next()
        assert restored["_meta"]["change_type"] == "upsert" and restored["_meta"]["changed_ids"] == [entry_id]
        history = await notes.next()
        assert history["_meta"]["changed_ids"] == [3, 2]  # the undo and the transaction it marked undone
        await kb.call("relate", subject="a", predicate="b", object="c")  # no entries subscription for triples
        assert (await notes.next())["uri"] == HISTORY
        await kb.client.unsubscribe(ENTRIES)
        await kb.store("t", "another")
        assert (await notes.next())["uri"] == HISTORY  # the entries notification would have come first
        await kb.store("t", "duplicate of nothing")
        assert (await notes.next())["uri"] == HISTORY
    await notes.aclose()


async def test_a_subscription_to_one_entry_hears_of_that_entry_only(db: Path) -> None:
    notes = Notes()
    async with knowledge(db, protocol_version=HANDSHAKE, on_notification=notes) as kb:
        first = (await kb.store("a", "1"))["entry"]["id"]
        second = (await kb.store("b", "2"))["entry"]["id"]
        await kb.client.subscribe(f"{ENTRIES}/{second}")
        await kb.client.subscribe(HISTORY)
        await kb.call("update", id=first, content="1b")  # tx 3: not the subscribed entry
        assert (await notes.next())["uri"] == HISTORY
        await kb.call("update", id=second, content="2b")  # tx 4
        assert await notes.next() == {
            "uri": f"{ENTRIES}/{second}",
            "_meta": {
                "resource_uri": f"{ENTRIES}/{second}",
                "tx_id": 4,
                "change_type": "upsert",
                "changed_ids": [second],
                "changed_count": 1,
            },
        }
        assert (await notes.next())["uri"] == HISTORY
        await kb.call("delete", id=second)  # tx 5
        assert (await notes.next())["_meta"]["change_type"] == "delete"
        assert (await notes.next())["uri"] == HISTORY
        await kb.call("undo", tx_id=5)
        restored = await notes.next()
        assert (restored["uri"], restored["_meta"]["change_type"]) == (f"{ENTRIES}/{second}", "upsert")
    await notes.aclose()


@pytest.mark.parametrize(
    "uri", [f"{ENTRIES}/9", f"{ENTRIES}/01", f"{ENTRIES}/x", "knowledge://nope", f"{ENTRIES}?topic=a"]
)
async def test_a_subscription_that_would_never_fire_is_refused(db: Path, uri: str) -> None:
    async with knowledge(db, protocol_version=HANDSHAKE) as kb:
        await kb.store("a", "1")
        with pytest.raises(RpcError) as raised:
            await kb.client.subscribe(uri)
        assert (raised.value.code, raised.value.data) == (-32002, {"uri": uri})


async def test_a_listen_stream_can_follow_one_entry(db: Path) -> None:
    notes = Notes()
    async with knowledge(db, on_notification=notes) as kb:
        assert kb.client.stateless
        entry_id = (await kb.store("a", "1"))["entry"]["id"]
        async with kb.client.listen(resource_uris=[f"{ENTRIES}/{entry_id}", f"{ENTRIES}/77", HISTORY]) as ack:
            assert ack["resourceSubscriptions"] == [f"{ENTRIES}/{entry_id}", HISTORY]
            await kb.call("update", id=entry_id, content="changed")
            one = await notes.next()
            assert one["uri"] == f"{ENTRIES}/{entry_id}" and one["_meta"]["changed_ids"] == [entry_id]
            assert (await notes.next())["uri"] == HISTORY
    await notes.aclose()


async def test_a_no_op_write_notifies_nobody(db: Path) -> None:
    notes = Notes()
    async with knowledge(db, protocol_version=HANDSHAKE, on_notification=notes) as kb:
        await kb.client.subscribe(HISTORY)
        await kb.store("t", "c")
        assert (await notes.next())["_meta"]["tx_id"] == 1
        await kb.store("t", "c")  # identical: nothing written
        await kb.store("u", "d")
        assert (await notes.next())["_meta"]["tx_id"] == 2
    await notes.aclose()


async def test_stateless_listen_streams_carry_the_change_and_the_subscription_id(db: Path) -> None:
    notes = Notes()
    async with knowledge(db, on_notification=notes) as kb:
        assert kb.client.stateless
        async with kb.client.listen(resource_uris=[ENTRIES, TRIPLES]) as ack:
            assert ack["resourceSubscriptions"] == [ENTRIES, TRIPLES]
            await kb.store("t", "c")
            params = await notes.next()
            meta = params["_meta"]
            assert params["uri"] == ENTRIES
            assert (meta["resource_uri"], meta["tx_id"], meta["change_type"], meta["changed_ids"]) == (
                ENTRIES,
                1,
                "upsert",
                [1],
            )
            assert "io.modelcontextprotocol/subscriptionId" in meta
            await kb.call("relate", subject="a", predicate="b", object="c")
            assert (await notes.next())["uri"] == TRIPLES
        async with kb.client.listen(resource_uris=[HISTORY]):
            await kb.store("t", "after the first stream ended")
            assert (await notes.next())["uri"] == HISTORY  # nothing for ENTRIES any more
    await notes.aclose()


async def test_changed_ids_are_bounded(db: Path) -> None:
    from jsonrpc_mcp.examples.knowledge.app import CHANGED_IDS_MAX, Knowledge
    from jsonrpc_mcp.examples.knowledge.models import Change
    from jsonrpc_mcp.examples.knowledge.store import Write

    notes = Notes()
    async with knowledge(db, protocol_version=HANDSHAKE, on_notification=notes) as kb:
        await kb.client.subscribe(ENTRIES)
        many = [Change("entries", i, "upsert") for i in range(CHANGED_IDS_MAX + 10)]
        app: Knowledge = kb.server.knowledge
        await app.publish(Write(9, None, many))
        meta = (await notes.next())["_meta"]
        assert len(meta["changed_ids"]) == CHANGED_IDS_MAX and meta["changed_count"] == CHANGED_IDS_MAX + 10
    await notes.aclose()


# --- prompts ------------------------------------------------------------------------------------------------


async def test_prompts_are_listed_with_their_arguments(db: Path) -> None:
    async with knowledge(db) as kb:
        prompts = {p.name: p for p in await kb.client.list_prompts()}
        assert set(prompts) == {"ingest_memory", "retrieve_context", "correct_stale_fact"}
        args = {name: [(a.name, a.required) for a in p.arguments or []] for name, p in prompts.items()}
        assert args["ingest_memory"] == [("material", True), ("topic", False), ("confidence", False)]
        assert args["retrieve_context"] == [("question", True), ("topic", False)]
        assert args["correct_stale_fact"] == [("topic", True), ("correction", True), ("entry_id", False)]
        for prompt in prompts.values():
            assert isinstance(prompt.description, str) and prompt.title
            for argument in prompt.arguments or []:
                assert isinstance(argument.description, str) and argument.description, (prompt.name, argument.name)
        material = (prompts["ingest_memory"].arguments or [])[0]
        assert material.description == "The text to learn facts from."


@pytest.mark.parametrize("version", ERAS)
async def test_prompts_are_ready_to_run_and_never_write(db: Path, version: str) -> None:
    async with knowledge(db, protocol_version=version) as kb:
        await kb.store("python/gil", "CPython has a global interpreter lock.", tags=["cpython"])
        await kb.store("rust", "Rust has no GIL.")
        ingest = await kb.client.get_prompt("ingest_memory", {"material": "Go has goroutines.", "topic": "go"})
        (message,) = ingest.messages
        assert isinstance(message.content, types.TextContent)
        text = message.content.text
        assert "Go has goroutines." in text and "`store`" in text and "`query`" in text
        assert "Nothing is saved until a tool call returns status ok" in text

        context = await kb.client.get_prompt("retrieve_context", {"question": "Which interpreter has a lock?"})
        first, *embedded = context.messages
        assert isinstance(first.content, types.TextContent) and "read-only task" in first.content.text
        assert [m.content.resource.uri for m in embedded] == ["knowledge://entries/1"]  # type: ignore[union-attr]
        doc = json.loads(embedded[0].content.resource.text)  # type: ignore[union-attr]
        assert doc["item"]["topic"] == "python/gil"

        stale = await kb.client.get_prompt(
            "correct_stale_fact", {"topic": "rust", "correction": "Rust 2024 is out.", "entry_id": "2"}
        )
        steps, entry = stale.messages
        assert isinstance(steps.content, types.TextContent)
        assert "`update`" in steps.content.text and "expected_version" in steps.content.text
        assert entry.content.resource.uri == "knowledge://entries/2"  # type: ignore[union-attr]
        unknown = await kb.client.get_prompt("correct_stale_fact", {"topic": "x", "correction": "y", "entry_id": "9"})
        assert "no entry #9" in unknown.messages[0].content.text  # type: ignore[union-attr]
        for beyond in ("99999999999999999999", "²", "-3"):  # no entry can have these ids
            asked = {"topic": "x", "correction": "y", "entry_id": beyond}
            odd = await kb.client.get_prompt("correct_stale_fact", asked)
            assert f"no entry #{beyond}" in odd.messages[0].content.text  # type: ignore[union-attr]
        for arguments in (
            {"topic": "x", "correction": "y", "entry_id": "9" * 21},
            {"topic": "t" * 201, "correction": "y"},
            {"material": "m" * 100_001},
        ):
            name = "ingest_memory" if "material" in arguments else "correct_stale_fact"
            with pytest.raises(RpcError) as too_long:
                await kb.client.get_prompt(name, arguments)
            assert too_long.value.code == -32602

        assert len((await kb.call("history"))["transactions"]) == 2  # the prompts wrote nothing
        with pytest.raises(RpcError) as raised:
            await kb.client.get_prompt("retrieve_context", {})
        assert raised.value.code == -32602


async def test_topic_arguments_and_entry_ids_complete(db: Path) -> None:
    async with knowledge(db) as kb:
        for topic in ("python/gil", "python/typing", "rust"):
            await kb.store(topic, "fact")
        done = await kb.client.complete(types.PromptReference(name="ingest_memory"), "topic", "py")
        assert done.completion.values == ["python/gil", "python/typing"]
        ids = await kb.client.complete(types.ResourceTemplateReference(uri="knowledge://entries/{id}"), "id", "3")
        assert ids.completion.values == ["3"]
