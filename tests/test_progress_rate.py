"""Progress is paced on both sides: "Both parties SHOULD implement rate limiting to prevent flooding" (decision 104).

A burst of reports reaches the peer as the first and the last, the last before the response; reports spaced by the
interval all arrive; a client hands a flooding server's progress to its callback at the same bounded rate, the last
value before the result. The intervals here are long (a burst never spans one, however slow the machine) or the
pacer's clock is the test's own (spaced reports without waiting), so nothing depends on timing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from helpers import RawPeer, notification_frame, raw_server, request_frame

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp.jsonrpc.dispatch import Dispatcher
from jsonrpc_mcp.jsonrpc.streams import NOTIFICATION, MessageStream, Outgoing
from jsonrpc_mcp.jsonrpc.workers import run_in_worker
from jsonrpc_mcp.mcp import progress as pacing
from jsonrpc_mcp.mcp.context import call_on_worker_thread
from jsonrpc_mcp.mcp.session import ServerSession
from jsonrpc_mcp.mcp.versions import Era
from jsonrpc_mcp.tasks import MemoryTaskStore, Tasks
from jsonrpc_mcp.transports.memory import memory_pair

pytestmark = pytest.mark.anyio

HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
V5 = "2026-07-28"
LONG = 60.0  # an interval no burst of a test outlasts
N = 20


class FakeClock:
    """The pacer's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(pacing, "clock", fake)
    return fake


def reporting_server(interval: float, clock: FakeClock | None = None) -> Server:
    server = Server("reports", "1", progress_interval=interval)

    @server.tool()
    async def burst(count: int, ctx: Context) -> str:
        """Report 1..count at once, or each an interval after the other when the test's clock is in use."""
        for step in range(1, count + 1):
            await ctx.report_progress(step, count, f"step {step}")
            if clock is not None:
                clock.now += interval
        return f"{count} reports"

    @server.tool()
    def threaded(count: int, ctx: Context) -> str:
        """A plain tool, on a worker thread: its reports go through the event loop, paced as any."""
        for step in range(1, count + 1):
            ctx.report_progress(step, count)
        return f"{count} reports from a thread"

    @server.tool()
    def threaded_backwards(ctx: Context) -> str:
        ctx.report_progress(2)
        try:
            ctx.report_progress(1)
        except ValueError as exc:
            return str(exc)
        return "no error"

    @server.tool()
    async def failing(count: int, ctx: Context) -> str:
        for step in range(1, count + 1):
            await ctx.report_progress(step)
        raise RuntimeError("broke after its reports")

    return server


def call_frame(ident: int, name: str, count: int, version: str | None = None) -> bytes:
    meta: dict[str, Any] = {"progressToken": f"t{ident}"}
    if version == V5:
        meta["io.modelcontextprotocol/protocolVersion"] = V5
        meta["io.modelcontextprotocol/clientCapabilities"] = {}
    return request_frame(ident, "tools/call", {"name": name, "arguments": {"count": count}, "_meta": meta})


async def progress_before_answer(peer: RawPeer, frame: bytes) -> tuple[list[float], dict[str, Any]]:
    """Send a call; the progress values that came before its answer (nothing else may come), and the answer."""
    ident = json.loads(frame)["id"]
    await peer.send(frame)
    answer, before = await peer.recv_until(lambda m: m.get("id") == ident)
    assert {m["method"] for m in before} <= {"notifications/progress"}
    return [m["params"]["progress"] for m in before], answer


@pytest.mark.parametrize("version", (*HANDSHAKE, V5))
async def test_a_burst_reaches_the_client_as_its_first_and_last_report_before_the_response(version: str) -> None:
    async with raw_server(reporting_server(LONG), version=None if version == V5 else version) as peer:
        heard, answer = await progress_before_answer(peer, call_frame(1, "burst", N, version))
        assert heard == [1, N]  # the first at once, the last held back until just before the response
        assert answer["result"]["content"][0]["text"] == f"{N} reports"
        assert await peer.sync() == []  # and nothing after it


async def test_an_error_response_comes_after_the_held_report_too() -> None:
    async with raw_server(reporting_server(LONG), version="2025-11-25") as peer:
        heard, answer = await progress_before_answer(peer, call_frame(1, "failing", N))
        assert heard == [1, N]
        assert answer["result"]["isError"] is True


async def test_reports_spaced_by_the_interval_all_arrive_at_once(clock: FakeClock) -> None:
    async with raw_server(reporting_server(1.0, clock), version="2025-11-25") as peer:
        heard, _ = await progress_before_answer(peer, call_frame(1, "burst", 5))
        assert heard == [1, 2, 3, 4, 5]


