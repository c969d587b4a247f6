"""Golden wire transcripts: parse them, replay them against any MCP server, compare, report (L7).

A transcript (``jsonrpc_mcp/transcripts/*.txt``, shipped in the package) pins one family of spec rules as raw
frames. Its format::

    # rule: Bytes that are not JSON get -32700 without an id; the connection survives
    # spec: schema/2025-11-25 JSONRPCErrorResponse (id optional); docs/spec-decisions.md #2
    # revision: all
    # level: must                              (must | should | choice — choice: the spec is silent, we chose)
    # needs: tool:test_simple_text             (tool:NAME prompt:NAME resource:URI capability:NAME)

    === session: initialize 2025-11-25         (or: initialize REV {"sampling":{}} | stateless 2026-07-28 | raw)

    --- case: truncated
    # rule: a frame cut short is a parse error
    >>> {"jsonrpc":"2.0","id":1,"method":
    <<< {"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: invalid JSON"}}

Each ``=== session`` is a fresh connection (a new process on stdio, a new HTTP session). ``initialize REV``
performs the handshake first (not compared); ``stateless REV`` sends nothing first; ``raw`` sends nothing first
either and is a handshake-era connection whose cases write their own ``initialize``.

``>>>`` lines are client frames, sent byte for byte (``>>>esc`` lines may hold ``\\xNN`` escapes for bytes that
are not UTF-8); ``$SERVER_REQUEST_ID`` in them stands for the id of the last request the server sent. ``<<<``
lines are the server frames the ``>>>`` lines before them must produce, in order; ``<<< (silence)`` means none.
A case may alternate several ``>>>``/``<<<`` groups (an *exchange* each).

Silence is observed without sleeping: after an exchange's frames the runner sends a *sentinel* (``ping``, or
``server/discover`` in the stateless era) with a fresh id; what arrives before the sentinel's reply is what the
frames produced. Replies that come later (a slow tool) are waited for by the keys the expectation names.

Two comparison modes: ``exact`` (bytes, for our own golden files) and ``semantic`` (parsed JSON: ids exact
with their type, error codes exact, messages and ``data`` ignored unless a case says ``# compare: error.data.uri``,
server identity and capabilities ignored, extra keys in results allowed), for ``jsonrpc-mcp check``.

Other case directives: ``# ignore: PATH`` (semantic mode), ``# mask: KEY`` (a value that changes every run becomes
``"***"``), ``# transport: stdio`` (a rule of one transport), ``# timeout: SECONDS``. The whole story, and what the
official SDK does with the same frames, is in ``docs/conformance.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import anyio
import anyio.abc

from ._cli_help import HELP_WIDTH, HelpFormatter, help_width, section
from ._version import __version__
from .errors import MissingExtra
from .jsonrpc.streams import NOTIFICATION, Outgoing
from .mcp._groups import unwrap_group
from .mcp.versions import (
    HANDSHAKE_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    STATELESS_VERSIONS,
)

__all__ = (
    "Transcript",
    "Session",
    "Case",
    "Exchange",
    "Observation",
    "Timing",
    "CaseResult",
    "RuleResult",
    "Offer",
    "Target",
    "StdioTarget",
    "HttpTarget",
    "ServerTarget",
    "parse_transcript",
    "load_transcripts",
    "default_transcript_dir",
    "replay",
    "observe",
    "compare",
    "probe",
    "rewrite",
    "run_check",
    "header_pair",
    "http_url",
    "Unreachable",
    "CHECK_EPILOG",
    "check_epilog",
    "env_pair",
    "add_environment_arguments",
    "main",
    "TranscriptError",
    "Channel",
    "frame_key",
    "apply_masks",
    "judge",
    "summarize",
    "format_report",
    "report_json",
    "add_check_arguments",
    "run_check_command",
)

logger = logging.getLogger(__name__)

Mode = Literal["exact", "semantic"]
Status = Literal["pass", "fail", "differs", "skip"]
Level = Literal["must", "should", "choice"]

SILENCE: Final = "(silence)"
SERVER_REQUEST_ID: Final = "$SERVER_REQUEST_ID"
DEFAULT_TIMEOUT: Final = 10.0
DEFAULT_GRACE: Final = 2.0
DEFAULT_STARTUP: Final = 30.0
LINGER: Final = 0.5
_LEVELS: Final = ("must", "should", "choice")
_ESCAPE: Final = re.compile(rb"\\x([0-9a-fA-F]{2})")
_IDENT: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

#: Paths the semantic mode ignores unless a case names them (or something under them) in ``# compare:``.
DEFAULT_IGNORE: Final = (
    "error.message",
    "error.data",
    "result.serverInfo",
    "result.capabilities",
    "result.instructions",
    "result._meta",
    "result.ttlMs",
    "result.cacheScope",
)


@dataclass(frozen=True)
class Timing:
    """How long to wait. ``timeout``: for the sentinel's reply after an exchange's frames; ``grace``: after it, for
    replies the expectation still names (slow tools); ``startup``: for the first reply on a fresh connection."""

    timeout: float = DEFAULT_TIMEOUT
    grace: float = DEFAULT_GRACE
    startup: float = DEFAULT_STARTUP


class TranscriptError(ValueError):
    """A transcript file does not follow the format."""


# --- the format ---------------------------------------------------------------------------------------------


@dataclass
class Exchange:
    """Frames to send, then the frames they must produce (``[]``: silence)."""

    send: list[bytes]
    expect: list[bytes]
    #: Line span (start, stop) of the ``<<<`` lines in the file, for rewriting; stop is exclusive.
    span: tuple[int, int] = (0, 0)


@dataclass
class Case:
    name: str
    rule: str
    exchanges: list[Exchange]
    needs: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    compare: list[str] = field(default_factory=list)
    mask: list[str] = field(default_factory=list)
    level: Level = "must"
    timeout: float | None = None
    level_set: bool = False
    #: Transports the case applies to (``stdio``, ``http``); empty: all.
    transports: list[str] = field(default_factory=list)


@dataclass
class Session:
    kind: Literal["initialize", "stateless", "raw"]
    revision: str | None
    capabilities: dict[str, Any]
    cases: list[Case]
    line: int = 0

    @property
    def label(self) -> str:
        if self.kind == "raw":
            return "raw"
        return f"{self.kind} {self.revision}"


@dataclass
class Transcript:
    path: Path
    rule: str
    spec: list[str]
    revision: str
    sessions: list[Session]
    needs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    level: Level = "must"

    @property
    def name(self) -> str:
        return self.path.stem

    def cases(self) -> Iterable[tuple[Session, Case]]:
        for session in self.sessions:
            for case in session.cases:
                yield session, case


def _directive(line: str) -> tuple[str, str] | None:
    m = re.match(r"^#\s*([a-z]+):\s?(.*)$", line)
    return (m.group(1), m.group(2).strip()) if m else None


def _frame_text(line: str, lineno: int, path: Path) -> bytes:
    if line.startswith(">>>esc "):
        raw = line[len(">>>esc ") :].encode()
        return _ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), raw)
    if line.startswith(">>> "):
        return line[4:].encode()
    raise TranscriptError(f"{path}:{lineno}: a client frame is '>>> FRAME' or '>>>esc FRAME'")


def _level(value: str, where: str) -> Level:
    if value not in _LEVELS:
        raise TranscriptError(f"{where}: level must be one of {', '.join(_LEVELS)}")
    return value  # type: ignore[return-value]


def _session_line(spec: str, where: str) -> Session:
    words = spec.split(None, 2)
    if not words:
        raise TranscriptError(f"{where}: empty session line")
    kind = words[0]
    if kind == "raw":
        if len(words) > 1:
            raise TranscriptError(f"{where}: a raw session takes no arguments")
        return Session("raw", None, {}, [])
    if kind not in ("initialize", "stateless") or len(words) < 2:
        raise TranscriptError(f"{where}: session is 'initialize REV [CAPS]', 'stateless REV [CAPS]' or 'raw'")
    revision = words[1]
    known = HANDSHAKE_VERSIONS if kind == "initialize" else STATELESS_VERSIONS
    if revision not in known:
        raise TranscriptError(f"{where}: {kind} sessions speak one of {', '.join(known)}, not {revision}")
    caps: dict[str, Any] = {}
    if len(words) == 3:
        try:
            loaded = json.loads(words[2])
        except json.JSONDecodeError as exc:
            raise TranscriptError(f"{where}: client capabilities are not JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise TranscriptError(f"{where}: client capabilities must be an object")
        caps = loaded
    return Session(kind, revision, caps, [])  # type: ignore[arg-type]


def parse_transcript(path: Path, text: str | None = None) -> Transcript:
    """Parse one transcript file (``text`` overrides reading it)."""
    if text is None:
        text = path.read_text(encoding="utf-8")
    header: dict[str, list[str]] = {}
    sessions: list[Session] = []
    session: Session | None = None
    case: Case | None = None
    last: Literal["none", "send", "expect"] = "none"
    names: set[str] = set()
    for index, line in enumerate(text.split("\n")):
        lineno = index + 1
        where = f"{path.name}:{lineno}"
        line = line.rstrip("\r")
        if line.startswith("=== session:"):
            session = _session_line(line[len("=== session:") :].strip(), where)
            session.line = lineno
            sessions.append(session)
            case, last = None, "none"
            continue
        if line.startswith("--- case:"):
            if session is None:
                raise TranscriptError(f"{where}: a case must follow an '=== session:' line")
            name = line[len("--- case:") :].strip()
            if not _IDENT.match(name) or name in names:
                raise TranscriptError(f"{where}: case names are unique identifiers, got {name!r}")
            names.add(name)
            case = Case(name, "", [])
            session.cases.append(case)
            last = "none"
            continue
        if line.startswith(">>>"):
            if case is None:
                raise TranscriptError(f"{where}: a frame must be inside a '--- case:'")
            frame = _frame_text(line, lineno, path)
            if last != "send":
                case.exchanges.append(Exchange([], []))
            case.exchanges[-1].send.append(frame)
            last = "send"
            continue
        if line.startswith("<<<"):
            if case is None or last == "none":
                raise TranscriptError(f"{where}: expected frames must follow '>>>' lines")
            if not line.startswith("<<< "):
                raise TranscriptError(f"{where}: an expected frame is '<<< FRAME' or '<<< (silence)'")
            ex = case.exchanges[-1]
            body = line[4:]
            if last == "send":
                ex.span = (index, index + 1)
            elif ex.span[1] != index:
                raise TranscriptError(f"{where}: the '<<<' lines of one exchange must be contiguous")
            else:
                ex.span = (ex.span[0], index + 1)
            if body == SILENCE:
                if ex.expect or last == "expect":
                    raise TranscriptError(f"{where}: '(silence)' must be the only expected line")
                ex.expect = []
                ex.span = (ex.span[0], index + 1)
            else:
                if last == "expect" and not ex.expect:
                    raise TranscriptError(f"{where}: '(silence)' must be the only expected line")
                ex.expect.append(body.encode())
            last = "expect"
            continue
        d = _directive(line)
        if d is None:
            if line.strip() and not line.startswith("#"):
                raise TranscriptError(f"{where}: unexpected line {line[:40]!r}")
            continue
        key, value = d
        if case is not None:
            if key == "rule":
                case.rule = value
            elif key == "needs":
                case.needs.extend(value.split())
            elif key == "ignore":
                case.ignore.extend(value.split())
            elif key == "compare":
                case.compare.extend(value.split())
            elif key == "mask":
                case.mask.extend(value.split())
            elif key == "level":
                case.level = _level(value, where)
                case.level_set = True
            elif key == "timeout":
                case.timeout = float(value)
            elif key == "transport":
                case.transports.extend(value.split())
                if not set(case.transports) <= {"stdio", "http"}:
                    raise TranscriptError(f"{where}: transport is stdio and/or http")
            elif key not in ("note", "see"):
                raise TranscriptError(f"{where}: unknown case directive {key!r}")
        elif session is None:
            header.setdefault(key, []).append(value)
        elif key != "note":
            raise TranscriptError(f"{where}: directives go in the header or in a case, not after a session line")
    for required in ("rule", "spec", "revision"):
        if required not in header:
            raise TranscriptError(f"{path.name}: the header needs a '# {required}:' line")
    unknown = set(header) - {"rule", "spec", "revision", "needs", "note", "level"}
    if unknown:
        raise TranscriptError(f"{path.name}: unknown header directive(s) {', '.join(sorted(unknown))}")
    if not sessions or not any(s.cases for s in sessions):
        raise TranscriptError(f"{path.name}: no cases")
    level = _level(header["level"][0], path.name) if "level" in header else "must"
    for s in sessions:
        for c in s.cases:
            if not c.exchanges:
                raise TranscriptError(f"{path.name}: case {c.name} sends nothing")
            if any(ex.span == (0, 0) for ex in c.exchanges):
                raise TranscriptError(f"{path.name}: case {c.name} has '>>>' lines without '<<<' lines after them")
            if not c.rule:
                raise TranscriptError(f"{path.name}: case {c.name} needs a '# rule:' line")
            if not c.level_set:
                c.level = level
    return Transcript(
        path=path,
        rule=header["rule"][0],
        spec=header["spec"],
        revision=header["revision"][0],
        sessions=sessions,
        needs=[w for v in header.get("needs", []) for w in v.split() if w != "-"],
        notes=header.get("note", []),
        level=level,
    )


def default_transcript_dir() -> Path:
    """The transcripts shipped inside the package (``jsonrpc_mcp/transcripts``)."""
    return Path(__file__).resolve().parent / "transcripts"


def load_transcripts(directory: Path | None = None) -> list[Transcript]:
    folder = directory or default_transcript_dir()
    if not folder.is_dir():
        raise FileNotFoundError(f"no transcript folder at {folder} (give --transcripts DIR)")
    return [parse_transcript(p) for p in sorted(folder.glob("*.txt"))]


# --- frames: keys, masks, summaries ---------------------------------------------------------------------


def _loads(frame: bytes) -> Any:
    try:
        return json.loads(frame)
    except (ValueError, UnicodeDecodeError):
        return _NOT_JSON


_NOT_JSON: Final = object()


def frame_key(frame: bytes) -> tuple[str, str]:
    """What a frame is, for waiting and pairing: (kind, id or method)."""
    msg = _loads(frame)
    if isinstance(msg, list):
        return ("batch", "")
    if not isinstance(msg, dict):
        return ("other", "")
    if isinstance(msg.get("method"), str):
        return ("request" if "id" in msg else "notification", msg["method"])
    if "result" in msg or "error" in msg:
        ident = msg.get("id")
        return ("reply", "" if ident is None else json.dumps(ident))
    return ("other", "")


def _reply_id(frame: bytes) -> Any:
    msg = _loads(frame)
    if isinstance(msg, dict) and ("result" in msg or "error" in msg):
        return msg.get("id", _NOT_JSON)
    return _NOT_JSON


def apply_masks(frame: bytes, keys: Sequence[str]) -> bytes:
    """Replace the string value of each JSON key in ``keys`` with ``"***"`` (values that change every run)."""
    for key in keys:
        pattern = re.compile(rb'("' + re.escape(key.encode()) + rb'":)"(?:[^"\\]|\\.)*"')
        frame = pattern.sub(rb'\1"***"', frame)
    return frame


def summarize(frames: Sequence[bytes]) -> str:
    """One line: what these frames are (``silence``, ``error -32602 (id 3)``, ``result (id 1)``...)."""
    if not frames:
        return "silence"
    return ", ".join(_summary(f) for f in frames)


def _summary(frame: bytes) -> str:
    msg = _loads(frame)
    if msg is _NOT_JSON:
        return f"non-JSON {frame[:40]!r}"
    if isinstance(msg, list):
        return "batch [" + ", ".join(_summary(json.dumps(m).encode()) for m in msg) + "]"
    if not isinstance(msg, dict):
        return f"JSON {type(msg).__name__}"
    ident = f"id {json.dumps(msg['id'])}" if "id" in msg else "no id"
    if isinstance(msg.get("method"), str):
        return f"{'request' if 'id' in msg else 'notification'} {msg['method']}"
    if isinstance(msg.get("error"), dict):
        return f"error {msg['error'].get('code')} ({ident})"
    if "result" in msg:
        result = msg["result"]
        extra = " isError" if isinstance(result, dict) and result.get("isError") is True else ""
        return f"result{extra} ({ident})"
    return f"object ({ident})"


# --- comparison ---------------------------------------------------------------------------------------------


def _path_tokens(path: str) -> tuple[str, ...]:
    found = re.finditer(r'\["([^"]*)"\]|\[(\*|\d+)\]|([^.\[\]]+)', path)
    return tuple(m.group(1) if m.group(1) is not None else m.group(2) or m.group(3) for m in found)


def _matches(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    return len(pattern) == len(path) and all(p in ("*", q) for p, q in zip(pattern, path, strict=True))


def _prefix_of(path: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    return len(path) < len(pattern) and all(p in ("*", q) for p, q in zip(pattern, path, strict=False))


class _Rules:
    def __init__(self, ignore: Iterable[str], compare: Iterable[str]) -> None:
        self.ignore = [_path_tokens(p) for p in ignore]
        self.compare = [_path_tokens(p) for p in compare]

    def ignored(self, path: tuple[str, ...], inherited: bool) -> bool:
        if any(_matches(p, path) for p in self.compare):
            return False
        return inherited or any(_matches(p, path) for p in self.ignore)

    def leads_to_compare(self, path: tuple[str, ...]) -> bool:
        return any(_prefix_of(path, p) for p in self.compare)


def _show(path: tuple[str, ...]) -> str:
    out = ""
    for token in path:
        if token.isdigit():
            out += f"[{token}]"
        elif re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", token):
            out += ("." if out else "") + token
        else:
            out += f'["{token}"]'
    return out or "(frame)"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def _subset(exp: Any, act: Any, path: tuple[str, ...], rules: _Rules, inherited: bool) -> str | None:
    ignored = rules.ignored(path, inherited)
    if ignored and not rules.leads_to_compare(path):
        return None
    if isinstance(exp, dict):
        if not isinstance(act, dict):
            return f"{_show(path)}: expected an object, got {_short(act)}"
        for key, value in exp.items():
            child = (*path, key)
            if key not in act:
                if rules.ignored(child, ignored) and not rules.leads_to_compare(child):
                    continue
                return f"{_show(child)} is missing (expected {_short(value)})"
            problem = _subset(value, act[key], child, rules, ignored)
            if problem:
                return problem
        return None
    if ignored:
        return None
    if isinstance(exp, list):
        if not isinstance(act, list):
            return f"{_show(path)}: expected a list, got {_short(act)}"
        if len(exp) != len(act):
            return f"{_show(path)}: expected {len(exp)} item(s), got {len(act)}"
        for i, (e, a) in enumerate(zip(exp, act, strict=True)):
            problem = _subset(e, a, (*path, str(i)), rules, ignored)
            if problem:
                return problem
        return None
    if not _same_scalar(exp, act):
        return f"{_show(path)}: expected {_short(exp)}, got {_short(act)}"
    return None


def _kind(msg: dict[str, Any]) -> str:
    if isinstance(msg.get("method"), str):
        return "request" if "id" in msg else "notification"
    if "error" in msg:
        return "error"
    if "result" in msg:
        return "result"
    return "object"


def _compare_message(exp: Any, act: Any, rules: _Rules) -> str | None:
    if isinstance(exp, list):
        if not isinstance(act, list):
            return f"expected a batch reply (array), got {_summary(json.dumps(act).encode())}"
        return _compare_sets(exp, act, rules, "in the batch: ")
    if not isinstance(exp, dict):
        return None if _same_scalar(exp, act) else f"expected {_short(exp)}, got {_short(act)}"
    if not isinstance(act, dict):
        return f"expected an object, got {_short(act)}"
    ek, ak = _kind(exp), _kind(act)
    if ek != ak:
        return f"expected {_summary(json.dumps(exp).encode())}, got {_summary(json.dumps(act).encode())}"
    if act.get("jsonrpc") != "2.0":
        return f'"jsonrpc" is {_short(act.get("jsonrpc"))}, not "2.0"'
    if ek in ("request", "notification"):
        if exp["method"] != act["method"]:
            return f"expected {ek} {exp['method']}, got {act['method']}"
        return _subset(exp.get("params", {}), act.get("params", {}), ("params",), rules, False)
    # A reply: the id is exact, type included; "no id" and "id": null are not the same thing.
    if "id" not in exp:
        if "id" in act:
            if act["id"] is None:
                return 'the reply has "id": null (no MCP schema admits it; omit "id" when it cannot be read)'
            return f"expected no id, got id {_short(act['id'])}"
    elif "id" not in act or not _same_id(exp["id"], act["id"]):
        return f"expected id {_short(exp['id'])}, got {_short(act.get('id', '(none)'))}"
    if ek == "error":
        e, a = exp["error"], act["error"]
        if not isinstance(a, dict):
            return f'"error" is not an object: {_short(a)}'
        if e.get("code") != a.get("code"):
            return f"expected error {e.get('code')}, got error {a.get('code')} ({_short(a.get('message'))})"
        return _subset(e, a, ("error",), rules, False)
    return _subset(exp["result"], act["result"], ("result",), rules, False)


def _same_id(a: Any, b: Any) -> bool:
    return type(a) is type(b) and bool(a == b)


def _sort_key(msg: Any) -> tuple[str, str]:
    return frame_key(json.dumps(msg).encode())


def _compare_sets(exp: list[Any], act: list[Any], rules: _Rules, what: str) -> str | None:
    if len(exp) != len(act):
        e = summarize([json.dumps(m).encode() for m in exp])
        a = summarize([json.dumps(m).encode() for m in act])
        return f"{what}expected {e}; got {a}"
    for e, a in zip(sorted(exp, key=_sort_key), sorted(act, key=_sort_key), strict=True):
        problem = _compare_message(e, a, rules)
        if problem:
            return problem
    return None


def compare(
    expected: Sequence[bytes],
    got: Sequence[bytes],
    mode: Mode,
    *,
    ignore: Sequence[str] = (),
    compare_paths: Sequence[str] = (),
) -> str | None:
    """``None`` when ``got`` matches ``expected`` under ``mode``, else a one-line reason."""
    if mode == "exact":
        if list(expected) == list(got):
            return None
        if len(expected) != len(got):
            return f"expected {summarize(expected)}; got {summarize(got)}"
        for e, g in zip(expected, got, strict=True):
            if e != g:
                return f"frame differs: expected {e[:300]!r}, got {g[:300]!r}"
        return None
    rules = _Rules((*DEFAULT_IGNORE, *ignore), compare_paths)
    exp = [_loads(f) for f in expected]
    # Log notifications are the server's business, unless the case expects some or names them in # compare:.
    wants_logs = "notifications/message" in compare_paths or any(
        isinstance(m, dict) and m.get("method") == "notifications/message" for m in exp
    )
    act: list[Any] = []
    for frame in got:
        msg = _loads(frame)
        if msg is _NOT_JSON:
            return f"the server wrote a frame that is not JSON: {frame[:80]!r}"
        if not wants_logs and isinstance(msg, dict) and msg.get("method") == "notifications/message":
            continue
        act.append(msg)
    return _compare_sets(exp, act, rules, "")


# --- targets: where frames go -------------------------------------------------------------------------------


class Channel(Protocol):
    """A connection to the server under test, frame by frame."""

    async def send(self, frame: bytes) -> None: ...

    async def send_all(self, frames: Sequence[bytes]) -> None:
        """Send frames back to back (one write where the transport allows: a call and its cancellation then
        reach the server in the same read)."""

    async def receive(self) -> bytes: ...


class Target(Protocol):
    """Something that can open a fresh connection per session."""

    description: str
    kind: str  # "stdio" or "http": cases may be limited to one (# transport: stdio)

    def connect(self, session: Session) -> AbstractAsyncContextManager[Channel]: ...


class _StreamChannel:
    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._buffer: list[bytes] = []

    async def send(self, frame: bytes) -> None:
        await self.send_all([frame])

    async def send_all(self, frames: Sequence[bytes]) -> None:
        await self._stream.send([Outgoing(f, None, NOTIFICATION) for f in frames])

    async def receive(self) -> bytes:
        while not self._buffer:
            self._buffer.extend(await self._stream.receive())
        return self._buffer.pop(0)

    async def why_closed(self) -> str | None:
        """Why the stream ended, when its transport says (a stdio server's exit status)."""
        why_closed = getattr(self._stream, "why_closed", None)
        reason: str | None = await why_closed() if why_closed is not None else None
        return reason


@dataclass
class StdioTarget:
    """A server started as a subprocess, one process per session (NDJSON over its stdin/stdout)."""

    command: Sequence[str]
    stderr: int | None = subprocess.DEVNULL
    description: str = ""
    kind: str = "stdio"
    #: Added to the short default environment the server gets (see :func:`~jsonrpc_mcp.transports.spawn.spawn`).
    env: Mapping[str, str] | None = None
    #: The whole environment of this process instead of the default one (``env`` still added on top).
    inherit_env: bool = False

    def __post_init__(self) -> None:
        if not self.description:
            self.description = "stdio: " + " ".join(self.command)

    @asynccontextmanager
    async def connect(self, session: Session) -> AsyncIterator[Channel]:
        from .transports.connect_errors import start_failure
        from .transports.spawn import spawn

        started = False
        try:
            async with spawn(
                self.command, env=self.env, inherit_env=self.inherit_env, stderr=self.stderr, shutdown_timeout=2.0
            ) as stream:
                started = True
                yield _StreamChannel(stream)
        except OSError as exc:
            if started:
                raise
            raise Unreachable(start_failure(list(self.command), exc)) from None


@dataclass
class ServerTarget:
    """A :class:`~jsonrpc_mcp.Server` in this process, a fresh one per session from ``factory``, over the in-memory
    transport (the frames stdio would carry, without a subprocess): for checking a server in unit tests."""

    factory: Callable[[], Any]
    description: str = "in-process server"
    kind: str = "stdio"

    @asynccontextmanager
    async def connect(self, session: Session) -> AsyncIterator[Channel]:
        from .transports.memory import memory_pair

        server = self.factory()
        ours, theirs = memory_pair(256)
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, theirs)
            try:
                yield _StreamChannel(ours)
            finally:
                tg.cancel_scope.cancel()
                await ours.aclose()
                await theirs.aclose()


