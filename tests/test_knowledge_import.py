"""The knowledge server's bulk import (``import_entries``) on a real SQLite file: one transaction for all (undone
as one), known facts skipped, run as a task where the client declares the tasks extension (2026-07-28) with its
progress, and cancelled without leaving anything written; in the handshake era, the same call answered in its
request with progress notifications.

Nothing sleeps: a cancellation is made certain to come first by holding the database's write lock (another
connection's ``BEGIN IMMEDIATE``) until the server has acknowledged it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import paced
from test_knowledge_helpers import HANDSHAKE, TIMEOUT, knowledge

from jsonrpc_mcp.examples.knowledge import KnowledgeStore
from jsonrpc_mcp.examples.knowledge.store import IMPORT_CHUNK, ImportCancelled, NewEntry
from jsonrpc_mcp.middleware import CallNext, Message
from jsonrpc_mcp.tasks import ClientTasks, TaskCancelled

pytestmark = pytest.mark.anyio


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "knowledge.db"


def facts(count: int, prefix: str = "fact") -> list[dict[str, Any]]:
    return [{"topic": f"bulk/{i % 7}", "content": f"{prefix} number {i}", "tags": ["Bulk"]} for i in range(count)]


async def test_an_import_runs_as_a_task_and_stores_everything_in_one_transaction(db: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with knowledge(db, extensions=[ClientTasks()]) as kb:
        known = await kb.store("bulk/0", "fact number 0")
        entries = [*facts(120), {"topic": "bulk/1", "content": "fact number 1"}]  # (the last one twice)
        result = await kb.client.call_tool("import_entries", {"entries": entries}, progress=progress)
        data = result.structured_content
        assert isinstance(data, dict) and data["kind"] == "entriesImported:v1", data
        assert (data["imported"], data["skipped"], data["txId"]) == (119, 2, 2)
        assert len(data["entryIds"]) == 119 and data["entryIds"][0] == known["entry"]["id"] + 1
        history = await kb.call("history")
        assert [tx["op"] for tx in history["transactions"]] == ["import", "store"]
        assert history["transactions"][0]["summary"] == "import 119 entries (2 known already)"
        found = await kb.call("query", tags=["bulk"], limit=100)
        assert found["total"] == 119  # (the one stored before has no tags)
        undone = await kb.call("undo", tx_id=data["txId"])
        assert undone["kind"] == "undoResult:v1"
        assert (await kb.call("query", tags=["bulk"], limit=100))["total"] == 0  # (tags: the import's only)
    for done, total, message in seen:  # (as many steps as the polls saw: each one as the server said it)
        assert total == 121 and message == f"{done:g} of 121 entries"
    assert [done for done, _, _ in seen] == sorted({done for done, _, _ in seen})


async def test_a_cancelled_import_writes_nothing(db: Path) -> None:
    async with knowledge(db) as kb:  # (declaring nothing: start_tool_task declares the extension for its call)
        await kb.store("kept", "a fact stored before")
        holder = sqlite3.connect(db, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # the write lock: the import cannot write a row until it is let go
            handle = await kb.client.start_tool_task("import_entries", {"entries": facts(3 * IMPORT_CHUNK)})
            assert handle.task_id is not None and handle.status == "working"
            await handle.cancel()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        with pytest.raises(TaskCancelled):
            await handle.wait(timeout=TIMEOUT)
        assert (await kb.call("query", text="number", limit=100))["total"] == 0
        history = await kb.call("history")
        assert [tx["op"] for tx in history["transactions"]] == ["store"]  # (no import transaction, not half of one)
        again = await kb.call("import_entries", entries=facts(3))  # (the database is usable, nothing is locked)
        assert again["imported"] == 3


async def test_in_the_handshake_era_an_import_answers_in_its_request_with_progress(db: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with knowledge(db, protocol_version=HANDSHAKE, extensions=[ClientTasks()]) as kb:
        result = await kb.client.call_tool("import_entries", {"entries": facts(120)}, progress=progress)
        data = result.structured_content
        assert isinstance(data, dict) and (data["imported"], data["txId"]) == (120, 1)
    assert paced(
        seen, [(50, 120, "50 of 120 entries"), (100, 120, "100 of 120 entries"), (120, 120, "120 of 120 entries")]
    )


async def test_in_the_handshake_era_a_cancelled_import_request_writes_nothing(db: Path) -> None:
    async with knowledge(db, protocol_version=HANDSHAKE) as kb:
        arrived, told = anyio.Event(), anyio.Event()

        def watch(message: Message, call_next: CallNext) -> Any:
            out = call_next(message)
            if message.method == "tools/call":
                arrived.set()
            elif message.method == "notifications/cancelled":
                told.set()
            return out

        kb.server.add_middleware(watch)
        holder = sqlite3.connect(db, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            with anyio.fail_after(TIMEOUT):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(kb.client.call_tool, "import_entries", {"entries": facts(3 * IMPORT_CHUNK)})
                    await arrived.wait()
                    tg.cancel_scope.cancel()  # (the client sends notifications/cancelled)
                await told.wait()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        await kb.store("after", "a write queued behind the import")  # (so the import is over when it returns)
        history = await kb.call("history")
        assert [tx["op"] for tx in history["transactions"]] == ["store"]
        assert (await kb.call("query", text="number", limit=100))["total"] == 0


async def test_bad_entries_import_nothing(db: Path) -> None:
    async with knowledge(db) as kb:
        empty = await kb.result("import_entries", entries=[*facts(2), {"topic": " ", "content": "x"}])
        assert empty.is_error is True
        error = empty.structured_content
        assert isinstance(error, dict) and error["code"] == "VALIDATION_ERROR"
        assert error["message"] == "entries[2] has an empty topic; nothing was imported."
        for entries in (
            [],
            [{"topic": "t", "content": "c", "confidence": 2}],
            [{"topic": "t", "content": "c", "x": 1}],
        ):
            bad = await kb.result("import_entries", entries=entries)
            assert bad.is_error is True and bad.structured_content["code"] == "VALIDATION_ERROR", entries  # type: ignore[index]
        assert (await kb.call("history"))["total"] == 0


def test_the_store_rolls_an_import_back_when_asked_to_stop(db: Path) -> None:
    store = KnowledgeStore(db)
    try:
        checks: list[int] = []
        done: list[int] = []

        def cancelled() -> bool:
            checks.append(1)
            return len(checks) == 2  # after the second chunk's rows were written in the transaction

        items = [NewEntry("t", f"c{i}") for i in range(3 * IMPORT_CHUNK)]
        with pytest.raises(ImportCancelled) as stopped:
            store.import_entries(items, progress=done.append, cancelled=cancelled)
        assert (stopped.value.done, stopped.value.total) == (2 * IMPORT_CHUNK, 3 * IMPORT_CHUNK)
        assert done == [IMPORT_CHUNK]
        with store.db.read() as conn:
            assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM transactions").fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM changes").fetchone()[0] == 0
        write = store.import_entries(items[:3])
        assert write.tx_id == 1 and write.value.entry_ids == [1, 2, 3]  # (the ids the rollback freed)
    finally:
        store.close()
