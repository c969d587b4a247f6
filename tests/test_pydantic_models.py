"""Pydantic models as tool parameters and results: schemas from pydantic, validation and serialisation by pydantic,
pydantic never imported by the library itself; and the one-line registration error for annotations no schema can
describe. Driven through a real Client (in memory, and a real ``jsonrpc-mcp serve`` process over stdio)."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pydantic
import pytest

from jsonrpc_mcp import Client, Server, structured_data

pytestmark = pytest.mark.anyio


class Place(pydantic.BaseModel):
    city: str = pydantic.Field(min_length=1, description="A city name")
    country: str | None = None


class Query(pydantic.BaseModel):
    place: Place
    days: int = pydantic.Field(default=1, ge=1, le=7)


class Forecast(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(populate_by_name=True)

    city_name: str = pydantic.Field(alias="cityName")
    celsius: float


class Point(msgspec.Struct):
    x: int


def weather_server() -> Server:
    server = Server("weather", "1")

    @server.tool()
    def forecast(query: Query, point: Point | None = None) -> Forecast:
        """The forecast for a place.

        Args:
            query: where and how far ahead
        """
        if query.place.city == "Nowhere":
            return {"celsius": 1.0}  # type: ignore[return-value]  # lacks cityName: fails the output check
        return Forecast(city_name=query.place.city, celsius=20.0 + query.days)

    @server.tool()
    def many(places: list[Place]) -> list[Place]:
        return list(reversed(places))

    return server


def tool_of(server: Server, name: str) -> dict[str, Any]:
    return next(msgspec.to_builtins(x) for x in server.list_tools() if x.name == name)


def test_schemas_come_from_pydantic() -> None:
    server = weather_server()
    tool = tool_of(server, "forecast")
    schema = tool["inputSchema"]
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"] == {"$ref": "#/$defs/Query", "description": "where and how far ahead"}
    assert schema["properties"]["point"]["anyOf"][0] == {"$ref": "#/$defs/Point"}  # a msgspec Struct beside them
    defs = schema["$defs"]
    pydantic_schema = Query.model_json_schema(ref_template="#/$defs/{model}")
    assert defs["Query"] == {k: v for k, v in pydantic_schema.items() if k != "$defs"}
    assert defs["Place"] == pydantic_schema["$defs"]["Place"]
    assert defs["Place"]["properties"]["city"] == {
        "description": "A city name",
        "minLength": 1,
        "title": "City",
        "type": "string",
    }
    assert defs["Point"]["properties"] == {"x": {"type": "integer"}}
    # the output schema is pydantic's serialisation schema (by alias), at the root as 2025-06-18+ require
    out = tool["outputSchema"]
    assert out["type"] == "object"
    assert out["required"] == ["cityName", "celsius"]
    # a list of models is wrapped in {"result": ...}, its definitions at the root
    listed = tool_of(server, "many")["outputSchema"]
    assert listed["properties"]["result"] == {"type": "array", "items": {"$ref": "#/$defs/Place"}}
    assert "Place" in listed["$defs"]


async def test_calls_are_validated_and_answered_by_pydantic() -> None:
    async with Client.connect_server(weather_server()) as client:
        result = await client.call_tool("forecast", {"query": {"place": {"city": "Lyon"}, "days": 2}})
        assert result.is_error is not True
        assert result.structured_content == {"cityName": "Lyon", "celsius": 22.0}
        got = structured_data(result, Forecast)
        assert isinstance(got, Forecast)
        assert got.city_name == "Lyon"

        listed = await client.call_tool("many", {"places": [{"city": "A"}, {"city": "B", "country": "FR"}]})
        assert listed.structured_content == {"result": [{"city": "B", "country": "FR"}, {"city": "A", "country": None}]}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"query": {"place": {}}}, "query: place.city: Field required"),
        ({"query": {"place": {"city": ""}}}, "query: place.city: String should have at least 1 character"),
        ({"query": {"place": {"city": "Lyon"}, "days": 9}}, "query: days: Input should be less than or equal to 7"),
        ({"query": "Lyon"}, "query: Input should be a valid dictionary or instance of Query"),
    ],
)
async def test_arguments_pydantic_refuses_are_a_tool_error_naming_the_field(
    arguments: dict[str, Any], expected: str
) -> None:
    async with Client.connect_server(weather_server()) as client:
        result = await client.call_tool("forecast", arguments)
    assert result.is_error is True
    text = result.content[0]
    assert text.type == "text"
    assert text.text == f"Invalid arguments for tool forecast: {expected}"


async def test_output_pydantic_refuses_is_a_tool_error() -> None:
    async with Client.connect_server(weather_server()) as client:
        result = await client.call_tool("forecast", {"query": {"place": {"city": "Nowhere"}}})
    assert result.is_error is True
    assert "does not match its schema" in result.content[0].text  # type: ignore[union-attr]


def test_a_type_without_a_schema_fails_registration_in_one_line() -> None:
    server = Server("bad", "1")
    with pytest.raises(TypeError) as caught:

        @server.tool()
        def connect(sock: socket.socket, retries: int = 1) -> str:
            return ""

    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("tool 'connect': parameter 'sock' is socket.socket, which has no JSON Schema; supported:")
    assert "msgspec.Struct" in message
    assert "pydantic models" in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__

    with pytest.raises(TypeError, match=r"^tool 'maybe': parameter 'sock' is socket\.socket"):

        @server.tool()
        def maybe(sock: list[socket.socket] | None = None) -> str:
            return ""

    with pytest.raises(TypeError, match=r"^tool 'opener': the return annotation is socket\.socket, which has no JSON"):

        @server.tool()
        def opener() -> socket.socket:
            raise NotImplementedError

    assert [tool.name for tool in server.list_tools()] == []


OtherPlace = msgspec.defstruct("Place", [("lat", float)])  # the name of a pydantic model above, another schema


def test_two_definitions_under_one_name_are_refused() -> None:
    server = Server("clash", "1")
    with pytest.raises(TypeError, match="two types named 'Place'"):

        @server.tool()
        def both(a: OtherPlace, b: Query) -> str:  # type: ignore[valid-type]
            return ""


def test_pydantic_is_never_imported_by_the_library(tmp_path: Path) -> None:
    """A server (and client) without pydantic models runs without importing pydantic, though it is installed."""
    script = tmp_path / "plain.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import anyio
            import msgspec
            from jsonrpc_mcp import Client, Server, structured_data

            class Sum(msgspec.Struct):
                total: int

            server = Server("plain", "1")

            @server.tool()
            def add(a: int, b: int = 0) -> Sum:
                return Sum(a + b)

            async def main() -> None:
                async with Client.connect_server(server) as client:
                    result = await client.call_tool("add", {"a": 1, "b": 2})
                    assert structured_data(result, Sum) == Sum(3)
                    result = await client.call_tool("add", {"a": "x"})
                    assert result.is_error
                print("pydantic" in sys.modules)

            anyio.run(main)
            """
        )
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