@dataclass
class HttpTarget:
    """A Streamable HTTP endpoint; one HTTP session (handshake) or none (stateless) per transcript session.

    Frames are POSTed raw. What a POST produces (a JSON body, or the events of an SSE stream) lands in one queue
    that the runner reads like a stdio channel; ``202`` with no body is silence.
    """

    url: str
    description: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    kind: str = "http"

    def __post_init__(self) -> None:
        if not self.description:
            self.description = "http: " + self.url

    @asynccontextmanager
    async def connect(self, session: Session) -> AsyncIterator[Channel]:
        try:
            import httpx
        except ImportError:  # the http extra is missing
            raise MissingExtra(f"checking an HTTP server needs httpx: {MissingExtra.install('http')}") from None
        timeout = httpx.Timeout(30.0, read=None)
        async with httpx.AsyncClient(timeout=timeout) as client, anyio.create_task_group() as tg:
            channel = _HttpChannel(client, self.url, session, tg, dict(self.headers))
            try:
                yield channel
            finally:
                tg.cancel_scope.cancel()
                await channel.close()


class _HttpChannel:
    def __init__(self, client: Any, url: str, session: Session, tg: anyio.abc.TaskGroup, headers: dict[str, str]):
        self.client = client
        self.url = url
        self.stateless = session.kind == "stateless"
        self.tg = tg
        self.base = headers
        self.session_id: str | None = None
        self.version: str | None = None
        self.send_q, self.recv_q = anyio.create_memory_object_stream[bytes](1024)
        #: Why the server could not be reached, once a POST failed to connect (one line, naming the host).
        self.unreachable: str | None = None

    def _headers(self, frame: bytes) -> dict[str, str]:
        from .mcp.headers import standard_headers

        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **self.base,
        }
        msg = _loads(frame)
        params = msg.get("params") if isinstance(msg, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        modern = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.stateless or isinstance(modern, str):
            # A 2026-07-28 request: the version header mirrors _meta, plus Mcp-Method / Mcp-Name (SEP-2243).
            headers["MCP-Protocol-Version"] = modern if isinstance(modern, str) else STATELESS_VERSIONS[0]
            if isinstance(msg, dict) and isinstance(msg.get("method"), str):
                try:
                    headers.update(standard_headers(msg["method"], params if isinstance(params, dict) else None))
                except (TypeError, ValueError):
                    pass
        elif self.version is not None:
            headers["MCP-Protocol-Version"] = self.version
        return headers

    async def send(self, frame: bytes) -> None:
        started = anyio.Event()
        self.tg.start_soon(self._post, frame, started)
        await started.wait()

    async def send_all(self, frames: Sequence[bytes]) -> None:
        for frame in frames:
            await self.send(frame)

    async def _post(self, frame: bytes, started: anyio.Event) -> None:
        msg = _loads(frame)
        ident = msg.get("id") if isinstance(msg, dict) else None
        sentinel = isinstance(ident, str) and ident.startswith("sentinel-")
        out: list[bytes] = []
        try:
            async with self.client.stream("POST", self.url, content=frame, headers=self._headers(frame)) as resp:
                sid = resp.headers.get("mcp-session-id")
                if sid and not self.stateless:
                    self.session_id = sid
                ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
                if ctype == "text/event-stream":
                    started.set()
                    async for data in _sse_data(resp.aiter_lines()):
                        self._learn(data.encode())
                        if not sentinel:
                            await self._put(data.encode())
                else:
                    body = (await resp.aread()).strip()
                    if ctype == "application/json" and body:
                        self._learn(body)
                        out.append(body)
                    elif resp.status_code >= 300 or body:
                        shown = body[:120].decode(errors="replace")
                        out.append(f"HTTP {resp.status_code} {ctype or '-'} {shown}".encode())
        except Exception as exc:  # reported as a frame: the comparison says what went wrong
            import httpx

            if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
                from .transports.connect_errors import http_connect_failure

                self.unreachable = http_connect_failure(exc, self.url)
            out.append(f"HTTP request failed: {type(exc).__name__}: {exc}".encode())
        finally:
            if sentinel:
                # Whatever the sentinel's POST got (even an id-less 400 before initialize), it is over: over HTTP
                # each POST carries its own answers, so its end is the point the runner waits for.
                out = [json.dumps({"jsonrpc": "2.0", "id": ident, "result": {}}).encode()]
            for item in out:
                await self._put(item)
            started.set()

    async def _put(self, frame: bytes) -> None:
        try:
            await self.send_q.send(frame)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session is over

    def _learn(self, frame: bytes) -> None:
        msg = _loads(frame)
        if isinstance(msg, dict) and isinstance(msg.get("result"), dict):
            version = msg["result"].get("protocolVersion")
            if isinstance(version, str) and "serverInfo" in msg["result"]:
                self.version = version

    async def receive(self) -> bytes:
        try:
            return await self.recv_q.receive()
        except anyio.EndOfStream:
            raise anyio.EndOfStream from None

    async def close(self) -> None:
        if self.session_id is not None:
            with anyio.move_on_after(2.0, shield=True):
                try:
                    await self.client.delete(self.url, headers={"Mcp-Session-Id": self.session_id, **self.base})
                except Exception as exc:  # closing is best effort: the checks are done; say why, go on
                    logger.debug("DELETE of the checked session failed: %r", exc)
        self.send_q.close()
        self.recv_q.close()


async def _sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The ``data`` payloads of an SSE stream (empty ones, like priming events, skipped)."""
    data: list[str] = []
    async for line in lines:
        if line == "":
            if data and "".join(data).strip():
                yield "\n".join(data)
            data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data and "".join(data).strip():
        yield "\n".join(data)


# --- what the server offers ---------------------------------------------------------------------------------


@dataclass
class Offer:
    """What a server offers, learned once before a check (``None`` everywhere: assume everything)."""

    handshake: dict[str, Any] | None = None  # initialize result
    stateless: dict[str, Any] | None = None  # server/discover result
    tools: set[str] = field(default_factory=set)
    prompts: set[str] = field(default_factory=set)
    resources: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def missing(self, need: str, session: Session) -> str | None:
        """Why ``need`` is not met, or ``None``."""
        kind, _, name = need.partition(":")
        if kind == "tool" and name not in self.tools:
            return f"the server offers no tool {name}"
        if kind == "prompt" and name not in self.prompts:
            return f"the server offers no prompt {name}"
        if kind == "resource" and name not in self.resources:
            return f"the server lists no resource {name}"
        if kind == "capability":
            source = self.stateless if session.kind == "stateless" else self.handshake
            value: Any = (source or {}).get("capabilities") or {}
            for part in name.split("."):  # resources.subscribe: the sub-capability must be there and not false
                value = value.get(part) if isinstance(value, dict) else None
            if value is None or value is False:
                return f"the server does not advertise the {name} capability"
        if kind not in ("tool", "prompt", "resource", "capability"):
            return f"unknown requirement {need!r}"
        return None


CLIENT_INFO: Final = {"name": "jsonrpc-mcp-check", "version": __version__}
_INITIALIZED: Final = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def _handshake_frame(ident: str, revision: str, capabilities: dict[str, Any]) -> bytes:
    params = {"protocolVersion": revision, "capabilities": capabilities, "clientInfo": CLIENT_INFO}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "initialize", "params": params}).encode()


def _stateless_meta(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        META_PROTOCOL_VERSION: STATELESS_VERSIONS[0],
        META_CLIENT_CAPABILITIES: capabilities or {},
    }


class Unreachable(ConnectionError):
    """The server could not be reached or started, or it gave no answer at all to a probe: why, in one line
    (``cannot connect to 127.0.0.1:9 (...): connection refused``, ``the server process exited with status 1 before
    answering initialize``). ``timed_out``: it did not answer within ``--startup``."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


async def _await_reply(channel: Channel, ident: str, timeout: float) -> dict[str, Any]:
    """The reply to the probe ``ident``: a response with its id, or a refusal of it (the probe is the only request
    in flight): an error without an id, or an HTTP status the channel reports as a line of text. A POST that could
    not connect is :class:`Unreachable`."""
    with anyio.fail_after(timeout):
        while True:
            frame = await channel.receive()
            msg = _loads(frame)
            if isinstance(msg, dict) and msg.get("id") == ident and ("result" in msg or "error" in msg):
                return msg
            if isinstance(msg, dict) and msg.get("id") is None and isinstance(msg.get("error"), dict):
                return {"id": ident, "error": msg["error"], "refused": True}
            if msg is _NOT_JSON and frame.startswith((b"HTTP ", b"HTTP request failed")):
                unreachable = getattr(channel, "unreachable", None)
                if unreachable is not None:
                    raise Unreachable(unreachable)
                text = frame.decode("utf-8", "replace")
                return {"id": ident, "error": {"code": None, "message": text}, "refused": True}


async def _first_reply(channel: Channel, frame: bytes, ident: str, method: str, timing: Timing) -> dict[str, Any]:
    """Send a probe's first request and wait ``--startup`` seconds for the reply; none at all (no answer in time,
    or the connection ended first) is :class:`Unreachable`, saying why."""
    try:
        try:
            await channel.send(frame)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError):
            pass  # the server has gone already: the end of its output, and why it ended, are read below
        return await _await_reply(channel, ident, timing.startup)
    except TimeoutError:
        raise Unreachable(
            f"no answer to {method} within {timing.startup:g} s (--startup SECONDS waits longer)", timed_out=True
        ) from None
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        why_closed = getattr(channel, "why_closed", None)
        reason = await why_closed() if why_closed is not None else None
        raise Unreachable(f"{reason or 'the server closed the connection'} before answering {method}") from None


