"""docs/spec-decisions.md: each choice where the specification is silent has one number and a test (or golden
transcript) that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DECISIONS = ROOT / "docs" / "spec-decisions.md"
ROW = re.compile(r"^\| (\d+[a-z]*) \|(.*)\|\s*$")


def rows() -> list[tuple[str, str]]:
    found = []
    for line in DECISIONS.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            found.append((match.group(1), match.group(2).rsplit("|", 1)[-1]))
    return found


def test_every_decision_has_a_number_of_its_own() -> None:
    numbers = [number for number, _ in rows()]
    assert len(numbers) > 50
    assert sorted({n for n in numbers if numbers.count(n) > 1}) == []


def test_every_decision_names_a_test_that_exists() -> None:
    defined = set()
    for path in (ROOT / "tests").glob("*.py"):
        defined.update(re.findall(r"^(?:async )?def (test_\w+)", path.read_text(encoding="utf-8"), re.MULTILINE))
    missing = []
    for number, cited in rows():
        files = re.findall(r"tests/[\w/]+\.py|jsonrpc_mcp/transcripts/[\w./-]+\.txt", cited)
        names = re.findall(r"(?<![\w/])(test_\w+)(?!\w|\.py)", cited)
        missing += [f"{number}: {path}" for path in files if not (ROOT / path).is_file()]
        missing += [f"{number}: {name}" for name in names if name not in defined]
        if not files and not names and "transcript" not in cited:
            missing.append(f"{number}: no test named in {cited.strip()!r}")
    assert missing == []
