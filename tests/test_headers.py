"""SEP-2243 header rules: which x-mcp-header annotations are valid, and how values are encoded and decoded."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jsonrpc_mcp import Client, Server
from jsonrpc_mcp.mcp.headers import (
    InvalidHeaderAnnotation,
    decode_header_value,
    encode_header_value,
    param_headers,
    standard_headers,
    tool_header_params,
)


def schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def test_valid_annotations_map_paths_to_header_names() -> None:
    s = schema(
        region={"type": "string", "x-mcp-header": "Region"},
        priority={"type": "integer", "x-mcp-header": "Priority"},
        nested={"type": "object", "properties": {"flag": {"type": "boolean", "x-mcp-header": "Flag"}}},
        plain={"type": "number"},
    )
    assert tool_header_params(s) == {("region",): "Region", ("priority",): "Priority", ("nested", "flag"): "Flag"}


@pytest.mark.parametrize(
    "props",
    [
        {"a": {"type": "string", "x-mcp-header": ""}},
        {"a": {"type": "object", "x-mcp-header": "A"}},
        {"a": {"type": "array", "x-mcp-header": "A"}},
        {"a": {"type": "null", "x-mcp-header": "A"}},
        {"a": {"type": "number", "x-mcp-header": "A"}},
        {"a": {"type": "string", "x-mcp-header": "Has Space"}},
        {"a": {"type": "string", "x-mcp-header": "Colon:Name"}},
        {"a": {"type": "string", "x-mcp-header": "Nön"}},
        {"a": {"type": "string", "x-mcp-header": "Ctl\x01"}},
        {"a": {"type": "string", "x-mcp-header": "Same"}, "b": {"type": "string", "x-mcp-header": "same"}},
        # only a chain of properties from the root reaches a header (2026-07-28, "statically reachable")
        {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}},
        {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}, {"type": "integer"}]}},
        {"a": {"type": "object", "oneOf": [{"properties": {"b": {"type": "string", "x-mcp-header": "B"}}}]}},
    ],
)
def test_invalid_annotations_are_rejected(props: dict[str, Any]) -> None:
    with pytest.raises(InvalidHeaderAnnotation):
        tool_header_params(schema(**props))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("us-west1", "us-west1"),
        (42, "42"),
        (True, "true"),
        (False, "false"),
        ("", ""),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("\tindented", "=?base64?CWluZGVudGVk?="),
        ("us west 1", "us west 1"),
        (None, None),
    ],
)
def test_value_encoding(value: Any, encoded: str | None) -> None:
    assert encode_header_value(value) == encoded


@given(st.text())
def test_encoding_round_trips(text: str) -> None:
    encoded = encode_header_value(text)
    assert encoded is not None
    assert all(0x20 <= ord(ch) <= 0x7E for ch in encoded)
    assert decode_header_value(encoded) == text


def test_values_that_look_encoded_are_encoded() -> None:
    tricky = "=?base64?abc?="
    assert decode_header_value(encode_header_value(tricky) or "") == tricky


def test_standard_and_param_headers() -> None:
    assert standard_headers("tools/list", {}) == {"Mcp-Method": "tools/list"}
    assert standard_headers("tools/call", {"name": "t"}) == {"Mcp-Method": "tools/call", "Mcp-Name": "t"}
    assert standard_headers("resources/read", {"uri": "x://é"})["Mcp-Name"].startswith("=?base64?")
    annotations = {("region",): "Region", ("verbose",): "Verbose", ("a", "b"): "Deep"}
    got = param_headers(annotations, {"region": "eu", "verbose": None, "a": {"b": 7}})
    assert got == {"Mcp-Param-Region": "eu", "Mcp-Param-Deep": "7"}


@pytest.mark.anyio
async def test_client_drops_tools_with_invalid_annotations() -> None:
    server = Server("h")

    def good(region: str) -> str:
        return region

    def bad(**kwargs: Any) -> str:
        return "never"

    server.add_tool(good, name="good", input_schema=schema(region={"type": "string", "x-mcp-header": "Region"}))
    server.add_tool(bad, name="bad", input_schema=schema(x={"type": "object", "x-mcp-header": "X"}))
    async with Client.connect_server(server) as client:
        names = [tool.name for tool in await client.list_tools()]
    assert names == ["good"]
