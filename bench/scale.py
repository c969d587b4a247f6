#!/usr/bin/env python3
"""Scale-out benchmarks: ``jsonrpc-mcp serve --http ... --workers N``, with and without a shared Redis.

  python bench/scale.py             calls/s and p99 with 1, 2 and 4 workers, with and without Redis, in both eras
                                    (--rounds alternating rounds, medians); then 10,000 concurrent handshake-era
                                    sessions over 2 workers sharing Redis (every one must succeed; memory per
                                    session in the workers and in Redis), and over 1 worker without Redis
  python bench/scale.py --smoke     the same, tiny and short: checks that the script still works, measures nothing

What runs: a ``redis-server`` of the benchmark's own (on a Unix socket in a temporary folder, nothing saved to
disk; Debian's package, which .ci/system-packages installs), and for each configuration a fresh server process
serving ``bench/servers/echo_pid.py`` (``echo.py``'s inline tool, and ``pid``): ``jsonrpc-mcp serve --http
127.0.0.1:0 [--workers N --backend unix://...]``. ``--workers N`` without ``--backend`` refuses to start (the
workers would not share the handshake-era sessions; the benchmark checks that it still does); 2026-07-28 requests
need nothing shared, so for them N workers without Redis are measured too, started by this script as ``serve
--workers`` starts them (one socket, :func:`jsonrpc_mcp.transports.http_workers.supervise`). Before measuring,
the benchmark calls ``pid`` on fresh connections until every worker has answered: a worker still starting takes no
connection, and the driver's keep-alive connections stay where they were first accepted.

The load is ``mcpload.py`` (the shared neutral driver, vendored unchanged), as in ``bench/run.py``: 64 keep-alive
connections, 1 KiB ``tools/call echo``; the handshake era once with one session over all the connections (it moves
between the workers from request to request) and once with a session per connection. The sessions run drives
mcpload's own session steps, in-process (each session on a keep-alive connection of its own: ``initialize``,
``notifications/initialized``, a checked call), ``--session-batch`` sessions at a time; every session and
connection stays open until all are (the servers run with a long ``--keep-alive``, and the descriptor limit is
raised). Then this script counts the open connections and the sessions' records in Redis, reads the memory,
closes the connections and ends every session with a ``DELETE`` sent to whichever worker takes it, and checks
that Redis forgets them.

Figures (mcpload's): calls/s = checked calls per second; p50/p99 = µs from writing a request to reading its whole
response; CPU µs/call = the server's processes (supervisor and workers) per call; "spread" = each worker's share
of the workers' CPU time during the run. Results go to bench/results/scale-*.json (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import IO, Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
MCPLOAD = os.path.join(HERE, "mcpload.py")
APP = os.path.join(HERE, "servers", "echo_pid.py") + ":server"
RESULTS = os.path.join(HERE, "results")

sys.path.insert(0, HERE)
import mcpload  # noqa: E402  (the vendored neutral driver, next to this file)
from run import fmt, git_rev, machine, precompile, print_table  # noqa: E402

HANDSHAKE = "handshake"  # initialize with 2025-11-25 first
STATELESS = "stateless"  # 2026-07-28: no initialize, the revision's _meta on every request
ERA_TITLES = {HANDSHAKE: "handshake era (2025-11-25)", STATELESS: "2026-07-28"}
SHARED_SESSION = "one session"  # the handshake era: one session over all the driver's connections
SESSION_PER_CONNECTION = "a session per connection"

#: What ``jsonrpc-mcp serve`` says once it listens: the URL to use.
URL_LINE = re.compile(r"serving .* at (http://\S+)")
#: The key of a handshake-era session's record in Redis (jsonrpc_mcp.backends.redis, default prefix).
SESSION_KEYS = "jsonrpc-mcp:session:*"
REDIS_READY = b"ready to accept connections"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- processes -----------------------------------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (Linux: /proc)."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
    except OSError:
        pass
    return out


def cpu_s(pid: int) -> float:
    return float(mcpload.tree_stats(pid).get("cpu_s", 0.0))


def rss_kb(pid: int) -> int:
    """VmRSS of ``pid`` alone (its children not counted)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
    except OSError:
        return 0


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group this script started ``proc`` in (its workers with it), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            pass


