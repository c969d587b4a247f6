"""A skill as files: ``SKILL.md`` (YAML frontmatter and instructions) and its supporting files (L7).

What a skill *is* is the Agent Skills format: a directory whose ``SKILL.md`` starts with YAML frontmatter naming
it (``name``, ``description``; ``license``, ``compatibility``, ``metadata``, ``allowed-tools`` and whatever else
the author wrote pass through). What SEP-2640 adds on top, and this module computes, is how it is addressed and
described over MCP: the ``skill://<prefix>/<name>/<file>`` URIs, and the entry with the frontmatter as JSON and
the ``{uri, digest, size}`` of every file.

Frontmatter is read with PyYAML (the ``skills`` extra) set to the YAML 1.2 core schema, the one JavaScript hosts
parse it with: ``yes``, ``on`` and ``2024-01-01`` stay strings, ``0x1f`` is 31, so that the frontmatter a server
publishes is what any host reads back from the file. A skill built from Python objects writes its frontmatter
itself (each value in JSON, which is YAML) and needs no extra.
"""

from __future__ import annotations

import hashlib
import math
import mimetypes
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Final

import msgspec

from ..errors import MissingExtra

__all__ = (
    "SKILLS_EXTENSION",
    "SKILL_FILE",
    "SKILL_SCHEME",
    "DIRECTORY_MIME_TYPE",
    "MAX_FILES",
    "MAX_TOTAL_BYTES",
    "SkillError",
    "SkillFormatError",
    "Skill",
    "load_skills",
    "digest_of",
    "parse_frontmatter",
    "render_frontmatter",
    "frontmatter_of",
    "check_name",
)

#: The extension identifier (SEP-2640).
SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
SKILL_FILE: Final = "SKILL.md"
SKILL_SCHEME: Final = "skill://"
#: The MIME type of a directory resource (``resources/directory/read``).
DIRECTORY_MIME_TYPE: Final = "inode/directory"
#: The per-skill limits every host accepts: files (``SKILL.md`` included) and their total size in bytes.
MAX_FILES: Final = 512
MAX_TOTAL_BYTES: Final = 16 * 1024 * 1024

#: The Agent Skills naming rule: 1-64 of a-z 0-9 and "-", no leading, trailing or doubled hyphen.
_NAME: Final = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
#: An RFC 3986 path segment (the first one is the URI's authority: a reg-name, the same characters).
_SEGMENT: Final = re.compile(r"^(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+$")
_FRONTMATTER: Final = re.compile(r"^---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)
_PLAIN_KEY: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_encode: Final = msgspec.json.Encoder().encode
_TEXT_TYPES: Final = {".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain"}


class SkillError(Exception):
    """A skill that cannot be published or used (the message says which and why)."""


class SkillFormatError(SkillError):
    """A ``SKILL.md`` or a skill directory that breaks the Agent Skills format."""


def digest_of(data: bytes) -> str:
    """``sha256:{64 lowercase hex}`` of the raw bytes (the digest of a skill file)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_name(name: str) -> str:
    """``name`` if it is a valid skill name (1-64 of a-z 0-9 and -, no leading, trailing or doubled hyphen)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise SkillFormatError(
            f"invalid skill name {name!r}: 1-64 characters of a-z, 0-9 and '-', not starting or ending with '-', "
            "and no '--'"
        )
    return name


# --- frontmatter ---------------------------------------------------------------------------------------------


def _core_schema_loader() -> Any:
    """A PyYAML safe loader resolving plain scalars by the YAML 1.2 core schema (null, bool, int, float; no
    timestamps, no ``yes``/``on``, no octal by a leading zero)."""
    try:
        import yaml
    except ImportError:
        raise SkillError(f"reading SKILL.md frontmatter needs PyYAML: {MissingExtra.install('skills')}") from None

    class CoreSchemaLoader(yaml.SafeLoader):
        pass

    CoreSchemaLoader.yaml_implicit_resolvers = {}
    resolvers = (
        ("null", r"^(?:~|null|Null|NULL|)$", "~nN"),
        ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
        ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
        (
            "float",
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
            "-+0123456789.",
        ),
    )
    for tag, pattern, first in resolvers:
        starts = [*first, ""] if tag == "null" else list(first)
        CoreSchemaLoader.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", re.compile(pattern), starts)

    def construct_int(loader: Any, node: Any) -> int:
        text = loader.construct_scalar(node)
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text, 10)

    def construct_float(loader: Any, node: Any) -> float:
        text = loader.construct_scalar(node).lower()
        if text.endswith(".inf"):
            return -math.inf if text.startswith("-") else math.inf
        if text == ".nan":
            return math.nan
        return float(text)

    CoreSchemaLoader.add_constructor("tag:yaml.org,2002:int", construct_int)
    CoreSchemaLoader.add_constructor("tag:yaml.org,2002:float", construct_float)
    return CoreSchemaLoader


