"""The ``jsonrpc-mcp`` command's JSON output (``--json``): list/call against a stdio server, usage errors and exit
codes, ``python -m``, and serving on TCP and Unix sockets (Ctrl-C). What it prints for people, its help and its
error messages are in ``test_cli_people.py``. Servers are real subprocesses; most client invocations call the
same ``main(argv)`` in this process to save an interpreter start-up each."""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from helpers import EVERYTHING, FIXTURES, ROOT
from tls_support import self_signed, trusting

from jsonrpc_mcp import Client
from jsonrpc_mcp.cli import main

CLI = [sys.executable, "-m", "jsonrpc_mcp"]
SERVE = [sys.executable, "-m", "jsonrpc_mcp", "serve", str(EVERYTHING)]
TCP = "{tcp}"  # replaced by the module's TCP server address

#: Real subprocesses: ``jsonrpc-mcp list/call -- python -m jsonrpc_mcp serve FILE`` (the CLI spawns the server).
SUBPROCESS: dict[str, list[str]] = {
    "list": [*CLI, "list", "--json", "--", *SERVE],
    "call-add": [*CLI, "call", "--json", "--", *SERVE, "tools/call", "add", '{"a": 1}'],  # the older order
    "help": [*CLI, "--help"],
}
#: The same entry point, ``jsonrpc_mcp.cli.main(argv)``, run in this process (no interpreter start-up each):
#: against the module's TCP server (itself a ``jsonrpc-mcp serve --tcp`` subprocess) or needing no server.
IN_PROCESS: dict[str, list[str]] = {
    "call-tool-error": ["call", "--json", "--tcp", TCP, "tools/call", "fail", '{"message": "nope"}'],
    "call-unknown-tool": ["call", "--json", "--tcp", TCP, "tools/call", "missing"],
    "call-read": ["call", "--json", "--tcp", TCP, "resources/read", "item://7"],
    "call-read-missing": ["call", "--json", "--tcp", TCP, "resources/read", "nope://x"],
    "call-prompt": ["call", "--json", "--tcp", TCP, "prompts/get", "greet", '{"name": "Ada", "style": "formal"}'],
    "call-ping": ["call", "--json", "--tcp", TCP, "ping"],
    "call-bad-json": ["call", "--tcp", TCP, "tools/call", "add", "{not json"],
    "call-json-not-object": ["call", "--tcp", TCP, "tools/call", "add", "[1]"],
    "call-no-method": ["call", "--", *SERVE],
    "list-no-target": ["list"],
    "list-no-such-program": ["list", "--", "/nonexistent/jsonrpc-mcp-test-program"],
    "list-url-as-command": ["list", "http://127.0.0.1:9/mcp"],
    "list-no-such-socket": ["list", "--unix", "/nonexistent-dir/mcp.sock"],
    "no-command": [],
    "serve-missing-file": ["serve", "tests/fixtures/does_not_exist.py"],
    "serve-not-a-server": ["serve", "os:sep"],
}


def run_in_process(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``main(argv)`` with stdout/stderr captured and SystemExit turned into an exit code, as the interpreter does."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            if isinstance(exc.code, str):
                err.write(exc.code + "\n")
                code = 1
            else:
                code = exc.code or 0
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


#: Runs the command after its first argument with SIGINT set to that (``SIG_DFL``, or ``SIG_IGN`` as a shell without
#: job control starts a background job), whatever this test process inherited; exec keeps an ignored signal ignored.
WITH_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, getattr(signal, sys.argv[1])); os.execv(sys.argv[2], "
    "sys.argv[2:])"
)


