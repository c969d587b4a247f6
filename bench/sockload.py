#!/usr/bin/env python3
"""sockload: mcpload's stdio measurement over a TCP or Unix socket (NDJSON framing, one connection).

mcpload.py speaks stdio and HTTP; our server also serves newline-delimited JSON on TCP and Unix sockets. This
driver reuses mcpload's own code for everything but the connection — the request template, the window of W
requests in flight, the response checks, the latency percentiles and the /proc figures — so the numbers mean
exactly what they mean for stdio:

  sockload.py tcp  HOST:PORT [opts] -- CMD [ARG...]   spawn CMD, wait for the port, connect, handshake, calls
  sockload.py unix PATH      [opts] -- CMD [ARG...]   the same on a Unix socket

Options are mcpload's (-n, -d, -c, -p, --warmup, --era, --max-seconds, --io-timeout, --start-timeout, --tool,
--arg, --server-log, --label, --out, --pretty). Output: one JSON line like ``mcpload.py stdio`` (``mode`` is tcp
or unix, ``init_ms`` is spawn → initialize answered, ``listen_ms`` spawn → connectable). Exit 0 when every call
passed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcpload  # the vendored neutral driver, next to this file


class SocketServer(mcpload.StdioServer):
    """A spawned server reached over a socket: the same send/poll/handshake as mcpload's stdio server."""

    def __init__(self, cmd: list[str], family: str, address: str, stderr_path: str | None, start_timeout: float):
        import collections

        self.errf = open(stderr_path, "ab") if stderr_path else subprocess.DEVNULL  # noqa: SIM115 (closed in stop)
        self.t_spawn = mcpload.now_ns()
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self.errf, stderr=self.errf, start_new_session=True
        )
        self.pid = self.proc.pid
        self.sock = self._connect(family, address, start_timeout)
        self.t_listen = mcpload.now_ns()
        self.sock.setblocking(False)
        self.wfd = self.rfd = self.sock.fileno()
        self.out = collections.deque()
        self.parts = []
        self.eof = False

    def _connect(self, family: str, address: str, timeout: float) -> socket.socket:
        end = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with code {self.proc.returncode} before listening")
            try:
                if family == "unix":
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect(address)
                else:
                    host, _, port = address.rpartition(":")
                    s = socket.create_connection((host or "127.0.0.1", int(port)), timeout=1)
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except OSError:
                if time.monotonic() > end:
                    raise RuntimeError(f"nothing listening on {family}:{address} after {timeout}s") from None
                time.sleep(0.005)

    def stop(self, hard: bool = False) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        p = self.proc
        for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 5)):
            if p.poll() is not None:
                break
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(wait)
            except subprocess.TimeoutExpired:
                pass
        if self.errf is not subprocess.DEVNULL:
            self.errf.close()


def run_socket(family: str, address: str, cmd: list[str], a: argparse.Namespace) -> dict:
    payload = mcpload.make_payload(a.payload)
    stateless = a.era == "stateless"  # 2026-07-28: no initialize, the revision's _meta on every request
    tpl = mcpload.CallTemplate(a.tool, a.arg, payload, stateless)
    res: dict = {"mode": family, "target": f"{family}:{address}", "server_cmd": shlex.join(cmd), "era": a.era}
    srv = None
    try:
        srv = SocketServer(cmd, family, address, a.server_log, a.start_timeout)
        res["listen_ms"] = round((srv.t_listen - srv.t_spawn) / 1e6, 1)
        if not stateless:
            srv.handshake()
        res["init_ms"] = round((mcpload.now_ns() - srv.t_spawn) / 1e6, 1)
        nid = 0
        if a.warmup:
            nid = mcpload.stdio_phase(
                srv, tpl, payload, a.concurrency, a.warmup, 0, a.max_seconds, a.io_timeout, mcpload.Recorder(), nid
            )
        rec = mcpload.Recorder()
        s0, c0, t0 = mcpload.tree_stats(srv.pid), mcpload.self_cpu(), mcpload.now_ns()
        mcpload.stdio_phase(
            srv, tpl, payload, a.concurrency, a.requests, a.duration, a.max_seconds, a.io_timeout, rec, nid
        )
        wall = (mcpload.now_ns() - t0) / 1e9
        s1, c1 = mcpload.tree_stats(srv.pid), mcpload.self_cpu()
    except Exception as e:  # report, never hang
        res.update({"errors": 1, "error_samples": [f"{type(e).__name__}: {e}"]})
        if srv is not None:
            srv.stop(hard=True)
        return res
    srv.stop()
    return mcpload.finish(res, a, rec, wall, s0, s1, c1 - c0)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        raise SystemExit("sockload: tcp HOST:PORT | unix PATH [opts] -- CMD [ARG...]")
    k = argv.index("--")
    argv, cmd = argv[:k], argv[k + 1 :]
    p = mcpload.build_parser()
    p.prog = "sockload.py"
    # mcpload's parser, with our two modes in place of its own
    for action in p._actions:
        if action.dest == "mode":
            action.choices = ["tcp", "unix"]
    a = p.parse_args(argv)
    if len(a.url_or_transport) != 1 or not cmd:
        raise SystemExit("sockload: tcp HOST:PORT | unix PATH [opts] -- CMD [ARG...]")
    res = run_socket(a.mode, a.url_or_transport[0], cmd, a)
    res["driver"] = f"sockload (mcpload {mcpload.VERSION}, python {sys.version.split()[0]})"
    line = json.dumps(res, indent=2 if a.pretty else None)
    print(line, flush=True)
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps(res) + "\n")
    return 0 if not res.get("errors") else 1


if __name__ == "__main__":
    sys.exit(main())