_LOADER: Any = None


def parse_frontmatter(markdown: str) -> tuple[dict[str, Any], str]:
    """The frontmatter of a ``SKILL.md`` (as JSON-able data) and the body after it.

    Raises :class:`SkillFormatError` when the file does not start with a ``---`` block of YAML that is a mapping
    (a UTF-8 byte order mark before it is allowed), or when a value has no JSON form (a date with an explicit
    tag, binary data).
    """
    global _LOADER
    text = markdown[1:] if markdown.startswith("\ufeff") else markdown
    match = _FRONTMATTER.match(text)
    if match is None:
        raise SkillFormatError("SKILL.md must start with YAML frontmatter between two '---' lines")
    if _LOADER is None:
        _LOADER = _core_schema_loader()
    import yaml

    try:
        data = yaml.load(match.group(1), Loader=_LOADER)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        raise SkillFormatError(f"the SKILL.md frontmatter is not valid YAML{line}") from None
    if not isinstance(data, dict):
        raise SkillFormatError("the SKILL.md frontmatter must be a mapping of fields (name: ..., description: ...)")
    try:
        fields: dict[str, Any] = msgspec.json.decode(_encode(data))
    except (TypeError, msgspec.EncodeError):
        raise SkillFormatError("the SKILL.md frontmatter holds a value with no JSON form") from None
    if any(not isinstance(key, str) for key in data):
        raise SkillFormatError("the SKILL.md frontmatter's field names must be strings")
    return fields, text[match.end() :]


def render_frontmatter(fields: Mapping[str, Any]) -> str:
    """``fields`` as a frontmatter block: one ``key: value`` line each, the value in JSON (which is YAML, read
    back the same by every YAML 1.2 parser), ending with the closing ``---`` line."""
    lines = ["---"]
    for key, value in fields.items():
        name = key if _PLAIN_KEY.match(key) else _encode(key).decode()
        lines.append(f"{name}: {_encode(value).decode()}")
    lines.append("---")
    return "\n".join(lines) + "\n"


def frontmatter_of(markdown: str | bytes) -> dict[str, Any]:
    """The frontmatter of a ``SKILL.md``, checked: ``name`` a valid skill name, ``description`` a non-empty
    string."""
    text = markdown.decode("utf-8") if isinstance(markdown, bytes) else markdown
    fields, _ = parse_frontmatter(text)
    check_name(fields.get("name"))  # type: ignore[arg-type]
    description = fields.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("the SKILL.md frontmatter needs a non-empty 'description'")
    return fields


# --- skills --------------------------------------------------------------------------------------------------


