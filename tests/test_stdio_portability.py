"""stdio where the event loop cannot poll pipes or run child processes (Windows), exercised here by forcing it;
the environment a spawned server gets; how a server that dies is reported; how a child is stopped without
process groups.

The whole interaction suite also runs over such a stdio (``stdio-threads`` in ``test_transports.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import FIXTURES, PYTHON, without_loop_processes

from jsonrpc_mcp import Client, ConnectionClosed
from jsonrpc_mcp.jsonrpc.streams import REQUEST, Outgoing
from jsonrpc_mcp.transports import pipes
from jsonrpc_mcp.transports import spawn as spawn_module
from jsonrpc_mcp.transports.ndjson import PIPE_SIZE, FdByteStream
from jsonrpc_mcp.transports.pipes import ThreadedPipeStream, fd_polling_works, pipe_byte_stream
from jsonrpc_mcp.transports.stdio import DEFAULT_ENV_VARS, ProcessStream, spawn

pytestmark = pytest.mark.anyio

DIES = [PYTHON, str(FIXTURES / "dies.py")]
HANDSHAKE = {"protocol_version": "2025-11-25"}


@pytest.fixture(params=["loop", "threads"])
def children(request: pytest.FixtureRequest) -> Iterator[str]:
    """How ``spawn`` runs its child: by the event loop, or by subprocess with its pipes on worker threads."""
    with without_loop_processes() if request.param == "threads" else nullcontext():
        yield str(request.param)


@contextmanager
def pipe_pair() -> Iterator[tuple[ThreadedPipeStream, int, int]]:
    """A ThreadedPipeStream over two fresh pipes, and the ends the test plays the peer with: (stream, the fd to
    write what the stream reads, the fd to read what the stream writes)."""
    ours_r, peer_w = os.pipe()
    peer_r, ours_w = os.pipe()
    stream = ThreadedPipeStream(ours_r, ours_w, close_fds=True)
    try:
        yield stream, peer_w, peer_r
    finally:
        for fd in (peer_w, peer_r):
            try:
                os.close(fd)
            except OSError:
                pass


# --- the threaded byte stream ---------------------------------------------------------------------------------


async def test_a_threaded_pipe_stream_reads_and_writes_both_ways() -> None:
    with pipe_pair() as (stream, peer_w, peer_r):
        os.write(peer_w, b"hello")
        assert await stream.receive(3) == b"hel"  # what is left over stays for the next receive
        assert await stream.receive() == b"lo"
        big = os.urandom(3 * 1024 * 1024)  # far more than a pipe holds: written while the peer reads
        got = bytearray()

        def read_all() -> None:
            while len(got) < len(big):
                got.extend(os.read(peer_r, 1 << 20))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, read_all)
                await stream.send(big)
        assert bytes(got) == big
        os.close(peer_w)
        with pytest.raises(anyio.EndOfStream):
            await stream.receive()
        with pytest.raises(anyio.EndOfStream):  # and it stays ended
            await stream.receive()
        await stream.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            await stream.receive()


async def test_a_cancelled_receive_loses_nothing() -> None:
    with pipe_pair() as (stream, peer_w, _):
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                scope = anyio.CancelScope()
                received: list[bytes] = []

                async def receive() -> None:
                    with scope:
                        received.append(await stream.receive())

                tg.start_soon(receive)
                await anyio.wait_all_tasks_blocked()
                scope.cancel()
            assert received == [] and scope.cancelled_caught
            os.write(peer_w, b"kept")  # read by the reading thread after its receive was cancelled
            assert await stream.receive() == b"kept"
        await stream.aclose()


async def test_closing_releases_a_waiting_receive_and_a_gone_reader_breaks_the_writer() -> None:
    with pipe_pair() as (stream, _, peer_r):
        os.close(peer_r)
        with pytest.raises(anyio.BrokenResourceError):
            await stream.send(b"nobody reads this")
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                outcome: list[type[BaseException]] = []

                async def receive() -> None:
                    try:
                        await stream.receive()
                    except anyio.ClosedResourceError as exc:
                        outcome.append(type(exc))

                tg.start_soon(receive)
                await anyio.wait_all_tasks_blocked()
                await stream.aclose()
        assert outcome == [anyio.ClosedResourceError]


def test_the_threaded_stream_works_without_an_event_loop() -> None:
    """``run_stdio`` answers in a plain blocking loop before it starts an event loop: the fallback serves it too."""
    with pipe_pair() as (stream, peer_w, peer_r):
        os.write(peer_w, b"ping\n")
        assert stream.receive_sync() == b"ping\n"
        stream.send_sync(b"pong\n")
        assert os.read(peer_r, 100) == b"pong\n"
        os.close(peer_w)
        with pytest.raises(anyio.EndOfStream):
            stream.receive_sync()


def test_the_stream_is_chosen_by_what_the_descriptors_support(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read_fd, write_fd = os.pipe()
    regular = os.open(tmp_path / "input", os.O_RDWR | os.O_CREAT)
    try:
        assert fd_polling_works(read_fd) and fd_polling_works(write_fd, for_writing=True)  # pipes, on POSIX
        assert fd_polling_works(regular)  # read directly, never polled
        assert type(pipe_byte_stream(read_fd, write_fd)) is FdByteStream
        monkeypatch.setattr(pipes, "fd_polling_works", lambda fd, *, for_writing=False: False)
        assert type(pipe_byte_stream(read_fd, write_fd)) is ThreadedPipeStream
    finally:
        for fd in (read_fd, write_fd, regular):
            os.close(fd)


# --- the environment of a spawned server ----------------------------------------------------------------------

PRINT_ENV = [
    PYTHON,
    "-c",
    "import json, os, sys\n"
    "sys.stdout.write(json.dumps({'jsonrpc': '2.0', 'method': 'env', 'params': dict(os.environ)}) + '\\n')",
]
#: What an interpreter adds to its own environment as it starts (PEP 538's locale coercion; macOS's CoreFoundation).
ADDED_BY_PYTHON = {"LC_CTYPE", "__CF_USER_TEXT_ENCODING"}


async def child_environment(**options: Any) -> dict[str, str]:
    with anyio.fail_after(20):
        async with spawn(PRINT_ENV, **options) as stream:
            frames = await stream.receive()
    params: dict[str, str] = json.loads(frames[0])["params"]
    return params


async def test_a_spawned_server_gets_the_default_environment_and_what_the_caller_gives(
    children: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("TERM", "() { :; }; echo exported shell function")
    env = await child_environment(env={"KNOWLEDGE_DB": "/tmp/k.db"})
    assert "OPENAI_API_KEY" not in env
    assert env["HOME"] == "/home/someone" and env["PATH"] == os.environ["PATH"]
    assert env["KNOWLEDGE_DB"] == "/tmp/k.db"
    assert "TERM" not in env  # a value that is a shell function is never passed on
    assert set(env) - ADDED_BY_PYTHON <= {*DEFAULT_ENV_VARS, "KNOWLEDGE_DB"}
    everything = await child_environment(inherit_env=True, env={"EXTRA": "1"})
    assert everything["OPENAI_API_KEY"] == "sk-secret" and everything["EXTRA"] == "1"


def test_the_default_variables_are_those_the_official_sdks_pass() -> None:
    if os.name == "nt":  # pragma: no cover - the Windows set
        assert {"PATH", "SYSTEMROOT", "USERPROFILE", "APPDATA", "TEMP"} <= set(DEFAULT_ENV_VARS)
    else:
        assert DEFAULT_ENV_VARS == ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


# --- a server that dies says so ---------------------------------------------------------------------------------


async def test_a_server_that_exits_at_start_up_says_so_with_its_status(children: str) -> None:
    with anyio.fail_after(30):
        with pytest.raises(ConnectionClosed) as caught:
            async with Client.connect_stdio([*DIES, "3"], stderr=subprocess.DEVNULL, **HANDSHAKE):
                pass  # pragma: no cover
        assert caught.value.message == "the server process exited with status 3 before answering initialize"
        with pytest.raises(ConnectionClosed) as caught:
            async with Client.connect_stdio([*DIES, "4"], stderr=subprocess.DEVNULL):  # the stateless probe first
                pass  # pragma: no cover
        assert caught.value.message == "the server process exited with status 4 before answering server/discover"


async def test_a_server_that_dies_in_a_call_says_so_and_the_connection_is_closed(children: str) -> None:
    with anyio.fail_after(30):
        async with Client.connect_stdio(DIES, stderr=subprocess.DEVNULL, restart=False, **HANDSHAKE) as client:
            with pytest.raises(ConnectionClosed) as caught:
                await client.call_tool("die", {"status": 7})
            assert caught.value.message == "the server process exited with status 7 before answering tools/call"
            assert isinstance(client.stream, ProcessStream) and client.stream.returncode == 7
            with pytest.raises(ConnectionClosed):
                await client.list_tools()


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no signals on this platform")
async def test_a_server_killed_by_a_signal_says_which(children: str) -> None:
    command = [PYTHON, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    with anyio.fail_after(30), pytest.raises(ConnectionClosed) as caught:
        async with Client.connect_stdio(command, **HANDSHAKE):
            pass  # pragma: no cover
    assert caught.value.message == "the server process was killed by SIGKILL before answering initialize"


#: Closes its stdin, says so on its stdout, and exits with status 5.
CLOSES_STDIN = """
import os, sys
os.close(0)
sys.stdout.write('{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"bye"}}\\n')
sys.stdout.flush()
sys.exit(5)
"""


async def test_a_write_that_finds_the_servers_stdin_closed_says_how_it_ended(children: str) -> None:
    """A request whose write fails because the server has closed its stdin (or has exited, before the client has
    read the end of its output) is explained as one the server's output ended for: its exit status."""
    with anyio.fail_after(30):
        async with spawn([PYTHON, "-c", CLOSES_STDIN], stderr=subprocess.DEVNULL) as stream:
            assert len(await stream.receive()) == 1  # (its stdin is closed by now)
            with pytest.raises(anyio.BrokenResourceError):
                await stream.send([Outgoing(b'{"jsonrpc":"2.0","id":1,"method":"ping"}', 1, REQUEST)])
            assert await stream.why_closed() == "the server process exited with status 5"


