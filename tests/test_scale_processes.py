"""Several server processes sharing a real Redis, as deployed: ``jsonrpc-mcp serve --http ... --workers N`` (one
socket, a supervisor and its workers), and separate ``serve`` processes behind a round-robin proxy
(conformance/round_robin.py) that sends every request of a client to the next process — the load balancer that
never sticks. Clients: ours and the official SDK's, in both eras."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from http_support import ServerThread
from redis_support import RedisProcess, prefix, redis_server, redis_url  # noqa: F401 (fixtures)

from jsonrpc_mcp import Client, types

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "conformance"))
from round_robin import RoundRobin

# Several worker processes: run once, in the `once` leg of .ci/run (make test-once), not per interpreter.
pytestmark = [pytest.mark.anyio, pytest.mark.once]

TIMEOUT = 60.0
URL_LINE = re.compile(rb"serving .* at (http://\S+)")

APP = '''
import os

from jsonrpc_mcp import Context, Server

server = Server("pids", "1.0")


@server.tool(inline=True)
def pid() -> int:
    """The process that answers."""
    return os.getpid()


@server.tool()
async def ask(ctx: Context) -> str:
    """Asks the client, and says which process asked."""
    answer = await ctx.elicit("Go on?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="go")
    return f"{answer.action} (asked by {os.getpid()})"
'''


@pytest.fixture
def app_file(tmp_path: Path) -> Path:
    path = tmp_path / "pids.py"
    path.write_text(APP)
    return path


class Served:
    """A ``jsonrpc-mcp serve`` process and the URL its banner names."""

    def __init__(self, proc: anyio.abc.Process, url: str) -> None:
        self.proc = proc
        self.url = url


async def serve(app_file: Path, *options: str) -> Served:
    proc = await anyio.open_process(
        [sys.executable, "-m", "jsonrpc_mcp", "serve", str(app_file), "--http", "127.0.0.1:0", *options],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        cwd=app_file.parent,
    )
    assert proc.stderr is not None
    seen = b""
    with anyio.fail_after(TIMEOUT):
        async for chunk in proc.stderr:
            seen += chunk
            found = URL_LINE.search(seen)
            if found:
                break
    assert found, seen.decode(errors="replace")
    return Served(proc, found.group(1).decode())


async def stop(served: Served) -> int | None:
    if served.proc.returncode is None:
        served.proc.send_signal(signal.SIGINT)
        with anyio.fail_after(TIMEOUT):
            await served.proc.wait()
    return served.proc.returncode


async def pid_of(url: str) -> int:
    """The pid of the process that answers a fresh connection (2026-07-28: one request)."""
    async with Client.connect_http(url) as client:
        result = await client.call_tool("pid", {})
    assert isinstance(result.structured_content, dict)
    return int(result.structured_content["result"])


async def gone(pid: int) -> None:
    """Returns when process ``pid`` has ended (a pidfd becomes readable)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await anyio.wait_readable(fd)
    finally:
        os.close(fd)


needs_pidfd = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfd_open is Linux's")


# --- serve --workers ---------------------------------------------------------------------------------------


def test_several_workers_without_a_backend_refuse_to_start(app_file: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jsonrpc_mcp", "serve", str(app_file), "--http", "127.0.0.1:0", "--workers", "2"],
        capture_output=True,
        timeout=TIMEOUT,
        env={**os.environ, "JSONRPC_MCP_BACKEND": ""},
    )
    assert done.returncode != 0
    assert b"--workers 2 needs --backend redis://" in done.stderr
    assert b"Traceback" not in done.stderr


@needs_pidfd
async def test_workers_share_one_port_are_replaced_when_they_die_and_stop_together(
    app_file: Path,
    redis_url: str,  # noqa: F811
) -> None:
    served = await serve(app_file, "--workers", "2", "--backend", redis_url)
    try:
        seen: set[int] = set()
        with anyio.fail_after(TIMEOUT):
            while len(seen) < 2:  # the kernel hands each new connection to either worker
                seen.add(await pid_of(served.url))
        assert served.proc.pid not in seen
        victim = min(seen)
        os.kill(victim, signal.SIGKILL)
        with anyio.fail_after(TIMEOUT):
            await gone(victim)
            while True:  # a replacement serves beside the survivor
                answered = await pid_of(served.url)
                if answered not in seen:
                    break
        workers = (seen - {victim}) | {answered}
        assert await stop(served) == 0
        for pid in workers:  # the supervisor returned after its workers ended
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        await stop(served)


