"""Interop between the two halves of this project's authorization: our ``Client`` with its ``OAuth`` against our
own protected server (``ProtectedResource`` with a ``JwtVerifier``), with the authlib authorization server of
``auth_server`` issuing real JWTs, everything under uvicorn on loopback, in both eras.

The whole flow, each step checked where it happens: the first request gets a 401 whose challenge names the
protected-resource metadata; the client reads that metadata, then the authorization server's (RFC 8414); it
registers itself (RFC 7591, a public client); it gets a code with PKCE S256 and the RFC 8707 ``resource``,
redeems it for a token bound to this server; the call succeeds with the token's principal on ``ctx.auth``; a tool
that needs more scope answers 403 ``insufficient_scope``, the client re-authorizes for the union of the scopes
and the call succeeds. The access token never goes to the authorization server."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import pytest
from auth_server import AuthServer
from http_support import HTTPX_GENERATORS, ServerThread
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp.auth import HeadlessConsent, JwtVerifier, MemoryTokenStore, OAuth, ProtectedResource
from jsonrpc_mcp.auth.resource import metadata_path
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [
    pytest.mark.anyio,
    HTTPX_GENERATORS,
    pytest.mark.usefixtures("collect_garbage"),
    # authlib's JWT token generator reads its key set through an API it deprecates in favour of joserfc's
    pytest.mark.filterwarnings("ignore::authlib.deprecate.AuthlibDeprecationWarning"),
]

REDIRECT = "http://127.0.0.1:5999/callback"


@dataclass
class Seen:
    """One HTTP request a server received, and the status it answered."""

    method: str
    path: str
    query: dict[str, str]
    authorization: str | None
    status: int | None = None


class Recorder:
    """An ASGI app in front of another (set once the server listens): records every request and its status."""

    def __init__(self, app: Any = None) -> None:
        self.app = app
        self.seen: list[Seen] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        authorization = headers.get(b"authorization")
        entry = Seen(
            scope["method"],
            scope["path"],
            dict(parse_qsl(scope.get("query_string", b"").decode())),
            authorization.decode() if authorization is not None else None,
        )
        self.seen.append(entry)

        async def recording_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                entry.status = message["status"]
            await send(message)

        await self.app(scope, receive, recording_send)

    def paths(self) -> list[str]:
        return [seen.path for seen in self.seen]


def notes_server() -> Server:
    server = Server("notes", "1.0")

    @server.tool(scopes=["notes:read"])
    def whoami(ctx: Context) -> str:
        """Who is calling."""
        assert ctx.auth is not None
        return f"{ctx.auth.subject} via {ctx.auth.client_id} with {' '.join(sorted(ctx.auth.scopes))}"

    @server.tool(scopes=["notes:write"])
    def write_note(ctx: Context, text: str) -> str:
        """Write a note."""
        assert ctx.auth is not None
        return f"{ctx.auth.subject} wrote {text}"

    return server


@dataclass
class Setup:
    auth: AuthServer
    auth_log: Recorder
    mcp: ServerThread
    mcp_log: Recorder


@pytest.fixture
def setup() -> Iterator[Setup]:
    """A fresh authorization server and a protected notes server, each behind a request recorder."""
    auth = AuthServer()
    auth_log = Recorder(auth.app())
    auth_thread = ServerThread(auth_log)
    auth.issuer = f"http://127.0.0.1:{auth_thread.port}"
    mcp_log = Recorder()
    mcp = ServerThread(mcp_log, lifespan="off")
    resource = mcp.url
    mcp_log.app = McpAsgiApp(
        notes_server(),
        http_policy=ProtectedResource(
            resource=resource,
            authorization_servers=[auth.issuer],
            verifier=JwtVerifier(issuer=auth.issuer, audience=resource, jwks_url=f"{auth.issuer}/jwks"),
            scopes_supported=["notes:read", "notes:write"],
            required_scopes=["notes:read"],
        ),
    )
    try:
        yield Setup(auth, auth_log, mcp, mcp_log)
    finally:
        mcp.stop()
        auth_thread.stop()


@pytest.mark.parametrize("version", ["2025-03-26", "2025-11-25", "2026-07-28"])
async def test_our_client_authorizes_with_our_server_and_steps_up(setup: Setup, version: str) -> None:
    """Every revision, 2025-03-26 included: our server is a resource server whatever the version a session
    speaks, and our client reads its protected resource metadata whatever the version it speaks."""
    auth, mcp = setup.auth, setup.mcp
    store = MemoryTokenStore()
    oauth = OAuth(client_name="own interop", store=store, consent=HeadlessConsent(redirect_uri=REDIRECT))
    async with Client.connect_http(mcp.url, auth=oauth, protocol_version=version) as client:
        assert client.stateless == (version == "2026-07-28")
        me = await client.call_tool("whoami", {})
        wrote = await client.call_tool("write_note", {"text": "hello"})  # 403 → step-up → again

    # the call succeeded with the principal of the token: alice, through the client that registered itself
    [registered] = auth.clients.values()
    assert me.content[0].text == f"alice via {registered.client_id} with notes:read"
    assert wrote.content[0].text == "alice wrote hello"

    # 1. the first request had no token and got the challenge; 2. the metadata the challenge names was read
    first = setup.mcp_log.seen[0]
    assert (first.method, first.path, first.authorization, first.status) == ("POST", "/mcp", None, 401)
    metadata = metadata_path(mcp.url)
    assert setup.mcp_log.seen[1].path == metadata and setup.mcp_log.seen[1].status == 200
    # 3. the authorization server's metadata, 4. registration, 5. consent with PKCE, 6. the token; then, for the
    # step-up, the metadata read afresh (the 403 names it again) and a new consent, with the registration kept.
    # (/jwks: the resource server fetching the key set to check the first token.)
    assert setup.auth_log.paths().count("/jwks") == 1
    assert [path for path in setup.auth_log.paths() if path != "/jwks"] == [
        "/.well-known/oauth-authorization-server",
        "/register",
        "/authorize",
        "/token",
        "/.well-known/oauth-authorization-server",
        "/authorize",
        "/token",
    ]
    assert setup.mcp_log.paths().count(metadata) == 2
    assert all(seen.status in (200, 201, 302) for seen in setup.auth_log.seen), setup.auth_log.seen
    assert registered.client_secret is None  # a public client: no secret to keep
    assert registered.metadata["token_endpoint_auth_method"] == "none"
    assert registered.metadata["redirect_uris"] == [REDIRECT]
    first_consent, step_up = (seen.query for seen in setup.auth_log.seen if seen.path == "/authorize")
    for consent in (first_consent, step_up):
        assert consent["code_challenge_method"] == "S256" and len(consent["code_challenge"]) == 43
        assert consent["resource"] == mcp.url  # RFC 8707: the token is for this server
        assert consent["client_id"] == registered.client_id and consent["redirect_uri"] == REDIRECT
    assert first_consent["scope"] == "notes:read"  # the 401's scope
    assert set(step_up["scope"].split()) == {"notes:read", "notes:write"}  # the union, with the 403's scope
    assert first_consent["state"] != step_up["state"]

    # 7. the token: a JWT of this authorization server, for this resource; the step-up's has both scopes
    issued = [token.claims for token in auth.tokens.values()]
    assert [claims["aud"] for claims in issued] == [mcp.url, mcp.url]
    assert [claims["scope"] for claims in issued] == ["notes:read", "notes:read notes:write"]
    [first_token, second_token] = auth.tokens
    # the 403 that asked for more, then the same call with the new token
    answered = [(seen.authorization, seen.status) for seen in setup.mcp_log.seen if seen.path == "/mcp"]
    refused = answered.index((f"Bearer {first_token}", 403))
    assert all(status in (200, 202) for token, status in answered[1:refused] if token == f"Bearer {first_token}")
    assert answered[refused + 1] == (f"Bearer {second_token}", 200)
    assert not any(s.startswith("Bearer") for s in (seen.authorization or "" for seen in setup.auth_log.seen))
    stored = await store.load(f"tokens {mcp.url}")
    assert stored is not None and stored["access_token"] == second_token and stored["issuer"] == auth.issuer


async def test_a_second_connection_reuses_the_stored_token(setup: Setup) -> None:
    """The next connection with the same store goes straight to the server: no 401, nothing asked of the
    authorization server."""
    store = MemoryTokenStore()
    oauth = OAuth(client_name="own interop", store=store, consent=HeadlessConsent(redirect_uri=REDIRECT))
    async with Client.connect_http(setup.mcp.url, auth=oauth) as client:
        await client.call_tool("whoami", {})
    asked = len(setup.auth_log.seen)
    answered = len(setup.mcp_log.seen)
    again = OAuth(client_name="own interop", store=store, consent=HeadlessConsent(redirect_uri=REDIRECT))
    async with Client.connect_http(setup.mcp.url, auth=again) as client:
        me = await client.call_tool("whoami", {})
    assert me.content[0].text.startswith("alice via ")
    assert len(setup.auth_log.seen) == asked
    assert all(seen.status == 200 for seen in setup.mcp_log.seen[answered:])
