"""A test peer: a small stdio server written with the official MCP Python SDK (``mcp``, a dev-only dependency).

It offers the names the golden wire transcripts ask for (``jsonrpc_mcp/transcripts``), so that
``jsonrpc-mcp check`` can compare the SDK's wire behaviour with ours rule by rule::

    jsonrpc-mcp check -- .venv/bin/python conformance/peers/official_sdk_server.py
    .venv/bin/python conformance/peers/official_sdk_server.py --http 8765 &
    jsonrpc-mcp check --url http://127.0.0.1:8765/mcp

Tools with ``str`` parameters (``test_sampling``, ``test_elicitation``), a slow tool reporting progress, a tool
that logs, one that needs sampling; a static resource and a template; two prompts; completions. Nothing here is
part of jsonrpc-mcp.
"""

from __future__ import annotations

import json
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve, Sample
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageResult,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

mcp = MCPServer("official-sdk-peer", version="1.0.0", instructions="A test peer built on the official MCP SDK.")


@mcp.tool(description="Tests simple text content response")
def test_simple_text() -> str:
    return "This is a simple text response for testing."


@mcp.tool(description="Tests error response handling")
def test_error_handling() -> str:
    raise RuntimeError("This tool intentionally returns an error for testing")


@mcp.tool(description="Tests tool that reports progress notifications (about 100 ms)")
async def test_tool_with_progress(ctx: Context) -> str:
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        if step < 100:
            await anyio.sleep(0.05)
    return "done"


@mcp.tool(description="Logs one info message")
async def test_logging_tool(ctx: Context) -> str:
    await ctx.info("Diagnostic trace logging activated")
    return "Logging evaluated"


def _ask_llm(prompt: str) -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text=prompt))], max_tokens=100)


@mcp.tool(description="Tests server-initiated sampling (LLM completion request)")
async def test_sampling(prompt: str, answer: Annotated[CreateMessageResult, Resolve(_ask_llm)]) -> str:
    content = answer.content
    return f"LLM response: {getattr(content, 'text', 'No response')}"


def _say_hello() -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text="Say hello"))], max_tokens=10)


@mcp.tool(description="Test tool requiring sampling")
async def test_missing_capability(answer: Annotated[CreateMessageResult, Resolve(_say_hello)]) -> str:
    return "Success"


class Reply(BaseModel):
    response: str


def _ask_user(message: str) -> Elicit[Reply]:
    return Elicit(message, Reply)


@mcp.tool(description="Tests server-initiated elicitation (user input request)")
async def test_elicitation(message: str, reply: Annotated[Reply, Resolve(_ask_user)]) -> str:
    return f"User response: {reply.response}"


@mcp.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcp.resource("test://template/{id}/data", name="template", description="A template", mime_type="application/json")
def template(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.prompt(description="A simple prompt without arguments")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@mcp.prompt(description="A prompt with required arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument, context: CompletionContext | None
) -> Completion:
    options = {"arg1": ["paris", "park", "party"], "arg2": ["blue", "green"], "id": ["1", "2", "42"]}
    values = [o for o in options.get(argument.name, []) if o.startswith(argument.value)]
    return Completion(values=values, total=len(values), has_more=False)


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--http"]:  # --http PORT: Streamable HTTP on http://127.0.0.1:PORT/mcp
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run("stdio")
