"""The stateless era (2026-07-28) on Streamable HTTP: validating one POST and serving it on its own (L6 helper).

Validation happens here, before the request reaches a session, in the order of SPEC_MAP §2.6:

1. ``params._meta`` and its required fields (``protocolVersion``, ``clientCapabilities``; a ``logLevel`` when
   present must be a level) → -32602, HTTP 400;
2. the mirrored headers — ``MCP-Protocol-Version`` (= the ``_meta`` version), ``Mcp-Method`` (= ``method``),
   ``Mcp-Name`` (= ``params.name`` / ``params.uri`` / ``params.taskId``) and the ``Mcp-Param-*`` headers of the
   called tool's ``x-mcp-header`` properties: missing, malformed or different → -32020, HTTP 400.

The session then checks the version (-32022), the method (-32601, HTTP 404) and the rest. Each request gets a
fresh :class:`~jsonrpc_mcp.mcp.session.ServerSession` over a one-request :class:`MessageStream`; the response is
JSON, or SSE when notifications come first (never requests: the stateless era has none). The client closing the
connection cancels the request.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Final

import anyio
import anyio.abc
import msgspec
from msgspec import UNSET

from ..errors import RpcError
from ..jsonrpc import codes
from ..jsonrpc._tasks import open_handler_tasks
from ..jsonrpc.dispatch import Dispatcher, failure_reply
from ..jsonrpc.streams import MessageStream
from ..jsonrpc.wire import Notification, Request, RequestId, decode_frame, encode_result
from ..mcp.context import LOG_LEVELS
from ..mcp.headers import InvalidHeaderAnnotation, decode_header_value, name_of, tool_header_params
from ..mcp.session import ServerApp, ServerSession
from ..mcp.versions import META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_PROTOCOL_VERSION
from ._http_io import Headers, Receive, Send, send_bytes
from ._http_outlet import FINAL, OTHER, Feed, Item, Outlet, Preference, answer_at_once, write_stream

__all__ = ("check_meta", "check_headers", "serve_one", "status_of", "ToolLookup")

logger = logging.getLogger(__name__)

ToolLookup = Callable[[str], "Mapping[str, Any] | None"]

_HANDLER_TASK: Final = "mcp-stateless-handler"
_TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
_NUMBER: Final = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_STATUS: Final = {
    codes.METHOD_NOT_FOUND: 404,
    codes.PARSE_ERROR: 400,
    codes.INVALID_REQUEST: 400,
    codes.HEADER_MISMATCH: 400,
    codes.MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    codes.UNSUPPORTED_PROTOCOL_VERSION: 400,
}


def check_meta(params: Mapping[str, Any] | None) -> str | None:
    """Why ``params._meta`` is unusable (a -32602 message), or ``None``."""
    meta = params.get("_meta") if params is not None else None
    if not isinstance(meta, dict):
        return 'Invalid params: "_meta" with the protocol version and client capabilities is required'
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str) or not version:
        return f'Invalid params: _meta["{META_PROTOCOL_VERSION}"] must be a non-empty string'
    if not isinstance(meta.get(META_CLIENT_CAPABILITIES), dict):
        return f'Invalid params: _meta["{META_CLIENT_CAPABILITIES}"] must be an object'
    level = meta.get(META_LOG_LEVEL)
    if level is not None and level not in LOG_LEVELS:
        return f'Invalid params: _meta["{META_LOG_LEVEL}"] must be one of {", ".join(LOG_LEVELS)}'
    return None


def _one(headers: Headers, name: bytes, label: str) -> tuple[str | None, str | None]:
    """(value, problem) of a header that must appear at most once with valid characters (the value without
    optional whitespace)."""
    raw = headers.raw(name)
    if raw is None:
        return None, None
    if headers.repeated(name):
        return None, f"Header mismatch: {label} is sent more than once"
    value = raw.decode("latin-1").strip(" \t")
    if value.isascii() and value.isprintable():  # the usual case, checked in C
        return value, None
    for ch in value:
        if not (" " <= ch <= "~" or ch == "\t"):
            return None, f"Header mismatch: {label} holds characters not allowed in a header value"
    return value, None


def _same(body: Any, text: str) -> bool:
    if isinstance(body, bool):
        return text == ("true" if body else "false")
    if isinstance(body, int | float):
        if not _NUMBER.match(text):
            return False
        if isinstance(body, int) and text.lstrip("-").isdigit():
            return int(text) == body
        return float(text) == float(body)
    if isinstance(body, str):
        return text == body
    return False


def check_headers(
    headers: Headers, method: str, params: Mapping[str, Any] | None, tool_schema: ToolLookup
) -> str | None:
    """Why the mirrored headers disagree with the body (a -32020 message), or ``None``."""
    meta = params.get("_meta") if params is not None else None
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    value, problem = _one(headers, b"mcp-protocol-version", "MCP-Protocol-Version")
    if problem:
        return problem
    if value is None:
        return "Header mismatch: the MCP-Protocol-Version header is required"
    if value != version:
        return f"Header mismatch: MCP-Protocol-Version {value!r} does not match the body's protocol version {version!r}"
    value, problem = _one(headers, b"mcp-method", "Mcp-Method")
    if problem:
        return problem
    if value is None:
        return "Header mismatch: the Mcp-Method header is required"
    if value != method:
        return f"Header mismatch: Mcp-Method {value!r} does not match the body's method {method!r}"
    expected = name_of(method, params)
    if expected is None and method in _TASK_METHODS and params is not None:
        task_id = params.get("taskId")
        expected = task_id if isinstance(task_id, str) else None
    value, problem = _one(headers, b"mcp-name", "Mcp-Name")
    if problem:
        return problem
    if expected is not None:
        if value is None:
            return "Header mismatch: the Mcp-Name header is required for " + method
        try:
            decoded = decode_header_value(value)
        except ValueError:
            return "Header mismatch: Mcp-Name is not valid =?base64?...?= encoding"
        if decoded != expected:
            return f"Header mismatch: Mcp-Name {decoded!r} does not match the body's {expected!r}"
    if method == "tools/call" and isinstance(expected, str):
        schema = tool_schema(expected)
        if schema is not None:
            annotations = _header_params(schema)
            if annotations:  # (None: our own tool's annotation is unusable: nothing to hold the client to)
                return _check_params(headers, annotations, params)
    return None


#: ``tool_header_params`` of the schemas seen, by identity (a tool's schema is built once, when it is registered).
_annotations: dict[int, tuple[Mapping[str, Any], dict[tuple[str, ...], str] | None]] = {}


def _header_params(schema: Mapping[str, Any]) -> dict[tuple[str, ...], str] | None:
    """The ``x-mcp-header`` annotations of a tool's schema, ``None`` when unusable (computed once per schema)."""
    cached = _annotations.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    try:
        annotations: dict[tuple[str, ...], str] | None = tool_header_params(schema)
    except InvalidHeaderAnnotation:
        annotations = None
    if len(_annotations) >= 1024:
        _annotations.clear()
    _annotations[id(schema)] = (schema, annotations)
    return annotations


