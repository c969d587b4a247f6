"""The dispatcher's read loop in-process: CPU per frame without pipes, sockets or a load driver.

A fake byte stream hands the server (``Server.serve`` over an ``NdjsonStream``) pre-built NDJSON chunks of
``--batch`` ``tools/call echo`` requests (what a read of a busy pipe returns) and drops what is written back. The
tool is inline, on a worker thread or ``async def`` (``--server``). The figure is the process CPU time per frame
(every thread's), measured over ``--frames`` frames, ``--rounds`` times (min and median printed): stable enough on
a noisy machine to compare two checkouts of the library, e.g.::

    python bench/inproc.py                                  # this checkout
    PYTHONPATH=/path/to/other/checkout python bench/inproc.py

Run both a few times, alternately; compare the minimums. ``--uvloop`` runs asyncio on uvloop's loop, as the
benchmark's servers do.

``--variant`` measures what middleware and OpenTelemetry tracing cost on the same server: ``bare`` (no tracing
switch at all, as without the ``otel`` extra or with ``tracing=False``), ``noop2`` (two no-op plain-function
middleware), ``otel-unconfigured`` (the extra installed and imported, no SDK configured), ``otel-sdk`` (the SDK
configured, its spans and metrics handed to exporters that drop them). Without it the server is as it loads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "servers"))

INIT = (
    b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"inproc","version":"1"}}}\n'
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
)


class _Feed(anyio.abc.ByteStream):
    """Hands out the chunks, one per receive (with a checkpoint, as a real read has), and counts writes."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.i = 0
        self.writes = 0
        self.t0 = 0.0
        self.t1 = 0.0

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self.i == 1:
            self.t0 = time.process_time()  # the handshake is not measured
        if self.i >= len(self.chunks):
            self.t1 = time.process_time()
            raise anyio.EndOfStream
        chunk = self.chunks[self.i]
        self.i += 1
        await anyio.lowlevel.checkpoint()
        return chunk

    async def send(self, item: bytes) -> None:
        self.writes += 1

    async def send_eof(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


def no_op(message: Any, call_next: Any) -> Any:
    return call_next(message)


def other_no_op(message: Any, call_next: Any) -> Any:
    return call_next(message)


def apply_variant(server: Any, variant: str | None) -> None:
    """Set up ``server`` (and OpenTelemetry) for one ``--variant``."""
    if variant in ("bare", "noop2"):
        server.tracing = None
    if variant == "noop2":
        server.middleware = (no_op, other_no_op)
    if variant == "otel-unconfigured":
        import opentelemetry.metrics
        import opentelemetry.trace  # noqa: F401 - imported, as an application that uses OpenTelemetry has
    if variant == "otel-sdk":
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        class DropSpans(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        class DropMetrics(MetricExporter):
            def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
                return MetricExportResult.SUCCESS

            def force_flush(self, timeout_millis: float = 10_000) -> bool:
                return True

            def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
                pass

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(DropSpans()))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[PeriodicExportingMetricReader(DropMetrics())]))


#: What a 2026-07-28 request carries instead of a handshake (``--era stateless``).
STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "inproc", "version": "1"},
}


def build(frames: int, batch: int, payload: int, era: str = "handshake") -> list[bytes]:
    text = "x" * payload

    def frame(i: int | str) -> bytes:
        params: dict[str, Any] = {"name": "echo", "arguments": {"text": text}}
        if era == "stateless":
            params["_meta"] = STATELESS_META
        return msgspec.json.encode({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}) + b"\n"

    first = INIT if era == "handshake" else frame("warm")  # (the first read is not measured)
    return [first] + [
        b"".join(frame(i) for i in range(base, min(base + batch, frames))) for base in range(0, frames, batch)
    ]


async def measure(server: Any, chunks: list[bytes], frames: int, rounds: int) -> list[float]:
    from jsonrpc_mcp.transports.ndjson import NdjsonStream

    out = []
    for _ in range(rounds):
        feed = _Feed(chunks)
        await server.serve(NdjsonStream(feed))
        out.append((feed.t1 - feed.t0) / frames * 1e6)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--server",
        default="echo",
        choices=("echo", "echo_thread", "echo_async"),
        help="bench/servers/*.py: echo (a def tool, inline=True), echo_thread (a def tool on a worker thread, the "
        "default for def tools) or echo_async (an async def tool); default echo",
    )
    p.add_argument("--frames", type=int, default=8000)
    p.add_argument("--batch", type=int, default=32, help="frames per chunk read")
    p.add_argument("--payload", type=int, default=1024, help="bytes of text echoed")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--backend", default="asyncio", choices=("asyncio", "trio"))
    p.add_argument("--uvloop", action="store_true", help="asyncio on uvloop's loop, as the benchmark's servers run")
    p.add_argument("--variant", choices=("bare", "noop2", "otel-unconfigured", "otel-sdk"))
    p.add_argument(
        "--era",
        default="handshake",
        choices=("handshake", "stateless"),
        help="handshake: initialize, then 2025-11-25 calls (default); stateless: 2026-07-28 calls, each with its _meta",
    )
    args = p.parse_args()
    module = __import__(args.server)
    import jsonrpc_mcp

    apply_variant(module.server, args.variant)

    chunks = build(args.frames, args.batch, args.payload, args.era)
    options = {"use_uvloop": True} if args.uvloop else {}
    res = anyio.run(
        measure, module.server, chunks, args.frames, args.rounds, backend=args.backend, backend_options=options
    )
    print(
        f"{args.server} {args.payload} B x {args.batch} per read, {args.backend}{' (uvloop)' if args.uvloop else ''}, "
        f"{args.variant or 'as loaded'}{', 2026-07-28' if args.era == 'stateless' else ''}: "
        f"min {min(res):.2f} median {statistics.median(res):.2f} us CPU per frame "
        f"({jsonrpc_mcp.__file__})"
    )


if __name__ == "__main__":
    main()
