"""The server side of skills: the ``io.modelcontextprotocol/skills`` extension over a :class:`SkillCatalog` (L7).

:class:`SkillsExtension` is an :class:`~jsonrpc_mcp.mcp.extensions.Extension`: given to a server
(``Server(..., extensions=[skills])`` or ``server.add_extension(skills)``), it declares the extension (with
``directoryRead``) and the ``resources`` capability (SEP-2640: a server declaring the extension declares that too,
even while it publishes no skill yet), answers ``skills/list``, ``skills/get`` and ``resources/directory/read``,
and serves every file of every skill as a ``skill://`` resource (``SKILL.md`` named and described by its
frontmatter, as ``text/markdown``). SEP-2640 defines no client declaration: the methods answer any client of a
revision the server declares the extension at.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import ResourceNotFound
from ..mcp import types as t
from ..mcp.extensions import Extension
from ._catalog import SkillCatalog
from ._model import SKILL_FILE, SKILLS_EXTENSION, Skill, mime_type_of

if TYPE_CHECKING:
    from ..mcp.context import Context
    from ..mcp.server import Server

__all__ = ("SkillsExtension",)


class _ListParams(msgspec.Struct, rename="camel"):
    cursor: str | None = None


class _UriParams(msgspec.Struct, rename="camel"):
    uri: str


class _DirectoryParams(msgspec.Struct, rename="camel"):
    uri: str
    cursor: str | None = None


class SkillsExtension(Extension):
    """Skills published by a server (SEP-2640)::

        skills = SkillsExtension(directory="skills")       # every folder holding a SKILL.md, at any depth
        skills.add(Skill("git-workflow", "Follow the team's Git conventions", "# Git workflow\\n..."))
        server = Server("docs", extensions=[skills])

    :param skills: skills built in Python (:class:`~jsonrpc_mcp.skills.Skill`).
    :param directory: a folder to publish every skill of (:func:`~jsonrpc_mcp.skills.load_skills`).
    :param prefix: the organising path before the names of the skills read from ``directory``.
    :param directory_read: answer ``resources/directory/read`` over the skills' folders (declared as
        ``directoryRead: true``).
    """

    def __init__(
        self,
        skills: Iterable[Skill] = (),
        *,
        directory: str | os.PathLike[str] | None = None,
        prefix: str = "",
        directory_read: bool = True,
    ) -> None:
        if isinstance(skills, (str, os.PathLike)):  # (a folder given where the Skill objects go)
            raise TypeError(f"skills is a list of Skill objects; to publish a folder: directory={os.fspath(skills)!r}")
        if prefix and directory is None:
            raise ValueError("prefix is for the skills read from directory: give directory too")
        super().__init__(
            SKILLS_EXTENSION,
            settings={"directoryRead": True} if directory_read else {},
            server_only=True,
            server_capabilities=["resources"],  # skill files are read as resources: declared even before there are any
        )
        self.catalog = SkillCatalog(skills)
        if directory is not None:
            self.catalog.load(directory, prefix=prefix)
        self.directory_read = directory_read
        self._server: Server | None = None
        self.method("skills/list", params=_ListParams)(self._list)
        self.method("skills/get", params=_UriParams)(self._get)
        if directory_read:
            self.method("resources/directory/read", params=_DirectoryParams)(self._read_directory)

    # --- what is published ---------------------------------------------------------------------------------

    def add(self, skill: Skill) -> Skill:
        """Publish ``skill`` (its files become resources of the server at once)."""
        self.catalog.add(skill)
        if self._server is not None:
            self._serve_files(self._server, skill)
        return skill

    def load(self, directory: str | os.PathLike[str], *, prefix: str = "") -> list[Skill]:
        """Publish every skill under ``directory``."""
        found = self.catalog.load(directory, prefix=prefix)
        if self._server is not None:
            for skill in found:
                self._serve_files(self._server, skill)
        return found

    def remove(self, uri: str) -> Skill:
        """Stop publishing the skill whose ``SKILL.md`` is at ``uri`` (its files are no longer resources)."""
        skill = self.catalog.remove(uri)
        if self._server is not None:
            for path in skill.files:
                file_uri = skill.file_uri(path)
                if file_uri not in self.catalog.file_uris():
                    self._server.remove_resource(file_uri)
        return skill

    def attach(self, server: Any) -> None:
        self._server = server
        for skill in self.catalog:
            self._serve_files(server, skill)

    def _serve_files(self, server: Server, skill: Skill) -> None:
        for path, data in skill.files.items():
            uri = skill.file_uri(path)
            if path == SKILL_FILE:
                name, description = skill.name, skill.description
            else:
                name, description = path, None
            server.add_resource(
                self._reader(uri),
                uri,
                name=name,
                description=description,
                mime_type=mime_type_of(path),
                size=len(data),
                inline=True,
            )

    def _reader(self, uri: str) -> Any:
        catalog = self.catalog

        def read() -> t.TextResourceContents | t.BlobResourceContents:
            contents = catalog.contents(uri)
            if contents is None:
                raise ResourceNotFound(uri)
            return contents

        return read

    # --- the methods ---------------------------------------------------------------------------------------

    def _cached(self, ctx: Context, result: dict[str, Any]) -> dict[str, Any]:
        server = self._server
        if ctx.stateless and server is not None:
            result["ttlMs"] = server.cache.ttl_ms
            result["cacheScope"] = server.cache.scope
        return result

    def _page_size(self) -> int | None:
        return self._server.page_size if self._server is not None else None

    def _list(self, ctx: Context, params: _ListParams | None) -> dict[str, Any]:
        cursor = params.cursor if params is not None else None
        return self._cached(ctx, self.catalog.list_page(cursor, self._page_size()))

    def _get(self, ctx: Context, params: _UriParams) -> dict[str, Any]:
        return self._cached(ctx, {"skill": self.catalog.entry(params.uri)})

    def _read_directory(self, ctx: Context, params: _DirectoryParams) -> dict[str, Any]:
        return self.catalog.directory_page(params.uri, params.cursor, self._page_size())
