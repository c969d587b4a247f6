"""The concurrent JSON-RPC peer: ordering, cancellation both ways, timeouts, correlation, back-pressure, close."""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from fixtures.everything import make_server
from helpers import BOTH_RUNNERS, RawPeer, left_in_cycles_by, paced, raw_server, request_frame, send_raw

from jsonrpc_mcp import Client, ConnectionClosed, Context, RequestTimeout, RpcError, Server
from jsonrpc_mcp.errors import InvalidParams
from jsonrpc_mcp.jsonrpc._reference import PlainDispatcher, PlainTasks
from jsonrpc_mcp.jsonrpc.concurrency import open_handler_tasks
from jsonrpc_mcp.jsonrpc.dispatch import BUSY, Dispatcher, ErrorReply, Pending
from jsonrpc_mcp.jsonrpc.streams import MessageStream, Outgoing
from jsonrpc_mcp.jsonrpc.wire import Notification, Request
from jsonrpc_mcp.transports.memory import MemoryMessageStream, memory_pair

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("runner"), BOTH_RUNNERS]


def cancel_frame(ident: Any, reason: str) -> bytes:
    params = {"requestId": ident, "reason": reason}
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}).encode()


class Gates:
    """Handlers that block until the test releases them, and record what happened."""

    def __init__(self) -> None:
        self.release: dict[str, anyio.Event] = {}
        self.started: dict[str, anyio.Event] = {}
        self.cancelled: dict[str, anyio.Event] = {}
        self.count = 0

    def event(self, table: dict[str, anyio.Event], key: str) -> anyio.Event:
        if key not in table:
            table[key] = anyio.Event()
        return table[key]

    def handler(self, req: Request, context: Any = None) -> bytes | Coroutine[Any, Any, bytes]:
        if req.method == "echo":
            return bytes(req.params) if req.params is not None else b"{}"
        if req.method == "fail":
            raise InvalidParams("bad", {"why": "test"})
        if req.method == "bug":
            raise ZeroDivisionError("secret")
        if req.method == "wrong-type":
            return "not bytes"  # type: ignore[return-value]
        if req.method == "block":
            key = json.loads(bytes(req.params or b"{}")).get("key", str(req.id))
            return self._block(key)
        raise RpcError("Method not found", code=-32601)

    async def _block(self, key: str) -> bytes:
        self.count += 1
        self.event(self.started, key).set()
        try:
            await self.event(self.release, key).wait()
        except anyio.get_cancelled_exc_class():
            self.event(self.cancelled, key).set()
            raise
        return json.dumps({"key": key}).encode()


@asynccontextmanager
async def peers(
    server_options: dict[str, Any] | None = None, client_options: dict[str, Any] | None = None, buffer: int = 64
) -> AsyncIterator[tuple[Dispatcher, Dispatcher, Gates]]:
    """Two dispatchers on a memory pair: ``client`` (no handler) and ``server`` (the gated handler)."""
    gates = Gates()
    a, b = memory_pair(buffer)
    client = Dispatcher(a, cancel_frame=cancel_frame, **(client_options or {}))
    server = Dispatcher(b, gates.handler, cancel_frame=cancel_frame, drain_timeout=0.0, **(server_options or {}))
    async with anyio.create_task_group() as tg:
        await tg.start(client.run)
        await tg.start(server.run)
        try:
            yield client, server, gates
        finally:
            tg.cancel_scope.cancel()
            await a.aclose()
            await b.aclose()


@asynccontextmanager
async def raw_to_dispatcher(**options: Any) -> AsyncIterator[tuple[Dispatcher, RawPeer]]:
    """A dispatcher (with a cancel frame) talking to a raw peer that answers nothing unless told to."""
    a, b = memory_pair(64)
    dispatcher = Dispatcher(a, lambda req, context: b"{}", cancel_frame=cancel_frame, **options)
    async with anyio.create_task_group() as tg:
        await tg.start(dispatcher.run)
        try:
            yield dispatcher, RawPeer(b)
        finally:
            tg.cancel_scope.cancel()
            await a.aclose()
            await b.aclose()


async def test_fast_request_overtakes_slow_one() -> None:
    async with peers() as (client, server, gates):
        order: list[str] = []

        async def slow() -> None:
            result = await client.request("block", b'{"key":"slow"}')
            order.append(json.loads(bytes(result))["key"])

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            await gates.event(gates.started, "slow").wait()
            fast = await client.request("echo", b'{"fast":true}')
            order.append("fast")
            assert json.loads(bytes(fast)) == {"fast": True}
            assert server.in_flight() == 1  # the slow one is still running
            gates.event(gates.release, "slow").set()
        assert order == ["fast", "slow"]


async def test_errors_from_handlers() -> None:
    async with peers() as (client, _server, _gates):
        with pytest.raises(InvalidParams) as info:
            await client.request("fail")
        assert (info.value.code, info.value.message, info.value.data) == (-32602, "bad", {"why": "test"})
        with pytest.raises(RpcError) as bug:
            await client.request("bug")
        assert (bug.value.code, bug.value.message) == (-32603, "Internal error")
        with pytest.raises(RpcError) as wrong:
            await client.request("wrong-type")
        assert wrong.value.code == -32603
        with pytest.raises(RpcError) as missing:
            await client.request("nothing")
        assert missing.value.code == -32601
        # still fine afterwards
        assert json.loads(bytes(await client.request("echo", b'{"x":1}'))) == {"x": 1}


async def test_duplicate_in_flight_id_is_refused() -> None:
    gates = Gates()
    a, b = memory_pair(16)
    server = Dispatcher(b, gates.handler, drain_timeout=0.0)
    peer = RawPeer(a)
    async with anyio.create_task_group() as tg:
        await tg.start(server.run)
        await peer.send(request_frame(1, "block", {"key": "k"}))
        await gates.event(gates.started, "k").wait()
        await peer.send(request_frame(1, "echo", {}))
        reply = await peer.recv_json()
        assert reply == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32600, "message": "Invalid Request: id is already in use"},
        }
        gates.event(gates.release, "k").set()
        assert await peer.recv_json() == {"jsonrpc": "2.0", "id": 1, "result": {"key": "k"}}
        tg.cancel_scope.cancel()
    await a.aclose()
    await b.aclose()


