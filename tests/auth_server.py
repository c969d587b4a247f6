"""A real OAuth 2.1 authorization server for the authorization tests, on authlib's server parts (a dev dependency).

It does what an MCP client meets in the wild, over real HTTP (uvicorn on loopback, see ``http_support``):

* RFC 8414 metadata at ``/.well-known/oauth-authorization-server`` (with ``code_challenge_methods_supported``);
* RFC 7591 dynamic client registration at ``/register`` (open, public and confidential clients);
* the authorization code grant with PKCE (S256, required) at ``/authorize`` — the resource owner, ``alice``,
  consents at once, so no browser is needed — and ``/token``;
* RFC 8707 resource indicators: the ``resource`` of the authorization request becomes the token's ``aud``;
* JWT access tokens (RFC 9068, ``at+jwt``) signed with RS256 by default, the key set at ``/jwks`` (RSA, EC and
  OKP keys, so ES256 and EdDSA tokens can be minted too);
* RFC 7662 introspection at ``/introspect`` for confidential clients (HTTP Basic), with revocation.

Tests also mint tokens directly (:meth:`AuthServer.mint`), add and rotate keys, and count key set fetches.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from authlib.oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload, JsonPayload, JsonRequest, OAuth2Request
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator
from http_support import ServerThread
from joserfc import jwt
from joserfc.jwk import ECKey, Key, KeySet, OKPKey, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

# authlib refuses plain-http request URLs unless told otherwise; this server only ever listens on loopback.
os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")

USER = "alice"


@dataclass
class Client(ClientMixin):  # type: ignore[misc]
    client_id: str
    client_secret: str | None
    metadata: dict[str, Any]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        uris = self.metadata.get("redirect_uris") or []
        return uris[0] if uris else None

    def get_allowed_scope(self, scope: str | None) -> str:
        return scope or ""  # every scope the server knows may be asked for; none asked: none granted

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in (self.metadata.get("redirect_uris") or [])

    def check_client_secret(self, client_secret: str) -> bool:
        return self.client_secret is not None and secrets.compare_digest(self.client_secret, client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if endpoint == "token":
            return method == self.metadata.get("token_endpoint_auth_method", "client_secret_basic")
        return method == "client_secret_basic" and self.client_secret is not None

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in (self.metadata.get("grant_types") or ["authorization_code"])


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    code_challenge: str | None
    code_challenge_method: str | None
    resource: str | None

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class User:
    id: str
    resource: str | None = None  # the resource of the code this user was authenticated by (the token's aud)

    def get_user_id(self) -> str:
        return self.id


@dataclass
class IssuedToken:
    access_token: str
    claims: dict[str, Any]
    revoked: bool = False

    def is_expired(self) -> bool:
        return bool(self.claims.get("exp", 0) <= time.time())

    def is_revoked(self) -> bool:
        return self.revoked

    def check_client(self, client: Client) -> bool:
        return True


@dataclass
class AuthServer:
    """The server's state (clients, codes, tokens, keys); :meth:`app` is its ASGI app."""

    issuer: str = ""
    clients: dict[str, Client] = field(default_factory=dict)
    codes: dict[str, Code] = field(default_factory=dict)
    tokens: dict[str, IssuedToken] = field(default_factory=dict)
    keys: list[Key] = field(default_factory=list)
    jwks_fetches: int = 0
    jwks_down: bool = False  # the key set endpoint answers 503 (an outage)
    scopes: list[str] = field(default_factory=lambda: ["notes:read", "notes:write", "notes:admin"])

    def __post_init__(self) -> None:
        if not self.keys:
            self.keys = [
                RSAKey.generate_key(2048, {"kid": "rsa-1", "alg": "RS256", "use": "sig"}),
                ECKey.generate_key("P-256", {"kid": "ec-1", "alg": "ES256", "use": "sig"}),
                OKPKey.generate_key("Ed25519", {"kid": "okp-1", "use": "sig"}),
            ]

    # --- what the tests do directly ----------------------------------------------------------------------------

    def key(self, kid: str) -> Key:
        return next(k for k in self.keys if k.kid == kid)

    def mint(
        self,
        *,
        aud: str | list[str] | None,
        scope: str = "",
        sub: str | None = USER,
        client_id: str | None = "test-client",
        expires_in: int = 3600,
        kid: str = "rsa-1",
        alg: str | None = None,
        header: dict[str, Any] | None = None,
        register: bool = True,
        **claims: Any,
    ) -> str:
        """A JWT access token signed with key ``kid`` (claims default to a good token; override any of them, or
        leave it out with None)."""
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": self.issuer,
            "sub": sub,
            "client_id": client_id,
            "scope": scope,
            "iat": now,
            "exp": now + expires_in,
            "jti": secrets.token_hex(8),
        }
        if aud is not None:
            body["aud"] = aud
        body.update(claims)
        body = {name: value for name, value in body.items() if value is not None}  # (None: the claim is left out)
        key = self.key(kid)
        algorithm = alg or key.get("alg") or "EdDSA"
        token = jwt.encode({"alg": algorithm, "kid": kid, "typ": "at+jwt", **(header or {})}, body, key, [algorithm])
        if register:
            self.tokens[token] = IssuedToken(token, body)
        return token

    def add_key(self, key: Key) -> None:
        self.keys.append(key)

    def public_jwks(self) -> dict[str, Any]:
        return dict(KeySet(self.keys).as_dict(private=False))

    def register_client(self, metadata: dict[str, Any], *, confidential: bool = True) -> Client:
        client = Client(secrets.token_hex(8), secrets.token_hex(16) if confidential else None, metadata)
        self.clients[client.client_id] = client
        return client

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "registration_endpoint": f"{self.issuer}/register",
            "introspection_endpoint": f"{self.issuer}/introspect",
            "jwks_uri": f"{self.issuer}/jwks",
            "scopes_supported": self.scopes,
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "introspection_endpoint_auth_methods_supported": ["client_secret_basic"],
        }

    # --- the HTTP side ----------------------------------------------------------------------------------------------

    def app(self) -> Starlette:
        oauth = _Server(self)

        async def well_known(request: Request) -> Response:
            return JSONResponse(self.metadata())

        async def jwks(request: Request) -> Response:
            self.jwks_fetches += 1
            if self.jwks_down:
                return JSONResponse({"error": "temporarily_unavailable"}, status_code=503)
            return JSONResponse(self.public_jwks())

        async def register(request: Request) -> Response:
            return oauth.answer(oauth.create_endpoint_response("client_registration", await _json(request)))

        async def authorize(request: Request) -> Response:
            req = _form(request, dict(request.query_params))
            try:
                grant = oauth.get_consent_grant(req, end_user=User(USER))
            except Exception as exc:  # an authlib OAuth2Error: shown to the "user"
                return JSONResponse({"error": getattr(exc, "error", "invalid_request")}, status_code=400)
            return oauth.answer(oauth.create_authorization_response(req, grant_user=User(USER), grant=grant))

        async def token(request: Request) -> Response:
            return oauth.answer(oauth.create_token_response(_form(request, dict(await request.form()))))

        async def introspect(request: Request) -> Response:
            req = _form(request, dict(await request.form()))
            return oauth.answer(oauth.create_endpoint_response("introspection", req))

        return Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", well_known),
                Route("/jwks", jwks),
                Route("/register", register, methods=["POST"]),
                Route("/authorize", authorize),
                Route("/token", token, methods=["POST"]),
                Route("/introspect", introspect, methods=["POST"]),
            ]
        )


