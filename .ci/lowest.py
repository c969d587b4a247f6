"""The lowest versions pyproject.toml admits, for the lower-bound test run (`make test-min`).

python .ci/lowest.py extras        the extras the floor run installs, comma-separated (for pip's .[...])
python .ci/lowest.py constraints   one "name==floor" line per runtime dependency and per dependency of
                                   those extras
python .ci/lowest.py test-deps     the dev extra's test tools, less the official SDK (an interop peer
                                   whose own floors are above ours: its tests skip) and the lint tools
python .ci/lowest.py check         fails unless the installed versions are those floors
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Every extra a user installs for a feature (not docs: pinned, and not dev: the tools of this repository).
EXTRAS = ("http", "validation", "auth", "otel", "redis", "skills")
NOT_FOR_THE_FLOOR_RUN = {"mcp", "ruff", "mypy"}
_REQUIREMENT = re.compile(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*(;.*)?$")


def project() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        data: dict[str, object] = tomllib.load(file)["project"]
    return data


def floors() -> dict[str, tuple[str, str]]:
    """name -> (lowest version, environment marker or "")."""
    info = project()
    optional = info["optional-dependencies"]
    assert isinstance(optional, dict)
    requirements = list(info["dependencies"])  # type: ignore[call-overload]
    for extra in EXTRAS:
        requirements += optional[extra]
    found: dict[str, tuple[str, str]] = {}
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        if match is None:
            sys.exit(f"{requirement!r}: every runtime and extra dependency needs a '>=' floor")
        name, version, marker = match.group(1), match.group(2), (match.group(3) or "")
        found[name.lower()] = (version, marker)
    return found


def main(command: str) -> None:
    if command == "extras":
        print(",".join(EXTRAS))
    elif command == "constraints":
        for name, (version, marker) in floors().items():
            print(f"{name}=={version}{marker}")
    elif command == "test-deps":
        optional = project()["optional-dependencies"]
        assert isinstance(optional, dict)
        for requirement in optional["dev"]:
            name = re.split(r"[<>=!~; \[]", requirement, maxsplit=1)[0].lower()
            if name not in NOT_FOR_THE_FLOOR_RUN and name not in floors():
                print(requirement)
    elif command == "check":
        wrong = []
        for name, (version, marker) in floors().items():
            try:
                installed = metadata.version(name)
            except metadata.PackageNotFoundError:
                if marker:  # not for this platform
                    continue
                wrong.append(f"{name}: not installed")
                continue
            if installed != version and not installed.startswith(version + "."):
                wrong.append(f"{name}: {installed} installed, the floor is {version}")
        if wrong:
            sys.exit("not the lowest versions: " + "; ".join(wrong))
        print("testing against the floors: " + ", ".join(f"{n} {v}" for n, (v, _) in floors().items()))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
