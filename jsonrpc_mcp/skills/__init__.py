"""Skills over MCP (SEP-2640, extension ``io.modelcontextprotocol/skills``), server and client (L7).

A server publishes skills — Agent Skills folders: a ``SKILL.md`` and supporting files — built from Python
objects (:class:`Skill`) or read from disk (:func:`load_skills`, :meth:`Skill.from_directory`) through a
:class:`SkillsExtension`: each file is a ``skill://`` resource, and ``skills/list``, ``skills/get`` and
``resources/directory/read`` describe them with the digest and size of every file. A
client (:class:`SkillsClient`) lists entries without reading anything, loads a skill when it is needed, and
verifies every file it reads against the entry: size, digest, frontmatter.

Reading frontmatter from files needs the ``skills`` extra (PyYAML): ``pip install -e '.[skills]'`` in a checkout.
"""

from __future__ import annotations

from ._catalog import SkillCatalog
from ._client import (
    InvalidSkillEntry,
    LoadedSkill,
    SkillEntry,
    SkillFile,
    SkillsClient,
    SkillVerificationError,
    check_entry,
)
from ._model import (
    DIRECTORY_MIME_TYPE,
    MAX_FILES,
    MAX_TOTAL_BYTES,
    SKILL_FILE,
    SKILL_SCHEME,
    SKILLS_EXTENSION,
    Skill,
    SkillError,
    SkillFormatError,
    digest_of,
    load_skills,
    parse_frontmatter,
    render_frontmatter,
)
from ._server import SkillsExtension

__all__ = (
    "SKILLS_EXTENSION",
    "SKILL_FILE",
    "SKILL_SCHEME",
    "DIRECTORY_MIME_TYPE",
    "MAX_FILES",
    "MAX_TOTAL_BYTES",
    "Skill",
    "SkillCatalog",
    "SkillsExtension",
    "load_skills",
    "SkillsClient",
    "SkillEntry",
    "SkillFile",
    "LoadedSkill",
    "SkillError",
    "SkillFormatError",
    "SkillVerificationError",
    "InvalidSkillEntry",
    "check_entry",
    "digest_of",
    "parse_frontmatter",
    "render_frontmatter",
)
