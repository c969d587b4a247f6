"""stdio, client side: start a server process and talk to it over its stdin and stdout (L6).

:func:`spawn` starts the process with a short allow-list of environment variables (:data:`DEFAULT_ENV_VARS`,
plus what the caller gives), gives a :class:`ProcessStream` over its pipes, and stops it on the way out: its stdin
closed, then SIGTERM, then SIGKILL (the spec's order), without process groups or signals where there are none.
"""

from __future__ import annotations

import abc
import logging
import os
import shlex
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Final

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.stapled import StapledByteStream

from .framing import DEFAULT_MAX_FRAME
from .ndjson import PIPE, NdjsonStream
from .pipes import ThreadedPipeStream

__all__ = ("spawn", "ProcessStream", "DEFAULT_ENV_VARS", "default_environment")

logger = logging.getLogger(__name__)


#: The environment variables a spawned server inherits by default (as the official SDKs pass them): enough to run
#: a program and find the user's home, nothing that carries credentials. ``PATHEXT`` lets Windows find ``npx.cmd``.
DEFAULT_ENV_VARS: Final[tuple[str, ...]] = (
    (
        "APPDATA",
        "HOMEDRIVE",
        "HOMEPATH",
        "LOCALAPPDATA",
        "PATH",
        "PATHEXT",
        "PROCESSOR_ARCHITECTURE",
        "SYSTEMDRIVE",
        "SYSTEMROOT",
        "TEMP",
        "USERNAME",
        "USERPROFILE",
    )
    if os.name == "nt"
    else ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
)


def default_environment() -> dict[str, str]:
    """The variables of :data:`DEFAULT_ENV_VARS` this process has, less those whose value starts with ``()`` (a
    shell function exported through the environment, never plain data)."""
    return {
        name: value
        for name in DEFAULT_ENV_VARS
        if (value := os.environ.get(name)) is not None and not value.startswith("()")
    }


@asynccontextmanager
async def spawn(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    inherit_env: bool = False,
    cwd: str | None = None,
    stderr: int | None = None,
    max_frame: int = DEFAULT_MAX_FRAME,
    shutdown_timeout: float = 5.0,
) -> AsyncIterator[ProcessStream]:
    """Start ``command`` and yield a message stream over its stdin/stdout.

    The child's environment is :func:`default_environment` plus ``env``: the user's other variables (API keys,
    tokens) never reach a server unless given in ``env``, or unless ``inherit_env=True`` passes the whole
    environment (``env`` still added on top). The child's stderr is inherited unless ``stderr`` says otherwise:
    ``subprocess.DEVNULL`` or a file descriptor (a log file). ``subprocess.PIPE`` is refused (:class:`ValueError`):
    nothing would read it, and a server that writes more than a pipe holds would stop; ``subprocess.STDOUT`` too
    (its stderr would mix with the messages on its stdout).

    On exit: close its stdin, wait up to ``shutdown_timeout``, then terminate it, then kill it (the spec's order:
    SIGTERM and SIGKILL to its process group on POSIX; ``TerminateProcess`` where there are no signals). Where
    the event loop cannot run child processes (asyncio's selector loop on Windows), the child is started by
    :mod:`subprocess` and its pipes are read and written on worker threads.
    """
    if isinstance(command, (str, bytes)):  # (its letters would be the arguments: "No such file: 'p'")
        raise TypeError(f"command is a list of arguments, not a string: command={shlex.split(os.fsdecode(command))!r}")
    if not command:
        raise ValueError("command is empty: name the program to start")
    if stderr in (subprocess.PIPE, subprocess.STDOUT):
        raise ValueError(
            "stderr must be None (inherited), subprocess.DEVNULL or a file descriptor: a server's stderr piped to "
            "nothing that reads it would stop the server once full, and on its stdout it would mix with the messages"
        )
    full_env = dict(os.environ) if inherit_env else default_environment()
    if env:
        full_env.update(env)
    child = await _start(list(command), full_env, cwd, stderr)
    stream = ProcessStream(child, max_frame=max_frame)
    try:
        yield stream
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(child, shutdown_timeout)
            await stream.aclose()


