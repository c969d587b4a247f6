"""OAuth 2.1 for MCP clients, the sans-I/O part (L2): the metadata documents, ``WWW-Authenticate`` challenges,
discovery URLs, resource identifiers, PKCE and scope selection. Pure functions and msgspec Structs; the flow
that uses them is :mod:`jsonrpc_mcp.auth.oauth_client`.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Iterable, Sequence
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit
from urllib.request import parse_http_list

import msgspec

from ..addresses import is_loopback_host

__all__ = (
    "Challenge",
    "ProtectedResourceMetadata",
    "AuthorizationServerMetadata",
    "TokenResponse",
    "parse_www_authenticate",
    "canonical_resource",
    "resource_covers",
    "origin_of",
    "is_secure_endpoint",
    "protected_resource_metadata_urls",
    "authorization_server_metadata_urls",
    "pkce_pair",
    "new_state",
    "join_scopes",
    "split_scopes",
    "decode_json_object",
    "is_client_metadata_url",
    "client_metadata_document",
    "DPOP_ALGORITHMS",
    "choose_dpop_algorithm",
)

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class Challenge(msgspec.Struct, frozen=True):
    """One challenge of a ``WWW-Authenticate`` header: its scheme (lower case) and auth-params (names lower case)."""

    scheme: str
    params: dict[str, str]

    def get(self, name: str) -> str | None:
        return self.params.get(name)


class ProtectedResourceMetadata(msgspec.Struct, kw_only=True):
    """RFC 9728 protected resource metadata (the fields a client uses; others are ignored)."""

    resource: str
    authorization_servers: list[str] = []
    scopes_supported: list[str] | None = None
    bearer_methods_supported: list[str] | None = None
    dpop_signing_alg_values_supported: list[str] | None = None
    dpop_bound_access_tokens_required: bool = False


class AuthorizationServerMetadata(msgspec.Struct, kw_only=True):
    """RFC 8414 / OpenID Connect Discovery metadata (the fields a client uses; others are ignored)."""

    issuer: str
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    registration_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    response_types_supported: list[str] | None = None
    grant_types_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None
    token_endpoint_auth_signing_alg_values_supported: list[str] | None = None
    code_challenge_methods_supported: list[str] | None = None
    authorization_response_iss_parameter_supported: bool = False
    client_id_metadata_document_supported: bool = False
    dpop_signing_alg_values_supported: list[str] | None = None
    # OpenID Connect Discovery §3 (required there, absent from plain OAuth servers)
    id_token_signing_alg_values_supported: list[str] | None = None
    subject_types_supported: list[str] | None = None

    def is_openid_provider(self) -> bool:
        """Whether the server is an OpenID provider (its metadata has the fields OpenID Connect Discovery requires,
        or it offers the ``openid`` scope): one that issues refresh tokens for ``offline_access`` only with
        ``prompt=consent`` (OpenID Connect Core §11)."""
        return (
            self.id_token_signing_alg_values_supported is not None
            or self.subject_types_supported is not None
            or "openid" in (self.scopes_supported or ())
        )


class TokenResponse(msgspec.Struct, kw_only=True):
    """A successful token endpoint answer (RFC 6749 §5.1). ``expires_in`` may come as a string from some servers."""

    access_token: str
    token_type: str
    expires_in: int | float | str | None = None
    refresh_token: str | None = None
    scope: str | None = None
    issued_token_type: str | None = None  # RFC 8693 token exchange answers

    def lifetime(self) -> float | None:
        """``expires_in`` in seconds, or None when absent or unreadable."""
        value = self.expires_in
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                return None
        return float(value) if value is not None and value > 0 else None


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        inner = value[1:-1]
        out: list[str] = []
        escaped = False
        for char in inner:
            if escaped:
                out.append(char)
                escaped = False
            elif char == "\\":
                escaped = True
            else:
                out.append(char)
        return "".join(out)
    return value


def parse_www_authenticate(values: Iterable[str]) -> list[Challenge]:
    """Every challenge of the given ``WWW-Authenticate`` header values (RFC 9110 §11.6.1).

    The comma-separated list is split with the standard library (quoted strings kept whole); an element whose
    first word is followed by a space, and not by ``=``, starts a new challenge (``scope = "a b"``, with the
    optional whitespace RFC 9110 allows around ``=``, is a parameter). A token68 challenge keeps no params.
    """
    challenges: list[Challenge] = []
    for value in values:
        scheme: str | None = None
        params: dict[str, str] = {}
        for item in parse_http_list(value):
            item = item.strip()
            head, space, rest = item.partition(" ")
            if space and "=" not in head and not rest.lstrip().startswith("="):
                # "Scheme name=value" (or "Scheme token68"): a new challenge; "name = value" (RFC 9110's BWS) is not
                if scheme is not None:
                    challenges.append(Challenge(scheme, params))
                scheme, params = head.lower(), {}
                item = rest.strip()
            elif item and "=" not in item:  # a bare scheme: "Bearer"
                if scheme is not None:
                    challenges.append(Challenge(scheme, params))
                scheme, params = item.lower(), {}
                continue
            name, eq, raw = item.partition("=")
            if scheme is not None and eq and raw.strip("= ") and name.strip() and " " not in name.strip():
                params[name.strip().lower()] = _unquote(raw)
        if scheme is not None:
            challenges.append(Challenge(scheme, params))
    return challenges


def is_secure_endpoint(url: str) -> bool:
    """Whether an authorization-server URL may be used: HTTPS, or plain HTTP on the loopback interface only."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    if not parts.hostname or parts.fragment:
        return False
    return scheme == "https" or (scheme == "http" and is_loopback_host(parts.hostname))


