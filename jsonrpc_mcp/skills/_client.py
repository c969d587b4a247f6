"""The host side of skills: list and get entries, load a skill, read its files — verified (L7).

Nothing is fetched ahead of need: listing reads entries only; :meth:`SkillsClient.load` reads ``SKILL.md`` and
nothing else; a supporting file is read when :meth:`LoadedSkill.read` asks for it. Every file read is checked
against the entry the skill was loaded under (the *held entry*): its size first, then its SHA-256 digest, and for
``SKILL.md`` its frontmatter, field by field. A file the entry does not list is not read at all. Any mismatch
raises :class:`SkillVerificationError` and the content is not returned; :meth:`SkillsClient.get` fetches a fresh
entry to load again.

Digests prove that the entry and the content agree, not that either deserves trust: skill content is untrusted
input for the model, whatever its digest.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
from msgspec import UNSET

from ..errors import MethodNotFound
from ..mcp import types as t
from ._model import (
    DIRECTORY_MIME_TYPE,
    MAX_FILES,
    MAX_TOTAL_BYTES,
    SKILL_FILE,
    SKILLS_EXTENSION,
    SkillError,
    SkillFormatError,
    check_name,
    digest_of,
    parse_frontmatter,
)

if TYPE_CHECKING:
    from ..mcp.client import ClientSession

__all__ = (
    "SkillsClient",
    "SkillEntry",
    "SkillFile",
    "LoadedSkill",
    "SkillVerificationError",
    "InvalidSkillEntry",
    "check_entry",
)

_DIGEST: Final = re.compile(r"^sha256:[0-9a-f]{64}$")


class SkillVerificationError(SkillError):
    """A skill file whose size, digest or frontmatter is not what the held entry says (or that the entry does
    not list): the content was not used. Fetch a fresh entry (:meth:`SkillsClient.get`) to load it again."""


class InvalidSkillEntry(SkillError):
    """An entry that breaks SEP-2640 (no ``resources``, a file outside the skill, a bad digest...): a skill
    under it is never loaded."""


class SkillFile(msgspec.Struct, frozen=True):
    """One file of a skill, as its entry lists it."""

    uri: str
    digest: str
    size: int


class SkillEntry(msgspec.Struct, frozen=True):
    """A skill's entry (``skills/list``, ``skills/get``): its ``SKILL.md`` URI, its frontmatter, and its files
    (or ``"dynamic"``: content generated on the server, with no digests to check)."""

    uri: str
    frontmatter: dict[str, Any]
    resources: list[SkillFile] | Literal["dynamic"]

    @property
    def name(self) -> str:
        return str(self.frontmatter.get("name", ""))

    @property
    def description(self) -> str:
        return str(self.frontmatter.get("description", ""))

    @property
    def dynamic(self) -> bool:
        return self.resources == "dynamic"

    @property
    def root_uri(self) -> str:
        """The skill's directory: the ``SKILL.md`` URI without ``/SKILL.md``."""
        return self.uri[: -len(SKILL_FILE) - 1]

    def file(self, uri: str) -> SkillFile | None:
        """The listed file at ``uri`` (``None``: not listed, or a dynamic skill)."""
        if isinstance(self.resources, str):
            return None
        return next((f for f in self.resources if f.uri == uri), None)


def check_entry(entry: SkillEntry) -> None:
    """Raise :class:`InvalidSkillEntry` unless ``entry`` follows SEP-2640: its URI ends in ``/SKILL.md`` after
    the skill's name, the frontmatter has that ``name`` and a ``description``, and ``resources`` lists every file
    once, ``SKILL.md`` included, each inside the skill, with a ``sha256:`` digest and a size, within the limits
    every host accepts (512 files, 16 MiB)."""
    where = entry.uri
    if not entry.uri.endswith("/" + SKILL_FILE) or "://" not in entry.uri:
        raise InvalidSkillEntry(f"{where}: a skill's uri is the URI of its SKILL.md")
    segments = entry.uri.split("://", 1)[1].split("/")
    if len(segments) < 2 or segments[-2] != entry.frontmatter.get("name"):
        raise InvalidSkillEntry(f"{where}: the last segment of the skill's path must equal frontmatter.name")
    try:
        check_name(entry.name)
    except SkillFormatError as exc:
        raise InvalidSkillEntry(f"{where}: {exc}") from None
    if not isinstance(entry.frontmatter.get("description"), str) or not entry.description:
        raise InvalidSkillEntry(f"{where}: frontmatter.description is missing")
    if isinstance(entry.resources, str):
        return
    seen: set[str] = set()
    root = entry.root_uri + "/"
    for file in entry.resources:
        if file.uri in seen:
            raise InvalidSkillEntry(f"{where}: {file.uri} is listed twice")
        seen.add(file.uri)
        if not file.uri.startswith(root) or "/../" in file.uri[len(root) - 1 :] or file.uri.endswith("/.."):
            raise InvalidSkillEntry(f"{where}: {file.uri} is outside the skill's directory")
        if not _DIGEST.match(file.digest):
            raise InvalidSkillEntry(f"{where}: {file.uri} has no sha256:{{64 lowercase hex}} digest")
        if file.size < 0:
            raise InvalidSkillEntry(f"{where}: {file.uri} has a negative size")
    if entry.uri not in seen:
        raise InvalidSkillEntry(f"{where}: resources does not list SKILL.md itself")
    if len(entry.resources) > MAX_FILES:
        raise InvalidSkillEntry(f"{where}: {len(entry.resources)} files, more than the {MAX_FILES} hosts accept")
    total = sum(f.size for f in entry.resources)
    if total > MAX_TOTAL_BYTES:
        raise InvalidSkillEntry(f"{where}: {total} bytes, more than the {MAX_TOTAL_BYTES} hosts accept")


