"""One server-side MCP connection: era routing, the handshake lifecycle, capability gates (L4).

:class:`ServerSession` is the request handler of a :class:`~jsonrpc_mcp.jsonrpc.dispatch.Dispatcher`. For every
request the era is decided *first*, before the method is looked up (:mod:`.eras`, SPEC_MAP §6.3):

* the stateless era (2026-07-28): the request is validated and served on its own, whatever state the
  connection is in;
* the handshake era: ``initialize`` negotiates a version, ``ping`` is always answered, and every
  other request needs a completed ``initialize``.

It knows nothing of tools or resources: the server (:mod:`jsonrpc_mcp.mcp.server`) hands it a method table.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from functools import cache, partial
from types import CoroutineType, MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec
from msgspec import UNSET, Raw

from ..errors import (
    ConnectionClosed,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ResourceNotFound,
    RpcError,
    UrlElicitationRequired,
)
from ..jsonrpc import codes
from ..jsonrpc.dispatch import Dispatcher
from ..jsonrpc.wire import Intake, Notification, Request, RequestId, encode_notification
from ..jsonrpc.workers import SyncCall
from .compat import FITTED_METHODS, content_types, fit_content
from .context import Context, InputRequired
from .eras import Call, meta_problem, read_call
from .methods import BOTH, INPUT_METHODS, MethodSpec, require_defined
from .middleware import Message, Middleware, is_awaitable, run_chain
from .progress import Pacer
from .tracing import TracingSwitch
from .versions import (
    BATCH_VERSIONS,
    HANDSHAKE_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    STATELESS_VERSIONS,
    Era,
    negotiate,
)

if TYPE_CHECKING:
    from .request_state import StatePayload

__all__ = ("ServerSession", "ServerApp", "UnsupportedProtocolVersion", "encode_cancellation", "encode_stateless_result")

logger = logging.getLogger(__name__)

_encode: Final = msgspec.json.Encoder().encode
_EMPTY: Final = b"{}"
_NOTHING: Final[Mapping[str, Any]] = MappingProxyType({})
_HANDSHAKE: Final = Era.HANDSHAKE
_SPENT: Final = "Invalid params: this requestState was answered already (it is single-use)"
_STATELESS: Final = Era.STATELESS
#: What a handler may raise that the stateless era answers with a result or an error of its own
#: (:meth:`ServerSession._stateless_raised`).
_ANSWERED_IN_THE_STATELESS_ERA: Final = (InputRequired, UrlElicitationRequired, ResourceNotFound)


class UnsupportedProtocolVersion(RpcError):
    code = codes.UNSUPPORTED_PROTOCOL_VERSION
    default_message = "Unsupported protocol version"

    def __init__(self, requested: Any, supported: tuple[str, ...] = STATELESS_VERSIONS) -> None:
        super().__init__(
            f"Unsupported protocol version: {requested!r}",
            {"supported": list(supported), "requested": requested},
        )


class ServerApp(Protocol):
    """What a session needs from the server object (implemented by :class:`jsonrpc_mcp.Server`)."""

    methods: Mapping[str, MethodSpec]
    middleware: tuple[Middleware, ...]
    tracing: TracingSwitch | None
    instructions: str | None
    request_state_ttl: float
    progress_interval: float  #: seconds between two progress notifications of one request (0: no pacing)

    @property
    def request_state_keys(self) -> tuple[bytes, ...]: ...  # (the first seals, every one opens)

    def claim_state(self, nonce: str, expires: float, now: float) -> bool | Awaitable[bool]: ...

    def server_info(self) -> dict[str, Any]: ...

    def capabilities(self, version: str, *, identified: bool = False) -> dict[str, Any]: ...

    def advertises(self, capability: str, sub: str | None = None, *, version: str | None = None) -> bool: ...

    def attach(self, session: ServerSession) -> None: ...

    def detach(self, session: ServerSession) -> None: ...

    def on_client_notification(self, session: ServerSession, method: str, params: dict[str, Any]) -> None: ...


class _InitializeParams(msgspec.Struct, rename="camel"):
    protocol_version: str
    capabilities: dict[str, Any] = {}
    client_info: dict[str, Any] = {}


class _CancelledParams(msgspec.Struct, rename="camel"):
    request_id: Any = None
    reason: Any = None


_init_decoder: Final = msgspec.json.Decoder(_InitializeParams)
_cancel_decoder: Final = msgspec.json.Decoder(_CancelledParams)


#: What a result Struct needs for :func:`_encode_stateless_struct`, as (attribute, wire name).
_STATELESS_FIELDS: Final = {("meta", "_meta"), ("result_type", "resultType")}


def encode_stateless_result(result: Any, *, server_info: dict[str, Any] | None = None) -> bytes:
    """Encode a handler's result in the stateless era: with ``resultType`` and our identity in ``_meta``."""
    if type(result) is bytes:
        result = msgspec.json.decode(result)
    elif _is_stateless_ready(result.__class__):
        return _encode_stateless_struct(result, server_info)
    if isinstance(result, msgspec.Struct):
        if getattr(result, "result_type", UNSET) is UNSET and hasattr(result, "result_type"):
            result.result_type = "complete"
        result = msgspec.to_builtins(result)
    if isinstance(result, dict):
        result = dict(result)
        result.setdefault("resultType", "complete")
        if server_info is not None:
            meta = dict(result.get("_meta") or {})
            meta.setdefault(META_SERVER_INFO, server_info)
            result["_meta"] = meta
    return _encode(result)


