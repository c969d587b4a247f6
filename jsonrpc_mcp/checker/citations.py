"""What a case cites, and the level that follows from it: FAIL for a MUST or MUST NOT, WARN for a SHOULD, DIFF
where the specification leaves a choice (L7).

A citation is a requirement id of the specification (``2025-11-25/basic/index#9774fb4d``: revision, page, and a
hash of the sentence), a JSON-RPC 2.0 section (``jsonrpc-2.0/5.1``) for the envelope rules, or an entry of our
``docs/spec-decisions.md`` (``decision#2``) where the specification leaves the choice to the implementation. The
sentences travel with the package (:mod:`.citation_table`, generated from the specification's snapshot).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from .citation_table import TABLE

__all__ = ("Level", "Citation", "citation", "level_of")

Level = Literal["must", "should", "choice"]

_LEVELS: Final[dict[str, Level]] = {
    "MUST": "must",
    "MUST NOT": "must",
    "SHALL": "must",
    "SHALL NOT": "must",
    "REQUIRED": "must",
    "SHOULD": "should",
    "SHOULD NOT": "should",
    "RECOMMENDED": "should",
    "CHOICE": "choice",
}


@dataclass(frozen=True)
class Citation:
    """One cited sentence: its id, its keyword (``MUST``, ``SHOULD NOT``..., ``CHOICE`` for one of our decisions;
    empty when the id is not one the package knows) and its text."""

    id: str
    keyword: str
    text: str

    @property
    def level(self) -> Level | None:
        return _LEVELS.get(self.keyword)


def citation(ident: str) -> Citation:
    keyword, text = TABLE.get(ident, ("", ""))
    return Citation(ident, keyword, text)


def level_of(idents: Iterable[str]) -> Level | None:
    """The level of the first of ``idents`` whose keyword is known (``None``: none is)."""
    return next((level for i in idents if (level := citation(i).level) is not None), None)
