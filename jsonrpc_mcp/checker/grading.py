"""Grading: what was observed for each case, against what its transcript expects (L7)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .comparison import Mode, compare
from .frames import summarize
from .transcripts import Level, Transcript

__all__ = (
    "Status",
    "Observation",
    "CaseResult",
    "RuleResult",
    "judge",
)


Status = Literal["pass", "fail", "differs", "skip"]


@dataclass
class Observation:
    """What the server produced for each exchange of a case (``None``: the case was not run)."""

    frames: list[list[bytes]] | None
    skipped: str | None = None
    problem: str | None = None  # the run itself failed (timeout, connection lost)


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