async def test_a_pydantic_tool_served_over_stdio(tmp_path: Path) -> None:
    app = tmp_path / "weather_app.py"
    app.write_text(
        textwrap.dedent(
            """
            import pydantic
            from jsonrpc_mcp import Server

            class Query(pydantic.BaseModel):
                city: str
                days: int = pydantic.Field(default=1, ge=1)

            class Forecast(pydantic.BaseModel):
                city: str
                days: int

            server = Server("weather", "1")

            @server.tool()
            async def forecast(query: Query) -> Forecast:
                return Forecast(city=query.city, days=query.days)
            """
        )
    )
    command = [sys.executable, "-m", "jsonrpc_mcp", "serve", str(app)]
    async with Client.connect_stdio(command) as client:
        (tool,) = await client.list_tools()
        assert tool.input_schema["$defs"]["Query"]["required"] == ["city"]
        result = await client.call_tool("forecast", {"query": {"city": "Lyon", "days": 3}})
        assert result.structured_content == {"city": "Lyon", "days": 3}
        refused = await client.call_tool("forecast", {"query": {"city": "Lyon", "days": 0}})
        assert refused.is_error is True
        assert refused.content[0].text == (  # type: ignore[union-attr]
            "Invalid arguments for tool forecast: query: days: Input should be greater than or equal to 1"
        )
