"""A request that asks for progress gets its whole timeout again at each progress notification.

The tool below works for longer than the client's timeout and reports progress all along: each report waits for
the client's progress callback to have run before the next one, so the gaps are round trips (never sleeps) and
only the total outlasts the timeout.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from jsonrpc_mcp import Client, Context, RequestTimeout, Server

pytestmark = pytest.mark.anyio

V = {"protocol_version": "2025-11-25"}
TIMEOUT = 0.3


class Ticks:
    """The client's progress callback, and the server's wait for it to have run."""

    def __init__(self) -> None:
        self.heard = 0
        self._event = anyio.Event()

    def callback(self, progress: float, total: float | None, message: str | None) -> None:
        self.heard += 1
        self._event.set()

    async def next(self) -> None:
        await self._event.wait()
        self._event = anyio.Event()


def busy_server(ticks: Ticks) -> Server:
    server = Server("busy", "1.0")

    @server.tool()
    async def work(seconds: float, ctx: Context) -> str:
        """Report progress until ``seconds`` have passed, each report heard by the client before the next."""
        start = anyio.current_time()
        reports = 0
        while anyio.current_time() - start < seconds:
            reports += 1
            await ctx.report_progress(reports)
            await ticks.next()
        return f"done after {reports} reports"

    return server


async def call(
    ticks: Ticks, seconds: float, *, timeout: float = TIMEOUT, per_call: dict[str, Any] | None = None, **session: Any
) -> str:
    with anyio.fail_after(30):
        async with Client.connect_server(busy_server(ticks), **V, **session) as client:
            result = await client.call_tool(
                "work", {"seconds": seconds}, progress=ticks.callback, timeout=timeout, **(per_call or {})
            )
    return str(result.content[0].text)  # type: ignore[union-attr]


async def test_progress_keeps_a_long_call_alive() -> None:
    ticks = Ticks()
    assert (await call(ticks, 4 * TIMEOUT)).startswith("done after")
    assert ticks.heard > 1


async def test_without_the_reset_the_timeout_is_fixed() -> None:
    with pytest.raises(RequestTimeout):
        await call(Ticks(), 4 * TIMEOUT, per_call={"reset_timeout_on_progress": False})
    with pytest.raises(RequestTimeout):
        await call(Ticks(), 4 * TIMEOUT, reset_timeout_on_progress=False)  # for every call of the session


async def test_max_total_timeout_caps_the_resets() -> None:
    """A longer timeout here than elsewhere: a gap between two reports on a busy machine must not end it early."""
    ticks = Ticks()
    start = anyio.current_time()
    with pytest.raises(RequestTimeout):
        await call(ticks, 30.0, timeout=1.0, max_total_timeout=2.0)
    assert ticks.heard > 1  # it was reset, then stopped at the cap
    assert anyio.current_time() - start >= 2.0


async def test_without_progress_the_timeout_is_the_timeout() -> None:
    """Only a request that asked for progress is reset: others time out as they always did."""
    with anyio.fail_after(30):
        async with Client.connect_server(busy_server(Ticks()), **V) as client:
            with pytest.raises(RequestTimeout):
                await client.call_tool("work", {"seconds": 30.0}, timeout=TIMEOUT)


async def test_every_async_progress_callback_has_run_when_the_call_returns() -> None:
    """Every report is passed on here (no pacing on either side, decision 104), so each has its callback."""
    server = Server("reporter", "1.0", progress_interval=0)

    @server.tool()
    async def report(steps: int, ctx: Context) -> str:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps)
        return f"{steps} steps"

    heard: list[float] = []

    async def slow_to_note(progress: float, total: float | None, message: str | None) -> None:
        for _ in range(5):  # each callback runs in a task of its own, and takes a few turns of the loop
            await anyio.lowlevel.checkpoint()
        heard.append(progress)

    with anyio.fail_after(30):
        async with Client.connect_server(server, **V, progress_interval=0) as client:
            result = await client.call_tool("report", {"steps": 3}, progress=slow_to_note)
            assert result.content[0].text == "3 steps"  # type: ignore[union-attr]
            assert sorted(heard) == [1, 2, 3]
