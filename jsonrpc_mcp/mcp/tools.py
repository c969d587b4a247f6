"""Calling tools: argument validation, the result conversions, and the line between tool and protocol errors (L5).

Arguments that fail validation, a :class:`~jsonrpc_mcp.errors.ToolError`, and any other exception in the tool are
*tool* errors: a ``CallToolResult`` with ``isError: true`` (SEP-1303), so the model can read what went wrong
and try again. Only a malformed ``tools/call`` (or an unknown tool) is a JSON-RPC error. Exceptions never reach
the peer: their traceback goes to the log and the result says only that the tool failed.

Where a tool runs: an ``async def`` tool in the request's own task; a plain ``def`` tool on a worker thread
(:func:`run_sync`: a thread of the pool of :mod:`jsonrpc_mcp.jsonrpc.workers`), so that one that blocks (a network
call, a sleep) never holds up the other requests of the process; a plain ``def`` registered with ``inline=True``
in the caller, with no thread hop, for code that never blocks — and one that holds the event loop longer than
:data:`INLINE_WARNING_AFTER` seconds is named in a warning.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, Literal, TypedDict, TypeVar, Unpack

import msgspec
from msgspec import UNSET, Raw

from ..errors import ConnectionClosed, InvalidParams, RequestTimeout, RpcError, ToolError
from ..jsonrpc.wire import unpack_byte
from ..jsonrpc.workers import SyncCall, run_in_worker
from . import types as t
from .context import Context, InputRequired, StartTask, call_on_worker_thread
from .output_schemas import schema_validator
from .pydantic_support import dec_hook, enc_hook
from .signature import Signature, describe_validation_error, inspect_function

__all__ = (
    "ToolDef",
    "ToolOptions",
    "TaskSupport",
    "TaskStart",
    "make_tool",
    "check_options",
    "tool_result",
    "error_result",
    "RawSchemaValidator",
    "run_sync",
    "run_sync_per_call",
    "runner",
    "call_completer",
    "INLINE_WARNING_AFTER",
    "call_inline",
)

logger = logging.getLogger(__name__)

#: Seconds an ``inline=True`` function may hold the event loop before a warning names it.
INLINE_WARNING_AFTER: Final = 0.1

R = TypeVar("R")

TaskSupport = Literal["forbidden", "optional", "required"]
TaskStart = Literal["at_call", "in_handler"]


def run_sync(fn: Callable[..., R], kwargs: Mapping[str, Any]) -> Awaitable[R]:
    """Call a plain handler on a worker thread: how every plain ``def`` tool, resource, prompt and completion
    handler not registered ``inline`` runs (a thread of :data:`~jsonrpc_mcp.jsonrpc.workers.POOL`, in the
    request's context) when it does not take the sync lane (``sync_lane`` off). A cancelled request does not
    interrupt the thread: it finishes, and its result is dropped (the function can look at ``ctx.cancelled``)."""
    return run_in_worker(call_on_worker_thread, fn, kwargs)


async def run_sync_per_call(fn: Callable[..., R], kwargs: Mapping[str, Any]) -> R:
    """:func:`run_sync` the plain way, a thread of anyio's per call (``anyio.to_thread.run_sync``): what the pool
    is checked against (the tests run the same checks with either)."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(call_on_worker_thread, fn, kwargs)


def runner(fn: Callable[..., Any], *, inline: bool, what: str) -> Callable[..., Any]:
    """How a resource or prompt function is called with keyword arguments: an ``async def`` as it is; a plain
    one on a worker thread (the call returns an awaitable), or, with ``inline``, in the caller."""
    import inspect

    if inspect.iscoroutinefunction(fn):
        if inline:
            raise TypeError(f"{what}: inline=True is for plain functions; an async function runs in its task")
        return fn
    if inline:
        return lambda **kwargs: call_inline(fn, kwargs, what)
    return lambda **kwargs: _on_worker(fn, kwargs)


def call_completer(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a completion function with positional arguments: an ``async def`` (or one marked ``runs_inline``, that
    never blocks) in the caller; a plain one on a worker thread, as :func:`runner` does (the call returns an
    awaitable then)."""
    import functools
    import inspect

    if getattr(fn, "runs_inline", False) or inspect.iscoroutinefunction(fn):
        return fn(*args)
    return _on_worker(functools.partial(fn, *args), {})


def _on_worker(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
    """A plain handler's call on a worker thread: on the sync lane (a
    :class:`~jsonrpc_mcp.jsonrpc.workers.SyncCall`, awaitable where it is not taken by the dispatcher), or
    :func:`run_sync`'s awaitable (``sync_lane`` off)."""
    if sync_lane:
        return SyncCall(call_on_worker_thread, fn, kwargs)
    return run_sync(fn, kwargs)


def call_inline(fn: Callable[..., R], kwargs: Mapping[str, Any], what: str) -> R:
    """Call a plain function in the caller (on the event loop), warning when it held the loop too long."""
    started = time.perf_counter()
    try:
        return fn(**kwargs)
    finally:
        held = time.perf_counter() - started
        if held > INLINE_WARNING_AFTER:
            logger.warning(
                "%s held the event loop for %.2f s: register it without inline=True (it then runs on a worker "
                "thread) or make it async",
                what,
                held,
            )


_encode: Final = msgspec.json.Encoder(enc_hook=enc_hook).encode
_CONTENT: Final = (t.TextContent, t.ImageContent, t.AudioContent, t.ResourceLink, t.EmbeddedResource)
_dict_decoder: Final = msgspec.json.Decoder(dict[str, Any])


class ToolDef(msgspec.Struct):
    """A registered tool: its wire description and how to call it (a Struct: cheaper to define than a dataclass)."""

    tool: t.Tool
    call: Callable[[Context, Raw | None], Any]
    signature: Signature | None = None
    #: Whether a call may run as a task (2026-07-28, the tasks extension): "forbidden", "optional", "required".
    task: TaskSupport = "forbidden"
    #: Where the task starts: when the call arrives ("at_call"), or where the function calls ctx.start_task().
    task_start: TaskStart = "at_call"


def error_result(message: str, structured: Any = None) -> t.CallToolResult:
    """A tool failure the model should see: ``isError: true`` with the message as text."""
    result = t.CallToolResult(content=[t.TextContent(text=message)], is_error=True)
    if structured is not None:
        result.structured_content = structured
    return result


def _check_object(raw: Raw | None) -> Raw | bytes:
    if raw is None:
        return b"{}"
    if raw and unpack_byte(raw)[0] == 0x7B:  # "{": the usual case, decided without a copy
        return raw
    if bytes(memoryview(raw)[:64]).lstrip()[:1] != b"{":
        raise InvalidParams('Invalid params: "arguments" must be an object')
    return raw


#: Keywords that check nothing. With them, what the checks without jsonschema-rs read (the schema's ``type``,
#: ``properties`` and ``required``, a property's ``type``): any other keyword is not enforced without the
#: ``validation`` extra.
_ANNOTATIONS: Final = frozenset(
    {"title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly"}
    | {"writeOnly"}
)
_BASIC_KEYWORDS: Final = _ANNOTATIONS | {"type", "properties", "required"}
_BASIC_PROPERTY_KEYWORDS: Final = _ANNOTATIONS | {"type"}


class RawSchemaValidator:
    """Validates arguments against a raw JSON Schema: full 2020-12 with the ``validation`` extra (jsonschema-rs),
    else the basic checks (object, required properties, primitive types) that need no dependency. Without the
    extra, a schema that says more than those checks read is logged once, as a warning naming what goes
    unchecked (``tool``: whose schema it is)."""

    def __init__(self, schema: Mapping[str, Any], tool: str | None = None) -> None:
        self.schema = dict(schema)
        self._full: Any = None
        try:
            import jsonschema_rs

            self._full = schema_validator(jsonschema_rs, self.schema)
        except ImportError:
            self._full = None
            unchecked = self.unchecked_keywords()
            if unchecked:
                logger.warning(
                    "%s: its input schema's %s are not checked without the validation extra (jsonschema-rs); only "
                    "the type, the required properties and their primitive types are",
                    f"tool {tool}" if tool else "a raw schema",
                    ", ".join(unchecked),
                )
        except Exception as exc:  # an invalid schema is the tool author's bug: fail at registration
            raise ValueError(f"invalid input schema: {exc}") from exc

    def unchecked_keywords(self) -> list[str]:
        """The keywords of the schema, and of its properties' schemas, that the basic checks do not enforce."""
        found = {key for key in self.schema if key not in _BASIC_KEYWORDS}
        properties = self.schema.get("properties")
        for prop in properties.values() if isinstance(properties, dict) else ():
            if isinstance(prop, dict):
                found.update(key for key in prop if key not in _BASIC_PROPERTY_KEYWORDS)
        return sorted(found)

    def errors(self, value: Any) -> str | None:
        if self._full is not None:
            problems = [f"{_path(e.instance_path)}: {e.message}" for e in self._full.iter_errors(value)]
            return "; ".join(problems[:5]) if problems else None
        if not isinstance(value, dict):
            return "arguments: must be an object"
        for name in self.schema.get("required", ()):
            if name not in value:
                return f"{name}: required property is missing"
        props = self.schema.get("properties", {})
        for name, item in value.items():
            expected = props.get(name, {}).get("type") if isinstance(props.get(name), dict) else None
            if isinstance(expected, str) and not _type_ok(expected, item):
                return f"{name}: expected {expected}, got {type(item).__name__}"
        return None


def _path(parts: Any) -> str:
    items = list(parts) if parts else []
    return ".".join(str(p) for p in items) or "arguments"


def _type_ok(expected: str, value: Any) -> bool:
    checks: dict[str, Callable[[Any], bool]] = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "null": lambda v: v is None,
    }
    check = checks.get(expected)
    return True if check is None else check(value)


