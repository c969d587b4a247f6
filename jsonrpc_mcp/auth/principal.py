"""What a resource server knows of a bearer token, and the rules every verifier and check shares (L2: no I/O).

* :class:`AccessToken` — the authenticated principal: who (``subject``), through which client (``client_id``),
  allowed to do what (``scopes``), until when (``expires_at``), for which resource (``audience``), issued by whom
  (``issuer``), and the token's raw ``claims``. Handlers read it as ``ctx.auth``. It never holds the token itself:
  what a handler can see it cannot log or pass on (the MCP spec forbids token passthrough).
* :class:`TokenVerifier` — the one-method protocol of a verifier: a bearer token in, an :class:`AccessToken` out,
  or :class:`InvalidToken` with a reason the client may read.
* :func:`canonical_resource` and :func:`audience_matches` — RFC 8707 resource identifiers, compared the way the MCP
  spec asks (scheme and host case-insensitively, the default port and a trailing slash ignored).
* :func:`missing_scopes` — does a set of granted scopes satisfy the scopes an operation needs, a scope hierarchy
  (a broader scope implying narrower ones) taken into account.

The protocol core defines :class:`AccessToken` and :func:`missing_scopes` (:mod:`jsonrpc_mcp.mcp.principal`: what
``ctx.auth`` is and what a tool's ``scopes`` are checked with); they are re-exported here with the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Protocol, runtime_checkable

from ..mcp.principal import AccessToken, missing_scopes

__all__ = (
    "AccessToken",
    "InvalidToken",
    "VerifierUnavailable",
    "TokenVerifier",
    "canonical_resource",
    "audience_matches",
    "parse_scopes",
    "missing_scopes",
    "SIGNATURE_ALGORITHMS",
    "KEY_TYPES",
)

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}

#: The JWS algorithms a resource server accepts signatures of (access tokens, DPoP proofs): asymmetric only.
SIGNATURE_ALGORITHMS: Final = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
    "Ed25519",
)
#: The key type (JWK ``kty``) each algorithm needs (RFC 7518 §3, RFC 8037, RFC 9864).
KEY_TYPES: Final = {
    **dict.fromkeys(("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"), "RSA"),
    **dict.fromkeys(("ES256", "ES384", "ES512"), "EC"),
    **dict.fromkeys(("EdDSA", "Ed25519", "Ed448"), "OKP"),
}


class InvalidToken(Exception):
    """A verifier's refusal: the token is not good here (HTTP 401 with ``error="invalid_token"``).

    ``reason`` goes to the client as ``error_description``: say what is wrong in a sentence, never echo the token
    or anything read from it."""

    def __init__(self, reason: str = "the access token is not valid") -> None:
        super().__init__(reason)
        self.reason = reason


class VerifierUnavailable(Exception):
    """A verifier could not decide (the authorization server or its key set cannot be reached): HTTP 503, the
    client may retry (after ``retry_after`` seconds, when the verifier knows). ``reason`` is logged, not sent; a
    verifier that gives ``retry_after`` logs the failure itself, once per attempt, and the request is logged at
    DEBUG only (a flood of requests during an outage makes no flood of warnings)."""

    def __init__(self, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


@runtime_checkable
class TokenVerifier(Protocol):
    """Checks a bearer token. Implement :meth:`verify` to plug in any token format or authorization server."""

    async def verify(self, token: str) -> AccessToken:
        """The token's principal; raise :class:`InvalidToken` (with the reason) to refuse it, or
        :class:`VerifierUnavailable` when it cannot be checked right now.

        The returned ``audience`` must name this server's resource (its canonical URI): a token issued for another
        resource is refused by the HTTP app even when the verifier accepts it."""
        ...


def canonical_resource(uri: str) -> str:
    """``uri`` as a canonical resource identifier (RFC 8707 §2, MCP "Canonical Server URI"): an absolute ``http``
    or ``https`` URI, scheme and host in lower case, no default port, no fragment, no trailing slash.

    :raises ValueError: for a relative URI, another scheme, a fragment, or user information."""
    from urllib.parse import urlsplit, urlunsplit  # (only servers with authorization need it: not at start-up)

    try:
        parts = urlsplit(uri.strip())
        port = parts.port
    except ValueError:
        raise ValueError(f"not a valid resource URI: {uri!r}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"a resource URI must be an absolute http(s) URI: {uri!r}")
    if parts.fragment or "#" in uri:
        raise ValueError(f"a resource URI has no fragment: {uri!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"a resource URI has no user information: {uri!r}")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def audience_matches(audience: Iterable[str], resource: str) -> bool:
    """Does a token's audience name ``resource``? Both are compared as canonical resource identifiers; an
    audience entry that is not a URI at all only matches itself."""
    wanted = canonical_resource(resource)
    for entry in audience:
        if entry == resource:
            return True
        try:
            if canonical_resource(entry) == wanted:
                return True
        except ValueError:
            continue
    return False


def parse_scopes(value: object) -> frozenset[str]:
    """A ``scope`` claim as a set: a space-separated string (RFC 6749 §3.3, RFC 9068), or a list of strings (the
    ``scp`` claim of some authorization servers). Anything else grants nothing."""
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, (list, tuple)):
        return frozenset(s for s in value if isinstance(s, str) and s)
    return frozenset()