async def test_cancelled_notification_cancels_handler_and_suppresses_response() -> None:
    server = Server("cancel", "1")
    started = anyio.Event()
    cancelled = anyio.Event()

    @server.tool()
    async def forever() -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return "never"

    async with raw_server(server, version="2025-11-25") as peer:
        await peer.send(request_frame(7, "tools/call", {"name": "forever", "arguments": {}}))
        with anyio.fail_after(5):
            await started.wait()
        await peer.send(
            b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}'
        )
        with anyio.fail_after(5):
            await cancelled.wait()
        # Nothing about request 7 ever arrives: the next frame is the answer to a later ping.
        assert await peer.sync() == []
        # The same id may be used again once the cancelled request is gone.
        reply = await peer.call(request_frame(7, "ping"))
        assert reply == {"jsonrpc": "2.0", "id": 7, "result": {}}


async def test_a_handler_cancelled_by_the_peer_leaves_nothing_in_a_cycle() -> None:
    """A handler cancelled while it waits ends with the cancellation's traceback, which holds the frames it passed
    through: nothing of the request (its pending entry, its context) is left in a reference cycle with its task
    for the cyclic collector to find, on asyncio and trio."""
    server = Server("cancel", "1")
    started: list[anyio.Event] = []
    idents = iter((7, 8))

    @server.tool()
    async def forever(ctx: Context) -> str:
        started[-1].set()
        await anyio.sleep_forever()
        return "never"

    async with raw_server(server, version="2025-11-25") as peer:

        async def cancel_one() -> None:
            ident = next(idents)
            started.append(anyio.Event())
            await peer.send(request_frame(ident, "tools/call", {"name": "forever", "arguments": {}}))
            with anyio.fail_after(5):
                await started[-1].wait()
            await peer.send(cancel_frame(ident, "user"))
            assert await peer.sync() == []

        assert await left_in_cycles_by(cancel_one, Pending, Context) == []


async def test_cancel_of_other_id_type_does_not_cancel() -> None:
    """requestId "7" (a string) does not cancel request 7 (an integer): ids are kept exactly."""
    async with peers() as (client, server, gates):
        async with anyio.create_task_group() as tg:
            result: list[Any] = []

            async def call() -> None:
                result.append(await client.request("block", b'{"key":"k"}', ident=7))

            tg.start_soon(call)
            await gates.event(gates.started, "k").wait()
            assert server.cancel_inbound("7") is False
            assert server.cancel_inbound(True) is False
            assert server.in_flight() == 1
            gates.event(gates.release, "k").set()
        assert json.loads(bytes(result[0])) == {"key": "k"}


async def test_outgoing_timeout_raises_and_sends_cancel() -> None:
    async with raw_to_dispatcher() as (dispatcher, peer):
        with pytest.raises(RequestTimeout) as info:
            await dispatcher.request("never/answered", b'{"a":1}', timeout=0.05)
        assert "never/answered" in info.value.message
        sent = await peer.recv_json()
        assert sent["method"] == "never/answered" and sent["params"] == {"a": 1}
        cancel = await peer.recv_json()
        assert cancel == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": sent["id"], "reason": "Request timed out"},
        }
        # A late answer to the abandoned request is ignored, not an error.
        await peer.send(json.dumps({"jsonrpc": "2.0", "id": sent["id"], "result": {}}).encode())
        assert await peer.call(request_frame("p", "ping")) == {"jsonrpc": "2.0", "id": "p", "result": {}}


async def test_default_request_timeout_applies() -> None:
    async with raw_to_dispatcher(request_timeout=0.05) as (dispatcher, peer):
        with pytest.raises(RequestTimeout):
            await dispatcher.request("x")
        assert (await peer.recv_json())["method"] == "x"
        assert (await peer.recv_json())["method"] == "notifications/cancelled"


async def test_caller_cancellation_sends_cancel() -> None:
    async with raw_to_dispatcher() as (dispatcher, peer):
        outcome: list[str] = []

        async def call(scope_holder: list[anyio.CancelScope]) -> None:
            with anyio.CancelScope() as scope:
                scope_holder.append(scope)
                await dispatcher.request("slow/thing")
            outcome.append("cancelled" if scope.cancelled_caught else "finished")

        holder: list[anyio.CancelScope] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, holder)
            sent = await peer.recv_json()
            holder[0].cancel()
            cancel = await peer.recv_json()
        assert outcome == ["cancelled"]
        assert cancel["method"] == "notifications/cancelled"
        assert cancel["params"] == {"requestId": sent["id"], "reason": "Request cancelled"}


async def test_unknown_response_ids_are_ignored_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="jsonrpc_mcp.jsonrpc.dispatch")
    async with raw_to_dispatcher() as (dispatcher, peer):
        async with anyio.create_task_group() as tg:
            results: list[Any] = []

            async def call() -> None:
                results.append(await dispatcher.request("question"))

            tg.start_soon(call)
            sent = await peer.recv_json()
            await peer.send(b'{"jsonrpc":"2.0","id":"not-ours","result":{"wrong":true}}')
            await peer.send(b'{"jsonrpc":"2.0","id":424242,"error":{"code":-1,"message":"nope"}}')
            # the dispatcher is still alive and the real request is still pending
            assert await peer.call(request_frame("p", "ping")) == {"jsonrpc": "2.0", "id": "p", "result": {}}
            assert not results
            await peer.send(json.dumps({"jsonrpc": "2.0", "id": sent["id"], "result": {"right": True}}).encode())
        assert json.loads(bytes(results[0])) == {"right": True}
    messages = [r.getMessage() for r in caplog.records if r.name == "jsonrpc_mcp.jsonrpc.dispatch"]
    assert any("unknown request id 'not-ours'" in m for m in messages)
    assert any("unknown request id 424242" in m for m in messages)


