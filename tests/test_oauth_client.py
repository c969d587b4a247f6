"""The OAuth client (jsonrpc_mcp.auth) over real HTTP: the project's MCP app behind a test authorization server,
both under uvicorn on loopback, the client on asyncio and trio."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from oauth_support import HANDSHAKE, REDIRECT, AuthServer, ProtectedMcp, oauth, redirect_target, s256
from oauth_support import auth_server as auth_server
from oauth_support import mcp as mcp

from jsonrpc_mcp import Client
from jsonrpc_mcp.auth import FileTokenStore, HeadlessConsent, LoopbackConsent, MemoryTokenStore, OAuth
from jsonrpc_mcp.errors import AuthorizationError

pytestmark = pytest.mark.anyio


async def test_the_client_authorizes_on_401_and_then_sends_the_token_with_every_request(
    auth_server: AuthServer, mcp: ProtectedMcp
) -> None:
    store = MemoryTokenStore()
    async with Client.connect_http(mcp.url, auth=oauth(store=store), **HANDSHAKE) as client:
        assert [t.name for t in await client.list_tools()]
    # discovery: the resource_metadata of the challenge, then RFC 8414 metadata
    assert [r.path for r in mcp.requests[:1]] == ["/mcp"]
    assert "authorization" not in mcp.requests[0].headers
    [registration] = auth_server.seen("/register")
    assert registration.json["application_type"] == "native"
    assert registration.json["redirect_uris"] == [REDIRECT]
    assert registration.json["grant_types"] == ["authorization_code", "refresh_token"]
    [authorize] = auth_server.seen("/authorize")
    assert authorize.query["code_challenge_method"] == "S256"
    assert authorize.query["resource"] == mcp.url
    assert authorize.query["state"]
    [token_request] = auth_server.seen("/token")
    assert token_request.form["resource"] == mcp.url
    assert s256(token_request.form["code_verifier"]) == authorize.query["code_challenge"]
    # every request after the first carries the token: initialize, initialized, the GET stream, tools/list, DELETE
    [token] = auth_server.tokens
    later = mcp.requests[2:]
    assert later and all(r.headers.get("authorization") == f"Bearer {token}" for r in later)
    stored = await store.load(f"tokens {mcp.url}")
    assert stored is not None and stored["access_token"] == token and stored["issuer"] == auth_server.issuer


async def test_the_stateless_era_authorizes_too(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    async with Client.connect_http(mcp.url, auth=oauth()) as client:
        assert client.stateless
        assert await client.list_tools()
    assert len(auth_server.seen("/authorize")) == 1


async def test_an_expired_token_is_refreshed_before_the_request_not_reauthorized() -> None:
    server = AuthServer(token_lifetime=1)  # within the client's expiry margin: expired as soon as it is issued
    app = ProtectedMcp(server)
    try:
        auth = oauth()
        async with Client.connect_http(app.url, auth=auth, **HANDSHAKE) as client:
            await client.list_tools()
            refreshes = [r for r in server.seen("/token") if r.form["grant_type"] == "refresh_token"]
            assert refreshes and all(r.form["resource"] == app.url for r in refreshes)
        assert len(server.seen("/authorize")) == 1
    finally:
        app.stop()
        server.stop()


async def test_a_revoked_token_is_refreshed_on_401_before_authorizing_again(
    auth_server: AuthServer, mcp: ProtectedMcp
) -> None:
    async with Client.connect_http(mcp.url, auth=oauth(), **HANDSHAKE) as client:
        auth_server.revoke_access_tokens()
        assert await client.list_tools()
    grants = [r.form["grant_type"] for r in auth_server.seen("/token")]
    assert grants == ["authorization_code", "refresh_token"]
    assert len(auth_server.seen("/authorize")) == 1


async def test_a_refused_refresh_falls_back_to_a_new_authorization(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    async with Client.connect_http(mcp.url, auth=oauth(), **HANDSHAKE) as client:
        auth_server.revoke_access_tokens()
        auth_server.refresh.clear()
        assert await client.list_tools()
    assert [r.form["grant_type"] for r in auth_server.seen("/token")] == [
        "authorization_code",
        "refresh_token",
        "authorization_code",
    ]


async def test_insufficient_scope_steps_up_with_the_union_of_scopes(auth_server: AuthServer) -> None:
    app = ProtectedMcp(
        auth_server, scopes={"tools/list": ["read"], "tools/call": ["read", "write"]}, challenge_scope="read"
    )
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:
            await client.list_tools()
            result = await client.call_tool("add", {"a": 1, "b": 2})
            assert not result.is_error
        scopes = [r.query.get("scope") for r in auth_server.seen("/authorize")]
        assert scopes == ["read", "read write"]
    finally:
        app.stop()


async def test_the_scopes_given_are_asked_for_with_those_the_challenge_names(auth_server: AuthServer) -> None:
    app = ProtectedMcp(auth_server, scopes={"tools/list": ["read"]}, challenge_scope="read")
    try:
        async with Client.connect_http(app.url, auth=oauth(scopes=["profile", "read"]), **HANDSHAKE) as client:
            await client.list_tools()
        [authorize] = auth_server.seen("/authorize")
        assert sorted(authorize.query["scope"].split()) == ["profile", "read"]
    finally:
        app.stop()


def test_a_wrong_oauth_setting_is_refused_when_made() -> None:
    with pytest.raises(TypeError, match=r"^scopes is a list of scopes, not a string: scopes=\['read', 'write'\]$"):
        oauth(scopes="read write")  # (was: a scope asked for per letter)
    with pytest.raises(ValueError, match="dpop_algorithm must be one of ES256"):
        oauth(dpop_algorithm="HS256")
    for steps in (-1, 1.5):
        with pytest.raises(ValueError, match="max_step_ups must be a whole number, zero or more"):
            oauth(max_step_ups=steps)
    for timeout in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
            oauth(timeout=timeout)
    assert oauth(max_step_ups=0, scopes=("read",)).scopes == ["read"]


async def test_step_ups_are_bounded_and_fail_with_the_step_named(auth_server: AuthServer) -> None:
    app = ProtectedMcp(auth_server, scopes={"tools/list": ["admin"]}, challenge_scope="read")
    auth_server.overrides["scopes_supported"] = ["read"]
    try:
        async with Client.connect_http(app.url, auth=oauth(max_step_ups=1), **HANDSHAKE) as client:
            with pytest.raises(AuthorizationError) as caught:
                await client.list_tools()
        assert caught.value.step == "step-up authorization"
        assert len(auth_server.seen("/authorize")) == 2  # the first authorization and one step-up
    finally:
        app.stop()


@pytest.mark.parametrize(
    ("challenge_scope", "scopes_supported", "as_scopes", "expected"),
    [
        ("files:read", ["a", "b"], None, "files:read"),  # the challenge first
        (None, ["a", "b"], None, "a b"),  # then scopes_supported
        (None, None, None, None),  # else no scope parameter
        (None, ["a"], ["a", "offline_access"], "a offline_access"),  # offline_access when the AS lists it
    ],
)
async def test_scope_selection(
    auth_server: AuthServer,
    challenge_scope: str | None,
    scopes_supported: list[str] | None,
    as_scopes: list[str] | None,
    expected: str | None,
) -> None:
    if as_scopes is not None:
        auth_server.overrides["scopes_supported"] = as_scopes
    app = ProtectedMcp(auth_server, challenge_scope=challenge_scope, scopes_supported=scopes_supported)
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:
            await client.list_tools()
        [authorize] = auth_server.seen("/authorize")
        assert authorize.query.get("scope") == expected
    finally:
        app.stop()


@pytest.mark.parametrize(("prm", "challenge"), [("path", False), ("root", False), ("root", True)])
async def test_protected_resource_metadata_is_found_without_the_challenge_too(
    auth_server: AuthServer, prm: str, challenge: bool
) -> None:
    app = ProtectedMcp(auth_server, prm=prm, challenge=challenge)
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:
            await client.list_tools()
        [token_request] = auth_server.seen("/token")
        assert token_request.form["resource"] == (app.url if prm == "path" else app.origin)
    finally:
        app.stop()


@pytest.mark.parametrize("where", ["oauth", "oidc"])
async def test_authorization_server_metadata_of_an_issuer_with_a_path(where: str) -> None:
    server = AuthServer(prefix="/tenant1", metadata_at=where)
    app = ProtectedMcp(server)
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:
            await client.list_tools()
        paths = [r.path for r in server.requests if r.path.startswith("/.well-known/") or "/.well-known/" in r.path]
        expected = [
            "/.well-known/oauth-authorization-server/tenant1",
            "/.well-known/openid-configuration/tenant1",
        ]
        assert paths == (expected[:1] if where == "oauth" else expected)
    finally:
        app.stop()
        server.stop()


@pytest.mark.parametrize("version", ["2025-03-26", "2025-11-25"])
async def test_the_2025_03_26_path_uses_the_default_endpoints_at_the_servers_origin(version: str) -> None:
    """A server without protected resource metadata: its origin is the authorization server. A client speaking
    2025-03-26 asks for RFC 8414 metadata only, as that revision says; one speaking a later revision also tries
    OpenID Connect discovery (spec-decisions 34k)."""
    server = AuthServer(serve=False, metadata_at="none")
    app = ProtectedMcp(server, prm="none")
    try:
        async with Client.connect_http(app.url, auth=oauth(), protocol_version=version) as client:
            await client.list_tools()
        assert [r.path for r in server.requests] == [
            "/.well-known/oauth-authorization-server",
            *(["/.well-known/openid-configuration"] if version != "2025-03-26" else []),
            "/register",
            "/authorize",
            "/token",
        ]
        assert server.requests[0].headers["mcp-protocol-version"] == version
        assert "resource" not in server.seen("/authorize")[0].query  # 2025-03-26 has no resource indicators
    finally:
        app.stop()


async def fails_at(url: str, auth: OAuth, step: str, **options: Any) -> AuthorizationError:
    with pytest.raises(AuthorizationError) as caught:
        async with Client.connect_http(url, auth=auth, **{**HANDSHAKE, **options}):
            pass
    assert caught.value.step == step, caught.value
    return caught.value


async def test_a_resource_that_does_not_cover_the_server_is_refused(auth_server: AuthServer) -> None:
    app = ProtectedMcp(auth_server, resource="https://evil.example.com/mcp")
    try:
        error = await fails_at(app.url, oauth(), "protected resource metadata")
        assert "evil.example.com" in str(error)
        assert not auth_server.requests
    finally:
        app.stop()


async def test_metadata_naming_another_issuer_is_not_used(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    auth_server.overrides["issuer"] = "https://attacker.example.com"
    await fails_at(mcp.url, oauth(), "authorization server metadata")
    assert not auth_server.seen("/register") and not auth_server.seen("/authorize")


async def test_an_authorization_server_without_s256_is_refused(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    auth_server.overrides["code_challenge_methods_supported"] = None
    error = await fails_at(mcp.url, oauth(), "authorization server metadata")
    assert "S256" in str(error)
    assert not auth_server.seen("/authorize")


async def test_plain_http_authorization_endpoints_are_refused_off_loopback(
    auth_server: AuthServer, mcp: ProtectedMcp
) -> None:
    auth_server.overrides["token_endpoint"] = "http://auth.example.com/token"
    error = await fails_at(mcp.url, oauth(), "authorization server metadata")
    assert "http://auth.example.com/token" in str(error)


@pytest.mark.parametrize(
    ("iss", "advertised"), [("https://evil.example.com", True), ("omit", True), ("https://evil.example.com", False)]
)
async def test_the_iss_of_the_redirect_is_checked_before_the_code_is_redeemed(
    auth_server: AuthServer, mcp: ProtectedMcp, iss: str, advertised: bool
) -> None:
    auth_server.iss = iss
    if not advertised:
        auth_server.overrides["authorization_response_iss_parameter_supported"] = None
    await fails_at(mcp.url, oauth(), "authorization")
    assert auth_server.seen("/authorize") and not auth_server.seen("/token")


async def test_an_iss_with_a_trailing_slash_is_a_different_issuer(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    auth_server.iss = auth_server.issuer + "/"
    await fails_at(mcp.url, oauth(), "authorization")
    assert not auth_server.seen("/token")


async def test_no_iss_is_fine_when_the_server_does_not_promise_one(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    auth_server.iss = "omit"
    auth_server.overrides["authorization_response_iss_parameter_supported"] = None
    async with Client.connect_http(mcp.url, auth=oauth(), **HANDSHAKE) as client:
        await client.list_tools()


async def test_a_redirect_with_another_state_is_discarded(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    async def respond(url: str) -> str:
        async with httpx.AsyncClient() as http:
            location = (await http.get(url)).headers["location"]
        return location.replace("state=", "state=forged")

    await fails_at(mcp.url, oauth(consent=HeadlessConsent(respond, redirect_uri=REDIRECT)), "authorization")
    assert not auth_server.seen("/token")


async def test_a_refusal_by_the_user_is_reported(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    async def respond(url: str) -> str:
        state = dict(httpx.URL(url).params)["state"]
        return f"{REDIRECT}?error=access_denied&error_description=no+thanks&state={state}&iss={auth_server.issuer}"

    error = await fails_at(mcp.url, oauth(consent=HeadlessConsent(respond, redirect_uri=REDIRECT)), "authorization")
    assert "access_denied" in str(error) and "no thanks" in str(error)


async def test_without_registration_the_error_asks_for_a_client_id(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    auth_server.overrides["registration_endpoint"] = None
    error = await fails_at(mcp.url, oauth(), "client registration")
    assert "client_id" in str(error)


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "none"])
async def test_the_token_endpoint_authentication_the_registration_gave(method: str) -> None:
    server = AuthServer(registration_method=method)
    app = ProtectedMcp(server)
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:
            await client.list_tools()
        [token_request] = server.seen("/token")
        assert ("authorization" in token_request.headers) == (method == "client_secret_basic")
        assert ("client_secret" in token_request.form) == (method == "client_secret_post")
    finally:
        app.stop()
        server.stop()


async def test_a_pre_registered_client_is_used_and_bound_to_its_issuer() -> None:
    clients = {"pre": {"method": "client_secret_basic", "secret": "s3cret", "redirect_uris": [REDIRECT]}}
    first, second = AuthServer(clients=clients), AuthServer(clients=clients)
    app = ProtectedMcp(first)
    auth = oauth(client_id="pre", client_secret="s3cret")
    try:
        async with Client.connect_http(app.url, auth=auth, **HANDSHAKE) as client:
            await client.list_tools()
        assert not first.seen("/register")
        assert first.seen("/authorize")[0].query["client_id"] == "pre"
        other = ProtectedMcp(second)
        try:
            await fails_at(other.url, auth, "client registration")
            assert not second.seen("/authorize")
        finally:
            other.stop()
    finally:
        app.stop()
        first.stop()
        second.stop()


async def test_a_client_id_metadata_document_is_used_when_the_server_supports_them(
    auth_server: AuthServer, mcp: ProtectedMcp
) -> None:
    auth_server.overrides["client_id_metadata_document_supported"] = True
    url = "https://app.example.com/oauth/client.json"
    async with Client.connect_http(mcp.url, auth=oauth(client_metadata_url=url), **HANDSHAKE) as client:
        await client.list_tools()
    assert not auth_server.seen("/register")
    assert auth_server.seen("/authorize")[0].query["client_id"] == url


async def test_a_new_authorization_server_gets_a_new_registration_and_nothing_of_the_old_one() -> None:
    first, second = AuthServer(), AuthServer()
    current = [first]
    app = ProtectedMcp(lambda: current[0])
    try:
        auth = oauth()
        async with Client.connect_http(app.url, auth=auth, **HANDSHAKE) as client:
            await client.list_tools()
            current[0] = second  # the resource moves to another authorization server; old tokens stop working
            await client.list_tools()
        [old_client] = first.clients
        assert second.seen("/register")
        assert all(r.query.get("client_id") != old_client for r in second.seen("/authorize"))
        assert all(r.form.get("client_id") != old_client for r in second.seen("/token"))
        assert not [r for r in first.seen("/token") if r.form["grant_type"] == "refresh_token"]
    finally:
        app.stop()
        first.stop()
        second.stop()


async def test_a_token_is_never_sent_to_another_server(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    other = ProtectedMcp(auth_server)
    try:
        auth = oauth()
        async with Client.connect_http(mcp.url, auth=auth, **HANDSHAKE) as client:
            await client.list_tools()
        async with Client.connect_http(other.url, auth=auth, **HANDSHAKE) as client:
            await client.list_tools()
        assert "authorization" not in other.requests[0].headers
        assert len(auth_server.seen("/authorize")) == 2
    finally:
        other.stop()


async def test_a_file_store_is_owner_only_and_spares_the_next_run_an_authorization(
    auth_server: AuthServer, mcp: ProtectedMcp, tmp_path: Path
) -> None:
    path = tmp_path / "config" / "tokens.json"
    async with Client.connect_http(mcp.url, auth=oauth(store=FileTokenStore(path)), **HANDSHAKE) as client:
        await client.list_tools()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    async with Client.connect_http(mcp.url, auth=oauth(store=FileTokenStore(path)), **HANDSHAKE) as client:
        await client.list_tools()
    assert len(auth_server.seen("/authorize")) == 1


async def test_a_file_store_found_readable_by_others_is_narrowed(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text('{"k": {"a": 1}}')
    os.chmod(path, 0o644)
    assert await FileTokenStore(path).load("k") == {"a": 1}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_tokens_and_secrets_never_reach_the_logs(
    auth_server: AuthServer, mcp: ProtectedMcp, caplog: pytest.LogCaptureFixture
) -> None:
    auth_server.registration_method = "client_secret_post"
    caplog.set_level(logging.DEBUG)
    async with Client.connect_http(mcp.url, auth=oauth(), **HANDSHAKE) as client:
        auth_server.revoke_access_tokens()
        await client.list_tools()
    secrets = [*auth_server.tokens, *auth_server.refresh, *(c.get("secret", "") for c in auth_server.clients.values())]
    secrets += [r.form.get("code", "") for r in auth_server.seen("/token")]
    # ours at every level; the HTTP libraries' at INFO and above (httpcore's DEBUG trace prints response headers,
    # among them the redirect a headless consent follows)
    records = [r for r in caplog.records if r.name.startswith("jsonrpc_mcp") or r.levelno >= logging.INFO]
    text = "\n".join(record.getMessage() for record in records)
    assert "authorizing with" in text  # progress is logged ...
    assert all(secret not in text for secret in secrets if secret)  # ... never a token, code or secret


async def test_the_loopback_consent_receives_the_redirect_and_shows_a_page(
    auth_server: AuthServer, mcp: ProtectedMcp
) -> None:
    pages: list[str] = []

    async def browse(url: str) -> None:
        async with httpx.AsyncClient() as browser:
            location = (await browser.get(url)).headers["location"]
            stray = await browser.get(location.replace("state=", "state=x"))  # not the request in progress
            assert stray.status_code == 400
            page = await browser.get(location)
            assert page.status_code == 200
            pages.append(page.text)

    async with anyio.create_task_group() as tg:
        consent = LoopbackConsent(open_browser=False, show=lambda url: tg.start_soon(browse, url))
        try:
            async with Client.connect_http(mcp.url, auth=oauth(consent=consent), **HANDSHAKE) as client:
                await client.list_tools()
        finally:
            consent.close()
    assert "Authorization complete" in pages[0]
    [registration] = auth_server.seen("/register")
    assert registration.json["redirect_uris"][0].startswith("http://127.0.0.1:")


async def test_the_loopback_consent_gives_up_after_its_timeout() -> None:
    consent = LoopbackConsent(open_browser=False, show=lambda url: None, timeout=0.2)
    try:
        with pytest.raises(AuthorizationError) as caught:
            await consent.authorize("https://auth.example.com/authorize?state=abc")
        assert caught.value.step == "authorization"
    finally:
        consent.close()


def test_redirect_uris_must_be_https_or_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"):
        HeadlessConsent(redirect_uri="http://example.com/callback")
    with pytest.raises(ValueError, match="loopback"):
        LoopbackConsent(host="0.0.0.0")
    for port in (-1, 65536, "8080"):
        with pytest.raises(ValueError, match="port must be a TCP port number"):
            LoopbackConsent(port=port)  # type: ignore[arg-type]
    for timeout in (0, -5.0, float("nan")):
        with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
            LoopbackConsent(timeout=timeout)
    assert redirect_target("http://x/?code=1&state=2") == {"code": "1", "state": "2"}


async def test_a_refresh_that_cannot_reach_the_server_keeps_the_tokens() -> None:
    server = AuthServer(token_lifetime=1)  # expired at once: every request refreshes first
    app = ProtectedMcp(server)
    store = MemoryTokenStore()
    try:
        async with Client.connect_http(app.url, auth=oauth(store=store), **HANDSHAKE) as client:
            await client.list_tools()
            server.stop()  # the authorization server is down for a while
            with pytest.raises(AuthorizationError) as caught:
                await client.list_tools()
        assert caught.value.step == "token refresh" and "could not be reached" in str(caught.value)
        stored = await store.load(f"tokens {app.url}")
        assert stored is not None and stored["refresh_token"]  # kept for when it is back
    finally:
        app.stop()
        server.stop()
