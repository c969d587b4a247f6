"""2025-11-25 basic/utilities/progress and cancellation, their sentences about tasks (the ids are in
conformance/spec/coverage/utilities.toml): a task's progress on the call's token, none after the task ended, and
a task-augmented call cancelled with ``tasks/cancel``. Our Server and Client over in-memory pairs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from helpers import TIMEOUT, raw_server, request_frame

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp.jsonrpc.streams import Outgoing
from jsonrpc_mcp.tasks import MemoryTaskStore, Tasks
from jsonrpc_mcp.transports.memory import MemoryMessageStream

pytestmark = pytest.mark.anyio

V = "2025-11-25"


class Gates:
    """A server whose task tools wait for the test at each step."""

    def __init__(self) -> None:
        self.server = Server("task-progress", "1", extensions=[Tasks(MemoryTaskStore(), ttl=60, poll_interval=0.01)])
        self.step = anyio.Event()
        self.end = anyio.Event()
        self.started = anyio.Event()
        self.lingered = anyio.Event()

        @self.server.tool(task="optional")
        async def stepwise(ctx: Context) -> str:
            """Progress once released, then the end once released again."""
            await self.step.wait()
            await ctx.report_progress(1, 2, "half way")
            await self.end.wait()
            return "done"

        @self.server.tool(task="optional")
        async def lingering(ctx: Context) -> str:
            """Waits; when stopped, still tries to report progress on its way out."""
            self.started.set()
            try:
                await anyio.sleep_forever()
            finally:
                with anyio.CancelScope(shield=True):
                    await ctx.report_progress(9, 10, "after the end")
                    self.lingered.set()
            return "never"  # pragma: no cover


def task_call(ident: int, name: str) -> bytes:
    return request_frame(
        ident, "tools/call", {"name": name, "arguments": {}, "task": {}, "_meta": {"progressToken": "tok"}}
    )


async def test_a_tasks_progress_goes_on_the_calls_token_after_the_task_was_answered() -> None:
    """ "the progressToken provided in the original request MUST continue to be used for progress notifications
    throughout the task's lifetime, even after the CreateTaskResult has been returned"; "Progress notifications for
    tasks MUST use the same progressToken that was provided in the initial task-augmented request"."""
    app = Gates()
    async with raw_server(app.server, version=V) as peer:
        created = await peer.call(task_call(1, "stepwise"))
        task_id = created["result"]["task"]["taskId"]
        app.step.set()  # progress only now, with the task's CreateTaskResult already out
        progress, _ = await peer.recv_until(lambda m: m.get("method") == "notifications/progress")
        app.end.set()
    assert progress["params"]["progressToken"] == "tok" and progress["params"]["progress"] == 1
    assert progress["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}


async def test_no_progress_once_the_task_has_ended() -> None:
    """ "Progress notifications for tasks MUST stop after the task reaches a terminal status": a task cancelled
    while its tool still reports progress on the way out sends none of it."""
    app = Gates()
    async with raw_server(app.server, version=V) as peer:
        created = await peer.call(task_call(1, "lingering"))
        task_id = created["result"]["task"]["taskId"]
        with anyio.fail_after(TIMEOUT):
            await app.started.wait()
        cancelled = await peer.call(request_frame(2, "tasks/cancel", {"taskId": task_id}))
        assert cancelled["result"]["status"] == "cancelled"
        with anyio.fail_after(TIMEOUT):
            await app.lingered.wait()
        after = [json.loads(frame) for frame in await peer.sync()]
    assert [m for m in after if m.get("method") == "notifications/progress"] == []


class Tap(MemoryMessageStream):
    """The client's end of a pair, remembering every frame the client sends."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.sent: list[dict[str, Any]] = []
        self.polled = anyio.Event()  #: a tasks/get was sent: the client follows the task it was answered

    async def send(self, frames: Sequence[Outgoing]) -> None:
        for out in frames:
            message = json.loads(out.frame)
            self.sent.append(message)
            if message.get("method") == "tasks/get":
                self.polled.set()
        await super().send(frames)


@pytest.mark.parametrize("when", ["creating", "following"])
async def test_a_task_augmented_call_is_cancelled_with_tasks_cancel_not_the_notification(when: str) -> None:
    """ "For task-augmented requests, the tasks/cancel request MUST be used instead of the notifications/cancelled
    notification": a call_tool(task=True) whose caller gives up asks the server to cancel the task, whether it
    was still waiting for the task to be created or already following it."""
    app = Gates()
    send_a, receive_a = anyio.create_memory_object_stream[bytes](64)
    send_b, receive_b = anyio.create_memory_object_stream[bytes](64)
    tap = Tap(send_b, receive_a)
    async with send_a, receive_a, send_b, receive_b, anyio.create_task_group() as tg:
        tg.start_soon(app.server.serve, MemoryMessageStream(send_a, receive_b))
        async with Client.connect(tap, protocol_version=V) as client:
            with anyio.fail_after(TIMEOUT):
                async with anyio.create_task_group() as calls:
                    calls.start_soon(lambda: client.call_tool("lingering", {}, task=True))
                    await (app.started if when == "creating" else tap.polled).wait()
                    calls.cancel_scope.cancel()
                await app.lingered.wait()  # the task was stopped
        tg.cancel_scope.cancel()
    (call,) = [m for m in tap.sent if m.get("method") == "tools/call"]
    assert [m["method"] for m in tap.sent if m.get("method") == "tasks/cancel"] == ["tasks/cancel"]
    cancelled = [m["params"]["requestId"] for m in tap.sent if m.get("method") == "notifications/cancelled"]
    assert call["id"] not in cancelled  # (a tasks/get cut short may be; the task's request never)
