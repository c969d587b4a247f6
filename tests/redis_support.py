"""A real Redis server for the tests: ``redis-server`` (installed by .ci/system-packages) on a Unix socket in a
temporary folder, nothing saved to disk. :class:`RedisProcess` starts one and knows when it is ready (it reads the
server's own "ready to accept connections" line); it can be stopped and started again on the same socket (empty),
or paused and resumed (SIGSTOP, SIGCONT: its connections stay open and nothing answers), for the tests of what
workers do while their Redis is away."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO

import pytest

READY = b"ready to accept connections"


class RedisProcess:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.socket = folder / "redis.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self, timeout: float = 30.0) -> None:
        program = shutil.which("redis-server")
        if program is None:
            pytest.fail("redis-server is not installed: run .ci/system-packages (apt-get install redis-server)")
        self.proc = subprocess.Popen(
            [
                program,
                "--port", "0",
                "--unixsocket", str(self.socket),
                "--unixsocketperm", "700",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.folder),
                "--logfile", "",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        ready = threading.Event()
        log: list[bytes] = []

        def watch(stream: IO[bytes]) -> None:
            try:
                for line in iter(stream.readline, b""):
                    log.append(line)
                    if READY in line.lower():
                        ready.set()
            except (ValueError, OSError):  # closed by stop()
                pass

        assert self.proc.stdout is not None
        threading.Thread(target=watch, args=(self.proc.stdout,), daemon=True).start()
        if not ready.wait(timeout):
            self.stop()
            pytest.fail("redis-server did not start:\n" + b"".join(log[-20:]).decode(errors="replace"))

    def pause(self) -> None:
        """Stop the server where it is (SIGSTOP): what it was sent waits, unanswered, until :meth:`resume`."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)  # (a paused server would not hear the SIGTERM)
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        self.socket.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> object:
    server = RedisProcess(Path(tempfile.mkdtemp(prefix="redis-")))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisProcess) -> str:
    return redis_server.url


@pytest.fixture
def prefix() -> str:
    """A key prefix of its own for each test (they share one Redis)."""
    return "test-" + secrets.token_hex(6)


@pytest.fixture
def own_redis() -> object:
    """A Redis of the test's own, to stop and start."""
    server = RedisProcess(Path(tempfile.mkdtemp(prefix="redis-")))
    server.start()
    yield server
    server.stop()
