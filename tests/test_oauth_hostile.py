"""The OAuth client against MCP servers that try to misuse it: credentials presented to an authorization server
the server names, discovery steered into the user's own network, tokens over cleartext, oversized answers, codes
in log lines. Each server here is real (uvicorn on loopback, ``oauth_support``) or answered in-process; nothing is
ever sent to an address that is not on loopback.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey
from oauth_support import AuthServer, IdentityProvider, ProtectedMcp

from jsonrpc_mcp import Client
from jsonrpc_mcp.auth import OAuth
from jsonrpc_mcp.auth.oauth_grants import ClientCredentials, EnterpriseManaged, JwtBearer
from jsonrpc_mcp.errors import AuthorizationError

pytestmark = pytest.mark.anyio

HANDSHAKE = {"protocol_version": "2025-11-25"}


class Moving:
    """An MCP server whose authorization server the test changes (``to``): first the real one, then the hostile."""

    def __init__(self) -> None:
        self.real = AuthServer(registration_method="none")
        self.hostile = AuthServer(registration_method="none")
        self.current = self.real
        self.mcp = ProtectedMcp(lambda: self.current)

    def stop(self) -> None:
        for server in (self.mcp, self.real, self.hostile):
            server.stop()

    def seen_by_hostile(self) -> str:
        return repr([(r.path, r.headers, r.body) for r in self.hostile.requests])


@pytest.fixture
def moving() -> Iterator[Moving]:
    servers = Moving()
    yield servers
    servers.stop()


# --- credentials bound to their authorization server ---------------------------------------------------------


def workload_grant(moving: Moving, **options: Any) -> tuple[JwtBearer, list[str]]:
    platform = ECKey.generate_key("P-256")
    moving.real.assertion_issuers["https://platform.example"] = platform
    issued: list[str] = []

    def workload_token() -> str:
        claims = {"iss": "https://platform.example", "sub": "job-7", "aud": moving.real.issuer}
        issued.append(jwt.encode({"alg": "ES256"}, {**claims, "exp": int(time.time()) + 60}, platform))
        return issued[-1]

    return JwtBearer(workload_token, client_id="workload", **options), issued


@pytest.mark.parametrize("kind", ["client credentials", "jwt bearer"])
async def test_credentials_used_with_one_authorization_server_are_never_presented_to_another(
    moving: Moving, kind: str
) -> None:
    """After working with the real authorization server, the MCP server names another: the client secret (or the
    workload's JWT) stays with the first; the grant fails with a clear error and the other gets no token request."""
    secret = "s3cret-" + secrets.token_urlsafe(8)
    moving.real.clients["svc"] = {"method": "client_secret_basic", "secret": secret}
    issued: list[str] = []
    if kind == "client credentials":
        grant: Any = ClientCredentials("svc", secret)
    else:
        grant, issued = workload_grant(moving)
    async with Client.connect_http(moving.mcp.url, auth=OAuth(grant=grant), **HANDSHAKE) as client:
        await client.list_tools()
        moving.current = moving.hostile
        with pytest.raises(AuthorizationError) as caught:
            await client.list_tools()
    assert caught.value.step == "client registration"
    assert f"bound to the authorization server {moving.real.issuer}" in str(caught.value)
    assert moving.hostile.issuer in str(caught.value)
    assert not moving.hostile.seen("/token")
    assert secret not in moving.seen_by_hostile()
    assert all(token not in moving.seen_by_hostile() for token in issued)


@pytest.mark.parametrize("kind", ["client credentials", "jwt bearer"])
async def test_credentials_configured_for_an_issuer_are_refused_to_any_other_from_the_first_request(
    moving: Moving, kind: str
) -> None:
    secret = "s3cret-" + secrets.token_urlsafe(8)
    moving.current = moving.hostile
    if kind == "client credentials":
        grant: Any = ClientCredentials("svc", secret, issuer=moving.real.issuer)
    else:
        grant, _ = workload_grant(moving, issuer=moving.real.issuer)
    with pytest.raises(AuthorizationError) as caught:
        async with Client.connect_http(moving.mcp.url, auth=OAuth(grant=grant), **HANDSHAKE):
            pass
    assert caught.value.step == "client registration"
    assert not moving.hostile.seen("/token")
    assert secret not in moving.seen_by_hostile()
    moving.current = moving.real  # the configured one is used as before
    moving.real.clients["svc"] = {"method": "client_secret_basic", "secret": secret}
    async with Client.connect_http(moving.mcp.url, auth=OAuth(grant=grant), **HANDSHAKE) as client:
        assert await client.list_tools()
    assert len(moving.real.seen("/token")) == 1


async def test_an_enterprise_grant_asks_no_id_jag_for_another_authorization_server(moving: Moving) -> None:
    idp = IdentityProvider(id_token="alice-id-token", client_of_as="mcp-client")
    moving.real.assertion_issuers[idp.issuer] = idp.key
    moving.real.clients["mcp-client"] = {"method": "client_secret_basic", "secret": "s3cret"}
    try:
        grant = EnterpriseManaged(
            identity_assertion="alice-id-token",
            idp_token_endpoint=idp.issuer + "/token",
            client_id="mcp-client",
            client_secret="s3cret",
        )
        async with Client.connect_http(moving.mcp.url, auth=OAuth(grant=grant), **HANDSHAKE) as client:
            await client.list_tools()
            moving.current = moving.hostile
            with pytest.raises(AuthorizationError, match="bound to the authorization server"):
                await client.list_tools()
        assert len(idp.requests) == 1  # the exchange for the real one only
        assert not moving.hostile.seen("/token")
    finally:
        idp.stop()