def watch_lines(stream: IO[bytes], sink: IO[bytes], seen: list[bytes], event: threading.Event, marker: Any) -> None:
    """Copy ``stream`` to ``sink`` line by line; set ``event`` at the first line ``marker`` accepts."""
    try:
        for line in iter(stream.readline, b""):
            sink.write(line)
            sink.flush()
            if not event.is_set() and marker(line):
                seen.append(line)
                event.set()
    except (ValueError, OSError):
        pass


class RedisServer:
    """A ``redis-server`` of the benchmark's own: a Unix socket in a temporary folder, nothing saved to disk."""

    def __init__(self, server_log: IO[bytes]) -> None:
        program = shutil.which("redis-server")
        if program is None:
            raise SystemExit("bench/scale.py: redis-server is not installed (.ci/system-packages installs it)")
        try:
            import redis
        except ImportError:
            raise SystemExit("bench/scale.py: needs redis-py (the redis extra; `make install` installs it)") from None
        self.folder = tempfile.mkdtemp(prefix="jsonrpc-mcp-bench-redis-")
        self.socket = os.path.join(self.folder, "redis.sock")
        self.proc = subprocess.Popen(
            [
                program, "--port", "0", "--unixsocket", self.socket, "--unixsocketperm", "700", "--save", "",
                "--appendonly", "no", "--dir", self.folder, "--logfile", "",
            ],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        ready = threading.Event()
        assert self.proc.stdout is not None
        threading.Thread(
            target=watch_lines,
            args=(self.proc.stdout, server_log, [], ready, lambda line: REDIS_READY in line.lower()),
            daemon=True,
        ).start()
        if not ready.wait(30):
            self.stop()
            raise SystemExit("bench/scale.py: redis-server did not start (see the server log)")
        self.client = redis.Redis(unix_socket_path=self.socket)

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def used_memory(self) -> int:
        return int(self.client.info("memory")["used_memory"])

    def session_count(self) -> int:
        """How many handshake-era sessions Redis has a record of."""
        return sum(1 for _ in self.client.scan_iter(match=SESSION_KEYS, count=1000))

    def flush(self) -> None:
        self.client.flushall()

    def cpu_s(self) -> float:
        return cpu_s(self.proc.pid)

    def stop(self) -> None:
        stop_group(self.proc)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class Served:
    """A server started for one measurement: ``jsonrpc-mcp serve`` (or, for several workers without a backend,
    this script's ``serve-unshared``), in a process group of its own; its URL read from what it says on stderr."""

    def __init__(self, workers: int, backend: str | None, server_log: IO[bytes], *extra: str) -> None:
        self.workers = workers
        if backend is not None:
            cmd = [PY, "-m", "jsonrpc_mcp", "serve", APP, "--http", "127.0.0.1:0", "--workers", str(workers),
                   "--backend", backend, *extra]  # fmt: skip
        elif workers == 1:
            cmd = [PY, "-m", "jsonrpc_mcp", "serve", APP, "--http", "127.0.0.1:0", *extra]
        else:
            cmd = [PY, os.path.abspath(__file__), "serve-unshared", str(workers), *extra]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=server_log, stderr=subprocess.PIPE, start_new_session=True
        )
        banner = threading.Event()
        seen: list[bytes] = []
        assert self.proc.stderr is not None
        names_url = lambda line: URL_LINE.search(line.decode(errors="replace"))  # noqa: E731
        self.watcher = threading.Thread(
            target=watch_lines, args=(self.proc.stderr, server_log, seen, banner, names_url), daemon=True
        )
        self.watcher.start()
        deadline = time.monotonic() + 60
        while not banner.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server did not start: {' '.join(cmd)} (see the server log)")
        match = URL_LINE.search(seen[0].decode(errors="replace"))
        assert match is not None
        self.url = match.group(1)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def worker_pids(self) -> list[int]:
        """The processes that serve: the workers of a supervisor, or the one process."""
        return children(self.proc.pid) or [self.proc.pid]

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until every worker has answered a ``pid`` call (each on a fresh connection)."""
        deadline = time.monotonic() + timeout
        answered: set[int] = set()
        while True:
            pids = set(self.worker_pids())
            if len(pids) == self.workers and pids <= answered:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(answered & pids)} of {self.workers} workers answered in {timeout:.0f} s")
            try:
                answered.add(pid_call(self.url))
            except (OSError, RuntimeError, ValueError, KeyError):
                time.sleep(0.05)  # not listening yet, or a worker still starting

    def stop(self) -> None:
        stop_group(self.proc)
        self.watcher.join(10)  # (it has read the end of what the server wrote)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def pid_call(url: str) -> int:
    """Call ``pid`` on a new connection (a 2026-07-28 request: no session)."""
    target = mcpload.HttpTarget(url)
    target.stateless_headers = (
        b"MCP-Protocol-Version: "
        + mcpload.STATELESS_VERSION.encode()
        + b"\r\nMcp-Method: tools/call\r\nMcp-Name: pid\r\n"
    )
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pid","arguments":{},'
        + mcpload.STATELESS_META.encode()
        + b"}}"
    )
    conn = mcpload.HConn(target.addr)
    try:
        resp = mcpload.blocking_exchange(conn, target.request(body, None), timeout=10)
    finally:
        conn.close()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}")
    message = json.loads(resp.messages()[0])
    return int(message["result"]["content"][0]["text"])


def serve_unshared(workers: int, extra: list[str]) -> int:
    """Several workers on one socket without a backend, as ``serve --workers`` starts them (which it refuses to do
    without one: handshake-era clients would lose their sessions). For the 2026-07-28 figures only."""
    import logging

    from jsonrpc_mcp.transports.http_serve import bind_socket
    from jsonrpc_mcp.transports.http_workers import supervise

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sock = bind_socket("127.0.0.1", 0)
    address = f"127.0.0.1:{sock.getsockname()[1]}"
    worker = [PY, "-m", "jsonrpc_mcp", "serve", APP, "--http", address, "--workers", "1", *extra]
    sys.stderr.write(f"serving {APP} at http://{address}/mcp\n")
    sys.stderr.flush()
    try:
        return supervise(lambda fd, parent: [*worker, "--worker-socket", str(fd), "--worker-parent", str(parent)],
                         sock, workers)  # fmt: skip
    finally:
        sock.close()


def refuses_workers_without_backend(server_log: IO[bytes]) -> bool:
    """Whether ``serve --workers 2`` without ``--backend`` still refuses to start (what the table says)."""
    proc = subprocess.run(
        [PY, "-m", "jsonrpc_mcp", "serve", APP, "--http", "127.0.0.1:0", "--workers", "2"],
        cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
        env={**os.environ, "JSONRPC_MCP_BACKEND": ""},
    )  # fmt: skip
    server_log.write(proc.stderr)
    return proc.returncode != 0 and b"needs --backend" in proc.stderr


def run_json(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run the driver; its last JSON line."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"errors": 1, "error_samples": [f"driver timed out after {timeout:.0f}s"]}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"errors": 1, "error_samples": [f"no JSON from driver (exit {proc.returncode}): {proc.stderr[-300:]}"]}
    return dict(json.loads(lines[-1]))


# --- calls/s -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One server configuration under one load."""

    era: str
    workers: int
    redis: bool
    sessions: str | None = None  # the handshake era: SHARED_SESSION or SESSION_PER_CONNECTION

    @property
    def name(self) -> str:
        mode = {SHARED_SESSION: "/one-session", SESSION_PER_CONNECTION: "/session-per-conn", None: ""}[self.sessions]
        return f"{self.era}{mode}/w{self.workers}/{'redis' if self.redis else 'alone'}"


