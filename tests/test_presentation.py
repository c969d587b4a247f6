"""The presentation helpers' contracts: kinds and envelope, format gating, the inline budget, needs-input with and
without elicitation (both eras), toolError:v1 codes, the X-Response-Format header hook, and client-side retry."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import anyio
import jsonschema_rs
import msgspec
import pytest

from jsonrpc_mcp import Client, Context, Server, types
from jsonrpc_mcp.jsonrpc.streams import Arrival, Intake, MessageStream, Outgoing
from jsonrpc_mcp.presentation import (
    ErrorCode,
    Format,
    InputField,
    InputOption,
    NeedsInput,
    Payload,
    Presented,
    RateLimit,
    TokenUsage,
    ToolErrorPayload,
    ToolFailure,
    ask,
    backoff_delay,
    call_tool_with_retry,
    check_answers,
    elicitation_schema,
    fit_data,
    fit_summary,
    is_retryable,
    kind_of,
    output_schema,
    present,
    presented_tool,
    resolve_format,
    tool_error,
)
from jsonrpc_mcp.transports.memory import memory_pair

HANDSHAKE = "2025-11-25"
TIMEOUT = 10


class Item(msgspec.Struct):
    n: int
    text: str


class ItemList(Payload, tag="itemList:v1"):
    """A list of items (the test kind)."""

    items: list[Item]
    total: int

    trim_field: ClassVar[str | None] = "items"

    def markdown(self) -> str:
        return "\n".join(f"- {i.n}: {i.text}" for i in self.items)


def items(count: int, size: int = 40) -> ItemList:
    return ItemList(summary=f"{count} items", items=[Item(i, "x" * size) for i in range(count)], total=count)


def texts(result: types.CallToolResult) -> list[types.TextContent]:
    return [c for c in result.content if isinstance(c, types.TextContent)]


def mime(block: types.TextContent) -> Any:
    return block.meta.get("mimeType") if isinstance(block.meta, dict) else None


# --- kinds, envelope, schema ---------------------------------------------------------------------------------


def test_every_payload_carries_a_versioned_kind_and_the_envelope() -> None:
    assert kind_of(ItemList) == "itemList:v1"
    assert kind_of(NeedsInput) == "needsInput:v1"
    assert kind_of(ToolErrorPayload) == "toolError:v1"
    data = msgspec.to_builtins(items(1))
    assert data["kind"] == "itemList:v1"
    assert {"status", "summary", "nextSteps", "truncated"} <= data.keys()
    assert "details" not in data and "tokenUsage" not in data and "rateLimit" not in data


def test_output_schema_is_an_object_union_of_the_kinds_with_needs_input_and_tool_error() -> None:
    schema = output_schema(ItemList)
    assert schema["type"] == "object"
    refs = [branch["$ref"].rsplit("/", 1)[1] for branch in schema["anyOf"]]
    assert refs == ["ItemList", "NeedsInput", "ToolErrorPayload"]
    for name in refs:
        definition = schema["$defs"][name]
        assert {"kind", "status", "summary", "nextSteps", "truncated"} <= set(definition["required"])
    assert schema["$defs"]["ItemList"]["properties"]["kind"] == {"enum": ["itemList:v1"]}
    assert schema["$defs"]["ItemList"]["properties"]["summary"]["maxLength"] == 80
    validator = jsonschema_rs.validator_for(schema)
    for payload in (items(2), tool_error("NOT_FOUND", "gone"), NeedsInput(summary="s", reason="r", fields=[])):
        assert validator.is_valid(msgspec.to_builtins(payload))
    assert not validator.is_valid({"kind": "itemList:v1", "summary": "no items field"})


def test_summary_is_one_line_of_at_most_80_characters() -> None:
    assert fit_summary("short") == "short"
    long = fit_summary("word " * 40)
    assert len(long) == 80 and long.endswith("…")
    assert fit_summary("two\nlines") == "two lines"
    result = present(ItemList(summary="y" * 200, items=[], total=0))
    assert len(result.structured_content["summary"]) == 80


def test_tool_error_payload_defaults_retryable_by_code() -> None:
    assert tool_error(ErrorCode.RATE_LIMITED, "slow down").retryable is True
    assert tool_error("DEPENDENCY_ERROR", "down").retryable is True
    assert tool_error("NOT_FOUND", "gone").retryable is False
    assert tool_error("CONFLICT", "changed", retryable=True).retryable is True
    with pytest.raises(ValueError):
        tool_error("NOT_A_CODE", "x")


# --- format gating -------------------------------------------------------------------------------------------


def test_markdown_is_the_default_and_structured_content_is_always_set() -> None:
    result = present(items(2))
    (block,) = result.content
    assert isinstance(block, types.TextContent) and mime(block) == "text/markdown"
    assert block.text.startswith("**OK:** 2 items")
    assert result.structured_content["kind"] == "itemList:v1"
    assert result.is_error is False


def test_json_format_is_one_application_json_block_equal_to_structured_content() -> None:
    result = present(items(2), format="json")
    (block,) = result.content
    assert isinstance(block, types.TextContent) and mime(block) == "application/json"
    assert json.loads(block.text) == result.structured_content


def test_both_puts_markdown_first_and_json_last_with_extra_blocks_between() -> None:
    link = types.ResourceLink(uri="test://x", name="x")
    result = present(Presented(items(2), blocks=[link]), format="both")
    first, middle, last = result.content
    assert isinstance(first, types.TextContent) and mime(first) == "text/markdown"
    assert middle == link
    assert isinstance(last, types.TextContent) and mime(last) == "application/json"
    assert json.loads(last.text) == result.structured_content


def test_error_payloads_are_is_error_results_in_every_format() -> None:
    for fmt in ("markdown", "json", "both"):
        result = present(tool_error("NOT_FOUND", "No such thing."), format=fmt)
        assert result.is_error is True
        assert result.structured_content["kind"] == "toolError:v1"
        assert result.structured_content["code"] == "NOT_FOUND"
    md = texts(present(tool_error("NOT_FOUND", "No such thing.")))[0].text
    assert md.startswith("**Error NOT_FOUND:** No such thing.")


def test_token_usage_and_rate_limit_hints_travel_in_the_envelope() -> None:
    payload = items(1)
    payload.rate_limit = RateLimit(limit=10, remaining=3, retry_after_ms=500)
    result = present(payload, estimate_tokens=True)
    data = result.structured_content
    assert data["rateLimit"] == {"limit": 10, "remaining": 3, "retryAfterMs": 500}
    assert data["tokenUsage"]["estimated"] is True and data["tokenUsage"]["outputTokens"] > 0
    explicit = items(1)
    explicit.token_usage = TokenUsage(input_tokens=5, output_tokens=7, total_tokens=12)
    assert present(explicit).structured_content["tokenUsage"]["totalTokens"] == 12


# --- the inline budget ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["markdown", "json", "both"])
def test_the_budget_is_the_markdowns_and_the_structured_data_stays_whole(fmt: Format) -> None:
    result = present(Presented(items(200), full_uri="test://items", full_name="all items"), format=fmt)
    data = result.structured_content
    assert data["truncated"] is False and "omitted" not in data
    assert data["items"] == [{"n": i, "text": "x" * 40} for i in range(200)] and data["total"] == 200
    assert data["fullResult"] == "test://items"
    json_blocks = [b for b in texts(result) if mime(b) == "application/json"]
    assert [json.loads(b.text) for b in json_blocks] == ([data] if fmt != "markdown" else [])
    links = [(c.uri, c.name, c.mime_type) for c in result.content if isinstance(c, types.ResourceLink)]
    markdown = [b.text for b in texts(result) if mime(b) == "text/markdown"]
    if fmt == "json":
        assert markdown == [] and links == []  # nothing is shown in part: no link needed
        return
    (text,) = markdown
    assert len(text) <= 2000
    where = "the JSON block below" if fmt == "both" else "structuredContent (format json sends it as text)"
    shown = text.count("\n- ")
    assert text.endswith(f"_Preview: {shown} of the 200 items shown; all 200 in {where}, and at `test://items`._")
    assert 0 < shown < 200
    assert links == [("test://items", "all items", "application/json")]


def test_a_result_that_fits_is_whole_everywhere_and_has_no_link() -> None:
    result = present(Presented(items(3), full_uri="test://items"), format="both")
    assert result.structured_content["truncated"] is False
    assert result.structured_content["fullResult"] == "test://items"
    assert "Preview" not in texts(result)[0].text
    assert not any(isinstance(c, types.ResourceLink) for c in result.content)
    more = present(Presented(items(3), full_uri="test://items", more=True))  # a limit left items out: link them
    assert [c.uri for c in more.content if isinstance(c, types.ResourceLink)] == ["test://items"]


def test_markdown_that_cannot_shrink_is_cut_while_the_data_stays_whole() -> None:
    payload = Payload(summary="one huge detail", details={"blob": "z" * 5000})
    result = present(payload)
    assert result.structured_content["truncated"] is False
    assert result.structured_content["details"] == {"blob": "z" * 5000}
    (block,) = texts(result)
    assert len(block.text) <= 2000 and "(cut to fit)" in block.text
    assert "_Preview: cut to fit; the whole result in structuredContent" in block.text


def test_custom_limit() -> None:
    result = present(items(50), limit=500, format="both")
    markdown, data = texts(result)
    assert len(markdown.text) <= 500
    assert len(json.loads(data.text)["items"]) == 50 and result.structured_content["truncated"] is False


def test_structured_data_past_its_limit_leaves_out_whole_items_and_names_them() -> None:
    big = items(100, size=1000)
    result = present(Presented(big, full_uri="test://items"), format="both", data_limit=20_000)
    data = result.structured_content
    kept = data["items"]
    assert data["truncated"] is True and 0 < len(kept) < 100
    assert all(item == {"n": i, "text": "x" * 1000} for i, item in enumerate(kept))  # whole, never altered
    assert data["omitted"] == {"field": "items", "ids": list(range(len(kept), 100))}  # no id: positions
    assert len(json.dumps(data, separators=(",", ":"))) <= 20_000
    gone = 100 - len(kept)
    assert (
        data["nextSteps"][-1]
        == f"{gone} of the 100 items were left out to stay under 19 KiB: read test://items for them."
    )
    assert json.loads(texts(result)[-1].text) == data
    assert [c.uri for c in result.content if isinstance(c, types.ResourceLink)] == ["test://items"]
    fits = present(Presented(big, full_uri="test://items"), format="json")  # 100 KB: under the 256 KiB default
    assert len(fits.structured_content["items"]) == 100 and fits.structured_content["truncated"] is False


def test_items_left_out_are_named_by_their_ids() -> None:
    class Row(msgspec.Struct):
        id: int
        text: str

    class Rows(Payload, tag="rows:v1"):
        rows: list[Row]
        trim_field: ClassVar[str | None] = "rows"

    payload = Rows(summary="rows", rows=[Row(id=100 + i, text="y" * 500) for i in range(10)])
    data = fit_data(payload, 2_000)
    assert isinstance(data, Rows) and data.truncated is True
    assert [row.id for row in data.rows] + data.omitted.ids == list(range(100, 110))  # type: ignore[union-attr]
    assert data.next_steps[-1].endswith("ask for fewer at a time.")


# --- formats from the request headers ------------------------------------------------------------------------


class _Ctx:
    def __init__(self, headers: dict[str, str]) -> None:
        self.request_headers = headers


def test_resolve_format_explicit_wins_then_header_then_default() -> None:
    ctx: Any = _Ctx({"x-response-format": "JSON "})
    assert resolve_format(ctx, None) == "json"
    assert resolve_format(ctx, "both") == "both"
    assert resolve_format(_Ctx({"x-response-format": "yaml"}), None) == "markdown"  # type: ignore[arg-type]
    assert resolve_format(None, None) == "markdown"
    assert resolve_format(None, None, default="json") == "json"


# --- a real server ----------------------------------------------------------------------------------------------


def demo_server(side_effects: list[str] | None = None) -> Server:
    server = Server("demo")
    done = side_effects if side_effects is not None else []

    @presented_tool(server, ItemList)
    async def listing(ctx: Context, count: int = 2, format: Format | None = None) -> ItemList:
        """List items."""
        return items(count)

    @presented_tool(server, ItemList)
    async def fail(ctx: Context, code: str = "CONFLICT", format: Format | None = None) -> ItemList:
        """Always fails."""
        raise ToolFailure(code, "It changed meanwhile.", details={"id": 7}, next_steps=["Read it again."])

    @presented_tool(server, ItemList)
    async def crash(ctx: Context) -> ItemList:
        """Has a bug."""
        raise RuntimeError("secret /etc/passwd traceback detail")

    @presented_tool(server, ItemList)
    async def named(ctx: Context, name: str = "", format: Format | None = None) -> Any:
        """Needs a name; asks for it."""
        if not name:
            need = NeedsInput(
                summary="Which name?",
                reason="A name is needed.",
                fields=[InputField(name="name", description="Your name", suggestions=["ada"])],
                options=[InputOption(label="Use ada", tool="named", arguments={"name": "ada"})],
            )
            answers = await ask(ctx, need, key="name")
            if answers is None:
                return need
            name = str(answers["name"])
        done.append(name)  # the side effect, after the input is gathered
        return ItemList(summary=f"hello {name}", items=[], total=0)

    return server


@asynccontextmanager
async def connect(server: Server, **options: Any) -> AsyncIterator[Client]:
    with anyio.fail_after(TIMEOUT):
        async with Client.connect_server(server, **options) as client:
            yield client


def validate(tool: types.Tool, result: types.CallToolResult) -> None:
    assert isinstance(tool.output_schema, dict)
    validator = jsonschema_rs.validator_for(tool.output_schema)
    assert validator.is_valid(result.structured_content), result.structured_content


@pytest.mark.anyio
async def test_presented_tools_declare_the_union_output_schema_and_match_it() -> None:
    async with connect(demo_server()) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert set(tools) == {"listing", "fail", "crash", "named"}
        for name, args in (("listing", {}), ("fail", {}), ("crash", {}), ("named", {})):
            validate(tools[name], await client.call_tool(name, args))
        schema = tools["listing"].output_schema
        assert isinstance(schema, dict) and schema["type"] == "object"
        assert "format" in tools["listing"].input_schema["properties"]


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["auto", HANDSHAKE])
async def test_format_argument_gates_the_text_blocks(version: str) -> None:
    async with connect(demo_server(), protocol_version=version) as client:
        md = await client.call_tool("listing", {})
        assert [mime(b) for b in texts(md)] == ["text/markdown"]
        js = await client.call_tool("listing", {"format": "json"})
        assert [mime(b) for b in texts(js)] == ["application/json"]
        both = await client.call_tool("listing", {"format": "both"})
        assert [mime(b) for b in texts(both)] == ["text/markdown", "application/json"]
        assert json.loads(texts(both)[-1].text) == both.structured_content == md.structured_content


@pytest.mark.anyio
async def test_tool_failures_are_tool_error_results_with_stable_codes() -> None:
    async with connect(demo_server()) as client:
        result = await client.call_tool("fail", {"code": "CONFLICT", "format": "json"})
        assert result.is_error is True
        data = result.structured_content
        assert data["kind"] == "toolError:v1" and data["status"] == "error"
        assert (data["code"], data["message"], data["retryable"]) == ("CONFLICT", "It changed meanwhile.", False)
        assert data["details"] == {"id": 7} and data["nextSteps"] == ["Read it again."]
        limited = await client.call_tool("fail", {"code": "RATE_LIMITED"})
        assert limited.structured_content["retryable"] is True


@pytest.mark.anyio
async def test_an_unexpected_exception_is_internal_error_without_internals() -> None:
    async with connect(demo_server()) as client:
        result = await client.call_tool("crash", {})
        assert result.is_error is True
        assert result.structured_content["code"] == "INTERNAL_ERROR"
        wire = msgspec.json.encode(result).decode()
        assert "passwd" not in wire and "RuntimeError" not in wire


@pytest.mark.anyio
async def test_arguments_failing_the_input_schema_are_validation_errors() -> None:
    async with connect(demo_server()) as client:
        result = await client.call_tool("listing", {"count": "many", "format": "json"})
        assert result.is_error is True
        data = result.structured_content
        assert data["kind"] == "toolError:v1" and data["code"] == "VALIDATION_ERROR"
        assert "count" in data["message"]
        assert [mime(b) for b in texts(result)] == ["application/json"]  # the requested format still applies
        bad_format = await client.call_tool("listing", {"format": "yaml"})
        assert bad_format.structured_content["code"] == "VALIDATION_ERROR"


# --- needs input -----------------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["auto", HANDSHAKE])
async def test_without_elicitation_the_tool_answers_with_a_needs_input_payload(version: str) -> None:
    done: list[str] = []
    async with connect(demo_server(done), protocol_version=version) as client:
        result = await client.call_tool("named", {"format": "both"})
    assert result.is_error is False
    data = result.structured_content
    assert data["kind"] == "needsInput:v1" and data["status"] == "info"
    assert data["reason"] == "A name is needed."
    assert data["fields"] == [
        {"name": "name", "type": "string", "description": "Your name", "required": True, "suggestions": ["ada"]}
    ]
    assert data["options"] == [{"label": "Use ada", "tool": "named", "arguments": {"name": "ada"}}]
    assert data["details"] == {"elicitation": "unsupported"}
    assert texts(result)[0].text.startswith("**Needs input:** Which name?")
    assert done == []


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["auto", HANDSHAKE])
async def test_with_elicitation_the_tool_asks_first_and_writes_once(version: str) -> None:
    done: list[str] = []
    asked: list[types.ElicitRequestParams] = []

    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": "grace"})

    async with connect(demo_server(done), protocol_version=version, elicitation=answer) as client:
        result = await client.call_tool("named", {})
        assert client.stateless is (version == "auto")
    assert result.structured_content["summary"] == "hello grace"
    assert done == ["grace"]  # the stateless era replays the tool: the side effect still happens once
    (params,) = asked
    assert params.message == "A name is needed."
    assert params.requested_schema == {
        "type": "object",
        "properties": {"name": {"type": "string", "title": "name", "description": "Your name"}},
        "required": ["name"],
    }


@pytest.mark.anyio
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_elicitation_falls_back_to_the_payload(action: str) -> None:
    async def refuse(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action=action)  # type: ignore[arg-type]

    done: list[str] = []
    async with connect(demo_server(done), protocol_version=HANDSHAKE, elicitation=refuse) as client:
        result = await client.call_tool("named", {})
    assert result.structured_content["kind"] == "needsInput:v1"
    assert result.structured_content["details"] == {"elicitation": action}
    assert done == []


def test_answers_are_checked_against_the_fields_and_converted() -> None:
    fields = [
        InputField(name="id", type="integer", options=["9", "8"]),
        InputField(name="count", type="integer", required=False),
        InputField(name="ratio", type="number", required=False),
        InputField(name="flag", type="boolean", required=False),
        InputField(name="note", required=False),
    ]
    good = {"id": "9", "count": "-3", "ratio": "0.5", "flag": "true", "note": "hi", "extra": 1}
    assert check_answers(fields, good) == ({"id": 9, "count": -3, "ratio": 0.5, "flag": True, "note": "hi"}, [])
    assert check_answers(fields, {"id": 8, "count": 2, "ratio": 1}) == ({"id": 8, "count": 2, "ratio": 1.0}, [])
    _, problems = check_answers(fields, {"id": "1", "count": "²", "ratio": "nan", "flag": "yes", "note": 5})
    assert problems == [
        "'1' is not one of the choices for id (9, 8).",
        "count must be an integer, not '²'.",
        "ratio must be a number, not 'nan'.",
        "flag must be a boolean, not 'yes'.",
        "note must be a string, not 5.",
    ]
    assert check_answers(fields, {"count": True}) == ({}, ["id is required.", "count must be an integer, not True."])


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["auto", HANDSHAKE])
async def test_an_answer_outside_the_options_is_asked_again_under_its_own_key(version: str) -> None:
    server = Server("choices")
    seen: list[Any] = []

    @presented_tool(server, ItemList)
    async def pick(ctx: Context, format: Format | None = None) -> Any:
        """Pick a number."""
        need = NeedsInput(
            summary="Which?", reason="Pick one.", fields=[InputField(name="n", type="integer", options=["2", "3"])]
        )
        answers = await ask(ctx, need, key="n")
        if answers is None:
            return need
        seen.append(answers["n"])
        return ItemList(summary=f"picked {answers['n']}", items=[], total=0)

    messages: list[str] = []

    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        messages.append(params.message)
        return types.ElicitResult(action="accept", content={"n": "7" if len(messages) < 3 else "3"})

    # (a client that sends what it is given: ours checks answers against the schema unless told not to)
    async with connect(server, protocol_version=version, elicitation=answer, validate_elicitation=False) as client:
        result = await client.call_tool("pick", {})
    assert result.structured_content["summary"] == "picked 3" and seen == [3]
    assert messages == ["Pick one.", "'7' is not one of the choices for n (2, 3). Pick one.", messages[1]]


def test_every_error_and_needs_input_has_a_next_step_by_default() -> None:
    for code in ErrorCode:
        assert tool_error(code, "it failed").next_steps, code
    assert tool_error("CONFLICT", "x", next_steps=["Mine."]).next_steps == ["Mine."]
    need = NeedsInput(summary="s", reason="r", fields=[InputField(name="a")])
    assert need.next_steps == ["Call the tool again with the fields listed."]
    chosen = NeedsInput(summary="s", reason="r", fields=[], options=[InputOption(label="x")], next_steps=["Go."])
    assert chosen.next_steps == ["Go."]


def test_elicitation_schema_turns_options_into_a_string_enum() -> None:
    fields = [
        InputField(name="id", type="integer", options=["1", "2"], description="Pick one"),
        InputField(name="note", required=False),
    ]
    assert elicitation_schema(fields) == {
        "type": "object",
        "properties": {
            "id": {"type": "string", "title": "id", "enum": ["1", "2"], "description": "Pick one"},
            "note": {"type": "string", "title": "note"},
        },
        "required": ["id"],
    }


# --- the X-Response-Format header -----------------------------------------------------------------------------


class HeaderStream(MessageStream):
    """A server-side stream that reports HTTP-like request headers, as the HTTP transport's streams do."""

    def __init__(self, inner: MessageStream, headers: dict[str, str]) -> None:
        self.inner = inner
        self.headers = headers

    async def receive(self) -> Sequence[bytes]:
        return Arrival(await self.inner.receive(), HeaderIntake(self.headers))

    async def send(self, frames: Sequence[Outgoing]) -> None:
        await self.inner.send(frames)

    async def aclose(self) -> None:
        await self.inner.aclose()


