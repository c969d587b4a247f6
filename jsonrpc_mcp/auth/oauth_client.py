"""OAuth 2.1 for MCP clients (L6): an ``httpx.Auth`` that authorizes by itself when a server answers 401.

::

    from jsonrpc_mcp import Client
    from jsonrpc_mcp.auth import OAuth

    async with Client.connect_http("https://mcp.example.com/mcp", auth=OAuth(client_name="My app")) as client:
        tools = await client.list_tools()

What happens on a 401 (MCP authorization, revisions 2025-03-26 to 2026-07-28):

1. **Protected resource metadata** (RFC 9728): from the challenge's ``resource_metadata``, else the path-aware
   well-known URI, else the root one. Its ``resource`` must cover the server's URL (or nothing is sent anywhere).
   When the server publishes none (every URL 404), the 2025-03-26 rules apply: the authorization server is the
   server's origin, and without metadata its endpoints are ``/authorize``, ``/token`` and ``/register``. A server
   that speaks 2025-03-26 (the session's version, or the one an ``initialize`` offers) gets that revision's rules
   whatever its well-known URIs answer: RFC 8414 metadata at its origin only, asked with ``MCP-Protocol-Version``.
2. **Authorization server metadata**: RFC 8414 and OpenID Connect discovery in the spec's order (path-aware);
   the document's ``issuer`` must be exactly the issuer its URL was built from.
3. **Client**: pre-registered (``client_id``, bound to the issuer it is first used with), else a client ID metadata
   document (``client_metadata_url``) when the server supports them, else a registration stored for that issuer,
   else dynamic client registration (with ``application_type``), else a clear error asking for a ``client_id``.
4. **Authorization**: PKCE with S256 (a server that does not offer it is refused), ``state``, ``resource``
   (RFC 8707) and the scopes chosen as the spec says (the challenge's ``scope``, else the resource's
   ``scopes_supported``, else none; ``offline_access`` when the server lists it); the user's consent through a
   :class:`~jsonrpc_mcp.auth.Consent`; the answer's ``state`` and ``iss`` (RFC 9207) checked before the code is
   redeemed.
5. **Tokens** are kept per server in a :class:`~jsonrpc_mcp.auth.TokenStore`, refreshed before they expire and
   before authorizing again, sent only to URLs their resource covers, and never logged. A 403
   ``insufficient_scope`` steps up (the union of what was asked before and the challenge), at most
   ``max_step_ups`` times per request; once that gives up, a request challenged for the same scopes fails at once
   for five minutes instead of asking the user again. When the resource names another authorization server,
   nothing obtained from the previous one is used with it.

Against a server that is not to be trusted: every connection made to authorize goes only where the server's own
address allows (:mod:`~jsonrpc_mcp.auth.oauth_reach`, widened by ``allow_networks``), a token never travels in
cleartext off loopback (unless ``allow_cleartext``), answers are read up to 1 MiB, and codes stay out of the HTTP
library's log records.

Every failure raises :class:`~jsonrpc_mcp.errors.AuthorizationError` naming the step.
"""

from __future__ import annotations

import base64
import hmac
import logging
import time
from collections.abc import AsyncGenerator, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import anyio
import msgspec

from ..errors import AuthorizationError, MissingExtra

try:
    import httpx
except ImportError:  # pragma: no cover - the http extra is missing
    raise ImportError(f"jsonrpc_mcp.auth needs httpx: {MissingExtra.install('http')}") from None

from ..addresses import is_loopback_host
from ..transports.http_bodies import read_limited

if TYPE_CHECKING:
    from .oauth_dpop import DPoPKey
from .oauth_consent import Consent, LoopbackConsent, check_redirect_uri, redact_http_logs
from .oauth_reach import Reach, guarded_client, parse_networks
from .oauth_store import MemoryTokenStore, TokenStore
from .oauth_wire import (
    DPOP_ALGORITHMS,
    AuthorizationServerMetadata,
    Challenge,
    ProtectedResourceMetadata,
    TokenResponse,
    authorization_server_metadata_urls,
    canonical_resource,
    choose_dpop_algorithm,
    decode_json_object,
    is_client_metadata_url,
    is_secure_endpoint,
    join_scopes,
    new_state,
    origin_of,
    parse_www_authenticate,
    pkce_pair,
    protected_resource_metadata_urls,
    resource_covers,
    split_scopes,
)

__all__ = ("OAuth", "Grant", "GrantContext", "AuthorizationCode", "StoredToken", "ClientRegistration", "ClientAuth")

logger = logging.getLogger(__name__)

_MAX_BODY: Final = 1024 * 1024
_EXPIRY_MARGIN: Final = 30.0  # seconds before expiry a token counts as expired (clock skew, time in flight)
_MAX_NONCE_RETRIES: Final = 2
#: After a step-up gave up on a scope set, requests challenged for the same set fail at once for this long (seconds)
#: instead of sending the user to consent again (MCP 2025-11-25: track scope upgrade attempts).
_STEP_UP_PAUSE: Final = 300.0
_MAX_FAILED_STEP_UPS: Final = 64
_SECRET_METHODS: Final = ("client_secret_basic", "client_secret_post")
_USABLE_METHODS: Final = ("none", *_SECRET_METHODS)
#: The last MCP revision whose server is its own authorization server (no protected resource metadata; its origin
#: has the metadata, else ``/authorize``, ``/token``, ``/register``). Revisions compare as their date strings.
_SERVER_IS_ITS_OWN_AS: Final = "2025-03-26"


