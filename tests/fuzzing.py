"""A seeded fuzz of a real server process, over stdio and over Streamable HTTP.

Frames come from :func:`frames`: valid requests, notifications and responses, mutations of them (bytes flipped,
cut, inserted, deleted, values replaced with random JSON), and odd ones (form feeds, unpaired surrogates, long
integer ids, NaN, deep nesting, batches, random bytes). What each frame must get is decided independently of the
server, by :func:`expect` (Python's own JSON reader, strictly): exactly one answer carrying the id of a request whose
id can be read; none for a notification or anything shaped like a response, however malformed; at most one error
for the rest. Around that, the server process must never die, never hang, never answer HTTP 5xx, and never write a
traceback or one of its own source paths, on the wire or on its stderr.

``make test`` runs a bounded fuzz (``tests/test_fuzz.py``); ``make fuzz`` a million frames::

    python tests/fuzzing.py --frames 1000000 [--seed 1] [--http-share 0.1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import h11

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "fixtures" / "fuzz_server.py"
SOURCE_PATH = str(ROOT / "jsonrpc_mcp")
HANDSHAKE = "2025-11-25"
STATELESS = "2026-07-28"
PATIENCE = 30.0  # seconds without the answers a frame is owed: a hang

# --- the frames ----------------------------------------------------------------------------------------------------

METHODS = [
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "initialize",
    "server/discover",
    "nope/nothing",
]
NOTIFICATIONS = [
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    "notifications/unknown",
]
PARAMS: dict[str, list[Any]] = {
    "tools/list": [{}, {"cursor": "bzox"}, {"cursor": 3}],
    "tools/call": [
        {"name": "add", "arguments": {"a": 1, "b": 2}},
        {"name": "add", "arguments": {"a": "x"}},
        {"name": "echo", "arguments": {"text": "hé☃", "times": 3}},
        {"name": "raw", "arguments": {"x": "y", "n": 1.5}},
        {"name": "structured", "arguments": {"items": [1, 2, 3], "label": "l"}},
        {"name": "missing", "arguments": {}},
        {"name": "add"},
    ],
    "resources/read": [{"uri": "text://a"}, {"uri": "item://42"}, {"uri": "nope://x"}, {"uri": 5}],
    "resources/subscribe": [{"uri": "text://a"}],
    "resources/unsubscribe": [{"uri": "text://a"}],
    "prompts/get": [{"name": "greet", "arguments": {"name": "x"}}, {"name": "greet"}, {"name": "none"}],
    "completion/complete": [
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "a"}},
        {"ref": {"type": "ref/resource", "uri": "item://{id}"}, "argument": {"name": "id", "value": ""}},
    ],
    "logging/setLevel": [{"level": "debug"}, {"level": "loud"}],
    "initialize": [
        {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}},
    ],
}
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "f", "version": "1"},
}
ODD = [
    b"8 garbage",
    b"[1,",
    b"[]",
    b"[1]",
    b"{}",
    b"\x0c",
    b"\x0b",
    b"\x0c" + b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"\\ud800"}}',
    b'{"jsonrpc":"2.0","id":"\\udc00","method":"ping"}',
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"\\ud800","progress":1}}',
    b'{"jsonrpc":"2.0","id":8,"error":null}',
    b'{"jsonrpc":"2.0","id":8,"result":{},"error":{"code":1,"message":"x"}}',
    b'{"id":8,"result":{}}',
    b'{"jsonrpc":"2.0","id":' + b"1" + b"0" * 4300 + b',"method":"ping"}',
    b'{"jsonrpc":"2.0","id":-' + b"9" * 5000 + b',"method":"nope"}',
    b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":3,"method":-1e999}',
    b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add","arguments":{"a":' + b"9" * 5000 + b"}}}",
    b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"raw","arguments":{"n":NaN}}}',
    b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"a":Infinity}}',
    b"\xef\xbb\xbf" + b'{"jsonrpc":"2.0","id":7,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":"\xc3\x28","method":"ping"}',
    b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"a":"\xff"}}',
    b'{"jsonrpc":"2.0","id":10,"method":"ping","id":11}',
    b"\x00" * 8,
    b" ",
    b"null",
    b'"ping"',
]


def random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -1, 1, 2**53 + 1, -(2**63), 10**30, rng.randrange(-1000, 1000)])
    if kind == 3:
        return rng.choice([0.5, -1e-300, 1e308, 3.0])
    if kind == 4:
        return rng.choice(["", "x", "é☃", "\u0000", "a" * 50, "\\", '"', "\U0001f600"])
    if kind == 5:
        return rng.choice(["ping", "tools/call", "2.0", "text://a"])
    if kind in (6, 7):
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["a", "id", "method", "params", "name", "arguments", "_meta", "uri", ""]
    return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randrange(4))}


def random_id(rng: random.Random, n: int) -> Any:
    roll = rng.random()
    if roll < 0.6:
        return n
    if roll < 0.8:
        return f"r-{n}"
    if roll < 0.9:
        return -n - (2**64 if rng.random() < 0.5 else 0)
    return rng.choice([None, True, 1.5, [n], {"n": n}, "", 0])


def valid_frame(rng: random.Random, n: int) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.65:
        method = rng.choice(METHODS)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": random_id(rng, n), "method": method}
        choices = PARAMS.get(method)
        if choices is not None:
            message["params"] = json.loads(json.dumps(rng.choice(choices)))
        if rng.random() < 0.15:  # a stateless-era request
            message.setdefault("params", {})["_meta"] = META
        return message
    if roll < 0.85:
        message = {"jsonrpc": "2.0", "method": rng.choice(NOTIFICATIONS)}
        if message["method"] == "notifications/cancelled":
            message["params"] = {"requestId": rng.randrange(100), "reason": "x"}
        elif message["method"] == "notifications/progress":
            message["params"] = {"progressToken": rng.randrange(5), "progress": 0.5}
        return message
    if rng.random() < 0.5:
        return {"jsonrpc": "2.0", "id": rng.randrange(100), "result": random_json(rng)}
    return {"jsonrpc": "2.0", "id": rng.randrange(100), "error": {"code": -32601, "message": "no"}}


def mutate(rng: random.Random, frame: bytearray) -> bytearray:
    kind = rng.randrange(6)
    if kind == 0 and frame:
        frame[rng.randrange(len(frame))] = rng.randrange(256)
    elif kind == 1:
        del frame[rng.randrange(len(frame) + 1) :]
    elif kind == 2:
        at = rng.randrange(len(frame) + 1)
        frame[at:at] = rng.choice([b"{", b"}", b"[", b'"', b",", b":", b"\\", b"\\u", b"1e999", b"\xff", b" "])
    elif kind == 3 and frame:
        at = rng.randrange(len(frame))
        del frame[at : at + rng.randrange(1, 8)]
    elif kind == 4 and frame:
        at = rng.randrange(len(frame))
        frame[at:at] = frame[at : at + rng.randrange(1, 16)]
    else:
        frame[:] = frame.replace(b'"', b"'", 1) if rng.random() < 0.5 else frame.upper()
    return frame


def frames(seed: int, count: int) -> Iterator[bytes]:
    """``count`` frames, the same for the same seed, none holding a line break (they are NDJSON lines too)."""
    rng = random.Random(seed)
    for n in range(1, count + 1):
        roll = rng.random()
        if roll < 0.30:
            frame = json.dumps(valid_frame(rng, n), ensure_ascii=rng.random() < 0.5).encode()
        elif roll < 0.70:
            base = bytearray(json.dumps(valid_frame(rng, n)).encode())
            for _ in range(rng.randrange(1, 4)):
                base = mutate(rng, base)
            frame = bytes(base)
        elif roll < 0.82:
            message = valid_frame(rng, n)
            message[rng.choice(["id", "method", "params", "jsonrpc", "result", "error", "x"])] = random_json(rng)
            if rng.random() < 0.3:
                message.pop(rng.choice(list(message)), None)
            frame = json.dumps(message).encode()
        elif roll < 0.92:
            frame = rng.choice(ODD)
        elif roll < 0.97:
            frame = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 48)))
        else:
            depth = rng.choice([10, 100, 1000, 3000])
            inner = b"[" * depth + b"]" * depth
            frame = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"a":%s}}' % (n, inner)
        yield frame.replace(b"\n", b" ").replace(b"\r", b" ")


# --- what a frame must get -----------------------------------------------------------------------------------------


class LongDigits(str):
    """An integer id over Python's 4,300-digit conversion limit, read as its digits."""


