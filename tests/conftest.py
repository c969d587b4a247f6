"""Shared test fixtures: every async test runs on asyncio and on trio."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that drives or is driven by the official SDK (``interop``) needs a peer, so it is also ``once``: it runs
    in the leg of .ci/run that runs such tests once (make test-once), not once per interpreter. A ``fast_runner``
    test (what only the fast runner does) is not run against the plain reference runner (see ``runner``)."""
    plain_only_fast: list[pytest.Item] = []
    for item in items:
        if item.get_closest_marker("interop") and not item.get_closest_marker("once"):
            item.add_marker(pytest.mark.once)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("runner") == "plain" and item.get_closest_marker("fast_runner"):
            plain_only_fast.append(item)
    if plain_only_fast:
        config.hook.pytest_deselected(items=plain_only_fast)
        dropped = set(map(id, plain_only_fast))
        items[:] = [item for item in items if id(item) not in dropped]


@pytest.fixture(params=[pytest.param("lane", id="lane"), pytest.param("per-call", id="per-call")])
def sync_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Plain ``def`` handlers run the default way (``lane``: the sync lane, a
    :class:`~jsonrpc_mcp.jsonrpc.workers.SyncCall` run whole on the worker pool), or on the plain path they are
    checked against (``per-call``: a coroutine that awaits a thread of anyio's per call,
    :func:`jsonrpc_mcp.mcp.tools.run_sync_per_call`)."""
    if request.param == "per-call":
        from jsonrpc_mcp.mcp import tools

        monkeypatch.setattr(tools, "sync_lane", False)
        monkeypatch.setattr(tools, "run_sync", tools.run_sync_per_call)
    return str(request.param)


@pytest.fixture(scope="module")
def runner(request: pytest.FixtureRequest) -> Iterator[str]:
    """The dispatcher's runner: ``fast`` (the one the package runs), or, parametrized with ``plain`` (helpers.py's
    ``BOTH_RUNNERS``), the plain reference it is checked against (jsonrpc_mcp/jsonrpc/_reference.py): every
    dispatcher and set of handler tasks made meanwhile is the plain one. Per module, so that a module's fixture
    that makes them (an HTTP app's) can ask for it; a ``fast_runner`` test is left to the fast one."""
    name = str(getattr(request, "param", "fast"))
    if name == "fast":
        yield name
        return
    from jsonrpc_mcp.jsonrpc._reference import plain_runner

    with plain_runner():
        yield name