def configs(args: argparse.Namespace) -> list[Config]:
    out = []
    for era in (HANDSHAKE, STATELESS):
        if args.era not in ("both", era):
            continue
        modes: tuple[str | None, ...] = (SHARED_SESSION, SESSION_PER_CONNECTION) if era == HANDSHAKE else (None,)
        for mode in modes:
            for redis in (False, True):
                for n in args.workers:
                    if era == HANDSHAKE and not redis and n > 1:
                        continue  # serve --workers N refuses without a backend (checked once per run)
                    out.append(Config(era, n, redis, mode))
    return out


def measure(cfg: Config, args: argparse.Namespace, redis: RedisServer | None, server_log: IO[bytes]) -> dict[str, Any]:
    """One mcpload run against a fresh server of ``cfg``."""
    if cfg.redis:
        assert redis is not None
        redis.flush()
    served = Served(cfg.workers, redis.url if cfg.redis and redis is not None else None, server_log)
    try:
        served.wait_ready()
        workers = served.worker_pids()
        cpu0 = {pid: cpu_s(pid) for pid in workers}
        redis_cpu0 = redis.cpu_s() if cfg.redis and redis is not None else 0.0
        load = os.getloadavg()[0]
        argv = [
            PY, MCPLOAD, "http", served.url, "-d", str(args.duration), "-n", "100000000", "-c", str(args.concurrency),
            "-p", str(args.payload), "--warmup", str(args.warmup), "--era", cfg.era,
            "--max-seconds", str(args.duration + 30), "--io-timeout", "30", "--server-pid", str(served.pid),
        ]  # fmt: skip
        if cfg.sessions == SESSION_PER_CONNECTION:
            argv.append("--session-per-conn")
        res = run_json(argv, args.duration * 2 + 120)
        spent = {pid: cpu_s(pid) - cpu0[pid] for pid in workers}
        total = sum(spent.values())
        res["spread"] = sorted((round(v / total, 2) for v in spent.values()), reverse=True) if total > 0 else []
        if cfg.redis and redis is not None:
            calls = (res.get("requests_ok") or 0) + args.warmup
            res["redis_cpu_us_per_call"] = round((redis.cpu_s() - redis_cpu0) / calls * 1e6, 1) if calls else None
        res["loadavg_1min"] = load
    finally:
        served.stop()
    res.update(
        {"config": cfg.name, "era": cfg.era, "workers": cfg.workers, "redis": cfg.redis, "sessions": cfg.sessions}
    )
    return res