class Served:
    """A ``jsonrpc-mcp -v serve`` process; its stderr is read by a thread so lines can be waited for. ``sigint``:
    its SIGINT disposition at start."""

    def __init__(self, *where: str, sigint: str = "SIG_DFL") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WITH_SIGINT, sigint, *CLI, "-v", "serve", str(EVERYTHING), *where],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        with self.proc.stderr:
            for line in self.proc.stderr:
                self.lines.put(line)

    def wait_for(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        while True:
            line = self.lines.get(timeout=timeout)
            self.seen.append(line)
            match = re.search(pattern, line)
            if match:
                return match

    def interrupt(self, signum: int = signal.SIGINT) -> int:
        self.proc.send_signal(signum)
        code = self.proc.wait(timeout=30)
        self.reader.join(timeout=30)
        while not self.lines.empty():  # everything it wrote, for the caller to check
            self.seen.append(self.lines.get())
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=30)


@pytest.fixture(scope="module")
def tcp_server() -> Iterator[tuple[str, Served]]:
    served = Served("--tcp", "127.0.0.1:0", sigint="SIG_IGN")  # it stops on SIGINT all the same (the last test)
    try:
        port = served.wait_for(r"serving MCP on tcp://127\.0\.0\.1:(\d+)").group(1)  # logged once bound
        yield f"127.0.0.1:{port}", served
    finally:
        served.kill()


@pytest.fixture(scope="module")
def runs(tcp_server: tuple[str, Served]) -> dict[str, subprocess.CompletedProcess[str]]:
    address, _served = tcp_server

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)

    with ThreadPoolExecutor(max_workers=len(SUBPROCESS)) as pool:
        futures = {name: pool.submit(run, argv) for name, argv in SUBPROCESS.items()}
        results = {
            name: run_in_process([address if word == TCP else word for word in argv])
            for name, argv in IN_PROCESS.items()
        }
        results.update({name: future.result() for name, future in futures.items()})
    return results


