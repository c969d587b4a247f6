"""DPoP proofs at the resource server (RFC 9449 §7; L6: JOSE from joserfc, the ``auth`` extra, loaded on the
first proof).

:class:`~jsonrpc_mcp.auth.ProtectedResource` takes ``Authorization: DPoP <token>`` with a ``DPoP`` proof header
by default (``dpop=DPoP()``; ``dpop=None`` turns it off, ``DPoP(required=True)`` refuses Bearer tokens). What a
proof must be to pass, in the order checked (RFC 9449 §4.3, §7.1):

1. exactly one ``DPoP`` header, a JWS in compact form of at most :data:`MAX_PROOF` bytes, whose header has
   ``typ: dpop+jwt``, an ``alg`` of ``algorithms`` (asymmetric only: never ``none`` or an HMAC), and in ``jwk``
   a public key (no private parts) of the type the algorithm needs; signed by that key;
2. claims ``htm`` equal to the request's method, ``htu`` equal to the resource URI (both normalised as RFC 3986
   §6.2.2 and §6.2.3 say: case, default port, percent-encoding, dot segments; a trailing slash aside, as for resource
   URIs), ``iat`` within ``max_age`` seconds in the past (``leeway`` in the future), ``ath`` the hash of the access
   token presented, and a ``jti`` no proof in the window carried before (replays are refused; the ids are kept
   until their proof expires, at most ``replay_cache`` of them: past that the oldest is forgotten, and logged);
3. with ``nonce_lifetime`` set, a ``nonce`` the server gave (``DPoP-Nonce``, RFC 9449 §9): the nonce of the
   current period or of the one before; a missing or stale one is answered ``use_dpop_nonce`` with a fresh one.
   Nonces are an HMAC of the period, so workers given the same ``nonce_key`` accept each other's;
4. the thumbprint (RFC 7638) of the proof's key equal to the token's ``cnf.jkt`` (checked by the policy, once the
   token is verified).

A refusal is :class:`ProofRefused`: its ``error`` (``invalid_dpop_proof`` or ``use_dpop_nonce``) and a reason
for the client, sent in a ``WWW-Authenticate: DPoP`` challenge that lists the ``algs`` accepted.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import math
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import msgspec

from .principal import KEY_TYPES, SIGNATURE_ALGORITHMS

__all__ = ("DPoP", "ProofRefused", "MAX_PROOF", "access_token_hash", "normalise_url")

logger = logging.getLogger(__name__)

#: A proof longer than this is refused unread (bytes).
MAX_PROOF: Final = 8 * 1024
_MAX_JTI: Final = 256
#: The members of a JWK that belong to the private key (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2).
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PERCENT: Final = re.compile(r"%([0-9A-Fa-f]{2})")


class ProofRefused(Exception):
    """A DPoP proof that does not pass: ``error`` is ``invalid_dpop_proof`` or ``use_dpop_nonce`` (RFC 9449 §7.1,
    §9), ``reason`` a sentence for the client (never anything read from the proof)."""

    def __init__(self, reason: str, error: str = "invalid_dpop_proof") -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error


def _percent(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in _UNRESERVED else "%" + match.group(1).upper()


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4."""
    output: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if len(output) > 1:
                output.pop()
        elif segment != ".":
            output.append(segment)
    if path.endswith(("/.", "/..")):
        output.append("")
    return "/".join(output)


def normalise_url(url: str) -> str:
    """``url`` without query and fragment, normalised as RFC 3986 §6.2.2 and §6.2.3 say (scheme and host in lower
    case, no default port, percent-encodings in upper case and of unreserved characters decoded, dot segments
    removed, an empty path as ``/``), and without a trailing slash: what ``htu`` is compared as.

    :raises ValueError: for anything but an absolute http(s) URL."""
    parts = urlsplit(url)
    port = parts.port  # (a ValueError for a port that is not a number)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError("not an absolute http(s) URL")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    path = _remove_dot_segments(_PERCENT.sub(_percent, parts.path or "/"))
    return urlunsplit((scheme, netloc, path.rstrip("/"), "", ""))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def access_token_hash(token: str) -> str:
    """``ath``: base64url(SHA-256(the access token)), unpadded (RFC 9449 §4.2)."""
    return _b64(hashlib.sha256(token.encode("ascii")).digest())