def _clean_path(path: str) -> str:
    """A supporting file's path inside the skill: relative, ``/``-separated, no ``.``/``..``/empty segments."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in path:
        raise SkillFormatError(f"invalid file path {path!r}: use a relative path like 'references/guide.md'")
    bad = [p for p in parts if not _SEGMENT.match(p)]
    if bad:
        raise SkillFormatError(f"invalid file path {path!r}: {bad[0]!r} is not a valid URI path segment")
    return path


def _clean_prefix(prefix: str) -> str:
    prefix = prefix.strip("/")
    if not prefix:
        return ""
    for part in prefix.split("/"):
        if part in ("", ".", "..") or not _SEGMENT.match(part):
            raise SkillFormatError(f"invalid skill prefix {prefix!r}: {part!r} is not a valid URI path segment")
    return prefix


def mime_type_of(path: str) -> str:
    """The MIME type a skill file is served with (``text/markdown`` for ``.md``)."""
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in _TEXT_TYPES:
        return _TEXT_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(path, strict=False)
    return guessed or "application/octet-stream"


class Skill:
    """A skill: its ``SKILL.md`` and supporting files, addressed as ``skill://<prefix>/<name>/<file>``.

    From Python objects::

        Skill(
            "git-workflow",
            "Follow this team's Git conventions for branching and commits",
            "# Git workflow\\n\\nBranch from main; see references/naming.md.\\n",
            files={"references/naming.md": "Branches are named <ticket>-<topic>.\\n"},
            fields={"license": "MIT"},
        )

    or from a folder (:meth:`from_directory`), or from the text of a ``SKILL.md`` (:meth:`from_markdown`).

    :param name: the skill's name (also the last segment of its path).
    :param description: what the skill does and when to use it.
    :param instructions: the markdown body of ``SKILL.md``, after the frontmatter.
    :param files: supporting files, by path relative to the skill's root (``str`` is UTF-8 text).
    :param fields: more frontmatter fields (``license``, ``metadata``, ``allowed-tools``...).
    :param prefix: the organising path before the name (``acme/billing``; none by default).
    """

    def __init__(
        self,
        name: str,
        description: str,
        instructions: str = "",
        *,
        files: Mapping[str, str | bytes] | None = None,
        fields: Mapping[str, Any] | None = None,
        prefix: str = "",
    ) -> None:
        check_name(name)
        if not isinstance(description, str) or not description.strip():
            raise SkillFormatError(f"skill {name!r} needs a non-empty description")
        frontmatter: dict[str, Any] = {"name": name, "description": description}
        for key, value in (fields or {}).items():
            if key in ("name", "description"):
                raise SkillFormatError(f"pass the skill's {key} as its own argument, not in fields")
            frontmatter[key] = value
        try:
            frontmatter = msgspec.json.decode(_encode(frontmatter))
        except (TypeError, msgspec.EncodeError):
            raise SkillFormatError(f"skill {name!r}: a frontmatter field has no JSON form") from None
        body = instructions if instructions.startswith("\n") or not instructions else "\n" + instructions
        skill_md = (render_frontmatter(frontmatter) + body).encode("utf-8")
        self._init(frontmatter, skill_md, files or {}, prefix)

    def _init(
        self, frontmatter: dict[str, Any], skill_md: bytes, files: Mapping[str, str | bytes], prefix: str
    ) -> None:
        self.frontmatter = frontmatter
        self.name: str = frontmatter["name"]
        self.description: str = frontmatter["description"]
        self.prefix = _clean_prefix(prefix)
        self.path = f"{self.prefix}/{self.name}" if self.prefix else self.name
        content: dict[str, bytes] = {SKILL_FILE: skill_md}
        for path, data in files.items():
            if _clean_path(path) == SKILL_FILE:
                raise SkillFormatError(f"skill {self.name!r}: SKILL.md is written from the frontmatter, not a file")
            content[path] = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if len(content) > MAX_FILES:
            raise SkillError(f"skill {self.name!r} has {len(content)} files; hosts accept at most {MAX_FILES}")
        total = sum(len(data) for data in content.values())
        if total > MAX_TOTAL_BYTES:
            raise SkillError(f"skill {self.name!r} holds {total} bytes; hosts accept at most {MAX_TOTAL_BYTES}")
        self.files: Mapping[str, bytes] = content

    @classmethod
    def from_markdown(
        cls, markdown: str | bytes, *, files: Mapping[str, str | bytes] | None = None, prefix: str = ""
    ) -> Skill:
        """A skill from the text of its ``SKILL.md`` (kept byte for byte; the frontmatter read from it)."""
        raw = markdown.encode("utf-8") if isinstance(markdown, str) else bytes(markdown)
        try:
            frontmatter = frontmatter_of(raw)
        except UnicodeDecodeError:
            raise SkillFormatError("SKILL.md is not UTF-8 text") from None
        skill = cls.__new__(cls)
        skill._init(frontmatter, raw, files or {}, prefix)
        return skill

    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str], *, prefix: str = "") -> Skill:
        """The skill in ``directory``: its ``SKILL.md`` and every other regular file below it (hidden files and
        folders, whose names start with ``.``, left out; symbolic links followed only when they stay inside).
        The folder's name must be the skill's name."""
        root = Path(directory)
        skill_md = root / SKILL_FILE
        if not skill_md.is_file():
            raise SkillFormatError(f"{root} has no {SKILL_FILE}")
        files = {path: data for path, data in _walk(root) if path != SKILL_FILE}
        try:
            skill = cls.from_markdown(skill_md.read_bytes(), files=files, prefix=prefix)
        except SkillFormatError as exc:
            raise SkillFormatError(f"{skill_md}: {exc}") from None
        if root.resolve().name != skill.name:
            raise SkillFormatError(f"{root}: the folder of skill {skill.name!r} must be named {skill.name!r}")
        return skill

    # --- how it is addressed -----------------------------------------------------------------------------

    @property
    def root_uri(self) -> str:
        """The skill's directory, ``skill://<path>`` (no trailing slash)."""
        return SKILL_SCHEME + self.path

    @property
    def uri(self) -> str:
        """The URI of its ``SKILL.md`` (the skill's identity on its server)."""
        return f"{self.root_uri}/{SKILL_FILE}"

    def file_uri(self, path: str) -> str:
        return f"{self.root_uri}/{path}"

    def entry(self) -> dict[str, Any]:
        """The skill's entry (``skills/list``, ``skills/get``): its URI, frontmatter, and every file's
        ``{uri, digest, size}``, ``SKILL.md`` first."""
        return {
            "uri": self.uri,
            "frontmatter": self.frontmatter,
            "resources": [
                {"uri": self.file_uri(path), "digest": digest_of(data), "size": len(data)}
                for path, data in self.files.items()
            ],
        }

    def __repr__(self) -> str:
        return f"<Skill {self.uri} ({len(self.files)} files)>"


def _walk(root: Path) -> Iterator[tuple[str, bytes]]:
    resolved = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            if filename.startswith("."):
                continue
            full = Path(dirpath) / filename
            real = full.resolve()
            if not real.is_file() or (real != resolved and resolved not in real.parents):
                continue  # a link out of the skill (or to no file) is not part of it
            yield full.relative_to(root).as_posix(), real.read_bytes()


def load_skills(directory: str | os.PathLike[str], *, prefix: str = "") -> list[Skill]:
    """Every skill under ``directory``: each folder holding a ``SKILL.md``, at any depth, its path below
    ``directory`` (plus ``prefix``) becoming its URI's path. A skill inside another is published as well (its
    files are also files of the enclosing skill). Hidden folders are skipped."""
    root = Path(directory)
    if not root.is_dir():
        raise SkillError(f"{root} is not a directory")
    base = _clean_prefix(prefix)
    found: list[Skill] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if SKILL_FILE not in filenames:
            continue
        here = Path(dirpath)
        parent = here.parent.relative_to(root).as_posix() if here != root else ""
        path = "/".join(p for p in (base, "" if parent == "." else parent) if p)
        found.append(Skill.from_directory(here, prefix=path))
    return found
