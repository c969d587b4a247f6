"""OpenTelemetry tracing (jsonrpc_mcp.otel): spans after the MCP semantic conventions on servers and clients, W3C
trace context in ``params._meta`` joining them into one trace over memory, stdio and Streamable HTTP in both eras,
the outcome on the span (isError, JSON-RPC errors), the duration metrics, and what happens without OpenTelemetry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import init_frame, raw_server, request_frame
from http_support import ServerThread
from opentelemetry import baggage, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jsonrpc_mcp import Client, Context, RpcError, Server, ToolError
from jsonrpc_mcp import types as t
from jsonrpc_mcp.errors import InvalidParams, RequestTimeout
from jsonrpc_mcp.otel import Tracing
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.memory import memory_pair
from jsonrpc_mcp.transports.socket import serve_tcp, serve_unix

pytestmark = pytest.mark.anyio

ERAS = [pytest.param("2025-11-25", id="handshake"), pytest.param("2026-07-28", id="stateless")]
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"


class Recorded:
    """A ``Tracing`` with its own providers (never the global ones): finished spans and metrics kept in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.tracing = Tracing(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[self.reader]))
        self.tracer = provider.get_tracer("test")

    def spans(self, name: str, kind: SpanKind = SpanKind.INTERNAL) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name and s.kind == kind]

    def span(self, name: str, kind: SpanKind = SpanKind.INTERNAL) -> ReadableSpan:
        found = self.spans(name, kind)
        names = [(s.name, s.kind.name) for s in self.exporter.get_finished_spans()]
        assert len(found) == 1, f"{name} {kind.name}: {len(found)} in {names}"
        return found[0]

    def durations(self, metric: str) -> list[dict[str, Any]]:
        """The attributes of each data point of a histogram."""
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        assert m.unit == "s"
                        found += [dict(point.attributes or {}) for point in m.data.data_points]
        return found


