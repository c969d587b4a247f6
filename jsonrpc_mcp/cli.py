"""The ``jsonrpc-mcp`` command: serve a server on any transport, or talk to one as a small client (L7).

::

    jsonrpc-mcp serve [APP] [--stdio | --tcp HOST:PORT | --unix PATH | --http HOST:PORT [--path /mcp] [HTTP options]]
    jsonrpc-mcp serve [APP] --http HOST:PORT --auth-issuer URL [--auth-jwks-url URL | --auth-keys FILE |
                      --auth-introspection-url URL]
                      [--auth-resource URL] [--auth-scope SCOPE]...
    jsonrpc-mcp list  [--json] (--url URL [--header NAME:VALUE] | --tcp HOST:PORT | --unix PATH | -- COMMAND...)
    jsonrpc-mcp call  [TARGET] [METHOD] NAME [key=value ... | JSON] [-- COMMAND...]
    jsonrpc-mcp check (--url URL | -- COMMAND...) [--revision REV] [--json]

HTTP options: ``--certfile PEM [--keyfile PEM]`` (HTTPS), ``--header-timeout S``, ``--body-timeout S``,
``--max-connections N``, ``--allow-host NAME``. TCP options: ``--certfile PEM [--keyfile PEM]`` (TLS),
``--allow-remote`` (listen beyond loopback).

``APP`` is ``module:attribute`` or ``path/to/file.py[:attribute]`` naming a :class:`~jsonrpc_mcp.Server` (or a
function returning one); without it the knowledge server is served. ``list`` and ``call`` print for a person
(``--json``: for a program) on stdout; progress, logs and errors go to stderr. ``EXIT_STATUS`` says what the exit
status means; ``jsonrpc-mcp --help`` prints it with examples.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import logging
import os
import signal
import socket
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec

from .cli_help import HelpFormatter, help_width, paragraph, section

if TYPE_CHECKING:
    import ssl

__all__ = ("main", "load_app", "EXIT_STATUS")

logger = logging.getLogger("jsonrpc_mcp.cli")


def load_app(spec: str | None) -> Any:
    """Import ``module:attr`` or ``file.py[:attr]`` and return the Server it names."""
    from .mcp.server import Server
    from .storage.sqlite_tasks import TaskStoreInUse  # (an app whose task file another process holds)

    if spec is None:
        from .examples.knowledge import create_server
        from .examples.knowledge.db import KnowledgeStoreError

        try:
            return create_server(os.environ.get("KNOWLEDGE_DB", "knowledge.db"))
        except KnowledgeStoreError as exc:
            raise SystemExit(f"jsonrpc-mcp: {exc}") from None
    target, _, attr = spec.partition(":")
    if target.endswith(".py") or os.sep in target:
        path = os.path.abspath(target)
        if not os.path.exists(path):
            raise SystemExit(f"jsonrpc-mcp: no such file: {target}")
        sys.path.insert(0, os.path.dirname(path))
        module_spec = importlib.util.spec_from_file_location("_jsonrpc_mcp_app", path)
        if module_spec is None or module_spec.loader is None:
            raise SystemExit(f"jsonrpc-mcp: cannot import {target}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules["_jsonrpc_mcp_app"] = module
        try:
            module_spec.loader.exec_module(module)
        except TaskStoreInUse as exc:
            raise SystemExit(f"jsonrpc-mcp: {exc}") from None
        except Exception as exc:
            raise SystemExit(_load_failure(target, exc)) from None
    else:
        # Modules in the current directory come first, as with uvicorn and ``python -m`` (a console script's
        # sys.path starts with its own bin directory instead).
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (target == exc.name or target.startswith(exc.name + ".")):
                raise SystemExit(
                    f"jsonrpc-mcp: no module named {target!r} (looked in {os.getcwd()} and the installed packages)"
                ) from None
            raise SystemExit(f"jsonrpc-mcp: cannot import {target}: {exc}") from None
        except TaskStoreInUse as exc:
            raise SystemExit(f"jsonrpc-mcp: {exc}") from None
        except Exception as exc:
            raise SystemExit(_load_failure(target, exc)) from None
    if attr:
        obj = getattr(module, attr, None)
        if obj is None:
            raise SystemExit(f"jsonrpc-mcp: {target} has no attribute {attr!r}")
    else:
        found = [v for v in vars(module).values() if isinstance(v, Server)]
        if len(found) != 1:
            raise SystemExit(f"jsonrpc-mcp: name the server in {target} as {target}:ATTRIBUTE")
        obj = found[0]
    if callable(obj) and not isinstance(obj, Server):
        try:
            obj = obj()
        except TaskStoreInUse as exc:
            raise SystemExit(f"jsonrpc-mcp: {exc}") from None
        except Exception as exc:
            raise SystemExit(_load_failure(spec, exc)) from None
    if not isinstance(obj, Server):
        raise SystemExit(f"jsonrpc-mcp: {spec} is not a jsonrpc_mcp.Server")
    return obj


def _load_failure(target: str, exc: BaseException) -> str:
    """What ``serve`` says when the code it loads raises: the frames of that code (this package's and the import
    machinery's left out: a tool that cannot be registered points at its decorator), then the error."""
    machinery = tuple(
        os.path.dirname(os.path.abspath(m.__file__ or "")) + os.sep for m in (importlib, sys.modules[__package__])
    )
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith((*machinery, "<frozen importlib"))
    ]
    lines = [f"jsonrpc-mcp: cannot load {target}:\n", *traceback.format_list(frames)]
    lines.extend(traceback.format_exception_only(exc))
    return "".join(lines).rstrip("\n")


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return number