# --- authlib's server, fitted to Starlette and to AuthServer's state ------------------------------------------------


def _form(request: Request, data: dict[str, Any]) -> OAuth2Request:
    req = OAuth2Request(request.method, str(request.url), headers=request.headers)
    req.payload = BasicOAuth2Payload(data)
    req._body = data  # authlib reads ``form`` for the token and introspection parameters
    return req


class _JsonBody(JsonPayload):  # type: ignore[misc]
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @property
    def data(self) -> dict[str, Any]:
        return self._data


async def _json(request: Request) -> JsonRequest:
    req = JsonRequest(request.method, str(request.url), request.headers)
    try:
        body = await request.json()
    except ValueError:
        body = {}
    req.payload = _JsonBody(body if isinstance(body, dict) else {})
    return req


class _Server(AuthorizationServer):  # type: ignore[misc]
    def __init__(self, state: AuthServer) -> None:
        super().__init__(scopes_supported=state.scopes)
        self.state = state
        self.register_grant(_CodeGrant, [CodeChallenge(required=True)])
        self.register_token_generator("default", _Tokens(state))
        self.register_endpoint(_Registration(self))
        self.register_endpoint(_Introspection(self))

    def query_client(self, client_id: str) -> Client | None:
        return self.state.clients.get(client_id)

    def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
        access = token["access_token"]
        self.state.tokens[access] = IssuedToken(access, jwt.decode(access, KeySet(self.state.keys)).claims)

    def create_oauth2_request(self, request: OAuth2Request) -> OAuth2Request:
        return request

    def create_json_request(self, request: JsonRequest) -> JsonRequest:
        return request

    def handle_response(self, status: int, body: Any, headers: Any) -> tuple[int, Any, Any]:
        return status, body, headers

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass

    def answer(self, outcome: tuple[int, Any, Any]) -> Response:
        status, body, headers = outcome
        header_map = dict(headers or [])
        if status in (301, 302, 303, 307):
            return Response(status_code=status, headers=header_map)
        return JSONResponse(
            body, status_code=status, headers={k: v for k, v in header_map.items() if k != "Content-Type"}
        )


