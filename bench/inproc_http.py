"""The Streamable HTTP app in-process: CPU per POST without uvicorn, sockets or a load driver.

The ASGI app (``McpAsgiApp``) is called directly with ``tools/call echo`` POSTs, ``--concurrency`` of them in
flight, in the handshake era (one session, as ``mcpload`` does) or the stateless era (2026-07-28: every POST on
its own, with the mirrored headers). The figure is the process CPU time per POST over ``--posts`` POSTs,
``--rounds`` times (min and median printed), and how many answers came as JSON and as SSE. Stable enough on a
noisy machine to compare two checkouts of the library::

    python bench/inproc_http.py --era stateless --server echo_async
    PYTHONPATH=/path/to/other/checkout python bench/inproc_http.py --era stateless --server echo_async

Run both a few times, alternately; compare the minimums.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import anyio
import msgspec

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "servers"))

STATELESS = "2026-07-28"
HANDSHAKE = "2025-11-25"
_BASE = [
    (b"host", b"127.0.0.1:8000"),
    (b"accept", b"application/json, text/event-stream"),
    (b"content-type", b"application/json"),
]


async def post(app: Any, body: bytes, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    """One POST through the app; the messages it sent. The client "leaves" once the response has ended."""
    scope = {"type": "http", "method": "POST", "path": "/mcp", "root_path": "", "headers": _BASE + headers}
    scope.update(http_version="1.1", scheme="http", query_string=b"")
    sent: list[dict[str, Any]] = []
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    ended = anyio.Event()

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await ended.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            ended.set()

    await app(scope, receive, send)
    return sent


def call_body(ident: str, text: str, era: str) -> bytes:
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": text}}
    if era == "stateless":
        meta = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
        params["_meta"] = meta
    return msgspec.json.encode({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})


async def session_headers(app: Any) -> list[tuple[bytes, bytes]]:
    """Initialize a handshake-era session; the headers its later POSTs carry."""
    init = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "inproc", "version": "1"}}
    sent = await post(app, msgspec.json.encode({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}), [])
    sid = dict(sent[0]["headers"])[b"mcp-session-id"]
    headers = [(b"mcp-session-id", sid), (b"mcp-protocol-version", HANDSHAKE.encode())]
    await post(app, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers)
    return headers


async def measure(server: Any, args: argparse.Namespace) -> tuple[list[float], dict[str, int]]:
    from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

    text = "x" * args.payload
    kinds = {"json": 0, "sse": 0}
    app = McpAsgiApp(server, path="/mcp")
    async with app.lifespan():
        if args.era == "handshake":
            headers = await session_headers(app)
        else:
            headers = [(b"mcp-protocol-version", STATELESS.encode()), (b"mcp-method", b"tools/call")]
            headers.append((b"mcp-name", b"echo"))
        per_worker = max(1, args.posts // args.concurrency)
        bodies = [[call_body(f"{w}-{i}", text, args.era) for i in range(per_worker)] for w in range(args.concurrency)]

        async def worker(mine: list[bytes]) -> None:
            for body in mine:
                sent = await post(app, body, headers)
                kind = dict(sent[0]["headers"]).get(b"content-type")
                kinds["json" if kind == b"application/json" else "sse"] += 1

        async with anyio.create_task_group() as tg:  # warm-up
            for mine in bodies:
                tg.start_soon(worker, mine[: max(1, len(mine) // 10)])
        out = []
        for _ in range(args.rounds):
            t0 = time.process_time()
            async with anyio.create_task_group() as tg:
                for mine in bodies:
                    tg.start_soon(worker, mine)
            out.append((time.process_time() - t0) / (per_worker * args.concurrency) * 1e6)
    return out, kinds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--server",
        default="echo",
        choices=("echo", "echo_thread", "echo_async"),
        help="bench/servers/*.py: echo (a def tool, inline=True), echo_thread (a def tool on a worker thread, the "
        "default for def tools) or echo_async (an async def tool); default echo",
    )
    p.add_argument("--era", default="handshake", choices=("handshake", "stateless"))
    p.add_argument("--posts", type=int, default=4000, help="POSTs per round")
    p.add_argument("--concurrency", type=int, default=64, help="POSTs in flight")
    p.add_argument("--payload", type=int, default=1024, help="bytes of text echoed")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--backend", default="asyncio", choices=("asyncio", "trio"))
    args = p.parse_args()
    module = __import__(args.server)
    import jsonrpc_mcp

    res, kinds = anyio.run(measure, module.server, args, backend=args.backend)
    print(
        f"{args.server} {args.era} {args.payload} B x {args.concurrency} in flight, {args.backend}: "
        f"min {min(res):.1f} median {statistics.median(res):.1f} us CPU per POST "
        f"(json {kinds['json']}, sse {kinds['sse']}; {jsonrpc_mcp.__file__})"
    )


if __name__ == "__main__":
    main()
