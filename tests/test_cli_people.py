"""The ``jsonrpc-mcp`` command for people: ``call NAME key=value`` typed from the tool's schema, ``list`` as
signatures, progress and log messages on stderr while a call runs (a bar on a terminal), ``--header``,
``--version``, help with examples and exit codes, and errors that say what happened in one line (a refused
connection, an unknown host, a URL without a scheme, a timeout, an address in use, a server refusing the
discovery probe). Every command is a real subprocess; servers are real processes or uvicorn on loopback."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers import FIXTURES, ROOT, paced
from http_support import ServerThread

from jsonrpc_mcp import Client, ServerUnreachable
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

CLI = [sys.executable, "-m", "jsonrpc_mcp"]
FIXTURE = FIXTURES / "cli_tools.py"
SERVE = [*CLI, "serve", str(FIXTURE)]


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed: refused until someone binds it again)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CLOSED = _closed_port()
#: Started with ``--env NEEDED=yes`` or not at all.
NEEDS_ENV = [*CLI, "serve", str(FIXTURES / "needs_env.py")]
#: Variables of this command's environment for every run (a server it starts sees them only if passed on).
CALLER_ENV = {"PASSED_ON": "from the caller", "KEPT_BACK": "a secret"}
SHOWN = 'names=["NEEDED", "PASSED_ON", "KEPT_BACK", "GIVEN"]'

#: name -> argv; all run at once (each starts its own server), then the tests read the results.
RUNS: dict[str, list[str]] = {
    "kinds": [
        *CLI,
        "call",
        "kinds",
        "count=3",
        "ratio=0.5",
        "flag=true",
        'tags=["a", "b"]',
        'point={"x": 1}',
        "name=007",
        "maybe=null",
        "anything=[1, 2]",
        "--",
        *SERVE,
    ],
    "kinds-explicit": [
        *CLI,
        "call",
        "kinds",
        "count:=4",
        "ratio=2",
        "flag=no",
        "tags:=[]",
        'point:={"x": 2}',
        'name:="x y"',
        "--json",
        "--",
        *SERVE,
    ],
    "kinds-json-form": [
        *CLI,
        "call",
        "--json",
        "kinds",
        json.dumps({"count": 1, "ratio": 1.5, "flag": False, "tags": [], "point": {"x": 0}, "name": "n"}),
        "--",
        *SERVE,
    ],
    "unknown-key": [*CLI, "call", "kinds", "cuont=3", "--", *SERVE],
    "not-an-integer": [*CLI, "call", "kinds", "count=three", "--", *SERVE],
    "no-such-tool": [*CLI, "call", "nosuch", "a=1", "--", *SERVE],
    "near-tool": [*CLI, "call", "kind", "count=3", "--", *SERVE],
    "near-tool-without-arguments": [*CLI, "call", "stpes", "--", *SERVE],
    "tool-error": [*CLI, "call", "refuse", "reason=not today", "--", *SERVE],
    "set-level-refused": [
        *CLI,
        "call",
        "add",
        "a=1",
        "b=2",
        "--",
        *CLI,
        "serve",
        str(FIXTURES / "refuses_set_level.py"),
    ],
    "steps": [*CLI, "call", "steps", "count=3", "--", *SERVE],
    "list": [*CLI, "list", "--", *SERVE],
    "list-help": [*CLI, "list", "--help"],
    "call-help": [*CLI, "call", "--help"],
    "help": [*CLI, "--help"],
    "alone": CLI,
    "version": [*CLI, "--version"],
    "timeout": [*CLI, "call", "--timeout", "3", "never", "--", *SERVE],
    "refused": [*CLI, "list", "--url", f"http://127.0.0.1:{CLOSED}/mcp"],
    "refused-tcp": [*CLI, "list", "--tcp", f"127.0.0.1:{CLOSED}"],
    "unknown-host": [*CLI, "list", "--url", "http://no-such-host.invalid/mcp"],
    "no-scheme": [*CLI, "list", "--url", "127.0.0.1:8000/mcp"],
    "header-without-url": [*CLI, "list", "--header", "X-A: 1", "--tcp", "127.0.0.1:1"],
    "check-help": [*CLI, "check", "--help"],
    "check-refused": [*CLI, "check", "--url", f"http://127.0.0.1:{CLOSED}/mcp"],
    "check-unknown-host": [*CLI, "check", "--json", "--url", "http://no-such-host.invalid/mcp"],
    "check-no-scheme": [*CLI, "check", "--url", "127.0.0.1:8000/mcp"],
    "check-exits": [*CLI, "check", "--", sys.executable, "-c", "raise SystemExit(3)"],
    "check-cannot-start": [*CLI, "check", "--", "/nonexistent/jsonrpc-mcp-test-program"],
    # a server that reads its stdin and never answers: --startup is all the check waits, for each probe
    # a file that defines a Server but does not serve it (as the README's server.py): run, it just exits
    "check-exits-0": [*CLI, "check", "--", sys.executable, "quiet.py"],
    "list-exits-0": [*CLI, "list", "--", sys.executable, "quiet.py"],
    "list-a-file": [*CLI, "list", "quiet.py"],
    "check-silent": [*CLI, "check", "--startup", "2", "--", sys.executable, "-c", "import sys; sys.stdin.read()"],
    "env": [
        *CLI,
        "call",
        "--json",
        "--env",
        "NEEDED=yes",
        "--env",
        "PASSED_ON",
        "--env",
        "GIVEN=a=b",
        "environment",
        SHOWN,
        "--",
        *NEEDS_ENV,
    ],
    "inherit-env": [
        *CLI,
        "call",
        "--json",
        "--inherit-env",
        "--env",
        "NEEDED=yes",
        "environment",
        SHOWN,
        "--",
        *NEEDS_ENV,
    ],
    "env-list": [*CLI, "list", "--env", "NEEDED=yes", "--", *NEEDS_ENV],
    "env-missing": [*CLI, "list", "--", *NEEDS_ENV],
    "env-with-tcp": [*CLI, "list", "--env", "NEEDED=yes", "--tcp", "127.0.0.1:1"],
    "env-unset": [*CLI, "list", "--env", "NOT_SET_IN_THE_CALLER", "--", *NEEDS_ENV],
    "env-no-name": [*CLI, "call", "--env", "=yes", "environment", SHOWN, "--", *NEEDS_ENV],
    "check-env": [*CLI, "check", "-k", "lifecycle", "--env", "NEEDED=yes", "--", *NEEDS_ENV],
    "check-no-env": [*CLI, "check", "-k", "lifecycle", "--", *NEEDS_ENV],
    "check-env-with-url": [*CLI, "check", "--env", "NEEDED=yes", "--url", "http://127.0.0.1:1/mcp"],
}


@pytest.fixture(scope="module")
def runs() -> dict[str, subprocess.CompletedProcess[str]]:
    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        cwd = FIXTURES if "quiet.py" in argv else ROOT
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **CALLER_ENV},
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {name: pool.submit(run, argv) for name, argv in RUNS.items()}
        return {name: future.result() for name, future in futures.items()}


# --- the environment of a server the command starts -------------------------------------------------------------


def test_env_and_inherit_env_reach_the_server_a_command_starts(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    given = runs["env"]
    assert given.returncode == 0, given.stderr
    assert json.loads(given.stdout)["structuredContent"] == {
        "NEEDED": "yes",
        "PASSED_ON": "from the caller",  # a bare NAME: this environment's value
        "KEPT_BACK": None,  # the rest of this environment stays here
        "GIVEN": "a=b",  # split at the first =
    }
    inherited = runs["inherit-env"]
    assert inherited.returncode == 0, inherited.stderr
    assert json.loads(inherited.stdout)["structuredContent"] == {
        "NEEDED": "yes",
        "PASSED_ON": "from the caller",
        "KEPT_BACK": "a secret",
        "GIVEN": None,
    }
    listed = runs["env-list"]
    assert listed.returncode == 0, listed.stderr
    assert "    environment(names: list[str]) -> dict[str, str | None]" in listed.stdout.splitlines()
    missing = runs["env-missing"]
    assert missing.returncode == 4
    assert "needs_env: NEEDED=yes is not in this environment" in missing.stderr  # the server's own stderr


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "env-with-tcp",
            "jsonrpc-mcp list: --env and --inherit-env go with -- COMMAND... (a server this command starts)",
        ),
        (
            "env-unset",
            "jsonrpc-mcp list: error: argument --env: NOT_SET_IN_THE_CALLER is not set in this environment (give "
            "NAME=VALUE)",
        ),
        ("env-no-name", "jsonrpc-mcp call: error: argument --env: expected NAME=VALUE or NAME, got '=yes'"),
    ],
)
def test_env_mistakes_are_usage_errors(
    runs: dict[str, subprocess.CompletedProcess[str]], name: str, message: str
) -> None:
    proc = runs[name]
    assert (proc.returncode, proc.stderr.splitlines()[-1], proc.stdout) == (2, message, "")


def test_check_passes_the_environment_to_the_server_it_starts(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    given, without, misplaced = runs["check-env"], runs["check-no-env"], runs["check-env-with-url"]
    assert given.returncode == 0 and "handshake: 2025-11-25" in given.stdout, given.stdout + given.stderr
    assert without.returncode == 4, without.stdout + without.stderr
    assert without.stderr.startswith("jsonrpc-mcp check: the server process exited with status 1 before answering")
    assert (misplaced.returncode, misplaced.stderr) == (
        2,
        "jsonrpc-mcp check: --env and --inherit-env go with -- COMMAND... (a server it starts)\n",
    )


# --- call NAME key=value ---------------------------------------------------------------------------------------


def test_key_value_arguments_are_typed_from_the_input_schema(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["kinds"]
    assert proc.returncode == 0, proc.stderr
    echo = json.loads(proc.stdout)  # a tool's structured data, printed as JSON
    assert echo["types"] == {
        "count": "int",
        "ratio": "float",
        "flag": "bool",
        "tags": "list",
        "point": "Point",
        "name": "str",
        "maybe": "NoneType",
        "anything": "list",
        "level": "int",
    }
    assert echo["values"]["name"] == "007"  # a string parameter keeps its leading zeros
    assert echo["values"]["point"] == {"x": 1, "y": 0}


def test_explicit_json_values_and_the_json_form(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    explicit = runs["kinds-explicit"]
    assert explicit.returncode == 0, explicit.stderr
    result = json.loads(explicit.stdout)  # --json: the whole CallToolResult as it came
    values = result["structuredContent"]["values"]
    assert (values["count"], values["ratio"], values["flag"], values["name"]) == (4, 2.0, False, "x y")
    assert result["structuredContent"]["types"]["ratio"] == "float"
    as_json = runs["kinds-json-form"]
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["structuredContent"]["values"]["ratio"] == 1.5


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "unknown-key",
            "jsonrpc-mcp call: kinds has no parameter 'cuont' (its parameters: count, ratio, flag, tags, point, "
            "name, maybe, anything, level; cuont:=JSON sends it anyway)\n",
        ),
        ("not-an-integer", "jsonrpc-mcp call: count: expected an integer, got 'three'\n"),
        (
            "no-such-tool",
            "jsonrpc-mcp call: the server has no tool named 'nosuch' (its tools: headers, kinds, never, refuse, "
            "steps)\n",
        ),
        (
            "near-tool",
            "jsonrpc-mcp call: the server has no tool named 'kind' (did you mean 'kinds'? its tools: headers, kinds, "
            "never, refuse, steps)\n",
        ),
        (  # (the server's -32602 for an unknown tool, told apart from arguments it refused)
            "near-tool-without-arguments",
            "jsonrpc-mcp call: the server has no tool named 'stpes' (did you mean 'steps'? its tools: headers, "
            "kinds, never, refuse, steps)\n",
        ),
    ],
)
def test_arguments_that_cannot_be_sent_are_a_usage_error(
    runs: dict[str, subprocess.CompletedProcess[str]], name: str, message: str
) -> None:
    proc = runs[name]
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, message, "")


def test_a_tool_error_is_one_line_on_stderr_and_exit_1(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["tool-error"]
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == "jsonrpc-mcp: the tool reported an error: not today\n"


# --- progress and log messages ---------------------------------------------------------------------------------


def test_a_server_refusing_logging_set_level_gets_its_call_with_one_warning(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    proc = runs["set-level-refused"]
    assert (proc.returncode, json.loads(proc.stdout)) == (0, {"result": 3})
    assert proc.stderr == (
        "jsonrpc-mcp: warning: the server refused logging/setLevel info (error -32603: logging/setLevel is not "
        "supported); calling anyway\n"
    )


def test_progress_and_log_messages_are_printed_while_the_call_runs(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    proc = runs["steps"]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "3 steps done\n"
    lines = proc.stderr.splitlines()
    assert [line for line in lines if line.startswith("[info]")] == [f"[info] step {i} of 3" for i in (1, 2, 3)]
    progress = [line for line in lines if not line.startswith("[info]")]
    assert paced(progress, [f"progress: {i}/3 step {i}" for i in (1, 2, 3)])  # (the server paces them)
    assert lines[:2] == ["[info] step 1 of 3", "progress: 1/3 step 1"]


def test_a_progress_bar_on_a_terminal() -> None:
    """stderr on a terminal (a pseudo-terminal here): the bar is redrawn in place, log lines go above it, and it is
    cleared before the result."""
    controller, terminal = os.openpty()
    try:
        proc = subprocess.Popen(
            [*CLI, "call", "steps", "count=2", "--", *SERVE],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=terminal,
            cwd=ROOT,
        )
        os.close(terminal)
        seen = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not chunk:
                break
            seen += chunk
        stdout, _ = proc.communicate(timeout=60)
    finally:
        os.close(controller)
    assert proc.returncode == 0
    assert stdout == b"2 steps done\n"
    shown = seen.decode()
    assert "\r\x1b[K[info] step 2 of 2\r\n" in shown  # the bar is cleared, the log line printed, the bar redrawn
    assert re.search(r"\r\x1b\[K\[[█#]{12}[░-]{12}\]  50%  step 1", shown), shown
    assert re.search(r"\r\x1b\[K\[[█#]{24}\] 100%  step 2", shown), shown
    assert shown.endswith("\r\x1b[K")  # nothing of the bar is left once the result is printed


# --- list, help, version ---------------------------------------------------------------------------------------


def test_list_prints_signatures_with_their_descriptions(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["list"]
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["cli-tools 1.0 (protocol 2026-07-28)", "Tools for trying the command line."]
    assert (
        "    kinds(count: int, ratio: float, flag: bool, tags: list[str], point: Point, name: str, "
        "maybe: int | None = None, anything: Any = None, level: int = 3) -> Echo"
    ) in lines
    at = lines.index("    steps(count: int = 3) -> str") if "    steps(count: int = 3) -> str" in lines else -1
    assert at == -1  # a str result has no outputSchema: no arrow
    assert "    steps(count: int = 3)" in lines
    start = next(i for i, line in enumerate(lines) if line.startswith("    kinds("))
    assert lines[start + 1 : start + 4] == [
        "        Echo each argument with the Python type it arrived as.",
        "        count: how many",
        "        point: where",
    ]
    # A docstring's paragraph is one paragraph, wherever its source broke the line; list items stay items.
    start = lines.index("    refuse(reason: str)")
    assert lines[start + 1 : start + 6] == [
        "        Fails with a tool error: the reason given comes back as the error's text.",
        "",
        "        Try it with:",
        "        - reason=busy",
        '        - reason="not today"',
    ]


def test_the_command_alone_prints_its_help(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    alone = runs["alone"]
    assert (alone.returncode, alone.stdout) == (2, "")
    assert alone.stderr == runs["help"].stdout  # what it does, its examples and exit statuses


def test_help_has_examples_and_exit_codes_and_each_command_its_own(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    top = runs["help"].stdout
    assert "examples:" in top and "jsonrpc-mcp call forecast city=Lyon days=3" in top
    for code, meaning in (
        ("0", "done"),
        ("1", "isError"),
        ("2", "bad usage"),
        ("3", "JSON-RPC error"),
        ("4", "could not be reached"),
        ("5", "--timeout"),
        ("130", "interrupted"),
    ):
        assert re.search(rf"^  {code} +.*{re.escape(meaning)}", top, re.M), (code, top)
    listing = runs["list-help"]
    assert listing.returncode == 0
    assert listing.stdout.startswith("usage: jsonrpc-mcp list ")
    assert "--json" in listing.stdout and "--header NAME:VALUE" in listing.stdout and "exit status:" in listing.stdout
    call = runs["call-help"].stdout
    assert call.startswith("usage: jsonrpc-mcp call ")
    assert "key:=JSON" in call and "--log-level" in call


def test_version(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    from jsonrpc_mcp import __version__

    assert (runs["version"].returncode, runs["version"].stdout) == (0, f"jsonrpc-mcp {__version__}\n")


# --- errors that say what happened -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("timeout", 5, "jsonrpc-mcp: no answer within 3 s (--timeout SECONDS waits longer)\n"),
        (
            "refused",
            4,
            f"jsonrpc-mcp: cannot connect to 127.0.0.1:{CLOSED} (http://127.0.0.1:{CLOSED}/mcp): connection refused "
            "(is the server running?)\n",
        ),
        (
            "refused-tcp",
            4,
            f"jsonrpc-mcp: cannot connect to 127.0.0.1:{CLOSED}: connection refused (is the server running?)\n",
        ),
    ],
    ids=[
        "timeout",
        "refused",
        "refused-tcp",
    ],
)
def test_errors_are_one_line_naming_the_cause(
    runs: dict[str, subprocess.CompletedProcess[str]], name: str, code: int, message: str
) -> None:
    proc = runs[name]
    assert (proc.returncode, proc.stderr, proc.stdout) == (code, message, "")


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        (
            "check-refused",
            4,
            f"jsonrpc-mcp check: cannot connect to 127.0.0.1:{CLOSED} (http://127.0.0.1:{CLOSED}/mcp): connection "
            "refused (is the server running?)\n",
        ),
        (
            "check-exits",
            4,
            "jsonrpc-mcp check: the server process exited with status 3 before answering initialize (--stderr shows "
            "what it wrote)\n",
        ),
        (
            "check-exits-0",
            4,
            "jsonrpc-mcp check: the server process exited with status 0 before answering initialize (it does not "
            "serve MCP on stdio; a file that defines a Server: -- jsonrpc-mcp serve quiet.py)\n",
        ),
        (
            "list-exits-0",
            4,
            "jsonrpc-mcp: the server process exited with status 0 before answering server/discover (it does not "
            "serve MCP on stdio; a file that defines a Server: -- jsonrpc-mcp serve quiet.py)\n",
        ),
        (
            "list-a-file",
            4,
            "jsonrpc-mcp: cannot start 'quiet.py': No such file or directory (a Python file: -- jsonrpc-mcp serve "
            "quiet.py, or -- python quiet.py if it serves itself)\n",
        ),
        (
            "check-cannot-start",
            4,
            "jsonrpc-mcp check: cannot start '/nonexistent/jsonrpc-mcp-test-program': No such file or directory\n",
        ),
        ("check-silent", 5, "jsonrpc-mcp check: no answer to initialize within 2 s (--startup SECONDS waits longer)\n"),
    ],
    ids=[
        "check-refused",
        "check-exits",
        "check-exits-0",
        "list-exits-0",
        "list-a-file",
        "check-cannot-start",
        "check-silent",
    ],
)
def test_a_server_that_cannot_be_reached_is_one_line_saying_why(
    runs: dict[str, subprocess.CompletedProcess[str]], name: str, code: int, message: str
) -> None:
    """Not a report of every rule skipped, with exit status 0: the cause, and the exit status list and call give."""
    proc = runs[name]
    assert (proc.returncode, proc.stderr, proc.stdout) == (code, message, "")


def test_check_names_an_unknown_host_and_explains_a_url_without_a_scheme(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    unknown = runs["check-unknown-host"]
    assert (unknown.returncode, unknown.stdout) == (4, "")  # --json: nothing on stdout for a program to misread
    assert unknown.stderr.startswith(
        "jsonrpc-mcp check: cannot resolve host 'no-such-host.invalid' (http://no-such-host.invalid/mcp): "
    )
    assert unknown.stderr.count("\n") == 1
    no_scheme = runs["check-no-scheme"]
    assert no_scheme.returncode == 2
    assert no_scheme.stderr.splitlines()[-1] == (
        "jsonrpc-mcp check: error: argument --url: '127.0.0.1:8000/mcp' has no scheme: an MCP endpoint URL starts "
        "with http:// or https:// (http://127.0.0.1:8000/mcp?)"
    )


def test_check_help_explains_every_option_and_exit_status(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    help_text = runs["check-help"].stdout
    assert help_text.startswith("usage: jsonrpc-mcp check ")
    for line in help_text.split("options:")[1].split("examples:")[0].splitlines():
        if line.startswith("  -") and "  " not in line.strip():  # an option whose help is on the next line
            continue
        assert not re.match(r"^  -\S+( \S+)?$", line), f"an option without help: {line!r}"
    assert "examples:\n  jsonrpc-mcp check -- jsonrpc-mcp serve server.py\n" in help_text
    statuses = re.findall(r"^  (\d+) ", help_text.split("exit status:")[1], re.M)
    assert statuses == ["0", "1", "2", "4", "5", "130"]


def test_an_unknown_host_is_named(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    proc = runs["unknown-host"]
    assert proc.returncode == 4
    assert proc.stderr.startswith(
        "jsonrpc-mcp: cannot resolve host 'no-such-host.invalid' (http://no-such-host.invalid/mcp): "
    )
    assert proc.stderr.count("\n") == 1


def test_usage_mistakes_are_explained(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    no_scheme = runs["no-scheme"]
    assert no_scheme.returncode == 2
    assert no_scheme.stderr.splitlines()[-1] == (
        "jsonrpc-mcp list: error: argument --url: '127.0.0.1:8000/mcp' has no scheme: an MCP endpoint URL starts "
        "with http:// or https:// (http://127.0.0.1:8000/mcp?)"
    )
    header = runs["header-without-url"]
    assert header.returncode == 2
    assert header.stderr.splitlines()[-1] == "jsonrpc-mcp: error: --header goes with --url (an HTTP endpoint)"


@pytest.mark.parametrize("option", ["--http", "--tcp"])
def test_serving_an_address_in_use_is_one_line_and_no_banner(option: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [*SERVE, option, f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 1
    assert proc.stderr == f"jsonrpc-mcp: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_serving_on_a_socket_path_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "no-such-directory" / "mcp.sock"
    proc = subprocess.run(
        [*SERVE, "--unix", str(path)], capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL
    )
    assert (proc.returncode, proc.stderr) == (1, f"jsonrpc-mcp: cannot listen on {path}: No such file or directory\n")


@pytest.mark.parametrize("option", ["--tcp", "--unix"])
def test_socket_servers_print_a_banner_with_the_address_they_got(option: str) -> None:
    """As ``--http`` does: where it listens (the port it got for port 0), and list/call commands that reach it."""
    directory = tempfile.mkdtemp(prefix="mcp-cli-")  # short: AF_UNIX paths are limited to ~100 bytes
    where = "127.0.0.1:0" if option == "--tcp" else os.path.join(directory, "s.sock")
    proc = subprocess.Popen(
        [*SERVE, option, where], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline() for _ in range(4)]
        shown = r"tcp://127\.0\.0\.1:(?!0\b)\d+" if option == "--tcp" else re.escape(f"unix:{where}")
        assert re.fullmatch(rf"jsonrpc-mcp: serving {re.escape(str(FIXTURE))} at {shown}\n", lines[0]), lines
        assert lines[1].endswith("handshake) on this one socket\n"), lines
        listing = re.fullmatch(r"  try it: +(jsonrpc-mcp list (--tcp|--unix) (\S+))\n", lines[2])
        assert listing and listing.group(2) == option, lines
        assert lines[3].startswith(f"            jsonrpc-mcp call {option} {listing.group(3)} TOOL key=value"), lines
        listed = subprocess.run(
            [*CLI, *listing.group(1).split()[1:]], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
        assert listed.returncode == 0 and listed.stdout.startswith("cli-tools 1.0 "), listed.stderr
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
        shutil.rmtree(directory, ignore_errors=True)


# --- HTTP: a server of its own, the banner, --header -----------------------------------------------------------


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """``jsonrpc-mcp serve --http 127.0.0.1:0``: the banner names the port it got, once it is listening."""
    proc = subprocess.Popen(
        [*SERVE, "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        match = re.match(r"jsonrpc-mcp: serving \S+ at (http://127\.0\.0\.1:(\d+)/mcp)$", first.strip())
        assert match and match.group(2) != "0", first
        yield match.group(1)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_wrong_http_path_says_where_the_endpoint_usually_is(http_url: str) -> None:
    wrong = http_url.replace("/mcp", "/api")
    proc = subprocess.run([*CLI, "list", "--url", wrong], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (4, "")
    assert proc.stderr == (
        "jsonrpc-mcp: the server answered HTTP 404: Not Found (no MCP endpoint at /api; the endpoint is usually /mcp)\n"
    )


def test_headers_reach_the_server(http_url: str) -> None:
    proc = subprocess.run(
        [*CLI, "call", "--url", http_url, "--header", "X-Tenant: blue", "--header", "x-trace:42", "headers"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"x-tenant": "blue", "x-trace": "42"}


class RefusesDiscovery:
    """What the TypeScript SDK's session transport (server-everything) does with a POST that carries no session and
    is not ``initialize``: HTTP 400 with a JSON-RPC error that has no id."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        has_session = any(name == b"mcp-session-id" for name, _ in scope.get("headers", ()))
        if scope["type"] != "http" or scope["method"] != "POST" or has_session:
            await self.app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if b'"initialize"' in body:
            sent = False

            async def replay() -> Any:
                nonlocal sent
                if sent:
                    return await receive()
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self.app(scope, replay, send)
            return
        error = b'{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}'
        await send({"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": error})


