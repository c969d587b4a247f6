"""How the ``jsonrpc-mcp`` commands lay out their ``--help`` (L7): one width and one layout for the options and for
the examples, arguments and exit statuses below them.

argparse wraps the options to the terminal's width and leaves an epilog as it is written; here both are laid out
at :func:`help_width`, the epilog's sections by :func:`section` and :func:`paragraph` as argparse lays out
options (a term indented by two, its text in a column of its own).
"""

from __future__ import annotations

import argparse
import shutil
import textwrap
from collections.abc import Sequence
from typing import Final

__all__ = ("HELP_WIDTH", "help_width", "HelpFormatter", "section", "paragraph")

#: The widest help: the documentation site shows it at this width (docs/_hooks.py).
HELP_WIDTH: Final = 100
#: Where an option's help starts at most (a longer option has its help on the next line).
_HELP_COLUMN: Final = 32


def help_width() -> int:
    """:data:`HELP_WIDTH`, or the terminal's width less a margin of two (as argparse does) when that is narrower,
    but 60 at least."""
    return max(60, min(HELP_WIDTH, shutil.get_terminal_size().columns - 2))


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's layout at :func:`help_width`. A description's prose is wrapped to that width; its indented lines,
    and an epilog made by :func:`section` and :func:`paragraph` at that width, are kept as they are."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=_HELP_COLUMN, width=help_width())

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines: list[str] = []
        prose: list[str] = []

        def end_paragraph() -> None:
            if prose:
                joined = " ".join(prose)
                lines.extend(textwrap.wrap(joined, width, initial_indent=indent, subsequent_indent=indent))
                prose.clear()

        for line in text.splitlines():
            if line and not line[0].isspace():
                prose.append(line.strip())
                if line.endswith(":"):  # a section's title: its rows follow
                    end_paragraph()
                continue
            end_paragraph()
            lines.append(indent + line if line else "")
        end_paragraph()
        return "\n".join(lines)


def section(title: str, rows: Sequence[tuple[str, str]], width: int = HELP_WIDTH) -> str:
    """``title:`` then one row per (term, text): the term indented by two, the texts in one column (after the
    longest term that has a text and leaves the texts 30 columns; a longer term's text starts on the next line),
    wrapped to ``width``. A row without a text is the term alone (an example command, never wrapped)."""
    fitting = [len(term) for term, text in rows if text and len(term) <= width - 34]
    column = 2 + max(fitting, default=0) + 2
    lines = [f"{title}:"]
    for term, text in rows:
        head = f"  {term}"
        if not text:
            lines.append(head)
            continue
        wrapped = textwrap.wrap(text, max(20, width - column), break_on_hyphens=False)
        if len(head) + 2 <= column:
            lines.append(head.ljust(column) + wrapped[0])
            wrapped = wrapped[1:]
        else:
            lines.append(head)
        lines.extend(" " * column + line for line in wrapped)
    return "\n".join(lines) + "\n"


def paragraph(title: str, text: str, width: int = HELP_WIDTH) -> str:
    """``title:`` then ``text`` indented by two, wrapped to ``width``."""
    wrapped = textwrap.wrap(text, width, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join([f"{title}:", *wrapped]) + "\n"
