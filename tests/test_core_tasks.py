"""2025-11-25 tasks (that revision's core ``tasks``), server side: our Server over in-memory pairs, its tasks kept
by the same ``Tasks()`` (and store) as the 2026-07-28 extension's.

Nothing sleeps: a task's tool waits on an event the test sets; status changes are awaited through
``notifications/tasks/status`` or ``tasks/result``, which blocks until the task ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from helpers import TIMEOUT, PrincipalStream
from http_support import ServerThread, open_session, response_of
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Client, Context, RpcError, Server, ToolError, types
from jsonrpc_mcp.auth import AccessToken
from jsonrpc_mcp.errors import InvalidParams
from jsonrpc_mcp.mcp.task_client import CoreTaskHandle
from jsonrpc_mcp.middleware import TASK_OPERATIONS, RateLimiter, by_principal
from jsonrpc_mcp.tasks import MemoryTaskStore, TaskCancelled, Tasks
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.memory import MemoryMessageStream

pytestmark = pytest.mark.anyio

V = "2025-11-25"
RELATED = "io.modelcontextprotocol/related-task"


class App:
    """A server with task tools that wait for the test, and the store its tasks are kept in."""

    def __init__(self, page_size: int | None = 100, server: type[Server] = Server) -> None:
        self.store = MemoryTaskStore()
        self.server = server(
            "core-tasks", version="1.0", extensions=[Tasks(self.store, ttl=60, poll_interval=0.01)], page_size=page_size
        )
        self.release = anyio.Event()
        self.started = anyio.Event()
        #: What the client answered the tool's requests for input.
        self.answers: list[types.ElicitResult] = []
        server = self.server

        @server.tool(task="optional")
        async def slow(ctx: Context, word: str) -> str:
            """Waits until released."""
            self.started.set()
            await ctx.report_progress(1, 2, "half way")
            await self.release.wait()
            return f"slow {word}"

        @server.tool(task="required")
        async def must(word: str) -> str:
            """Only as a task."""
            return f"must {word}"

        @server.tool()
        async def plain(word: str) -> str:
            """Never a task."""
            return f"plain {word}"

        @server.tool(task="optional")
        async def broken(kind: str) -> str:
            """Fails, as a tool or as a protocol error."""
            if kind == "tool":
                raise ToolError("no luck")
            raise InvalidParams("bad kind")

        @server.tool(task="optional")
        async def asks(ctx: Context) -> str:
            """Asks the client for a name."""
            schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            answer = await ctx.elicit("Your name?", schema)
            self.answers.append(answer)
            return f"hello {(answer.content or {}).get('name')}"

        @server.tool(task="optional")
        async def asks_then_waits(ctx: Context) -> str:
            """Asks the client to confirm, then waits until released."""
            await ctx.elicit("Go on?", {"type": "object", "properties": {}})
            await self.release.wait()
            return "went on"


@asynccontextmanager
async def client_of(app: App, **options: Any) -> AsyncIterator[Client]:
    async with Client.connect_server(app.server, protocol_version=V, **options) as client:
        yield client


@asynccontextmanager
async def client_as(app: App, subject: str, **options: Any) -> AsyncIterator[Client]:
    """Our client, authenticated as ``subject`` by its transport."""
    send_a, receive_a = anyio.create_memory_object_stream[bytes](64)
    send_b, receive_b = anyio.create_memory_object_stream[bytes](64)
    theirs = PrincipalStream(send_a, receive_b)
    theirs.principal = AccessToken(subject=subject, client_id="c")
    async with send_a, receive_a, send_b, receive_b, anyio.create_task_group() as tg:
        tg.start_soon(app.server.serve, theirs)
        async with Client.connect(MemoryMessageStream(send_b, receive_a), protocol_version=V, **options) as client:
            yield client
        tg.cancel_scope.cancel()


async def call_task(client: Client, name: str, arguments: dict[str, Any], **task: Any) -> dict[str, Any]:
    created: dict[str, Any] = await client.request("tools/call", {"name": name, "arguments": arguments, "task": task})
    return created


async def error_of(client: Client, method: str, params: dict[str, Any]) -> RpcError:
    with pytest.raises(RpcError) as caught:
        await client.request(method, params)
    return caught.value


async def test_the_tasks_capability_and_task_support_are_declared_at_2025_11_25_only() -> None:
    app = App()
    async with client_of(app) as client:
        # (this transport authenticates nobody: no tasks.list, see test_tasks_list_is_declared_...)
        assert msgspec.to_builtins(client.server_capabilities)["tasks"] == {
            "cancel": {},
            "requests": {"tools": {"call": {}}},
        }
        tools = {tool["name"]: tool for tool in (await client.request("tools/list"))["tools"]}
        assert tools["slow"]["execution"] == {"taskSupport": "optional"}
        assert tools["must"]["execution"] == {"taskSupport": "required"}
        assert "execution" not in tools["plain"]
    async with Client.connect_server(app.server, protocol_version="2025-06-18") as older:
        assert "tasks" not in msgspec.to_builtins(older.server_capabilities)
        assert all("execution" not in tool for tool in (await older.request("tools/list"))["tools"])
        assert (await error_of(older, "tasks/get", {"taskId": "x"})).code == -32601
        # (a task-augmented call to a revision without tasks is answered as an ordinary call)
        answered = await older.request("tools/call", {"name": "must", "arguments": {"word": "a"}, "task": {}})
        assert answered["content"][0]["text"] == "must a"
    async with Client.connect_server(app.server, protocol_version="2026-07-28") as later:
        assert (await error_of(later, "tasks/result", {"taskId": "x"})).code == -32601
        assert (await error_of(later, "tasks/list", {})).code == -32601


async def test_a_task_augmented_call_is_answered_with_its_task_and_tasks_result_waits_for_its_end() -> None:
    app = App()
    async with client_of(app) as client:
        with anyio.fail_after(TIMEOUT):
            created = await call_task(client, "slow", {"word": "go"}, ttl=30_000)
            task = created["task"]
            assert set(created) == {"task"}
            assert task["status"] == "working"
            assert isinstance(task["taskId"], str) and len(task["taskId"]) >= 20
            assert task["createdAt"].endswith("Z") and task["lastUpdatedAt"].endswith("Z")
            assert task["ttl"] == 30_000  # (the client's, under the server's 60 s)
            assert await app.store.get(task["taskId"]) is not None  # (the extension's own store keeps it)
            await app.started.wait()

            results: list[dict[str, Any]] = []

            async def wait_for_result() -> None:
                results.append(await client.request("tasks/result", {"taskId": task["taskId"]}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_for_result)
                got = await client.request("tasks/get", {"taskId": task["taskId"]})
                assert got["status"] == "working" and got["ttl"] == 30_000 and got["pollInterval"] >= 1
                assert RELATED not in got.get("_meta", {})
                await anyio.wait_all_tasks_blocked()
                assert results == []  # (blocked while the task works)
                app.release.set()
            [result] = results
            assert result["content"] == [{"type": "text", "text": "slow go"}]
            assert "resultType" not in result
            assert result["_meta"][RELATED] == {"taskId": task["taskId"]}
            done = await client.request("tasks/get", {"taskId": task["taskId"]})
            assert done["status"] == "completed"


async def test_task_support_is_enforced_with_method_not_found() -> None:
    app = App()
    async with client_of(app) as client:
        forbidden = await error_of(client, "tools/call", {"name": "plain", "arguments": {"word": "a"}, "task": {}})
        assert forbidden.code == -32601
        required = await error_of(client, "tools/call", {"name": "must", "arguments": {"word": "a"}})
        assert required.code == -32601
        assert (await client.request("tools/call", {"name": "plain", "arguments": {"word": "a"}}))["content"]
        optional = await client.request("tools/call", {"name": "broken", "arguments": {"kind": "tool"}})
        assert optional["isError"] is True  # (no task asked: answered in the request)
        bad = await error_of(client, "tools/call", {"name": "slow", "arguments": {"word": "a"}, "task": {"ttl": "x"}})
        assert bad.code == -32602


async def test_a_failed_task_gives_its_tool_error_or_its_json_rpc_error() -> None:
    app = App()
    async with client_of(app) as client:
        with anyio.fail_after(TIMEOUT):
            as_tool = (await call_task(client, "broken", {"kind": "tool"}))["task"]
            result = await client.request("tasks/result", {"taskId": as_tool["taskId"]})
            assert result["isError"] is True and result["_meta"][RELATED] == {"taskId": as_tool["taskId"]}
            assert (await client.request("tasks/get", {"taskId": as_tool["taskId"]}))["status"] == "failed"

            as_rpc = (await call_task(client, "broken", {"kind": "rpc"}))["task"]
            error = await error_of(client, "tasks/result", {"taskId": as_rpc["taskId"]})
            assert (error.code, error.message) == (-32602, "bad kind")
            got = await client.request("tasks/get", {"taskId": as_rpc["taskId"]})
            assert got["status"] == "failed" and got["statusMessage"] == "bad kind"


async def test_task_ids_are_the_servers_own_unique_and_unguessable() -> None:
    """Made by the receiver (an id the requestor offers is not taken), distinct, and of 128 random bits: without
    a principal to bind a task to, the id is its only key."""
    app = App()
    async with client_of(app) as client:
        with anyio.fail_after(TIMEOUT):
            made = [(await call_task(client, "must", {"word": "i"}, taskId="mine"))["task"]["taskId"] for _ in range(8)]
    assert "mine" not in made and len(set(made)) == len(made)
    assert all(len(task_id) >= 22 for task_id in made)  # (16 random bytes, base64url)


async def test_the_task_id_parameter_names_the_task_whatever_the_related_task_meta_says() -> None:
    app = App()
    async with client_as(app, "alice") as client:
        with anyio.fail_after(TIMEOUT):
            slow = (await call_task(client, "slow", {"word": "s"}))["task"]["taskId"]
            done = (await call_task(client, "must", {"word": "d"}))["task"]["taskId"]
            await app.started.wait()
            other = {"_meta": {RELATED: {"taskId": slow}}}
            assert (await client.request("tasks/result", {"taskId": done, **other}))["content"][0]["text"] == "must d"
            assert (await client.request("tasks/get", {"taskId": done, **other}))["status"] == "completed"
            refused = await error_of(client, "tasks/cancel", {"taskId": done, **other})
            assert refused.code == -32602  # (the finished one named by taskId, not the working one in _meta)
            assert (await client.request("tasks/get", {"taskId": slow}))["status"] == "working"
            # (each task tasks/get finds is in tasks/list for the same requestor)
            listed = {task["taskId"] for task in (await client.request("tasks/list", {}))["tasks"]}
            assert listed == {slow, done}
            app.release.set()


async def test_unknown_tasks_are_invalid_params() -> None:
    app = App()
    async with client_of(app) as client:
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            error = await error_of(client, method, {"taskId": "nope"})
            assert (error.code, error.message) == (
                -32602,
                "Failed to retrieve task: Task not found (unknown, or expired)",
            )


async def test_tasks_list_is_declared_and_answered_only_where_the_transport_authenticates_the_requestor() -> None:
    app = App()
    async with client_as(app, "alice") as alice:
        assert msgspec.to_builtins(alice.server_capabilities)["tasks"] == {
            "list": {},
            "cancel": {},
            "requests": {"tools": {"call": {}}},
        }
    async with client_of(app) as nobody:
        assert "list" not in msgspec.to_builtins(nobody.server_capabilities)["tasks"]
        with anyio.fail_after(TIMEOUT):
            await call_task(nobody, "must", {"word": "x"})
        assert (await error_of(nobody, "tasks/list", {})).code == -32601


async def test_a_task_is_bound_to_the_principal_that_made_it() -> None:
    app = App()
    async with client_as(app, "alice") as alice, client_as(app, "bob") as bob:
        with anyio.fail_after(TIMEOUT):
            mine = (await call_task(alice, "slow", {"word": "a"}))["task"]["taskId"]
            theirs = (await call_task(bob, "must", {"word": "b"}))["task"]["taskId"]
            await app.started.wait()
            for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                refused = await error_of(bob, method, {"taskId": mine})
                assert refused.code == -32602  # (as if there were no such task)
            assert [task["taskId"] for task in (await alice.request("tasks/list", {}))["tasks"]] == [mine]
            assert [task["taskId"] for task in (await bob.request("tasks/list", {}))["tasks"]] == [theirs]
            assert (await alice.request("tasks/get", {"taskId": mine}))["status"] == "working"  # (not cancelled)
            app.release.set()
            assert (await alice.request("tasks/result", {"taskId": mine}))["content"][0]["text"] == "slow a"


async def test_tasks_list_pages_through_the_clients_tasks() -> None:
    app = App(page_size=2)
    async with client_as(app, "alice") as client:
        with anyio.fail_after(TIMEOUT):
            made = [(await call_task(client, "must", {"word": str(i)}))["task"]["taskId"] for i in range(3)]
            first = await client.request("tasks/list", {})
            assert [task["taskId"] for task in first["tasks"]] == made[:2]
            assert RELATED not in first.get("_meta", {})
            second = await client.request("tasks/list", {"cursor": first["nextCursor"]})
            assert [task["taskId"] for task in second["tasks"]] == made[2:]
            assert "nextCursor" not in second
            assert (await error_of(client, "tasks/list", {"cursor": "not-ours"})).code == -32602


async def test_a_cancelled_task_is_cancelled_when_answered_and_stays_so() -> None:
    app = App()
    async with client_of(app) as client:
        with anyio.fail_after(TIMEOUT):
            task = (await call_task(client, "slow", {"word": "stop"}))["task"]
            await app.started.wait()
            cancelled = await client.request("tasks/cancel", {"taskId": task["taskId"]})
            assert cancelled["taskId"] == task["taskId"] and cancelled["status"] == "cancelled"
            assert RELATED not in cancelled.get("_meta", {})  # (the taskId is in the message already)
            app.release.set()
            error = await error_of(client, "tasks/result", {"taskId": task["taskId"]})
            assert error.code == -32602
            assert (await client.request("tasks/get", {"taskId": task["taskId"]}))["status"] == "cancelled"
            again = await error_of(client, "tasks/cancel", {"taskId": task["taskId"]})
            assert again.code == -32602
            done = (await call_task(client, "must", {"word": "x"}))["task"]
            await client.request("tasks/result", {"taskId": done["taskId"]})
            assert (await error_of(client, "tasks/cancel", {"taskId": done["taskId"]})).code == -32602


async def test_status_notifications_and_progress_reach_the_session_that_made_the_task() -> None:
    app = App()
    heard: list[tuple[str, dict[str, Any]]] = []
    ended = anyio.Event()

    def note(method: str, params: dict[str, Any]) -> None:
        heard.append((method, params))
        if method == "notifications/tasks/status" and params["status"] == "completed":
            ended.set()

    async with client_of(app, on_notification=note) as client:
        with anyio.fail_after(TIMEOUT):
            created = await client.request(
                "tools/call",
                {"name": "slow", "arguments": {"word": "p"}, "task": {}, "_meta": {"progressToken": "tok"}},
            )
            await app.started.wait()
            app.release.set()
            await ended.wait()
    task_id = created["task"]["taskId"]
    [status] = [params for method, params in heard if method == "notifications/tasks/status"]
    assert status["taskId"] == task_id and RELATED not in status.get("_meta", {})
    [progress] = [params for method, params in heard if method == "notifications/progress"]
    assert progress["progressToken"] == "tok" and progress["message"] == "half way"
    assert progress["_meta"][RELATED] == {"taskId": task_id}


async def test_a_tasks_request_for_input_goes_to_the_session_with_the_task_id() -> None:
    app = App()
    asked: list[types.ElicitRequestParams] = []

    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with client_of(app, elicitation=answer) as client:
        with anyio.fail_after(TIMEOUT):
            task = (await call_task(client, "asks", {}))["task"]
            result = await client.request("tasks/result", {"taskId": task["taskId"]})
    assert result["content"][0]["text"] == "hello Ada"
    [params] = asked
    assert params.meta[RELATED] == {"taskId": task["taskId"]}  # type: ignore[index]
    [answered] = app.answers  # (our client's answer names the task too)
    assert answered.meta[RELATED] == {"taskId": task["taskId"]}  # type: ignore[index]


async def test_a_task_waiting_for_the_clients_answer_is_input_required_then_working_again() -> None:
    app = App()
    seen: list[str] = []
    statuses: list[str] = []
    holder: list[Client] = []

    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        task_id = params.meta[RELATED]["taskId"]  # type: ignore[index]
        seen.append((await holder[0].request("tasks/get", {"taskId": task_id}))["status"])
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    def note(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tasks/status":
            statuses.append(params["status"])

    async with client_of(app, elicitation=answer, on_notification=note) as client:
        holder.append(client)
        with anyio.fail_after(TIMEOUT):
            task_id = (await call_task(client, "asks_then_waits", {}))["task"]["taskId"]
            while (await client.request("tasks/get", {"taskId": task_id}))["status"] != "working" or not seen:
                await anyio.wait_all_tasks_blocked()  # (until the answer has been taken: working again)
            app.release.set()
            result = await client.request("tasks/result", {"taskId": task_id})
            assert result["content"][0]["text"] == "went on"
    assert seen == ["input_required"]
    assert statuses[0] == "input_required" and statuses[-1] == "completed"


async def test_a_task_belongs_to_the_tasks_of_the_extension_too() -> None:
    """One Tasks() serves both revisions: a task made at 2025-11-25 is a record of the extension's store, and a
    2026-07-28 tasks/get still answers the extension's shape."""
    app = App()
    async with client_of(app) as client:
        with anyio.fail_after(TIMEOUT):
            task = (await call_task(client, "must", {"word": "y"}))["task"]
            await client.request("tasks/result", {"taskId": task["taskId"]})
    record = await app.store.get(task["taskId"])
    assert record is not None and record.status == "completed" and record.method == "tools/call"