@pytest.fixture(scope="module")
def refusing_url() -> Iterator[str]:
    from fixtures.cli_tools import server

    thread = ServerThread(RefusesDiscovery(McpAsgiApp(server)))
    try:
        yield thread.url
    finally:
        thread.stop()


def test_check_reports_a_refused_discovery_probe_and_goes_on_with_the_handshake(refusing_url: str) -> None:
    # --startup 600: were the refusal not recognised, the probe would wait that long for a reply with its id
    command = [*CLI, "check", "--url", refusing_url, "-k", "lifecycle", "--startup", "600"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr == ""
    assert (
        'note: server/discover was refused ("Bad Request: Server not initialized"): the 2026-07-28 sessions are '
        "skipped, the handshake sessions go on"
    ) in proc.stdout.splitlines()
    assert re.search(r"^(PASS|FAIL|DIFF)  lifecycle: ", proc.stdout, re.M), proc.stdout
    assert re.search(r"cases: [1-9]\d* pass", proc.stdout), proc.stdout  # the handshake sessions ran
    assert "handshake: 2025-11-25" in proc.stdout


class NeedsToken:
    """401 for any request without ``Authorization: Bearer t0k``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (b"authorization", b"Bearer t0k") not in scope.get("headers", ()):
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"token required"})
            return
        await self.app(scope, receive, send)


def test_check_sends_the_headers_it_is_given() -> None:
    from fixtures.cli_tools import server

    thread = ServerThread(NeedsToken(McpAsgiApp(server)))
    try:
        base = [*CLI, "check", "--url", thread.url, "-k", "lifecycle"]
        with_token = subprocess.run(
            [*base, "--header", "Authorization: Bearer t0k"], capture_output=True, text=True, timeout=300
        )
        without = subprocess.run(base, capture_output=True, text=True, timeout=300)
    finally:
        thread.stop()
    assert "handshake: 2025-11-25" in with_token.stdout, with_token.stdout
    assert "handshake: no" in without.stdout and "HTTP 401" in without.stdout, without.stdout


def test_list_falls_back_to_the_handshake_when_discovery_is_refused(refusing_url: str) -> None:
    proc = subprocess.run(
        [*CLI, "list", "--url", refusing_url], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("cli-tools 1.0 (protocol 2025-11-25)\n")


# --- serve: code that cannot be loaded --------------------------------------------------------------------------

UNSUPPORTED = """\
import socket

from jsonrpc_mcp import Server

server = Server("bad")

@server.tool()
def connect(sock: socket.socket) -> int:
    return 1
"""

BROKEN = """\
from jsonrpc_mcp import Server

server = Server("broken")

def helper() -> int:
    return undefined_name

helper()
"""


def test_serve_points_at_the_line_of_the_app_that_failed(tmp_path: Path) -> None:
    """The frames of the user's code and the error, not this package's frames: a tool whose parameter has no schema
    points at its decorator, with the one-line reason."""
    (tmp_path / "bad.py").write_text(UNSUPPORTED)
    (tmp_path / "broken.py").write_text(BROKEN)
    (tmp_path / "uses_bad.py").write_text("from bad import server\n")
    runs = {
        name: subprocess.run(
            [*CLI, "serve", app], capture_output=True, text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL
        )
        for name, app in (("file", "bad.py"), ("module", "uses_bad:server"), ("broken", "broken.py"))
    }
    for proc in runs.values():
        assert proc.returncode == 1 and proc.stdout == ""
        assert "Traceback" not in proc.stderr and "jsonrpc_mcp" not in proc.stderr and "importlib" not in proc.stderr
    reason = "TypeError: tool 'connect': parameter 'sock' is socket.socket, which has no JSON Schema; supported: "
    lines = runs["file"].stderr.splitlines()
    assert lines[:3] == [
        "jsonrpc-mcp: cannot load bad.py:",
        f'  File "{tmp_path / "bad.py"}", line 7, in <module>',
        "    @server.tool()",
    ]
    assert lines[-1].startswith(reason) and "pydantic models" in lines[-1]
    lines = runs["module"].stderr.splitlines()
    assert lines[:2] == [
        "jsonrpc-mcp: cannot load uses_bad:",
        f'  File "{tmp_path / "uses_bad.py"}", line 1, in <module>',
    ]
    assert f'  File "{tmp_path / "bad.py"}", line 7, in <module>' in lines and lines[-1].startswith(reason)
    lines = runs["broken"].stderr.splitlines()
    assert f'  File "{tmp_path / "broken.py"}", line 8, in <module>' in lines
    assert f'  File "{tmp_path / "broken.py"}", line 6, in helper' in lines
    assert lines[-1] == "NameError: name 'undefined_name' is not defined"


# --- serve on a terminal ----------------------------------------------------------------------------------------


def test_serve_on_a_terminal_says_it_waits_for_json_rpc_on_stdin() -> None:
    controller, terminal = os.openpty()
    proc = subprocess.Popen(SERVE, stdin=terminal, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    os.close(terminal)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
    finally:
        proc.kill()
        proc.communicate(timeout=30)
        os.close(controller)
    assert line.startswith(f"jsonrpc-mcp: serving {FIXTURE} on stdio: waiting for JSON-RPC messages on stdin")


# --- the same messages from the library ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_client_connect_errors_say_what_happened() -> None:
    with pytest.raises(ServerUnreachable) as refused:
        async with Client.connect_http(f"http://127.0.0.1:{CLOSED}/mcp"):
            pass
    assert str(refused.value) == (
        f"cannot connect to 127.0.0.1:{CLOSED} (http://127.0.0.1:{CLOSED}/mcp): connection refused "
        "(is the server running?)"
    )
    with pytest.raises(ServerUnreachable, match=rf"^cannot connect to 127\.0\.0\.1:{CLOSED}: connection refused"):
        async with Client.connect_tcp("127.0.0.1", CLOSED):
            pass
    with pytest.raises(ServerUnreachable, match=r"^cannot resolve host 'no-such-host\.invalid'"):
        async with Client.connect_tcp("no-such-host.invalid", 80):
            pass
    with pytest.raises(ValueError, match=r"^'localhost:8000/mcp' has no scheme: .* \(http://localhost:8000/mcp\?\)$"):
        async with Client.connect_http("localhost:8000/mcp"):
            pass


# --- help: one width, one layout ---------------------------------------------------------------------------------

HELPS = ([], ["serve"], ["list"], ["call"], ["check"])


def help_text(words: list[str], columns: int, monkeypatch: pytest.MonkeyPatch) -> str:
    from contextlib import redirect_stdout
    from io import StringIO

    from jsonrpc_mcp.cli import main

    monkeypatch.setenv("COLUMNS", str(columns))
    out = StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        main([*words, "--help"])
    return out.getvalue()


def sections(text: str) -> dict[str, list[str]]:
    """The help's sections below the options, by title: their lines."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if re.fullmatch(r"[a-z][a-z' ]*:", line):
            current = found.setdefault(line[:-1], [])
        elif not line:
            current = None
        elif current is not None:
            current.append(line)
    return found


