"""Shared test fixtures: every async test runs on asyncio and on trio."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"), pytest.param("trio", id="trio")])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def asyncio_is_asyncio() -> None:
    """Tests of the asyncio backend run on asyncio's own loop: older uvicorn releases (0.30, the lowest the project
    supports) install uvloop's policy process-wide when a test serves with them; it is put back here. (The policy
    functions are deprecated from Python 3.14, where no supported uvicorn installs a policy.)"""
    if sys.version_info < (3, 14) and type(asyncio.get_event_loop_policy()).__module__.startswith("uvloop"):
        asyncio.set_event_loop_policy(None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that drives or is driven by the official SDK (``interop``) needs a peer, so it is also ``once``: it runs
    in the leg of .ci/run that runs such tests once (make test-once), not once per interpreter."""
    for item in items:
        if item.get_closest_marker("interop") and not item.get_closest_marker("once"):
            item.add_marker(pytest.mark.once)


@pytest.fixture(params=[pytest.param("pool", id="pool"), pytest.param("per-call", id="per-call")])
def sync_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Plain ``def`` handlers run the default way (``pool``: :func:`jsonrpc_mcp.mcp.tools.run_sync`, the worker
    pool), or on the plain path it is checked against (``per-call``: a thread of anyio's per call)."""
    if request.param == "per-call":
        from jsonrpc_mcp.mcp import tools

        monkeypatch.setattr(tools, "run_sync", tools.run_sync_per_call)
    return str(request.param)
