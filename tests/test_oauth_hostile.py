"""The OAuth client against MCP servers that try to misuse it: credentials presented to an authorization server
the server names, discovery steered into the user's own network, tokens over cleartext, oversized answers, codes
in log lines. Each server here is real (uvicorn on loopback, ``oauth_support``) or answered in-process; nothing is
ever sent to an address that is not on loopback.
"""

from __future__ import annotations

import logging
import re
import secrets
import socket
import time
from collections.abc import Iterator, Mapping
from typing import Any

import anyio
import anyio.lowlevel
import httpcore
import httpx
import pytest
from http_support import ServerThread, read_body
from joserfc import jwt
from joserfc.jwk import ECKey
from oauth_support import AuthServer, IdentityProvider, ProtectedMcp, Request, _respond

from jsonrpc_mcp import Client
from jsonrpc_mcp.auth import HeadlessConsent, MemoryTokenStore, OAuth
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


# --- discovery, registration and tokens kept out of the user's network -----------------------------------------
#
# Names resolve through a fake resolver (socket.getaddrinfo, which both event loops use), and the connections the
# client is allowed to make go through a stand-in network backend that brings each "remote" address to a server
# on loopback (TLS left out). A refused connection is never attempted: the stand-in records every one.

PUBLIC_MCP, PUBLIC_AS, INTRANET_MCP, INTRANET_AS = "93.184.216.34", "93.184.216.35", "10.1.2.3", "10.1.2.4"
DNS = {
    "mcp.example.com": [PUBLIC_MCP],
    "as.example.com": [PUBLIC_AS],
    "intranet.example": ["10.9.9.9"],
    "rebind.example": ["93.184.216.36", "127.0.0.1"],  # public, and loopback too
    "mcp.corp.example": [INTRANET_MCP],
    "as.corp.example": [INTRANET_AS],
}


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in DNS:
            return real(host, port, *args, **kwargs)
        flags = kwargs.get("flags", args[3] if len(args) > 3 else 0)
        if flags & socket.AI_NUMERICHOST:
            raise socket.gaierror(socket.EAI_NONAME, "not numeric")
        number = int(port or 0)
        return [
            (socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, number))
            for ip in DNS[name]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