async def test_error_response_raises_the_matching_rpc_error() -> None:
    async with raw_to_dispatcher() as (dispatcher, peer):
        async with anyio.create_task_group() as tg:
            caught: list[BaseException] = []

            async def call() -> None:
                try:
                    await dispatcher.request("q")
                except RpcError as exc:
                    caught.append(exc)

            tg.start_soon(call)
            sent = await peer.recv_json()
            reply = {"jsonrpc": "2.0", "id": sent["id"], "error": {"code": -32602, "message": "no", "data": [1]}}
            await peer.send(json.dumps(reply).encode())
        assert isinstance(caught[0], InvalidParams)
        assert (caught[0].message, caught[0].data) == ("no", [1])


async def test_progress_tokens_route_to_the_right_callback() -> None:
    seen: dict[str, list[tuple[float, float | None, str | None]]] = {"three": [], "five": []}

    def recorder(name: str) -> Any:
        def callback(progress: float, total: float | None, message: str | None) -> None:
            seen[name].append((progress, total, message))

        return callback

    async with Client.connect_server(make_server()) as client:
        results: dict[str, Any] = {}

        async def run(name: str, steps: int) -> None:
            results[name] = await client.call_tool("progress", {"steps": steps}, progress=recorder(name))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "three", 3)
            tg.start_soon(run, "five", 5)
        # and a call without a callback gets no token at all
        plain = await client.call_tool("progress", {"steps": 2})
    assert paced(seen["three"], [(i, 3, f"step {i}") for i in (1, 2, 3)])
    assert paced(seen["five"], [(i, 5, f"step {i}") for i in (1, 2, 3, 4, 5)])
    assert results["three"].content[0].text == "3 steps"
    assert plain.content[0].text == "2 steps"


async def test_back_pressure_reader_stops_at_max_in_flight() -> None:
    gates = Gates()
    c2s_send, c2s_recv = anyio.create_memory_object_stream[bytes](4)
    s2c_send, s2c_recv = anyio.create_memory_object_stream[bytes](64)
    server_side = MemoryMessageStream(s2c_send, c2s_recv)
    peer = RawPeer(MemoryMessageStream(c2s_send, s2c_recv))
    server = Dispatcher(server_side, gates.handler, max_in_flight=2, drain_timeout=0.0)
    async with anyio.create_task_group() as tg:
        await tg.start(server.run)
        await peer.send(request_frame(1, "block", {"key": "all"}))
        await peer.send(request_frame(2, "block", {"key": "all"}))
        await gates.event(gates.started, "all").wait()
        await anyio.wait_all_tasks_blocked()
        assert server.in_flight() == 2
        # The reader has stopped: four more frames fill the bounded buffer and stay there.
        for i in range(3, 7):
            c2s_send.send_nowait(request_frame(i, "echo", {"n": i}))
        await anyio.wait_all_tasks_blocked()
        assert c2s_send.statistics().current_buffer_used == 4
        with pytest.raises(anyio.WouldBlock):
            c2s_send.send_nowait(request_frame(7, "echo", {}))
        assert gates.count == 2
        # Capacity comes back: everything is read and answered.
        gates.event(gates.release, "all").set()
        replies = [await peer.recv_json() for _ in range(6)]
        assert sorted(r["id"] for r in replies) == [1, 2, 3, 4, 5, 6]
        tg.cancel_scope.cancel()
    await server_side.aclose()
    await peer.stream.aclose()


async def test_a_malformed_answer_to_our_request_fails_that_call_and_is_not_answered() -> None:
    async with raw_to_dispatcher() as (dispatcher, peer):
        caught: list[RpcError] = []

        async def call() -> None:
            try:
                await dispatcher.request("question")
            except RpcError as exc:
                caught.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            sent = json.loads(await peer.recv())
            await peer.send(b'{"jsonrpc":"2.0","id":' + str(sent["id"]).encode() + b',"error":null}')
        assert [(e.code, e.message) for e in caught] == [(-32600, "Invalid Request: malformed error response")]
        assert await peer.sync() == []  # nothing was sent back to the peer


async def test_connection_close_fails_pending_requests() -> None:
    a, b = memory_pair(16)
    dispatcher = Dispatcher(a, cancel_frame=cancel_frame)
    peer = RawPeer(b)
    caught: list[BaseException] = []
    async with anyio.create_task_group() as tg:
        await tg.start(dispatcher.run)

        async def call() -> None:
            try:
                await dispatcher.request("pending")
            except ConnectionClosed as exc:
                caught.append(exc)

        tg.start_soon(call)
        tg.start_soon(call)
        await peer.recv()
        await peer.recv()
        await b.aclose()  # the peer goes away
    assert len(caught) == 2
    assert dispatcher.closed
    with pytest.raises(ConnectionClosed):
        await dispatcher.request("after-close")
    await a.aclose()


async def test_running_handlers_finish_after_end_of_stream() -> None:
    """EOF from the peer lets running handlers finish and answer (``printf ... | server`` gets its replies)."""
    gates = Gates()
    c2s_send, c2s_recv = anyio.create_memory_object_stream[bytes](8)
    s2c_send, s2c_recv = anyio.create_memory_object_stream[bytes](8)
    server = Dispatcher(MemoryMessageStream(s2c_send, c2s_recv), gates.handler, drain_timeout=5.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.run)
        await c2s_send.send(request_frame(1, "block", {"key": "k"}))
        await c2s_send.aclose()  # EOF after the request
        with anyio.fail_after(5):
            await gates.event(gates.started, "k").wait()
            gates.event(gates.release, "k").set()
            reply = await s2c_recv.receive()
    assert json.loads(reply) == {"jsonrpc": "2.0", "id": 1, "result": {"key": "k"}}
    await s2c_send.aclose()
    await s2c_recv.aclose()
    await c2s_recv.aclose()


async def test_max_in_flight_must_be_positive() -> None:
    a, b = memory_pair(1)
    with pytest.raises(ValueError, match="max_in_flight"):
        Dispatcher(a, max_in_flight=0)
    with pytest.raises(ValueError):
        memory_pair(0)
    await a.aclose()
    await b.aclose()


