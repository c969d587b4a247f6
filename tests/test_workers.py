"""Plain functions on worker threads: the pool of ``jsonrpc.workers`` itself, and the plain ``def`` handlers of a
server on it and on the plain per-call path it is checked against (the ``sync_path`` fixture)."""

from __future__ import annotations

import contextvars
import gc
import inspect
import json
import os
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from helpers import add_patient_tool, init_frame, left_in_cycles_by, notification_frame, request_frame

from jsonrpc_mcp import Client, Context, InputRequired, ResourceNotFound, Server
from jsonrpc_mcp import types as t
from jsonrpc_mcp.jsonrpc import dispatch
from jsonrpc_mcp.jsonrpc.streams import MessageStream, Outgoing
from jsonrpc_mcp.jsonrpc.workers import (
    POOL,
    Job,
    OneArgJob,
    ParkedCalls,
    SyncCall,
    WorkerPool,
    run_in_worker,
)
from jsonrpc_mcp.mcp.context import on_worker_thread
from jsonrpc_mcp.middleware import CallNext, Message

pytestmark = pytest.mark.anyio

flavour: contextvars.ContextVar[str] = contextvars.ContextVar("flavour", default="none")


async def until(condition: Callable[[], bool]) -> None:
    """Let the event loop run until ``condition`` holds (bounded by the caller's ``fail_after``)."""
    while not condition():
        await anyio.lowlevel.checkpoint()


async def wait_for(event: threading.Event) -> None:
    assert await anyio.to_thread.run_sync(event.wait, 10)


# --- the pool ------------------------------------------------------------------------------------------------


async def test_a_call_returns_its_value_or_raises_its_error_on_another_thread() -> None:
    pool = WorkerPool(2)
    here = threading.get_ident()
    assert pool.threads == 0  # started when the first call comes
    assert await run_in_worker(lambda a, b: (a + b, threading.get_ident() != here), 1, 2, pool=pool) == (3, True)
    assert pool.threads >= 1

    def fail() -> None:
        raise LookupError("nothing here")

    with pytest.raises(LookupError, match="nothing here"):
        await run_in_worker(fail, pool=pool)
    pool.shutdown()
    assert await anyio.to_thread.run_sync(pool.join, 10)
    assert pool.threads == 0
    with pytest.raises(RuntimeError, match="shut down"):
        await run_in_worker(int, pool=pool)


async def test_the_call_runs_in_a_copy_of_the_callers_context() -> None:
    pool = WorkerPool(2)

    def taste() -> str:
        seen = flavour.get()
        flavour.set("changed on the thread")
        return seen

    token = flavour.set("vanilla")
    try:
        assert await run_in_worker(taste, pool=pool) == "vanilla"
        assert flavour.get() == "vanilla"  # (what the call set stays in its copy)
    finally:
        flavour.reset(token)
    pool.shutdown()


async def warm(pool: WorkerPool, threads: int) -> None:
    """Leave ``threads`` threads idle in ``pool`` (waiting for work, none watching)."""
    barrier = threading.Barrier(threads)
    async with anyio.create_task_group() as tg:
        for _ in range(threads):
            tg.start_soon(lambda: run_in_worker(barrier.wait, 10, pool=pool))
    assert pool.threads >= threads


def blocking_call() -> tuple[Callable[[], str], threading.Event, threading.Event]:
    """A plain function that blocks: ``entered`` is set once it runs, it returns ``"released"`` once ``release`` is."""
    entered, release = threading.Event(), threading.Event()

    def block() -> str:
        entered.set()
        release.wait(30)
        return "released"

    return block, entered, release


def blocking_server(name: str) -> tuple[Server, threading.Event, threading.Event]:
    """A server with the plain tools ``block`` (:func:`blocking_call`'s, its events returned) and ``quick(n)``."""
    server = Server(name, "1")
    block, entered, release = blocking_call()
    server.tool()(block)

    @server.tool()
    def quick(n: int) -> str:
        return str(n)

    return server, entered, release


@pytest.mark.parametrize("idle", [0, 3], ids=["fresh", "idle-threads"])
async def test_a_call_that_blocks_does_not_hold_up_the_calls_queued_after_it(idle: int) -> None:
    pool = WorkerPool(8)
    if idle:
        await warm(pool, idle)
    block, entered, release = blocking_call()

    try:
        async with anyio.create_task_group() as tg:
            results: list[str] = []

            async def blocked() -> None:
                results.append(await run_in_worker(block, pool=pool))

            tg.start_soon(blocked)
            await wait_for(entered)
            with anyio.fail_after(5):  # (less than the threads' idle timeout)
                for i in range(3):  # taken by another thread, though the one that runs `block` would be next
                    assert await run_in_worker(str, i, pool=pool) == str(i)
            assert results == []
            release.set()
    finally:
        release.set()
    assert results == ["released"]
    pool.shutdown()


