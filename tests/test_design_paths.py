"""docs/design.md shows the path of a stdio frame and of an HTTP POST through the code, module by module and
function by function: every step it names exists where it says."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

DESIGN = Path(__file__).resolve().parent.parent / "docs" / "design.md"
PAGES = ("The path of a stdio frame", "The path of an HTTP POST")


def steps(page: str) -> list[tuple[str, str]]:
    """(module path, name) of each line of the page's ``text`` blocks."""
    text = DESIGN.read_text()
    start = text.index(f"## {page}\n")
    end = text.find("\n## ", start + 1)
    body = text[start:end]
    found: list[tuple[str, str]] = []
    for block in re.findall(r"```text\n(.*?)```", body, re.S):
        for line in block.splitlines():
            module, name = re.split(r"\s{2,}", line.strip())[:2]
            found.append((module, name))
    return found


@pytest.mark.parametrize("page", PAGES)
def test_every_step_of_the_path_exists(page: str) -> None:
    found = steps(page)
    assert len(found) > 12
    for module, name in found:
        assert module.endswith(".py"), module
        target: object = importlib.import_module("jsonrpc_mcp." + module[: -len(".py")].replace("/", "."))
        for part in name.split("."):
            assert hasattr(target, part), f"{page}: {module} has no {name}"
            target = getattr(target, part)
        assert callable(target), f"{page}: {module} {name} is not a function or a class"