class ToolOptions(TypedDict, total=False):
    """How a tool is registered besides its function and name: the keywords of :meth:`~jsonrpc_mcp.Server.tool`
    and :meth:`~jsonrpc_mcp.Server.add_tool` (described there; each may be left out), and of :func:`make_tool`
    (``scopes`` is the server's: it leaves it out)."""

    title: str | None
    description: str | None
    annotations: t.ToolAnnotations | None
    icons: list[t.Icon] | None
    input_schema: Mapping[str, Any] | None
    output_schema: Mapping[str, Any] | None
    structured_output: bool | None
    meta: Mapping[str, Any] | None
    inline: bool  # default False
    single_use_state: bool  # default False
    scopes: Iterable[str] | None
    task: TaskSupport  # default "forbidden"
    task_start: TaskStart  # default "at_call"


def check_options(options: Mapping[str, object], allowed: Any, what: str) -> None:
    """A keyword that the options type ``allowed`` (a ``TypedDict``) does not have is a ``TypeError`` naming it, as
    for a function's own keywords (the type checker says so before it runs)."""
    unknown = options.keys() - allowed.__optional_keys__ - allowed.__required_keys__
    if unknown:
        raise TypeError(f"{what}() got an unexpected keyword argument {min(unknown)!r}")


def make_tool(fn: Callable[..., Any], *, name: str, **options: Unpack[ToolOptions]) -> ToolDef:
    check_options(options, ToolOptions, "make_tool")
    input_schema, output_schema = options.get("input_schema"), options.get("output_schema")
    inline = options.get("inline", False)
    task, task_start = options.get("task", "forbidden"), options.get("task_start", "at_call")
    structured_output = options.get("structured_output")
    sig = inspect_function(fn, name=name, structured_output=structured_output, raw_schema=input_schema is not None)
    if output_schema is not None:
        sig.output_schema = dict(output_schema)
        sig.output_kind = "structured"
        sig.wrap_output = False
    schema = dict(input_schema) if input_schema is not None else sig.input_schema
    tool = t.Tool(
        name=name,
        title=options.get("title") or UNSET,
        description=options.get("description") or sig.description or name,
        input_schema=schema,
        output_schema=sig.output_schema if sig.output_schema is not None else UNSET,
        annotations=options.get("annotations") or UNSET,
        icons=options.get("icons") or UNSET,
        meta=dict(meta) if (meta := options.get("meta")) else UNSET,
    )
    if inline and sig.is_async:
        raise TypeError(f"tool {name}: inline=True is for plain functions; an async function runs in its task")
    if input_schema is not None:
        call = _raw_schema_caller(fn, sig, RawSchemaValidator(input_schema, name), name, inline)
    else:
        call = _typed_caller(fn, sig, name, inline)
    if options.get("single_use_state", False):
        call = _single_use(call)
    if task not in ("forbidden", "optional", "required"):
        raise ValueError(f'tool {name}: task must be "forbidden", "optional" or "required", not {task!r}')
    if task_start not in ("at_call", "in_handler"):
        raise ValueError(f'tool {name}: task_start must be "at_call" or "in_handler", not {task_start!r}')
    if task_start == "in_handler" and (task == "forbidden" or not sig.is_async):
        raise ValueError(f'tool {name}: task_start="in_handler" is for an async def tool that may run as a task')
    return ToolDef(tool, call, sig, task, task_start)