def traced_server(recorded: Recorded, **options: Any) -> Server:
    server = Server("traced", "1", tracing=recorded.tracing, **options)
    tracer = recorded.tracer

    @server.tool(inline=True)
    def add(a: int, b: int) -> int:
        """Answered at once, on the event loop."""
        with tracer.start_as_current_span("add inside"):
            return a + b

    @server.tool()
    async def slow_add(a: int, b: int) -> int:
        """Answered in a task."""
        await anyio.lowlevel.checkpoint()
        with tracer.start_as_current_span("slow_add inside"):
            return a + b

    @server.tool()
    def threaded_add(a: int, b: int) -> int:
        """A plain function on a worker thread."""
        with tracer.start_as_current_span("threaded_add inside"):
            return a + b

    @server.tool(inline=True)
    def refuse() -> str:
        raise ToolError("not today")

    @server.tool()
    async def passenger(ctx: Context) -> str:
        return str(baggage.get_baggage("passenger"))

    @server.tool()
    async def ask(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return str((answer.content or {}).get("name"))

    @server.prompt()
    def greet(name: str) -> str:
        return f"Hello {name}"

    @server.prompt()
    def broken() -> str:
        raise RuntimeError("a bug")

    @server.tool()
    async def forever() -> str:
        await anyio.sleep_forever()
        return "never"

    return server


def assert_joined(client_side: Recorded, server_side: Recorded, name: str) -> tuple[ReadableSpan, ReadableSpan]:
    """The client's CLIENT span is the parent of the server's SERVER span, across the wire."""
    sent = client_side.span(name, SpanKind.CLIENT)
    got = server_side.span(name, SpanKind.SERVER)
    assert got.parent is not None and got.parent.is_remote
    assert got.parent.span_id == sent.context.span_id
    assert got.context.trace_id == sent.context.trace_id
    return sent, got


@pytest.mark.parametrize("version", ERAS)
async def test_client_and_server_spans_join_into_one_trace_and_the_handler_runs_in_the_server_span(
    version: str, sync_path: str
) -> None:
    client_side, server_side = Recorded(), Recorded()
    async with Client.connect_server(
        traced_server(server_side), tracing=client_side.tracing, protocol_version=version
    ) as client:
        with client_side.tracer.start_as_current_span("agent") as agent:
            for tool in ("add", "slow_add", "threaded_add"):
                result = await client.call_tool(tool, {"a": 1, "b": 2})
                assert result.structured_content == {"result": 3}
    for tool in ("add", "slow_add", "threaded_add"):
        sent, got = assert_joined(client_side, server_side, f"tools/call {tool}")
        assert sent.parent is not None and sent.parent.span_id == agent.get_span_context().span_id
        inside = server_side.span(f"{tool} inside")
        assert inside.parent is not None and inside.parent.span_id == got.context.span_id
        for span in (sent, got):
            assert span.status.status_code == StatusCode.UNSET
            attributes = dict(span.attributes or {})
            assert attributes["mcp.method.name"] == "tools/call"
            assert attributes["gen_ai.operation.name"] == "execute_tool"
            assert attributes["gen_ai.tool.name"] == tool
            assert attributes["mcp.protocol.version"] == version
            assert attributes["jsonrpc.request.id"].isdigit()
            assert "error.type" not in attributes
            assert "mcp.session.id" not in attributes  # (no Streamable HTTP here)
    handshake = version < "2026"
    first = "initialize" if handshake else "server/discover"
    sent, got = assert_joined(client_side, server_side, first)
    assert sent.attributes is not None and sent.attributes["mcp.protocol.version"] == version
    assert got.attributes is not None and got.attributes["mcp.protocol.version"] == version
    if handshake:
        assert_joined(client_side, server_side, "notifications/initialized")


@pytest.mark.parametrize("version", ERAS)
async def test_a_tool_error_and_a_json_rpc_error_mark_the_spans_and_the_metrics(version: str) -> None:
    client_side, server_side = Recorded(), Recorded()
    async with Client.connect_server(
        traced_server(server_side), tracing=client_side.tracing, protocol_version=version
    ) as client:
        result = await client.call_tool("refuse", {})
        assert result.is_error is True
        with pytest.raises(RpcError) as refused:
            await client.get_prompt("no-such-prompt", {})
        prompt = await client.get_prompt("greet", {"name": "Ada"})
        assert prompt.messages
    for span in assert_joined(client_side, server_side, "tools/call refuse"):
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes is not None and span.attributes["error.type"] == "tool_error"
        assert "rpc.response.status_code" not in span.attributes
    code = str(refused.value.code)
    for span in assert_joined(client_side, server_side, "prompts/get no-such-prompt"):
        assert span.status.status_code == StatusCode.ERROR
        assert span.status.description == refused.value.message
        assert span.attributes is not None
        assert span.attributes["error.type"] == code
        assert span.attributes["rpc.response.status_code"] == code
        assert span.attributes["gen_ai.prompt.name"] == "no-such-prompt"
    for span in assert_joined(client_side, server_side, "prompts/get greet"):
        assert span.status.status_code == StatusCode.UNSET
        assert span.attributes is not None and "gen_ai.operation.name" not in span.attributes

    for recorded, metric in (
        (server_side, "mcp.server.operation.duration"),
        (client_side, "mcp.client.operation.duration"),
    ):
        points = recorded.durations(metric)
        assert {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "refuse",
            "mcp.protocol.version": version,
            "error.type": "tool_error",
        } in points
        assert {
            "mcp.method.name": "prompts/get",
            "gen_ai.prompt.name": "no-such-prompt",
            "mcp.protocol.version": version,
            "error.type": code,
            "rpc.response.status_code": code,
        } in points
        assert all("jsonrpc.request.id" not in p and "mcp.session.id" not in p for p in points)


async def test_server_to_client_requests_and_notifications_are_traced_both_ways() -> None:
    client_side, server_side = Recorded(), Recorded()
    seen_meta: list[dict[str, Any]] = []

    async def elicitation(params: t.ElicitRequestParams) -> t.ElicitResult:
        with client_side.tracer.start_as_current_span("asking the user"):
            return t.ElicitResult(action="accept", content={"name": "Ada"})

    async def record(message: Any, call_next: Any) -> Any:
        if message.direction == "incoming" and message.params:
            seen_meta.append(dict(message.params.get("_meta") or {}))
        return await call_next(message)

    async with Client.connect_server(
        traced_server(server_side),
        tracing=client_side.tracing,
        protocol_version="2025-11-25",
        elicitation=elicitation,
        middleware=[record],
    ) as client:
        result = await client.call_tool("ask", {}, progress=lambda *_: None)
        assert result.content == [t.TextContent(text="Ada")]
    _, handling = assert_joined(client_side, server_side, "tools/call ask")
    for name in ("elicitation/create", "notifications/progress"):
        # the server's CLIENT span is a child of the tool's span, and the parent of the client's SERVER span
        asked = server_side.span(name, SpanKind.CLIENT)
        assert asked.parent is not None and asked.parent.span_id == handling.context.span_id
        answered = client_side.span(name, SpanKind.SERVER)
        assert answered.parent is not None and answered.parent.span_id == asked.context.span_id
        assert answered.context.trace_id == handling.context.trace_id
    assert server_side.span("elicitation/create", SpanKind.CLIENT).attributes["jsonrpc.request.id"].isdigit()  # type: ignore[index]
    inside = client_side.span("asking the user")
    assert inside.parent is not None
    assert inside.parent.span_id == client_side.span("elicitation/create", SpanKind.SERVER).context.span_id
    assert all(meta.get("traceparent", "").startswith("00-") for meta in seen_meta)
    assert len(seen_meta) == 2


async def test_the_trace_context_in_meta_is_the_parent_its_baggage_reaches_the_handler_the_ambient_span_linked() -> (
    None
):
    server_side = Recorded()
    meta = {"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7", "baggage": "passenger=ada"}
    with server_side.tracer.start_as_current_span("transport") as transport:
        async with raw_server(traced_server(server_side)) as peer:
            await peer.call(init_frame())
            await peer.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
            answer = await peer.call(
                request_frame(7, "tools/call", {"name": "passenger", "arguments": {}, "_meta": meta})
            )
            await peer.call(request_frame(8, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}))
            garbled = {"name": "slow_add", "arguments": {"a": 1, "b": 1}, "_meta": {"traceparent": "00-garbage"}}
            await peer.call(request_frame(9, "tools/call", garbled))
    assert answer["result"]["content"] == [{"type": "text", "text": "ada"}]
    got = server_side.span("tools/call passenger", SpanKind.SERVER)
    assert got.parent is not None and got.parent.is_remote
    assert f"{got.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert f"{got.parent.span_id:016x}" == "00f067aa0ba902b7"
    assert got.parent.trace_state.get("rojo") == "00f067aa0ba902b7"
    assert [link.context.span_id for link in got.links] == [transport.get_span_context().span_id]
    assert got.attributes is not None and got.attributes["jsonrpc.request.id"] == "7"
    # without trace context in _meta the span current when the message arrived is the parent, and nothing is linked
    plain = server_side.span("tools/call add", SpanKind.SERVER)
    assert plain.parent is not None and plain.parent.span_id == transport.get_span_context().span_id
    assert not plain.links
    # nor with a malformed traceparent, which is ignored
    ignored = server_side.span("tools/call slow_add", SpanKind.SERVER)
    assert ignored.parent is not None and ignored.parent.span_id == transport.get_span_context().span_id
    assert not ignored.links