class _Writes(MessageStream):
    """Hands the dispatcher its reads (each a list of frames) one at a time, at once, then the end of the stream;
    records the frames of each write, and in ``log`` each read and write (how many frames) in order."""

    def __init__(self, *reads: list[bytes], gathers: bool) -> None:
        self.gathers_replies = gathers
        self.reads = list(reads)
        self.writes: list[list[bytes]] = []
        self.log: list[str] = []

    async def receive(self) -> list[bytes]:
        if not self.reads:
            raise anyio.EndOfStream
        self.log.append("read")
        return self.reads.pop(0)

    async def send(self, frames: Any) -> None:
        self.writes.append([out.frame for out in frames])
        self.log.append(f"write {len(frames)}")

    async def aclose(self) -> None:
        pass


@pytest.mark.fast_runner
@pytest.mark.parametrize("gathers", [True, False])
async def test_answers_of_one_pass_are_gathered_only_when_the_stream_gathers(gathers: bool) -> None:
    """Two async handlers that finish in the same pass: one write for both on a gathering stream (a byte stream),
    one write each, without waiting a pass, on one that does not (a Streamable HTTP session)."""

    started = {1: anyio.Event(), 2: anyio.Event()}
    release = anyio.Event()

    async def answer(ident: Any) -> bytes:
        started[ident].set()
        await release.wait()  # (both wake up in the same pass)
        return b"{}"

    frames = [request_frame(1, "a"), request_frame(2, "b")]
    stream = _Writes(frames, gathers=gathers)
    server = Dispatcher(stream, lambda req, context: answer(req.id), drain_timeout=10.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.run)
        with anyio.fail_after(10):
            await started[1].wait()
            await started[2].wait()
        release.set()
    answers = [b'{"jsonrpc":"2.0","id":1,"result":{}}', b'{"jsonrpc":"2.0","id":2,"result":{}}']
    # (the two tasks may run in either order: trio shuffles them)
    assert sorted(frame for write in stream.writes for frame in write) == answers
    assert [len(write) for write in stream.writes] == ([2] if gathers else [1, 1])


async def test_a_cancelled_request_of_a_batch_is_left_out_of_the_batch_answer() -> None:
    """2025-03-26 batches: the batch is answered once all its requests are done; one the peer cancelled has no
    answer in it (and the batch is still answered)."""
    gates = Gates()
    ours, theirs = memory_pair(8)
    server = Dispatcher(theirs, gates.handler, allow_batch=lambda: True, drain_timeout=0.0)
    async with anyio.create_task_group() as tg:
        await tg.start(server.run)
        block = json.loads(request_frame(1, "block", {"key": "b1"}))
        slow_echo = json.loads(request_frame(2, "block", {"key": "b2"}))
        await send_raw(ours, json.dumps([block, slow_echo]).encode())
        with anyio.fail_after(10):
            await gates.event(gates.started, "b1").wait()
            await gates.event(gates.started, "b2").wait()
        assert server.cancel_inbound(1)
        with anyio.fail_after(10):
            await gates.event(gates.cancelled, "b1").wait()
        gates.event(gates.release, "b2").set()
        with anyio.fail_after(10):
            frames = await ours.receive()
        assert [json.loads(frame) for frame in frames] == [[{"jsonrpc": "2.0", "id": 2, "result": {"key": "b2"}}]]
        assert server.in_flight() == 0
        tg.cancel_scope.cancel()
    await ours.aclose()
    await theirs.aclose()


async def test_a_request_cancelled_while_its_handler_finishes_unawares_is_not_answered() -> None:
    """The peer's cancellation arrives while the handler runs, and the handler returns without an await that
    would have noticed it: the request is still not answered, and the stream hears it ended unanswered."""
    finished: list[Any] = []

    class _Stream(_Writes):
        def finished(self, request_id: Any) -> None:
            finished.append(request_id)

    server: Dispatcher

    async def unaware() -> bytes:
        server.cancel_inbound(1)  # as if the peer's notifications/cancelled had been read meanwhile
        return b"{}"

    stream = _Stream([request_frame(1, "a"), request_frame(2, "b")], gathers=True)
    calls = iter([unaware(), None])

    def handler(req: Request, context: Any) -> bytes | Coroutine[Any, Any, bytes]:
        coro = next(calls)
        return coro if coro is not None else b'{"ok":true}'

    server = Dispatcher(stream, handler, drain_timeout=10.0)
    with anyio.fail_after(10):
        await server.run()
    assert [frame for write in stream.writes for frame in write] == [b'{"jsonrpc":"2.0","id":2,"result":{"ok":true}}']
    assert finished == [1] and server.in_flight() == 0


async def test_a_request_cancelled_before_its_task_has_started_is_cancelled_at_its_first_await() -> None:
    """The cancellation is read in the same chunk as its request, before the request's task has run at all. The
    handler still starts, so what it holds is cleaned up (here: the coroutine it wraps, which would otherwise be
    reported as never awaited); it is cancelled at its first await, and the request is never answered."""
    gates = Gates()
    finished: list[Any] = []

    class _Stream(_Writes):
        def finished(self, request_id: Any) -> None:
            finished.append(request_id)

    async def wrapper(inner: Coroutine[Any, Any, bytes]) -> bytes:
        return await inner

    server: Dispatcher

    def handler(req: Request, context: Any) -> bytes | Coroutine[Any, Any, bytes]:
        if req.method == "cancel-the-first":
            assert server.cancel_inbound(1)  # as if the peer's notifications/cancelled had been read here
            return b'{"done":true}'
        inner = gates.handler(req)
        assert not isinstance(inner, bytes)
        return wrapper(inner)

    stream = _Stream([request_frame(1, "block", {"key": "k"}), request_frame(2, "cancel-the-first")], gathers=True)
    server = Dispatcher(stream, handler, drain_timeout=10.0)
    with anyio.fail_after(10):
        await server.run()
    assert gates.started["k"].is_set() and gates.cancelled["k"].is_set()
    assert [frame for write in stream.writes for frame in write] == [b'{"jsonrpc":"2.0","id":2,"result":{"done":true}}']
    assert finished == [1] and server.in_flight() == 0


