"""The tasks extension, client side: our Client following tasks of tests/fixtures/tasks_app.py, served over stdio
(a subprocess) and under uvicorn, and ``jsonrpc-mcp call --task``.

Nothing sleeps: a task that works waits until the test calls the ``release`` tool; ``paced`` takes each step once
a ``tasks/get`` has seen the last one, so every step of its progress reaches the client.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from helpers import FIXTURES, TIMEOUT, serve_command
from http_support import HTTPX_GENERATORS, ServerThread
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Client, RpcError, Server, types
from jsonrpc_mcp.cli import load_app
from jsonrpc_mcp.errors import MethodNotFound, ProtocolViolation, RequestTimeout
from jsonrpc_mcp.mcp.task_client import MOST_POLL
from jsonrpc_mcp.tasks import ClientTasks, TaskCancelled, TaskHandle
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]

APP = FIXTURES / "tasks_app.py"
TASKS = "io.modelcontextprotocol/tasks"
_keys = itertools.count(1)


def key() -> str:
    return f"client-{next(_keys)}"


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def name_ada(params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.fixture(scope="module")
def http_app() -> Any:
    thread = ServerThread(McpAsgiApp(load_app(str(APP))))
    yield thread
    thread.stop()


@asynccontextmanager
async def client_over(transport: str, http_app: ServerThread, **options: Any) -> AsyncIterator[Client]:
    if transport == "stdio":
        async with Client.connect_stdio(serve_command(APP), **options) as client:
            yield client
    else:
        async with Client.connect_http(http_app.url, **options) as client:
            yield client


TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


@TRANSPORTS
async def test_call_tool_follows_a_task_to_its_result_with_its_progress(transport: str, http_app: ServerThread) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with client_over(transport, http_app, extensions=[ClientTasks()]) as client:
        assert client.server_extension(TASKS) == {}
        result = await client.call_tool("paced", {"steps": 3}, progress=progress)
    assert text_of(result) == "3 steps done" and result.is_error is not True
    assert seen == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]


@TRANSPORTS
async def test_a_tasks_input_requests_are_answered_with_the_clients_handlers(
    transport: str, http_app: ServerThread
) -> None:
    async with client_over(transport, http_app, extensions=[ClientTasks()], elicitation=name_ada) as client:
        both = await client.call_tool("ask_both")
        twice = await client.call_tool("ask_twice")
    assert text_of(both) == "Ada+Ada"
    assert text_of(twice) == "Ada then Ada"  # (the second question's key is new: it is answered too)


@TRANSPORTS
async def test_a_failed_task_raises_its_error_and_a_tool_error_is_a_result(
    transport: str, http_app: ServerThread
) -> None:
    async with client_over(transport, http_app, extensions=[ClientTasks()]) as client:
        with pytest.raises(RpcError) as raised:
            await client.call_tool("protocol_error")
        failed = await client.call_tool("tool_error")
    assert raised.value.code == -32602 and raised.value.message == "no such record"
    assert raised.value.data == {"table": "notes"}
    assert failed.is_error is True and text_of(failed) == "the tool failed, and says so"


@TRANSPORTS
async def test_a_call_cancelled_while_it_waits_cancels_its_task(transport: str, http_app: ServerThread) -> None:
    announced = anyio.Event()
    task_ids: list[str] = []

    def progress(done: float, total: float | None, message: str | None) -> None:
        if message and message.startswith("task "):
            task_ids.append(message.removeprefix("task "))
            announced.set()

    async with client_over(transport, http_app, extensions=[ClientTasks()]) as client:
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await client.call_tool("announce", {"key": key()}, progress=progress)

                tg.start_soon(call)
                await announced.wait()
                tg.cancel_scope.cancel()
            with pytest.raises(TaskCancelled) as raised:
                await client.task(task_ids[0]).wait()
    assert raised.value.task_id == task_ids[0]


async def test_a_task_followed_past_the_clients_max_total_timeout_is_cancelled(http_app: ServerThread) -> None:
    task_ids: list[str] = []

    def progress(done: float, total: float | None, message: str | None) -> None:
        if message and message.startswith("task "):
            task_ids.append(message.removeprefix("task "))

    async with Client.connect_http(http_app.url, extensions=[ClientTasks()], max_total_timeout=1.0) as client:
        with pytest.raises(RequestTimeout, match="did not end within 1 s"):
            await client.call_tool("announce", {"key": key()}, progress=progress)
        with pytest.raises(TaskCancelled):
            await client.task(task_ids[0]).wait(timeout=TIMEOUT)


@TRANSPORTS
async def test_a_task_in_hand_is_followed_cancelled_and_read(transport: str, http_app: ServerThread) -> None:
    async with client_over(transport, http_app) as client:  # (declaring nothing: start_tool_task declares it)
        gate = key()
        handle = await client.start_tool_task("work", {"key": gate})
        assert handle.task_id is not None and handle.status == "working" and not handle.done
        assert handle.poll_interval == 0.25
        assert (await handle.refresh())["status"] == "working"
        await client.call_tool("release", {"key": gate})
        result = await handle.wait(timeout=TIMEOUT)
        assert isinstance(result, types.CallToolResult)
        assert text_of(result) == f"worked {gate} in task {handle.task_id}" and handle.done

        stopped = await client.start_tool_task("work", {"key": key()})
        await stopped.cancel()
        with pytest.raises(TaskCancelled):
            await stopped.wait(timeout=TIMEOUT)
        assert stopped.status == "cancelled"

        at_once = await client.start_tool_task("plain")  # never a task: answered in its request
        assert at_once.task_id is None and at_once.done
        assert text_of(await at_once.wait()) == "plain"

        waiting = await client.start_tool_task("work", {"key": key()})
        with pytest.raises(TimeoutError):
            await waiting.wait(timeout=0)
        assert (await waiting.refresh())["status"] == "working"  # (a wait that gives up leaves the task)
        await waiting.cancel()


async def test_a_task_is_followed_again_from_another_connection(http_app: ServerThread) -> None:
    gate = key()
    async with Client.connect_http(http_app.url) as first:
        task_id = (await first.start_tool_task("work", {"key": gate})).task_id
    assert task_id is not None
    async with Client.connect_http(http_app.url) as second:
        handle = second.task(task_id)
        await second.call_tool("release", {"key": gate})
        result = await handle.wait(timeout=TIMEOUT)
    assert text_of(result) == f"worked {gate} in task {task_id}"


async def test_a_task_result_of_another_shape_is_a_protocol_violation(http_app: ServerThread) -> None:
    gate = key()
    async with Client.connect_http(http_app.url) as client:
        started = await client.start_tool_task("work", {"key": gate})
        assert started.task_id is not None
        handle = client.task(started.task_id, result_type=types.ListToolsResult)  # (a tool's result has no tools)
        await client.call_tool("release", {"key": gate})
        with pytest.raises(ProtocolViolation, match=r"task .+'s result is not a valid ListToolsResult: .*tools"):
            await handle.wait(timeout=TIMEOUT)
        assert handle.done


async def test_the_wait_between_two_polls_is_bounded_whatever_the_server_suggests(http_app: ServerThread) -> None:
    async with Client.connect_http(http_app.url) as client:
        for suggested, seconds in [(250, 0.25), (10**15, MOST_POLL), (float("inf"), MOST_POLL), (0, 1.0), (-5, 1.0)]:
            task = {"resultType": "task", "taskId": "t1", "status": "working", "pollIntervalMs": suggested}
            assert TaskHandle(client, task).poll_interval == seconds


async def test_a_listen_stream_hears_of_a_task(http_app: ServerThread) -> None:
    heard: list[dict[str, Any]] = []
    done = anyio.Event()

    def on_notification(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tasks":
            heard.append(params)
            if params["status"] == "completed":
                done.set()

    gate = key()
    async with Client.connect_http(http_app.url, on_notification=on_notification) as client:
        handle = await client.start_tool_task("work", {"key": gate})
        assert handle.task_id is not None
        async with client.listen(task_ids=[handle.task_id, "not-a-task"]) as acknowledged:
            assert acknowledged == {"taskIds": [handle.task_id]}
            await client.call_tool("release", {"key": gate})
            with anyio.fail_after(TIMEOUT):
                await done.wait()
    assert heard[-1]["taskId"] == handle.task_id
    assert heard[-1]["result"]["content"][0]["text"] == f"worked {gate} in task {handle.task_id}"


async def test_tasks_need_a_server_that_offers_them() -> None:
    server = Server("no-tasks")

    @server.tool()
    def plain() -> str:
        return "plain"

    async with Client.connect_server(server) as client:
        with pytest.raises(MethodNotFound, match="tasks extension"):
            await client.start_tool_task("plain")
        with pytest.raises(MethodNotFound, match="tasks extension"):
            client.task("some-id")
    async with Client.connect_stdio(serve_command(APP), protocol_version="2025-06-18") as handshake:
        with pytest.raises(MethodNotFound, match="tasks extension"):  # (a revision before tasks)
            await handshake.start_tool_task("work", {"key": "x"})


# --- jsonrpc-mcp call --task ------------------------------------------------------------------------------------


def run_cli(*words: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "jsonrpc_mcp", "call", *words, "--", *serve_command(APP)]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def test_call_task_shows_the_tasks_progress_and_prints_its_result() -> None:
    done = run_cli("--task", "paced", "steps=3")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3 steps done\n"
    lines = done.stderr.splitlines()
    assert re.fullmatch(r"jsonrpc-mcp: task \S+ is working", lines[0])
    assert [line for line in lines if line.startswith("progress:")] == [
        "progress: 1/3 step 1 of 3",
        "progress: 2/3 step 2 of 3",
        "progress: 3/3 step 3 of 3",
    ]


def test_call_task_reports_a_failed_task_as_the_error_it_is() -> None:
    failed = run_cli("--task", "protocol_error")
    assert failed.returncode == 3
    assert 'the server answered with error -32602: no such record {"table": "notes"}' in failed.stderr
    without = run_cli("must_be_a_task", "key=x")  # (no --task: the extension is not declared)
    assert without.returncode == 3 and "-32021" in without.stderr


def test_call_task_reports_a_task_that_needs_what_the_client_did_not_declare() -> None:
    asking = run_cli("--task", "ask_name")  # (the command line answers no elicitation, and does not declare it)
    assert asking.returncode == 3
    assert "error -32021: Missing required client capability: elicitation" in asking.stderr
