"""ASGI plumbing for the Streamable HTTP app: typed aliases, header access, body reading, small responses, the
content negotiation rules and the request checks that need no session (L6 helper).

Every error body is JSON-RPC shaped (``{"jsonrpc":"2.0","error":{...}}``, with the request ``id`` when one was
read) and says what was wrong in a sentence; never a traceback, a path or a secret. A request the HTTP layer refuses
before it reaches a dispatcher is an :class:`HttpRefusal` (raised, and answered by :func:`refuse`); its body is made
by the dispatcher's one builder (:func:`~jsonrpc_mcp.jsonrpc.dispatch.error_reply`), its status by the one table
(:data:`HTTP_STATUS`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Final

import anyio

from ..errors import RpcError, Unavailable
from ..jsonrpc import codes
from ..jsonrpc.dispatch import ErrorReply, error_reply
from ..jsonrpc.streams import Network
from ..jsonrpc.wire import Intake, RequestId

__all__ = (
    "Scope",
    "Message",
    "Receive",
    "Send",
    "Headers",
    "HeaderList",
    "BodyTooLarge",
    "BodyTimeout",
    "ClientGone",
    "read_body",
    "read_body_or_refuse",
    "send_bytes",
    "HTTP_STATUS",
    "http_status",
    "answer_status",
    "HttpRefusal",
    "refuse",
    "unavailable",
    "send_error",
    "send_empty",
    "accepts",
    "JSON_AND_SSE",
    "repeated_header_problem",
    "body_type_problem",
    "HTTP_NETWORK",
)

#: What carries a Streamable HTTP server's frames (:data:`~jsonrpc_mcp.jsonrpc.streams.Network`).
HTTP_NETWORK: Final[Network] = MappingProxyType({"network.transport": "tcp", "network.protocol.name": "http"})

#: The HTTP status of a JSON-RPC error, by its code: the one table of every HTTP path (Streamable HTTP in both eras,
#: HTTP+SSE, the authorization's refusals that carry a JSON-RPC body). A code it does not name is the caller's
#: default: 200 for an answer, 400 for a refusal.
HTTP_STATUS: Final[Mapping[int, int]] = MappingProxyType(
    {
        codes.METHOD_NOT_FOUND: 404,
        codes.PARSE_ERROR: 400,
        codes.INVALID_REQUEST: 400,
        codes.HEADER_MISMATCH: 400,
        codes.MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
        codes.UNSUPPORTED_PROTOCOL_VERSION: 400,
        codes.BUSY: 429,
        codes.UNAVAILABLE: 503,
    }
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
HeaderList = list[tuple[bytes, bytes]]


class Headers(Intake):
    """Request headers, looked up case-insensitively (ASGI servers already send the names lower-cased), and what
    else came with the request: the principal an HTTP policy authenticated it as, its TCP connection (the request's
    :class:`~jsonrpc_mcp.jsonrpc.wire.Intake`, which reaches its handler's ``Context``).

    Built once per request on the hot path, so it does the least up front: one dict of the raw names (first value
    wins) made in C; values are decoded when asked for, and :meth:`as_dict` is built (once) only when a handler
    reads ``Context.request_headers``. Names that are not all lower case take the slow path and are folded.
    """

    __slots__ = ("_dict", "_first", "_raw", "auth", "peer", "raw", "repeats", "until")

    #: :meth:`get` without the decoding (``name`` in lower case): the first-values dict's own ``get``, so that a
    #: look-up, several per request, runs no Python frame.
    raw: Callable[[bytes], bytes | None]

    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        pairs = raw if type(raw) is list else list(raw)
        first: dict[bytes, bytes] = dict(pairs)
        if len(first) != len(pairs):  # a name sent twice: the first value wins
            first = dict(reversed(pairs))
        if first and not b"".join(first).islower():
            pairs = [(name.lower(), value) for name, value in pairs]
            first = dict(reversed(pairs))
        self._raw = pairs
        self._first = first
        self.raw = first.get
        self.repeats = len(first) != len(pairs)  #: some header name was sent more than once
        self._dict: dict[str, str] | None = None
        self.auth: Any = None  # the principal an HTTP policy authenticated this request as (``Context.auth``)
        #: when the policy's admission of the request ends (``time.time()`` seconds; an access token's expiry): a
        #: stream of its response still open then is ended
        self.until: float | None = None
        self.peer: Any = None  # the TCP connection it came on: the ASGI scope's ``client``, (host, port)

    def request_headers(self) -> Mapping[str, str]:
        return self.as_dict()

    def connection(self) -> str | None:
        peer = self.peer
        return f"{peer[0]}:{peer[1]}" if peer else None

    def get(self, name: str) -> str | None:
        """The value of a header sent once; the first value when sent several times (``name`` in lower case)."""
        value = self._first.get(name.encode("latin-1"))
        return value.decode("latin-1") if value is not None else None

    def values(self, name: str) -> list[str]:
        """Every value sent for the header ``name`` (lower case), in order."""
        if not self.repeats:  # one look-up
            value = self._first.get(name.encode("latin-1"))
            return [] if value is None else [value.decode("latin-1")]
        key = name.encode("latin-1")
        return [value.decode("latin-1") for raw_name, value in self._raw if raw_name == key]

    def repeated(self, name: bytes) -> bool:
        """Was the header sent more than once (``name`` in lower case)?"""
        if not self.repeats:  # decided without a walk
            return False
        return [raw_name for raw_name, _ in self._raw].count(name) > 1

    def as_dict(self) -> dict[str, str]:
        """Each header once (its first value), names in lower case: what ``Context.request_headers`` shows."""
        if self._dict is None:
            items: dict[str, str] = {}
            for name, value in self._raw:
                key = name.decode("latin-1")
                if key not in items:
                    items[key] = value.decode("latin-1")
            self._dict = items
        return self._dict


class BodyTooLarge(Exception):
    pass


class BodyTimeout(Exception):
    """The rest of the request body did not arrive within the deadline."""


class ClientGone(Exception):
    """The client disconnected while we were reading its request."""


async def read_body(receive: Receive, headers: Headers, limit: int, first: Message, timeout: float | None) -> bytes:
    """The whole body of a request whose ``first`` message did not bring it all within ``limit`` bytes (the usual
    body, whole in one message, the app takes itself). :class:`BodyTooLarge` past ``limit`` bytes (checked against
    Content-Length first, then as it arrives); :class:`BodyTimeout` when it is not complete ``timeout`` seconds
    after its first message (a chunked body that never ends)."""
    declared = headers.raw(b"content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise BodyTooLarge()
    chunks: list[bytes] = []
    size = 0
    message = first
    with anyio.move_on_after(timeout) as deadline:
        while True:
            kind = message["type"]
            if kind == "http.disconnect":
                raise ClientGone()
            if kind == "http.request":
                chunk = message.get("body", b"")
                if chunk:
                    size += len(chunk)
                    if size > limit:
                        raise BodyTooLarge()
                    chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            message = await receive()
    if deadline.cancelled_caught:
        raise BodyTimeout()
    return b"".join(chunks)


async def read_body_or_refuse(
    receive: Receive, headers: Headers, send: Send, limit: int, timeout: float | None, first: Message | None = None
) -> bytes | None:
    """The request's whole body (``first``: its first message, when read already), or ``None`` once the request was
    refused: 415 unless it is JSON, 413 past ``limit`` bytes, 408 when it is not complete within ``timeout`` seconds
    (and the connection is closed: the rest of the body would be read as the next request)."""
    if first is None:
        content_type = headers.raw(b"content-type")
        if content_type != b"application/json" and (problem := body_type_problem(content_type)) is not None:
            await send_error(send, 415, problem)
            return None
        first = await receive()
    body: bytes = first.get("body", b"")
    if first["type"] == "http.request" and not first.get("more_body", False) and len(body) <= limit:
        return body
    try:
        return await read_body(receive, headers, limit, first, timeout)
    except BodyTooLarge:
        await send_error(send, 413, f"Payload Too Large: the body exceeds {limit} bytes")
    except BodyTimeout:
        late = f"Request Timeout: the request body did not arrive within {timeout:g} seconds"
        await send_error(send, 408, late, headers=[(b"connection", b"close")])
    return None


async def send_bytes(
    send: Send, status: int, body: bytes, headers: HeaderList | None = None, content_type: bytes = b"application/json"
) -> None:
    head: HeaderList = [(b"content-type", content_type), (b"content-length", b"%d" % len(body))]
    if headers:
        head += headers
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def http_status(code: int, default: int) -> int:
    """The HTTP status of a JSON-RPC error of ``code`` (:data:`HTTP_STATUS`), ``default`` when the table has none."""
    return HTTP_STATUS.get(code, default)


def answer_status(reply: bytes, *, stateless: bool) -> int:
    """The HTTP status of an answer the dispatcher made at once: 200 for a result; for an error, the table's in the
    stateless era, and in the handshake era only for a request the dispatcher refused (its id in use, too many in
    flight) or a capacity refusal (-31010), the other errors of a session being answers like any other (200)."""
    if type(reply) is not ErrorReply:
        return 200
    if stateless or reply.refused is not None or reply.code == codes.BUSY:
        return http_status(reply.code, 200)
    return 200


class HttpRefusal(RpcError):
    """A request refused by the HTTP layer before any dispatcher takes it: the JSON-RPC error (``code``, ``message``,
    ``data``; -32600 unless told), the request's ``ident`` when it was read, the HTTP ``status`` (the table's for
    ``code`` unless told, else 400) and extra response ``headers``. Raised where the refusal is decided, answered by
    :func:`refuse`."""

    code = codes.INVALID_REQUEST

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: int | None = None,
        ident: RequestId | None = None,
        data: Any = None,
        headers: HeaderList | None = None,
    ) -> None:
        super().__init__(message, data, code=code)
        self.ident = ident
        self.status = status if status is not None else http_status(self.code, 400)
        self.headers = headers


def unavailable(exc: Unavailable, ident: RequestId | None = None) -> HttpRefusal:
    """The refusal of a request (``ident``) the server cannot serve now: something it shares with its other workers
    cannot be reached (503 with ``Retry-After``)."""
    retry = [(b"retry-after", b"%d" % exc.retry_after)]
    return HttpRefusal(exc.message, status=503, code=exc.code, ident=ident, data=exc.data, headers=retry)


async def refuse(send: Send, refusal: HttpRefusal) -> None:
    """Answer a refused request with its JSON-RPC error, built by the dispatcher's builder, and its HTTP status."""
    await send_bytes(send, refusal.status, error_reply(refusal.ident, refusal), refusal.headers)