async def _list_all(channel: Channel, method: str, key: str, meta: dict[str, Any] | None, timeout: float) -> list[Any]:
    items: list[Any] = []
    cursor: Any = None
    for page in range(50):
        params: dict[str, Any] = {}
        if cursor is not None:
            params["cursor"] = cursor
        if meta is not None:
            params["_meta"] = meta
        ident = f"probe-{method}-{page}"
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params:
            frame["params"] = params
        await channel.send(json.dumps(frame).encode())
        reply = await _await_reply(channel, ident, timeout)
        result = reply.get("result")
        if not isinstance(result, dict):
            break
        items.extend(result.get(key) or [])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    return items


async def probe(target: Target, *, timing: Timing = Timing()) -> Offer:
    """Learn what ``target`` offers: a handshake (initialize, the three lists) and a ``server/discover``. A probe
    the server refuses or does not answer is noted in :attr:`Offer.problems`; the check goes on without it. When
    neither probe reached the server at all, there is nothing to check: :class:`Unreachable` (the first's)."""
    offer = Offer()
    unreachable: list[Unreachable] = []
    session = Session("initialize", HANDSHAKE_VERSIONS[0], {}, [])
    try:
        with unwrap_group():
            await _probe_handshake(target, session, offer, timing)
    except Unreachable as exc:
        unreachable.append(exc)
        offer.problems.append(f"handshake probe failed: {exc.reason}")
    except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError) as exc:
        offer.problems.append(f"handshake probe failed: {_failure(exc)}")
    session = Session("stateless", STATELESS_VERSIONS[0], {}, [])
    try:
        with unwrap_group():
            await _probe_discover(target, session, offer, timing)
    except Unreachable as exc:
        unreachable.append(exc)
        offer.problems.append(f"server/discover probe failed: {exc.reason}")
    except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError) as exc:
        offer.problems.append(f"server/discover probe failed: {_failure(exc)}")
    if len(unreachable) == 2:
        raise unreachable[0]
    return offer