@pytest.mark.parametrize("words", HELPS, ids=lambda words: " ".join(words) or "jsonrpc-mcp")
@pytest.mark.parametrize("columns", [102, 82])
def test_help_is_laid_out_at_one_width_in_aligned_columns(
    words: list[str], columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Options, examples, arguments and exit statuses wrap at one width (100 columns, or the terminal's less two
    when narrower); the texts of a section start in one column, their continuation lines too."""
    text = help_text(words, columns, monkeypatch)
    width = columns - 2
    found = sections(text)
    usage = text.split("\n\n", 1)[0].splitlines()  # (argparse cannot break a group of options)
    commands = set(found.get("examples", []))
    too_wide = [line for line in text.splitlines() if len(line) > width and line not in {*commands, *usage}]
    if columns == 102:
        assert [line for line in text.splitlines() if len(line) > width] == [], text
    assert too_wide == [], text  # (an example command is never wrapped, nor the usage)
    for title in ("examples", "exit status", "arguments"):
        rows = found.get(title, [])
        starts = {m.start(2) for line in rows if (m := re.match(r"  (\S.*?)  +(\S)", line))}
        starts |= {len(line) - len(line.lstrip()) for line in rows if line.startswith("   ")}
        assert len(starts) <= 1, (title, starts, text)
    if words in ([], ["serve"], ["list"], ["call"]):
        assert found["exit status"][0] == "  0    done"