def send_error(
    send: Send,
    status: int,
    message: str,
    *,
    code: int = codes.INVALID_REQUEST,
    ident: RequestId | None = None,
    data: Any = None,
    headers: HeaderList | None = None,
) -> Awaitable[None]:
    """A JSON-RPC error response body with an HTTP error status (:func:`refuse` of that :class:`HttpRefusal`)."""
    return refuse(send, HttpRefusal(message, status=status, code=code, ident=ident, data=data, headers=headers))


async def send_empty(send: Send, status: int, headers: HeaderList | None = None) -> None:
    head: HeaderList = [] if status in (204, 304) else [(b"content-length", b"0")]
    if headers:
        head.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _media_ranges(accept: str) -> set[str]:
    ranges: set[str] = set()
    for part in accept.split(","):
        media, _, params = part.partition(";")
        media = media.strip().lower()
        if not media:
            continue
        refused = False
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    refused = float(value.strip()) <= 0
                except ValueError:
                    refused = False
        if not refused:
            ranges.add(media)
    return ranges


#: What every POST must accept.
JSON_AND_SSE: Final = ("application/json", "text/event-stream")


@lru_cache(maxsize=256)  # (a client sends the same Accept on every request: it is parsed once)
def accepts(accept: bytes | None, media_types: tuple[str, ...]) -> bool:
    """True when the ``Accept`` header (its raw value) admits every one of ``media_types`` (wildcards count, ``q=0``
    refuses)."""
    if accept is None:
        return False
    ranges = _media_ranges(accept.decode("latin-1"))
    if "*/*" in ranges:
        return True
    for media in media_types:
        major = media.split("/", 1)[0]
        if media not in ranges and f"{major}/*" not in ranges:
            return False
    return True