@pytest.mark.parametrize("idle", [0, 3], ids=["fresh", "idle-threads"])
async def test_calls_queued_together_that_all_block_all_run_at_once(idle: int) -> None:
    pool = WorkerPool(8)
    if idle:
        await warm(pool, idle)
    together = threading.Barrier(5)  # (each waits for the four others)
    with anyio.fail_after(5):  # (less than the threads' idle timeout)
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(lambda: run_in_worker(together.wait, 10, pool=pool))
    pool.shutdown()


async def test_threads_are_bounded_and_a_call_beyond_waits_for_one() -> None:
    pool = WorkerPool(2)
    release = [threading.Event() for _ in range(3)]
    started: list[int] = []

    def hold(i: int) -> int:
        started.append(i)
        release[i].wait(30)
        return i

    async def call(i: int) -> None:
        assert await run_in_worker(hold, i, pool=pool) == i

    try:
        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(call, i)
            with anyio.fail_after(10):
                await until(lambda: len(started) == 2)
                tg.start_soon(call, 2)
                await until(lambda: pool.queued == 1)
            assert pool.threads == 2 and sorted(started) == [0, 1]  # the third waits for a thread
            release[0].set()
            with anyio.fail_after(10):
                await until(lambda: len(started) == 3)
            release[1].set()
            release[2].set()
    finally:
        for event in release:
            event.set()
    pool.shutdown()
    assert await anyio.to_thread.run_sync(pool.join, 10)


async def test_threads_without_work_end_after_the_idle_timeout() -> None:
    pool = WorkerPool(2, idle_timeout=0.01)
    assert await run_in_worker(str, 1, pool=pool) == "1"
    assert await anyio.to_thread.run_sync(pool.join, 10)  # (no shutdown: they end by themselves)
    assert pool.threads == 0
    assert await run_in_worker(str, 2, pool=pool) == "2"  # and start again when work comes
    pool.shutdown()


async def test_a_cancelled_caller_waits_for_the_function_to_return_then_is_cancelled() -> None:
    pool = WorkerPool(2)
    entered, release = threading.Event(), threading.Event()
    seen: list[str] = []

    def block() -> str:
        entered.set()
        release.wait(30)
        seen.append("returned")
        return "late"

    scope = anyio.CancelScope()

    async def caller() -> None:
        with scope:
            try:
                await run_in_worker(block, pool=pool)
                seen.append("not cancelled")
            finally:
                seen.append("caller done")

    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(caller)
                await wait_for(entered)
                scope.cancel()
                await anyio.lowlevel.checkpoint()
                assert seen == []  # the caller still waits for the thread
                release.set()
    finally:
        release.set()
    assert seen == ["returned", "caller done"]
    pool.shutdown()


# --- plain handlers of a server --------------------------------------------------------------------------------


