"""MCP authorization, resource-server side: bearer tokens on Streamable HTTP (docs/authorization.md).

The verifiers need the ``auth`` extra (``pip install 'jsonrpc-mcp[auth]'``: joserfc and httpx); each name is
imported on first use, so ``import jsonrpc_mcp.auth`` costs nothing and a server without authorization never
loads them. stdio and sockets take no OAuth: their credentials come from the environment (the MCP spec's rule).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = (
    "AccessToken",
    "InvalidToken",
    "VerifierUnavailable",
    "TokenVerifier",
    "JwtVerifier",
    "JwksCache",
    "IntrospectionVerifier",
    "canonical_resource",
    "audience_matches",
    "missing_scopes",
)

if TYPE_CHECKING:
    from .introspection import IntrospectionVerifier
    from .jwt import JwksCache, JwtVerifier
    from .principal import (
        AccessToken,
        InvalidToken,
        TokenVerifier,
        VerifierUnavailable,
        audience_matches,
        canonical_resource,
        missing_scopes,
    )

_WHERE = {
    "AccessToken": "principal",
    "InvalidToken": "principal",
    "VerifierUnavailable": "principal",
    "TokenVerifier": "principal",
    "canonical_resource": "principal",
    "audience_matches": "principal",
    "missing_scopes": "principal",
    "JwtVerifier": "jwt",
    "JwksCache": "jwt",
    "IntrospectionVerifier": "introspection",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    except ImportError as exc:
        raise ImportError(
            f"jsonrpc_mcp.auth.{name} needs the auth extra: pip install 'jsonrpc-mcp[auth]' ({exc})"
        ) from exc
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
