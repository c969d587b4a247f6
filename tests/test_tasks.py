"""The tasks extension (io.modelcontextprotocol/tasks, SEP-2663), server side, through real transports: the app of
tests/fixtures/tasks_app.py as a stdio subprocess and under uvicorn, spoken to in raw 2026-07-28 frames.

Nothing sleeps: a task that works waits until the test calls the ``release`` tool; a test that waits for a task
to reach a status asks ``tasks/get`` until it has (each answer is a round trip), under a deadline.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from helpers import FIXTURES, TIMEOUT, RawPeer, init_frame, notification_frame, request_frame, serve_command
from http_support import HTTPX_GENERATORS, JSON_HEADERS, ServerThread, SseReader, response_of
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Context, Server
from jsonrpc_mcp.auth import AccessToken, InvalidToken, ProtectedResource
from jsonrpc_mcp.cli import load_app
from jsonrpc_mcp.tasks import MemoryTaskStore, Tasks
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.spawn import spawn

pytestmark = [pytest.mark.anyio, HTTPX_GENERATORS, pytest.mark.usefixtures("collect_garbage")]

APP = FIXTURES / "tasks_app.py"
V5 = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
WITH = {"elicitation": {}, "extensions": {TASKS: {}}}
WITHOUT: dict[str, Any] = {"elicitation": {}}
TERMINAL = ("completed", "failed", "cancelled")
_ids = itertools.count(1)
_keys = itertools.count(1)


def key(prefix: str = "k") -> str:
    return f"{prefix}-{next(_keys)}"


def meta(caps: dict[str, Any]) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": V5, "io.modelcontextprotocol/clientCapabilities": caps}


class Peer:
    """A raw 2026-07-28 client of the app, over stdio or HTTP: ``call`` returns the whole reply message."""

    def __init__(self, send: Callable[[str, dict[str, Any]], Any]) -> None:
        self._send = send

    async def call(self, method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] = WITH) -> Any:
        body = {**(params or {}), "_meta": meta(caps)}
        return await self._send(method, body)

    async def result(self, method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] = WITH) -> Any:
        reply = await self.call(method, params, caps)
        assert "result" in reply, reply
        return reply["result"]

    async def tool(self, name: str, caps: dict[str, Any] = WITH, **arguments: Any) -> Any:
        return await self.result("tools/call", {"name": name, "arguments": arguments}, caps)

    async def get(self, task_id: str) -> Any:
        return await self.result("tasks/get", {"taskId": task_id})

    async def until(self, task_id: str, *statuses: str, check: Callable[[Any], bool] | None = None) -> Any:
        """``tasks/get`` until the task's status is one of ``statuses`` (and ``check`` holds)."""
        with anyio.fail_after(TIMEOUT):
            while True:
                task = await self.get(task_id)
                if task["status"] in statuses and (check is None or check(task)):
                    return task
                assert task["status"] not in TERMINAL, task


@asynccontextmanager
async def stdio_app(env: dict[str, str] | None = None) -> AsyncIterator[tuple[Peer, RawPeer]]:
    async with spawn(serve_command(APP), env=env) as stream:
        raw = RawPeer(stream)

        async def send(method: str, params: dict[str, Any]) -> Any:
            return await raw.call(request_frame(next(_ids), method, params))

        yield Peer(send), raw


def http_headers(method: str, params: dict[str, Any]) -> dict[str, str]:
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": V5, "Mcp-Method": method}
    name = params.get("name") or params.get("taskId")
    if isinstance(name, str):
        headers["Mcp-Name"] = name
    return headers


def http_peer(http: httpx.AsyncClient, url: str, auth: str | None = None) -> Peer:
    async def send(method: str, params: dict[str, Any]) -> Any:
        ident = next(_ids)
        headers = http_headers(method, params)
        if auth is not None:
            headers["Authorization"] = f"Bearer {auth}"
        body = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
        response = await http.post(url, json=body, headers=headers)
        return response_of(response, ident)

    return Peer(send)


@pytest.fixture(scope="module")
def http_app() -> Any:
    thread = ServerThread(McpAsgiApp(load_app(str(APP))))
    yield thread
    thread.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT, limits=httpx.Limits(keepalive_expiry=2.0)) as client:
        yield client


