"""Support for the tests of several workers sharing a real Redis: each worker a uvicorn of its own on a loopback port
(in a thread, with its own event loop), each with its own Server object, as separate processes would have.

:class:`Workers` runs a group of apps; :func:`workers_fixture` makes a module's ``workers`` fixture from what builds
its group; ``http`` is a client that waits :data:`TIMEOUT` (longer than tests/http_support.py's: every request goes
through Redis); :func:`call_v5` sends one 2026-07-28 request. A module that uses them imports ``redis_url`` and
``prefix`` from redis_support too."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, Self, TypeVar

import httpx
import pytest
from http_support import JSON_HEADERS, ServerThread, response_of

from jsonrpc_mcp import Server
from jsonrpc_mcp.backends.redis import RedisBackend
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

TIMEOUT = 20.0
V5 = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
_ids = itertools.count(1)


def redis_app(server: Server, url: str, key_prefix: str, **options: Any) -> McpAsgiApp:
    """``server`` as a worker: its HTTP app, sharing the Redis at ``url`` under ``key_prefix``."""
    return McpAsgiApp(server, backend=RedisBackend(url, prefix=key_prefix), **options)


async def call_v5(
    http: httpx.AsyncClient,
    url: str,
    method: str,
    params: Mapping[str, Any],
    capabilities: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One 2026-07-28 request (declaring the tasks extension, unless ``capabilities`` are given): its JSON-RPC
    answer, a result or an error."""
    ident = next(_ids)
    sent = {**JSON_HEADERS, "MCP-Protocol-Version": V5, "Mcp-Method": method, **(headers or {})}
    name = params.get("name") or params.get("taskId")
    if isinstance(name, str):
        sent["Mcp-Name"] = name
    caps = {"extensions": {TASKS: {}}} if capabilities is None else capabilities
    meta = {"io.modelcontextprotocol/protocolVersion": V5, "io.modelcontextprotocol/clientCapabilities": caps}
    body = {"jsonrpc": "2.0", "id": ident, "method": method, "params": {**params, "_meta": meta}}
    return response_of(await http.post(url, json=body, headers=sent), ident)


class Workers:
    """One uvicorn thread for each app, started at once; stopped by :meth:`stop` or at the end of a ``with``."""

    def __init__(self, apps: Iterable[Any]) -> None:
        self.threads = [ServerThread(app) for app in list(apps)]

    def url(self, i: int) -> str:
        return self.threads[i].url

    def stop(self) -> None:
        for thread in self.threads:
            thread.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


W = TypeVar("W", bound=Workers)


def workers_fixture(build: Callable[[str, str], W]) -> Any:
    """A ``workers`` fixture: ``build(redis_url, prefix)`` (the shared Redis, the test's own key prefix) for each
    test, stopped after it."""

    @pytest.fixture
    def workers(redis_url: str, prefix: str) -> Iterator[W]:
        group = build(redis_url, prefix)
        yield group
        group.stop()

    return workers


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        yield client