class _Plain(httpcore.AsyncNetworkStream):
    """A loopback connection standing in for a remote one: ``start_tls`` keeps it plain."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self.inner = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self.inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self.inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> Any:
        return self

    def get_extra_info(self, info: str) -> Any:
        return None


class StandIn(httpcore.AsyncNetworkBackend):
    """Connects the "remote" addresses of ``sites`` to their servers on loopback, and nothing else."""

    def __init__(self, sites: Mapping[str, ServerThread]) -> None:
        self.sites = dict(sites)
        self.attempts: list[str] = []
        self.real = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        self.attempts.append(host)
        site = self.sites.get(host)
        if site is None:
            raise httpcore.ConnectError(f"the test let nothing connect to {host}")
        return _Plain(await self.real.connect_tcp("127.0.0.1", site.port))

    async def sleep(self, seconds: float) -> None:
        await self.real.sleep(seconds)


class Site:
    """Documents by path (JSON), on loopback; every request recorded."""

    def __init__(self, documents: Mapping[str, Any] | None = None) -> None:
        self.documents = dict(documents or {})
        self.requests: list[Request] = []
        self.thread = ServerThread(self, lifespan="off")

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.thread.port}"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.requests.append(Request(scope, await read_body(receive)))
        document = self.documents.get(scope["path"])
        await _respond(send, 200 if document is not None else 404, document if document is not None else {})


@pytest.fixture
def sites() -> Iterator[dict[str, Site]]:
    made: dict[str, Site] = {}
    yield made
    for site in made.values():
        site.thread.stop()


def site(sites: dict[str, Site], name: str, documents: Mapping[str, Any] | None = None) -> Site:
    sites[name] = Site(documents)
    return sites[name]


def prm(resource: str, issuer: str) -> dict[str, Any]:
    return {"resource": resource, "authorization_servers": [issuer]}


def as_metadata(issuer: str, **endpoints: str) -> dict[str, Any]:
    return {
        "issuer": issuer,
        "authorization_endpoint": issuer + "/authorize",
        "token_endpoint": issuer + "/token",
        "code_challenge_methods_supported": ["S256"],
        **endpoints,
    }


async def call_mcp(oauth: OAuth, url: str, challenge: str | None = None) -> httpx.Response:
    """One MCP request to a server answered in-process: 401 with ``challenge`` until a token comes."""
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        if request.headers.get("authorization"):
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {"tools": []}})
        header = "Bearer" + (f' resource_metadata="{challenge}"' if challenge else "")
        return httpx.Response(401, headers={"www-authenticate": header})

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer), auth=oauth) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        return await http.post(url, json=body, headers={"mcp-protocol-version": "2025-11-25"})


def hostile_oauth(standin: StandIn, **options: Any) -> OAuth:
    """An OAuth client (client credentials by default) whose connections go through ``standin`` only."""
    oauth = OAuth(**{"grant": ClientCredentials("svc", "s3cret"), **options})
    oauth._network = standin
    return oauth


@pytest.mark.usefixtures("fake_dns")
@pytest.mark.parametrize(
    ("where", "shown"),
    [
        ("http://127.0.0.1:{port}/prm", r"127\.0\.0\.1, a loopback address"),
        ("http://localhost:{port}/prm", r"localhost \((127\.0\.0\.1|::1)\), a loopback address"),
        ("https://[::ffff:127.0.0.1]:{port}/prm", r"::ffff:127\.0\.0\.1, a loopback address"),
        ("https://0.0.0.0:{port}/prm", r"0\.0\.0\.0, a reserved address"),
        ("https://10.0.0.7/prm", r"10\.0\.0\.7, a private address"),
        ("https://intranet.example/prm", r"intranet\.example \(10\.9\.9\.9\), a private address"),
        ("https://169.254.169.254/latest/meta-data/", r"169\.254\.169\.254, a link-local address"),
        ("https://[fe80::1]/prm", r"fe80::1, a link-local address"),
        ("https://rebind.example/prm", r"rebind\.example \(127\.0\.0\.1\), a loopback address"),
    ],
)
async def test_a_public_server_cannot_send_discovery_into_the_users_network(
    sites: dict[str, Site], where: str, shown: str
) -> None:
    """The challenge's ``resource_metadata`` names the user's own machine or network: refused before connecting,
    and the authorization fails there (no well-known URI of the server is tried after)."""
    local = site(sites, "local")
    standin = StandIn({})
    url = where.format(port=local.thread.port)
    with pytest.raises(AuthorizationError) as caught:
        await call_mcp(hostile_oauth(standin), "https://mcp.example.com/mcp", challenge=url)
    assert caught.value.step == "address check"
    expected = re.escape("the MCP server mcp.example.com is on a public address and may not send the client to ")
    expected += shown + re.escape(": refused before connecting (allow_networks widens this)")
    assert re.fullmatch(expected, caught.value.reason), caught.value.reason
    assert standin.attempts == [] and local.requests == []


@pytest.mark.usefixtures("fake_dns")
async def test_a_public_server_cannot_name_an_authorization_server_on_loopback(sites: dict[str, Site]) -> None:
    local = site(sites, "local", {"/.well-known/oauth-authorization-server": as_metadata("http://127.0.0.1")})
    issuer = local.origin
    mcp = site(sites, "mcp", {"/.well-known/oauth-protected-resource/mcp": prm("https://mcp.example.com/mcp", issuer)})
    standin = StandIn({PUBLIC_MCP: mcp.thread})
    with pytest.raises(AuthorizationError, match=r"may not send the client to 127\.0\.0\.1, a loopback") as caught:
        await call_mcp(hostile_oauth(standin), "https://mcp.example.com/mcp")
    assert caught.value.step == "address check"
    assert [r.path for r in mcp.requests] == ["/.well-known/oauth-protected-resource/mcp"]
    assert local.requests == [] and standin.attempts == [PUBLIC_MCP]


@pytest.mark.usefixtures("fake_dns")
@pytest.mark.parametrize(
    ("endpoint", "grant"),
    [
        ("registration_endpoint", "code"),
        ("token_endpoint", "client credentials"),
    ],
)
async def test_a_public_authorization_server_cannot_send_registration_or_tokens_to_loopback(
    sites: dict[str, Site], endpoint: str, grant: str
) -> None:
    """The metadata of a public authorization server names a loopback admin URL: nothing is posted there."""
    local = site(sites, "local")
    issuer = "https://as.example.com"
    metadata = as_metadata(issuer, **{endpoint: local.origin + "/admin"})
    authorization_server = site(sites, "as", {"/.well-known/oauth-authorization-server": metadata})
    mcp = site(sites, "mcp", {"/.well-known/oauth-protected-resource/mcp": prm("https://mcp.example.com/mcp", issuer)})
    standin = StandIn({PUBLIC_MCP: mcp.thread, PUBLIC_AS: authorization_server.thread})
    code = {"grant": None, "consent": HeadlessConsent(respond=lambda url: url)} if grant == "code" else {}
    oauth = hostile_oauth(standin, **code)
    with pytest.raises(AuthorizationError) as caught:
        await call_mcp(oauth, "https://mcp.example.com/mcp")
    assert caught.value.step == "address check" and "a loopback address" in caught.value.reason
    assert local.requests == [] and set(standin.attempts) == {PUBLIC_MCP, PUBLIC_AS}


@pytest.mark.usefixtures("fake_dns")
async def test_an_intranet_server_may_use_an_authorization_server_on_its_network(sites: dict[str, Site]) -> None:
    """A server on 10/8 whose authorization server is on 10/8 too keeps working: tokens and all."""
    await _authorizes_through(
        sites, "https://mcp.corp.example/mcp", "https://as.corp.example", INTRANET_MCP, INTRANET_AS
    )


@pytest.mark.usefixtures("fake_dns")
async def test_allow_networks_lets_a_public_server_use_an_authorization_server_on_a_private_network(
    sites: dict[str, Site],
) -> None:
    with pytest.raises(AuthorizationError, match="a private address"):
        await _authorizes_through(
            sites, "https://mcp.example.com/mcp", "https://as.corp.example", PUBLIC_MCP, INTRANET_AS
        )
    await _authorizes_through(
        sites, "https://mcp.example.com/mcp", "https://as.corp.example", PUBLIC_MCP, INTRANET_AS, ["10.1.2.0/24"]
    )


async def _authorizes_through(
    sites: dict[str, Site],
    url: str,
    issuer: str,
    mcp_address: str,
    as_address: str,
    allow: Any = (),
    *,
    cleartext: bool = False,
) -> None:
    auth = AuthServer(metadata={"issuer": issuer, "token_endpoint": issuer + "/token"})
    auth.clients["svc"] = {"method": "client_secret_basic", "secret": "s3cret"}
    try:
        mcp = site(sites, f"mcp {allow} {cleartext}", {"/.well-known/oauth-protected-resource/mcp": prm(url, issuer)})
        assert auth.thread is not None
        standin = StandIn({mcp_address: mcp.thread, as_address: auth.thread})
        response = await call_mcp(hostile_oauth(standin, allow_networks=allow, allow_cleartext=cleartext), url)
        assert response.status_code == 200
        [token] = auth.seen("/token")
        assert token.form["resource"] == url
    finally:
        auth.stop()


def test_allow_networks_must_be_networks() -> None:
    with pytest.raises(ValueError, match="'intranet' is not an IP network"):
        OAuth(allow_networks=["intranet"])
    with pytest.raises(TypeError, match="a list of networks, not a string"):
        OAuth(allow_networks="10.0.0.0/8")


# --- no token in cleartext -------------------------------------------------------------------------------------


async def call_mcp_recorded(oauth: OAuth, url: str) -> tuple[list[str], Any]:
    """``call_mcp`` against a server that records the Authorization header of every request it gets."""
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        return httpx.Response(401, headers={"www-authenticate": "Bearer"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer), auth=oauth) as http:
        try:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            return seen, await http.post(url, json=body, headers={"mcp-protocol-version": "2025-11-25"})
        except AuthorizationError as exc:
            return seen, exc


@pytest.mark.usefixtures("fake_dns")
@pytest.mark.parametrize("url", ["http://mcp.example.com/mcp", "http://10.1.2.3:8000/mcp"])
async def test_a_token_is_never_sent_in_cleartext_to_a_server_off_loopback(url: str) -> None:
    """Refused before authorizing (no token is obtained for it), and a stored token is not sent there either."""
    standin = StandIn({})
    seen, outcome = await call_mcp_recorded(hostile_oauth(standin), url)
    assert isinstance(outcome, AuthorizationError) and outcome.step == "authorization"
    assert outcome.reason == (
        f"refusing to send a token in cleartext to {url} (plain http, not on loopback): use https, or "
        "OAuth(allow_cleartext=True)"
    )
    assert seen == [""] and standin.attempts == []
    store = MemoryTokenStore()
    await store.save(f"tokens {url}", {"access_token": "at-stored", "url": url, "issuer": "https://as.example.com"})
    seen, outcome = await call_mcp_recorded(hostile_oauth(standin, store=store), url)
    assert isinstance(outcome, AuthorizationError) and "in cleartext" in outcome.reason
    assert seen == []


@pytest.mark.usefixtures("fake_dns")
async def test_allow_cleartext_sends_tokens_over_http_off_loopback(sites: dict[str, Site]) -> None:
    with pytest.raises(AuthorizationError, match="in cleartext"):
        await _authorizes_through(sites, "http://mcp.example.com/mcp", "https://as.example.com", PUBLIC_MCP, PUBLIC_AS)
    await _authorizes_through(
        sites, "http://mcp.example.com/mcp", "https://as.example.com", PUBLIC_MCP, PUBLIC_AS, cleartext=True
    )


# --- bounded answers, refresh tokens from OpenID providers, codes kept out of logs -----------------------------

REDIRECT = "http://127.0.0.1:5999/callback"


async def _note_disconnect(receive: Any, gone: anyio.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


class Endless:
    """An endpoint whose JSON answer never ends (until the client goes): what a client that reads it whole meets."""

    def __init__(self) -> None:
        self.gone = False
        self.thread = ServerThread(self, lifespan="off")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        head = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": b'{"access_token": "', "more_body": True})
        gone = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_note_disconnect, receive, gone)
            while not gone.is_set():
                await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})
                await anyio.lowlevel.checkpoint()
        self.gone = True

    def stop(self) -> None:
        self.thread.stop()


@pytest.mark.parametrize("endpoint", ["token_endpoint", "registration_endpoint"])
async def test_token_and_registration_answers_are_bounded(endpoint: str) -> None:
    """A token (or registration) endpoint that answers without end: the client stops at 1 MiB and says so."""
    endless = Endless()
    auth = AuthServer()
    auth.overrides[endpoint] = f"http://127.0.0.1:{endless.thread.port}/endless"
    auth.clients["svc"] = {"method": "client_secret_basic", "secret": "s3cret"}
    mcp = ProtectedMcp(auth)
    grant = ClientCredentials("svc", "s3cret") if endpoint == "token_endpoint" else None
    try:
        oauth = OAuth(grant=grant, consent=HeadlessConsent(redirect_uri=REDIRECT))
        with anyio.fail_after(30), pytest.raises(AuthorizationError) as caught:
            async with Client.connect_http(mcp.url, auth=oauth, **HANDSHAKE):
                pass
    finally:
        for server in (mcp, auth, endless):
            server.stop()
    step = "token request" if endpoint == "token_endpoint" else "client registration"
    assert caught.value.step == step
    assert caught.value.reason == (
        f"http://127.0.0.1:{endless.thread.port}/endless answered more than 1048576 bytes: not read further"
    )
    assert endless.gone  # the client went, rather than reading on


async def test_a_verifiers_key_set_or_introspection_answer_is_bounded_while_it_arrives() -> None:
    """What a token verifier fetches (a key set, an introspection answer) is read up to 1 MiB, not buffered whole
    first: an answer without end is refused once past the bound, and the verifier goes."""
    from jsonrpc_mcp.auth._fetch import fetch_json
    from jsonrpc_mcp.auth.principal import VerifierUnavailable

    endless = Endless()
    url = f"http://127.0.0.1:{endless.thread.port}/jwks"
    try:
        with anyio.fail_after(30), pytest.raises(VerifierUnavailable) as caught:
            await fetch_json("GET", url, client=None, timeout=30)
    finally:
        endless.stop()
    assert caught.value.reason == f"{url} answered more than 1048576 bytes"
    assert endless.gone


@pytest.mark.parametrize("openid", [True, False], ids=["OpenID provider", "OAuth server"])
async def test_offline_access_asked_of_an_openid_provider_comes_with_prompt_consent(openid: bool) -> None:
    """OpenID Connect Core §11: without ``prompt=consent`` an OpenID provider ignores ``offline_access`` and issues
    no refresh token; a plain OAuth server gets no ``prompt``."""
    metadata: dict[str, Any] = {"scopes_supported": ["mcp", "offline_access"]}
    if openid:
        metadata = {"scopes_supported": ["openid", "mcp", "offline_access"], "subject_types_supported": ["public"]}
        metadata["id_token_signing_alg_values_supported"] = ["RS256"]
    auth = AuthServer(metadata=metadata)
    mcp = ProtectedMcp(auth, scopes_supported=["mcp"])
    try:
        oauth = OAuth(consent=HeadlessConsent(redirect_uri=REDIRECT))
        async with Client.connect_http(mcp.url, auth=oauth, **HANDSHAKE) as client:
            await client.list_tools()
    finally:
        mcp.stop()
        auth.stop()
    [authorize] = auth.seen("/authorize")
    assert authorize.query["scope"] == "mcp offline_access"
    assert authorize.query.get("prompt") == ("consent" if openid else None)


async def test_an_authorization_code_is_in_no_log_line_at_any_level(caplog: pytest.LogCaptureFixture) -> None:
    """Every logger at DEBUG, httpx's and httpcore's included (httpcore logs the headers of each answer, and the
    redirect back carries the code in its Location): the code is never written."""
    caplog.set_level(logging.DEBUG)
    auth = AuthServer()
    mcp = ProtectedMcp(auth)
    try:
        oauth = OAuth(consent=HeadlessConsent(redirect_uri=REDIRECT))
        async with Client.connect_http(mcp.url, auth=oauth, **HANDSHAKE) as client:
            await client.list_tools()
    finally:
        mcp.stop()
        auth.stop()
    [token] = auth.seen("/token")
    code = token.form["code"]
    lines = [record.getMessage() for record in caplog.records]
    assert any(record.name.startswith("httpcore") for record in caplog.records)  # they did log, at DEBUG
    assert any("code=[redacted]" in line for line in lines)
    assert not [line for line in lines if code in line]