def throughput(args: argparse.Namespace, redis: RedisServer | None, server_log: IO[bytes]) -> list[dict[str, Any]]:
    runs = []
    todo = configs(args)
    for rnd in range(args.rounds):
        for cfg in todo:
            res = measure(cfg, args, redis, server_log)
            res["round"] = rnd
            runs.append(res)
            lat = res.get("latency_us") or {}
            log(
                f"  round {rnd + 1} {cfg.name:<42} {fmt(res.get('rps'))} calls/s  p99 {fmt(lat.get('p99'))} µs"
                f"  spread {res.get('spread')}  load {res.get('loadavg_1min', 0):.1f}"
                + (f"  ERRORS {res.get('error_samples')}" if res.get("errors") else "")
            )
    return runs


def throughput_tables(runs: list[dict[str, Any]], refused: bool | None) -> None:
    by: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by.setdefault(r["config"], []).append(r)
    for era in (HANDSHAKE, STATELESS):
        rows = []
        for rs in by.values():
            first = rs[0]
            if first["era"] != era:
                continue

            def med(get: Any, rs: list[dict[str, Any]] = rs) -> float | None:
                vals = [v for v in (get(r) for r in rs) if isinstance(v, (int, float))]
                return round(statistics.median(vals), 1) if vals else None

            rps = [r["rps"] for r in rs if r.get("rps")]
            rows.append([
                first["sessions"] or "—", first["workers"], "Redis" if first["redis"] else "none",
                fmt(med(lambda r: r.get("rps"))), f"{fmt(min(rps))}\N{EN DASH}{fmt(max(rps))}" if rps else "—",
                fmt(med(lambda r: (r.get("latency_us") or {}).get("p50"))),
                fmt(med(lambda r: (r.get("latency_us") or {}).get("p99"))),
                fmt(med(lambda r: r.get("server_cpu_us_per_req"))),
                fmt(med(lambda r: r.get("redis_cpu_us_per_call"))) if first["redis"] else "—",
                fmt(med(lambda r: r.get("driver_cpu_us_per_req"))),
                " / ".join(f"{v:.2f}" for v in rs[-1].get("spread") or []) or "—",
                sum(r.get("errors") or 0 for r in rs),
            ])  # fmt: skip
            if era == HANDSHAKE and not first["redis"]:
                verdict = "refused" if refused else "NOT refused (check serve --workers)"
                more = sorted({r["workers"] for r in runs if r["redis"]} - {1})
                rows.extend(
                    [first["sessions"], n, "none", f"{verdict}: --workers needs --backend", *[""] * 8] for n in more
                )
        if rows:
            print_table(
                f"{ERA_TITLES[era]}: medians of the rounds",
                ["sessions", "workers", "shared", "calls/s", "(rounds)", "p50 µs", "p99 µs", "CPU µs/call",
                 "Redis CPU µs/call", "driver CPU µs/call", "spread (last round)", "errors"],
                rows,
            )  # fmt: skip