def _host_name(value: str) -> str:
    if "/" in value or "@" in value or not value.strip():
        raise argparse.ArgumentTypeError(f"expected a host name (mcp.example.com, or with :PORT), got {value!r}")
    return value


def _count(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return int(value)


LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

#: ``jsonrpc-mcp --help``: examples (a command, and what it does).
EXAMPLES: Final = (
    ("jsonrpc-mcp serve server.py", "serve the Server in server.py on stdio"),
    ("jsonrpc-mcp serve server.py --http 127.0.0.1:8000", "the same over Streamable HTTP, at /mcp"),
    ("jsonrpc-mcp list -- jsonrpc-mcp serve server.py", "what a stdio server offers"),
    ("jsonrpc-mcp call forecast city=Lyon days=3 -- jsonrpc-mcp serve server.py", ""),
    ('jsonrpc-mcp call --url http://127.0.0.1:8000/mcp forecast \'{"city": "Lyon"}\'', ""),
    ("jsonrpc-mcp call --url http://127.0.0.1:8000/mcp resources/read notes://todo", ""),
    ("jsonrpc-mcp check -- jsonrpc-mcp serve server.py", "the golden wire transcripts against a server"),
)

#: What the exit status of ``serve``, ``list`` and ``call`` means.
EXIT_CODES: Final = (
    ("0", "done"),
    ("1", "the tool reported an error (isError: true); check: a rule failed; serve: could not start"),
    ("2", "bad usage"),
    ("3", "the server answered with a JSON-RPC error"),
    ("4", "the server could not be reached or started, or the connection broke"),
    ("5", "no answer within --timeout (check: --startup)"),
    ("130", "interrupted (Ctrl-C)"),
)
EXIT_STATUS: Final = section("exit status", EXIT_CODES)

CALL_ARGUMENTS: Final = (
    (
        "key=value",
        "typed from the tool's input schema: integers, numbers, booleans (true/false), JSON for objects and "
        "arrays, strings otherwise",
    ),
    ("key:=JSON", "the value as JSON, whatever the schema says (key:='\"007\"' sends a string)"),
    ('\'{"key": "value"}\'', "the whole arguments object as JSON"),
)
CALL_EXAMPLES: Final = (
    ("jsonrpc-mcp call forecast city=Lyon days=3 -- jsonrpc-mcp serve server.py", ""),
    ('jsonrpc-mcp call --url http://127.0.0.1:8000/mcp forecast \'{"city": "Lyon"}\'', ""),
    ("jsonrpc-mcp call --url http://127.0.0.1:8000/mcp resources/read notes://todo", ""),
    ("jsonrpc-mcp call --url http://127.0.0.1:8000/mcp prompts/get summarize topic=bees", ""),
    ("jsonrpc-mcp call --json --tcp 127.0.0.1:7000 tools/call add a=1 b=2", ""),
    ("jsonrpc-mcp call --task --url http://127.0.0.1:8000/mcp import_entries '{\"entries\": [...]}'", ""),
)
LIST_EXAMPLES: Final = (
    ("jsonrpc-mcp list -- jsonrpc-mcp serve server.py", ""),
    ("jsonrpc-mcp list -- python my_server.py", "a file that serves itself on stdio"),
    ('jsonrpc-mcp list --url http://127.0.0.1:8000/mcp --header "Authorization: Bearer $TOKEN"', ""),
    ("jsonrpc-mcp list --json --tcp 127.0.0.1:7000", ""),
)
SERVE_EXAMPLES: Final = (
    ("jsonrpc-mcp serve server.py", "stdio (what an MCP client configuration runs)"),
    ("jsonrpc-mcp serve server.py:app --http 127.0.0.1:8000", ""),
    ("jsonrpc-mcp serve mypackage.server:create_server --tcp 127.0.0.1:7000", ""),
    ("jsonrpc-mcp serve", "the knowledge server (KNOWLEDGE_DB: its SQLite file)"),
)
SERVE_STOPPING: Final = (
    "Ctrl-C (SIGINT) or SIGTERM stops an --http, --tcp or --unix server cleanly: it stops listening, ends the "
    "sessions and removes its socket file (also when started with SIGINT ignored, as a script's background job). "
    "The exit status is 130 after SIGINT; after SIGTERM the process ends as killed by it. A stdio server stops "
    "when its stdin is closed."
)


def _epilog(width: int, *parts: str | tuple[str, Sequence[tuple[str, str]]]) -> str:
    """Sections (a title and its rows) and ready text, at ``width``, a blank line between them."""
    return "\n".join(part if isinstance(part, str) else section(*part, width) for part in parts)


def _version() -> str:
    from . import __version__

    return f"jsonrpc-mcp {__version__}"


def _parser() -> argparse.ArgumentParser:
    from .checker import add_check_arguments, check_epilog

    formatter = HelpFormatter
    width = help_width()
    exit_status = ("exit status", EXIT_CODES)
    parser = argparse.ArgumentParser(
        prog="jsonrpc-mcp",
        description="Serve MCP servers, or talk to one: list what it offers, call its tools, check it.",
        epilog=_epilog(width, ("examples", EXAMPLES), exit_status),
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv: debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve",
        help="serve a Server (default: the knowledge server)",
        description="Serve a Server: on stdio (the default), TCP, a Unix socket or Streamable HTTP.",
        epilog=_epilog(width, ("examples", SERVE_EXAMPLES), paragraph("stopping", SERVE_STOPPING, width), exit_status),
        formatter_class=formatter,
    )
    serve.add_argument("app", nargs="?", help="module:attr or file.py[:attr] (default: the knowledge server)")
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--stdio", action="store_true", help="serve on stdin/stdout (the default)")
    where.add_argument("--tcp", type=_host_port, metavar="HOST:PORT", help="NDJSON over TCP")
    where.add_argument("--unix", metavar="PATH", help="NDJSON over a Unix socket")
    where.add_argument("--http", type=_host_port, metavar="HOST:PORT", help="Streamable HTTP (needs the http extra)")
    serve.add_argument("--path", default="/mcp", help="HTTP: the endpoint's path (default /mcp)")
    serve.add_argument(
        "--legacy-sse",
        action="store_true",
        help="HTTP: also serve the 2024-11-05 HTTP+SSE transport (GET /sse, POST /messages/), for older clients",
    )
    serve.add_argument(
        "--allow-host",
        type=_host_name,
        action="append",
        default=None,
        metavar="NAME",
        help="HTTP: a host name allowed in Host and Origin besides loopback (repeatable; '*': any)",
    )
    serve.add_argument(
        "--header-timeout", type=_positive, default=10.0, metavar="S", help="HTTP: seconds to send request headers (10)"
    )
    serve.add_argument(
        "--body-timeout", type=_positive, default=30.0, metavar="S", help="HTTP: seconds to send a request body (30)"
    )
    serve.add_argument(
        "--certfile", metavar="PEM", help="HTTP and TCP: serve over TLS (HTTPS) with this certificate (chain)"
    )
    serve.add_argument("--keyfile", metavar="PEM", help="HTTP and TCP: the certificate's private key (with --certfile)")
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="TCP: listen beyond loopback (a connection carries no credentials: whoever reaches it may call the tools)",
    )
    serve.add_argument(
        "--max-connections",
        type=_count,
        default=None,
        metavar="N",
        help="HTTP: open connections at most (default: 3/4 of the descriptor limit)",
    )
    serve.add_argument(
        "--keep-alive",
        type=_positive,
        default=5.0,
        metavar="S",
        help="HTTP: seconds an idle connection stays open between requests (5; behind a proxy, more than its own)",
    )
    serve.add_argument(
        "--workers",
        type=_count,
        default=1,
        metavar="N",
        help="HTTP: serve with N worker processes (POSIX; needs --backend, which they share)",
    )
    serve.add_argument(
        "--backend",
        metavar="URL",
        default=os.environ.get("JSONRPC_MCP_BACKEND") or None,
        help="HTTP: what several workers or hosts share, redis://HOST:PORT/DB (the redis extra; default: "
        "$JSONRPC_MCP_BACKEND)",
    )
    serve.add_argument("--worker-socket", type=int, help=argparse.SUPPRESS)  # (set by --workers for its workers)
    serve.add_argument("--worker-parent", type=int, help=argparse.SUPPRESS)
    auth = serve.add_argument_group("authorization (HTTP only; needs the auth extra; docs/authorization.md)")
    auth.add_argument("--auth-issuer", metavar="URL", help="require OAuth access tokens from this authorization server")
    auth.add_argument("--auth-jwks-url", metavar="URL", help="its key set (default: from its RFC 8414 metadata)")
    auth.add_argument("--auth-keys", metavar="FILE", help="its public keys from a file instead (a JWKS, or PEM)")
    auth.add_argument(
        "--auth-introspection-url",
        metavar="URL",
        help="check tokens by RFC 7662 introspection instead (credentials: $MCP_INTROSPECTION_CLIENT_ID and "
        "$MCP_INTROSPECTION_CLIENT_SECRET)",
    )
    auth.add_argument("--auth-resource", metavar="URL", help="this server's canonical URI (default: the served URL)")
    auth.add_argument("--auth-scope", action="append", default=[], metavar="SCOPE", help="a scope every request needs")

    listing = sub.add_parser(
        "list",
        help="list the tools, resources and prompts of a server",
        usage="jsonrpc-mcp list [-h] [--json] [--timeout SECONDS] TARGET",
        description="List what a server offers: tools (as signatures), resources, templates and prompts.",
        epilog=_epilog(width, ("examples", LIST_EXAMPLES), exit_status),
        formatter_class=formatter,
    )
    _target_arguments(listing)
    listing.add_argument("--json", action="store_true", help="print JSON (tools/list & co. results) instead")
    listing.add_argument("words", nargs="*", help=argparse.SUPPRESS)  # COMMAND... without the --

    call = sub.add_parser(
        "call",
        help="call a tool (or send any request)",
        usage="jsonrpc-mcp call [-h] [--json] [--task] [--log-level LEVEL] [--timeout SECONDS]\n"
        "                        TARGET [METHOD] NAME [ARGS...]",
        description="Call a tool (NAME key=value ...), or send one request: tools/call, resources/read URI, "
        "prompts/get NAME, ping, or any METHOD with JSON params. Progress and log messages are shown on stderr "
        "while it runs.",
        epilog=_epilog(width, ("arguments", CALL_ARGUMENTS), ("examples", CALL_EXAMPLES), exit_status),
        formatter_class=formatter,
    )
    _target_arguments(call)
    call.add_argument("--json", action="store_true", help="print the result as JSON, as it came")
    call.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        metavar="LEVEL",
        help=f"ask for log messages at this level ({', '.join(LOG_LEVELS)}), even from a server that did not "
        "declare logging (default: info from one that did)",
    )
    call.add_argument(
        "--task",
        action="store_true",
        help="declare the tasks extension (2026-07-28): a tool the server runs as a task is followed to its "
        "result, its progress shown meanwhile; interrupted, the task is cancelled",
    )
    call.add_argument("words", nargs="*", metavar="[METHOD] NAME [ARGS...]", help=argparse.SUPPRESS)

    check = sub.add_parser(
        "check",
        help="replay the golden wire transcripts against a server, rule by rule",
        description="Replay the golden wire transcripts against an MCP server and report, rule by rule, "
        "which spec behaviours it gets right.",
        epilog=check_epilog(width),
        formatter_class=formatter,
    )
    add_check_arguments(check)
    return parser