def _check_params(
    headers: Headers, annotations: Mapping[tuple[str, ...], str], params: Mapping[str, Any] | None
) -> str | None:
    arguments = params.get("arguments") if params is not None else None
    for path, name in annotations.items():
        label = f"Mcp-Param-{name}"
        raw, problem = _one(headers, f"mcp-param-{name.lower()}".encode("latin-1"), label)
        if problem:
            return problem
        value: Any = arguments
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            if raw is not None:
                return f"Header mismatch: {label} is sent but the arguments have no value for it"
            continue
        if raw is None:
            return f"Header mismatch: the {label} header is required (the arguments have a value for it)"
        try:
            decoded = decode_header_value(raw)
        except ValueError:
            return f"Header mismatch: {label} is not valid =?base64?...?= encoding"
        if not _same(value, decoded):
            return f"Header mismatch: {label} does not match the argument's value"
    return None


def status_of(frame: bytes) -> int:
    """The HTTP status of a stateless JSON answer: 404 for -32601, 400 for the request-level errors, else 200."""
    if b'"error"' not in frame:
        return 200
    try:
        error = decode_frame(frame).error
    except RpcError:
        return 200
    if error is UNSET or not isinstance(error, dict):
        return 200
    return _STATUS.get(error.get("code"), 200)  # type: ignore[arg-type]


class _OneRequestStream(MessageStream):
    """The session's stream for one stateless request: its frame in, its notifications and response out."""

    def __init__(
        self, frame: bytes, request_id: RequestId, buffer: int, headers: Headers | Mapping[str, str] | None = None
    ) -> None:
        self._frame: bytes | None = frame
        self.request_id = request_id
        self._buffer = buffer
        self._outlet: Outlet | None = None  # made on first use: a request answered at once never needs one
        self.headers = headers
        self._ended: anyio.Event | None = None  # made when the dispatcher waits (subscriptions/listen) only
        self._closed = False

    @property
    def outlet(self) -> Outlet:
        """Where the request's notifications and response go (made on first use)."""
        outlet = self._outlet
        if outlet is None:
            outlet = self._outlet = Outlet(None, buffer=self._buffer)
        return outlet

    def request_headers(self, request_id: RequestId) -> Mapping[str, str] | None:
        """The HTTP headers of this request (read by ``Context.request_headers``)."""
        if request_id != self.request_id:
            return None
        headers = self.headers
        if headers is None:
            return {}
        return headers.as_dict() if isinstance(headers, Headers) else headers

    async def receive(self) -> Sequence[bytes]:
        frame = self._frame
        if frame is not None:
            self._frame = None
            return [frame]
        if not self._closed:
            self._ended = anyio.Event()
            await self._ended.wait()
        raise anyio.EndOfStream

    async def send(self, frame: bytes, related: RequestId | None = None) -> None:
        if related != self.request_id:
            logger.debug("dropping a stateless-era frame unrelated to its request")
            return
        try:
            env = decode_frame(frame)
        except RpcError:
            return
        if env.method is UNSET:
            await self.outlet.put(frame, FINAL)
        elif env.id is UNSET:
            await self.outlet.put(frame, OTHER)
        else:
            logger.warning("a handler sent a %r request in the stateless era; it was dropped", env.method)

    def finished(self, request_id: RequestId) -> None:
        self.outlet.finish()

    async def aclose(self) -> None:
        self._closed = True
        if self._ended is not None:
            self._ended.set()


