"""CORS for the Streamable HTTP app: an opt-in allow-list of browser origins (L6 helper).

Off unless ``McpAsgiApp(cors_origins=[...])`` names origins (``"https://app.example"``, or ``"*"`` for any). For an
allowed origin:

* a preflight (``OPTIONS`` with ``Access-Control-Request-Method``) is answered 204 with
  ``Access-Control-Allow-Origin`` echoing the origin, ``-Allow-Methods`` (GET, POST, DELETE, OPTIONS),
  ``-Allow-Headers`` (the MCP headers a client sends, and whichever ``Mcp-Param-*`` headers it asks for),
  ``-Max-Age`` and ``Vary: Origin``;
* every other response gets ``Access-Control-Allow-Origin``, ``Access-Control-Expose-Headers`` (``Mcp-Session-Id``
  and ``WWW-Authenticate``, which a browser would otherwise hide from the page) and ``Vary: Origin``.

An origin allowed here is also an allowed ``Origin`` for the DNS-rebinding guard (the app passes the list to
:class:`~._http_security.HostGuard`). Credentials mode (cookies) is not enabled: MCP clients authenticate with an
``Authorization`` header, which needs only to be listed in ``-Allow-Headers``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ._http_io import HeaderList, Headers, Message, Send, send_empty, send_error
from ._http_security import origin_list

__all__ = ("Cors", "ALLOWED_HEADERS", "EXPOSED_HEADERS")

ALLOWED_HEADERS: Final = (
    "content-type",
    "accept",
    "authorization",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
    "dpop",  # (a DPoP proof, RFC 9449)
)
EXPOSED_HEADERS: Final = b"mcp-session-id, www-authenticate, dpop-nonce"
ALLOWED_METHODS: Final = b"GET, POST, DELETE, OPTIONS"
_PARAM_PREFIX: Final = "mcp-param-"


class Cors:
    """The allow-list and the headers it adds (see the module docstring)."""

    def __init__(self, origins: Iterable[str], *, max_age: int = 600) -> None:
        self.any_origin, self.origins = origin_list(origins)
        self.max_age = b"%d" % max_age

    def allows(self, origin: str) -> bool:
        return self.any_origin or origin.strip().rstrip("/").lower() in self.origins

    async def preflight(self, origin: bytes, headers: Headers, send: Send) -> None:
        """Answer an ``OPTIONS`` request from ``origin`` (already checked by the Origin guard)."""
        requested_method = headers.get("access-control-request-method")
        if requested_method is None:  # not a preflight: no method of ours answers OPTIONS
            await send_error(send, 405, "Method not allowed: OPTIONS", headers=[(b"allow", b"GET, POST, DELETE")])
            return
        if not self.allows(origin.decode("latin-1")):
            await send_error(send, 403, "Forbidden: this Origin is not allowed for cross-origin requests")
            return
        asked = headers.get("access-control-request-headers") or ""
        allowed = list(ALLOWED_HEADERS)
        for name in asked.split(","):
            name = name.strip().lower()
            if name.startswith(_PARAM_PREFIX) and name not in allowed:
                allowed.append(name)
        extra: HeaderList = [
            (b"access-control-allow-origin", origin),
            (b"access-control-allow-methods", ALLOWED_METHODS),
            (b"access-control-allow-headers", ", ".join(allowed).encode("latin-1")),
            (b"access-control-max-age", self.max_age),
            (b"vary", b"Origin"),
        ]
        await send_empty(send, 204, extra)

    def wrap(self, origin: bytes, send: Send) -> Send:
        """``send`` with the CORS headers added to the response start, when ``origin`` is on the list."""
        if not self.allows(origin.decode("latin-1")):
            return send
        extra: HeaderList = [
            (b"access-control-allow-origin", origin),
            (b"access-control-expose-headers", EXPOSED_HEADERS),
            (b"vary", b"Origin"),
        ]

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        return send_with_cors
