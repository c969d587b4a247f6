"""Opaque (or any) access tokens, checked by asking the authorization server: RFC 7662 token introspection (L6;
needs the ``auth`` extra for httpx).

::

    verifier = IntrospectionVerifier(
        introspection_url="https://auth.example.com/introspect",
        audience="https://mcp.example.com/mcp",
        client_id="mcp-server", client_secret=os.environ["INTROSPECTION_SECRET"],
    )

Each token is POSTed once (``token``, ``token_type_hint=access_token``; the server authenticates with HTTP Basic
``client_id``/``client_secret``, or any ``httpx.Auth``). An ``active`` answer is turned into an
:class:`~jsonrpc_mcp.auth.principal.AccessToken` and kept until the token expires, but no longer than
``max_cache_ttl`` seconds, so that a revoked token is refused again within that time; the cache is keyed by a
digest of the token, holds at most ``max_cache_size`` tokens, and concurrent requests with one new token share
one introspection call.

Refused: an inactive token; an answer whose ``exp`` has passed or whose ``nbf`` has not come; one from another
``issuer`` (when given); one whose ``aud`` does not name ``audience`` — or that names no audience at all, unless
``require_audience=False`` says this authorization server only ever answers ``active`` for tokens meant for us.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Final

import anyio
import httpx
import msgspec

from ._fetch import check_number, check_url, fetch_json
from .jwt import claims_to_access_token
from .principal import AccessToken, InvalidToken, audience_matches, canonical_resource

__all__ = ("IntrospectionVerifier",)

logger = logging.getLogger(__name__)

_LEEWAY: Final = 60.0


class _Pending:
    """One introspection in flight: later askers for the same token wait for its outcome."""

    __slots__ = ("done", "error", "token")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.token: AccessToken | None = None
        self.error: Exception | None = None


class IntrospectionVerifier:
    """Accepts the tokens the authorization server says are active and meant for this resource (module docstring).

    :param introspection_url: the authorization server's ``introspection_endpoint``.
    :param audience: this MCP server's canonical resource URI.
    :param client_id: with ``client_secret``: how this server authenticates to the endpoint (HTTP Basic).
    :param auth: any other ``httpx.Auth`` instead (a bearer token, mTLS is configured on ``client``).
    :param issuer: when given, the answer's ``iss`` must be it.
    :param require_audience: refuse answers without ``aud`` (the default; see the module docstring).
    :param max_cache_ttl: the longest an answer is reused (seconds; 0: never).
    :param max_cache_size: the most tokens kept (0: none).
    :param timeout: seconds for one introspection call.
    :param client: an ``httpx.AsyncClient`` to call with (default: one per call).
    """

    def __init__(
        self,
        *,
        introspection_url: str,
        audience: str,
        client_id: str | None = None,
        client_secret: str | None = None,
        auth: httpx.Auth | None = None,
        issuer: str | None = None,
        require_audience: bool = True,
        max_cache_ttl: float = 300.0,
        max_cache_size: int = 10_000,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if (client_id is None) != (client_secret is None):
            raise ValueError("give client_id and client_secret together")
        if auth is not None and client_id is not None:
            raise ValueError("give either auth or client_id/client_secret")
        self.url = check_url(introspection_url, "introspection_url")
        self.audience = audience
        canonical_resource(audience)  # a ValueError now for an audience that is not an absolute http(s) URI
        self._auth: httpx.Auth | tuple[str, str] | None = auth
        if client_id is not None and client_secret is not None:
            self._auth = (client_id, client_secret)
        self.issuer = issuer
        self.require_audience = require_audience
        self.max_cache_ttl = check_number(max_cache_ttl, "max_cache_ttl", zero_ok=True)
        self.max_cache_size = check_number(max_cache_size, "max_cache_size", zero_ok=True, whole=True)
        self.timeout = check_number(timeout, "timeout", zero_ok=False)
        self.client = client
        self.clock = clock
        self.calls = 0  # introspection requests made (for tests and metrics)
        self._cache: dict[bytes, tuple[float, AccessToken]] = {}
        self._pending: dict[bytes, _Pending] = {}

    async def verify(self, token: str) -> AccessToken:
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        cached = self._cache.get(digest)
        if cached is not None:
            if cached[0] > self.clock():
                return cached[1]
            del self._cache[digest]
        pending = self._pending.get(digest)
        if pending is not None:
            await pending.done.wait()
            if pending.error is not None:
                raise pending.error
            if pending.token is None:  # the task that asked was cancelled: ask again
                return await self.verify(token)
            return pending.token
        pending = self._pending[digest] = _Pending()
        try:
            pending.token = await self._introspect(token)
        except Exception as exc:
            pending.error = exc
            raise
        finally:
            del self._pending[digest]
            pending.done.set()
        self._remember(digest, pending.token)
        return pending.token

    async def _introspect(self, token: str) -> AccessToken:
        self.calls += 1
        answer = await fetch_json(
            "POST",
            self.url,
            client=self.client,
            timeout=self.timeout,
            data={"token": token, "token_type_hint": "access_token"},
            auth=self._auth,
        )
        if answer.get("active") is not True:
            raise InvalidToken("the access token is not active (expired, revoked or unknown)")
        principal = claims_to_access_token(answer)
        now = self.clock()
        if principal.expires_at is not None and principal.expires_at <= now - _LEEWAY:
            raise InvalidToken("the access token has expired")
        nbf = answer.get("nbf")
        if isinstance(nbf, (int, float)) and not isinstance(nbf, bool) and nbf > now + _LEEWAY:
            raise InvalidToken("the access token is not valid yet")
        if self.issuer is not None and (principal.issuer or "").rstrip("/") != self.issuer.rstrip("/"):
            raise InvalidToken("the access token was issued by another authorization server")
        if principal.audience or self.require_audience:
            if not audience_matches(principal.audience, self.audience):
                raise InvalidToken("the access token was issued for another resource")
        else:
            principal = msgspec.structs.replace(principal, audience=(self.audience,))
        return principal

    def _remember(self, digest: bytes, principal: AccessToken) -> None:
        now = self.clock()
        until = now + self.max_cache_ttl
        if principal.expires_at is not None:
            until = min(until, principal.expires_at)
        if until <= now or self.max_cache_size == 0:
            return
        if len(self._cache) >= self.max_cache_size:
            for key in [k for k, (expiry, _) in self._cache.items() if expiry <= now]:
                del self._cache[key]
            while len(self._cache) >= self.max_cache_size:
                del self._cache[next(iter(self._cache))]  # the oldest entry
        self._cache[digest] = (until, principal)