class StoredToken(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A token as kept in the store, with what it may be used for."""

    access_token: str
    token_type: str = "Bearer"
    expires_at: float | None = None
    refresh_token: str | None = None
    scope: str | None = None  # granted (what was asked, when the server did not say)
    url: str  # the resource the token may be sent to (the server's URL on the 2025-03-26 path)
    resource: str | None = None  # the RFC 8707 resource indicator it was asked for (None: not sent)
    issuer: str
    token_endpoint: str | None = None
    jkt: str | None = None  # the thumbprint of the DPoP key a DPoP token is bound to

    def expired(self, now: float | None = None) -> bool:
        if self.expires_at is None:
            return False
        return (time.time() if now is None else now) >= self.expires_at - _EXPIRY_MARGIN


class ClientAuth(Protocol):
    """Client authentication at a token endpoint: adds what proves the client to the form or the headers."""

    def apply(self, form: dict[str, str], headers: dict[str, str], issuer: str, offered: list[str] | None) -> None:
        """``issuer``: the audience of an assertion; ``offered``: the server's signing algorithms for one."""
        ...


class ClientRegistration(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A client known to one authorization server (``issuer``; None for a portable client ID metadata URL), and its
    authentication at the token endpoint (RFC 6749 §2.3.1): ``client_secret_basic`` (the id and secret
    form-encoded, then Basic), ``client_secret_post``, or ``none`` (the id in the form)."""

    client_id: str
    client_secret: str | None = None
    client_secret_expires_at: int | None = None
    token_endpoint_auth_method: str = "none"
    redirect_uris: list[str] = []
    issuer: str | None = None

    def secret_expired(self) -> bool:
        expires = self.client_secret_expires_at
        return bool(expires) and time.time() >= float(expires or 0)

    def apply(self, form: dict[str, str], headers: dict[str, str], issuer: str, offered: list[str] | None) -> None:
        method = self.token_endpoint_auth_method
        if method == "client_secret_basic" and self.client_secret is not None:
            pair = f"{quote(self.client_id, safe='')}:{quote(self.client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        elif method == "client_secret_post" and self.client_secret is not None:
            form["client_id"] = self.client_id
            form["client_secret"] = self.client_secret
        else:
            form["client_id"] = self.client_id


class _Target(msgspec.Struct, kw_only=True):
    """What discovery found: the authorization server to use, and the resource to ask tokens for."""

    issuer: str
    metadata: AuthorizationServerMetadata
    url: str  # what the tokens will be sent to
    resource: str | None  # the RFC 8707 resource indicator (None on the 2025-03-26 path)
    scopes_supported: list[str] | None
    legacy: bool
    dpop: str | None = None  # the algorithm of DPoP proofs, when tokens are to be DPoP-bound


class _Refused(AuthorizationError):
    """The token endpoint answered with an OAuth error (RFC 6749 §5.2): the grant or the client is not good there,
    as opposed to a server or network failure, which says nothing about them."""


class _Tries:
    """What one request has already been through (to bound re-authorization)."""

    __slots__ = ("fresh", "nonces", "refreshed", "step_ups")

    def __init__(self) -> None:
        self.fresh = False
        self.refreshed = False
        self.step_ups = 0
        self.nonces = 0


class _ServerState:
    """Per MCP server URL: its token, what discovery found, the scopes asked so far, one authorization at a time."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.key = f"tokens {server_url}"
        self.lock = anyio.Lock()
        self.loaded = False
        self.token: StoredToken | None = None
        self.target: _Target | None = None
        self.requested: list[str] = []
        self.dpop_nonce: str | None = None  # the last DPoP-Nonce the server gave (RFC 9449 §9)
        #: the scope sets a step-up gave up on, and when (``time.monotonic()``): not asked for again meanwhile
        self.failed_step_ups: dict[frozenset[str], float] = {}

    def gave_up_stepping_up(self, scopes: frozenset[str]) -> None:
        self.failed_step_ups.pop(scopes, None)
        self.failed_step_ups[scopes] = time.monotonic()
        while len(self.failed_step_ups) > _MAX_FAILED_STEP_UPS:  # (the oldest first)
            del self.failed_step_ups[next(iter(self.failed_step_ups))]


class GrantContext:
    """What a :class:`Grant` works with: the authorization server found, the scope and resource to ask for, an
    HTTP client for the authorization server, and the token request helper (client authentication included)."""

    def __init__(
        self,
        oauth: OAuth,
        http: httpx.AsyncClient,
        target: _Target,
        scope: str | None,
        dpop: DPoPKey | None = None,
    ) -> None:
        self.oauth = oauth
        self.http = http
        self.target = target
        self.scope = scope
        #: the key token requests carry DPoP proofs of (None: tokens are not DPoP-bound)
        self.dpop = dpop

    @property
    def issuer(self) -> str:
        return self.target.issuer

    @property
    def metadata(self) -> AuthorizationServerMetadata:
        return self.target.metadata

    @property
    def resource(self) -> str | None:
        return self.target.resource

    def token_endpoint(self) -> str:
        endpoint = self.metadata.token_endpoint
        if not endpoint:
            raise AuthorizationError("authorization server metadata", f"{self.issuer} names no token_endpoint")
        return endpoint

    async def token_request(
        self, form: Mapping[str, str], client: ClientAuth | None, *, step: str = "token request"
    ) -> TokenResponse:
        return await self.oauth._token_request(
            self.http,
            self.token_endpoint(),
            dict(form),
            client,
            step,
            self.issuer,
            offered=self.metadata.token_endpoint_auth_signing_alg_values_supported,
            dpop=self.dpop,
        )


class Grant(Protocol):
    """How a token is obtained once the authorization server is known (the authorization code flow by default;
    the client credentials, JWT bearer and enterprise grants are the others)."""

    #: whether a person takes part (consent in a browser): such grants are the ones that step up on a 403
    interactive: bool

    async def obtain(self, context: GrantContext) -> TokenResponse: ...

    def client_for_refresh(self, oauth: OAuth, issuer: str) -> ClientAuth | None:
        """The client that refreshes tokens of ``issuer`` without new registration (None: not known here)."""
        ...


class AuthorizationCode:
    """The authorization code grant with PKCE: the user consents in a browser (the default grant)."""

    interactive = True

    async def obtain(self, context: GrantContext) -> TokenResponse:
        oauth, target = context.oauth, context.target
        meta = target.metadata
        _require_pkce(target)
        endpoint = meta.authorization_endpoint
        if not endpoint:
            raise AuthorizationError(
                "authorization server metadata", f"{target.issuer} names no authorization_endpoint"
            )
        consent = oauth.consent
        redirect_uri = check_redirect_uri(consent.redirect_uri)
        client = await oauth._client_registration(context.http, target, redirect_uri)
        verifier, challenge = pkce_pair()
        state = new_state()
        params = {
            "response_type": "code",
            "client_id": client.client_id,
            "redirect_uri": redirect_uri,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": state,
        }
        if context.scope:
            params["scope"] = context.scope
            if "offline_access" in split_scopes(context.scope) and meta.is_openid_provider():
                params["prompt"] = "consent"  # else no refresh token comes back (OpenID Connect Core §11)
        if target.resource is not None:
            params["resource"] = target.resource
        logger.info("asking for the user's consent at %s", target.issuer)
        callback = await consent.authorize(_with_query(endpoint, params))
        answer = dict(parse_qsl(urlsplit(callback).query, keep_blank_values=True))
        _check_authorization_response(answer, state, target)
        form = {
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        }
        if target.resource is not None:
            form["resource"] = target.resource
        return await context.token_request(form, client)

    def client_for_refresh(self, oauth: OAuth, issuer: str) -> ClientAuth | None:
        return None


def _require_pkce(target: _Target) -> None:
    """MCP 2025-11-25: refuse an authorization server whose metadata does not offer S256. The 2025-03-26 path
    (no protected resource metadata) requires PKCE too but defines no such check: absent metadata, or metadata
    that does not list the methods, is taken as offering S256 there."""
    methods = target.metadata.code_challenge_methods_supported
    if methods is None and target.legacy:
        return
    if not methods or "S256" not in methods:
        offered = ", ".join(methods or []) or "none"
        raise AuthorizationError(
            "authorization server metadata",
            f"{target.issuer} does not offer PKCE with S256 (code_challenge_methods_supported: {offered}); "
            "refusing to authorize without it",
        )


def _check_authorization_response(answer: Mapping[str, str], state: str, target: _Target) -> None:
    """The redirect back: ``state`` first (is it ours at all?), then ``iss`` (RFC 9207 §2.4, as MCP 2026-07-28's
    table says, compared as plain strings), then ``error``, then ``code``."""
    got_state = answer.get("state")
    if got_state is None or not hmac.compare_digest(got_state.encode(), state.encode()):
        raise AuthorizationError(
            "authorization", "the redirect back does not carry the state of this request: discarded"
        )
    iss = answer.get("iss")
    expected = target.metadata.issuer
    if iss is not None:
        if iss != expected:
            raise AuthorizationError(
                "authorization",
                f"the redirect back names the issuer {iss!r}, not {expected!r} (RFC 9207): discarded",
            )
    elif target.metadata.authorization_response_iss_parameter_supported:
        raise AuthorizationError(
            "authorization",
            f"{expected} promises an iss parameter in its answers (RFC 9207) and this one has none: discarded",
        )
    error = answer.get("error")
    if error is not None:
        description = answer.get("error_description")
        detail = f": {description[:200]}" if description else ""
        raise AuthorizationError("authorization", f"{expected} answered {error[:100]}{detail}")
    if not answer.get("code"):
        raise AuthorizationError("authorization", "the redirect back carries no authorization code")


def _application_type(redirect_uri: str) -> str:
    """The OpenID Connect ``application_type`` a redirect URI calls for (MCP 2026-07-28): ``native`` for a
    loopback one (desktop and command-line clients, local web apps), ``web`` for one served from another host."""
    return "native" if is_loopback_host(urlsplit(redirect_uri).hostname or "") else "web"


def _with_query(url: str, params: Mapping[str, str]) -> str:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query, quote_via=quote), ""))


