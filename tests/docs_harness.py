"""Run the fenced code blocks of the project's markdown, so that what README.md and docs/ show stays true.

Each document runs in a fresh temporary folder (its ``HOME`` too), its blocks in order, so a later block can use
what an earlier one wrote or started. ``python``, ``jsonrpc-mcp``, ``pytest`` and ``uvicorn`` are this
interpreter's. How a block is run depends on its fence and on an HTML comment just before it (readers of the
page do not see those):

``python`` whose first line names a file (``# server.py``)
    is written to that file, then imported once (not as ``__main__``) to check that it loads.
``python`` (any other)
    is run as a program, ``python BLOCK``, and must exit with status 0.
``sh`` / ``bash`` / ``shell``
    each command (``\\``-continued lines join) is run by bash and must exit with status 0. A command that
    listens (``--http HOST:PORT``, ``--tcp HOST:PORT``, ``--unix PATH`` or ``--port N`` on a ``serve``,
    ``uvicorn`` or ``hypercorn`` command, or any command ending with ``&`` that names an address) is started in
    the background, waited for until its address accepts a connection, and stopped (SIGINT) when the document
    ends. A stdio server (``jsonrpc-mcp serve server.py``) reads an empty stdin and exits.
``console``
    ``$ COMMAND`` lines run like ``sh``; the lines under a command are its expected output (stdout and stderr).
``json`` / ``toml``
    must parse; a ``toml`` block whose first line names a file is written to it.
``text``
    is not run: output, wire frames, sketches.

Loopback ports a document names (``127.0.0.1:8000``, ``localhost:8000``, ``--port 8000``) are replaced by free
ports, the same replacement throughout the document, so documents and other programs never collide.

Comments before a block:

``<!-- not-run: REASON -->``
    the block is not run (say why: it installs software, runs the test suite itself, is a fragment...).
``<!-- not-imported: REASON -->``
    before a file block: the file is written and compiled, but not imported (it needs what the commands that
    run it provide, an environment variable say).
``<!-- output -->``
    before a ``text`` block: the expected output of the block just before it (a python program, or an ``sh``
    block's commands). In expected output a line ``...`` stands for any lines, and ``...`` within a line for
    any text.
``<!-- cwd: checkout -->``
    run the block in the source checkout instead of the document's folder (commands that read the checkout's
    files: keep them read-only).
``<!-- timeout: SECONDS -->``
    per command or program (default 60).

A block that fits none of these (no language, another language, a fragment that does not run) fails the
document, with the line of its fence and how to mark it.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DEFAULT_TIMEOUT = 60.0

#: Languages whose blocks are read, not run.
TEXT_LANGUAGES = frozenset({"text", "txt"})
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell"})
PYTHON_LANGUAGES = frozenset({"python", "py"})
DIRECTIVES = ("not-run", "not-imported", "output", "cwd", "timeout")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*(?P<name>" + "|".join(DIRECTIVES) + r")\b\s*:?\s*(?P<value>.*?)\s*-->\s*$")
_FILE_LINE = re.compile(r"^#\s*(?P<name>[\w.-]+(?:/[\w.-]+)*\.(?:py|toml))\s*$")
_LOOPBACK_PORT = re.compile(r"(?P<pre>(?:127\.0\.0\.1|localhost)(?::|\", ?|', ?))(?P<port>\d{2,5})\b")
_PORT_OPTION = re.compile(r"(?P<pre>--port[ =])(?P<port>\d{2,5})\b")
_LISTEN_ADDRESS = re.compile(r"--(?:http|tcp)[ =](?P<host>\[[^\]]+\]|[^\s:]+):(?P<port>\d+)")
_LISTEN_UNIX = re.compile(r"--(?:unix|uds)[ =](?P<path>\S+)")
_LISTENERS = re.compile(r"(?:^|[\s/])(?:serve|uvicorn|hypercorn)\b")


class DocError(AssertionError):
    """A block did not run as its document says, or could not be classified."""


@dataclass
class Block:
    """One fenced code block: where it is, its language, its text, and the directives written before it."""

    path: Path
    line: int
    lang: str
    code: str
    directives: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        try:
            shown = self.path.relative_to(ROOT)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}"

    @property
    def file_name(self) -> str | None:
        """The file a ``# name.py`` first line says the block is, if any."""
        first = self.code.split("\n", 1)[0]
        match = _FILE_LINE.match(first)
        return match.group("name") if match else None


def documents() -> list[Path]:
    """README.md, CONTRIBUTING.md and SECURITY.md, and every markdown file under docs/, in a stable order."""
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").rglob("*.md"))]