@cache
def _is_stateless_ready(kind: type) -> bool:
    """A result Struct with both a ``resultType`` and a ``_meta`` field (asked once per type)."""
    if not issubclass(kind, msgspec.Struct):
        return False
    return {(f.name, f.encode_name) for f in msgspec.structs.fields(kind)} >= _STATELESS_FIELDS


def _encode_stateless_struct(result: Any, server_info: dict[str, Any] | None) -> bytes:
    """The bytes the dict route of :func:`encode_stateless_result` gives (``to_builtins``, add the keys, encode),
    without building the dict: ``_meta`` keeps its place when the result has one and comes last when it does not."""
    if result.result_type is UNSET:
        result.result_type = "complete"
    if server_info is None:
        return _encode(result)
    meta = result.meta
    if meta is UNSET:
        body = _encode(result)
        return b"".join((body[:-1], b',"_meta":', _encode({META_SERVER_INFO: server_info}), b"}"))
    if META_SERVER_INFO not in (meta or {}):
        result.meta = {**(meta or {}), META_SERVER_INFO: server_info}
    return _encode(result)


class ServerSession:
    """The server side of one connection (stdio process, socket connection, HTTP session or HTTP request)."""

    def __init__(self, app: ServerApp, dispatcher: Dispatcher | None = None) -> None:
        self.app = app
        self.dispatcher: Dispatcher = dispatcher  # type: ignore[assignment]
        # Handshake-era state
        self.version: str | None = None
        self.client_capabilities: dict[str, Any] = {}
        self.client_info: dict[str, Any] = {}
        self.initialized = False  # initialize answered
        #: The transport authenticated a principal for ``initialize`` (what the capabilities may depend on).
        self.identified = False
        self.ready = False  # notifications/initialized received
        self.log_level: str | None = "info"
        #: The content block types the negotiated revision defines, when it lacks some (see :mod:`.compat`).
        self.content_types: frozenset[str] | None = None
        self.subscriptions: set[str] = set()
        #: The ids of the URL-mode elicitations sent on this session and not completed yet (2025-11-25), oldest
        #: first, at most 1,024: what ``Context.complete_elicitation`` may complete.
        self.url_elicitations: dict[str, None] = {}
        # Stateless-era listen streams: subscription id -> filter
        self.listeners: dict[RequestId, dict[str, Any]] = {}
        self.closed = False
        #: What paces the progress of its requests, from the first report on (:meth:`report_progress`).
        self.pacer: Pacer | None = None
        #: Where work that outlives its request runs (a task's, 2026-07-28): ``None`` for the connection's own tasks; a
        #: transport whose session lasts one request (Streamable HTTP) sets the app's (see :meth:`start_detached`).
        self.detached: Callable[..., Awaitable[None]] | None = None
        if dispatcher is not None:
            self.bind(dispatcher)

    def bind(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        dispatcher.on_request = self.on_request
        dispatcher.on_notification = self.on_notification
        dispatcher.allow_batch = self.allow_batch
        dispatcher.cancel_frame = encode_cancellation
        dispatcher.before_answer = self._held_progress

    def allow_batch(self) -> bool:
        return self.version in BATCH_VERSIONS

    # --- inbound requests ----------------------------------------------------------------------------------

    def on_request(
        self, req: Request, call: Call | Intake | None = None
    ) -> bytes | Coroutine[Any, Any, bytes] | SyncCall:
        """Answer ``req``: bytes at once, or a coroutine to run. ``call``: the request as the transport already
        read it (:func:`.eras.read_call`, what came with it included), else it is read here (with the
        :class:`~jsonrpc_mcp.jsonrpc.wire.Intake` that came with the frames the read loop took, when that is what the
        dispatcher passes). With middleware, it runs around the handling."""
        if call is None:
            call = read_call(self.app.methods, req)
        elif type(call) is not Call:  # (an Intake: an HTTP+SSE POST's)
            call = read_call(self.app.methods, req, None, call)  # type: ignore[arg-type]
        chain = self.app.middleware
        if chain:
            return self._through_middleware(call, chain)
        out = self._handle(call)
        if type(out) is CoroutineType:
            return self._finish_later(call, out)
        if type(out) is SyncCall:
            return self._on_the_lane(call, out)
        return self._finish(call, out)

    def _on_the_lane(self, call: Call, sync: SyncCall) -> SyncCall:
        """``sync``, a plain handler's call, with its result's encoding added: the dispatcher's sync lane runs both on
        a worker thread, and makes no coroutine for the request."""
        sync.finish_with(ServerSession._finish, self, call)
        return sync

    def _handle(self, call: Call) -> Any:
        """The request's result, as its handler made it (or a coroutine producing it); raises RpcError."""
        if call.stateless:
            return self._stateless(call)
        req = call.request
        method = req.method
        if method == "initialize":
            return self._initialize(req, call.intake)
        if method == "ping":
            return _EMPTY
        if not self.initialized:
            raise InvalidRequest("Invalid Request: the session is not initialized; send initialize first")
        version = self.version
        assert version is not None
        spec = call.spec
        if (
            spec is None
            or (spec.eras is not BOTH and _HANDSHAKE not in spec.eras)
            or version < spec.min_version
            or (spec.capability is not None and not self.app.advertises(spec.capability, version=version))
        ):
            raise MethodNotFound(f"Method not found: {method}")
        if call.problem is not None:
            raise call.problem
        ctx = Context(
            session=self,
            request_id=req.id,
            method=method,
            era=_HANDSHAKE,
            version=version,
            client_capabilities=self.client_capabilities,
            client_info=self.client_info,
            meta=call.meta or _NOTHING,
            state=call.state,
            intake=call.intake,
        )
        return spec.handler(ctx, call.params)

    def _finish(self, call: Call, out: Any) -> bytes:
        """The result encoded for the request's era (fitted to an older revision's content, stamped with
        ``resultType`` and our identity in the stateless era)."""
        if type(out) is bytes:
            return out
        if call.stateless:
            return encode_stateless_result(out, server_info=self.app.server_info())
        if self.content_types is not None and call.request.method in FITTED_METHODS:
            out = fit_content(out, self.content_types)
        return _encode(out)

    async def _finish_later(self, call: Call, pending: Any) -> bytes:
        try:
            out = await pending
        except Exception:
            held = self._held_progress(call.request.id)
            if held is not None:
                await held
            raise
        except BaseException:
            self._drop_progress(call.request.id)
            raise
        held = self._held_progress(call.request.id)
        if held is not None:  # (no coroutine at all for a request that holds nothing: most of them)
            await held
        return self._finish(call, out)

    def _held_progress(self, ident: RequestId) -> Awaitable[None] | None:
        """The sending of the progress the request holds back, to await before its response (an error response
        too: a client never hears of progress after the response), or ``None`` when it holds nothing. Awaited by
        :meth:`_finish_later`, and by the dispatcher before a sync lane answer (``Dispatcher.before_answer``)."""
        if self.pacer is not None and ident in self.pacer:
            return self.pacer.finish(ident)
        return None

    def _drop_progress(self, ident: RequestId) -> None:
        """A cancelled request's held progress is never sent."""
        if self.pacer is not None:
            self.pacer.drop(ident)

    # --- progress ------------------------------------------------------------------------------------------

    async def report_progress(self, ident: RequestId, params: dict[str, Any]) -> None:
        """Send ``notifications/progress`` for request ``ident``, paced (:mod:`.progress`, decision 104)."""
        pacer = self.pacer
        if pacer is None:
            pacer = self.pacer = Pacer(self.app.progress_interval, self._send_progress, self._spawn)
        await pacer.report(ident, (ident, params))

    def _spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> bool:
        return self.dispatcher.spawn(fn, *args)

    async def _send_progress(self, held: tuple[RequestId, dict[str, Any]]) -> None:
        ident, params = held
        if self.dispatcher.still_wanted(ident):  # (a held report of a request cancelled meanwhile is not sent)
            await self.send_notification("notifications/progress", params, related=ident)

    def _through_middleware(
        self, call: Call, chain: tuple[Middleware, ...]
    ) -> bytes | Coroutine[Any, Any, bytes] | SyncCall:
        message = Message(self, call)
        out = run_chain(chain, message, _handle_message)
        if type(out) is SyncCall:  # (a plain handler's, passed on as it is by plain middleware)
            return self._on_the_lane(message.call, out)
        if is_awaitable(out):
            return self._finish_later(message.call, out)
        return self._finish(message.call, out)

    def _initialize(self, req: Request, intake: Intake) -> bytes:
        if req.params is None:
            raise InvalidParams("Invalid params: initialize needs protocolVersion, capabilities and clientInfo")
        try:
            params = _init_decoder.decode(req.params)
        except msgspec.ValidationError as exc:
            raise InvalidParams(f"Invalid params: {exc}") from None
        if self.initialized:
            # The version already negotiated, asked again, is answered as the first one was, requests in flight or
            # not (a client or a checker that re-checks the connection), and changes nothing of the session; another
            # version would change a session in use.
            if params.protocol_version != self.version:
                raise InvalidRequest("Invalid Request: the session is already initialized")
            return self._initialize_result()
        version = negotiate(params.protocol_version, HANDSHAKE_VERSIONS)
        self.version = version
        self.content_types = content_types(version)
        self.client_capabilities = params.capabilities
        self.client_info = params.client_info
        self.identified = intake.auth is not None
        self.initialized = True
        self.app.attach(self)
        return self._initialize_result()

    def assume_initialized(self, version: str) -> None:
        """Serve handshake-era requests as if ``initialize`` had settled ``version`` with a client that declared no
        capabilities: a request served on its own, without a session (Streamable HTTP without sessions)."""
        self.version = version
        self.content_types = content_types(version)
        self.initialized = self.ready = True

    def resume(self, version: str, capabilities: dict[str, Any], client_info: dict[str, Any]) -> None:
        """Go on with a session that ``initialize`` settled elsewhere (another worker, whose record says so)."""
        self.assume_initialized(version)
        self.client_capabilities = capabilities
        self.client_info = client_info
        self.app.attach(self)

    def _initialize_result(self) -> bytes:
        assert self.version is not None
        result: dict[str, Any] = {
            "protocolVersion": self.version,
            "capabilities": self.app.capabilities(self.version, identified=self.identified),
            "serverInfo": self.app.server_info(),
        }
        if self.app.instructions:
            result["instructions"] = self.app.instructions
        return _encode(result)

    # --- the stateless era ---------------------------------------------------------------------------------

    def _stateless(self, call: Call) -> Any:
        problem = meta_problem(call.meta)
        if problem is not None:
            raise problem
        meta: dict[str, Any] = call.meta  # type: ignore[assignment]  # (meta_problem found it usable)
        version = meta[META_PROTOCOL_VERSION]
        if version not in STATELESS_VERSIONS:
            raise UnsupportedProtocolVersion(version)
        req = call.request
        method = req.method
        spec = call.spec
        if (
            spec is None
            or _STATELESS not in spec.eras
            or (spec.capability is not None and not self.app.advertises(spec.capability, version=version))
        ):
            raise MethodNotFound(f"Method not found: {method}")
        if call.problem is not None:
            raise call.problem
        answers: dict[str, Any] = {}
        opened: StatePayload | None = None
        claim: Awaitable[bool] | None = None
        if method in INPUT_METHODS:
            answers, opened, claim = self._gather_answers(call)
        info = meta.get(META_CLIENT_INFO)
        ctx = Context(
            session=self,
            request_id=req.id,
            method=method,
            era=_STATELESS,
            version=version,
            client_capabilities=meta[META_CLIENT_CAPABILITIES],
            client_info=info if isinstance(info, dict) else _NOTHING,
            meta=meta,
            log_level=meta.get(META_LOG_LEVEL),
            answers=answers,
            state=call.state,
            intake=call.intake,
        )
        if claim is not None:
            return self._claim_then_run(claim, ctx, spec, call, answers, opened)
        return self._run_stateless(ctx, spec, call, answers, opened)

    def _run_stateless(
        self, ctx: Context, spec: MethodSpec, call: Call, answers: dict[str, Any], opened: StatePayload | None
    ) -> Any:
        try:
            out = spec.handler(ctx, call.params)
        except _ANSWERED_IN_THE_STATELESS_ERA as exc:
            return self._stateless_raised(exc, ctx, call, answers, opened)
        if type(out) is SyncCall:  # (the sync lane: what the call raises is answered on its worker thread too)
            out.rescue_with(_rescue_stateless, (self, ctx, call, answers, opened))
            return out
        if type(out) is CoroutineType:  # (what it raises is answered here: awaited)
            return self._await_stateless(ctx, out, call, answers, opened)
        return out

    async def _await_stateless(
        self, ctx: Context, coro: Awaitable[Any], call: Call, answers: dict[str, Any], opened: Any
    ) -> Any:
        try:
            return await coro
        except _ANSWERED_IN_THE_STATELESS_ERA as exc:
            return self._stateless_raised(exc, ctx, call, answers, opened)

    def _stateless_raised(
        self, exc: Exception, ctx: Context, call: Call, answers: dict[str, Any], opened: StatePayload | None
    ) -> dict[str, Any]:
        """What a handler raising one of :data:`_ANSWERED_IN_THE_STATELESS_ERA` is answered in the stateless era: an
        input-required result for the input it asked for, or the error of a resource not found."""
        if isinstance(exc, InputRequired):
            return self._input_required(ctx, exc, call, answers, opened)
        if isinstance(exc, UrlElicitationRequired):
            return self._input_required(ctx, _url_inputs(exc), call, answers, opened)
        assert isinstance(exc, ResourceNotFound)
        raise _stateless_not_found(exc) from None

    async def _claim_then_run(
        self, claim: Awaitable[bool], ctx: Context, spec: MethodSpec, call: Call, answers: dict[str, Any], opened: Any
    ) -> Any:
        """A single-use state's nonce is claimed where every worker's claims are (a backend) before its round is
        served."""
        if not await claim:
            raise InvalidParams(_SPENT)
        out = self._run_stateless(ctx, spec, call, answers, opened)
        return await out if is_awaitable(out) else out

    def _gather_answers(self, call: Call) -> tuple[dict[str, Any], StatePayload | None, Awaitable[bool] | None]:
        """The answers a request carries and the state it came with (:func:`.request_state.read_answers`), and the
        claim of a single-use state still to be awaited (``None`` when there is none, or it was decided)."""
        params = call.params
        if isinstance(params, dict):
            responses, state = params.get("inputResponses", UNSET), params.get("requestState", UNSET)
        else:
            responses, state = getattr(params, "input_responses", UNSET), getattr(params, "request_state", UNSET)
        if responses is UNSET and state is UNSET:
            return {}, None, None
        from . import request_state  # hmac and hashlib: loaded by the first stateless input round only

        now = time.time()
        answers, opened = request_state.read_answers(
            call.request.method,
            responses,
            state,
            call.request.params,
            keys=self.app.request_state_keys,
            principal=request_state.principal_digest(call.intake.auth),
            now=now,
        )
        if opened is None or not opened.nonce:
            return answers, opened, None
        claimed = self.app.claim_state(opened.nonce, opened.expires, now)
        if claimed is False:
            raise InvalidParams(_SPENT)
        return answers, opened, None if claimed is True else claimed

    def _input_required(
        self, ctx: Context, need: InputRequired, call: Call, answers: dict[str, Any], opened: StatePayload | None
    ) -> dict[str, Any]:
        from . import request_state

        if ctx.method not in INPUT_METHODS:
            logger.error("%s asked the client for input; only %s may", ctx.method, ", ".join(sorted(INPUT_METHODS)))
            raise InternalError()
        return request_state.input_required_result(
            ctx.method,
            call.request.params,
            need.requests,
            answers,
            opened=opened,
            key=self.app.request_state_keys[0],
            expires=time.time() + self.app.request_state_ttl,
            single_use=ctx.single_use_state,
            principal=request_state.principal_digest(ctx.intake.auth),
            server_info=self.app.server_info(),
        )

    # --- inbound notifications -----------------------------------------------------------------------------

    def on_notification(self, note: Notification) -> Coroutine[Any, Any, None] | None:
        chain = self.app.middleware
        if chain:
            out = run_chain(chain, Message(self, None, note), _notification_message)
            return _drained(out) if is_awaitable(out) else None
        self._notification(note)
        return None

    def _notification(self, note: Notification) -> None:
        method = note.method
        if method == "notifications/cancelled":
            if note.params is None:
                return
            try:
                params = _cancel_decoder.decode(note.params)
            except msgspec.ValidationError:
                return
            self.dispatcher.cancel_inbound(params.request_id, params.reason)
            return
        if method == "notifications/initialized":
            if self.initialized:
                self.ready = True
            return
        try:
            params = msgspec.json.decode(note.params) if note.params is not None else {}
        except msgspec.DecodeError:
            return
        if isinstance(params, dict):
            self.app.on_client_notification(self, method, params)

    # --- outbound ------------------------------------------------------------------------------------------

    async def send_notification(
        self, method: str, params: Mapping[str, Any] | Any | None = None, *, related: RequestId | None = None
    ) -> None:
        """Send a notification to the client (one the session's revision defines: else
        :class:`~jsonrpc_mcp.errors.MissingClientCapability` naming the revision)."""
        require_defined(method, self.version)
        await self._send(method, params, None, partial(self._notify, method, related=related))

    async def _notify(self, method: str, params: Any, *, related: RequestId | None) -> None:
        await self.dispatcher.notify(method, None if params is None else _encode(params), related=related)

    async def send_request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        related: RequestId | None = None,
        timeout: float | None = None,
    ) -> Raw:
        """Send a request to the client and wait for its result (``timeout``: the connection's by default); one
        the session's revision defines, else :class:`~jsonrpc_mcp.errors.MissingClientCapability` naming it."""
        require_defined(method, self.version)
        if not self.ready and method != "ping":
            # "The server SHOULD NOT send requests other than pings and logging before receiving the initialized
            # notification" (every handshake revision): refused here, before anything is sent (decision 10a).
            raise RpcError(f"{method} cannot be sent before the client's notifications/initialized", code=-32603)
        ident = self.dispatcher.next_request_id()
        ask = partial(self._request, method, related=related, timeout=... if timeout is None else timeout, ident=ident)
        raw: Raw = await self._send(method, params, ident, ask)
        return raw

    async def _request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        related: RequestId | None,
        timeout: Any,
        ident: RequestId,
    ) -> Raw:
        body = None if params is None else _encode(params)
        return await self.dispatcher.request(method, body, related=related, timeout=timeout, ident=ident)

    def _send(
        self, method: str, params: Any, ident: RequestId | None, send: Callable[[Any], Awaitable[Any]]
    ) -> Awaitable[Any]:
        """``send(params)``; while tracing runs, in a span of its own, its trace context in ``params._meta``."""
        tracing = self.app.tracing.current() if self.app.tracing is not None else None
        return send(params) if tracing is None else tracing.server_sends(self, method, params, ident, send)

    async def start_detached(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        """Run ``fn(*args)`` past the end of the request that starts it, in the server's own tasks: the
        connection's (stdio, a socket), or the app's (Streamable HTTP, through :attr:`detached`). ``fn`` must not
        raise. Raises :class:`~jsonrpc_mcp.errors.ConnectionClosed` when the connection has ended."""
        if self.detached is not None:
            await self.detached(fn, *args)
        elif not self.dispatcher.spawn(fn, *args):
            raise ConnectionClosed()

    def close(self) -> None:
        """The connection is over: its handlers still running are cancelled, the server forgets it. The session lets
        go of what links it to its dispatcher and back (:meth:`bind`'s handlers, the pacer's), so that a session of
        one request (the stateless era on Streamable HTTP, thousands a second) is freed by reference counting as soon
        as its transport drops it, not left in cycles for the cyclic collector."""
        if self.closed:
            return
        self.closed = True
        if self.dispatcher is not None:
            self.dispatcher.close()
            self.dispatcher.forget_handlers()
        self.pacer = None
        self.app.detach(self)


def _rescue_stateless(
    arg: tuple[ServerSession, Context, Call, dict[str, Any], StatePayload | None], exc: Exception
) -> Any:
    """On a worker thread: what a plain handler's call raised, answered as :meth:`ServerSession._await_stateless`
    answers it (the sync lane's :meth:`~jsonrpc_mcp.jsonrpc.workers.SyncCall.rescue_with`)."""
    if not isinstance(exc, _ANSWERED_IN_THE_STATELESS_ERA):
        raise exc
    session, ctx, call, answers, opened = arg
    return session._stateless_raised(exc, ctx, call, answers, opened)


def _handle_message(message: Message) -> Any:
    """The end of the middleware chain of a request: its handling."""
    return message.session._handle(message.call)


def _notification_message(message: Message) -> None:
    """The end of the middleware chain of a notification."""
    message.session._notification(message.notification)


async def _drained(pending: Awaitable[Any]) -> None:
    await pending


def encode_cancellation(ident: RequestId, reason: str) -> bytes:
    """The ``notifications/cancelled`` frame telling the peer we gave up on our request ``ident`` (either side's)."""
    return encode_notification("notifications/cancelled", _encode({"requestId": ident, "reason": reason}))


def _url_inputs(exc: UrlElicitationRequired) -> InputRequired:
    """URL elicitation required, as 2026-07-28 says it: that revision defines no -32042 (and must not emit it); the
    URL-mode elicitations the request waits for are its input requests."""
    return InputRequired(
        {item["elicitationId"]: {"method": "elicitation/create", "params": item} for item in exc.elicitations}
    )


def _stateless_not_found(exc: ResourceNotFound) -> InvalidParams:
    """A resource not found, as 2026-07-28 says it (-32602 with ``data.uri``): that revision must not emit -32002,
    whichever handler raised it."""
    return InvalidParams(exc.message, exc.data)
