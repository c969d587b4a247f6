"""Plain functions on worker threads: the pool of ``jsonrpc.workers`` itself, and the plain ``def`` handlers of a
server on it and on the plain per-call path it is checked against (the ``sync_path`` fixture)."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp import types as t
from jsonrpc_mcp.jsonrpc.workers import WorkerPool, run_in_worker
from jsonrpc_mcp.mcp.context import on_worker_thread

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


@pytest.mark.parametrize("idle", [0, 3], ids=["fresh", "idle-threads"])
async def test_a_call_that_blocks_does_not_hold_up_the_calls_queued_after_it(idle: int) -> None:
    pool = WorkerPool(8)
    if idle:
        await warm(pool, idle)
    entered, release = threading.Event(), threading.Event()

    def block() -> str:
        entered.set()
        release.wait(30)
        return "released"

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
    server = Server("blocking", "1")
    entered, release = threading.Event(), threading.Event()

    @server.tool()
    def block() -> str:
        entered.set()
        release.wait(30)
        return "released"

    @server.tool()
    def quick(n: int) -> str:
        return str(n)

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
    """The calls of one read park on the pool (``workers.start_step``): while they run, the connection has not a
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
