"""The skills a server publishes, and the answers of ``skills/list``, ``skills/get`` and
``resources/directory/read`` over them (L7).

A :class:`SkillCatalog` holds :class:`~jsonrpc_mcp.skills.Skill` objects by URI. Entries are computed
once per skill (the digests of its files), pages are the project's opaque cursors, and the directory tree is
every level of every skill's file URIs: ``skill://acme`` holds ``skill://acme/billing``, which holds the skill
``refunds``, whose root holds ``SKILL.md`` and ``examples``, and so on.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from typing import Any

from ..errors import InvalidParams
from ..mcp import types as t
from ..mcp.pagination import paginate
from ._model import DIRECTORY_MIME_TYPE, SKILL_FILE, SKILL_SCHEME, Skill, SkillError, load_skills, mime_type_of

__all__ = ("SkillCatalog",)


class SkillCatalog:
    """Skills by URI, with their entries and the directory tree of their files."""

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        self._skills: dict[str, Skill] = {}
        self._entries: dict[str, dict[str, Any]] = {}
        self._files: dict[str, tuple[Skill, str]] = {}
        self._children: dict[str, dict[str, str | None]] = {}  # directory -> child uri -> None (dir) or path
        for skill in skills:
            self.add(skill)

    # --- contents ----------------------------------------------------------------------------------------

    def add(self, skill: Skill) -> Skill:
        """Publish ``skill``; another skill at the same URI is an error."""
        if skill.uri in self._skills:
            raise SkillError(f"a skill is published at {skill.uri} already")
        self._skills[skill.uri] = skill
        self._entries[skill.uri] = skill.entry()
        self._reindex()
        return skill

    def remove(self, uri: str) -> Skill:
        """Stop publishing the skill whose ``SKILL.md`` is at ``uri``."""
        skill = self._skills.pop(uri, None)
        if skill is None:
            raise KeyError(uri)
        del self._entries[uri]
        self._reindex()
        return skill

    def load(self, directory: str | os.PathLike[str], *, prefix: str = "") -> list[Skill]:
        """Publish every skill under ``directory`` (see :func:`~jsonrpc_mcp.skills.load_skills`)."""
        found = load_skills(directory, prefix=prefix)
        taken = [s.uri for s in found if s.uri in self._skills]
        if taken:
            raise SkillError(f"a skill is published at {taken[0]} already")
        for skill in found:
            self.add(skill)
        return found

    def __iter__(self) -> Any:
        return iter(list(self._skills.values()))

    def __len__(self) -> int:
        return len(self._skills)

    def __contains__(self, uri: object) -> bool:
        return uri in self._skills

    def get(self, uri: str) -> Skill | None:
        return self._skills.get(uri)

    def _reindex(self) -> None:
        """Every file's owner (the innermost skill holding it) and every directory's children."""
        files: dict[str, tuple[Skill, str]] = {}
        children: dict[str, dict[str, str | None]] = {}
        for skill in sorted(self._skills.values(), key=lambda s: len(s.path)):  # nested skills last: they win
            for path in skill.files:
                uri = skill.file_uri(path)
                files[uri] = (skill, path)
                parts = uri[len(SKILL_SCHEME) :].split("/")
                for depth in range(1, len(parts)):
                    parent = SKILL_SCHEME + "/".join(parts[:depth])
                    child = SKILL_SCHEME + "/".join(parts[: depth + 1])
                    children.setdefault(parent, {})[child] = None if depth + 1 < len(parts) else path
        self._files = files
        self._children = children

    # --- what a file is ----------------------------------------------------------------------------------

    def file_uris(self) -> list[str]:
        return list(self._files)

    def read(self, uri: str) -> tuple[bytes, str] | None:
        """The bytes of the skill file at ``uri`` and its MIME type (``None``: no such file)."""
        found = self._files.get(uri)
        if found is None:
            return None
        skill, path = found
        return skill.files[path], mime_type_of(path)

    def contents(self, uri: str) -> t.TextResourceContents | t.BlobResourceContents | None:
        """The ``resources/read`` contents of the file at ``uri``: text when it is UTF-8, else a blob."""
        found = self.read(uri)
        if found is None:
            return None
        data, mime = found
        try:
            return t.TextResourceContents(uri=uri, mime_type=mime, text=data.decode("utf-8"))
        except UnicodeDecodeError:
            return t.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(data).decode("ascii"))

    # --- the methods' answers ----------------------------------------------------------------------------

    def list_page(self, cursor: str | None, page_size: int | None) -> dict[str, Any]:
        """A page of ``skills/list``: whole entries (one is never split across pages) and ``nextCursor``."""
        page, nxt = paginate(list(self._entries.values()), cursor, page_size)
        result: dict[str, Any] = {"skills": page}
        if nxt is not None:
            result["nextCursor"] = nxt
        return result

    def entry(self, uri: str) -> dict[str, Any]:
        """The entry of ``skills/get``; -32602 for a URI that is not a published skill's ``SKILL.md``."""
        entry = self._entries.get(uri)
        if entry is None:
            raise InvalidParams(f"No skill is served at {uri}", {"uri": uri})
        return entry

    def is_directory(self, uri: str) -> bool:
        return uri in self._children

    def directory_page(self, uri: str, cursor: str | None, page_size: int | None) -> dict[str, Any]:
        """A page of ``resources/directory/read``: the direct children of the directory ``uri`` (files with their
        resource metadata, subdirectories as ``inode/directory``); -32602 when ``uri`` is not a directory."""
        children = self._children.get(uri)
        if children is None:
            what = "is not a directory resource" if uri in self._files else "does not exist"
            raise InvalidParams(f"{uri} {what}", {"uri": uri})
        listed: list[dict[str, Any]] = []
        for child, path in sorted(children.items()):
            name = child.rsplit("/", 1)[-1]
            if path is None:
                listed.append({"uri": child, "name": name, "mimeType": DIRECTORY_MIME_TYPE})
                continue
            skill, own = self._files[child]
            item: dict[str, Any] = {
                "uri": child,
                "name": name,
                "mimeType": mime_type_of(own),
                "size": len(skill.files[own]),
            }
            if own == SKILL_FILE:
                item["name"] = skill.name
                item["description"] = skill.description
            listed.append(item)
        page, nxt = paginate(listed, cursor, page_size)
        result: dict[str, Any] = {"resources": page}
        if nxt is not None:
            result["nextCursor"] = nxt
        return result