# --- many sessions -------------------------------------------------------------------------------------------------


def established(port: int) -> int:
    """TCP connections accepted on ``port`` and still open (Linux: /proc/net/tcp, the server's side of each)."""
    n = 0
    local = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split(None, 4)
                    n += fields[1].endswith(local) and fields[3] == "01"  # (01: ESTABLISHED)
        except OSError:
            pass
    return n


def wait_connections(port: int, done: Any, timeout: float = 120.0) -> None:
    """Until ``done(connections open on port)`` holds (bounded: the figures read after it say what it came to)."""
    deadline = time.monotonic() + timeout
    while not done(established(port)) and time.monotonic() < deadline:
        time.sleep(0.1)


def open_sessions(url: str, n: int, batch: int, payload: int) -> tuple[list[Any], dict[str, Any]]:
    """``n`` handshake-era sessions, each on a keep-alive connection of its own: ``initialize``,
    ``notifications/initialized``, one ``tools/call echo`` (checked). ``batch`` sessions start together, the next
    ones when those are done (0: all at once); every connection stays open. Returns the connections (their
    ``sid``) and the driver's figures. mcpload's own ``sessions`` mode, started in batches."""
    target = mcpload.HttpTarget(url)
    text = mcpload.make_payload(payload)
    template = mcpload.CallTemplate("echo", "text", text)
    steps = ("initialize", "notifications/initialized", "call")
    rec = mcpload.Recorder()
    init_lat: list[int] = []
    failed: set[int] = set()
    ids = {"next": 0}
    conns: list[Any] = []
    reconnects = 0

    def next_req(c: Any) -> bytes | None:
        index, step = c.job
        if step >= len(steps) or index in failed:
            return None
        c.kind = steps[step]
        if step == 0:
            return target.request(mcpload.rpc(0, "initialize", mcpload.init_params()), None)
        if step == 1:
            return target.request(mcpload.rpc(None, "notifications/initialized"), c.sid)
        ids["next"] += 1
        c.rid = ids["next"]
        return target.request(template.body(c.rid), c.sid)

    def on_resp(c: Any, resp: Any, t: int) -> None:
        index = c.job[0]
        if c.kind == "initialize":
            init_lat.append(t - c.t0)
            c.sid = resp.headers.get(b"mcp-session-id")
            if resp.status != 200 or not c.sid or not any(b'"result"' in m for m in resp.messages()):
                rec.err(f"initialize: HTTP {resp.status} {resp.body[:200]!r}")
                failed.add(index)
        elif c.kind == "notifications/initialized":
            if resp.status not in (200, 202, 204):
                rec.err(f"notifications/initialized: HTTP {resp.status} {resp.body[:200]!r}")
                failed.add(index)
        else:
            errors = rec.errors
            mcpload.check_call_resp(resp, c.rid, text, rec, t - c.t0)
            if rec.errors != errors:
                failed.add(index)
        c.job[1] += 1

    t0 = time.monotonic()
    size = batch or n
    for start in range(0, n, size):
        group = []
        for index in range(start, min(start + size, n)):
            conn = mcpload.HConn(target.addr)
            conn.job = [index, 0]
            group.append(conn)
        conns.extend(group)
        reconnects += mcpload.http_loop(group, next_req, on_resp, 600, 60, rec)
    done = sum(1 for c in conns if c.job[1] == len(steps) and c.job[0] not in failed)
    return conns, {
        "sessions_ok": done, "sessions_failed": n - done, "distinct_session_ids": len({c.sid for c in conns if c.sid}),
        "calls_ok": rec.ok, "errors": rec.errors, "error_samples": rec.samples, "reconnects": reconnects,
        "failed_first": sorted(failed)[:20], "wall_s": round(time.monotonic() - t0, 2), "batch": size,
        "init_latency_us": mcpload.lat_summary(init_lat),
        "call_latency_us": mcpload.lat_summary(rec.lat),
    }  # fmt: skip