def _single_use(call: Callable[[Context, Raw | None], Any]) -> Callable[[Context, Raw | None], Any]:
    def single_use(ctx: Context, raw: Raw | None) -> Any:
        ctx.single_use_state = True
        return call(ctx, raw)

    return single_use


def _typed_caller(
    fn: Callable[..., Any], sig: Signature, tool_name: str, inline: bool
) -> Callable[[Context, Raw | None], Any]:
    decoder = msgspec.json.Decoder(sig.args_type, dec_hook=dec_hook)  # dec_hook: pydantic models
    as_kwargs = msgspec.structs.asdict  # the arguments Struct has exactly the function's parameters as fields
    ctx_param = sig.context_param
    text = t.TextContent
    result = t.CallToolResult
    what = f"tool {tool_name}"

    def call(ctx: Context, raw: Raw | None) -> Any:
        try:
            args = decoder.decode(_check_object(raw))
        except msgspec.ValidationError as exc:
            return error_result(f"Invalid arguments for tool {tool_name}: {describe_validation_error(exc, sig.params)}")
        kwargs = as_kwargs(args)
        if ctx_param is not None:
            kwargs[ctx_param] = ctx
        if not inline:
            return _invoke(fn, sig, kwargs, tool_name)
        try:
            value = call_inline(fn, kwargs, what)
        except (ToolError, RpcError, InputRequired, Exception) as exc:
            return _failure(exc, tool_name)
        if type(value) is str and sig.output_kind != "structured":
            return result(content=[text(text=value)])  # what tool_result makes of it
        return tool_result(value, sig, tool_name)

    return call


