"""Exceptions shared by every layer (L0: standard library only).

Two families, kept apart on purpose:

* :class:`RpcError` and its subclasses become JSON-RPC error responses: "the request itself is wrong".
* :class:`ToolError` becomes a ``CallToolResult`` with ``isError: true``: "the tool ran and failed; tell the model".

Besides them, :class:`InputRequired` is how a 2026-07-28 handler asks the client for input (never a failure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

from .jsonrpc import codes

__all__ = (
    "RpcError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "InternalError",
    "ResourceNotFound",
    "InsufficientScope",
    "RequestTimeout",
    "ConnectionClosed",
    "AuthorizationError",
    "SessionExpired",
    "ServerUnreachable",
    "MissingExtra",
    "ToolError",
    "Unavailable",
    "MissingClientCapability",
    "UrlElicitationRequired",
    "InputRequired",
    "ProtocolViolation",
    "error_for_code",
    "local_failure",
)


class RpcError(Exception):
    """A JSON-RPC error: ``code``, a message safe to show the peer, optional ``data``.

    Raise it (or a subclass) from a handler to answer with an error response instead of a result. The
    message and data go to the peer verbatim, so never put internals in them.
    """

    code: int = codes.INTERNAL_ERROR
    default_message: str = "Internal error"
    #: True for an error this process made about an exchange (no answer in time, the connection gone, no
    #: authorization, an HTTP answer that is none), never received from the peer: a peer's error of the same code is
    #: a plain :class:`RpcError` with ``local`` False.
    local: bool = False

    def __init__(self, message: str | None = None, data: Any = None, *, code: int | None = None) -> None:
        self.message = message if message is not None else self.default_message
        self.data = data
        if code is not None:
            self.code = code
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r}, data={self.data!r})"

    @classmethod
    def received(cls, message: str, data: Any = None) -> Self:
        """This error as a peer sent it: its message and data exactly as they came (a subclass also reads its own
        attributes from ``data``, as far as ``data`` holds them)."""
        error = cls.__new__(cls)
        RpcError.__init__(error, message, data)
        return error


class ParseError(RpcError):
    code = codes.PARSE_ERROR
    default_message = "Parse error"


class InvalidRequest(RpcError):
    code = codes.INVALID_REQUEST
    default_message = "Invalid Request"


class MethodNotFound(RpcError):
    code = codes.METHOD_NOT_FOUND
    default_message = "Method not found"


class InvalidParams(RpcError):
    code = codes.INVALID_PARAMS
    default_message = "Invalid params"


class InternalError(RpcError):
    code = codes.INTERNAL_ERROR
    default_message = "Internal error"


class ResourceNotFound(RpcError):
    """Unknown resource URI. The MCP layer picks the code per revision (-32002 legacy, -32602 stateless)."""

    code = codes.RESOURCE_NOT_FOUND
    default_message = "Resource not found"

    def __init__(self, uri: str, message: str | None = None) -> None:
        super().__init__(message, {"uri": uri})
        self.uri = uri

    @classmethod
    def received(cls, message: str, data: Any = None) -> Self:
        error = super().received(message, data)
        uri = data.get("uri") if isinstance(data, dict) else None
        error.uri = uri if isinstance(uri, str) else ""
        return error


class InsufficientScope(RpcError):
    """The request's principal lacks scopes the operation needs (-31011; over HTTP the app answers 403 first).

    ``data``: ``{"error": "insufficient_scope", "requiredScopes": [...]}``, every scope the operation needs."""

    code = codes.INSUFFICIENT_SCOPE
    default_message = "Insufficient scope"

    def __init__(self, required: list[str], missing: list[str]) -> None:
        super().__init__(
            f"Insufficient scope: this request needs {' '.join(missing)}",
            {"error": "insufficient_scope", "requiredScopes": required},
        )
        self.required = required
        self.missing = missing

    @classmethod
    def received(cls, message: str, data: Any = None) -> Self:
        """From a peer, ``data.requiredScopes`` is all the wire says: ``required`` and ``missing`` are both those
        scopes (which of them the token lacked is in the message only)."""
        error = super().received(message, data)
        scopes = data.get("requiredScopes") if isinstance(data, dict) else None
        error.required = [s for s in scopes if isinstance(s, str)] if isinstance(scopes, list) else []
        error.missing = list(error.required)
        return error


class Unavailable(RpcError):
    """Something the server shares with its other workers (their Redis) cannot be reached right now: -31012 with
    ``data.retryAfter`` (seconds); Streamable HTTP answers 503 with ``Retry-After``."""

    code = codes.UNAVAILABLE
    default_message = "Service unavailable: retry later"

    def __init__(self, retry_after: int = 1) -> None:
        super().__init__(f"Service unavailable: retry in {retry_after} s", {"retryAfter": retry_after})
        self.retry_after = retry_after

    @classmethod
    def received(cls, message: str, data: Any = None) -> Self:
        """``retry_after``: ``data.retryAfter`` when it is a whole number of seconds, else 1."""
        error = super().received(message, data)
        after = data.get("retryAfter") if isinstance(data, dict) else None
        error.retry_after = after if isinstance(after, int) and not isinstance(after, bool) and after >= 0 else 1
        return error


class RequestTimeout(RpcError):
    """An outgoing request got no answer in time (raised locally, never sent)."""

    code = codes.REQUEST_TIMEOUT
    default_message = "Request timed out"
    local = True


class ConnectionClosed(RpcError):
    """The connection ended while a request was outstanding (raised locally, never sent)."""

    code = codes.CONNECTION_CLOSED
    default_message = "Connection closed"
    local = True


class AuthorizationError(ConnectionClosed):
    """The client could not get (or keep) authorization to reach the server (raised locally, never sent).

    ``step`` names where it failed: ``"protected resource metadata"``, ``"authorization server metadata"``,
    ``"address check"``, ``"client registration"``, ``"authorization"``, ``"token request"``, ``"token refresh"``,
    ``"step-up"``…
    The message never contains a token or a secret. A kind of :class:`ConnectionClosed`: the request it ends was
    never served.
    """

    code = codes.AUTHORIZATION_FAILED
    default_message = "Authorization failed"

    def __init__(self, step: str, reason: str, *, message: str | None = None) -> None:
        super().__init__(message or f"authorization failed ({step}): {reason}", {"step": step, "reason": reason})
        self.step = step
        self.reason = reason


def local_failure(message: str) -> RpcError:
    """An exchange our transport saw fail while the server is there (an HTTP answer that is no answer, a POST it
    refused): code -32000 and ``local`` True, so it is never taken for an error the server sent (raised locally,
    never sent). No :class:`ConnectionClosed`: the era fallback may still try the handshake after it."""
    error = RpcError(message, code=codes.CONNECTION_CLOSED)
    error.local = True
    return error


class SessionExpired(ConnectionClosed):
    """The server ended the Streamable HTTP session of the request (it answered HTTP 404 for the session: it
    restarted, or forgot the session): raised locally, never sent. The client starts a new session by itself and
    sends again a request the 404 refused; this is raised for one that was under way (it may have run, so it is
    not sent again), or when no new session could be started (the message says why). A kind of
    :class:`ConnectionClosed`."""

    default_message = "The server ended the MCP session"


class ServerUnreachable(ConnectionError):
    """No connection to the server could be made: the message says where and why in one line (connection
    refused, unknown host, no such socket file). Raised by ``Client.connect_*``, and by a request over HTTP whose
    POST could not reach the server."""


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra that brings it (one line)."""

    @staticmethod
    def install(extra: str) -> str:
        """How to install ``extra`` today, for the messages that name one: from a checkout of the source tree, as
        jsonrpc-mcp is not on PyPI yet (the README's "Install")."""
        return f"install the {extra} extra (pip install -e '.[{extra}]' in a checkout of jsonrpc-mcp; not on PyPI yet)"


