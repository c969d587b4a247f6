"""Shared helpers for the protocol tests: a raw JSON-RPC peer over the in-memory transport, fixture paths.

:class:`RawPeer` drives a real :class:`~jsonrpc_mcp.Server` with hand-written frames. "Silence" is observed
without sleeping: after the frame under test the peer sends a ``ping`` with a unique id; the server answers
frames in order, so everything received before the ping's reply is what the frame produced.
"""

from __future__ import annotations

import gc
import itertools
import json
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
import pytest

from jsonrpc_mcp import Context, Server
from jsonrpc_mcp.jsonrpc.streams import NOTIFICATION, Arrival, Intake, MessageStream, Outgoing
from jsonrpc_mcp.mcp.principal import AccessToken
from jsonrpc_mcp.transports.memory import MemoryMessageStream, memory_pair

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EVERYTHING = FIXTURES / "everything.py"
PYTHON = sys.executable
TIMEOUT = 10.0

#: A test (or, with ``pytest.mark.usefixtures("runner")`` in ``pytestmark``, a module) run against both runners of
#: the dispatcher: the fast one and the plain reference (the ``runner`` fixture of conftest.py).
BOTH_RUNNERS = pytest.mark.parametrize("runner", ["fast", "plain"], indirect=True)

HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
CLIENT_INFO = {"name": "raw", "version": "1"}


def serve_command(fixture: Path = EVERYTHING) -> list[str]:
    """The command line of a stdio server for a fixture file."""
    return [PYTHON, "-m", "jsonrpc_mcp", "serve", str(fixture)]


