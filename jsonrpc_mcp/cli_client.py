"""``jsonrpc-mcp list`` and ``jsonrpc-mcp call``: connect, ask, print (L7).

The result goes to stdout (readable, or JSON with ``--json``); progress, log messages and errors go to stderr,
each error as one line. The exit status says what happened (see ``EXIT_STATUS`` in :mod:`jsonrpc_mcp.cli`).
"""

from __future__ import annotations

import argparse
import difflib
import json
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final, TextIO

import anyio
import msgspec

from . import _cli_text as text
from .errors import InvalidParams, MissingExtra, RequestTimeout, RpcError, ServerUnreachable
from .transports.connect_errors import start_failure

__all__ = (
    "METHODS",
    "run",
    "exit_hint",
    "Progress",
    "HTTP_EXTRA_MISSING",
    "EXIT_OK",
    "EXIT_TOOL_ERROR",
    "EXIT_USAGE",
    "EXIT_RPC_ERROR",
    "EXIT_UNREACHABLE",
    "EXIT_TIMEOUT",
)

#: What ``list --url`` and ``call --url`` say without httpx.
HTTP_EXTRA_MISSING: Final = f"--url needs httpx: {MissingExtra.install('http')}"

#: Methods ``call`` takes as its first word (any other word with a slash is sent as a method too).
METHODS: Final = (
    "tools/call",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "ping",
    "server/discover",
)

EXIT_OK: Final = 0
EXIT_TOOL_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_RPC_ERROR: Final = 3
EXIT_UNREACHABLE: Final = 4
EXIT_TIMEOUT: Final = 5


