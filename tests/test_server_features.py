"""The server API: typed tools and their schemas, structured output, raw-schema tools, resources, subscriptions,
logging, pagination, prompts, completion, and the low-level method escape hatch. Driven through a real Client
over the in-memory transport (handshake era unless a test says otherwise)."""

from __future__ import annotations

import base64
import enum
import json
import logging
import re
import sys
from typing import Annotated, Any, Literal

import anyio
import msgspec
import pytest
from helpers import raw_server, request_frame

from jsonrpc_mcp import CacheHint, Client, Context, InvalidParams, MethodNotFound, RpcError, Server, ToolError
from jsonrpc_mcp import types as t

pytestmark = pytest.mark.anyio

V = {"protocol_version": "2025-11-25"}


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(msgspec.Struct):
    x: int
    y: int = 0


def tool_of(server: Server, name: str) -> dict[str, Any]:
    return next(msgspec.to_builtins(x) for x in server.list_tools() if x.name == name)


def kitchen_server() -> Server:
    server = Server("features", "1")

    @server.tool()
    def kitchen(
        count: int,
        name: str,
        ratio: float,
        flag: bool,
        items: list[str],
        mapping: dict[str, int],
        mode: Literal["fast", "slow"],
        color: Color,
        point: Point,
        note: str | None = None,
        size: Annotated[int, msgspec.Meta(description="How big", ge=1)] = 3,
    ) -> dict[str, Any]:
        """Do everything at once.

        Args:
            count: how many
            name: who
        """
        return {
            "count": count,
            "name": name,
            "ratio": ratio,
            "flag": flag,
            "items": items,
            "mapping": mapping,
            "mode": mode,
            "color": color.value,
            "point": [point.x, point.y],
            "note": note,
            "size": size,
        }

    return server


KITCHEN_ARGS = {
    "count": 2,
    "name": "n",
    "ratio": 1,
    "flag": True,
    "items": ["a"],
    "mapping": {"k": 1},
    "mode": "fast",
    "color": "green",
    "point": {"x": 5},
}