async def test_a_tracing_option_that_is_no_tracing_is_refused_when_given() -> None:
    ours, theirs = memory_pair()
    for wrong in (TracerProvider(), "on", MeterProvider()):
        with pytest.raises(TypeError, match=r"tracing is None \(automatic\), False \(off\) or a jsonrpc_mcp.otel"):
            Server("s", tracing=wrong)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="tracing is None"):
            Client(ours, tracing=wrong)  # type: ignore[arg-type]
    await ours.aclose()
    await theirs.aclose()
    assert Server("s", tracing=Tracing(tracer_provider=TracerProvider())).tracing is not None


async def test_what_the_client_sends_carries_its_span_in_meta_and_keeps_the_callers_meta() -> None:
    client_side = Recorded()
    received: list[dict[str, Any]] = []
    server = Server("plain", "1", tracing=False)

    @server.tool()
    async def echo(ctx: Context) -> str:
        received.append(dict(ctx.meta))
        return "ok"

    async with Client.connect_server(server, tracing=client_side.tracing, protocol_version="2025-11-25") as client:
        with client_side.tracer.start_as_current_span("agent"):
            baggage_ctx = baggage.set_baggage("passenger", "ada")
            from opentelemetry import context

            token = context.attach(baggage_ctx)
            try:
                await client.call_tool("echo", {}, meta={"progressToken": "p1"})
            finally:
                context.detach(token)
    sent = client_side.span("tools/call echo", SpanKind.CLIENT)
    [meta] = received
    assert meta["traceparent"].startswith(f"00-{sent.context.trace_id:032x}-{sent.context.span_id:016x}-")
    assert meta["baggage"] == "passenger=ada"
    assert meta["progressToken"] == "p1"