async def test_cancelling_a_running_dispatcher_cancels_its_handlers_at_once() -> None:
    """A dispatcher cancelled from outside (its server shutting down) does not give running handlers the drain
    time a peer's end of stream gives them: they are cancelled at once."""
    gates = Gates()
    ours, theirs = memory_pair(8)
    server = Dispatcher(theirs, gates.handler, drain_timeout=60.0)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(server.run)
            await send_raw(ours, request_frame(1, "block", {"key": "k"}))
            await gates.event(gates.started, "k").wait()
            tg.cancel_scope.cancel()
    assert gates.cancelled["k"].is_set() and server.in_flight() == 0
    await ours.aclose()
    await theirs.aclose()


async def test_anyio_inside_a_handler_task_works_and_a_cancellation_reaches_its_own_task_group() -> None:
    """Handler tasks are the event loop's own tasks, not an anyio task group's: anyio's scopes, timeouts and task
    groups inside a tool work as usual, and the peer's cancellation reaches the tool's own child tasks."""
    server = Server("anyio-inside", "1")
    child_started = anyio.Event()
    child_cancelled = anyio.Event()
    tool_cancelled = anyio.Event()

    @server.tool()
    async def timed() -> str:
        with anyio.move_on_after(0.01) as scope:
            await anyio.sleep_forever()
        return f"timed out: {scope.cancelled_caught}"

    @server.tool()
    async def fan_out() -> str:
        async def child() -> None:
            child_started.set()
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                child_cancelled.set()
                raise

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(child)
        except anyio.get_cancelled_exc_class():
            tool_cancelled.set()
            raise
        return "never"

    async with raw_server(server, version="2025-11-25") as peer:
        reply = await peer.call(request_frame(1, "tools/call", {"name": "timed", "arguments": {}}))
        assert reply["result"]["content"][0]["text"] == "timed out: True"
        await peer.send(request_frame(2, "tools/call", {"name": "fan_out", "arguments": {}}))
        with anyio.fail_after(5):
            await child_started.wait()
        await peer.send(cancel_frame(2, "user"))
        with anyio.fail_after(5):
            await child_cancelled.wait()
            await tool_cancelled.wait()
        assert await peer.sync() == []  # request 2 is never answered


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_handler_tasks_do_not_go_through_the_loops_task_factory() -> None:
    """A task factory on the loop (an eager one, on Python 3.12+, would run a handler before the dispatcher has
    registered it) is not used for handler tasks; they start on the loop's next pass."""
    import asyncio

    loop = asyncio.get_running_loop()
    made: list[str] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        made.append(coro.__qualname__)  # (Python 3.11 passes no name: it is set after)
        return asyncio.Task(coro, loop=loop, **kwargs)

    previous = loop.get_task_factory()
    loop.set_task_factory(factory)
    try:
        async with peers() as (client, _server, gates), anyio.create_task_group() as tg:
            tg.start_soon(client.request, "block", b'{"key":"factory"}')
            with anyio.fail_after(10):
                await gates.event(gates.started, "factory").wait()
            gates.event(gates.release, "factory").set()
    finally:
        loop.set_task_factory(previous)
    assert gates.count == 1
    assert made and "Dispatcher._run_handlers" not in made  # (the factory did make the client's own tasks)


# --- answer_request: the one request path, with or without tasks -------------------------------------------


def _idle_stream() -> MessageStream:
    return _Writes([], gathers=False)


async def test_answer_request_answers_at_once_what_the_handler_has_and_maps_failures() -> None:
    """``answer_request`` needs no running connection: a ready answer is the whole response frame; a handler's
    RpcError is its error reply, any other exception -32603 with nothing of it shown; both are ErrorReply with their
    code."""
    gates = Gates()
    dispatcher = Dispatcher(_idle_stream(), gates.handler)
    answered = dispatcher.answer_request(Request(1, "echo", msgspec_raw(b'{"a":1}')))
    assert answered == b'{"jsonrpc":"2.0","id":1,"result":{"a":1}}'
    failed = dispatcher.answer_request(Request(2, "fail"))
    assert type(failed) is ErrorReply and failed.code == -32602 and failed.refused is None
    assert json.loads(failed)["error"] == {"code": -32602, "message": "bad", "data": {"why": "test"}}
    bug = dispatcher.answer_request(Request(3, "bug"))
    assert type(bug) is ErrorReply and bug.code == -32603 and b"secret" not in bug
    wrong = dispatcher.answer_request(Request(4, "wrong-type"))
    assert type(wrong) is ErrorReply and wrong.code == -32603
    assert dispatcher.in_flight() == 0


async def test_deliver_hands_on_what_is_not_a_request_and_answers_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """``deliver`` takes a notification to its handler; a request handed to it is neither answered nor taken (its
    handler is not called, its id not in use), and the mistake is logged: requests are ``answer_request``'s."""
    heard: list[str] = []
    called: list[str] = []

    def on_request(req: Request, context: Any) -> bytes:
        called.append(req.method)
        return b"{}"

    dispatcher = Dispatcher(_idle_stream(), on_request, lambda note: heard.append(note.method))
    caplog.set_level(logging.ERROR, logger="jsonrpc_mcp.jsonrpc.dispatch")
    dispatcher.deliver(Notification("notifications/progress"))
    assert heard == ["notifications/progress"]
    dispatcher.deliver(Request(1, "echo"))
    assert called == [] and dispatcher.in_flight() == 0
    assert any("Dispatcher.deliver" in r.getMessage() for r in caplog.records)