def test_typed_tool_input_schema() -> None:
    tool = tool_of(kitchen_server(), "kitchen")
    assert tool["description"] == "Do everything at once."
    schema = tool["inputSchema"]
    props = schema["properties"]
    assert schema["type"] == "object"
    assert props["count"] == {"type": "integer", "description": "how many"}
    assert props["name"] == {"type": "string", "description": "who"}
    assert props["ratio"] == {"type": "number"}
    assert props["flag"] == {"type": "boolean"}
    assert props["items"] == {"type": "array", "items": {"type": "string"}}
    assert props["mapping"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["mode"] == {"enum": ["fast", "slow"]}
    assert props["color"] == {"$ref": "#/$defs/Color"}
    assert sorted(schema["$defs"]["Color"]["enum"]) == ["green", "red"]
    assert props["point"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["required"] == ["x"]
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props["size"] == {"type": "integer", "description": "How big", "minimum": 1, "default": 3}
    assert schema["required"] == ["count", "name", "ratio", "flag", "items", "mapping", "mode", "color", "point"]
    # a dict return type is an object schema: structured, not wrapped
    assert tool["outputSchema"]["type"] == "object"


def test_tool_without_parameters_or_docstring() -> None:
    server = Server("s")

    @server.tool()
    def bare():  # type: ignore[no-untyped-def]
        return "x"

    tool = tool_of(server, "bare")
    assert tool["inputSchema"] == {"type": "object", "properties": {}, "additionalProperties": False}
    assert tool["description"] == "bare"  # the conformance suite wants a description; the name stands in
    assert "outputSchema" not in tool


def documented_server() -> Server:
    """A tool and a prompt per docstring style: ``Args:`` on the first line (``inspect.getdoc`` dedents its items
    to the header's level), ``Args:`` under a summary (items indented), and reST ``:param``."""
    server = Server("docs")

    @server.tool()
    def first_line(material: str, topic: Annotated[str, msgspec.Meta(max_length=9)] = "") -> str:
        """Args:
        material: The text to learn from.
        topic: Where to file it,
            if anywhere.
        """
        return material

    @server.tool()
    def under_summary(material: str, topic: str = "") -> str:
        """Learn from a text.

        Args:
            material (str): The text to learn from.
            topic: Where to file it,
                if anywhere.

        Returns:
            value: not a parameter
        """
        return material

    @server.tool()
    def rest_style(material: str, topic: str = "") -> str:
        """Learn from a text.

        :param material: The text to learn from.
        :param str topic: Where to file it,
            if anywhere.
        :returns: nothing
        """
        return material

    @server.prompt()
    def prompt_first_line(material: str, topic: str = "") -> str:
        """Args:
        material: The text to learn from.
        topic: Where to file it,
            if anywhere.
        """
        return material

    @server.prompt()
    def prompt_under_summary(material: str, topic: str = "") -> str:
        """Learn from a text.

        Args:
            material: The text to learn from.
            topic: Where to file it,
                if anywhere.
        """
        return material

    return server


async def test_docstring_argument_descriptions_reach_tools_and_prompts_in_every_indentation_style() -> None:
    wanted = {"material": "The text to learn from.", "topic": "Where to file it, if anywhere."}
    async with Client.connect_server(documented_server(), **V) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        for name in ("first_line", "under_summary", "rest_style"):
            props = tools[name].input_schema["properties"]
            assert {p: props[p].get("description") for p in props} == wanted, name
        assert tools["first_line"].description == "first_line"  # nothing before the section: no summary
        assert tools["under_summary"].description == "Learn from a text."
        assert tools["rest_style"].description == "Learn from a text."
        assert tools["first_line"].input_schema["properties"]["topic"]["maxLength"] == 9  # kept beside it
        prompts = {prompt.name: prompt for prompt in await client.list_prompts()}
        for name in ("prompt_first_line", "prompt_under_summary"):
            arguments = prompts[name].arguments or []
            assert {a.name: a.description for a in arguments} == wanted, name


async def test_typed_tool_validates_and_converts_arguments() -> None:
    async with Client.connect_server(kitchen_server(), **V) as client:
        ok = await client.call_tool("kitchen", KITCHEN_ARGS)
        assert ok.is_error is False
        assert ok.structured_content == {
            **KITCHEN_ARGS,
            "ratio": 1.0,
            "point": [5, 0],
            "note": None,
            "size": 3,
        }
        bad_cases = {
            "count": ("one", "count"),
            "flag": (1, "flag"),
            "mode": ("medium", "mode"),
            "color": ("blue", "color"),
            "point": ({"y": 1}, "point"),
            "items": ([1], "items"),
            "size": (0, "size"),
        }
        for field, (value, named) in bad_cases.items():
            result = await client.call_tool("kitchen", {**KITCHEN_ARGS, field: value})
            assert result.is_error is True, field
            text = result.content[0].text  # type: ignore[union-attr]
            assert text.startswith("Invalid arguments for tool kitchen: "), text
            assert named in text, text
        missing = await client.call_tool("kitchen", {k: v for k, v in KITCHEN_ARGS.items() if k != "name"})
        assert missing.is_error is True and "`name`" in missing.content[0].text  # type: ignore[union-attr]


async def test_a_typed_tool_refuses_unknown_arguments_and_names_what_it_takes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A misspelt optional argument must not run the tool with its default: unknown arguments are an ``isError``
    result naming the argument and the ones the tool takes (``additionalProperties: false`` says so up front);
    inside a nested Struct, its own configuration decides. Nothing is logged as a server error."""
    server = kitchen_server()

    @server.tool()
    def bare() -> str:
        return "ran"

    assert tool_of(server, "kitchen")["inputSchema"]["additionalProperties"] is False
    caplog.set_level(logging.ERROR, logger="jsonrpc_mcp")
    async with Client.connect_server(server, **V) as client:
        typo = await client.call_tool("kitchen", {**KITCHEN_ARGS, "sise": 9})
        assert typo.is_error is True
        assert typo.content[0].text == (  # type: ignore[union-attr]
            "Invalid arguments for tool kitchen: sise: unknown argument "
            "(it takes count, name, ratio, flag, items, mapping, mode, color, point, note, size)"
        )
        none = await client.call_tool("bare", {"x": 1})
        assert none.is_error is True
        assert none.content[0].text == "Invalid arguments for tool bare: x: unknown argument (it takes none)"  # type: ignore[union-attr]
        assert (await client.call_tool("bare", {})).content[0].text == "ran"  # type: ignore[union-attr]
        nested = await client.call_tool("kitchen", {**KITCHEN_ARGS, "point": {"x": 1, "z": 2}})
        assert nested.is_error is not True  # Point does not forbid unknown fields
    assert not caplog.records


async def test_integer_bounds_are_the_tools_own() -> None:
    """A bare ``int`` is any JSON integer, as the schema's ``integer`` says (Python's ``int`` has no bounds);
    ``Annotated[int, msgspec.Meta(ge=..., le=...)]`` states bounds in the schema and refuses values outside them
    before the function runs."""
    server = Server("s")

    @server.tool()
    def exact(n: int) -> str:
        return str(n)

    @server.tool()
    def bounded(n: Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]) -> str:
        return str(n)

    assert tool_of(server, "exact")["inputSchema"]["properties"]["n"] == {"type": "integer"}
    assert tool_of(server, "bounded")["inputSchema"]["properties"]["n"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 2**63 - 1,
    }
    async with Client.connect_server(server, **V) as client:
        assert (await client.call_tool("exact", {"n": 2**70})).content[0].text == str(2**70)  # type: ignore[union-attr]
        refused = await client.call_tool("bounded", {"n": 2**70})
        assert refused.is_error is True
        assert refused.content[0].text == (  # type: ignore[union-attr]
            "Invalid arguments for tool bounded: n: Expected `int` <= 9223372036854775807"
        )


async def test_structured_output_shapes() -> None:
    server = Server("s")

    @server.tool()
    def point() -> Point:
        return Point(x=1, y=2)

    @server.tool()
    def numbers() -> list[int]:
        return [1, 2]

    @server.tool()
    def text() -> str:
        return "plain"

    @server.tool(structured_output=False)
    def unstructured() -> list[int]:
        return [3]

    assert tool_of(server, "point")["outputSchema"] == {
        "title": "Point",  # the return type's name: clients show it (jsonrpc-mcp list: point() -> Point)
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"],
    }
    assert tool_of(server, "numbers")["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "integer"}}},
        "required": ["result"],
    }
    assert "outputSchema" not in tool_of(server, "text")
    assert "outputSchema" not in tool_of(server, "unstructured")
    async with Client.connect_server(server, **V) as client:
        p = await client.call_tool("point")
        assert p.structured_content == {"x": 1, "y": 2}
        assert [json.loads(c.text) for c in p.content if isinstance(c, t.TextContent)] == [{"x": 1, "y": 2}]
        assert len(p.content) == 1
        n = await client.call_tool("numbers")
        assert n.structured_content == {"result": [1, 2]}
        assert json.loads(n.content[0].text) == {"result": [1, 2]}  # type: ignore[union-attr]
        plain = await client.call_tool("text")
        assert plain.structured_content is msgspec.UNSET and plain.content[0].text == "plain"  # type: ignore[union-attr]
        u = await client.call_tool("unstructured")
        assert u.structured_content is msgspec.UNSET and json.loads(u.content[0].text) == [3]  # type: ignore[union-attr]


async def test_structured_output_that_does_not_match_is_a_tool_error(caplog: pytest.LogCaptureFixture) -> None:
    server = Server("s")

    @server.tool()
    def liar() -> Point:
        return {"x": "not an int"}  # type: ignore[return-value]

    @server.tool(output_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}})
    def declared() -> Any:
        return {"ok": True}

    async with Client.connect_server(server, **V) as client:
        result = await client.call_tool("liar")
        assert result.is_error is True
        assert result.content[0].text == "Tool liar failed: it produced output that does not match its schema"  # type: ignore[union-attr]
        assert result.structured_content is msgspec.UNSET
        declared_result = await client.call_tool("declared")
        assert declared_result.structured_content == {"ok": True}
    assert tool_of(server, "declared")["outputSchema"] == {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    assert any("liar" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)


async def test_tool_error_and_exceptions() -> None:
    server = Server("s")

    @server.tool()
    def refuse(reason: str) -> str:
        raise ToolError(f"refused: {reason}", structured={"code": "E_REFUSED"})

    @server.tool()
    async def explode() -> str:
        raise KeyError("internal/path/secret")

    @server.tool()
    def protocol() -> str:
        raise InvalidParams("the request itself is wrong", {"hint": 1})

    async with Client.connect_server(server, **V) as client:
        refused = await client.call_tool("refuse", {"reason": "policy"})
        assert refused.is_error is True
        assert refused.content[0].text == "refused: policy"  # type: ignore[union-attr]
        assert refused.structured_content == {"code": "E_REFUSED"}
        exploded = await client.call_tool("explode")
        assert exploded.is_error is True
        assert exploded.content[0].text == "Tool explode failed: an internal error occurred"  # type: ignore[union-attr]
        with pytest.raises(InvalidParams) as info:
            await client.call_tool("protocol")
        assert (info.value.message, info.value.data) == ("the request itself is wrong", {"hint": 1})


RAW_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 1}, "tag": {"type": "string", "pattern": "^[a-z]+$"}},
    "required": ["n"],
    "additionalProperties": False,
}


def raw_schema_server() -> Server:
    server = Server("s")

    @server.tool(input_schema=RAW_SCHEMA)
    def counted(n: int, tag: str = "none") -> str:
        """Counts."""
        return f"{n}:{tag}"

    return server


async def test_raw_input_schema_with_full_validation() -> None:
    server = raw_schema_server()
    assert tool_of(server, "counted")["inputSchema"] == RAW_SCHEMA  # kept verbatim
    async with Client.connect_server(server, **V) as client:
        assert (await client.call_tool("counted", {"n": 2, "tag": "ab"})).content[0].text == "2:ab"  # type: ignore[union-attr]
        for args, words in (
            ({"n": 0}, ("n", "minimum")),
            ({"n": 1, "tag": "AB"}, ("tag",)),
            ({"n": "x"}, ("n", "integer")),
            ({}, ("n",)),
            ({"n": 1, "extra": 1}, ("extra",)),
        ):
            result = await client.call_tool("counted", args)
            assert result.is_error is True, args
            text = result.content[0].text  # type: ignore[union-attr]
            assert text.startswith("Invalid arguments for tool counted: "), text
            assert all(w in text for w in words), (args, text)


async def test_raw_input_schema_basic_fallback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema_rs", None)  # import jsonschema_rs -> ImportError
    with caplog.at_level(logging.WARNING, logger="jsonrpc_mcp.mcp.tools"):
        server = raw_schema_server()
    # what the basic checks leave out is said once, when the tool is registered
    assert [r.getMessage() for r in caplog.records if r.name == "jsonrpc_mcp.mcp.tools"] == [
        "tool counted: its input schema's additionalProperties, minimum, pattern are not checked without the "
        "validation extra (jsonschema-rs); only the type, the required properties and their primitive types are"
    ]
    async with Client.connect_server(server, **V) as client:
        assert (await client.call_tool("counted", {"n": 2})).content[0].text == "2:none"  # type: ignore[union-attr]
        # the basic checks: required properties and primitive types...
        missing = await client.call_tool("counted", {})
        assert missing.is_error is True
        assert missing.content[0].text == "Invalid arguments for tool counted: n: required property is missing"  # type: ignore[union-attr]
        wrong = await client.call_tool("counted", {"n": True})
        assert wrong.content[0].text == "Invalid arguments for tool counted: n: expected integer, got bool"  # type: ignore[union-attr]
        # ...but not the full vocabulary: minimum is not checked without the validation extra
        assert (await client.call_tool("counted", {"n": 0})).content[0].text == "0:none"  # type: ignore[union-attr]


async def test_raw_schema_tool_gets_the_arguments_it_takes(caplog: pytest.LogCaptureFixture) -> None:
    """The schema lets through properties the function does not take: they are left out (the schema is the
    contract; a typed tool's schema refuses unknown arguments, this one allows them). A parameter without a
    default that the arguments lack is the caller's mistake (an isError naming it), not a failing tool; a
    ``**kwargs`` function gets everything. Nothing is logged as an error: none of this is a server bug."""
    server = Server("s")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}

    @server.tool(input_schema=schema)
    async def async_tool(n: int = 0) -> str:
        return str(n)

    @server.tool(input_schema=schema)
    def sync_tool(n: int = 0) -> str:
        return str(n)

    @server.tool(input_schema=schema)
    def needs(n: int, *, label: str) -> str:
        return f"{label}{n}"

    @server.tool(input_schema=schema)
    def anything(ctx: Context, **kwargs: Any) -> str:
        return ",".join(sorted(kwargs))

    caplog.set_level(logging.ERROR, logger="jsonrpc_mcp")
    async with Client.connect_server(server, **V) as client:
        for name in ("async_tool", "sync_tool"):
            result = await client.call_tool(name, {"n": 1, "extra": True, "": None})
            assert result.is_error is not True and result.content[0].text == "1", name  # type: ignore[union-attr]
        missing = await client.call_tool("needs", {"n": 2})
        assert missing.is_error is True
        assert missing.content[0].text == "Invalid arguments for tool needs: missing 'label'"  # type: ignore[union-attr]
        both = await client.call_tool("needs", {"extra": 1})
        assert both.content[0].text == "Invalid arguments for tool needs: missing 'n', 'label'"  # type: ignore[union-attr]
        assert (await client.call_tool("needs", {"n": 2, "label": "x", "y": 0})).content[0].text == "x2"  # type: ignore[union-attr]
        assert (await client.call_tool("anything", {"b": 1, "a": 2})).content[0].text == "a,b"  # type: ignore[union-attr]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("arguments", [b"null", b"[1]", b'"x"'])
async def test_arguments_that_are_not_an_object_are_invalid_params_for_every_kind_of_tool(arguments: bytes) -> None:
    """A present ``arguments`` that is not an object (``null`` included) is -32602, whichever way the tool reads
    its arguments (its signature, or a raw JSON Schema), and the tool does not run."""
    server = raw_schema_server()

    @server.tool()
    def typed(n: int = 0) -> str:
        raise AssertionError("not called")

    async with raw_server(server, version="2025-11-25") as peer:
        for name in ("typed", "counted"):
            frame = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
            (reply,) = await peer.exchange(frame % (name.encode(), arguments))
            assert json.loads(reply)["error"] == {
                "code": -32602,
                "message": 'Invalid params: "arguments" must be an object',
            }


def test_invalid_raw_schema_fails_at_registration() -> None:
    server = Server("s")
    with pytest.raises(ValueError, match="invalid input schema"):
        server.add_tool(lambda: "x", name="broken", input_schema={"type": 12})


def test_a_cache_hint_refuses_a_scope_the_spec_does_not_have_and_a_fraction_of_a_millisecond() -> None:
    with pytest.raises(ValueError, match=r'^scope must be "public" or "private", not \'privat\'$'):
        CacheHint(ttl_ms=60_000, scope="privat")  # type: ignore[arg-type]  # (was: sent as it is)
    with pytest.raises(TypeError, match="ttl_ms is a whole number of milliseconds"):
        CacheHint(ttl_ms=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ttl_ms must be >= 0"):
        CacheHint(ttl_ms=-1)
    assert CacheHint(ttl_ms=0, scope="private").scope == "private"


def test_a_decorator_used_without_its_call_is_refused_rather_than_registering_nothing() -> None:
    server = Server("s")  # (was: nothing registered, and the function replaced by the decorator)
    for decorator, example in (("tool", "()"), ("prompt", "()"), ("resource", '("notes://{id}")')):
        message = f"@server.{decorator} is called to make the decorator: @server.{decorator}{example}"
        with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):

            @getattr(server, decorator)
            def forgotten() -> str:
                return "x"

    with pytest.raises(TypeError, match=re.escape('@server.method("x/name")')):
        server.method(lambda ctx, params: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=re.escape('@server.on_notification("notifications/roots/list_changed")')):
        server.on_notification(lambda session, params: None)  # type: ignore[arg-type]


def test_the_server_refuses_a_wrong_setting_by_its_name() -> None:
    with pytest.raises(TypeError, match="scope_hierarchy maps a scope to a list of the scopes it implies"):
        Server("s", scope_hierarchy={"notes:admin": "notes:write"})  # (would imply "n", "o", "t", ...)
    for ttl in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="request_state_ttl must be positive"):
            Server("s", request_state_ttl=ttl)
    with pytest.raises(TypeError, match="request_state_ttl must be a number of seconds"):
        Server("s", request_state_ttl="600")  # type: ignore[arg-type]
    for keys in (b"dev", [b"k" * 32, b"short"]):
        with pytest.raises(ValueError, match=r"request_state_key must be at least 16 bytes \(secrets.token_bytes"):
            Server("s", request_state_key=keys)  # (was: taken, and a state sealed with it could be forged)
    assert Server("s", request_state_key=b"k" * 16).request_state_key == b"k" * 16
    with pytest.raises(ValueError, match=r'^eras must be "both", "handshake" or "stateless", not \'always\'$'):
        Server("s").method("x/ping", eras="always")  # type: ignore[arg-type]  # (was: KeyError: 'always')
    server = Server("s", scope_hierarchy={"notes:admin": ("notes:write",)}, request_state_ttl=0.5)
    assert server.scope_hierarchy == {"notes:admin": ("notes:write",)} and server.request_state_ttl == 0.5


@pytest.mark.parametrize("name", ["has space", "", "x" * 129, "ünicode", "slash/name", "new\nline"])
def test_tool_name_rules(name: str) -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        Server("s").add_tool(lambda: "x", name=name)


def test_valid_tool_names(caplog: pytest.LogCaptureFixture) -> None:
    server = Server("s")
    for name in ("a", "a.b-c_D9", "x" * 64, "y" * 128):
        server.add_tool(lambda: "x", name=name)
    assert [tool.name for tool in server.list_tools()] == ["a", "a.b-c_D9", "x" * 64, "y" * 128]
    assert any("longer than 64" in r.getMessage() for r in caplog.records)  # warned, still accepted


def test_the_decorators_and_add_methods_share_one_options_type_each_and_refuse_a_keyword_it_lacks() -> None:
    """``tool``/``add_tool``, ``resource``/``add_resource``, ``prompt``/``add_prompt`` take the same keywords (one
    options type each); one they do not have is a TypeError naming it, at once (not when the function comes)."""
    server = Server("s")
    server.tool("t", title="T", scopes=["a"], inline=True)(lambda: "x")
    server.add_tool(lambda: "x", name="u", title="U", task="optional")
    server.resource("r://x", name="rx", mime_type="text/plain", size=3, scopes=["a"])(lambda: "abc")
    server.add_resource(lambda: "abc", "r://y", title="Y", cache=CacheHint(ttl_ms=5))
    server.prompt("p", description="P", scopes=["a"])(lambda: "hi")
    server.add_prompt(lambda: "hi", name="q", title="Q")
    assert [(x.name, x.title) for x in server.list_tools()] == [("t", "T"), ("u", "U")]
    entry = server.tool_definition("u")
    assert entry is not None and entry.task == "optional"
    refused = [
        ("tool", lambda: server.tool("t", titel="T")),  # type: ignore[call-arg]
        ("add_tool", lambda: server.add_tool(lambda: "x", titel="T")),  # type: ignore[call-arg]
        ("resource", lambda: server.resource("r://z", mime="text/plain")),  # type: ignore[call-arg]
        ("add_resource", lambda: server.add_resource(lambda: "x", "r://z", mime="text/plain")),  # type: ignore[call-arg]
        ("prompt", lambda: server.prompt("p", completer={})),  # type: ignore[call-arg]
        ("add_prompt", lambda: server.add_prompt(lambda: "x", completer={})),  # type: ignore[call-arg]
    ]
    for what, call in refused:
        with pytest.raises(
            TypeError, match=rf"^{what}\(\) got an unexpected keyword argument '(titel|mime|completer)'$"
        ):
            call()
    assert [x.name for x in server.list_tools()] == ["t", "u"]  # nothing registered by a refused call


async def test_tools_added_and_removed_at_runtime_notify_clients() -> None:
    server = Server("s")
    server.add_tool(lambda: "one", name="one")
    changes: list[str] = []
    got = anyio.Event()

    def on_notification(method: str, params: dict[str, Any]) -> None:
        changes.append(method)
        got.set()

    async with Client.connect_server(server, on_notification=on_notification, **V) as client:
        assert [x.name for x in await client.list_tools()] == ["one"]
        server.add_tool(lambda: "two", name="two")
        with anyio.fail_after(5):
            await got.wait()
        assert changes == ["notifications/tools/list_changed"]
        assert [x.name for x in await client.list_tools()] == ["one", "two"]
        got = anyio.Event()
        server.remove_tool("one")
        with anyio.fail_after(5):
            await got.wait()
        assert [x.name for x in await client.list_tools()] == ["two"]
        with pytest.raises(RpcError) as info:
            await client.call_tool("one")
        assert info.value.code == -32602
    with pytest.raises(KeyError):
        server.remove_tool("nope")


def resource_server() -> Server:
    server = Server("s", page_size=None)

    @server.resource("text://readme", mime_type="text/markdown", description="Read me.")
    def readme() -> str:
        return "# hi"

    @server.resource("bin://logo")
    def logo() -> bytes:
        return b"\x89PNG"

    @server.resource("data://search")
    def search(query: dict[str, str]) -> dict[str, Any]:
        return {"query": query}

    @server.resource("user://{uid}/profile{?fields}")  # not level 1: refused below
    def never(uid: str) -> str:  # pragma: no cover - registration fails
        return uid

    return server


def test_resource_templates_beyond_level_one_are_refused() -> None:
    with pytest.raises(ValueError, match="level 1"):
        resource_server()


def good_resource_server() -> Server:
    server = Server("s", page_size=None)

    @server.resource("text://readme", mime_type="text/markdown", description="Read me.")
    def readme() -> str:
        return "# hi"

    @server.resource("bin://logo")
    def logo() -> bytes:
        return b"\x89PNG"

    @server.resource("data://search")
    def search(query: dict[str, str]) -> dict[str, Any]:
        return {"query": query}

    @server.resource("user://{uid}/posts/{post}", mime_type="text/plain")
    def post(uid: str, post: str, ctx: Context) -> str:
        return f"{uid}/{post} for {ctx.method}"

    @server.resource("missing://{name}")
    def missing(name: str) -> str:
        from jsonrpc_mcp import ResourceNotFound

        raise ResourceNotFound(f"missing://{name}")

    return server


async def test_resources_and_templates() -> None:
    async with Client.connect_server(good_resource_server(), **V) as client:
        listed = {r.uri: r for r in await client.list_resources()}
        assert set(listed) == {"text://readme", "bin://logo", "data://search"}
        assert (listed["text://readme"].mime_type, listed["text://readme"].description) == ("text/markdown", "Read me.")
        templates = await client.list_resource_templates()
        assert [x.uri_template for x in templates] == ["user://{uid}/posts/{post}", "missing://{name}"]

        text = (await client.read_resource("text://readme")).contents
        assert [(c.uri, c.text, c.mime_type) for c in text] == [("text://readme", "# hi", "text/markdown")]
        blob = (await client.read_resource("bin://logo")).contents[0]
        assert blob.mime_type == "application/octet-stream" and base64.b64decode(blob.blob) == b"\x89PNG"  # type: ignore[arg-type]
        found = (await client.read_resource("data://search?q=mcp&n=2")).contents[0]
        assert found.mime_type == "application/json"
        assert json.loads(found.text) == {"query": {"q": "mcp", "n": "2"}}  # type: ignore[arg-type]
        templated = (await client.read_resource("user://ada%20l/posts/7")).contents[0]
        assert (templated.uri, templated.text) == ("user://ada%20l/posts/7", "ada l/7 for resources/read")
        for uri in ("user://ada/posts/", "user://a/b/posts/1", "nope://x", "missing://thing"):
            with pytest.raises(RpcError) as info:
                await client.read_resource(uri)
            assert (info.value.code, info.value.data) == (-32002, {"uri": uri})


async def test_subscriptions_and_unsubscribe() -> None:
    server = good_resource_server()

    @server.resource("file:///project")
    def project() -> str:
        return "a directory"

    updates: list[dict[str, Any]] = []

    def on_notification(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/resources/updated":
            updates.append(params)

    async with Client.connect_server(server, on_notification=on_notification, **V) as client:
        await client.subscribe("text://readme")
        await client.subscribe("file:///project")
        await server.notify_resource_updated("text://readme")
        await server.notify_resource_updated("file:///project/src/a.py")  # under a subscribed URI
        await server.notify_resource_updated("file:///projector")  # not under it
        await server.notify_resource_updated("bin://logo")  # not subscribed
        await client.ping()  # the notifications were written before the ping's answer
        assert updates == [{"uri": "text://readme"}, {"uri": "file:///project/src/a.py"}]
        await server.notify_resource_updated("file:///project/src/b.py", exact=True)  # only its own subscribers
        await client.ping()
        assert len(updates) == 2
        await client.unsubscribe("text://readme")
        await server.notify_resource_updated("text://readme")
        await client.ping()
        assert len(updates) == 2


async def test_a_subscription_the_server_will_never_serve_is_refused() -> None:
    """By default a subscription is served for a registered resource or a URI matching a template; anything else
    is "resource not found" (-32002 with ``data.uri``), and left out of a 2026-07-28 listen's acknowledgement. A
    server widens (or narrows) that by overriding ``accepts_subscription``, sync or async."""
    async with Client.connect_server(good_resource_server(), **V) as client:
        await client.subscribe("text://readme")
        await client.subscribe("user://ada/posts/7")  # matches a template
        for uri in ("nope://x", "text://readme/part", "data://search?q=x", "user://ada/posts/"):
            with pytest.raises(RpcError) as info:
                await client.subscribe(uri)
            assert (info.value.code, info.value.data) == (-32002, {"uri": uri}), uri
        await client.unsubscribe("nope://x")  # unsubscribing what was never subscribed is harmless

    class Files(Server):
        async def accepts_subscription(self, uri: str) -> bool:
            return uri.startswith("file:///srv/") or bool(super().accepts_subscription(uri))

    files = Files("files")

    @files.resource("file:///srv/")
    def listing() -> str:
        return "a.txt"

    updates: list[dict[str, Any]] = []

    def on_notification(method: str, params: dict[str, Any]) -> None:
        updates.append(params)

    async with Client.connect_server(files, on_notification=on_notification, **V) as client:
        await client.subscribe("file:///srv/a.txt")
        with pytest.raises(RpcError):
            await client.subscribe("file:///etc/passwd")
        await files.notify_resource_updated("file:///srv/a.txt")
        await client.ping()
        assert updates == [{"uri": "file:///srv/a.txt"}]

    server = good_resource_server()
    async with Client.connect_server(server) as stateless:
        assert stateless.stateless
        async with stateless.listen(resource_uris=["text://readme", "nope://x", "user://a/posts/1"]) as ack:
            assert ack["resourceSubscriptions"] == ["text://readme", "user://a/posts/1"]


async def test_logging_set_level_and_broadcast() -> None:
    server = Server("s")
    logs: list[tuple[str, Any]] = []
    async with (
        Client.connect_server(server, on_log=lambda m: logs.append((m.level, m.data)), **V) as client,
        Client.connect_server(server, **V) as other,
    ):
        await server.broadcast_log("debug", "too low")
        await server.broadcast_log("notice", {"n": 1}, "svc")
        await client.ping()
        assert logs == [("notice", {"n": 1})]
        await client.set_logging_level("debug")
        await server.broadcast_log("debug", "now")
        await client.ping()
        assert logs[-1] == ("debug", "now")
        with pytest.raises(InvalidParams):
            await client.set_logging_level("verbose")
        await other.ping()


async def test_pagination_follows_cursors() -> None:
    server = Server("paged", page_size=2)
    for i in range(5):
        server.add_tool(lambda: "x", name=f"tool{i}")

    @server.prompt()
    def p1() -> str:
        return "1"

    @server.prompt()
    def p2() -> str:
        return "2"

    @server.prompt()
    def p3() -> str:
        return "3"

    async with raw_server(server, version="2025-11-25") as peer:
        pages: list[list[str]] = []
        cursor: str | None = None
        for i in range(10):
            params = {"cursor": cursor} if cursor is not None else None
            reply = await peer.call(request_frame(i, "tools/list", params))
            pages.append([x["name"] for x in reply["result"]["tools"]])
            cursor = reply["result"].get("nextCursor")
            if cursor is None:
                break
        assert pages == [["tool0", "tool1"], ["tool2", "tool3"], ["tool4"]]
        for bad in ("nope", "bzo6OTk=", "", "o:1"):
            reply = await peer.call(request_frame("bad", "tools/list", {"cursor": bad}))
            assert reply["error"]["code"] == -32602, bad
    async with Client.connect_server(server, **V) as client:
        assert [x.name for x in await client.list_tools()] == [f"tool{i}" for i in range(5)]
        assert [x.name for x in await client.list_prompts()] == ["p1", "p2", "p3"]
        with pytest.raises(InvalidParams):
            await client.request("prompts/list", {"cursor": "garbage!"})


def prompt_server() -> Server:
    server = Server("prompts")

    @server.prompt(title="Code review")
    def review(code: str, language: Literal["python", "rust", "go"] = "python", strict: str = "no") -> list[Any]:
        """Review some code.

        Args:
            code: the code to review
            language: which language it is
        """
        return [
            t.PromptMessage(role="user", content=t.TextContent(text=f"Review this {language}: {code}")),
            t.PromptMessage(role="assistant", content=t.TextContent(text=f"strict={strict}")),
        ]

    @server.prompt(complete={"topic": lambda value, context: [f"{value}-{context.get('level', '?')}"]})
    async def explain(topic: str, level: str) -> str:
        return f"Explain {topic} at {level} level"

    return server


async def test_prompts_with_arguments() -> None:
    async with Client.connect_server(prompt_server(), **V) as client:
        prompts = {p.name: msgspec.to_builtins(p) for p in await client.list_prompts()}
        assert prompts["review"] == {
            "name": "review",
            "title": "Code review",
            "description": "Review some code.",
            "arguments": [
                {"name": "code", "description": "the code to review", "required": True},
                {"name": "language", "description": "which language it is", "required": False},
                {"name": "strict", "required": False},
            ],
        }
        got = await client.get_prompt("review", {"code": "x = 1", "language": "rust"})
        assert [(m.role, m.content.text) for m in got.messages] == [  # type: ignore[union-attr]
            ("user", "Review this rust: x = 1"),
            ("assistant", "strict=no"),
        ]
        assert got.description == "Review some code."
        explained = await client.get_prompt("explain", {"topic": "MCP", "level": "basic"})
        assert explained.messages[0].content.text == "Explain MCP at basic level"  # type: ignore[union-attr]
        with pytest.raises(InvalidParams) as info:
            await client.get_prompt("explain", {"topic": "MCP"})
        assert info.value.message == "Missing required argument(s) for prompt explain: level"
        with pytest.raises(InvalidParams) as bad:
            await client.get_prompt("review", {"code": "x", "language": "cobol"})
        assert "language" in bad.value.message
        with pytest.raises(InvalidParams):
            await client.get_prompt("nope")


async def test_completion() -> None:
    server = prompt_server()
    calls: list[tuple[Any, ...]] = []

    @server.resource("repo://{owner}/{name}")
    def repo(owner: str, name: str) -> str:
        return f"{owner}/{name}"

    @server.completion()
    def complete(ref: dict[str, Any], argument: str, value: str, context: dict[str, Any]) -> list[str]:
        calls.append((ref, argument, value, context))
        return [f"{value}{i}" for i in range(150)]

    async with Client.connect_server(server, **V) as client:
        assert client.server_capabilities.completions is not msgspec.UNSET
        literal = await client.complete(t.PromptReference(name="review"), "language", "r")
        assert literal.completion.values == ["rust"]
        everything = await client.complete(t.PromptReference(name="review"), "language", "")
        assert everything.completion.values == ["python", "rust", "go"]
        local = await client.complete(t.PromptReference(name="explain"), "topic", "mc", {"level": "pro"})
        assert local.completion.values == ["mc-pro"]
        custom = await client.complete(t.ResourceTemplateReference(uri="repo://{owner}/{name}"), "owner", "ad")
        assert custom.completion.values == [f"ad{i}" for i in range(100)]  # at most 100 values
        assert (custom.completion.total, custom.completion.has_more) == (150, True)
        assert calls == [({"type": "ref/resource", "uri": "repo://{owner}/{name}"}, "owner", "ad", {})]
        with pytest.raises(InvalidParams):
            await client.complete(t.PromptReference(name="nope"), "x", "")
        with pytest.raises(InvalidParams):
            await client.complete(t.ResourceTemplateReference(uri="nope://{x}"), "x", "")


async def test_low_level_method_escape_hatch() -> None:
    server = Server("s")
    seen: list[Any] = []

    @server.method("custom/echo")
    def echo(ctx: Context, params: dict[str, Any] | None) -> dict[str, Any]:
        seen.append((ctx.method, ctx.version))
        return {"got": params}

    @server.method("custom/slow")
    async def slow(ctx: Context, params: dict[str, Any] | None) -> t.CallToolResult:
        await anyio.lowlevel.checkpoint()
        return t.CallToolResult(content=[t.TextContent(text="struct result")])

    @server.method("custom/fail")
    def fail(ctx: Context, params: Any) -> Any:
        raise RpcError("custom failure", {"why": 1}, code=-32099)

    @server.method("custom/gated", capability="prompts")
    def gated(ctx: Context, params: Any) -> Any:  # pragma: no cover - never reached: not advertised
        return {}

    @server.method("tools/list")
    def replaced(ctx: Context, params: Any) -> Any:
        return {"tools": [], "replaced": True}

    async with Client.connect_server(server, **V) as client:
        assert await client.request("custom/echo", {"a": [1, 2]}) == {"got": {"a": [1, 2]}}
        assert await client.request("custom/echo") == {"got": None}
        assert seen == [("custom/echo", "2025-11-25")] * 2
        slow_result = await client.request("custom/slow", None, t.CallToolResult)
        assert slow_result.content[0].text == "struct result"  # type: ignore[union-attr]
        with pytest.raises(RpcError) as info:
            await client.request("custom/fail")
        assert (info.value.code, info.value.message, info.value.data) == (-32099, "custom failure", {"why": 1})
        with pytest.raises(MethodNotFound):
            await client.request("custom/gated")
        assert await client.request("tools/list") == {"tools": [], "replaced": True}


def mixed_content_server() -> Server:
    server = Server("mixed-content")
    link = t.ResourceLink(
        name="entry-42",
        title="Entry 42",
        uri="kb://entries/42",
        description="the whole entry",
        annotations=t.Annotations(priority=0.5),
    )
    audio = t.AudioContent(data="UklGRg==", mime_type="audio/wav")

    @server.tool()
    def blocks() -> t.CallToolResult:
        return t.CallToolResult(
            content=[t.TextContent(text="found"), link, audio, t.ImageContent(data="AA==", mime_type="image/png")]
        )

    @server.tool()
    async def blocks_later() -> t.CallToolResult:
        await anyio.lowlevel.checkpoint()
        return t.CallToolResult(content=[link, audio])

    @server.prompt()
    def linked() -> list[t.PromptMessage]:
        return [
            t.PromptMessage(role="user", content=t.TextContent(text="read this")),
            t.PromptMessage(role="user", content=link),
        ]

    return server


LINK_AS_TEXT = {"type": "text", "text": "Entry 42 (kb://entries/42): the whole entry", "annotations": {"priority": 0.5}}
AUDIO_AS_TEXT = {"type": "text", "text": "[audio/wav audio, not shown: this protocol revision has no audio content]"}


@pytest.mark.parametrize(
    ("version", "kept"),
    [
        ("2024-11-05", {"text", "image"}),
        ("2025-03-26", {"text", "image", "audio"}),
        ("2025-06-18", {"text", "image", "audio", "resource_link"}),
        ("2025-11-25", {"text", "image", "audio", "resource_link"}),
    ],
)
async def test_content_blocks_an_older_revision_does_not_define_are_sent_as_text(version: str, kept: set[str]) -> None:
    """2024-11-05 defines text, image and resource blocks; 2025-03-26 adds audio, 2025-06-18 resource links. A
    block the session's revision lacks would make the whole result undecodable there: it goes out as text."""
    async with raw_server(mixed_content_server(), version=version) as peer:
        sync = (await peer.call(request_frame(1, "tools/call", {"name": "blocks", "arguments": {}})))["result"]
        later = (await peer.call(request_frame(2, "tools/call", {"name": "blocks_later", "arguments": {}})))["result"]
        prompt = (await peer.call(request_frame(3, "prompts/get", {"name": "linked"})))["result"]
    link = (
        LINK_AS_TEXT
        if "resource_link" not in kept
        else {
            "type": "resource_link",
            "name": "entry-42",
            "title": "Entry 42",
            "uri": "kb://entries/42",
            "description": "the whole entry",
            "annotations": {"priority": 0.5},
        }
    )
    audio = AUDIO_AS_TEXT if "audio" not in kept else {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
    image = {"type": "image", "data": "AA==", "mimeType": "image/png"}
    assert sync["content"] == [{"type": "text", "text": "found"}, link, audio, image]
    assert later["content"] == [link, audio]
    assert prompt["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "read this"}},
        {"role": "user", "content": link},
    ]
    assert {block["type"] for block in sync["content"]} <= kept | {"text"}
