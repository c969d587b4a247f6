"""The knowledge server protected (``jsonrpc-mcp serve --http ... --auth-issuer AS``), over real HTTP (uvicorn,
loopback) with real tokens from the test authorization server (``auth_server``): reading needs
``knowledge:read``, writing ``knowledge:write`` (which implies reading), in both eras; the metadata advertises
both; a token without the scope gets the 403 a client steps up from."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from auth_server import AuthServer
from auth_support import auth as auth
from auth_support import serve_late
from http_support import (
    HTTPX_GENERATORS,
    JSON_HEADERS,
    ServerThread,
    init_body,
    response_of,
    stateless_body,
    stateless_headers,
)
from http_support import collect_garbage as collect_garbage
from http_support import http as http

from jsonrpc_mcp.cli import _auth_policy, _parser
from jsonrpc_mcp.examples.knowledge import create_server
from jsonrpc_mcp.examples.knowledge.app import READ_SCOPE, WRITE_SCOPE
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]

READS: list[tuple[str, dict[str, Any]]] = [
    ("tools/call", {"name": "query", "arguments": {"text": "python"}}),
    ("tools/call", {"name": "query_graph", "arguments": {"node": "python"}}),
    ("tools/call", {"name": "history", "arguments": {}}),
    ("resources/read", {"uri": "knowledge://entries"}),
    ("resources/read", {"uri": "knowledge://entries/1"}),
    ("prompts/get", {"name": "retrieve_context", "arguments": {"question": "What about python?"}}),
]
WRITES: list[tuple[str, dict[str, Any]]] = [
    ("tools/call", {"name": "store", "arguments": {"topic": "python", "content": "Python 3.13 is out."}}),
    ("tools/call", {"name": "relate", "arguments": {"subject": "python", "predicate": "is", "object": "a language"}}),
    ("tools/call", {"name": "update", "arguments": {"id": 1, "confidence": 0.9}}),
    ("tools/call", {"name": "undo", "arguments": {"tx_id": 1}}),
    ("tools/call", {"name": "delete", "arguments": {"id": 1}}),
]


@pytest.fixture(scope="module")
def knowledge(auth: AuthServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """``jsonrpc-mcp serve --http 127.0.0.1:PORT --auth-issuer AS``: no scope for every request, the tools'
    own scopes only."""
    server = create_server(tmp_path_factory.mktemp("kb") / "k.db")

    def app(thread: ServerThread) -> McpAsgiApp:
        args = _parser().parse_args(["serve", "--http", f"127.0.0.1:{thread.port}", "--auth-issuer", auth.issuer])
        return McpAsgiApp(server, http_policy=_auth_policy(args, thread.url, server))

    thread = serve_late(app)
    yield thread
    thread.stop()
    server.close()


async def send(
    http: httpx.AsyncClient, url: str, token: str, era: str, ident: int, method: str, params: dict[str, Any]
) -> httpx.Response:
    """One request with ``token``: in a fresh handshake session, or stateless (2026-07-28)."""
    bearer = {"Authorization": f"Bearer {token}"}
    if era == "stateless":
        name = params.get("name") or params.get("uri")
        body = stateless_body(ident, method, params)
        return await http.post(url, json=body, headers={**stateless_headers(method, name), **bearer})
    opened = await http.post(url, json=init_body(), headers={**JSON_HEADERS, **bearer})
    assert opened.status_code == 200, opened.text
    session = {**JSON_HEADERS, **bearer, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    session["MCP-Protocol-Version"] = "2025-11-25"
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    return await http.post(
        url, json={"jsonrpc": "2.0", "id": ident, "method": method, "params": params}, headers=session
    )


def step_up(response: httpx.Response, scope: str) -> None:
    assert response.status_code == 403, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope"')
    assert f'scope="{scope}"' in challenge


async def test_the_metadata_advertises_the_read_and_write_scopes(
    knowledge: ServerThread, http: httpx.AsyncClient
) -> None:
    metadata = (await http.get(f"http://127.0.0.1:{knowledge.port}/.well-known/oauth-protected-resource/mcp")).json()
    assert metadata["scopes_supported"] == [READ_SCOPE, WRITE_SCOPE]
    refused = await http.post(knowledge.url, json=init_body(), headers=JSON_HEADERS)
    assert refused.status_code == 401
    assert "scope=" not in refused.headers["www-authenticate"]  # no scope for every request: clients ask for both


@pytest.mark.parametrize("era", ["handshake", "stateless"])
async def test_reading_needs_knowledge_read_and_writing_knowledge_write(
    knowledge: ServerThread, auth: AuthServer, http: httpx.AsyncClient, era: str
) -> None:
    url = knowledge.url
    nothing = auth.mint(aud=url, scope="profile")
    reader = auth.mint(aud=url, scope=READ_SCOPE)
    writer = auth.mint(aud=url, scope=WRITE_SCOPE)
    listed = await send(http, url, nothing, era, 1, "tools/list", {})  # lists need no scope (spec-decisions 34ab)
    assert {tool["name"] for tool in response_of(listed, 1)["result"]["tools"]} >= {"query", "store"}
    for method, params in READS:
        step_up(await send(http, url, nothing, era, 2, method, params), READ_SCOPE)
    for method, params in WRITES:
        step_up(await send(http, url, reader, era, 3, method, params), WRITE_SCOPE)
        step_up(await send(http, url, nothing, era, 3, method, params), WRITE_SCOPE)
    stored = await send(http, url, writer, era, 4, *WRITES[0])
    assert response_of(stored, 4)["result"]["structuredContent"]["kind"] == "entryStored:v1"
    for token in (reader, writer):  # knowledge:write implies knowledge:read
        for method, params in READS:
            reply = response_of(await send(http, url, token, era, 5, method, params), 5)
            assert "result" in reply, (method, params, reply)
            assert not reply["result"].get("isError"), reply


async def test_a_subscription_needs_the_read_scope(
    knowledge: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    subscribe = ("resources/subscribe", {"uri": "knowledge://entries"})
    step_up(
        await send(http, knowledge.url, auth.mint(aud=knowledge.url, scope="profile"), "handshake", 6, *subscribe),
        READ_SCOPE,
    )
    reader = auth.mint(aud=knowledge.url, scope=READ_SCOPE)
    assert response_of(await send(http, knowledge.url, reader, "handshake", 6, *subscribe), 6)["result"] == {}


def test_the_scopes_are_declared_by_the_tools_resources_and_prompts(tmp_path: Any) -> None:
    server = create_server(tmp_path / "k.db")
    try:
        assert server.declared_scopes() == (READ_SCOPE, WRITE_SCOPE)
        assert server.scopes_for("tools/call", {"name": "store"}) == (WRITE_SCOPE,)
        assert server.scopes_for("tools/call", {"name": "query"}) == (READ_SCOPE,)
        assert server.scopes_for("resources/read", {"uri": "knowledge://entries/7"}) == (READ_SCOPE,)
        assert server.scopes_for("resources/read", {"uri": "ui://knowledge/graph"}) == (READ_SCOPE,)
        ref = {"type": "ref/resource", "uri": "knowledge://entries/{id}"}
        assert server.scopes_for("completion/complete", {"ref": ref}) == (READ_SCOPE,)
        assert server.scope_hierarchy == {WRITE_SCOPE: (READ_SCOPE,)}
    finally:
        server.close()