# --- stopping a child -------------------------------------------------------------------------------------------

#: Says it is ready, then waits forever even after its stdin ends (and, with "ignore-term", ignores SIGTERM).
STUBBORN = """
import signal, sys, threading
if "ignore-term" in sys.argv and hasattr(signal, "SIGTERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
sys.stdout.write('{"jsonrpc":"2.0","method":"ready"}\\n')
sys.stdout.flush()
sys.stdin.read()
threading.Event().wait()
"""


@asynccontextmanager
async def stubborn(*args: str) -> AsyncIterator[ProcessStream]:
    async with spawn([PYTHON, "-c", STUBBORN, *args], shutdown_timeout=0.5) as stream:
        with anyio.fail_after(20):
            assert json.loads((await stream.receive())[0])["method"] == "ready"
        yield stream


@pytest.mark.parametrize("groups", ["process groups", "no process groups"])
async def test_a_child_that_outlives_its_stdin_is_terminated_then_killed(
    children: str, groups: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EOF, then terminate, then kill: with process groups by signals to the child's group; where there are
    none (Windows, forced here) by the process's own terminate and kill."""
    if groups == "no process groups":
        monkeypatch.setattr(spawn_module, "_NEW_SESSIONS", False)
    with anyio.fail_after(30):
        async with stubborn() as stream:
            pass
        assert stream.returncode == -signal.SIGTERM
        async with stubborn("ignore-term") as stream:
            pass
        assert stream.returncode == -signal.SIGKILL


def connect(command: list[str]) -> AbstractAsyncContextManager[Client]:
    return Client.connect_stdio(command, stderr=subprocess.DEVNULL, **HANDSHAKE)


async def test_a_threaded_stdio_server_answers_before_and_after_its_event_loop_starts() -> None:
    """``run_stdio`` over the threaded stream: answered at once in the blocking loop, then by the event loop."""
    command = [PYTHON, str(FIXTURES / "threaded_stdio.py"), str(FIXTURES / "loop_probe.py")]
    with anyio.fail_after(30):
        async with connect(command) as client:
            assert (await client.call_tool("loop_started")).structured_content == {"result": False}
            assert (await client.call_tool("wait_a_little")).content[0].text == "waited"  # type: ignore[union-attr]
            assert (await client.call_tool("loop_started")).structured_content == {"result": True}


# --- the pipes of a stdio server ------------------------------------------------------------------------------


def _pipe_size_limit() -> int:
    try:
        return int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except OSError:
        return 0


@pytest.mark.skipif(_pipe_size_limit() < PIPE_SIZE, reason="Linux pipes that may be widened to 1 MiB")
def test_a_stdio_server_widens_its_pipes_so_that_a_read_s_answers_go_out_in_one_write() -> None:
    """A real stdio server asks for 1 MiB pipes (the default holds 64 KiB: less than 64 answers of 1 KiB), both
    the one it reads and the one it writes."""
    import fcntl
    import select

    command = [PYTHON, "-m", "jsonrpc_mcp", "serve", f"{FIXTURES / 'quiet.py'}:server", "--stdio"]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        pipes = (proc.stdin.fileno(), proc.stdout.fileno())
        assert [fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < PIPE_SIZE for fd in pipes] == [True, True]
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).encode())
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        assert select.select([pipes[1]], [], [], 30)[0], "no answer within 30 s"
        assert b'"id":1' in os.read(pipes[1], 65536)
        assert [fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) for fd in pipes] == [PIPE_SIZE, PIPE_SIZE]
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
