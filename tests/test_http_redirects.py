"""Our HTTP client and redirects of the MCP endpoint, against our server behind a redirecting middleware.

307 and 308 keep the method and the body, so every request follows them (a 308 moves the endpoint for good);
a POST never follows 301/302/303 (they would turn it into a GET), no request follows one to another origin
(the session id and the caller's headers stay where they were sent), and a loop ends after five hops. A
redirect not followed is a clear error, never a hang.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from http_support import HTTPX_GENERATORS, ServerThread, make_server
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Client, RpcError
from jsonrpc_mcp import types as t
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]

ERAS = [pytest.param("2025-11-25", id="handshake"), pytest.param("auto", id="stateless")]


class Redirecting:
    """``/moved-<status>`` redirects to ``/mcp`` with that status; ``/abroad`` to another origin; ``/loop`` to
    itself. Remembers the method and path of every request."""

    def __init__(self, app: McpAsgiApp) -> None:
        self.app = app
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        self.seen.append((scope["method"], path))
        if path.startswith("/moved-"):
            await self._redirect(send, int(path.rpartition("-")[2]), b"/mcp")
        elif path == "/abroad":
            await self._redirect(send, 307, b"http://127.0.0.2:9/mcp")
        elif path == "/loop":
            await self._redirect(send, 307, b"/loop")
        else:
            await self.app(scope, receive, send)

    @staticmethod
    async def _redirect(send: Any, status: int, location: bytes) -> None:
        await send({"type": "http.response.start", "status": status, "headers": [(b"location", location)]})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture(scope="module")
def redirecting() -> Redirecting:
    return Redirecting(McpAsgiApp(make_server()))


@pytest.fixture(scope="module")
def server(redirecting: Redirecting) -> Iterator[ServerThread]:
    thread = ServerThread(redirecting)
    yield thread
    thread.stop()


def url(server: ServerThread, path: str) -> str:
    return f"http://{server.host}:{server.port}{path}"


async def answer(params: t.ElicitRequestParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"answer": "Ada"})


@pytest.mark.parametrize("status", [307, 308])
@pytest.mark.parametrize("version", ERAS)
async def test_method_keeping_redirects_are_followed(
    server: ServerThread, redirecting: Redirecting, status: int, version: str
) -> None:
    start = len(redirecting.seen)
    async with Client.connect_http(
        url(server, f"/moved-{status}"), protocol_version=version, elicitation=answer
    ) as client:
        result = await client.call_tool("add", {"a": 2, "b": 40})
        assert result.structured_content == {"result": 42}
        asked = await client.call_tool("ask", {"question": "Name?"})
        assert asked.content[0].text == "accept: Ada"  # type: ignore[union-attr]
        sid = getattr(client.stream, "session_id", None)
    seen = redirecting.seen[start:]
    moved = [method for method, path in seen if path == f"/moved-{status}"]
    served = [method for method, path in seen if path == "/mcp"]
    if status == 308:  # the endpoint moved: only the first request went to the old URL
        assert moved == ["POST"]
    else:  # a temporary redirect: every request goes to the URL given, then follows
        assert len(moved) == len(served) >= 3
    if version != "auto":
        assert sid is not None and "DELETE" in served and "GET" in served
        assert sid not in redirecting.app.sessions  # the DELETE reached the session


@pytest.mark.parametrize("status", [301, 302, 303])
async def test_a_post_does_not_follow_a_redirect_that_would_make_it_a_get(server: ServerThread, status: int) -> None:
    with pytest.raises(RpcError) as info:
        async with Client.connect_http(url(server, f"/moved-{status}"), protocol_version="2025-11-25"):
            pass
    assert f"HTTP {status}" in info.value.message and "redirect not followed" in info.value.message
    assert info.value.local and info.value.code == -32000  # (made here: never taken for an error the server sent)


async def test_a_redirect_to_another_origin_is_not_followed(server: ServerThread, redirecting: Redirecting) -> None:
    with pytest.raises(RpcError) as info:
        async with Client.connect_http(url(server, "/abroad"), protocol_version="2025-11-25"):
            pass
    assert "HTTP 307" in info.value.message and "127.0.0.2" in info.value.message


async def test_a_redirect_loop_ends(server: ServerThread, redirecting: Redirecting) -> None:
    start = len(redirecting.seen)
    with pytest.raises(RpcError) as info:
        async with Client.connect_http(url(server, "/loop"), protocol_version="2025-11-25"):
            pass
    assert "redirect not followed" in info.value.message
    assert redirecting.seen[start:] == [("POST", "/loop")] * 6  # the request and five redirects
