"""The MCP authorization pages, client side (R2-R5): what the OAuth client sends and refuses, sentence by sentence,
against the test authorization server and a protected MCP app on loopback (conformance/spec/coverage/
auth-client.toml maps each test to the sentences it pins)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from oauth_support import HANDSHAKE, REDIRECT, AuthServer, ProtectedMcp, Request, oauth, s256

from jsonrpc_mcp import Client
from jsonrpc_mcp.auth import HeadlessConsent, OAuth, client_metadata_document
from jsonrpc_mcp.auth.oauth_wire import parse_www_authenticate
from jsonrpc_mcp.errors import AuthorizationError

pytestmark = pytest.mark.anyio


async def fails_at(url: str, auth: OAuth, step: str) -> AuthorizationError:
    with pytest.raises(AuthorizationError) as caught:
        async with Client.connect_http(url, auth=auth, **HANDSHAKE):
            pass
    assert caught.value.step == step, caught.value
    return caught.value


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer()
    yield server
    server.stop()


@pytest.fixture
def mcp(auth_server: AuthServer) -> Iterator[ProtectedMcp]:
    app = ProtectedMcp(auth_server)
    yield app
    app.stop()


async def test_the_token_travels_in_the_authorization_header_of_every_request_and_never_in_a_url(
    auth_server: AuthServer, mcp: ProtectedMcp
) -> None:
    async with Client.connect_http(mcp.url, auth=oauth(), **HANDSHAKE) as client:
        await client.list_tools()
        await client.call_tool("add", {"a": 1, "b": 2})
    [token] = auth_server.tokens
    after = mcp.requests[1:]  # the first is the one answered 401, before any token
    assert len(after) >= 4 and {r.method for r in after} >= {"POST", "GET", "DELETE"}
    assert all(r.headers.get("authorization") == f"Bearer {token}" for r in after)
    everything = [*mcp.requests, *auth_server.requests]
    assert all(token not in r.path and token not in str(r.query) for r in everything)


class _Probed(ProtectedMcp):
    """A protected MCP app that records the protected resource metadata URIs it is asked for."""

    def __init__(self, auth: AuthServer, **options: Any) -> None:
        self.probes: list[str] = []
        super().__init__(auth, **options)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/.well-known/oauth-protected-resource"):
            self.probes.append(scope["path"])
        await super().__call__(scope, receive, send)


@pytest.mark.parametrize(
    ("challenge", "probes"),
    [
        (True, ["/.well-known/oauth-protected-resource"]),
        (False, ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]),
    ],
)
async def test_protected_resource_metadata_is_found_by_the_header_else_by_the_well_known_uris_in_order(
    auth_server: AuthServer, challenge: bool, probes: list[str]
) -> None:
    app = _Probed(auth_server, prm="root", challenge=challenge)
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:
            await client.list_tools()
        assert app.probes == probes
        assert auth_server.seen("/authorize")[0].query["resource"] == app.origin
    finally:
        app.stop()


class _MetadataAt(AuthServer):
    """An authorization server whose metadata is at one given well-known path only."""

    def __init__(self, path: str, **options: Any) -> None:
        super().__init__(**options)
        self.path = path

    def metadata_paths(self) -> list[str]:
        return [self.path.format(prefix=self.prefix)]


@pytest.mark.parametrize(
    ("prefix", "where", "expected"),
    [
        ("", "/.well-known/oauth-authorization-server", ["/.well-known/oauth-authorization-server"]),
        (
            "",
            "/.well-known/openid-configuration",
            ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"],
        ),
        (
            "/tenant1",
            "{prefix}/.well-known/openid-configuration",
            [
                "/.well-known/oauth-authorization-server/tenant1",
                "/.well-known/openid-configuration/tenant1",
                "/tenant1/.well-known/openid-configuration",
            ],
        ),
    ],
)
async def test_authorization_server_metadata_is_looked_for_at_each_well_known_uri_in_the_specs_order(
    prefix: str, where: str, expected: list[str]
) -> None:
    server = _MetadataAt(where, prefix=prefix)
    app = ProtectedMcp(server)
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:
            await client.list_tools()
        assert [r.path for r in server.requests if "/.well-known/" in r.path] == expected
    finally:
        app.stop()
        server.stop()


@pytest.mark.parametrize("written", ["upper case", "trailing slash"])
async def test_the_resource_parameter_is_the_servers_canonical_uri_however_its_metadata_writes_it(
    auth_server: AuthServer, written: str
) -> None:
    app = ProtectedMcp(auth_server, prm="path" if written == "upper case" else "root")
    # as a server may write its resource in its metadata: HTTP://127.0.0.1:port/mcp, or http://127.0.0.1:port/
    app.resource = app.url.replace("http://", "HTTP://") if written == "upper case" else app.origin + "/"
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:
            assert await client.list_tools()
        [authorize] = auth_server.seen("/authorize")
        [token_request] = auth_server.seen("/token")
        canonical = app.url if written == "upper case" else app.origin
        assert authorize.query["resource"] == token_request.form["resource"] == canonical
    finally:
        app.stop()


async def test_an_iss_differing_only_in_case_is_another_issuer(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    auth_server.iss = auth_server.issuer.replace("http://", "HTTP://")  # no case folding before comparing
    await fails_at(mcp.url, oauth(), "authorization")
    assert auth_server.seen("/authorize") and not auth_server.seen("/token")


async def test_an_error_answer_naming_another_issuer_is_not_acted_on_or_shown(
    auth_server: AuthServer, mcp: ProtectedMcp
) -> None:
    async def respond(url: str) -> str:
        state = dict(httpx.URL(url).params)["state"]
        query = "error=access_denied&error_description=call+0800+now&error_uri=https%3A%2F%2Fevil.example"
        return f"{REDIRECT}?{query}&state={state}&iss=https%3A%2F%2Fevil.example"

    error = await fails_at(mcp.url, oauth(consent=HeadlessConsent(respond, redirect_uri=REDIRECT)), "authorization")
    assert "RFC 9207" in str(error)
    assert "access_denied" not in str(error) and "0800" not in str(error) and "evil.example/" not in str(error)


async def test_a_redirect_without_state_is_discarded(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    async def respond(url: str) -> str:
        async with httpx.AsyncClient() as http:
            location = httpx.URL((await http.get(url)).headers["location"])
        kept = {k: v for k, v in location.params.items() if k != "state"}
        return str(location.copy_with(params=kept))

    await fails_at(mcp.url, oauth(consent=HeadlessConsent(respond, redirect_uri=REDIRECT)), "authorization")
    assert auth_server.seen("/authorize") and not auth_server.seen("/token")


async def test_without_refresh_tokens_the_client_authorizes_again_when_its_token_expires() -> None:
    server = AuthServer(refresh_tokens=False, token_lifetime=1)  # expired as soon as issued, and never refreshable
    app = ProtectedMcp(server)
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:
            assert await client.list_tools()
        assert not [r for r in server.seen("/token") if r.form["grant_type"] == "refresh_token"]
        assert len(server.seen("/authorize")) >= 2
    finally:
        app.stop()
        server.stop()


async def test_each_refresh_uses_the_refresh_token_issued_last() -> None:
    server = AuthServer(token_lifetime=1)  # expired at once: every request refreshes; each refresh token is rotated
    app = ProtectedMcp(server)
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:  # initialized, GET, list, DELETE
            assert await client.list_tools()
        refreshes = [r.form["refresh_token"] for r in server.seen("/token") if r.form["grant_type"] == "refresh_token"]
        assert len(refreshes) >= 3 and len(set(refreshes)) == len(refreshes)
        assert len(server.seen("/authorize")) == 1  # a used (rotated-out) refresh token would have been refused
    finally:
        app.stop()
        server.stop()


class _RefusingRegistration(AuthServer):
    """An authorization server (an OpenID provider, say) refusing the registration's redirect URI."""

    async def _register(self, request: Request, send: Any) -> None:
        answer = {"error": "invalid_redirect_uri", "error_description": "web clients may not use loopback"}
        await send({"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


async def test_a_registration_refused_for_its_redirect_uri_is_a_clear_error_naming_the_reason() -> None:
    server = _RefusingRegistration()
    app = ProtectedMcp(server)
    try:
        error = await fails_at(app.url, oauth(), "client registration")
        assert "invalid_redirect_uri" in str(error) and "web clients may not use loopback" in str(error)
        assert not server.seen("/authorize")
    finally:
        app.stop()
        server.stop()


@pytest.mark.parametrize(
    ("given", "redirect_uri", "application_type"),
    [
        (None, REDIRECT, "native"),  # a loopback redirect: a native client
        (None, "https://app.example.com/callback", "web"),  # served from another host: a web one
        ("native", "https://app.example.com/callback", "native"),  # what the application says wins
        ("web", REDIRECT, "web"),
    ],
)
async def test_dynamic_registration_names_the_application_type_and_the_refresh_token_grant(
    auth_server: AuthServer, mcp: ProtectedMcp, given: str | None, redirect_uri: str, application_type: str
) -> None:
    auth = oauth(application_type=given, consent=HeadlessConsent(redirect_uri=redirect_uri))
    async with Client.connect_http(mcp.url, auth=auth, **HANDSHAKE) as client:
        await client.list_tools()
    [registration] = auth_server.seen("/register")
    assert registration.json["application_type"] == application_type
    assert "refresh_token" in registration.json["grant_types"]
    assert registration.json["redirect_uris"] == [redirect_uri]


CIMD_URL = "https://app.example.com/oauth/client.json"


@pytest.mark.parametrize(
    ("options", "cimd_supported", "client_id"),
    [
        ({"client_id": "pre", "client_metadata_url": CIMD_URL}, True, "pre"),  # pre-registered first
        ({"client_metadata_url": CIMD_URL}, True, CIMD_URL),  # then a client ID metadata document
        ({"client_metadata_url": CIMD_URL}, False, "registered"),  # not supported: dynamic registration
    ],
)
async def test_the_client_registration_approaches_in_the_specs_priority_order(
    auth_server: AuthServer, mcp: ProtectedMcp, options: dict[str, Any], cimd_supported: bool, client_id: str
) -> None:
    auth_server.clients["pre"] = {"method": "none", "redirect_uris": [REDIRECT]}
    if cimd_supported:
        auth_server.overrides["client_id_metadata_document_supported"] = True
    async with Client.connect_http(mcp.url, auth=oauth(**options), **HANDSHAKE) as client:
        await client.list_tools()
    used = auth_server.seen("/authorize")[0].query["client_id"]
    if client_id == "registered":
        [registration] = auth_server.seen("/register")
        assert used not in ("pre", CIMD_URL) and registration.json["redirect_uris"] == [REDIRECT]
    else:
        assert used == client_id and not auth_server.seen("/register")


def test_a_client_id_metadata_document_is_at_an_https_url_with_a_path_and_names_it_exactly() -> None:
    for url in ("http://app.example.com/client.json", "https://app.example.com", "https://app.example.com/"):
        with pytest.raises(ValueError, match="HTTPS"):
            oauth(client_metadata_url=url)
        with pytest.raises(ValueError, match="HTTPS"):
            client_metadata_document(url, client_name="App", redirect_uris=[REDIRECT])
    document = client_metadata_document(CIMD_URL, client_name="App", redirect_uris=[REDIRECT])
    assert document["client_id"] == CIMD_URL
    assert document["client_name"] == "App" and document["redirect_uris"] == [REDIRECT]
    assert "refresh_token" in document["grant_types"]


async def test_a_2025_03_26_client_registers_uses_pkce_and_sends_the_token_in_the_header_of_every_request() -> None:
    """2025-03-26: the server's origin is its authorization server (no protected resource metadata)."""
    server = AuthServer(serve=False, metadata_at="none")
    app = ProtectedMcp(server, prm="none")
    try:
        async with Client.connect_http(app.url, auth=oauth(), protocol_version="2025-03-26") as client:
            assert client.protocol_version == "2025-03-26"
            assert await client.list_tools()
        [registration] = server.seen("/register")
        assert registration.json["redirect_uris"] == [REDIRECT]
        [authorize] = server.seen("/authorize")
        [token_request] = server.seen("/token")
        assert authorize.query["code_challenge_method"] == "S256"
        assert s256(token_request.form["code_verifier"]) == authorize.query["code_challenge"]
        [token] = server.tokens
        assert "authorization" not in app.requests[0].headers and app.requests[1:]
        assert all(r.headers.get("authorization") == f"Bearer {token}" for r in app.requests[1:])
    finally:
        app.stop()


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            ['Bearer realm="a, b", resource_metadata="https://x.example/m", scope="a b"'],
            [("bearer", {"realm": "a, b", "resource_metadata": "https://x.example/m", "scope": "a b"})],
        ),
        (  # two challenges in one header, the parameter names in any case
            ['Basic realm="x", bearer Resource_Metadata="https://x.example/m"'],
            [("basic", {"realm": "x"}), ("bearer", {"resource_metadata": "https://x.example/m"})],
        ),
        (  # quoted-pair escapes, tokens unquoted, spaces around "=", no space after ","
            ['Bearer error=insufficient_scope,scope = "r w", error_description="say \\"hi\\", ok"'],
            [("bearer", {"error": "insufficient_scope", "scope": "r w", "error_description": 'say "hi", ok'})],
        ),
        (  # a token68 challenge and a bare scheme, then one in a second header
            ["Negotiate abc==, Bearer", 'DPoP algs="ES256", error="use_dpop_nonce"'],
            [("negotiate", {}), ("bearer", {}), ("dpop", {"algs": "ES256", "error": "use_dpop_nonce"})],
        ),
    ],
)
def test_www_authenticate_headers_are_read_as_rfc_9110_writes_them(
    values: list[str], expected: list[tuple[str, dict[str, str]]]
) -> None:
    assert [(c.scheme, c.params) for c in parse_www_authenticate(values)] == expected


async def test_a_step_up_that_gave_up_is_not_tried_again_for_the_same_scopes(auth_server: AuthServer) -> None:
    app = ProtectedMcp(auth_server, scopes={"tools/list": ["admin"]}, challenge_scope="read")
    auth_server.overrides["scopes_supported"] = ["read"]  # it never grants admin
    try:
        async with Client.connect_http(app.url, auth=oauth(max_step_ups=1), **HANDSHAKE) as client:
            with pytest.raises(AuthorizationError, match="after 1 step-up authorizations"):
                await client.list_tools()
            assert len(auth_server.seen("/authorize")) == 2  # the first authorization and one step-up
            with pytest.raises(AuthorizationError, match="not asking the user again yet") as caught:
                await client.list_tools()
            assert caught.value.step == "step-up authorization"
            assert len(auth_server.seen("/authorize")) == 2  # the user was not sent to consent again
            await client.ping()  # an operation that needs no more scope goes on
    finally:
        app.stop()
