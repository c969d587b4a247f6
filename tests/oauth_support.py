"""A test authorization server and an MCP server protected by it, both plain ASGI apps served by uvicorn on
loopback (``http_support.ServerThread``), for the OAuth client tests.

``AuthServer`` is a test double whose every behaviour the tests can bend (metadata fields, the ``iss`` it sends,
what its token endpoint answers); it does implement the protocol for real: PKCE S256 is verified, codes are single
use, tokens are bound to the ``resource`` asked for, refresh tokens rotate, client secrets are checked by the
method the client registered with. It records every request it gets (``requests``), so tests can assert what the
client sent. ``ProtectedMcp`` puts the project's own ``McpAsgiApp`` behind bearer-token checks against it: 401 with
a ``WWW-Authenticate`` challenge, 403 ``insufficient_scope`` for tools that need more scope, protected resource
metadata at its well-known URIs.

The fixtures ``auth_server`` and ``mcp`` (imported by name) give a test a fresh pair, stopped after it; a module
sets ``AUTH_SERVER_OPTIONS`` or ``MCP_OPTIONS`` (keyword arguments of the two classes) to make them its own way.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import pytest
from http_support import ServerThread, make_server, read_body
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, Key, import_key

from jsonrpc_mcp.auth import HeadlessConsent, OAuth
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

#: Where the headless consent of the OAuth client tests says the authorization server redirects (nothing listens).
REDIRECT = "http://127.0.0.1:5999/callback"
HANDSHAKE = {"protocol_version": "2025-11-25"}


def oauth(**options: Any) -> OAuth:
    """The OAuth client of the tests: a headless consent (unless given), named "test client"."""
    options.setdefault("consent", HeadlessConsent(redirect_uri=REDIRECT))
    return OAuth(client_name="test client", **options)


Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def _respond(
    send: Send, status: int, body: Any = None, headers: Mapping[str, str] | None = None, *, text: bool = False
) -> None:
    raw = b"" if body is None else (body.encode() if text else json.dumps(body).encode())
    head = [(b"content-type", b"text/plain" if text else b"application/json")] if body is not None else []
    head += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": raw})


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode().lower(): v.decode() for k, v in scope["headers"]}


class Request:
    """One request the test servers received."""

    def __init__(self, scope: Scope, body: bytes) -> None:
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self.query = dict(parse_qsl(scope.get("query_string", b"").decode()))
        self.headers = _headers(scope)
        self.body = body
        content_type = self.headers.get("content-type", "")
        self.form = dict(parse_qsl(body.decode())) if "form" in content_type else {}
        self.json: Any = json.loads(body) if body and "json" in content_type else None

    def __repr__(self) -> str:
        return f"<{self.method} {self.path}>"


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


class AuthServer:
    """A small OAuth 2.1 authorization server (see the module docstring). ``prefix`` puts it under a path (an
    issuer with a path); ``metadata`` overrides or removes (value None) fields of its metadata document."""

    def __init__(
        self,
        *,
        prefix: str = "",
        metadata: Mapping[str, Any] | None = None,
        metadata_at: str = "oauth",  # "oauth" (RFC 8414 path insertion), "oidc" (path insertion) or "none"
        iss: str | None = "correct",  # "correct", "omit", or a value to send instead
        token_lifetime: int = 3600,
        refresh_tokens: bool = True,
        methods: tuple[str, ...] = ("none", "client_secret_basic", "client_secret_post"),
        registration_method: str | None = None,
        clients: Mapping[str, Mapping[str, Any]] | None = None,
        serve: bool = True,
        dpop: bool = False,
        dpop_nonce: str | None = None,
        assertion_issuers: Mapping[str, Key] | None = None,
    ) -> None:
        """``serve=False``: not served on a port of its own (mounted in a ``ProtectedMcp`` on its origin: set
        ``origin``)."""
        self.prefix = prefix
        self.overrides = dict(metadata or {})
        self.metadata_at = metadata_at
        self.iss = iss
        self.token_lifetime = token_lifetime
        self.refresh_tokens = refresh_tokens
        self.methods = methods
        self.registration_method = registration_method
        self.clients: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (clients or {}).items()}
        #: DPoP (RFC 9449): proofs at the token endpoint bind tokens; with ``dpop_nonce`` a proof must carry it
        self.dpop = dpop
        self.dpop_nonce = dpop_nonce
        #: JWT bearer grants: the issuer of an assertion -> the key its signature is checked with
        self.assertion_issuers: dict[str, Key] = dict(assertion_issuers or {})
        self.codes: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, dict[str, Any]] = {}
        self.refresh: dict[str, dict[str, Any]] = {}
        self.requests: list[Request] = []
        self.thread = ServerThread(self, lifespan="off") if serve else None
        self.mounted_at: str | None = None

    # --- helpers for tests ---

    @property
    def origin(self) -> str:
        if self.thread is None:
            assert self.mounted_at is not None
            return self.mounted_at
        return f"http://127.0.0.1:{self.thread.port}"

    @property
    def issuer(self) -> str:
        return self.origin + self.prefix

    def seen(self, path: str, method: str | None = None) -> list[Request]:
        return [r for r in self.requests if r.path == self.prefix + path and (method is None or r.method == method)]

    def revoke_access_tokens(self) -> None:
        self.tokens.clear()

    def stop(self) -> None:
        if self.thread is not None:
            self.thread.stop()

    def metadata(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": self.issuer + "/authorize",
            "token_endpoint": self.issuer + "/token",
            "registration_endpoint": self.issuer + "/register",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": list(self.methods),
            "authorization_response_iss_parameter_supported": True,
            "grant_types_supported": [
                "authorization_code",
                "refresh_token",
                "client_credentials",
                "urn:ietf:params:oauth:grant-type:jwt-bearer",
            ],
            "token_endpoint_auth_signing_alg_values_supported": ["ES256", "RS256"],
        }
        if self.dpop:
            document["dpop_signing_alg_values_supported"] = ["ES256", "RS256"]
        for key, value in self.overrides.items():
            if value is None:
                document.pop(key, None)
            else:
                document[key] = value
        return document

    def metadata_paths(self) -> list[str]:
        if self.metadata_at == "oauth":
            return [f"/.well-known/oauth-authorization-server{self.prefix}"]
        if self.metadata_at == "oidc":
            return [f"/.well-known/openid-configuration{self.prefix}"]
        return []

    # --- ASGI ---

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, await read_body(receive))
        self.requests.append(request)
        path = request.path
        if path in self.metadata_paths() and request.method == "GET":
            await _respond(send, 200, self.metadata())
        elif path == self.prefix + "/authorize":
            await self._authorize(request, send)
        elif path == self.prefix + "/token" and request.method == "POST":
            await self._token(request, send)
        elif path == self.prefix + "/register" and request.method == "POST":
            await self._register(request, send)
        else:
            await _respond(send, 404, {"error": "not_found"})

    async def _authorize(self, request: Request, send: Send) -> None:
        query = request.query
        client = self.clients.get(query.get("client_id", ""))
        redirect = query.get("redirect_uri", "")
        if client is None and not query.get("client_id", "").startswith("https://"):
            await _respond(send, 400, "unknown client", text=True)
            return
        allowed = client.get("redirect_uris") if client is not None else None
        if allowed is not None and redirect not in allowed:  # None: any (a pre-registered loopback client)
            await _respond(send, 400, "redirect_uri not registered", text=True)
            return
        answer: dict[str, str] = {}
        if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            answer["error"] = "invalid_request"
        else:
            code = secrets.token_urlsafe(16)
            scope = query.get("scope", "").split()
            offered = self.overrides.get("scopes_supported")
            if offered is not None:  # grants only what it offers
                scope = [s for s in scope if s in offered]
            self.codes[code] = {
                "client_id": query["client_id"],
                "challenge": query["code_challenge"],
                "redirect_uri": redirect,
                "scope": " ".join(scope),
                "resource": query.get("resource"),
            }
            answer["code"] = code
        if "state" in query:
            answer["state"] = query["state"]
        if self.iss == "correct":
            answer["iss"] = self.issuer
        elif self.iss is not None and self.iss != "omit":
            answer["iss"] = self.iss
        await _respond(send, 302, None, {"location": f"{redirect}?{urlencode(answer)}"})

    def _client_of(self, request: Request) -> tuple[str | None, str | None]:
        """(client_id, error) from the token request's client authentication."""
        auth = request.headers.get("authorization", "")
        form = request.form
        if form.get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            return self._assertion_client(form.get("client_assertion", ""))
        if auth.startswith("Basic "):
            client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            client_id, secret, method = unquote(client_id), unquote(secret), "client_secret_basic"
        elif "client_secret" in form:
            client_id, secret, method = form.get("client_id", ""), form["client_secret"], "client_secret_post"
        else:
            client_id, secret, method = form.get("client_id", ""), None, "none"
        if client_id.startswith("https://"):
            return client_id, None  # a client ID metadata document URL: a public client
        client = self.clients.get(client_id)
        if client is None:
            return None, "unknown client"
        if client.get("method", "none") != method or client.get("secret") != secret:
            return None, f"the client authenticates with {client.get('method')}, not {method}"
        return client_id, None

    def _assertion_client(self, assertion: str) -> tuple[str | None, str | None]:
        """private_key_jwt (RFC 7523 §2.2): iss = sub = a client with a public key, aud = this issuer."""
        try:
            unverified = json.loads(base64.urlsafe_b64decode(assertion.split(".")[1] + "=="))
            client = self.clients[unverified["iss"]]
            claims = jwt.decode(assertion, client["public_key"], algorithms=["ES256", "RS256"]).claims
        except (ValueError, KeyError, IndexError, JoseError) as exc:
            return None, f"bad client assertion: {exc}"
        if claims.get("sub") != claims["iss"] or claims.get("aud") != self.issuer:
            return None, "client assertion with the wrong sub or aud"
        return str(claims["iss"]), None

    def _dpop_proof(self, request: Request) -> tuple[str | None, dict[str, Any] | None]:
        """(the proof key's thumbprint, None) or (None, an error answer)."""
        proof = request.headers.get("dpop")
        if proof is None:
            return None, None
        try:
            header = json.loads(base64.urlsafe_b64decode(proof.split(".")[0] + "=="))
            key = import_key(header["jwk"])
            claims = jwt.decode(proof, key, algorithms=["ES256", "RS256"]).claims
        except (ValueError, KeyError, IndexError, JoseError) as exc:
            return None, {"error": "invalid_dpop_proof", "error_description": str(exc)}
        if (
            header.get("typ") != "dpop+jwt"
            or claims.get("htm") != "POST"
            or claims.get("htu") != self.issuer + "/token"
        ):
            return None, {"error": "invalid_dpop_proof"}
        if self.dpop_nonce is not None and claims.get("nonce") != self.dpop_nonce:
            return None, {"error": "use_dpop_nonce"}
        return key.thumbprint(), None

    async def _token(self, request: Request, send: Send) -> None:
        form = request.form
        client_id, error = self._client_of(request)
        if client_id is None and form.get("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            client_id, error = "", None  # a JWT bearer grant needs no client authentication
        if client_id is None:
            await _respond(send, 401, {"error": "invalid_client", "error_description": error})
            return
        self.jkt = None
        if self.dpop:
            jkt, problem = self._dpop_proof(request)
            if problem is not None:
                await _respond(send, 400, problem, {"dpop-nonce": self.dpop_nonce or ""})
                return
            self.jkt = jkt
        if form.get("grant_type") == "client_credentials":
            await _respond(
                send, 200, self._issue(client_id, form.get("scope", ""), form.get("resource"), refresh=False)
            )
        elif form.get("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            await self._jwt_bearer(form, client_id, send)
        elif form.get("grant_type") == "authorization_code":
            grant = self.codes.pop(form.get("code", ""), None)
            if grant is None or grant["client_id"] != client_id or grant["redirect_uri"] != form.get("redirect_uri"):
                await _respond(send, 400, {"error": "invalid_grant"})
                return
            if s256(form.get("code_verifier", "")) != grant["challenge"]:
                await _respond(send, 400, {"error": "invalid_grant", "error_description": "PKCE failed"})
                return
            if form.get("resource") != grant["resource"]:
                await _respond(send, 400, {"error": "invalid_target"})
                return
            await _respond(send, 200, self._issue(client_id, grant["scope"], grant["resource"]))
        elif form.get("grant_type") == "refresh_token":
            grant = self.refresh.pop(form.get("refresh_token", ""), None)
            if grant is None or grant["client_id"] != client_id:
                await _respond(send, 400, {"error": "invalid_grant"})
                return
            await _respond(send, 200, self._issue(client_id, grant["scope"], grant["resource"]))
        else:
            await _respond(send, 400, {"error": "unsupported_grant_type"})

    async def _jwt_bearer(self, form: dict[str, str], client_id: str, send: Send) -> None:
        """RFC 7523 §2.1: an assertion from a trusted issuer, for this server (``aud``); an ID-JAG also names the
        client it was issued to, which must be the one authenticating, and the resource."""
        assertion = form.get("assertion", "")
        try:
            unverified = json.loads(base64.urlsafe_b64decode(assertion.split(".")[1] + "=="))
            header = json.loads(base64.urlsafe_b64decode(assertion.split(".")[0] + "=="))
            key = self.assertion_issuers[unverified["iss"]]
            claims = jwt.decode(assertion, key, algorithms=["ES256", "RS256"]).claims
        except (ValueError, KeyError, IndexError, JoseError) as exc:
            await _respond(send, 400, {"error": "invalid_grant", "error_description": f"bad assertion: {exc}"})
            return
        if claims.get("aud") != self.issuer:
            await _respond(send, 400, {"error": "invalid_grant", "error_description": "wrong audience"})
            return
        resource = form.get("resource")
        if header.get("typ") == "oauth-id-jag+jwt":
            if claims.get("client_id") != client_id:
                await _respond(send, 400, {"error": "invalid_grant", "error_description": "not your ID-JAG"})
                return
            resource = claims.get("resource")
        await _respond(
            send, 200, self._issue(client_id or str(claims["sub"]), form.get("scope", ""), resource, refresh=False)
        )

    def _issue(self, client_id: str, scope: str, resource: str | None, *, refresh: bool = True) -> dict[str, Any]:
        token = "at-" + secrets.token_urlsafe(16)
        jkt = getattr(self, "jkt", None)
        self.tokens[token] = {"client_id": client_id, "scope": scope.split(), "resource": resource, "jkt": jkt}
        answer: dict[str, Any] = {"access_token": token, "token_type": "DPoP" if jkt else "Bearer"}
        answer["expires_in"] = self.token_lifetime
        if scope:
            answer["scope"] = scope
        if self.refresh_tokens and refresh:
            refresh = "rt-" + secrets.token_urlsafe(16)
            self.refresh[refresh] = {"client_id": client_id, "scope": scope, "resource": resource}
            answer["refresh_token"] = refresh
        return answer

    async def _register(self, request: Request, send: Send) -> None:
        body = request.json or {}
        if not body.get("redirect_uris"):
            await _respond(send, 400, {"error": "invalid_redirect_uri"})
            return
        method = self.registration_method or body.get("token_endpoint_auth_method") or "client_secret_basic"
        client_id = "client-" + secrets.token_urlsafe(8)
        client: dict[str, Any] = {"method": method, "redirect_uris": body["redirect_uris"]}
        answer: dict[str, Any] = {"client_id": client_id, "token_endpoint_auth_method": method, **body}
        answer["token_endpoint_auth_method"] = method
        if method != "none":
            client["secret"] = answer["client_secret"] = "secret-" + secrets.token_urlsafe(8)
        self.clients[client_id] = client
        await _respond(send, 201, answer)


class ProtectedMcp:
    """The project's MCP app behind bearer tokens of ``auth`` (an :class:`AuthServer`, or a callable returning the
    current one, for a server that moves to another authorization server).

    ``scopes``: method or ``tools/call:NAME`` -> the scopes it needs (a 403 ``insufficient_scope`` otherwise).
    ``prm``: where its protected resource metadata is served: "path" (path-aware), "root", "none" (2025-03-26);
    ``challenge``: whether the 401 names ``resource_metadata`` (and ``scope``, with ``challenge_scope``).
    """

    def __init__(
        self,
        auth: AuthServer | Callable[[], AuthServer] | None,
        *,
        scopes: Mapping[str, list[str]] | None = None,
        scopes_supported: list[str] | None = None,
        prm: str = "path",
        challenge: bool = True,
        challenge_scope: str | None = None,
        resource: str | None = None,
        accept: Callable[[str], bool] | None = None,
        dpop_nonce: str | None = None,
        dpop_challenge: bool | None = None,
    ) -> None:
        self.auth = auth
        #: whether its 401 challenge is a DPoP one (None: when its authorization server does DPoP)
        self.dpop_challenge = dpop_challenge
        #: with a nonce, DPoP proofs must carry it (RFC 9449 §9); the jti of every proof seen (replays refused)
        self.dpop_nonce = dpop_nonce
        self.jtis: set[str] = set()
        self.scopes = dict(scopes or {})
        self.scopes_supported = scopes_supported
        self.prm = prm
        self.challenge = challenge
        self.challenge_scope = challenge_scope
        self.resource = resource
        self.accept = accept
        self.inner = McpAsgiApp(make_server())
        self.requests: list[Request] = []
        self.thread = ServerThread(self, lifespan="on")
        mounted = self.current_auth()
        if mounted is not None and mounted.thread is None:
            mounted.mounted_at = self.origin

    @property
    def url(self) -> str:
        return self.thread.url

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.thread.port}"

    def current_auth(self) -> AuthServer | None:
        return self.auth() if callable(self.auth) and not isinstance(self.auth, AuthServer) else self.auth

    def stop(self) -> None:
        self.thread.stop()

    def prm_document(self) -> dict[str, Any]:
        auth = self.current_auth()
        assert auth is not None
        document: dict[str, Any] = {
            "resource": self.resource or (self.url if self.prm == "path" else self.origin),
            "authorization_servers": [auth.issuer],
        }
        if self.scopes_supported is not None:
            document["scopes_supported"] = self.scopes_supported
        return document

    def _challenge(self, error: str | None = None, scope: str | None = None) -> str:
        parts = []
        if error:
            parts.append(f'error="{error}"')
        if scope:
            parts.append(f'scope="{scope}"')
        if self.challenge and self.prm != "none":
            where = "/mcp" if self.prm == "path" else ""
            parts.append(f'resource_metadata="{self.origin}/.well-known/oauth-protected-resource{where}"')
        return "Bearer " + ", ".join(parts) if parts else "Bearer"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        path = scope["path"]
        if scope["method"] == "GET" and path.startswith("/.well-known/oauth-protected-resource"):
            wanted = {
                "path": "/.well-known/oauth-protected-resource/mcp",
                "root": "/.well-known/oauth-protected-resource",
            }
            if wanted.get(self.prm) == path:
                await _respond(send, 200, self.prm_document())
            else:
                await _respond(send, 404, {"error": "not_found"})
            return
        if path.startswith("/.well-known/") or path in ("/authorize", "/token", "/register"):
            auth = self.current_auth()
            if self.prm == "none" and auth is not None and auth.origin == self.origin:
                await auth(scope, receive, send)
            else:
                await _respond(send, 404, {"error": "not_found"})
            return
        body = await read_body(receive)
        request = Request(scope, body)
        self.requests.append(request)
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        granted = self._check(token or None, scheme, request)
        if granted == "nonce":
            challenge = f'DPoP error="use_dpop_nonce", {self._challenge()[7:]}'
            headers = {"www-authenticate": challenge, "dpop-nonce": self.dpop_nonce or ""}
            await _respond(send, 401, {"error": "use_dpop_nonce"}, headers)
            return
        if granted is None or isinstance(granted, str):
            auth = self.current_auth()
            challenge = self._challenge(scope=self.challenge_scope)
            dpop = self.dpop_challenge if self.dpop_challenge is not None else (auth is not None and auth.dpop)
            if dpop:
                challenge = "DPoP " + challenge[7:]
            await _respond(send, 401, {"error": "invalid_token"}, {"www-authenticate": challenge})
            return
        needed = self._needed(request)
        missing = [s for s in needed if s not in granted]
        if missing:
            challenge = self._challenge("insufficient_scope", " ".join(needed))
            await _respond(send, 403, {"error": "insufficient_scope"}, {"www-authenticate": challenge})
            return
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.inner(scope, replay, send)

    def _check(self, token: str | None, scheme: str, request: Request) -> list[str] | str | None:
        """The scopes of a valid token for this server (None: not valid here; "nonce": a DPoP proof without the
        nonce asked for)."""
        if token is None or scheme not in ("Bearer", "DPoP"):
            return None
        if self.accept is not None:
            return [] if self.accept(token) else None
        auth = self.current_auth()
        grant = auth.tokens.get(token) if auth is not None else None
        if grant is None:
            return None
        resource = grant["resource"]
        if resource is not None and not self.url.startswith(resource):
            return None  # a token for another resource (RFC 8707)
        if grant.get("jkt") is not None or scheme == "DPoP":
            verdict = self._check_proof(token, grant.get("jkt"), request)
            if verdict is not None:
                return verdict
        return list(grant["scope"])

    def _check_proof(self, token: str, jkt: str | None, request: Request) -> str | None:
        """None when the request's DPoP proof binds it to the token's key, else why not (RFC 9449 §4.3, §7)."""
        proof = request.headers.get("dpop")
        if proof is None or jkt is None or not request.headers.get("authorization", "").startswith("DPoP "):
            return "unbound"
        try:
            header = json.loads(base64.urlsafe_b64decode(proof.split(".")[0] + "=="))
            key = import_key(header["jwk"])
            claims = jwt.decode(proof, key, algorithms=["ES256", "RS256"]).claims
        except (ValueError, KeyError, IndexError, JoseError):
            return "bad proof"
        ath = base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()
        if key.thumbprint() != jkt or claims.get("ath") != ath or claims.get("jti") in self.jtis:
            return "bad proof"
        if claims.get("htm") != request.method or claims.get("htu") != self.url:
            return "bad proof"
        self.jtis.add(str(claims.get("jti")))
        if self.dpop_nonce is not None and claims.get("nonce") != self.dpop_nonce:
            return "nonce"
        return None

    def _needed(self, request: Request) -> list[str]:
        if not request.body:
            return []
        try:
            message = json.loads(request.body)
        except ValueError:
            return []
        if not isinstance(message, dict):
            return []
        method = message.get("method", "")
        params = message.get("params") or {}
        if method == "tools/call":
            specific = self.scopes.get(f"tools/call:{params.get('name')}")
            if specific is not None:
                return specific
        return self.scopes.get(method, [])


def redirect_target(location: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(location).query))