async def test_a_request_cancelled_on_the_client_ends_both_spans_as_cancelled() -> None:
    client_side, server_side = Recorded(), Recorded()
    server = traced_server(server_side)
    started = anyio.Event()

    @server.tool()
    async def wait() -> str:
        started.set()
        await anyio.sleep_forever()
        return "never"

    async with Client.connect_server(server, tracing=client_side.tracing, protocol_version="2025-11-25") as client:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "wait", {})
                await started.wait()
                tg.cancel_scope.cancel()
            while not server_side.spans("tools/call wait", SpanKind.SERVER):
                await client.ping()
    for span in assert_joined(client_side, server_side, "tools/call wait"):
        assert span.attributes is not None and span.attributes["error.type"] == "cancelled"
        assert span.status.status_code == StatusCode.ERROR


async def test_an_unexpected_exception_is_the_internal_error_the_peer_gets_and_a_timeout_is_timeout() -> None:
    client_side, server_side = Recorded(), Recorded()
    async with Client.connect_server(
        traced_server(server_side), tracing=client_side.tracing, protocol_version="2025-11-25"
    ) as client:
        with pytest.raises(RpcError) as failed:
            await client.get_prompt("broken", {})
        assert failed.value.code == -32603
        with pytest.raises(RpcError) as late:
            await client.call_tool("forever", {}, timeout=0.05)
        assert late.value.code == RequestTimeout.code
    sent, got = assert_joined(client_side, server_side, "prompts/get broken")
    for span in (sent, got):
        assert span.attributes is not None and span.attributes["error.type"] == "-32603"
        assert span.attributes["rpc.response.status_code"] == "-32603"
        assert span.status.description == "Internal error"
    [event] = got.events
    assert event.name == "exception" and event.attributes is not None
    assert event.attributes["exception.type"] == "RuntimeError"
    assert not sent.events
    waited = client_side.span("tools/call forever", SpanKind.CLIENT)
    assert waited.attributes is not None and waited.attributes["error.type"] == "timeout"
    assert "rpc.response.status_code" not in waited.attributes


async def test_a_middleware_error_inside_the_tracing_is_on_the_span() -> None:
    server_side = Recorded()

    def refuse_lists(message: Any, call_next: Any) -> Any:
        if message.method == "tools/list":
            raise InvalidParams("not now")
        return call_next(message)

    server = traced_server(server_side, middleware=[refuse_lists])
    async with Client.connect_server(server, protocol_version="2025-11-25", tracing=False) as client:
        with pytest.raises(RpcError):
            await client.list_tools()
    span = server_side.span("tools/list", SpanKind.SERVER)
    assert span.attributes is not None and span.attributes["error.type"] == "-32602"
    assert server.middleware[0] == server_side.tracing.server  # the tracing is outermost
    assert server.middleware[1:] == (refuse_lists,)


# --- over stdio and Streamable HTTP ------------------------------------------------------------------------------

STDIO_SERVER = """
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

# The global provider, configured before the server exists: the server traces by itself.
provider = TracerProvider()
spans = open(sys.argv[1], "w", encoding="utf-8")
exporter = ConsoleSpanExporter(out=spans, formatter=lambda span: span.to_json(indent=None) + "\\n")
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from jsonrpc_mcp import Server
from jsonrpc_mcp.transports.stdio import run_stdio

server = Server("stdio-traced", "1")


@server.tool()
async def add(a: int, b: int) -> int:
    with trace.get_tracer("tool").start_as_current_span("add inside"):
        return a + b


@server.tool(inline=True)
def mul(a: int, b: int) -> int:
    with trace.get_tracer("tool").start_as_current_span("mul inside"):
        return a * b


run_stdio(server)  # (the event loop starts only when a handler has to wait)
"""