class Progress:
    """A running call's progress and log messages on stderr: on a terminal a bar redrawn in place (log lines are
    printed above it), otherwise one line per update."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = self.stream.isatty()
        self._bar = ""
        encoding = (getattr(self.stream, "encoding", "") or "").lower().replace("-", "")
        self._cells = ("█", "░") if encoding == "utf8" else ("#", "-")

    def update(self, progress: float, total: float | None, message: str | None) -> None:
        if self.terminal:
            self._bar = self._render(progress, total, message)
            self.stream.write("\r\x1b[K" + self._bar)
        elif not progress and not total and message:  # (a message alone: a task's statusMessage, say)
            self.stream.write(f"progress: {message}\n")
        else:
            amount = f"{progress:g}/{total:g}" if total else f"{progress:g}"
            self.stream.write(f"progress: {amount}{f' {message}' if message else ''}\n")
        self.stream.flush()

    def _render(self, progress: float, total: float | None, message: str | None) -> str:
        columns = shutil.get_terminal_size((80, 24)).columns
        note = f"  {message}" if message else ""
        if total:
            share = max(0.0, min(1.0, progress / total))
            width = 24
            done = round(share * width)
            line = f"[{self._cells[0] * done}{self._cells[1] * (width - done)}] {share:4.0%}{note}"
        elif not progress and message:
            line = f"[…] {message}"
        else:
            line = f"[{progress:g}]{note}"
        return line[: columns - 1]

    def log(self, level: str, logger: str | None, data: Any) -> None:
        shown = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        line = f"[{level}] {f'{logger}: ' if logger else ''}{shown}\n"
        if self.terminal and self._bar:
            self.stream.write("\r\x1b[K" + line + self._bar)
        else:
            self.stream.write(line)
        self.stream.flush()

    def done(self) -> None:
        if self.terminal and self._bar:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        self._bar = ""


def run(args: argparse.Namespace, command: list[str], words: list[str]) -> int:
    """Run ``list`` or ``call`` (``words``: what follows the command name, before ``--``) and return the exit
    status."""
    return anyio.run(_run, args, command, words)


async def _run(args: argparse.Namespace, command: list[str], words: list[str]) -> int:
    if args.command == "list" and words and not command:
        command, words = words, []  # list COMMAND...: the -- is optional when nothing else follows
    if args.command == "call":
        if not command and any(word in METHODS for word in words[1:]):
            command, words = _old_style(words)  # call COMMAND... METHOD ...: the older order, without --
        elif not words and command:
            command, words = _old_style(command)  # call -- COMMAND... METHOD ...
        if not words:
            raise text.UsageError("give a tool name (or a METHOD), e.g. call add a=1 b=2")
    if (args.env or args.inherit_env) and (args.url or args.tcp or args.unix or not command):
        raise text.UsageError("--env and --inherit-env go with -- COMMAND... (a server this command starts)")
    progress = Progress()
    try:
        with anyio.fail_after(args.timeout) as args.deadline:  # authorization's time in the browser is not counted
            async with _connect(args, command, progress) as client:
                if args.command == "list":
                    return _print_listing(args, await _list_everything(client))
                return await _call(args, client, words, progress)
    except RpcError as exc:
        if exc.local:  # (made here, never by the server: the connection went away or was never authorized, no answer)
            _say(exc.message + exit_hint(command, exc.message))
            return EXIT_TIMEOUT if isinstance(exc, RequestTimeout) else EXIT_UNREACHABLE
        if args.json:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:  # as on the wire: an error without data has no "data" key
                error["data"] = exc.data
            _print({"error": error})
        else:
            data = f" {json.dumps(exc.data, ensure_ascii=False)}" if exc.data is not None else ""
            _say(f"the server answered with error {exc.code}: {exc.message}{data}")
        return EXIT_RPC_ERROR
    except TimeoutError:
        _say(f"no answer within {args.timeout:g} s (--timeout SECONDS waits longer)")
        return EXIT_TIMEOUT
    except (ServerUnreachable, MissingExtra) as exc:
        _say(str(exc))
        return EXIT_UNREACHABLE
    except OSError as exc:  # a program that cannot be started
        _say(start_failure(command, exc))
        return EXIT_UNREACHABLE
    finally:
        progress.done()


def _old_style(command: list[str]) -> tuple[list[str], list[str]]:
    """``call -- COMMAND... METHOD [NAME] [ARGS]``, the older order: the first known method word ends the command."""
    for i, word in enumerate(command):
        if word in METHODS:
            return command[:i], command[i:]
    return command, []


@asynccontextmanager
async def _connect(args: argparse.Namespace, command: list[str], progress: Progress) -> AsyncIterator[Any]:
    from .client import Client

    def on_log(params: Any) -> None:
        progress.log(params.level, params.logger if isinstance(params.logger, str) else None, params.data)

    options: dict[str, Any] = {"on_log": on_log}
    if getattr(args, "task", False):
        from .mcp.task_client import ClientTasks

        options["extensions"] = [ClientTasks()]
    if args.tcp:
        if getattr(args, "tls", False):
            import ssl

            options["ssl_context"] = ssl.create_default_context()
        async with Client.connect_tcp(*args.tcp, **options) as client:
            yield client
    elif args.unix:
        async with Client.connect_unix(args.unix, **options) as client:
            yield client
    elif args.url:
        from .auth.oauth_cli import oauth_from_arguments

        try:
            auth = oauth_from_arguments(args)
        except ImportError:  # jsonrpc_mcp.auth without httpx
            raise MissingExtra(HTTP_EXTRA_MISSING) from None
        async with Client.connect_http(args.url, headers=dict(args.header or ()), auth=auth, **options) as client:
            yield client
    elif command:
        environment = {"env": dict(args.env or ()), "inherit_env": args.inherit_env}
        # (one request and out: a server started again after it exited would only be stopped)
        async with Client.connect_stdio(command, **environment, restart=False, **options) as client:
            yield client
    else:
        raise text.UsageError("give --url URL, --tcp HOST:PORT, --unix PATH or -- COMMAND... (a stdio server)")


def exit_hint(command: list[str], message: str) -> str:
    """A hint for a program that ended without a word of MCP (exit status 0): it does not serve on stdio."""
    if not command or "exited with status 0 before answering" not in message:
        return ""
    files = [word for word in command[1:] if word.endswith(".py")]
    if files and "serve" not in command:
        return f" (it does not serve MCP on stdio; a file that defines a Server: -- jsonrpc-mcp serve {files[0]})"
    return " (it does not serve MCP on stdio)"


def _say(message: str) -> None:
    sys.stderr.write(f"jsonrpc-mcp: {message}\n")
    sys.stderr.flush()


def _print(value: Any) -> None:
    sys.stdout.write(json.dumps(msgspec.to_builtins(value), indent=2, ensure_ascii=False) + "\n")


def _print_listing(args: argparse.Namespace, found: dict[str, Any]) -> int:
    if args.json:
        _print(found)
    else:
        width = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
        sys.stdout.write(text.listing(msgspec.to_builtins(found), width) + "\n")
    return EXIT_OK


async def _list_everything(client: Any) -> dict[str, Any]:
    caps = client.server_capabilities
    out: dict[str, Any] = {"serverInfo": client.server_info, "protocolVersion": client.protocol_version}
    if client.instructions:
        out["instructions"] = client.instructions
    if caps.tools is not msgspec.UNSET:
        out["tools"] = await client.list_tools()
    if caps.resources is not msgspec.UNSET:
        out["resources"] = await client.list_resources()
        out["resourceTemplates"] = await client.list_resource_templates()
    if caps.prompts is not msgspec.UNSET:
        out["prompts"] = await client.list_prompts()
    return out


async def _call(args: argparse.Namespace, client: Any, words: list[str], progress: Progress) -> int:
    first, *more = words
    if first not in METHODS and "/" not in first:  # a tool name: the method word is optional for tools
        first, more = "tools/call", words
    method = first
    await _ask_for_logs(args, client)
    if method == "ping":
        await client.ping()  # the stateless era has no ping: the client knows what stands in for it
        return _show(args, method, {})
    params: dict[str, Any] = {}
    if method in ("tools/call", "prompts/get"):
        if not more:
            raise text.UsageError(f"{method} needs a NAME")
        name, rest = more[0], more[1:]
        params["name"] = name
        if method == "prompts/get":
            if rest:
                params["arguments"] = text.prompt_arguments(rest)
        else:
            params["arguments"] = await _tool_arguments(client, name, rest)
    elif method == "resources/read":
        if len(more) != 1:
            raise text.UsageError("resources/read needs one URI")
        params["uri"] = more[0]
    elif more:
        if len(more) != 1:
            raise text.UsageError(f"{method} takes its params as one JSON object")
        params = text.arguments_from_words(more, None, method)
    if method == "tools/call" and (args.task or await client.tool_requires_task(params["name"])):
        return await _call_as_task(args, client, params, progress)
    try:
        value = await client.request(method, params or None, dict, progress=progress.update, timeout=None)
    except InvalidParams:
        if method == "tools/call" and not args.json:  # an unknown tool is -32602 too: say so, as for key=value
            names = [tool.name for tool in await client.list_tools()]
            if params["name"] not in names:
                raise _no_such_tool(params["name"], names) from None
        raise
    progress.done()
    return _show(args, method, value)


async def _call_as_task(args: argparse.Namespace, client: Any, params: dict[str, Any], progress: Progress) -> int:
    """``call --task``: the tool as a task (when the server makes it one), followed to its end with its progress
    on stderr; interrupted (Ctrl-C, --timeout), the task is cancelled."""
    from .mcp.task_client import TaskCancelled

    handle = await client.start_tool_task(params["name"], params["arguments"])
    if handle.task_id is not None:
        _say(f"task {handle.task_id} is {handle.status}")
    try:
        value = await handle.outcome(progress=progress.update)
    except TaskCancelled as exc:
        progress.done()
        _say(str(exc))
        return EXIT_RPC_ERROR
    except BaseException:
        if not handle.done:
            await handle.abandon()
        raise
    progress.done()
    return _show(args, "tools/call", value)


async def _ask_for_logs(args: argparse.Namespace, client: Any) -> None:
    """Log messages while the call runs: at ``--log-level``, or ``info`` from a server that declares logging. A
    server that refuses ``logging/setLevel`` (some that declare logging do) gets its call all the same, with one
    warning on stderr."""
    declared = client.server_capabilities.logging is not msgspec.UNSET
    level = args.log_level if args.log_level is not None else "info" if declared else None
    if level is None:
        return
    try:
        await client.set_logging_level(level, even_if_undeclared=args.log_level is not None)
    except RpcError as exc:
        if exc.local:
            raise
        _say(f"warning: the server refused logging/setLevel {level} (error {exc.code}: {exc.message}); calling anyway")


async def _tool_arguments(client: Any, name: str, words: list[str]) -> dict[str, Any]:
    if not words:
        return {}
    if len(words) == 1 and words[0].lstrip().startswith("{"):
        return text.arguments_from_words(words, None, name)
    schema = await _input_schema(client, name)
    return text.arguments_from_words(words, schema, name)


async def _input_schema(client: Any, name: str) -> dict[str, Any] | None:
    """The tool's ``inputSchema`` (from ``tools/list``), to type its ``key=value`` arguments."""
    tools = await client.list_tools()
    for tool in tools:
        if tool.name == name:
            schema: dict[str, Any] = tool.input_schema
            return schema
    raise _no_such_tool(name, [tool.name for tool in tools])


def _no_such_tool(name: str, names: list[str]) -> text.UsageError:
    """A tool name the server does not know: its tools, and the nearest one if a name is close."""
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    guess = f"did you mean {near[0]!r}? " if near else ""
    listed = ", ".join(sorted(names)) or "none"
    return text.UsageError(f"the server has no tool named {name!r} ({guess}its tools: {listed})")


def _show(args: argparse.Namespace, method: str, value: Any) -> int:
    failed = method == "tools/call" and isinstance(value, dict) and value.get("isError") is True
    if args.json:
        _print(value)
    elif failed:
        blocks = [text.result("tools/call", {"content": [block]}) for block in value.get("content") or ()]
        _say(f"the tool reported an error: {' '.join(blocks) or '(no message)'}")
    else:
        shown = text.result(method, value)
        if shown:
            sys.stdout.write(shown + "\n")
    return EXIT_TOOL_ERROR if failed else EXIT_OK
