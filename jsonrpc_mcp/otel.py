"""OpenTelemetry tracing and metrics of every MCP message, after OpenTelemetry's semantic conventions for MCP (L4).

Needs the ``otel`` extra (``opentelemetry-api``); the application brings an SDK and an exporter. Servers and
clients use it by themselves once a global tracer or meter provider is configured (see
:mod:`jsonrpc_mcp.mcp.tracing`), or with the providers of a :class:`Tracing` given as ``tracing=``::

    server = Server("demo", tracing=Tracing(tracer_provider=provider, meter_provider=meters))

What it records, on the middleware of the server and the client and on what a server sends:

* a ``SERVER`` span for each request and notification received, a ``CLIENT`` span for each one sent, named
  ``{mcp.method.name} {target}`` (the tool of ``tools/call``, the prompt of ``prompts/get``), with
  ``mcp.method.name``, ``mcp.protocol.version``, ``mcp.session.id`` (Streamable HTTP), ``jsonrpc.request.id``,
  ``gen_ai.operation.name`` = ``execute_tool`` and ``gen_ai.tool.name`` (``tools/call``), ``gen_ai.prompt.name``
  (``prompts/get``), ``mcp.resource.uri`` (the ``resources/*`` methods that name one), and what carries the message
  as its stream knows it (``network.transport``, ``network.protocol.name``, the peer's ``server.address`` and
  ``server.port`` or ``client.address`` and ``client.port``);
* the outcome, the span's status ERROR with ``error.type`` = a JSON-RPC error's code (and
  ``rpc.response.status_code``, the status's description its message), ``tool_error`` for a tool result with
  ``isError``, ``-32603`` for a handler's unexpected exception (what the peer gets; the exception is a span
  event), ``timeout`` for a request sent without an answer in time, ``connection_closed`` for one whose connection
  ended, ``cancelled`` for one cancelled, else the exception's class name;
* W3C trace context (``traceparent``, ``tracestate``, ``baggage``) in ``params._meta``: injected into what is sent,
  extracted from what is received as the parent of its span (the span current when it arrived is linked); while a
  handler runs, its span is the current one, so the spans it makes are its children;
* the histograms ``mcp.server.operation.duration`` and ``mcp.client.operation.duration`` (seconds).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import Link, Span, SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .errors import ConnectionClosed, RequestTimeout, RpcError
from .jsonrpc.codes import INTERNAL_ERROR
from .jsonrpc.streams import Network
from .jsonrpc.wire import RequestId
from .mcp import types as t
from .mcp.middleware import CallNext, ClientMessage, Message, is_awaitable

if TYPE_CHECKING:
    from .mcp.session import ServerSession

__all__ = ("Tracing", "global_tracing", "DURATION_BUCKETS")

#: The bucket boundaries the conventions give the operation-duration histograms (seconds).
DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
#: The ``_meta`` keys of W3C trace context and baggage (the MCP specification reserves them for this).
CARRIER_KEYS: Final = ("traceparent", "tracestate", "baggage")
#: The methods whose ``uri`` param names a resource (``mcp.resource.uri``).
_RESOURCE_METHODS: Final = frozenset(
    {"resources/read", "resources/subscribe", "resources/unsubscribe", "notifications/resources/updated"}
)
#: What the duration histograms are broken down by (the span's other attributes have too many values): the
#: receiver's by these, the sender's by the server's address too.
_SERVER_METRIC_KEYS: Final = (
    "mcp.method.name",
    "mcp.protocol.version",
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "error.type",
    "rpc.response.status_code",
    "network.transport",
    "network.protocol.name",
)
_CLIENT_METRIC_KEYS: Final = (*_SERVER_METRIC_KEYS, "server.address", "server.port")
_SCOPE: Final = "jsonrpc_mcp"
#: The errors of a request sent that never come from the peer: its own code is not what went over the wire.
_INTERNAL_ERROR: Final = str(INTERNAL_ERROR)


class Tracing:
    """Spans and duration metrics of MCP messages, with the given providers (``None``: the global ones) and
    propagator (``None``: W3C trace context and baggage, the keys the MCP specification reserves in ``_meta``).

    Give it to a server or a client as ``tracing=``; without it they use the global providers once those are
    configured."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        propagator: TextMapPropagator | None = None,
    ) -> None:
        version = _our_version()
        tracer_provider = tracer_provider or trace.get_tracer_provider()
        meter_provider = meter_provider or metrics.get_meter_provider()
        self.tracer = tracer_provider.get_tracer(_SCOPE, version)
        meter = meter_provider.get_meter(_SCOPE, version)
        self.server_duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request or notification duration as observed on the receiver",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.client_duration = meter.create_histogram(
            "mcp.client.operation.duration",
            unit="s",
            description="MCP request or notification duration as observed on the sender",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.propagator = propagator or CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])
        #: The middleware of a server: a SERVER span around each message it receives.
        self.server: Callable[[Message, CallNext], Any] = self._server_message
        #: The middleware of a client: a CLIENT span around each message it sends, a SERVER span around each one
        #: it receives from the server.
        self.client: Callable[[ClientMessage, Callable[[ClientMessage], Any]], Any] = self._client_message

    # --- a server --------------------------------------------------------------------------------------------

    def _server_message(self, message: Message, call_next: CallNext) -> Any:
        session = message.session

        def settled() -> tuple[str | None, str | None]:
            return message.version, session.dispatcher.stream.session_id

        network = session.dispatcher.stream.network
        return self._received(message.method, message.params, message.request_id, network, settled).run(
            call_next, message
        )

    async def server_sends(
        self,
        session: ServerSession,
        method: str,
        params: Any,
        request_id: RequestId | None,
        send: Callable[[Any], Awaitable[Any]],
    ) -> Any:
        """Send a server's request or notification (``send(params)``) in a CLIENT span, its trace context in
        ``params._meta``."""

        def settled() -> tuple[str | None, str | None]:
            return session.version, session.dispatcher.stream.session_id

        operation, params = self._sending(method, params, request_id, session.dispatcher.stream.network, settled)
        return await operation.later(send(params))

    # --- a client --------------------------------------------------------------------------------------------

    def _client_message(self, message: ClientMessage, call_next: Callable[[ClientMessage], Any]) -> Any:
        session = message.session

        def settled() -> tuple[str | None, str | None]:
            return session.protocol_version, session.stream.session_id

        method, params, request_id, network = message.method, message.params, message.request_id, session.stream.network
        if message.direction == "incoming":
            operation = self._received(method, params, request_id, network, settled)
        else:
            operation, message.params = self._sending(method, params, request_id, network, settled)
        return operation.run(call_next, message)

    # --- both ------------------------------------------------------------------------------------------------

    def _received(
        self,
        method: str,
        params: Any,
        request_id: RequestId | None,
        network: Network,
        settled: Callable[[], tuple[Any, Any]],
    ) -> _Operation:
        """A SERVER span for a message received, its parent the trace context in its ``_meta``."""
        name, attributes = _describe(method, params, request_id, network)
        parent = None
        links = None
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict):
            carrier = {key: value for key in CARRIER_KEYS if isinstance(value := meta.get(key), str)}
            if carrier:
                parent = self.propagator.extract(carrier, otel_context.get_current())  # (a bad one: unchanged)
                ambient = trace.get_current_span().get_span_context()
                if ambient.is_valid and trace.get_current_span(parent).get_span_context() != ambient:
                    links = [Link(ambient)]  # the parent came from the message: the span it arrived in is linked
        span = self.tracer.start_span(name, parent, kind=SpanKind.SERVER, attributes=attributes, links=links)
        context = trace.set_span_in_context(span, parent)
        return _Operation(
            span, context, attributes, self.server_duration, _SERVER_METRIC_KEYS, settled, request_id is not None
        )

    def _sending(
        self,
        method: str,
        params: Any,
        request_id: RequestId | None,
        network: Network,
        settled: Callable[[], tuple[Any, Any]],
    ) -> tuple[_Operation, Any]:
        """A CLIENT span for a message sent, and its params with the span's trace context in ``_meta``."""
        name, attributes = _describe(method, params, request_id, network)
        span = self.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
        context = trace.set_span_in_context(span)
        carrier: dict[str, str] = {}
        self.propagator.inject(carrier, context)
        operation = _Operation(span, context, attributes, self.client_duration, _CLIENT_METRIC_KEYS, settled)
        return operation, _with_meta(params, carrier) if carrier else params