class MissingClientCapability(RpcError):
    """The request needs a client capability the client did not declare (-32021, ``data.requiredCapabilities``)."""

    code = codes.MISSING_REQUIRED_CLIENT_CAPABILITY
    default_message = "Missing required client capability"

    def __init__(self, capability: str, detail: Mapping[str, Any] | None = None, *, message: str | None = None) -> None:
        super().__init__(
            message or f"Missing required client capability: {capability}",
            {"requiredCapabilities": {capability: dict(detail or {})}},
        )
        self.capability = capability

    @classmethod
    def received(cls, message: str, data: Any = None) -> Self:
        """``capability``: the names under ``data.requiredCapabilities``, comma-separated (empty without them)."""
        error = super().received(message, data)
        required = data.get("requiredCapabilities") if isinstance(data, dict) else None
        error.capability = ", ".join(str(name) for name in required) if isinstance(required, dict) else ""
        return error


class UrlElicitationRequired(RpcError):
    """The request cannot be processed until the user completes URL-mode elicitations (-32042, 2025-11-25):
    ``data.elicitations`` lists them, each with ``mode: "url"``, an ``elicitationId``, a ``message`` and the ``url``
    (else ``ValueError``: the error is for URL-mode elicitation only, and names one at least)."""

    code = codes.URL_ELICITATION_REQUIRED
    default_message = "URL elicitation required"

    def __init__(self, elicitations: Sequence[Mapping[str, Any]], message: str | None = None) -> None:
        if not elicitations:
            raise ValueError("UrlElicitationRequired lists the URL-mode elicitations to complete, one at least")
        for item in elicitations:
            if item.get("mode") != "url" or not all(
                isinstance(item.get(key), str) and item.get(key) for key in ("elicitationId", "message", "url")
            ):
                raise ValueError(
                    'each elicitation of UrlElicitationRequired is URL mode: mode "url", elicitationId, message, url'
                )
        super().__init__(message, {"elicitations": [dict(item) for item in elicitations]})

    @property
    def elicitations(self) -> list[dict[str, Any]]:
        """The elicitations to complete before the request is retried (as the error's data lists them)."""
        listed = self.data.get("elicitations") if isinstance(self.data, dict) else None
        return [item for item in listed if isinstance(item, dict)] if isinstance(listed, list) else []


