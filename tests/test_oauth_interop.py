"""Interop: our OAuth client completes a real authorization against the authlib authorization server of
``auth_server`` (dynamic registration, PKCE, RFC 8707 audience-bound JWT access tokens), to reach the official
Python SDK's MCP server configured as a resource server (its protected resource metadata, its 401 challenge, its
bearer check), everything under uvicorn on loopback. The SDK server's token verifier is this project's
``JwtVerifier`` (signature against the authorization server's key set, issuer, audience = the resource)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.to_thread
import pytest

pytest.importorskip("mcp")  # the official SDK: an interop peer, absent from the lower-bound run (make test-min)

from auth_server import AuthServer, running_auth_server
from http_support import ServerThread

from jsonrpc_mcp import Client
from jsonrpc_mcp.auth import HeadlessConsent, InvalidToken, JwtVerifier, OAuth

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.interop,
    # authlib's JWT token generator reads its key set through an API it deprecates in favour of joserfc's
    pytest.mark.filterwarnings("ignore::authlib.deprecate.AuthlibDeprecationWarning"),
]


class _Lazy:
    """An ASGI app set after the server listens (the SDK app needs its own URL); until then the server's first
    call (its lifespan) waits for it."""

    def __init__(self) -> None:
        self.app: Any = None
        self.ready = threading.Event()

    def set(self, app: Any) -> None:
        self.app = app
        self.ready.set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if not self.ready.is_set():
            await anyio.to_thread.run_sync(self.ready.wait, 10)
        await self.app(scope, receive, send)


class _SdkVerifier:
    """The SDK's TokenVerifier protocol, answered by our JwtVerifier."""

    def __init__(self, verifier: JwtVerifier) -> None:
        self.verifier = verifier

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        try:
            checked = await self.verifier.verify(token)
        except InvalidToken:
            return None
        return AccessToken(
            token=token,
            client_id=checked.client_id or "",
            scopes=sorted(checked.scopes),
            expires_at=int(checked.expires_at) if checked.expires_at else None,
            resource=checked.audience[0] if checked.audience else None,
        )


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    with running_auth_server() as state:
        yield state


@pytest.fixture
def sdk_server(auth_server: AuthServer) -> Iterator[ServerThread]:
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer

    lazy = _Lazy()
    thread = ServerThread(lazy)
    url = thread.url
    server = MCPServer(
        "notes",
        token_verifier=_SdkVerifier(
            JwtVerifier(issuer=auth_server.issuer, audience=url, jwks_url=f"{auth_server.issuer}/jwks")
        ),
        auth=AuthSettings(
            issuer_url=auth_server.issuer,
            resource_server_url=url,
            required_scopes=["notes:read"],
            validate_token_resource=True,
        ),
    )

    @server.tool()
    def count(text: str) -> int:
        """How many words."""
        return len(text.split())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        lazy.set(server.streamable_http_app())
    yield thread
    thread.stop()


async def test_our_client_authorizes_with_a_real_authorization_server_for_the_sdk_server(
    auth_server: AuthServer, sdk_server: ServerThread
) -> None:
    auth = OAuth(client_name="interop", consent=HeadlessConsent(redirect_uri="http://127.0.0.1:5999/callback"))
    async with Client.connect_http(sdk_server.url, auth=auth, protocol_version="2025-11-25") as client:
        assert [tool.name for tool in await client.list_tools()] == ["count"]
        result = await client.call_tool("count", {"text": "one two three"})
        assert result.structured_content == {"result": 3}
    [registered] = auth_server.clients.values()
    assert registered.metadata["token_endpoint_auth_method"] == "none"  # a public client: no secret to keep
    [token] = auth_server.tokens.values()
    assert token.claims["aud"] == sdk_server.url  # RFC 8707: the token is for this server only
    assert "notes:read" in token.claims["scope"].split()
