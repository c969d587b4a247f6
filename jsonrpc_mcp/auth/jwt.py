"""JWT access tokens (RFC 9068 style), checked against the authorization server's key set (L6; needs the ``auth``
extra: joserfc for JOSE, httpx for the key set).

::

    verifier = JwtVerifier(
        issuer="https://auth.example.com",
        audience="https://mcp.example.com/mcp",       # this server's canonical URI (RFC 8707)
        jwks_url="https://auth.example.com/jwks",     # or keys=... (a JWKS, JWKs, or PEM public keys)
    )

What a token must be to pass, in the order checked:

1. a JWS in compact form whose ``alg`` is an asymmetric algorithm of :data:`ALGORITHMS` (``none`` and every HMAC
   algorithm are refused before any key is looked at: a resource server holds public keys only, and an HMAC
   "signed" with a public key would verify for anyone who has it), and whose ``typ``, when present, is an access
   token's (RFC 9068 §4: ``at+jwt`` or ``application/at+jwt``, or plain ``JWT``, which many providers send): a
   DPoP proof, a logout token or an ID token signed by the same server is not one;
2. signed by a key of the set: found by ``kid`` (a token without one needs a set of exactly one key), whose type
   fits the algorithm and whose own ``alg``/``use``, when given, agree; an unknown ``kid`` re-fetches the set, at
   most once per ``refetch_floor`` seconds (a rotated key is found, a flood of forged ids costs one fetch);
3. ``iss`` equal to ``issuer``, exactly (RFC 9068 §4); ``aud`` naming ``audience`` (compared as canonical
   resource URIs); ``exp`` present and in the future, ``nbf`` and ``iat`` not in the future, each with
   ``leeway`` seconds of clock skew.

Each refusal is :class:`~jsonrpc_mcp.auth.principal.InvalidToken` with a sentence for the client; a key set that
cannot be fetched (and none cached) is :class:`~jsonrpc_mcp.auth.principal.VerifierUnavailable`. The key set is
cached for ``jwks_max_age`` seconds; when a refresh fails the keys already held keep working, and the next
attempt waits (:class:`JwksCache`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import anyio
import httpx
import msgspec
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from joserfc import jws
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import JWKRegistry, Key, KeySet
from joserfc.jwt import JWTClaimsRegistry

from ._fetch import check_number, check_url, fetch_json
from .principal import (
    KEY_TYPES,
    SIGNATURE_ALGORITHMS,
    AccessToken,
    InvalidToken,
    VerifierUnavailable,
    audience_matches,
    canonical_resource,
    parse_scopes,
)

__all__ = ("JwtVerifier", "JwksCache", "ALGORITHMS", "claims_to_access_token", "discover_metadata", "metadata_urls")

logger = logging.getLogger(__name__)

#: The signature algorithms accepted by default: asymmetric only.
ALGORITHMS: Final = SIGNATURE_ALGORITHMS
_REFUSED_ALGORITHMS: Final = frozenset({"none", "HS256", "HS384", "HS512"})
_KEY_TYPE: Final = KEY_TYPES
#: The ``typ`` an access token may carry (RFC 9068 §4, compared in lower case), besides none at all: ``at+jwt``,
#: and plain ``JWT``, which many authorization servers put on their access tokens (spec-decisions 34ya).
_ACCESS_TOKEN_TYPES: Final = frozenset({"at+jwt", "application/at+jwt", "jwt"})
#: A token longer than this is refused unread (bytes).
MAX_TOKEN: Final = 16 * 1024
#: Seconds between a failed key set fetch and the next attempt; doubled after each failure up to RETRY_MOST.
RETRY_FIRST: Final = 1.0
RETRY_MOST: Final = 300.0

StaticKeys = Mapping[str, Any] | Sequence[Mapping[str, Any] | str | bytes] | str | bytes


class JwksCache:
    """The authorization server's JSON Web Key Set, fetched from ``url`` and kept for ``max_age`` seconds.

    :meth:`key` finds a key by id; an id it does not know re-fetches the set, but never sooner than
    ``refetch_floor`` seconds after the last fetch (or failed attempt). Concurrent look-ups share one fetch.

    A fetch that fails is not tried again at once: the next waits :data:`RETRY_FIRST` seconds, doubling while
    fetches keep failing, up to :data:`RETRY_MOST`. Meanwhile the keys held (even past ``max_age``) stay in use,
    and with none held each look-up is :class:`VerifierUnavailable` (a 503) without a fetch."""

    def __init__(
        self,
        url: str,
        *,
        max_age: float = 3600.0,
        refetch_floor: float = 30.0,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = check_url(url, "jwks_url")
        self.max_age = check_number(max_age, "max_age", zero_ok=True)
        self.refetch_floor = check_number(refetch_floor, "refetch_floor", zero_ok=True)
        self.timeout = check_number(timeout, "timeout", zero_ok=False)
        self.client = client
        self.clock = clock
        self.keys: KeySet | None = None
        self.fetches = 0  # how many times the set was requested (for tests and metrics)
        self._fetched_at = -float("inf")
        self._attempted_at = -float("inf")
        self._retry_at = -float("inf")  # after a failed fetch: no other attempt before this time
        self._retry_delay = 0.0  # the wait after the last failure (0: the last fetch worked)
        self._failure = ""  # why the last fetch failed
        self._lock: anyio.Lock | None = None

    async def key(self, kid: str | None) -> Key | None:
        """The key ``kid`` names (``None``: the set's only key), or ``None`` when the set has no such key."""
        now = self.clock()
        if self.keys is None or now - self._fetched_at >= self.max_age:
            await self._refresh(now)
        found = _find(self.keys, kid)
        if found is None and kid is not None and self.clock() - self._attempted_at >= self.refetch_floor:
            await self._refresh(self.clock())
            found = _find(self.keys, kid)
        return found

    async def _refresh(self, asked_at: float) -> None:
        if asked_at < self._retry_at:  # a recent fetch failed: wait before the next
            self._unavailable(asked_at)
            return
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self._attempted_at >= asked_at:  # another task fetched while this one waited for the lock
                if self.keys is None:
                    self._unavailable(asked_at)
                return
            self._attempted_at = self.clock()
            self.fetches += 1
            try:
                document = await fetch_json("GET", self.url, client=self.client, timeout=self.timeout)
                keys = _public_key_set(document)
            except (VerifierUnavailable, ValueError) as exc:
                self._failure = exc.reason if isinstance(exc, VerifierUnavailable) else str(exc)
                self._retry_delay = min(max(self._retry_delay * 2, RETRY_FIRST), RETRY_MOST)
                self._retry_at = self._attempted_at + self._retry_delay
                if self.keys is not None:
                    logger.warning(
                        "could not refresh the key set (%s); the keys held are kept, next attempt in %g s",
                        self._failure,
                        self._retry_delay,
                    )
                    return
                logger.warning(
                    "could not fetch the key set (%s); next attempt in %g s", self._failure, self._retry_delay
                )
                self._unavailable(self._attempted_at)
                return
            self.keys = keys
            self._fetched_at = self._attempted_at
            self._retry_at = -float("inf")
            self._retry_delay = 0.0

    def _unavailable(self, now: float) -> None:
        """Raise :class:`VerifierUnavailable` unless keys are held (stale ones too: better than none)."""
        if self.keys is None:
            wait = max(self._retry_at - now, 0.0)
            raise VerifierUnavailable(f"no key set: {self._failure}", retry_after=wait or self._retry_delay)


class JwtVerifier:
    """Accepts JWT access tokens of one issuer for one resource (module docstring: what is checked, and how).

    :param issuer: the authorization server's issuer identifier (the ``iss`` its tokens carry).
    :param audience: this MCP server's canonical resource URI; tokens must name it in ``aud`` (RFC 8707).
    :param jwks_url: where the issuer publishes its keys (``jwks_uri`` of its metadata).
    :param keys: static public keys instead: a JWKS (``{"keys": [...]}``), a list of JWKs or PEM public keys.
    :param algorithms: the signature algorithms accepted (asymmetric ones only; default :data:`ALGORITHMS`).
    :param leeway: seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``.
    :param jwks_max_age: how long a fetched key set is used before it is fetched again.
    :param refetch_floor: the least time between two fetches of the key set for unknown key ids.
    :param timeout: seconds for a key set fetch.
    :param client: an ``httpx.AsyncClient`` to fetch with (default: one per fetch).
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_url: str | None = None,
        keys: StaticKeys | None = None,
        algorithms: Iterable[str] = ALGORITHMS,
        leeway: float = 60.0,
        jwks_max_age: float = 3600.0,
        refetch_floor: float = 30.0,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if (jwks_url is None) == (keys is None):
            raise ValueError("give exactly one of jwks_url and keys")
        if keys is not None and client is not None:
            raise ValueError("client fetches the key set from jwks_url: static keys need none")
        for name, seconds in (("jwks_max_age", jwks_max_age), ("refetch_floor", refetch_floor)):
            check_number(seconds, name, zero_ok=True)
        self.algorithms = tuple(algorithms)
        refused = [a for a in self.algorithms if a in _REFUSED_ALGORITHMS or a not in _KEY_TYPE]
        if refused or not self.algorithms:
            raise ValueError(f"only asymmetric signature algorithms can be accepted, not {refused}")
        if not isinstance(issuer, str) or not issuer.strip("/ "):  # (a token with an empty "iss" would match it)
            raise ValueError(f"issuer must name the authorization server (its issuer identifier), not {issuer!r}")
        self.issuer = issuer
        self.audience = audience
        canonical_resource(audience)  # a ValueError now for an audience that is not an absolute http(s) URI
        self.leeway = int(check_number(leeway, "leeway", zero_ok=True))
        self.jwks: JwksCache | None = None
        self._static: KeySet | None = None
        self._unnamed: list[Key] = []  # static keys given without a key id (PEM, or a JWK without "kid")
        if jwks_url is not None:
            self.jwks = JwksCache(
                jwks_url, max_age=jwks_max_age, refetch_floor=refetch_floor, timeout=timeout, client=client
            )
        else:
            assert keys is not None
            self._static, self._unnamed = _static_key_set(keys)
        self._registry = jws.JWSRegistry(algorithms=list(self.algorithms))

    async def verify(self, token: str) -> AccessToken:
        if len(token) > MAX_TOKEN:
            raise InvalidToken("the access token is too long")
        try:
            compact = jws.extract_compact(token.encode("ascii"))
            header = compact.headers()
        except (JoseError, UnicodeError, ValueError, TypeError):
            raise InvalidToken("the access token is not a well-formed JWT") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise InvalidToken("the access token's signature algorithm is not accepted")
        typ = header.get("typ")
        if typ is not None and (not isinstance(typ, str) or typ.lower() not in _ACCESS_TOKEN_TYPES):
            raise InvalidToken("the token is not an access token (its typ is not at+jwt)")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the access token's key id is not a string")
        key = await self._key(kid, alg)
        if key is None:
            if kid is None:
                raise InvalidToken("the access token names no key id and the key set has several keys")
            raise InvalidToken("the access token's key id is not in the authorization server's key set")
        if key.key_type != _KEY_TYPE[alg] or key.get("use") not in (None, "sig") or key.get("alg") not in (None, alg):
            raise InvalidToken("the access token's key does not fit its signature algorithm")
        try:
            if not jws.validate_compact(compact, key, registry=self._registry):
                raise BadSignatureError()
        except BadSignatureError:
            raise InvalidToken("the access token's signature does not verify") from None
        except JoseError:
            raise InvalidToken("the access token's header is not acceptable") from None
        try:
            claims = msgspec.json.decode(compact.payload or b"")
        except msgspec.DecodeError:
            raise InvalidToken("the access token's claims are not JSON") from None
        if not isinstance(claims, dict):
            raise InvalidToken("the access token's claims are not a JSON object")
        self._check_claims(claims)
        return claims_to_access_token(claims)

    async def _key(self, kid: str | None, alg: str) -> Key | None:
        if self.jwks is not None:
            return await self.jwks.key(kid)
        found = _find(self._static, kid)
        if found is None:  # a static key given without an id answers to any id, when it is the only one that fits
            fitting = [key for key in self._unnamed if key.key_type == _KEY_TYPE[alg]]
            found = fitting[0] if len(fitting) == 1 else None
        return found

    def _check_claims(self, claims: dict[str, Any]) -> None:
        iss = claims.get("iss")
        if iss != self.issuer:  # (RFC 9068 §4: exactly; no trailing slash aside)
            raise InvalidToken("the access token was issued by another authorization server")
        registry = JWTClaimsRegistry(leeway=self.leeway, exp={"essential": True})
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise InvalidToken("the access token has expired") from None
        except MissingClaimError:
            raise InvalidToken("the access token has no expiry (exp)") from None
        except InvalidClaimError as exc:
            raise InvalidToken(_claim_problem(exc.claim)) from None
        aud = claims.get("aud")
        audience = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not audience_matches((a for a in audience if isinstance(a, str)), self.audience):
            raise InvalidToken("the access token was issued for another resource")


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be, in the order MCP clients try them (RFC 8414 §3.1 with path insertion,
    then OpenID Connect Discovery with path insertion and appended)."""
    parts = urlsplit(issuer)
    root = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [f"{root}/.well-known/oauth-authorization-server", f"{root}/.well-known/openid-configuration"]
    return [
        f"{root}/.well-known/oauth-authorization-server{path}",
        f"{root}/.well-known/openid-configuration{path}",
        f"{root}{path}/.well-known/openid-configuration",
    ]


async def discover_metadata(
    issuer: str, *, timeout: float = 10.0, client: httpx.AsyncClient | None = None
) -> dict[str, Any]:
    """The authorization server metadata of ``issuer`` (RFC 8414 or OpenID Connect Discovery), whose ``issuer``
    must be ``issuer`` itself (RFC 8414 §3.3). :class:`VerifierUnavailable` when none of the URLs answers one."""
    check_url(issuer, "the issuer")
    problems: list[str] = []
    for url in metadata_urls(issuer):
        try:
            document = await fetch_json("GET", url, client=client, timeout=timeout)
        except VerifierUnavailable as exc:
            problems.append(exc.reason)
            continue
        if document.get("issuer") != issuer:
            problems.append(f"{url} names another issuer")
            continue
        return document
    raise VerifierUnavailable(f"no metadata for {issuer}: {'; '.join(problems)}")


def claims_to_access_token(claims: Mapping[str, Any]) -> AccessToken:
    """The principal a token's claims (or an introspection answer, RFC 7662 §2.2) describe."""
    sub = claims.get("sub")
    client_id = claims.get("client_id", claims.get("azp"))
    exp = claims.get("exp")
    aud = claims.get("aud")
    iss = claims.get("iss")
    scopes = parse_scopes(claims["scope"]) if "scope" in claims else parse_scopes(claims.get("scp"))
    if isinstance(aud, str):
        audience: tuple[str, ...] = (aud,)
    else:
        audience = tuple(a for a in aud if isinstance(a, str)) if isinstance(aud, list) else ()
    return AccessToken(
        subject=sub if isinstance(sub, str) else None,
        client_id=client_id if isinstance(client_id, str) else None,
        scopes=scopes,
        expires_at=float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None,
        audience=audience,
        issuer=iss if isinstance(iss, str) else None,
        claims=dict(claims),
    )


def _claim_problem(claim: str) -> str:
    if claim == "nbf":
        return "the access token is not valid yet"
    if claim == "iat":
        return "the access token was issued in the future"
    return f"the access token's {claim} claim is not valid"


def _find(keys: KeySet | None, kid: str | None) -> Key | None:
    if keys is None:
        return None
    if kid is None:
        return keys.keys[0] if len(keys.keys) == 1 else None
    return next((key for key in keys.keys if key.kid == kid), None)


def _public(data: Mapping[str, Any]) -> Key:
    """A public signature key from a JWK (private parts dropped); symmetric keys are refused."""
    if data.get("kty") not in ("RSA", "EC", "OKP"):
        raise ValueError(f"only RSA, EC and OKP public keys can verify tokens, not kty {data.get('kty')!r}")
    key = JWKRegistry.import_key(dict(data))
    public = dict(key.as_dict(private=False))
    return JWKRegistry.import_key(public)


def _public_key_set(document: Mapping[str, Any]) -> KeySet:
    """The signature keys of a JWKS document (keys of other types, or for encryption, are skipped)."""
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise ValueError("the key set has no keys array")
    keys: list[Key] = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("use") not in (None, "sig"):
            continue
        try:
            keys.append(_public(entry))
        except (JoseError, ValueError, TypeError) as exc:
            logger.debug("skipping a key of the key set: %s", exc)
    if not keys:
        raise ValueError("the key set holds no usable signature key")
    return KeySet(keys)


_PEM_TYPES: Final = (
    (rsa.RSAPublicKey, "RSA"),
    (ec.EllipticCurvePublicKey, "EC"),
    (ed25519.Ed25519PublicKey, "OKP"),
    (ed448.Ed448PublicKey, "OKP"),
)


def _pem_key(pem: str | bytes) -> Key:
    data = pem.encode("ascii") if isinstance(pem, str) else pem
    try:
        loaded = load_pem_public_key(data)
    except ValueError:
        raise ValueError("a static key must be a PEM public key (RSA, EC or OKP) or a JWK") from None
    for kind, key_type in _PEM_TYPES:
        if isinstance(loaded, kind):
            return JWKRegistry.import_key(data, key_type)
    raise ValueError("only RSA, EC and OKP public keys can verify tokens")


def _static_key_set(keys: StaticKeys) -> tuple[KeySet, list[Key]]:
    """The static keys as a set, and those of them that came without a key id."""
    entries: list[Mapping[str, Any] | str | bytes]
    if isinstance(keys, Mapping):
        document_keys = keys.get("keys")
        entries = list(document_keys) if isinstance(document_keys, list) else [keys]
    elif isinstance(keys, (str, bytes)):
        entries = [keys]
    else:
        entries = list(keys)
    found: list[Key] = []
    unnamed: list[Key] = []
    for entry in entries:
        key = _public(entry) if isinstance(entry, Mapping) else _pem_key(entry)
        found.append(key)
        if not isinstance(entry, Mapping) or not entry.get("kid"):
            unnamed.append(key)
    if not found:
        raise ValueError("keys is empty")
    return KeySet(found), unnamed
