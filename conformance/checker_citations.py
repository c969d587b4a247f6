"""The sentences ``jsonrpc-mcp check`` cites, carried inside the package (``jsonrpc_mcp/checker/citation_table.py``):
the requirements the shipped transcripts name (``# cite:``) with their keyword and text from
conformance/spec/requirements.json, the JSON-RPC 2.0 sections of the envelope rules, and the entries of
docs/spec-decisions.md for the cases where the specification leaves a choice.

    python conformance/checker_citations.py render    write the table (tests/test_checker_citations.py checks it
                                                       is what this renders, so it never goes stale)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "conformance" / "spec" / "requirements.json"
DECISIONS = ROOT / "docs" / "spec-decisions.md"
TRANSCRIPTS = ROOT / "jsonrpc_mcp" / "transcripts"
TABLE = ROOT / "jsonrpc_mcp" / "checker" / "citation_table.py"

#: JSON-RPC 2.0 (jsonrpc.org/specification), by section: the sentences the envelope cases test.
JSONRPC: dict[str, tuple[str, str]] = {
    "jsonrpc-2.0/4": (
        "MUST",
        'A Request object: "jsonrpc" MUST be exactly "2.0"; "method" is a String; "params", if present, MUST be '
        "a Structured value; an id is a String, a Number or Null.",
    ),
    "jsonrpc-2.0/4.1": (
        "MUST NOT",
        "The Server MUST NOT reply to a Notification, including those that are within a batch request.",
    ),
    "jsonrpc-2.0/5": (
        "MUST",
        "When a rpc call is made, the Server MUST reply with a Response, except for in the case of Notifications.",
    ),
    "jsonrpc-2.0/5#id": (
        "MUST",
        "If there was an error in detecting the id in the Request object (e.g. Parse error/Invalid Request), it "
        "MUST be Null.",
    ),
    "jsonrpc-2.0/5.1": (
        "MUST",
        "When a rpc call encounters an error, the Response Object MUST contain the error member with a value "
        "that is a Object (code, message, data); the pre-defined errors: -32700 Parse error, -32600 Invalid "
        "Request, -32601 Method not found, -32602 Invalid params, -32603 Internal error.",
    ),
    "jsonrpc-2.0/5.1#codes": (
        "SHOULD",
        "The pre-defined errors (-32700 Parse error, -32600 Invalid Request, -32601 Method not found, -32602 "
        "Invalid params, -32603 Internal error) are a table without a keyword: another code for the same fault "
        "is graded as a SHOULD (docs/spec-decisions.md #7g).",
    ),
    "jsonrpc-2.0/6": (
        "MUST",
        "If the batch rpc call itself fails to be recognized as an valid JSON or as an Array with at least one "
        "value, the response from the Server MUST be a single Response object.",
    ),
    "jsonrpc-2.0/6#array": (
        "SHOULD",
        "The Server should respond with an Array containing the corresponding Response objects, after all of the "
        "batch Request objects have been processed.",
    ),
    "jsonrpc-2.0/6#empty": (
        "MUST NOT",
        "If there are no Response objects contained within the Response array as it is to be sent to the client, "
        "the server MUST NOT return an empty Array and should return nothing at all.",
    ),
}
#: Cited by the checker itself, not by a transcript: an error reply with "id": null (decision 2), or with
#: another code than expected (decision 7g), the replies of a batch as separate messages.
ALWAYS = ("jsonrpc-2.0/5#id", "decision#2", "jsonrpc-2.0/5.1#codes", "decision#7g", "jsonrpc-2.0/6#array")
_CITE = re.compile(r"^# cite:\s*(.*)$", re.MULTILINE)
_ROW = re.compile(r"^\| (\d+[a-z]*) \| (.*?) \|", re.MULTILINE)


def cited() -> list[str]:
    found = set(ALWAYS)
    for path in TRANSCRIPTS.glob("*.txt"):
        for line in _CITE.findall(path.read_text(encoding="utf-8")):
            found.update(line.split())
    return sorted(found)


def table() -> dict[str, tuple[str, str]]:
    requirements = {r["id"]: r for r in json.loads(SNAPSHOT.read_text(encoding="utf-8"))["requirements"]}
    decisions = dict(_ROW.findall(DECISIONS.read_text(encoding="utf-8")))
    out: dict[str, tuple[str, str]] = {}
    for ident in cited():
        if ident in JSONRPC:
            out[ident] = JSONRPC[ident]
        elif ident.startswith("decision#") and ident.removeprefix("decision#") in decisions:
            out[ident] = ("CHOICE", decisions[ident.removeprefix("decision#")].replace("`", ""))
        elif ident in requirements:
            out[ident] = (requirements[ident]["keyword"], requirements[ident]["text"])
        else:
            raise SystemExit(f"a transcript cites {ident}, which is no requirement, JSON-RPC section or decision")
    return out


def _quote(text: str) -> str:
    """A string literal as ruff formats it: double quotes, unless single ones need fewer escapes."""
    if '"' in text and "'" not in text:
        return "'" + text.replace("\\", "\\\\") + "'"
    return json.dumps(text, ensure_ascii=False)


def _parts(text: str, width: int = 96) -> list[str]:
    """``text`` cut at spaces into pieces that fit a line (implicitly concatenated literals)."""
    if len(_quote(text)) <= 111:  # it fits on one line (ruff would join the pieces again)
        return [text]
    parts: list[str] = []
    while len(text) > width:
        cut = text.rfind(" ", 0, width) + 1 or width
        parts.append(text[:cut])
        text = text[cut:]
    return [*parts, text]


def render() -> str:
    lines = [
        '"""The sentences ``jsonrpc-mcp check`` cites: id -> (keyword, text) (L7). Generated by',
        "``python conformance/checker_citations.py render`` from conformance/spec/requirements.json, the JSON-RPC 2.0",
        'sections of the envelope rules and docs/spec-decisions.md; do not edit."""',
        "",
        "# ruff: noqa: RUF001 (the sentences are quoted as the specification writes them, dashes included)",
        "",
        "from typing import Final",
        "",
        '__all__ = ("TABLE",)',
        "",
        "TABLE: Final[dict[str, tuple[str, str]]] = {",
    ]
    for ident, (keyword, text) in table().items():
        lines.append(f"    {_quote(ident)}: (")
        lines.append(f"        {_quote(keyword)},")
        lines.extend(f"        {_quote(part)}" for part in _parts(text))
        lines[-1] += ","
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv != ["render"]:
        sys.stderr.write(__doc__ or "")
        return 2
    TABLE.write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