def _port(scheme: str, port: int | None) -> int | None:
    return None if port == _DEFAULT_PORTS.get(scheme) else port


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower case, the default port left out."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = _port(scheme, parts.port)
    return f"{scheme}://{host}" + (f":{port}" if port is not None else "")


def canonical_resource(url: str) -> str:
    """The canonical URI of an MCP server (RFC 8707 §2): lower-case scheme and host, no default port, no query
    and no fragment, and no trailing slash on an empty path."""
    parts = urlsplit(url)
    path = parts.path if parts.path not in ("", "/") else ""
    return origin_of(url) + path


def _segments(path: str) -> list[str]:
    return [segment for segment in path.split("/") if segment]


def resource_covers(resource: str, url: str) -> bool:
    """Whether the resource identifier ``resource`` covers the request URL ``url``: the same origin, and the
    resource's path is the URL's path or a whole-segment prefix of it (``/mcp`` covers ``/mcp`` and ``/mcp/x``,
    never ``/mcpx``)."""
    try:
        if origin_of(resource) != origin_of(url):
            return False
        own, other = _segments(urlsplit(resource).path), _segments(urlsplit(url).path)
    except ValueError:
        return False
    return other[: len(own)] == own


def protected_resource_metadata_urls(server_url: str, header_url: str | None) -> list[str]:
    """Where to look for the server's protected resource metadata, in order: the ``resource_metadata`` of its
    challenge, then the path-aware well-known URI, then the root one (RFC 9728 §3.1; MCP 2025-11-25)."""
    parts = urlsplit(server_url)
    origin = origin_of(server_url)
    urls: list[str] = []
    if header_url:
        urls.append(header_url)
    path = parts.path.rstrip("/")
    if path:
        urls.append(f"{origin}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{origin}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(urls))


def authorization_server_metadata_urls(issuer: str) -> list[str]:
    """Where to look for an authorization server's metadata, in the order MCP 2025-11-25 gives: RFC 8414 with
    path insertion, OpenID Connect Discovery with path insertion, then with the path appended (an issuer without
    a path: RFC 8414, then OpenID Connect Discovery)."""
    parts = urlsplit(issuer)
    base = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    path = parts.path.rstrip("/")
    if not path:
        return [f"{base}/.well-known/oauth-authorization-server", f"{base}/.well-known/openid-configuration"]
    return [
        f"{base}/.well-known/oauth-authorization-server{path}",
        f"{base}/.well-known/openid-configuration{path}",
        f"{base}{path}/.well-known/openid-configuration",
    ]


#: The JWS algorithms this client signs DPoP proofs with (never ``none`` or HMAC: RFC 9449 §4.2)
DPOP_ALGORITHMS: Final = ("ES256", "ES384", "ES512", "RS256", "PS256")


def choose_dpop_algorithm(offered: Sequence[str], preferred: str = "ES256") -> str | None:
    """The DPoP proof algorithm to use given a server's ``dpop_signing_alg_values_supported``: ``preferred`` when
    offered, else the first of ours it offers, else None."""
    if preferred in offered and preferred in DPOP_ALGORITHMS:
        return preferred
    return next((alg for alg in DPOP_ALGORITHMS if alg in offered), None)


def pkce_pair() -> tuple[str, str]:
    """A PKCE code verifier (86 unreserved characters) and its S256 code challenge (RFC 7636 §4)."""
    verifier = secrets.token_urlsafe(64)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def new_state() -> str:
    """An unguessable ``state`` for one authorization request."""
    return secrets.token_urlsafe(32)


def split_scopes(scope: str | None) -> list[str]:
    return scope.split() if scope else []


def join_scopes(*groups: Sequence[str] | None) -> str | None:
    """The union of scope lists, in first-seen order, as one space-separated string (None when empty)."""
    merged: dict[str, None] = {}
    for group in groups:
        for scope in group or ():
            if scope:
                merged[scope] = None
    return " ".join(merged) or None


def decode_json_object(body: bytes) -> dict[str, Any] | None:
    """A JSON object from a response body, or None when the body is not one."""
    try:
        value = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def is_client_metadata_url(url: str) -> bool:
    """Whether ``url`` may be a client ID metadata document URL: HTTPS with a path other than ``/``, no fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme == "https" and bool(parts.hostname) and parts.path not in ("", "/") and not parts.fragment


def client_metadata_document(
    client_id: str,
    *,
    client_name: str,
    redirect_uris: Sequence[str],
    client_uri: str | None = None,
    logo_uri: str | None = None,
    refresh_tokens: bool = True,
    application_type: str | None = "native",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The client ID metadata document to serve, as JSON, at ``client_id`` (an HTTPS URL with a path): the
    ``client_id`` equal to that URL, ``client_name``, ``redirect_uris`` (draft-ietf-oauth-client-id-metadata-
    document), and what this client uses: the authorization code grant (and ``refresh_token`` unless
    ``refresh_tokens=False``), ``response_types: ["code"]``, ``token_endpoint_auth_method: "none"``."""
    if not is_client_metadata_url(client_id):
        raise ValueError(f"a client ID metadata document URL must be HTTPS with a path, not {client_id!r}")
    if not redirect_uris:
        raise ValueError("a client ID metadata document needs at least one redirect URI")
    document: dict[str, Any] = {
        "client_id": client_id,
        "client_name": client_name,
        "redirect_uris": list(redirect_uris),
        "grant_types": ["authorization_code", "refresh_token"] if refresh_tokens else ["authorization_code"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    if application_type is not None:
        document["application_type"] = application_type
    if client_uri is not None:
        document["client_uri"] = client_uri
    if logo_uri is not None:
        document["logo_uri"] = logo_uri
    document.update(extra or {})
    return document