class ProcessStream(NdjsonStream):
    """The message stream of a server process started by :func:`spawn`; it can say how the process ended."""

    def __init__(self, child: _Child, *, max_frame: int) -> None:
        super().__init__(child.pipes, max_frame=max_frame, network=PIPE)
        self._child = child
        self._output_ended = False

    @property
    def pid(self) -> int:
        return self._child.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has ended (negative on POSIX: the signal that ended it), else None."""
        return self._child.returncode

    async def receive(self) -> Sequence[bytes]:
        try:
            return await super().receive()
        except anyio.EndOfStream:
            self._output_ended = True
            raise

    async def why_closed(self, wait: float = 2.0) -> str | None:
        """Why the server stopped answering, once its output has ended: its exit status (waited for up to ``wait``
        seconds), or that it closed its stdout and still runs. None while its output goes on."""
        if not self._output_ended:
            return None
        with anyio.move_on_after(wait):
            await self._child.wait()
        code = self._child.returncode
        if code is None:
            return "the server process closed its stdout"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the server process was killed by {name}"
        return f"the server process exited with status {code}"


class _Child(abc.ABC):
    """A started server process, behind one interface whether the event loop started it or :mod:`subprocess` did."""

    pipes: anyio.abc.ByteStream  # writes to its stdin, reads from its stdout
    pid: int

    @property
    @abc.abstractmethod
    def returncode(self) -> int | None: ...

    @abc.abstractmethod
    async def wait(self) -> None: ...

    @abc.abstractmethod
    async def close_stdin(self) -> None: ...

    @abc.abstractmethod
    def terminate(self) -> None: ...

    @abc.abstractmethod
    def kill(self) -> None: ...


#: Where there are process groups, a child is started in a session of its own and stopped with everything it
#: started (signals to its group); elsewhere (Windows) the process itself is terminated, then killed.
_NEW_SESSIONS: Final = hasattr(os, "setsid") and hasattr(os, "killpg")


async def _start(command: list[str], env: dict[str, str], cwd: str | None, stderr: int | None) -> _Child:
    """Start the child with the event loop's process support, or by :mod:`subprocess` where the loop has none."""
    try:
        process = await anyio.open_process(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=cwd,
            start_new_session=_NEW_SESSIONS,
        )
    except NotImplementedError:
        logger.debug("the event loop cannot run child processes: %r runs with its pipes on worker threads", command)
        return await _ThreadedChild.start(command, env, cwd, stderr)
    return _LoopChild(process)


class _LoopChild(_Child):
    """A child the event loop started: its pipes are the loop's own streams."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        self.pid = process.pid
        self.pipes = StapledByteStream(process.stdin, process.stdout)

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> None:
        await self._process.wait()

    async def close_stdin(self) -> None:
        if self._process.stdin is not None:
            await self._process.stdin.aclose()

    def terminate(self) -> None:
        if not _signal_group(self.pid, "SIGTERM"):
            self._process.terminate()

    def kill(self) -> None:
        if not _signal_group(self.pid, "SIGKILL"):
            self._process.kill()


class _ThreadedChild(_Child):
    """A child started by :mod:`subprocess`, its pipes read and written on worker threads (a
    :class:`~jsonrpc_mcp.transports.pipes.ThreadedPipeStream` owning duplicates of the pipes' descriptors)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stdin is not None and popen.stdout is not None
        self._popen = popen
        self.pid = popen.pid
        self._pipes = ThreadedPipeStream(os.dup(popen.stdout.fileno()), os.dup(popen.stdin.fileno()), close_fds=True)
        self.pipes = self._pipes
        popen.stdin.close()
        popen.stdout.close()

    @classmethod
    async def start(
        cls, command: list[str], env: dict[str, str], cwd: str | None, stderr: int | None
    ) -> _ThreadedChild:
        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=cwd,
                start_new_session=_NEW_SESSIONS,
            )

        return cls(await anyio.to_thread.run_sync(start))

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> None:
        await anyio.to_thread.run_sync(self._popen.wait, abandon_on_cancel=True)

    async def close_stdin(self) -> None:
        await self._pipes.send_eof()

    def terminate(self) -> None:
        if not _signal_group(self.pid, "SIGTERM"):
            self._popen.terminate()

    def kill(self) -> None:
        if not _signal_group(self.pid, "SIGKILL"):
            self._popen.kill()


async def _stop(child: _Child, timeout: float) -> None:
    try:
        await child.close_stdin()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    with anyio.move_on_after(timeout):
        await child.wait()
        return
    if child.returncode is None:
        child.terminate()
        with anyio.move_on_after(timeout):
            await child.wait()
            return
    if child.returncode is None:
        child.kill()
        await child.wait()


def _signal_group(pid: int, name: str) -> bool:
    """Send the signal ``name`` to the process group of a child started in a session of its own. False where
    there are no process groups (the caller then terminates or kills the process itself)."""
    if not _NEW_SESSIONS:
        return False
    try:
        os.killpg(pid, getattr(signal, name))
    except (ProcessLookupError, PermissionError):
        return False
    return True