async def test_plain_tools_resources_prompts_and_completions_run_on_a_worker_thread(sync_path: str) -> None:
    server = Server("plain", "1")
    loop_thread = threading.get_ident()
    where: dict[str, bool] = {}

    def off_loop(name: str) -> None:
        where[name] = threading.get_ident() != loop_thread and on_worker_thread()

    @server.tool()
    def tool(text: str) -> str:
        off_loop("tool")
        return text

    @server.resource("plain://fixed")
    def fixed() -> str:
        off_loop("resource")
        return "fixed"

    @server.resource("plain://{name}")
    def named(name: str) -> str:
        off_loop("template")
        return name

    def topics(value: str, context: dict[str, Any]) -> list[str]:
        off_loop("prompt completion")
        return [value + "!"]

    @server.prompt(complete={"topic": topics})
    def explain(topic: str) -> str:
        off_loop("prompt")
        return f"Explain {topic}"

    @server.completion()
    def complete(ref: dict[str, Any], argument: str, value: str, context: dict[str, Any]) -> list[str]:
        off_loop("completion")
        return [value + "?"]

    async with Client.connect_server(server, protocol_version="2025-11-25") as client:
        assert (await client.call_tool("tool", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
        assert (await client.read_resource("plain://fixed")).contents[0].text == "fixed"
        assert (await client.read_resource("plain://x")).contents[0].text == "x"
        prompt = await client.get_prompt("explain", {"topic": "pools"})
        assert prompt.messages[0].content.text == "Explain pools"  # type: ignore[union-attr]
        local = await client.complete(t.PromptReference(name="explain"), "topic", "po")
        assert local.completion.values == ["po!"]
        other = await client.complete(t.ResourceTemplateReference(uri="plain://{name}"), "name", "n")
        assert other.completion.values == ["n?"]
    assert where == dict.fromkeys(("tool", "resource", "template", "prompt", "prompt completion", "completion"), True)


async def test_a_blocking_plain_tool_does_not_hold_up_the_plain_calls_after_it(sync_path: str) -> None:
    server, entered, release = blocking_server("blocking")

    try:
        async with Client.connect_server(server, protocol_version="2025-11-25") as client:
            results: list[Any] = []
            async with anyio.create_task_group() as tg:

                async def blocked() -> None:
                    results.append(await client.call_tool("block"))

                tg.start_soon(blocked)
                await wait_for(entered)
                with anyio.fail_after(10):
                    answers = []

                    async def call(n: int) -> None:
                        answers.append((await client.call_tool("quick", {"n": n})).content[0].text)  # type: ignore[union-attr]

                    async with anyio.create_task_group() as calls:
                        for n in range(8):
                            calls.start_soon(call, n)
                assert sorted(answers) == [str(n) for n in range(8)] and results == []
                release.set()
            assert results[0].content[0].text == "released"
    finally:
        release.set()


async def test_a_context_variable_set_before_the_handler_reaches_the_plain_tool(sync_path: str) -> None:
    server = Server("context", "1")

    def season(message: Any, call_next: Any) -> Any:
        flavour.set("from middleware")
        return call_next(message)

    server.add_middleware(season)

    @server.tool()
    def taste(ctx: Context) -> str:
        return f"{flavour.get()} {ctx.cancelled}"

    async with Client.connect_server(server, protocol_version="2025-11-25") as client:
        result = await client.call_tool("taste")
        assert result.content[0].text == "from middleware False"  # type: ignore[union-attr]
    assert flavour.get() == "none"


async def test_the_plain_calls_of_one_read_wait_for_their_threads_without_a_task_each(anyio_backend: str) -> None:
    """The calls of one read take the sync lane (``workers.SyncCall``): while they run, the connection has not a
    task per call; their answers come when their threads return."""
    if anyio_backend != "asyncio":
        pytest.skip("counts asyncio's tasks")
    import asyncio
    import socket

    from helpers import init_frame, notification_frame, request_frame

    from jsonrpc_mcp.transports.socket import serve_tcp

    calls = 16
    server = Server("parked", "1")
    lock = threading.Lock()
    entered: list[int] = []
    all_in, release = threading.Event(), threading.Event()

    @server.tool()
    def hold(n: int) -> str:
        with lock:
            entered.append(n)
            if len(entered) == calls:
                all_in.set()
        release.wait(30)
        return str(n)

    async def read_answers(sock: socket.socket, count: int) -> list[bytes]:
        received, lines = b"", []
        while len(lines) < count:
            await anyio.wait_readable(sock)
            chunk = sock.recv(1 << 20)
            assert chunk, "the server closed the connection"
            received += chunk
            *done, received = received.split(b"\n")
            lines += done
        return lines

    try:
        async with anyio.create_task_group() as tg:
            port = await tg.start(lambda task_status: serve_tcp(server, port=0, task_status=task_status))
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setblocking(False)
            try:
                with anyio.fail_after(20):
                    sock.sendall(init_frame() + b"\n" + notification_frame("notifications/initialized") + b"\n")
                    await read_answers(sock, 1)
                    before = len(asyncio.all_tasks())
                    frames = [
                        request_frame(i, "tools/call", {"name": "hold", "arguments": {"n": i}}) for i in range(calls)
                    ]
                    sock.sendall(b"\n".join(frames) + b"\n")  # (one write: one read, most likely)
                    assert await anyio.to_thread.run_sync(all_in.wait, 15)
                    assert len(asyncio.all_tasks()) - before < calls // 2
                    release.set()
                    answers = await read_answers(sock, calls)
                assert len(answers) == calls and all(b'"isError":false' in a or b"isError" not in a for a in answers)
                assert sorted(entered) == list(range(calls))
            finally:
                sock.close()
            tg.cancel_scope.cancel()
    finally:
        release.set()


# --- the calls of one read, on the lane together ---------------------------------------------------------------------


class Reads(MessageStream):
    """A connection whose peer's frames arrive in the reads the test hands it (each a list of frames: what one read
    of a busy pipe brings), and whose answers are kept by id."""

    def __init__(self) -> None:
        self._reads, self._incoming = anyio.create_memory_object_stream[list[bytes]](16)
        self.answers: dict[Any, Any] = {}
        self._answered = anyio.Event()

    def read(self, *frames: bytes) -> None:
        self._reads.send_nowait(list(frames))

    def end(self) -> None:
        self._reads.close()

    async def receive(self) -> list[bytes]:
        try:
            return await self._incoming.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise anyio.EndOfStream from None

    async def send(self, frames: Sequence[Outgoing]) -> None:
        for out in frames:
            message = json.loads(out.frame)
            if isinstance(message, list):  # a batch's answer: kept under "batch"
                self.answers["batch"] = message
                continue
            self.answers[message.get("id")] = message
        self._answered.set()
        self._answered = anyio.Event()

    async def aclose(self) -> None:
        self._reads.close()
        self._incoming.close()

    async def answered(self, *ids: Any) -> list[Any]:
        """Wait until ``ids`` are all answered (bounded by the caller's ``fail_after``); their answers."""
        while not all(i in self.answers for i in ids):
            await self._answered.wait()
        return [self.answers[i] for i in ids]

    async def handshake(self, version: str = "2025-11-25") -> None:
        self.read(init_frame(version, ident="init"), notification_frame("notifications/initialized"))
        await self.answered("init")


def spy_on_the_lane(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[Any]]:
    """What the pool is handed (the size of each hand-off) and the requests given a coroutine, from now on."""
    handed: list[int] = []
    submit_many = POOL.submit_many
    monkeypatch.setattr(POOL, "submit_many", lambda jobs: (handed.append(len(jobs)), submit_many(jobs)))
    made: list[Any] = []
    run_request = dispatch.Dispatcher._run_request
    monkeypatch.setattr(dispatch.Dispatcher, "_run_request", lambda self, p: (made.append(p), run_request(self, p))[1])
    return handed, made


#: What a 2026-07-28 request's ``_meta`` carries, and no more.
STATELESS_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call_frame(ident: int, tool: str, **arguments: Any) -> bytes:
    return request_frame(ident, "tools/call", {"name": tool, "arguments": arguments})


def text(answer: Any) -> str:
    return str(answer["result"]["content"][0]["text"])


@asynccontextmanager
async def serving(server: Server, version: str | None = "2025-11-25") -> AsyncIterator[Reads]:
    """``server`` serving a :class:`Reads` connection, initialized at ``version`` (``None``: not at all, for the
    stateless era); the connection ends when the block does."""
    stream = Reads()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, stream)
            if version is not None:
                with anyio.fail_after(10):
                    await stream.handshake(version)
            yield stream
            stream.end()
    finally:
        await stream.aclose()


async def test_the_plain_calls_of_one_read_take_the_lane_in_one_hand_off_and_make_no_coroutine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sync lane: the handler of each call answers with a ``SyncCall`` (no coroutine is made for the request),
    the calls of the read go to the pool in one hand-off, and on the thread the whole answer frame is made."""

    server = Server("lane", "1")
    handed, made = spy_on_the_lane(monkeypatch)
    framed_on: list[bool] = []
    answer_sync = dispatch._answer_sync

    def framed(pending: Any) -> bytes:
        frame = answer_sync(pending)
        framed_on.append(on_worker_thread() is False and threading.current_thread() is not threading.main_thread())
        return frame

    monkeypatch.setattr(dispatch, "_answer_sync", framed)

    @server.tool()
    def quick(n: int) -> str:
        return str(n)

    async with serving(server) as conn:
        made.clear()
        conn.read(*(call_frame(n, "quick", n=n) for n in range(1, 9)))
        with anyio.fail_after(10):
            answers = await conn.answered(*range(1, 9))
    assert [text(a) for a in answers] == [str(n) for n in range(1, 9)]
    assert handed == [8] and framed_on == [True] * 8 and made == []


async def test_the_calls_of_the_lane_are_freed_without_the_garbage_collector() -> None:
    """Nothing a call of the sync lane makes (its job, its context, its request) is left in a reference cycle: with
    the cyclic garbage collector off, none of it is left once the answers are written. (Objects that only the
    collector frees make it run far more often under load, and each run walks the objects still in flight.)"""
    server = Server("lane", "1")

    @server.tool()
    def quick(n: int) -> str:
        return str(n)

    reads = iter([[100], list(range(1, 9))])  # (one call first, then the eight the second run looks at)
    answers: list[Any] = []

    async with serving(server) as conn:

        async def call_quick() -> None:
            ids = next(reads)
            conn.read(*(call_frame(n, "quick", n=n) for n in ids))
            with anyio.fail_after(10):
                answers[:] = await conn.answered(*ids)

        left = await left_in_cycles_by(call_quick, Job, ParkedCalls, dispatch.Pending)
    assert [text(a) for a in answers] == [str(n) for n in range(1, 9)]
    assert left == []


async def test_a_post_whose_call_is_on_the_lane_waits_for_its_answer_without_glancing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over Streamable HTTP a POST whose handler has yet to answer first looks for the answer in the loop's next few
    passes (an ``async def`` tool's often comes there), then waits with a timeout. A call on the sync lane comes back
    only after a worker thread's hop, so its POST waits at once; both answer as JSON, in either era."""
    from http_support import JSON_HEADERS, asgi_request, call_body, init_body, stateless_body, stateless_headers

    from jsonrpc_mcp.transports import _http_outlet
    from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

    server = Server("lane", "1")

    @server.tool()
    def plain(n: int) -> str:
        return f"plain {n}"

    @server.tool()
    async def coroutine(n: int) -> str:
        return f"coroutine {n}"

    glanced: list[int] = []
    glance = _http_outlet._glance

    async def counted(feed: Any) -> Any:
        glanced.append(1)
        return await glance(feed)

    monkeypatch.setattr(_http_outlet, "_glance", counted)
    app = McpAsgiApp(server, path="/mcp")

    async def post(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        return await asgi_request(app, "POST", headers, json.dumps(body).encode())

    async with app.lifespan():
        status, headers, _ = await post(init_body(), JSON_HEADERS)
        assert status == 200
        session = {**JSON_HEADERS, "Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        await post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        answers = {}
        for name in ("plain", "coroutine"):
            before = len(glanced)
            status, headers, body = await post(call_body(1, name, {"n": 1}), session)
            text = json.loads(body)["result"]["content"][0]["text"]
            answers[name] = (status, headers["content-type"], text, len(glanced) - before)
        for name in ("plain", "coroutine"):
            before = len(glanced)
            call = stateless_body(2, "tools/call", {"name": name, "arguments": {"n": 2}})
            status, headers, body = await post(call, stateless_headers("tools/call", name))
            text = json.loads(body)["result"]["content"][0]["text"]
            answers[f"{name}, 2026-07-28"] = (status, headers["content-type"], text, len(glanced) - before)
    assert answers == {
        "plain": (200, "application/json", "plain 1", 0),
        "coroutine": (200, "application/json", "coroutine 1", 1),
        "plain, 2026-07-28": (200, "application/json", "plain 2", 0),
        "coroutine, 2026-07-28": (200, "application/json", "coroutine 2", 1),
    }


async def test_plain_resources_prompts_and_completions_take_the_lane_too(monkeypatch: pytest.MonkeyPatch) -> None:

    server = Server("lane", "1")
    handed, made = spy_on_the_lane(monkeypatch)

    @server.resource("plain://{name}")
    def named(name: str) -> str:
        return f"read {name}"

    @server.prompt()
    def explain(topic: str) -> str:
        return f"Explain {topic}"

    @server.completion()
    def complete(ref: dict[str, Any], argument: str, value: str, context: dict[str, Any]) -> list[str]:
        return [value + "?"]

    async with serving(server) as conn:
        made.clear()
        conn.read(
            request_frame(1, "resources/read", {"uri": "plain://x"}),
            request_frame(2, "prompts/get", {"name": "explain", "arguments": {"topic": "lanes"}}),
            request_frame(
                3,
                "completion/complete",
                {"ref": {"type": "ref/resource", "uri": "plain://{name}"}, "argument": {"name": "name", "value": "n"}},
            ),
            request_frame(4, "resources/read", {"uri": "unknown://x"}),
        )
        with anyio.fail_after(10):
            read, prompt, completion, missing = await conn.answered(1, 2, 3, 4)
    assert read["result"]["contents"][0]["text"] == "read x"
    assert prompt["result"]["messages"][0]["content"]["text"] == "Explain lanes"
    assert completion["result"]["completion"]["values"] == ["n?"]
    assert missing["error"]["code"] == -32002  # (found missing on the loop: answered at once)
    assert handed == [3] and made == []


async def test_plain_calls_behind_plain_middleware_take_the_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain middleware that passes on what ``call_next`` returns keeps a plain tool's call on the lane, in both
    eras: one hand-off for the calls of a read and no coroutine, the middleware having seen each request and what
    it changed reaching the tool. A middleware that awaits the outcome (``async def``) runs the call in a
    coroutine, as before."""
    server = Server("lane", "1")
    handed, made = spy_on_the_lane(monkeypatch)
    seen: list[Any] = []

    def observe(message: Message, call_next: CallNext) -> Any:
        seen.append(message.request_id)
        if message.method == "tools/call":
            message.params = {**message.params, "arguments": {"n": message.params["arguments"]["n"] * 10}}
        return call_next(message)

    server.middleware = (observe,)

    @server.tool()
    def quick(n: int) -> str:
        return str(n)

    meta = STATELESS_META
    async with serving(server) as conn:
        made.clear()
        seen.clear()
        conn.read(call_frame(1, "quick", n=1), call_frame(2, "quick", n=2))
        with anyio.fail_after(10):
            answers = await conn.answered(1, 2)
    assert [text(a) for a in answers] == ["10", "20"] and seen == [1, 2]
    assert handed == [2] and made == []
    async with serving(server, version=None) as conn:
        conn.read(request_frame(3, "tools/call", {"name": "quick", "arguments": {"n": 3}, "_meta": meta}))
        with anyio.fail_after(10):
            (answer,) = await conn.answered(3)
    assert answer["result"]["resultType"] == "complete" and text(answer) == "30"
    assert handed == [2, 1] and made == []

    async def awaits(message: Message, call_next: CallNext) -> Any:
        return await call_next(message)

    server.middleware = (observe, awaits)
    async with serving(server) as conn:
        made.clear()
        conn.read(call_frame(4, "quick", n=4))
        with anyio.fail_after(10):
            (answer,) = await conn.answered(4)
    assert text(answer) == "40" and len(made) == 1


async def test_the_plain_calls_of_the_stateless_era_take_the_lane_and_what_they_raise_is_answered_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2026-07-28: the plain calls of one read take the lane as the handshake era's do (one hand-off, no coroutine),
    and what a plain handler raises that the era answers in its own way is answered on the worker thread: the input
    it asks for as an ``input_required`` result, a resource not found as -32602 with its URI."""
    server = Server("lane", "1")
    handed, made = spy_on_the_lane(monkeypatch)
    asked = {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {"type": "object"}}}

    @server.tool()
    def quick(n: int) -> str:
        return str(n)

    @server.tool()
    def ask() -> str:
        raise InputRequired({"name": asked})

    @server.resource("plain://{name}")
    def named(name: str) -> str:
        raise ResourceNotFound(f"plain://{name}")

    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    async with serving(server, version=None) as conn:
        conn.read(
            request_frame(1, "tools/call", {"name": "quick", "arguments": {"n": 1}, "_meta": meta}),
            request_frame(2, "tools/call", {"name": "ask", "arguments": {}, "_meta": meta}),
            request_frame(3, "resources/read", {"uri": "plain://x", "_meta": meta}),
        )
        with anyio.fail_after(10):
            done, needs, missing = await conn.answered(1, 2, 3)
    assert done["result"]["resultType"] == "complete" and text(done) == "1"
    assert needs["result"]["resultType"] == "input_required" and needs["result"]["inputRequests"] == {"name": asked}
    assert missing["error"] == {"code": -32602, "message": "Resource not found", "data": {"uri": "plain://x"}}
    assert handed == [3] and made == []


async def test_a_full_window_of_plain_calls_parked_on_the_lane_stays_under_the_collectors_first_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call parked on the sync lane (read, its job queued) keeps few objects alive that the cyclic collector
    counts: the 64 calls a busy client keeps in flight stay under the 700 new objects that start its first pass
    (the default threshold). Over that, it would run every few dozen calls under load, and walk the calls in flight
    each time."""
    gate = threading.Event()
    pool = WorkerPool(max_threads=1)  # (the calls queue behind the first one, which waits for the gate)
    monkeypatch.setattr(dispatch, "POOL", pool)
    server = Server("lane", "1")

    @server.tool()
    def held(n: int) -> str:
        gate.wait(10)
        return str(n)

    async with serving(server) as conn:
        try:
            with anyio.fail_after(10):
                conn.read(call_frame(0, "held", n=0))
                await until(lambda: pool.threads == 1 and pool.queued == 0)
                gc.collect()
                gc.disable()
                before = gc.get_count()[0]
                conn.read(*(call_frame(n, "held", n=n) for n in range(1, 65)))
                await until(lambda: pool.queued == 64)
                for _ in range(3):  # (what the read made for itself alone is freed)
                    await anyio.lowlevel.checkpoint()
                kept = gc.get_count()[0] - before
        finally:
            gc.enable()
            gate.set()
        with anyio.fail_after(10):
            answers = await conn.answered(*range(65))
    assert [text(a) for a in answers] == [str(n) for n in range(65)]
    assert kept < 700, f"64 calls parked on the lane keep {kept} objects the collector counts"


async def test_the_stateless_era_adds_to_a_plain_call_on_the_lane_rather_than_wrapping_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2026-07-28: what answers the input a plain handler raises is added to its call (``SyncCall.rescue_with``), and
    the session's encoding too (``finish_with``), each a plain function with its arguments: the lane runs the
    handler's own call, not a second call around it with a bound method of the session (objects each call in
    flight would keep alive)."""
    from jsonrpc_mcp.mcp import tools

    server = Server("lane", "1")
    seen: list[SyncCall] = []
    add = ParkedCalls.add

    def spy(self: ParkedCalls, job: OneArgJob, context: Any, owner: object = None) -> None:
        seen.append(job.arg.coro)
        add(self, job, context, owner)

    monkeypatch.setattr(ParkedCalls, "add", spy)

    @server.tool()
    def quick(n: int) -> str:
        return str(n)

    meta = STATELESS_META
    async with serving(server, version=None) as conn:
        conn.read(request_frame(1, "tools/call", {"name": "quick", "arguments": {"n": 1}, "_meta": meta}))
        with anyio.fail_after(10):
            (done,) = await conn.answered(1)
    assert text(done) == "1"
    (call,) = seen
    assert call.fn is tools._call_plain
    assert call.rescue is not None and call.then is not None
    assert not inspect.ismethod(call.rescue) and not inspect.ismethod(call.then)


async def test_a_batch_of_plain_calls_is_answered_as_one_array_in_its_order(sync_path: str) -> None:
    """2025-03-26 batches: the items on the lane, one that fails and one answered at once, in one array."""
    server = Server("batch", "1")

    @server.tool()
    def quick(n: int) -> str:
        if n == 2:
            raise ValueError("no two")
        return str(n)

    async with serving(server, "2025-03-26") as conn:
        items = [
            call_frame(1, "quick", n=1),
            call_frame(2, "quick", n=2),
            request_frame(3, "ping"),
            call_frame(4, "quick", n=4),
        ]
        conn.read(b"[" + b",".join(items) + b"]")
        with anyio.fail_after(10):
            (answer,) = await conn.answered("batch")
    assert [item["id"] for item in answer] == [1, 2, 3, 4]
    assert text(answer[0]) == "1" and text(answer[3]) == "4" and answer[2]["result"] == {}
    assert answer[1]["result"]["isError"] is True and "no two" not in text(answer[1])


async def test_one_blocking_plain_call_of_a_read_never_holds_up_the_others_of_that_read(sync_path: str) -> None:
    """Calls run one after another on a thread, the rest of the read queued behind a call that blocks: the calls
    before it are answered, and those after it are run by another thread, while it blocks."""
    server, entered, release = blocking_server("one read")

    try:
        async with serving(server) as conn:
            before, after = range(1, 5), range(6, 10)
            conn.read(
                *(call_frame(n, "quick", n=n) for n in before),
                call_frame(5, "block"),
                *(call_frame(n, "quick", n=n) for n in after),
            )
            with anyio.fail_after(10):
                answers = await conn.answered(*before, *after)
            assert [text(a) for a in answers] == [str(n) for n in (*before, *after)]
            assert 5 not in conn.answers and entered.is_set()
            release.set()
            with anyio.fail_after(10):
                assert text((await conn.answered(5))[0]) == "released"
    finally:
        release.set()


flavour_of_call: contextvars.ContextVar[str] = contextvars.ContextVar("flavour_of_call", default="unset")


async def test_each_plain_call_of_a_read_runs_in_its_own_requests_context(sync_path: str) -> None:
    """Parked together, each call still sees its own ``ctx``, and what one sets in its context is not seen by the
    others of the read (their contexts are theirs, not one shared by the read)."""
    server = Server("contexts", "1")
    ready = threading.Barrier(2)  # (two of them at once, on two threads, in the middle of the read)

    @server.tool()
    def taste(ctx: Context, n: int) -> str:
        seen = flavour_of_call.get()
        flavour_of_call.set(f"set by {n}")
        if n in (3, 4):
            ready.wait(10)
        return f"{ctx.request_id} {seen}"

    async with serving(server) as conn:
        conn.read(*(call_frame(n, "taste", n=n) for n in range(1, 9)))
        with anyio.fail_after(10):
            answers = await conn.answered(*range(1, 9))
    assert [text(a) for a in answers] == [f"{n} unset" for n in range(1, 9)]


async def test_a_cancelled_call_of_a_read_reaches_its_running_plain_tool_and_is_never_answered(
    sync_path: str,
) -> None:
    server = Server("cancel", "1")
    started, saw, give_up = add_patient_tool(server)

    @server.tool()
    def quick(n: int) -> str:
        return str(n)

    try:
        async with serving(server) as conn:
            conn.read(call_frame(1, "quick", n=1), call_frame(2, "patient"), call_frame(3, "quick", n=3))
            with anyio.fail_after(10):
                assert [text(a) for a in await conn.answered(1, 3)] == ["1", "3"]
                await wait_for(started)
            conn.read(notification_frame("notifications/cancelled", {"requestId": 2}))
            await wait_for(saw)
            conn.read(request_frame(4, "ping"))  # (answered after whatever the cancelled call would have been)
            with anyio.fail_after(10):
                await conn.answered(4)
            assert 2 not in conn.answers
    finally:
        give_up.set()


async def test_a_connection_that_ends_while_plain_calls_are_parked_cancels_them_once_they_return(
    sync_path: str,
) -> None:
    """As documented (Dispatcher._answer_lane): the calls are waited for, then their handlers are cancelled (never
    answered); nothing of the connection is left, and the pool serves the next connection."""
    server = Server("ending", "1")
    calls = 6
    lock = threading.Lock()
    entered: list[int] = []
    all_in, release = threading.Event(), threading.Event()
    returned: list[int] = []

    @server.tool()
    def hold(n: int) -> str:
        with lock:
            entered.append(n)
            if len(entered) == calls:
                all_in.set()
        release.wait(30)
        with lock:
            returned.append(n)
        return str(n)

    @server.tool()
    def quick(n: int) -> str:
        return str(n)

    stream = Reads()
    served = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            connection = anyio.CancelScope()

            async def serve() -> None:
                with connection:
                    await server.serve(stream)
                served.set()

            tg.start_soon(serve)
            with anyio.fail_after(10):
                await stream.handshake()
            stream.read(*(call_frame(n, "hold", n=n) for n in range(1, calls + 1)))
            await wait_for(all_in)
            (session,) = server.sessions()
            assert session.dispatcher.in_flight() == calls
            connection.cancel()  # the connection ends (its task is cancelled)
            await anyio.lowlevel.checkpoint()
            assert not served.is_set()  # the handlers wait for their threads
            release.set()
            with anyio.fail_after(10):
                await served.wait()
        await stream.aclose()
        if sync_path != "per-call":  # (anyio's thread per call: a native cancellation on asyncio may leave the thread
            # behind, and on trio the call returns and its answer goes out before the cancellation is delivered)
            assert sorted(returned) == list(range(1, calls + 1))
            assert set(stream.answers) == {"init"}  # none of them answered
        assert session.dispatcher.in_flight() == 0 and server.sessions() == []
        assert POOL.queued == 0
        async with serving(server) as after:  # the pool is as good as new
            after.read(*(call_frame(n, "quick", n=n) for n in range(1, 4)))
            with anyio.fail_after(10):
                assert [text(a) for a in await after.answered(1, 2, 3)] == ["1", "2", "3"]
    finally:
        release.set()


# --- ParkedCalls and the pool: the results of calls run one after another ------------------------------------


def add_call(parked: ParkedCalls, fn: Callable[..., Any], *args: Any, pool: WorkerPool) -> None:
    """Add a call of ``fn(*args)`` to ``parked``, as the dispatcher adds those of the sync lane (owned by itself)."""
    job = Job(fn, args, None, pool)
    parked.add(job, job.context)


async def test_results_of_calls_run_one_after_another_come_back_together() -> None:
    """A thread with calls queued behind the one it ran keeps its result (for at most ``handoff`` seconds): the
    loop is woken once for the calls of a batch, not for each."""
    pool = WorkerPool(2, handoff=30)
    entered, last = threading.Event(), threading.Event()

    def finish() -> str:
        entered.set()
        last.wait(30)
        return "last"

    parked = ParkedCalls()
    for n in range(7):
        add_call(parked, str, n, pool=pool)
    add_call(parked, finish, pool=pool)
    parked.send()
    try:
        await wait_for(entered)  # the seven done before, on the same thread
        for _ in range(10):
            await anyio.lowlevel.checkpoint()
        assert not parked.done  # their results are kept
        last.set()
        with anyio.fail_after(10):
            await parked.arrival()
        values = []
        while parked.done:
            values.append(parked.take().value)
        assert sorted(values) == sorted([*map(str, range(7)), "last"]) and parked.left == 0
    finally:
        last.set()
        pool.shutdown()


async def test_results_kept_behind_a_call_that_blocks_come_back_while_it_blocks() -> None:
    """The thread that ran the first calls keeps their results, then blocks in the last one: the thread that
    watches hands them back ``handoff`` seconds later."""
    pool = WorkerPool(2, handoff=0.005)
    release = threading.Event()

    parked = ParkedCalls()
    for n in range(6):
        add_call(parked, str, n, pool=pool)
    add_call(parked, release.wait, 30, pool=pool)
    parked.send()
    values = []
    try:
        with anyio.fail_after(10):
            while len(values) < 6:
                await parked.arrival()
                while parked.done:
                    values.append(parked.take().value)
        assert sorted(values) == [str(n) for n in range(6)] and parked.left == 1
        release.set()
        with anyio.fail_after(10):
            await parked.arrival()
        assert parked.take().value is True
    finally:
        release.set()
        pool.shutdown()


# --- fork ------------------------------------------------------------------------------------------------------


def _in_the_child(conn: Any) -> None:
    import asyncio

    before = (POOL.threads, POOL.queued)
    here = threading.get_ident()
    elsewhere = asyncio.run(run_in_worker(threading.get_ident))  # (a fresh event loop: the child has none running)
    conn.send((before, elsewhere != here, POOL.threads))
    conn.close()


@pytest.mark.skipif(not hasattr(os, "register_at_fork"), reason="fork is POSIX")
async def test_a_forked_child_starts_with_a_fresh_pool() -> None:
    """The child of a process whose pool has threads, one of them busy (holding the pool's lock now and then),
    has none of them: its pool starts afresh and runs its calls."""
    import multiprocessing
    import warnings

    block, entered, release = blocking_call()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_in_worker, block)
            await wait_for(entered)
            assert POOL.threads >= 1
            fork = multiprocessing.get_context("fork")
            ours, theirs = fork.Pipe()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # (forking a process with threads, on 3.12+)
                child = fork.Process(target=_in_the_child, args=(theirs,))
                child.start()
            theirs.close()
            assert await anyio.to_thread.run_sync(ours.poll, 20)
            before, on_another_thread, threads_after = ours.recv()
            await anyio.to_thread.run_sync(child.join, 20)
            assert child.exitcode == 0
            assert before == (0, 0) and on_another_thread and threads_after == 1
            release.set()
    finally:
        release.set()


async def test_a_plain_tool_that_changes_the_servers_tools_tells_the_client(sync_path: str) -> None:
    """A ``def`` tool runs on a worker thread; the ``list_changed`` its ``add_tool`` sends is started on the event
    loop's thread (on trio a task started from another thread fails the call)."""
    server = Server("grows", "1")
    told = anyio.Event()

    @server.tool()
    def grow(name: str) -> str:
        server.add_tool(lambda: "new", name=name)
        return f"added {name} on {'a worker thread' if on_worker_thread() else 'the loop'}"

    def on_notification(method: str, params: Any) -> None:
        if method == "notifications/tools/list_changed":
            told.set()

    async with Client.connect_server(server, on_notification=on_notification, protocol_version="2025-11-25") as client:
        result = await client.call_tool("grow", {"name": "sprout"})
        assert not result.is_error and result.content[0].text == "added sprout on a worker thread"  # type: ignore[union-attr]
        with anyio.fail_after(5):
            await told.wait()
        assert "sprout" in [tool.name for tool in await client.list_tools()]
