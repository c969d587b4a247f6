"""The HTTP-level policy hook of the Streamable HTTP app (L6): decisions JSON-RPC middleware cannot express —
status codes, ``WWW-Authenticate`` challenges, documents served beside the endpoint.

::

    class OfficeHours(HttpPolicy):
        async def admit(self, scope, headers, send):
            if not 9 <= datetime.now().hour < 17:
                await send_error(send, 503, "Closed: come back at nine", headers=[(b"retry-after", b"3600")])
                return None            # answered: the app serves nothing more
            return send                # go on (or return a wrapper of send that watches the response)

    app = McpAsgiApp(server, http_policy=OfficeHours())

A policy is attached to one :class:`~jsonrpc_mcp.transports.http_asgi.McpAsgiApp` (``attach``). The app then
calls it, and only when one is configured (an app without a policy pays nothing):

1. ``route(path)`` for a path other than the MCP endpoint: an ASGI handler that answers it (a metadata document,
   say), or ``None`` for the app's usual 404;
2. ``admit(scope, headers, send)`` after the ``Host``/``Origin`` checks and before a request to the endpoint is
   served (any method): answer it and return ``None``, or return the ``send`` the app should use. It may attach
   the request's principal as ``headers.auth``: handlers read it as ``Context.auth``;
3. ``admit_message(headers, message, send)`` once a POSTed JSON-RPC message is parsed (a single message; a
   2025-03-26 batch is not offered here): ``False`` once the policy has answered the POST itself;
4. ``session_owner(headers)``: whom a handshake-era session belongs to (the principal, say);
5. ``admitted_until(headers)``, once admitted: when the admission ends (an access token's expiry, say). A stream
   of the response still open then (a GET stream, ``subscriptions/listen``, a request's SSE answer) is ended, as
   the server ends a stream it closes (a resumable one can be resumed); a JSON answer is one answer, not cut.

:class:`jsonrpc_mcp.auth.ProtectedResource` (OAuth bearer tokens, RFC 9728 metadata) is the policy this project
ships.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ._http_io import Headers, Receive, Scope, Send

if TYPE_CHECKING:
    from ..jsonrpc.wire import Message
    from .http_asgi import McpAsgiApp

__all__ = ("HttpPolicy", "Handler")

#: An ASGI handler: ``await handler(scope, receive, send)``.
Handler = Callable[[Scope, Receive, Send], Awaitable[None]]


class HttpPolicy:
    """Base class of an HTTP policy: every hook lets the request through; override the ones you need."""

    def attach(self, app: McpAsgiApp) -> None:
        """Called once, when the app is built with this policy (its ``path``, ``server`` and ``sessions`` are
        set by then)."""

    def route(self, path: str) -> Handler | None:
        """The handler of ``path`` (a path the MCP endpoint does not answer), or ``None`` for a 404."""
        return None

    async def admit(self, scope: Scope, headers: Headers, send: Send) -> Send | None:
        """Before a request to the endpoint is served: ``None`` once answered here, else the send to use."""
        return send

    async def admit_message(self, headers: Headers, message: Message, send: Send) -> bool:
        """A POSTed message, parsed: ``False`` once the policy has answered the POST itself."""
        return True

    def admitted_until(self, headers: Headers) -> float | None:
        """When the request's admission ends, in seconds since the epoch (``time.time()``); ``None``: never. A
        stream of its response still open then is ended (module docstring)."""
        return None

    def session_owner(self, headers: Headers) -> str | None:
        """Whom the request (admitted already) comes from, as an opaque key; ``None``: nobody in particular. A
        handshake-era session belongs to the owner of the ``initialize`` that opened it: a request of another owner
        gets the 404 of a session that does not exist, and the app's ``max_sessions_per_client`` counts per
        owner."""
        return None
