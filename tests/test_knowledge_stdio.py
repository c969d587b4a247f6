"""The knowledge server as users run it: ``python -m jsonrpc_mcp serve`` over stdio with ``KNOWLEDGE_DB`` set —
a write in one process is there for the next, and a file it cannot use stops it at start-up, untouched."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from test_knowledge_helpers import HANDSHAKE

from jsonrpc_mcp import Client, RpcError

pytestmark = pytest.mark.anyio

SERVE = [sys.executable, "-m", "jsonrpc_mcp", "serve"]
TIMEOUT = 60


async def test_a_stdio_server_process_keeps_what_it_committed_for_the_next_one(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    env = {"KNOWLEDGE_DB": str(db)}
    with anyio.fail_after(TIMEOUT):
        async with Client.connect_stdio(SERVE, env=env, cwd=str(tmp_path), stderr=subprocess.DEVNULL) as client:
            assert client.server_info is not None and client.server_info.name == "knowledge"
            stored = await client.call_tool("store", {"topic": "stdio", "content": "written by process one"})
            assert stored.structured_content["txId"] == 1  # type: ignore[index]
            related = await client.call_tool("relate", {"subject": "a", "predicate": "b", "object": "c"})
            assert related.structured_content["created"] is True  # type: ignore[index]
        assert db.exists()
        async with Client.connect_stdio(
            SERVE, env=env, cwd=str(tmp_path), stderr=subprocess.DEVNULL, protocol_version=HANDSHAKE
        ) as client:
            found = await client.call_tool("query", {"topic": "stdio", "format": "json"})
            data = found.structured_content
            assert data["total"] == 1  # type: ignore[index]
            assert data["entries"][0]["content"] == "written by process one"  # type: ignore[index]
            page = await client.read_resource("knowledge://history/transactions")
            items = json.loads(page.contents[0].text or "")["items"]
            assert [tx["op"] for tx in items] == ["store", "relate"]


async def test_a_read_only_database_stops_the_server_at_start_up(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    with anyio.fail_after(TIMEOUT):
        async with Client.connect_stdio(SERVE, env={"KNOWLEDGE_DB": str(db)}, stderr=subprocess.DEVNULL) as client:
            await client.call_tool("store", {"topic": "t", "content": "c"})
    os.chmod(db, stat.S_IRUSR)
    before = db.read_bytes()
    try:
        with anyio.fail_after(TIMEOUT):
            done = await anyio.run_process(
                SERVE, env={**os.environ, "KNOWLEDGE_DB": str(db)}, stdin=subprocess.DEVNULL, check=False
            )
    finally:
        os.chmod(db, stat.S_IRUSR | stat.S_IWUSR)
    assert done.returncode != 0
    assert b"read-only" in done.stderr and str(db).encode() in done.stderr
    assert db.read_bytes() == before


async def test_input_the_caller_got_wrong_is_never_an_internal_error_over_stdio(tmp_path: Path) -> None:
    env = {"KNOWLEDGE_DB": str(tmp_path / "memory.db")}
    with anyio.fail_after(TIMEOUT):
        async with Client.connect_stdio(
            SERVE, env=env, cwd=str(tmp_path), stderr=subprocess.DEVNULL, protocol_version=HANDSHAKE
        ) as client:
            await client.call_tool("store", {"topic": "t", "content": "c"})
            huge = await client.call_tool("update", {"id": 2**70, "content": "x"})
            assert huge.is_error is True and huge.structured_content["code"] == "VALIDATION_ERROR"  # type: ignore[index]
            for uri, code in (
                ("knowledge://entries/99999999999999999999999", -32002),
                ("knowledge://entries?limit=%C2%B2", -32602),
            ):
                with pytest.raises(RpcError) as raised:
                    await client.read_resource(uri)
                assert raised.value.code == code, uri
            with pytest.raises(RpcError) as prompt:
                await client.get_prompt("correct_stale_fact", {"topic": "t", "correction": "c", "entry_id": "9" * 40})
            assert prompt.value.code == -32602
            assert (await client.call_tool("query", {"topic": "t"})).structured_content["total"] == 1  # type: ignore[index]