async def test_a_held_report_goes_out_when_its_interval_ends(clock: FakeClock) -> None:
    """The trailing edge: the report held in an interval is sent when it ends, not only with the response."""
    server = Server("held", "1", progress_interval=0.01)
    release = anyio.Event()

    @server.tool()
    async def two_then_wait(ctx: Context) -> str:
        await ctx.report_progress(1)
        await ctx.report_progress(2)  # within the interval by the test's clock: held
        clock.now += 0.01  # the interval is over; the waiting task sends it within ~10 ms
        await release.wait()
        return "released"

    async with raw_server(server, version="2025-11-25") as peer:
        await peer.send(request_frame(1, "tools/call", {"name": "two_then_wait", "_meta": {"progressToken": "t"}}))
        assert (await peer.recv_json())["params"]["progress"] == 1
        assert (await peer.recv_json())["params"]["progress"] == 2  # while the tool still waits
        release.set()
        assert (await peer.recv_json())["id"] == 1


async def test_a_plain_tools_reports_from_its_worker_thread_are_paced_too() -> None:
    async with raw_server(reporting_server(LONG), version="2025-11-25") as peer:
        heard, answer = await progress_before_answer(peer, call_frame(1, "threaded", N))
        assert heard == [1, N]
        assert answer["result"]["content"][0]["text"] == f"{N} reports from a thread"
        heard, answer = await progress_before_answer(
            peer, request_frame(2, "tools/call", {"name": "threaded_backwards", "_meta": {"progressToken": "b"}})
        )
        assert heard == [2]  # and a progress that does not increase is the tool's error, raised on its thread
        assert answer["result"]["content"][0]["text"] == "progress must increase with each report"


async def test_an_interval_of_zero_sends_every_report() -> None:
    async with raw_server(reporting_server(0), version="2025-11-25") as peer:
        heard, _ = await progress_before_answer(peer, call_frame(1, "burst", N))
        assert heard == list(range(1, N + 1))


async def test_the_interval_is_checked() -> None:
    with pytest.raises(ValueError, match="progress_interval must be 0 or more seconds"):
        Server("s", progress_interval=-1)
    with pytest.raises(TypeError, match="progress_interval must be a number of seconds"):
        async with Client.connect_server(Server("s"), progress_interval="fast"):
            pass


# --- receiving: a server that floods ---------------------------------------------------------------------------


async def flooding_server(stream: MessageStream, count: int) -> None:
    """A raw server that answers initialize, then sends ``count`` progress notifications for each call at once,
    then its answer, in one write."""
    peer = RawPeer(stream)
    while True:
        msg = await peer.recv_json(timeout=30)
        if "id" not in msg:
            continue
        if msg["method"] == "initialize":
            info = {"name": "flood", "version": "1"}
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": info}
            await peer.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode())
            continue
        if msg["method"] != "tools/call":  # (the client lists the tools first, for their output schemas)
            tools = {"tools": [{"name": "x", "inputSchema": {"type": "object"}}]}
            await peer.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": tools}).encode())
            continue
        token = msg["params"]["_meta"]["progressToken"]
        frames = [
            notification_frame("notifications/progress", {"progressToken": token, "progress": i, "total": count})
            for i in range(1, count + 1)
        ]
        frames.append(notification_frame("notifications/progress", {"progressToken": "nobody's", "progress": 1}))
        answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": "done"}]}}
        frames.append(json.dumps(answer).encode())
        await stream.send([Outgoing(frame, None, NOTIFICATION) for frame in frames])


@asynccontextmanager
async def flooded(count: int, interval: float) -> AsyncIterator[Client]:
    """A client (pacing at ``interval``) of a server that sends ``count`` reports for each call."""
    ours, theirs = memory_pair(1024)
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(flooding_server, theirs, count)
                async with Client.connect(ours, protocol_version="2025-11-25", progress_interval=interval) as client:
                    yield client
                tg.cancel_scope.cancel()
    finally:
        await ours.aclose()
        await theirs.aclose()


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_flooding_servers_progress_reaches_the_callback_rate_bounded_with_its_last_value(kind: str) -> None:
    heard: list[float] = []

    def note(progress: float, total: float | None, message: str | None) -> None:
        heard.append(progress)

    async def note_later(progress: float, total: float | None, message: str | None) -> None:
        await anyio.lowlevel.checkpoint()
        heard.append(progress)

    async with flooded(500, LONG) as client:
        result = await client.call_tool("x", {}, progress=note if kind == "sync" else note_later)
        assert result.content[0].text == "done"  # type: ignore[union-attr]
        assert sorted(heard) == [1, 500]  # 500 reports, 2 callbacks: the first and the last, before the result
        assert client._paced.held == 0  # nothing is kept once the call returned