async def test_answer_request_keeps_what_has_to_wait_until_the_connection_has_tasks() -> None:
    """A handler that has to wait is a Pending, registered at once (a duplicate id is refused, a bound is kept),
    and started when the connection gets tasks; its answer goes through the stream."""
    gates = Gates()
    ours, theirs = memory_pair(8)
    dispatcher = Dispatcher(theirs, gates.handler, max_in_flight=2)
    pending = dispatcher.answer_request(Request(1, "block", msgspec_raw(b'{"key":"k"}')))
    assert type(pending) is Pending and dispatcher.needs_tasks
    duplicate = dispatcher.answer_request(Request(1, "echo"))
    assert type(duplicate) is ErrorReply and duplicate.refused == "duplicate" and duplicate.code == -32600
    assert type(dispatcher.answer_request(Request(2, "block", msgspec_raw(b'{"key":"k"}')))) is Pending
    busy = dispatcher.answer_request(Request(3, "echo"))
    assert type(busy) is ErrorReply and busy.refused == "busy" and busy.code == BUSY
    assert dispatcher.in_flight() == 2 and gates.count == 0  # nothing has run yet
    async with open_handler_tasks() as tasks:
        dispatcher.use_tasks(tasks)
        assert not dispatcher.needs_tasks
        with anyio.fail_after(10):
            await gates.event(gates.started, "k").wait()
            gates.event(gates.release, "k").set()
            answers = [json.loads(frame) for frame in await ours.receive()]
            while len(answers) < 2:
                answers += [json.loads(frame) for frame in await ours.receive()]
    assert sorted(answer["id"] for answer in answers) == [1, 2] and dispatcher.in_flight() == 0
    await ours.aclose()
    await theirs.aclose()


async def test_a_kept_request_cancelled_before_it_starts_is_never_answered() -> None:
    gates = Gates()
    finished: list[Any] = []

    class _Stream(_Writes):
        def finished(self, request_id: Any) -> None:
            finished.append(request_id)

    stream = _Stream([], gathers=True)
    dispatcher = Dispatcher(stream, gates.handler)
    assert type(dispatcher.answer_request(Request(5, "block", msgspec_raw(b'{"key":"c"}')))) is Pending
    assert dispatcher.cancel_inbound(5)
    async with open_handler_tasks() as tasks:
        dispatcher.use_tasks(tasks)
        with anyio.fail_after(10):
            await gates.event(gates.cancelled, "c").wait()
    assert finished == [5] and stream.writes == [] and dispatcher.in_flight() == 0


async def test_close_cancels_handlers_fails_our_requests_and_drops_kept_work() -> None:
    """A transport without a read loop (an HTTP session that ended) closes the connection: its handlers are
    cancelled and never answered, our requests waiting for answers fail, kept work is dropped (no "never awaited"
    warning), and nothing new is taken."""
    gates = Gates()
    stream = _Writes([], gathers=False)
    dispatcher = Dispatcher(stream, gates.handler)
    assert type(dispatcher.answer_request(Request("kept", "block", msgspec_raw(b'{"key":"kept"}')))) is Pending
    dispatcher.close()
    assert dispatcher.closed and dispatcher.in_flight() == 0 and not dispatcher.needs_tasks
    assert not dispatcher.spawn(_never)

    running = Dispatcher(_Writes([], gathers=False), gates.handler)
    failures: list[type[BaseException]] = []
    async with open_handler_tasks() as tasks:
        running.use_tasks(tasks)
        assert type(running.answer_request(Request(1, "block", msgspec_raw(b'{"key":"r"}')))) is Pending

        async def ask() -> None:
            try:
                await running.request("ping", timeout=None)
            except ConnectionClosed as exc:
                failures.append(type(exc))

        tasks.start_soon(ask(), "ask")
        with anyio.fail_after(10):
            await gates.event(gates.started, "r").wait()
        await anyio.wait_all_tasks_blocked()
        running.close()
        with anyio.fail_after(10):
            await gates.event(gates.cancelled, "r").wait()
    assert failures == [ConnectionClosed] and running.in_flight() == 0


async def _never() -> None:
    await anyio.sleep_forever()


async def test_answer_frames_takes_frames_until_work_needs_tasks_and_run_goes_on_from_there() -> None:
    """What stdio does before it starts its event loop: ``answer`` answers what is ready at once, in order, and
    stops at the first frame whose work has to wait; ``run(unread=...)`` takes the rest first, then reads."""
    ours, theirs = memory_pair(8)

    async def slow() -> bytes:
        return b'{"slow":true}'

    def handler(req: Request, context: Any) -> bytes | Coroutine[Any, Any, bytes]:
        return slow() if req.method == "slow" else b'{"now":true}'

    dispatcher = Dispatcher(theirs, handler)
    frames = [request_frame(1, "now"), request_frame(2, "slow"), request_frame(3, "now")]
    out: list[Outgoing] = []
    taken = dispatcher.answer_frames(frames, out)
    assert taken == 2 and [o.frame for o in out] == [b'{"jsonrpc":"2.0","id":1,"result":{"now":true}}']
    assert dispatcher.needs_tasks
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: dispatcher.run(unread=frames[taken:]))
        with anyio.fail_after(10):
            got: list[Any] = []
            while len(got) < 2:
                got += [json.loads(frame) for frame in await ours.receive()]
        assert {answer["id"]: answer["result"] for answer in got} == {2: {"slow": True}, 3: {"now": True}}
        await ours.aclose()
    await theirs.aclose()


async def test_a_peer_that_never_reads_stops_our_reading_once_answers_queue_up() -> None:
    """Answers of async handlers that cannot be written (the peer reads nothing) count against
    ``max_queued_bytes``: past it the reader stops reading, so the peer fills its own pipe, not our memory."""
    handled = 0

    async def big() -> bytes:
        nonlocal handled
        handled += 1
        return b'{"pad":"' + b"x" * 400 + b'"}'

    c2s_send, c2s_recv = anyio.create_memory_object_stream[bytes](4)
    s2c_send, s2c_recv = anyio.create_memory_object_stream[bytes](1)  # never read
    server = Dispatcher(
        MemoryMessageStream(s2c_send, c2s_recv), lambda req, context: big(), max_queued_bytes=1000, drain_timeout=0
    )
    async with anyio.create_task_group() as tg:
        await tg.start(server.run)
        sent = 0
        with anyio.fail_after(10):
            while True:
                try:
                    c2s_send.send_nowait(request_frame(sent, "big"))
                except anyio.WouldBlock:
                    await anyio.wait_all_tasks_blocked()
                    try:
                        c2s_send.send_nowait(request_frame(sent, "big"))
                    except anyio.WouldBlock:
                        break
                sent += 1
                await anyio.wait_all_tasks_blocked()
        assert handled < 10 and sent < 20  # (1 answer in the pipe, ~3 queued: the rest waits in the peer's pipe)
        tg.cancel_scope.cancel()
    for stream in (c2s_send, c2s_recv, s2c_send, s2c_recv):
        await stream.aclose()