def _integer(text: str) -> int | LongDigits:
    return int(text) if len(text.lstrip("-")) <= 4300 else LongDigits(text)


def _refuse(text: str) -> Any:
    raise ValueError(f"not JSON: {text}")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


@dataclass(frozen=True)
class Expect:
    """What a frame is owed. ``answers``: "one", "none" or "at-most-one"; ``ident``: the id the answer must carry
    (when ``has_id``); ``error_only``: an answer, if any, must be an error."""

    answers: str
    ident: Any = None
    has_id: bool = False
    error_only: bool = False


NONE = Expect("none")
ONE_ERROR = Expect("one", error_only=True)  # not a readable request: one error, without an id
AT_MOST_ONE_ERROR = Expect("at-most-one", error_only=True)  # a request or a notification, unreadable: can't tell
UNSURE = Expect("at-most-one")  # where two correct JSON readers may differ (nesting depth, duplicate keys)


def _readable_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return not any("\ud800" <= ch <= "\udfff" for ch in value)
    return isinstance(value, int)


def expect(frame: bytes) -> Expect:
    """What the server owes ``frame`` on a handshake-era stdio session (2025-11-25: no batches)."""
    if not frame.strip(b" \t\r\n"):
        return NONE  # a blank line is no frame
    try:
        text = frame.decode("utf-8")
    except UnicodeDecodeError:
        return AT_MOST_ONE_ERROR  # a request is answered (with its id when readable); a notification is not
    try:
        message = json.loads(text, parse_int=_integer, parse_constant=_refuse, object_pairs_hook=_no_duplicates)
    except RecursionError:
        return UNSURE
    except ValueError as exc:
        return UNSURE if "duplicate key" in str(exc) else ONE_ERROR
    if not isinstance(message, dict):
        return ONE_ERROR  # a value that is no object, or an array where batches do not exist
    owed = _shape(message)
    if owed.has_id and _holds_lone_surrogate(message):
        # an unpaired surrogate escape: one parse error, with the id unless the rest cannot be read without it
        return Expect("one", error_only=True)
    return owed


