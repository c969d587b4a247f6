"""Where the frames go: a target opens a fresh connection (a channel) per transcript session (L7).



Stdio and in-process servers are reached through the library's own streams; Streamable HTTP through a raw channel
that POSTs each frame byte for byte, since the checker must send what a correct client never would."""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.abc

from ..errors import MissingExtra
from ..jsonrpc.streams import NOTIFICATION, Outgoing
from ..mcp.versions import (
    META_PROTOCOL_VERSION,
    STATELESS_VERSIONS,
)
from ..transports.http_client import post_headers
from ..transports.sse import SseParser
from .frames import loads
from .transcripts import Session

__all__ = (
    "Channel",
    "Target",
    "StdioTarget",
    "ServerTarget",
    "HttpTarget",
    "Unreachable",
)

logger = logging.getLogger(__name__)

# --- targets: where frames go -------------------------------------------------------------------------------


class Channel(Protocol):
    """A connection to the server under test, frame by frame."""

    async def send(self, frame: bytes) -> None: ...

    async def send_all(self, frames: Sequence[bytes]) -> None:
        """Send frames back to back (one write where the transport allows: a call and its cancellation then
        reach the server in the same read)."""

    async def receive(self) -> bytes: ...


class Target(Protocol):
    """Something that can open a fresh connection per session."""

    description: str
    kind: str  # "stdio" or "http": cases may be limited to one (# transport: stdio)

    def connect(self, session: Session) -> AbstractAsyncContextManager[Channel]: ...


class _StreamChannel:
    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._buffer: list[bytes] = []

    async def send(self, frame: bytes) -> None:
        await self.send_all([frame])

    async def send_all(self, frames: Sequence[bytes]) -> None:
        await self._stream.send([Outgoing(f, None, NOTIFICATION) for f in frames])

    async def receive(self) -> bytes:
        while not self._buffer:
            self._buffer.extend(await self._stream.receive())
        return self._buffer.pop(0)

    async def why_closed(self) -> str | None:
        """Why the stream ended, when its transport says (a stdio server's exit status)."""
        why_closed = getattr(self._stream, "why_closed", None)
        reason: str | None = await why_closed() if why_closed is not None else None
        return reason


@dataclass
class StdioTarget:
    """A server started as a subprocess, one process per session (NDJSON over its stdin/stdout)."""

    command: Sequence[str]
    stderr: int | None = subprocess.DEVNULL
    description: str = ""
    kind: str = "stdio"
    #: Added to the short default environment the server gets (see :func:`~jsonrpc_mcp.transports.spawn.spawn`).
    env: Mapping[str, str] | None = None
    #: The whole environment of this process instead of the default one (``env`` still added on top).
    inherit_env: bool = False

    def __post_init__(self) -> None:
        if not self.description:
            self.description = "stdio: " + " ".join(self.command)

    @asynccontextmanager
    async def connect(self, session: Session) -> AsyncIterator[Channel]:
        from ..transports.connect_errors import start_failure
        from ..transports.spawn import spawn

        started = False
        try:
            async with spawn(
                self.command, env=self.env, inherit_env=self.inherit_env, stderr=self.stderr, shutdown_timeout=2.0
            ) as stream:
                started = True
                yield _StreamChannel(stream)
        except OSError as exc:
            if started:
                raise
            raise Unreachable(start_failure(list(self.command), exc)) from None


@dataclass
class ServerTarget:
    """A :class:`~jsonrpc_mcp.Server` in this process, a fresh one per session from ``factory``, over the in-memory
    transport (the frames stdio would carry, without a subprocess): for checking a server in unit tests."""

    factory: Callable[[], Any]
    description: str = "in-process server"
    kind: str = "stdio"

    @asynccontextmanager
    async def connect(self, session: Session) -> AsyncIterator[Channel]:
        from ..transports.memory import memory_pair

        server = self.factory()
        ours, theirs = memory_pair(256)
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, theirs)
            try:
                yield _StreamChannel(ours)
            finally:
                tg.cancel_scope.cancel()
                await ours.aclose()
                await theirs.aclose()


@dataclass
class HttpTarget:
    """A Streamable HTTP endpoint; one HTTP session (handshake) or none (stateless) per transcript session.

    Frames are POSTed raw. What a POST produces (a JSON body, or the events of an SSE stream) lands in one queue
    that the runner reads like a stdio channel; ``202`` with no body is silence.
    """

    url: str
    description: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    kind: str = "http"

    def __post_init__(self) -> None:
        if not self.description:
            self.description = "http: " + self.url

    @asynccontextmanager
    async def connect(self, session: Session) -> AsyncIterator[Channel]:
        try:
            import httpx
        except ImportError:  # the http extra is missing
            raise MissingExtra(f"checking an HTTP server needs httpx: {MissingExtra.install('http')}") from None
        timeout = httpx.Timeout(30.0, read=None)
        async with httpx.AsyncClient(timeout=timeout) as client, anyio.create_task_group() as tg:
            channel = _HttpChannel(client, self.url, session, tg, dict(self.headers))
            try:
                yield channel
            finally:
                tg.cancel_scope.cancel()
                await channel.close()