#: Headers that name one thing: sent twice, which one counts is anyone's guess (a proxy and the app may disagree).
_SINGLE: Final = ((b"mcp-session-id", "Mcp-Session-Id"), (b"mcp-protocol-version", "MCP-Protocol-Version"))


def repeated_header_problem(headers: Headers) -> str | None:
    """A refusal (400) when a header that must be single is sent more than once, else ``None``."""
    for raw, name in _SINGLE:
        if headers.repeated(raw):
            return f"Bad Request: the {name} header is sent more than once"
    return None


def body_type_problem(content_type: bytes | None) -> str | None:
    """A refusal (415) unless the body is declared ``application/json`` in UTF-8, else ``None``: a ``charset``
    parameter, when present, must name UTF-8 (in any case, quoted or not); JSON text exchanged between systems is
    UTF-8 (RFC 8259 §8.1), and a body in another charset would be misread."""
    value = content_type.decode("latin-1") if content_type is not None else ""
    media, *params = value.split(";")
    if media.strip().lower() != "application/json":
        return "Unsupported Media Type: the body must be application/json"
    for param in params:
        key, _, given = param.partition("=")
        if key.strip().lower() == "charset":
            charset = given.strip().strip('"').strip()
            if charset.lower() != "utf-8":
                return f"Unsupported Media Type: the body must be UTF-8, not charset={charset}"
    return None
