"""Our OAuth client against a 2025-03-26 server: the revision whose authorization spec made the MCP server its own
authorization server. No protected-resource metadata; the authorization base URL is the server's URL without its
path; RFC 8414 metadata at ``{base}/.well-known/oauth-authorization-server`` (asked with ``MCP-Protocol-Version``),
and without it the default endpoints ``{base}/authorize``, ``{base}/token``, ``{base}/register``.

The server is real, under uvicorn on loopback: our MCP app at ``/v1/mcp`` (a path, which the base URL discards)
behind a bearer check of the tokens issued by the authlib authorization server of ``auth_server``, mounted at the
same origin, as such a server was deployed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from auth_server import AuthServer
from http_support import HTTPX_GENERATORS, ServerThread
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Client, Server
from jsonrpc_mcp.auth import HeadlessConsent, MemoryTokenStore, OAuth
from jsonrpc_mcp.errors import AuthorizationError
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [
    pytest.mark.anyio,
    HTTPX_GENERATORS,
    pytest.mark.usefixtures("collect_garbage"),
    pytest.mark.filterwarnings("ignore::authlib.deprecate.AuthlibDeprecationWarning"),
]

REDIRECT = "http://127.0.0.1:5999/callback"
R2 = "2025-03-26"
METADATA = "/.well-known/oauth-authorization-server"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    status: int | None = None


class LegacyServer:
    """An MCP server of 2025-03-26 that is its own authorization server, on one origin.

    ``as_metadata``: whether it publishes RFC 8414 metadata (else the defaults apply). ``well_known_status``: what
    it answers for any other well-known URI, protected-resource metadata included (it knows nothing of them: 404,
    or the 401 of a gate in front of everything, or the 500 of a catch-all that fails)."""

    def __init__(self, *, as_metadata: bool = True, well_known_status: int = 404) -> None:
        self.auth = AuthServer()
        self.as_app = self.auth.app()
        self.mcp = McpAsgiApp(_server(), path="/v1/mcp")
        self.as_metadata = as_metadata
        self.well_known_status = well_known_status
        self.seen: list[Seen] = []
        self.thread = ServerThread(self, lifespan="off")
        self.auth.issuer = self.origin

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.thread.port}"

    @property
    def url(self) -> str:
        return f"{self.origin}/v1/mcp"

    def paths(self) -> list[str]:
        return [seen.path for seen in self.seen]

    def revoke(self) -> None:
        for token in self.auth.tokens.values():
            token.revoked = True

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        seen = Seen(scope["method"], scope["path"], {k.decode(): v.decode() for k, v in scope["headers"]})
        self.seen.append(seen)

        async def recording_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                seen.status = message["status"]
            await send(message)

        path = scope["path"]
        if path == "/v1/mcp":
            if self._authorized(seen.headers.get("authorization", "")):
                await self.mcp(scope, receive, recording_send)
            else:
                await _answer(recording_send, 401, {"www-authenticate": 'Bearer error="invalid_token"'})
        elif path.startswith("/.well-known/") and (path != METADATA or not self.as_metadata):
            await _answer(recording_send, 404 if path == METADATA else self.well_known_status)
        else:
            await self.as_app(scope, receive, recording_send)

    def _authorized(self, header: str) -> bool:
        scheme, _, token = header.partition(" ")
        issued = self.auth.tokens.get(token) if scheme.lower() == "bearer" else None
        return issued is not None and not issued.is_revoked() and not issued.is_expired()

    def stop(self) -> None:
        self.thread.stop()


def _server() -> Server:
    server = Server("legacy", "1.0")

    @server.tool()
    def shout(text: str) -> str:
        """Say it loudly."""
        return text.upper()

    return server


async def _answer(send: Any, status: int, headers: dict[str, str] | None = None) -> None:
    raw = [(k.encode(), v.encode()) for k, v in (headers or {}).items()] + [(b"content-length", b"0")]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def legacy(request: pytest.FixtureRequest) -> Iterator[LegacyServer]:
    server = LegacyServer(**getattr(request, "param", {}))
    yield server
    server.stop()


def oauth(store: MemoryTokenStore | None = None) -> OAuth:
    return OAuth(client_name="legacy test", store=store, consent=HeadlessConsent(redirect_uri=REDIRECT))


def as_requests(server: LegacyServer) -> list[Seen]:
    """What the client asked of the authorization server at the MCP server's origin (the MCP endpoint aside)."""
    return [seen for seen in server.seen if seen.path != "/v1/mcp"]


