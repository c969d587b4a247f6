"""Comparing the frames a server produced with a transcript's expectations: bytes (``exact``) or parsed JSON
(``semantic``) (L7)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from .frames import NOT_JSON, frame_key, frame_summary, loads, short, summarize

__all__ = (
    "Mismatch",
    "NULL_ID",
    "WRONG_CODE",
    "SEPARATE_REPLIES",
    "mismatch",
    "Mode",
    "DEFAULT_IGNORE",
    "compare",
)


Mode = Literal["exact", "semantic"]

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
        #: Differences found on the way that a weaker sentence than the case's governs: (reason, its citations).
        self.softer: list[tuple[str, tuple[str, ...]]] = []

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
            return f"{_show(path)}: expected an object, got {short(act)}"
        for key, value in exp.items():
            child = (*path, key)
            if key not in act:
                if rules.ignored(child, ignored) and not rules.leads_to_compare(child):
                    continue
                return f"{_show(child)} is missing (expected {short(value)})"
            problem = _subset(value, act[key], child, rules, ignored)
            if problem:
                return problem
        return None
    if ignored:
        return None
    if isinstance(exp, list):
        if not isinstance(act, list):
            return f"{_show(path)}: expected a list, got {short(act)}"
        if len(exp) != len(act):
            return f"{_show(path)}: expected {len(exp)} item(s), got {len(act)}"
        for i, (e, a) in enumerate(zip(exp, act, strict=True)):
            problem = _subset(e, a, (*path, str(i)), rules, ignored)
            if problem:
                return problem
        return None
    if not _same_scalar(exp, act):
        return f"{_show(path)}: expected {short(exp)}, got {short(act)}"
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
            return f"expected a batch reply (array), got {frame_summary(json.dumps(act).encode())}"
        return _compare_sets(exp, act, rules, "in the batch: ")
    if not isinstance(exp, dict):
        return None if _same_scalar(exp, act) else f"expected {short(exp)}, got {short(act)}"
    if not isinstance(act, dict):
        return f"expected an object, got {short(act)}"
    ek, ak = _kind(exp), _kind(act)
    if ek != ak:
        return f"expected {frame_summary(json.dumps(exp).encode())}, got {frame_summary(json.dumps(act).encode())}"
    if act.get("jsonrpc") != "2.0":
        return f'"jsonrpc" is {short(act.get("jsonrpc"))}, not "2.0"'
    if ek in ("request", "notification"):
        if exp["method"] != act["method"]:
            return f"expected {ek} {exp['method']}, got {act['method']}"
        return _subset(exp.get("params", {}), act.get("params", {}), ("params",), rules, False)
    # A reply: the id is exact, type included; "no id" and "id": null are not the same thing.
    if "id" not in exp:
        if "id" in act:
            if act["id"] is None:  # what JSON-RPC 2.0 asks; we omit the key (decision 2): a choice, not a fault
                rules.softer.append(
                    ('the reply has "id": null (JSON-RPC 2.0 asks for it; MCP schemas omit "id")', NULL_ID)
                )
            else:
                return f"expected no id, got id {short(act['id'])}"
    elif ek == "error" and act.get("id", 0) is None:
        # JSON-RPC 2.0 lets an Invalid Request be answered with "id": null ("an error in detecting the id"); we
        # echo the id when it can be read (decision 2): a choice, not a fault.
        reason = f'the error reply has "id": null, not the readable id {short(exp["id"])} (JSON-RPC 2.0 allows it)'
        rules.softer.append((reason, NULL_ID))
    elif "id" not in act or not _same_id(exp["id"], act["id"]):
        return f"expected id {short(exp['id'])}, got {short(act.get('id', '(none)'))}"
    if ek == "error":
        e, a = exp["error"], act["error"]
        if not isinstance(a, dict):
            return f'"error" is not an object: {short(a)}'
        if e.get("code") != a.get("code"):
            # An error reply all the same: only the code's meaning differs (JSON-RPC 2.0 gives the table no keyword)
            reason = f"expected error {e.get('code')}, got error {a.get('code')} ({short(a.get('message'))})"
            if not isinstance(a.get("code"), int) or isinstance(a.get("code"), bool):
                return reason
            rules.softer.append((reason, WRONG_CODE))
            return None
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


@dataclass(frozen=True)
class Mismatch:
    """Why the frames a server produced do not match the expectation (one line). ``cites``: when all that differs
    is governed by a weaker sentence than the case's, that sentence (its level grades the case if lower):
    :data:`NULL_ID` or :data:`WRONG_CODE`."""

    reason: str
    cites: tuple[str, ...] = ()


#: An error reply with ``"id": null`` where the id could not be read: JSON-RPC 2.0 asks for it, the MCP schemas
#: make ``id`` optional, and we omit the key (docs/spec-decisions.md #2): a DIFF.
NULL_ID: Final = ("decision#2", "jsonrpc-2.0/5#id")
#: An error reply whose code is another than expected: JSON-RPC 2.0's table of pre-defined codes has no keyword
#: (docs/spec-decisions.md #7g): a WARN.
WRONG_CODE: Final = ("jsonrpc-2.0/5.1#codes", "decision#7g")
#: The replies to a batch as separate messages rather than one array: JSON-RPC 2.0 says the server "should" answer
#: with an array (lowercase), and the Streamable HTTP transport of 2025-03-26 lets a stream carry them one by one.
SEPARATE_REPLIES: Final = ("jsonrpc-2.0/6#array",)


def compare(
    expected: Sequence[bytes],
    got: Sequence[bytes],
    mode: Mode,
    *,
    ignore: Sequence[str] = (),
    compare_paths: Sequence[str] = (),
) -> str | None:
    """``None`` when ``got`` matches ``expected`` under ``mode``, else a one-line reason."""
    found = mismatch(expected, got, mode, ignore=ignore, compare_paths=compare_paths)
    return None if found is None else found.reason


def mismatch(
    expected: Sequence[bytes],
    got: Sequence[bytes],
    mode: Mode,
    *,
    ignore: Sequence[str] = (),
    compare_paths: Sequence[str] = (),
) -> Mismatch | None:
    """:func:`compare`, saying too whether what differs is a choice the specification leaves open.

    In the semantic mode, notifications the expectation does not name (by method, or in ``compare_paths``) are
    not compared: a server may send them at any time, between a request and its answer too (a log message, a
    ``list_changed``)."""
    if mode == "exact":
        if list(expected) == list(got):
            return None
        if len(expected) != len(got):
            return Mismatch(f"expected {summarize(expected)}; got {summarize(got)}")
        for e, g in zip(expected, got, strict=True):
            if e != g:
                return Mismatch(f"frame differs: expected {e[:300]!r}, got {g[:300]!r}")
        return None
    rules = _Rules((*DEFAULT_IGNORE, *ignore), compare_paths)
    exp = [loads(f) for f in expected]
    named = set(compare_paths) | {m["method"] for m in exp if isinstance(m, dict) and _kind(m) == "notification"}
    act: list[Any] = []
    for frame in got:
        msg = loads(frame)
        if msg is NOT_JSON:
            return Mismatch(f"the server wrote a frame that is not JSON: {frame[:80]!r}")
        if isinstance(msg, dict) and _kind(msg) == "notification" and msg["method"] not in named:
            continue
        act.append(msg)
    if len(exp) == 1 and isinstance(exp[0], list) and len(act) > 1 and not any(isinstance(m, list) for m in act):
        rules.softer.append(
            (f"the batch was answered by {len(act)} separate messages, not one array", SEPARATE_REPLIES)
        )
        exp = exp[0]
    problem = _compare_sets(exp, act, rules, "")
    if problem is not None:
        return Mismatch(problem)
    if not rules.softer:
        return None
    reason, cites = min(rules.softer, key=lambda s: s[1] == NULL_ID)  # a WARN outweighs a DIFF
    return Mismatch(reason, cites)