@asynccontextmanager
async def peer_over(transport: str, http_app: ServerThread, http: httpx.AsyncClient) -> AsyncIterator[Peer]:
    if transport == "stdio":
        async with stdio_app() as (peer, _):
            yield peer
    else:
        yield http_peer(http, http_app.url)


TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


# --- a task from creation to its result -------------------------------------------------------------------------


@TRANSPORTS
async def test_a_task_tool_is_answered_at_once_with_its_task_and_finishes_in_the_background(
    transport: str, http_app: ServerThread, http: httpx.AsyncClient
) -> None:
    gate = key()
    async with peer_over(transport, http_app, http) as peer:
        created = await peer.tool("work", key=gate)
        assert created["resultType"] == "task"
        assert set(created) == {
            "resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs", "_meta",
        }  # fmt: skip
        assert created["status"] == "working" and len(created["taskId"]) >= 22  # 128 random bits
        assert created["createdAt"].endswith("Z") and created["createdAt"] == created["lastUpdatedAt"]
        assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 250
        task_id = created["taskId"]
        working = await peer.get(task_id)  # at once: the task exists before its handle is sent
        assert working["taskId"] == task_id and working["status"] == "working"
        assert working["resultType"] == "complete" and "result" not in working and "requestState" not in working
        assert (await peer.tool("release", key=gate))["content"][0]["text"] == f"released {gate}"
        done = await peer.until(task_id, "completed")
    assert done["result"]["content"] == [{"type": "text", "text": f"worked {gate} in task {task_id}"}]
    assert "_meta" not in done["result"]  # (no related-task key: the task id is at the root already)
    assert done["ttlMs"] >= 3_600_000 and done["lastUpdatedAt"] >= done["createdAt"]


@TRANSPORTS
async def test_progress_becomes_the_tasks_status_message_and_no_progress_notification_is_sent(
    transport: str, http_app: ServerThread, http: httpx.AsyncClient
) -> None:
    gate = key()
    async with peer_over(transport, http_app, http) as peer:
        created = await peer.tool("work", key=gate, steps=3)
        task = await peer.until(created["taskId"], "working", check=lambda t: "_meta" in t and "progress" in t["_meta"]
                                and t["_meta"]["progress"]["progress"] == 3)  # fmt: skip
        assert task["statusMessage"] == "step 3 of 3"
        assert task["_meta"]["progress"] == {"progress": 3, "total": 3}
        await peer.tool("release", key=gate)
        done = await peer.until(created["taskId"], "completed")
    assert "progress" not in done.get("_meta", {})  # (a finished task tells its result, not how far it got)


async def test_a_task_sends_nothing_on_the_request_stream() -> None:
    gate = key()
    async with stdio_app() as (peer, raw):
        created = await peer.tool("work", key=gate, steps=2)
        await peer.tool("release", key=gate)
        await peer.until(created["taskId"], "completed")
        stray = await raw.sync()  # everything the server sent that answered nothing
    assert stray == []


# --- where the extension is not negotiated ----------------------------------------------------------------------