def _raw_schema_caller(
    fn: Callable[..., Any], sig: Signature, validator: RawSchemaValidator, tool_name: str, inline: bool
) -> Callable[[Context, Raw | None], Any]:
    ctx_param = sig.context_param
    accepted = None if sig.takes_any else frozenset(sig.params)
    required = sig.required

    def call(ctx: Context, raw: Raw | None) -> Any:
        data = _check_object(raw)
        try:
            args = _dict_decoder.decode(data)
        except msgspec.ValidationError:
            raise InvalidParams('Invalid params: "arguments" must be an object') from None
        problem = validator.errors(args)
        if problem is not None:
            return error_result(f"Invalid arguments for tool {tool_name}: {problem}")
        # The schema is the contract: arguments it lets through that the function does not take are left out, and
        # a parameter without a default that the arguments lack is the caller's mistake, not a failing tool.
        kwargs = dict(args) if accepted is None else {k: v for k, v in args.items() if k in accepted}
        missing = [name for name in required if name not in kwargs]
        if missing:
            names = ", ".join(repr(name) for name in missing)
            return error_result(f"Invalid arguments for tool {tool_name}: missing {names}")
        if ctx_param is not None:
            kwargs[ctx_param] = ctx
        if inline:
            try:
                value = call_inline(fn, kwargs, f"tool {tool_name}")
            except (ToolError, RpcError, InputRequired, Exception) as exc:
                return _failure(exc, tool_name)
            return tool_result(value, sig, tool_name)
        return _invoke(fn, sig, kwargs, tool_name)

    return call


#: Whether a plain tool's call takes the sync lane (a :class:`~jsonrpc_mcp.jsonrpc.workers.SyncCall`: the whole call
#: on a worker thread, no coroutine); ``False``: the coroutine path (:func:`run_sync` awaited), which the tests check
#: the lane against.
sync_lane = True