class _CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"]

    def save_authorization_code(self, code: str, request: OAuth2Request) -> None:
        data = request.payload.data
        self.server.state.codes[code] = Code(
            code=code,
            client_id=request.client.get_client_id(),
            redirect_uri=data.get("redirect_uri", ""),
            scope=request.payload.scope or "",
            code_challenge=data.get("code_challenge"),
            code_challenge_method=data.get("code_challenge_method"),
            resource=data.get("resource"),
        )

    def query_authorization_code(self, code: str, client: Client) -> Code | None:
        found = self.server.state.codes.get(code)
        return found if found is not None and found.client_id == client.get_client_id() else None

    def delete_authorization_code(self, authorization_code: Code) -> None:
        self.server.state.codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code: Code) -> User:
        resource = self.request.payload.data.get("resource") or authorization_code.resource
        return User(USER, resource)


class _Tokens(JWTBearerTokenGenerator):  # type: ignore[misc]
    def __init__(self, state: AuthServer) -> None:
        super().__init__(issuer=state.issuer, alg="RS256")
        self.state = state
        self.issuer = state.issuer

    def get_jwks(self) -> dict[str, Any]:
        return dict(KeySet([self.state.key("rsa-1")]).as_dict(private=True))

    def get_audiences(self, client: Client, user: User | None, scope: str) -> str | list[str]:
        if user is not None and user.resource:
            return user.resource  # RFC 8707: the token is for the resource the client named
        return str(client.get_client_id())

    def generate(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.issuer = self.state.issuer  # the issuer is known once the server listens
        return dict(super().generate(*args, **kwargs))


class _Registration(ClientRegistrationEndpoint):  # type: ignore[misc]
    def authenticate_token(self, request: JsonRequest) -> bool:
        return True  # open registration

    def get_server_metadata(self) -> dict[str, Any]:
        return self.server.state.metadata()  # type: ignore[no-any-return]

    def save_client(self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any) -> Client:
        public = client_metadata.get("token_endpoint_auth_method") == "none"
        client = Client(client_info["client_id"], None if public else client_info["client_secret"], client_metadata)
        self.server.state.clients[client.client_id] = client
        return client

    def generate_client_info(self, request: JsonRequest) -> dict[str, Any]:
        info = dict(super().generate_client_info(request))
        if request.payload.data.get("token_endpoint_auth_method") == "none":
            info.pop("client_secret", None)
            info.pop("client_secret_expires_at", None)
        return info


class _Introspection(IntrospectionEndpoint):  # type: ignore[misc]
    def query_token(self, token_string: str, token_type_hint: str | None) -> IssuedToken | None:
        return self.server.state.tokens.get(token_string)  # type: ignore[no-any-return]

    def introspect_token(self, token: IssuedToken) -> dict[str, Any]:
        return {"active": True, "token_type": "Bearer", **token.claims}

    def check_permission(self, token: IssuedToken, client: Client, request: OAuth2Request) -> bool:
        return True


def start_auth_server() -> tuple[AuthServer, ServerThread]:
    """The authorization server under uvicorn on a free loopback port (its issuer is its base URL)."""
    state = AuthServer()
    thread = ServerThread(state.app())
    state.issuer = f"http://127.0.0.1:{thread.port}"
    return state, thread


@contextmanager
def running_auth_server() -> Iterator[AuthServer]:
    state, thread = start_auth_server()
    try:
        yield state
    finally:
        thread.stop()