async def test_without_the_clients_pacing_every_flooded_report_reaches_the_callback() -> None:
    """What the pacing prevents: the same flood, passed on as it comes."""
    heard: list[float] = []
    async with flooded(50, 0) as client:
        await client.call_tool("x", {}, progress=lambda p, total, message: heard.append(p))
    assert heard == list(range(1, 51))


# --- a task's progress -------------------------------------------------------------------------------------------


async def test_a_tasks_burst_reaches_the_client_as_its_first_and_last_report_before_its_end() -> None:
    """A 2025-11-25 task's progress goes on the call's token after the call was answered: paced the same way, its
    latest report held back until just before the task ends (so before ``tasks/result`` answers)."""
    store = MemoryTaskStore()
    server = Server("tasks", "1", progress_interval=LONG, extensions=[Tasks(store, ttl=60, poll_interval=0.01)])
    go = anyio.Event()

    @server.tool(task="optional")
    async def steps(count: int, ctx: Context) -> str:
        await go.wait()
        for step in range(1, count + 1):
            await ctx.report_progress(step, count, f"step {step}")
        return "done"

    async with raw_server(server, version="2025-11-25") as peer:
        params = {"name": "steps", "arguments": {"count": N}, "task": {}, "_meta": {"progressToken": "tok"}}
        created = await peer.call(request_frame(1, "tools/call", params))
        task_id = created["result"]["task"]["taskId"]
        await peer.send(request_frame(2, "tasks/result", {"taskId": task_id}))
        go.set()
        answer, before = await peer.recv_until(lambda m: m.get("id") == 2)
    assert [m["params"]["progress"] for m in before if m.get("method") == "notifications/progress"] == [1, N]
    assert answer["result"]["content"][0]["text"] == "done"
    record = await store.get(task_id)
    assert record is not None and record.status == "completed"


async def test_what_a_pacer_keeps_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """One slot per key, at most MAX_KEYS of them: a report of a key past them passes as it comes, never held."""
    monkeypatch.setattr(pacing, "MAX_KEYS", 2)
    passed: list[tuple[str, int]] = []

    async def deliver(value: tuple[str, int]) -> None:
        passed.append(value)

    pacer = pacing.Pacer(LONG, deliver, lambda fn, *args: False)  # (no task: what is held waits for finish)
    for key in ("a", "b", "c"):
        await pacer.report(key, (key, 1))
        await pacer.report(key, (key, 2))
    assert passed == [("a", 1), ("b", 1), ("c", 1), ("c", 2)]  # "c" has no slot: never held
    assert pacer.held == 2 and "c" not in pacer
    await pacer.finish("a")
    pacer.drop("b")
    assert passed[-1] == ("a", 2) and pacer.held == 0 and "a" not in pacer and "b" not in pacer


class SpawnSeen(Dispatcher):
    """A dispatcher that says when it has taken work to spawn (``spawned``, set from any thread)."""

    def __init__(self, stream: MessageStream) -> None:
        super().__init__(stream, lambda req, context: b"")
        self.spawned = threading.Event()

    def spawn(self, fn: Any, *args: Any) -> bool:
        taken = super().spawn(fn, *args)
        self.spawned.set()
        return taken


async def test_a_plain_tools_report_is_not_waited_for_once_its_connection_ends_without_sending_it() -> None:
    """The report of a plain tool's thread is handed to the connection's event loop; a connection that ends
    before it runs drops it (``Dispatcher.close``: kept work is dropped), and the thread goes on, not waiting
    for a report that will never be made."""
    ours, theirs = memory_pair()
    dispatcher = SpawnSeen(ours)  # (not serving yet: what it spawns is kept until it does)
    server = Server("s")
    session = ServerSession(server, dispatcher)
    ctx = Context(
        session=session,
        request_id=1,
        method="tools/call",
        era=Era.HANDSHAKE,
        version="2025-11-25",
        client_capabilities={},
    )

    def tool() -> str:
        ctx.report_progress(1)
        return "went on"

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            result: list[str] = []

            async def call() -> None:
                result.append(await run_in_worker(call_on_worker_thread, tool, {}))

            tg.start_soon(call)
            await anyio.to_thread.run_sync(dispatcher.spawned.wait)
            dispatcher.close()
    await ours.aclose()
    await theirs.aclose()
    assert result == ["went on"]