def _bytes_of(result: t.ReadResourceResult, uri: str) -> bytes:
    """The raw bytes of the content at ``uri`` in a ``resources/read`` result (text is UTF-8)."""
    for content in result.contents:
        if getattr(content, "uri", None) != uri:
            continue
        text = getattr(content, "text", None)
        if isinstance(text, str):
            return text.encode("utf-8")
        blob = getattr(content, "blob", None)
        if isinstance(blob, str):
            try:
                return base64.b64decode(blob, validate=True)
            except (binascii.Error, ValueError):
                raise SkillVerificationError(f"{uri}: the blob is not base64") from None
    raise SkillVerificationError(f"{uri}: the server's answer holds no content for this URI")


def _same(a: Any, b: Any) -> bool:
    """JSON equality (``1 == 1.0`` as in JSON; ``True != 1``; an absent field equals ``null``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


class LoadedSkill:
    """A skill loaded under its entry: ``instructions`` is its verified ``SKILL.md``; :meth:`read` gets its
    other files, each checked against the same entry (and kept in memory once verified)."""

    def __init__(self, client: SkillsClient, entry: SkillEntry, skill_md: bytes) -> None:
        self.client = client
        self.entry = entry
        self.instructions = skill_md.decode("utf-8")
        self._verified: dict[str, bytes] = {entry.uri: skill_md}
        self._retrieved = len(skill_md)

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def uri(self) -> str:
        return self.entry.uri

    def resolve(self, path: str) -> str:
        """The URI of ``path``: an absolute URI as it is, else relative to the skill's root
        (``references/GUIDE.md``); a path leaving the skill is refused."""
        if "://" in path:
            return path
        parts: list[str] = []
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise SkillVerificationError(f"{path!r} leaves the skill's directory")
                parts.pop()
            else:
                parts.append(part)
        if not parts:
            raise SkillVerificationError(f"{path!r} names no file")
        return self.entry.root_uri + "/" + "/".join(parts)

    async def read(self, path: str) -> bytes:
        """The bytes of one of the skill's files (relative to its root, or its URI), verified against the held
        entry. A file the entry does not list is not read (:class:`SkillVerificationError`)."""
        uri = self.resolve(path)
        cached = self._verified.get(uri)
        if cached is not None:
            return cached
        listed = self.entry.file(uri)
        if listed is None and not self.entry.dynamic:
            raise SkillVerificationError(
                f"{uri} is not one of the files of {self.entry.uri} as loaded; get a fresh entry to see it"
            )
        if self.entry.dynamic and not uri.startswith(self.entry.root_uri + "/"):
            raise SkillVerificationError(f"{uri} is outside the skill's directory")
        data = await self.client._fetch(uri, listed)
        if self.entry.dynamic:
            self._retrieved += len(data)
            if self._retrieved > MAX_TOTAL_BYTES:
                raise SkillVerificationError(f"{self.entry.uri}: more than {MAX_TOTAL_BYTES} bytes retrieved")
        self._verified[uri] = data
        return data

    async def read_text(self, path: str) -> str:
        """:meth:`read`, decoded as UTF-8."""
        return (await self.read(path)).decode("utf-8")

    def __repr__(self) -> str:
        return f"<LoadedSkill {self.entry.uri}>"


class SkillsClient:
    """Skills on one server, through a connected client::

        skills = SkillsClient(client)
        for entry in await skills.list():        # entries only: nothing is read yet
            print(entry.name, entry.description)
        skill = await skills.load(entry)         # reads and verifies SKILL.md
        guide = await skill.read_text("references/GUIDE.md")

    :param allow_dynamic: load skills whose entry says ``"resources": "dynamic"`` (their content cannot be
        checked against digests; refused by default).
    """

    def __init__(self, session: ClientSession, *, allow_dynamic: bool = False) -> None:
        self.session = session
        self.allow_dynamic = allow_dynamic

    @property
    def settings(self) -> Mapping[str, Any] | None:
        """The skills extension's settings the server declared (``None``: it did not declare it)."""
        declared = self.session.server_capabilities.extensions
        if declared is UNSET or not isinstance(declared, dict):
            return None
        settings = declared.get(SKILLS_EXTENSION)
        return settings if isinstance(settings, dict) else None

    @property
    def directory_read(self) -> bool:
        """Did the server declare ``directoryRead`` (so :meth:`read_directory` may be called)?"""
        settings = self.settings
        return settings is not None and settings.get("directoryRead") is True

    def _require(self) -> None:
        if self.settings is None:
            raise MethodNotFound(f"the server did not declare the {SKILLS_EXTENSION} extension")

    async def list(self) -> builtins.list[SkillEntry]:
        """Every entry of ``skills/list``, page after page (an empty or partial listing does not mean the
        server has no other skills: :meth:`get` reaches a skill by its URI)."""
        self._require()
        entries: builtins.list[SkillEntry] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = await self.session.request("skills/list", {"cursor": cursor} if cursor else {}, _SkillsPage)
            entries.extend(page.skills)
            cursor = page.next_cursor
            if not cursor or cursor in seen:
                return entries
            seen.add(cursor)

    async def get(self, uri: str) -> SkillEntry:
        """The current entry of the skill whose ``SKILL.md`` is at ``uri`` (``skills/get``)."""
        self._require()
        result = await self.session.request("skills/get", {"uri": uri}, _SkillResult)
        entry: SkillEntry = result.skill
        return entry

    async def load(self, skill: SkillEntry | str) -> LoadedSkill:
        """Load a skill: check its entry, read its ``SKILL.md``, verify size, digest and frontmatter.

        ``skill`` is an entry (from :meth:`list` or :meth:`get`) or a ``SKILL.md`` URI (its entry is fetched with
        :meth:`get` first). Raises :class:`InvalidSkillEntry` or :class:`SkillVerificationError`; nothing else
        is read."""
        entry = await self.get(skill) if isinstance(skill, str) else skill
        check_entry(entry)
        if entry.dynamic and not self.allow_dynamic:
            raise InvalidSkillEntry(
                f"{entry.uri}: its content is generated on the server and cannot be verified "
                "(SkillsClient(allow_dynamic=True) loads such skills)"
            )
        skill_md = await self._fetch(entry.uri, entry.file(entry.uri))
        try:
            text = skill_md.decode("utf-8")
            fields, _ = parse_frontmatter(text)
        except (UnicodeDecodeError, SkillFormatError) as exc:
            reason = "is not UTF-8" if isinstance(exc, UnicodeDecodeError) else f"has no usable frontmatter ({exc})"
            raise SkillVerificationError(f"{entry.uri} {reason}") from None
        differ = sorted(
            key
            for key in fields.keys() | entry.frontmatter.keys()
            if not _same(fields.get(key), entry.frontmatter.get(key))
        )
        if differ:
            raise SkillVerificationError(
                f"{entry.uri}: the frontmatter of the file differs from the entry's ({', '.join(differ)})"
            )
        return LoadedSkill(self, entry, skill_md)

    async def read_directory(self, uri: str) -> builtins.list[t.Resource]:
        """The direct children of a directory resource (``resources/directory/read``, every page); only when the
        server declared ``directoryRead``. A directory listing does not extend a loaded skill's files."""
        if not self.directory_read:
            raise MethodNotFound("the server did not declare directoryRead for the skills extension")
        children: builtins.list[t.Resource] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            params: dict[str, Any] = {"uri": uri}
            if cursor:
                params["cursor"] = cursor
            page = await self.session.request("resources/directory/read", params, _DirectoryPage)
            children.extend(page.resources)
            cursor = page.next_cursor
            if not cursor or cursor in seen:
                return children
            seen.add(cursor)

    async def _fetch(self, uri: str, listed: SkillFile | None) -> bytes:
        result = await self.session.read_resource(uri)
        data = _bytes_of(result, uri)
        if listed is not None:
            if len(data) != listed.size:
                raise SkillVerificationError(f"{uri}: {len(data)} bytes read, the entry says {listed.size}")
            if digest_of(data) != listed.digest:
                raise SkillVerificationError(f"{uri}: the content does not match the entry's digest")
        return data


def is_directory(resource: t.Resource) -> bool:
    """Is this child of a directory listing itself a directory?"""
    return resource.mime_type == DIRECTORY_MIME_TYPE


class _SkillsPage(msgspec.Struct, rename="camel"):
    skills: list[SkillEntry] = []
    next_cursor: str | None = None


class _SkillResult(msgspec.Struct):
    skill: SkillEntry


class _DirectoryPage(msgspec.Struct, rename="camel"):
    resources: list[t.Resource] = []
    next_cursor: str | None = None
