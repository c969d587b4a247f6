"""The transcript format: parse it (L7).



A transcript (``jsonrpc_mcp/transcripts/*.txt``, shipped in the package) pins one family of spec rules as raw
frames. Its format::

    # rule: Bytes that are not JSON get -32700 without an id; the connection survives
    # spec: schema/2025-11-25 JSONRPCErrorResponse (id optional); docs/spec-decisions.md #2
    # revision: all
    # cite: 2025-11-25/basic/index#448dd036    (what its cases test: a requirement id, jsonrpc-2.0/N, decision#N)
    # needs: tool:test_simple_text             (tool:NAME prompt:NAME resource:URI capability:NAME no-capability:NAME)

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

A case's level (``must``, ``should``, ``choice``) is the keyword of the first sentence it cites (``# cite:`` in
the case, else in the header; :mod:`.citations`); ``# level:`` gives it for a case that cites nothing the package
knows. Other case directives: ``# ignore: PATH`` (semantic mode), ``# mask: KEY`` (a value that changes every run
becomes ``"***"``), ``# transport: stdio`` (a rule of one transport), ``# timeout: SECONDS``. The whole story, and
what the official SDK does with the same frames, is in ``docs/conformance.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from ..mcp.versions import (
    HANDSHAKE_VERSIONS,
    STATELESS_VERSIONS,
)
from .citations import Level, level_of

__all__ = (
    "SILENCE",
    "SERVER_REQUEST_ID",
    "TranscriptError",
    "Exchange",
    "Case",
    "Session",
    "Transcript",
    "parse_transcript",
    "default_transcript_dir",
    "load_transcripts",
)

SILENCE: Final = "(silence)"
SERVER_REQUEST_ID: Final = "$SERVER_REQUEST_ID"
_LEVELS: Final = ("must", "should", "choice")
_ESCAPE: Final = re.compile(rb"\\x([0-9a-fA-F]{2})")
_IDENT: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


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
    #: What the case tests (requirement ids, ``jsonrpc-2.0/N``, ``decision#N``): its own, else the transcript's.
    cites: list[str] = field(default_factory=list)
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
    cites: list[str] = field(default_factory=list)

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
            elif key == "cite":
                case.cites.extend(value.split())
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
    unknown = set(header) - {"rule", "spec", "revision", "needs", "note", "level", "cite"}
    if unknown:
        raise TranscriptError(f"{path.name}: unknown header directive(s) {', '.join(sorted(unknown))}")
    if not sessions or not any(s.cases for s in sessions):
        raise TranscriptError(f"{path.name}: no cases")
    level = _level(header["level"][0], path.name) if "level" in header else "must"
    cites = [w for v in header.get("cite", []) for w in v.split()]
    for s in sessions:
        for c in s.cases:
            if not c.exchanges:
                raise TranscriptError(f"{path.name}: case {c.name} sends nothing")
            if any(ex.span == (0, 0) for ex in c.exchanges):
                raise TranscriptError(f"{path.name}: case {c.name} has '>>>' lines without '<<<' lines after them")
            if not c.rule:
                raise TranscriptError(f"{path.name}: case {c.name} needs a '# rule:' line")
            cited = level_of(c.cites)
            if c.level_set and cited is not None and cited != c.level:
                raise TranscriptError(f"{path.name}: case {c.name} is {c.level} but cites a {cited} sentence")
            if not c.cites:
                c.cites = list(cites)
                cited = level_of(cites)
            if not c.level_set:
                c.level = cited or level
    return Transcript(
        path=path,
        rule=header["rule"][0],
        spec=header["spec"],
        revision=header["revision"][0],
        sessions=sessions,
        needs=[w for v in header.get("needs", []) for w in v.split() if w != "-"],
        notes=header.get("note", []),
        level=level,
        cites=cites,
    )


def default_transcript_dir() -> Path:
    """The transcripts shipped inside the package (``jsonrpc_mcp/transcripts``)."""
    return Path(__file__).resolve().parent.parent / "transcripts"


def load_transcripts(directory: Path | None = None) -> list[Transcript]:
    folder = directory or default_transcript_dir()
    if not folder.is_dir():
        raise FileNotFoundError(f"no transcript folder at {folder} (give --transcripts DIR)")
    return [parse_transcript(p) for p in sorted(folder.glob("*.txt"))]