# --- our client following 2025-11-25 tasks -------------------------------------------------------------------


async def test_call_tool_with_task_follows_the_task_to_its_result() -> None:
    app = App()
    shown: list[str | None] = []

    def show(done: float, total: float | None, message: str | None) -> None:
        shown.append(message)
        app.release.set()  # (the task has been seen working, half way: let it end)

    async with client_of(app) as client:
        with anyio.fail_after(TIMEOUT):
            result = await client.call_tool("slow", {"word": "w"}, task=True, progress=show)
    assert result.content == [types.TextContent(text="slow w")]
    assert shown and shown[-1] == "half way"


async def test_our_client_polls_tasks_get_at_the_tasks_interval_and_needs_no_status_notification() -> None:
    """The client follows a task with tasks/get at its pollInterval until it ends (or needs input), then reads
    tasks/result: with every notifications/tasks/status dropped on its way in, the call still ends."""
    app = App()
    sent: list[str] = []

    def observe(message: Any, call_next: Any) -> Any:
        if message.direction == "incoming" and message.method == "notifications/tasks/status":
            return None
        if message.direction == "outgoing":
            sent.append(message.method)
        return call_next(message)

    def show(done: float, total: float | None, message: str | None) -> None:
        app.release.set()  # (seen half way, through tasks/get: let it end)

    async with client_of(app, middleware=[observe]) as client:
        with anyio.fail_after(TIMEOUT):
            handle = await client.start_tool_task("slow", {"word": "p"})
            assert handle.poll_interval == handle.last["pollInterval"] / 1000 == 0.01
            result = await handle.wait(progress=show)
    assert result.content == [types.TextContent(text="slow p")]
    asked = [method for method in sent if method.startswith(("tools/call", "tasks/"))]
    assert asked[0] == "tools/call" and asked[-1] == "tasks/result"
    assert "tasks/get" in asked and asked.count("tasks/result") == 1


