"""Registering a presented tool: payloads in, format-gated ``CallToolResult`` out, failures as ``toolError:v1`` (L7).

::

    @presented_tool(server, EntrySearchResults)
    async def query(ctx: Context, text: str, format: Format | None = None) -> EntrySearchResults:
        entries = store.search(text)
        return EntrySearchResults(summary=f"{len(entries)} entries", entries=entries)

Declare a :class:`~jsonrpc_mcp.Context` parameter: without it there are no request headers to read and no way
to elicit. The function returns a :class:`~jsonrpc_mcp.presentation.payloads.Payload`, a
:class:`~jsonrpc_mcp.presentation.render.Presented`, or a ready ``CallToolResult`` (passed through). Its
``format`` argument (explicit, else the ``X-Response-Format`` header, else markdown) picks the text blocks. The
tool's ``outputSchema`` is the union of its kinds with ``needsInput:v1`` and ``toolError:v1``.

Every failure becomes a ``toolError:v1`` result with ``isError: true``, never a JSON-RPC error and never with
internals: :class:`ToolFailure` with its code; arguments that fail the input schema as ``VALIDATION_ERROR``; any
other exception as ``INTERNAL_ERROR`` (its traceback goes to the log). Protocol errors (``RpcError``) and the
stateless era's ``InputRequired`` pass through untouched.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, Raw

from ..errors import RpcError, ToolError
from ..mcp import types as t
from ..mcp.context import Context, InputRequired, StartTask
from ..mcp.server import Server, ToolDef
from ..mcp.tools import TaskSupport
from .payloads import ErrorCode, Payload, output_schema, tool_error
from .render import DATA_LIMIT, INLINE_LIMIT, Presented, present, resolve_format

__all__ = ("presented_tool", "ToolFailure")

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


class ToolFailure(ToolError):
    """Raise in a presented tool to answer with a ``toolError:v1`` result.

    It is a :class:`~jsonrpc_mcp.ToolError`, so raised from a plain tool it still becomes ``isError: true`` with
    the payload as ``structuredContent``.
    """

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        *,
        retryable: bool | None = None,
        details: Mapping[str, Any] | None = None,
        next_steps: Sequence[str] = (),
        summary: str | None = None,
    ) -> None:
        self.payload = tool_error(
            code, message, retryable=retryable, details=details, next_steps=next_steps, summary=summary
        )
        super().__init__(message, structured=msgspec.to_builtins(self.payload))


def presented_tool(
    server: Server,
    *kinds: type[Payload],
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    annotations: t.ToolAnnotations | None = None,
    icons: list[t.Icon] | None = None,
    meta: Mapping[str, Any] | None = None,
    format_param: str = "format",
    limit: int = INLINE_LIMIT,
    data_limit: int = DATA_LIMIT,
    estimate_tokens: bool = False,
    scopes: Iterable[str] | None = None,
    task: TaskSupport = "forbidden",
) -> Callable[[F], F]:
    """Register ``fn`` on ``server`` as a presented tool answering with ``kinds`` (see the module docs);
    ``scopes``: the OAuth scopes a caller's token needs, and ``task``: whether a call may run as a task
    (2026-07-28), as for :meth:`~jsonrpc_mcp.Server.tool`."""

    def register(fn: F) -> F:
        tool_name = name or fn.__name__
        options = {"limit": limit, "data_limit": data_limit, "estimate_tokens": estimate_tokens}
        wrapper = _wrap(fn, tool_name, format_param, options)
        entry = server.add_tool(
            wrapper,
            name=tool_name,
            title=title,
            description=description,
            annotations=annotations,
            icons=icons,
            output_schema=output_schema(*kinds),
            meta=meta,
            scopes=scopes,
            task=task,
        )
        _guard_arguments(entry, tool_name, format_param)
        return fn

    return register


def _wrap(fn: Callable[..., Any], tool_name: str, format_param: str, options: dict[str, Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(**kwargs: Any) -> t.CallToolResult:
        ctx = next((v for v in kwargs.values() if isinstance(v, Context)), None)
        fmt = resolve_format(ctx, kwargs.get(format_param))
        try:
            out = fn(**kwargs)
            if inspect.isawaitable(out):
                out = await out
        except ToolFailure as exc:
            return present(exc.payload, format=fmt)
        except (RpcError, InputRequired, StartTask):
            raise
        except ToolError as exc:
            return present(tool_error(ErrorCode.INTERNAL_ERROR, exc.message), format=fmt)
        except Exception:
            logger.exception("tool %s raised", tool_name)
            failure = tool_error(ErrorCode.INTERNAL_ERROR, f"The {tool_name} tool failed unexpectedly.")
            return present(failure, format=fmt)
        if isinstance(out, t.CallToolResult):
            return out
        if isinstance(out, (Payload, Presented)):
            return present(out, format=fmt, **options)
        logger.error("tool %s returned %s, not a payload", tool_name, type(out).__name__)
        return present(tool_error(ErrorCode.INTERNAL_ERROR, f"The {tool_name} tool failed unexpectedly."), format=fmt)

    wrapper.__annotations__ = {**getattr(fn, "__annotations__", {}), "return": t.CallToolResult}
    return wrapper


def _guard_arguments(entry: ToolDef, tool_name: str, format_param: str) -> None:
    """The library answers arguments that fail the input schema with a plain ``isError`` text result before the
    function runs; turn that into a ``VALIDATION_ERROR`` ``toolError:v1``."""
    inner = entry.call

    def call(ctx: Context, raw: Raw | None) -> Any:
        out = inner(ctx, raw)
        if isinstance(out, t.CallToolResult) and out.is_error is True and out.structured_content is UNSET:
            message = next((c.text for c in out.content if isinstance(c, t.TextContent)), "Invalid arguments")
            message = message.removeprefix(f"Invalid arguments for tool {tool_name}: ")
            failure = tool_error(
                ErrorCode.VALIDATION_ERROR,
                message,
                details={"tool": tool_name},
                next_steps=[f"Fix the arguments as the message says and call {tool_name} again."],
                summary=f"Invalid arguments for {tool_name}",
            )
            return present(failure, format=resolve_format(ctx, _requested_format(raw, format_param)))
        return out

    entry.call = call


def _requested_format(raw: Raw | None, format_param: str) -> str | None:
    if raw is None:
        return None
    try:
        args = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    value = args.get(format_param) if isinstance(args, dict) else None
    return value if isinstance(value, str) else None