class InputRequired(Exception):
    """Raised inside a stateless-era handler: these inputs must come from the client before it can go on.

    ``requests`` maps each key to ``{"method": ..., "params": ...}``. Handlers never catch it; the session
    answers with an ``InputRequiredResult`` carrying these requests and a signed ``requestState``.
    """

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__(f"input required: {', '.join(requests)}")
        self.requests = requests


class ProtocolViolation(Exception):
    """The peer broke a rule the spec states (raised locally; the caller decides what to answer)."""


def error_for_code(code: int, message: str, data: Any = None, *, handshake: bool = False) -> RpcError:
    """The error a peer sent, as the class this module defines for its code (message and data as they came), or a
    plain :class:`RpcError` for a code without one; either way ``local`` is False.

    No code of the legacy sub-range -32000..-32019 is given a meaning but -32002 (resource not found, which 2026-07-28
    still asks clients to accept): the local-only codes (-32000 connection closed, -32001 timeout, -32003
    authorization failed) never become those local errors, other implementations sending them for errors of their
    own. Only in a ``handshake``-era session are the codes earlier releases of this library sent for insufficient
    scope and unavailable (:data:`~.jsonrpc.codes.LEGACY_INSUFFICIENT_SCOPE`,
    :data:`~.jsonrpc.codes.LEGACY_UNAVAILABLE`) read as those, their code as it came."""
    kind = _RECEIVED.get(code) or (_RECEIVED_IN_HANDSHAKE.get(code) if handshake else None)
    if kind is None:
        return RpcError(message, data, code=code)
    error = kind.received(message, data)
    error.code = code
    return error


#: The classes :func:`error_for_code` gives back, by code.
_RECEIVED: dict[int, type[RpcError]] = {
    kind.code: kind
    for kind in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        ResourceNotFound,
        InsufficientScope,
        Unavailable,
        MissingClientCapability,
        UrlElicitationRequired,
    )
}
#: The codes earlier releases of this library sent, read as their classes in a handshake-era session only.
_RECEIVED_IN_HANDSHAKE: dict[int, type[RpcError]] = {
    codes.LEGACY_INSUFFICIENT_SCOPE: InsufficientScope,
    codes.LEGACY_UNAVAILABLE: Unavailable,
}


class ToolError(Exception):
    """A deliberate tool failure: becomes ``isError: true`` with this message as text content."""

    def __init__(self, message: str, *, structured: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.structured = structured
