"""A seeded run of faults under two worker processes sharing one Redis (tests/fixtures/fault_worker.py), for the
fault suite (tests/test_faults.py, a few rounds) and ``make soak`` (bench/soak.py, for minutes).

Each round starts tasks and opens sessions on workers picked at random, then meets one fault, picked at random:
Redis paused (SIGSTOP) or stopped and started again empty, until a worker has answered -31012 for it; or a
worker killed with SIGKILL and a new one started in its place. Then every task of the round must settle within
:data:`SETTLE` seconds: ``completed``, or ``failed`` when its worker was killed, or gone (-32602) when Redis
forgot it — never ``working`` for ever. Nothing waits for a time: each step waits for the answer it needs.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
from http_support import open_session
from redis_support import RedisProcess
from scale_support import call_v5

WORKER = Path(__file__).resolve().parent / "fixtures" / "fault_worker.py"
#: Seconds a task may take to settle after its round's fault has passed (its lease is 4 s; an end stored again
#: waits 2 s at most between tries).
SETTLE = 10.0
#: Seconds a step may take at most (a worker's start, a fault to be seen).
STEP = 15.0
FAULTS = ("pause", "restart empty", "kill -9")


@dataclass
class Figures:
    """What a run did and saw."""

    rounds: int = 0
    faults: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAULTS, 0))
    started: int = 0  #: tasks created
    refused: int = 0  #: tool calls answered -31012 (Redis away as they came)
    ended: dict[str, int] = field(default_factory=dict)  #: tasks by how they settled
    sessions: int = 0  #: sessions opened
    worst_settle: float = 0.0  #: seconds from a fault's end until the last task of its round settled
    kept_sessions: int = 0  #: the most session records Redis held after a round
    rss_kib: list[int] = field(default_factory=list)  #: the workers' resident memory after each round (KiB)


class Worker:
    def __init__(self, proc: anyio.abc.Process, url: str) -> None:
        self.proc = proc
        self.url = url


async def start_worker(redis_url: str, key_prefix: str, env: dict[str, str] | None = None) -> Worker:
    proc = await anyio.open_process(
        [sys.executable, str(WORKER), redis_url, key_prefix],
        stdin=subprocess.DEVNULL,
        stderr=None if os.environ.get("FAULT_WORKER_LOG") else subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    seen = b""
    with anyio.fail_after(STEP):
        while b"\n" not in seen:
            seen += await proc.stdout.receive()
    line = seen.split(b"\n", 1)[0].decode()
    assert line.startswith("listening on "), line
    return Worker(proc, line.removeprefix("listening on "))


async def stop_worker(worker: Worker) -> None:
    if worker.proc.returncode is None:
        worker.proc.kill()
    with anyio.CancelScope(shield=True):
        await worker.proc.wait()
        await worker.proc.aclose()


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class FaultRun:
    """Two workers on ``redis``; :meth:`round` runs one round (see the module docstring)."""

    def __init__(self, redis: RedisProcess, key_prefix: str, seed: int, *, per_round: int = 4) -> None:
        self.redis = redis
        self.prefix = key_prefix
        self.rng = random.Random(seed)
        self.per_round = per_round
        self.env = {"FAULT_MAX_SESSIONS": "50"}
        self.workers: list[Worker] = []
        self.figures = Figures()

    async def __aenter__(self) -> FaultRun:
        for _ in range(2):
            self.workers.append(await start_worker(self.redis.url, self.prefix, self.env))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for worker in self.workers:
            await stop_worker(worker)

    async def _away(self, http: httpx.AsyncClient) -> None:
        """Until a worker answers -31012: the fault is seen."""
        with anyio.fail_after(STEP):
            while True:
                reply = await call_v5(http, self.rng.choice(self.workers).url, "tasks/get", {"taskId": "none"})
                if reply.get("error", {}).get("code") == -31012:
                    return

    async def round(self, http: httpx.AsyncClient) -> None:
        rng, figures = self.rng, self.figures
        tasks: list[tuple[str, Worker]] = []
        for _ in range(self.per_round):
            worker = rng.choice(self.workers)
            arguments = {"steps": rng.randint(2, 6), "pause": rng.choice((0.01, 0.05, 0.2))}
            reply = await call_v5(http, worker.url, "tools/call", {"name": "work", "arguments": arguments})
            if "error" in reply:
                assert reply["error"]["code"] == -31012, reply
                figures.refused += 1
                continue
            tasks.append((reply["result"]["taskId"], worker))
            figures.started += 1
        for _ in range(rng.randint(1, 20)):
            await open_session(http, rng.choice(self.workers).url)
            figures.sessions += 1
        fault = rng.choice(FAULTS)
        figures.faults[fault] += 1
        killed: Worker | None = None
        if fault == "pause":
            self.redis.pause()
            try:
                await self._away(http)
            finally:
                self.redis.resume()
        elif fault == "restart empty":
            self.redis.stop()
            try:
                await self._away(http)
            finally:
                self.redis.start()
        else:
            killed = rng.choice(self.workers)
            os.kill(killed.proc.pid, signal.SIGKILL)
            await stop_worker(killed)
            self.workers[self.workers.index(killed)] = await start_worker(self.redis.url, self.prefix, self.env)
        passed = time.monotonic()
        for task_id, worker in tasks:
            ended, last = await self._settled(http, task_id)
            if ended == "failed":
                assert worker is killed, f"task {task_id} failed, and its worker lived ({fault}): {last}"
            if ended == "gone":
                assert fault == "restart empty", f"task {task_id} vanished ({fault})"
            figures.ended[ended] = figures.ended.get(ended, 0) + 1
        figures.worst_settle = max(figures.worst_settle, time.monotonic() - passed)
        figures.kept_sessions = max(figures.kept_sessions, await self._kept_sessions(http))
        figures.rss_kib.append(sum(rss_kib(worker.proc.pid) for worker in self.workers))
        figures.rounds += 1

    async def _settled(self, http: httpx.AsyncClient, task_id: str) -> tuple[str, Any]:
        """How the task settled, and its last answer."""
        with anyio.fail_after(SETTLE):
            while True:
                reply = await call_v5(http, self.rng.choice(self.workers).url, "tasks/get", {"taskId": task_id})
                error = reply.get("error")
                if error is not None and error["code"] == -32602:
                    return "gone", reply
                if error is None and reply["result"]["status"] in ("completed", "failed", "cancelled"):
                    return str(reply["result"]["status"]), reply

    async def _kept_sessions(self, http: httpx.AsyncClient) -> int:
        """How many session records Redis holds (``redis-cli``, as an operator would count them)."""
        out = await anyio.run_process(
            ["redis-cli", "-s", str(self.redis.socket), "--scan", "--pattern", f"{self.prefix}:session:*"],
            check=False,
        )
        return len(out.stdout.split())


def figures_of(run: FaultRun, seconds: float) -> dict[str, Any]:
    f = run.figures
    return {
        "seconds": round(seconds, 1),
        "rounds": f.rounds,
        "faults": f.faults,
        "tasks started": f.started,
        "refused (-31012)": f.refused,
        "tasks ended": f.ended,
        "worst settle (s)": round(f.worst_settle, 2),
        "sessions opened": f.sessions,
        "most session records kept": f.kept_sessions,
        "workers' RSS first/last (MiB)": [round(f.rss_kib[0] / 1024, 1), round(f.rss_kib[-1] / 1024, 1)]
        if f.rss_kib
        else [],
    }
