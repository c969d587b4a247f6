"""``jsonrpc-mcp check``: its options, and the command (L7)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import anyio
import anyio.abc

from ..cli_help import HELP_WIDTH, HelpFormatter, help_width, section
from ..mcp.versions import (
    HANDSHAKE_VERSIONS,
    STATELESS_VERSIONS,
)
from .channels import HttpTarget, StdioTarget, Target, Unreachable
from .probe import DEFAULT_GRACE, DEFAULT_STARTUP, DEFAULT_TIMEOUT, Timing
from .report import format_report, report_json
from .runner import run_check
from .transcripts import TranscriptError, load_transcripts

__all__ = (
    "add_check_arguments",
    "CHECK_EPILOG",
    "check_epilog",
    "add_environment_arguments",
    "header_pair",
    "http_url",
    "env_pair",
    "run_check_command",
    "main",
)


def _check_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jsonrpc-mcp check",
        description="Replay the golden wire transcripts against an MCP server and report, rule by rule, "
        "which spec behaviours it gets right.",
        epilog=check_epilog(help_width()),
        formatter_class=HelpFormatter,
    )
    add_check_arguments(parser)
    return parser


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", type=http_url, help="a Streamable HTTP endpoint (instead of -- COMMAND...)")
    parser.add_argument(
        "--header",
        type=header_pair,
        action="append",
        metavar="NAME:VALUE",
        help="an HTTP header sent with every request (--url only; repeatable), e.g. Authorization",
    )
    parser.add_argument(
        "--revision",
        action="append",
        choices=(*STATELESS_VERSIONS, *HANDSHAKE_VERSIONS),
        metavar="REV",
        help=f"only sessions of this revision (repeatable; default: all): {', '.join(STATELESS_VERSIONS)}, "
        f"{', '.join(HANDSHAKE_VERSIONS)}",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--mode",
        choices=("semantic", "exact"),
        default="semantic",
        help="semantic (the default): compare parsed JSON, ignoring what may differ between servers (error "
        "messages, serverInfo, key order); exact: compare bytes",
    )
    parser.add_argument(
        "--transcripts",
        type=Path,
        metavar="DIR",
        help="the transcript folder (default: the ones shipped with jsonrpc-mcp)",
    )
    parser.add_argument(
        "-k", "--only", action="append", metavar="NAME", help="only transcript files whose name contains NAME"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="seconds each case may take to be answered (default 10)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=DEFAULT_GRACE,
        metavar="SECONDS",
        help="seconds to wait after it for replies still owed (default 2)",
    )
    parser.add_argument(
        "--startup",
        type=float,
        default=DEFAULT_STARTUP,
        metavar="SECONDS",
        help="seconds for a fresh server's first reply (default 30)",
    )
    parser.add_argument("--jobs", type=int, default=4, metavar="N", help="sessions run at once (default 4)")
    parser.add_argument("--stderr", action="store_true", help="let the server's stderr through")
    parser.add_argument(
        "-v",
        "-V",
        "--verbose",
        "--all-cases",
        dest="all_cases",
        action="store_true",
        help="list passing and skipped cases too (by default only FAIL, WARN and DIFF lines)",
    )
    add_environment_arguments(parser)
    parser.add_argument("rest", nargs=argparse.REMAINDER, metavar="-- COMMAND...", help="a stdio server to start")


_CHECK_EXAMPLES: Final = (
    ("jsonrpc-mcp check -- jsonrpc-mcp serve server.py", ""),
    ("jsonrpc-mcp check -k unknown-names -v -- python my_server.py", ""),
    ("jsonrpc-mcp check --url http://127.0.0.1:8000/mcp --revision 2025-11-25", ""),
    ('jsonrpc-mcp check --json --url http://127.0.0.1:8000/mcp --header "Authorization: Bearer $TOKEN"', ""),
)
_CHECK_EXIT_CODES: Final = (
    ("0", "no case fails: every one passes, is skipped, warns (a SHOULD) or differs (a choice the spec leaves)"),
    ("1", "a case fails (a MUST or MUST NOT)"),
    ("2", "bad usage"),
    ("4", "the server could not be reached or started, or it ended before answering"),
    ("5", "no answer within --startup"),
    ("130", "interrupted (Ctrl-C)"),
)


def check_epilog(width: int = HELP_WIDTH) -> str:
    """The end of ``jsonrpc-mcp check --help`` at ``width`` columns: examples, and what the exit status means."""
    return section("examples", _CHECK_EXAMPLES, width) + "\n" + section("exit status", _CHECK_EXIT_CODES, width)


#: :func:`check_epilog` at its full width.
CHECK_EPILOG: Final = check_epilog()


def add_environment_arguments(parser: argparse.ArgumentParser) -> None:
    """``--env NAME=VALUE`` (repeatable) and ``--inherit-env``: the environment of the server ``-- COMMAND...``
    starts (``args.env``: a list of (name, value) pairs or None; ``args.inherit_env``)."""
    group = parser.add_argument_group(
        "the server's environment",
        "a server started by -- COMMAND... gets HOME, PATH and a few other variables of this environment, not the "
        "rest (API keys, tokens), plus what these give",
    )
    group.add_argument(
        "--env",
        type=env_pair,
        action="append",
        metavar="NAME=VALUE",
        help="a variable for the server (repeatable); a bare NAME passes this environment's value of it, which "
        "keeps a secret off the command line",
    )
    group.add_argument(
        "--inherit-env", action="store_true", help="pass this whole environment to the server (--env on top)"
    )


def header_pair(value: str) -> tuple[str, str]:
    """``NAME:VALUE`` (an option's value) as a header name and value."""
    name, sep, content = value.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME:VALUE, got {value!r}")
    return name.strip(), content.strip()


def http_url(value: str) -> str:
    """An ``http://`` or ``https://`` URL (an option's value); anything else is a usage error saying what is wrong."""
    from ..transports.connect_errors import check_http_url

    try:
        return check_http_url(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def env_pair(value: str) -> tuple[str, str]:
    """``NAME=VALUE`` (an option's value) as a variable's name and value; a bare ``NAME`` takes this process's value
    of that variable (an error if it has none)."""
    name, sep, content = value.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE or NAME, got {value!r}")
    if sep:
        return name, content
    if name not in os.environ:
        raise argparse.ArgumentTypeError(f"{name} is not set in this environment (give NAME=VALUE)")
    return name, os.environ[name]


def run_check_command(args: argparse.Namespace) -> int:
    """``jsonrpc-mcp check``: exit status 0 when no rule fails, 1 when one does, 2 on bad usage, 4 when the server
    cannot be reached or started, 5 when it does not answer (:data:`CHECK_EPILOG`)."""
    command = list(args.rest)
    if command[:1] == ["--"]:
        command = command[1:]
    target: Target
    if args.url and command:
        sys.stderr.write("jsonrpc-mcp check: give either --url or -- COMMAND..., not both\n")
        return 2
    if args.header and not args.url:
        sys.stderr.write("jsonrpc-mcp check: --header goes with --url\n")
        return 2
    if (args.env or args.inherit_env) and not command:
        sys.stderr.write("jsonrpc-mcp check: --env and --inherit-env go with -- COMMAND... (a server it starts)\n")
        return 2
    if args.url:
        import importlib.util

        if importlib.util.find_spec("httpx") is None:
            from ..cli_client import EXIT_UNREACHABLE, HTTP_EXTRA_MISSING

            sys.stderr.write(f"jsonrpc-mcp check: {HTTP_EXTRA_MISSING}\n")
            return EXIT_UNREACHABLE
        target = HttpTarget(args.url, headers=dict(args.header or ()))
    elif command:
        stderr = None if args.stderr else subprocess.DEVNULL
        target = StdioTarget(command, stderr=stderr, env=dict(args.env or ()), inherit_env=args.inherit_env)
    else:
        sys.stderr.write("jsonrpc-mcp check: give --url URL or -- COMMAND...\n")
        return 2
    try:
        files = load_transcripts(args.transcripts)
    except (FileNotFoundError, TranscriptError) as exc:
        sys.stderr.write(f"jsonrpc-mcp check: {exc}\n")
        return 2
    if args.only:
        files = [t for t in files if any(k in t.name for k in args.only)]
    try:
        results, offer = anyio.run(
            lambda: run_check(
                target,
                transcripts=files,
                mode=args.mode,
                revisions=args.revision,
                timing=Timing(args.timeout, args.grace, args.startup),
                concurrency=args.jobs,
            )
        )
    except Unreachable as exc:
        from ..cli_client import EXIT_TIMEOUT, EXIT_UNREACHABLE, exit_hint

        hint = exit_hint(command, exc.reason)
        if not hint and command and not args.stderr and "exited with status" in exc.reason:
            hint = " (--stderr shows what it wrote)"
        sys.stderr.write(f"jsonrpc-mcp check: {exc.reason}{hint}\n")
        return EXIT_TIMEOUT if exc.timed_out else EXIT_UNREACHABLE
    if args.json:
        sys.stdout.write(json.dumps(report_json(target.description, results, offer), indent=2) + "\n")
    else:
        sys.stdout.write(format_report(target.description, results, offer, verbose=args.all_cases) + "\n")
    return 1 if any(r.status == "fail" for r in results) else 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_check_command(_check_parser().parse_args(argv))
