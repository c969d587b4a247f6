"""MkDocs hooks for the documentation site (``mkdocs.yml`` names this file; it is not a page).

* ``<!-- cli-help: WORDS -->`` on a line of its own becomes the output of ``jsonrpc-mcp WORDS --help``, taken
  from the installed command when the site is built, so the command-line pages show the options as they are
  (100 columns, in a block of class ``cli-help``, which stylesheets/extra.css sets small enough not to scroll).
* The API reference is rendered from docstrings written with reST roles (``:class:`~jsonrpc_mcp.Server```);
  the roles are shown as the code they name (``Server``), and a paragraph ending in a reST ``::`` ends in ``:``.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from typing import Any

_CLI_HELP = re.compile(r"^<!-- cli-help:(?P<words>[^>]*)-->[ \t]*$", re.MULTILINE)
_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj|ref):<code>(?P<tilde>~?)(?P<target>[^<]+)</code>")
_LITERAL_COLONS = re.compile(r"::</p>")
_HELP_WIDTH = "102"  # (less the margin of two argparse keeps: jsonrpc_mcp.cli_help.HELP_WIDTH)


def cli_help(words: list[str]) -> str:
    """What ``jsonrpc-mcp WORDS --help`` prints, at a fixed width."""
    from jsonrpc_mcp.cli import main

    out = io.StringIO()
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = _HELP_WIDTH
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main([*words, "--help"])
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved
    return out.getvalue()


def on_page_markdown(markdown: str, **_: Any) -> str:
    def help_block(match: re.Match[str]) -> str:
        return "``` { .text .cli-help }\n" + cli_help(match.group("words").split()).rstrip() + "\n```"

    return _CLI_HELP.sub(help_block, markdown)


def on_page_content(html: str, **_: Any) -> str:
    def code(match: re.Match[str]) -> str:
        target = match.group("target")
        shown = target.rsplit(".", 1)[-1] if match.group("tilde") else target
        return f"<code>{shown}</code>"

    return _LITERAL_COLONS.sub(":</p>", _ROLE.sub(code, html))