def exported(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("version", ERAS)
async def test_over_stdio_a_server_with_the_global_sdk_configured_joins_the_clients_trace(
    version: str, tmp_path: Path
) -> None:
    script, spans = tmp_path / "server.py", tmp_path / "spans.jsonl"
    script.write_text(STDIO_SERVER, encoding="utf-8")
    client_side = Recorded()
    async with Client.connect_stdio(
        [sys.executable, str(script), str(spans)], tracing=client_side.tracing, protocol_version=version
    ) as client:
        assert (await client.call_tool("mul", {"a": 2, "b": 3})).structured_content == {"result": 6}
        assert (await client.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}
    by_name = {(s["name"], s["kind"]): s for s in exported(spans)}
    for tool in ("mul", "add"):
        sent = client_side.span(f"tools/call {tool}", SpanKind.CLIENT)
        got = by_name[(f"tools/call {tool}", "SpanKind.SERVER")]
        assert got["context"]["trace_id"] == f"0x{sent.context.trace_id:032x}"
        assert got["parent_id"] == f"0x{sent.context.span_id:016x}"
        assert got["attributes"]["gen_ai.tool.name"] == tool
        assert got["attributes"]["mcp.protocol.version"] == version
        assert got["attributes"]["network.transport"] == "pipe"
        assert sent.attributes is not None and sent.attributes["network.transport"] == "pipe"
        inside = by_name[(f"{tool} inside", "SpanKind.INTERNAL")]
        assert inside["parent_id"] == got["context"]["span_id"]


@pytest.mark.parametrize("version", ERAS)
async def test_over_streamable_http_the_spans_join_and_carry_the_session_id(version: str) -> None:
    client_side, server_side = Recorded(), Recorded()
    thread = ServerThread(McpAsgiApp(traced_server(server_side)))
    try:
        async with Client.connect_http(thread.url, tracing=client_side.tracing, protocol_version=version) as client:
            for tool in ("add", "slow_add"):
                result = await client.call_tool(tool, {"a": 1, "b": 2})
                assert result.structured_content == {"result": 3}
            session_id = client.stream.session_id
    finally:
        thread.stop()
    for tool in ("add", "slow_add"):
        sent, got = assert_joined(client_side, server_side, f"tools/call {tool}")
        inside = server_side.span(f"{tool} inside")
        assert inside.parent is not None and inside.parent.span_id == got.context.span_id
        assert sent.attributes is not None and got.attributes is not None
        assert sent.attributes["server.address"] == "127.0.0.1"
        assert sent.attributes["server.port"] == thread.port
        for span in (sent, got):
            assert span.attributes is not None
            assert span.attributes["network.transport"] == "tcp"
            assert span.attributes["network.protocol.name"] == "http"
            if version < "2026":
                assert isinstance(session_id, str)
                assert span.attributes["mcp.session.id"] == session_id
            else:
                assert "mcp.session.id" not in span.attributes
    if version < "2026":
        for span in assert_joined(client_side, server_side, "initialize"):
            assert span.attributes is not None and span.attributes["mcp.session.id"] == session_id
    sent_metric = client_side.durations("mcp.client.operation.duration")
    assert {(p["network.transport"], p["network.protocol.name"], p["server.address"]) for p in sent_metric} == {
        ("tcp", "http", "127.0.0.1")
    }
    assert {p["server.port"] for p in sent_metric} == {thread.port}
    received_metric = server_side.durations("mcp.server.operation.duration")
    assert {(p["network.transport"], p["network.protocol.name"]) for p in received_metric} == {("tcp", "http")}
    assert not any("server.address" in p or "client.address" in p for p in received_metric)


@pytest.mark.parametrize("kind", ["tcp", "unix"])
async def test_over_sockets_the_spans_name_the_transport_and_the_peer(kind: str) -> None:
    client_side, server_side = Recorded(), Recorded()
    server = traced_server(server_side)
    directory = tempfile.mkdtemp(prefix="mcp-")  # short: AF_UNIX paths are limited to ~100 bytes
    path = os.path.join(directory, "s.sock")
    port = None
    try:
        async with anyio.create_task_group() as tg:
            options: dict[str, Any] = {"tracing": client_side.tracing, "protocol_version": "2025-11-25"}
            if kind == "tcp":
                port = await tg.start(lambda task_status: serve_tcp(server, port=0, task_status=task_status))
                connect = Client.connect_tcp("127.0.0.1", port, **options)
            else:
                await tg.start(lambda task_status: serve_unix(server, path, task_status=task_status))
                connect = Client.connect_unix(path, **options)
            async with connect as client:
                assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}
            tg.cancel_scope.cancel()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    sent, got = assert_joined(client_side, server_side, "tools/call add")
    assert sent.attributes is not None and got.attributes is not None
    assert sent.attributes["network.transport"] == got.attributes["network.transport"] == kind
    if kind == "tcp":
        assert (sent.attributes["server.address"], sent.attributes["server.port"]) == ("127.0.0.1", port)
        assert got.attributes["client.address"] == "127.0.0.1"
        client_port = got.attributes["client.port"]
        assert isinstance(client_port, int) and client_port not in (0, port)
    else:
        assert sent.attributes["server.address"] == path
        assert "client.address" not in got.attributes  # (a client's end of a Unix socket has no name)
    assert "client.address" not in sent.attributes and "server.address" not in got.attributes
    received_metric = server_side.durations("mcp.server.operation.duration")
    assert {p["network.transport"] for p in received_metric} == {kind}
    assert not any("client.address" in p or "client.port" in p for p in received_metric)