def output(proc: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(proc.stdout)


def test_list(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["list"]
    assert proc.returncode == 0, proc.stderr
    listed = output(proc)
    assert listed["serverInfo"] == {"name": "everything", "version": "1.0.0"}
    assert listed["protocolVersion"] == "2026-07-28"
    assert {t["name"] for t in listed["tools"]} >= {"add", "echo", "progress", "sample", "elicit"}
    assert {r["uri"] for r in listed["resources"]} == {"text://hello", "blob://bytes"}
    assert [t["uriTemplate"] for t in listed["resourceTemplates"]] == ["item://{id}"]
    assert [p["name"] for p in listed["prompts"]] == ["greet"]


def test_call_tool(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["call-add"]
    assert proc.returncode == 0, proc.stderr
    result = output(proc)
    assert result["structuredContent"] == {"result": 1}
    assert result["content"] == [{"type": "text", "text": '{"result":1}'}]


def test_tool_error_exits_1(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["call-tool-error"]
    assert proc.returncode == 1
    result = output(proc)
    assert result["isError"] is True and result["content"][0]["text"] == "nope"


def test_protocol_error_exits_3(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["call-unknown-tool"]
    assert proc.returncode == 3
    assert output(proc) == {"error": {"code": -32602, "message": "Unknown tool: missing"}}  # no "data" sent
    missing = runs["call-read-missing"]
    assert missing.returncode == 3
    assert output(missing)["error"]["data"] == {"uri": "nope://x"}


def test_a_servers_error_with_a_local_only_code_is_an_error_of_the_servers() -> None:
    """A server's -32000 or -32001 (other implementations send them for errors of their own) exits 3 with the error
    as it came, never 4 (unreachable) or 5 (timeout), which only errors made here give."""
    from http_support import start_app

    from jsonrpc_mcp import RpcError, Server

    server = Server("others", "1")

    @server.tool()
    def fail(code: int) -> str:
        raise RpcError("theirs", code=code)

    thread = start_app(server)
    try:
        for code in (-32000, -32001):
            argv = ["call", "--json", "--url", thread.url, "tools/call", "fail", json.dumps({"code": code})]
            proc = run_in_process(argv)
            assert (proc.returncode, output(proc)) == (3, {"error": {"code": code, "message": "theirs"}}), proc.stderr
    finally:
        thread.stop()


def test_call_resources_and_prompts(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    read = runs["call-read"]
    assert read.returncode == 0, read.stderr
    assert json.loads(output(read)["contents"][0]["text"]) == {"id": "7"}
    prompt = runs["call-prompt"]
    assert prompt.returncode == 0, prompt.stderr
    assert output(prompt)["messages"][0]["content"]["text"] == "Good day, Ada."


def test_call_ping(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    """``ping`` works although the CLI speaks the stateless era, which has no ping method."""
    proc = runs["call-ping"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert output(proc) == {}


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("call-no-method", 2, "jsonrpc-mcp call: give a tool name (or a METHOD), e.g. call add a=1 b=2"),
        ("call-bad-json", 2, "jsonrpc-mcp call: the arguments are not JSON"),
        ("call-json-not-object", 2, "jsonrpc-mcp call: expected key=value or a JSON object, got '[1]'"),
        ("list-no-target", 2, "give --url URL, --tcp HOST:PORT, --unix PATH or -- COMMAND..."),
        ("list-no-such-program", 4, "cannot start '/nonexistent/jsonrpc-mcp-test-program': No such file"),
        ("list-url-as-command", 4, "(to reach a Streamable HTTP server, give --url URL)"),
        ("list-no-such-socket", 4, "cannot connect to /nonexistent-dir/mcp.sock: no such socket file"),
        ("no-command", 2, "examples:\n  jsonrpc-mcp serve server.py"),  # the whole help, on stderr
        ("serve-missing-file", 1, "no such file: tests/fixtures/does_not_exist.py"),
        ("serve-not-a-server", 1, "os:sep is not a jsonrpc_mcp.Server"),
    ],
)
def test_usage_errors(runs: dict[str, subprocess.CompletedProcess[str]], name: str, code: int, message: str) -> None:
    proc = runs[name]
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert message in proc.stderr
    assert proc.stdout == ""  # stdout carries results only


def test_python_dash_m_help(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["help"]
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: jsonrpc-mcp")
    assert all(word in proc.stdout for word in ("serve", "list", "call"))


@pytest.mark.parametrize(
    ("signum", "sigint", "code"),
    [
        pytest.param(signal.SIGINT, "SIG_DFL", 130, id="Ctrl-C"),  # a clean stop, the conventional code
        pytest.param(signal.SIGINT, "SIG_IGN", 130, id="SIGINT to a background job of a script"),
        pytest.param(signal.SIGTERM, "SIG_DFL", -signal.SIGTERM, id="SIGTERM"),  # ends as killed by it, as --http
    ],
)
def test_serve_unix_then_interrupt(signum: int, sigint: str, code: int) -> None:
    directory = tempfile.mkdtemp(prefix="mcp-cli-")  # short: AF_UNIX paths are limited to ~100 bytes
    path = os.path.join(directory, "s.sock")
    served = Served("--unix", path, sigint=sigint)
    try:
        served.wait_for(re.escape(f"serving MCP on unix:{path}"))
        listed = subprocess.run(
            [*CLI, "list", "--json", "--unix", path], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout)["serverInfo"]["name"] == "everything"
        assert served.interrupt(signum) == code
        assert not os.path.exists(path)  # the socket file is removed at exit: the server stopped, not died
        assert not any("Traceback" in line for line in served.seen)
    finally:
        served.kill()
        shutil.rmtree(directory, ignore_errors=True)


def test_serve_http_started_with_sigint_ignored_stops_on_ctrl_c() -> None:
    """uvicorn takes SIGINT while it serves, then restores the handler the process had and raises the signal again:
    the command restores Python's own first, so the stop is a Ctrl-C (130) as on the other transports."""
    served = Served("--http", "127.0.0.1:0", sigint="SIG_IGN")
    try:
        url = served.wait_for(r"serving \S+ at (http://127\.0\.0\.1:\d+/mcp)").group(1)
        listed = subprocess.run(
            [*CLI, "list", "--json", "--url", url], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        assert listed.returncode == 0, listed.stderr
        assert served.interrupt() == 130
        assert not any("Traceback" in line for line in served.seen)
    finally:
        served.kill()


def test_tcp_server_served_every_call_and_stops_on_interrupt(
    runs: dict[str, subprocess.CompletedProcess[str]], tcp_server: tuple[str, Served]
) -> None:
    _address, served = tcp_server
    assert runs["call-ping"].returncode == 0
    assert served.interrupt() == 130
    assert not any("Traceback" in line for line in served.seen)


#: ``run_until_stopped`` on the backend named by argv[1]: a server that says it is ready and serves forever, or
#: (argv[2] == "fail") one that cannot start.
UNTIL_STOPPED = """
import sys, anyio
from jsonrpc_mcp.transports.runner import run_until_stopped

async def serve(fail):
    if fail:
        raise OSError("address in use")
    print("ready", flush=True)
    await anyio.sleep_forever()

try:
    stopped = run_until_stopped(serve, sys.argv[2] == "fail", backend=sys.argv[1])
    print("stopped on", stopped.name if stopped else None, flush=True)
except OSError as exc:
    print(type(exc).__name__, exc, flush=True)
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_run_until_stopped_returns_the_signal_on_each_backend(backend: str, signum: int) -> None:
    """The signal ends the server and is returned, SIGINT although the process started with it ignored."""
    command = [sys.executable, "-c", WITH_SIGINT, "SIG_IGN", sys.executable, "-c", UNTIL_STOPPED, backend, "serve"]
    with subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=30)
        assert (proc.returncode, out) == (0, f"stopped on {signal.Signals(signum).name}\n")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_run_until_stopped_raises_the_servers_own_error(backend: str) -> None:
    """A server that cannot start (a port in use) raises its own exception, not a task group's ExceptionGroup."""
    proc = subprocess.run(
        [sys.executable, "-c", UNTIL_STOPPED, backend, "fail"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert (proc.returncode, proc.stdout) == (0, "OSError address in use\n"), proc.stderr


def test_call_reports_a_server_that_exits_in_the_call_without_starting_it_again() -> None:
    """One request and out: the server is not started again after it exits (decision 105), and the error says so."""
    done = run_in_process(["call", "die", '{"status": 7}', "--", sys.executable, str(FIXTURES / "dies.py")])
    assert done.returncode != 0
    assert "the server process exited with status 7 before answering tools/call\n" in done.stderr, done.stderr


@pytest.mark.parametrize("seconds", ["0", "-5", "nan"])
def test_a_timeout_that_would_give_up_at_once_is_a_usage_error(seconds: str) -> None:
    done = run_in_process(["call", "--timeout", seconds, "echo", "--", sys.executable, "-c", "pass"])
    assert done.returncode == 2  # (was: "no answer within 0 s", or a wait without end for nan)
    assert f"argument --timeout: expected a positive number of seconds, got '{seconds}'" in done.stderr


def test_serve_http_legacy_sse_serves_the_2024_11_05_transport_beside_the_endpoint() -> None:
    served = Served("--http", "127.0.0.1:0", "--legacy-sse")
    try:
        base = served.wait_for(r"HTTP\+SSE transport, for older clients, at (http://127\.0\.0\.1:\d+)/sse").group(1)
        with (
            httpx.Client(timeout=30) as http,
            http.stream("GET", base + "/sse", headers={"Accept": "text/event-stream"}) as response,
        ):
            assert response.status_code == 200
            assert next(response.iter_lines()) == "event: endpoint"
        # the CLI's --url falls back to the transport by itself (its first POST, to /sse, is a 405)
        listed = subprocess.run(
            [*CLI, "list", "--json", "--url", base + "/sse"], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout)["serverInfo"]["name"] == "everything"
        assert served.interrupt() == 130
        assert not any("Traceback" in line for line in served.seen)
    finally:
        served.kill()


@pytest.mark.parametrize(
    ("where", "message"),
    [
        pytest.param(["--tcp", "127.0.0.1:0"], "--legacy-sse is for --http", id="not HTTP"),
        pytest.param(
            ["--http", "127.0.0.1:0", "--workers", "2", "--backend", "redis://127.0.0.1:1/0"],
            "--legacy-sse serves with one worker",
            id="several workers",
        ),
    ],
)
def test_serve_legacy_sse_is_refused_where_it_cannot_work(where: list[str], message: str) -> None:
    proc = subprocess.run(
        [*SERVE, *where, "--legacy-sse"], capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL
    )
    assert proc.returncode != 0 and message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("where", "message"),
    [
        pytest.param(["--tcp", "0.0.0.0:0"], "refusing to serve MCP over TCP on 0.0.0.0", id="beyond loopback"),
        pytest.param(["--unix", "x.sock", "--certfile", "c.pem"], "--certfile and --keyfile are for", id="TLS on unix"),
        pytest.param(["--http", "127.0.0.1:0", "--allow-remote"], "--allow-remote is for --tcp", id="remote HTTP"),
    ],
)
def test_serve_refuses_what_would_serve_less_safely_than_asked(where: list[str], message: str) -> None:
    proc = subprocess.run(
        [*SERVE, *where], capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL
    )
    assert proc.returncode != 0 and message in proc.stderr and "Traceback" not in proc.stderr


def test_serve_tcp_with_a_certificate_serves_tls(tmp_path: Path) -> None:
    certfile, keyfile = self_signed(tmp_path)
    served = Served("--tcp", "127.0.0.1:0", "--certfile", str(certfile), "--keyfile", str(keyfile))
    try:
        port = int(served.wait_for(r"serving MCP on tls://127\.0\.0\.1:(\d+)").group(1))

        async def listed() -> list[str]:
            async with Client.connect_tcp("127.0.0.1", port, ssl_context=trusting(certfile)) as client:
                return [tool.name for tool in await client.list_tools()]

        assert "echo" in anyio.run(listed)
        # the banner's way to reach it works, the certificate trusted through SSL_CERT_FILE
        reach = served.wait_for(r"jsonrpc-mcp list (--tcp \S+ --tls)").group(1).split()
        env = {**os.environ, "SSL_CERT_FILE": str(certfile)}
        listing = subprocess.run(
            [*CLI, "list", "--json", *reach], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env
        )
        assert listing.returncode == 0, listing.stderr
        assert "echo" in [tool["name"] for tool in json.loads(listing.stdout)["tools"]]
        untrusted = subprocess.run([*CLI, "list", *reach], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert untrusted.returncode != 0 and "TLS certificate is not trusted" in untrusted.stderr
    finally:
        served.kill()


def test_serve_tcp_stopped_ends_a_listen_stream_with_its_cancellation_and_result() -> None:
    """2026-07-28: stopped by SIGTERM, ``serve --tcp`` tears down each ``subscriptions/listen`` stream as that
    revision asks (``notifications/cancelled`` referencing it, then its result) before its connections close."""
    import socket

    served = Served("--tcp", "127.0.0.1:0")
    try:
        port = int(served.wait_for(r"serving MCP on tcp://127\.0\.0\.1:(\d+)").group(1))
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        }
        listen = {"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen"}
        listen["params"] = {"notifications": {"toolsListChanged": True}, "_meta": meta}
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn, conn.makefile("rwb") as wire:
            wire.write(json.dumps(listen).encode() + b"\n")
            wire.flush()
            assert json.loads(wire.readline())["method"] == "notifications/subscriptions/acknowledged"
            served.proc.send_signal(signal.SIGTERM)
            rest = [json.loads(line) for line in wire]  # (until the server closes the connection)
        assert served.proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        served.kill()
    assert rest[0] == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": "l", "reason": "The server is shutting down"},
    }
    assert rest[1]["id"] == "l" and rest[1]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "l"
    assert len(rest) == 2
