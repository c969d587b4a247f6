"""Grants without a browser (L6), the MCP authorization extensions: client credentials (with a client secret or
``private_key_jwt``), the JWT bearer grant of workload identity federation, and enterprise-managed authorization
(an identity assertion exchanged at the enterprise's identity provider for an ID-JAG, then for an access token).

Each is a :class:`~jsonrpc_mcp.auth.Grant` for ``OAuth(grant=...)``; discovery, the ``resource`` parameter, scope
selection, token storage and refresh are the :class:`~jsonrpc_mcp.auth.OAuth` ones::

    auth = OAuth(grant=ClientCredentials("my-service", client_secret=secret))
    auth = OAuth(grant=ClientCredentials("my-service", private_key=pem))           # private_key_jwt (auth extra)
    auth = OAuth(grant=JwtBearer(read_workload_token, client_id="my-workload"))    # workload identity federation
    auth = OAuth(grant=EnterpriseManaged(identity_assertion=id_token, idp_token_endpoint=..., client_id=..., ...))

A failed token request is reported, never retried with another grant.
"""

from __future__ import annotations

import inspect
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

from ..errors import AuthorizationError
from .oauth_client import ClientAuth, ClientRegistration, GrantContext, OAuth
from .oauth_wire import TokenResponse, is_secure_endpoint

__all__ = ("ClientCredentials", "JwtBearer", "EnterpriseManaged", "PrivateKeyJwt")

JWT_BEARER: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG: Final = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN: Final = "urn:ietf:params:oauth:token-type:id_token"
CLIENT_ASSERTION_TYPE: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
_ASSERTION_LIFETIME: Final = 300

Credential = str | Callable[[], str | Awaitable[str]]


async def _resolve(value: Credential) -> str:
    """A credential given as a string, or read when needed from a (sync or async) function."""
    if isinstance(value, str):
        return value
    result = value()
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, str) or not result:
        raise AuthorizationError("token request", "the assertion function returned no token")
    return result


def _secret_method(metadata_methods: list[str] | None, explicit: str | None) -> str:
    """``client_secret_basic`` unless the server supports only ``client_secret_post`` (or one was named)."""
    if explicit is not None:
        return explicit
    if metadata_methods and "client_secret_basic" not in metadata_methods and "client_secret_post" in metadata_methods:
        return "client_secret_post"
    return "client_secret_basic"


class _Bound:
    """Credentials bound to one authorization server (MCP 2026-07-28: credentials are associated with the issuer
    that issued them and never presented to another): the ``issuer`` configured, else the first one used."""

    issuer: str | None

    def _bind(self, issuer: str) -> None:
        """Bind to ``issuer`` on first use; :class:`AuthorizationError` (nothing sent) when bound to another."""
        if self.issuer is None:
            self.issuer = issuer
        elif self.issuer != issuer:
            raise AuthorizationError(
                "client registration",
                f"these credentials are bound to the authorization server {self.issuer}, but the server now names "
                f"{issuer}: not presenting them there (give credentials registered with {issuer})",
            )

    def _bound_to(self, issuer: str) -> bool:
        return self.issuer in (None, issuer)