def _invoke(fn: Callable[..., Any], sig: Signature, kwargs: dict[str, Any], tool_name: str) -> Any:
    """The tool's call: an ``async def`` tool's coroutine; a plain one's on a worker thread, as a
    :class:`~jsonrpc_mcp.jsonrpc.workers.SyncCall` (the sync lane) or a coroutine."""
    if not sig.is_async:
        if sync_lane:
            return SyncCall(_call_plain, fn, sig, kwargs, tool_name)
        return _invoke_plain(fn, sig, kwargs, tool_name)
    try:
        pending = fn(**kwargs)  # binding the arguments can fail before the coroutine exists
    except Exception as exc:
        return _failure(exc, tool_name)
    return _invoke_async(pending, sig, tool_name)


async def _invoke_plain(fn: Callable[..., Any], sig: Signature, kwargs: dict[str, Any], tool_name: str) -> Any:
    """A plain tool's call on a worker thread, awaited (``sync_lane`` off)."""
    try:
        value = await run_sync(fn, kwargs)
    except (ToolError, RpcError, InputRequired, Exception) as exc:
        return _failure(exc, tool_name)
    return tool_result(value, sig, tool_name)


def _call_plain(fn: Callable[..., Any], sig: Signature, kwargs: dict[str, Any], tool_name: str) -> Any:
    """On a worker thread: a plain tool's whole call, its result or its failure as :func:`_invoke_plain` makes them."""
    try:
        value = call_on_worker_thread(fn, kwargs)
    except (ToolError, RpcError, InputRequired, Exception) as exc:
        return _failure(exc, tool_name)
    return tool_result(value, sig, tool_name)


async def _invoke_async(pending: Awaitable[Any], sig: Signature, tool_name: str) -> Any:
    try:
        value = await pending
    except (ToolError, RpcError, InputRequired, Exception) as exc:
        return _failure(exc, tool_name)
    return tool_result(value, sig, tool_name)


def _failure(exc: BaseException, tool_name: str) -> t.CallToolResult:
    if isinstance(exc, ToolError):
        return error_result(exc.message, exc.structured)
    if isinstance(exc, (RequestTimeout, ConnectionClosed)):
        # the client did not answer one of the tool's own requests: the tool failed (these codes are local-only)
        logger.warning("tool %s failed: %s", tool_name, exc.message)
        return error_result(f"Tool {tool_name} failed: {exc.message}")
    if isinstance(exc, (RpcError, InputRequired, StartTask)):
        raise exc
    logger.error("tool %s raised", tool_name, exc_info=exc)
    return error_result(f"Tool {tool_name} failed: an internal error occurred")


def tool_result(value: Any, sig: Signature | None, tool_name: str = "tool") -> t.CallToolResult:
    """A tool's return value as a ``CallToolResult``, checked against its ``outputSchema``."""
    if type(value) is str and (sig is None or sig.output_kind != "structured"):
        return t.CallToolResult(content=[t.TextContent(text=value)])
    if isinstance(value, t.CallToolResult):
        return value
    kind = sig.output_kind if sig is not None else "auto"
    if kind == "structured" and sig is not None:
        return _structured(value, sig, tool_name)
    if value is None:
        return t.CallToolResult(content=[])
    if isinstance(value, str):
        return t.CallToolResult(content=[t.TextContent(text=value)])
    if isinstance(value, _CONTENT):
        return t.CallToolResult(content=[value])
    if isinstance(value, list) and all(isinstance(v, _CONTENT) for v in value):
        return t.CallToolResult(content=list(value))
    return t.CallToolResult(content=[t.TextContent(text=_encode(value).decode())])


def _structured(value: Any, sig: Signature, tool_name: str) -> t.CallToolResult:
    try:
        data = msgspec.to_builtins(value, enc_hook=enc_hook)
        if sig.output_schema is not None and sig.return_type not in (None, Any, dict):
            msgspec.convert(data, sig.return_type, dec_hook=dec_hook)
    except (msgspec.ValidationError, TypeError) as exc:
        logger.error("tool %s returned data that does not match its outputSchema: %s", tool_name, exc)
        return error_result(f"Tool {tool_name} failed: it produced output that does not match its schema")
    structured = {"result": data} if sig.wrap_output else data
    text = _encode(structured).decode()
    return t.CallToolResult(content=[t.TextContent(text=text)], structured_content=structured)
