"""The MCP client API (L5).

::

    async with Client.connect_stdio(["python", "server.py"]) as client:
        tools = await client.list_tools()
        result = await client.call_tool("add", {"a": 1, "b": 2})

``call_tool`` raises :class:`~jsonrpc_mcp.errors.RpcError` for protocol errors (unknown tool, bad params) and
returns the result, with ``is_error`` set, for tool errors. The client answers the server's own requests
(sampling, elicitation, roots) through the handlers it was given, and declares only the capabilities it has a
handler for.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Self, TypeVar, cast

import anyio
import anyio.abc
import msgspec
from msgspec import UNSET, Raw

from ..errors import (
    AuthorizationError,
    ConnectionClosed,
    InternalError,
    InvalidParams,
    MethodNotFound,
    ProtocolViolation,
    RequestTimeout,
    ResourceNotFound,
    RpcError,
    ToolError,
)
from ..jsonrpc.codes import HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION
from ..jsonrpc.dispatch import Dispatcher
from ..jsonrpc.streams import MessageStream
from ..jsonrpc.wire import Notification, Request, RequestId
from ..version import __version__
from . import types as t
from .extensions import Extension, ExtensionResult, extensions_capability
from .groups import unwrap_group
from .headers import InvalidHeaderAnnotation, param_headers, tool_header_params
from .middleware import ClientMessage, ClientMiddleware, is_awaitable, run_chain
from .output_schemas import InvalidToolOutput, OutputSchemas, schema_problems
from .progress import DEFAULT_INTERVAL as DEFAULT_PROGRESS_INTERVAL
from .progress import Pacer, check_interval
from .pydantic_support import dec_hook
from .result_cache import CacheSlot, ResultCache, identity_of
from .sampling import conversation_problem
from .session import encode_cancellation
from .task_client import ClientTasks, CoreTaskHandle, TaskHandle
from .task_state import EXTENSION_ID as TASKS_EXTENSION
from .task_state import RELATED_TASK
from .tracing import TracingHook, TracingSwitch, tracing_switch
from .versions import (
    BATCH_VERSIONS,
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    STATELESS_VERSIONS,
)

__all__ = (
    "ClientSession",
    "SamplingHandler",
    "ElicitationHandler",
    "RootsProvider",
    "NotificationCallback",
    "ProgressCallback",
    "NoStructuredData",
    "ToolResultError",
    "refused_by_a_modern_server",
    "InvalidToolOutput",
    "structured_data",
)

logger = logging.getLogger(__name__)

#: The errors of ``server/discover`` that only a 2026-07-28 server gives (it spoke, and refused this request).
_MODERN_REFUSALS: Final = frozenset({HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY})


def refused_by_a_modern_server(error: RpcError) -> bool:
    """Whether ``error`` is a refusal only a 2026-07-28 server makes (-32020, -32021): the server speaks the
    stateless era, so no older transport or handshake is to be tried instead."""
    return error.code in _MODERN_REFUSALS


T = TypeVar("T")
_encode: Final = msgspec.json.Encoder().encode

SamplingHandler = Callable[[t.CreateMessageRequestParams], Awaitable[t.CreateMessageResult]]
ElicitationHandler = Callable[[t.ElicitRequestParams], Awaitable[t.ElicitResult]]
RootsProvider = Callable[[], Awaitable[list[t.Root]]]
NotificationCallback = Callable[[str, dict[str, Any]], Awaitable[None] | None]
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]

_TYPE_OF_RESULT: Final[dict[str, Any]] = {}
#: How many accepted URL-mode elicitations a client remembers while it waits for their completion notifications.
_URL_ELICITATIONS_KEPT: Final = 1024


class NoStructuredData(ValueError):
    """A tool result carries neither ``structuredContent`` nor a JSON text block."""


class ToolResultError(ToolError):
    """:func:`structured_data` of an ``isError`` result: the tool failed, so there is no data to read.

    ``message`` is the result's first text block, ``structured`` its ``structuredContent`` (the error payload, when
    the tool sent one, else ``None``), ``result`` the result itself."""

    def __init__(self, result: t.CallToolResult) -> None:
        text = next((c.text for c in result.content if isinstance(c, t.TextContent)), "the tool failed")
        data = result.structured_content
        super().__init__(text, structured=None if data is UNSET else data)
        self.result = result


def structured_data(result: t.CallToolResult, type: Any = Any) -> Any:
    """The structured data of a tool result, validated as ``type`` (any type msgspec converts to, or a pydantic
    model).

    ``structuredContent`` first; else the first text block whose MIME type (``_meta.mimeType`` or the block's
    annotations) says ``application/json``, or that parses as JSON; else :class:`NoStructuredData`. An ``isError``
    result raises :class:`ToolResultError` (a :class:`~jsonrpc_mcp.ToolError`): its payload describes the
    failure, it is not the tool's data.
    """
    if result.is_error is True:
        raise ToolResultError(result)
    if result.structured_content is not UNSET:
        return msgspec.convert(result.structured_content, type, dec_hook=dec_hook)
    texts = [c for c in result.content if isinstance(c, t.TextContent)]
    for block in texts:
        meta = block.meta if isinstance(block.meta, dict) else {}
        if meta.get("mimeType") == "application/json":
            return msgspec.json.decode(block.text, type=type, dec_hook=dec_hook)
    for block in texts:
        try:
            return msgspec.json.decode(block.text, type=type, dec_hook=dec_hook)
        except msgspec.DecodeError:
            continue
    raise NoStructuredData("the tool result has no structuredContent and no JSON text block")


def _file_roots(roots: Sequence[t.Root]) -> list[t.Root]:
    """``roots`` as a list, each a ``file://`` URI as every revision requires, whose path has no ``.`` or ``..``
    segment (clients MUST validate root URIs to prevent path traversal); else ``ValueError`` naming it."""
    from urllib.parse import unquote, urlsplit

    for root in roots:
        if not root.uri.startswith("file://"):
            raise ValueError(f"a root is a file:// URI, not {root.uri!r}")
        parts = urlsplit(root.uri)
        if any(segment in (".", "..") for segment in unquote(f"{parts.netloc}/{parts.path}").split("/")):
            raise ValueError(f"a root names its folder without . or .. segments, not {root.uri!r}")
    return list(roots)


def _check_options(
    protocol_version: str,
    elicitation_modes: Sequence[str],
    request_timeout: Any,
    max_total_timeout: Any,
    ping_interval: Any = None,
    ping_timeout: Any = 10.0,
) -> None:
    """Refuse a setting of :class:`ClientSession` that could not be meant (a misspelt version would have been
    taken for the stateless era), naming it."""
    if protocol_version != "auto" and protocol_version not in (*HANDSHAKE_VERSIONS, *STATELESS_VERSIONS):
        known = ", ".join((*STATELESS_VERSIONS, *HANDSHAKE_VERSIONS))
        raise ValueError(f'protocol_version must be "auto" or one of {known}, not {protocol_version!r}')
    if isinstance(elicitation_modes, str) or not set(elicitation_modes) <= {"form", "url"}:
        raise ValueError(f'elicitation_modes is a list of "form" and "url", not {elicitation_modes!r}')
    if not elicitation_modes:
        raise ValueError('elicitation_modes names one mode at least ("form", "url"): a client that elicits has one')
    for name, seconds in (
        ("request_timeout", request_timeout),
        ("max_total_timeout", max_total_timeout),
        ("ping_interval", ping_interval),
        ("ping_timeout", ping_timeout),
    ):
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))):
            raise TypeError(f"{name} must be a number of seconds (or None), not {seconds!r}")
        if seconds is not None and not seconds > 0:  # (a NaN is not either)
            raise ValueError(f"{name} must be positive (or None), not {seconds!r}")


class ClientSession:
    """The protocol side of a connection to one MCP server, over any :class:`MessageStream`.

    Most code uses :class:`jsonrpc_mcp.Client`, which adds the ``connect_*`` constructors for each transport.
    """

    def __init__(
        self,
        stream: MessageStream,
        *,
        name: str = "jsonrpc-mcp",
        version: str = __version__,
        protocol_version: str = "auto",
        sampling: SamplingHandler | None = None,
        elicitation: ElicitationHandler | None = None,
        elicitation_modes: Sequence[str] = ("form", "url"),
        roots: RootsProvider | Sequence[t.Root] | None = None,
        on_notification: NotificationCallback | None = None,
        on_log: Callable[[t.LoggingMessageNotificationParams], Awaitable[None] | None] | None = None,
        request_timeout: float | None = 300.0,
        reset_timeout_on_progress: bool = True,
        max_total_timeout: float | None = 3600.0,
        capabilities: Mapping[str, Any] | None = None,
        validate_tool_output: bool = True,
        validate_elicitation: bool = True,
        middleware: Sequence[ClientMiddleware] = (),
        extensions: Sequence[Extension] = (),
        tracing: TracingHook | bool | None = None,
        ping_interval: float | None = None,
        ping_timeout: float = 10.0,
        cache: ResultCache | bool | None = None,
        cache_origin: str | None = None,
        cache_auth: str | None = None,
        progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
    ) -> None:
        _check_options(
            protocol_version, elicitation_modes, request_timeout, max_total_timeout, ping_interval, ping_timeout
        )
        if isinstance(roots, Sequence) and not all(isinstance(root, t.Root) for root in roots):  # (str: its letters)
            raise TypeError('roots is a list of types.Root(uri="file:///...", name=...), or an async function')
        if isinstance(roots, Sequence):
            _file_roots(roots)
        handlers = (
            ("sampling", sampling),
            ("elicitation", elicitation),
            ("on_notification", on_notification),
            ("on_log", on_log),
        )
        for option, handler in handlers:
            if handler is not None and not callable(handler):  # (it would fail when the server first asks)
                raise TypeError(f"{option} is a function, not {handler!r}")
        self.stream = stream
        self._middleware: tuple[ClientMiddleware, ...] = tuple(middleware)
        #: Whether OpenTelemetry traces the messages (:mod:`jsonrpc_mcp.otel`; ``None``: never). The option:
        #: ``None``, by itself once the application configures OpenTelemetry; ``False``, never; a
        #: :class:`~jsonrpc_mcp.otel.Tracing`, with its providers.
        self.tracing: TracingSwitch | None = tracing_switch(tracing)
        self.client_info = {"name": name, "version": version}
        self.requested_version = protocol_version
        self.sampling = sampling
        self.elicitation = elicitation
        self.elicitation_modes = tuple(elicitation_modes)
        self.roots = roots
        self.on_notification = on_notification
        self.on_log = on_log
        self.request_timeout = request_timeout
        #: Seconds between two pings that check the connection (``None``, the default: no pings); a ping not
        #: answered within ``ping_timeout`` seconds is taken for a broken connection, which is then closed.
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        #: A request that asked for progress (``progress=``) gets its full timeout again at each progress
        #: notification, up to ``max_total_timeout`` seconds from its start when that is set.
        self.reset_timeout_on_progress = reset_timeout_on_progress
        self.max_total_timeout = max_total_timeout
        #: The progress callback of a request is called at most once per ``progress_interval`` seconds, however
        #: often the server reports: the latest report held meanwhile is passed when the interval ends, or before
        #: the result is returned (decision 104; 0: each report as it comes).
        self.progress_interval = check_interval(progress_interval)
        self._extra_capabilities = dict(capabilities or {})
        #: The protocol extensions this client declares (SEP-2133), by identifier.
        self.extensions: dict[str, Extension] = {extension.id: extension for extension in extensions}
        #: Check each tool result's ``structuredContent`` against the tool's ``outputSchema`` (the spec's SHOULD;
        #: needs the ``validation`` extra): a mismatch raises :class:`InvalidToolOutput` from :meth:`call_tool`.
        self.validate_tool_output = validate_tool_output
        #: Whether an accepted form-mode elicitation answer is checked against its ``requestedSchema`` before it is
        #: sent (decision 93; with the validation extra).
        self.validate_elicitation = validate_elicitation
        self._output_schemas = OutputSchemas()
        #: ``execution.taskSupport`` of the tools last listed (2025-11-25; a tool that says none is left out;
        #: ``None``: never listed).
        self._task_support: dict[str, str] | None = None
        #: 2025-11-25 tasks followed now, by id: set at the next notifications/tasks/status for it.
        self._task_events: dict[str, anyio.Event] = {}
        self._initialize_id: RequestId | None = None  # (never cancelled: the spec forbids it)
        self.dispatcher = Dispatcher(
            stream,
            self._receive_request,
            self._receive_notification,
            allow_batch=lambda: self.protocol_version in BATCH_VERSIONS,
            cancel_frame=self._cancel_frame,
            request_timeout=request_timeout,
        )
        self.protocol_version: str | None = None
        #: True when the server is spoken to in the 2026-07-28 stateless era (every request carries ``_meta``).
        self.stateless = False
        # 2026-07-28: "The client MUST NOT send JSON-RPC responses" (a server of that era sends no requests): in the
        # stateless era a request from the server is dropped unanswered, and logged.
        self.dispatcher.answers = lambda: not self.stateless
        self.dispatcher.handshake = lambda: not self.stateless  # (the codes of earlier releases: errors.error_for_code)
        self._paced = Pacer(self.progress_interval, _pass_progress, self.dispatcher.spawn)
        self.log_level: str | None = None
        self.max_input_rounds = 16
        #: The most pages ``list_tools`` and the other listings read before giving up on a server that never stops
        #: answering with a new cursor (:class:`ProtocolViolation`).
        self.max_pages = 1000
        self.server_info: t.Implementation | None = None
        self.server_capabilities: t.ServerCapabilities = t.ServerCapabilities()
        self.instructions: str | None = None
        self._progress: dict[str | int, _ProgressWatch] = {}
        self._acks: dict[RequestId, tuple[anyio.Event, dict[str, Any]]] = {}
        #: The URL-mode elicitations accepted and not completed yet (2025-11-25), oldest first, at most
        #: _URL_ELICITATIONS_KEPT: a completion notification for any other id is ignored.
        self._url_elicitations: dict[str, None] = {}
        self._tokens = itertools.count(1)
        self._subscriptions: set[str] = set()  # resources/subscribe'd in this session: renewed with a new one
        if cache is not None and not isinstance(cache, (bool, ResultCache)):
            raise TypeError(f"cache is a ResultCache, or True for one of this client's own, not {cache!r}")
        #: The cache of 2026-07-28 results this client reads and fills (``None``: every request goes to the
        #: server); the server is ``cache_origin`` in it (the ``connect_*`` constructors name it: its URL, its
        #: command; else this client alone), the authorization context ``cache_auth`` (``connect_http`` takes it
        #: from the credential; ``None``: none).
        self.cache: ResultCache | None = (
            cache if isinstance(cache, ResultCache) else ResultCache() if cache is True else None
        )
        self.cache_origin = cache_origin if cache_origin is not None else identity_of(self, "client")
        self.cache_auth = cache_auth
        stream.restart_session = self._restart_session

    # --- connecting ----------------------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def connect(cls, stream: MessageStream, **options: Any) -> AsyncIterator[Self]:
        """Run a client over an already-open message stream and initialize it."""
        client = cls(stream, **options)
        try:
            with unwrap_group():
                async with anyio.create_task_group() as tg:
                    await tg.start(client.dispatcher.run)
                    try:
                        await client.start()
                        if client.ping_interval is not None:
                            tg.start_soon(client._keep_alive)
                        yield client
                    finally:
                        tg.cancel_scope.cancel()
        finally:
            client._let_go()
            # (a cancellation that passed through this frame may keep it in its traceback, in a cycle of the task
            # group's own: the client is not to be kept with it)
            del client

    def _let_go(self) -> None:
        """The connection is over: let go of what links this client to its dispatcher and stream and back (the
        handlers it gave them), so that both are freed by reference counting, not left in cycles for the cyclic
        collector. What the client learnt (``server_info``, ``server_capabilities``, ...) stays readable."""
        self.dispatcher.forget_handlers()
        if self.stream.restart_session == self._restart_session:
            self.stream.restart_session = None

    # --- lifecycle -----------------------------------------------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self.sampling is not None:
            caps["sampling"] = {}
        if self.elicitation is not None:
            caps["elicitation"] = {mode: {} for mode in self.elicitation_modes}
        if self.roots is not None:
            caps["roots"] = {"listChanged": True}
        caps.update(self._extra_capabilities)
        version = self.protocol_version
        if version is None:
            version = self.requested_version if self.requested_version in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
        declared = extensions_capability(self.extensions.values(), version)
        if declared:
            caps["extensions"] = {**caps.get("extensions", {}), **declared}
        return caps

    def server_extension(self, extension_id: str) -> Mapping[str, Any] | None:
        """The settings the server declared for an extension (``None``: it did not declare it)."""
        declared = self.server_capabilities.extensions
        if not isinstance(declared, dict):
            return None
        settings = declared.get(extension_id)
        return settings if isinstance(settings, dict) else None

    async def start(self) -> None:
        """Pick the era and get the server's capabilities.

        ``protocol_version="auto"`` (the default) probes ``server/discover`` in the 2026-07-28 stateless era; a
        ``DiscoverResult`` (or an unsupported-version error naming a version we speak) keeps the stateless era,
        anything else falls back to the ``initialize`` handshake. A handshake version goes straight to
        ``initialize``; a stateless version never falls back.
        """
        wanted = self.requested_version
        if wanted in HANDSHAKE_VERSIONS:
            await self.initialize()
            return
        version = wanted if wanted in STATELESS_VERSIONS else STATELESS_VERSIONS[0]
        try:
            await self.discover(version)
        except ConnectionClosed:
            raise  # the server is gone: no handshake to fall back to
        except RpcError as exc:
            # A refusal only a 2026-07-28 server makes (over HTTP, a 400 whose body says so) is not an older
            # server's: it is the caller's to see, not a reason to try the handshake.
            if wanted != "auto" or isinstance(exc, AuthorizationError) or refused_by_a_modern_server(exc):
                raise
            logger.debug("server/discover failed (%s); falling back to the initialize handshake", exc.message)
            self.stateless = False
            await self.initialize()

    async def discover(self, version: str = STATELESS_VERSIONS[0]) -> t.DiscoverResult:
        """``server/discover`` (2026-07-28): switches this client to the stateless era on success."""
        for _ in range(2):
            self.stateless = True
            self.protocol_version = version
            try:
                raw = await self._send("server/discover", {"_meta": self._meta()}, timeout=self._probe_timeout())
            except ConnectionClosed as exc:
                self.stateless = False
                self.protocol_version = None
                raise await self._explain(exc, "server/discover") from None
            except RpcError as exc:
                if exc.code != UNSUPPORTED_PROTOCOL_VERSION:
                    self.stateless = False
                    self.protocol_version = None
                    raise
                supported = exc.data.get("supported", []) if isinstance(exc.data, dict) else []
                common = [v for v in STATELESS_VERSIONS if v in supported]
                if not common:
                    self.stateless = False
                    self.protocol_version = None
                    raise
                version = common[0]
                continue
            result: t.DiscoverResult = _result_of("server/discover", raw, t.DiscoverResult)
            self.server_capabilities = result.capabilities
            self.instructions = result.instructions if isinstance(result.instructions, str) else None
            meta = result.meta if isinstance(result.meta, dict) else {}
            info = meta.get(META_SERVER_INFO)
            if isinstance(info, dict):
                self.server_info = msgspec.convert(info, t.Implementation)
            return result
        raise RpcError("no common protocol version", code=UNSUPPORTED_PROTOCOL_VERSION)  # pragma: no cover

    def _probe_timeout(self) -> float:
        """How long ``server/discover`` waits: a server of the handshake era may never answer it, so 30 seconds
        at most, or the client's ``request_timeout`` when that is shorter."""
        return 30.0 if self.request_timeout is None else min(30.0, self.request_timeout)

    def _meta(self, declare: Sequence[Extension] = ()) -> dict[str, Any]:
        capabilities = self.capabilities()
        if declare:
            more = extensions_capability(declare, self.protocol_version or "")
            capabilities["extensions"] = {**capabilities.get("extensions", {}), **more}
        meta: dict[str, Any] = {
            META_PROTOCOL_VERSION: self.protocol_version,
            META_CLIENT_CAPABILITIES: capabilities,
            META_CLIENT_INFO: self.client_info,
        }
        if self.log_level is not None:
            meta[META_LOG_LEVEL] = self.log_level
        return meta

    async def initialize(self) -> t.InitializeResult:
        """The handshake: ``initialize``, then ``notifications/initialized``."""
        requested = self.requested_version if self.requested_version in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
        params = {
            "protocolVersion": requested,
            "capabilities": self.capabilities(),
            "clientInfo": self.client_info,
        }
        try:
            self._initialize_id = self.dispatcher.next_request_id()
            raw = await self._send("initialize", params, ident=self._initialize_id)
        except ConnectionClosed as exc:
            raise await self._explain(exc, "initialize") from None
        result: t.InitializeResult = _result_of("initialize", raw, t.InitializeResult)
        if result.protocol_version not in HANDSHAKE_VERSIONS:
            raise RpcError(
                f"the server answered with protocol version {result.protocol_version!r}, which we do not speak",
                code=-32600,
            )
        self.protocol_version = result.protocol_version
        self.server_info = result.server_info
        self.server_capabilities = result.capabilities
        self.instructions = result.instructions if isinstance(result.instructions, str) else None
        await self._notify("notifications/initialized")
        return result

    async def _restart_session(self) -> None:
        """The server ended our session (Streamable HTTP: a 404 for it), or its process was started again (stdio):
        in the handshake era the handshake again, with the same capabilities and client info, then what the last
        session had: the log level and the resource subscriptions (each one that fails is logged, the others go
        on). The stateless era has no handshake and nothing the server keeps (the log level goes with every
        request; a ``listen`` stream opens itself again)."""
        if self.stateless:
            return
        await self.initialize()
        logger.info("started a new MCP session: the last one ended")
        again: list[tuple[str, dict[str, Any]]] = [("resources/subscribe", {"uri": uri}) for uri in self._subscriptions]
        if self.log_level is not None:
            again.insert(0, ("logging/setLevel", {"level": self.log_level}))
        for method, params in again:
            try:
                await self.request(method, params)
            except (RpcError, ConnectionError) as exc:
                logger.warning("%s in the new MCP session failed: %s", method, getattr(exc, "message", exc))

    async def aclose(self) -> None:
        await self.stream.aclose()

    # --- requests ------------------------------------------------------------------------------------------

    def _require(self, capability: str) -> None:
        if getattr(self.server_capabilities, capability, UNSET) in (UNSET, None):
            raise MethodNotFound(f"the server did not declare the {capability!r} capability")

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | msgspec.Struct | None = None,
        result_type: type[T] | Any = dict,
        *,
        timeout: float | object | None = ...,
        progress: ProgressCallback | None = None,
        reset_timeout_on_progress: bool | None = None,
    ) -> Any:
        """Send any request and decode its result as ``result_type`` (the low-level escape hatch).

        In the stateless era the request carries ``_meta`` (version, capabilities, client info, log level), and
        an ``InputRequiredResult`` is answered through the sampling/elicitation/roots handlers and retried (a new
        id, the same params, ``inputResponses`` and the exact ``requestState``) until the result is complete.

        With ``progress`` the request asks for progress notifications, and each one gives it its whole
        ``timeout`` again (unless ``reset_timeout_on_progress`` is False, here or for the session), never past
        the session's ``max_total_timeout`` from the start.
        """
        raw = await self._request_raw(
            method, params, timeout=timeout, progress=progress, reset_timeout_on_progress=reset_timeout_on_progress
        )
        return _result_of(method, raw, result_type)

    async def _request_raw(
        self,
        method: str,
        params: Mapping[str, Any] | msgspec.Struct | None,
        *,
        timeout: float | object | None = ...,
        progress: ProgressCallback | None = None,
        reset_timeout_on_progress: bool | None = None,
        declare: Sequence[Extension] = (),
        keep: frozenset[str] = frozenset(),
        cached: bool = True,
    ) -> Raw:
        """:meth:`request` up to the raw result: ``declare`` adds extensions to this request's capabilities
        (2026-07-28), and a result of a kind in ``keep`` is returned as it is rather than handed to its
        extension. With a :attr:`cache`, a fresh result kept for the request answers it (unless ``cached`` is
        False), and a result the server marked cacheable is kept."""
        body: dict[str, Any] = msgspec.to_builtins(params) if isinstance(params, msgspec.Struct) else dict(params or {})
        slot = self._cache_slot(method, body)
        if slot is not None and cached and (hit := slot.get()) is not None:
            return Raw(hit)
        token: int | None = None
        watch: _ProgressWatch | None = None
        if progress is not None:
            token = next(self._tokens)
            body["_meta"] = {**body.get("_meta", {}), "progressToken": token}
            limit = self.request_timeout if timeout is ... else cast("float | None", timeout)
            if reset_timeout_on_progress is None:
                reset_timeout_on_progress = self.reset_timeout_on_progress
            watch = _ProgressWatch(progress, limit if reset_timeout_on_progress else None, self.max_total_timeout)
            self._progress[token] = watch
        if self.stateless:
            body["_meta"] = {**body.get("_meta", {}), **self._meta(declare)}
        try:
            ident = self.dispatcher.next_request_id()
            if watch is not None:
                watch.ident = ident
            raw = await self._send(method, body or None, timeout=timeout, ident=ident)
            rounds = 0
            kind = _result_kind(raw) if self.stateless else "complete"
            while kind == "input_required":
                rounds += 1
                if rounds > self.max_input_rounds:
                    raise RpcError(f"{method}: the server kept asking for input ({rounds} rounds)", code=-32603)
                needed: _InputRequired = _result_of(method, raw, _InputRequired)
                if not needed.input_requests and needed.request_state is None:
                    raise ProtocolViolation(
                        f"{method}: the server answered input_required with neither inputRequests nor requestState"
                    )
                retry = {k: v for k, v in body.items() if k not in ("inputResponses", "requestState")}
                if needed.input_requests:
                    retry["inputResponses"] = await self._answer_inputs(needed.input_requests)
                if needed.request_state is not None:
                    retry["requestState"] = needed.request_state
                ident = self.dispatcher.next_request_id()
                if watch is not None:
                    watch.ident = ident
                raw = await self._send(method, retry, timeout=timeout, ident=ident)
                kind = _result_kind(raw)
            if watch is not None:
                await self._paced.finish(token)  # the latest report held back, before the result
                await watch.settled(self.request_timeout)  # every progress callback has run when the call returns
        except (ConnectionClosed, RequestTimeout) as exc:
            stale = slot.stale() if slot is not None and not isinstance(exc, AuthorizationError) else None
            if stale is not None:
                logger.warning("%s: serving a stale cached result: %s", method, exc.message)
                return Raw(stale)
            if isinstance(exc, RequestTimeout):
                raise
            raise await self._explain(exc, method) from None
        except RpcError as exc:
            if self.cache is not None and self.stateless:  # (a refused cursor, a tool gone: what is kept goes)
                self.cache.failed(self.cache_origin, method, body, exc.code)
            raise
        finally:
            if token is not None:
                self._progress.pop(token, None)
                self._paced.drop(token)
        if slot is not None and rounds == 0:  # (a result after inputResponses or requestState is never kept)
            slot.keep(raw)
        if kind != "complete" and kind not in keep:
            raw = await self._extension_result(kind, method, body, raw, progress, declare)
        return raw

    def _cache_slot(self, method: str, body: Mapping[str, Any]) -> CacheSlot | None:
        """Where the :attr:`cache` keeps the result of a request (2026-07-28), or ``None``: it is not kept."""
        if self.cache is None or not self.stateless:
            return None
        return self.cache.slot(self.cache_origin, self.cache_auth, self.protocol_version, method, body)

    async def _extension_result(
        self,
        kind: str,
        method: str,
        body: dict[str, Any],
        raw: Raw,
        progress: ProgressCallback | None,
        declared: Sequence[Extension],
    ) -> Raw:
        """A result of an extension's kind, turned into the method's own result by that extension (one this client
        declared for the request); any other kind is a result the client never asked for."""
        for extension in (*declared, *self.extensions.values()):
            handler = extension.result_handlers.get(kind)
            if handler is not None:
                answer = ExtensionResult(self, method, body, msgspec.json.decode(raw), progress)
                out = await handler(answer)
                return Raw(out if isinstance(out, bytes) else _encode(out))
        raise ProtocolViolation(
            f"{method}: the server answered with a {kind!r} result, which no extension of this client handles"
        )

    async def _explain(self, exc: ConnectionClosed, method: str) -> ConnectionClosed:
        """``exc`` with the reason the transport gives for the end of the connection, when it gives one (a stdio
        server's exit status: "the server process exited with status 1 before answering initialize")."""
        why_closed = getattr(self.stream, "why_closed", None)
        reason = await why_closed() if why_closed is not None else None
        if reason is None:
            return exc
        return ConnectionClosed(f"{reason} before answering {method}")

    async def _answer_inputs(self, requests: Mapping[str, Any]) -> dict[str, Any]:
        """Answer the input requests of an ``InputRequiredResult`` with this client's handlers."""
        answers: dict[str, Any] = {}
        for key, item in requests.items():
            method = item.get("method")
            params = item.get("params") or {}
            if method == "sampling/createMessage" and self.sampling is not None:
                result: Any = await self._sample(_convert_params(params, t.CreateMessageRequestParams))
            elif method == "elicitation/create" and self.elicitation is not None:
                result = await self._elicit(_convert_params(params, t.ElicitRequestParams))
            elif method == "roots/list" and self.roots is not None:
                roots = self.roots
                items = list(roots) if isinstance(roots, Sequence) else await roots()
                result = t.ListRootsResult(roots=_file_roots(items))
            else:
                raise RpcError(f"the server asked for {method!r}, which this client cannot provide", code=-32601)
            answers[key] = msgspec.to_builtins(result)
        return answers

    async def ping(self, *, timeout: float | object | None = ...) -> None:
        """``ping`` (in the stateless era, which has none, ``server/discover``)."""
        if self.stateless:  # (never answered from the cache: the server is asked)
            await self._request_raw("server/discover", None, timeout=timeout, cached=False)
            return
        await self.request("ping", timeout=timeout)

    async def _keep_alive(self) -> None:
        """Ping every ``ping_interval`` seconds, one ping at a time. A ping that gets no answer within
        ``ping_timeout`` is a connection failure: logged, and the connection closed (what waits on it fails with
        :class:`ConnectionClosed`); an error for an answer is logged and pinging goes on."""
        interval = cast("float", self.ping_interval)
        while True:
            await anyio.sleep(interval)
            try:
                await self.ping(timeout=self.ping_timeout)
            except RequestTimeout:
                logger.warning("ping: no answer within %g s; closing the connection as broken", self.ping_timeout)
                self.dispatcher.close()  # (what waits fails now: a closed stream need not wake its reader)
                await self.stream.aclose()
                return
            except ConnectionClosed:
                if self.dispatcher.closed:
                    return
                # (the server process was started again: its pings go on)
            except RpcError as exc:
                logger.warning("ping failed: %s (%s)", exc.message, exc.code)

    async def list_tools(self) -> list[t.Tool]:
        """Every tool of the server (all pages)."""
        self._require("tools")
        tools: list[t.Tool] = await self._all_pages("tools/list", t.ListToolsResult, "tools")
        kept: list[t.Tool] = []
        headers: dict[str, dict[tuple[str, ...], str]] = {}
        for tool in tools:
            try:
                headers[tool.name] = tool_header_params(tool.input_schema)
            except InvalidHeaderAnnotation as exc:
                logger.warning("ignoring tool %r: %s", tool.name, exc)
                continue
            kept.append(tool)
        self._output_schemas.learn(kept)
        self._task_support = {
            tool.name: tool.execution.task_support
            for tool in kept
            if isinstance(tool.execution, t.ToolExecution) and isinstance(tool.execution.task_support, str)
        }
        # The HTTP transport mirrors x-mcp-header parameters into Mcp-Param-* headers (SEP-2243).
        known = getattr(self.stream, "tool_headers", None)
        if isinstance(known, dict):
            known.clear()
            known.update({name: h for name, h in headers.items() if h})
        return kept

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: ProgressCallback | None = None,
        timeout: float | object | None = ...,
        meta: Mapping[str, Any] | None = None,
        reset_timeout_on_progress: bool | None = None,
        task: bool | Mapping[str, Any] | None = None,
    ) -> t.CallToolResult:
        """Call a tool. Tool failures come back as a result with ``is_error``; protocol errors raise, and so does
        a result that breaks the tool's ``outputSchema`` (:class:`InvalidToolOutput`, see
        ``validate_tool_output``).

        With ``progress``, each progress notification gives the call its whole ``timeout`` again (see
        :meth:`request`).

        ``task`` (2025-11-25, that revision's core tasks): ``True`` (or ``{"ttl": ms}``) asks the server to run
        the call as a task, and follows it to its end (``tasks/get`` at the server's interval, each new
        ``statusMessage`` given to ``progress``, then ``tasks/result``) where the server declares tasks for
        ``tools/call`` and the tool's ``execution.taskSupport`` allows it (listing the tools when they have not
        been listed yet), else calls it in its request; ``None`` (the default) does so when the tools last listed
        say this one requires it; ``False`` never. A 2026-07-28 server's tasks are the extension's: see
        :class:`~jsonrpc_mcp.tasks.ClientTasks`."""
        self._require("tools")
        required = task is None and self._core_tasks() and (self._task_support or {}).get(name) == "required"
        if required or (task and await self._may_be_task(name)):
            asked = task if isinstance(task, Mapping) else {}
            handle = await self._start_core_task(name, arguments, meta, asked)
            try:
                result: t.CallToolResult = await handle.wait(progress=progress)
            except BaseException:
                if not handle.done:
                    await handle.abandon()  # (a task-augmented call is cancelled with tasks/cancel)
                raise
            await self._check_tool_output(name, result)
            return result
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        if meta:
            params["_meta"] = dict(meta)
        mirrored = getattr(self.stream, "tool_headers", None)
        if isinstance(mirrored, dict) and name in mirrored:
            param_headers(mirrored[name], params["arguments"])  # (a value no header may carry: ValueError, unsent)
        options: dict[str, Any] = {
            "progress": progress,
            "timeout": timeout,
            "reset_timeout_on_progress": reset_timeout_on_progress,
        }
        try:
            result = await self.request("tools/call", params, t.CallToolResult, **options)
        except RpcError as exc:
            if exc.code != HEADER_MISMATCH or not isinstance(mirrored, dict):
                raise
            # The tool's x-mcp-header parameters may have changed since it was listed: list the tools again and
            # retry once with the headers they now say (refused before it ran, the call is safe to send again).
            logger.info("tools/call %s: %s; listing the tools again and retrying", name, exc.message)
            await self.list_tools()
            result = await self.request("tools/call", params, t.CallToolResult, **options)
        await self._check_tool_output(name, result)
        return result

    async def start_tool_task(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, meta: Mapping[str, Any] | None = None
    ) -> TaskHandle | CoreTaskHandle:
        """Call a tool, declaring the tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28) for this call,
        and return at once with the :class:`~jsonrpc_mcp.mcp.task_client.TaskHandle` the server answered: follow
        it with ``await handle.wait(progress=...)``, stop it with ``await handle.cancel()``, keep
        ``handle.task_id`` to follow it again later (:meth:`task`). A server that answers the call at once gives a
        handle that is done already. Needs a 2026-07-28 server that declares the extension, or a 2025-11-25 one
        that declares tasks for ``tools/call`` (a :class:`~jsonrpc_mcp.mcp.task_client.CoreTaskHandle` then; a
        tool whose ``execution.taskSupport`` does not allow a task is called in its request, and is done)."""
        self._require("tools")
        if self._core_tasks():
            return await self._start_core_task(name, arguments, meta, {} if await self._may_be_task(name) else None)
        tasks = self._tasks_extension()
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        if meta:
            params["_meta"] = dict(meta)
        raw = await self._request_raw("tools/call", params, declare=[tasks], keep=frozenset({"task"}))
        return TaskHandle(self, msgspec.json.decode(raw), result_type=t.CallToolResult)

    async def tool_requires_task(self, name: str) -> bool:
        """Must the tool ``name`` be called as a task (2025-11-25: ``execution.taskSupport`` is ``"required"``, on a
        server that declares tasks for ``tools/call``)? Lists the tools when they have not been listed yet."""
        if not self._core_tasks():
            return False
        if self._task_support is None:
            await self.list_tools()
        return (self._task_support or {}).get(name) == "required"

    async def _may_be_task(self, name: str) -> bool:
        """May the tool ``name`` be called as a 2025-11-25 task: the server declares tasks for ``tools/call`` and
        the tool's ``execution.taskSupport`` is ``"optional"`` or ``"required"``? Lists the tools when they have
        not been listed yet."""
        if not self._core_tasks():
            return False
        if self._task_support is None:
            await self.list_tools()
        return (self._task_support or {}).get(name) in ("optional", "required")

    def _core_tasks(self) -> bool:
        """Does the server run tool calls as 2025-11-25 tasks (``capabilities.tasks.requests.tools.call``)?"""
        declared = self.server_capabilities.tasks
        if self.stateless or self.protocol_version != "2025-11-25" or not isinstance(declared, t.ServerTasksCapability):
            return False
        requests = declared.requests
        tools = requests.get("tools") if isinstance(requests, dict) else None
        return isinstance(tools, dict) and isinstance(tools.get("call"), dict)

    async def _start_core_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None,
        task: Mapping[str, Any] | None,
    ) -> CoreTaskHandle:
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        if meta:
            params["_meta"] = dict(meta)
        if task is not None:
            params["task"] = dict(task)
            return await CoreTaskHandle.create(self, params, result_type=t.CallToolResult)
        raw = await self._request_raw("tools/call", params)
        return CoreTaskHandle(self, msgspec.json.decode(raw), result_type=t.CallToolResult)

    async def list_tasks(self, cursor: str | None = None) -> t.ListTasksResult:
        """One page of ``tasks/list`` (2025-11-25): the tasks the server keeps for this client's principal, and
        ``next_cursor`` for the next page (unset at the end), to pass back as it came (a cursor is opaque). Needs
        a server that declares ``tasks.list`` (one that authenticates its requestors); :meth:`iter_tasks` reads
        every page."""
        self._require_tasks_list()
        params = {"cursor": cursor} if cursor is not None else None
        page: t.ListTasksResult = await self.request("tasks/list", params, t.ListTasksResult)
        return page

    async def iter_tasks(self) -> AsyncIterator[t.Task]:
        """Every task of ``tasks/list``, page after page (see :meth:`list_tasks`)."""
        self._require_tasks_list()
        async for page in self._pages("tasks/list", t.ListTasksResult):
            for task in page.tasks:
                yield task

    def _require_tasks_list(self) -> None:
        declared = self.server_capabilities.tasks
        if (
            self.stateless
            or self.protocol_version != "2025-11-25"
            or not isinstance(declared, t.ServerTasksCapability)
            or not isinstance(declared.list, dict)
        ):
            raise MethodNotFound("the server did not declare tasks.list (2025-11-25)")

    def _task_changed_event(self, task_id: str) -> anyio.Event:
        """An event set at the next ``notifications/tasks/status`` for ``task_id`` (shared by its followers)."""
        event = self._task_events.get(task_id)
        if event is None:
            event = self._task_events[task_id] = anyio.Event()
        return event

    def _forget_task_event(self, task_id: str, event: anyio.Event) -> None:
        if self._task_events.get(task_id) is event:
            del self._task_events[task_id]

    def task(self, task_id: str, *, result_type: Any = t.CallToolResult) -> TaskHandle | CoreTaskHandle:
        """A handle on a task this client (or another one, as the same principal) started earlier: ``await
        handle.refresh()`` reads it, ``wait()`` follows it to its result."""
        if self._core_tasks():
            return CoreTaskHandle(self, {"task": {"taskId": task_id, "status": "working"}}, result_type=result_type)
        self._tasks_extension()
        return TaskHandle(self, {"resultType": "task", "taskId": task_id, "status": "working"}, result_type=result_type)

    def _tasks_extension(self) -> Extension:
        """The tasks extension this client declares (one made for the call when it declares none), after checking
        that the server offers it."""
        if not self.stateless or self.server_extension(TASKS_EXTENSION) is None:
            raise MethodNotFound(
                "the server does not offer tasks: neither the tasks extension (io.modelcontextprotocol/tasks, "
                "2026-07-28) nor 2025-11-25's tasks for tools/call"
            )
        return self.extensions.get(TASKS_EXTENSION) or ClientTasks()

    async def _check_tool_output(self, name: str, result: t.CallToolResult) -> None:
        """The spec's SHOULD: a result's ``structuredContent`` is checked against the tool's ``outputSchema``,
        listing the tools first when this one's schema is not known yet (once per listing)."""
        schemas = self._output_schemas
        if not self.validate_tool_output or result.is_error is True or not schemas.available():
            return
        if not schemas.knows(name):
            await self.list_tools()
            schemas.unlisted(name)
        schemas.check(name, result)

    async def list_resources(self) -> list[t.Resource]:
        self._require("resources")
        return await self._all_pages("resources/list", t.ListResourcesResult, "resources")

    async def list_resource_templates(self) -> list[t.ResourceTemplate]:
        self._require("resources")
        return await self._all_pages("resources/templates/list", t.ListResourceTemplatesResult, "resource_templates")

    async def read_resource(self, uri: str) -> t.ReadResourceResult:
        """``resources/read``. A URI the server does not know raises :class:`ResourceNotFound` in either era: -32002
        in the handshake era, -32602 with ``data.uri`` in 2026-07-28 (its ``code`` says which came)."""
        self._require("resources")
        try:
            result: t.ReadResourceResult = await self.request("resources/read", {"uri": uri}, t.ReadResourceResult)
        except InvalidParams as exc:
            if self.stateless and isinstance(exc.data, dict) and exc.data.get("uri") == uri:
                not_found = ResourceNotFound.received(exc.message, exc.data)
                not_found.code = exc.code
                raise not_found from None
            raise
        return result

    async def subscribe(self, uri: str) -> None:
        """``resources/subscribe`` (handshake era; in the stateless era use :meth:`listen`)."""
        self._require("resources")
        if self.stateless:
            raise MethodNotFound("resources/subscribe does not exist in the stateless era: use Client.listen()")
        await self.request("resources/subscribe", {"uri": uri})
        self._subscriptions.add(uri)

    async def unsubscribe(self, uri: str) -> None:
        self._require("resources")
        if self.stateless:
            raise MethodNotFound("resources/unsubscribe does not exist in the stateless era: use Client.listen()")
        self._subscriptions.discard(uri)
        await self.request("resources/unsubscribe", {"uri": uri})

    @asynccontextmanager
    async def listen(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resources: bool = False,
        resource_uris: Sequence[str] = (),
        task_ids: Sequence[str] = (),
    ) -> AsyncIterator[dict[str, Any]]:
        """Open a ``subscriptions/listen`` stream (2026-07-28) for the duration of the block.

        Yields the filter the server acknowledged. Change notifications arrive through ``on_notification``,
        tagged with ``_meta["io.modelcontextprotocol/subscriptionId"]``. Leaving the block cancels the stream.
        ``task_ids`` (the tasks extension, declared for this stream): ``notifications/tasks`` at each change of
        those tasks, each carrying the task as ``tasks/get`` would answer it.
        """
        if not self.stateless:
            raise MethodNotFound("subscriptions/listen exists only in the stateless era (2026-07-28)")
        wanted: dict[str, Any] = {}
        if tools:
            wanted["toolsListChanged"] = True
        if prompts:
            wanted["promptsListChanged"] = True
        if resources:
            wanted["resourcesListChanged"] = True
        if resource_uris:
            wanted["resourceSubscriptions"] = list(resource_uris)
        declare: list[Extension] = []
        if task_ids:
            wanted["taskIds"] = list(task_ids)
            declare.append(self._tasks_extension())
        ident = self.dispatcher.next_request_id()
        acknowledged = anyio.Event()
        self._acks[ident] = (acknowledged, {})
        body = {"notifications": wanted, "_meta": self._meta(declare)}
        with unwrap_group():
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    nonlocal ident
                    try:
                        while True:
                            restarts = getattr(self.stream, "restarts", 0)
                            try:
                                await self._send("subscriptions/listen", body, ident=ident, timeout=None)
                                return
                            except ConnectionClosed:
                                if self.dispatcher.closed or getattr(self.stream, "restarts", 0) == restarts:
                                    raise
                            # The server process was started again (stdio): the stream is opened in the new one,
                            # under a new id; the filter acknowledged is the same dict, updated by its answer.
                            logger.info("subscriptions/listen opened again in the server process started again")
                            entry = self._acks.pop(ident, (acknowledged, {}))
                            ident = self.dispatcher.next_request_id()
                            self._acks[ident] = entry
                    finally:
                        acknowledged.set()

                tg.start_soon(run)
                try:
                    with anyio.fail_after(30):
                        await acknowledged.wait()
                    yield self._acks[ident][1]
                finally:
                    self._acks.pop(ident, None)
                    tg.cancel_scope.cancel()

    async def list_prompts(self) -> list[t.Prompt]:
        self._require("prompts")
        return await self._all_pages("prompts/list", t.ListPromptsResult, "prompts")

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> t.GetPromptResult:
        self._require("prompts")
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = dict(arguments)
        result: t.GetPromptResult = await self.request("prompts/get", params, t.GetPromptResult)
        return result

    async def complete(
        self,
        ref: t.PromptReference | t.ResourceTemplateReference,
        argument: str,
        value: str,
        context: Mapping[str, str] | None = None,
    ) -> t.CompleteResult:
        self._require("completions")
        params: dict[str, Any] = {
            "ref": msgspec.to_builtins(ref),
            "argument": {"name": argument, "value": value},
        }
        if context:
            params["context"] = {"arguments": dict(context)}
        result: t.CompleteResult = await self.request("completion/complete", params, t.CompleteResult)
        return result

    async def set_logging_level(self, level: str, *, even_if_undeclared: bool = False) -> None:
        """Ask for log messages at ``level`` and above (stateless era: sent with every request).

        A server that did not declare the ``logging`` capability is asked only with ``even_if_undeclared=True``:
        some servers (the official Python SDK's among them) send log messages without declaring it. A
        handshake-era server asked that way that has no ``logging/setLevel`` (-32601) is no error: it goes on
        sending what it sends.
        """
        if not even_if_undeclared:
            _require_logging(self.server_capabilities)
        if self.stateless:
            self.log_level = level
            return
        try:
            await self.request("logging/setLevel", {"level": level})
        except MethodNotFound:
            if not even_if_undeclared:
                raise
            logger.debug("the server has no logging/setLevel; its log messages arrive at the level it chooses")
            return
        self.log_level = level  # (asked again of a new session, should the server end this one)

    async def notify_roots_changed(self) -> None:
        await self._notify("notifications/roots/list_changed")

    async def _all_pages(self, method: str, kind: Any, attr: str) -> list[Any]:
        """Every item of a listing. With a :attr:`cache`, the listing is a snapshot: all its pages from the
        cache when each one is fresh there, else all read again from the first (without a cursor); a cursor the
        server refuses on the way drops the pages kept and the listing is read once more from the first."""
        slot = self._cache_slot(method, {})
        if slot is None:
            return [item async for page in self._pages(method, kind) for item in getattr(page, attr)]
        kept = slot.cache.listing(self.cache_origin, self.protocol_version, method, self.cache_auth, self.max_pages)
        if kept:
            return [item for raw in kept for item in getattr(_result_of(method, raw, kind), attr)]
        for again in (False, True):
            items: list[Any] = []
            pages = 0
            try:
                async for page in self._pages(method, kind, cached=False):
                    pages += 1
                    items.extend(getattr(page, attr))
                break
            except InvalidParams:
                if not pages or again:
                    raise
                logger.info("%s: the server refused a cursor; reading the listing again from the first page", method)
        return items

    async def _pages(self, method: str, kind: Any, *, cached: bool = True) -> AsyncIterator[Any]:
        """Each page of a paginated listing, its ``nextCursor`` sent back as it came (cursors are opaque: never
        parsed, never changed); it ends at a page without one, or with one seen already, and raises
        :class:`ProtocolViolation` past :attr:`max_pages`."""
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            if len(seen) >= self.max_pages:
                raise ProtocolViolation(
                    f"{method}: the server went on paginating past {self.max_pages} pages (max_pages)"
                )
            params = {"cursor": cursor} if cursor is not None else None
            page = _result_of(method, await self._request_raw(method, params, cached=cached), kind)
            yield page
            nxt = page.next_cursor
            if not isinstance(nxt, str) or nxt in seen:
                return
            seen.add(nxt)
            cursor = nxt

    # --- the server's requests and notifications -----------------------------------------------------------

    def _cancel_frame(self, ident: RequestId, reason: str) -> bytes | None:
        """The notification telling the server we gave up on a request; none for ``initialize``, which a client
        must not cancel (it fails on its own, and the connection with it)."""
        return None if ident == self._initialize_id else encode_cancellation(ident, reason)

    # --- the one way out, and in (middleware) ---------------------------------------------------------------

    @property
    def middleware(self) -> tuple[ClientMiddleware, ...]:
        """Callables around every request and notification this client sends, and every one it receives from the
        server (:class:`ClientMessage`), outermost first; the tracing is the first of them while it runs."""
        tracing = self.tracing
        return self._middleware if tracing is None else tracing.client_chain(self._middleware)

    @middleware.setter
    def middleware(self, middleware: Sequence[ClientMiddleware]) -> None:
        self._middleware = tuple(middleware)

    async def _send(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float | object | None = ...,
        ident: RequestId | None = None,
    ) -> Raw:
        """Send a request (through the middleware) and return its raw result."""
        if not self.middleware:
            return await self.dispatcher.request(
                method, _encode(params) if params else None, timeout=timeout, ident=ident
            )
        if ident is None:
            ident = self.dispatcher.next_request_id()
        message = ClientMessage(self, "outgoing", method, params, ident, timeout=timeout)
        out = run_chain(self.middleware, message, _send_request)
        return await out if is_awaitable(out) else out  # type: ignore[no-any-return]

    async def _notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification (through the middleware)."""
        if not self.middleware:
            await self.dispatcher.notify(method, _encode(params) if params else None)
            return
        out = run_chain(self.middleware, ClientMessage(self, "outgoing", method, params, None), _send_notification)
        if is_awaitable(out):
            await out

    def _receive_request(self, req: Request, context: Any = None) -> bytes | Any:
        if not self.middleware:
            return self._on_request(req)
        message = ClientMessage(self, "incoming", req.method, _params_of(req.params), req.id, inbound=req)
        out = run_chain(self.middleware, message, _answer_request)
        return _bytes_later(out) if is_awaitable(out) else out

    def _receive_notification(self, note: Notification) -> Any:
        if not self.middleware:
            return self._on_notification(note)
        message = ClientMessage(self, "incoming", note.method, _params_of(note.params), None, inbound=note)
        return run_chain(self.middleware, message, _take_notification)

    def _on_request(self, req: Request, context: Any = None) -> bytes | Any:
        """The answer to a server's request; one made for a task (2025-11-25: ``_meta`` names it) names it too."""
        answer = self._answer_request(req)
        related = _related_task(req)
        if related is None:
            return answer
        return _relate(answer, related)

    def _answer_request(self, req: Request) -> bytes | Any:
        method = req.method
        if method == "ping":
            return b"{}"
        if method == "sampling/createMessage" and self.sampling is not None:
            return self._run(self._sample, _decode_params(req, t.CreateMessageRequestParams))
        if method == "elicitation/create" and self.elicitation is not None:
            params = _decode_params(req, t.ElicitRequestParams)
            mode = params.mode if isinstance(params.mode, str) else "form"
            if mode not in self.elicitation_modes:
                raise InvalidParams(f"Invalid params: elicitation mode {mode!r} was not declared")
            return self._run(self._elicit, params)
        if method == "roots/list" and self.roots is not None:
            return self._list_roots()
        raise MethodNotFound(f"Method not found: {method}")

    async def _sample(self, params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        """The sampling handler's answer; a request with tools (or a tool choice) is refused unless this client
        declared ``sampling.tools``, as the schema requires (2025-11-25), and one whose tool results do not follow
        the rules of :mod:`.sampling` (missing, mixed with other content, answering no tool use) is -32602."""
        if params.tools is not UNSET or params.tool_choice is not UNSET:
            declared = self.capabilities().get("sampling")
            if not isinstance(declared, Mapping) or not isinstance(declared.get("tools"), Mapping):
                raise InvalidParams("Invalid params: tools in sampling, but this client did not declare sampling.tools")
        problem = conversation_problem(msgspec.to_builtins(params.messages))
        if problem is not None:
            raise InvalidParams(f"Invalid params: {problem}")
        assert self.sampling is not None
        return await self.sampling(params)

    async def _elicit(self, params: t.ElicitRequestParams) -> t.ElicitResult:
        """The elicitation handler's answer; an accepted form whose content does not match the requested schema is
        not sent (an internal error naming what is wrong instead): clients SHOULD validate responses against it. An
        accepted URL-mode one is remembered until its completion notification."""
        assert self.elicitation is not None
        result = await self.elicitation(params)
        if params.mode == "url" and isinstance(params.elicitation_id, str) and result.action == "accept":
            waiting = self._url_elicitations
            waiting[params.elicitation_id] = None
            if len(waiting) > _URL_ELICITATIONS_KEPT:
                del waiting[next(iter(waiting))]
        if self.validate_elicitation and params.mode in ("form", UNSET) and result.action == "accept":
            content = {} if result.content is UNSET else result.content
            problems = schema_problems(params.requested_schema, content)
            if problems:
                raise InternalError(
                    "Internal error: the answer does not match the requested schema: " + "; ".join(problems)
                )
        return result

    async def _run(self, handler: Callable[[Any], Awaitable[Any]], params: Any) -> bytes:
        result = await handler(params)
        return _encode(result)

    async def _list_roots(self) -> bytes:
        roots = self.roots
        items = list(roots) if isinstance(roots, Sequence) else await roots()  # type: ignore[misc]
        return _encode(t.ListRootsResult(roots=_file_roots(items)))

    def _completes(self, elicitation_id: Any) -> bool:
        """Does a completion notification for ``elicitation_id`` end a URL-mode elicitation this client accepted
        (then it is completed and forgotten)?"""
        if not isinstance(elicitation_id, str) or elicitation_id not in self._url_elicitations:
            return False
        del self._url_elicitations[elicitation_id]
        return True

    def _on_notification(self, note: Notification) -> Any:
        method = note.method
        try:
            params = msgspec.json.decode(note.params) if note.params is not None else {}
        except msgspec.DecodeError:
            return None
        if not isinstance(params, dict):
            return None
        if method == "notifications/cancelled":
            self.dispatcher.cancel_inbound(params.get("requestId"), params.get("reason"))
            return None
        if method == "notifications/tools/list_changed":
            self._output_schemas.forget()
        if self.cache is not None:
            self.cache.notified(self.cache_origin, method, params)  # (a list changed: its pages are stale now)
        if method == "notifications/elicitation/complete" and not self._completes(params.get("elicitationId")):
            return None  # clients MUST ignore notifications referencing unknown or already-completed ids
        if method == "notifications/tasks/status":
            changed = self._task_events.pop(params.get("taskId"), None)  # type: ignore[arg-type]
            if changed is not None:
                changed.set()  # (a CoreTaskHandle following that task reads it now)
        if method == "notifications/subscriptions/acknowledged":
            meta = params.get("_meta") or {}
            sub_id = meta.get(META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
            pending = self._acks.get(sub_id) if isinstance(sub_id, (str, int)) else None
            if pending is not None:
                pending[1].update(params.get("notifications") or {})
                pending[0].set()
        # Every callback the notification is for hears of it; the async ones are awaited in turn, in one task.
        running: list[Awaitable[Any]] = []
        if method == "notifications/progress":
            token = params.get("progressToken")
            watch = self._progress.get(token)  # type: ignore[arg-type]
            if watch is not None:  # (progress on a token of no request of ours is dropped here)
                deadline = watch.deadline()  # every report moves the timeout, passed to the callback or held
                if deadline is not None and watch.ident is not None:
                    self.dispatcher.postpone(watch.ident, deadline)
                if self._paced.offer(token, (watch, params)):
                    out = watch.callback(params.get("progress", 0), params.get("total"), params.get("message"))
                    if out is not None:
                        running.append(watch.follow(out))
        if method == "notifications/message" and self.on_log is not None:
            try:
                out = self.on_log(msgspec.convert(params, t.LoggingMessageNotificationParams))
            except msgspec.ValidationError:
                out = None
            if out is not None:
                running.append(out)
        if self.on_notification is not None:
            out = self.on_notification(method, params)
            if out is not None:
                running.append(out)
        if not running:
            return None
        return _in_turn(method, running)


async def _pass_progress(held: tuple[_ProgressWatch, dict[str, Any]]) -> None:
    """Call a request's progress callback with a report the pacer held back (and wait for it if it is async)."""
    watch, params = held
    try:
        out = watch.callback(params.get("progress", 0), params.get("total"), params.get("message"))
        if out is not None:
            await watch.follow(out)
    except Exception:
        logger.exception("a callback for the notification 'notifications/progress' failed")


class _ProgressWatch:
    """A request that asked for progress: its callback, its current id, and how far a progress notification moves
    its timeout (``reset``: its whole timeout again, None: not at all; never past ``max_total`` from the start)."""

    __slots__ = ("busy", "callback", "ident", "idle", "not_after", "reset")

    def __init__(self, callback: ProgressCallback, reset: float | None, max_total: float | None) -> None:
        self.callback = callback
        self.ident: RequestId | None = None
        self.reset = reset
        self.not_after = None if max_total is None else anyio.current_time() + max_total
        self.busy = 0  # async callbacks not yet finished (each runs in a task of its own)
        self.idle: anyio.Event | None = None

    def follow(self, running: Awaitable[Any]) -> Coroutine[Any, Any, None]:
        """What the dispatcher runs for an ``async`` callback's awaitable: counted from now until it ends."""
        self.busy += 1
        return self._finish(running)

    async def _finish(self, running: Awaitable[Any]) -> None:
        try:
            await running
        finally:
            self.busy -= 1
            if not self.busy and self.idle is not None:
                self.idle.set()

    async def settled(self, limit: float | None) -> None:
        """Wait until every async callback started so far has ended (at most ``limit`` seconds)."""
        with anyio.move_on_after(math.inf if limit is None else limit):
            while self.busy:
                self.idle = anyio.Event()
                await self.idle.wait()

    def deadline(self) -> float | None:
        """The request's new deadline now that progress was reported, or None to leave it."""
        if self.reset is None:
            return None
        deadline = anyio.current_time() + self.reset
        return deadline if self.not_after is None else min(deadline, self.not_after)


class _ResultKind(msgspec.Struct, rename="camel"):
    result_type: str = "complete"


class _InputRequired(msgspec.Struct, rename="camel"):
    input_requests: dict[str, dict[str, Any]] = {}
    request_state: str | None = None


_kind_decoder: Final = msgspec.json.Decoder(_ResultKind)


def _result_kind(raw: bytes | msgspec.Raw) -> str:
    try:
        return _kind_decoder.decode(raw).result_type
    except msgspec.ValidationError:
        return "complete"


def _result_of(method: str, raw: bytes | Raw, kind: Any) -> Any:
    """The result of ``method`` as ``kind``. A result of another shape (a server that does not follow the schema)
    is :class:`ProtocolViolation` naming the method and what is wrong, never a bare decoding error."""
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        name = getattr(kind, "__name__", None) or repr(kind)
        raise ProtocolViolation(f"{method}: the server's result is not a valid {name}: {exc}") from None


def _require_logging(capabilities: t.ServerCapabilities) -> None:
    """Refuse to ask for log messages a server did not declare it sends, saying how to ask anyway."""
    if capabilities.logging in (UNSET, None):
        raise MethodNotFound(
            "the server did not declare the 'logging' capability: set_logging_level(level, even_if_undeclared=True) "
            "asks anyway (some servers, the official Python SDK's among them, log without declaring it)"
        )


def _decode_params(req: Request, kind: type[T]) -> T:
    try:
        return msgspec.json.decode(req.params or b"{}", type=kind)
    except msgspec.ValidationError as exc:
        raise InvalidParams(f"Invalid params: {exc}") from None


def _convert_params(params: Any, kind: type[T]) -> T:
    """The params of an input request (2026-07-28) as ``kind``, else :class:`InvalidParams` as for a request."""
    try:
        return msgspec.convert(params, kind)
    except msgspec.ValidationError as exc:
        raise InvalidParams(f"Invalid params: {exc}") from None


def _params_of(raw: msgspec.Raw | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


async def _bytes_later(pending: Awaitable[Any]) -> Any:
    return await pending


async def _in_turn(method: str, running: list[Awaitable[Any]]) -> None:
    """Await the async callbacks of one notification, in order; one that fails (logged) does not stop the next."""
    for out in running:
        try:
            await out
        except Exception:
            logger.exception("a callback for the notification %r failed", method)


# The ends of a client's middleware chains (functions of the message only: a chain is composed once).


async def _send_request(message: ClientMessage) -> Raw:
    body = message.params
    return await message.session.dispatcher.request(
        message.method, _encode(body) if body else None, timeout=message.timeout, ident=message.request_id
    )


async def _send_notification(message: ClientMessage) -> None:
    body = message.params
    await message.session.dispatcher.notify(message.method, _encode(body) if body else None)


_RELATED_KEY: Final = RELATED_TASK.encode()


def _related_task(req: Request) -> Any:
    """``_meta["io.modelcontextprotocol/related-task"]`` of a server's request, if it names a task."""
    raw = req.params
    if raw is None or _RELATED_KEY not in bytes(raw):
        return None
    params = _params_of(raw)
    meta = params.get("_meta") if params is not None else None
    related = meta.get(RELATED_TASK) if isinstance(meta, dict) else None
    return related if isinstance(related, dict) and isinstance(related.get("taskId"), str) else None


async def _relate(answer: Any, related: dict[str, Any]) -> bytes:
    """The answer (bytes, or an awaitable of them) with ``related`` in its ``_meta``, as the task's messages
    carry it."""
    raw: bytes = await answer if is_awaitable(answer) else answer
    result = msgspec.json.decode(raw)
    if not isinstance(result, dict):
        return raw
    result["_meta"] = {**(result.get("_meta") or {}), RELATED_TASK: related}
    return msgspec.json.encode(result)


def _answer_request(message: ClientMessage) -> Any:
    return message.session._on_request(message.inbound)  # type: ignore[arg-type]


def _take_notification(message: ClientMessage) -> Any:
    return message.session._on_notification(message.inbound)  # type: ignore[arg-type]
