"""Client side: retry tool calls whose ``toolError:v1`` result says ``retryable`` (L7, opt-in).

Only results that are ``isError`` *and* carry ``structuredContent`` of kind ``toolError:v1`` with
``retryable: true`` are retried; everything else (success, needs-input, a non-retryable failure, a plain
``isError`` result) is returned at once, and protocol errors raise as usual. The delay before attempt ``n``
(``n`` ≥ 1) is ``min(max_delay, base_delay * 2 ** (n - 1))``, "equal jitter" applied (half fixed, half
random), raised to the server's ``rateLimit.retryAfterMs`` hint when it gives one, and never above
``max_delay``.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import anyio
from msgspec import UNSET

from ..mcp import types as t

__all__ = ("call_tool_with_retry", "is_retryable", "backoff_delay", "ToolCaller")


class ToolCaller(Protocol):
    """Anything with the client's ``call_tool`` (:class:`~jsonrpc_mcp.Client` and its sessions)."""

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> t.CallToolResult: ...


def is_retryable(result: t.CallToolResult) -> bool:
    """Is this a ``toolError:v1`` result marked ``retryable``?"""
    data = result.structured_content
    return (
        result.is_error is True
        and data is not UNSET
        and isinstance(data, dict)
        and data.get("kind") == "toolError:v1"
        and data.get("retryable") is True
    )


def _retry_after(result: t.CallToolResult) -> float:
    data = result.structured_content
    limit = data.get("rateLimit") if isinstance(data, dict) else None
    value = limit.get("retryAfterMs") if isinstance(limit, dict) else None
    return float(value) / 1000 if isinstance(value, (int, float)) and value > 0 else 0.0


def backoff_delay(
    attempt: int, base_delay: float, max_delay: float, rand: Callable[[], float] = random.random
) -> float:
    """The jittered delay before retry number ``attempt`` (1 for the first retry)."""
    ceiling = min(max_delay, base_delay * 2.0 ** (attempt - 1))
    return ceiling / 2 + rand() * ceiling / 2


async def call_tool_with_retry(
    client: ToolCaller,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    attempts: int = 3,
    base_delay: float = 0.25,
    max_delay: float = 4.0,
    sleep: Callable[[float], Awaitable[Any]] = anyio.sleep,
    rand: Callable[[], float] = random.random,
    **options: Any,
) -> t.CallToolResult:
    """``client.call_tool(name, arguments)``, retried up to ``attempts`` calls in all while the result is a
    retryable ``toolError:v1``. Returns the last result. ``sleep`` and ``rand`` are injectable (tests)."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    if base_delay < 0 or max_delay < 0:
        raise ValueError("delays must not be negative")
    result = await client.call_tool(name, arguments, **options)
    for attempt in range(1, attempts):
        if not is_retryable(result):
            break
        delay = max(backoff_delay(attempt, base_delay, max_delay, rand), _retry_after(result))
        await sleep(min(delay, max_delay))
        result = await client.call_tool(name, arguments, **options)
    return result