async def test_a_tool_that_requires_a_task_is_called_as_one_once_listed() -> None:
    app = App()
    async with client_of(app) as client:
        with anyio.fail_after(TIMEOUT):
            assert await client.tool_requires_task("must")
            assert not await client.tool_requires_task("slow")
            result = await client.call_tool("must", {"word": "m"})
            assert result.content == [types.TextContent(text="must m")]
            failed = await client.call_tool("broken", {"kind": "tool"}, task=True)
            assert failed.is_error is True
            with pytest.raises(RpcError) as caught:
                await client.call_tool("broken", {"kind": "rpc"}, task=True)
            assert caught.value.code == -32602
    async with Client.connect_server(app.server, protocol_version="2025-06-18") as older:
        assert not await older.tool_requires_task("must")


class WithoutTheCapability(Server):
    """A server that lists its tools' ``execution.taskSupport`` but does not declare ``tasks``."""

    def capabilities(self, version: str, *, identified: bool = False) -> dict[str, Any]:
        caps = super().capabilities(version, identified=identified)
        caps.pop("tasks", None)
        return caps


async def test_our_client_asks_for_a_task_only_where_the_server_and_the_tool_allow_one() -> None:
    app = App()
    async with client_of(app) as client:
        with anyio.fail_after(TIMEOUT):
            # (a tool without execution.taskSupport: called in its request, not refused as a task)
            plain = await client.call_tool("plain", {"word": "p"}, task=True)
            assert plain.content == [types.TextContent(text="plain p")]
            handle = await client.start_tool_task("plain", {"word": "q"})
            assert handle.task_id is None and handle.done
            assert (await handle.wait()).content == [types.TextContent(text="plain q")]
            assert len(app.store) == 0
    other = App(server=WithoutTheCapability)
    async with client_of(other) as client:
        with anyio.fail_after(TIMEOUT):
            tools = {tool.name: tool for tool in await client.list_tools()}
            assert tools["broken"].execution == types.ToolExecution(task_support="optional")
            answered = await client.call_tool("broken", {"kind": "tool"}, task=True)
            assert answered.is_error is True  # (answered in its request)
            assert len(other.store) == 0  # (no task was asked for)
            with pytest.raises(RpcError):
                await client.start_tool_task("broken", {"kind": "tool"})


