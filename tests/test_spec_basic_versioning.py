"""2026-07-28 basic/versioning and basic/transports/stdio, "Backward Compatibility": how a client that speaks both
eras finds the server's (the ids are in conformance/spec/coverage/basic.toml and transports.toml). Each test runs
the client against a scripted server that records what the client sends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from helpers import RawPeer

from jsonrpc_mcp import Client, RpcError
from jsonrpc_mcp.mcp.groups import unwrap_group
from jsonrpc_mcp.transports.memory import memory_pair

pytestmark = pytest.mark.anyio

V5 = "2026-07-28"
DISCOVERED = {"supportedVersions": [V5], "capabilities": {"tools": {}}}
INITIALIZED = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "old", "version": "1"},
}
#: What a server answers: a result, an ``{"error": ...}``, or ``None`` (no answer at all).
Script = Callable[[dict[str, Any]], dict[str, Any] | None]


@asynccontextmanager
async def scripted(script: Script, **options: Any) -> AsyncIterator[tuple[Client, list[dict[str, Any]]]]:
    ours, theirs = memory_pair()
    peer = RawPeer(theirs)
    seen: list[dict[str, Any]] = []

    async def serve() -> None:
        while True:
            message = await peer.recv_json(timeout=30)
            seen.append(message)
            if "id" not in message:
                continue
            answer = script(message)
            if answer is None:
                continue
            reply = {"jsonrpc": "2.0", "id": message["id"], **({"result": answer} if "error" not in answer else answer)}
            await peer.send(json.dumps(reply).encode())

    with unwrap_group():
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            try:
                async with Client.connect(ours, **options) as client:
                    yield client, seen
            finally:
                tg.cancel_scope.cancel()
                await ours.aclose()
                await theirs.aclose()


def modern(message: dict[str, Any]) -> dict[str, Any]:
    return DISCOVERED if message["method"] == "server/discover" else {"tools": []}


async def test_a_client_of_both_eras_probes_discover_first_with_its_modern_version() -> None:
    """ "A client that supports both modern (per-request-metadata) MCP versions and a legacy version ... SHOULD probe
    with server/discover before sending any other request, setting its preferred modern version in _meta"; "On
    stdio, clients SHOULD send server/discover first"."""
    async with scripted(modern) as (client, seen):
        await client.list_tools()
    first = seen[0]
    assert first["method"] == "server/discover"
    assert first["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == V5
    assert [m["method"] for m in seen] == ["server/discover", "tools/list"]


async def test_the_era_found_is_kept_for_the_connection() -> None:
    """ "Clients SHOULD cache the result for the lifetime of the server process (stdio) or origin (HTTP)": one
    probe, then every request of the connection in the era it found."""
    async with scripted(modern) as (client, seen):
        for _ in range(3):
            await client.list_tools()
    assert [m["method"] for m in seen] == ["server/discover", "tools/list", "tools/list", "tools/list"]


def legacy(refusal: dict[str, Any] | None) -> Script:
    def script(message: dict[str, Any]) -> dict[str, Any] | None:
        if message["method"] == "server/discover":
            return refusal
        return INITIALIZED if message["method"] == "initialize" else {"tools": []}

    return script


@pytest.mark.parametrize(
    "refusal",
    [
        {"error": {"code": -32601, "message": "Method not found"}},
        {"error": {"code": -32602, "message": "Invalid params"}},
        {"error": {"code": -32600, "message": "Server not initialized"}},
        {"error": {"code": -32603, "message": "Internal error"}},
        {"error": {"code": 1, "message": "no"}},
        None,  # no answer at all
    ],
    ids=["-32601", "-32602", "-32600", "-32603", "its-own-code", "silence"],
)
async def test_the_fallback_to_initialize_is_not_keyed_to_one_error_code(refusal: dict[str, Any] | None) -> None:
    """ "The fallback MUST NOT be keyed to one specific error code: legacy servers respond to unknown pre-initialize
    requests with implementation-defined errors (commonly -32601 or -32602) or not at all"."""
    with anyio.fail_after(10):
        async with scripted(legacy(refusal), request_timeout=0.2) as (client, seen):
            await client.list_tools()
    assert not client.stateless and client.protocol_version == "2025-11-25"
    methods = [m["method"] for m in seen]
    assert methods[0] == "server/discover" and "initialize" in methods and methods[-1] == "tools/list"


async def test_an_unsupported_version_is_retried_with_one_of_the_listed_versions() -> None:
    """ "The client SHOULD select a mutually supported version from the supported list and retry the request, or
    surface an error to the user if no compatible version exists"."""
    asked: list[str] = []

    def script(message: dict[str, Any]) -> dict[str, Any]:
        version = message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
        asked.append(version)
        if len(asked) == 1:
            data = {"supported": ["2099-01-01", V5], "requested": version}
            return {"error": {"code": -32022, "message": "Unsupported protocol version", "data": data}}
        return modern(message)

    async with scripted(script) as (client, _):
        assert client.stateless and client.protocol_version == V5
    assert asked == [V5, V5]


async def test_no_common_version_is_an_error_the_caller_sees() -> None:
    data = {"supported": ["2099-01-01"], "requested": V5}
    refusal = {"error": {"code": -32022, "message": "Unsupported protocol version", "data": data}}
    with pytest.raises(RpcError) as raised:
        async with scripted(lambda message: refusal, protocol_version=V5):
            pass  # pragma: no cover
    assert raised.value.code == -32022 and raised.value.data == data


def test_the_tasks_extension_documents_its_fallback() -> None:
    """ "Extensions SHOULD document their expected fallback behavior": docs/tasks.md says what a call of each kind
    of task tool does for a client that did not declare the extension (the behaviour is
    tests/test_tasks.py::test_without_the_extension_a_task_tool_answers_in_its_request_and_a_required_one_is_refused).
    """
    from helpers import ROOT

    said = " ".join((ROOT / "docs" / "tasks.md").read_text(encoding="utf-8").split())
    assert (
        '`"optional"`: a task when the client declared the extension on the call, else answered in the request.' in said
    )
    assert '`"required"`: a task always; a client that did not declare the extension gets -32021' in said
