"""2025-11-25 tasks, our client's side of the page's SHOULDs and MUSTs for requestors: cursors of ``tasks/list``
passed back untouched, nothing asked of a task after it was cancelled, a status notification that wakes the poll,
and messages of a task that reach the client on the session's GET stream.

Scripted servers speak raw frames over in-memory pairs; the rest is our Server (in memory, or over Streamable
HTTP). Nothing sleeps: tools wait on events the tests set.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from helpers import TIMEOUT, RawPeer
from http_support import ServerThread
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Client, Context, Server, types
from jsonrpc_mcp.errors import MethodNotFound
from jsonrpc_mcp.tasks import MemoryTaskStore, TaskCancelled, Tasks
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.memory import memory_pair

pytestmark = pytest.mark.anyio

V = "2025-11-25"
TASKS = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def task(task_id: str, status: str = "working") -> dict[str, Any]:
    return {
        "taskId": task_id,
        "status": status,
        "createdAt": "2026-07-28T10:00:00.000Z",
        "lastUpdatedAt": "2026-07-28T10:00:00.000Z",
        "ttl": 60000,
        "pollInterval": 10,
    }


@asynccontextmanager
async def scripted(
    answer: Callable[[dict[str, Any]], dict[str, Any]], capabilities: dict[str, Any] | None = None
) -> AsyncIterator[tuple[Client, list[dict[str, Any]]]]:
    """Our client, connected to a 2025-11-25 server that answers each request with ``answer(request)`` (a result,
    or ``{"error": ...}``); yields the client and every request it sent."""
    ours, theirs = memory_pair()
    peer = RawPeer(theirs)
    seen: list[dict[str, Any]] = []
    caps = {"tools": {}, "tasks": TASKS} if capabilities is None else capabilities

    async def serve() -> None:
        while True:
            request = await peer.recv_json(timeout=60)
            if "id" not in request:
                continue
            seen.append(request)
            if request["method"] == "initialize":
                reply: dict[str, Any] = {
                    "result": {"protocolVersion": V, "capabilities": caps, "serverInfo": {"name": "s", "version": "1"}}
                }
            else:
                out = answer(request)
                reply = out if "error" in out else {"result": out}
            await peer.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], **reply}).encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        async with Client.connect(ours, protocol_version=V) as client:
            yield client, seen
        tg.cancel_scope.cancel()
    await ours.aclose()
    await theirs.aclose()


# Odd, but the server's own: not base64, with spaces, slashes, a quote and characters outside ASCII.
ODD_CURSORS = ['  page 2 / "of 3" ü=', "3?&x=%20\u2603", ""]


async def test_tasks_list_cursors_are_passed_back_as_the_server_gave_them() -> None:
    """ "Requestors MUST treat cursors as opaque tokens and not attempt to parse or modify them": each cursor goes
    back byte for byte, an empty string included (it is a cursor, not the end)."""
    pages = {
        None: ([task("a"), task("b")], ODD_CURSORS[0]),
        ODD_CURSORS[0]: ([task("c")], ODD_CURSORS[1]),
        ODD_CURSORS[1]: ([], ODD_CURSORS[2]),
        ODD_CURSORS[2]: ([task("d", "completed")], None),
    }

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        tasks, nxt = pages[(request.get("params") or {}).get("cursor")]
        return {"tasks": tasks, **({"nextCursor": nxt} if nxt is not None else {})}

    async with scripted(answer) as (client, seen):
        with anyio.fail_after(TIMEOUT):
            first = await client.list_tasks()
            assert [t.task_id for t in first.tasks] == ["a", "b"] and first.next_cursor == ODD_CURSORS[0]
            second = await client.list_tasks(first.next_cursor)
            assert [t.task_id for t in second.tasks] == ["c"]
            every = [t.task_id async for t in client.iter_tasks()]
    assert every == ["a", "b", "c", "d"]
    sent = [(r.get("params") or {}).get("cursor", None) for r in seen if r["method"] == "tasks/list"]
    assert sent == [None, ODD_CURSORS[0], None, *ODD_CURSORS]


async def test_tasks_list_needs_a_server_that_declares_it() -> None:
    async with scripted(lambda request: {}, {"tools": {}, "tasks": {"cancel": {}}}) as (client, seen):
        with pytest.raises(MethodNotFound, match=r"tasks\.list"):
            await client.list_tasks()
        with pytest.raises(MethodNotFound, match=r"tasks\.list"):
            [t async for t in client.iter_tasks()]
    assert [r["method"] for r in seen] == ["initialize"]


async def test_after_cancelling_a_task_the_client_asks_nothing_more_of_it(caplog: pytest.LogCaptureFixture) -> None:
    """ "Requestors SHOULD NOT rely on cancelled tasks being retained ... and should retrieve any needed information
    before cancelling": the handle keeps the task as tasks/cancel answered it, and waiting on it raises
    TaskCancelled without another request, from a server that forgets a cancelled task at once. And (the page's
    "Requestors SHOULD: log task lifecycle events ..., track task IDs") each change of the task's status is
    logged with its id."""
    forgotten: set[str] = set()

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        method, params = request["method"], request.get("params") or {}
        if method == "tools/list":
            return {
                "tools": [{"name": "long", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}]
            }
        if method == "tools/call":
            return {"task": task("t-1")}
        if params.get("taskId") in forgotten:
            return {"error": {"code": -32602, "message": "Failed to retrieve task: Task not found"}}
        if method == "tasks/cancel":
            forgotten.add(params["taskId"])
            return {**task(params["taskId"], "cancelled"), "statusMessage": "stopped"}
        return task(params["taskId"])

    caplog.set_level("DEBUG", logger="jsonrpc_mcp.mcp.task_client")
    async with scripted(answer) as (client, seen):
        with anyio.fail_after(TIMEOUT):
            handle = await client.start_tool_task("long", {})
            assert (await handle.refresh())["status"] == "working"
            await handle.cancel()
            assert handle.status == "cancelled" and handle.status_message == "stopped"
            with pytest.raises(TaskCancelled):
                await handle.wait()
            await handle.cancel()  # (done already: nothing is sent)
    methods = [r["method"] for r in seen]
    assert methods[methods.index("tasks/cancel") :] == ["tasks/cancel"]
    logged = [r.getMessage() for r in caplog.records if r.name == "jsonrpc_mcp.mcp.task_client"]
    assert logged == ["task t-1 of tools/call: working", "task t-1: working -> cancelled"]


def slow_server(poll_interval: float) -> tuple[Server, anyio.Event]:
    release = anyio.Event()
    server = Server("core-tasks", "1", extensions=[Tasks(MemoryTaskStore(), ttl=60, poll_interval=poll_interval)])

    @server.tool(task="optional")
    async def slow() -> str:
        """Waits until released."""
        await release.wait()
        return "slow done"

    @server.tool(task="optional")
    async def asks(ctx: Context) -> str:
        """Asks the client to go on."""
        answer = await ctx.elicit("Go on?", {"type": "object", "properties": {}})
        return f"went on: {answer.action}"

    return server, release


async def test_a_status_notification_wakes_the_poll_of_its_task_at_once() -> None:
    """The server suggests polling once an hour; the task's notifications/tasks/status for its end has the client
    read it at once (the poll stays the fallback: tests/test_core_tasks.py follows a task without them)."""
    server, release = slow_server(poll_interval=3600)
    async with Client.connect_server(server, protocol_version=V) as client:
        with anyio.fail_after(TIMEOUT):
            handle = await client.start_tool_task("slow", {})
            assert handle.poll_interval == 3600
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: handle.wait())
                release.set()
            assert handle.status == "completed"
    assert client._task_events == {}  # (nothing kept of a task no longer followed)


@pytest.mark.usefixtures("collect_garbage")
async def test_a_tasks_status_and_request_for_input_reach_the_client_on_the_get_stream() -> None:
    """ "clients SHOULD expect messages to be delivered on any SSE stream, including the HTTP GET stream": once
    tools/call is answered (JSON) and while no request of the client is open, the task's status notifications and
    its elicitation can only come on the session's GET stream, and they reach the client; and all of it over
    Streamable HTTP as its transport page says (MUST continue to comply with it)."""
    server, _ = slow_server(poll_interval=3600)  # (served in uvicorn's thread: its tool waits on nothing of ours)
    heard: list[str] = []
    asked = anyio.Event()
    input_required = anyio.Event()

    async def on_notification(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tasks/status":
            heard.append(params["status"])
            if params["status"] == "input_required":
                input_required.set()

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        return types.ElicitResult(action="accept", content={})

    thread = ServerThread(McpAsgiApp(server))
    try:
        options: dict[str, Any] = {"elicitation": elicit, "on_notification": on_notification}
        async with Client.connect_http(thread.url, protocol_version=V, **options) as client:
            with anyio.fail_after(TIMEOUT):
                handle = await client.start_tool_task("asks", {})
                await asked.wait()
                await input_required.wait()
                result = await handle.wait()
    finally:
        thread.stop()
    assert result.content == [types.TextContent(text="went on: accept")]
    assert heard[0] == "input_required" and heard[-1] == "completed"
