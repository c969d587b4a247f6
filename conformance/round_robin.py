"""A reverse proxy that sends each HTTP request to the next of several upstream servers in turn (an ASGI app).

It stands for the load balancer that never sticks to one worker: every request of a client, a session's included,
goes to another server than the one before. Bodies are streamed both ways (an SSE answer as it is written); the
client going away closes the upstream request. Each response names the upstream that answered in
``X-Round-Robin-Upstream`` (its index), so that tests can see where requests went.

    python conformance/round_robin.py --port 8000 http://127.0.0.1:8001 http://127.0.0.1:8002
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from typing import Any

import anyio
import httpx

#: Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1), and Host (the upstream's own).
_HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding", b"upgrade", b"host"}
)
#: Request headers not forwarded: those, and the length (the body is sent whole, with its own).
_NOT_FORWARDED = _HOP_BY_HOP | {b"content-length"}


class RoundRobin:
    def __init__(self, upstreams: Sequence[str]) -> None:
        if not upstreams:
            raise ValueError("give at least one upstream")
        self.upstreams = [u.rstrip("/") for u in upstreams]
        self._turn = itertools.count()
        self._client: httpx.AsyncClient | None = None

    def next_upstream(self) -> int:
        return next(self._turn) % len(self.upstreams)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self._client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None))
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    if self._client is not None:
                        await self._client.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        await self._forward(scope, receive, send)

    async def _forward(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert self._client is not None, "the proxy runs with an ASGI lifespan"
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        index = self.next_upstream()
        query = scope.get("query_string", b"")
        url = self.upstreams[index] + scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        if query:
            url += "?" + query.decode("latin-1")
        headers = [
            (k, v) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP and k.lower() != b"content-length"
        ]
        request = self._client.build_request(scope["method"], url, headers=headers, content=body)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError:
            await _send_whole(send, 502, b"Bad Gateway: the upstream cannot be reached", index)
            return
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_on_disconnect, receive, tg.cancel_scope)
                out = [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP_BY_HOP]
                out.append((b"x-round-robin-upstream", str(index).encode()))
                await send({"type": "http.response.start", "status": response.status_code, "headers": out})
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()


async def _cancel_on_disconnect(receive: Any, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _send_whole(send: Any, status: int, body: bytes, index: int) -> None:
    headers = [(b"content-type", b"text/plain"), (b"x-round-robin-upstream", str(index).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("upstreams", nargs="+", help="base URLs (scheme, host, port) of the servers")
    args = parser.parse_args(argv)
    uvicorn.run(RoundRobin(args.upstreams), host=args.host, port=args.port, log_level="warning", lifespan="on")
    return 0


if __name__ == "__main__":
    sys.exit(main())