def parse_blocks(text: str, path: Path) -> list[Block]:
    """The fenced blocks of a markdown text, with the directives in the HTML comments just before each."""
    lines = text.split("\n")
    blocks: list[Block] = []
    pending: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        if directive:
            pending[directive.group("name")] = directive.group("value")
            i += 1
            continue
        opening = _FENCE.match(line)
        if opening is None:
            if line.strip():
                pending = {}
            i += 1
            continue
        fence, indent = opening.group("fence"), len(opening.group("indent"))
        lang = opening.group("info").split()[0].lower() if opening.group("info") else ""
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            if _closes(lines[j], fence):
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        else:
            raise DocError(f"{path}:{i + 1}: a code fence that is never closed")
        blocks.append(Block(path, i + 1, lang, "\n".join(body) + "\n", pending))
        pending = {}
        i = j + 1
    return blocks


def _closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes a block opened by ``fence``: the same character, at least as many, no info."""
    closing = _FENCE.match(line)
    if closing is None or closing.group("info"):
        return False
    return closing.group("fence")[0] == fence[0] and len(closing.group("fence")) >= len(fence)


def classify(block: Block) -> str:
    """What the harness does with a block: ``skip``, ``python-file``, ``python``, ``sh``, ``console``,
    ``json``, ``toml``, ``output``; or a :class:`DocError` saying how to mark it."""
    if "not-run" in block.directives:
        if not block.directives["not-run"]:
            raise DocError(f"{block.where}: <!-- not-run: REASON --> needs a reason")
        return "skip"
    if "output" in block.directives:
        if block.lang not in TEXT_LANGUAGES:
            raise DocError(f"{block.where}: <!-- output --> goes before a ```text block, not ```{block.lang}")
        return "output"
    if block.lang in TEXT_LANGUAGES:
        return "skip"
    if block.lang in PYTHON_LANGUAGES:
        return "python-file" if block.file_name else "python"
    if block.lang in SHELL_LANGUAGES:
        return "sh"
    if block.lang in ("console", "json", "toml"):
        return block.lang
    fence = f"```{block.lang}" if block.lang else "a fence without a language"
    raise DocError(
        f"{block.where}: {fence} is not run by the docs harness: write ```python, ```sh or ```console if it "
        "runs, ```text if it is output, or put <!-- not-run: REASON --> before it"
    )


def match_output(expected: str, actual: str) -> bool:
    """Whether ``actual`` is what ``expected`` shows: ``...`` alone on a line stands for any lines, ``...``
    within a line for any text; trailing spaces and blank lines at either end do not count."""

    def tidy(text: str) -> list[str]:
        return [line.rstrip() for line in text.strip("\n").split("\n")] if text.strip() else []

    pattern = []
    for line in tidy(expected):
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(".*?".join(re.escape(part) for part in line.split("...")) + r"\n")
    return re.fullmatch("".join(pattern), "".join(line + "\n" for line in tidy(actual)), re.DOTALL) is not None


def output_difference(expected: str, actual: str) -> str:
    """What a page shows against what was printed, as a unified diff (``...`` lines of the page stay in it)."""
    diff = difflib.unified_diff(
        expected.strip("\n").split("\n"),
        actual.strip("\n").split("\n"),
        "the page shows",
        "it printed",
        lineterm="",
    )
    return "\n".join(diff)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PortMap:
    """The free port standing in for each loopback port a document names, the same one throughout it."""

    def __init__(self) -> None:
        self.ports: dict[str, str] = {}

    def apply(self, text: str) -> str:
        def swap(match: re.Match[str]) -> str:
            port = self.ports.setdefault(match.group("port"), str(free_port()))
            return match.group("pre") + port

        return _PORT_OPTION.sub(swap, _LOOPBACK_PORT.sub(swap, text))


@dataclass
class Background:
    """A listening command started by a block, stopped when its document ends."""

    command: str
    proc: subprocess.Popen[bytes]
    log: Path
    where: str
    cwd: Path
    expected: str | None = None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def shell_commands(code: str) -> list[str]:
    """The commands of an ``sh`` block: ``\\``-continued lines joined, blank and comment-only lines dropped."""
    commands: list[str] = []
    current = ""
    for line in code.split("\n"):
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        if current.strip() and not current.lstrip().startswith("#"):
            commands.append(current.strip())
        current = ""
    return commands


def console_commands(code: str) -> list[tuple[str, str]]:
    """The ``$ COMMAND`` lines of a ``console`` block (``\\``-continued lines joined), each with the output lines
    under it."""
    pairs: list[tuple[str, list[str]]] = []
    continued = False
    for line in code.rstrip("\n").split("\n"):
        if continued:
            command, output = pairs[-1]
            pairs[-1] = (command[:-1].rstrip() + " " + line.strip(), output)
        elif line.startswith("$ "):
            pairs.append((line[2:].strip(), []))
        elif pairs:
            pairs[-1][1].append(line)
        elif line.strip():
            raise DocError(f"a console block starts with {line!r}, not with a '$ COMMAND' line")
        continued = bool(pairs) and not pairs[-1][1] and pairs[-1][0].endswith("\\")
    return [(command, "\n".join(output)) for command, output in pairs]


def without_comment(command: str) -> str:
    """A shell command without its trailing ``# comment`` (a ``#`` inside quotes or a word is kept)."""
    quote = ""
    for i, char in enumerate(command):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command.rstrip()


