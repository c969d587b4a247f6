"""Interop over stdio with the official MCP Python SDK (``mcp``, a dev-only dependency), both ways and both eras:
tools, resources, prompts, progress, logging, sampling and elicitation."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from helpers import ROOT
from msgspec import UNSET

from jsonrpc_mcp import Client, MethodNotFound, types

mcp = pytest.importorskip("mcp")

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.interop,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]

OURS = [sys.executable, str(ROOT / "conformance" / "everything_server.py"), "--stdio"]
THEIRS = [sys.executable, str(ROOT / "conformance" / "peers" / "official_sdk_server.py")]


def _text(result: Any) -> str:
    return str(result.content[0].text)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_client_against_our_stdio_server(mode: str) -> None:
    from mcp import StdioServerParameters
    from mcp import types as sdk

    progress: list[float] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_log(params: Any) -> None:
        logs.append(params.data)

    async def on_sample(context: Any, params: Any) -> Any:
        return sdk.CreateMessageResult(role="assistant", content=sdk.TextContent(type="text", text="Paris"), model="m")

    async def on_elicit(context: Any, params: Any) -> Any:
        return sdk.ElicitResult(action="accept", content={"username": "Grace", "email": "grace@example.com"})

    params = StdioServerParameters(command=OURS[0], args=OURS[1:])
    async with mcp.Client(
        params,
        mode=mode,
        sampling_callback=on_sample,
        elicitation_callback=on_elicit,
        logging_callback=on_log,
        log_level="info",
    ) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"test_simple_text", "test_sampling", "test_elicitation"} <= names
        assert _text(await client.call_tool("test_simple_text", {})) == "This is a simple text response for testing."
        await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        assert _text(await client.call_tool("test_sampling", {"prompt": "Capital?"})) == "LLM response: Paris"
        elicited = await client.call_tool("test_elicitation", {"message": "Who?"})
        assert _text(elicited) == (
            'User response: action=accept, content={"username": "Grace", "email": "grace@example.com"}'
        )
        logged = await client.call_tool("test_logging_tool", {})
        assert _text(logged) == "Logging evaluated"
        failed = await client.call_tool("test_error_handling", {})
        assert failed.is_error is True
        read = await client.read_resource("test://static-text")
        assert read.contents[0].text == "This is the content of the static text resource."
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert prompt.messages[0].content.text == "Prompt with arguments: arg1='a', arg2='b'"
    assert progress == [0, 50, 100]
    assert "Diagnostic trace logging activated" in logs


@pytest.mark.parametrize("version", ["2025-11-25", "auto"])
async def test_our_client_against_the_sdk_stdio_server(version: str) -> None:
    logs: list[Any] = []
    progress: list[float] = []

    async def sample(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="Paris"), model="m")

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        answer = {
            "text": "Grace",
            "response": "Grace",
            "answer": "Grace",
            "username": "Grace",
            "email": "g@example.com",
        }
        return types.ElicitResult(action="accept", content=answer)  # (whichever the SDK's server asks for)

    async with Client.connect_stdio(
        THEIRS,
        protocol_version=version,
        sampling=sample,
        elicitation=elicit,
        on_log=lambda params: logs.append(params.data),
    ) as client:
        assert client.server_info is not None and client.server_info.name == "official-sdk-peer"
        # The SDK logs without declaring `logging`: the client asks only when told to, and says how.
        assert client.server_capabilities.logging is UNSET
        with pytest.raises(MethodNotFound, match=r"set_logging_level\(level, even_if_undeclared=True\) asks anyway"):
            await client.set_logging_level("info")
        await client.set_logging_level("info", even_if_undeclared=True)  # 2025-11-25: its -32601 is no error
        names = {tool.name for tool in await client.list_tools()}
        assert {"test_simple_text", "test_sampling", "test_elicitation"} <= names
        simple = await client.call_tool("test_simple_text")
        assert _text(simple) == "This is a simple text response for testing."
        await client.call_tool("test_tool_with_progress", progress=lambda p, total, msg: progress.append(p))
        sampled = await client.call_tool("test_sampling", {"prompt": "Capital?"})
        assert "Paris" in _text(sampled)
        elicited = await client.call_tool("test_elicitation", {"message": "Who?"})
        assert "Grace" in _text(elicited)
        await client.call_tool("test_logging_tool")
        failed = await client.call_tool("test_error_handling")
        assert failed.is_error is True
        read = await client.read_resource("test://static-text")
        assert isinstance(read.contents[0].text, str)
        templated = await client.read_resource("test://template/7/data")
        assert "7" in str(templated.contents[0].text)
        prompts = {prompt.name for prompt in await client.list_prompts()}
        assert {"test_simple_prompt", "test_prompt_with_arguments"} <= prompts
        got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert got.messages
    assert progress == [0, 50, 100]
    assert "Diagnostic trace logging activated" in logs
