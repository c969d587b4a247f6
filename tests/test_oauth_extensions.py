"""The OAuth client's extensions over real HTTP: client credentials (a secret, private_key_jwt), the JWT bearer grant
of workload identity federation, enterprise-managed authorization (token exchange for an ID-JAG) and DPoP (RFC 9449,
server nonces included), against the test authorization server of ``oauth_support`` on loopback."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey
from oauth_support import AuthServer, IdentityProvider, ProtectedMcp
from oauth_support import auth_server as auth_server
from oauth_support import mcp as mcp

from jsonrpc_mcp import Client
from jsonrpc_mcp.auth import FileTokenStore, HeadlessConsent, OAuth
from jsonrpc_mcp.auth.oauth_grants import ClientCredentials, EnterpriseManaged, JwtBearer
from jsonrpc_mcp.errors import AuthorizationError

pytestmark = pytest.mark.anyio

HANDSHAKE = {"protocol_version": "2025-11-25"}
REDIRECT = "http://127.0.0.1:5999/callback"


AUTH_SERVER_OPTIONS = {"registration_method": "none"}  # (the auth_server fixture's)


def claims_of(token: str) -> dict[str, Any]:
    return dict(json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "==")))


def header_of(token: str) -> dict[str, Any]:
    return dict(json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "==")))


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_client_credentials_with_a_secret(auth_server: AuthServer, mcp: ProtectedMcp, method: str) -> None:
    auth_server.clients["svc"] = {"method": method, "secret": "s3cret"}
    if method == "client_secret_post":
        auth_server.methods = ("client_secret_post",)
    grant = ClientCredentials("svc", "s3cret")
    async with Client.connect_http(mcp.url, auth=OAuth(grant=grant), **HANDSHAKE) as client:
        assert await client.list_tools()
    [request] = auth_server.seen("/token")
    assert request.form["grant_type"] == "client_credentials"
    assert request.form["resource"] == mcp.url
    assert not auth_server.seen("/authorize") and not auth_server.seen("/register")


@pytest.mark.parametrize("key", [ECKey.generate_key("P-256"), RSAKey.generate_key(2048)], ids=["ES256", "RS256"])
async def test_client_credentials_with_private_key_jwt(auth_server: AuthServer, mcp: ProtectedMcp, key: Any) -> None:
    auth_server.clients["svc"] = {"method": "private_key_jwt", "public_key": key}
    grant = ClientCredentials("svc", private_key=key.as_pem(private=True))
    async with Client.connect_http(mcp.url, auth=OAuth(grant=grant), **HANDSHAKE) as client:
        assert await client.list_tools()
    [request] = auth_server.seen("/token")
    assertion = request.form["client_assertion"]
    claims = jwt.decode(assertion, key).claims
    assert claims["iss"] == claims["sub"] == "svc"
    assert claims["aud"] == auth_server.issuer
    assert claims["exp"] - claims["iat"] <= 300 and claims["jti"]
    assert header_of(assertion)["alg"] == ("ES256" if isinstance(key, ECKey) else "RS256")


async def test_client_credentials_refused_is_reported_not_retried(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    auth_server.clients["svc"] = {"method": "client_secret_basic", "secret": "right"}
    grant = ClientCredentials("svc", "wrong")
    with pytest.raises(AuthorizationError) as caught:
        async with Client.connect_http(mcp.url, auth=OAuth(grant=grant), **HANDSHAKE):
            pass
    assert caught.value.step == "token request" and "invalid_client" in str(caught.value)
    assert "wrong" not in str(caught.value)
    assert len(auth_server.seen("/token")) == 1


async def test_workload_identity_federation_jwt_bearer(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    platform = ECKey.generate_key("P-256")
    auth_server.assertion_issuers["https://platform.example"] = platform
    issued: list[str] = []

    def workload_token() -> str:  # a fresh platform token each time one is needed
        now = int(time.time())
        claims = {"iss": "https://platform.example", "sub": "job-7", "aud": auth_server.issuer, "exp": now + 60}
        issued.append(jwt.encode({"alg": "ES256"}, claims, platform))
        return issued[-1]

    grant = JwtBearer(workload_token, client_id="workload")
    async with Client.connect_http(mcp.url, auth=OAuth(grant=grant), **HANDSHAKE) as client:
        assert await client.list_tools()
    [request] = auth_server.seen("/token")
    assert request.form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    assert request.form["assertion"] == issued[0]
    assert request.form["client_id"] == "workload"


async def test_a_refused_workload_assertion_ends_without_another_grant(
    auth_server: AuthServer, mcp: ProtectedMcp
) -> None:
    wrong = ECKey.generate_key("P-256")
    auth_server.assertion_issuers["https://platform.example"] = ECKey.generate_key("P-256")
    claims = {"iss": "https://platform.example", "sub": "job-7", "aud": auth_server.issuer}
    grant = JwtBearer(jwt.encode({"alg": "ES256"}, claims, wrong))
    with pytest.raises(AuthorizationError) as caught:
        async with Client.connect_http(mcp.url, auth=OAuth(grant=grant), **HANDSHAKE):
            pass
    assert "invalid_grant" in str(caught.value)
    assert [r.form["grant_type"] for r in auth_server.seen("/token")] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]


async def test_enterprise_managed_authorization(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    idp = IdentityProvider(id_token="alice-id-token", client_of_as="mcp-client")
    auth_server.assertion_issuers[idp.issuer] = idp.key
    auth_server.clients["mcp-client"] = {"method": "client_secret_basic", "secret": "s3cret"}
    try:
        grant = EnterpriseManaged(
            identity_assertion="alice-id-token",
            idp_token_endpoint=idp.issuer + "/token",
            idp_client_id="idp-client",
            client_id="mcp-client",
            client_secret="s3cret",
        )
        async with Client.connect_http(mcp.url, auth=OAuth(grant=grant), **HANDSHAKE) as client:
            assert await client.list_tools()
        [exchange] = idp.requests
        assert exchange.form["audience"] == auth_server.issuer
        assert exchange.form["resource"] == mcp.url
        assert exchange.form["client_id"] == "idp-client"
        [request] = auth_server.seen("/token")
        assert request.form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
        assert header_of(request.form["assertion"])["typ"] == "oauth-id-jag+jwt"
        assert request.headers["authorization"].startswith("Basic ")
        assert not auth_server.seen("/authorize")
    finally:
        idp.stop()


async def test_an_identity_provider_refusal_names_the_exchange(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    idp = IdentityProvider(id_token="alice-id-token", client_of_as="mcp-client")
    try:
        grant = EnterpriseManaged(
            identity_assertion="someone-else", idp_token_endpoint=idp.issuer + "/token", client_id="mcp-client"
        )
        with pytest.raises(AuthorizationError) as caught:
            async with Client.connect_http(mcp.url, auth=OAuth(grant=grant), **HANDSHAKE):
                pass
        assert caught.value.step == "identity assertion exchange"
        assert not auth_server.seen("/token")
    finally:
        idp.stop()


def oauth(**options: Any) -> OAuth:
    return OAuth(consent=HeadlessConsent(redirect_uri=REDIRECT), **options)


@pytest.mark.parametrize("nonces", [False, True], ids=["plain", "nonces"])
async def test_dpop_binds_the_token_and_proves_every_request(nonces: bool) -> None:
    server = AuthServer(registration_method="none", dpop=True, dpop_nonce="as-nonce" if nonces else None)
    app = ProtectedMcp(server, dpop_nonce="rs-nonce" if nonces else None)
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:
            assert await client.list_tools()
            assert await client.list_tools()
        [token] = server.tokens.values()
        assert token["jkt"]  # bound to the client's key
        proved = [r for r in app.requests if r.headers.get("authorization", "").startswith("DPoP ")]
        assert len(proved) >= 4 and all("dpop" in r.headers for r in proved)
        assert len({claims_of(r.headers["dpop"])["jti"] for r in proved}) == len(proved)  # a fresh proof each time
        assert not [r for r in app.requests if r.headers.get("authorization", "").startswith("Bearer ")]
        token_requests = server.seen("/token")
        if nonces:  # the first proof of each is answered with use_dpop_nonce, the retry carries the nonce
            assert [claims_of(r.headers["dpop"]).get("nonce") for r in token_requests] == [None, "as-nonce"]
            assert claims_of(proved[-1].headers["dpop"])["nonce"] == "rs-nonce"
        else:
            assert len(token_requests) == 1
    finally:
        app.stop()
        server.stop()


async def test_dpop_is_not_used_where_the_resource_does_not_ask_for_it(auth_server: AuthServer) -> None:
    auth_server.dpop = True
    app = ProtectedMcp(auth_server, dpop_challenge=False)  # a Bearer challenge: a resource that knows no DPoP
    try:
        async with Client.connect_http(app.url, auth=oauth(), **HANDSHAKE) as client:
            assert await client.list_tools()
        assert "dpop" not in auth_server.seen("/token")[0].headers
        assert app.requests[-1].headers["authorization"].startswith("Bearer ")
    finally:
        app.stop()


async def test_dpop_required_by_the_client_but_not_offered_is_an_error(
    auth_server: AuthServer, mcp: ProtectedMcp
) -> None:
    with pytest.raises(AuthorizationError) as caught:
        async with Client.connect_http(mcp.url, auth=oauth(dpop=True), **HANDSHAKE):
            pass
    assert caught.value.step == "authorization server metadata" and "DPoP" in str(caught.value)


async def test_a_stored_dpop_token_stays_usable_in_the_next_process(tmp_path: Path) -> None:
    server = AuthServer(registration_method="none", dpop=True)
    app = ProtectedMcp(server)
    path = tmp_path / "tokens.json"
    try:
        async with Client.connect_http(app.url, auth=oauth(store=FileTokenStore(path)), **HANDSHAKE) as client:
            await client.list_tools()
        async with Client.connect_http(app.url, auth=oauth(store=FileTokenStore(path)), **HANDSHAKE) as client:
            await client.list_tools()
        assert len(server.seen("/authorize")) == 1  # the key came back with the token
    finally:
        app.stop()
        server.stop()
