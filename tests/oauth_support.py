"""A test authorization server and an MCP server protected by it, both plain ASGI apps served by uvicorn on
loopback (``http_support.ServerThread``), for the OAuth client tests.

``AuthServer`` is a test double whose every behaviour the tests can bend (metadata fields, the ``iss`` it sends,
what its token endpoint answers); it does implement the protocol for real: PKCE S256 is verified, codes are single
use, tokens are bound to the ``resource`` asked for, refresh tokens rotate, client secrets are checked by the
method the client registered with. It records every request it gets (``requests``), so tests can assert what the
client sent. ``ProtectedMcp`` puts the project's own ``McpAsgiApp`` behind bearer-token checks against it: 401 with
a ``WWW-Authenticate`` challenge, 403 ``insufficient_scope`` for tools that need more scope, protected resource
metadata at its well-known URIs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from http_support import ServerThread, make_server

from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


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
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": list(self.methods),
            "authorization_response_iss_parameter_supported": True,
        }
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
        request = Request(scope, await _body(receive))
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
        if client is not None and redirect not in client.get("redirect_uris", [redirect]):
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

    async def _token(self, request: Request, send: Send) -> None:
        form = request.form
        client_id, error = self._client_of(request)
        if client_id is None:
            await _respond(send, 401, {"error": "invalid_client", "error_description": error})
            return
        if form.get("grant_type") == "authorization_code":
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

    def _issue(self, client_id: str, scope: str, resource: str | None) -> dict[str, Any]:
        token = "at-" + secrets.token_urlsafe(16)
        self.tokens[token] = {"client_id": client_id, "scope": scope.split(), "resource": resource}
        answer: dict[str, Any] = {"access_token": token, "token_type": "Bearer", "expires_in": self.token_lifetime}
        if scope:
            answer["scope"] = scope
        if self.refresh_tokens:
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
    ) -> None:
        self.auth = auth
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
        body = await _body(receive)
        request = Request(scope, body)
        self.requests.append(request)
        header = request.headers.get("authorization", "")
        token = header[7:] if header.startswith("Bearer ") else None
        granted = self._check(token)
        if granted is None:
            challenge = self._challenge(scope=self.challenge_scope)
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

    def _check(self, token: str | None) -> list[str] | None:
        """The scopes of a valid token for this server (None: not valid here)."""
        if token is None:
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
        return list(grant["scope"])

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