def _describe(method: str, params: Any, request_id: RequestId | None, network: Network) -> tuple[str, dict[str, Any]]:
    """A message's span name and the attributes its method, params and id, and what carries it, give."""
    attributes: dict[str, Any] = {"mcp.method.name": method, **network}
    target = None
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
    if isinstance(params, dict):
        if method == "tools/call":
            if isinstance(name := params.get("name"), str):
                attributes["gen_ai.tool.name"] = target = name
        elif method == "prompts/get":
            if isinstance(name := params.get("name"), str):
                attributes["gen_ai.prompt.name"] = target = name
        elif method in _RESOURCE_METHODS and isinstance(uri := params.get("uri"), str):
            attributes["mcp.resource.uri"] = uri
    if request_id is not None:
        attributes["jsonrpc.request.id"] = str(request_id)
    return (f"{method} {target}" if target else method), attributes


def _with_meta(params: Any, carrier: Mapping[str, str]) -> dict[str, Any]:
    """``params`` (a dict, a Struct or ``None``) with ``carrier`` added to their ``_meta`` (a copy: the caller's
    are left as they were)."""
    if params is None:
        return {"_meta": dict(carrier)}
    if not isinstance(params, dict):
        params = msgspec.to_builtins(params)
    meta = params.get("_meta")
    return {**params, "_meta": {**meta, **carrier} if isinstance(meta, dict) else dict(carrier)}


