"""2025-11-25 tasks, client side, against the reference server-everything (npm, pinned in conformance/peers/): its
``simulate-research-query`` requires task augmentation. Our CLI calls it and follows the task with its progress;
our Client follows one that asks for input on the way (an elicitation sent while ``tasks/result`` waits)."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest
from helpers import ROOT

from jsonrpc_mcp import Client, types

sys.path.insert(0, str(ROOT / "conformance" / "peers"))
import peers

pytestmark = pytest.mark.once

TOOL = "simulate-research-query"


@pytest.fixture(scope="module")
def everything() -> list[str]:
    node, entry = peers.ensure_everything()
    return [str(node), str(entry), "stdio"]


def test_the_cli_follows_a_tool_that_requires_a_task(everything: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jsonrpc_mcp", "call", TOOL, "topic=tasks", "--", *everything],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "# Research Report: tasks" in done.stdout
    assert "is working" in done.stderr  # (the task, as it was made)
    assert "progress: Gathering sources..." in done.stderr
    assert "progress: Generating report..." in done.stderr


@pytest.mark.anyio
async def test_our_client_follows_a_task_that_asks_for_input(everything: list[str]) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def clarify(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"interpretation": "programming"})

    seen: list[str | None] = []
    async with Client.connect_stdio(everything, elicitation=clarify, protocol_version="2025-11-25") as client:
        assert await client.tool_requires_task(TOOL)
        with anyio.fail_after(60):
            result = await client.call_tool(
                TOOL, {"topic": "python", "ambiguous": True}, progress=lambda d, t, m: seen.append(m)
            )
    block = result.content[0]
    assert isinstance(block, types.TextContent) and "python (programming)" in block.text
    assert len(asked) == 1 and "multiple interpretations" in asked[0].message
    assert "Gathering sources..." in seen
