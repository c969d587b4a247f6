"""A protected MCP resource server: OAuth 2.1 bearer tokens on the Streamable HTTP app, as the MCP authorization
spec asks (L6; the HTTP policy :mod:`jsonrpc_mcp.transports.http_policy` that this project ships).

::

    auth = ProtectedResource(
        resource="https://notes.example.com/mcp",                 # the endpoint's canonical URI (RFC 8707)
        authorization_servers=["https://auth.example.com"],
        verifier=JwtVerifier(issuer="https://auth.example.com", audience="https://notes.example.com/mcp",
                             jwks_url="https://auth.example.com/jwks"),
        scopes_supported=["notes:read", "notes:write"],
        required_scopes=["notes:read"],                           # needed for any request at all
    )
    app = McpAsgiApp(server, http_policy=auth)

What the app then does:

* serves RFC 9728 protected-resource metadata (``resource``, ``authorization_servers``, ``scopes_supported``,
  ``bearer_methods_supported: ["header"]``) at the path-aware well-known URI of the resource
  (``/.well-known/oauth-protected-resource/mcp`` for ``…/mcp``) and, unless ``root_metadata=False``, at the root
  variant ``/.well-known/oauth-protected-resource``; with CORS headers, so browser-based clients can read it;
* requires ``Authorization: Bearer <token>`` on every request to the endpoint (POST, GET, DELETE), and answers
  (RFC 6750 §3, the MCP spec's error table):

  ============================================  ======  =====================================================
  the request                                   status  ``WWW-Authenticate: Bearer …``
  ============================================  ======  =====================================================
  no ``Authorization``, or another scheme       401     ``resource_metadata``, ``scope`` (the required scopes)
  a token the verifier refuses (bad signature,  401     ``error="invalid_token"``, ``error_description``,
  expired, not yet valid, foreign issuer or             ``resource_metadata``, ``scope``
  audience, unknown key, not a token at all)
  a token in the query (``?access_token=``)     400     ``error="invalid_request"``: tokens go in the header
  a malformed or repeated ``Authorization``     400     ``error="invalid_request"``
  a token without a scope the request needs     403     ``error="insufficient_scope"``, ``scope`` (all the
                                                        scopes the operation needs), ``resource_metadata``
  the verifier cannot decide (AS unreachable)   503     none (``Retry-After``)
  ============================================  ======  =====================================================

* takes DPoP too (RFC 9449, :class:`~jsonrpc_mcp.auth.DPoP`, on unless ``dpop=None``): ``Authorization: DPoP
  <token>`` with a ``DPoP`` proof; a proof that does not pass is 401 ``error="invalid_dpop_proof"`` (or
  ``use_dpop_nonce`` with a ``DPoP-Nonce``) in a ``WWW-Authenticate: DPoP … algs="…"`` challenge, which every 401
  names beside the Bearer one (the challenge of the scheme the request used first, with the error); a token bound to
  a key (``cnf.jkt``) is refused as a Bearer token, and with a proof by another key;
* refuses a token issued for another resource even when a custom verifier accepts it (no token passthrough);
* refuses a token that names neither a subject (``sub``) nor a client (``client_id``): it would be nobody in
  particular, the same principal as every other such token;
* binds each handshake-era session to the principal that opened it: another principal's token gets the same 404
  as a session that does not exist;
* ends each stream of a response (a GET stream, ``subscriptions/listen``, an SSE answer) when the token it was
  admitted with expires (``admitted_until``);
* puts the principal on the request (``Context.auth``); scopes a tool, resource or prompt declares are checked
  before the request is dispatched (403 above) and again by the server itself.

No token or secret is ever logged; only the refusal's reason is.
"""

from __future__ import annotations

import inspect
import logging
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import msgspec

from ..jsonrpc.wire import Request
from ..transports.asgi import HeaderList, Headers, Receive, Scope, Send, send_bytes, send_error
from ..transports.http_policy import Handler, HttpPolicy
from .dpop import DPoP, ProofRefused, access_token_hash
from .principal import (
    AccessToken,
    InvalidToken,
    TokenVerifier,
    VerifierUnavailable,
    audience_matches,
    canonical_resource,
    missing_scopes,
)

if TYPE_CHECKING:
    from ..jsonrpc.wire import Message
    from ..transports.http_asgi import McpAsgiApp