class OAuth(httpx.Auth):
    """OAuth 2.1 authorization for the Streamable HTTP client, by the MCP authorization spec.

    Pass it as ``auth=`` to :meth:`Client.connect_http <jsonrpc_mcp.Client.connect_http>` (or to any
    ``httpx.AsyncClient``). One object can serve many connections and servers: tokens are kept per server URL,
    client registrations per authorization server.

    :param client_name: shown to the user by the authorization server (dynamic registration).
    :param client_id: a client registered in advance (pre-registration); used before anything else.
    :param client_secret: its secret, if it has one.
    :param client_issuer: the issuer of the authorization server ``client_id`` belongs to; when the server names
        another one, authorization fails instead of presenting the client there. Without it, the client is bound
        to the first authorization server it is used with.
    :param token_endpoint_auth_method: for ``client_id``: ``client_secret_basic``, ``client_secret_post`` or
        ``none`` (default: what the server supports, basic first, when there is a secret; ``none`` otherwise).
    :param client_metadata_url: the HTTPS URL where your client ID metadata document is served (see
        :func:`~jsonrpc_mcp.auth.client_metadata_document`); used as the ``client_id`` by servers that support it.
    :param client_metadata: extra fields for dynamic client registration (``client_uri``, ``logo_uri``…).
    :param application_type: ``"native"`` (desktop, CLI, local apps) or ``"web"`` (served from a host that is not
        local); by default the one the consent's redirect URI calls for: native for a loopback one, web otherwise.
    :param scopes: ask for these scopes (with any scope the server's challenge names) instead of the spec's choice.
    :param offline_access: ask for ``offline_access`` (a refresh token) when the authorization server lists it.
    :param store: where tokens and registrations are kept (:class:`~jsonrpc_mcp.auth.MemoryTokenStore` by default).
    :param consent: how the user's consent is obtained (:class:`~jsonrpc_mcp.auth.LoopbackConsent` by default).
    :param grant: how tokens are obtained (:class:`AuthorizationCode` by default; see the extensions).
    :param max_step_ups: new authorizations for more scope (403 ``insufficient_scope``) per request; after they
        are spent, the same scopes are not asked for again for five minutes (such requests fail at once).
    :param dpop: DPoP-bound tokens (RFC 9449; needs the ``auth`` extra): by default (None) when the resource asks
        for them and its authorization server supports them; ``True`` whenever the authorization server supports
        them (an error if it does not); ``False`` never. ``dpop_algorithm``: the proofs' JWS algorithm (ES256).
    :param allow_networks: networks (``"10.0.0.0/8"``, ``"127.0.0.1"``) the client may be sent to whatever the MCP
        server's own address. Without them, a server on a public address may send the client (for discovery,
        registration and tokens) to public addresses only, one on a private address to private ones too, and only
        one on loopback to loopback; each name is judged by the addresses it resolves to.
    :param allow_cleartext: send tokens to an ``http://`` MCP server that is not on loopback (by default refused
        before authorizing: anyone on the path could read and replay them).
    :param verify: TLS verification for the authorization server (``httpx`` ``verify``).
    :param timeout: for each request to the authorization server, seconds.
    """

    requires_request_body = False
    requires_response_body = False

    def __init__(
        self,
        *,
        client_name: str = "jsonrpc-mcp",
        client_id: str | None = None,
        client_secret: str | None = None,
        client_issuer: str | None = None,
        token_endpoint_auth_method: str | None = None,
        client_metadata_url: str | None = None,
        client_metadata: Mapping[str, Any] | None = None,
        application_type: str | None = None,
        scopes: Sequence[str] | None = None,
        offline_access: bool = True,
        store: TokenStore | None = None,
        consent: Consent | None = None,
        grant: Grant | None = None,
        max_step_ups: int = 2,
        dpop: bool | None = None,
        dpop_algorithm: str = "ES256",
        allow_networks: Sequence[str] = (),
        allow_cleartext: bool = False,
        verify: Any = True,
        timeout: float = 30.0,
    ) -> None:
        if client_secret is not None and client_id is None:
            raise ValueError("client_secret needs client_id")
        if token_endpoint_auth_method is not None and token_endpoint_auth_method not in _USABLE_METHODS:
            raise ValueError(f"token_endpoint_auth_method must be one of {', '.join(_USABLE_METHODS)}")
        if client_metadata_url is not None and not is_client_metadata_url(client_metadata_url):
            raise ValueError(f"client_metadata_url must be an HTTPS URL with a path, not {client_metadata_url!r}")
        if application_type not in (None, "native", "web"):
            raise ValueError("application_type must be 'native' or 'web'")
        if isinstance(scopes, str):  # (its letters would be asked for, one scope each)
            raise TypeError(f"scopes is a list of scopes, not a string: scopes={scopes.split()!r}")
        if dpop_algorithm not in DPOP_ALGORITHMS:
            raise ValueError(f"dpop_algorithm must be one of {', '.join(DPOP_ALGORITHMS)}, not {dpop_algorithm!r}")
        if isinstance(max_step_ups, bool) or not isinstance(max_step_ups, int) or max_step_ups < 0:
            raise ValueError(f"max_step_ups must be a whole number, zero or more, not {max_step_ups!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.client_name = client_name
        self.client_id = client_id
        self.client_secret = client_secret
        self.client_issuer = client_issuer
        self.token_endpoint_auth_method = token_endpoint_auth_method
        self.client_metadata_url = client_metadata_url
        self.client_metadata = dict(client_metadata or {})
        self.application_type = application_type
        self.scopes = list(scopes) if scopes is not None else None
        self.offline_access = offline_access
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        self._consent = consent
        self.grant: Grant = grant if grant is not None else AuthorizationCode()
        self.max_step_ups = max_step_ups
        self.allow_networks = parse_networks(allow_networks)
        self.allow_cleartext = allow_cleartext
        self.verify = verify
        self.timeout = timeout
        self.dpop = dpop
        self.dpop_algorithm = dpop_algorithm
        self._dpop_key: DPoPKey | None = None
        self._as_nonces: dict[str, str] = {}  # the last DPoP-Nonce of each authorization server (RFC 9449 §8)
        self._servers: dict[str, _ServerState] = {}
        self._network: Any = None  # the httpcore network backend that connects (None: httpcore's); for tests
        redact_http_logs()

    @property
    def consent(self) -> Consent:
        if self._consent is None:
            self._consent = LoopbackConsent()
        return self._consent

    # --- httpx.Auth --------------------------------------------------------------------------------------------

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raise RuntimeError("OAuth works with httpx.AsyncClient only")
        yield request  # pragma: no cover - makes this a generator

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        state = self._state(str(request.url))
        token = await self._usable_token(state, str(request.url))
        self._sign(request, token, state)
        response = yield request
        tries = _Tries()
        while True:
            nonce = response.headers.get("dpop-nonce")
            if nonce:
                state.dpop_nonce = nonce
            problem = _problem(response)
            if problem is None:
                return
            if problem == "dpop_nonce":  # the same token again, with a proof carrying the server's nonce
                tries.nonces += 1
                if tries.nonces > _MAX_NONCE_RETRIES or token is None or token.jkt is None:
                    return
            else:
                token = await self._recover(state, request, response, problem, token, tries)
            self._sign(request, token, state)
            response = yield request

    # --- tokens ----------------------------------------------------------------------------------------------

    def _state(self, url: str) -> _ServerState:
        key = canonical_resource(url)
        state = self._servers.get(key)
        if state is None:
            state = self._servers[key] = _ServerState(key)
        return state

    async def _load(self, state: _ServerState) -> None:
        if state.loaded:
            return
        state.loaded = True
        raw = await self.store.load(state.key)
        if raw is not None:
            try:
                state.token = msgspec.convert(raw, StoredToken)
            except msgspec.ValidationError:
                logger.warning("ignoring an unreadable stored token for %s", state.server_url)

    async def _usable_token(self, state: _ServerState, url: str) -> StoredToken | None:
        """The token to send with a request to ``url``: loaded from the store on first use, refreshed first when it
        has expired (and can be); None when there is none for this URL."""
        if not state.loaded:
            async with state.lock:
                await self._load(state)
        token = state.token
        if token is not None and token.expired() and token.refresh_token and token.token_endpoint:
            async with state.lock:
                if state.token is token:
                    async with self._http(state) as http:
                        await self._refresh(http, state, token, None)
            token = state.token
        if token is None or token.expired() or not resource_covers(token.url, url):
            return None
        if token.jkt is not None:
            key = self._dpop_key
            if key is None or key.thumbprint != token.jkt:
                key = await self._load_dpop_key(None)
            if key is None or key.thumbprint != token.jkt:
                return None  # bound to a key this client no longer has
        return token

    def _check_cleartext(self, url: httpx.URL) -> None:
        """A token never travels in cleartext (plain http) to a host that is not loopback, unless allowed."""
        if url.scheme == "http" and not is_loopback_host(url.host) and not self.allow_cleartext:
            raise AuthorizationError(
                "authorization",
                f"refusing to send a token in cleartext to {url.copy_with(query=None)} (plain http, not on "
                "loopback): use https, or OAuth(allow_cleartext=True)",
            )

    def _sign(self, request: httpx.Request, token: StoredToken | None, state: _ServerState) -> None:
        if token is None:
            return
        self._check_cleartext(request.url)
        if token.jkt is None:
            request.headers["Authorization"] = f"Bearer {token.access_token}"
            return
        key = self._dpop_key
        assert key is not None and key.thumbprint == token.jkt
        request.headers["Authorization"] = f"DPoP {token.access_token}"
        request.headers["DPoP"] = key.proof(
            request.method, str(request.url), access_token=token.access_token, nonce=state.dpop_nonce
        )

    async def _save(self, state: _ServerState, token: StoredToken | None) -> None:
        state.token = token
        if token is None:
            await self.store.delete(state.key)
        else:
            await self.store.save(state.key, msgspec.to_builtins(token))

    def _stored(
        self,
        response: TokenResponse,
        target: _Target,
        scope: str | None,
        old: StoredToken | None,
        dpop: DPoPKey | None,
    ) -> StoredToken:
        token_type = response.token_type.lower()
        if token_type == "dpop" and dpop is not None:
            jkt: str | None = dpop.thumbprint
        elif token_type == "bearer":
            jkt = None  # an authorization server may answer a DPoP proof with a Bearer token (RFC 9449 §5)
        else:
            raise AuthorizationError(
                "token request",
                f"{target.issuer} issued a token of type {response.token_type!r}, which this client cannot use",
            )
        lifetime = response.lifetime()
        return StoredToken(
            access_token=response.access_token,
            token_type="DPoP" if jkt is not None else "Bearer",
            jkt=jkt,
            expires_at=time.time() + lifetime if lifetime is not None else None,
            refresh_token=response.refresh_token or (old.refresh_token if old is not None else None),
            scope=response.scope if response.scope is not None else (scope or (old.scope if old else None)),
            url=target.url,
            resource=target.resource,
            issuer=target.issuer,
            token_endpoint=target.metadata.token_endpoint,
        )

    # --- after a 401 or 403 ------------------------------------------------------------------------------------

    async def _recover(
        self,
        state: _ServerState,
        request: httpx.Request,
        response: httpx.Response,
        problem: str,
        sent: StoredToken | None,
        tries: _Tries,
    ) -> StoredToken:
        url = str(request.url)
        self._check_cleartext(request.url)  # before authorizing: no token to be sent there is obtained
        challenge = _challenge(response)
        async with state.lock:
            await self._load(state)
            current = state.token
            if (
                problem == "unauthorized"
                and current is not None
                and current is not sent
                and not current.expired()
                and resource_covers(current.url, url)
            ):
                return current  # renewed by another request while this one waited
            if problem == "insufficient_scope":
                needed = challenge.get("scope") if challenge else None
                wanted = frozenset(split_scopes(needed))
                gave_up = state.failed_step_ups.get(wanted)
                if gave_up is not None and time.monotonic() - gave_up < _STEP_UP_PAUSE:
                    raise AuthorizationError(
                        "step-up authorization",
                        f"stepping up for the scope {needed or 'not said'} failed less than {_STEP_UP_PAUSE:.0f} s "
                        "ago; not asking the user again yet",
                    )
                tries.step_ups += 1
                if tries.step_ups > self.max_step_ups:
                    state.gave_up_stepping_up(wanted)
                    raise AuthorizationError(
                        "step-up authorization",
                        f"the server still answers 403 insufficient_scope (scope needed: {needed or 'not said'}) "
                        f"after {self.max_step_ups} step-up authorizations; giving up",
                    )
            elif tries.fresh:
                raise AuthorizationError(
                    "authorization", "the server answered HTTP 401 to the token it was just given; giving up"
                )
            async with self._http(state) as http:
                target = await self._discover(http, state, request, challenge)
                if current is not None and current.issuer != target.issuer:
                    logger.info(
                        "%s now names the authorization server %s (was %s): authorizing there",
                        state.server_url,
                        target.issuer,
                        current.issuer,
                    )
                    await self._save(state, None)
                    current = None
                if problem == "unauthorized" and current is not None and current.refresh_token and not tries.refreshed:
                    tries.refreshed = True
                    refreshed = await self._refresh(http, state, current, target)
                    if refreshed is not None:
                        return refreshed
                scope = self._select_scopes(state, target, challenge, problem == "insufficient_scope")
                token = await self._authorize(http, state, target, scope)
                tries.fresh = True
                return token

    def _select_scopes(
        self, state: _ServerState, target: _Target, challenge: Challenge | None, step_up: bool
    ) -> str | None:
        """The spec's order: the challenge's ``scope``, else the resource's ``scopes_supported``, else none; a user's
        ``scopes`` replace the last two. Re-authorizing (and stepping up) keeps what was asked before (MCP
        2026-07-28 step-up flow). ``offline_access`` is added when the authorization server lists it."""
        challenged = split_scopes(challenge.get("scope") if challenge else None)
        if self.scopes is not None:
            chosen = [*self.scopes, *challenged]
        elif challenged:
            chosen = challenged
        else:
            chosen = list(target.scopes_supported or [])
        granted = split_scopes(state.token.scope) if step_up and state.token is not None else []
        scopes = split_scopes(join_scopes(state.requested, granted, chosen))
        offered = target.metadata.scopes_supported or []
        if scopes and self.offline_access and self.grant.interactive and "offline_access" in offered:
            scopes = split_scopes(join_scopes(scopes, ["offline_access"]))
        state.requested = scopes
        return join_scopes(scopes)

    async def _authorize(
        self, http: httpx.AsyncClient, state: _ServerState, target: _Target, scope: str | None
    ) -> StoredToken:
        logger.info("authorizing with %s for %s", target.issuer, target.url)
        key = await self._load_dpop_key(target.dpop) if target.dpop is not None else None
        response = await self.grant.obtain(GrantContext(self, http, target, scope, key))
        token = self._stored(response, target, scope, None, key)
        await self._save(state, token)
        logger.info("authorized with %s (scope: %s)", target.issuer, token.scope or "not said")
        return token

    async def _refresh(
        self, http: httpx.AsyncClient, state: _ServerState, token: StoredToken, target: _Target | None
    ) -> StoredToken | None:
        """A new access token from the refresh token; None (and the tokens dropped) when the server refuses it."""
        endpoint = target.metadata.token_endpoint if target is not None else token.token_endpoint
        if not endpoint or not token.refresh_token:
            return None
        client = await self._known_client(token.issuer)
        if client is None:
            return None
        form = {"grant_type": "refresh_token", "refresh_token": token.refresh_token}
        if token.resource is not None:
            form["resource"] = token.resource
        key = None
        if token.jkt is not None:  # a DPoP-bound refresh token needs a proof by the same key
            key = await self._load_dpop_key(None)
            if key is None or key.thumbprint != token.jkt:
                await self._save(state, None)
                return None
        try:
            response = await self._token_request(http, endpoint, form, client, "token refresh", token.issuer, dpop=key)
        except _Refused as exc:  # the grant is no good there any more (a network failure is raised as it is)
            logger.info("refreshing the token failed (%s): authorizing again", exc.reason)
            await self._save(state, None)
            return None
        if target is None:
            target = _Target(
                issuer=token.issuer,
                metadata=AuthorizationServerMetadata(issuer=token.issuer, token_endpoint=endpoint),
                url=token.url,
                resource=token.resource,
                scopes_supported=None,
                legacy=token.resource is None,
            )
        refreshed = self._stored(response, target, token.scope, token, key)
        await self._save(state, refreshed)
        logger.info("refreshed the token from %s", token.issuer)
        return refreshed

    # --- discovery -------------------------------------------------------------------------------------------

    def _http(self, state: _ServerState) -> httpx.AsyncClient:
        """A client for the authorization server(s) of ``state``'s MCP server: redirects not followed, every
        connection judged by where that server may send this client (:mod:`~jsonrpc_mcp.auth.oauth_reach`)."""
        reach = Reach(state.server_url, self.allow_networks)
        return guarded_client(reach, timeout=self.timeout, verify=self.verify, network=self._network)

    async def _get_json(
        self, http: httpx.AsyncClient, url: str, headers: Mapping[str, str] | None = None
    ) -> tuple[int | None, dict[str, Any] | None, str]:
        """GET a JSON document: (status, the object or None, a short note for errors). No redirect is followed."""
        try:
            async with http.stream("GET", url, headers={"Accept": "application/json", **(headers or {})}) as response:
                body, whole = await read_limited(response, _MAX_BODY)
        except httpx.HTTPError as exc:
            return None, None, f"{url} could not be reached ({type(exc).__name__})"
        if not whole:
            return response.status_code, None, _too_long(url)
        document = decode_json_object(body) if response.status_code == 200 else None
        note = f"{url} answered HTTP {response.status_code}"
        if response.status_code == 200 and document is None:
            note = f"{url} answered something that is not a JSON object"
        return response.status_code, document, note

    async def _discover(
        self, http: httpx.AsyncClient, state: _ServerState, request: httpx.Request, challenge: Challenge | None
    ) -> _Target:
        server_url = state.server_url
        header_url = challenge.get("resource_metadata") if challenge is not None else None
        if header_url is not None and not (
            is_secure_endpoint(header_url) or origin_of(header_url) == origin_of(server_url)
        ):
            logger.warning("ignoring resource_metadata %s: neither HTTPS nor on the server's origin", header_url)
            header_url = None
        mcp_headers = {}
        version = _spoken_version(request)
        if version:
            mcp_headers["MCP-Protocol-Version"] = version  # (2025-03-26: "SHOULD" during metadata discovery)
        own_as = version is not None and version <= _SERVER_IS_ITS_OWN_AS
        failures: list[str] = []
        prm: ProtectedResourceMetadata | None = None
        prm_url = ""
        for url in protected_resource_metadata_urls(server_url, header_url):
            status, document, note = await self._get_json(http, url, mcp_headers)
            if document is not None:
                try:
                    prm = msgspec.convert(document, ProtectedResourceMetadata)
                except msgspec.ValidationError as exc:
                    raise AuthorizationError(
                        "protected resource metadata", f"{url} is not valid protected resource metadata: {exc}"
                    ) from None
                prm_url = url
                break
            if status is None or status >= 500 or status == 429 or status == 200:
                failures.append(note)
        if prm is None:
            if failures and not own_as:
                raise AuthorizationError("protected resource metadata", "; ".join(failures))
            if failures:
                logger.info(
                    "%s speaks %s, which has no protected resource metadata (%s)",
                    server_url,
                    version,
                    "; ".join(failures),
                )
            target = await self._legacy_target(http, server_url, mcp_headers, rfc8414_only=own_as)
        else:
            target = await self._prm_target(http, server_url, prm, prm_url)
        target.dpop = self._dpop_algorithm(target, challenge, prm)
        state.target = target
        return target

    def _dpop_algorithm(
        self, target: _Target, challenge: Challenge | None, prm: ProtectedResourceMetadata | None
    ) -> str | None:
        """Whether (and with which algorithm) tokens are to be DPoP-bound: with ``dpop=True`` whenever the
        authorization server supports it; by default (``dpop=None``) when it does and the resource asks for it (a
        ``DPoP`` challenge, or DPoP fields in its metadata); never with ``dpop=False``."""
        if self.dpop is False:
            return None
        offered = target.metadata.dpop_signing_alg_values_supported
        algorithm = choose_dpop_algorithm(offered, self.dpop_algorithm) if offered else None
        required = prm is not None and prm.dpop_bound_access_tokens_required
        asked = (challenge is not None and challenge.scheme == "dpop") or (
            prm is not None and (required or prm.dpop_signing_alg_values_supported is not None)
        )
        if algorithm is None and (self.dpop is True or required):
            raise AuthorizationError(
                "authorization server metadata",
                f"{target.issuer} does not offer DPoP with an algorithm this client signs with "
                f"(dpop_signing_alg_values_supported: {', '.join(offered or []) or 'none'})",
            )
        return algorithm if (self.dpop is True or asked) else None

    async def _load_dpop_key(self, algorithm: str | None) -> DPoPKey | None:
        """The DPoP key: kept in memory, in the store (so that stored tokens stay usable), or made now (when an
        ``algorithm`` is given; None: only an existing key)."""
        from .oauth_dpop import DPoPKey

        key = self._dpop_key
        if key is not None and algorithm in (None, key.algorithm):
            return key
        raw = await self.store.load("dpop key")
        if raw is not None and isinstance(raw.get("jwk"), dict) and algorithm in (None, raw.get("alg")):
            try:
                key = DPoPKey(str(raw.get("alg")), private_jwk=raw["jwk"])
            except (ValueError, TypeError, KeyError):
                key = None
            if key is not None:
                self._dpop_key = key
                return key
        if algorithm is None:
            return None
        key = DPoPKey(algorithm)
        await self.store.save("dpop key", {"alg": algorithm, "jwk": key.private_jwk()})
        self._dpop_key = key
        return key

    async def _prm_target(
        self, http: httpx.AsyncClient, server_url: str, prm: ProtectedResourceMetadata, prm_url: str
    ) -> _Target:
        if not resource_covers(prm.resource, server_url):
            raise AuthorizationError(
                "protected resource metadata",
                f"{prm_url} describes the resource {prm.resource}, which is not {server_url}: "
                "refusing to ask for a token for it (RFC 8707, RFC 9728 §3.3)",
            )
        if not prm.authorization_servers:
            raise AuthorizationError("protected resource metadata", f"{prm_url} names no authorization server")
        issuer = prm.authorization_servers[0]
        if not is_secure_endpoint(issuer):
            raise AuthorizationError(
                "protected resource metadata",
                f"the authorization server {issuer} is neither HTTPS nor on the loopback interface: refused",
            )
        metadata = await self._as_metadata(http, issuer, legacy=False)
        resource = canonical_resource(prm.resource)  # (as RFC 8707 §2 writes it, whatever case the server used)
        return _Target(
            issuer=issuer,
            metadata=metadata,
            url=resource,
            resource=resource,
            scopes_supported=prm.scopes_supported,
            legacy=False,
        )

    async def _legacy_target(
        self, http: httpx.AsyncClient, server_url: str, headers: Mapping[str, str], *, rfc8414_only: bool
    ) -> _Target:
        """MCP 2025-03-26: no protected resource metadata; the authorization server is the server's origin (the
        "authorization base URL": the server's URL without its path). ``rfc8414_only``: the server speaks
        2025-03-26, whose discovery is RFC 8414 alone (no OpenID Connect discovery before the default endpoints)."""
        issuer = origin_of(server_url)
        if not is_secure_endpoint(issuer):
            raise AuthorizationError(
                "authorization server metadata",
                f"the server {server_url} is its own authorization server (2025-03-26) and is neither HTTPS nor "
                "on the loopback interface: refused",
            )
        logger.info(
            "%s publishes no protected resource metadata: using %s as its authorization server", server_url, issuer
        )
        urls = [f"{issuer}/.well-known/oauth-authorization-server"] if rfc8414_only else None
        metadata = await self._as_metadata(http, issuer, legacy=True, headers=headers, urls=urls)
        return _Target(
            issuer=metadata.issuer,
            metadata=metadata,
            url=canonical_resource(server_url),
            resource=None,
            scopes_supported=None,
            legacy=True,
        )

    async def _as_metadata(
        self,
        http: httpx.AsyncClient,
        issuer: str,
        *,
        legacy: bool,
        headers: Mapping[str, str] | None = None,
        urls: Sequence[str] | None = None,
    ) -> AuthorizationServerMetadata:
        """The metadata of ``issuer``, from the first of ``urls`` (by default the spec's order for it) that has it;
        with ``legacy``, the 2025-03-26 default endpoints when none has."""
        urls = urls or authorization_server_metadata_urls(issuer)
        failures: list[str] = []
        for url in urls:
            status, document, note = await self._get_json(http, url, headers)
            if document is None:
                if status is None or status >= 500 or status == 429 or status == 200:
                    failures.append(note)
                continue
            try:
                metadata = msgspec.convert(document, AuthorizationServerMetadata)
            except msgspec.ValidationError as exc:
                raise AuthorizationError(
                    "authorization server metadata", f"{url} is not valid authorization server metadata: {exc}"
                ) from None
            accepted = (issuer, issuer + "/") if legacy else (issuer,)
            if metadata.issuer not in accepted:
                raise AuthorizationError(
                    "authorization server metadata",
                    f"{url} names the issuer {metadata.issuer!r}, not {issuer!r}: not using it (RFC 8414 §3.3)",
                )
            for name in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
                endpoint = getattr(metadata, name)
                if endpoint is not None and not is_secure_endpoint(endpoint):
                    raise AuthorizationError(
                        "authorization server metadata",
                        f"{issuer}'s {name} {endpoint} is neither HTTPS nor on the loopback interface: refused",
                    )
            return metadata
        if failures:
            raise AuthorizationError("authorization server metadata", "; ".join(failures))
        if legacy:
            logger.info("%s publishes no authorization server metadata: using /authorize, /token, /register", issuer)
            return AuthorizationServerMetadata(
                issuer=issuer,
                authorization_endpoint=f"{issuer}/authorize",
                token_endpoint=f"{issuer}/token",
                registration_endpoint=f"{issuer}/register",
            )
        raise AuthorizationError(
            "authorization server metadata",
            f"{issuer} publishes no metadata (tried {', '.join(urls)})",
        )

    # --- clients ---------------------------------------------------------------------------------------------

    def _preregistered(self, issuer: str, metadata: AuthorizationServerMetadata | None) -> ClientRegistration | None:
        if self.client_id is None:
            return None
        if self.client_issuer is None:
            self.client_issuer = issuer  # bound to the first authorization server it is used with
        if self.client_issuer != issuer:
            raise AuthorizationError(
                "client registration",
                f"the client {self.client_id} is registered with {self.client_issuer}, but the server now names "
                f"{issuer}: give the client_id of a client registered there",
            )
        method = self.token_endpoint_auth_method
        if method is None:
            supported = (metadata.token_endpoint_auth_methods_supported if metadata else None) or [
                "client_secret_basic"
            ]
            if self.client_secret is None:
                method = "none"
            else:
                method = next((m for m in _SECRET_METHODS if m in supported), "client_secret_basic")
        return ClientRegistration(
            client_id=self.client_id,
            client_secret=self.client_secret,
            token_endpoint_auth_method=method,
            issuer=issuer,
        )

    async def _stored_client(self, issuer: str) -> ClientRegistration | None:
        raw = await self.store.load(f"client {issuer}")
        if raw is None:
            return None
        try:
            client = msgspec.convert(raw, ClientRegistration)
        except msgspec.ValidationError:
            return None
        if client.issuer != issuer or client.secret_expired():
            return None
        return client

    async def _known_client(self, issuer: str) -> ClientAuth | None:
        """The client that obtained tokens from ``issuer`` (for refreshing them)."""
        if self.client_id is not None:
            return self._preregistered(issuer, None) if self.client_issuer in (None, issuer) else None
        from_grant = self.grant.client_for_refresh(self, issuer)
        if from_grant is not None:
            return from_grant
        stored = await self._stored_client(issuer)
        if stored is not None:
            return stored
        if self.client_metadata_url is not None:
            return ClientRegistration(client_id=self.client_metadata_url)
        return None

    async def _client_registration(
        self, http: httpx.AsyncClient, target: _Target, redirect_uri: str
    ) -> ClientRegistration:
        """The client to authorize as, in the spec's order: pre-registered, client ID metadata document, a
        registration kept from before, dynamic client registration."""
        meta = target.metadata
        preregistered = self._preregistered(target.issuer, meta)
        if preregistered is not None:
            return preregistered
        if self.client_metadata_url is not None and meta.client_id_metadata_document_supported:
            logger.info("using the client ID metadata document %s", self.client_metadata_url)
            return ClientRegistration(client_id=self.client_metadata_url, redirect_uris=[redirect_uri])
        stored = await self._stored_client(target.issuer)
        if stored is not None and redirect_uri in stored.redirect_uris:
            return stored
        if meta.registration_endpoint:
            return await self._register(http, target, redirect_uri)
        hint = (
            "; it supports client ID metadata documents: pass client_metadata_url"
            if meta.client_id_metadata_document_supported
            else ""
        )
        raise AuthorizationError(
            "client registration",
            f"{target.issuer} offers no dynamic client registration{hint}: register a client there and pass its "
            "client_id (and client_secret)",
        )

    async def _register(self, http: httpx.AsyncClient, target: _Target, redirect_uri: str) -> ClientRegistration:
        """RFC 7591 dynamic client registration (with ``application_type``: MCP 2026-07-28)."""
        endpoint = target.metadata.registration_endpoint
        assert endpoint is not None
        supported = target.metadata.token_endpoint_auth_methods_supported
        asked = (
            "none"
            if not supported or "none" in supported
            else next((m for m in _SECRET_METHODS if m in supported), None)
        )
        body: dict[str, Any] = {
            "client_name": self.client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "application_type": self.application_type or _application_type(redirect_uri),
        }
        if asked is not None:
            body["token_endpoint_auth_method"] = asked
        body.update(self.client_metadata)
        logger.info("registering a client with %s", target.issuer)
        response, document = await _post(
            http, endpoint, "client registration", json=body, headers={"Accept": "application/json"}
        )
        if response.status_code not in (200, 201) or document is None:
            raise AuthorizationError(
                "client registration", f"{endpoint} refused the registration: {_error_text(response, document)}"
            )
        client_id = document.get("client_id")
        secret = document.get("client_secret")
        if not isinstance(client_id, str) or not client_id:
            raise AuthorizationError("client registration", f"{endpoint} answered without a client_id")
        method = document.get("token_endpoint_auth_method")
        if not isinstance(method, str):
            method = "client_secret_basic" if isinstance(secret, str) else "none"
        if method not in _USABLE_METHODS:
            raise AuthorizationError(
                "client registration", f"{endpoint} registered the client for {method!r}, which this client cannot do"
            )
        if method in _SECRET_METHODS and not isinstance(secret, str):
            raise AuthorizationError(
                "client registration", f"{endpoint} registered the client for {method!r} but issued no client_secret"
            )
        expires = document.get("client_secret_expires_at")
        client = ClientRegistration(
            client_id=client_id,
            client_secret=secret if isinstance(secret, str) else None,
            client_secret_expires_at=expires if isinstance(expires, int) else None,
            token_endpoint_auth_method=method,
            redirect_uris=[redirect_uri],
            issuer=target.issuer,
        )
        await self.store.save(f"client {target.issuer}", msgspec.to_builtins(client))
        return client

    # --- the token endpoint ------------------------------------------------------------------------------------

    async def _token_request(
        self,
        http: httpx.AsyncClient,
        endpoint: str,
        form: dict[str, str],
        client: ClientAuth | None,
        step: str,
        issuer: str,
        *,
        offered: list[str] | None = None,
        dpop: DPoPKey | None = None,
    ) -> TokenResponse:
        """POST a token request (client authentication, a DPoP proof when ``dpop``; one retry with the server's
        nonce after ``use_dpop_nonce``, RFC 9449 §8) and read the token response."""
        if not is_secure_endpoint(endpoint):
            raise AuthorizationError(step, f"the token endpoint {endpoint} is neither HTTPS nor on loopback: refused")
        for attempt in range(2):
            headers = {"Accept": "application/json"}
            body = dict(form)
            if client is not None:
                client.apply(body, headers, issuer, offered)
            if dpop is not None:
                headers["DPoP"] = dpop.proof("POST", endpoint, nonce=self._as_nonces.get(issuer))
            response, document = await _post(http, endpoint, step, data=body, headers=headers)
            nonce = response.headers.get("dpop-nonce")
            if dpop is not None and nonce:
                self._as_nonces[issuer] = nonce
                if attempt == 0 and response.status_code == 400 and (document or {}).get("error") == "use_dpop_nonce":
                    continue
            break
        if response.status_code != 200 or document is None:
            refused = 400 <= response.status_code < 500 and document is not None and "error" in document
            kind = _Refused if refused else AuthorizationError
            raise kind(step, f"{endpoint} refused: {_error_text(response, document)}")
        try:
            return msgspec.convert(document, TokenResponse)
        except msgspec.ValidationError as exc:
            raise AuthorizationError(step, f"{endpoint} answered an invalid token response: {exc}") from None


def _spoken_version(request: httpx.Request) -> str | None:
    """The MCP revision a request speaks: its ``MCP-Protocol-Version`` header, else, for an ``initialize`` (sent
    before a version is agreed, without the header), the revision it offers."""
    version: str | None = request.headers.get("mcp-protocol-version")
    if version:
        return version
    try:
        body = request.content
    except httpx.RequestNotRead:  # a streamed body: not ours, not an initialize
        return None
    message = decode_json_object(body) if body else None
    if message is None or message.get("method") != "initialize":
        return None
    params = message.get("params")
    offered = params.get("protocolVersion") if isinstance(params, dict) else None
    return offered if isinstance(offered, str) and offered else None


def _challenge(response: httpx.Response) -> Challenge | None:
    """The OAuth challenge of a 401/403: the Bearer one (or DPoP), else the first."""
    challenges = parse_www_authenticate(response.headers.get_list("www-authenticate"))
    for challenge in challenges:
        if challenge.scheme in ("bearer", "dpop"):
            return challenge
    return challenges[0] if challenges else None


def _problem(response: httpx.Response) -> str | None:
    """What an answer asks of the client: ``"unauthorized"`` (401), ``"insufficient_scope"`` (a 403 saying so), or
    nothing."""
    status = response.status_code
    if status == 401:
        challenge = _challenge(response)
        if challenge is not None and challenge.get("error") == "use_dpop_nonce" and response.headers.get("dpop-nonce"):
            return "dpop_nonce"
        return "unauthorized"
    if status == 403:
        challenge = _challenge(response)
        if challenge is not None and challenge.get("error") == "insufficient_scope":
            return "insufficient_scope"
    return None


def _too_long(url: str) -> str:
    return f"{url} answered more than {_MAX_BODY} bytes: not read further"


async def _post(
    http: httpx.AsyncClient, endpoint: str, step: str, **options: Any
) -> tuple[httpx.Response, dict[str, Any] | None]:
    """POST to an authorization server endpoint: the answer and its JSON object (None when it is none), the body
    read up to :data:`_MAX_BODY` bytes; :class:`AuthorizationError` when it is unreachable or answers more."""
    try:
        async with http.stream("POST", endpoint, **options) as response:
            body, whole = await read_limited(response, _MAX_BODY)
    except httpx.HTTPError as exc:
        raise AuthorizationError(step, f"{endpoint} could not be reached ({type(exc).__name__})") from None
    if not whole:
        raise AuthorizationError(step, _too_long(endpoint))
    return response, decode_json_object(body)


def _error_text(response: httpx.Response, document: Mapping[str, Any] | None) -> str:
    """``HTTP 400: invalid_grant: description`` from an OAuth error answer (RFC 6749 §5.2), shortened."""
    text = f"HTTP {response.status_code}"
    if document is not None:
        error = document.get("error")
        description = document.get("error_description")
        if isinstance(error, str):
            text += f": {error[:100]}"
        if isinstance(description, str):
            text += f": {description[:200]}"
    return text
