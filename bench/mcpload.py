#!/usr/bin/env python3
# ruff: noqa  (vendored unchanged from the shared neutral driver; only this line added)
"""mcpload - a neutral, SDK-independent load driver for MCP servers.

It speaks MCP's JSON-RPC wire format itself (no MCP SDK), over stdio (newline-delimited JSON on a child's
stdin/stdout) or Streamable HTTP (POST, JSON or SSE responses, Mcp-Session-Id), and calls one tool
(default `echo`, argument `text`) with a fixed payload, checking every response.

  mcpload.py stdio    [opts] -- CMD [ARG...]        spawn CMD, handshake, N tools/call with W in flight
  mcpload.py http URL [opts] [-- CMD [ARG...]]      Streamable HTTP; CMD (optional) is spawned, waited for, measured, stopped
  mcpload.py floor    [opts] [--impl py|node] [--transport stdio|http]
                                                    the same run against a built-in trivial echo server (the ceiling)
  mcpload.py sessions URL [opts] [-- CMD ...]       S concurrent HTTP sessions, each initialize + K calls
  mcpload.py coldstart stdio -- CMD                 spawn, initialize, tools/list, exit: time to first tools/list
  mcpload.py coldstart http URL -- CMD
  mcpload.py http-init URL                          print a fresh session id (for the wrk script)
  mcpload.py floor-server                           the trivial Python stdio echo server itself
  mcpload.py floor-http-server PORT                 the trivial Python Streamable HTTP echo server itself

Output: one JSON object per run on stdout (and appended to --out FILE). Exit 0 when every check passed.
Needs Python >= 3.9; msgspec is used when importable (faster checks), else the stdlib json module.
Linux only for server RSS/CPU figures (read from /proc).
"""


import argparse
import collections
import itertools
import json
import os
import resource
import select
import selectors
import shlex
import signal
import socket
import subprocess
import sys
import time
from typing import Optional, Union
from urllib.parse import urlsplit

try:
    import msgspec
except ImportError:  # pragma: no cover - works without it, only slower
    msgspec = None

VERSION = "0.1.0"
PROTOCOL_VERSION = "2025-11-25"
STATELESS_VERSION = "2026-07-28"
# --era stateless: no initialize; every request carries the 2026-07-28 _meta (and, over HTTP, its headers)
STATELESS_META = ('"_meta":{"io.modelcontextprotocol/protocolVersion":"' + STATELESS_VERSION
                  + '","io.modelcontextprotocol/clientCapabilities":{}}')
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
now_ns = time.perf_counter_ns