__all__ = ("ProtectedResource", "WELL_KNOWN", "metadata_path")

logger = logging.getLogger(__name__)

WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
#: RFC 6750 §2.1 ``b64token``.
_B64TOKEN: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_CORS: Final[HeaderList] = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"GET, HEAD, OPTIONS"),
    (b"access-control-allow-headers", b"*"),
    (b"access-control-max-age", b"86400"),
]
_encode_owner = msgspec.json.Encoder().encode
_DEFAULT_DPOP: Final[Any] = object()  # (``dpop=`` not given: a DPoP() of the defaults)


def metadata_path(resource: str) -> str:
    """The path of ``resource``'s protected-resource metadata (RFC 9728 §3.1: the well-known suffix inserted
    between the host and the path): ``https://h/mcp`` → ``/.well-known/oauth-protected-resource/mcp``."""
    path = urlsplit(resource).path.rstrip("/")
    return WELL_KNOWN + path


def _plain_function(method: Any) -> bool:
    """Whether ``method`` is a ``def`` (not an ``async def``): its result could not be awaited."""
    return inspect.isroutine(method) and not inspect.iscoroutinefunction(method)


def _scheme_of(headers: Headers) -> str:
    """The authentication scheme of an admitted request: ``"dpop"`` or ``"bearer"``."""
    return "dpop" if (headers.get("authorization") or "").lstrip()[:5].lower() == "dpop " else "bearer"


