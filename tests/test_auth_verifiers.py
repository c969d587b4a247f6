"""The token verifiers of ``jsonrpc_mcp.auth`` against a real authorization server (``auth_server``: authlib on
uvicorn, loopback): JWTs checked against its key set, and RFC 7662 introspection; plus the shared rules
(canonical resource URIs, scope hierarchies) and the lazy import of the ``auth`` extra."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import subprocess
import sys
import time

import anyio
import anyio.abc
import httpx
import pytest
from auth_server import AuthServer
from auth_support import auth as auth
from joserfc import jwt
from joserfc.jwk import RSAKey

from jsonrpc_mcp.auth import (
    AccessToken,
    IntrospectionVerifier,
    InvalidToken,
    JwksCache,
    JwtVerifier,
    ProtectedResource,
    VerifierUnavailable,
    audience_matches,
    canonical_resource,
    missing_scopes,
)

RESOURCE = "https://notes.example.com/mcp"

pytestmark = pytest.mark.filterwarnings("ignore::joserfc.errors.SecurityWarning")


def verifier(auth: AuthServer, **options: object) -> JwtVerifier:
    return JwtVerifier(issuer=auth.issuer, audience=RESOURCE, jwks_url=f"{auth.issuer}/jwks", **options)  # type: ignore[arg-type]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# --- JWTs -------------------------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kid", ["rsa-1", "ec-1", "okp-1"])
async def test_a_good_token_of_each_key_type_gives_its_principal(auth: AuthServer, kid: str) -> None:
    token = auth.mint(aud=RESOURCE, scope="notes:read notes:write", kid=kid, client_id="app-1")
    principal = await verifier(auth).verify(token)
    assert principal.subject == "alice"
    assert principal.client_id == "app-1"
    assert principal.scopes == {"notes:read", "notes:write"}
    assert principal.audience == (RESOURCE,)
    assert principal.issuer == auth.issuer
    assert principal.expires_at is not None and principal.expires_at > time.time()
    assert principal.claims["jti"]
    assert principal.principal == (auth.issuer, "alice", "app-1")
    assert "eyJ" not in repr(principal)  # the principal holds no token


@pytest.mark.anyio
async def test_the_audience_may_be_a_list_and_compares_as_a_canonical_uri(auth: AuthServer) -> None:
    token = auth.mint(aud=["https://other.example.com", "HTTPS://Notes.Example.COM:443/mcp/"])
    principal = await verifier(auth).verify(token)
    assert principal.audience == ("https://other.example.com", "HTTPS://Notes.Example.COM:443/mcp/")


def _unsigned(auth: AuthServer, alg: str) -> str:
    header = b64(json.dumps({"alg": alg, "kid": "rsa-1", "typ": "at+jwt"}).encode())
    claims = {"iss": auth.issuer, "aud": RESOURCE, "sub": "mallory", "exp": int(time.time()) + 600}
    return f"{header}.{b64(json.dumps(claims).encode())}."


def _hmac_with_public_key(auth: AuthServer) -> str:
    """The classic confusion attack: HS256 "signed" with the RSA public key's PEM as the shared secret."""
    pem = auth.key("rsa-1").as_pem(private=False)
    claims = {"iss": auth.issuer, "aud": RESOURCE, "sub": "mallory", "exp": int(time.time()) + 600}
    signing_input = f"{b64(json.dumps({'alg': 'HS256', 'kid': 'rsa-1'}).encode())}.{b64(json.dumps(claims).encode())}"
    signature = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()  # (joserfc refuses to do this)
    return f"{signing_input}.{b64(signature)}"


def _foreign_signature(auth: AuthServer) -> str:
    """A good-looking token signed by a key that merely claims the server's key id."""
    impostor = RSAKey.generate_key(2048, {"kid": "rsa-1"})
    claims = {"iss": auth.issuer, "aud": RESOURCE, "sub": "mallory", "exp": int(time.time()) + 600}
    return jwt.encode({"alg": "RS256", "kid": "rsa-1"}, claims, impostor)