class _Operation:
    """One message's span: current while its handling runs, ended with its outcome, its duration recorded."""

    __slots__ = ("answered", "attributes", "context", "histogram", "metric_keys", "settled", "span", "started")

    def __init__(
        self,
        span: Span,
        context: otel_context.Context,
        attributes: dict[str, Any],
        histogram: metrics.Histogram,
        metric_keys: tuple[str, ...],
        settled: Callable[[], tuple[Any, Any]],
        answered: bool = False,
    ) -> None:
        self.span = span
        #: A request received: a failure of its handling is answered with a JSON-RPC error.
        self.answered = answered
        self.context = context
        self.attributes = attributes
        self.histogram = histogram
        self.metric_keys = metric_keys
        self.settled = settled  #: () -> (protocol version, session id), read at the end (initialize settles them)
        self.started = time.perf_counter()

    def run(self, call_next: Callable[[Any], Any], message: Any) -> Any:
        """``call_next(message)`` with the span current: its outcome now, or an awaitable of it."""
        token = otel_context.attach(self.context)
        try:
            out = call_next(message)
        except BaseException as exc:
            self.failed(exc)
            raise
        finally:
            otel_context.detach(token)
        if is_awaitable(out):
            return self.later(out)
        self.succeeded(out)
        return out

    async def later(self, pending: Awaitable[Any]) -> Any:
        """Await ``pending`` with the span current (in the task that awaits it), then end the span."""
        token = otel_context.attach(self.context)
        try:
            value = await pending
        except BaseException as exc:
            self.failed(exc)
            raise
        finally:
            otel_context.detach(token)
        self.succeeded(value)
        return value

    def succeeded(self, value: Any) -> None:
        outcome = _outcome(value) if self.attributes["mcp.method.name"] in _READ_RESULT_OF else None
        if outcome is not None and outcome.is_error is True:
            self.note("error.type", "tool_error")
            self.span.set_status(StatusCode.ERROR)
        if outcome is not None and isinstance(outcome.protocol_version, str):
            self.note("mcp.protocol.version", outcome.protocol_version)
        self.end()

    def failed(self, exc: BaseException) -> None:
        description = None
        if _is_cancellation(exc):
            self.note("error.type", "cancelled")
        elif isinstance(exc, RpcError) and not exc.local:
            self.note("error.type", str(exc.code))
            self.note("rpc.response.status_code", str(exc.code))
            description = exc.message
        elif self.answered:  # the peer gets -32603 "Internal error" (and the error is logged where it happened)
            self.note("error.type", _INTERNAL_ERROR)
            self.note("rpc.response.status_code", _INTERNAL_ERROR)
            description = "Internal error"
        elif isinstance(exc, RequestTimeout):
            self.note("error.type", "timeout")
        elif isinstance(exc, ConnectionClosed):
            self.note("error.type", "connection_closed")
        else:
            self.note("error.type", type(exc).__qualname__)
        if not isinstance(exc, RpcError) and isinstance(exc, Exception):
            self.span.record_exception(exc)
        self.span.set_status(StatusCode.ERROR, description)
        self.end()

    def note(self, key: str, value: str) -> None:
        """An attribute learnt from the outcome: on the span, and for the duration metric."""
        self.attributes[key] = value
        self.span.set_attribute(key, value)

    def end(self) -> None:
        attributes = self.attributes
        version, session_id = self.settled()
        if isinstance(version, str) and "mcp.protocol.version" not in attributes:
            self.note("mcp.protocol.version", version)
        if isinstance(session_id, str):
            self.span.set_attribute("mcp.session.id", session_id)
        self.span.end()
        self.histogram.record(
            time.perf_counter() - self.started, {key: attributes[key] for key in self.metric_keys if key in attributes}
        )


