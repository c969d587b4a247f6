"""The everything server as a deployment of several workers: each its own process (``everything_server.py
--backend``), sharing one Redis, behind a round-robin proxy that sends every request to the next worker.

    python conformance/scaled_server.py --port 3000 [--workers 2] [--skills]

Used as ``conformance/run.py --leg server --server-fixture conformance/scaled_server.py`` (``make
conformance-scaled``): the official suite's server scenarios against a deployment in which no two consecutive
requests of a client reach the same process. Needs ``redis-server`` (.ci/system-packages installs it).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STARTUP_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(check: object, what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"scaled_server: {what} exited with code {proc.returncode}")
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise SystemExit(f"scaled_server: {what} did not start within {STARTUP_TIMEOUT:.0f} s")


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skills", action="store_true", help="the workers publish skills (the extension scenarios)")
    args = parser.parse_args(argv)
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        raise SystemExit("scaled_server: redis-server is not installed (run .ci/system-packages)")
    folder = Path(tempfile.mkdtemp(prefix="scaled-"))
    redis_socket = folder / "redis.sock"
    children: list[subprocess.Popen[bytes]] = []

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        redis = subprocess.Popen(
            [redis_server, "--port", "0", "--unixsocket", str(redis_socket), "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", str(folder)],
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # a signal to this process group stops the workers; Redis stops after them
        )  # fmt: skip
        children.append(redis)
        wait_for(redis_socket.exists, "redis-server", redis)
        backend = f"unix://{redis_socket}"
        upstreams = []
        for _ in range(args.workers):
            port = free_port()
            command = [sys.executable, str(HERE / "everything_server.py"), "--port", str(port), "--backend", backend]
            worker = subprocess.Popen([*command, "--skills"] if args.skills else command)
            children.append(worker)
            wait_for(lambda port=port: listening(port), "a worker", worker)
            upstreams.append(f"http://127.0.0.1:{port}")
        sys.path.insert(0, str(HERE))
        from round_robin import main as proxy

        return proxy(["--host", args.host, "--port", str(args.port), *upstreams])
    except KeyboardInterrupt:
        return 0
    finally:
        for child in reversed(children):  # the workers, then the Redis they use until they have stopped
            if child.poll() is None:
                child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