class _HttpChannel:
    def __init__(self, client: Any, url: str, session: Session, tg: anyio.abc.TaskGroup, headers: dict[str, str]):
        self.client = client
        self.url = url
        self.stateless = session.kind == "stateless"
        self.tg = tg
        self.base = headers
        self.session_id: str | None = None
        self.version: str | None = None
        self.send_q, self.recv_q = anyio.create_memory_object_stream[bytes](1024)
        #: Why the server could not be reached, once a POST failed to connect (one line, naming the host).
        self.unreachable: str | None = None

    def _headers(self, frame: bytes) -> dict[str, str]:
        """The library's headers for this frame (:func:`~jsonrpc_mcp.transports.http_client.post_headers`); the
        frame may be anything a test sends, so what it names is read leniently. A frame of a 2026-07-28 session
        that names no version in its ``_meta`` still gets that era's headers: it is the server's to refuse."""
        msg = loads(frame)
        method = msg.get("method") if isinstance(msg, dict) and "id" in msg else None
        params = msg.get("params") if isinstance(msg, dict) else None
        params = params if isinstance(params, dict) else None
        meta = params.get("_meta") if params is not None else None
        modern = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
        if not isinstance(modern, str):
            modern = STATELESS_VERSIONS[0] if self.stateless else None
        return post_headers(
            self.base,
            method=method if isinstance(method, str) else None,
            params=params,
            version=modern,
            session_id=self.session_id,
            protocol_version=self.version,
        )

    async def send(self, frame: bytes) -> None:
        started = anyio.Event()
        self.tg.start_soon(self._post, frame, started)
        await started.wait()

    async def send_all(self, frames: Sequence[bytes]) -> None:
        for frame in frames:
            await self.send(frame)

    async def _post(self, frame: bytes, started: anyio.Event) -> None:
        msg = loads(frame)
        ident = msg.get("id") if isinstance(msg, dict) else None
        sentinel = isinstance(ident, str) and ident.startswith("sentinel-")
        out: list[bytes] = []
        try:
            async with self.client.stream("POST", self.url, content=frame, headers=self._headers(frame)) as resp:
                sid = resp.headers.get("mcp-session-id")
                if sid and not self.stateless:
                    self.session_id = sid
                ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
                if ctype == "text/event-stream":
                    started.set()
                    parser = SseParser()
                    async for chunk in resp.aiter_bytes():
                        for event in parser.feed(chunk):
                            if not event.data.strip():
                                continue  # a priming event
                            self._learn(event.data)
                            if not sentinel:
                                await self._put(event.data)
                else:
                    body = (await resp.aread()).strip()
                    if ctype == "application/json" and body:
                        self._learn(body)
                        out.append(body)
                    elif resp.status_code >= 300 or body:
                        shown = body[:120].decode(errors="replace")
                        out.append(f"HTTP {resp.status_code} {ctype or '-'} {shown}".encode())
        except Exception as exc:  # reported as a frame: the comparison says what went wrong
            import httpx

            if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
                from ..transports.connect_errors import http_connect_failure

                self.unreachable = http_connect_failure(exc, self.url)
            out.append(f"HTTP request failed: {type(exc).__name__}: {exc}".encode())
        finally:
            if sentinel:
                # Whatever the sentinel's POST got (even an id-less 400 before initialize), it is over: over HTTP
                # each POST carries its own answers, so its end is the point the runner waits for.
                out = [json.dumps({"jsonrpc": "2.0", "id": ident, "result": {}}).encode()]
            for item in out:
                await self._put(item)
            started.set()

    async def _put(self, frame: bytes) -> None:
        try:
            await self.send_q.send(frame)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session is over

    def _learn(self, frame: bytes) -> None:
        msg = loads(frame)
        if isinstance(msg, dict) and isinstance(msg.get("result"), dict):
            version = msg["result"].get("protocolVersion")
            if isinstance(version, str) and "serverInfo" in msg["result"]:
                self.version = version

    async def receive(self) -> bytes:
        try:
            return await self.recv_q.receive()
        except anyio.EndOfStream:
            raise anyio.EndOfStream from None

    async def close(self) -> None:
        if self.session_id is not None:
            with anyio.move_on_after(2.0, shield=True):
                try:
                    await self.client.delete(self.url, headers={"Mcp-Session-Id": self.session_id, **self.base})
                except Exception as exc:  # closing is best effort: the checks are done; say why, go on
                    logger.debug("DELETE of the checked session failed: %r", exc)
        self.send_q.close()
        self.recv_q.close()


class Unreachable(ConnectionError):
    """The server could not be reached or started, or it gave no answer at all to a probe: why, in one line
    (``cannot connect to 127.0.0.1:9 (...): connection refused``, ``the server process exited with status 1 before
    answering initialize``). ``timed_out``: it did not answer within ``--startup``."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out