class HeaderIntake(Intake):
    """What comes with a message of a transport with headers."""

    __slots__ = ("headers",)

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers

    def request_headers(self) -> dict[str, str]:
        return self.headers


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["auto", HANDSHAKE])
async def test_x_response_format_header_sets_the_default_and_an_argument_wins(version: str) -> None:
    server = demo_server()
    ours, theirs = memory_pair()
    try:
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.serve, HeaderStream(theirs, {"x-response-format": "json"}))
                async with Client.connect(ours, protocol_version=version) as client:
                    by_header = await client.call_tool("listing", {})
                    explicit = await client.call_tool("listing", {"format": "markdown"})
                    failure = await client.call_tool("fail", {})
                tg.cancel_scope.cancel()
    finally:
        await ours.aclose()
        await theirs.aclose()
    assert [mime(b) for b in texts(by_header)] == ["application/json"]
    assert [mime(b) for b in texts(explicit)] == ["text/markdown"]
    assert [mime(b) for b in texts(failure)] == ["application/json"]


# --- retry ------------------------------------------------------------------------------------------------------


def flaky_server(failures: int, code: str = "RATE_LIMITED", retry_after_ms: int | None = None) -> Server:
    server = Server("flaky")
    calls = {"n": 0}

    @presented_tool(server, ItemList)
    async def flaky(ctx: Context) -> ItemList:
        """Fails a few times first."""
        calls["n"] += 1
        if calls["n"] <= failures:
            failure = ToolFailure(code, "Too many calls.")
            if retry_after_ms is not None:
                failure.payload.rate_limit = RateLimit(retry_after_ms=retry_after_ms)
            raise failure
        return ItemList(summary=f"ok after {calls['n']} calls", items=[], total=calls["n"])

    return server