def msgspec_raw(data: bytes) -> Any:
    import msgspec

    return msgspec.Raw(data)


marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")


def _on_trio() -> bool:
    import sniffio

    return sniffio.current_async_library() == "trio"


async def test_an_async_handler_that_does_not_wait_is_answered_after_the_answers_ready_at_once() -> None:
    """The inline answers of a read go out first, in the order of the frames; an ``async def`` handler that never
    waits is answered in the write after them, in the read loop's pass."""

    async def later() -> bytes:
        return b'"async"'

    def handler(req: Request, context: Any) -> bytes | Coroutine[Any, Any, bytes]:
        return later() if req.method == "async" else b'"inline"'

    frames = [request_frame(1, "inline"), request_frame(2, "async"), request_frame(3, "inline")]
    stream = _Writes(frames, gathers=True)
    with anyio.fail_after(10):
        await Dispatcher(stream, handler).run()
    ones = [b'{"jsonrpc":"2.0","id":%d,"result":"%s"}' % (i, kind) for i, kind in ((1, b"inline"), (3, b"inline"))]
    two = b'{"jsonrpc":"2.0","id":2,"result":"async"}'
    assert stream.writes == [ones, [two]]


async def test_a_handler_that_waits_is_a_task_of_its_own() -> None:
    """A handler that enters a timeout and then waits is timed out alone, the read loop goes on: from its first step
    on it runs as a task of its own (anyio's cancel scopes, ``current_task``), though it started in the task of
    the handlers of its read; and what it sets in a context variable is not seen by the next request's handler."""
    seen: dict[str, Any] = {}
    reader = anyio.get_current_task().id

    async def waits() -> bytes:
        seen["own task"] = anyio.get_current_task().id != reader
        marker.set("set by the first handler")
        with anyio.move_on_after(0.01):
            await anyio.Event().wait()  # (never set: the timeout ends it)
        return b'"timed out"'

    async def reads() -> bytes:
        seen["marker"] = marker.get()
        return b'"read"'

    def handler(req: Request, context: Any) -> bytes | Coroutine[Any, Any, bytes]:
        return waits() if req.method == "waits" else reads()

    stream = _Writes([request_frame(1, "waits"), request_frame(2, "reads")], gathers=True)
    with anyio.fail_after(10):
        await Dispatcher(stream, handler).run()
    answers = sorted(frame for write in stream.writes for frame in write)
    assert answers == [b'{"jsonrpc":"2.0","id":1,"result":"timed out"}', b'{"jsonrpc":"2.0","id":2,"result":"read"}']
    assert seen == {"own task": True, "marker": "unset"}  # (trio may run the two in either order)


async def test_each_handler_of_a_read_runs_in_a_context_of_its_own_outside_the_read_loop() -> None:
    """Handlers that finish without waiting run in a task that is not the read loop's, each in a context of its
    own: what one sets in a context variable, the next does not see; each is answered."""
    reader = anyio.get_current_task().id
    seen: list[tuple[int, int, str]] = []

    async def step(ident: int) -> bytes:
        seen.append((ident, anyio.get_current_task().id, marker.get()))
        marker.set(f"set by {ident}")
        return b"{}"

    stream = _Writes([request_frame(1, "a"), request_frame(2, "b"), request_frame(3, "c")], gathers=True)
    with anyio.fail_after(10):
        await Dispatcher(stream, lambda req, context: step(req.id)).run()  # type: ignore[arg-type]
    assert sorted((ident, value) for ident, _, value in seen) == [(1, "unset"), (2, "unset"), (3, "unset")]
    assert reader not in {task for _, task, _ in seen}
    assert sum(len(write) for write in stream.writes) == 3


@pytest.mark.fast_runner
async def test_the_handlers_of_a_read_that_do_not_wait_share_a_task() -> None:
    """Handlers that finish without waiting take their one step in one task, the read's, one after the other in the
    order of the frames (a task each costs more than they do)."""
    seen: list[tuple[int, int]] = []

    async def step(ident: int) -> bytes:
        seen.append((ident, anyio.get_current_task().id))
        return b"{}"

    stream = _Writes([request_frame(1, "a"), request_frame(2, "b"), request_frame(3, "c")], gathers=True)
    with anyio.fail_after(10):
        await Dispatcher(stream, lambda req, context: step(req.id)).run()  # type: ignore[arg-type]
    assert [ident for ident, _ in seen] == [1, 2, 3]
    if not _on_trio():  # (trio may run the read loop first in the pass: then the first answer waits for the others)
        assert len({task for _, task in seen}) == 1


def _acting_on_cancellations(dispatcher: Dispatcher) -> Dispatcher:
    """``dispatcher`` with a notification handler that cancels the request named (what a session does)."""

    def on_notification(note: Any) -> None:
        dispatcher.cancel_inbound(json.loads(bytes(note.params))["requestId"])

    dispatcher.on_notification = on_notification
    return dispatcher


class _Reads(MessageStream):
    """Reads handed over by the test (``read``), each a list of frames; what is written goes to ``written``."""

    gathers_replies = True

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[list[bytes]](8)
        self.written: list[bytes] = []

    def read(self, *frames: bytes) -> None:
        self._send.send_nowait(list(frames))

    async def receive(self) -> list[bytes]:
        return await self._receive.receive()

    async def send(self, frames: Any) -> None:
        self.written += [out.frame for out in frames]

    def end(self) -> None:
        self._send.close()

    async def aclose(self) -> None:
        self._send.close()
        self._receive.close()