async def watch_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` when the client goes away (the request body has already been read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def serve_one(
    server: ServerApp,
    frame: bytes,
    request: Request,
    receive: Receive,
    send: Send,
    *,
    preference: Preference,
    keepalive: float,
    buffer: int = 64,
    headers: Headers | Mapping[str, str] | None = None,
    meta: dict[str, Any] | None = None,
) -> None:
    """Serve one validated stateless request as this HTTP response; the client disconnecting cancels it.
    ``meta``: the request's ``params._meta``, when the caller has read it already.

    ``subscriptions/listen`` runs a full dispatcher (change notifications are spawned in its task group). Every
    other request calls the session's handler directly: a synchronous answer is written at once, an async
    handler runs as one task beside the response writer (its notifications go out through the dispatcher's
    write path, which needs no running dispatcher).
    """
    stream = _OneRequestStream(frame, request.id, buffer, headers)
    dispatcher = Dispatcher(stream, max_in_flight=1, request_timeout=None, drain_timeout=0.0)
    session = ServerSession(server, dispatcher, stateless=True)
    listen = request.method == "subscriptions/listen"
    pending: Coroutine[Any, Any, bytes] | None = None
    if listen:
        server.attach(session)  # change notifications reach the sessions the server knows
    else:
        reply: bytes | None = None
        status = 200
        try:
            result = session.on_request(request, meta)
        except Exception as exc:
            reply = failure_reply(request, exc)
            status = _STATUS.get(exc.code, 200) if isinstance(exc, RpcError) else 200
        else:
            if type(result) is bytes:
                reply = encode_result(request.id, result)
            else:
                pending = result  # type: ignore[assignment]
        if reply is not None:
            session.close()
            await send_bytes(send, status, reply)
            return
    outlet = stream.outlet
    connection = outlet.connect()
    if listen:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(dispatcher.run)
                await _stream_answer(tg, send, receive, connection, outlet, "sse", keepalive)
        finally:
            outlet.disconnect(connection)
            session.close()
        return
    assert pending is not None
    handler = pending
    started = False
    token: object = None

    async def run_handler() -> None:
        nonlocal started
        started = True
        try:
            try:
                result = await handler
            except Exception as exc:
                reply = failure_reply(request, exc)
            else:
                reply = encode_result(request.id, result)
            await outlet.put(reply, FINAL)
        finally:
            tasks.forget(token)

    # The handler runs in a task of its own on the event loop (no task group per request): a quick one is answered
    # as JSON after a few scheduler passes; one that sends notifications first, or takes longer, gets an SSE
    # response watched for the client going away. Leaving cancels a handler still running and waits for it.
    try:
        async with open_handler_tasks() as tasks:
            token = tasks.spawn(run_handler(), _HANDLER_TASK)
            delivered = False
            early: list[Item | None] = []
            if preference != "sse":
                delivered, early = await answer_at_once(
                    send, connection, outlet, headers=[], status_of=status_of, pending=True
                )
            if not delivered:
                async with anyio.create_task_group() as tg:
                    await _stream_answer(tg, send, receive, connection, outlet, preference, keepalive, early)
    finally:
        if not started:
            handler.close()  # cancelled before it could start
        outlet.disconnect(connection)
        session.close()


async def _stream_answer(
    tg: anyio.abc.TaskGroup,
    send: Send,
    receive: Receive,
    connection: Feed,
    outlet: Outlet,
    preference: Preference,
    keepalive: float,
    early: Sequence[Item | None] = (),
) -> None:
    """Write the answer as it comes (JSON or SSE) while a task of ``tg`` watches for the client going away (which
    cancels ``tg``); once it is written, ``tg``'s tasks are cancelled."""
    tg.start_soon(watch_disconnect, receive, tg.cancel_scope)
    await write_stream(
        send,
        connection,
        outlet,
        after=0,
        preference=preference,
        headers=[],
        retry_ms=0,
        keepalive=keepalive,
        status_of=status_of,
        cancelled_status=204,
        early=early,
    )
    tg.cancel_scope.cancel()


def decode_params(request: Request | Notification) -> dict[str, Any] | None:
    """The message's params as a dict (``classify`` already made sure they are an object when present)."""
    if request.params is None:
        return None
    value = msgspec.json.decode(request.params)
    return value if isinstance(value, dict) else None
