"""The HTTP client library's log lines never show a session id (it lets a request into its session)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest
from http_support import HTTPX_GENERATORS, ServerThread, start_app

from jsonrpc_mcp import Client
from jsonrpc_mcp.transports.http_log_redaction import HttpLogRedaction

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS]

#: A session id shown whole: anything but the redaction mark after where it goes.
SHOWN = re.compile(r"(?i)session_id=(?!\[redacted\])|mcp-session-id', b'(?!\[redacted\])")


@pytest.fixture(scope="module")
def served() -> Iterator[ServerThread]:
    thread = start_app(legacy_sse=True)
    yield thread
    thread.stop()


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name.startswith(("httpx", "httpcore"))]


async def test_the_legacy_transports_messages_url_is_logged_without_its_session_id(
    served: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with Client.connect_sse(f"http://127.0.0.1:{served.port}/sse") as client:
        await client.call_tool("add", {"a": 2, "b": 3})
    lines = messages(caplog)
    assert any("/messages/?session_id=[redacted]" in line for line in lines)  # (httpx's INFO line of each POST)
    assert not [line for line in lines if SHOWN.search(line)]


async def test_a_streamable_http_session_id_is_kept_out_of_httpcores_trace(
    served: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with Client.connect_http(f"http://127.0.0.1:{served.port}/mcp", protocol_version="2025-11-25") as client:
        await client.call_tool("add", {"a": 2, "b": 3})
    lines = messages(caplog)
    assert any("mcp-session-id', b'[redacted]" in line.lower() for line in lines)  # (httpcore's DEBUG response headers)
    assert not [line for line in lines if SHOWN.search(line)]


def test_a_record_without_a_session_id_passes_untouched() -> None:
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "HTTP Request: %s %s", ("POST", "/mcp"), None)
    assert HttpLogRedaction().filter(record) and record.msg == "HTTP Request: %s %s" and record.args