@pytest.mark.anyio
async def test_retry_retries_retryable_failures_with_bounded_jittered_backoff() -> None:
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    async with connect(flaky_server(3)) as client:
        result = await call_tool_with_retry(
            client, "flaky", {}, attempts=5, base_delay=1.0, max_delay=3.0, sleep=sleep, rand=lambda: 1.0
        )
    assert result.is_error is False
    assert result.structured_content["total"] == 4
    assert delays == [1.0, 2.0, 3.0]  # doubling, capped at max_delay


@pytest.mark.anyio
async def test_retry_gives_up_after_the_attempts_and_returns_the_last_failure() -> None:
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    async with connect(flaky_server(10)) as client:
        result = await call_tool_with_retry(client, "flaky", attempts=3, base_delay=0.1, sleep=sleep, rand=lambda: 0.0)
    assert is_retryable(result)
    assert delays == [0.05, 0.1]  # equal jitter: at least half of each step


@pytest.mark.anyio
async def test_retry_leaves_non_retryable_failures_alone() -> None:
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    async with connect(flaky_server(1, code="NOT_FOUND")) as client:
        result = await call_tool_with_retry(client, "flaky", attempts=3, sleep=sleep)
    assert result.structured_content["code"] == "NOT_FOUND"
    assert delays == []


