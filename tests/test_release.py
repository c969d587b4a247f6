"""The release tooling: the CHANGELOG's Unreleased section becomes a release's notes and heading, the version is
set in both places it is written, and those places agree today. (``make release`` itself builds, checks and
smoke-tests the wheel; it takes minutes and runs as its own target.)"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

import jsonrpc_mcp

ROOT = Path(__file__).resolve().parent.parent


def changelog_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("changelog_tool", ROOT / ".ci" / "changelog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "jsonrpc_mcp").mkdir()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(ROOT / "jsonrpc_mcp" / "version.py", tmp_path / "jsonrpc_mcp" / "version.py")
    (tmp_path / "CHANGELOG.md").write_text(
        "# Changelog\n\nIntro.\n\n## Unreleased\n\n### Added\n- A thing.\n\n### Fixed\n- A bug.\n\n"
        "## 0.0.9 - 2026-01-01\n\n### Added\n- Older.\n"
    )
    return tmp_path


def test_the_unreleased_section_is_the_release_notes(checkout: Path) -> None:
    assert changelog_tool().notes(checkout) == "### Added\n- A thing.\n\n### Fixed\n- A bug.\n"


def test_cutting_a_release_moves_the_notes_under_the_version_and_sets_it(checkout: Path) -> None:
    tool = changelog_tool()
    tool.cut("1.0.0rc1", "2026-12-01", checkout)
    text = (checkout / "CHANGELOG.md").read_text()
    assert text == (
        "# Changelog\n\nIntro.\n\n## Unreleased\n\n## 1.0.0rc1 - 2026-12-01\n\n### Added\n- A thing.\n\n"
        "### Fixed\n- A bug.\n\n## 0.0.9 - 2026-01-01\n\n### Added\n- Older.\n"
    )
    assert tomllib.loads((checkout / "pyproject.toml").read_text())["project"]["version"] == "1.0.0rc1"
    assert '__version__ = "1.0.0rc1"' in (checkout / "jsonrpc_mcp" / "version.py").read_text()
    with pytest.raises(SystemExit, match="nothing to release"):  # the new Unreleased section is empty
        tool.notes(checkout)
    with pytest.raises(SystemExit, match="not a version"):
        tool.cut("1.0", "2026-12-01", checkout)


def test_the_command_line_prints_the_notes_of_this_checkout() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "changelog.py"), "notes"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("### ") and "\n## " not in done.stdout


def test_the_version_is_the_same_in_pyproject_and_the_package() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert jsonrpc_mcp.__version__ == version
