"""The documentation site: it builds in strict mode (a broken link, anchor or reference fails), every page of
docs/ is in its navigation, the API reference is rendered from the docstrings, and the build hooks do what they
say (``docs/_hooks.py``)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from docs_harness import ROOT

CONFIG = ROOT / "mkdocs.yml"
DOCS = ROOT / "docs"
#: Material prints a banner about MkDocs 2.0 on every build unless told not to.
BUILD_ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
#: Building the site does not depend on the interpreter's version: once, in its own leg of .ci/run.
pytestmark = pytest.mark.once


def mkdocs_build(config: Path, site: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=cwd,
        env=BUILD_ENV,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def load_config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    return config


def nav_pages(nav: Any) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from nav_pages(value)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = mkdocs_build(CONFIG, out)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def page_text(site: Path, page: str) -> str:
    html = (site / page / "index.html").read_text()
    article = html[html.index("<article") : html.index("</article>")]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", article))


@pytest.mark.slow
def test_the_site_builds_in_strict_mode(site: Path) -> None:
    assert (site / "index.html").exists()
    for page in nav_pages(load_config()["nav"]):
        built = site / (page.removesuffix(".md").removesuffix("index") + "/index.html").lstrip("/")
        assert built.exists(), f"{page} was not built"


@pytest.mark.slow
def test_the_api_reference_is_rendered_from_the_docstrings(site: Path) -> None:
    server = page_text(site, "reference/server")
    assert "An MCP server: register tools, resources and prompts" in server
    assert "Register a function as a tool." in server
    assert "request_state_key" in server
    context = page_text(site, "reference/context")
    assert "Send notifications/progress if the client asked for progress" in context


@pytest.mark.slow
def test_the_commands_help_is_in_blocks_the_style_makes_small(site: Path) -> None:
    """The --help blocks are 100 columns wide: stylesheets/extra.css sets their class a smaller font, so that they
    fit the text column rather than scroll sideways; and the primary sidebar's sticky title (the site name, which
    covered the first navigation item) is hidden where the header shows the name."""
    html = (site / "cli" / "serve" / "index.html").read_text()
    assert '<div class="cli-help highlight">' in html
    css = (site / "stylesheets" / "extra.css").read_text()
    assert re.search(r"\.md-typeset \.cli-help code \{\s*font-size: 0\.72em;", css)
    assert re.search(r"\.md-nav--primary > \.md-nav__title \{\s*display: none;", css)


@pytest.mark.slow
def test_no_page_shows_a_raw_docstring_role(site: Path) -> None:
    shown = [
        str(path.relative_to(site))
        for path in site.rglob("*.html")
        if re.search(r":(class|func|meth|mod|attr|data|exc):<code>", path.read_text())
    ]
    assert shown == []


def test_every_page_is_in_the_navigation() -> None:
    in_nav = set(nav_pages(load_config()["nav"]))
    pages = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert pages - in_nav == set(), "pages missing from nav in mkdocs.yml"
    assert in_nav - pages == set(), "nav entries without a page"


def test_the_site_folder_is_ignored_by_git() -> None:
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "site/index.html"], cwd=ROOT, capture_output=True, check=False
    )
    assert ignored.returncode == 0


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ("[a page that is not there](missing.md)", "missing.md"),
        ("[an anchor that is not there](#nowhere)", "#nowhere"),
    ],
)
def test_the_strict_build_fails_on_a_broken_link(tmp_path: Path, page: str, message: str) -> None:
    """The site's own link checks (``validation`` in mkdocs.yml), on a one-page site with a broken link."""
    config = load_config()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(f"# A page\n\n{page}\n")
    small = {
        "site_name": "check",
        "docs_dir": "docs",
        "validation": config["validation"],
        "markdown_extensions": config["markdown_extensions"],
    }
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(small))
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site", cwd=tmp_path)
    assert done.returncode != 0
    assert message in done.stderr


# -- the build hooks ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_cli_help_marker_becomes_the_commands_help(hooks: ModuleType) -> None:
    page = "# serve\n\n<!-- cli-help: serve -->\n\nMore text.\n"
    out: str = hooks.on_page_markdown(page)
    assert out.startswith("# serve\n\n``` { .text .cli-help }\nusage: jsonrpc-mcp serve")
    assert "--http HOST:PORT" in out
    assert out.endswith("```\n\nMore text.\n")
    assert "<!-- cli-help" not in out
    assert max(len(line) for line in out.splitlines()) == 100  # the width the site's style fits without scrolling


def test_the_top_level_help_marker(hooks: ModuleType) -> None:
    out: str = hooks.on_page_markdown("<!-- cli-help: -->\n")
    assert out.startswith("``` { .text .cli-help }\nusage: jsonrpc-mcp ")
    assert "serve" in out and "check" in out


def test_docstring_roles_are_shown_as_code(hooks: ModuleType) -> None:
    html = (
        "<p>Serve a :class:<code>~jsonrpc_mcp.Server</code> with :func:<code>run_stdio</code>; see "
        ":mod:<code>jsonrpc_mcp.transports</code>::</p>"
    )
    assert hooks.on_page_content(html) == (
        "<p>Serve a <code>Server</code> with <code>run_stdio</code>; see <code>jsonrpc_mcp.transports</code>:</p>"
    )


# -- the command-line pages ---------------------------------------------------------------------------------------

#: Each command's page, which shows its ``--help`` (a ``cli-help`` marker) and explains every option in its prose.
CLI_PAGES = {
    "": "cli/index.md",
    "serve": "cli/serve.md",
    "list": "cli/list.md",
    "call": "cli/call.md",
    "check": "cli/check.md",
}
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b")


def options_of(help_text: str) -> set[str]:
    """The options a ``--help`` defines: the names at the start of its option lines (``  -k ONLY, --only ONLY  ...``),
    not the ones its examples or notes mention."""
    found: set[str] = set()
    for line in help_text.splitlines():
        if re.match(r"^\s+-", line):
            found.update(_OPTION.findall(line.strip().split("  ")[0]))
    return found - {"-h", "--help"}


def test_options_are_read_from_the_option_lines() -> None:
    help_text = (
        "usage: x [-h] [--url URL]\n\noptions:\n  -h, --help  show this\n  -k ONLY, --only ONLY  only files\n"
        "  --url URL   an endpoint, unlike --tcp\n\nexamples:\n  x --json -v\n"
    )
    assert options_of(help_text) == {"-k", "--only", "--url"}


def test_every_command_has_a_page(hooks: ModuleType) -> None:
    commands = set(re.findall(r"^    (\w+) ", hooks.cli_help([]), re.MULTILINE))
    assert commands == set(CLI_PAGES) - {""}


@pytest.mark.parametrize("command", list(CLI_PAGES), ids=lambda command: command or "jsonrpc-mcp")
def test_a_command_page_shows_its_help_and_explains_every_option(hooks: ModuleType, command: str) -> None:
    page = (DOCS / CLI_PAGES[command]).read_text()
    assert f"<!-- cli-help: {command} -->" in page or (not command and "<!-- cli-help: -->" in page)
    help_text = hooks.cli_help(command.split())
    options = options_of(help_text)
    assert options, help_text
    missing = sorted(option for option in options if not re.search(rf"(?<![\w-]){re.escape(option)}\b", page))
    assert missing == [], f"{CLI_PAGES[command]} does not explain {missing}"