# --------------------------------------------------------------------------------------------- helpers
def make_payload(n: int) -> str:
    """Deterministic ASCII payload (no JSON escapes), the same one the wrk script builds."""
    return (ALPHABET * (n // len(ALPHABET) + 1))[:n]


def parse_size(s: str) -> int:
    t = s.strip().lower().replace("ib", "").replace("b", "")
    mult = 1
    if t.endswith("k"):
        mult, t = 1024, t[:-1]
    elif t.endswith("m"):
        mult, t = 1024 * 1024, t[:-1]
    return int(float(t) * mult)


def pct(sorted_ns: list, p: float) -> Optional[float]:
    if not sorted_ns:
        return None
    k = min(len(sorted_ns) - 1, max(0, int(round(p / 100.0 * len(sorted_ns) + 0.5)) - 1))
    return round(sorted_ns[k] / 1000.0, 1)


def lat_summary(lat_ns: list) -> dict:
    s = sorted(lat_ns)
    if not s:
        return {}
    return {
        "p50": pct(s, 50), "p90": pct(s, 90), "p99": pct(s, 99), "p999": pct(s, 99.9),
        "max": round(s[-1] / 1000.0, 1), "mean": round(sum(s) / len(s) / 1000.0, 1),
    }


_CLK = os.sysconf("SC_CLK_TCK")


def proc_tree(pid: int) -> list:
    """pid and all its live descendants (via /proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo and len(out) < 4096:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return out


def tree_stats(pid: Optional[int]) -> dict:
    """Sum over the process tree: VmHWM (peak RSS), VmRSS, and CPU seconds (utime+stime)."""
    if not pid:
        return {}
    hwm = rss = ticks = n = 0
    for p in proc_tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm += int(line.split()[1])
                    elif line.startswith("VmRSS:"):
                        rss += int(line.split()[1])
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
            rest = st[st.rfind(")") + 2:].split()
            ticks += int(rest[11]) + int(rest[12])
            n += 1
        except (OSError, ValueError, IndexError):
            pass
    return {"hwm_kb": hwm, "rss_kb": rss, "cpu_s": ticks / _CLK, "procs": n}


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def self_cpu_split() -> tuple:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


# ----------------------------------------------------------------------------------- message decoding
if msgspec is not None:
    class _Content(msgspec.Struct):
        text: Optional[str] = None

    class _Err(msgspec.Struct):
        code: int = 0
        message: str = ""

    class _ResultT(msgspec.Struct):
        content: list[_Content] = []
        isError: bool = False

    class _MsgT(msgspec.Struct):
        id: Union[int, str, None] = None
        method: Optional[str] = None
        result: Optional[_ResultT] = None
        error: Optional[_Err] = None

    _dec_call = msgspec.json.Decoder(_MsgT)

    def decode_call(raw: bytes):
        """-> (id, method, text_or_None, problem_or_None) for a tools/call response (or other message)."""
        try:
            m = _dec_call.decode(raw)
        except msgspec.DecodeError:
            # not a tools/call-shaped message (a server request, a notification, another result): generic path
            return decode_call_generic(raw)
        if m.error is not None:
            return m.id, m.method, None, f"rpc error {m.error.code}: {m.error.message[:200]}"
        r = m.result
        if r is None:
            return m.id, m.method, None, (None if m.method else "response without result")
        if r.isError:
            return m.id, m.method, None, "isError=true: " + (r.content[0].text or "")[:200] if r.content else "isError=true"
        if not r.content:
            return m.id, m.method, None, "empty content"
        return m.id, m.method, r.content[0].text, None

    json_loads = msgspec.json.decode
else:  # pragma: no cover
    def decode_call(raw: bytes):
        return decode_call_generic(raw)

    json_loads = json.loads


def decode_call_generic(raw: bytes):
    try:
        m = json.loads(raw)
    except ValueError as e:
        return None, None, None, f"bad json: {e}"
    if not isinstance(m, dict):
        return None, None, None, "not a JSON object"
    if "error" in m:
        e = m["error"] or {}
        return m.get("id"), m.get("method"), None, f"rpc error {e.get('code')}: {str(e.get('message'))[:200]}"
    r = m.get("result")
    if not isinstance(r, dict):
        return m.get("id"), m.get("method"), None, (None if m.get("method") else "response without result")
    c = r.get("content")
    if r.get("isError"):
        return m.get("id"), None, None, "isError=true"
    if not c or not isinstance(c, list) or not isinstance(c[0], dict):
        return m.get("id"), None, None, "empty content"
    return m.get("id"), None, c[0].get("text"), None


def rpc(id_, method, params=None) -> bytes:
    m = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        m["id"] = id_
    if params is not None:
        m["params"] = params
    return json.dumps(m, separators=(",", ":")).encode()


def init_params(name="mcpload") -> dict:
    return {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": name, "version": VERSION}}


class CallTemplate:
    """Pre-encoded tools/call request: HEAD + id + TAIL."""

    def __init__(self, tool: str, arg: str, payload: str, stateless: bool = False):
        self.head = b'{"jsonrpc":"2.0","id":'
        meta = (b"," + STATELESS_META.encode()) if stateless else b""
        self.tail = (b',"method":"tools/call","params":{"name":' + json.dumps(tool).encode()
                     + b',"arguments":{' + json.dumps(arg).encode() + b":" + json.dumps(payload).encode() + b"}"
                     + meta + b"}}")

    def body(self, i: int) -> bytes:
        return self.head + str(i).encode() + self.tail


class Recorder:
    def __init__(self):
        self.lat = []
        self.ok = 0
        self.errors = 0
        self.samples = []
        self.notifications = 0

    def err(self, msg: str):
        self.errors += 1
        if len(self.samples) < 5:
            self.samples.append(msg)


# ------------------------------------------------------------------------------------------- stdio
class StdioServer:
    def __init__(self, cmd: list, stderr_path: Optional[str]):
        self.errf = open(stderr_path, "ab") if stderr_path else subprocess.DEVNULL
        self.t_spawn = now_ns()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errf,
                                     start_new_session=True, bufsize=0)
        self.pid = self.proc.pid
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        os.set_blocking(self.wfd, False)
        os.set_blocking(self.rfd, False)
        self.out = collections.deque()  # bytes chunks not yet written (written with writev, never re-copied)
        self.parts = []
        self.eof = False

    def send(self, *chunks: bytes):
        self.out.extend(chunks)
        self.flush()

    def flush(self):
        out = self.out
        while out:
            try:
                n = os.writev(self.wfd, list(itertools.islice(out, 0, 64)))
            except BlockingIOError:
                return
            except BrokenPipeError:
                self.eof = True
                out.clear()
                return
            while n:
                first = out[0]
                if n >= len(first):
                    n -= len(first)
                    out.popleft()
                else:
                    out[0] = memoryview(first)[n:]
                    n = 0

    def poll(self, timeout: float) -> list:
        """Wait up to timeout for output; return the complete lines read (flushes pending input too)."""
        r, w, _ = select.select([self.rfd], [self.wfd] if self.out else [], [], timeout)
        if w:
            self.flush()
        if not r:
            return []
        try:
            data = os.read(self.rfd, 1 << 16)  # a pipe holds 64 KiB by default
        except BlockingIOError:
            return []
        if not data:
            self.eof = True
            return []
        if b"\n" not in data:
            self.parts.append(data)
            return []
        if self.parts:
            self.parts.append(data)
            data = b"".join(self.parts)
            self.parts = []
        lines = data.split(b"\n")
        last = lines.pop()
        if last:
            self.parts.append(last)
        return lines

    def request(self, id_, method, params, timeout=60.0):
        """Blocking request/response used for the handshake; answers server requests meanwhile."""
        self.send(rpc(id_, method, params) + b"\n")
        end = time.monotonic() + timeout
        while time.monotonic() < end and not self.eof:
            for line in self.poll(0.5):
                if not line.strip():
                    continue
                m = json.loads(line)
                if m.get("id") == id_ and "method" not in m:
                    return m
                self.answer_server_request(m)
        raise RuntimeError(f"no response to {method} (eof={self.eof}, exit={self.proc.poll()})")

    def answer_server_request(self, m: dict):
        if "method" in m and m.get("id") is not None:
            if m["method"] == "ping":
                self.send(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {}}).encode() + b"\n")
            else:
                self.send(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {
                    "code": -32601, "message": "mcpload: method not supported"}}).encode() + b"\n")

    def handshake(self) -> dict:
        r = self.request(0, "initialize", init_params())
        if "result" not in r:
            raise RuntimeError(f"initialize failed: {r}")
        self.send(rpc(None, "notifications/initialized") + b"\n")
        return r["result"]

    def stop(self, hard=False):
        p = self.proc
        if p.poll() is None and not hard:
            try:
                p.stdin.close()  # MCP stdio: EOF on stdin asks the server to exit
            except OSError:
                pass
            try:
                p.wait(3)
            except subprocess.TimeoutExpired:
                pass
        for sig, wait in ((signal.SIGTERM, 2), (signal.SIGKILL, 5)):
            if p.poll() is not None:
                break
            try:
                os.killpg(p.pid, sig)  # the group this driver created for the child (start_new_session)
            except ProcessLookupError:
                break
            try:
                p.wait(wait)
            except subprocess.TimeoutExpired:
                pass
        if self.errf is not subprocess.DEVNULL:
            self.errf.close()


def stdio_phase(srv: StdioServer, tpl: CallTemplate, payload: str, conc: int, n_max: int, duration: float,
                max_s: float, io_timeout: float, rec: Recorder, next_id: int) -> int:
    pending = {}
    issued = 0
    t_start = time.monotonic()
    t_stop_issue = t_start + duration if duration > 0 else None
    t_hard = t_start + max_s
    last_progress = t_start
    lat_append = rec.lat.append
    head, tail = tpl.head, tpl.tail + b"\n"
    while True:
        tm = time.monotonic()
        can_issue = issued < n_max and (t_stop_issue is None or tm < t_stop_issue) and tm < t_hard
        if can_issue and len(pending) < conc:
            out = srv.out
            while len(pending) < conc and issued < n_max:
                next_id += 1
                issued += 1
                out.append(head + str(next_id).encode())
                out.append(tail)
                pending[next_id] = now_ns()
            srv.flush()
        if not pending:
            break
        if srv.eof:
            rec.err(f"server closed stdout (exit code {srv.proc.poll()}) with {len(pending)} in flight")
            break
        lines = srv.poll(0.25)
        if not lines:
            if tm - last_progress > io_timeout or tm > t_hard + io_timeout:
                rec.err(f"timeout: no response for {io_timeout}s with {len(pending)} in flight")
                break
            continue
        t = now_ns()
        last_progress = tm
        for line in lines:
            if not line:
                continue
            id_, method, text, problem = decode_call(line)
            if method is not None:
                if id_ is None:
                    rec.notifications += 1
                else:
                    srv.answer_server_request(json.loads(line))
                continue
            t0 = pending.pop(id_, None)
            if t0 is None:
                rec.err(f"response with unknown id {id_!r}")
                continue
            lat_append(t - t0)
            if problem is not None:
                rec.err(problem)
            elif text != payload:
                rec.err(f"payload mismatch on id {id_} (got {len(text or '')} chars)")
            else:
                rec.ok += 1
    return next_id


def run_stdio(cmd: list, a) -> dict:
    payload = make_payload(a.payload)
    stateless = a.era == "stateless"
    tpl = CallTemplate(a.tool, a.arg, payload, stateless)
    srv = StdioServer(cmd, a.server_log)
    res = {"mode": "stdio", "target": shlex.join(cmd), "era": a.era}
    try:
        if not stateless:
            srv.handshake()
        res["init_ms"] = round((now_ns() - srv.t_spawn) / 1e6, 1)
        nid = 0
        if a.warmup:
            nid = stdio_phase(srv, tpl, payload, a.concurrency, a.warmup, 0, a.max_seconds, a.io_timeout,
                              Recorder(), nid)
        rec = Recorder()
        s0, c0, t0 = tree_stats(srv.pid), self_cpu(), now_ns()
        stdio_phase(srv, tpl, payload, a.concurrency, a.requests, a.duration, a.max_seconds, a.io_timeout, rec, nid)
        wall = (now_ns() - t0) / 1e9
        s1, c1 = tree_stats(srv.pid), self_cpu()
    except Exception as e:  # report, never hang
        res.update({"errors": 1, "error_samples": [f"{type(e).__name__}: {e}"]})
        srv.stop(hard=True)
        return res
    srv.stop()
    return finish(res, a, rec, wall, s0, s1, c1 - c0)


def finish(res, a, rec, wall, s0, s1, drv_cpu) -> dict:
    done = rec.ok + rec.errors
    res.update({
        "label": a.label, "payload_bytes": a.payload, "concurrency": a.concurrency,
        "requests_ok": rec.ok, "errors": rec.errors, "error_samples": rec.samples,
        "wall_s": round(wall, 3), "rps": round(rec.ok / wall, 1) if wall > 0 else None,
        "latency_us": lat_summary(rec.lat),
    })
    if s1:
        cpu = max(0.0, s1["cpu_s"] - s0.get("cpu_s", 0.0))
        res.update({"server_rss_peak_kb": s1["hwm_kb"], "server_rss_end_kb": s1["rss_kb"],
                    "server_procs": s1["procs"], "server_cpu_s": round(cpu, 3),
                    "server_cpu_us_per_req": round(cpu / done * 1e6, 1) if done else None})
    res.update({"driver_cpu_s": round(drv_cpu, 3),
                "driver_cpu_us_per_req": round(drv_cpu / done * 1e6, 1) if done else None})
    if rec.notifications:
        res["notifications"] = rec.notifications
    return res


# -------------------------------------------------------------------------------------------- http
class HttpResp:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def messages(self) -> list:
        """JSON-RPC messages carried by this response (JSON body or SSE `data:` events)."""
        ct = self.headers.get(b"content-type", b"")
        body = self.body
        if ct.startswith(b"text/event-stream"):
            if body.count(b"data:") == 1 and b"\r" not in body:  # fast path: one event, one data line
                i = body.index(b"data:") + 5
                j = body.find(b"\n", i)
                d = body[i:j if j >= 0 else len(body)]
                return [d[1:] if d[:1] == b" " else d]
            if b"\r" in body:
                body = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            out = []
            for ev in body.split(b"\n\n"):
                data = []
                for ln in ev.split(b"\n"):
                    if ln.startswith(b"data:"):
                        v = ln[5:]
                        data.append(v[1:] if v[:1] == b" " else v)
                if data:
                    d = b"\n".join(data)
                    if d.strip():
                        out.append(d)
            return out
        if body.strip():
            return [body]
        return []


class HConn:
    """One keep-alive HTTP/1.1 connection with an incremental response parser."""
    __slots__ = ("addr", "sock", "buf", "state", "remaining", "chunks", "status", "headers", "t0", "rid",
                 "kind", "sid", "job", "closing", "out")

    def __init__(self, addr):
        self.addr = addr
        self.sock = None
        self.sid = None
        self.job = None
        self.connect()

    def connect(self):
        s = socket.create_connection(self.addr, timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        self.sock = s
        self.buf = bytearray()
        self.state = 0  # 0 headers, 1 body by length, 2 chunk size, 3 chunk data, 4 trailers, 5 until close
        self.rid = None
        self.kind = "call"
        self.closing = False
        self.out = b""

    def send(self, data: bytes):
        try:
            n = self.sock.send(data)
        except BlockingIOError:
            n = 0
        self.out = data[n:]

    def feed(self, data: bytes) -> Optional[HttpResp]:
        buf = self.buf
        buf += data
        while True:
            st = self.state
            if st == 0:
                i = buf.find(b"\r\n\r\n")
                if i < 0:
                    return None
                lines = bytes(buf[:i]).split(b"\r\n")
                del buf[:i + 4]
                self.status = int(lines[0][9:12])
                h = {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(b":")
                    h[k.strip().lower()] = v.strip()
                self.headers = h
                self.chunks = []
                self.closing = h.get(b"connection", b"").lower() == b"close"
                if b"chunked" in h.get(b"transfer-encoding", b"").lower():
                    self.state = 2
                elif b"content-length" in h:
                    self.remaining = int(h[b"content-length"])
                    self.state = 1
                elif self.status in (204, 304) or 100 <= self.status < 200:
                    self.remaining = 0
                    self.state = 1
                else:
                    self.state = 5
                    self.closing = True
            elif st == 1:
                if len(buf) < self.remaining:
                    return None
                body = bytes(buf[:self.remaining])
                del buf[:self.remaining]
                return self._done(body)
            elif st == 2:
                i = buf.find(b"\r\n")
                if i < 0:
                    return None
                size = int(bytes(buf[:i]).split(b";")[0], 16)
                del buf[:i + 2]
                if size == 0:
                    self.state = 4
                else:
                    self.remaining = size
                    self.state = 3
            elif st == 3:
                if len(buf) < self.remaining + 2:
                    return None
                self.chunks.append(bytes(buf[:self.remaining]))
                del buf[:self.remaining + 2]
                self.state = 2
            elif st == 4:
                i = buf.find(b"\r\n")
                if i < 0:
                    return None
                del buf[:i + 2]
                if i == 0:
                    return self._done(b"".join(self.chunks))
            else:  # 5: body until close, completed by eof()
                return None

    def eof(self) -> Optional[HttpResp]:
        if self.state == 5:
            body = bytes(self.buf)
            self.buf = bytearray()
            return self._done(body)
        return None

    def _done(self, body: bytes) -> HttpResp:
        self.state = 0
        return HttpResp(self.status, self.headers, body)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class HttpTarget:
    def __init__(self, url: str):
        u = urlsplit(url)
        if u.scheme != "http":
            raise SystemExit("mcpload: only http:// URLs (loopback benchmarking)")
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 80
        self.path = (u.path or "/").encode() + ((b"?" + u.query.encode()) if u.query else b"")
        self.hosthdr = (u.netloc or self.host).encode()
        self.addr = (self.host, self.port)
        self.stateless_headers = b""  # set by run_http for --era stateless

    def request(self, body: Optional[bytes], sid: Optional[bytes], method=b"POST") -> bytes:
        h = [method, b" ", self.path, b" HTTP/1.1\r\nHost: ", self.hosthdr,
             b"\r\nAccept: application/json, text/event-stream\r\n", self.stateless_headers]
        if sid:
            h += [b"Mcp-Session-Id: ", sid, b"\r\nMcp-Protocol-Version: ", PROTOCOL_VERSION.encode(), b"\r\n"]
        if body is not None:
            h += [b"Content-Type: application/json\r\nContent-Length: ", str(len(body)).encode(), b"\r\n\r\n", body]
        else:
            h.append(b"Content-Length: 0\r\n\r\n")
        return b"".join(h)


def blocking_exchange(c: HConn, data: bytes, timeout=30.0) -> HttpResp:
    c.sock.setblocking(True)
    c.sock.settimeout(timeout)
    try:
        c.sock.sendall(data)
        while True:
            d = c.sock.recv(1 << 18)
            if not d:
                r = c.eof()
                if r:
                    c.closing = True
                    return r
                raise RuntimeError("connection closed before a response")
            r = c.feed(d)
            if r is not None:
                return r
    finally:
        c.sock.setblocking(False)


def http_initialize(tg: HttpTarget, c: HConn) -> Optional[bytes]:
    r = blocking_exchange(c, tg.request(rpc(0, "initialize", init_params()), None))
    if r.status != 200:
        raise RuntimeError(f"initialize: HTTP {r.status}: {r.body[:300]!r}")
    msgs = [json.loads(m) for m in r.messages()]
    if not any(m.get("id") == 0 and "result" in m for m in msgs):
        raise RuntimeError(f"initialize: no result in {r.body[:300]!r}")
    sid = r.headers.get(b"mcp-session-id")
    _reconnect_if_closing(c)
    r2 = blocking_exchange(c, tg.request(rpc(None, "notifications/initialized"), sid))
    if r2.status not in (200, 202, 204):
        raise RuntimeError(f"notifications/initialized: HTTP {r2.status}: {r2.body[:300]!r}")
    _reconnect_if_closing(c)
    return sid


def _reconnect_if_closing(c: HConn):
    if c.closing:
        c.close()
        c.connect()


def wait_port(addr, proc: Optional[subprocess.Popen], timeout: float):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode} before listening")
        try:
            socket.create_connection(addr, timeout=1).close()
            return
        except OSError:
            time.sleep(0.005)
    raise RuntimeError(f"nothing listening on {addr} after {timeout}s")


class SpawnedServer:
    """An HTTP server command started (and stopped) by the driver, in its own process group."""

    def __init__(self, cmd: list, stderr_path: Optional[str]):
        self.errf = open(stderr_path, "ab") if stderr_path else subprocess.DEVNULL
        self.t_spawn = now_ns()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.errf, stderr=self.errf,
                                     start_new_session=True)
        self.pid = self.proc.pid

    def stop(self, hard=False):
        p = self.proc
        for sig, wait in (((signal.SIGKILL, 5),) if hard else ((signal.SIGTERM, 3), (signal.SIGKILL, 5))):
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


def http_loop(conns: list, next_req, on_resp, max_s: float, io_timeout: float, rec: Recorder):
    """Drive all connections: next_req(c) -> bytes|None starts a request on idle c; on_resp(c, resp, t_ns)."""
    ep = select.epoll()
    EPOLLIN, EPOLLOUT = select.EPOLLIN, select.EPOLLOUT
    byfd = {}
    for c in conns:
        ep.register(c.sock.fileno(), EPOLLIN)
        byfd[c.sock.fileno()] = c

    def renew(c):  # replace a closed connection, keep the session id
        fd = c.sock.fileno()
        ep.unregister(fd)
        del byfd[fd]
        c.close()
        c.connect()
        ep.register(c.sock.fileno(), EPOLLIN)
        byfd[c.sock.fileno()] = c

    rbuf = bytearray(1 << 18)  # one receive buffer, reused (a fresh 256 KiB bytes per recv costs more than the parse)
    rview = memoryview(rbuf)
    busy = 0
    t_hard = time.monotonic() + max_s
    last_progress = time.monotonic()
    idle = list(conns)
    reconnects = 0
    try:
        while True:
            while idle:
                c = idle.pop()
                data = next_req(c)
                if data is None:
                    continue
                c.t0 = now_ns()
                c.send(data)
                if c.out:
                    ep.modify(c.sock.fileno(), EPOLLIN | EPOLLOUT)
                busy += 1
            if busy == 0:
                break
            events = ep.poll(0.25)
            tm = time.monotonic()
            if not events:
                if tm > t_hard + io_timeout or tm - last_progress > io_timeout:
                    rec.err(f"timeout: {busy} requests without a response for {io_timeout}s")
                    break
                continue
            last_progress = tm
            t = now_ns()
            for fd, mask in events:
                c = byfd[fd]
                if mask & EPOLLOUT:
                    c.send(c.out)
                    if not c.out:
                        ep.modify(fd, EPOLLIN)
                if not mask & (EPOLLIN | select.EPOLLHUP | select.EPOLLERR):
                    continue
                try:
                    k = c.sock.recv_into(rbuf)
                    data = rview[:k]
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as e:
                    data = b""
                    rec.err(f"recv: {e}")
                r = c.feed(data) if data else c.eof()
                if r is None:
                    if data:
                        continue
                    rec.err(f"connection closed by server mid-request (request kind {c.kind}, "
                            f"{len(c.buf)} bytes of a response, after {(now_ns() - c.t0) / 1e9:.2f}s)")
                    renew(c)
                    reconnects += 1
                    busy -= 1
                    c.rid = None
                    idle.append(c)
                    continue
                busy -= 1
                on_resp(c, r, t)
                if c.closing or not data:
                    renew(c)
                    reconnects += 1
                idle.append(c)
    finally:
        ep.close()
    return reconnects


def check_call_resp(r: HttpResp, rid: int, payload: str, rec: Recorder, lat_ns: int):
    if r.status != 200:
        rec.err(f"HTTP {r.status}: {r.body[:200]!r}")
        return
    found = False
    for raw in r.messages():
        id_, method, text, problem = decode_call(raw)
        if method is not None:
            if id_ is None:
                rec.notifications += 1
            continue
        if id_ != rid:
            rec.err(f"response id {id_!r} != request id {rid}")
            continue
        found = True
        rec.lat.append(lat_ns)
        if problem is not None:
            rec.err(problem)
        elif text != payload:
            rec.err(f"payload mismatch on id {rid} (got {len(text or '')} chars)")
        else:
            rec.ok += 1
    if not found:
        rec.err(f"no JSON-RPC response for id {rid} in HTTP body {r.body[:200]!r}")


def http_phase(tg, conns, tpl, payload, n_max, duration, max_s, io_timeout, rec, next_id):
    st = {"issued": 0, "id": next_id}
    t_stop = time.monotonic() + duration if duration > 0 else None
    t_hard = time.monotonic() + max_s

    def next_req(c):
        if st["issued"] >= n_max:
            return None
        tm = time.monotonic()
        if (t_stop is not None and tm >= t_stop) or tm >= t_hard:
            return None
        st["issued"] += 1
        st["id"] += 1
        c.rid = st["id"]
        return tg.request(tpl.body(c.rid), c.sid)

    def on_resp(c, r, t):
        check_call_resp(r, c.rid, payload, rec, t - c.t0)
        c.rid = None

    rc = http_loop(conns, next_req, on_resp, max_s, io_timeout, rec)
    return st["id"], rc


def start_http_server(a, tg) -> Optional[SpawnedServer]:
    if not a.cmd:
        return None
    srv = SpawnedServer(a.cmd, a.server_log)
    try:
        wait_port(tg.addr, srv.proc, a.start_timeout)
    except Exception:
        srv.stop(hard=True)
        raise
    return srv


def run_http(url: str, a) -> dict:
    payload = make_payload(a.payload)
    stateless = a.era == "stateless"
    tpl = CallTemplate(a.tool, a.arg, payload, stateless)
    tg = HttpTarget(url)
    if stateless:
        tg.stateless_headers = (b"MCP-Protocol-Version: " + STATELESS_VERSION.encode() + b"\r\nMcp-Method: tools/call\r\n"
                                b"Mcp-Name: " + a.tool.encode() + b"\r\n")
    res = {"mode": "http", "target": url, "era": a.era}
    if a.cmd:
        res["server_cmd"] = shlex.join(a.cmd)
    srv = None
    conns = []
    try:
        srv = start_http_server(a, tg)
        pid = srv.pid if srv else a.server_pid
        if srv:
            res["listen_ms"] = round((now_ns() - srv.t_spawn) / 1e6, 1)
        conns = [HConn(tg.addr) for _ in range(a.concurrency)]
        if stateless:
            for c in conns:
                c.sid = None
        elif a.session_per_conn:
            for c in conns:
                c.sid = http_initialize(tg, c)
        else:
            sid = http_initialize(tg, conns[0])
            for c in conns:
                c.sid = sid
        res["sessions"] = 0 if stateless else len({c.sid for c in conns})
        nid = 0
        if a.warmup:
            nid, _ = http_phase(tg, conns, tpl, payload, a.warmup, 0, a.max_seconds, a.io_timeout, Recorder(), nid)
        rec = Recorder()
        s0, c0, t0 = tree_stats(pid), self_cpu(), now_ns()
        _, reconnects = http_phase(tg, conns, tpl, payload, a.requests, a.duration, a.max_seconds, a.io_timeout,
                                   rec, nid)
        wall = (now_ns() - t0) / 1e9
        s1, c1 = tree_stats(pid), self_cpu()
    except Exception as e:
        res.update({"errors": 1, "error_samples": [f"{type(e).__name__}: {e}"]})
        for c in conns:
            c.close()
        if srv:
            srv.stop(hard=True)
        return res
    for c in conns:
        c.close()
    if srv:
        srv.stop()
    res = finish(res, a, rec, wall, s0, s1, c1 - c0)
    res["reconnects"] = reconnects
    return res


def run_sessions(url: str, a) -> dict:
    """S concurrent sessions, each on its own connection: initialize, initialized, K calls (optionally DELETE)."""
    payload = make_payload(a.payload)
    tpl = CallTemplate(a.tool, a.arg, payload)
    tg = HttpTarget(url)
    res = {"mode": "sessions", "target": url, "sessions": a.sessions, "calls_per_session": a.calls}
    srv = None
    conns = []
    try:
        srv = start_http_server(a, tg)
        pid = srv.pid if srv else a.server_pid
        s0 = tree_stats(pid)
        conns = [HConn(tg.addr) for _ in range(a.sessions)]
        init_lat, call_rec = [], Recorder()
        sess_ok = [True] * len(conns)
        for i, c in enumerate(conns):
            c.job = [i, 0]  # session index, step
        steps_total = 2 + a.calls
        ctr = {"id": 0}

        def next_req(c):
            i, step = c.job
            if step >= steps_total or not sess_ok[i]:
                return None
            c.kind = ("initialize", "notifications/initialized")[step] if step < 2 else "call"
            if step == 0:
                return tg.request(rpc(0, "initialize", init_params()), None)
            if step == 1:
                return tg.request(rpc(None, "notifications/initialized"), c.sid)
            ctr["id"] += 1
            c.rid = ctr["id"]
            return tg.request(tpl.body(c.rid), c.sid)

        def on_resp(c, r, t):
            i = c.job[0]
            if c.kind == "initialize":
                sid = r.headers.get(b"mcp-session-id")
                okm = r.status == 200 and any(b'"result"' in m for m in r.messages())
                if not okm:
                    call_rec.err(f"initialize: HTTP {r.status} {r.body[:200]!r}")
                    sess_ok[i] = False
                init_lat.append(t - c.t0)
                c.sid = sid
            elif c.kind == "notifications/initialized":
                if r.status not in (200, 202, 204):
                    call_rec.err(f"initialized: HTTP {r.status}")
                    sess_ok[i] = False
            else:
                e0 = call_rec.errors
                check_call_resp(r, c.rid, payload, call_rec, t - c.t0)
                if call_rec.errors != e0:
                    sess_ok[i] = False
            c.job[1] += 1

        t0 = now_ns()
        c0 = self_cpu()
        reconnects = http_loop(conns, next_req, on_resp, a.max_seconds, a.io_timeout, call_rec)
        wall = (now_ns() - t0) / 1e9
        s1 = tree_stats(pid)
        done_sessions = sum(1 for i, c in enumerate(conns) if sess_ok[i] and c.job[1] >= steps_total)
        res.update({
            "label": a.label, "payload_bytes": a.payload,
            "sessions_ok": done_sessions, "sessions_failed": a.sessions - done_sessions,
            "distinct_session_ids": len({c.sid for c in conns if c.sid}),
            "calls_ok": call_rec.ok, "errors": call_rec.errors, "error_samples": call_rec.samples,
            "wall_s": round(wall, 3), "call_latency_us": lat_summary(call_rec.lat),
            "init_latency_us": lat_summary(init_lat), "reconnects": reconnects,
            "driver_cpu_s": round(self_cpu() - c0, 3),
        })
        if s1:
            res.update({"server_rss_before_kb": s0.get("rss_kb"), "server_rss_after_kb": s1["rss_kb"],
                        "server_rss_peak_kb": s1["hwm_kb"],
                        "server_cpu_s": round(s1["cpu_s"] - s0.get("cpu_s", 0.0), 3)})
        if a.delete:
            # DELETE each session (sequentially, on its connection) and read RSS again
            dok = 0
            for c in conns:
                if not c.sid:
                    continue
                for attempt in (0, 1):  # an idle keep-alive connection may have been closed by the server: retry once
                    try:
                        if attempt:
                            c.close()
                            c.connect()
                        _reconnect_if_closing(c)
                        r = blocking_exchange(c, tg.request(None, c.sid, method=b"DELETE"), timeout=10)
                        dok += r.status in (200, 202, 204)
                        break
                    except Exception:
                        pass
            time.sleep(0.5)
            s2 = tree_stats(pid)
            res.update({"deleted_ok": dok, "server_rss_after_delete_kb": s2.get("rss_kb")})
    except Exception as e:
        res.update({"errors": res.get("errors", 0) + 1, "error_samples": [f"{type(e).__name__}: {e}"]})
    finally:
        for c in conns:
            c.close()
        if srv:
            srv.stop()
    return res


# --------------------------------------------------------------------------------------- cold start
def run_coldstart(transport: str, url: Optional[str], a) -> dict:
    """Spawn the server, initialize, tools/list; time from spawn to the tools/list response. Kills the server."""
    res = {"mode": "coldstart", "transport": transport, "target": shlex.join(a.cmd)}
    if transport == "stdio":
        srv = StdioServer(a.cmd, a.server_log)
        try:
            srv.handshake()
            t_init = now_ns()
            r = srv.request(1, "tools/list", None)
            t_list = now_ns()
            names = [t.get("name") for t in r.get("result", {}).get("tools", [])]
            ok = a.tool in names
            res.update({"init_ms": round((t_init - srv.t_spawn) / 1e6, 2),
                        "first_list_ms": round((t_list - srv.t_spawn) / 1e6, 2), "ok": ok, "tools": names})
        except Exception as e:
            res.update({"ok": False, "error": f"{type(e).__name__}: {e}"})
        srv.stop(hard=True)
        return res
    tg = HttpTarget(url)
    srv = SpawnedServer(a.cmd, a.server_log)
    try:
        wait_port(tg.addr, srv.proc, a.start_timeout)
        t_listen = now_ns()
        c = HConn(tg.addr)
        sid = http_initialize(tg, c)
        t_init = now_ns()
        r = blocking_exchange(c, tg.request(rpc(1, "tools/list"), sid))
        t_list = now_ns()
        msgs = [json.loads(m) for m in r.messages()]
        names = [t.get("name") for m in msgs for t in (m.get("result") or {}).get("tools", [])]
        ok = r.status == 200 and a.tool in names
        c.close()
        res.update({"listen_ms": round((t_listen - srv.t_spawn) / 1e6, 2),
                    "init_ms": round((t_init - srv.t_spawn) / 1e6, 2),
                    "first_list_ms": round((t_list - srv.t_spawn) / 1e6, 2), "ok": ok, "tools": names})
    except Exception as e:
        res.update({"ok": False, "error": f"{type(e).__name__}: {e}"})
    srv.stop(hard=True)
    return res


# ------------------------------------------------------------------------------------ floor servers
def floor_server():
    """The practical ceiling for a Python stdio server: read lines, msgspec-decode, write a canned echo reply."""
    import msgspec as ms

    class Args(ms.Struct):
        text: str = ""

    class Params(ms.Struct):
        name: str = ""
        arguments: Optional[Args] = None
        protocolVersion: str = PROTOCOL_VERSION

    class Req(ms.Struct):
        id: Union[int, str, None] = None
        method: str = ""
        params: Optional[Params] = None

    dec = ms.json.Decoder(Req)
    enc = ms.json.encode
    tool = {"name": "echo", "description": "Echo the given text back.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}
    parts = []
    while True:
        data = os.read(0, 1 << 20)
        if not data:
            break
        if b"\n" not in data:
            parts.append(data)
            continue
        if parts:
            parts.append(data)
            data = b"".join(parts)
            parts = []
        lines = data.split(b"\n")
        last = lines.pop()
        if last:
            parts.append(last)
        out = []
        for line in lines:
            if not line:
                continue
            m = dec.decode(line)
            if m.id is None:
                continue
            if m.method == "tools/call":
                result = {"content": [{"type": "text", "text": m.params.arguments.text}], "isError": False}
            elif m.method == "initialize":
                result = {"protocolVersion": m.params.protocolVersion, "capabilities": {"tools": {}},
                          "serverInfo": {"name": "mcpload-floor-py", "version": VERSION}}
            elif m.method == "tools/list":
                result = {"tools": [tool]}
            else:
                result = {}
            out.append(enc({"jsonrpc": "2.0", "id": m.id, "result": result}))
        if out:
            out.append(b"")
            buf = memoryview(b"\n".join(out))
            while buf:
                n = os.write(1, buf)
                buf = buf[n:]


NODE_FLOOR = r"""
const TOOL={name:'echo',description:'Echo the given text back.',inputSchema:{type:'object',properties:{text:{type:'string'}},required:['text']}};
let buf='';process.stdin.setEncoding('utf8');
process.stdin.on('data',(chunk)=>{buf+=chunk;let s=0,i;const out=[];
 while((i=buf.indexOf('\n',s))>=0){const line=buf.slice(s,i);s=i+1;if(!line)continue;const m=JSON.parse(line);
  if(m.id===undefined||m.id===null)continue;let result;
  if(m.method==='tools/call')result={content:[{type:'text',text:m.params.arguments.text}],isError:false};
  else if(m.method==='initialize')result={protocolVersion:m.params.protocolVersion,capabilities:{tools:{}},serverInfo:{name:'mcpload-floor-node',version:'1'}};
  else if(m.method==='tools/list')result={tools:[TOOL]};else result={};
  out.push(JSON.stringify({jsonrpc:'2.0',id:m.id,result}));}
 buf=buf.slice(s);if(out.length)process.stdout.write(out.join('\n')+'\n');});
process.stdin.on('end',()=>process.exit(0));
"""


def floor_http_server(port: int):
    """The same trivial echo over Streamable HTTP: asyncio Protocol, keep-alive, SSE replies (as the SDKs send)."""
    import asyncio
    import uuid
    import msgspec as ms

    class Args(ms.Struct):
        text: str = ""

    class Params(ms.Struct):
        name: str = ""
        arguments: Optional[Args] = None
        protocolVersion: str = PROTOCOL_VERSION

    class Req(ms.Struct):
        id: Union[int, str, None] = None
        method: str = ""
        params: Optional[Params] = None

    dec = ms.json.Decoder(Req)
    enc = ms.json.encode
    tool = {"name": "echo", "description": "Echo the given text back.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}
    sid = uuid.uuid4().hex.encode()

    class Proto(asyncio.Protocol):
        def connection_made(self, transport):
            self.t = transport
            self.buf = bytearray()

        def data_received(self, data):
            buf = self.buf
            buf += data
            while True:
                i = buf.find(b"\r\n\r\n")
                if i < 0:
                    return
                head = bytes(buf[:i]).lower()
                j = head.find(b"\r\ncontent-length:")
                cl = int(head[j + 17:head.find(b"\r\n", j + 2) if head.find(b"\r\n", j + 2) > 0 else None]) if j >= 0 else 0
                if len(buf) < i + 4 + cl:
                    return
                body = bytes(buf[i + 4:i + 4 + cl])
                del buf[:i + 4 + cl]
                if not head.startswith(b"post"):
                    self.t.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                    continue
                m = dec.decode(body)
                if m.id is None:
                    self.t.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                    continue
                if m.method == "tools/call":
                    result = {"content": [{"type": "text", "text": m.params.arguments.text}], "isError": False}
                elif m.method == "initialize":
                    result = {"protocolVersion": m.params.protocolVersion, "capabilities": {"tools": {}},
                              "serverInfo": {"name": "mcpload-floor-http-py", "version": VERSION}}
                elif m.method == "tools/list":
                    result = {"tools": [tool]}
                else:
                    result = {}
                ev = b"event: message\ndata: " + enc({"jsonrpc": "2.0", "id": m.id, "result": result}) + b"\n\n"
                self.t.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                             b"mcp-session-id: " + sid + b"\r\ncontent-length: " + str(len(ev)).encode()
                             + b"\r\n\r\n" + ev)

    async def main():
        loop = asyncio.get_running_loop()
        srv = await loop.create_server(Proto, "127.0.0.1", port, backlog=1024)
        async with srv:
            await srv.serve_forever()

    asyncio.run(main())


NODE_FLOOR_HTTP = r"""
const http=require('node:http');const crypto=require('node:crypto');const sid=crypto.randomUUID();
const TOOL={name:'echo',description:'Echo the given text back.',inputSchema:{type:'object',properties:{text:{type:'string'}},required:['text']}};
http.createServer((req,res)=>{const parts=[];req.on('data',(d)=>parts.push(d));req.on('end',()=>{
 if(req.method!=='POST'){res.writeHead(200,{'content-length':0});res.end();return;}
 const m=JSON.parse(Buffer.concat(parts).toString('utf8'));
 if(m.id===undefined||m.id===null){res.writeHead(202,{'content-length':0});res.end();return;}
 let result;if(m.method==='tools/call')result={content:[{type:'text',text:m.params.arguments.text}],isError:false};
 else if(m.method==='initialize')result={protocolVersion:m.params.protocolVersion,capabilities:{tools:{}},serverInfo:{name:'mcpload-floor-http-node',version:'1'}};
 else if(m.method==='tools/list')result={tools:[TOOL]};else result={};
 const ev=Buffer.from('event: message\ndata: '+JSON.stringify({jsonrpc:'2.0',id:m.id,result})+'\n\n');
 res.writeHead(200,{'content-type':'text/event-stream','cache-control':'no-cache','mcp-session-id':sid,'content-length':ev.length});res.end(ev);});
}).listen(Number(process.argv[1]),'127.0.0.1');
"""


def floor_cmd(impl: str, node: str, transport: str = "stdio", port: int = 18199) -> list:
    if transport == "http":
        if impl == "py":
            return [sys.executable, os.path.abspath(__file__), "floor-http-server", str(port)]
        return [node, "-e", NODE_FLOOR_HTTP, str(port)]
    if impl == "py":
        return [sys.executable, os.path.abspath(__file__), "floor-server"]
    return [node, "-e", NODE_FLOOR]


# ---------------------------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mcpload.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="A server command goes after '--'. Sizes: 16, 1k, 64k, 65536.")
    p.add_argument("mode", choices=["stdio", "http", "floor", "sessions", "coldstart", "http-init", "floor-server",
                                      "floor-http-server"])
    p.add_argument("url_or_transport", nargs="*", help="URL (http, sessions, http-init); 'stdio URL?' or 'http URL' "
                   "for coldstart")
    p.add_argument("-n", "--requests", type=int, default=10000, help="max measured calls (default 10000)")
    p.add_argument("-d", "--duration", type=float, default=0.0,
                   help="stop issuing calls after this many seconds (0 = only -n bounds the run)")
    p.add_argument("-c", "-w", "--concurrency", type=int, default=1,
                   help="calls in flight: stdio window W / number of HTTP keep-alive connections C (default 1)")
    p.add_argument("-p", "--payload", type=parse_size, default=1024, help="payload size (default 1k)")
    p.add_argument("--warmup", type=int, default=500, help="unmeasured calls before the measured run (default 500)")
    p.add_argument("--max-seconds", type=float, default=120.0, help="hard bound on each phase (default 120)")
    p.add_argument("--io-timeout", type=float, default=30.0, help="give up after this long without a response")
    p.add_argument("--start-timeout", type=float, default=30.0, help="wait this long for a spawned HTTP server")
    p.add_argument("--tool", default="echo", help="tool name (default echo)")
    p.add_argument("--era", choices=["handshake", "stateless"], default="handshake",
                   help="stdio/http: handshake = initialize 2025-11-25 first (default); stateless = 2026-07-28, "
                        "no initialize, _meta on every request (+ MCP-Protocol-Version, Mcp-Method, Mcp-Name headers)")
    p.add_argument("--arg", default="text", help="argument name carrying the payload (default text)")
    p.add_argument("--session-per-conn", action="store_true", help="http: one MCP session per connection "
                   "(default: one shared session over all connections)")
    p.add_argument("--server-pid", type=int, default=None, help="http: PID of an already running server, for RSS/CPU")
    p.add_argument("--server-log", default=None, help="append the spawned server's stderr (and http stdout) here")
    p.add_argument("--sessions", type=int, default=200, help="sessions mode: concurrent sessions (default 200)")
    p.add_argument("--calls", type=int, default=10, help="sessions mode: calls per session (default 10)")
    p.add_argument("--delete", action="store_true", help="sessions mode: DELETE every session after, read RSS again")
    p.add_argument("--impl", choices=["py", "node"], default="py", help="floor mode: which trivial server")
    p.add_argument("--node", default="node", help="floor mode: node binary for --impl node")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="floor mode: transport")
    p.add_argument("--port", type=int, default=18199, help="floor mode, http: port for the floor server")
    p.add_argument("--label", default=None, help="free text copied into the JSON")
    p.add_argument("--out", default=None, help="also append the JSON line to this file")
    p.add_argument("--pretty", action="store_true", help="indent the JSON")
    return p


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = []
    if "--" in argv:
        k = argv.index("--")
        argv, cmd = argv[:k], argv[k + 1:]
    a = build_parser().parse_args(argv)
    a.cmd = cmd
    pos = a.url_or_transport
    if a.mode == "floor-server":
        floor_server()
        return 0
    if a.mode == "floor-http-server":
        floor_http_server(int(pos[0]) if pos else a.port)
        return 0
    if a.mode == "stdio":
        if not cmd:
            raise SystemExit("mcpload: stdio needs a server command after --")
        res = run_stdio(cmd, a)
    elif a.mode == "floor":
        a.cmd = floor_cmd(a.impl, a.node, a.transport, a.port)
        if a.transport == "http":
            res = run_http(f"http://127.0.0.1:{a.port}/mcp", a)
        else:
            res = run_stdio(a.cmd, a)
        res["mode"] = f"floor-{a.transport}-{a.impl}"
        res.pop("server_cmd", None)
        res["target"] = f"built-in {a.impl} {a.transport} echo floor"
    elif a.mode == "http":
        if len(pos) != 1:
            raise SystemExit("mcpload: http needs a URL")
        res = run_http(pos[0], a)
    elif a.mode == "sessions":
        if len(pos) != 1:
            raise SystemExit("mcpload: sessions needs a URL")
        res = run_sessions(pos[0], a)
    elif a.mode == "http-init":
        tg = HttpTarget(pos[0])
        c = HConn(tg.addr)
        sid = http_initialize(tg, c)
        c.close()
        print((sid or b"").decode())
        return 0
    else:  # coldstart
        if not pos or pos[0] not in ("stdio", "http") or not cmd:
            raise SystemExit("mcpload: coldstart stdio -- CMD | coldstart http URL -- CMD")
        res = run_coldstart(pos[0], pos[1] if len(pos) > 1 else None, a)
        res["label"] = a.label
    res["driver"] = f"mcpload {VERSION} (python {sys.version.split()[0]}, {'msgspec' if msgspec else 'json'})"
    line = json.dumps(res, indent=2 if a.pretty else None)
    print(line, flush=True)
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps(res) + "\n")
    if a.mode == "coldstart":
        return 0 if res.get("ok") else 1
    return 0 if not res.get("errors") else 1


if __name__ == "__main__":
    sys.exit(main())
