"""The report of a check: as text, and as JSON (L7)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

from .frames import short
from .grading import RuleResult
from .probe import Offer

__all__ = (
    "format_report",
    "report_json",
)


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
            f"server: {short(info)}  handshake: {hs.get('protocolVersion', 'no')}  "
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