# --- turned on, turned off, not installed --------------------------------------------------------------------


async def test_without_a_configured_sdk_nothing_runs_and_nothing_goes_on_the_wire() -> None:
    assert trace.get_tracer_provider().__class__.__module__.startswith("opentelemetry.trace")  # (none configured)
    received: list[dict[str, Any]] = []
    server = Server("auto", "1")

    @server.tool()
    async def echo(ctx: Context) -> str:
        received.append(dict(ctx.meta))
        return "ok"

    assert server.tracing is not None  # automatic: it would run once a provider is configured
    assert server.middleware == ()
    async with Client.connect_server(server, protocol_version="2025-11-25") as client:
        assert client.middleware == ()
        await client.call_tool("echo", {})
    assert received == [{}]
    assert Server("off", "1", tracing=False).tracing is None


def run_python(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_without_opentelemetry_installed_nothing_of_it_is_imported() -> None:
    out = run_python(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if the otel extra were not installed

        import anyio
        from jsonrpc_mcp import Client, Server

        server = Server("plain", "1")

        @server.tool()
        def add(a: int, b: int) -> int:
            return a + b

        async def main():
            async with Client.connect_server(server) as client:
                print((await client.call_tool("add", {"a": 1, "b": 2})).structured_content)
                print(server.tracing, client.tracing)

        anyio.run(main)
        print(sorted(m for m in sys.modules if m.startswith(("opentelemetry.", "jsonrpc_mcp.otel"))))
        """
    )
    assert out.splitlines() == ["{'result': 3}", "None None", "[]"]


def test_a_server_imports_nothing_of_opentelemetry_until_the_application_has() -> None:
    out = run_python(
        """
        import sys
        import anyio
        from jsonrpc_mcp import Client, Server

        server = Server("plain", "1")

        async def main():
            async with Client.connect_server(server) as client:
                await client.ping()

        anyio.run(main)
        print(sorted(m for m in sys.modules if m.startswith(("opentelemetry", "jsonrpc_mcp.otel"))))
        """
    )
    assert out.strip() == "[]"


def test_tracing_starts_by_itself_when_the_application_configures_the_sdk_and_false_turns_it_off() -> None:
    out = run_python(
        """
        import anyio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from jsonrpc_mcp import Client, Server

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)

        traced, silent = Server("traced", "1"), Server("silent", "1", tracing=False)

        async def main():
            for server in (traced, silent):
                async with Client.connect_server(server, protocol_version="2025-11-25", tracing=False) as client:
                    await client.ping()

        anyio.run(main)
        print(sorted(s.name for s in exporter.get_finished_spans()))
        """
    )
    assert out.strip() == "['initialize', 'notifications/initialized', 'ping']"
