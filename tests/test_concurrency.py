"""The request path's concurrency pieces through their public methods: the bounded queue an HTTP response reads
from, the handler tasks of a connection, and its write lock."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers import BOTH_RUNNERS

from jsonrpc_mcp.jsonrpc.concurrency import BoundedQueue, WriteLock, open_handler_tasks

pytestmark = pytest.mark.anyio


async def _drain(queue: BoundedQueue[bytes]) -> list[bytes]:
    items = []
    while True:
        try:
            items.append(await queue.receive())
        except anyio.EndOfStream:
            return items


async def test_a_bounded_queue_hands_items_in_order_waits_for_room_and_ends_after_draining() -> None:
    queue: BoundedQueue[bytes] = BoundedQueue(2)
    with pytest.raises(anyio.WouldBlock):
        queue.receive_nowait()
    queue.send_nowait(b"a")
    queue.send_nowait(b"b")
    with pytest.raises(anyio.WouldBlock):
        queue.send_nowait(b"c")  # full
    sent: list[bytes] = []

    async def send_third() -> None:
        await queue.send(b"c")
        sent.append(b"c")

    async with anyio.create_task_group() as tg:
        tg.start_soon(send_third)
        await anyio.wait_all_tasks_blocked()
        assert sent == []  # waits for room
        assert queue.receive_nowait() == b"a"
    assert sent == [b"c"] and len(queue) == 2
    queue.end()
    with pytest.raises(anyio.ClosedResourceError):
        queue.send_nowait(b"d")
    assert await _drain(queue) == [b"b", b"c"]  # what was queued, then the end
    with pytest.raises(anyio.EndOfStream):
        queue.receive_nowait()


async def test_a_bounded_queue_wakes_its_reader_and_refuses_items_once_the_reader_is_gone() -> None:
    queue: BoundedQueue[bytes] = BoundedQueue(4)
    got: list[Any] = []

    async def read() -> None:
        got.extend(await _drain(queue))
        got.append("end")

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        queue.send_nowait(b"x")
        await anyio.wait_all_tasks_blocked()
        assert got == []  # (read, and waiting for more)
        queue.end()
    assert got == [b"x", "end"]

    queue = BoundedQueue(4)
    queue.send_nowait(b"dropped")
    queue.close()
    with pytest.raises(anyio.ClosedResourceError):
        queue.receive_nowait()
    with pytest.raises(anyio.BrokenResourceError):
        queue.send_nowait(b"late")


async def test_writers_waiting_for_room_are_independent() -> None:
    """Two writers wait for room in a full queue of one; one of them gives up (its task is cancelled): that does
    not wake or fail the other, which gets its item in once the reader takes one."""
    queue: BoundedQueue[bytes] = BoundedQueue(1)
    await queue.send(b"first")
    done: list[bytes] = []

    async def write(item: bytes) -> None:
        await queue.send(item)
        done.append(item)

    async with anyio.create_task_group() as tg:
        gone = anyio.CancelScope()

        async def write_then_go() -> None:
            with gone:
                await write(b"gone")

        tg.start_soon(write_then_go)
        tg.start_soon(write, b"second")
        await anyio.wait_all_tasks_blocked()
        gone.cancel()
        await anyio.wait_all_tasks_blocked()
        assert done == []  # still waiting: no room yet
        assert await queue.receive() == b"first"
    assert done == [b"second"]
    assert await queue.receive() == b"second"


@BOTH_RUNNERS  # (the handler tasks, and the plain reference's: an anyio task group)
@pytest.mark.usefixtures("runner")
async def test_handler_tasks_run_are_cancelled_alone_or_together_and_are_waited_for() -> None:
    started: list[str] = []
    cancelled: list[str] = []
    finished: list[str] = []

    async def work(name: str, tasks: Any, token: list[object]) -> None:
        started.append(name)
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.append(name)
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()  # (cleanup that waits still runs)
            finished.append(name)
            raise
        finally:
            tasks.forget(token[0])

    with anyio.fail_after(10):
        async with open_handler_tasks() as tasks:
            one: list[object] = []
            two: list[object] = []
            one.append(tasks.spawn(work("one", tasks, one), "one"))
            two.append(tasks.spawn(work("two", tasks, two), "two"))
            await anyio.wait_all_tasks_blocked()
            assert sorted(started) == ["one", "two"]
            tasks.cancel(one[0])
            await anyio.wait_all_tasks_blocked()
            assert cancelled == ["one"]
        # leaving cancels the rest and waits for their cleanup
    assert sorted(finished) == ["one", "two"]


@BOTH_RUNNERS  # (the handler tasks, and the plain reference's: an anyio task group)
@pytest.mark.usefixtures("runner")
async def test_a_handler_task_cancelled_before_it_starts_runs_to_its_first_await() -> None:
    reached: list[str] = []

    async def work() -> None:
        reached.append("start")
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            reached.append("cancelled")
            raise

    with anyio.fail_after(10):
        async with open_handler_tasks() as tasks:
            tasks.cancel(tasks.start_soon(work(), "work"))
    assert reached == ["start", "cancelled"]


async def test_the_write_lock_serves_its_waiters_in_turn_and_a_cancelled_waiter_leaves_the_queue() -> None:
    lock = WriteLock()
    order: list[str] = []
    holding, release = anyio.Event(), anyio.Event()

    async def holder() -> None:
        await lock.acquire()
        holding.set()
        await release.wait()
        order.append("first")
        lock.release()

    async def waiter(name: str, scope: anyio.CancelScope) -> None:
        with scope:
            await lock.acquire()
            order.append(name)
            lock.release()

    gone = anyio.CancelScope()
    with anyio.fail_after(5):  # (a lock lost to a cancelled waiter would hang "third")
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await holding.wait()
            for name, scope in (("second", anyio.CancelScope()), ("gone", gone), ("third", anyio.CancelScope())):
                tg.start_soon(waiter, name, scope)
                await anyio.wait_all_tasks_blocked()  # (each queued behind the one before)
            gone.cancel()
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert order == ["first", "second", "third"]
    await lock.acquire()  # free again
    order.append("after")


async def test_a_cancellation_as_the_write_lock_is_handed_on_never_loses_it() -> None:
    lock = WriteLock()
    got: list[str] = []
    holding, release = anyio.Event(), anyio.Event()
    doomed = anyio.CancelScope()

    async def holder() -> None:
        await lock.acquire()
        holding.set()
        await release.wait()
        lock.release()
        doomed.cancel()  # the lock has just been handed to "doomed", which has not run since

    async def waiter(name: str, scope: anyio.CancelScope) -> None:
        with scope:
            await lock.acquire()
            try:
                got.append(name)
                await anyio.lowlevel.checkpoint()
            finally:
                lock.release()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await holding.wait()
            tg.start_soon(waiter, "doomed", doomed)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(waiter, "kept", anyio.CancelScope())
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert got[-1] == "kept"  # ("doomed" may have held it for a moment, or passed it on at once)
    with anyio.fail_after(5):
        await lock.acquire()
    got.append("after")
