"""The spec-coverage matrix stays true: docs/spec-coverage.md is what conformance/spec_coverage.py renders from the
pinned requirement snapshot and the mapping, every mapped requirement exists, every test the mapping names exists
(its file defines it), and every transcript it names exists and has a session at the requirement's revision."""

from __future__ import annotations

import ast
import importlib.util
import json
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def coverage_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spec_coverage", ROOT / "conformance" / "spec_coverage.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def defined_tests(path: Path) -> frozenset[str]:
    """``name`` and ``Class::name`` of every test function a file defines."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            }
    return frozenset(names)


def test_the_generated_page_is_up_to_date() -> None:
    tool = coverage_tool()
    assert (ROOT / "docs" / "spec-coverage.md").read_text() == tool.render(), (
        "docs/spec-coverage.md is stale: run `python conformance/spec_coverage.py render`"
    )


def test_every_mapped_requirement_test_and_transcript_exists() -> None:
    tool = coverage_tool()
    requirements = {item["id"]: item for item in tool.load_snapshot()["requirements"]}
    mapping = tool.load_mapping()
    assert mapping, "the mapping is empty"
    for ident, entry in mapping.items():
        assert ident in requirements, f"coverage.toml maps {ident!r}, which the snapshot does not have"
        pinned = entry.get("pinned_by", [])
        assert bool(pinned) != bool(entry.get("not_applicable")), f"{ident}: pinned_by or not_applicable, one of them"
        revision = requirements[ident]["revision"]
        for ref in pinned:
            if ref.startswith("transcript:"):
                transcript = ROOT / "jsonrpc_mcp" / "transcripts" / f"{ref.removeprefix('transcript:')}.txt"
                assert transcript.is_file(), f"{ident}: no transcript {transcript.name}"
                assert revision in transcript.read_text(), f"{ident}: {transcript.name} has no {revision} session"
                continue
            path, _, name = ref.partition("::")
            assert (ROOT / path).is_file(), f"{ident}: no test file {path}"
            assert name.split("[")[0] in defined_tests(ROOT / path), f"{ident}: {path} defines no {name}"


def test_the_snapshot_is_pinned_and_its_ids_are_its_sentences() -> None:
    tool = coverage_tool()
    snapshot = json.loads((ROOT / "conformance" / "spec" / "requirements.json").read_text())
    assert len(snapshot["commit"]) == 40
    revisions = {item["revision"] for item in snapshot["requirements"]}
    assert revisions == set(tool.REVISIONS)
    for item in snapshot["requirements"]:
        assert item["id"] == tool.requirement_id(item["revision"], item["page"], item["text"])
        assert tool.KEYWORD.search(item["text"]), item["id"]


def test_whom_a_requirement_binds_is_read_from_the_parties_it_names() -> None:
    roles = coverage_tool().roles
    assert roles("Servers MUST declare the tools capability") == "server"
    assert roles("The client MUST send an initialized notification") == "client"
    assert roles("Clients and servers MUST support JSON Schema 2020-12") == "server, client"
    assert roles("Requests MUST include a string or integer ID.") == "server, client"
    assert roles("Authorization servers MUST support PKCE") == "authorization server"


def test_the_mapping_files_are_read_together_and_a_requirement_mapped_twice_is_refused(tmp_path: Path) -> None:
    tool = coverage_tool()
    first = tmp_path / "coverage.toml"
    first.write_text('[requirement."2025-11-25/basic/index#aaaaaaaa"]\nnot_applicable = "a"\n')
    area = tmp_path / "coverage"
    area.mkdir()
    (area / "one.toml").write_text('[requirement."2025-11-25/basic/index#bbbbbbbb"]\nnot_applicable = "b"\n')
    tool.MAPPING, tool.MAPPING_DIR, tool.ROOT = first, area, tmp_path
    assert set(tool.load_mapping()) == {"2025-11-25/basic/index#aaaaaaaa", "2025-11-25/basic/index#bbbbbbbb"}
    (area / "two.toml").write_text('[requirement."2025-11-25/basic/index#aaaaaaaa"]\nnot_applicable = "c"\n')
    try:
        tool.load_mapping()
    except ValueError as error:
        assert "mapped twice" in str(error)
    else:
        raise AssertionError("a requirement mapped in two files was accepted")