def delete_all(url: str, ids: list[bytes], connections: int) -> dict[str, Any]:
    """DELETE every session in ``ids`` over ``connections`` keep-alive connections (to whichever worker takes each)."""
    target = mcpload.HttpTarget(url)
    conns = [mcpload.HConn(target.addr) for _ in range(max(1, min(connections, len(ids))))]
    todo = list(ids)
    rec = mcpload.Recorder()
    ok = [0]

    def next_req(c: Any) -> bytes | None:
        if not todo:
            return None
        c.kind = "DELETE"
        return target.request(None, todo.pop(), method=b"DELETE")

    def on_resp(c: Any, resp: Any, t: int) -> None:
        if resp.status in (200, 202, 204):
            ok[0] += 1
        else:
            rec.err(f"DELETE: HTTP {resp.status} {resp.body[:200]!r}")

    t0 = time.monotonic()
    try:
        mcpload.http_loop(conns, next_req, on_resp, 600, 60, rec)
    finally:
        for c in conns:
            c.close()
    return {"deleted_ok": ok[0], "delete_errors": rec.errors, "delete_error_samples": rec.samples,
            "delete_s": round(time.monotonic() - t0, 2)}  # fmt: skip


def many_sessions(
    n: int, workers: int, redis: RedisServer | None, args: argparse.Namespace, server_log: IO[bytes]
) -> dict[str, Any]:
    """``n`` concurrent handshake-era sessions, with their connections, over ``workers`` workers (sharing ``redis``
    when given); the memory they take in the workers and in Redis; then DELETE each."""
    if redis is not None:
        redis.flush()
    # Idle connections stay open for the whole run (uvicorn closes them after 5 s by default), and a single worker
    # takes all of them (its default cap is three quarters of the descriptor limit, at most 10,000).
    extra = ["--keep-alive", "3600", "--max-connections", str(n + 64)]
    served = Served(workers, redis.url if redis is not None else None, server_log, *extra)
    res: dict[str, Any] = {"sessions": n, "workers": workers, "redis": redis is not None}
    conns: list[Any] = []
    try:
        served.wait_ready()
        pids = served.worker_pids()
        port = mcpload.HttpTarget(served.url).port
        rss0 = {p: rss_kb(p) for p in pids}
        redis0 = redis.used_memory() if redis is not None else 0
        res["loadavg_1min"] = os.getloadavg()[0]
        conns, res["driver"] = open_sessions(served.url, n, args.session_batch, args.payload)
        # every session is open, and every connection (the workers hold them all)
        wait_connections(port, lambda open_now: open_now >= n, timeout=30)
        res["connections_held"] = established(port)
        rss1 = {p: rss_kb(p) for p in pids}
        if redis is not None:
            res["redis_sessions"] = redis.session_count()
            redis1 = redis.used_memory()
        for c in conns:
            c.close()
        wait_connections(port, lambda open_now: open_now == 0)
        rss2 = {p: rss_kb(p) for p in pids}
        res["worker_rss_kb"] = {"before": sum(rss0.values()), "open": sum(rss1.values()), "closed": sum(rss2.values())}
        res["worker_rss_growth_kb"] = sorted((rss1[p] - rss0[p] for p in pids), reverse=True)
        res["worker_kib_per_session_with_connections"] = round((sum(rss1.values()) - sum(rss0.values())) / n, 2)
        res.update(delete_all(served.url, [c.sid for c in conns if c.sid], args.concurrency))
        res["worker_rss_kb"]["deleted"] = sum(rss_kb(p) for p in pids)
        if redis is not None:
            res["redis_used_memory"] = {"before": redis0, "open": redis1, "after_delete": redis.used_memory()}
            res["redis_bytes_per_session"] = round((redis1 - redis0) / n)
            res["redis_sessions_after_delete"] = redis.session_count()
        drv = res["driver"]
        res["ok"] = (
            drv["sessions_ok"] == n
            and not drv["errors"]
            and res["deleted_ok"] == n
            and (redis is None or (res["redis_sessions"] == n and res["redis_sessions_after_delete"] == 0))
        )
    finally:
        for c in conns:
            c.close()
        served.stop()
    log(
        f"  {n} sessions, {workers} worker(s){' + Redis' if redis else ''}: ok={res.get('ok')}"
        f" {res.get('worker_kib_per_session_with_connections')} KiB/session in the workers"
        + (f", {res.get('redis_bytes_per_session')} B/session in Redis" if redis else "")
        + (f"  ERRORS {res['driver'].get('error_samples')}" if (res.get("driver") or {}).get("errors") else "")
    )
    return res


