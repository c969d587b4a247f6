"""stdio, client side: start a server process and talk to it over its stdin and stdout (L6).

:func:`spawn` starts the process with a short allow-list of environment variables (:data:`DEFAULT_ENV_VARS`,
plus what the caller gives), gives a :class:`ProcessStream` over its pipes, and stops it on the way out: its stdin
closed, then SIGTERM, then SIGKILL (the spec's order), without process groups or signals where there are none.

With a :class:`RestartPolicy` it yields a :class:`RestartingProcessStream` instead: once armed (``Client.connect_stdio``
arms it when the connection is made), a server process that exits while the stream is still held is started again,
within the policy's bounds (the 2026-07-28 revision: "If the server process exits unexpectedly, the client SHOULD
restart it"). What was asked of the old process and not answered fails (:attr:`MessageStream.peer_replaced`); the
frames sent while the new one starts are held, and go out once :attr:`MessageStream.restart_session` (the client's
handshake again) has run in it. A process ended because the stream was closed is never started again.
"""

from __future__ import annotations

import abc
import contextvars
import logging
import os
import shlex
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.stapled import StapledByteStream

from ..errors import ConnectionClosed, RpcError
from ..jsonrpc.streams import MessageStream, Outgoing
from ..mcp.groups import unwrap_group
from .framing import DEFAULT_MAX_FRAME
from .ndjson import PIPE, NdjsonStream
from .pipes import ThreadedPipeStream

__all__ = (
    "spawn",
    "ProcessStream",
    "RestartingProcessStream",
    "RestartPolicy",
    "DEFAULT_ENV_VARS",
    "default_environment",
)

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
    restart: RestartPolicy | None = None,
) -> AsyncIterator[ProcessStream | RestartingProcessStream]:
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

    ``restart``: yield a :class:`RestartingProcessStream`, which starts the process again (the same command,
    environment and directory) when it exits after the stream was armed, within the policy's bounds.
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
    if restart is None:
        try:
            yield stream
        finally:
            with anyio.CancelScope(shield=True):
                await stream.stop(shutdown_timeout)
        return

    async def start_again() -> ProcessStream:
        return ProcessStream(await _start(list(command), full_env, cwd, stderr), max_frame=max_frame)

    with unwrap_group():
        async with anyio.create_task_group() as tg:
            restarting = RestartingProcessStream(stream, start_again, restart, tg)
            try:
                yield restarting
            finally:
                restarting.closing = True
                tg.cancel_scope.cancel()
                with anyio.CancelScope(shield=True):
                    await restarting.current.stop(shutdown_timeout)


class ProcessStream(NdjsonStream):
    """The message stream of a server process started by :func:`spawn`; it can say how the process ended."""

    def __init__(self, child: _Child, *, max_frame: int) -> None:
        super().__init__(child.pipes, max_frame=max_frame, network=PIPE)
        self._child = child
        self._output_ended = False
        self._input_broken = False  # a write found its stdin closed (it may have exited before its output is read)

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

    async def send(self, frames: Sequence[Outgoing]) -> None:
        try:
            await super().send(frames)
        except anyio.BrokenResourceError:
            self._input_broken = True
            raise

    async def stop(self, timeout: float) -> None:
        """Stop the process (its stdin closed, then SIGTERM, then SIGKILL) and release its pipes."""
        await _stop(self._child, timeout)
        await self.aclose()

    async def why_closed(self, wait: float = 2.0) -> str | None:
        """Why the server stopped answering, once its output has ended or a write found its input closed: its exit
        status (waited for up to ``wait`` seconds), or that it closed its stdout (or stdin) and still runs. None
        while both go on."""
        if not (self._output_ended or self._input_broken):
            return None
        with anyio.move_on_after(wait):
            await self._child.wait()
        code = self._child.returncode
        if code is None:
            return f"the server process closed its {'stdout' if self._output_ended else 'stdin'}"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the server process was killed by {name}"
        return f"the server process exited with status {code}"


@dataclass(frozen=True)
class RestartPolicy:
    """The bounds of :class:`RestartingProcessStream`: at most ``max_restarts`` starts again within ``window``
    seconds (one more exit within it ends the connection), the n-th of them ``backoff * 2 ** (n - 1)`` seconds
    after the exit (at most ``max_backoff``)."""

    max_restarts: int = 5
    window: float = 60.0
    backoff: float = 0.1
    max_backoff: float = 5.0

    def __post_init__(self) -> None:
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) or self.max_restarts < 1:
            raise ValueError(f"max_restarts is a whole number, 1 or more, not {self.max_restarts!r}")
        for name in ("window", "backoff", "max_backoff"):
            seconds = getattr(self, name)
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
                raise ValueError(f"{name} is a number of seconds, 0 or more, not {seconds!r}")
        if not self.window > 0:
            raise ValueError(f"window is a positive number of seconds, not {self.window!r}")

    def delay(self, earlier: int) -> float:
        """The wait before a start again that has ``earlier`` others within the window before it."""
        return float(min(self.max_backoff, self.backoff * 2**earlier))


#: Set in the task that runs :attr:`~RestartingProcessStream.restart_session` for one process (its number): the
#: frames of that task go to that process at once, where every other frame waits until the handshake is done.
_HANDSHAKE_OF: Final[contextvars.ContextVar[int | None]] = contextvars.ContextVar("handshake_of", default=None)


