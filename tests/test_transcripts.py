"""The golden wire transcripts (``jsonrpc_mcp/transcripts/*.txt``), replayed byte for byte over stdio.

Every transcript runs against a real ``conformance/everything_server.py --stdio`` subprocess (one per session of
the file), on asyncio and on trio, and every case of it is one test here. The expectations are exact bytes.

To rewrite the expectations from what the server does now: ``UPDATE_TRANSCRIPTS=1 make test`` (or
``UPDATE_TRANSCRIPTS=1 pytest tests/test_transcripts.py``), then read the diff by eye against the spec: a golden
file records the *correct* behaviour. Cases listed in :data:`KNOWN_BUGS` are where our server is wrong; they are
never rewritten and are expected to fail until the server is fixed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from helpers import ROOT

from jsonrpc_mcp.checker import (
    CaseResult,
    Observation,
    RuleResult,
    StdioTarget,
    Timing,
    Transcript,
    judge,
    load_transcripts,
    observe,
    parse_transcript,
    rewrite,
)

pytestmark = pytest.mark.anyio

TRANSCRIPTS = ROOT / "jsonrpc_mcp" / "transcripts"
SERVER = [sys.executable, str(ROOT / "conformance" / "everything_server.py"), "--stdio"]
#: Generous: a golden case that fails only costs time; a flaky one costs trust.
TIMING = Timing(timeout=10.0, grace=10.0, startup=30.0)
UPDATE = os.environ.get("UPDATE_TRANSCRIPTS", "") not in ("", "0")

#: (file stem, case name) -> what our server does wrong. These cases fail (strict xfail) until it is fixed.
KNOWN_BUGS: dict[tuple[str, str], str] = {}

_files = load_transcripts(TRANSCRIPTS)
_cases = [(t, c.name) for t in _files for _, c in t.cases()]
_runs: dict[tuple[str, str], RuleResult] = {}  # (file stem, backend) -> the judged run, shared by its cases


def _param(transcript: Transcript, name: str) -> object:
    marks = []
    bug = KNOWN_BUGS.get((transcript.name, name))
    if bug is not None:
        marks.append(pytest.mark.xfail(strict=not UPDATE, reason=f"known bug: {bug}"))
    return pytest.param(transcript.path, name, id=f"{transcript.name}::{name}", marks=marks)


async def _result(path: Path, backend: str) -> RuleResult:
    """The judged run of one file. The first call per backend replays every file at once (sessions overlap)."""
    if (path.stem, backend) not in _runs:
        async with anyio.create_task_group() as tg:
            for transcript in _files:
                tg.start_soon(_run_file, transcript.path, backend, _limiter())
    return _runs[(path.stem, backend)]


def _limiter() -> anyio.CapacityLimiter:
    return anyio.CapacityLimiter(6)


async def _run_file(path: Path, backend: str, limiter: anyio.CapacityLimiter) -> None:
    async with limiter:
        transcript = parse_transcript(path)
        observed = await observe(transcript, StdioTarget(SERVER), timing=TIMING, concurrency=2)
        if UPDATE:
            observed = await _update(transcript, observed)
            transcript = parse_transcript(path)
        _runs[(path.stem, backend)] = judge(transcript, observed, "exact")


async def _update(transcript: Transcript, observed: dict[str, Observation]) -> dict[str, Observation]:
    keep = {name for (stem, name) in KNOWN_BUGS if stem == transcript.name}
    text = rewrite(transcript, observed, keep=keep)
    if text != transcript.path.read_text(encoding="utf-8"):
        transcript.path.write_text(text, encoding="utf-8")
        # Replay what was just written: replies the old expectations did not wait for are now waited for.
        return await observe(parse_transcript(transcript.path), StdioTarget(SERVER), timing=TIMING)
    return observed


def _explain(case: CaseResult) -> str:
    lines = [f"{case.name} ({case.session}): {case.reason}"]
    for i, (exp, got) in enumerate(zip(case.expected, case.got, strict=False)):
        lines.append(f"  exchange {i + 1}")
        lines.extend(f"    expected {f}" for f in exp or ["(silence)"])
        lines.extend(f"    got      {f}" for f in got or ["(silence)"])
    return "\n".join(lines)


@pytest.mark.parametrize(("path", "case"), [_param(t, n) for t, n in _cases])
async def test_transcript(path: Path, case: str, anyio_backend: str) -> None:
    result = await _result(path, anyio_backend)
    (found,) = [c for c in result.cases if c.name == case]
    assert found.status == "pass", _explain(found)


def test_every_file_pins_a_rule() -> None:
    assert len(_files) >= 10
    for t in _files:
        assert t.rule and t.spec and t.revision, t.name
        assert all(c.rule for _, c in t.cases()), t.name