def _shape(message: dict[str, Any]) -> Expect:
    if "method" in message:
        if "id" not in message:
            return NONE  # a notification, however malformed
        ident = message["id"]
        return Expect("one", ident, True) if _readable_id(ident) else ONE_ERROR
    if "result" in message or "error" in message:
        return NONE  # shaped like a response, however malformed
    ident = message.get("id")
    return Expect("one", ident, True, error_only=True) if "id" in message and _readable_id(ident) else ONE_ERROR


def _holds_lone_surrogate(value: Any) -> bool:
    """Walked with a stack of its own: the stdlib's parser of 3.12 and later reads deeper nesting than the
    interpreter's recursion limit allows a recursive walk."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            if any("\ud800" <= ch <= "\udfff" for ch in item):
                return True
        elif isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return False


def _decode(reply: bytes) -> Any:
    return json.loads(reply, parse_int=_integer)


def check_answers(frame: bytes, replies: list[bytes], problems: list[str]) -> None:
    """Hold the replies a frame got against :func:`expect`; each breach goes to ``problems``."""
    owed = expect(frame)
    where = f"frame {frame[:120]!r}: "
    if owed.answers == "none" and replies:
        problems.append(where + f"answered {replies[0][:200]!r}, owed nothing")
        return
    if owed.answers == "one" and len(replies) != 1:
        problems.append(where + f"{len(replies)} answers, owed one")
        return
    if len(replies) > 1:
        problems.append(where + f"{len(replies)} answers, owed at most one")
        return
    for reply in replies:
        problem = _bad_reply(reply)
        if problem is not None:
            problems.append(where + problem)
            return
        message = _decode(reply)
        if owed.error_only and "error" not in message:
            problems.append(where + f"a result {reply[:200]!r} for a frame that is not a readable request")
        if owed.has_id and message.get("id") != owed.ident:
            problems.append(where + f"answered with id {str(message.get('id'))[:40]!r}, owed {str(owed.ident)[:40]!r}")


def _bad_reply(reply: bytes) -> str | None:
    if b"Traceback" in reply or SOURCE_PATH.encode() in reply:
        return f"leaks internals: {reply[:200]!r}"
    try:
        message = _decode(reply)
    except ValueError:
        return f"not JSON: {reply[:200]!r}"
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return f"not a JSON-RPC message: {reply[:200]!r}"
    if ("result" in message) == ("error" in message) or "method" in message:
        return f"neither one result nor one error: {reply[:200]!r}"
    if "error" in message and message["error"].get("code") == -32603:
        return f"an internal error for bad input: {reply[:200]!r}"
    return None


# --- the runs ------------------------------------------------------------------------------------------------------


@dataclass
class Report:
    transport: str
    frames: int = 0
    seconds: float = 0.0
    crashes: int = 0
    hangs: int = 0
    peak_rss_kib: int = 0
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        rate = self.frames / self.seconds if self.seconds else 0.0
        return (
            f"{self.transport}: {self.frames} frames in {self.seconds:.1f} s ({rate:,.0f}/s), "
            f"{self.crashes} crashes, {self.hangs} hangs, {len(self.problems)} wrong answers, "
            f"peak RSS {self.peak_rss_kib / 1024:.1f} MiB"
        )


def _peak_rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


async def _drain(stream: anyio.abc.ByteReceiveStream, chunks: list[bytes]) -> None:
    """Keep what ``stream`` carries, as it comes (a cancellation keeps what came so far)."""
    while True:
        try:
            chunks.append(await stream.receive())
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return


def server_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "jsonrpc_mcp", "serve", str(SERVER), *extra]


def _stderr_problems(stderr: bytes) -> list[str]:
    problems = []
    if b"Traceback" in stderr:
        at = stderr.index(b"Traceback")
        problems.append(f"a traceback on stderr: {stderr[at : at + 400]!r}")
    if SOURCE_PATH.encode() in stderr:
        problems.append("a source path on stderr")
    return problems


INIT = (
    b'{"jsonrpc":"2.0","id":"fuzz-init","method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}\n'
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
)


async def fuzz_stdio(seed: int, count: int, window: int = 256) -> Report:
    """Every frame followed by a ping sentinel, ``window`` pairs in flight; the answers before a sentinel's are
    what its frame got (every handler of the fuzz server answers at once, in order)."""
    report = Report("stdio")
    started = time.perf_counter()
    process = await anyio.open_process(server_command(), stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stdin, stdout, stderr_stream = process.stdin, process.stdout, process.stderr
    sent: list[bytes] = []
    credit = anyio.Semaphore(window)
    stderr_chunks: list[bytes] = []

    async def write() -> None:
        await stdin.send(INIT)
        batch: list[bytes] = []
        for n, frame in enumerate(frames(seed, count)):
            await credit.acquire()
            sent.append(frame)
            batch.append(frame + b'\n{"jsonrpc":"2.0","id":"s-%d","method":"ping"}\n' % n)
            if len(batch) >= 32 or credit.value == 0:
                await stdin.send(b"".join(batch))
                batch.clear()
        if batch:
            await stdin.send(b"".join(batch))

    async def read() -> None:
        buffer = b""
        lines: list[bytes] = []
        done = 0
        got_init = False

        async def next_line() -> bytes:
            nonlocal buffer
            while not lines:
                with anyio.fail_after(PATIENCE):
                    chunk = await stdout.receive()
                parts = (buffer + chunk).split(b"\n")
                buffer = parts.pop()
                lines.extend(parts)
            return lines.pop(0)

        while not got_init:
            got_init = b'"fuzz-init"' in await next_line()
        while done < count:
            replies: list[bytes] = []
            sentinel = b'{"jsonrpc":"2.0","id":"s-%d","result":{}}' % done
            while (line := await next_line()) != sentinel:
                replies.append(line)
            check_answers(sent[done], replies, report.problems)
            done += 1
            credit.release()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, stderr_stream, stderr_chunks)
            tg.start_soon(write)
            try:
                await read()
            except TimeoutError:
                report.hangs += 1
                report.problems.append(f"no answer within {PATIENCE} s after {len(sent)} frames")
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                report.crashes += 1
                report.problems.append(f"the server went away after {len(sent)} frames")
            report.frames = len(sent)
            report.peak_rss_kib = _peak_rss_kib(process.pid)
            await stdin.aclose()
            with anyio.fail_after(PATIENCE):
                code = await process.wait()
            if code != 0:
                report.crashes += 1
                report.problems.append(f"exit code {code}")
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    report.problems += _stderr_problems(b"".join(stderr_chunks))
    report.seconds = time.perf_counter() - started
    return report


class _HttpClient:
    """POSTs over one kept-alive connection, HTTP/1.1 by h11 (a quarter of what httpx costs a request here: the
    fuzz is about the server, not the client)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.headers = [
            ("Host", f"127.0.0.1:{port}"),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ]
        self._conn: h11.Connection | None = None
        self._sock: anyio.abc.SocketStream | None = None

    async def post(self, body: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
        if self._sock is None or self._conn is None or self._conn.our_state is not h11.IDLE:
            await self.close()
            self._sock = await anyio.connect_tcp("127.0.0.1", self.port)
            self._conn = h11.Connection(h11.CLIENT)
        conn, sock = self._conn, self._sock
        head = h11.Request(method="POST", target="/mcp", headers=[*self.headers, ("Content-Length", str(len(body)))])
        await sock.send(conn.send(head) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
        status, headers, chunks = 0, {}, []
        with anyio.fail_after(PATIENCE):
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await sock.receive())
                elif isinstance(event, h11.Response):
                    status, headers = event.status_code, dict(event.headers)
                elif isinstance(event, h11.Data):
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise anyio.EndOfStream
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        return status, headers, b"".join(chunks)

    async def close(self) -> None:
        if self._sock is not None:
            await self._sock.aclose()
        self._sock = self._conn = None


async def fuzz_http(seed: int, count: int, clients: int = 4) -> Report:
    """The frames POSTed by ``clients`` concurrent sessions to ``jsonrpc-mcp serve --http``."""
    report = Report("http")
    started = time.perf_counter()
    port = _free_port()
    process = await anyio.open_process(server_command("--http", f"127.0.0.1:{port}"), stderr=subprocess.PIPE)
    assert process.stderr is not None
    stderr_stream = process.stderr
    stderr_chunks: list[bytes] = []
    all_frames = list(frames(seed, count))

    async def client(share: list[bytes]) -> None:
        http = _HttpClient(port)
        try:
            init, notify = INIT.split(b"\n")[:2]
            status, headers, _ = await http.post(init)
            assert status == 200, status
            http.headers += [
                ("Mcp-Session-Id", headers[b"mcp-session-id"].decode()),
                ("MCP-Protocol-Version", HANDSHAKE),
            ]
            await http.post(notify)
            for frame in share:
                try:
                    status, headers, body = await http.post(frame)
                except TimeoutError:
                    report.hangs += 1
                    report.problems.append(f"frame {frame[:120]!r}: no HTTP answer within {PATIENCE} s")
                    await http.close()
                    continue
                check_http(frame, status, headers.get(b"content-type", b""), body, report.problems)
                report.frames += 1
        finally:
            await http.close()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, stderr_stream, stderr_chunks)
            await _wait_listening(port, process)
            async with anyio.create_task_group() as work:
                for k in range(clients):
                    work.start_soon(client, all_frames[k::clients])
            report.peak_rss_kib = _peak_rss_kib(process.pid)
            if process.returncode is not None:
                report.crashes += 1
                report.problems.append(f"the server exited with {process.returncode}")
            process.terminate()
            with anyio.fail_after(PATIENCE):
                await process.wait()
    except (OSError, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
        report.crashes += 1
        report.problems.append(f"the server stopped answering: {exc!r}")
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    report.problems += _stderr_problems(b"".join(stderr_chunks))
    report.seconds = time.perf_counter() - started
    return report


def check_http(frame: bytes, status: int, content_type: bytes, body: bytes, problems: list[str]) -> None:
    where = f"frame {frame[:120]!r}: "
    if status >= 500:
        problems.append(where + f"HTTP {status} {body[:200]!r}")
        return
    if b"Traceback" in body or SOURCE_PATH.encode() in body:
        problems.append(where + f"leaks internals: {body[:200]!r}")
        return
    if status == 202:
        return
    if content_type.startswith(b"text/event-stream"):
        messages = [line[6:] for line in body.split(b"\n") if line.startswith(b"data: ") and len(line) > 6]
    else:
        messages = [body]
    decoded = []
    for raw in messages:
        try:
            decoded.append(_decode(raw))
        except ValueError:
            problems.append(where + f"HTTP {status} body is not JSON: {raw[:200]!r}")
            return
    owed = expect(frame)
    for message in decoded:
        for one in message if isinstance(message, list) else [message]:
            if not isinstance(one, dict) or one.get("jsonrpc") != "2.0":
                problems.append(where + f"not a JSON-RPC message: {str(one)[:200]}")
            elif owed.answers == "none" and "id" in one:
                problems.append(where + f"answered with an id, owed nothing: {str(one)[:200]}")
            elif owed.has_id and "id" in one and one["id"] != owed.ident and "method" not in one:
                problems.append(where + f"answered with id {str(one['id'])[:40]}, owed {str(owed.ident)[:40]}")


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _wait_listening(port: int, process: anyio.abc.Process) -> None:
    with anyio.fail_after(PATIENCE):
        while True:
            try:
                probe = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                if process.returncode is not None:
                    raise RuntimeError("the HTTP server exited at start") from None
                await anyio.sleep(0.05)
                continue
            await probe.aclose()
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=1_000_000, help="frames in all (default a million)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--http-share", type=float, default=0.1, help="the share of the frames sent over HTTP")
    args = parser.parse_args(argv)
    over_http = int(args.frames * args.http_share)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    reports = [anyio.run(fuzz_stdio, args.seed, args.frames - over_http)]
    if over_http:
        reports.append(anyio.run(fuzz_http, args.seed + 1, over_http))
    for report in reports:
        print(report.line())
        for problem in report.problems[:20]:
            print("  " + problem)
    return 1 if any(r.problems or r.crashes or r.hangs for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