def _failure(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer in time (--timeout SECONDS waits longer)"
    return f"{type(exc).__name__} {exc}".strip()


async def _probe_handshake(target: Target, session: Session, offer: Offer, timing: Timing) -> None:
    timeout = timing.timeout
    async with target.connect(session) as channel:
        init = _handshake_frame("probe-init", HANDSHAKE_VERSIONS[0], {})
        reply = await _first_reply(channel, init, "probe-init", "initialize", timing)
        if isinstance(reply.get("result"), dict):
            offer.handshake = reply["result"]
            await channel.send(_INITIALIZED)
        else:
            offer.problems.append(f"initialize failed: {_short(reply.get('error'))}")
        caps = (offer.handshake or {}).get("capabilities") or {}
        if "tools" in caps:
            offer.tools |= {t.get("name") for t in await _list_all(channel, "tools/list", "tools", None, timeout)}
        if "prompts" in caps:
            found = await _list_all(channel, "prompts/list", "prompts", None, timeout)
            offer.prompts |= {p.get("name") for p in found}
        if "resources" in caps:
            found = await _list_all(channel, "resources/list", "resources", None, timeout)
            offer.resources |= {r.get("uri") for r in found}


async def _probe_discover(target: Target, session: Session, offer: Offer, timing: Timing) -> None:
    timeout = timing.timeout
    async with target.connect(session) as channel:
        frame = {
            "jsonrpc": "2.0",
            "id": "probe-discover",
            "method": "server/discover",
            "params": {"_meta": _stateless_meta()},
        }
        reply = await _first_reply(channel, json.dumps(frame).encode(), "probe-discover", "server/discover", timing)
        if reply.get("refused"):
            offer.problems.append(
                f"server/discover was refused ({_short(reply['error'].get('message'))}): the 2026-07-28 "
                "sessions are skipped, the handshake sessions go on"
            )
        result = reply.get("result")
        if isinstance(result, dict) and STATELESS_VERSIONS[0] in (result.get("supportedVersions") or []):
            offer.stateless = result
            if offer.handshake is None:
                meta = _stateless_meta()
                caps = result.get("capabilities") or {}
                if "tools" in caps:
                    found = await _list_all(channel, "tools/list", "tools", meta, timeout)
                    offer.tools |= {t.get("name") for t in found}
                if "prompts" in caps:
                    found = await _list_all(channel, "prompts/list", "prompts", meta, timeout)
                    offer.prompts |= {p.get("name") for p in found}
                if "resources" in caps:
                    found = await _list_all(channel, "resources/list", "resources", meta, timeout)
                    offer.resources |= {r.get("uri") for r in found}


# --- running ------------------------------------------------------------------------------------------------


@dataclass
class Observation:
    """What the server produced for each exchange of a case (``None``: the case was not run)."""

    frames: list[list[bytes]] | None
    skipped: str | None = None
    problem: str | None = None  # the run itself failed (timeout, connection lost)


class _Sentinels:
    def __init__(self) -> None:
        self.n = 0

    def next(self, session: Session) -> tuple[str, bytes]:
        self.n += 1
        ident = f"sentinel-{self.n}"
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": ident}
        if session.kind == "stateless":
            msg["method"] = "server/discover"
            msg["params"] = {"_meta": _stateless_meta()}
        else:
            msg["method"] = "ping"
        return ident, json.dumps(msg, separators=(",", ":")).encode()


async def _run_exchange(
    channel: Channel,
    session: Session,
    exchange: Exchange,
    sentinels: _Sentinels,
    state: dict[str, Any],
    masks: Sequence[str],
    timeout: float,
    grace: float,
) -> tuple[list[bytes], str | None]:
    placeholder = SERVER_REQUEST_ID.encode()
    frames = [f.replace(placeholder, json.dumps(state.get("request_id")).encode()) for f in exchange.send]
    ident, sentinel = sentinels.next(session)
    await channel.send_all([*frames, sentinel])
    need = Counter(frame_key(f) for f in exchange.expect)
    got: list[bytes] = []
    seen = False

    def done(linger: bool = False) -> bool:
        # Everything named arrived; or as many frames as expected did and (lingering) the rest is overdue.
        return seen and (not +need or (linger and len(got) >= len(exchange.expect)))

    async def collect(linger: bool = False) -> str | None:
        nonlocal seen
        while not done(linger):
            try:
                frame = await channel.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return "the server closed the connection"
            if _reply_id(frame) == ident:
                seen = True
                return None
            msg = _loads(frame)
            if isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg:
                state["request_id"] = msg["id"]
            frame = apply_masks(frame, masks)
            need[frame_key(frame)] -= 1
            got.append(frame)
        return None

    with anyio.move_on_after(timeout) as scope:
        problem = await collect()
    if scope.cancelled_caught:
        return got, f"timed out after {timeout:g} s waiting for the sentinel's reply"
    if problem is None and not done():
        # Frames the expectation names are still owed. If as many frames as expected came already, the server
        # answered differently: linger briefly (a late reply still belongs here), else wait the whole grace.
        enough = len(got) >= len(exchange.expect)
        with anyio.move_on_after(min(grace, LINGER) if enough else grace) as scope:
            problem = await collect()
        if scope.cancelled_caught and enough:
            return got, None
        if scope.cancelled_caught:
            waiting = "; ".join(f"{kind} {what}".strip() for kind, what in +need)
            problem = f"waited {grace:g} s after the sentinel's reply for {waiting}"
    return got, problem


async def _handshake(channel: Channel, session: Session, timeout: float) -> str | None:
    """Initialize a handshake session; returns why it cannot be used, or ``None``."""
    assert session.revision is not None
    await channel.send(_handshake_frame("init", session.revision, session.capabilities))
    try:
        reply = await _await_reply(channel, "init", timeout)
    except TimeoutError:
        return f"no answer to initialize within {timeout:g} s"
    result = reply.get("result")
    if not isinstance(result, dict):
        return f"initialize failed: {_short(reply.get('error'))}"
    if result.get("protocolVersion") != session.revision:
        return f"the server does not speak {session.revision} (it answered {result.get('protocolVersion')})"
    await channel.send(_INITIALIZED)
    return None


def _session_skip(session: Session, offer: Offer | None, revisions: Sequence[str] | None) -> str | None:
    if revisions:
        if session.kind == "raw":
            if not any(r in HANDSHAKE_VERSIONS for r in revisions):
                return "handshake-era session; not a selected revision"
        elif session.revision not in revisions:
            return f"{session.revision} is not a selected revision"
    if offer is None:
        return None
    if session.kind == "stateless" and offer.stateless is None:
        return f"the server does not serve {session.revision} (server/discover failed)"
    if session.kind != "stateless" and offer.handshake is None:
        return "the server does not complete an initialize handshake"
    return None


async def observe(
    transcript: Transcript,
    target: Target,
    *,
    offer: Offer | None = None,
    revisions: Sequence[str] | None = None,
    timing: Timing = Timing(),
    concurrency: int = 4,
) -> dict[str, Observation]:
    """Replay ``transcript`` against ``target``; returns what was observed per case name."""
    out: dict[str, Observation] = {}
    limiter = anyio.CapacityLimiter(max(1, concurrency))

    async def run_session(session: Session) -> None:
        async with limiter:
            await _observe_session(transcript, session, target, offer, revisions, timing, out)

    async with anyio.create_task_group() as tg:
        for session in transcript.sessions:
            tg.start_soon(run_session, session)
    return out


async def _observe_session(
    transcript: Transcript,
    session: Session,
    target: Target,
    offer: Offer | None,
    revisions: Sequence[str] | None,
    timing: Timing,
    out: dict[str, Observation],
) -> None:
    skip = _session_skip(session, offer, revisions)
    if skip is not None:
        for case in session.cases:
            out[case.name] = Observation(None, skipped=skip)
        return
    sentinels = _Sentinels()
    state: dict[str, Any] = {}
    first = True  # the first reply on a connection may wait for the server to start
    try:
        async with target.connect(session) as channel:
            if session.kind == "initialize":
                why = await _handshake(channel, session, timing.startup)
                first = False
                if why is not None:
                    for case in session.cases:
                        out[case.name] = Observation(None, skipped=why)
                    return
            broken: str | None = None
            for case in session.cases:
                if broken is not None:
                    out[case.name] = Observation(None, problem=broken)
                    continue
                if case.transports and target.kind not in case.transports:
                    only = " and ".join(case.transports)
                    out[case.name] = Observation(
                        None, skipped=f"a {only} rule (the {target.kind} transport has its own)"
                    )
                    continue
                if offer is not None:
                    why = next((m for n in (*transcript.needs, *case.needs) if (m := offer.missing(n, session))), None)
                    if why is not None:
                        out[case.name] = Observation(None, skipped=why)
                        continue
                frames: list[list[bytes]] = []
                problem = None
                for exchange in case.exchanges:
                    timeout = timing.startup if first else timing.timeout
                    grace = case.timeout or timing.grace
                    first = False
                    got, problem = await _run_exchange(
                        channel, session, exchange, sentinels, state, case.mask, timeout, grace
                    )
                    frames.append(got)
                    if problem is not None:
                        break
                out[case.name] = Observation(frames, problem=problem)
                if problem is not None and "closed" in problem:
                    broken = "the server closed the connection in an earlier case"
    except (OSError, anyio.BrokenResourceError) as exc:
        for case in session.cases:
            out.setdefault(case.name, Observation(None, problem=f"cannot connect: {type(exc).__name__}: {exc}"))


# --- results ------------------------------------------------------------------------------------------------


@dataclass
class CaseResult:
    name: str
    rule: str
    level: Level
    session: str
    status: Status
    reason: str
    expected: list[list[str]] = field(default_factory=list)
    got: list[list[str]] = field(default_factory=list)


@dataclass
class RuleResult:
    file: str
    rule: str
    spec: list[str]
    revision: str
    cases: list[CaseResult]

    @property
    def status(self) -> Status:
        states = {c.status for c in self.cases}
        order: tuple[Status, ...] = ("fail", "differs", "pass")
        return next((s for s in order if s in states), "skip")

    def counts(self) -> Counter[str]:
        return Counter(c.status for c in self.cases)


def _text(frames: Sequence[bytes]) -> list[str]:
    return [f.decode("utf-8", errors="backslashreplace") for f in frames]


def judge(transcript: Transcript, observed: dict[str, Observation], mode: Mode) -> RuleResult:
    """Compare what was observed with the transcript's expectations."""
    results: list[CaseResult] = []
    for session, case in transcript.cases():
        obs = observed.get(case.name, Observation(None, skipped="not run"))
        expected = [_text(ex.expect) for ex in case.exchanges]
        if obs.frames is None:
            why = obs.skipped or obs.problem or "not run"
            state: Status = "skip" if obs.skipped else "fail"
            results.append(CaseResult(case.name, case.rule, case.level, session.label, state, why, expected))
            continue
        reason: str | None = None
        for i, exchange in enumerate(case.exchanges):
            if i >= len(obs.frames):
                reason = obs.problem or "not run to the end"
                break
            problem = compare(exchange.expect, obs.frames[i], mode, ignore=case.ignore, compare_paths=case.compare)
            if problem is not None:
                prefix = f"step {i + 1}: " if len(case.exchanges) > 1 else ""
                reason = prefix + problem
                if obs.problem and i == len(obs.frames) - 1 and not obs.problem.startswith("waited"):
                    reason += f" ({obs.problem})"
                break
        if reason is None and obs.problem:
            reason = obs.problem
        status: Status
        if reason is None:
            status, reason = "pass", summarize(case.exchanges[-1].expect)
        else:
            status = "differs" if case.level == "choice" and mode == "semantic" else "fail"
        got = [_text(f) for f in obs.frames]
        results.append(CaseResult(case.name, case.rule, case.level, session.label, status, reason, expected, got))
    return RuleResult(transcript.name, transcript.rule, transcript.spec, transcript.revision, results)


async def replay(
    transcript: Transcript,
    target: Target,
    *,
    mode: Mode = "exact",
    offer: Offer | None = None,
    revisions: Sequence[str] | None = None,
    timing: Timing = Timing(),
    concurrency: int = 4,
) -> tuple[RuleResult, dict[str, Observation]]:
    """Observe and judge one transcript."""
    observed = await observe(
        transcript, target, offer=offer, revisions=revisions, timing=timing, concurrency=concurrency
    )
    return judge(transcript, observed, mode), observed


def rewrite(transcript: Transcript, observed: dict[str, Observation], *, keep: Iterable[str] = ()) -> str:
    """The transcript's text with every ``<<<`` block replaced by what was observed (cases in ``keep`` untouched)."""
    lines = transcript.path.read_text(encoding="utf-8").split("\n")
    kept = set(keep)
    edits: list[tuple[tuple[int, int], list[str]]] = []
    for _, case in transcript.cases():
        obs = observed.get(case.name)
        if case.name in kept or obs is None or obs.frames is None:
            continue
        for exchange, frames in zip(case.exchanges, obs.frames, strict=False):
            new = [f"<<< {f.decode('utf-8', errors='backslashreplace')}" for f in frames] or [f"<<< {SILENCE}"]
            edits.append((exchange.span, new))
    for (start, stop), new in sorted(edits, reverse=True):
        lines[start:stop] = new
    return "\n".join(lines)


# --- the check command --------------------------------------------------------------------------------------

_MARK: Final = {"pass": "PASS", "fail": "FAIL", "differs": "DIFF", "skip": "SKIP"}


def format_report(target: str, results: Sequence[RuleResult], offer: Offer | None, verbose: bool = False) -> str:
    out = [f"jsonrpc-mcp check: {target}"]
    if offer is not None:
        hs = offer.handshake or {}
        info = hs.get("serverInfo") or ((offer.stateless or {}).get("_meta") or {}).get(
            "io.modelcontextprotocol/serverInfo"
        )
        out.append(
            f"server: {_short(info)}  handshake: {hs.get('protocolVersion', 'no')}  "
            f"2026-07-28: {'yes' if offer.stateless else 'no'}  tools: {len(offer.tools)}"
        )
        out.extend(f"note: {p}" for p in offer.problems)
    out.append("")
    for rule in results:
        c = rule.counts()
        tally = f"{c['pass']}/{len(rule.cases) - c['skip']}" + (f", {c['skip']} skipped" if c["skip"] else "")
        out.append(f"{_MARK[rule.status]}  {rule.file}: {rule.rule}  [{tally}]")
        for case in rule.cases:
            if verbose or case.status in ("fail", "differs", "skip"):
                level = "" if case.level == "must" else f" ({case.level.upper()})"
                out.append(f"    {_MARK[case.status]} {case.name}{level}: {case.reason}")
    total: Counter[str] = Counter()
    for rule in results:
        total.update(rule.counts())
    rules = Counter(r.status for r in results)
    out.append("")
    out.append(
        f"rules: {rules['pass']} pass, {rules['fail']} fail, {rules['differs']} differ (spec silent), "
        f"{rules['skip']} skipped; cases: {total['pass']} pass, {total['fail']} fail, "
        f"{total['differs']} differ, {total['skip']} skipped"
    )
    return "\n".join(out)


def report_json(target: str, results: Sequence[RuleResult], offer: Offer | None) -> dict[str, Any]:
    return {
        "target": target,
        "server": None if offer is None else (offer.handshake or {}).get("serverInfo"),
        "stateless": None if offer is None else offer.stateless is not None,
        "rules": [
            {
                "file": r.file,
                "rule": r.rule,
                "spec": r.spec,
                "revision": r.revision,
                "status": r.status,
                "cases": [
                    {
                        "name": c.name,
                        "rule": c.rule,
                        "level": c.level,
                        "session": c.session,
                        "status": c.status,
                        "reason": c.reason,
                        "expected": c.expected,
                        "got": c.got,
                    }
                    for c in r.cases
                ],
            }
            for r in results
        ],
        "summary": dict(sum((r.counts() for r in results), Counter())),
    }


async def run_check(
    target: Target,
    *,
    transcripts: Sequence[Transcript] | None = None,
    mode: Mode = "semantic",
    revisions: Sequence[str] | None = None,
    timing: Timing = Timing(),
    concurrency: int = 4,
    use_probe: bool = True,
) -> tuple[list[RuleResult], Offer | None]:
    """Replay every transcript against ``target`` (what it offers probed first, unless ``use_probe`` is false)."""
    files = list(transcripts) if transcripts is not None else load_transcripts()
    offer = await probe(target, timing=timing) if use_probe else None
    results: dict[str, RuleResult] = {}
    limiter = anyio.CapacityLimiter(max(1, concurrency))

    async def one(t: Transcript) -> None:
        async with limiter:
            result, _ = await replay(
                t, target, mode=mode, offer=offer, revisions=revisions, timing=timing, concurrency=1
            )
            results[t.name] = result

    async with anyio.create_task_group() as tg:
        for t in files:
            tg.start_soon(one, t)
    return [results[t.name] for t in files], offer


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
    parser.add_argument("-V", "--all-cases", action="store_true", help="list passing cases too")
    add_environment_arguments(parser)
    parser.add_argument("rest", nargs=argparse.REMAINDER, metavar="-- COMMAND...", help="a stdio server to start")


_CHECK_EXAMPLES: Final = (
    ("jsonrpc-mcp check -- jsonrpc-mcp serve server.py", ""),
    ("jsonrpc-mcp check -k unknown-names -V -- python my_server.py", ""),
    ("jsonrpc-mcp check --url http://127.0.0.1:8000/mcp --revision 2025-11-25", ""),
    ('jsonrpc-mcp check --json --url http://127.0.0.1:8000/mcp --header "Authorization: Bearer $TOKEN"', ""),
)
_CHECK_EXIT_CODES: Final = (
    ("0", "every rule passes (or is skipped, or differs where the spec is silent)"),
    ("1", "a rule fails"),
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
    from .transports.connect_errors import check_http_url

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
            from ._cli_client import EXIT_UNREACHABLE, HTTP_EXTRA_MISSING

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
        from ._cli_client import EXIT_TIMEOUT, EXIT_UNREACHABLE, exit_hint

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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