class DPoP:
    """How a :class:`~jsonrpc_mcp.auth.ProtectedResource` checks DPoP proofs (module docstring: what is checked).

    :param algorithms: the proof signature algorithms accepted (asymmetric only; the ``algs`` of challenges and the
        ``dpop_signing_alg_values_supported`` of the metadata).
    :param max_age: how old a proof may be (its ``iat``), in seconds.
    :param leeway: how far in the future a proof's ``iat`` may be (clock skew), in seconds.
    :param replay_cache: how many proof ids are kept to refuse replays (at most).
    :param nonce_lifetime: when set, proofs must carry a server nonce, and each nonce is good for this long (and
        one period more).
    :param nonce_key: the key nonces are made with (default: a random one, for this process alone): give the same
        to every worker of a server.
    :param required: refuse Bearer tokens: every token must be DPoP-bound (the metadata says
        ``dpop_bound_access_tokens_required``).
    :param clock: the time, in seconds since the epoch (for tests).
    """

    def __init__(
        self,
        *,
        algorithms: Iterable[str] = SIGNATURE_ALGORITHMS,
        max_age: float = 300.0,
        leeway: float = 60.0,
        replay_cache: int = 100_000,
        nonce_lifetime: float | None = None,
        nonce_key: bytes | None = None,
        required: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.algorithms = tuple(algorithms)
        unknown = [a for a in self.algorithms if a not in KEY_TYPES]
        if unknown or not self.algorithms:
            raise ValueError(f"DPoP proofs are checked with asymmetric algorithms only, not {unknown}")
        for name, value in (("max_age", max_age), ("leeway", leeway)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ValueError(f"{name} is a number of seconds, not {value!r}")
        if isinstance(replay_cache, bool) or not isinstance(replay_cache, int) or replay_cache < 1:
            raise ValueError(f"replay_cache is a positive number of proof ids, not {replay_cache!r}")
        if nonce_lifetime is not None and (
            isinstance(nonce_lifetime, bool) or not isinstance(nonce_lifetime, (int, float)) or not nonce_lifetime > 0
        ):
            raise ValueError(f"nonce_lifetime is a number of seconds, not {nonce_lifetime!r}")
        if nonce_key is not None and (not isinstance(nonce_key, bytes) or len(nonce_key) < 16):
            raise ValueError("nonce_key is at least 16 random bytes")
        self.max_age = float(max_age)
        self.leeway = float(leeway)
        self.replay_cache = replay_cache
        self.nonce_lifetime = nonce_lifetime
        self.required = required
        self.clock = clock
        self._nonce_key = nonce_key or secrets.token_bytes(32)
        self._seen: OrderedDict[str, float] = OrderedDict()  # proof id -> when its proof expires
        self._forgetting_logged = False
        self._registry: Any = None

    # --- nonces -----------------------------------------------------------------------------------------------

    def nonce(self) -> str | None:
        """The nonce proofs are to carry now (``None`` without ``nonce_lifetime``)."""
        if self.nonce_lifetime is None:
            return None
        return self._nonce_of(int(self.clock() // self.nonce_lifetime))

    def _nonce_of(self, period: int) -> str:
        mac = hmac.digest(self._nonce_key, b"dpop-nonce:%d" % period, "sha256")[:18]
        return f"{period}.{_b64(mac)}"

    def _nonce_ok(self, nonce: object) -> bool:
        assert self.nonce_lifetime is not None
        if not isinstance(nonce, str) or len(nonce) > 64:
            return False
        now = int(self.clock() // self.nonce_lifetime)
        given = nonce.encode("utf-8", "replace")  # (compare_digest takes no str of other than ASCII)
        return any(hmac.compare_digest(given, self._nonce_of(period).encode()) for period in (now, now - 1))

    # --- proofs -----------------------------------------------------------------------------------------------

    def check(self, proofs: list[str], *, method: str, url: str, access_token_hash: str) -> str:
        """The thumbprint of the key that signed the request's one proof; :class:`ProofRefused` when there is not
        exactly one, or it does not pass (module docstring). ``url``: the resource URI the request was sent to."""
        if len(proofs) != 1:
            raise ProofRefused("send exactly one DPoP proof (the DPoP header)")
        proof = proofs[0].strip(" \t")
        if len(proof) > MAX_PROOF:
            raise ProofRefused("the DPoP proof is too long")
        from joserfc import jws
        from joserfc.errors import JoseError
        from joserfc.jwk import JWKRegistry

        if self._registry is None:
            self._registry = jws.JWSRegistry(algorithms=list(self.algorithms))
            self._registry.max_header_length = MAX_PROOF  # (its 512 bytes do not hold an RSA key's jwk)
        try:
            compact = jws.extract_compact(proof.encode("ascii"), registry=self._registry)
            header = compact.headers()
        except (JoseError, UnicodeError, ValueError, TypeError):
            raise ProofRefused("the DPoP proof is not a well-formed JWT") from None
        typ = header.get("typ")
        if not isinstance(typ, str) or typ.lower() != "dpop+jwt":
            raise ProofRefused("the DPoP proof's typ is not dpop+jwt")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise ProofRefused("the DPoP proof's signature algorithm is not accepted")
        jwk = header.get("jwk")
        if not isinstance(jwk, dict) or jwk.get("kty") != KEY_TYPES[alg]:
            raise ProofRefused("the DPoP proof carries no public key of the type its algorithm needs (jwk)")
        if _PRIVATE_MEMBERS & set(jwk):
            raise ProofRefused("the DPoP proof's jwk holds a private key")
        try:
            key = JWKRegistry.import_key(dict(jwk))
        except (JoseError, ValueError, TypeError):
            raise ProofRefused("the DPoP proof's jwk is not a valid key") from None
        try:
            if not jws.validate_compact(compact, key, registry=self._registry):
                raise ProofRefused("the DPoP proof's signature does not verify")
        except JoseError:
            raise ProofRefused("the DPoP proof's signature does not verify") from None
        try:
            claims = msgspec.json.decode(compact.payload or b"")
        except msgspec.DecodeError:
            raise ProofRefused("the DPoP proof's claims are not JSON") from None
        if not isinstance(claims, dict):
            raise ProofRefused("the DPoP proof's claims are not a JSON object")
        self._check_claims(claims, method, url, access_token_hash)
        thumbprint: str = key.thumbprint()
        self._remember(f"{thumbprint}:{claims['jti']}", float(claims["iat"]))
        return thumbprint

    def _check_claims(self, claims: dict[str, Any], method: str, url: str, ath: str) -> None:
        if claims.get("htm") != method:
            raise ProofRefused("the DPoP proof is for another HTTP method (htm)")
        htu = claims.get("htu")
        try:
            same_url = isinstance(htu, str) and normalise_url(htu) == normalise_url(url)
        except ValueError:
            same_url = False
        if not same_url:
            raise ProofRefused("the DPoP proof is for another URL (htu)")
        iat = claims.get("iat")
        if isinstance(iat, bool) or not isinstance(iat, (int, float)) or not math.isfinite(iat):
            raise ProofRefused("the DPoP proof has no issue time (iat)")
        now = self.clock()
        if iat > now + self.leeway:
            raise ProofRefused("the DPoP proof was issued in the future (iat)")
        if iat < now - self.max_age:
            raise ProofRefused("the DPoP proof is too old (iat)")
        given = claims.get("ath")
        if not isinstance(given, str) or given != ath:  # (a hash of the token presented: no secret)
            raise ProofRefused("the DPoP proof is not for this access token (ath)")
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti or len(jti) > _MAX_JTI:
            raise ProofRefused("the DPoP proof has no usable id (jti)")
        if self.nonce_lifetime is not None and not self._nonce_ok(claims.get("nonce")):
            raise ProofRefused("the resource server asks a nonce of DPoP proofs", "use_dpop_nonce")

    def _remember(self, proof_id: str, iat: float) -> None:
        """Refuse a proof id seen before; else keep it until its proof is too old anyway."""
        now = self.clock()
        seen = self._seen
        while seen:
            oldest, expires = next(iter(seen.items()))
            if expires > now:
                break
            del seen[oldest]
        if proof_id in seen:
            raise ProofRefused("the DPoP proof was used before (jti)")
        seen[proof_id] = iat + self.max_age
        if len(seen) > self.replay_cache:
            seen.popitem(last=False)
            if not self._forgetting_logged:
                self._forgetting_logged = True
                logger.warning(
                    "more than %d DPoP proofs within %g s: the oldest proof ids are forgotten (raise replay_cache)",
                    self.replay_cache,
                    self.max_age,
                )

    # --- what the policy says of it ---------------------------------------------------------------------------

    @property
    def algs(self) -> str:
        """The ``algs`` of a ``WWW-Authenticate: DPoP`` challenge."""
        return " ".join(self.algorithms)