async def test_the_handlers_after_one_that_waits_go_on_and_its_cancellation_is_its_own() -> None:
    """In one read: the handler that waits keeps the read's task, the ones after it start at once all the same,
    and cancelling it (the peer's ``notifications/cancelled``) cancels only it."""
    gates = Gates()
    stream = _Reads()
    dispatcher = _acting_on_cancellations(Dispatcher(stream, gates.handler))
    async with anyio.create_task_group() as tg:
        tg.start_soon(dispatcher.run)
        first, second = (request_frame(ident, "block", {"key": key}) for ident, key in ((1, "first"), (2, "second")))
        stream.read(first, second, request_frame(3, "echo", {"third": True}))
        with anyio.fail_after(10):
            await gates.event(gates.started, "first").wait()
            await gates.event(gates.started, "second").wait()
        stream.read(cancel_frame(1, "user"))
        with anyio.fail_after(10):
            await gates.event(gates.cancelled, "first").wait()
        assert "second" not in gates.cancelled
        gates.event(gates.release, "second").set()
        stream.end()
    await stream.aclose()
    assert sorted(stream.written) == [
        b'{"jsonrpc":"2.0","id":2,"result":{"key": "second"}}',
        b'{"jsonrpc":"2.0","id":3,"result":{"third":true}}',
    ]


async def test_a_request_cancelled_in_the_read_that_brings_it_stops_at_its_first_wait() -> None:
    """A request and its cancellation in one read: its handler runs up to its first wait and is cancelled there,
    never answered; the other requests of the read are answered."""
    gates = Gates()
    frames = [request_frame(1, "block", {"key": "c"}), cancel_frame(1, "user"), request_frame(2, "echo", {"x": 1})]
    stream = _Writes(frames, gathers=True)
    with anyio.fail_after(10):
        await _acting_on_cancellations(Dispatcher(stream, gates.handler, drain_timeout=10.0)).run()
    assert gates.event(gates.cancelled, "c").is_set()
    assert [frame for write in stream.writes for frame in write] == [b'{"jsonrpc":"2.0","id":2,"result":{"x":1}}']


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_handler_that_ends_cancelled_at_once_does_not_stop_the_others_of_its_read() -> None:
    import asyncio

    async def handler(ident: Any) -> bytes:
        if ident == 1:
            raise asyncio.CancelledError
        return b"{}"

    stream = _Writes([request_frame(1, "a"), request_frame(2, "b")], gathers=True)
    server = Dispatcher(stream, lambda req, context: handler(req.id), drain_timeout=10.0)
    with anyio.fail_after(10):
        await server.run()
    assert stream.writes == [[b'{"jsonrpc":"2.0","id":2,"result":{}}']] and server.in_flight() == 0


async def test_handlers_that_start_after_all_were_cancelled_are_cancelled_too() -> None:
    """Leaving the connection's tasks cancels what runs and what starts after, as a cancelled task group does: two
    handlers begun together, the second starting only when the first waits, both end cancelled."""
    gates = Gates()
    dispatcher = Dispatcher(_Writes([], gathers=False), gates.handler)
    keys = ("one", "two")

    async def release_after_a_while() -> None:  # (so that a failure fails, rather than waiting forever)
        with anyio.move_on_after(10):
            await anyio.Event().wait()
        for key in keys:
            gates.event(gates.release, key).set()

    async with anyio.create_task_group() as watchdog:
        watchdog.start_soon(release_after_a_while)
        async with open_handler_tasks() as tasks:
            dispatcher.use_tasks(tasks)
            for key in keys:
                request = Request(key, "block", msgspec_raw(b'{"key":"%s"}' % key.encode()))
                assert type(dispatcher.answer_request(request)) is Pending
            tasks.cancel_all()
        watchdog.cancel_scope.cancel()
    assert [gates.event(gates.cancelled, key).is_set() for key in keys] == [True, True]


@pytest.mark.fast_runner
async def test_the_answers_of_a_read_go_out_before_the_next_read() -> None:
    """Handlers that do not wait, started by one read, finish before the read loop reads again, and their answers
    go out in one write first (on asyncio; trio runs the tasks of a pass in any order, the read loop among them)."""

    async def answer() -> bytes:
        return b"{}"

    stream = _Writes([request_frame(1, "a"), request_frame(2, "b")], [request_frame(3, "c")], gathers=True)
    with anyio.fail_after(10):
        await Dispatcher(stream, lambda req, context: answer(), drain_timeout=10.0).run()
    if _on_trio():
        written = sum(int(entry.split()[1]) for entry in stream.log if entry.startswith("write"))
        assert stream.log.count("read") == 2 and written == 3
    else:
        assert stream.log == ["read", "write 2", "read", "write 1"]


@pytest.mark.fast_runner
async def test_handlers_that_finish_in_the_read_loops_pass_leave_the_write_to_it() -> None:
    """Handlers of one read that finish in the read loop's pass hand their answers to the read loop's write and end
    at once: none of them is still in flight when the answers go out (on asyncio; trio runs the tasks of a pass in
    any order, the read loop among them)."""

    async def answer() -> bytes:
        return b"{}"

    in_flight_at_write: list[int] = []

    class _Counting(_Writes):
        async def send(self, frames: Any) -> None:
            in_flight_at_write.append(server.in_flight())
            await super().send(frames)

    stream = _Counting([request_frame(1, "a"), request_frame(2, "b"), request_frame(3, "c")], gathers=True)
    server = Dispatcher(stream, lambda req, context: answer(), drain_timeout=10.0)
    with anyio.fail_after(10):
        await server.run()
    assert sorted(frame for write in stream.writes for frame in write) == [
        b'{"jsonrpc":"2.0","id":%d,"result":{}}' % ident for ident in (1, 2, 3)
    ]
    if not _on_trio():
        assert stream.log == ["read", "write 3"]
        assert in_flight_at_write == [0]


async def test_the_runner_chooses_the_dispatcher_and_its_tasks_at_construction(runner: str) -> None:
    """Under the plain reference runner, a dispatcher made is the plain one, and so are the handler tasks opened
    (what the tests of ``BOTH_RUNNERS`` rely on); a subclass of the dispatcher stays what it is."""

    class Own(Dispatcher):
        pass

    plain = runner == "plain"
    assert (type(Dispatcher(_idle_stream())) is PlainDispatcher) is plain
    assert type(Own(_idle_stream())) is Own
    async with open_handler_tasks() as tasks:
        assert (type(tasks) is PlainTasks) is plain
