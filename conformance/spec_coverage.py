"""The spec-coverage matrix: each MUST and SHOULD of each revision's specification pages and schema, mapped to the
test or transcript that pins it (docs/spec-coverage.md).

    python conformance/spec_coverage.py extract SPEC_CHECKOUT   re-read the requirements from a checkout of
                                                                 modelcontextprotocol/modelcontextprotocol into
                                                                 conformance/spec/requirements.json (a pinned
                                                                 snapshot: CI has no access to the spec's repository)
    python conformance/spec_coverage.py render                  write docs/spec-coverage.md from the snapshot and
                                                                 the mapping: conformance/spec/coverage.toml and
                                                                 the files of conformance/spec/coverage/ (one an
                                                                 area, so that areas are mapped side by side)

A requirement's id is ``<revision>/<page>#<8 hex digits of its sentence's hash>``: it stays the same as long as the
sentence does, whatever moves around it. The mapping names, for an id, the test node ids
(``tests/test_x.py::test_name``) and golden transcripts (``transcript:<name>``) that pin it, or why it does not
concern this implementation (``not_applicable``). A test keeps the mapping and the generated page true.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "conformance" / "spec" / "requirements.json"
MAPPING = ROOT / "conformance" / "spec" / "coverage.toml"
MAPPING_DIR = ROOT / "conformance" / "spec" / "coverage"
PAGE = ROOT / "docs" / "spec-coverage.md"
REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
#: Pages that state no requirement of an implementation (history, indexes, the schema's rendering).
SKIPPED_PAGES = {"changelog", "schema", "index", "deprecated"}
KEYWORD = re.compile(r"\b(MUST NOT|MUST|SHALL NOT|SHALL|REQUIRED|SHOULD NOT|SHOULD)\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*_(\[])")


# --- extraction -------------------------------------------------------------------------------------------------


def _clean(text: str) -> str:
    text = re.sub(r"<[^>]+>", " ", text)  # JSX and HTML tags (their text content stays)
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)  # links: keep the words
    text = re.sub(r"\[([^\]]+)\]\[[^\]]*\]", r"\1", text)  # reference-style links too
    text = re.sub(r"[*_]{1,2}([^*_]+)[*_]{1,2}", r"\1", text)  # emphasis
    return re.sub(r"\s+", " ", text).strip()


def _page_sentences(source: str) -> list[tuple[str, str]]:
    """(section, sentence) for each sentence of an .mdx page, outside code blocks and front matter."""
    source = re.sub(r"\A---\n.*?\n---\n", "", source, flags=re.S)
    source = re.sub(r"```.*?```", "", source, flags=re.S)
    out: list[tuple[str, str]] = []
    section = ""
    paragraph: list[str] = []

    def flush() -> None:
        text = _clean(" ".join(paragraph))
        paragraph.clear()
        out.extend((section, sentence) for sentence in _SENTENCE_END.split(text) if sentence)

    for line in source.splitlines():
        heading = re.match(r"^#{1,6}\s+(.*)", line)
        if heading:
            flush()
            section = _clean(heading.group(1))
        elif not line.strip() or re.match(r"^\s*([-*]|\d+\.)\s", line) or line.lstrip().startswith("|"):
            flush()  # a blank line, a list item or a table row starts a new sentence group
            if line.strip():
                paragraph.append(re.sub(r"^\s*([-*]|\d+\.)\s+", "", line).replace("|", " "))
        else:
            paragraph.append(line)
    flush()
    return out


def _schema_sentences(source: str) -> list[tuple[str, str]]:
    """(the declaration documented, sentence) for each sentence of a doc comment in schema.ts."""
    out: list[tuple[str, str]] = []
    for match in re.finditer(
        r"/\*\*(.*?)\*/\s*(?:export\s+)?(?:interface|type|const)?\s*([A-Za-z_][\w]*)?", source, re.S
    ):
        body = re.sub(r"^\s*\*\s?", "", match.group(1), flags=re.M)
        body = re.sub(r"@\w+.*", "", body)
        out.extend((match.group(2) or "", sentence) for sentence in _SENTENCE_END.split(_clean(body)) if sentence)
    return out


def roles(sentence: str) -> str:
    """Whom a requirement binds, from the parties it names: server, client, both, or another party only."""
    text = sentence.lower()
    others = re.sub(r"authorization servers?|resource owners?|resource servers?", " ", text)
    server = bool(re.search(r"\bservers?\b", others))
    client = bool(re.search(r"\b(clients?|hosts?)\b", others))
    if server and client:
        return "server, client"
    if server:
        return "server"
    if client:
        return "client"
    if re.search(r"authorization servers?", text):
        return "authorization server"
    return "server, client"  # stated of every implementation (message formats, ids, encodings)


def requirement_id(revision: str, page: str, sentence: str) -> str:
    return f"{revision}/{page}#{hashlib.sha256(sentence.encode()).hexdigest()[:8]}"


def extract(checkout: Path) -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    requirements: list[dict[str, str]] = []
    seen: set[str] = set()
    for revision in REVISIONS:
        sources: list[tuple[str, list[tuple[str, str]]]] = []
        base = checkout / "docs" / "specification" / revision
        for path in sorted(base.rglob("*.mdx")):
            page = str(path.relative_to(base).with_suffix(""))
            if path.stem in SKIPPED_PAGES and "/" not in page:
                continue
            sources.append((page, _page_sentences(path.read_text())))
        schema = checkout / "schema" / revision / "schema.ts"
        if schema.is_file():
            sources.append(("schema", _schema_sentences(schema.read_text())))
        for page, sentences in sources:
            for section, sentence in sentences:
                keyword = KEYWORD.search(sentence)
                if keyword is None:
                    continue
                ident = requirement_id(revision, page, sentence)
                if ident in seen:  # the same sentence twice on a page: one requirement
                    continue
                seen.add(ident)
                requirements.append(
                    {
                        "id": ident,
                        "revision": revision,
                        "page": page,
                        "section": section,
                        "keyword": keyword.group(1),
                        "roles": roles(sentence),
                        "text": sentence,
                    }
                )
    return {
        "source": "github.com/modelcontextprotocol/modelcontextprotocol",
        "commit": commit,
        "note": "Requirement sentences quoted from the Model Context Protocol specification (docs/specification/"
        "<revision>/ and schema/<revision>/schema.ts) at this commit, for the coverage matrix.",
        "requirements": requirements,
    }


# --- rendering --------------------------------------------------------------------------------------------------


def load_snapshot() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SNAPSHOT.read_text())
    return data


def mapping_files() -> list[Path]:
    return [MAPPING, *sorted(MAPPING_DIR.glob("*.toml"))]


def load_mapping() -> dict[str, dict[str, Any]]:
    """Every mapping file's requirements together; a requirement mapped in two files is an error."""
    mapping: dict[str, dict[str, Any]] = {}
    for path in mapping_files():
        with path.open("rb") as file:
            entries: dict[str, dict[str, Any]] = tomllib.load(file).get("requirement", {})
        for ident, entry in entries.items():
            if ident in mapping:
                raise ValueError(f"{ident} is mapped twice: in {path.relative_to(ROOT)} and in another mapping file")
            mapping[ident] = entry
    return mapping


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    snapshot = load_snapshot()
    mapping = load_mapping()
    requirements = snapshot["requirements"]
    status: dict[str, str] = {}
    for item in requirements:
        entry = mapping.get(item["id"], {})
        if entry.get("pinned_by"):
            status[item["id"]] = "covered"
        elif entry.get("not_applicable"):
            status[item["id"]] = "not applicable"
        else:
            status[item["id"]] = "not covered"
    lines = [
        "# Spec coverage",
        "",
        "Each MUST and SHOULD (with MUST NOT, SHOULD NOT, SHALL and REQUIRED) of each revision's specification",
        "pages and schema, with the test or golden transcript that pins it. Generated by",
        "`python conformance/spec_coverage.py render` from the pinned requirement snapshot",
        "`conformance/spec/requirements.json` (the specification's",
        f"repository at `{snapshot['commit'][:12]}`) and the mapping, `conformance/spec/coverage.toml` and",
        "`conformance/spec/coverage/*.toml`;",
        "`tests/test_spec_coverage.py` fails when this page is stale or the mapping names a test or transcript that",
        "does not exist. Do not edit it by hand.",
        "",
        "Whom a requirement binds is read from the parties its sentence names (a sentence that names none binds every",
        'implementation). "Not covered" means no test is mapped to it yet, not that the behaviour is missing.',
        "",
        "| revision | requirements | covered | not applicable | not covered |",
        "|---|---|---|---|---|",
    ]
    by_revision: dict[str, list[dict[str, str]]] = defaultdict(list)
    for item in requirements:
        by_revision[item["revision"]].append(item)
    for revision in REVISIONS:
        counts = Counter(status[item["id"]] for item in by_revision[revision])
        lines.append(
            f"| {revision} | {len(by_revision[revision])} | {counts['covered']} | {counts['not applicable']} "
            f"| {counts['not covered']} |"
        )
    for revision in REVISIONS:
        lines += ["", f"## {revision}"]
        pages: dict[str, list[dict[str, str]]] = defaultdict(list)
        for item in by_revision[revision]:
            pages[item["page"]].append(item)
        for page, items in pages.items():
            lines += ["", f"### {page}", "", "| id | binds | requirement | pinned by |", "|---|---|---|---|"]
            for item in items:
                entry = mapping.get(item["id"], {})
                if entry.get("pinned_by"):
                    pinned = "<br>".join(f"`{ref}`" for ref in entry["pinned_by"])
                elif entry.get("not_applicable"):
                    pinned = "not applicable: " + _cell(entry["not_applicable"])
                else:
                    pinned = "**not covered**"
                short = item["id"].rsplit("#", 1)[1]
                lines.append(f"| `{short}` | {item['roles']} | {_cell(item['text'])} | {pinned} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    if argv[:1] == ["extract"] and len(argv) == 2:
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(json.dumps(extract(Path(argv[1])), indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {SNAPSHOT.relative_to(ROOT)}")
    elif argv[:1] == ["render"]:
        PAGE.write_text(render())
        print(f"wrote {PAGE.relative_to(ROOT)}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