def _target_arguments(parser: argparse.ArgumentParser) -> None:
    from .checker import add_environment_arguments, header_pair, http_url

    group = parser.add_argument_group(
        "target", "the server: one of these, or -- COMMAND... at the end to start a stdio server"
    )
    target = group.add_mutually_exclusive_group()
    target.add_argument("--url", type=http_url, metavar="URL", help="a Streamable HTTP endpoint")
    target.add_argument("--tcp", type=_host_port, metavar="HOST:PORT", help="NDJSON over TCP")
    target.add_argument("--unix", metavar="PATH", help="NDJSON over a Unix socket")
    group.add_argument(
        "--header",
        type=header_pair,
        action="append",
        metavar="NAME:VALUE",
        help="an HTTP header sent with every request (--url only; repeatable)",
    )
    group.add_argument(
        "--tls",
        action="store_true",
        help="--tcp over TLS, the server's certificate checked (a private CA: name its PEM file in SSL_CERT_FILE)",
    )
    add_environment_arguments(parser)
    parser.add_argument(
        "--timeout", type=_positive, default=60.0, metavar="SECONDS", help="give up after this long (default 60)"
    )
    from .auth.oauth_cli import add_arguments

    add_arguments(parser)  # authorization for --url, when the server asks for it


def _split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """``list``/``call`` take a server command after ``--``: (the words before it, the command)."""
    for i, word in enumerate(argv):
        if not word.startswith("-"):
            if word in ("list", "call") and "--" in argv[i:]:
                cut = argv.index("--", i)
                return argv[:cut], argv[cut + 1 :]
            break
    return argv, []


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    own, command = _split_argv(words)
    parser = _parser()
    if not own:  # the command alone: what it can do, rather than "the following arguments are required"
        parser.print_help(sys.stderr)
        return 2
    args = parser.parse_args(own)
    args.argv = own
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "check":
            from .checker import run_check_command

            return run_check_command(args)
        if args.header and not args.url:
            parser.error("--header goes with --url (an HTTP endpoint)")
        if args.tls and not args.tcp:
            parser.error("--tls goes with --tcp (an https:// URL is TLS by itself)")
        from . import cli_client
        from ._cli_text import UsageError

        try:
            return cli_client.run(args, command, list(getattr(args, "words", [])))
        except UsageError as exc:
            sys.stderr.write(f"jsonrpc-mcp {args.command}: {exc}\n")
            return 2
    except KeyboardInterrupt:
        return 130


