"""DPoP at the resource server (RFC 9449 §7): ``ProtectedResource`` over real HTTP (uvicorn, loopback) with tokens
of a real authorization server (``auth_server``) bound to a key (``cnf.jkt``) and proofs made by the client's own
``DPoPKey`` (or forged by hand): a bound token without its proof is refused, and every check of a proof refuses
what it is for; then our OAuth client and our server together, server nonces included."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from auth_server import AuthServer
from auth_support import LateApp, jwt_policy
from auth_support import auth as auth
from http_support import HTTPX_GENERATORS, JSON_HEADERS, ServerThread, call_body, init_body, response_of
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey
from oauth_support import AuthServer as FlowServer
from test_auth_http import ALGS, METADATA_URL, RESOURCE, make_server

from jsonrpc_mcp import Client
from jsonrpc_mcp.auth import DPoP, DPoPKey, HeadlessConsent, OAuth, ProtectedResource
from jsonrpc_mcp.auth.dpop import access_token_hash, normalise_url
from jsonrpc_mcp.auth.principal import AccessToken, InvalidToken
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [
    pytest.mark.anyio,
    HTTPX_GENERATORS,
    pytest.mark.filterwarnings("ignore::joserfc.errors.SecurityWarning"),
]

DPOP = f'DPoP resource_metadata="{METADATA_URL}", scope="notes:read", algs="{ALGS}"'
BEARER = f'Bearer resource_metadata="{METADATA_URL}", scope="notes:read"'


class Clock:
    """The time the DPoP checks see, moved by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def protect(auth: AuthServer, **dpop: Any) -> ServerThread:
    policy = jwt_policy(auth, RESOURCE, required_scopes=["notes:read"], **({"dpop": DPoP(**dpop)} if dpop else {}))
    return ServerThread(McpAsgiApp(make_server(), http_policy=policy), lifespan="off")


@pytest.fixture(scope="module")
def protected(auth: AuthServer) -> Iterator[ServerThread]:
    thread = protect(auth)
    yield thread
    thread.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


KEY = DPoPKey()


def bound_token(auth: AuthServer, key: DPoPKey = KEY, **claims: Any) -> str:
    return auth.mint(aud=RESOURCE, scope="notes:read", cnf={"jkt": key.thumbprint}, **claims)


def dpop_headers(token: str, proof: str | list[str] | None) -> list[tuple[str, str]]:
    proofs = [proof] if isinstance(proof, str) else proof or []
    return [*JSON_HEADERS.items(), ("Authorization", f"DPoP {token}"), *(("DPoP", p) for p in proofs)]


def forged(token: str, *, header: dict[str, Any] | None = None, key: Any = None, **claims: Any) -> str:
    """A proof made by hand (a good one unless told otherwise): ``header`` and ``claims`` override, None drops."""
    signer = key or KEY._key
    body = {"jti": f"j-{time.monotonic_ns()}", "htm": "POST", "htu": RESOURCE, "iat": int(time.time())}
    body["ath"] = access_token_hash(token)
    body.update(claims)
    head = {"typ": "dpop+jwt", "alg": "ES256", "jwk": KEY.public_jwk, **(header or {})}
    head = {k: v for k, v in head.items() if v is not None}
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(head, body, signer, algorithms=[head.get("alg", "ES256")])


def refusal(error: str, reason: str) -> str:
    """The two challenges of a refused DPoP request: the DPoP one first, with the error."""
    return f'{DPOP}, error="{error}", error_description="{reason}", {BEARER}'


# --- the defect: a bound token is no bearer token ----------------------------------------------------------------