def _pem_key_type(pem: str | bytes) -> Literal["RSA", "EC", "OKP"]:
    """The JWK key type of a PEM private key (read with cryptography, which joserfc is built on)."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(pem.encode() if isinstance(pem, str) else pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"private_key is not an unencrypted PEM private key ({type(exc).__name__})") from None
    if isinstance(key, rsa.RSAPrivateKey):
        return "RSA"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return "EC"
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return "OKP"
    raise ValueError(f"a {type(key).__name__} cannot sign a private_key_jwt assertion")


class PrivateKeyJwt:
    """``private_key_jwt`` client authentication (RFC 7523 §2.2): a short-lived JWT signed with the client's key,
    ``iss`` and ``sub`` the client id, ``aud`` the authorization server's issuer identifier (JOSE from joserfc, the
    ``auth`` extra).

    :param private_key: a PEM string (or bytes), a JWK dict, or a joserfc key.
    :param algorithm: the JWS algorithm; by default the one the key's type calls for (ES256 for P-256, ES384,
        ES512, RS256 for RSA), or what the server lists in ``token_endpoint_auth_signing_alg_values_supported``.
    """

    def __init__(self, client_id: str, private_key: Any, algorithm: str | None = None) -> None:
        try:
            from joserfc.jwk import import_key
        except ImportError:  # pragma: no cover - the auth extra is missing
            raise ImportError("private_key_jwt needs joserfc: install the auth extra") from None
        self.client_id = client_id
        if hasattr(private_key, "thumbprint"):  # already a joserfc key
            self._key: Any = private_key
        elif isinstance(private_key, dict):
            self._key = import_key(private_key)
        else:
            self._key = import_key(private_key, _pem_key_type(private_key))
        self.algorithm = algorithm

    def _algorithm(self, offered: list[str] | None) -> str:
        if self.algorithm is not None:
            return self.algorithm
        key_type = self._key.key_type
        if key_type == "EC":
            candidates = [{"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}.get(self._key.curve_name, "ES256")]
        elif key_type == "RSA":
            candidates = ["RS256", "PS256", "RS384", "RS512"]
        else:
            raise AuthorizationError("token request", f"a {key_type} key cannot sign a private_key_jwt assertion here")
        for candidate in candidates:
            if not offered or candidate in offered:
                return candidate
        raise AuthorizationError(
            "token request",
            f"the authorization server accepts assertions signed with {', '.join(offered or [])}, not {candidates[0]}",
        )

    def assertion(self, audience: str, offered: list[str] | None = None) -> str:
        from joserfc import jwt

        now = int(time.time())
        claims = {
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": audience,
            "jti": secrets.token_urlsafe(24),
            "iat": now,
            "exp": now + _ASSERTION_LIFETIME,
        }
        algorithm = self._algorithm(offered)
        return jwt.encode({"alg": algorithm, "typ": "JWT"}, claims, self._key, algorithms=[algorithm])

    def apply(self, form: dict[str, str], headers: dict[str, str], issuer: str, offered: list[str] | None) -> None:
        form["client_assertion_type"] = CLIENT_ASSERTION_TYPE
        form["client_assertion"] = self.assertion(issuer, offered)


class ClientCredentials(_Bound):
    """The client credentials grant (the ``io.modelcontextprotocol/oauth-client-credentials`` extension): the
    client acts on its own behalf, no person involved.

    :param client_secret: authenticate with ``client_secret_basic`` (``client_secret_post`` when the server takes
        only that, or with ``token_endpoint_auth_method``);
    :param private_key: or with ``private_key_jwt`` (:class:`PrivateKeyJwt`; ``signing_algorithm`` to force one).
    :param issuer: the issuer of the authorization server the client is registered with; without it, the grant is
        bound to the first one it is used with. Another is refused before anything is sent to it.
    """

    interactive = False

    def __init__(
        self,
        client_id: str,
        client_secret: str | None = None,
        *,
        private_key: Any = None,
        signing_algorithm: str | None = None,
        token_endpoint_auth_method: str | None = None,
        issuer: str | None = None,
    ) -> None:
        if (client_secret is None) == (private_key is None):
            raise ValueError("give exactly one of client_secret and private_key")
        self.issuer = issuer
        self.client_id = client_id
        self.client_secret = client_secret
        self.token_endpoint_auth_method = token_endpoint_auth_method
        self._jwt = PrivateKeyJwt(client_id, private_key, signing_algorithm) if private_key is not None else None

    def _auth(self, methods: list[str] | None) -> ClientAuth:
        if self._jwt is not None:
            return self._jwt
        method = _secret_method(methods, self.token_endpoint_auth_method)
        return ClientRegistration(
            client_id=self.client_id, client_secret=self.client_secret, token_endpoint_auth_method=method
        )

    async def obtain(self, context: GrantContext) -> TokenResponse:
        self._bind(context.issuer)
        form = {"grant_type": "client_credentials"}
        if context.scope:
            form["scope"] = context.scope
        if context.resource is not None:
            form["resource"] = context.resource
        return await context.token_request(form, self._auth(context.metadata.token_endpoint_auth_methods_supported))

    def client_for_refresh(self, oauth: OAuth, issuer: str) -> ClientAuth | None:
        return self._auth(None) if self._bound_to(issuer) else None


class JwtBearer(_Bound):
    """The JWT bearer grant (RFC 7523 §2.1) for workload identity federation: the workload's identity token, issued
    by its platform for the authorization server, is the assertion. No retry and no other grant after a refusal.

    :param assertion: the JWT, or a function (sync or async) that returns a fresh one each time it is needed
        (platform tokens are short-lived: read the projected token file, ask the metadata server…).
    :param client_id: sent when the authorization server wants the client identified (``none`` authentication),
        with ``client_secret`` for ``client_secret_basic``.
    :param issuer: the issuer of the authorization server the assertion is for; without it, the grant is bound to
        the first one it is used with. Another is refused before the assertion is read or anything sent to it.
    """

    interactive = False

    def __init__(
        self,
        assertion: Credential,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        issuer: str | None = None,
    ) -> None:
        self.issuer = issuer
        self.assertion = assertion
        self.client_id = client_id
        self.client_secret = client_secret

    def _auth(self, methods: list[str] | None) -> ClientAuth | None:
        if self.client_id is None:
            return None
        if self.client_secret is None:
            return ClientRegistration(client_id=self.client_id, token_endpoint_auth_method="none")
        method = _secret_method(methods, None)
        return ClientRegistration(
            client_id=self.client_id, client_secret=self.client_secret, token_endpoint_auth_method=method
        )

    async def obtain(self, context: GrantContext) -> TokenResponse:
        self._bind(context.issuer)
        form = {"grant_type": JWT_BEARER, "assertion": await _resolve(self.assertion)}
        if context.scope:
            form["scope"] = context.scope
        if context.resource is not None:
            form["resource"] = context.resource
        return await context.token_request(form, self._auth(context.metadata.token_endpoint_auth_methods_supported))

    def client_for_refresh(self, oauth: OAuth, issuer: str) -> ClientAuth | None:
        return self._auth(None) if self._bound_to(issuer) else None


class EnterpriseManaged(_Bound):
    """Enterprise-managed authorization (the ``io.modelcontextprotocol/enterprise-managed-authorization``
    extension): the user's identity assertion from the enterprise IdP (an OpenID Connect ID token, or a SAML
    assertion) is exchanged at the IdP for an ID-JAG (RFC 8693 token exchange, ``audience`` the authorization
    server's issuer, ``resource`` the MCP server), then the ID-JAG for an access token (RFC 7523 JWT bearer grant)
    with the client's credentials at the MCP server's authorization server. The user is never sent to that server.

    :param identity_assertion: the ID token (or SAML assertion), or a function returning a current one.
    :param idp_token_endpoint: the IdP's token endpoint.
    :param client_id: the client at the MCP server's authorization server, ``client_secret`` its secret
        (``client_secret_basic``).
    :param idp_client_id: the client at the IdP (``idp_client_secret`` when it has a secret there).
    :param assertion_type: ``urn:ietf:params:oauth:token-type:id_token`` (default) or ``…:saml2``.
    :param issuer: the issuer of the MCP server's authorization server; without it, the grant is bound to the first
        one it is used with. Another is refused before the IdP is asked for an ID-JAG for it.
    """

    interactive = False

    def __init__(
        self,
        *,
        identity_assertion: Credential,
        idp_token_endpoint: str,
        client_id: str,
        client_secret: str | None = None,
        idp_client_id: str | None = None,
        idp_client_secret: str | None = None,
        assertion_type: str = ID_TOKEN,
        token_endpoint_auth_method: str | None = None,
        issuer: str | None = None,
    ) -> None:
        if not is_secure_endpoint(idp_token_endpoint):
            raise ValueError(f"the IdP token endpoint must be HTTPS (or HTTP on loopback): {idp_token_endpoint!r}")
        self.issuer = issuer
        self.identity_assertion = identity_assertion
        self.idp_token_endpoint = idp_token_endpoint
        self.client_id = client_id
        self.client_secret = client_secret
        self.idp_client_id = idp_client_id
        self.idp_client_secret = idp_client_secret
        self.assertion_type = assertion_type
        self.token_endpoint_auth_method = token_endpoint_auth_method

    def _auth(self, methods: list[str] | None) -> ClientAuth:
        if self.client_secret is None:
            return ClientRegistration(client_id=self.client_id, token_endpoint_auth_method="none")
        method = _secret_method(methods, self.token_endpoint_auth_method)
        return ClientRegistration(
            client_id=self.client_id, client_secret=self.client_secret, token_endpoint_auth_method=method
        )

    def _idp_auth(self) -> ClientAuth | None:
        if self.idp_client_id is None:
            return None
        if self.idp_client_secret is None:
            return ClientRegistration(client_id=self.idp_client_id, token_endpoint_auth_method="none")
        return ClientRegistration(
            client_id=self.idp_client_id,
            client_secret=self.idp_client_secret,
            token_endpoint_auth_method="client_secret_basic",
        )

    async def obtain(self, context: GrantContext) -> TokenResponse:
        self._bind(context.issuer)
        exchange = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG,
            "audience": context.issuer,
            "resource": context.resource if context.resource is not None else context.target.url,
            "subject_token": await _resolve(self.identity_assertion),
            "subject_token_type": self.assertion_type,
        }
        if context.scope:
            exchange["scope"] = context.scope
        answer = await context.oauth._token_request(
            context.http,
            self.idp_token_endpoint,
            exchange,
            self._idp_auth(),
            "identity assertion exchange",
            self.idp_token_endpoint,
        )
        if answer.issued_token_type not in (None, ID_JAG):
            raise AuthorizationError(
                "identity assertion exchange", f"the IdP issued a {answer.issued_token_type}, not an ID-JAG"
            )
        grant = {"grant_type": JWT_BEARER, "assertion": answer.access_token}
        if context.scope:
            grant["scope"] = context.scope
        return await context.token_request(grant, self._auth(context.metadata.token_endpoint_auth_methods_supported))

    def client_for_refresh(self, oauth: OAuth, issuer: str) -> ClientAuth | None:
        return self._auth(None) if self._bound_to(issuer) else None
