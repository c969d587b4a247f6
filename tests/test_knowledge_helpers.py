"""Shared helpers of the knowledge server tests (no tests here): a real client on a real SQLite file, with every
tool result checked against the tool's declared outputSchema."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema_rs

from jsonrpc_mcp import Client, types
from jsonrpc_mcp.examples.knowledge import KnowledgeServer, create_server

HANDSHAKE = "2025-11-25"
ERAS = ["auto", HANDSHAKE]
TIMEOUT = 20


class KB:
    """A connected client with typed shortcuts; every tool result is validated against the outputSchema."""

    def __init__(self, client: Client, server: KnowledgeServer, tools: list[types.Tool]) -> None:
        self.client = client
        self.server = server
        self.tools = {tool.name: tool for tool in tools}
        self._validators = {
            tool.name: jsonschema_rs.validator_for(tool.output_schema)
            for tool in tools
            if isinstance(tool.output_schema, dict)
        }

    async def result(self, name: str, **arguments: Any) -> types.CallToolResult:
        result = await self.client.call_tool(name, arguments)
        data = result.structured_content
        assert isinstance(data, dict), f"{name} returned no structuredContent"
        errors = [e.message for e in self._validators[name].iter_errors(data)]
        assert not errors, f"{name} result does not match its outputSchema: {errors}"
        return result

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        data = (await self.result(name, **arguments)).structured_content
        assert isinstance(data, dict)
        return data

    async def read(self, uri: str) -> dict[str, Any]:
        result = await self.client.read_resource(uri)
        (contents,) = result.contents
        assert contents.mime_type == "application/json"
        assert isinstance(contents.text, str)
        value = json.loads(contents.text)
        assert isinstance(value, dict)
        return value

    async def store(self, topic: str, content: str, **more: Any) -> dict[str, Any]:
        data = await self.call("store", topic=topic, content=content, **more)
        assert data["kind"] == "entryStored:v1", data
        return data


@asynccontextmanager
async def knowledge(path: Path | str, **options: Any) -> AsyncIterator[KB]:
    """The knowledge server on ``path`` with a client connected to it (closed, with the store, at the end)."""
    server = create_server(str(path))
    try:
        with anyio.fail_after(TIMEOUT):
            async with Client.connect_server(server, **options) as client:
                yield KB(client, server, await client.list_tools())
    finally:
        server.close()


class Notes:
    """Collects the client's notifications; ``next()`` waits for the next one of a method (no sleeping)."""

    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[tuple[str, dict[str, Any]]](100)
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, method: str, params: dict[str, Any]) -> None:
        # Synchronous on purpose: the client runs a callback that returns an awaitable as its own task, and
        # tasks may run out of order; a plain call keeps the notifications in the order they arrived.
        self.send.send_nowait((method, params))

    async def next(self, method: str = "notifications/resources/updated") -> dict[str, Any]:
        with anyio.fail_after(TIMEOUT):
            while True:
                got, params = await self.receive.receive()
                self.seen.append((got, params))
                if got == method:
                    return params

    async def aclose(self) -> None:
        await self.send.aclose()
        await self.receive.aclose()


def texts(result: types.CallToolResult) -> list[types.TextContent]:
    return [c for c in result.content if isinstance(c, types.TextContent)]


def mime(block: types.TextContent) -> Any:
    return block.meta.get("mimeType") if isinstance(block.meta, dict) else None
