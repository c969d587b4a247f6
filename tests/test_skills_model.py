"""Skills as files (SEP-2640 over the Agent Skills format): building them from Python objects or folders, their
frontmatter read as the YAML 1.2 core schema, their entries, and the catalog's answers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from jsonrpc_mcp import InvalidParams
from jsonrpc_mcp.skills import (
    DIRECTORY_MIME_TYPE,
    InvalidSkillEntry,
    Skill,
    SkillCatalog,
    SkillEntry,
    SkillError,
    SkillFile,
    SkillFormatError,
    check_entry,
    digest_of,
    load_skills,
    parse_frontmatter,
)


def write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


PDF_MD = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\n# PDF\n"


def test_a_skill_from_python_objects_writes_frontmatter_that_reads_back_as_given() -> None:
    skill = Skill(
        "git-workflow",
        "Follow this team's Git conventions: yes, always",
        "# Git workflow\n",
        files={"references/naming.md": "Branches are <ticket>-<topic>.\n"},
        fields={"license": "MIT", "metadata": {"version": "1.0", "on": "yes"}, "allowed-tools": "Bash(git:*)"},
        prefix="acme/eng",
    )
    fields, body = parse_frontmatter(skill.files["SKILL.md"].decode())
    assert fields == skill.frontmatter
    assert fields["metadata"] == {"version": "1.0", "on": "yes"}  # strings stay strings
    assert body.strip() == "# Git workflow"
    assert skill.uri == "skill://acme/eng/git-workflow/SKILL.md"
    entry = skill.entry()
    assert entry["uri"] == skill.uri and entry["frontmatter"] == skill.frontmatter
    assert [r["uri"] for r in entry["resources"]] == [skill.uri, "skill://acme/eng/git-workflow/references/naming.md"]
    data = skill.files["SKILL.md"]
    assert entry["resources"][0] == {
        "uri": skill.uri,
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "size": len(data),
    }


def test_frontmatter_is_read_with_the_yaml_1_2_core_schema() -> None:
    text = (
        "---\nname: x\ndescription: d\nflag: yes\nswitch: on\nwhen: 2024-01-01\nhex: 0x1f\noctal: 0o17\n"
        "zero: 012\nreal: 1.5\nbool: true\nnothing: ~\n---\nbody"
    )
    fields, body = parse_frontmatter("\ufeff" + text)
    assert fields == {
        "name": "x",
        "description": "d",
        "flag": "yes",
        "switch": "on",
        "when": "2024-01-01",
        "hex": 31,
        "octal": 15,
        "zero": 12,
        "real": 1.5,
        "bool": True,
        "nothing": None,
    }
    assert body == "body"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no frontmatter\n", "must start with YAML frontmatter"),
        ("---\nname: [unclosed\n---\n", "not valid YAML"),
        ("---\n- a list\n---\n", "must be a mapping"),
    ],
)
def test_bad_frontmatter_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(SkillFormatError, match=message):
        parse_frontmatter(text)


@pytest.mark.parametrize("name", ["", "Upper", "-lead", "trail-", "dou--ble", "a" * 65, "sp ace"])
def test_skill_names_follow_the_agent_skills_rule(name: str) -> None:
    with pytest.raises(SkillFormatError, match="invalid skill name"):
        Skill(name, "d")


@pytest.mark.parametrize("path", ["../x.md", "/abs.md", "a//b.md", "a/./b.md", "back\\slash.md", "SKILL.md"])
def test_file_paths_stay_inside_the_skill(path: str) -> None:
    with pytest.raises(SkillFormatError):
        Skill("ok", "d", files={path: "x"})


def test_the_limits_every_host_accepts_are_enforced_when_a_skill_is_built() -> None:
    with pytest.raises(SkillError, match="at most 512"):
        Skill("big", "d", files={f"f{i}.md": "x" for i in range(512)})


def test_skills_load_from_a_folder_with_nested_skills_and_hidden_files_left_out(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pdf-processing/SKILL.md": PDF_MD,
            "pdf-processing/references/FORMS.md": "Forms.\n",
            "pdf-processing/.secret": "never published",
            "pdf-processing/forms/SKILL.md": "---\nname: forms\ndescription: Fill forms\n---\n",
            "acme/billing/refunds/SKILL.md": "---\nname: refunds\ndescription: Refund requests\n---\n",
            ".hidden/skill/SKILL.md": "---\nname: skill\ndescription: hidden\n---\n",
        },
    )
    skills = {s.uri: s for s in load_skills(tmp_path)}
    assert set(skills) == {
        "skill://pdf-processing/SKILL.md",
        "skill://pdf-processing/forms/SKILL.md",
        "skill://acme/billing/refunds/SKILL.md",
    }
    pdf = skills["skill://pdf-processing/SKILL.md"]
    assert set(pdf.files) == {"SKILL.md", "references/FORMS.md", "forms/SKILL.md"}  # nested files are its files
    assert pdf.files["SKILL.md"] == PDF_MD.encode()  # byte for byte


def test_a_folder_must_be_named_after_its_skill(tmp_path: Path) -> None:
    write(tmp_path, {"other/SKILL.md": PDF_MD})
    with pytest.raises(SkillFormatError, match="must be named 'pdf-processing'"):
        Skill.from_directory(tmp_path / "other")


def catalog() -> SkillCatalog:
    return SkillCatalog(
        [
            Skill("pdf-processing", "PDF", "Body\n", files={"references/FORMS.md": "F", "templates/a/b.md": "B"}),
            Skill("refunds", "Refunds", prefix="acme/billing"),
            Skill("tiny", "T"),
        ]
    )


def test_listing_pages_whole_entries_and_get_answers_minus_32602_for_an_unknown_skill() -> None:
    skills = catalog()
    first = skills.list_page(None, 2)
    assert [e["uri"] for e in first["skills"]] == [
        "skill://pdf-processing/SKILL.md",
        "skill://acme/billing/refunds/SKILL.md",
    ]
    rest = skills.list_page(first["nextCursor"], 2)
    assert [e["uri"] for e in rest["skills"]] == ["skill://tiny/SKILL.md"] and "nextCursor" not in rest
    assert skills.entry("skill://tiny/SKILL.md")["frontmatter"] == {"name": "tiny", "description": "T"}
    with pytest.raises(InvalidParams) as raised:
        skills.entry("skill://nope/SKILL.md")
    assert raised.value.data == {"uri": "skill://nope/SKILL.md"}


def test_directories_list_their_direct_children_at_every_level() -> None:
    skills = catalog()
    root = skills.directory_page("skill://pdf-processing", None, None)["resources"]
    assert [(r["uri"], r["mimeType"]) for r in root] == [
        ("skill://pdf-processing/SKILL.md", "text/markdown"),
        ("skill://pdf-processing/references", DIRECTORY_MIME_TYPE),
        ("skill://pdf-processing/templates", DIRECTORY_MIME_TYPE),
    ]
    assert root[0]["name"] == "pdf-processing" and root[0]["description"] == "PDF"
    assert [r["uri"] for r in skills.directory_page("skill://acme", None, None)["resources"]] == [
        "skill://acme/billing"
    ]
    for not_a_directory in ("skill://pdf-processing/SKILL.md", "skill://nowhere", "skill://pdf-processing/"):
        with pytest.raises(InvalidParams):
            skills.directory_page(not_a_directory, None, None)


def test_an_entry_that_breaks_sep_2640_is_never_loaded() -> None:
    good = SkillEntry(
        "skill://x/SKILL.md",
        {"name": "x", "description": "d"},
        [SkillFile("skill://x/SKILL.md", digest_of(b"a"), 1), SkillFile("skill://x/r/a.md", digest_of(b"b"), 1)],
    )
    check_entry(good)
    bad = [
        SkillEntry("skill://x/README.md", good.frontmatter, good.resources),
        SkillEntry("skill://y/SKILL.md", good.frontmatter, good.resources),
        SkillEntry(good.uri, {"name": "x"}, good.resources),
        SkillEntry(good.uri, good.frontmatter, good.resources[1:]),  # SKILL.md not listed
        SkillEntry(good.uri, good.frontmatter, [*good.resources, SkillFile("skill://other/a.md", digest_of(b""), 0)]),
        SkillEntry(good.uri, good.frontmatter, [*good.resources, SkillFile("skill://x/../y.md", digest_of(b""), 0)]),
        SkillEntry(good.uri, good.frontmatter, [good.resources[0], SkillFile("skill://x/b", "sha256:AB", 1)]),
        SkillEntry(good.uri, good.frontmatter, [*good.resources, good.resources[1]]),
        SkillEntry(
            good.uri, good.frontmatter, [good.resources[0], SkillFile("skill://x/big", digest_of(b""), 1 << 25)]
        ),
    ]
    for entry in bad:
        with pytest.raises(InvalidSkillEntry):
            check_entry(entry)
