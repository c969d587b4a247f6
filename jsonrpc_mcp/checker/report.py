"""The report of a check: as text, and as JSON (L7).

Each case line says its status, the keyword and id of the sentence it tests, and why: ``FAIL id-null (MUST
2025-11-25/basic/index#69460b33): expected error -32600, got result (id 1)``. Passing and skipped cases are listed
only when asked (``verbose``); the JSON report has them all, each with its level, status and citations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

from .frames import short
from .grading import CaseResult, RuleResult
from .probe import Offer

__all__ = (
    "format_report",
    "report_json",
)


# --- the check command --------------------------------------------------------------------------------------

_MARK: Final = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "differs": "DIFF", "skip": "SKIP"}
_SHOWN: Final = ("fail", "warn", "differs")


def _cited(case: CaseResult) -> str:
    """`` (MUST 2025-11-25/basic/index#9774fb4d)``: what the case's status stands on (the first citation)."""
    if not case.citations:
        return "" if case.level == "must" else f" ({case.level.upper()})"
    first = case.citations[0]
    more = f" +{len(case.citations) - 1}" if len(case.citations) > 1 else ""
    return f" ({first.keyword or case.level.upper()} {first.id}{more})"


def format_report(target: str, results: Sequence[RuleResult], offer: Offer | None, verbose: bool = False) -> str:
    out = [f"jsonrpc-mcp check: {target}"]
    if offer is not None:
        hs = offer.handshake or {}
        info = hs.get("serverInfo") or ((offer.stateless or {}).get("_meta") or {}).get(
            "io.modelcontextprotocol/serverInfo"
        )
        out.append(
            f"server: {short(info)}  handshake: {hs.get('protocolVersion', 'no')}  "
            f"2026-07-28: {'yes' if offer.stateless else 'no'}  tools: {len(offer.tools)}"
        )
        out.extend(f"note: {p}" for p in offer.problems)
    out.append("")
    for rule in results:
        c = rule.counts()
        tally = f"{c['pass']}/{len(rule.cases) - c['skip']}" + (f", {c['skip']} skipped" if c["skip"] else "")
        out.append(f"{_MARK[rule.status]}  {rule.file}: {rule.rule}  [{tally}]")
        shown = (case for case in rule.cases if verbose or case.status in _SHOWN)
        out.extend(f"    {_MARK[case.status]} {case.name}{_cited(case)}: {case.reason}" for case in shown)
    total: Counter[str] = Counter()
    for rule in results:
        total.update(rule.counts())
    rules = Counter(r.status for r in results)
    out.append("")
    out.append(
        f"rules: {rules['pass']} pass, {rules['fail']} fail (MUST), {rules['warn']} warn (SHOULD), "
        f"{rules['differs']} differ (the spec leaves a choice), {rules['skip']} skipped; cases: {total['pass']} pass, "
        f"{total['fail']} fail, {total['warn']} warn, {total['differs']} differ, {total['skip']} skipped"
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
                        "citations": [{"id": x.id, "keyword": x.keyword, "text": x.text} for x in c.citations],
                    }
                    for c in r.cases
                ],
            }
            for r in results
        ],
        "summary": dict(sum((r.counts() for r in results), Counter())),
    }