@needs_pidfd
async def test_workers_stop_when_their_supervisor_is_killed(
    app_file: Path,
    redis_url: str,  # noqa: F811
) -> None:
    served = await serve(app_file, "--workers", "2", "--backend", redis_url)
    seen: set[int] = set()
    try:
        with anyio.fail_after(TIMEOUT):
            while len(seen) < 2:
                seen.add(await pid_of(served.url))
    finally:
        served.proc.kill()
        await served.proc.wait()
    with anyio.fail_after(TIMEOUT):
        for pid in seen:
            await gone(pid)


# --- separate processes behind a round-robin proxy -------------------------------------------------------------


@pytest.fixture
async def deployment(app_file: Path, redis_url: str, prefix: str) -> AsyncIterator[str]:  # noqa: F811
    """Two ``serve`` processes sharing the Redis, and the URL of a proxy that alternates between them."""
    env_prefix = {"JSONRPC_MCP_BACKEND": redis_url}
    os.environ.update(env_prefix)
    try:
        first = await serve(app_file)
        second = await serve(app_file)
    finally:
        del os.environ["JSONRPC_MCP_BACKEND"]
    base = [u.removesuffix("/mcp") for u in (first.url, second.url)]
    proxy = ServerThread(RoundRobin(base))
    try:
        yield proxy.url
    finally:
        proxy.stop()
        for served in (first, second):
            await stop(served)


@pytest.fixture
def answered_by() -> Iterator[list[str]]:
    """The upstream of every response our clients got through the proxy, in order (an httpx event hook)."""
    seen: list[str] = []
    yield seen


def watching(seen: list[str]) -> httpx.AsyncClient:
    async def note(response: httpx.Response) -> None:
        seen.append(response.headers.get("x-round-robin-upstream", "?"))

    return httpx.AsyncClient(timeout=TIMEOUT, event_hooks={"response": [note]})


async def test_handshake_era_sessions_of_our_client_move_between_processes_on_every_request(
    deployment: str, answered_by: list[str]
) -> None:
    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"ok": True})

    pids: set[int] = set()
    async with watching(answered_by) as http:
        for _ in range(5):
            async with Client.connect_http(
                deployment, protocol_version="2025-11-25", elicitation=elicit, http_options={"http_client": http}
            ) as client:
                assert [tool.name for tool in await client.list_tools()] == ["pid", "ask"]
                for _ in range(4):
                    result = await client.call_tool("pid", {})
                    assert isinstance(result.structured_content, dict)
                    pids.add(int(result.structured_content["result"]))
                asked = await client.call_tool("ask", {})
                assert isinstance(asked.content[0], types.TextContent)
                assert asked.content[0].text.startswith("accept (asked by ")
    assert len(pids) == 2  # both processes served the sessions
    assert answered_by.count("0") > 10 and answered_by.count("1") > 10  # each session's requests took turns


@pytest.fixture
def official_sdk() -> Any:
    """The official SDK, an interop peer; where it is absent (the lower-bound run) the test skips before any server
    is started."""
    return pytest.importorskip("mcp")


async def test_the_official_sdk_client_keeps_its_sessions_across_processes(official_sdk: Any, deployment: str) -> None:
    mcp = official_sdk
    from mcp.client.streamable_http import streamable_http_client

    for _ in range(5):
        async with mcp.Client(streamable_http_client(deployment), mode="legacy") as client:  # the handshake era
            tools = await client.list_tools()
            assert [tool.name for tool in tools.tools] == ["pid", "ask"]
            for _ in range(4):
                result = await client.call_tool("pid", {})
                assert not result.is_error