async def test_a_token_bound_to_a_dpop_key_is_refused_as_a_bearer_token(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    token = bound_token(auth)
    response = await http.post(
        protected.url, json=init_body(), headers={**JSON_HEADERS, "Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 401
    reason = "the access token is bound to a DPoP key"
    assert (
        response.headers["www-authenticate"] == f'{BEARER}, error="invalid_token", error_description="{reason}", {DPOP}'
    )
    # with its proof, the same token is good: Authorization: DPoP is a scheme this server takes
    good = await http.post(
        protected.url, json=init_body(), headers=dpop_headers(token, KEY.proof("POST", RESOURCE, access_token=token))
    )
    assert good.status_code == 200, good.text


async def test_a_proved_request_reaches_the_handler_with_its_principal(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    token = bound_token(auth)
    opened = await http.post(
        protected.url, json=init_body(), headers=dpop_headers(token, KEY.proof("POST", RESOURCE, access_token=token))
    )
    session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    headers = [*dpop_headers(token, KEY.proof("POST", RESOURCE, access_token=token)), *session.items()]
    reply = await http.post(protected.url, json=call_body(2, "whoami", {}), headers=headers)
    assert response_of(reply, 2)["result"]["content"][0]["text"] == "alice|test-client|notes:read"
    # a scope the token lacks: the step-up challenge is a DPoP one
    headers = [*dpop_headers(token, KEY.proof("POST", RESOURCE, access_token=token)), *session.items()]
    refused = await http.post(protected.url, json=call_body(3, "write_note", {"text": "x"}), headers=headers)
    assert refused.status_code == 403
    assert refused.headers["www-authenticate"].startswith('DPoP error="insufficient_scope", scope="notes:write"')


# --- each check of a proof ----------------------------------------------------------------------------------------


OTHER = DPoPKey()
OTHER_RSA = RSAKey.generate_key(2048)


def _private_jwk(token: str) -> str:
    return forged(token, header={"jwk": KEY.private_jwk()})


def _hmac(token: str) -> str:
    secret = OctKey.generate_key(256)
    return forged(token, header={"alg": "HS256", "jwk": secret.as_dict(private=False)}, key=secret)


def _none(token: str) -> str:
    def b64(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    claims = {"jti": "n", "htm": "POST", "htu": RESOURCE, "iat": int(time.time()), "ath": access_token_hash(token)}
    return f"{b64({'typ': 'dpop+jwt', 'alg': 'none', 'jwk': KEY.public_jwk})}.{b64(claims)}."


#: case -> (the proofs as a function of the token, the error, its description)
BAD_PROOFS: dict[str, tuple[Any, str, str]] = {
    "no proof": (lambda t: None, "invalid_dpop_proof", "send exactly one DPoP proof (the DPoP header)"),
    "two proofs": (
        lambda t: [KEY.proof("POST", RESOURCE, access_token=t), KEY.proof("POST", RESOURCE, access_token=t)],
        "invalid_dpop_proof",
        "send exactly one DPoP proof (the DPoP header)",
    ),
    "not a JWT": (lambda t: "abc.def", "invalid_dpop_proof", "the DPoP proof is not a well-formed JWT"),
    "another typ": (
        lambda t: forged(t, header={"typ": "at+jwt"}),
        "invalid_dpop_proof",
        "the DPoP proof's typ is not dpop+jwt",
    ),
    "no typ": (lambda t: forged(t, header={"typ": None}), "invalid_dpop_proof", "the DPoP proof's typ is not dpop+jwt"),
    "alg none": (_none, "invalid_dpop_proof", "the DPoP proof's signature algorithm is not accepted"),
    "HMAC": (_hmac, "invalid_dpop_proof", "the DPoP proof's signature algorithm is not accepted"),
    "no jwk": (
        lambda t: forged(t, header={"jwk": None}),
        "invalid_dpop_proof",
        "the DPoP proof carries no public key of the type its algorithm needs (jwk)",
    ),
    "a jwk of another type": (
        lambda t: forged(t, header={"jwk": OTHER_RSA.as_dict(private=False)}),
        "invalid_dpop_proof",
        "the DPoP proof carries no public key of the type its algorithm needs (jwk)",
    ),
    "a private jwk": (_private_jwk, "invalid_dpop_proof", "the DPoP proof's jwk holds a private key"),
    "signed by another key": (
        lambda t: forged(t, key=OTHER._key),
        "invalid_dpop_proof",
        "the DPoP proof's signature does not verify",
    ),
    "another method": (
        lambda t: KEY.proof("GET", RESOURCE, access_token=t),
        "invalid_dpop_proof",
        "the DPoP proof is for another HTTP method (htm)",
    ),
    "another URL": (
        lambda t: KEY.proof("POST", "https://notes.example.com/other", access_token=t),
        "invalid_dpop_proof",
        "the DPoP proof is for another URL (htu)",
    ),
    "another host": (
        lambda t: KEY.proof("POST", "https://evil.example.com/mcp", access_token=t),
        "invalid_dpop_proof",
        "the DPoP proof is for another URL (htu)",
    ),
    "too old": (
        lambda t: forged(t, iat=int(time.time()) - 400),
        "invalid_dpop_proof",
        "the DPoP proof is too old (iat)",
    ),
    "from the future": (
        lambda t: forged(t, iat=int(time.time()) + 120),
        "invalid_dpop_proof",
        "the DPoP proof was issued in the future (iat)",
    ),
    "no iat": (lambda t: forged(t, iat=None), "invalid_dpop_proof", "the DPoP proof has no issue time (iat)"),
    "for another token": (
        lambda t: KEY.proof("POST", RESOURCE, access_token="another-token"),
        "invalid_dpop_proof",
        "the DPoP proof is not for this access token (ath)",
    ),
    "an ath that is not ASCII": (
        lambda t: forged(t, ath="\u00e9t\u00e9"),
        "invalid_dpop_proof",
        "the DPoP proof is not for this access token (ath)",
    ),
    "no ath": (
        lambda t: KEY.proof("POST", RESOURCE),
        "invalid_dpop_proof",
        "the DPoP proof is not for this access token (ath)",
    ),
    "no jti": (lambda t: forged(t, jti=None), "invalid_dpop_proof", "the DPoP proof has no usable id (jti)"),
    "by a key the token is not bound to": (
        lambda t: OTHER.proof("POST", RESOURCE, access_token=t),
        "invalid_dpop_proof",
        "the access token is not bound to the DPoP proof's key",
    ),
}


@pytest.mark.parametrize("case", list(BAD_PROOFS))
async def test_each_bad_proof_is_refused_with_its_reason(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient, case: str
) -> None:
    make, error, reason = BAD_PROOFS[case]
    token = bound_token(auth)
    response = await http.post(protected.url, json=init_body(), headers=dpop_headers(token, make(token)))
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == refusal(error, reason)
    assert response.json() == {"error": error, "error_description": reason}
    assert token not in response.text


async def test_a_replayed_proof_is_refused(protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient) -> None:
    token = bound_token(auth)
    proof = KEY.proof("POST", RESOURCE, access_token=token)
    first = await http.post(protected.url, json=init_body(), headers=dpop_headers(token, proof))
    assert first.status_code == 200
    again = await http.post(protected.url, json=init_body(), headers=dpop_headers(token, proof))
    assert again.status_code == 401
    assert again.headers["www-authenticate"] == refusal("invalid_dpop_proof", "the DPoP proof was used before (jti)")


async def test_an_unbound_token_with_a_proof_is_refused(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    token = auth.mint(aud=RESOURCE, scope="notes:read")
    response = await http.post(
        protected.url, json=init_body(), headers=dpop_headers(token, KEY.proof("POST", RESOURCE, access_token=token))
    )
    assert response.status_code == 401
    reason = "the access token is not bound to the DPoP proof's key"
    assert response.headers["www-authenticate"] == refusal("invalid_token", reason)


async def test_a_token_bound_to_a_key_id_that_is_not_ascii_is_refused_not_a_failure(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    token = auth.mint(aud=RESOURCE, scope="notes:read", cnf={"jkt": "\u00e9t\u00e9"})
    proof = KEY.proof("POST", RESOURCE, access_token=token)
    response = await http.post(protected.url, json=init_body(), headers=dpop_headers(token, proof))
    assert response.status_code == 401
    reason = "the access token is not bound to the DPoP proof's key"
    assert response.headers["www-authenticate"] == refusal("invalid_dpop_proof", reason)


@pytest.mark.parametrize(
    "htu",
    [
        "HTTPS://Notes.Example.COM/mcp",
        "https://notes.example.com:443/mcp",
        "https://notes.example.com/%6Dcp",
        "https://notes.example.com/x/../mcp",
        "https://notes.example.com/mcp?q=1#f",
    ],
)
async def test_the_htu_is_compared_normalised(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient, htu: str
) -> None:
    token = bound_token(auth)
    response = await http.post(protected.url, json=init_body(), headers=dpop_headers(token, forged(token, htu=htu)))
    assert response.status_code == 200, response.text


def test_urls_normalise_as_rfc_3986_says() -> None:
    assert normalise_url("HTTP://A.example:80/%7euser/a/./b/../c%2f?x#y") == "http://a.example/~user/a/c%2F"
    assert normalise_url("https://a.example") == normalise_url("https://a.example/") == "https://a.example"
    assert normalise_url("https://[::1]:8443/p") == "https://[::1]:8443/p"
    for bad in ("ftp://a.example/", "/relative", "https://a.example:x/"):
        with pytest.raises(ValueError):
            normalise_url(bad)


def test_the_replay_cache_is_bounded_and_forgets_expired_ids(auth: AuthServer) -> None:
    clock = Clock()
    dpop = DPoP(replay_cache=3, clock=clock)
    token = "tok"
    for _ in range(5):
        dpop.check(
            [KEY.proof("POST", RESOURCE, access_token=token)],
            method="POST",
            url=RESOURCE,
            access_token_hash=access_token_hash(token),
        )
    assert len(dpop._seen) == 3
    clock.now += 301  # every proof seen is too old now: its id is dropped with the next
    dpop.check(
        [forged(token, iat=int(clock.now))], method="POST", url=RESOURCE, access_token_hash=access_token_hash(token)
    )
    assert len(dpop._seen) == 1


def test_unsafe_dpop_settings_are_refused() -> None:
    for options in (
        {"algorithms": ["HS256"]},
        {"algorithms": ["none"]},
        {"algorithms": []},
        {"max_age": -1},
        {"replay_cache": 0},
        {"nonce_lifetime": 0},
        {"nonce_key": b"short"},
    ):
        with pytest.raises(ValueError):
            DPoP(**options)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ProtectedResource(
            resource=RESOURCE, authorization_servers=["https://as.example"], verifier=Careless(), dpop=True
        )  # type: ignore[arg-type]


class Careless:
    async def verify(self, token: str) -> AccessToken:
        raise InvalidToken()


# --- server nonces, DPoP required, DPoP off ----------------------------------------------------------------------


async def test_with_nonces_a_proof_without_the_current_one_is_answered_with_a_fresh_nonce(
    auth: AuthServer, http: httpx.AsyncClient
) -> None:
    clock = Clock()
    thread = protect(auth, nonce_lifetime=60, clock=clock)
    try:
        token = bound_token(auth)
        asked = await http.post(
            thread.url, json=init_body(), headers=dpop_headers(token, KEY.proof("POST", RESOURCE, access_token=token))
        )
        assert asked.status_code == 401
        reason = "the resource server asks a nonce of DPoP proofs"
        assert asked.headers["www-authenticate"] == refusal("use_dpop_nonce", reason)
        nonce = asked.headers["dpop-nonce"]
        proof = KEY.proof("POST", RESOURCE, access_token=token, nonce=nonce)
        assert (await http.post(thread.url, json=init_body(), headers=dpop_headers(token, proof))).status_code == 200
        clock.now += 60  # the next period: the nonce of the last one still holds
        proof = KEY.proof("POST", RESOURCE, access_token=token, nonce=nonce)
        assert (await http.post(thread.url, json=init_body(), headers=dpop_headers(token, proof))).status_code == 200
        clock.now += 60  # two periods on: stale, and a fresh one is given
        proof = KEY.proof("POST", RESOURCE, access_token=token, nonce=nonce)
        stale = await http.post(thread.url, json=init_body(), headers=dpop_headers(token, proof))
        assert stale.status_code == 401 and 'error="use_dpop_nonce"' in stale.headers["www-authenticate"]
        assert stale.headers["dpop-nonce"] != nonce
        for bad in (nonce.split(".")[0] + ".AAAA", "\u00e9t\u00e9"):
            forged_nonce = KEY.proof("POST", RESOURCE, access_token=token, nonce=bad)
            refused = await http.post(thread.url, json=init_body(), headers=dpop_headers(token, forged_nonce))
            assert refused.status_code == 401 and 'error="use_dpop_nonce"' in refused.headers["www-authenticate"]
    finally:
        thread.stop()


def test_workers_given_one_nonce_key_accept_each_others_nonces() -> None:
    key = b"k" * 32
    one, other, alone = (
        DPoP(nonce_lifetime=60, nonce_key=key),
        DPoP(nonce_lifetime=60, nonce_key=key),
        DPoP(nonce_lifetime=60),
    )
    nonce = one.nonce()
    assert nonce is not None and nonce == other.nonce() != alone.nonce()
    token = "tok"
    other.check(
        [KEY.proof("POST", RESOURCE, access_token=token, nonce=nonce)],
        method="POST",
        url=RESOURCE,
        access_token_hash=access_token_hash(token),
    )


async def test_with_dpop_required_a_bearer_token_is_as_good_as_none(auth: AuthServer, http: httpx.AsyncClient) -> None:
    thread = protect(auth, required=True)
    try:
        metadata = (await http.get(f"http://127.0.0.1:{thread.port}/.well-known/oauth-protected-resource/mcp")).json()
        assert metadata["dpop_bound_access_tokens_required"] is True
        assert metadata["dpop_signing_alg_values_supported"] == ALGS.split()
        plain = auth.mint(aud=RESOURCE, scope="notes:read")
        response = await http.post(
            thread.url, json=init_body(), headers={**JSON_HEADERS, "Authorization": f"Bearer {plain}"}
        )
        assert response.status_code == 401 and response.headers["www-authenticate"] == DPOP
        token = bound_token(auth)
        proved = await http.post(
            thread.url, json=init_body(), headers=dpop_headers(token, KEY.proof("POST", RESOURCE, access_token=token))
        )
        assert proved.status_code == 200
    finally:
        thread.stop()


async def test_with_dpop_off_the_scheme_is_not_taken_and_bound_tokens_are_still_refused(
    auth: AuthServer, http: httpx.AsyncClient
) -> None:
    policy = jwt_policy(auth, RESOURCE, dpop=None)
    assert "dpop_signing_alg_values_supported" not in policy.metadata
    thread = ServerThread(McpAsgiApp(make_server(), http_policy=policy), lifespan="off")
    try:
        token = bound_token(auth)
        proved = await http.post(
            thread.url, json=init_body(), headers=dpop_headers(token, KEY.proof("POST", RESOURCE, access_token=token))
        )
        assert (
            proved.status_code == 401
            and proved.headers["www-authenticate"] == f'Bearer resource_metadata="{METADATA_URL}"'
        )
        bearer = await http.post(
            thread.url, json=init_body(), headers={**JSON_HEADERS, "Authorization": f"Bearer {token}"}
        )
        assert bearer.status_code == 401 and 'error="invalid_token"' in bearer.headers["www-authenticate"]
    finally:
        thread.stop()


# --- our client and our server ------------------------------------------------------------------------------------


class FlowTokens:
    """The tokens the authorization server of ``oauth_support`` issued (opaque ones), as a verifier: what its
    introspection would say, ``cnf.jkt`` included."""

    def __init__(self, server: FlowServer, resource: str) -> None:
        self.server = server
        self.resource = resource

    async def verify(self, token: str) -> AccessToken:
        issued = self.server.tokens.get(token)
        if issued is None:
            raise InvalidToken("the access token is not known")
        claims = {"cnf": {"jkt": issued["jkt"]}} if issued["jkt"] else {}
        return AccessToken(
            subject="alice",
            client_id=issued["client_id"],
            scopes=frozenset(issued["scope"]),
            audience=(issued["resource"],),
            issuer=self.server.issuer,
            claims=claims,
        )


@pytest.mark.parametrize(("nonces", "algorithm"), [(False, "ES256"), (True, "ES256"), (False, "RS256")])
async def test_our_client_and_our_server_speak_dpop_end_to_end(nonces: bool, algorithm: str) -> None:
    flow = FlowServer(registration_method="none", dpop=True)
    late = LateApp()
    thread = ServerThread(late, lifespan="off")
    seen: list[dict[str, str]] = []
    try:
        policy = ProtectedResource(
            resource=thread.url,
            authorization_servers=[flow.issuer],
            verifier=FlowTokens(flow, thread.url),
            dpop=DPoP(nonce_lifetime=300 if nonces else None),
        )
        app = McpAsgiApp(make_server(), http_policy=policy)

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] == "/mcp":
                seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
            await app(scope, receive, send)

        late.app = recording
        consent = HeadlessConsent(redirect_uri="http://127.0.0.1:5999/callback")
        async with Client.connect_http(
            thread.url, auth=OAuth(consent=consent), protocol_version="2025-11-25"
        ) as client:
            me = await client.call_tool("whoami", {})
            assert me.content[0].text.startswith("alice|")
            assert await client.list_tools()
        [issued] = flow.tokens.values()
        assert issued["jkt"]  # the token is bound, and every request after the first 401 carried a proof
        proved = [h for h in seen if h.get("authorization", "").startswith("DPoP ")]
        assert len(proved) >= 3 and all("dpop" in h for h in proved)
        assert not [h for h in seen if h.get("authorization", "").startswith("Bearer ")]
        claims = [json.loads(base64.urlsafe_b64decode(h["dpop"].split(".")[1] + "==")) for h in proved]
        assert [c["nonce"] for c in claims if "nonce" in c] == (
            [policy.dpop.nonce()] * (len(proved) - 1) if nonces else []
        )
    finally:
        thread.stop()
        flow.stop()