@pytest.mark.anyio
async def test_retry_honours_retry_after_within_max_delay() -> None:
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    async with connect(flaky_server(2, retry_after_ms=1500)) as client:
        result = await call_tool_with_retry(
            client, "flaky", attempts=3, base_delay=0.1, max_delay=2.0, sleep=sleep, rand=lambda: 0.0
        )
    assert result.structured_content["total"] == 3
    assert delays == [1.5, 1.5]


def test_backoff_delay_and_argument_checks() -> None:
    assert backoff_delay(1, 0.5, 10, rand=lambda: 0.5) == 0.375
    assert backoff_delay(10, 0.5, 4, rand=lambda: 1.0) == 4
    assert all(0.5 <= backoff_delay(2, 0.5, 10) <= 1.0 for _ in range(50))


@pytest.mark.anyio
async def test_retry_rejects_nonsense_arguments() -> None:
    async with connect(flaky_server(0)) as client:
        with pytest.raises(ValueError):
            await call_tool_with_retry(client, "flaky", attempts=0)
        with pytest.raises(ValueError):
            await call_tool_with_retry(client, "flaky", base_delay=-1)


def test_is_retryable_needs_a_retryable_tool_error_payload() -> None:
    assert is_retryable(present(tool_error("RATE_LIMITED", "slow")))
    assert not is_retryable(present(tool_error("NOT_FOUND", "gone")))
    assert not is_retryable(types.CallToolResult(content=[], is_error=True))
    assert not is_retryable(present(items(1)))
