"""The rules of a sampling conversation with tools (2025-11-25 and later; L2: pure functions).

A user message that holds tool results holds nothing else, and each assistant message that asks for tools
(``tool_use`` blocks) is followed by a user message of their results, one for each ``id``; a result answers a tool
use of the conversation. The server checks the messages it sends (``Context.sample``), the client those it
receives (a request that breaks them is -32602, as the sampling page's error table says).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ("conversation_problem",)


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    items = content if isinstance(content, list) else [content]
    return [item for item in items if isinstance(item, Mapping)]


def conversation_problem(messages: Sequence[Any]) -> str | None:
    """What breaks the tool-use rules in ``messages`` (each a ``SamplingMessage`` as builtins), or ``None``."""
    asked: set[Any] = set()
    waiting: set[Any] | None = None  # the tool uses the message just before asked for, still unanswered
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        kinds = [block.get("type") for block in _blocks(message)]
        results = [block for block in _blocks(message) if block.get("type") == "tool_result"]
        if waiting is not None:
            if message.get("role") != "user" or len(results) != len(kinds) or not kinds:
                return f"message {index}: the tool uses before it need a user message of their results only"
            answered = {block.get("toolUseId") for block in results}
            if not waiting <= answered:
                return f"message {index}: no tool result for {', '.join(sorted(map(str, waiting - answered)))}"
            waiting = None
        elif results and len(results) != len(kinds):
            return f"message {index}: a user message with tool results holds tool results only"
        for block in results:
            if block.get("toolUseId") not in asked:
                return f"message {index}: the tool result for {block.get('toolUseId')!r} answers no tool use"
        uses = {block.get("id") for block in _blocks(message) if block.get("type") == "tool_use"}
        if uses and message.get("role") == "assistant":
            asked |= uses
            waiting = uses
    if waiting is not None:
        return "the last message asks for tools: a user message of their results must follow it"
    return None