async def test_a_task_handle_cancels_its_task() -> None:
    app = App()
    async with client_of(app) as client:
        with anyio.fail_after(TIMEOUT):
            handle = await client.start_tool_task("slow", {"word": "c"})
            assert isinstance(handle, CoreTaskHandle) and handle.status == "working"
            await app.started.wait()
            await handle.cancel()
            assert handle.status == "cancelled"
            with pytest.raises(TaskCancelled):
                await handle.wait()
            again = client.task(str(handle.task_id))
            assert (await again.refresh())["status"] == "cancelled"


@pytest.mark.usefixtures("collect_garbage")
async def test_a_task_over_streamable_http_is_followed_to_its_result() -> None:
    """Over Streamable HTTP the task runs in the app's own tasks, past its request: our client follows it."""
    app = App()

    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    thread = ServerThread(McpAsgiApp(app.server))
    try:
        async with Client.connect_http(thread.url, protocol_version=V, elicitation=answer) as client:
            with anyio.fail_after(TIMEOUT):
                assert await client.tool_requires_task("must")
                result = await client.call_tool("must", {"word": "h"})
                assert result.content == [types.TextContent(text="must h")]
                asked = await client.call_tool("asks", {}, task=True)  # (its elicitation: past the call's answer)
                assert asked.content == [types.TextContent(text="hello Ada")]
    finally:
        thread.stop()


