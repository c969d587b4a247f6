"""The MCP authorization pages, resource server side (R3-R5): what ``ProtectedResource`` publishes and answers,
sentence by sentence (conformance/spec/coverage/auth-resource.toml maps each test to the sentences it pins)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from http_support import JSON_HEADERS, ServerThread, init_body, stateless_body, stateless_headers
from http_support import http as http

from jsonrpc_mcp import Server
from jsonrpc_mcp.auth import AccessToken, InvalidToken, ProtectedResource
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = pytest.mark.anyio

AS = "https://auth.example.com"


class Tokens:
    """A verifier of a few fixed tokens (the resource's checks, not the token format, are the subject here)."""

    def __init__(self, resource: str) -> None:
        self.known = {
            "reader": AccessToken(subject="u", client_id="c", scopes=frozenset({"read"}), audience=(resource,)),
            "nothing": AccessToken(subject="u", client_id="c", audience=(resource,)),
        }

    async def verify(self, token: str) -> AccessToken:
        if token not in self.known:
            raise InvalidToken("unknown token")
        return self.known[token]


def protection(resource: str = "https://mcp.example.com/mcp") -> ProtectedResource:
    return ProtectedResource(resource=resource, authorization_servers=[AS], verifier=Tokens(resource))


def test_the_metadata_names_at_least_one_authorization_server() -> None:
    assert protection().metadata["authorization_servers"] == [AS]
    with pytest.raises(ValueError, match="name at least one authorization server"):
        ProtectedResource(resource="https://mcp.example.com/mcp", authorization_servers=[], verifier=Tokens(""))


@pytest.mark.parametrize("where", ["scopes_supported", "required_scopes"])
def test_offline_access_is_never_a_scope_the_resource_names(where: str) -> None:
    with pytest.raises(ValueError, match=f"^{where} cannot hold offline_access: refresh tokens"):
        ProtectedResource(
            resource="https://mcp.example.com/mcp",
            authorization_servers=[AS],
            verifier=Tokens(""),
            **{where: ["read", "offline_access"]},  # type: ignore[arg-type]
        )


def make_server() -> Server:
    server = Server("scoped", "1.0")

    @server.tool(scopes=["read", "files:write", "notes:write"])
    def publish(text: str) -> str:
        """Needs three scopes at once."""
        return text

    return server


class LateApp:
    app: McpAsgiApp | None = None

    async def __call__(self, scope: object, receive: object, send: object) -> None:
        assert self.app is not None
        await self.app(scope, receive, send)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def protected() -> Iterator[ServerThread]:
    late = LateApp()
    thread = ServerThread(late, lifespan="off")
    late.app = McpAsgiApp(make_server(), http_policy=protection(thread.url))
    yield thread
    thread.stop()


@pytest.mark.parametrize("token", ["reader", "nothing"])
async def test_a_403_names_every_scope_the_operation_needs_in_one_challenge(
    protected: ServerThread, http: httpx.AsyncClient, token: str
) -> None:
    body = stateless_body(1, "tools/call", {"name": "publish", "arguments": {"text": "hi"}})
    headers = {**stateless_headers("tools/call", "publish"), "Authorization": f"Bearer {token}"}
    response = await http.post(protected.url, json=body, headers=headers)
    assert response.status_code == 403
    [challenge] = response.headers.get_list("www-authenticate")
    assert challenge.startswith('Bearer error="insufficient_scope", scope="files:write notes:write read"')
    assert response.json()["scope"] == "files:write notes:write read"


async def test_an_unknown_token_is_refused_before_anything_is_processed(
    protected: ServerThread, http: httpx.AsyncClient
) -> None:
    response = await http.post(protected.url, json=init_body(), headers={**JSON_HEADERS, "Authorization": "Bearer x"})
    assert response.status_code == 401
    assert "mcp-session-id" not in response.headers
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert "resource_metadata=" in response.headers["www-authenticate"]