def listen_address(command: str) -> tuple[str, int] | str | None:
    """Where a command that serves will listen: (host, port), a Unix socket path, or None if it does not."""
    command = without_comment(command)
    background = command.endswith("&")
    if not background and not _LISTENERS.search(command):
        return None
    address = _LISTEN_ADDRESS.search(command)
    if address:
        return address.group("host").strip("[]"), int(address.group("port"))
    unix = _LISTEN_UNIX.search(command)
    if unix:
        return unix.group("path")
    port = _PORT_OPTION.search(command)
    if port:
        return "127.0.0.1", int(port.group("port"))
    if background:
        raise DocError(f"a background command must name the address it listens on: {command}")
    return None


class DocumentRun:
    """Runs the blocks of one markdown document, in order, in a temporary folder of its own."""

    def __init__(self, path: Path, workdir: Path) -> None:
        self.path = path
        self.workdir = workdir
        self.ports = PortMap()
        self.background: list[Background] = []
        self.last_output: tuple[Block, str] | None = None
        self.env = dict(os.environ)
        self.env.pop("KNOWLEDGE_DB", None)
        self.env.update(
            PATH=f"{BIN}{os.pathsep}{self.env.get('PATH', '')}",
            HOME=str(workdir),
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONUNBUFFERED="1",  # a program's stdout and stderr interleave as they would on a terminal
            NO_COLOR="1",
            COLUMNS="100",
        )

    def run(self) -> int:
        """Run every block; return how many ran. Raises :class:`DocError` at the first that fails."""
        blocks = parse_blocks(self.path.read_text(), self.path)
        kinds = [(block, classify(block)) for block in blocks]  # every block is classified before any runs
        ran = 0
        try:
            for block, kind in kinds:
                if kind == "skip":
                    self.last_output = None
                    continue
                getattr(self, "_run_" + kind.replace("-", "_"))(block)
                ran += 1
            for server in self.background:
                self._check_background_output(server)
        finally:
            for server in self.background:
                server.stop()
        return ran

    # -- the kinds of block ------------------------------------------------------------------------------------

    def _run_python_file(self, block: Block) -> None:
        name = block.file_name
        assert name is not None
        target = self.workdir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.ports.apply(block.code))
        if "not-imported" in block.directives:
            if not block.directives["not-imported"]:
                raise DocError(f"{block.where}: <!-- not-imported: REASON --> needs a reason")
            check = f"import sys; compile(open({name!r}).read(), {name!r}, 'exec')"
            self._expect_success(block, [sys.executable, "-c", check], f"compiling {name}")
        else:
            check = f"import runpy, sys; sys.path.insert(0, '.'); runpy.run_path({name!r}, run_name='__docs_check__')"
            self._expect_success(block, [sys.executable, "-c", check], f"importing {name}")
        self.last_output = None

    def _run_python(self, block: Block) -> None:
        script = self.workdir / f".block_{block.line}.py"
        script.write_text(self.ports.apply(block.code))
        output = self._expect_success(block, [sys.executable, script.name], "the program")
        self.last_output = (block, output)

    def _run_sh(self, block: Block) -> None:
        outputs = [self._shell(block, command) for command in shell_commands(self.ports.apply(block.code))]
        self.last_output = (block, "".join(outputs))

    def _run_console(self, block: Block) -> None:
        try:
            pairs = console_commands(self.ports.apply(block.code))
        except DocError as exc:
            raise DocError(f"{block.where}: {exc}") from None
        for command, expected in pairs:
            if listen_address(command) is not None:
                self._shell(block, command)
                self.background[-1].expected = expected if expected.strip() else None
                continue
            actual = self._shell(block, command)
            if not match_output(expected, actual):
                raise DocError(f"{block.where}: $ {command}\n{output_difference(expected, actual)}")
        self.last_output = None

    def _run_json(self, block: Block) -> None:
        try:
            json.loads(block.code)
        except json.JSONDecodeError as exc:
            raise DocError(f"{block.where}: not JSON ({exc})") from None
        self.last_output = None

    def _run_toml(self, block: Block) -> None:
        try:
            tomllib.loads(block.code)
        except tomllib.TOMLDecodeError as exc:
            raise DocError(f"{block.where}: not TOML ({exc})") from None
        if block.file_name:
            (self.workdir / block.file_name).write_text(block.code)
        self.last_output = None

    def _run_output(self, block: Block) -> None:
        if self.last_output is None:
            raise DocError(f"{block.where}: <!-- output --> must follow a python program or an sh block")
        source, actual = self.last_output
        expected = self.ports.apply(block.code)
        if not match_output(expected, actual):
            raise DocError(
                f"{block.where}: the output of {source.where} differs\n{output_difference(expected, actual)}"
            )
        self.last_output = None

    # -- running ----------------------------------------------------------------------------------------------

    def _cwd(self, block: Block) -> Path:
        where = block.directives.get("cwd")
        if where is None:
            return self.workdir
        if where != "checkout":
            raise DocError(f"{block.where}: <!-- cwd: {where} -->: the only other folder is 'checkout'")
        return ROOT

    def _timeout(self, block: Block) -> float:
        value = block.directives.get("timeout")
        return float(value) if value else DEFAULT_TIMEOUT

    def _expect_success(self, block: Block, argv: list[str], what: str) -> str:
        try:
            done = subprocess.run(
                argv,
                cwd=self._cwd(block),
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=self._timeout(block),
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            shown = (exc.output or b"").decode(errors="replace")
            raise DocError(f"{block.where}: {what} did not finish in {exc.timeout} s\n{shown}") from None
        output = done.stdout.decode(errors="replace")
        if done.returncode != 0:
            raise DocError(f"{block.where}: {what} exited with status {done.returncode}\n{output}")
        return output

    def _shell(self, block: Block, command: str) -> str:
        """Run one shell command (or start it, if it listens); its output."""
        if command.startswith(("cd ", "export ")):
            raise DocError(
                f"{block.where}: each command runs in its own shell, so {command.split()[0]!r} would not last"
            )
        address = listen_address(command)
        if address is None:
            return self._expect_success(block, ["bash", "-o", "pipefail", "-c", command], f"`{command}`")
        self._start(block, without_comment(command).rstrip("&").rstrip(), address)
        return ""

    def _start(self, block: Block, command: str, address: tuple[str, int] | str) -> None:
        for running in self.background:
            if running.proc.poll() is None and listen_address(running.command) == address:
                running.stop()  # the document serves on that address again: the new command replaces the old
        log = self.workdir / f".server_{len(self.background)}.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                ["bash", "-c", command],
                cwd=self._cwd(block),
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: SIGINT reaches the server, not us
            )
        server = Background(command, proc, log, block.where, self._cwd(block))
        self.background.append(server)
        self._wait_listening(server, address, self._timeout(block))

    def _wait_listening(self, server: Background, address: tuple[str, int] | str, timeout: float) -> None:
        """Until ``address`` accepts a connection. The server is another program with no readiness signal of
        its own, so this tries to connect and, between tries, waits briefly for the process to exit."""
        deadline = time.monotonic() + timeout
        while not _connects(address, server.cwd):
            try:
                code = server.proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                if time.monotonic() < deadline:
                    continue
                raise DocError(
                    f"{server.where}: `{server.command}` did not listen on {address} in {timeout} s\n{server.output()}"
                ) from None
            raise DocError(f"{server.where}: `{server.command}` exited with status {code}\n{server.output()}")

    def _check_background_output(self, server: Background) -> None:
        if server.expected is None:
            return
        server.stop()
        if not match_output(server.expected, server.output()):
            raise DocError(f"{server.where}: $ {server.command}\n{output_difference(server.expected, server.output())}")


def _connects(address: tuple[str, int] | str, cwd: Path) -> bool:
    try:
        if isinstance(address, str):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(cwd / address))
        else:
            socket.create_connection(address, timeout=5).close()
    except OSError:
        return False
    return True


def run_document(path: Path) -> int:
    """Run one document's blocks in a fresh temporary folder; how many ran."""
    with tempfile.TemporaryDirectory(prefix="docs-") as workdir:
        return DocumentRun(path, Path(workdir)).run()
