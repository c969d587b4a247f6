"""``ProtectedResource`` against a real, certified OpenID provider (``oidc_support``: the pinned npm package
``oidc-provider`` under Node, on loopback): its JWT access tokens (RFC 9068, resource indicators) are accepted
through its discovered key set; a tampered one, one for another resource or of another issuer is refused; and
our OAuth client, our server and the provider agree on DPoP-bound tokens (RFC 9449) end to end."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from auth_support import LateApp
from http_support import JSON_HEADERS, ServerThread, call_body, init_body, response_of
from oidc_support import OpenIdProvider, running_provider

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp.auth import JwtVerifier, OAuth, ProtectedResource
from jsonrpc_mcp.auth.jwt import discover_metadata
from jsonrpc_mcp.auth.oauth_grants import ClientCredentials
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [pytest.mark.anyio, pytest.mark.once]


def make_server() -> Server:
    server = Server("notes", "1.0")

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Who is calling, and the key the token is bound to."""
        assert ctx.auth is not None
        cnf = ctx.auth.claims.get("cnf") or {}
        return json.dumps({"sub": ctx.auth.subject, "client_id": ctx.auth.client_id, "jkt": cnf.get("jkt")})

    return server


class Setting:
    def __init__(self, thread: ServerThread, late: LateApp, provider: OpenIdProvider, metadata: dict[str, Any]):
        self.thread, self.late, self.provider, self.metadata = thread, late, provider, metadata

    @property
    def resource(self) -> str:
        return self.thread.url

    def protect(self, *, audience: str | None = None, issuer: str | None = None) -> None:
        verifier = JwtVerifier(
            issuer=issuer or self.provider.issuer,
            audience=audience or self.resource,
            jwks_url=self.metadata["jwks_uri"],
        )
        policy = ProtectedResource(
            resource=audience or self.resource,
            authorization_servers=[self.provider.issuer],
            verifier=verifier,
            required_scopes=["notes:read"],
        )
        self.late.app = McpAsgiApp(make_server(), http_policy=policy)

    async def token(self, http: httpx.AsyncClient) -> str:
        answer = await http.post(
            self.metadata["token_endpoint"],
            data={"grant_type": "client_credentials", "scope": "notes:read", "resource": self.resource},
            auth=(self.provider.client_id, self.provider.client_secret),
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["token_type"] == "Bearer"
        return str(body["access_token"])


@pytest.fixture(scope="module")
def setting() -> Iterator[Setting]:
    late = LateApp()
    thread = ServerThread(late, lifespan="off")
    try:
        with running_provider(thread.url) as provider:
            with httpx.Client(timeout=10) as http:
                metadata = http.get(f"{provider.issuer}/.well-known/openid-configuration").json()
            yield Setting(thread, late, provider, metadata)
    finally:
        thread.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


def claims_of(token: str) -> dict[str, Any]:
    return dict(json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "==")))


async def test_the_providers_metadata_is_discovered_as_the_verifier_finds_it(setting: Setting) -> None:
    metadata = await discover_metadata(setting.provider.issuer)
    assert metadata["issuer"] == setting.provider.issuer
    assert metadata["jwks_uri"] == setting.metadata["jwks_uri"]


async def test_a_token_of_the_real_provider_is_accepted_through_its_key_set(
    setting: Setting, http: httpx.AsyncClient
) -> None:
    setting.protect()
    token = await setting.token(http)
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header["typ"] == "at+jwt" and header["alg"] == "RS256"  # RFC 9068, as the provider issues it
    assert claims_of(token)["aud"] == setting.resource  # RFC 8707: the resource indicator
    headers = {**JSON_HEADERS, "Authorization": f"Bearer {token}"}
    opened = await http.post(setting.thread.url, json=init_body(), headers=headers)
    assert opened.status_code == 200, opened.text
    session = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    reply = await http.post(setting.thread.url, json=call_body(2, "whoami", {}), headers=session)
    who = json.loads(response_of(reply, 2)["result"]["content"][0]["text"])
    assert who["client_id"] == setting.provider.client_id and who["jkt"] is None


def _tampered(token: str) -> str:
    """The same token with its scope widened: the signature no longer covers the claims."""
    head, _, rest = token.partition(".")
    _, _, signature = rest.partition(".")
    claims = claims_of(token)
    claims["scope"] = "notes:read notes:write notes:admin"
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{head}.{payload}.{signature}"


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("tampered", "the access token's signature does not verify"),
        ("another resource", "the access token was issued for another resource"),
        ("another issuer", "the access token was issued by another authorization server"),
    ],
)
async def test_a_tampered_or_foreign_token_of_the_real_provider_is_refused(
    setting: Setting, http: httpx.AsyncClient, case: str, reason: str
) -> None:
    token = await setting.token(http)
    if case == "tampered":
        setting.protect()
        token = _tampered(token)
    elif case == "another resource":  # a server whose canonical URI is another: the token is not for it
        setting.protect(audience=setting.resource.replace("/mcp", "/other"))
    else:  # the provider is not the one this server trusts (its issuer with a trailing slash, say)
        setting.protect(issuer=setting.provider.issuer + "/")
    response = await http.post(
        setting.thread.url, json=init_body(), headers={**JSON_HEADERS, "Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 401
    assert f'error="invalid_token", error_description="{reason}"' in response.headers["www-authenticate"]


async def test_our_client_our_server_and_the_provider_agree_on_dpop(setting: Setting) -> None:
    """The metadata offers DPoP; the provider does it: our client binds its token, proves each request, and the
    server checks the proofs against the token's cnf.jkt."""
    setting.protect()
    grant = ClientCredentials(setting.provider.client_id, setting.provider.client_secret)
    async with Client.connect_http(setting.thread.url, auth=OAuth(grant=grant), protocol_version="2025-11-25") as c:
        who = json.loads((await c.call_tool("whoami", {})).content[0].text)
    assert who["client_id"] == setting.provider.client_id
    assert who["jkt"]  # the provider bound the token to the client's key, and the server took the proofs
