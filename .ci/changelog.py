"""The CHANGELOG's Unreleased section, as a release's notes.

python .ci/changelog.py notes              print the Unreleased section's body (fails when it is empty)
python .ci/changelog.py cut VERSION [DATE] move it under "## VERSION - DATE" (today by default), leave an
                                           empty Unreleased section above it, and set VERSION in
                                           pyproject.toml and jsonrpc_mcp/__init__.py
"""

from __future__ import annotations

import datetime
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_UNRELEASED = re.compile(r"^## Unreleased[ \t]*\n(.*?)(?=^## |\Z)", re.M | re.S)
_VERSION = re.compile(r"^\d+\.\d+\.\d+((a|b|rc)\d+)?$")


def unreleased(text: str) -> re.Match[str]:
    match = _UNRELEASED.search(text)
    if match is None or not match.group(1).strip():
        sys.exit("CHANGELOG.md has no Unreleased section with entries: nothing to release")
    return match


def notes(root: Path = ROOT) -> str:
    return unreleased((root / "CHANGELOG.md").read_text()).group(1).strip() + "\n"


def cut(version: str, date: str, root: Path = ROOT) -> None:
    if not _VERSION.match(version):
        sys.exit(f"{version!r} is not a version (1.2.3, 1.0.0rc1)")
    changelog = root / "CHANGELOG.md"
    text = changelog.read_text()
    match = unreleased(text)
    body = match.group(1).strip()
    changelog.write_text(
        text[: match.start()] + f"## Unreleased\n\n## {version} - {date}\n\n{body}\n\n" + text[match.end() :]
    )
    for path, pattern, replacement in (
        (root / "pyproject.toml", r'^version = "[^"]*"$', f'version = "{version}"'),
        (root / "jsonrpc_mcp" / "version.py", r'^__version__ = "[^"]*"$', f'__version__ = "{version}"'),
    ):
        source = path.read_text()
        updated, count = re.subn(pattern, replacement, source, count=1, flags=re.M)
        if count != 1:
            sys.exit(f"no version line in {path}")
        path.write_text(updated)
    print(f"CHANGELOG.md: {version} - {date}; pyproject.toml and jsonrpc_mcp.__version__ set to {version}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["notes"]:
        sys.stdout.write(notes())
    elif argv[:1] == ["cut"] and len(argv) in (2, 3):
        cut(argv[1], argv[2] if len(argv) == 3 else datetime.date.today().isoformat())
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