def _signed_by_key_for_another_algorithm(auth: AuthServer) -> str:
    """PS256 with the private half of a key the key set publishes for RS256 only."""
    key = RSAKey.import_key({k: v for k, v in auth.key("rsa-1").as_dict(private=True).items() if k != "alg"})
    claims = {"iss": auth.issuer, "aud": RESOURCE, "sub": "alice", "exp": int(time.time()) + 600}
    return jwt.encode({"alg": "PS256", "kid": "rsa-1"}, claims, key, ["PS256"])


BAD_TOKENS = {
    "wrong signature": (_foreign_signature, "the access token's signature does not verify"),
    "alg none": (lambda auth: _unsigned(auth, "none"), "the access token's signature algorithm is not accepted"),
    "HMAC with the public key": (_hmac_with_public_key, "the access token's signature algorithm is not accepted"),
    "expired": (
        lambda auth: auth.mint(aud=RESOURCE, exp=int(time.time()) - 120),
        "the access token has expired",
    ),
    "not yet valid": (
        lambda auth: auth.mint(aud=RESOURCE, nbf=int(time.time()) + 600),
        "the access token is not valid yet",
    ),
    "issued in the future": (
        lambda auth: auth.mint(aud=RESOURCE, iat=int(time.time()) + 600),
        "the access token was issued in the future",
    ),
    "wrong audience": (
        lambda auth: auth.mint(aud="https://other.example.com/mcp"),
        "the access token was issued for another resource",
    ),
    "no audience": (lambda auth: auth.mint(aud=None), "the access token was issued for another resource"),
    "wrong issuer": (
        lambda auth: auth.mint(aud=RESOURCE, iss="https://evil.example.com"),
        "the access token was issued by another authorization server",
    ),
    "no expiry": (lambda auth: auth.mint(aud=RESOURCE, exp=None), "the access token has no expiry (exp)"),
    "not a JWT": (lambda auth: "not-a-jwt", "the access token is not a well-formed JWT"),
    "unknown key id": (
        lambda auth: jwt.encode(
            {"alg": "RS256", "kid": "nobody"},
            {"iss": auth.issuer, "aud": RESOURCE, "exp": int(time.time()) + 60},
            RSAKey.generate_key(2048),
        ),
        "the access token's key id is not in the authorization server's key set",
    ),
    "algorithm the key is not for": (
        lambda auth: _signed_by_key_for_another_algorithm(auth),
        "the access token's key does not fit its signature algorithm",
    ),
    # RFC 9068 §4: a JWT of another type signed by the same server is no access token
    "a DPoP proof's type": (
        lambda auth: auth.mint(aud=RESOURCE, header={"typ": "dpop+jwt"}),
        "the token is not an access token (its typ is not at+jwt)",
    ),
    "a logout token's type": (
        lambda auth: auth.mint(aud=RESOURCE, header={"typ": "logout+jwt"}),
        "the token is not an access token (its typ is not at+jwt)",
    ),
    "an ID token's type": (
        lambda auth: auth.mint(aud=RESOURCE, header={"typ": "id_token+jwt"}),
        "the token is not an access token (its typ is not at+jwt)",
    ),
    "an issuer with a trailing slash": (
        lambda auth: auth.mint(aud=RESOURCE, iss=auth.issuer + "/"),
        "the access token was issued by another authorization server",
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("typ", ["at+jwt", "application/at+jwt", "AT+JWT", "JWT", None])
async def test_an_access_token_of_type_at_jwt_or_plain_jwt_or_none_is_accepted(
    auth: AuthServer, typ: str | None
) -> None:
    token = auth.mint(aud=RESOURCE, header={"typ": typ or "at+jwt"})
    if typ is None:  # (a header without typ at all)
        token = jwt.encode({"alg": "RS256", "kid": "rsa-1"}, auth.tokens[token].claims, auth.key("rsa-1"))
    assert (await verifier(auth).verify(token)).subject == "alice"


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(BAD_TOKENS))
async def test_each_bad_token_is_refused_with_its_reason(auth: AuthServer, case: str) -> None:
    make, reason = BAD_TOKENS[case]
    token = make(auth)
    with pytest.raises(InvalidToken) as refused:
        await verifier(auth).verify(token)
    assert refused.value.reason == reason
    assert token not in str(refused.value)


@pytest.mark.anyio
async def test_a_leeway_admits_a_token_that_expired_a_moment_ago(auth: AuthServer) -> None:
    token = auth.mint(aud=RESOURCE, exp=int(time.time()) - 5)
    assert (await verifier(auth, leeway=30).verify(token)).subject == "alice"
    with pytest.raises(InvalidToken, match="expired"):
        await verifier(auth, leeway=0).verify(token)


@pytest.mark.anyio
async def test_the_key_set_is_cached_and_refetched_for_a_rotated_key(auth: AuthServer) -> None:
    checker = verifier(auth, refetch_floor=0)
    assert checker.jwks is not None
    await checker.verify(auth.mint(aud=RESOURCE))
    await checker.verify(auth.mint(aud=RESOURCE, kid="ec-1"))
    assert checker.jwks.fetches == 1
    # the server rotates in a new key: the first token signed with it is accepted after one re-fetch
    fresh = RSAKey.generate_key(2048, {"kid": f"rsa-{time.monotonic_ns()}", "alg": "RS256", "use": "sig"})
    auth.add_key(fresh)
    assert (await checker.verify(auth.mint(aud=RESOURCE, kid=str(fresh.kid)))).subject == "alice"
    assert checker.jwks.fetches == 2


@pytest.mark.anyio
async def test_unknown_key_ids_refetch_the_key_set_at_most_once_per_floor(auth: AuthServer) -> None:
    checker = verifier(auth, refetch_floor=3600)
    assert checker.jwks is not None
    await checker.verify(auth.mint(aud=RESOURCE))
    forged = RSAKey.generate_key(2048, {"kid": "forged"})
    claims = {"iss": auth.issuer, "aud": RESOURCE, "exp": int(time.time()) + 60}
    for _ in range(5):
        with pytest.raises(InvalidToken, match="key id is not in"):
            await checker.verify(jwt.encode({"alg": "RS256", "kid": "forged"}, claims, forged))
    assert checker.jwks.fetches == 1  # a flood of unknown key ids within the floor costs no fetch


@pytest.mark.anyio
async def test_concurrent_first_requests_share_one_key_set_fetch(auth: AuthServer) -> None:
    checker = verifier(auth)
    token = auth.mint(aud=RESOURCE)
    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(checker.verify, token)
    assert checker.jwks is not None and checker.jwks.fetches == 1


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.anyio
async def test_after_a_failed_key_set_fetch_the_next_waits_longer_each_time(auth: AuthServer) -> None:
    clock = FakeClock()
    cache = JwksCache(f"{auth.issuer}/jwks", clock=clock)
    checker = verifier(auth)
    checker.jwks = cache
    token = auth.mint(aud=RESOURCE)
    auth.jwks_down = True
    try:
        # at 0 s the fetch fails; then at 0.5 s, 1 s (one attempt), 2.5 s, 3 s (one), 6.9 s and 7 s (one)
        for at, fetches in ((0.0, 1), (0.5, 1), (0.99, 1), (1.0, 2), (2.5, 2), (3.0, 3), (6.9, 3), (7.0, 4)):
            clock.now = 1000.0 + at
            for _ in range(3):  # a burst of requests: at most one fetch
                with pytest.raises(VerifierUnavailable) as unavailable:
                    await checker.verify(token)
            assert cache.fetches == fetches, at
            assert unavailable.value.retry_after is not None and unavailable.value.retry_after > 0
    finally:
        auth.jwks_down = False
    clock.now = 1000.0 + 14.9  # the 4th failure waits 8 s: not before 15 s
    with pytest.raises(VerifierUnavailable):
        await checker.verify(token)
    clock.now = 1000.0 + 15.0
    assert (await checker.verify(token)).subject == "alice"
    assert cache.fetches == 5
    # once a fetch works, the wait starts over at a second
    auth.jwks_down = True
    try:
        clock.now += 3600.0  # the set is stale: the refresh fails, the keys held stay in use
        assert (await checker.verify(token)).subject == "alice"
        assert cache.fetches == 6
        clock.now += 0.5
        assert (await checker.verify(token)).subject == "alice"
        assert cache.fetches == 6
        clock.now += 0.5
        assert (await checker.verify(token)).subject == "alice"
        assert cache.fetches == 7
    finally:
        auth.jwks_down = False


@pytest.mark.anyio
async def test_the_wait_after_failed_key_set_fetches_grows_to_five_minutes_at_most() -> None:
    with anyio.fail_after(10):
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        await listener.aclose()  # nothing listens there now
    clock = FakeClock()
    cache = JwksCache(f"http://127.0.0.1:{port}/jwks", clock=clock)
    waits = []
    for _ in range(12):
        with pytest.raises(VerifierUnavailable) as unavailable:
            await cache.key("k")
        assert unavailable.value.retry_after is not None
        waits.append(unavailable.value.retry_after)
        clock.now += unavailable.value.retry_after
    assert waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    assert cache.fetches == 12


@pytest.mark.anyio
async def test_while_the_key_set_cannot_be_fetched_requests_get_a_503_with_retry_after(
    auth: AuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    from http_support import ServerThread, init_body

    from jsonrpc_mcp import Server
    from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

    checker = verifier(auth)
    checker.jwks = JwksCache(f"{auth.issuer}/jwks", clock=FakeClock())  # (time stands still: one fetch)
    policy = ProtectedResource(resource=RESOURCE, authorization_servers=[auth.issuer], verifier=checker)
    thread = ServerThread(McpAsgiApp(Server("s", "1"), http_policy=policy))
    auth.jwks_down = True
    before = auth.jwks_fetches
    try:
        token = auth.mint(aud=RESOURCE)
        async with httpx.AsyncClient(timeout=10) as http:
            headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
            with caplog.at_level(logging.INFO):
                answers = [await http.post(thread.url, json=init_body(), headers=headers) for _ in range(20)]
    finally:
        auth.jwks_down = False
        thread.stop()
    assert {a.status_code for a in answers} == {503}
    assert all(a.headers["retry-after"] == "1" for a in answers)
    assert auth.jwks_fetches - before == 1  # 20 requests within the first second: one fetch
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "next attempt in 1 s" in warnings[0]  # and one warning


@pytest.mark.anyio
async def test_an_unreachable_key_set_is_unavailable_not_invalid() -> None:
    with anyio.fail_after(10):
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        await listener.aclose()  # nothing listens there now
    checker = JwtVerifier(issuer="http://127.0.0.1", audience=RESOURCE, jwks_url=f"http://127.0.0.1:{port}/jwks")
    with pytest.raises(VerifierUnavailable, match="could not be reached"):
        await checker.verify(jwt.encode({"alg": "RS256", "kid": "k"}, {"a": 1}, RSAKey.generate_key(2048)))


@pytest.mark.anyio
async def test_an_authorization_server_that_never_answers_is_unavailable_after_the_timeout() -> None:
    accepted: list[anyio.abc.SocketStream] = []  # held open, never answered

    async def hold(stream: anyio.abc.SocketStream) -> None:
        accepted.append(stream)
        await anyio.sleep_forever()

    with anyio.fail_after(10):  # (the defaults, 10 s per call, would not come in time)
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        url = f"http://127.0.0.1:{listener.extra(anyio.abc.SocketAttribute.local_port)}"
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, hold)
            jwt_checker = JwtVerifier(issuer=url, audience=RESOURCE, jwks_url=f"{url}/jwks", timeout=0.2)
            with pytest.raises(VerifierUnavailable, match=r"could not be reached \(ReadTimeout\)"):
                await jwt_checker.verify(jwt.encode({"alg": "RS256", "kid": "k"}, {"a": 1}, RSAKey.generate_key(2048)))
            introspection = IntrospectionVerifier(introspection_url=f"{url}/introspect", audience=RESOURCE, timeout=0.2)
            with pytest.raises(VerifierUnavailable, match=r"could not be reached \(ReadTimeout\)"):
                await introspection.verify("opaque-token")
            tg.cancel_scope.cancel()
        await listener.aclose()
    assert len(accepted) == 2
    for stream in accepted:
        await stream.aclose()


@pytest.mark.anyio
async def test_static_keys_as_a_key_set_a_jwk_or_pem(auth: AuthServer) -> None:
    token = auth.mint(aud=RESOURCE)
    public = auth.key("rsa-1").as_dict(private=False)
    pem = auth.key("rsa-1").as_pem(private=False)
    for keys in ({"keys": [public]}, public, [pem], pem.decode()):
        checker = JwtVerifier(issuer=auth.issuer, audience=RESOURCE, keys=keys)  # type: ignore[arg-type]
        assert (await checker.verify(token)).subject == "alice"


def test_unsafe_configurations_are_refused_when_built() -> None:
    jwks = "https://auth.example.com/jwks"
    with pytest.raises(ValueError, match="asymmetric"):
        JwtVerifier(issuer="i", audience=RESOURCE, jwks_url=jwks, algorithms=["RS256", "HS256"])
    with pytest.raises(ValueError, match="asymmetric"):
        JwtVerifier(issuer="i", audience=RESOURCE, jwks_url=jwks, algorithms=["none"])
    with pytest.raises(ValueError, match="https"):
        JwtVerifier(issuer="i", audience=RESOURCE, jwks_url="http://auth.example.com/jwks")
    with pytest.raises(ValueError, match="exactly one"):
        JwtVerifier(issuer="i", audience=RESOURCE)
    with pytest.raises(ValueError, match="absolute"):
        JwtVerifier(issuer="i", audience="notes.example.com", jwks_url=jwks)
    with pytest.raises(ValueError, match="RSA, EC and OKP"):
        JwtVerifier(issuer="i", audience=RESOURCE, keys={"kty": "oct", "k": "c2VjcmV0"})
    with pytest.raises(ValueError, match="https"):
        IntrospectionVerifier(introspection_url="http://auth.example.com/introspect", audience=RESOURCE)


# --- the shared rules -----------------------------------------------------------------------------------------


def test_canonical_resource_uris() -> None:
    assert canonical_resource("HTTPS://MCP.Example.com:443/mcp/") == "https://mcp.example.com/mcp"
    assert canonical_resource("http://127.0.0.1:8000/mcp") == "http://127.0.0.1:8000/mcp"
    assert canonical_resource("https://mcp.example.com") == "https://mcp.example.com"
    assert canonical_resource("https://[::1]:8443/") == "https://[::1]:8443"
    for bad in ("mcp.example.com", "https://mcp.example.com#frag", "ftp://x/y", "https://u:p@x/", "https://"):
        with pytest.raises(ValueError):
            canonical_resource(bad)
    assert audience_matches(["https://mcp.example.com/mcp/"], "https://mcp.example.com/mcp")
    assert not audience_matches(["https://mcp.example.com/other"], "https://mcp.example.com/mcp")
    assert not audience_matches(["https://mcp.example.com:8443/mcp"], "https://mcp.example.com/mcp")


def test_scope_hierarchies() -> None:
    implies = {"notes:admin": ["notes:write"], "notes:write": ["notes:read"], "notes:read": ["notes:admin"]}
    assert missing_scopes({"notes:read"}, {"notes:read"}) == ()
    assert missing_scopes({"notes:read"}, {"notes:write", "notes:read", "a"}) == ("a", "notes:write")
    assert missing_scopes({"notes:admin"}, {"notes:read"}, {"notes:admin": ["notes:write"]}) == ("notes:read",)
    assert missing_scopes({"notes:write"}, {"notes:read", "notes:admin"}, implies) == ()  # (a cycle is harmless)
    token = AccessToken(subject="s", client_id="c", scopes=frozenset({"notes:admin"}))
    assert token.has_scopes(["notes:read"], implies) and not token.has_scopes(["notes:read"])


def test_importing_jsonrpc_mcp_auth_loads_no_jose_and_no_http_client() -> None:
    code = (
        "import sys, jsonrpc_mcp.auth as a\n"
        "assert not any(m.split('.')[0] in ('joserfc', 'httpx', 'cryptography') for m in sys.modules), 'loaded'\n"
        "a.AccessToken; assert 'joserfc' not in sys.modules\n"
        "a.JwtVerifier; assert 'joserfc' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


# --- introspection ----------------------------------------------------------------------------------------------


def introspector(auth: AuthServer, **options: object) -> IntrospectionVerifier:
    client = auth.register_client({"client_name": "notes-server"}, confidential=True)
    assert client.client_secret is not None
    return IntrospectionVerifier(
        introspection_url=f"{auth.issuer}/introspect",
        audience=RESOURCE,
        client_id=client.client_id,
        client_secret=client.client_secret,
        **options,  # type: ignore[arg-type]
    )


@pytest.mark.anyio
async def test_introspection_accepts_an_active_token_and_caches_it(auth: AuthServer) -> None:
    checker = introspector(auth, issuer=auth.issuer)
    token = auth.mint(aud=RESOURCE, scope="notes:read", client_id="app-2")
    first = await checker.verify(token)
    assert (first.subject, first.client_id, first.scopes) == ("alice", "app-2", {"notes:read"})
    assert await checker.verify(token) == first
    assert checker.calls == 1
    # revoked at the server: still accepted from the cache, until max_cache_ttl
    auth.tokens[token].revoked = True
    assert (await checker.verify(token)).subject == "alice"


@pytest.mark.anyio
async def test_introspection_without_a_cache_sees_a_revocation_at_once(auth: AuthServer) -> None:
    checker = introspector(auth, max_cache_ttl=0)
    token = auth.mint(aud=RESOURCE)
    await checker.verify(token)
    auth.tokens[token].revoked = True
    with pytest.raises(InvalidToken, match="not active"):
        await checker.verify(token)
    assert checker.calls == 2


@pytest.mark.anyio
async def test_introspection_refuses_unknown_foreign_and_audience_less_tokens(auth: AuthServer) -> None:
    checker = introspector(auth)
    with pytest.raises(InvalidToken, match="not active"):
        await checker.verify("an-opaque-token-nobody-issued")
    with pytest.raises(InvalidToken, match="another resource"):
        await checker.verify(auth.mint(aud="https://other.example.com/mcp"))
    with pytest.raises(InvalidToken, match="another resource"):
        await checker.verify(auth.mint(aud=None))
    trusting = introspector(auth, require_audience=False)
    assert (await trusting.verify(auth.mint(aud=None))).audience == (RESOURCE,)
    with pytest.raises(InvalidToken, match="another authorization server"):
        await introspector(auth, issuer="https://evil.example.com").verify(auth.mint(aud=RESOURCE))


@pytest.mark.anyio
async def test_introspection_with_bad_credentials_is_unavailable(auth: AuthServer) -> None:
    checker = IntrospectionVerifier(
        introspection_url=f"{auth.issuer}/introspect", audience=RESOURCE, client_id="nobody", client_secret="x"
    )
    with pytest.raises(VerifierUnavailable, match="answered HTTP 401"):
        await checker.verify(auth.mint(aud=RESOURCE))


@pytest.mark.anyio
async def test_concurrent_requests_with_one_new_token_share_one_introspection(auth: AuthServer) -> None:
    checker = introspector(auth)
    token = auth.mint(aud=RESOURCE)
    seen: list[AccessToken] = []

    async def verify() -> None:
        seen.append(await checker.verify(token))

    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(verify)
    assert checker.calls == 1 and len(seen) == 6 and len({id(p) for p in seen}) == 1


@pytest.mark.anyio
async def test_introspection_with_max_cache_size_zero_keeps_no_answer(auth: AuthServer) -> None:
    checker = introspector(auth, max_cache_size=0)
    token = auth.mint(aud=RESOURCE)
    assert (await checker.verify(token)).subject == (await checker.verify(token)).subject == "alice"
    assert checker.calls == 2
    auth.tokens[token].revoked = True
    with pytest.raises(InvalidToken, match="not active"):
        await checker.verify(token)


@pytest.mark.anyio
async def test_introspection_keeps_at_most_max_cache_size_answers_the_oldest_going_first(auth: AuthServer) -> None:
    checker = introspector(auth, max_cache_size=2)
    first, second, third = (auth.mint(aud=RESOURCE, client_id=f"app-{n}") for n in range(3))
    for token in (first, second, third):
        await checker.verify(token)
    assert checker.calls == 3
    await checker.verify(third)
    await checker.verify(second)
    assert checker.calls == 3  # both still kept
    await checker.verify(first)
    assert checker.calls == 4  # pushed out by the third


def test_the_verifiers_refuse_a_wrong_number_by_its_name() -> None:
    jwks = "https://auth.example.com/jwks"
    introspect = "https://auth.example.com/introspect"
    for setting, message in (
        ({"leeway": -1}, "leeway must be zero or more"),
        ({"timeout": 0}, "timeout must be positive"),
        ({"jwks_max_age": -1.0}, "jwks_max_age must be zero or more"),
        ({"refetch_floor": float("nan")}, "refetch_floor must be zero or more"),
    ):
        with pytest.raises(ValueError, match=message):
            JwtVerifier(issuer="i", audience=RESOURCE, jwks_url=jwks, **setting)  # type: ignore[arg-type]
    for issuer in ("", "/"):
        with pytest.raises(ValueError, match="issuer must name the authorization server"):
            JwtVerifier(issuer=issuer, audience=RESOURCE, jwks_url=jwks)  # (was: tokens with an empty iss accepted)
    with pytest.raises(TypeError, match="leeway must be a number"):
        JwtVerifier(issuer="i", audience=RESOURCE, jwks_url=jwks, leeway="60")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_age must be zero or more"):
        JwksCache(jwks, max_age=-5)
    for setting, message in (
        ({"max_cache_size": -1}, "max_cache_size must be zero or more"),
        ({"max_cache_ttl": -1}, "max_cache_ttl must be zero or more"),
        ({"timeout": -2.5}, "timeout must be positive"),
    ):
        with pytest.raises(ValueError, match=message):
            IntrospectionVerifier(introspection_url=introspect, audience=RESOURCE, **setting)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"max_cache_size must be a number, zero or more \(a whole number\)"):
        IntrospectionVerifier(introspection_url=introspect, audience=RESOURCE, max_cache_size=1e4)  # type: ignore[arg-type]


def test_static_keys_with_a_client_to_fetch_them_are_refused(auth: AuthServer) -> None:
    with pytest.raises(ValueError, match="static keys need none"):
        JwtVerifier(issuer="i", audience=RESOURCE, keys=auth.public_jwks(), client=httpx.AsyncClient())


def test_a_protected_resource_refuses_a_string_for_a_list_and_a_verifier_that_cannot_verify(auth: AuthServer) -> None:
    checker = verifier(auth)
    good: dict[str, object] = {"resource": RESOURCE, "authorization_servers": [auth.issuer], "verifier": checker}
    for name, value in (
        ("authorization_servers", auth.issuer),
        ("scopes_supported", "notes:read notes:write"),
        ("required_scopes", "notes:read"),
    ):
        with pytest.raises(TypeError, match=f"^{name} is a list, not a string"):
            ProtectedResource(**{**good, name: value})  # type: ignore[arg-type]

    for issuer in ("auth.example.com", "", "https://auth.example.com#x"):
        with pytest.raises(ValueError, match=r"^authorization_servers holds issuer URLs \(https://auth.example\), not"):
            ProtectedResource(**{**good, "authorization_servers": [issuer]})  # type: ignore[arg-type]

    class SyncVerifier:
        def verify(self, token: str) -> AccessToken:
            return AccessToken(subject="s", client_id="c")

    for wrong in (JwtVerifier, SyncVerifier(), lambda token: None, None):
        with pytest.raises(TypeError, match="verifier must be an object with an async verify"):
            ProtectedResource(**{**good, "verifier": wrong})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^extra_metadata cannot set resource: the policy sets it itself$"):
        ProtectedResource(**good, extra_metadata={"resource": "https://other.example.com/mcp"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot set authorization_servers, bearer_methods_supported"):
        extra = {"authorization_servers": [], "bearer_methods_supported": ["body"]}
        ProtectedResource(**good, extra_metadata=extra)  # type: ignore[arg-type]
    documented = ProtectedResource(**good, extra_metadata={"resource_policy_uri": "https://x.example/policy"})  # type: ignore[arg-type]
    assert documented.metadata["resource_policy_uri"] == "https://x.example/policy"
    policy = ProtectedResource(**good, required_scopes={"notes:read"}, scopes_supported=("notes:read",))  # type: ignore[arg-type]
    assert policy.required_scopes == ("notes:read",) and policy.metadata["scopes_supported"] == ["notes:read"]
