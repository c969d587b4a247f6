#!/usr/bin/env python3
"""The soak: the fault suite's seeded run (tests/fault_support.py) for minutes rather than rounds.

  python bench/soak.py                      10 minutes, seed 35
  python bench/soak.py --minutes 2 --seed 7

Two worker processes (tests/fixtures/fault_worker.py: their tasks' lease 4 s, their Redis deadline 0.5 s, at most
50 sessions between them) share a ``redis-server`` of the soak's own (tests/redis_support.py: a Unix socket,
nothing saved). Round after round, tasks are started and sessions opened on workers picked at random, then one
fault, picked at random, is met: Redis paused (SIGSTOP) until a worker answers -31012, Redis stopped and started
again empty, or a worker killed with SIGKILL and a new one started. Every task of the round must then settle
within 10 s (completed; failed when its worker was killed; gone when Redis forgot it); the first that does not
stops the soak with its error. At the end it prints the figures (JSON) that docs/robustness.md records.
Not part of CI (`make soak`).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fault_support import FaultRun, figures_of
from redis_support import RedisProcess


async def soak(minutes: float, seed: int) -> dict[str, object]:
    redis = RedisProcess(Path(tempfile.mkdtemp(prefix="soak-redis-")))
    redis.start()
    began = time.monotonic()
    try:
        async with (
            httpx.AsyncClient(timeout=30.0) as http,
            FaultRun(redis, "soak-" + secrets.token_hex(4), seed) as run,
        ):
            while time.monotonic() - began < minutes * 60:
                await run.round(http)
    finally:
        redis.stop()
    return figures_of(run, time.monotonic() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=35)
    options = parser.parse_args()
    figures = anyio.run(soak, options.minutes, options.seed)
    print(json.dumps({"seed": options.seed, **figures}, indent=2))


if __name__ == "__main__":
    main()
