"""MCP authorization (docs/authorization.md).

Resource-server side: bearer tokens on Streamable HTTP. The verifiers need the ``auth`` extra
(``pip install -e '.[auth]'`` in a checkout: joserfc and httpx).

Client side: :class:`OAuth`, an ``httpx.Auth`` that authorizes by itself when a server answers 401
(``Client.connect_http(url, auth=OAuth(...))``), with its token stores and consent helpers; it needs the ``http``
extra (the ``auth`` extra too for its JOSE-based extensions: private_key_jwt, DPoP).

Each name is imported on first use, so ``import jsonrpc_mcp.auth`` costs nothing and a server without
authorization never loads them. stdio and sockets take no OAuth: their credentials come from the environment (the
MCP spec's rule).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import MissingExtra

__all__ = (
    "AccessToken",
    "InvalidToken",
    "VerifierUnavailable",
    "TokenVerifier",
    "JwtVerifier",
    "JwksCache",
    "IntrospectionVerifier",
    "ProtectedResource",
    "DPoP",
    "canonical_resource",
    "audience_matches",
    "missing_scopes",
    # client side
    "OAuth",
    "Grant",
    "GrantContext",
    "AuthorizationCode",
    "StoredToken",
    "ClientRegistration",
    "Consent",
    "LoopbackConsent",
    "HeadlessConsent",
    "TokenStore",
    "MemoryTokenStore",
    "FileTokenStore",
    "client_metadata_document",
    "ClientAuth",
    "ClientCredentials",
    "JwtBearer",
    "EnterpriseManaged",
    "PrivateKeyJwt",
    "DPoPKey",
)

if TYPE_CHECKING:
    from .dpop import DPoP
    from .introspection import IntrospectionVerifier
    from .jwt import JwksCache, JwtVerifier
    from .oauth_client import (
        AuthorizationCode,
        ClientAuth,
        ClientRegistration,
        Grant,
        GrantContext,
        OAuth,
        StoredToken,
    )
    from .oauth_consent import Consent, HeadlessConsent, LoopbackConsent
    from .oauth_dpop import DPoPKey
    from .oauth_grants import ClientCredentials, EnterpriseManaged, JwtBearer, PrivateKeyJwt
    from .oauth_store import FileTokenStore, MemoryTokenStore, TokenStore
    from .oauth_wire import client_metadata_document
    from .principal import (
        AccessToken,
        InvalidToken,
        TokenVerifier,
        VerifierUnavailable,
        audience_matches,
        canonical_resource,
        missing_scopes,
    )
    from .resource import ProtectedResource

_WHERE = {
    "AccessToken": "principal",
    "InvalidToken": "principal",
    "VerifierUnavailable": "principal",
    "TokenVerifier": "principal",
    "canonical_resource": "principal",
    "audience_matches": "principal",
    "missing_scopes": "principal",
    "JwtVerifier": "jwt",
    "DPoP": "dpop",
    "JwksCache": "jwt",
    "IntrospectionVerifier": "introspection",
    "OAuth": "oauth_client",
    "Grant": "oauth_client",
    "GrantContext": "oauth_client",
    "AuthorizationCode": "oauth_client",
    "StoredToken": "oauth_client",
    "ClientRegistration": "oauth_client",
    "Consent": "oauth_consent",
    "LoopbackConsent": "oauth_consent",
    "HeadlessConsent": "oauth_consent",
    "TokenStore": "oauth_store",
    "MemoryTokenStore": "oauth_store",
    "FileTokenStore": "oauth_store",
    "client_metadata_document": "oauth_wire",
    "ClientAuth": "oauth_client",
    "ClientCredentials": "oauth_grants",
    "JwtBearer": "oauth_grants",
    "EnterpriseManaged": "oauth_grants",
    "PrivateKeyJwt": "oauth_grants",
    "DPoPKey": "oauth_dpop",
    "ProtectedResource": "resource",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    except ImportError as exc:
        extra = "auth" if module in ("oauth_dpop", "oauth_grants") or not module.startswith("oauth_") else "http"
        raise ImportError(f"jsonrpc_mcp.auth.{name}: {MissingExtra.install(extra)} ({exc})") from exc
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