def sessions_table(results: list[dict[str, Any]]) -> None:
    rows = []
    for r in results:
        d = r.get("driver") or {}
        used = r.get("redis_used_memory") or {}
        rows.append([
            r["workers"], "Redis" if r["redis"] else "none", f"{d.get('sessions_ok')}/{r['sessions']}",
            fmt(r.get("connections_held")), r.get("redis_sessions", "—"), d.get("errors"), fmt(d.get("wall_s")),
            fmt((d.get("init_latency_us") or {}).get("p99")), fmt((d.get("call_latency_us") or {}).get("p99")),
            fmt(r.get("worker_kib_per_session_with_connections")),
            " / ".join(f"{v / 1024:,.1f}" for v in r.get("worker_rss_growth_kb") or []),
            fmt(r.get("redis_bytes_per_session")) if r["redis"] else "—",
            f"{r.get('deleted_ok')}" + (f" ({r.get('redis_sessions_after_delete')} left)" if r["redis"] else ""),
            fmt(round((used.get("after_delete", 0) - used.get("before", 0)) / 1024, 1)) if r["redis"] else "—",
        ])  # fmt: skip
    print_table(
        "concurrent handshake-era sessions (initialize + a call each; all sessions and connections open at once)",
        ["workers", "shared", "sessions ok", "connections held", "records in Redis", "errors", "seconds",
         "initialize p99 µs", "call p99 µs", "worker KiB/session (with its connection)", "RSS growth per worker MiB",
         "Redis B/session", "DELETE ok", "Redis KiB left after"],
        rows,
    )  # fmt: skip


# --- main ----------------------------------------------------------------------------------------------------------