def init_frame(version: str = "2025-11-25", ident: Any = 0, capabilities: dict[str, Any] | None = None) -> bytes:
    params = {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": CLIENT_INFO}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "initialize", "params": params}).encode()


def request_frame(ident: Any, method: str, params: Any = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg, separators=(",", ":")).encode()


def notification_frame(method: str, params: Any = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg, separators=(",", ":")).encode()


async def send_raw(stream: MessageStream, frame: bytes) -> None:
    """Write one frame as it is (a raw peer: what kind of message it is does not matter to the stream)."""
    await stream.send([Outgoing(frame, None, NOTIFICATION)])


class RawPeer:
    """The client end of a connection, speaking raw frames."""

    _sentinels = itertools.count(1)

    def __init__(self, stream: MessageStream) -> None:
        self.stream = stream
        self._buffer: deque[bytes] = deque()

    async def send(self, frame: bytes) -> None:
        await send_raw(self.stream, frame)

    async def recv(self, timeout: float = TIMEOUT) -> bytes:
        with anyio.fail_after(timeout):
            while not self._buffer:
                self._buffer.extend(await self.stream.receive())
        return self._buffer.popleft()

    async def recv_json(self, timeout: float = TIMEOUT) -> Any:
        return json.loads(await self.recv(timeout))

    async def recv_until(self, predicate: Any, timeout: float = TIMEOUT) -> tuple[Any, list[Any]]:
        """Receive decoded frames until one satisfies ``predicate``; returns it and the ones before it."""
        before: list[Any] = []
        with anyio.fail_after(timeout):
            while True:
                msg = await self.recv_json()
                if predicate(msg):
                    return msg, before
                before.append(msg)

    async def sync(self) -> list[bytes]:
        """Send a ping with a fresh id; return every frame that arrived before its reply."""
        ident = f"sentinel-{next(self._sentinels)}"
        expected = b'{"jsonrpc":"2.0","id":"' + ident.encode() + b'","result":{}}'
        await self.send(request_frame(ident, "ping"))
        before: list[bytes] = []
        with anyio.fail_after(TIMEOUT):
            while True:
                frame = await self.recv()
                if frame == expected:
                    return before
                before.append(frame)

    async def exchange(self, frame: bytes) -> list[bytes]:
        """Send one frame; return the frames it produced (synchronously answered ones)."""
        await self.send(frame)
        return await self.sync()

    async def call(self, frame: bytes) -> Any:
        """Send a request frame and return the decoded reply with the same id."""
        ident = json.loads(frame)["id"]
        await self.send(frame)
        msg, _ = await self.recv_until(lambda m: m.get("id") == ident and ("result" in m or "error" in m))
        return msg

    async def initialize(
        self, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        await self.send(init_frame(version, "init", capabilities))
        reply = await self.recv_json()
        assert reply.get("id") == "init" and "result" in reply, reply
        await self.send(notification_frame("notifications/initialized"))
        return reply["result"]  # type: ignore[no-any-return]


@asynccontextmanager
async def raw_server(
    server: Server,
    *,
    version: str | None = None,
    capabilities: dict[str, Any] | None = None,
    buffer: int = 256,
    drain_timeout: float = 5.0,
    max_in_flight: int = 128,
) -> AsyncIterator[RawPeer]:
    """Serve ``server`` over a memory pair and yield a raw peer (initialized when ``version`` is given)."""
    ours, theirs = memory_pair(buffer)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(theirs, max_in_flight=max_in_flight, drain_timeout=drain_timeout))
        peer = RawPeer(ours)
        if version is not None:
            await peer.initialize(version, capabilities)
        try:
            yield peer
        finally:
            tg.cancel_scope.cancel()
            await ours.aclose()
            await theirs.aclose()


def parse(frames: list[bytes]) -> list[Any]:
    return [json.loads(f) for f in frames]


class ConnectionTracker:
    """Counts a server's live connections, so a test can wait (on an Event) until all of them have ended.

    Tests stop socket servers by cancelling them; doing that while a connection is still reading the peer's
    EOF hits an anyio race on asyncio Unix sockets (a reader callback resolving a cancelled future). Waiting
    for the server side of every connection to end first keeps teardown deterministic.
    """

    def __init__(self, server: Server) -> None:
        self.active = 0
        self.total = 0
        self._idle = anyio.Event()
        self._idle.set()
        serve = server.serve

        async def tracked(stream: MessageStream, **options: Any) -> None:
            if self.active == 0:
                self._idle = anyio.Event()
            self.active += 1
            self.total += 1
            try:
                await serve(stream, **options)
            finally:
                self.active -= 1
                if self.active == 0:
                    self._idle.set()

        server.serve = tracked  # type: ignore[method-assign]

    async def wait_idle(self, timeout: float = TIMEOUT) -> None:
        with anyio.fail_after(timeout):
            await self._idle.wait()


@contextmanager
def without_loop_processes() -> Iterator[None]:
    """Inside the block the event loop cannot start child processes, as asyncio's selector loop on Windows cannot
    (``anyio.open_process`` raises ``NotImplementedError``): ``spawn`` falls back to :mod:`subprocess` and pipes
    read and written on worker threads."""

    async def unsupported(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    with mock.patch.object(anyio, "open_process", unsupported):
        yield


class PrincipalStream(MemoryMessageStream):
    """A memory stream whose requests all come from one principal (as an authenticating transport would say)."""

    principal: AccessToken | None = None

    async def receive(self) -> Sequence[bytes]:
        return Arrival(await super().receive(), PrincipalIntake(self.principal))


class PrincipalIntake(Intake):
    """What comes with a message of a transport that authenticated its sender."""

    __slots__ = ("auth",)

    def __init__(self, principal: AccessToken | None) -> None:
        self.auth = principal


def left_in_cycles(*kinds: type) -> list[Any]:
    """The objects of ``kinds`` the cyclic collector finds unreachable now, left in reference cycles since it last
    ran (call it with the collector disabled). Objects still in use are not counted: a worker thread's last call,
    which it lets go of just after the answer is out, or another test's."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        # (type(), not isinstance: a weak proxy among the garbage, whose object is gone, would raise ReferenceError)
        return [obj for obj in gc.garbage if issubclass(type(obj), kinds)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def left_in_cycles_by(run: Callable[[], Awaitable[Any]], *kinds: type) -> list[Any]:
    """Await ``run()`` once (what a first run makes once is kept), then again with the cyclic collector off: the
    objects of ``kinds`` the second run left in reference cycles (:func:`left_in_cycles`)."""
    await run()
    gc.collect()
    gc.disable()
    try:
        await run()
        return left_in_cycles(*kinds)
    finally:
        gc.enable()


def paced(heard: Sequence[Any], reported: Sequence[Any]) -> bool:
    """Whether ``heard`` is what the pacing of progress (decision 104) may make of ``reported``, the reports made
    in quick succession: the first and the last of them, and any of those between, in order."""
    if not heard or heard[0] != reported[0] or heard[-1] != reported[-1]:
        return False
    rest = iter(reported)
    return all(any(item == candidate for candidate in rest) for item in heard)


def add_patient_tool(server: Server) -> tuple[threading.Event, threading.Event, threading.Event]:
    """Register the plain tool ``patient``: a long computation that looks at ``ctx.cancelled`` now and then. Its
    events: ``started`` once it runs, ``saw`` once it saw it was cancelled (it then returns ``"stopped"``), and
    ``give_up``, which makes it return ``"never told"`` (set it at the end of a test that fails)."""
    started, saw, give_up = threading.Event(), threading.Event(), threading.Event()

    @server.tool()
    def patient(ctx: Context) -> str:
        started.set()
        while not ctx.cancelled:
            if give_up.wait(0.01):
                return "never told"
        saw.set()
        return "stopped"

    return started, saw, give_up