class RestartingProcessStream(MessageStream):
    """The message stream of a server process that is started again when it exits unexpectedly (:func:`spawn`
    with a :class:`RestartPolicy`); until :attr:`armed` it is the stream of its first process, as without one.

    An exit of the process after the stream was armed, while it is not being closed, and within the policy's
    bounds: :attr:`peer_replaced` at once (the dispatcher fails what waits for an answer from the old process:
    it is not sent again), a warning logged with the exit status, the policy's wait, the command started again,
    then :attr:`restart_session` run in a task of its own (the client's handshake, its log level and
    subscriptions again), whose frames go to the new process at once; every other frame sent from the exit on is
    held, and written after the handshake. An exit past the bounds, a command that cannot be started again, or a
    handshake the new process refuses end the stream (:meth:`why_closed` says why)."""

    def __init__(
        self,
        first: ProcessStream,
        start: Callable[[], Awaitable[ProcessStream]],
        policy: RestartPolicy,
        tasks: anyio.abc.TaskGroup,
    ) -> None:
        self.current = first
        self.network = first.network
        self.policy = policy
        #: Whether an exit of the process starts it again (``Client.connect_stdio`` arms it once connected: a
        #: server that fails before answering the handshake is a failure to connect, not a process to restart).
        self.armed = False
        #: Set when the stream is being closed: the process ends because we asked, never started again.
        self.closing = False
        #: How many times the process was started again.
        self.restarts = 0
        self._start = start
        self._tasks = tasks
        self._generation = 0  # the number of the current process (0: the first)
        self._recent: deque[float] = deque()  # when the process was started again, within the window
        self._held: list[Outgoing] | None = None  # frames sent since the exit, until the new handshake is done
        self._last_exit: str | None = None
        self._ended: str | None = None  # why the stream ended for good, when it did by itself

    @property
    def pid(self) -> int:
        return self.current.pid

    @property
    def returncode(self) -> int | None:
        return self.current.returncode

    async def receive(self) -> Sequence[bytes]:
        while True:
            current = self.current
            try:
                return await current.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                if self.closing or not self.armed or self._ended is not None:
                    raise anyio.EndOfStream from None
            await self._start_again(current)

    async def _start_again(self, gone: ProcessStream) -> None:
        """The process ``gone`` ended by itself: fail what it was asked, then start it again, or end the stream
        (``EndOfStream``) past the policy's bounds."""
        self._held = []  # (from now on frames wait for the process started again)
        why = await gone.why_closed() or "the server process closed its stdout"
        now = anyio.current_time()
        policy = self.policy
        while self._recent and now - self._recent[0] > policy.window:
            self._recent.popleft()
        if len(self._recent) >= policy.max_restarts:
            self._end(f"{why} (after {len(self._recent)} restarts within {policy.window:g} s: not started again)")
            raise anyio.EndOfStream
        self._last_exit = why
        self.restarts += 1  # (before what waits hears of it: a listen stream opens itself again if it changed)
        delay = policy.delay(len(self._recent))
        self._recent.append(now)
        logger.warning("%s while connected: starting it again in %.2g s (restart %d)", why, delay, self.restarts)
        if self.peer_replaced is not None:
            self.peer_replaced()
        self._held = []  # (what was held for the process that is gone failed with it: not sent to the next)
        with anyio.CancelScope(shield=True):
            await gone.stop(0.5)
        await anyio.sleep(delay)
        try:
            with anyio.CancelScope(shield=True):  # (a process started is one the stream stops when it closes)
                self.current = await self._start()
        except OSError as exc:
            self._end(f"{why} (it could not be started again: {exc.strerror or type(exc).__name__})")
            raise anyio.EndOfStream from None
        self._generation += 1
        self._tasks.start_soon(self._handshake, self._generation)

    def _end(self, why: str) -> None:
        self._ended = why
        self._held = None
        logger.warning("%s", why)

    async def _handshake(self, generation: int) -> None:
        """Run :attr:`restart_session` in the process ``generation``, then write the frames held meanwhile."""
        _HANDSHAKE_OF.set(generation)
        try:
            if self.restart_session is not None:
                await self.restart_session()
        except ConnectionClosed:
            return  # the new process is gone too: its exit is taken as the last one's was
        except Exception as exc:
            if generation != self._generation:
                return
            reason = exc.message if isinstance(exc, RpcError) else type(exc).__name__
            self._end(f"{self._last_exit} (started again, it refused the handshake: {reason})")
            await self.current.aclose()  # (the reader sees the end, and the stream ends)
            return
        while generation == self._generation and self._held:
            frames, self._held = self._held, []
            try:  # (no one else writes meanwhile: what is sent now is held, and this loop takes it next)
                await self.current.send(frames)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # (the process ended meanwhile: the reader starts it again, or ends the stream)
        if generation == self._generation:
            self._held = None
            logger.info("the server process started again is ready (restart %d)", self.restarts)

    async def send(self, frames: Sequence[Outgoing]) -> None:
        handshake = _HANDSHAKE_OF.get()
        if handshake is not None:
            if handshake != self._generation:
                raise anyio.BrokenResourceError  # (a handshake's frame for a process that is gone)
        elif self._held is not None:
            self._held.extend(frames)
            return
        await self.current.send(frames)

    async def aclose(self) -> None:
        self.closing = True
        await self.current.aclose()

    async def why_closed(self, wait: float = 2.0) -> str | None:
        """Why the connection ended, or why a request got no answer: the stream ended for good (the last exit past
        the bounds…), the process's exit status once its output ended, or the exit it was started again after."""
        if self._ended is not None:
            return self._ended
        if self._last_exit is not None and not self.closing:
            return f"{self._last_exit} (started again)"
        return await self.current.why_closed(wait)


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