@TRANSPORTS
async def test_without_the_extension_a_task_tool_answers_in_its_request_and_a_required_one_is_refused(
    transport: str, http_app: ServerThread, http: httpx.AsyncClient
) -> None:
    gate = key()
    async with peer_over(transport, http_app, http) as peer:
        await peer.tool("release", key=gate)
        plain = await peer.tool("work", WITHOUT, key=gate)
        assert plain["resultType"] == "complete" and "taskId" not in plain
        assert plain["content"][0]["text"].startswith(f"worked {gate} in task None")
        refused = await peer.call("tools/call", {"name": "must_be_a_task", "arguments": {"key": gate}}, WITHOUT)
        assert refused["error"]["code"] == -32021
        assert refused["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
        for method, params in (
            ("tasks/get", {"taskId": "x"}),
            ("tasks/update", {"taskId": "x", "inputResponses": {}}),
            ("tasks/cancel", {"taskId": "x"}),
        ):
            reply = await peer.call(method, params, WITHOUT)
            assert reply["error"]["code"] == -32021, (method, reply)
        listen = await peer.call("tools/call", {"name": "plain", "arguments": {}}, {"extensions": {"other/x": {}}})
        assert listen["result"]["content"][0]["text"] == "plain"


async def test_a_handshake_session_before_2025_11_25_never_sees_a_task() -> None:
    gate = key()
    async with spawn(serve_command(APP)) as stream:
        raw = RawPeer(stream)
        await raw.send(init_frame("2025-06-18", "init", {"extensions": {TASKS: {}}}))
        init, _ = await raw.recv_until(lambda m: m.get("id") == "init")
        await raw.send(notification_frame("notifications/initialized"))
        assert "extensions" not in init["result"]["capabilities"]
        await raw.call(request_frame(1, "tools/call", {"name": "release", "arguments": {"key": gate}}))
        required = await raw.call(
            request_frame(2, "tools/call", {"name": "must_be_a_task", "arguments": {"key": gate}})
        )
        get = await raw.call(request_frame(3, "tasks/get", {"taskId": "x"}))
    assert required["result"]["content"][0]["text"] == f"done {gate}"  # answered in its request
    assert get["error"]["code"] == -32601


@TRANSPORTS
async def test_the_2025_11_25_task_methods_do_not_exist_at_2026_07_28(
    transport: str, http_app: ServerThread, http: httpx.AsyncClient
) -> None:
    async with peer_over(transport, http_app, http) as peer:
        for method, params in (("tasks/result", {"taskId": "x"}), ("tasks/list", {})):
            assert (await peer.call(method, params))["error"]["code"] == -32601
        legacy = await peer.tool("plain", task={"ttl": 1000})  # (an argument, not the legacy param: refused)
        assert legacy["isError"] is True
        legacy = await peer.result("tools/call", {"name": "plain", "arguments": {}, "task": {"ttl": 1000}})
        assert legacy["resultType"] == "complete" and legacy["content"][0]["text"] == "plain"


# --- input, cancellation, failures -------------------------------------------------------------------------------


@TRANSPORTS
async def test_a_task_asks_for_input_and_goes_on_with_the_answer_of_tasks_update(
    transport: str, http_app: ServerThread, http: httpx.AsyncClient
) -> None:
    async with peer_over(transport, http_app, http) as peer:
        task_id = (await peer.tool("ask_name"))["taskId"]
        asking = await peer.until(task_id, "input_required")
        request = asking["inputRequests"]["name"]
        assert request["method"] == "elicitation/create" and request["params"]["message"] == "Your name?"
        ignored = await peer.result("tasks/update", {"taskId": task_id, "inputResponses": {"nope": {"x": 1}}})
        assert set(ignored) == {"resultType", "_meta"} and ignored["resultType"] == "complete"
        assert (await peer.get(task_id))["status"] == "input_required"
        answer = {"action": "accept", "content": {"name": "Ada"}}
        ack = await peer.result("tasks/update", {"taskId": task_id, "inputResponses": {"name": answer}})
        assert set(ack) == {"resultType", "_meta"}
        done = await peer.until(task_id, "completed")
        assert done["result"]["content"][0]["text"] == "Hello, Ada!"
        again = await peer.result("tasks/update", {"taskId": task_id, "inputResponses": {"name": answer}})
        assert again["resultType"] == "complete"  # (a key no longer outstanding is ignored)


@TRANSPORTS
async def test_several_inputs_may_be_answered_one_at_a_time(
    transport: str, http_app: ServerThread, http: httpx.AsyncClient
) -> None:
    async with peer_over(transport, http_app, http) as peer:
        task_id = (await peer.tool("ask_both"))["taskId"]
        await peer.until(task_id, "input_required", check=lambda t: len(t["inputRequests"]) == 2)
        await peer.result("tasks/update", {"taskId": task_id, "inputResponses": {"a": {"action": "accept", "content": {"name": "x"}}}})  # fmt: skip  # noqa: E501
        after = await peer.get(task_id)  # the update is seen by the next read
        assert after["status"] == "input_required" and list(after["inputRequests"]) == ["b"]
        await peer.result("tasks/update", {"taskId": task_id, "inputResponses": {"b": {"action": "accept", "content": {"name": "y"}}}})  # fmt: skip  # noqa: E501
        done = await peer.until(task_id, "completed")
    assert done["result"]["content"][0]["text"] == "x+y"


async def test_a_key_is_never_asked_twice_in_a_tasks_life() -> None:
    async with stdio_app() as (peer, _):
        task_id = (await peer.tool("ask_twice"))["taskId"]
        first = await peer.until(task_id, "input_required")
        assert list(first["inputRequests"]) == ["name"]
        await peer.result("tasks/update", {"taskId": task_id, "inputResponses": {"name": {"action": "accept", "content": {"name": "a"}}}})  # fmt: skip  # noqa: E501
        second = await peer.until(task_id, "input_required", check=lambda t: "name#2" in t["inputRequests"])
        assert list(second["inputRequests"]) == ["name#2"]
        await peer.result("tasks/update", {"taskId": task_id, "inputResponses": {"name#2": {"action": "accept", "content": {"name": "b"}}}})  # fmt: skip  # noqa: E501
        done = await peer.until(task_id, "completed")
    assert done["result"]["content"][0]["text"] == "a then b"


@TRANSPORTS
async def test_cancel_is_acknowledged_and_stops_the_work(
    transport: str, http_app: ServerThread, http: httpx.AsyncClient
) -> None:
    async with peer_over(transport, http_app, http) as peer:
        task_id = (await peer.tool("work", key=key()))["taskId"]
        ack = await peer.result("tasks/cancel", {"taskId": task_id})
        assert set(ack) == {"resultType", "_meta"} and ack["resultType"] == "complete"
        cancelled = await peer.until(task_id, "cancelled")
        assert "result" not in cancelled and "error" not in cancelled
        again = await peer.result("tasks/cancel", {"taskId": task_id})  # a finished task: the same ack
        assert again["resultType"] == "complete"
        for method in ("tasks/get", "tasks/cancel"):
            unknown = await peer.call(method, {"taskId": "no-such-task"})
            assert unknown["error"]["code"] == -32602, unknown
        unknown = await peer.call("tasks/update", {"taskId": "no-such-task", "inputResponses": {}})
        assert unknown["error"]["code"] == -32602


async def test_a_plain_function_on_a_worker_thread_reads_that_it_was_cancelled() -> None:
    async with stdio_app() as (peer, _):
        task_id = (await peer.tool("threaded", key=key()))["taskId"]
        await peer.result("tasks/cancel", {"taskId": task_id})
        done = await peer.until(*(task_id, "cancelled", "completed"))
    # It could not be interrupted; it saw ctx.cancelled and returned early: its answer is dropped, it is cancelled.
    assert done["status"] == "cancelled"


@TRANSPORTS
async def test_a_tool_error_completes_and_a_protocol_error_fails_the_task(
    transport: str, http_app: ServerThread, http: httpx.AsyncClient
) -> None:
    async with peer_over(transport, http_app, http) as peer:
        tool_error = await peer.until((await peer.tool("tool_error"))["taskId"], "completed")
        failed = await peer.until((await peer.tool("protocol_error"))["taskId"], "failed")
        crashed = await peer.until((await peer.tool("crash"))["taskId"], "completed")
    assert tool_error["result"]["isError"] is True
    assert tool_error["result"]["content"][0]["text"] == "the tool failed, and says so"
    assert failed["error"] == {"code": -32602, "message": "no such record", "data": {"table": "notes"}}
    assert failed["statusMessage"] == "no such record" and "result" not in failed
    # An exception of the tool is a tool error, as in a request (its detail logged, never sent)
    assert crashed["result"]["isError"] is True
    assert crashed["result"]["content"][0]["text"] == "Tool crash failed: an internal error occurred"
    assert "secret" not in json.dumps(crashed) and "abc123" not in json.dumps(crashed)


# --- input before the task: the handler starts it ----------------------------------------------------------------


@TRANSPORTS
async def test_a_handler_may_answer_at_once_or_ask_first_and_then_start_its_task(
    transport: str, http_app: ServerThread, http: httpx.AsyncClient
) -> None:
    async with peer_over(transport, http_app, http) as peer:
        quick = await peer.tool("in_handler", count=2)
        assert quick["resultType"] == "complete" and quick["content"][0]["text"] == "did 2 at once"
        count = next(_keys) + 100
        first = await peer.tool("in_handler", count=count)
        assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["confirm"]
        assert "taskId" not in first
        answer = {"confirm": {"action": "accept", "content": {"name": "Bo"}}}
        params = {"name": "in_handler", "arguments": {"count": count}, "inputResponses": answer}
        created = await peer.result("tools/call", {**params, "requestState": first["requestState"]})
        assert created["resultType"] == "task" and "requestState" not in created and "inputRequests" not in created
        assert created["statusMessage"] == f"doing {count} items"
        await peer.tool("release", key=f"in-handler-{count}")
        done = await peer.until(created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == f"did {count} for Bo"


# --- notifications on a listen stream ----------------------------------------------------------------------------


async def test_a_listen_stream_hears_of_the_tasks_it_asked_for_over_stdio() -> None:
    gate = key()
    async with stdio_app() as (peer, raw):
        task_id = (await peer.tool("ask_name_when_released", key=gate))["taskId"]
        listen = request_frame("listen", "subscriptions/listen", {
            "notifications": {"taskIds": [task_id, "not-a-task"]}, "_meta": meta(WITH),
        })  # fmt: skip
        await raw.send(listen)
        ack, _ = await raw.recv_until(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}

        def told(m: Any) -> bool:
            return m.get("method") == "notifications/tasks"

        # (frames are sent and read here one by one: a notification may come before the reply of a request)
        await raw.send(request_frame("go", "tools/call", {"name": "release", "arguments": {"key": gate}, "_meta": meta(WITH)}))  # fmt: skip  # noqa: E501
        asked, _ = await raw.recv_until(told)
        assert asked["params"]["status"] == "input_required" and asked["params"]["taskId"] == task_id
        assert asked["params"]["inputRequests"]["name"]["method"] == "elicitation/create"
        assert asked["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen"
        answer = {"name": {"action": "accept", "content": {"name": "Cy"}}}
        await raw.send(request_frame("update", "tasks/update", {"taskId": task_id, "inputResponses": answer, "_meta": meta(WITH)}))  # fmt: skip  # noqa: E501
        working, _ = await raw.recv_until(told)
        done, _ = await raw.recv_until(told)
        assert working["params"]["status"] == "working"
        assert done["params"]["status"] == "completed"
        assert done["params"]["result"]["content"][0]["text"] == "Hello, Cy!"
        refused = await peer.call("subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, WITHOUT)
        assert refused["error"]["code"] == -32021


async def test_a_listen_stream_hears_of_the_tasks_it_asked_for_over_http(
    http_app: ServerThread, http: httpx.AsyncClient
) -> None:
    gate = key()
    peer = http_peer(http, http_app.url)
    task_id = (await peer.tool("work", key=gate))["taskId"]
    body = {"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": [task_id]}, "_meta": meta(WITH)}}  # fmt: skip
    async with http.stream("POST", http_app.url, json=body, headers=http_headers("subscriptions/listen", {})) as resp:
        reader = SseReader(resp)
        ack = await reader.next_message()
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}
        await peer.tool("release", key=gate)
        note = await reader.next_message()
        await reader.aclose()
    assert note["method"] == "notifications/tasks" and note["params"]["status"] == "completed"
    assert note["params"]["result"]["content"][0]["text"].startswith(f"worked {gate}")


# --- HTTP: headers, bounds, owners, the end of the app -------------------------------------------------------------


async def test_over_http_a_task_method_needs_its_id_in_mcp_name(
    http_app: ServerThread, http: httpx.AsyncClient
) -> None:
    peer = http_peer(http, http_app.url)
    task_id = (await peer.tool("work", key=key()))["taskId"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": task_id, "_meta": meta(WITH)}}
    headers = {**http_headers("tasks/get", {}), "Mcp-Name": "another-task"}
    response = await http.post(http_app.url, json=body, headers=headers)
    assert response.status_code == 400 and response.json()["error"]["code"] == -32020
    await peer.result("tasks/cancel", {"taskId": task_id})


async def test_a_client_gets_so_many_tasks_working_and_a_required_one_more_is_refused() -> None:
    async with stdio_app({"TASKS_MAX": "2"}) as (peer, _):
        gate = key()
        for _ in range(2):
            await peer.tool("work", key=gate)
        refused = await peer.call("tools/call", {"name": "must_be_a_task", "arguments": {"key": gate}})
        assert refused["error"]["code"] == -31010 and "Too many tasks" in refused["error"]["message"]
        await peer.tool("release", key=gate)


async def test_a_task_optional_tool_runs_in_its_request_when_no_task_can_be_started() -> None:
    async with stdio_app({"TASKS_MAX": "1"}) as (peer, _):
        held, free = key(), key()
        assert (await peer.tool("work", key=held))["resultType"] == "task"
        await peer.tool("release", key=free)
        answered = await peer.tool("work", key=free)  # (no room for a second task: answered in the request)
        assert answered["content"] == [{"type": "text", "text": f"worked {free} in task None"}]
        assert "taskId" not in answered
        await peer.tool("release", key=held)


async def test_when_a_clients_quota_is_full_its_oldest_finished_task_gives_way() -> None:
    async with stdio_app({"TASKS_MAX": "2"}) as (peer, _):
        finished = []
        for _ in range(2):
            gate = key()
            finished.append((await peer.tool("work", key=gate))["taskId"])
            await peer.tool("release", key=gate)
            await peer.until(finished[-1], "completed")
        newest = await peer.tool("work", key=(gate := key()))
        assert newest["resultType"] == "task"
        gone = await peer.call("tasks/get", {"taskId": finished[0]})
        assert gone["error"]["code"] == -32602  # the oldest finished result made room
        assert (await peer.get(finished[1]))["status"] == "completed"
        await peer.tool("release", key=gate)


async def test_a_request_for_input_unanswered_for_input_timeout_fails_in_the_tool() -> None:
    async with stdio_app({"TASKS_INPUT_TIMEOUT": "0.2"}) as (peer, _):
        task_id = (await peer.tool("ask_name"))["taskId"]
        asking = await peer.until(task_id, "input_required")
        assert list(asking["inputRequests"]) == ["name"]  # never answered: the default (the ttl, 1 h) would hang
        done = await peer.until(task_id, "completed", "failed")
    assert done["status"] == "completed" and done["result"]["isError"] is True, done
    assert done["result"]["content"][0]["text"].endswith("did not answer the task's input request within 0.2 s")


def test_a_wrong_input_timeout_or_store_is_refused_when_the_extension_is_made(tmp_path: Path) -> None:
    for timeout in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="input_timeout must be positive"):
            Tasks(input_timeout=timeout)
    for store in (str(tmp_path / "tasks.db"), MemoryTaskStore, {}):
        with pytest.raises(TypeError, match="store must be a task store"):
            Tasks(store)  # type: ignore[arg-type]
    for setting in ({"ttl": 0}, {"ttl": float("nan")}, {"poll_interval": -1}, {"max_per_client": 0}, {"max_tasks": 0}):
        (name,) = setting
        with pytest.raises(ValueError, match=f"^{name} must be positive, not "):
            Tasks(**setting)
    assert Tasks(input_timeout=5).input_timeout == 5 and Tasks(ttl=60).input_timeout == 60


class Tokens:
    """A token verifier: the token is the subject's name."""

    async def verify(self, token: str) -> AccessToken:
        if token not in ("alice", "bob"):
            raise InvalidToken()
        return AccessToken(subject=token, client_id="cli", audience=("http://127.0.0.1/mcp",))


async def test_a_task_belongs_to_whoever_created_it(http: httpx.AsyncClient) -> None:
    server = load_app(str(APP))
    policy = ProtectedResource(
        resource="http://127.0.0.1/mcp", authorization_servers=["https://as.example"], verifier=Tokens()
    )
    thread = ServerThread(McpAsgiApp(server, http_policy=policy))
    try:
        alice = http_peer(http, thread.url, auth="alice")
        bob = http_peer(http, thread.url, auth="bob")
        gate = key()
        task_id = (await alice.tool("work", key=gate))["taskId"]
        assert (await alice.get(task_id))["status"] == "working"
        for method, params in (
            ("tasks/get", {"taskId": task_id}),
            ("tasks/cancel", {"taskId": task_id}),
            ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
        ):
            reply = await bob.call(method, params)
            assert reply["error"]["code"] == -32602, reply  # as if there were no such task
        await alice.tool("release", key=gate)
        assert (await alice.until(task_id, "completed"))["status"] == "completed"
    finally:
        thread.stop()


async def test_the_tasks_of_an_app_that_stops_are_failed(http: httpx.AsyncClient) -> None:
    store = MemoryTaskStore()
    server = Server("stops", extensions=[Tasks(store)])
    started = anyio.Event()

    @server.tool(task="required")
    async def forever(ctx: Context) -> str:
        started.set()
        await anyio.sleep_forever()
        return "never"

    thread = ServerThread(McpAsgiApp(server))
    try:
        task_id = (await http_peer(http, thread.url).tool("forever"))["taskId"]
    finally:
        thread.stop()
    record = await store.get(task_id)
    assert record is not None and record.status == "failed"
    assert record.error == {"code": -32603, "message": "The server stopped while the task was running"}


# --- TTL and the in-memory bounds (one process: a clock the test moves) -----------------------------------------


async def test_a_finished_task_is_kept_its_ttl_then_gone() -> None:
    now = [1_000_000.0]
    server = Server("ttl", extensions=[Tasks(MemoryTaskStore(clock=lambda: now[0]), ttl=60)])

    @server.tool(task="optional")
    async def quick() -> str:
        return "quick"

    store = server.extensions[TASKS].store  # type: ignore[attr-defined]
    async with spawn_client(server) as call:
        task = await call("tools/call", {"name": "quick", "arguments": {}})
        task_id = task["taskId"]
        with anyio.fail_after(TIMEOUT):
            while (await call("tasks/get", {"taskId": task_id}))["status"] != "completed":
                pass
        record = await store.get(task_id)
        assert record is not None and record.expires_at is not None
        now[0] = record.expires_at - 0.001
        assert (await call("tasks/get", {"taskId": task_id}))["status"] == "completed"
        now[0] = record.expires_at
        gone = await call("tasks/get", {"taskId": task_id}, error=True)
        assert gone["code"] == -32602
        assert len(store) == 0


@asynccontextmanager
async def spawn_client(server: Server) -> AsyncIterator[Callable[..., Any]]:
    """Raw 2026-07-28 requests to an in-process server declaring the tasks extension."""
    from helpers import raw_server

    async with raw_server(server) as peer:

        async def call(method: str, params: dict[str, Any], error: bool = False) -> Any:
            reply = await peer.call(request_frame(next(_ids), method, {**params, "_meta": meta(WITH)}))
            return reply["error"] if error else reply["result"]

        yield call


# --- SQLite: a restart, and one process per file -------------------------------------------------------------------


async def test_a_task_running_when_the_process_died_reads_as_failed_after_a_restart(tmp_path: Path) -> None:
    env = {"TASKS_DB": str(tmp_path / "tasks.db")}
    async with stdio_app(env) as (peer, raw):
        working = (await peer.tool("work", key=key()))["taskId"]
        gate = key()
        finished = (await peer.tool("work", key=gate))["taskId"]
        await peer.tool("release", key=gate)
        await peer.until(finished, "completed")
        os.kill(raw.stream.pid, signal.SIGKILL)  # type: ignore[attr-defined]
    async with stdio_app(env) as (peer, _):
        died = await peer.get(working)
        kept = await peer.get(finished)
    assert died["status"] == "failed"
    assert died["statusMessage"] == "The server stopped while the task was running"
    assert died["error"] == {"code": -32603, "message": "The server stopped while the task was running"}
    assert kept["status"] == "completed" and kept["result"]["content"][0]["text"].startswith(f"worked {gate}")


async def test_a_second_process_cannot_take_a_task_file_another_one_holds(tmp_path: Path) -> None:
    env = {"TASKS_DB": str(tmp_path / "tasks.db")}
    async with stdio_app(env) as (peer, _):
        await peer.tool("plain")
        second = await anyio.run_process([*serve_command(APP)], env={**os.environ, **env}, input=b"", check=False)
    assert second.returncode != 0
    message = second.stderr.decode()
    assert "in use by another process" in message and "Traceback" not in message