class IdentityProvider:
    """An enterprise identity provider's token endpoint for the identity assertion grant (ID-JAG): an RFC 8693
    token exchange of a known ID token for an ID-JAG (``typ: oauth-id-jag+jwt``) naming the authorization server
    (``aud``), the resource and the client it is for, signed with its key (which ``AuthServer`` trusts)."""

    def __init__(self, id_token: str, client_of_as: str) -> None:
        self.id_token = id_token
        self.client_of_as = client_of_as
        self.key = ECKey.generate_key("P-256")
        self.requests: list[Request] = []
        self.thread = ServerThread(self, lifespan="off")

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.thread.port}"

    def stop(self) -> None:
        self.thread.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, await read_body(receive))
        self.requests.append(request)
        form = request.form
        if (
            request.path != "/token"
            or form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange"
            or form.get("requested_token_type") != "urn:ietf:params:oauth:token-type:id-jag"
            or form.get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token"
            or not form.get("audience")
            or not form.get("resource")
        ):
            await _respond(send, 400, {"error": "invalid_request"})
            return
        if form.get("subject_token") != self.id_token:
            await _respond(send, 400, {"error": "invalid_grant"})
            return
        claims = {
            "iss": self.issuer,
            "sub": "alice",
            "aud": form["audience"],
            "resource": form["resource"],
            "client_id": self.client_of_as,
            "jti": secrets.token_urlsafe(8),
        }
        id_jag = jwt.encode({"alg": "ES256", "typ": "oauth-id-jag+jwt"}, claims, self.key)
        answer = {"access_token": id_jag, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"}
        await _respond(send, 200, {**answer, "token_type": "N_A"})


@pytest.fixture
def auth_server(request: pytest.FixtureRequest) -> Iterator[AuthServer]:
    """An :class:`AuthServer` of the test's own (the module's ``AUTH_SERVER_OPTIONS``), stopped after it."""
    server = AuthServer(**getattr(request.module, "AUTH_SERVER_OPTIONS", {}))
    yield server
    server.stop()


@pytest.fixture
def mcp(request: pytest.FixtureRequest, auth_server: AuthServer) -> Iterator[ProtectedMcp]:
    """A :class:`ProtectedMcp` behind ``auth_server`` (the module's ``MCP_OPTIONS``), stopped after the test."""
    app = ProtectedMcp(auth_server, **getattr(request.module, "MCP_OPTIONS", {}))
    yield app
    app.stop()