def _listening_socket(args: argparse.Namespace) -> socket.socket:
    """The socket ``serve --http`` listens on: bound here (so that port 0 names the port it got), or inherited by a
    worker of ``--workers``."""
    if args.worker_socket is not None:
        return socket.socket(fileno=args.worker_socket)
    from .transports.http_serve import bind_socket

    host, port = args.http
    try:
        return bind_socket(host, port)
    except OSError as exc:
        raise SystemExit(f"jsonrpc-mcp: cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _banner(args: argparse.Namespace, url: str, reach: str | None = None) -> None:
    """How to connect, for a person starting a server by hand (on stderr: stdout may be the wire). ``url``: where
    it listens; ``reach``: the options of ``list`` and ``call`` that reach it (``--url URL`` by default)."""
    reach = reach or f"--url {url}"
    app = args.app or ""
    db = os.path.abspath(os.environ.get("KNOWLEDGE_DB", "knowledge.db"))
    target, colon, attr = app.partition(":")
    if target.endswith(".py") or os.sep in target:  # a client starts the server from a directory of its own
        app = os.path.abspath(target) + colon + attr
    stdio_args = ["-m", "jsonrpc_mcp", "serve"] + ([app] if app else [])
    entry: dict[str, Any] = {"command": sys.executable, "args": stdio_args}
    if not app:
        entry["env"] = {"KNOWLEDGE_DB": db}
    config = {"mcpServers": {"server" if app else "knowledge": entry}}
    lines = [
        f"jsonrpc-mcp: serving {app if app else 'the knowledge server (' + db + ')'} at {url}",
        "  both protocol eras (2026-07-28 and the 2024-11-05 .. 2025-11-25 handshake) on this one "
        + ("URL" if url.startswith("http") else "socket"),
        *(
            [f"  and the 2024-11-05 HTTP+SSE transport, for older clients, at {url.removesuffix(args.path)}/sse"]
            if getattr(args, "legacy_sse", False)
            else []
        ),
        f"  try it:   jsonrpc-mcp list {reach}",
        f"            jsonrpc-mcp call {reach} " + ("store topic=demo content=hello" if not app else "TOOL key=value"),
        "  stdio client configuration:",
        *("    " + line for line in json.dumps(config, indent=2).splitlines()),
        "  stop with Ctrl-C",
    ]
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()


def _http_only_options_given(args: argparse.Namespace) -> list[str]:
    """The options of ``serve`` that only HTTP uses, given other than as their defaults."""
    given = {
        "--path": args.path != "/mcp",
        "--allow-host": bool(args.allow_host),
        "--header-timeout": args.header_timeout != 10.0,
        "--body-timeout": args.body_timeout != 30.0,
        "--max-connections": args.max_connections is not None,
        "--keep-alive": args.keep_alive != 5.0,
        "--legacy-sse": args.legacy_sse,
    }
    return [flag for flag, was_given in given.items() if was_given]


def _serve(args: argparse.Namespace) -> int:
    from .errors import MissingExtra

    if args.auth_issuer is None and (
        args.auth_jwks_url or args.auth_keys or args.auth_introspection_url or args.auth_resource or args.auth_scope
    ):
        raise SystemExit("jsonrpc-mcp: the --auth-* options need --auth-issuer")
    http_only = _http_only_options_given(args)
    if http_only and not args.http:  # (not silently ignored)
        raise SystemExit(
            f"jsonrpc-mcp serve: {', '.join(http_only)} {'is' if len(http_only) == 1 else 'are'} for --http"
        )
    if (args.certfile or args.keyfile) and not (args.http or args.tcp):  # (--unix or stdio would serve without TLS)
        raise SystemExit("jsonrpc-mcp serve: --certfile and --keyfile are for --http and --tcp")
    if args.allow_remote and not args.tcp:
        raise SystemExit("jsonrpc-mcp serve: --allow-remote is for --tcp")
    if args.auth_issuer is not None and not args.http:
        raise SystemExit(
            "jsonrpc-mcp: authorization is for --http only; stdio and sockets take their credentials from the "
            "environment"
        )
    if not args.http and (args.workers > 1 or args.backend):
        raise SystemExit("jsonrpc-mcp serve: --workers and --backend are for --http")
    if args.workers > 1 and args.legacy_sse:
        raise SystemExit(
            "jsonrpc-mcp serve: --legacy-sse serves with one worker: an HTTP+SSE session lives on the worker that "
            "holds its stream, and another worker could not answer its POSTs"
        )
    if args.workers > 1 and not args.backend:
        raise SystemExit(
            f"jsonrpc-mcp serve: --workers {args.workers} needs --backend redis://HOST:PORT/DB: the workers must "
            "share sessions, notifications and requestState keys (or serve with one worker)"
        )

    if args.http or args.tcp or args.unix:
        _take_ctrl_c()
    server = load_app(args.app)
    try:
        if args.http:
            return _serve_http(args, server)
        if args.tcp or args.unix:
            return _serve_socket(args, server)
    except MissingExtra as exc:
        raise SystemExit(f"jsonrpc-mcp: {exc}") from None
    from .transports.stdio import run_stdio

    if sys.stdin.isatty():
        sys.stderr.write(
            f"jsonrpc-mcp: serving {args.app or 'the knowledge server'} on stdio: waiting for JSON-RPC messages on "
            "stdin, one per line (an MCP client starts this command itself; to try it by hand, use --http "
            "127.0.0.1:8000 and jsonrpc-mcp list --url ...). Ctrl-D or Ctrl-C stops.\n"
        )
        sys.stderr.flush()
    run_stdio(server)
    return 0


def _serve_socket(args: argparse.Namespace, server: Any) -> int:
    """``--tcp`` and ``--unix``: listen, then say how to connect (the port is known even for port 0), then serve
    until stopped. An address that cannot be listened on is one line, as for ``--http``."""
    from .transports.runner import run_until_stopped
    from .transports.socket import RemoteListenRefused, check_listen_host, serve_tcp, serve_unix

    serve: Any
    where: tuple[Any, ...]
    if args.tcp:
        host, port = args.tcp
        shown = f"[{host}]" if ":" in host else host
        try:
            check_listen_host(host, allow_remote=args.allow_remote)
        except RemoteListenRefused as exc:
            raise SystemExit(f"jsonrpc-mcp serve: {exc}") from None
        serve = functools.partial(serve_tcp, ssl_context=_server_tls(args), allow_remote=args.allow_remote)
        where, address = (host, port), f"{shown}:{port}"
    else:
        serve, where, address = serve_unix, (args.unix,), args.unix
    failure: list[str] = []

    async def listen_then_announce() -> None:
        async with anyio.create_task_group() as tg:
            try:
                bound = await tg.start(serve, server, *where)
            except OSError as exc:
                failure.append(f"jsonrpc-mcp: cannot listen on {address}: {exc.strerror or exc}")
                return
            if args.tcp:
                tls = " --tls" if args.certfile else ""
                _banner(args, f"{'tls' if tls else 'tcp'}://{shown}:{bound}", f"--tcp {shown}:{bound}{tls}")
            else:
                _banner(args, f"unix:{address}", f"--unix {address}")

    stopped = run_until_stopped(listen_then_announce, stopping=server.end_listens)
    if failure:
        raise SystemExit(failure[0])
    return _stopped_by(stopped)


def _check_pem_files(args: argparse.Namespace) -> None:
    if args.keyfile and not args.certfile:
        raise SystemExit("jsonrpc-mcp serve: --keyfile needs --certfile")
    for pem in (args.certfile, args.keyfile):
        if pem and not os.path.isfile(pem):
            raise SystemExit(f"jsonrpc-mcp serve: no such file: {pem}")


def _server_tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The TLS context of ``--certfile``/``--keyfile``, or None without them; a certificate or key that cannot be
    used is one line."""
    _check_pem_files(args)
    if not args.certfile:
        return None
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(args.certfile, args.keyfile)
    except ssl.SSLError as exc:  # not a certificate, or a key that does not match it
        raise SystemExit(f"jsonrpc-mcp serve: cannot use the certificate and key: {exc.reason or exc}") from None
    return context


def _take_ctrl_c() -> None:
    """A network server stops on Ctrl-C even when it was started with SIGINT ignored, as a shell without job control
    starts a background job: Python's own handler again, until uvicorn (``--http``) or ``run_until_stopped`` (TCP,
    Unix sockets) takes the signal over. (A stdio server keeps what the client that started it chose.)"""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _stopped_by(signum: signal.Signals | None) -> int:
    """The exit status of a socket server that stopped: 130 after Ctrl-C, as everywhere in this command; after
    SIGTERM the process ends as killed by it, as uvicorn ends ``--http`` (what supervisors expect of a clean stop)."""
    if signum == signal.SIGINT:
        return 130
    if signum == signal.SIGTERM:
        sys.stderr.flush()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
    return 0


def _serve_http(args: argparse.Namespace, server: Any) -> int:
    """Bind, check the certificate, then say where (the port is known even for port 0), then serve."""
    import ssl

    from .transports.http_serve import make_uvicorn_server

    _check_pem_files(args)
    host, port = args.http
    sock = _listening_socket(args)
    try:
        shown = f"[{host}]" if ":" in host else host
        url = f"{'https' if args.certfile else 'http'}://{shown}:{sock.getsockname()[1]}{args.path}"
        options: dict[str, Any] = {
            "header_timeout": args.header_timeout,
            "body_timeout": args.body_timeout,
            "max_connections": args.max_connections,
            "keep_alive": args.keep_alive,
            "ssl_certfile": args.certfile,
            "ssl_keyfile": args.keyfile,
        }
        if args.allow_host:
            options["allowed_hosts"] = args.allow_host
        if args.legacy_sse:
            options["legacy_sse"] = True
        if args.backend:
            options["backend"] = args.backend
        if args.auth_issuer is not None:
            policy = options["http_policy"] = _auth_policy(args, url, server)
            sys.stderr.write(
                f"jsonrpc-mcp: requests need an access token from {args.auth_issuer} for {policy.resource}"
                f" (metadata: {policy.metadata_url})\n"
            )
        uv_server, _ = make_uvicorn_server(server, host, port, path=args.path, **options)  # MissingExtra: no uvicorn
        try:
            uv_server.config.load()  # reads the certificate and key now, not after the banner
        except ssl.SSLError as exc:  # not a certificate, or a key that does not match it
            raise SystemExit(f"jsonrpc-mcp serve: cannot use the certificate and key: {exc.reason or exc}") from None
        if args.worker_parent is not None:
            from .transports.http_workers import stop_with_parent

            stop_with_parent(args.worker_parent)
        if args.workers > 1:
            from .transports.http_workers import supervise

            _banner(args, url)
            worker = [sys.executable, "-m", "jsonrpc_mcp", *args.argv, "--workers", "1"]
            return supervise(
                lambda fd, parent: [*worker, "--worker-socket", str(fd), "--worker-parent", str(parent)],
                sock,
                args.workers,
            )
        if args.worker_socket is None:
            _banner(args, url)
        uv_server.run(sockets=[sock])
    finally:
        sock.close()
    return 0


def _auth_policy(args: argparse.Namespace, url: str, server: Any = None) -> Any:
    """The ``ProtectedResource`` the ``--auth-*`` options describe (``url``: where ``server`` is served). Its
    metadata advertises the ``--auth-scope`` scopes and those the server's tools, resources and prompts need."""
    from .errors import MissingExtra

    try:
        from .auth import IntrospectionVerifier, JwtVerifier, ProtectedResource
        from .auth.jwt import discover_metadata
    except ImportError:
        raise SystemExit(
            f"jsonrpc-mcp: --auth-issuer needs joserfc and httpx: {MissingExtra.install('auth')}"
        ) from None
    issuer: str = args.auth_issuer
    resource: str = args.auth_resource or url
    verifier: Any
    if args.auth_introspection_url:
        client_id = os.environ.get("MCP_INTROSPECTION_CLIENT_ID")
        secret = os.environ.get("MCP_INTROSPECTION_CLIENT_SECRET")
        if not client_id or not secret:
            raise SystemExit(
                "jsonrpc-mcp: set MCP_INTROSPECTION_CLIENT_ID and MCP_INTROSPECTION_CLIENT_SECRET for introspection"
            )
        verifier = IntrospectionVerifier(
            introspection_url=args.auth_introspection_url,
            audience=resource,
            client_id=client_id,
            client_secret=secret,
            issuer=issuer,
        )
    elif args.auth_keys:
        try:
            with open(args.auth_keys, "rb") as file:
                data = file.read()
            keys: Any = msgspec.json.decode(data) if data.lstrip().startswith(b"{") else data
            verifier = JwtVerifier(issuer=issuer, audience=resource, keys=keys)
        except (OSError, ValueError, msgspec.DecodeError) as exc:
            raise SystemExit(f"jsonrpc-mcp: --auth-keys {args.auth_keys}: {exc}") from None
    else:
        jwks_url = args.auth_jwks_url
        if jwks_url is None:
            try:
                metadata = anyio.run(discover_metadata, issuer)
            except Exception as exc:
                raise SystemExit(f"jsonrpc-mcp: cannot discover the key set of {issuer}: {exc}") from None
            jwks_url = metadata.get("jwks_uri")
            if not isinstance(jwks_url, str):
                raise SystemExit(f"jsonrpc-mcp: {issuer} publishes no jwks_uri; give --auth-jwks-url")
        try:
            verifier = JwtVerifier(issuer=issuer, audience=resource, jwks_url=jwks_url)
        except ValueError as exc:
            raise SystemExit(f"jsonrpc-mcp: {exc}") from None
    scopes = list(args.auth_scope)
    supported = sorted({*scopes, *(server.declared_scopes() if server is not None else ())})
    try:
        return ProtectedResource(
            resource=resource,
            authorization_servers=[issuer],
            verifier=verifier,
            scopes_supported=supported or None,
            required_scopes=scopes,
        )
    except ValueError as exc:
        raise SystemExit(f"jsonrpc-mcp: {exc}") from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
