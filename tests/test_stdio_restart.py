"""A stdio server process that exits while the client holds the connection is started again (2026-07-28: "If the
server process exits unexpectedly, the client SHOULD restart it"; decision 105, every era): what it was asked fails
naming its exit status, the next request goes to the new process, the handshake era initializes it and subscribes
again, a listen stream opens itself again; a server that keeps exiting ends the connection, saying why; with
``restart=False``, and when the client closes, nothing is started again."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import FIXTURES, PYTHON, RawPeer, request_frame, without_loop_processes

from jsonrpc_mcp import Client, ConnectionClosed
from jsonrpc_mcp.jsonrpc.dispatch import Dispatcher
from jsonrpc_mcp.jsonrpc.wire import Request
from jsonrpc_mcp.transports.memory import memory_pair
from jsonrpc_mcp.transports.stdio import RestartingProcessStream, RestartPolicy

pytestmark = pytest.mark.anyio

RESTARTS = [PYTHON, str(FIXTURES / "restarts.py")]
HANDSHAKE = {"protocol_version": "2025-11-25"}


@pytest.fixture(params=["loop", "threads"])
def children(request: pytest.FixtureRequest) -> Iterator[str]:
    """How ``spawn`` runs its child: by the event loop, or by subprocess with its pipes on worker threads."""
    with without_loop_processes() if request.param == "threads" else nullcontext():
        yield str(request.param)


@asynccontextmanager
async def restarting(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[Client, Path]]:
    """A client of ``restarts.py`` and the journal its processes write."""
    journal = tmp_path / "journal"
    journal.touch()
    env = {"RESTARTS_JOURNAL": str(journal), **options.pop("env", {})}
    with anyio.fail_after(20):
        async with Client.connect_stdio(RESTARTS, env=env, stderr=subprocess.DEVNULL, **options) as client:
            yield client, journal


def entries(journal: Path) -> list[tuple[str, str]]:
    """The journal as (pid, method), in order."""
    return [tuple(line.split(" ", 1)) for line in journal.read_text().splitlines()]  # type: ignore[misc]


async def pid_of(client: Client) -> int:
    result = await client.call_tool("pid", {})
    assert isinstance(result.structured_content, dict)
    return int(result.structured_content["result"])


async def test_a_handshake_era_server_that_exits_is_started_again_and_initialized_with_its_subscriptions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, children: str
) -> None:
    caplog.set_level(logging.INFO, "jsonrpc_mcp")
    async with restarting(tmp_path, **HANDSHAKE) as (client, journal):
        await client.subscribe("note://one")
        await client.set_logging_level("warning")
        first = await pid_of(client)
        with pytest.raises(ConnectionClosed) as caught:
            await client.call_tool("crash", {"status": 3})
        assert (
            caught.value.message
            == "the server process exited with status 3 (started again) before answering tools/call"
        )
        second = await pid_of(client)  # (made while the new process starts: it waits for the handshake)
        assert second != first
        assert client.protocol_version == "2025-11-25"
        stream = client.stream
        assert isinstance(stream, RestartingProcessStream) and stream.restarts == 1 and stream.pid == second
    assert entries(journal) == [
        (str(first), "initialize"),
        (str(first), "resources/subscribe"),
        (str(first), "logging/setLevel"),
        (str(second), "initialize"),  # the same capabilities and client info, then what the session had set up
        (str(second), "logging/setLevel"),
        (str(second), "resources/subscribe"),
    ]
    said = [
        r.getMessage() for r in caplog.records if r.name == "jsonrpc_mcp.transports.spawn" and r.levelname == "WARNING"
    ]
    assert said == ["the server process exited with status 3 while connected: starting it again in 0.1 s (restart 1)"]


async def test_a_stateless_server_is_started_again_without_a_handshake_and_a_listen_stream_reopens(
    tmp_path: Path,
) -> None:
    acknowledged = 0
    reopened = anyio.Event()

    def on_notification(method: str, params: dict[str, Any]) -> None:
        nonlocal acknowledged
        if method == "notifications/subscriptions/acknowledged":
            acknowledged += 1
            if acknowledged == 2:
                reopened.set()

    async with restarting(tmp_path, on_notification=on_notification) as (client, journal):
        assert client.stateless
        async with client.listen(resources=True) as wanted:
            assert wanted == {"resourcesListChanged": True}
            first = await pid_of(client)
            with pytest.raises(ConnectionClosed) as caught:
                await client.call_tool("crash", {"status": 0})  # (a zero status is no less unexpected)
            assert caught.value.message.startswith("the server process exited with status 0 (started again)")
            second = await pid_of(client)
            await reopened.wait()
        assert second != first
    assert entries(journal) == [
        (str(first), "server/discover"),
        (str(first), "subscriptions/listen"),
        (str(second), "subscriptions/listen"),  # no discover, no initialize: the era has no handshake
    ]


async def test_a_server_that_keeps_exiting_ends_the_connection_after_the_bound(tmp_path: Path) -> None:
    policy = RestartPolicy(max_restarts=2, backoff=0.001)
    env = {"RESTARTS_ONCE": str(tmp_path / "started")}  # every process after the first exits at once, status 5
    async with restarting(tmp_path, restart=policy, env=env, **HANDSHAKE) as (client, journal):
        with pytest.raises(ConnectionClosed):
            await client.call_tool("crash", {"status": 3})
        said = []
        for _ in range(3):  # (a request made while a process that exits at once starts fails with it)
            with pytest.raises(ConnectionClosed) as caught:
                await client.list_tools()
            said.append(caught.value.message)
            if "not started again" in said[-1]:
                break
        assert said[-1] == (
            "the server process exited with status 5 (after 2 restarts within 60 s: not started again) before "
            "answering tools/list"
        )
        assert set(said[:-1]) <= {"the server process exited with status 5 (started again) before answering tools/list"}
        stream = client.stream
        assert isinstance(stream, RestartingProcessStream) and stream.restarts == 2
        with pytest.raises(ConnectionClosed):
            await client.list_tools()  # (and stays ended)
    assert [method for _, method in entries(journal)] == ["initialize"]  # (those that exit at once never answer)


async def test_restart_false_keeps_the_connection_ended(tmp_path: Path) -> None:
    async with restarting(tmp_path, restart=False, **HANDSHAKE) as (client, journal):
        with pytest.raises(ConnectionClosed) as caught:
            await client.call_tool("crash", {"status": 3})
        assert caught.value.message == "the server process exited with status 3 before answering tools/call"
        with pytest.raises(ConnectionClosed):
            await client.list_tools()
    assert [method for _, method in entries(journal)] == ["initialize"]


async def test_closing_the_client_never_starts_the_server_again(tmp_path: Path) -> None:
    async with restarting(tmp_path, **HANDSHAKE) as (client, journal):
        await client.aclose()  # the server sees its stdin end and exits: we caused it
        with pytest.raises(ConnectionClosed):
            await client.list_tools()
        stream = client.stream
        assert isinstance(stream, RestartingProcessStream) and stream.restarts == 0
    assert [method for _, method in entries(journal)] == ["initialize"]
    (tmp_path / "again").mkdir()
    async with restarting(tmp_path / "again", **HANDSHAKE) as (client, journal):
        pass  # leaving the block closes its stdin too
    stream = client.stream
    assert isinstance(stream, RestartingProcessStream) and stream.restarts == 0
    assert [method for _, method in entries(journal)] == ["initialize"]


def test_the_policy_refuses_bounds_that_could_not_be_meant_and_doubles_its_wait() -> None:
    policy = RestartPolicy()
    assert [policy.delay(n) for n in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    for wrong in ({"max_restarts": 0}, {"max_restarts": True}, {"window": 0}, {"backoff": -1.0}, {"max_backoff": "5"}):
        with pytest.raises(ValueError):
            RestartPolicy(**wrong)  # type: ignore[arg-type]


async def test_a_dispatcher_whose_peer_is_replaced_fails_what_waited_and_cancels_what_answered_the_old_one() -> None:
    """``MessageStream.peer_replaced``, which the dispatcher sets: our requests waiting for the old peer fail with
    ``ConnectionClosed`` (never sent again), the handler of the old peer's request is cancelled and never answered,
    and the connection goes on with the new peer."""
    started, cancelled = anyio.Event(), anyio.Event()

    def handler(request: Request, context: Any) -> Any:
        if request.method == "ping":
            return b"{}"
        return slow()

    async def slow() -> bytes:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("never answered")  # pragma: no cover

    ours, theirs = memory_pair(16)
    dispatcher = Dispatcher(ours, handler)
    peer = RawPeer(theirs)
    failed: list[ConnectionClosed] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            await peer.send(request_frame(1, "slow"))
            await started.wait()

            async def call() -> None:
                with pytest.raises(ConnectionClosed) as caught:
                    await dispatcher.request("pending")
                failed.append(caught.value)

            tg.start_soon(call)
            assert (await peer.recv_json())["method"] == "pending"
            assert ours.peer_replaced is not None
            ours.peer_replaced()
            await cancelled.wait()
            answered: list[bytes] = []
            came_back = anyio.Event()

            async def again() -> None:
                answered.append(bytes(await dispatcher.request("again")))
                came_back.set()

            tg.start_soon(again)
            assert await peer.sync() == [request_frame(2, "again")]  # (and no answer to the old peer's request 1)
            await peer.send(b'{"jsonrpc":"2.0","id":2,"result":{"new":true}}')
            await came_back.wait()
            assert await peer.sync() == []
            assert answered == [b'{"new":true}'] and not dispatcher.closed
            tg.cancel_scope.cancel()
    await ours.aclose()
    await theirs.aclose()
    assert len(failed) == 1


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no signals on this platform")
async def test_a_server_killed_by_a_signal_is_started_again(tmp_path: Path) -> None:
    async with restarting(tmp_path) as (client, _):
        first = await pid_of(client)
        running = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def kill_once_running() -> None:
                await running.wait()
                os.kill(first, signal.SIGKILL)

            tg.start_soon(kill_once_running)
            with pytest.raises(ConnectionClosed) as caught:
                await client.call_tool("hang", {}, progress=lambda *_: running.set())
        assert caught.value.message == (
            "the server process was killed by SIGKILL (started again) before answering tools/call"
        )
        assert await pid_of(client) != first