class _Outcome(msgspec.Struct, rename={"is_error": "isError", "protocol_version": "protocolVersion"}):
    """What a span reads of a result: a tool's ``isError``, the version ``initialize`` settled."""

    is_error: Any = None
    protocol_version: Any = None


#: The methods whose result the span reads.
_READ_RESULT_OF: Final = frozenset({"tools/call", "initialize"})
_outcome_decoder: Final = msgspec.json.Decoder(_Outcome)


def _outcome(value: Any) -> _Outcome | None:
    """A result as a handler made it (a Struct, a dict), or as it came over the wire (JSON bytes, Raw)."""
    if isinstance(value, t.CallToolResult):
        return _Outcome(is_error=value.is_error)
    if isinstance(value, t.InitializeResult):
        return _Outcome(protocol_version=value.protocol_version)
    if isinstance(value, dict):
        return _Outcome(is_error=value.get("isError"), protocol_version=value.get("protocolVersion"))
    if isinstance(value, (bytes, msgspec.Raw)):
        try:
            return _outcome_decoder.decode(value)
        except msgspec.DecodeError:
            return None
    return None


def _is_cancellation(exc: BaseException) -> bool:
    if isinstance(exc, Exception):
        return False
    try:
        return isinstance(exc, anyio.get_cancelled_exc_class())
    except RuntimeError:  # no event loop running
        return False


def _our_version() -> str | None:
    try:
        return metadata.version("jsonrpc-mcp")
    except metadata.PackageNotFoundError:
        return None


# --- the global providers ------------------------------------------------------------------------------------

_global: Tracing | None = None


def global_tracing() -> Tracing | None:
    """A ``Tracing`` of OpenTelemetry's global providers once one of them is configured (``None`` until then)."""
    global _global
    if _global is None and (_configured(trace.get_tracer_provider()) or _configured(metrics.get_meter_provider())):
        _global = Tracing()
    return _global


def _configured(provider: object) -> bool:
    """Whether a provider is an SDK's: the API's own (the proxy it hands out until one is set, its no-op) are
    not."""
    module = type(provider).__module__
    return not (module.startswith("opentelemetry.trace") or module.startswith("opentelemetry.metrics"))