async def test_the_metadata_at_the_servers_origin_is_used(legacy: LegacyServer) -> None:
    async with Client.connect_http(legacy.url, auth=oauth(), protocol_version=R2) as client:
        assert client.protocol_version == R2
        assert (await client.call_tool("shout", {"text": "hi"})).content[0].text == "HI"
    asked = as_requests(legacy)
    # no protected resource metadata in that revision: the probes find nothing, then RFC 8414 at the base URL
    # (the origin: /v1/mcp discarded), asked with the revision spoken; no OpenID Connect discovery
    assert [seen.path for seen in asked] == [
        "/.well-known/oauth-protected-resource/v1/mcp",
        "/.well-known/oauth-protected-resource",
        METADATA,
        "/register",
        "/authorize",
        "/token",
    ]
    assert all(seen.headers.get("mcp-protocol-version") == R2 for seen in asked[:3])
    [authorize] = [seen for seen in asked if seen.path == "/authorize"]
    [token] = legacy.auth.tokens.values()
    assert "resource" not in authorize.headers and token.claims["aud"] != legacy.url  # no resource indicators then
    assert legacy.seen[0].path == "/v1/mcp" and legacy.seen[0].status == 401


@pytest.mark.parametrize("legacy", [{"as_metadata": False}], indirect=True)
async def test_without_metadata_the_default_endpoints_at_the_base_url(legacy: LegacyServer) -> None:
    async with Client.connect_http(legacy.url, auth=oauth(), protocol_version=R2) as client:
        assert (await client.call_tool("shout", {"text": "ok"})).content[0].text == "OK"
    paths = [seen.path for seen in as_requests(legacy)]
    assert paths[2:] == [METADATA, "/register", "/authorize", "/token"]  # 404, then /register, /authorize, /token
    assert "/.well-known/openid-configuration" not in paths  # not part of that revision's discovery


@pytest.mark.parametrize("status", [401, 500])
async def test_well_known_uris_it_does_not_know_do_not_stop_a_2025_03_26_client(status: int) -> None:
    """A 2025-03-26 server knows nothing of protected-resource metadata: whatever it answers for those URIs (the
    401 of a gate in front of everything, a failing catch-all), its own rules apply."""
    legacy = LegacyServer(well_known_status=status)
    try:
        async with Client.connect_http(legacy.url, auth=oauth(), protocol_version=R2) as client:
            assert (await client.call_tool("shout", {"text": "a"})).content[0].text == "A"
        assert [seen.status for seen in as_requests(legacy)[:3]] == [status, status, 200]
    finally:
        legacy.stop()


async def test_a_later_401_in_a_2025_03_26_session_authorizes_again_by_its_rules(legacy: LegacyServer) -> None:
    store = MemoryTokenStore()
    async with Client.connect_http(legacy.url, auth=oauth(store), protocol_version=R2) as client:
        await client.call_tool("shout", {"text": "one"})
        legacy.revoke()
        before = len(legacy.seen)
        assert (await client.call_tool("shout", {"text": "two"})).content[0].text == "TWO"
    again = [seen for seen in legacy.seen[before:] if seen.path != "/v1/mcp"]
    assert [seen.path for seen in again if seen.path.startswith("/.well-known/")][-1] == METADATA
    assert all(seen.headers.get("mcp-protocol-version") == R2 for seen in again if seen.path == METADATA)
    assert "/authorize" in [seen.path for seen in again]
    assert len(legacy.auth.tokens) == 2


async def test_a_server_of_a_later_revision_without_metadata_still_fails_clearly() -> None:
    """Only for 2025-03-26 does an unreadable well-known URI mean "use the origin": a client speaking a later
    revision reports it (spec-decisions 34k)."""
    legacy = LegacyServer(well_known_status=500)
    try:
        with pytest.raises(AuthorizationError) as caught:
            async with Client.connect_http(legacy.url, auth=oauth(), protocol_version="2025-11-25"):
                pass
        assert caught.value.step == "protected resource metadata"
    finally:
        legacy.stop()
