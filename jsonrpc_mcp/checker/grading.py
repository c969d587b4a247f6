"""Grading: what was observed for each case, against what its transcript expects, by the keyword of the sentence
the case cites (L7).

A case that does not match is FAIL when it tests a MUST or MUST NOT, WARN when it tests a SHOULD, and DIFF where
the specification leaves a choice (ours is in docs/spec-decisions.md). A case whose only difference a weaker
sentence governs takes that sentence's grade: an error reply with ``"id": null`` is a DIFF, an error reply with
another code than expected a WARN. In the exact mode (our own golden files) every
difference is a FAIL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from .citations import Citation, Level, citation, level_of
from .comparison import Mismatch, Mode, mismatch
from .frames import summarize
from .transcripts import Case, Transcript

__all__ = (
    "Status",
    "Observation",
    "CaseResult",
    "RuleResult",
    "judge",
)


Status = Literal["pass", "fail", "warn", "differs", "skip"]

#: What a case that does not match is, by its level.
_MISSED: Final[dict[Level, Status]] = {"must": "fail", "should": "warn", "choice": "differs"}
#: The status of a rule: the worst of its cases'.
_ORDER: Final[tuple[Status, ...]] = ("fail", "warn", "differs", "pass")
_RANK: Final[dict[Level, int]] = {"must": 2, "should": 1, "choice": 0}


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
    #: The sentences the status stands on: the case's own, or those of the choice that was all that differed.
    citations: list[Citation] = field(default_factory=list)


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
        return next((s for s in _ORDER if s in states), "skip")

    def counts(self) -> Counter[str]:
        return Counter(c.status for c in self.cases)


def _text(frames: Sequence[bytes]) -> list[str]:
    return [f.decode("utf-8", errors="backslashreplace") for f in frames]


def judge(transcript: Transcript, observed: dict[str, Observation], mode: Mode) -> RuleResult:
    """Compare what was observed with the transcript's expectations, and grade each case."""
    results: list[CaseResult] = []
    for session, case in transcript.cases():
        obs = observed.get(case.name, Observation(None, skipped="not run"))
        expected = [_text(ex.expect) for ex in case.exchanges]
        cites = [citation(c) for c in case.cites]
        if obs.frames is None:
            why = obs.skipped or obs.problem or "not run"
            state: Status = "skip" if obs.skipped else _missed(case, mode)
            results.append(CaseResult(case.name, case.rule, case.level, session.label, state, why, expected, [], cites))
            continue
        found = _first_mismatch(case, obs, mode)
        status: Status
        level = case.level
        if found is None:
            status, reason = "pass", summarize(case.exchanges[-1].expect)
        elif found.cites and _RANK[level_of(found.cites) or "must"] < _RANK[case.level]:
            level = level_of(found.cites) or case.level
            status, reason = _missed_at(level, mode), found.reason
            cites = [citation(c) for c in found.cites]
        else:
            status, reason = _missed(case, mode), found.reason
        got = [_text(f) for f in obs.frames]
        results.append(CaseResult(case.name, case.rule, level, session.label, status, reason, expected, got, cites))
    return RuleResult(transcript.name, transcript.rule, transcript.spec, transcript.revision, results)


def _missed(case: Case, mode: Mode) -> Status:
    return _missed_at(case.level, mode)


def _missed_at(level: Level, mode: Mode) -> Status:
    return _MISSED[level] if mode == "semantic" else "fail"


def _first_mismatch(case: Case, obs: Observation, mode: Mode) -> Mismatch | None:
    """The first exchange of ``case`` whose frames do not match (a run that broke off is one too)."""
    assert obs.frames is not None
    softer: Mismatch | None = None
    for i, exchange in enumerate(case.exchanges):
        if i >= len(obs.frames):
            return Mismatch(obs.problem or "not run to the end")
        found = mismatch(exchange.expect, obs.frames[i], mode, ignore=case.ignore, compare_paths=case.compare)
        if found is None:
            continue
        prefix = f"step {i + 1}: " if len(case.exchanges) > 1 else ""
        reason = prefix + found.reason
        if found.cites:  # only what a weaker sentence governs differs here: a later step may still fail
            softer = softer or Mismatch(reason, found.cites)
            continue
        if obs.problem and i == len(obs.frames) - 1 and not obs.problem.startswith("waited"):
            reason += f" ({obs.problem})"
        return Mismatch(reason)
    if obs.problem:
        return Mismatch(obs.problem)
    return softer
