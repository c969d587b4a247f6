"""What ``jsonrpc-mcp check`` cites: the table carried in the package is what conformance/checker_citations.py
renders from the specification's snapshot (so it never goes stale), and every shipped case cites sentences it
knows, graded by their keyword."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from jsonrpc_mcp.checker import TranscriptError, load_transcripts, parse_transcript
from jsonrpc_mcp.checker.citation_table import TABLE
from jsonrpc_mcp.checker.citations import citation, level_of

sys.path.insert(0, str(ROOT / "conformance"))
import checker_citations

TABLE_FILE = ROOT / "jsonrpc_mcp" / "checker" / "citation_table.py"


def test_the_table_is_what_the_snapshot_renders() -> None:
    assert TABLE_FILE.read_text(encoding="utf-8") == checker_citations.render(), (
        "run: python conformance/checker_citations.py render"
    )


def test_every_requirement_in_the_table_is_the_snapshots_sentence() -> None:
    snapshot = json.loads((ROOT / "conformance" / "spec" / "requirements.json").read_text(encoding="utf-8"))
    requirements = {r["id"]: r for r in snapshot["requirements"]}
    for ident, (keyword, text) in TABLE.items():
        if ident.startswith(("jsonrpc-2.0/", "decision#")):
            continue
        assert (keyword, text) == (requirements[ident]["keyword"], requirements[ident]["text"]), ident


def test_every_shipped_case_is_graded_by_the_keyword_of_what_it_cites() -> None:
    levels = {"must": ("MUST", "MUST NOT"), "should": ("SHOULD", "SHOULD NOT"), "choice": ("CHOICE",)}
    for transcript in load_transcripts():
        for _, case in transcript.cases():
            assert case.cites, f"{transcript.name}::{case.name} cites nothing"
            cited = [citation(c) for c in case.cites]
            assert all(c.keyword for c in cited), f"{transcript.name}::{case.name}: unknown {case.cites}"
            assert cited[0].keyword in levels[case.level], f"{transcript.name}::{case.name}"
            if case.level == "choice":  # our choice, recorded in docs/spec-decisions.md
                assert case.cites[0].startswith("decision#")


SAMPLE = """\
# rule: pings are answered
# spec: basic/utilities/ping
# revision: all
# cite: 2025-11-25/basic/utilities/ping#2a241dfe

=== session: initialize 2025-11-25

--- case: ping
# rule: ping answers an empty result
>>> {"jsonrpc":"2.0","id":1,"method":"ping"}
<<< {"jsonrpc":"2.0","id":1,"result":{}}

--- case: cursor
# rule: a cursor the server never issued is -32602
# cite: 2025-11-25/server/utilities/pagination#09ea0fd9
>>> {"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"x"}}
<<< {"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad cursor"}}
"""


def test_a_case_takes_its_level_from_its_citation(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text(SAMPLE, encoding="utf-8")
    t = parse_transcript(path)
    cases = {c.name: c for _, c in t.cases()}
    assert cases["ping"].cites == ["2025-11-25/basic/utilities/ping#2a241dfe"] and cases["ping"].level == "must"
    assert cases["cursor"].level == "should"
    assert level_of(["decision#2"]) == "choice" and level_of(["not-a-known-id"]) is None
    path.write_text(SAMPLE.replace("# rule: a cursor", "# level: must\n# rule: a cursor"), encoding="utf-8")
    with pytest.raises(TranscriptError, match="case cursor is must but cites a should sentence"):
        parse_transcript(path)