def raise_descriptor_limit(need: int) -> None:
    """The soft RLIMIT_NOFILE up to the hard one (inherited by the driver, Redis and the servers)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        raise SystemExit(
            f"bench/scale.py: {need} descriptors needed for the sessions run, the hard limit is {hard} "
            "(raise it, or pass a smaller --sessions)"
        )
    if soft != resource.RLIM_INFINITY and soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else need, hard))


def worker_counts(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or any(n < 1 for n in counts):
        raise argparse.ArgumentTypeError("a comma-separated list of worker counts, each at least 1")
    return counts


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench/scale.py",
        description=__doc__.split("\n\n")[0],
        epilog="Figures and how to read them: docs/performance.md, 'Several workers'.",
    )
    p.add_argument("--workers", type=worker_counts, default=[1, 2, 4], help="worker counts (default 1,2,4)")
    p.add_argument("--era", default="both", choices=("both", HANDSHAKE, STATELESS), help="one era only")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of the calls/s runs (default 3)")
    p.add_argument("-d", "--duration", type=float, default=2.0, help="measured seconds per run (default 2)")
    p.add_argument("--warmup", type=int, default=1000, help="unmeasured calls first (default 1000)")
    p.add_argument("-c", "--concurrency", type=int, default=64, help="connections of the driver (default 64)")
    p.add_argument("-p", "--payload", type=int, default=1024, help="echoed bytes per call (default 1024)")
    p.add_argument("--sessions", type=int, default=10_000, help="concurrent sessions (default 10,000)")
    p.add_argument("--session-workers", type=int, default=2, help="workers sharing Redis for them (default 2)")
    p.add_argument(
        "--session-batch", type=int, default=100, help="sessions started together (default 100; 0: all at once)"
    )
    p.add_argument(
        "--only", choices=("calls", "sessions"), default=None, help="only the calls/s runs, or only the sessions"
    )
    p.add_argument("--smoke", action="store_true", help="tiny and short: check that the script works (no figures)")
    p.add_argument("--out", default=None, help="write the JSON here (default bench/results/scale-STAMP.json)")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if args.smoke:
        args.workers, args.rounds, args.duration, args.warmup = [1, 2], 1, 0.3, 50
        args.concurrency, args.sessions, args.session_batch = 8, 50, 20
    if args.rounds < 1 or args.duration <= 0 or args.sessions < 1 or args.concurrency < 1 or args.session_workers < 1:
        build_parser().error("--rounds, --duration, --sessions, --concurrency and --session-workers must be positive")
    if args.session_batch < 0:
        build_parser().error("--session-batch must be 0 (all at once) or more")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve-unshared"]:
        return serve_unshared(int(argv[1]), argv[2:])
    args = parse_args(argv)
    if args.only != "calls":
        raise_descriptor_limit(args.sessions + 1024)
    os.makedirs(RESULTS, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    info: dict[str, Any] = {"machine": machine(), "git": git_rev(), "argv": argv, "started": stamp}
    log(f"bench/scale.py: {info['machine']['cpu']}, {info['machine']['cores']} cores, "
        f"load {info['machine']['loadavg_at_start']}, git {info['git']}")  # fmt: skip
    precompile()
    t0 = time.monotonic()
    out: dict[str, Any] = {}
    failed = False
    with open(os.path.join(RESULTS, f"scale-servers-{stamp}.log"), "ab") as server_log:
        redis = RedisServer(server_log)
        try:
            if args.only != "sessions":
                refused = refuses_workers_without_backend(server_log) if args.era != STATELESS else None
                out["refused_without_backend"] = refused
                out["runs"] = throughput(args, redis, server_log)
                throughput_tables(out["runs"], refused)
                failed |= any(r.get("errors") for r in out["runs"]) or refused is False
            if args.only != "calls" and args.era != STATELESS:
                out["sessions"] = [
                    many_sessions(args.sessions, args.session_workers, redis, args, server_log),
                    many_sessions(args.sessions, 1, None, args, server_log),
                ]
                sessions_table(out["sessions"])
                failed |= not all(r.get("ok") for r in out["sessions"])
        finally:
            redis.stop()
    info["seconds"] = round(time.monotonic() - t0, 1)
    info["loadavg_at_end"] = os.getloadavg()
    path = args.out or os.path.join(RESULTS, f"scale-{stamp}.json")
    with open(path, "w") as f:
        json.dump({**info, **out}, f, indent=1)
    log(f"\nload average at the start {info['machine']['loadavg_at_start']}, at the end {info['loadavg_at_end']}; "
        f"wrote {os.path.relpath(path, ROOT)} in {info['seconds']} s")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
