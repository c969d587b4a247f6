"""`X-Response-Format` over real Streamable HTTP: the header reaches the tool's context in both eras and sets the
default `format` of the knowledge server's tools; an explicit argument wins."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_support import ServerThread

from jsonrpc_mcp import Client, types
from jsonrpc_mcp.examples.knowledge import create_server
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = pytest.mark.anyio


@pytest.fixture
def knowledge_url(tmp_path: Path) -> Iterator[str]:
    server = create_server(str(tmp_path / "k.db"))
    thread = ServerThread(McpAsgiApp(server))
    try:
        yield thread.url
    finally:
        thread.stop()
        server.close()  # its SQLite connections (Python 3.13 warns about connections left to the collector)


def mime_types(result: Any) -> list[str]:
    return [(block.meta or {}).get("mimeType") for block in result.content if isinstance(block, types.TextContent)]


@pytest.mark.parametrize("version", ["auto", "2025-11-25"])
async def test_header_sets_the_default_format_and_the_argument_wins(knowledge_url: str, version: str) -> None:
    async with Client.connect_http(knowledge_url, protocol_version=version) as plain:
        stored = await plain.call_tool("store", {"topic": "http", "content": "headers reach tools"})
        assert mime_types(stored)[0] == "text/markdown"
    headers = {"X-Response-Format": "json"}
    async with Client.connect_http(knowledge_url, headers=headers, protocol_version=version) as client:
        assert client.stateless is (version == "auto")
        by_header = await client.call_tool("query", {"topic": "http"})
        assert mime_types(by_header) == ["application/json"]
        explicit = await client.call_tool("query", {"topic": "http", "format": "both"})
        assert mime_types(explicit) == ["text/markdown", "application/json"]
