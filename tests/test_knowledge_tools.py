"""The knowledge server's tools over a real client and a real SQLite file: each tool's happy path, its result kind
and outputSchema, bad input (empty, huge, unknown ids) as needs-input or toolError:v1, undo (and undo of an
undo), and elicitation in both eras."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_knowledge_helpers import ERAS, HANDSHAKE, knowledge, mime, texts

from jsonrpc_mcp import RpcError, types

pytestmark = pytest.mark.anyio


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "knowledge.db"


def test_every_tool_declares_input_and_output_schemas(db: Path) -> None:
    from jsonrpc_mcp.examples.knowledge import create_server

    server = create_server(str(db))
    try:
        tools = {tool.name: tool for tool in server.list_tools()}
    finally:
        server.close()
    assert set(tools) == {
        "store", "update", "query", "delete", "relate", "query_graph", "undo", "history", "import_entries",
    }  # fmt: skip
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert "format" in tool.input_schema["properties"]
        assert isinstance(tool.output_schema, dict) and tool.output_schema["type"] == "object"
        kinds = [branch["$ref"] for branch in tool.output_schema["anyOf"]]
        assert kinds[-2:] == ["#/$defs/NeedsInput", "#/$defs/ToolErrorPayload"]
    assert tools["query"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["delete"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["store"].input_schema["required"] == ["topic", "content"]


async def test_store_returns_the_entry_and_its_transaction(db: Path) -> None:
    async with knowledge(db) as kb:
        data = await kb.store("python/gil", "CPython has a global interpreter lock.", confidence=0.9, tags=["CPython"])
        assert data["status"] == "ok" and data["created"] is True
        entry = data["entry"]
        assert entry["id"] == 1 and data["txId"] == 1
        assert (entry["topic"], entry["confidence"], entry["tags"]) == ("python/gil", 0.9, ["cpython"])
        assert entry["recorded_at"].endswith("Z") and "T" in entry["recorded_at"]
        assert data["nextSteps"] == ["Undo with undo(tx_id=1) if this was a mistake."]
        again = await kb.store("python/gil", "CPython has a global interpreter lock.")
        assert (again["status"], again["created"], again["txId"]) == ("info", False, None)
        assert again["entry"]["id"] == 1
        default = await kb.store("rust", "Rust has no GIL.")
        assert default["entry"]["confidence"] == 0.8 and default["entry"]["tags"] == []


async def test_store_rejects_bad_values_with_validation_errors(db: Path) -> None:
    async with knowledge(db) as kb:
        for arguments in (
            {"topic": "t", "content": "c", "confidence": 1.5},
            {"topic": "t" * 201, "content": "c"},
            {"topic": "t", "content": "c", "tags": ["x" * 51]},
            {"topic": "t"},
        ):
            result = await kb.result("store", **arguments)
            assert result.is_error is True
            assert result.structured_content["code"] == "VALIDATION_ERROR", arguments


async def test_an_unknown_argument_is_a_validation_error_not_ignored(db: Path) -> None:
    async with knowledge(db) as kb:
        await kb.store("python", "fact")
        result = await kb.result("query", topic="python", limt=1)  # misspelt: would silently use limit=10
        assert result.is_error is True
        data = result.structured_content
        assert data["code"] == "VALIDATION_ERROR" and data["nextSteps"]
        assert data["message"].startswith("limt: unknown argument (it takes topic, text, tags, min_confidence, limit")
        assert kb.tools["query"].input_schema["additionalProperties"] is False


@pytest.mark.parametrize("version", ERAS)
async def test_store_with_an_empty_topic_needs_input(db: Path, version: str) -> None:
    async with knowledge(db, protocol_version=version) as kb:
        data = await kb.call("store", topic="  ", content="something")
        assert data["kind"] == "needsInput:v1"
        assert [(f["name"], f["required"]) for f in data["fields"]] == [("topic", True), ("content", False)]
        assert (await kb.call("history"))["transactions"] == []


async def test_update_changes_fields_and_bumps_the_version(db: Path) -> None:
    async with knowledge(db) as kb:
        entry_id = (await kb.store("python", "Python 3.12 is current.", tags=["lang"]))["entry"]["id"]
        data = await kb.call(
            "update", id=entry_id, content="Python 3.13 is current.", confidence=0.95, add_tags=["Versions"]
        )
        assert data["kind"] == "entryUpdated:v1" and data["status"] == "ok"
        assert data["changedFields"] == ["content", "confidence", "tags"]
        entry = data["entry"]
        assert entry["content"] == "Python 3.13 is current." and entry["tags"] == ["lang", "versions"]
        assert entry["version"] == 2 and entry["tx_id"] == data["txId"] == 2
        same = await kb.call("update", id=entry_id, confidence=0.95)
        assert (same["status"], same["txId"], same["changedFields"]) == ("info", None, [])
        removed = await kb.call("update", id=entry_id, remove_tags=["lang"], tags=["a", "b"])
        assert removed["entry"]["tags"] == ["a", "b"]


async def test_update_with_a_stale_expected_version_is_a_conflict(db: Path) -> None:
    async with knowledge(db) as kb:
        entry_id = (await kb.store("t", "v1"))["entry"]["id"]
        await kb.call("update", id=entry_id, content="v2", expected_version=1)
        result = await kb.result("update", id=entry_id, content="v3", expected_version=1)
        assert result.is_error is True
        data = result.structured_content
        assert data["code"] == "CONFLICT" and data["retryable"] is False
        assert data["details"] == {"id": entry_id, "current_version": 2, "expected_version": 1}


@pytest.mark.parametrize("tool", ["update", "delete"])
async def test_an_unknown_id_needs_input_with_the_nearest_entries(db: Path, tool: str) -> None:
    async with knowledge(db) as kb:
        empty = await kb.call(tool, id=5, **({"content": "x"} if tool == "update" else {}))
        assert empty["kind"] == "needsInput:v1" and "empty" in empty["summary"]
        for topic in ("alpha", "beta", "gamma"):
            await kb.store(topic, f"{topic} fact")
        data = await kb.call(tool, id=42, **({"content": "x"} if tool == "update" else {}))
        assert data["kind"] == "needsInput:v1" and data["status"] == "info"
        assert data["summary"] == "No entry has id 42"
        (field,) = data["fields"]
        assert field["name"] == "id" and field["suggestions"] == [3, 2, 1]
        assert field["options"] == ["3", "2", "1"]
        assert data["options"][0]["tool"] == tool and data["options"][0]["arguments"]["id"] == 3
        assert data["details"] == {"elicitation": "unsupported"}
        assert len((await kb.call("history"))["transactions"]) == 3  # nothing written


async def test_update_suggestions_prefer_the_topic_hint(db: Path) -> None:
    async with knowledge(db) as kb:
        for topic in ("rust", "python", "go", "zig", "c", "d"):
            await kb.store(topic, f"{topic} fact")
        data = await kb.call("update", id=100, topic="python")
        assert data["fields"][0]["suggestions"][0] == 2


@pytest.mark.parametrize("version", ERAS)
async def test_an_unknown_id_is_elicited_when_the_client_can_answer(db: Path, version: str) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def pick_first(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        schema = params.requested_schema
        assert isinstance(schema, dict)
        return types.ElicitResult(action="accept", content={"id": schema["properties"]["id"]["enum"][0]})

    async with knowledge(db, protocol_version=version, elicitation=pick_first) as kb:
        await kb.store("alpha", "a")
        await kb.store("beta", "b")
        data = await kb.call("update", id=99, content="b, corrected")
        assert data["kind"] == "entryUpdated:v1"
        assert data["entry"]["id"] == 2 and data["entry"]["content"] == "b, corrected"
        history = await kb.call("history")
        assert [tx["op"] for tx in history["transactions"]] == ["update", "store", "store"]  # one write
    assert len(asked) == 1 and "99" in asked[0].message


@pytest.mark.parametrize("version", ERAS)
async def test_an_answer_outside_the_offered_choices_is_refused_and_asked_again(db: Path, version: str) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def first_wrong_then_right(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        schema = params.requested_schema
        assert isinstance(schema, dict)
        choices = schema["properties"]["id"]["enum"]
        return types.ElicitResult(action="accept", content={"id": "1" if len(asked) == 1 else choices[0]})

    async with knowledge(
        db, protocol_version=version, elicitation=first_wrong_then_right, validate_elicitation=False
    ) as kb:
        for i in range(9):
            await kb.store(f"topic {i + 1}", f"fact {i + 1}")
        await kb.call("delete", id=7)  # tx 10
        data = await kb.call("update", id=7, content="corrected")
        assert data["kind"] == "entryUpdated:v1"
        choices = asked[0].requested_schema["properties"]["id"]["enum"]  # type: ignore[index]
        assert "1" not in choices and data["entry"]["id"] == int(choices[0])
        assert len(asked) == 2 and asked[1].message.startswith(
            f"'1' is not one of the choices for id ({', '.join(choices)})."
        )
        entry_one = await kb.read("knowledge://entries/1")
        assert entry_one["item"]["content"] == "fact 1"  # untouched


@pytest.mark.parametrize("version", ERAS)
async def test_answers_that_stay_outside_the_choices_end_in_the_needs_input_payload(db: Path, version: str) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def always_wrong(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"id": "1"})

    async with knowledge(db, protocol_version=version, elicitation=always_wrong, validate_elicitation=False) as kb:
        for topic in ("a", "b", "c"):
            await kb.store(topic, f"{topic} fact")
        await kb.call("delete", id=1)
        data = await kb.call("update", id=1, content="x")
        assert data["kind"] == "needsInput:v1" and data["details"] == {"elicitation": "invalid"}
        assert len(asked) == 3
        assert len((await kb.call("history"))["transactions"]) == 4  # nothing more written


@pytest.mark.parametrize("version", ERAS)
async def test_a_declined_elicitation_returns_the_needs_input_payload(db: Path, version: str) -> None:
    async def decline(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with knowledge(db, protocol_version=version, elicitation=decline) as kb:
        await kb.store("alpha", "a")
        data = await kb.call("delete", id=7)
        assert data["kind"] == "needsInput:v1" and data["details"] == {"elicitation": "decline"}
        assert (await kb.call("query", topic="alpha"))["total"] == 1


async def test_query_by_topic_text_tags_and_confidence(db: Path) -> None:
    async with knowledge(db) as kb:
        await kb.store("python/gil", "The GIL serialises bytecode.", confidence=0.9, tags=["cpython"])
        await kb.store("python/typing", "Typing is gradual.", confidence=0.6, tags=["typing"])
        await kb.store("rust/ownership", "Ownership replaces a GC.", confidence=0.95)
        by_topic = await kb.call("query", topic="python")
        assert by_topic["kind"] == "entrySearchResults:v1"
        assert [e["topic"] for e in by_topic["entries"]] == ["python/gil", "python/typing"]  # most confident first
        assert by_topic["total"] == 2 and by_topic["asOfTxId"] == 3
        by_text = await kb.call("query", text="GIL bytecode")
        assert [e["id"] for e in by_text["entries"]] == [1] and by_text["query"]["terms"] == ["gil", "bytecode"]
        by_tag = await kb.call("query", topic="python", tags=["Typing"])
        assert [e["id"] for e in by_tag["entries"]] == [2]
        confident = await kb.call("query", text="the", min_confidence=0.8)
        assert confident["total"] == 1
        limited = await kb.call("query", topic="o", limit=1)
        assert limited["total"] == 3 and len(limited["entries"]) == 1
        assert limited["nextSteps"] == [
            "2 more match: call again with limit=3, or read knowledge://entries?topic=o "
            "(every match, a page at a time)."
        ]
        none = await kb.call("query", text="haskell")
        assert (none["status"], none["total"], none["entries"]) == ("info", 0, [])


async def test_query_results_embed_entries_as_json_resources_and_json_comes_last(db: Path) -> None:
    async with knowledge(db) as kb:
        await kb.store("python", "fact one")
        await kb.store("python", "fact two")
        result = await kb.result("query", topic="python", format="both")
        first, *embedded, last = result.content
        assert isinstance(first, types.TextContent) and mime(first) == "text/markdown"
        assert isinstance(last, types.TextContent) and mime(last) == "application/json"
        assert json.loads(last.text) == result.structured_content
        assert len(embedded) == 2
        for block in embedded:
            assert isinstance(block, types.EmbeddedResource)
            assert block.resource.mime_type == "application/json"
            assert json.loads(block.resource.text or "") == await kb.read(block.resource.uri)
        md = await kb.result("query", topic="python")
        assert [mime(b) for b in texts(md)] == ["text/markdown"]
        assert md.structured_content["tokenUsage"]["estimated"] is True


async def test_the_query_echo_omits_what_was_not_given_and_names_the_format(db: Path) -> None:
    async with knowledge(db) as kb:
        await kb.store("python", "fact", tags=["lang"])
        plain = await kb.call("query", topic="python")
        assert plain["query"] == {"topic": "python", "terms": [], "tags": [], "limit": 10, "format": "markdown"}
        full = await kb.call("query", text="fact", tags=["Lang"], min_confidence=0.5, limit=3, format="json")
        assert full["query"] == {
            "text": "fact",
            "terms": ["fact"],
            "tags": ["lang"],
            "minConfidence": 0.5,
            "limit": 3,
            "format": "json",
        }


async def test_every_error_and_needs_input_carries_a_next_step(db: Path) -> None:
    async with knowledge(db, protocol_version=HANDSHAKE) as kb:
        entry_id = (await kb.store("t", "v1"))["entry"]["id"]
        await kb.call("update", id=entry_id, content="v2")
        results = [
            await kb.call("update", id=entry_id, content="v3", expected_version=1),  # CONFLICT
            await kb.call("update", id=entry_id, content="   "),  # cannot be made empty
            await kb.call("store", topic="t", content="c", confidence=2),  # VALIDATION_ERROR from the schema
            await kb.call("query", topic="t", limt=1),  # unknown argument
            await kb.call("undo", tx_id=1),  # CONFLICT: changed since
            await kb.call("undo", tx_id=99),  # needs input
            await kb.call("query"),  # needs input
            await kb.call("relate", subject="a", predicate=" ", object="b"),  # needs input
            await kb.call("update", id=entry_id),  # needs input: nothing to change
            await kb.call("store", topic=" ", content="c"),  # needs input
            await kb.call("query_graph", node="nowhere"),  # needs input
        ]
        for data in results:
            assert data["kind"] in ("toolError:v1", "needsInput:v1"), data
            assert data["nextSteps"] and all(isinstance(step, str) and step for step in data["nextSteps"]), data
        conflict = results[0]
        assert conflict["nextSteps"] == [
            f"Read entry {entry_id} again (it is at version 2) and retry with expected_version=2 if your change "
            "still applies."
        ]


async def test_the_inline_budget_never_cuts_the_machine_contract(db: Path) -> None:
    """12 facts of ~100 characters, limit 10, format json: 10 entries whole (it used to be 5 of 12 cut to fit);
    long facts come back whole in structuredContent and the JSON block, only the markdown preview is short, and
    saying so; an update from what query returned saves the whole text."""
    async with knowledge(db) as kb:
        for i in range(12):
            await kb.store("bulk", f"fact number {i:02} " + "padding " * 11)
        as_json = await kb.result("query", topic="bulk", limit=10, format="json")
        data = as_json.structured_content
        assert (data["truncated"], data["total"], len(data["entries"])) == (False, 12, 10)
        assert json.loads(texts(as_json)[0].text) == data
        assert data["fullResult"] == "knowledge://entries?topic=bulk"
        long = "A long fact. " + "word " * 400
        stored = (await kb.store("long", long))["entry"]
        both = await kb.result("query", topic="long", format="both")
        markdown, *_, json_block = texts(both)
        (entry,) = both.structured_content["entries"]
        assert (
            entry["content"] == long.strip()
            and json.loads(json_block.text)["entries"][0]["content"] == entry["content"]
        )
        assert "—" in markdown.text and "…" in markdown.text and long.strip() not in markdown.text
        assert "the structured result has them whole" in markdown.text
        await kb.call("update", id=stored["id"], content=entry["content"], confidence=0.5)
        assert (await kb.read(f"knowledge://entries/{stored['id']}"))["item"]["content"] == long.strip()


async def test_a_big_query_result_previews_its_markdown_and_links_the_full_resource(db: Path) -> None:
    async with knowledge(db) as kb:
        for i in range(30):
            await kb.store("bulk", f"fact number {i} " + "padding " * 40)
        result = await kb.result("query", topic="bulk", limit=30, format="both")
        data = result.structured_content
        assert data["truncated"] is False and data["total"] == 30 and len(data["entries"]) == 30
        links = [c for c in result.content if isinstance(c, types.ResourceLink)]
        assert [link.uri for link in links] == ["knowledge://entries?topic=bulk"]
        markdown = texts(result)[0]
        assert len(markdown.text) <= 2000
        assert (
            "of the 30 entries shown; all 30 in the JSON block below, and at `knowledge://entries?topic=bulk`"
            in markdown.text
        )
        full = await kb.read("knowledge://entries?topic=bulk&limit=200")
        assert len(full["items"]) == 30


async def test_past_the_data_limit_whole_entries_are_left_out_and_named(db: Path) -> None:
    async with knowledge(db) as kb:
        for i in range(20):
            await kb.store("huge", f"{i:02} " + "z" * 19_990)  # 20 x 20,000 characters: over 256 KiB of JSON
        result = await kb.result("query", topic="huge", limit=20, format="json")
        data = result.structured_content
        assert data["truncated"] is True and data["total"] == 20
        kept = data["entries"]
        assert 0 < len(kept) < 20 and all(len(e["content"]) == 19_993 for e in kept)  # whole, not cut
        every = [e["id"] for e in (await kb.read("knowledge://entries?topic=huge&limit=200"))["items"]]
        assert data["omitted"]["field"] == "entries"
        assert sorted([e["id"] for e in kept] + data["omitted"]["ids"]) == sorted(every)
        assert data["nextSteps"][-1].endswith("read knowledge://entries?topic=huge for them.")
        assert [c.uri for c in result.content if isinstance(c, types.ResourceLink)] == [
            "knowledge://entries?topic=huge"
        ]


async def test_raise_limit_is_suggested_only_when_it_can_help(db: Path) -> None:
    async with knowledge(db) as kb:
        for i in range(101):
            await kb.store("many", f"fact {i}")
        at_most = await kb.call("query", topic="many", limit=100)
        assert at_most["nextSteps"] == [
            "1 more match: read knowledge://entries?topic=many (every match, a page at a time)."
        ]
        history = await kb.call("history", limit=100)
        assert history["total"] == 101 and "limit" not in history["nextSteps"][0]
        fewer = await kb.call("history", limit=5, entry_id=1)
        assert (fewer["total"], fewer["fullResult"]) == (1, "knowledge://history/transactions?entry_id=1")


@pytest.mark.parametrize("version", ERAS)
async def test_an_empty_or_too_short_query_needs_input(db: Path, version: str) -> None:
    async with knowledge(db, protocol_version=version) as kb:
        await kb.store("python", "fact")
        empty = await kb.call("query")
        assert empty["kind"] == "needsInput:v1"
        assert empty["reason"] == "The query is empty: give a topic or some words to look for."
        assert empty["fields"][0]["suggestions"] == ["python"]
        option = {"label": "Entries about python", "tool": "query", "arguments": {"topic": "python"}}
        assert empty["options"] == [option]
        short = await kb.call("query", text="a ? !")
        assert short["kind"] == "needsInput:v1" and "too short" in short["reason"]


@pytest.mark.parametrize("version", ERAS)
async def test_an_empty_query_is_elicited_when_the_client_can_answer(db: Path, version: str) -> None:
    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"topic": "python"})

    async with knowledge(db, protocol_version=version, elicitation=answer) as kb:
        await kb.store("python", "fact")
        data = await kb.call("query")
        assert data["kind"] == "entrySearchResults:v1" and data["total"] == 1


async def test_a_huge_query_is_a_validation_error(db: Path) -> None:
    async with knowledge(db) as kb:
        result = await kb.result("query", text="word " * 200)
        assert result.is_error is True and result.structured_content["code"] == "VALIDATION_ERROR"
        assert "text" in result.structured_content["message"]
        too_many = await kb.result("query", topic="x", limit=1000)
        assert too_many.structured_content["code"] == "VALIDATION_ERROR"


def _walk(schema: Any, found: list[tuple[str, dict[str, Any]]], where: str = "") -> None:
    if isinstance(schema, dict):
        if schema.get("type") in ("string", "integer"):
            found.append((where, schema))
        for key, value in schema.items():
            _walk(value, found, f"{where}/{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            _walk(value, found, f"{where}/{i}")


def test_input_schemas_bound_every_string_and_integer(db: Path) -> None:
    from jsonrpc_mcp.examples.knowledge import create_server

    server = create_server(str(db))
    try:
        tools = server.list_tools()
    finally:
        server.close()
    for tool in tools:
        found: list[tuple[str, dict[str, Any]]] = []
        _walk(tool.input_schema, found, tool.name)
        assert found
        for where, schema in found:
            if schema["type"] == "string":
                assert isinstance(schema.get("maxLength"), int), where
            else:
                assert isinstance(schema.get("minimum"), int) and isinstance(schema.get("maximum"), int), where


HUGE = 2**70


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("update", {"id": HUGE, "content": "x"}, "id"),
        ("update", {"id": 1, "content": "x", "expected_version": HUGE}, "expected_version"),
        ("delete", {"id": HUGE}, "id"),
        ("delete", {"id": 0}, "id"),
        ("undo", {"tx_id": HUGE}, "tx_id"),
        ("history", {"entry_id": HUGE}, "entry_id"),
        ("query_graph", {"node": "a", "target": "t" * 100_000}, "target"),
        ("query_graph", {"node": "a", "predicate": "p" * 201}, "predicate"),
    ],
)
async def test_out_of_range_input_is_a_validation_error_not_an_internal_one(
    db: Path, name: str, arguments: dict[str, Any], field: str
) -> None:
    async with knowledge(db) as kb:
        await kb.store("t", "c")
        await kb.call("relate", subject="a", predicate="b", object="c")
        result = await kb.result(name, **arguments)
        assert result.is_error is True
        data = result.structured_content
        assert data["code"] == "VALIDATION_ERROR" and data["message"].startswith(f"{field}: "), data
        assert data["nextSteps"]
        assert sum(len(block.text) for block in texts(result)) < 2000  # the huge value is not echoed back


async def test_delete_removes_the_entry_and_undo_brings_it_back(db: Path) -> None:
    async with knowledge(db) as kb:
        entry = (await kb.store("t", "doomed", tags=["x"]))["entry"]
        deleted = await kb.call("delete", id=entry["id"])
        assert deleted["kind"] == "entryDeleted:v1" and deleted["txId"] == 2
        assert deleted["entry"]["content"] == "doomed"
        assert (await kb.call("query", topic="t"))["total"] == 0
        undone = await kb.call("undo", tx_id=2)
        assert undone["kind"] == "undoResult:v1"
        back = (await kb.call("query", topic="t"))["entries"][0]
        assert (back["id"], back["content"], back["tags"]) == (entry["id"], "doomed", ["x"])


async def test_relate_is_idempotent(db: Path) -> None:
    async with knowledge(db) as kb:
        data = await kb.call("relate", subject="python", predicate="has", object="GIL")
        assert data["kind"] == "tripleRelated:v1" and data["created"] is True and data["txId"] == 1
        triple = data["triple"]
        assert (triple["subject"], triple["predicate"], triple["object"]) == ("python", "has", "GIL")
        again = await kb.call("relate", subject="python", predicate="has", object="GIL")
        assert (again["created"], again["txId"], again["status"]) == (False, None, "info")
        empty = await kb.call("relate", subject="python", predicate=" ", object="GIL")
        assert empty["kind"] == "needsInput:v1" and [f["name"] for f in empty["fields"]] == ["predicate"]


async def test_query_graph_walks_neighbours_to_a_depth_and_finds_paths(db: Path) -> None:
    async with knowledge(db) as kb:
        for s, p, o in (("a", "knows", "b"), ("b", "knows", "c"), ("c", "knows", "d"), ("a", "likes", "c")):
            await kb.call("relate", subject=s, predicate=p, object=o)
        one = await kb.call("query_graph", node="a")
        assert one["kind"] == "graphResults:v1" and one["depth"] == 1
        assert sorted(t["id"] for t in one["triples"]) == [1, 4] and one["nodes"] == ["a", "b", "c"]
        two = await kb.call("query_graph", node="a", depth=2)
        assert sorted(t["id"] for t in two["triples"]) == [1, 2, 3, 4]
        knows = await kb.call("query_graph", node="a", depth=3, predicate="knows")
        assert sorted(t["id"] for t in knows["triples"]) == [1, 2, 3]
        paths = await kb.call("query_graph", node="a", target="d", depth=3)
        assert paths["paths"] == [[4, 3]] and paths["target"] == "d"
        shortest = await kb.call("query_graph", node="a", target="c", depth=2)
        assert shortest["paths"] == [[4]]  # a-b-c is longer
        far = await kb.call("query_graph", node="a", target="d", depth=1)
        assert (far["paths"], far["status"]) == ([], "info")
        capped = await kb.call("query_graph", node="a", depth=4, limit=2)
        assert (capped["truncated"], capped["total"], len(capped["triples"])) == (False, 4, 2)
        await kb.call("relate", subject="b", predicate="near", object="d")  # a second two-hop path to d
        two_ways = await kb.call("query_graph", node="a", target="d", depth=2)
        assert sorted(two_ways["paths"]) == [[1, 5], [4, 3]]


async def test_query_graph_on_a_busy_node_returns_the_first_page_and_links_the_neighbourhood(db: Path) -> None:
    async with knowledge(db) as kb:
        for i in range(60):
            await kb.call("relate", subject="hub", predicate="links", object=f"spoke {i:02}")
        await kb.call("relate", subject="spoke 00", predicate="links", object="rim")  # two hops away
        result = await kb.result("query_graph", node="hub", format="both")
        data = result.structured_content
        assert (data["truncated"], data["total"], len(data["triples"])) == (False, 60, 50)
        assert data["nodes"] == ["hub", *(f"spoke {i:02}" for i in range(50))]  # the nodes of these triples only
        link = "knowledge://graph/triples?node=hub&depth=1"
        assert data["fullResult"] == link
        assert data["nextSteps"] == [
            f"10 more relations within 1 hop: call again with limit=60, or read {link} (all 60, a page at a time)."
        ]
        assert [c.uri for c in result.content if isinstance(c, types.ResourceLink)] == [link]
        markdown = texts(result)[0].text
        assert "No relations" not in markdown and "`hub` —*links*→ `spoke 00`" in markdown and len(markdown) <= 2000
        seen: list[int] = []
        page = await kb.read(f"{link}&limit=25")
        while True:
            seen += [t["id"] for t in page["items"]]
            if page["next_cursor"] is None:
                break
            page = await kb.read(f"{link}&limit=25&cursor={page['next_cursor']}")
        assert seen == list(range(1, 61))
        deep = await kb.call("query_graph", node="hub", depth=2, limit=200)
        two_hops = await kb.read("knowledge://graph/triples?node=hub&depth=2&limit=200")
        assert sorted(t["id"] for t in deep["triples"]) == [t["id"] for t in two_hops["items"]] == list(range(1, 62))
        assert deep["total"] == 61 and not deep["nextSteps"]
        few = await kb.call("query_graph", node="hub", limit=200, predicate="links")
        assert few["total"] == 60 and few["fullResult"].endswith("&predicate=links")


@pytest.mark.parametrize("query", ["node=hub&depth=5", "node=hub&depth=x", "node=" + "n" * 201, "entry_id=0"])
async def test_neighbourhood_and_history_filters_refuse_bad_values(db: Path, query: str) -> None:
    async with knowledge(db) as kb:
        await kb.call("relate", subject="hub", predicate="links", object="x")
        uri = "knowledge://history/transactions" if query.startswith("entry_id") else "knowledge://graph/triples"
        with pytest.raises(RpcError) as raised:
            await kb.read(f"{uri}?{query}")
        assert raised.value.code == -32602


async def test_query_graph_on_an_unknown_node_suggests_similar_ones(db: Path) -> None:
    async with knowledge(db) as kb:
        await kb.call("relate", subject="python", predicate="has", object="GIL")
        data = await kb.call("query_graph", node="pyth")
        assert data["kind"] == "needsInput:v1"
        assert data["fields"][0]["suggestions"] == ["python"]
        other = await kb.call("query_graph", node="zzz")
        assert set(other["fields"][0]["suggestions"]) == {"python", "GIL"}


@pytest.mark.parametrize("version", ERAS)
async def test_query_graph_on_an_unknown_node_asks_for_one_when_the_client_can(db: Path, version: str) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def pick_first(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        schema = params.requested_schema
        assert isinstance(schema, dict)
        return types.ElicitResult(action="accept", content={"node": schema["properties"]["node"]["enum"][0]})

    async with knowledge(db, protocol_version=version, elicitation=pick_first) as kb:
        await kb.call("relate", subject="python", predicate="has", object="GIL")
        data = await kb.call("query_graph", node="pyth")
        assert data["kind"] == "graphResults:v1" and data["node"] == "python"
        assert [t["object"] for t in data["triples"]] == ["GIL"]
        assert len(asked) == 1 and "pyth" in asked[0].message
    async with knowledge(db.with_name("empty.db"), protocol_version=version, elicitation=pick_first) as kb:
        nothing = await kb.call("query_graph", node="x")  # no node to offer: nothing to ask
        assert nothing["kind"] == "needsInput:v1" and nothing["nextSteps"] == ["Record relations with relate first."]
    assert len(asked) == 1


async def test_undo_of_an_undo_redoes(db: Path) -> None:
    async with knowledge(db) as kb:
        entry_id = (await kb.store("t", "original"))["entry"]["id"]
        await kb.call("update", id=entry_id, content="changed")  # tx 2
        undo = await kb.call("undo", tx_id=2)  # tx 3
        assert undo["txId"] == 3 and undo["undone"]["id"] == 2 and undo["undone"]["undone_by"] == 3
        assert undo["transaction"]["undoes"] == 2
        assert (await kb.read(f"knowledge://entries/{entry_id}"))["item"]["content"] == "original"
        redo = await kb.call("undo", tx_id=3)  # tx 4
        assert redo["undone"]["undone_by"] == 4
        assert (await kb.read(f"knowledge://entries/{entry_id}"))["item"]["content"] == "changed"
        history = {tx["id"]: tx for tx in (await kb.call("history"))["transactions"]}
        assert history[2]["undone_by"] is None  # its effect stands again
        again = await kb.call("undo", tx_id=4)  # undo the redo: back to the original
        assert again["undone"]["id"] == 4
        assert (await kb.read(f"knowledge://entries/{entry_id}"))["item"]["content"] == "original"
        history = {tx["id"]: tx for tx in (await kb.call("history"))["transactions"]}
        assert history[2]["undone_by"] == 3 and history[3]["undone_by"] is None


async def test_undo_refuses_what_was_undone_or_changed_since(db: Path) -> None:
    async with knowledge(db) as kb:
        entry_id = (await kb.store("t", "v1"))["entry"]["id"]
        await kb.call("update", id=entry_id, content="v2")  # tx 2
        await kb.call("update", id=entry_id, content="v3")  # tx 3
        blocked = await kb.result("undo", tx_id=2)
        assert blocked.is_error is True
        data = blocked.structured_content
        assert data["code"] == "CONFLICT" and data["details"]["conflicting_tx_ids"] == [3]
        assert data["nextSteps"] == ["Undo the later transactions first, newest first: [3]."]
        await kb.call("undo", tx_id=3)  # tx 4
        twice = await kb.result("undo", tx_id=3)
        assert twice.structured_content["code"] == "CONFLICT"
        assert twice.structured_content["nextSteps"] == ["Undo transaction 4 to redo it."]
        assert (await kb.call("undo", tx_id=2))["kind"] == "undoResult:v1"  # now nothing stands in the way
        assert (await kb.read(f"knowledge://entries/{entry_id}"))["item"]["content"] == "v1"


async def test_undo_needs_a_known_transaction(db: Path) -> None:
    async with knowledge(db) as kb:
        nothing = await kb.call("undo")
        assert nothing["kind"] == "needsInput:v1" and nothing["fields"][0]["suggestions"] == []
        await kb.store("a", "1")
        await kb.store("b", "2")
        unknown = await kb.call("undo", tx_id=50)
        assert unknown["summary"] == "No transaction has id 50"
        assert unknown["fields"][0]["suggestions"] == [2, 1]
        assert unknown["options"][0] == {"label": "tx 2: store #2 b", "tool": "undo", "arguments": {"tx_id": 2}}


async def test_undo_of_a_relate_and_a_conflicting_re_relate(db: Path) -> None:
    async with knowledge(db) as kb:
        await kb.call("relate", subject="a", predicate="is", object="b")  # tx 1
        await kb.call("undo", tx_id=1)  # tx 2: the triple is gone
        assert (await kb.read("knowledge://graph/triples"))["items"] == []
        await kb.call("relate", subject="a", predicate="is", object="b")  # tx 3: a new triple, same content
        clash = await kb.result("undo", tx_id=2)  # would restore a duplicate of it
        assert clash.structured_content["code"] == "CONFLICT"
        assert len((await kb.read("knowledge://graph/triples"))["items"]) == 1


async def test_history_lists_transactions_newest_first(db: Path) -> None:
    async with knowledge(db) as kb:
        first = (await kb.store("a", "1"))["entry"]["id"]
        await kb.store("b", "2")
        await kb.call("update", id=first, content="1b")
        data = await kb.call("history", format="json")
        assert data["kind"] == "transactionHistory:v1" and data["asOfTxId"] == 3
        assert [(tx["id"], tx["op"]) for tx in data["transactions"]] == [(3, "update"), (2, "store"), (1, "store")]
        assert data["transactions"][0]["changed_ids"] == {"entries": [first], "triples": []}
        only = await kb.call("history", entry_id=first, limit=1)
        assert [tx["id"] for tx in only["transactions"]] == [3]
        md = texts(await kb.result("history"))[0].text
        assert md.startswith("**OK:** 3 transactions") and "**tx 3** `update`" in md


async def test_markdown_is_the_default_and_json_is_on_request(db: Path) -> None:
    async with knowledge(db) as kb:
        result = await kb.result("store", topic="t", content="c")
        assert [mime(b) for b in texts(result)] == ["text/markdown"]
        assert texts(result)[0].text.startswith("**OK:** Stored #1 (t) in tx 1")
        as_json = await kb.result("history", format="json")
        assert [mime(b) for b in texts(as_json)] == ["application/json"]


async def test_tool_errors_are_never_json_rpc_errors(db: Path) -> None:
    async with knowledge(db, protocol_version=HANDSHAKE) as kb:
        for name, arguments in (
            ("update", {"id": "not a number"}),
            ("query_graph", {"node": "x", "depth": 9}),
            ("undo", {"tx_id": -1}),
        ):
            result: Any = await kb.result(name, **arguments)
            assert result.structured_content["kind"] in ("toolError:v1", "needsInput:v1"), name