@pytest.mark.usefixtures("collect_garbage")
async def test_tasks_get_over_streamable_http_is_answered_in_json_not_on_a_stream() -> None:
    """A client that polls with tasks/get has said it wants no stream: its answer is a JSON body."""
    app = App()
    thread = ServerThread(McpAsgiApp(app.server))
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            session = await open_session(http, thread.url, V)
            call = {"name": "must", "arguments": {"word": "j"}, "task": {}}
            created = await session.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
            task_id = response_of(created, 1)["result"]["task"]["taskId"]
            got = await session.post({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": task_id}})
            assert got.status_code == 200 and got.headers["content-type"].startswith("application/json")
            assert got.json()["result"]["taskId"] == task_id
    finally:
        thread.stop()


async def test_task_operations_are_rate_limited_per_principal() -> None:
    """ "receivers SHOULD implement rate limiting on task operations": RateLimiter(methods=TASK_OPERATIONS,
    key=by_principal) refuses a principal's tasks/get, tasks/result, tasks/list and tasks/cancel past its burst with
    -31010 and data.retryAfter, until its bucket refills, on any of its sessions; another principal's bucket is its
    own, and making tasks
    is bounded by the tasks kept per client instead (tests/test_task_quotas.py)."""
    app = App()
    now = [0.0]
    limiter = RateLimiter(rate=0.5, burst=2, key=by_principal, methods=TASK_OPERATIONS, clock=lambda: now[0])
    app.server.add_middleware(limiter)

    async def code_of(client: Client, method: str, params: dict[str, Any]) -> int | None:
        try:
            await client.request(method, params)
        except RpcError as exc:
            if exc.code == -31010:
                assert exc.data == {"retryAfter": 2}
            return exc.code
        return None

    async with client_as(app, "alice") as alice, client_as(app, "alice") as again, client_as(app, "bob") as bob:
        with anyio.fail_after(TIMEOUT):
            task_id = (await call_task(alice, "must", {"word": "r"}))["task"]["taskId"]
            by_task = {"taskId": task_id}
            operations = [
                ("tasks/get", by_task),
                ("tasks/result", by_task),
                ("tasks/list", {}),
                ("tasks/cancel", by_task),
            ]
            for method, params in operations:
                now[0] += 10  # (the bucket is full again)
                codes = [await code_of(alice, method, params) for _ in range(3)]
                answered = -32602 if method == "tasks/cancel" else None  # (a finished task cannot be cancelled)
                assert codes == [answered, answered, -31010], method
                assert await code_of(bob, "tasks/list", {}) is None
            now[0] += 2  # (one token back)
            assert await code_of(alice, "tasks/get", by_task) is None
            assert await code_of(again, "tasks/get", by_task) == -31010  # (the principal's bucket, not the session's)


def test_where_no_requestor_is_identified_the_limitation_is_documented_with_what_holds_then() -> None:
    """ "receivers SHOULD document this limitation clearly": docs/tasks.md says where tasks are made without an
    identified requestor and what follows (anyone with the id can read or cancel the task), with what the server
    does then, each pinned here: no tasks.list and -32601 for tasks/list
    (test_tasks_list_is_declared_and_answered_only_where_the_transport_authenticates_the_requestor), ids of 128
    random bits (test_task_ids_are_the_servers_own_unique_and_unguessable)."""
    text = " ".join((Path(__file__).parent.parent / "docs" / "tasks.md").read_text(encoding="utf-8").split())
    assert (
        "Where tasks are made without an identified requestor (stdio, sockets, HTTP without an authorization policy),"
        " nothing binds a task to whoever made it: anyone who learns a task's id can read its result or cancel it."
    ) in text
    assert "The server then declares no `tasks.list` and refuses `tasks/list` (-32601)" in text
    assert "each id is 128 random bits" in text
