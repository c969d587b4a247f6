"""The knowledge store under stress and on bad files: parallel writers lose no update, a restart loses nothing
committed, a busy database is a retryable DEPENDENCY_ERROR, and a file that cannot be used is refused at start-up
with a clear error and left byte for byte as it was."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import anyio
import pytest
from test_knowledge_helpers import knowledge

from jsonrpc_mcp.examples.knowledge import KnowledgeStore, KnowledgeStoreError, create_server
from jsonrpc_mcp.examples.knowledge.store import StoreConflict
from jsonrpc_mcp.presentation import call_tool_with_retry

pytestmark = pytest.mark.anyio


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "knowledge.db"


# --- concurrency -----------------------------------------------------------------------------------------------


async def test_parallel_stores_all_commit_with_distinct_ids(db: Path) -> None:
    async with knowledge(db) as kb:
        results: list[dict[str, object]] = []

        async def one(i: int) -> None:
            results.append(await kb.store("parallel", f"fact {i}"))

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
        assert sorted(r["txId"] for r in results) == list(range(1, 21))  # type: ignore[type-var]
        assert len({r["entry"]["id"] for r in results}) == 20  # type: ignore[index]
        assert (await kb.call("query", topic="parallel", limit=100))["total"] == 20


async def test_parallel_updates_of_one_entry_lose_nothing(db: Path) -> None:
    async with knowledge(db) as kb:
        entry_id = (await kb.store("shared", "counter"))["entry"]["id"]

        async def tag(i: int) -> None:
            data = await kb.call("update", id=entry_id, add_tags=[f"t{i}"])
            assert data["kind"] == "entryUpdated:v1"

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(tag, i)
        entry = (await kb.read(f"knowledge://entries/{entry_id}"))["item"]
        assert sorted(entry["tags"]) == sorted(f"t{i}" for i in range(20))
        assert entry["version"] == 21


async def test_two_stores_on_one_file_serialise_their_writes(db: Path) -> None:
    """Two stores (two connections each, as two processes would have) writing at once: SQLite's write lock
    (BEGIN IMMEDIATE + busy_timeout) queues them; every update lands."""
    first = KnowledgeStore(db)
    second = KnowledgeStore(db)
    try:
        entry_id = first.add_entry("shared", "counter", 0.5, []).value.id

        def writer(store: KnowledgeStore, name: str) -> None:
            for i in range(25):
                store.update_entry(entry_id, add_tags=[f"{name}{i}"])

        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, writer, first, "a")
            tg.start_soon(anyio.to_thread.run_sync, writer, second, "b")
        entry, last_tx = first.get_entry(entry_id)
        assert entry is not None and len(entry.tags) == 50 and entry.version == 51
        assert last_tx == 51
    finally:
        first.close()
        second.close()


async def test_optimistic_concurrency_lets_exactly_one_of_two_racing_updates_win(db: Path) -> None:
    store = KnowledgeStore(db)
    try:
        entry_id = store.add_entry("t", "v1", 0.5, []).value.id
        outcomes: list[str] = []

        def update(content: str) -> None:
            try:
                store.update_entry(entry_id, content=content, expected_version=1)
                outcomes.append("ok")
            except StoreConflict:
                outcomes.append("conflict")

        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, update, "from a")
            tg.start_soon(anyio.to_thread.run_sync, update, "from b")
        assert sorted(outcomes) == ["conflict", "ok"]
    finally:
        store.close()


async def test_a_database_that_is_gone_is_a_dependency_error_not_worth_retrying(db: Path) -> None:
    async with knowledge(db) as kb:
        kb.server.store.close()
        gone = await kb.result("store", topic="t", content="c")
        data = gone.structured_content
        assert (data["code"], data["retryable"]) == ("DEPENDENCY_ERROR", False)
        assert data["nextSteps"] == ["Nothing was written; the server's operator should check its database file."]


async def test_a_busy_database_is_a_retryable_dependency_error(db: Path) -> None:
    async with knowledge(db) as kb:
        kb.server.store.db._writer.execute("PRAGMA busy_timeout = 20")
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        try:
            busy = await kb.result("store", topic="t", content="c")
            assert busy.is_error is True
            data = busy.structured_content
            assert (data["code"], data["retryable"]) == ("DEPENDENCY_ERROR", True)
            assert "busy" in data["message"] and "sqlite" not in data["message"].lower()

            async def release(seconds: float) -> None:
                blocker.execute("ROLLBACK")  # the other writer finishes while we back off

            result = await call_tool_with_retry(
                kb.client, "store", {"topic": "t", "content": "c"}, attempts=3, sleep=release
            )
            assert result.structured_content["kind"] == "entryStored:v1"  # type: ignore[index]
        finally:
            blocker.close()


# --- restart ----------------------------------------------------------------------------------------------------


async def test_a_restart_on_the_same_file_loses_nothing_committed(db: Path) -> None:
    async with knowledge(db) as kb:
        first = (await kb.store("python", "fact one", tags=["a"]))["entry"]
        await kb.store("python", "fact two")
        await kb.call("update", id=first["id"], content="fact one, revised")
        await kb.call("relate", subject="python", predicate="has", object="GIL")
        await kb.call("delete", id=2)
        before_history = await kb.read("knowledge://history/transactions")
        before_entries = await kb.read("knowledge://entries")
    async with knowledge(db) as kb:
        assert await kb.read("knowledge://history/transactions") == before_history
        assert await kb.read("knowledge://entries") == before_entries
        assert (await kb.read("knowledge://graph/triples"))["items"][0]["object"] == "GIL"
        undone = await kb.call("undo", tx_id=5)  # the delete, undone after the restart
        assert undone["kind"] == "undoResult:v1"
        assert (await kb.call("query", topic="python"))["total"] == 2
        assert (await kb.store("rust", "new after restart"))["entry"]["id"] == 3


def test_the_store_file_uses_wal_and_the_schema_version(db: Path) -> None:
    create_server(str(db)).close()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT value FROM kb_meta WHERE key = 'schema_version'").fetchone()[0] == "1"
    finally:
        conn.close()


# --- files that cannot be used ----------------------------------------------------------------------------------


def _refused(path: Path, *words: str) -> None:
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(KnowledgeStoreError) as raised:
        create_server(str(path))
    message = str(raised.value)
    assert str(path) in message
    for word in words:
        assert word in message, message
    if before is not None:
        assert path.read_bytes() == before  # nothing overwritten


def test_a_read_only_file_is_refused(db: Path) -> None:
    create_server(str(db)).close()
    os.chmod(db, stat.S_IRUSR | stat.S_IRGRP)
    try:
        _refused(db, "read-only")
    finally:
        os.chmod(db, stat.S_IRUSR | stat.S_IWUSR)


def test_a_file_that_is_not_sqlite_is_refused(db: Path) -> None:
    db.write_bytes(b"this is not a database, it is someone's notes\n" * 100)
    _refused(db, "not a SQLite database", "untouched")


def test_a_corrupt_database_is_refused(db: Path) -> None:
    create_server(str(db)).close()
    raw = bytearray(db.read_bytes())
    raw[100:4096] = b"\xff" * (4096 - 100)  # smash the first page after the header
    db.write_bytes(bytes(raw))
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    _refused(db, "untouched")


def test_another_applications_database_is_refused(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices(total) VALUES (12.5)")
    conn.commit()
    conn.close()
    _refused(db, "another application")


def test_a_newer_schema_is_refused(db: Path) -> None:
    create_server(str(db)).close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE kb_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    _refused(db, "schema version 99")


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    _refused(tmp_path / "no" / "such" / "dir" / "knowledge.db", "does not exist")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    _refused(tmp_path, "not a regular file")


def test_an_empty_file_becomes_a_new_store(db: Path) -> None:
    db.write_bytes(b"")
    server = create_server(str(db))
    server.close()
    assert db.read_bytes()[:16] == b"SQLite format 3\x00"


def test_a_closed_store_refuses_work(db: Path) -> None:
    store = KnowledgeStore(db)
    store.close()
    store.close()  # idempotent
    with pytest.raises(KnowledgeStoreError):
        store.add_entry("t", "c", 0.5, [])