def _bound_key(principal: AccessToken) -> str | None:
    """The thumbprint of the DPoP key the token is bound to (``cnf.jkt``, RFC 9449 §6), if it is bound."""
    cnf = principal.claims.get("cnf")
    jkt = cnf.get("jkt") if isinstance(cnf, dict) else None
    return jkt if isinstance(jkt, str) else None


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class ProtectedResource(HttpPolicy):
    """OAuth bearer tokens for the Streamable HTTP app (module docstring: what it serves and answers).

    :param resource: the MCP endpoint's canonical URI as clients reach it (``https://host/mcp``): the ``resource``
        of the metadata, the audience tokens must name, the base of the metadata URL.
    :param authorization_servers: issuer identifiers of the authorization servers clients may use (at least one).
    :param verifier: checks each bearer token (:class:`~jsonrpc_mcp.auth.JwtVerifier`,
        :class:`~jsonrpc_mcp.auth.IntrospectionVerifier`, or your own :class:`~jsonrpc_mcp.auth.TokenVerifier`).
    :param scopes_supported: the scopes to advertise (what a client asks for when a challenge names none); never
        ``offline_access``, which is between the client and its authorization server (as in ``required_scopes``).
    :param required_scopes: scopes every request needs (named in every 401 challenge).
    :param resource_name: a human-readable name for the metadata.
    :param resource_documentation: a URL of documentation for developers.
    :param root_metadata: also serve the metadata at ``/.well-known/oauth-protected-resource`` (turn off when
        several protected resources share the host).
    :param extra_metadata: more RFC 9728 fields to publish.
    :param dpop: how DPoP proofs are checked (:class:`~jsonrpc_mcp.auth.DPoP`: its algorithms, the proofs' age,
        the replay cache, server nonces, whether Bearer tokens are refused); default ``DPoP()``; ``None`` takes no
        DPoP (a DPoP-bound token is refused either way when it comes as a Bearer token).
    """

    def __init__(
        self,
        *,
        resource: str,
        authorization_servers: Sequence[str],
        verifier: TokenVerifier,
        scopes_supported: Sequence[str] | None = None,
        required_scopes: Iterable[str] = (),
        resource_name: str | None = None,
        resource_documentation: str | None = None,
        root_metadata: bool = True,
        extra_metadata: Mapping[str, Any] | None = None,
        dpop: DPoP | None = _DEFAULT_DPOP,
    ) -> None:
        for name, names in (
            ("authorization_servers", authorization_servers),
            ("scopes_supported", scopes_supported),
            ("required_scopes", required_scopes),
        ):
            if isinstance(names, (str, bytes)):  # (its letters would be read as the names)
                raise TypeError(f"{name} is a list, not a string: {name}=[{names!r}]")
        if not authorization_servers:
            raise ValueError("name at least one authorization server")
        required_scopes = tuple(required_scopes)
        for name, names in (("scopes_supported", scopes_supported), ("required_scopes", required_scopes)):
            if "offline_access" in (names or ()):  # (MCP 2026-07-28: a refresh token is no resource requirement)
                raise ValueError(
                    f"{name} cannot hold offline_access: refresh tokens are between the client and the "
                    "authorization server, not something the resource requires"
                )
        for issuer in authorization_servers:  # (what clients discover the server from: a host name alone is not)
            try:
                canonical_resource(issuer)
            except ValueError:
                raise ValueError(
                    f"authorization_servers holds issuer URLs (https://auth.example), not {issuer!r}"
                ) from None
        verify = getattr(verifier, "verify", None)
        if isinstance(verifier, type) or not callable(verify) or _plain_function(verify):
            raise TypeError(f"verifier must be an object with an async verify(token) method, not {verifier!r}")
        if dpop is _DEFAULT_DPOP:
            dpop = DPoP()
        elif dpop is not None and not isinstance(dpop, DPoP):
            raise TypeError(f"dpop is a DPoP(...) or None, not {dpop!r}")
        self.resource = canonical_resource(resource)
        self.verifier = verifier
        self.dpop = dpop
        self.required_scopes = required_scopes
        parts = urlsplit(self.resource)
        self.metadata_url = urlunsplit((parts.scheme, parts.netloc, metadata_path(self.resource), "", ""))
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": list(authorization_servers),
            "bearer_methods_supported": ["header"],
        }
        if scopes_supported is not None:
            document["scopes_supported"] = list(scopes_supported)
        if resource_name is not None:
            document["resource_name"] = resource_name
        if resource_documentation is not None:
            document["resource_documentation"] = resource_documentation
        if dpop is not None:
            document["dpop_signing_alg_values_supported"] = list(dpop.algorithms)
            if dpop.required:
                document["dpop_bound_access_tokens_required"] = True
        enforced = {"resource", "authorization_servers", "bearer_methods_supported"} & set(extra_metadata or {})
        if enforced:  # (the metadata would say one thing and the policy do another)
            raise ValueError(f"extra_metadata cannot set {', '.join(sorted(enforced))}: the policy sets it itself")
        document.update(extra_metadata or {})
        self.metadata: Mapping[str, Any] = document
        self._document = msgspec.json.encode(document)
        self._paths = {metadata_path(self.resource)}
        if root_metadata:
            self._paths.add(WELL_KNOWN)
        self._app: McpAsgiApp | None = None

    # --- the hooks ------------------------------------------------------------------------------------------

    def attach(self, app: McpAsgiApp) -> None:
        if self._app is not None and self._app is not app:
            raise ValueError("a ProtectedResource protects one app")
        self._app = app
        if app.path is not None:
            self._paths.add(WELL_KNOWN + app.path.rstrip("/"))  # as the app sees it, behind a rewriting proxy

    def route(self, path: str) -> Handler | None:
        return self.serve_metadata if path in self._paths else None

    async def admit(self, scope: Scope, headers: Headers, send: Send) -> Send | None:
        if scope.get("method") == "OPTIONS":
            return send  # a CORS preflight carries no credentials: the app answers it as it would anyway
        principal = await self._authenticate(scope, headers, send)
        if principal is None:
            return None
        missing = missing_scopes(principal.scopes, self.required_scopes, self._hierarchy())
        if missing:
            await self._refuse_scope(send, headers, self.required_scopes, missing)
            return None
        headers.auth = principal
        return send

    async def admit_message(self, headers: Headers, message: Message, send: Send) -> bool:
        if type(message) is not Request or self._app is None:
            return True
        principal: AccessToken | None = headers.auth
        scopes_for = getattr(self._app.server, "scopes_for", None)
        if principal is None or scopes_for is None:
            return True
        try:
            params = msgspec.json.decode(message.params) if message.params is not None else None
        except msgspec.DecodeError:
            return True  # unreadable params: the request's own handling reports them
        needed = scopes_for(message.method, params if isinstance(params, dict) else None)
        if not needed:
            return True
        missing = missing_scopes(principal.scopes, needed, self._hierarchy())
        if not missing:
            return True
        await self._refuse_scope(send, headers, needed, missing)
        return False

    # --- metadata -------------------------------------------------------------------------------------------

    async def serve_metadata(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The protected-resource metadata document (an ASGI handler; GET, HEAD and the CORS preflight)."""
        method = scope.get("method", "GET")
        if method == "OPTIONS":
            await send({"type": "http.response.start", "status": 204, "headers": list(_CORS)})
            await send({"type": "http.response.body", "body": b""})
            return
        if method not in ("GET", "HEAD"):
            await send_error(send, 405, f"Method not allowed: {method}", headers=[(b"allow", b"GET, HEAD, OPTIONS")])
            return
        head = [*_CORS, (b"cache-control", b"public, max-age=3600")]
        if method == "HEAD":
            head += [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(self._document))]
            await send({"type": "http.response.start", "status": 200, "headers": head})
            await send({"type": "http.response.body", "body": b""})
            return
        await send_bytes(send, 200, self._document, head)

    async def metadata_app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An ASGI app serving only the metadata, for mounting at the host's root when the MCP app is mounted
        under a prefix (which cannot answer ``/.well-known/…`` itself); 404 for any other path."""
        if scope.get("type") != "http":
            return
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and not path.startswith(root):
            path = root + path
        if path in self._paths:
            await self.serve_metadata(scope, receive, send)
            return
        await send_bytes(send, 404, b"Not Found", content_type=b"text/plain; charset=utf-8")

    # --- authentication -------------------------------------------------------------------------------------

    async def _authenticate(self, scope: Scope, headers: Headers, send: Send) -> AccessToken | None:
        """The request's principal, or ``None`` once the refusal is sent."""
        query = scope.get("query_string", b"")
        if query and b"access_token" in query and any(k == "access_token" for k, _ in parse_qsl(query.decode())):
            await self._challenge(send, 400, "invalid_request", "send the access token in the Authorization header")
            return None
        if headers.repeated(b"authorization"):
            await self._challenge(send, 400, "invalid_request", "the Authorization header is sent more than once")
            return None
        value = headers.get("authorization")
        if value is None:
            await self._challenge(send, 401)
            return None
        scheme, _, credentials = value.strip().partition(" ")
        scheme = scheme.lower()
        dpop = self.dpop
        if (scheme != "bearer" or (dpop is not None and dpop.required)) and (scheme != "dpop" or dpop is None):
            await self._challenge(send, 401)  # an authentication method we do not take: as if none were sent
            return None
        token = credentials.strip(" ")
        if not _B64TOKEN.fullmatch(token):
            await self._challenge(send, 400, "invalid_request", "the Authorization header is malformed", scheme)
            return None
        thumbprint = None
        if scheme == "dpop":
            assert dpop is not None
            try:  # (the proof first: it costs no fetch, and a nonce it lacks is asked for before anything else)
                thumbprint = dpop.check(
                    headers.values("dpop"),
                    method=scope.get("method", ""),
                    url=self.resource,
                    access_token_hash=access_token_hash(token),
                )
            except ProofRefused as refused:
                logger.info("refused a DPoP proof: %s", refused.reason)
                await self._challenge(send, 401, refused.error, refused.reason, scheme)
                return None
        try:
            principal = await self.verifier.verify(token)
        except InvalidToken as refused:
            logger.info("refused a bearer token: %s", refused.reason)
            await self._challenge(send, 401, "invalid_token", refused.reason, scheme)
            return None
        except VerifierUnavailable as unavailable:
            # (a verifier that knows when it tries again has logged the failure itself, once per attempt)
            level = logging.WARNING if unavailable.retry_after is None else logging.DEBUG
            logger.log(level, "could not verify a bearer token: %s", unavailable.reason)
            await self._unavailable(send, unavailable.retry_after)
            return None
        except Exception as exc:
            logger.error("the token verifier failed (%s)", type(exc).__name__)
            await self._unavailable(send)
            return None
        bound = _bound_key(principal)
        if bound is not None and thumbprint is None:  # RFC 9449 §7.2: a bound token is no bearer token
            logger.info("refused a bearer token: it is bound to a DPoP key and came without a proof")
            await self._challenge(send, 401, "invalid_token", "the access token is bound to a DPoP key", scheme)
            return None
        if thumbprint is not None and bound != thumbprint:  # (a thumbprint is no secret: == will do)
            reason = "the access token is not bound to the DPoP proof's key"
            logger.info("refused a DPoP token: %s", reason)
            await self._challenge(send, 401, "invalid_dpop_proof" if bound else "invalid_token", reason, scheme)
            return None
        if not audience_matches(principal.audience, self.resource):
            logger.info("refused a bearer token: it was issued for another resource")
            reason = "the access token was issued for another resource"
            await self._challenge(send, 401, "invalid_token", reason, scheme)
            return None
        if principal.subject is None and principal.client_id is None:  # (all such tokens would be one principal)
            logger.info("refused a bearer token: it names neither a subject nor a client")
            reason = "the access token names neither a subject nor a client"
            await self._challenge(send, 401, "invalid_token", reason, scheme)
            return None
        if principal.expires_at is not None and principal.expires_at <= time.time():
            await self._challenge(send, 401, "invalid_token", "the access token has expired", scheme)
            return None
        return principal

    def _hierarchy(self) -> Mapping[str, Iterable[str]] | None:
        return getattr(self._app.server, "scope_hierarchy", None) if self._app is not None else None

    def admitted_until(self, headers: Headers) -> float | None:
        """The access token's expiry: a stream still open then is closed (and the client comes back with a fresh
        token)."""
        token: AccessToken | None = headers.auth
        return token.expires_at if token is not None else None

    def session_owner(self, headers: Headers) -> str | None:
        """The principal the request was admitted as (issuer, subject and client), as a key."""
        token: AccessToken | None = headers.auth
        return _encode_owner(token.principal).decode() if token is not None else None

    # --- refusals -------------------------------------------------------------------------------------------

    async def _challenge(
        self,
        send: Send,
        status: int,
        error: str | None = None,
        description: str | None = None,
        scheme: str = "bearer",
    ) -> None:
        """A refusal with its ``WWW-Authenticate`` challenges: ``Bearer`` and, when DPoP is on, ``DPoP`` (with the
        ``algs`` it takes; alone when Bearer tokens are refused); the ``error`` goes in the challenge of the
        ``scheme`` the request used, which comes first."""
        common = [f"resource_metadata={_quoted(self.metadata_url)}"]
        if self.required_scopes:
            common.append(f"scope={_quoted(' '.join(self.required_scopes))}")
        problem = []
        if error is not None:
            problem.append(f"error={_quoted(error)}")
        if description is not None:
            problem.append(f"error_description={_quoted(description)}")
        challenges: dict[str, list[str]] = {}
        if self.dpop is None or not self.dpop.required:
            challenges["bearer"] = ["Bearer " + ", ".join(common + (problem if scheme == "bearer" else []))]
        if self.dpop is not None:
            dpop = [*common, f"algs={_quoted(self.dpop.algs)}", *(problem if scheme == "dpop" else [])]
            challenges["dpop"] = ["DPoP " + ", ".join(dpop)]
        ordered = challenges.pop(scheme, []) + [c for values in challenges.values() for c in values]
        head = [(b"www-authenticate", c.encode("latin-1", "replace")) for c in ordered]
        if error == "use_dpop_nonce" and self.dpop is not None and (nonce := self.dpop.nonce()) is not None:
            head.append((b"dpop-nonce", nonce.encode("ascii")))
        body: dict[str, str] = {"error": error or "unauthorized"}
        if description is not None:
            body["error_description"] = description
        elif error is None:
            body["error_description"] = "this resource needs an access token (Authorization: Bearer)"
        await send_bytes(send, status, msgspec.json.encode(body), head)

    async def _refuse_scope(self, send: Send, headers: Headers, needed: Iterable[str], missing: Iterable[str]) -> None:
        scope = " ".join(sorted(set(needed)))
        description = f"this request needs the scope {' '.join(missing)}"
        scheme = "DPoP" if _scheme_of(headers) == "dpop" else "Bearer"
        header = (
            f"{scheme} error={_quoted('insufficient_scope')}, scope={_quoted(scope)}, "
            f"resource_metadata={_quoted(self.metadata_url)}, error_description={_quoted(description)}"
        ).encode("latin-1", "replace")
        body = msgspec.json.encode({"error": "insufficient_scope", "error_description": description, "scope": scope})
        await send_bytes(send, 403, body, [(b"www-authenticate", header)])

    async def _unavailable(self, send: Send, retry_after: float | None = None) -> None:
        body = msgspec.json.encode(
            {"error": "temporarily_unavailable", "error_description": "the access token cannot be checked now"}
        )
        seconds = 5 if retry_after is None else max(1, math.ceil(retry_after))
        await send_bytes(send, 503, body, [(b"retry-after", b"%d" % seconds)])
