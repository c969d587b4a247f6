"""``jsonrpc-mcp list|call --url`` against a server that asks for authorization: the real command in a subprocess,
the consent URL read from its stderr and "opened" by an HTTP client standing in for the browser, over loopback."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx
import pytest
from oauth_support import AuthServer, ProtectedMcp
from oauth_support import auth_server as auth_server
from oauth_support import mcp as mcp

pytestmark = pytest.mark.anyio

URL_LINE = re.compile(rb"^\s+(http://\S+/authorize\?\S+)$", re.MULTILINE)


MCP_OPTIONS = {"scopes_supported": ["notes:read"]}  # (the mcp fixture's)


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "jsonrpc_mcp", *args]


async def run_with_browser(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """Run the command; when it prints an authorization URL on stderr, open it as a browser would."""
    process = await anyio.open_process(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    stdout, stderr = bytearray(), bytearray()
    opened = False

    async def read_stdout() -> None:
        assert process.stdout is not None
        async for chunk in process.stdout:
            stdout.extend(chunk)

    async with process, anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        assert process.stderr is not None
        with anyio.fail_after(60):
            async for chunk in process.stderr:
                stderr.extend(chunk)
                found = URL_LINE.search(stderr)
                if found and not opened:
                    opened = True
                    async with httpx.AsyncClient(follow_redirects=True) as browser:
                        page = await browser.get(found.group(1).decode())
                    assert "Authorization complete" in page.text
            await process.wait()
    return process.returncode or 0, bytes(stdout), bytes(stderr)


async def test_list_authorizes_shows_progress_on_stderr_and_remembers_the_token(
    auth_server: AuthServer, mcp: ProtectedMcp, tmp_path: Path
) -> None:
    store = tmp_path / "config" / "tokens.json"
    argv = command("list", "--json", "--url", mcp.url, "--no-browser", "--token-store", str(store))
    code, stdout, stderr = await run_with_browser(argv)
    assert code == 0, stderr.decode()
    assert json.loads(stdout)["tools"]
    text = stderr.decode()
    assert "open this URL" in text and "authorizing with" in text
    secrets = [*auth_server.tokens, *auth_server.refresh]
    assert secrets and not any(secret in text or secret in stdout.decode() for secret in secrets)
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    assert auth_server.seen("/authorize")[0].query["scope"] == "notes:read"

    code, stdout, stderr = await run_with_browser(argv)  # the next command uses the stored token
    assert code == 0 and json.loads(stdout)["tools"]
    assert "open this URL" not in stderr.decode()
    assert len(auth_server.seen("/authorize")) == 1


async def test_call_with_a_pre_registered_client_whose_secret_comes_from_the_environment(
    auth_server: AuthServer, mcp: ProtectedMcp
) -> None:
    auth_server.clients["cli"] = {"method": "client_secret_basic", "secret": "from-env", "redirect_uris": None}
    env = {**os.environ, "JSONRPC_MCP_CLIENT_SECRET": "from-env"}
    argv = command("call", "--json", "--url", mcp.url, "--no-browser", "--no-token-store", "--client-id", "cli")
    argv += ["--scope", "a", "--scope", "b", "tools/call", "add", '{"a": 2, "b": 3}']
    code, stdout, stderr = await run_with_browser(argv, env)
    assert code == 0, stderr.decode()
    assert json.loads(stdout)["structuredContent"] == {"result": 5}
    assert not auth_server.seen("/register")
    assert auth_server.seen("/authorize")[0].query["scope"] == "a b"
    assert "from-env" not in stderr.decode()


async def test_an_authorization_failure_is_one_clear_error(auth_server: AuthServer, mcp: ProtectedMcp) -> None:
    auth_server.overrides["registration_endpoint"] = None
    argv = command("list", "--url", mcp.url, "--no-browser", "--no-token-store")
    code, stdout, stderr = await run_with_browser(argv)
    assert (code, stdout) == (4, b"")  # the server could not be reached: no authorization
    (line,) = stderr.decode().splitlines()[-1:]
    assert line.startswith("jsonrpc-mcp: authorization failed (client registration): ") and "client_id" in line
    assert "Traceback" not in stderr.decode()


async def test_the_time_in_the_browser_does_not_count_against_the_commands_timeout() -> None:
    from jsonrpc_mcp.auth.oauth_cli import _CommandConsent
    from jsonrpc_mcp.auth.oauth_consent import HeadlessConsent

    with anyio.CancelScope(deadline=anyio.current_time() + 100) as deadline:  # the command's --timeout

        async def person(url: str) -> str:
            assert deadline.deadline == math.inf  # no deadline while the user is in the browser
            await anyio.lowlevel.checkpoint()
            return "http://127.0.0.1/callback?code=c&state=s"

        consent = _CommandConsent(HeadlessConsent(person), deadline, budget=60)  # type: ignore[arg-type]
        assert await consent.authorize("https://auth.example.com/authorize?state=s")
        assert anyio.current_time() + 50 < deadline.deadline <= anyio.current_time() + 60  # a fresh budget after


def test_the_help_names_the_default_token_store_without_the_users_home(tmp_path: Path) -> None:
    """The help (and the docs site built from it) shows where tokens go, never the home directory it runs in."""
    home = tmp_path / "someone-s-home"
    env = {**os.environ, "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    for subcommand in ("list", "call"):
        shown = subprocess.run(command(subcommand, "--help"), env=env, capture_output=True, check=True).stdout
        assert b"~/.config" in shown
        assert str(home).encode() not in shown
