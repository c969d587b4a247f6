"""From a typed Python function to MCP schemas and back (L5 helper; pure, no I/O).

``def add(a: int, b: int = 0) -> Sum`` becomes:

* an arguments :class:`msgspec.Struct` built once, used to decode and validate ``arguments`` in one pass;
* ``inputSchema``: the JSON Schema of that Struct (with ``$defs`` for nested Structs and enums);
* ``outputSchema`` from the return annotation when the result is structured data; a result that is not a JSON
  object on the wire (a number, a list) is wrapped as ``{"result": ...}`` because 2025-06-18 and 2025-11-25
  require an object schema at the root.

A parameter annotated with :class:`~jsonrpc_mcp.mcp.context.Context` is injected, never part of the schema.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, get_args, get_origin

import msgspec

from . import types as t
from .context import Context
from .pydantic_support import SchemaDefinitions, SchemaMode, UnsupportedAnnotation, unsupported

__all__ = ("Signature", "OutputKind", "inspect_function", "schema_for", "describe_validation_error")

OutputKind = Literal["auto", "text", "content", "result", "none", "structured"]

_CONTENT_TYPES: tuple[type, ...] = (
    t.TextContent,
    t.ImageContent,
    t.AudioContent,
    t.ResourceLink,
    t.EmbeddedResource,
)


class Signature(msgspec.Struct):
    """What :func:`inspect_function` learnt about a handler (a Struct: cheaper to define than a dataclass)."""

    fn: Callable[..., Any]
    is_async: bool
    context_param: str | None
    params: tuple[str, ...]
    args_type: type[msgspec.Struct]
    input_schema: dict[str, Any]
    description: str | None
    output_kind: OutputKind
    return_type: Any
    output_schema: dict[str, Any] | None
    wrap_output: bool
    required: tuple[str, ...]
    param_descriptions: dict[str, str]
    takes_any: bool = False  # a raw-schema function with ``**kwargs``: it takes every argument


def _is_context(annotation: Any) -> bool:
    return annotation is Context or (isinstance(annotation, type) and issubclass(annotation, Context))


def schema_for(kind: Any, mode: SchemaMode = "validation", *, titled: bool = False) -> dict[str, Any]:
    """A self-contained JSON Schema for ``kind`` with its definitions under ``$defs``. Pydantic models are
    described by pydantic (``mode``: of the data they accept, or of the data they produce). ``titled`` keeps the
    ``title`` (the class name) of a named type."""
    models = SchemaDefinitions(mode)
    (schema,), components = msgspec.json.schema_components((kind,), schema_hook=models, ref_template="#/$defs/{name}")
    models.merge_into(components)
    schema = dict(schema)
    if "$ref" in schema and len(schema) == 1:
        name = schema["$ref"].rsplit("/", 1)[1]
        schema = dict(components.pop(name))
        if not titled:
            schema.pop("title", None)
    if components:
        schema["$defs"] = components
    return schema


def inspect_function(
    fn: Callable[..., Any], *, name: str, structured_output: bool | None = None, raw_schema: bool = False
) -> Signature:
    """Read ``fn``'s signature. With ``raw_schema`` the arguments are described elsewhere (a raw JSON Schema):
    besides the ``Context`` parameter and the return annotation only the names ``fn`` takes by keyword (``params``)
    and those without a default (``required``) are read, and ``**kwargs`` is allowed (``takes_any``)."""
    hints = typing.get_type_hints(fn, include_extras=True)
    sig = inspect.signature(fn)
    fields: list[tuple[Any, ...]] = []
    context_param: str | None = None
    names: list[str] = []
    required: list[str] = []
    takes_any = False
    param_docs = _param_docs(inspect.getdoc(fn) or "")
    for pname, param in sig.parameters.items():
        annotation = hints.get(pname, Any)
        if _is_context(annotation):
            context_param = pname
            continue
        if raw_schema:
            if param.kind is inspect.Parameter.VAR_KEYWORD:
                takes_any = True
            elif param.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
                names.append(pname)
                if param.default is inspect.Parameter.empty:
                    required.append(pname)
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"{name}: *args and **kwargs cannot be described by a schema")
        if pname in param_docs and not _described(annotation):
            annotation = typing.Annotated[annotation, msgspec.Meta(description=param_docs[pname])]
        names.append(pname)
        if param.default is inspect.Parameter.empty:
            fields.append((pname, annotation))
            required.append(pname)
        else:
            fields.append((pname, annotation, param.default))
    # Unknown arguments are refused (the schema says ``additionalProperties: false``): a misspelt optional argument
    # would otherwise run the tool with its default and nobody would know (docs/spec-decisions.md).
    args_type = msgspec.defstruct(f"{_camel(name)}Arguments", fields, kw_only=True, forbid_unknown_fields=True)
    try:
        input_schema = schema_for(args_type)
    except UnsupportedAnnotation as exc:
        raise unsupported(name, exc, fields) from None
    input_schema.setdefault("type", "object")
    input_schema.setdefault("properties", {})
    if not input_schema.get("required"):
        input_schema.pop("required", None)
    ret = hints.get("return", Any)
    try:
        kind, out_schema, wrap = _output(ret, structured_output)
    except UnsupportedAnnotation as exc:
        raise unsupported(name, exc) from None
    return Signature(
        fn=fn,
        is_async=inspect.iscoroutinefunction(fn),
        context_param=context_param,
        params=tuple(names),
        args_type=args_type,
        input_schema=input_schema,
        description=_summary(inspect.getdoc(fn)),
        output_kind=kind,
        return_type=ret,
        output_schema=out_schema,
        wrap_output=wrap,
        required=tuple(required),
        param_descriptions=param_docs,
        takes_any=takes_any,
    )


def _output(ret: Any, structured: bool | None) -> tuple[OutputKind, dict[str, Any] | None, bool]:
    if ret is None or ret is type(None):
        return "none", None, False
    if ret is Any or ret is inspect.Signature.empty:
        return "auto", None, False
    if ret is str:
        return "text", None, False
    if ret is t.CallToolResult:
        return "result", None, False
    if _is_content(ret):
        return "content", None, False
    if structured is False:
        return "auto", None, False
    schema = schema_for(ret, "serialization", titled=True)  # the title names the type: -> Forecast
    if schema.get("type") == "object":
        return "structured", schema, False
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"result": {k: v for k, v in schema.items() if k != "$defs"}},
        "required": ["result"],
    }
    if "$defs" in schema:
        wrapped["$defs"] = schema["$defs"]
    return "structured", wrapped, True


def _is_content(kind: Any) -> bool:
    if isinstance(kind, type) and issubclass(kind, _CONTENT_TYPES):
        return True
    origin = get_origin(kind)
    if origin in (list, typing.Union, types.UnionType):
        args = [a for a in get_args(kind) if a is not type(None)]
        return bool(args) and all(_is_content(a) for a in args)
    return False


def _summary(doc: str | None) -> str | None:
    """The docstring up to its first section header (``Args:``, ``Returns:``, ``:param``, ``Parameters``)."""
    if not doc:
        return None
    lines: list[str] = []
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in _ARGS_HEADERS or stripped in _OTHER_HEADERS or stripped == "Parameters":
            break
        if stripped.startswith((":param", ":return", ":raises")):
            break
        lines.append(line)
    text = "\n".join(lines).strip()
    return text or None


def _described(annotation: Any) -> bool:
    """Does an ``Annotated`` parameter already carry a description of its own (which wins over the docstring)?"""
    if get_origin(annotation) is not typing.Annotated:
        return False
    return any(isinstance(m, msgspec.Meta) and m.description is not None for m in annotation.__metadata__)


# Patterns are compiled on first use (`re` caches them), not at import: most processes never need them.
_GOOGLE_ITEM = r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(?:\s+(.*))?$"
_REST_PARAM = r"^:param\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:\s*(.*)$"
_ARGS_HEADERS: Final = frozenset(
    {"Args:", "Arguments:", "Parameters:", "Params:", "Keyword Args:", "Keyword Arguments:"}
)
_OTHER_HEADERS: Final = frozenset(
    {"Returns:", "Return:", "Yields:", "Raises:", "Examples:", "Example:", "Note:", "Notes:", "Attributes:"}
    | {"See Also:", "Warning:", "Warnings:", "Todo:", "References:"}
)


def _param_docs(doc: str) -> dict[str, str]:
    """Per-parameter descriptions from Google-style ``Args:`` sections or reST ``:param x:`` fields.

    ``inspect.getdoc`` dedents every line after the first, so ``Args:`` on the docstring's first line leaves the
    items at the header's own indentation, while a summary line first leaves them indented under it: an item is
    a ``name (type): text`` line at the indentation of the section's first item, in either style. Lines indented
    deeper continue the item above (joined with spaces); a blank line ends an item; a line at any other
    indentation, or another section header, ends the section."""
    out: dict[str, str] = {}
    parts: list[str] = []
    current: str | None = None
    current_indent = 0
    in_args = False
    item_indent: int | None = None

    def finish() -> None:
        nonlocal current
        if current is not None and parts:
            out[current] = " ".join(parts)
        current = None
        parts.clear()

    for line in doc.expandtabs().splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not stripped:
            finish()
            continue
        if current is not None and indent > current_indent:
            parts.append(stripped)
            continue
        finish()
        if stripped.startswith(":"):
            in_args = False
            m = re.match(_REST_PARAM, stripped)
            if m:
                current, current_indent = m.group(1), indent
                parts.extend(filter(None, [m.group(2).strip()]))
            continue
        if stripped in _ARGS_HEADERS:
            in_args, item_indent = True, None
            continue
        if not in_args:
            continue
        m = None if stripped in _OTHER_HEADERS else re.match(_GOOGLE_ITEM, stripped)
        if m is None or (item_indent is not None and indent != item_indent):
            in_args = False
            continue
        item_indent = indent
        current, current_indent = m.group(1), indent
        parts.extend(filter(None, [(m.group(2) or "").strip()]))
    finish()
    return out


def _camel(name: str) -> str:
    # Words are the runs of ASCII letters and digits (no regex: this runs for every tool at start-up).
    words = "".join(c if c.isascii() and c.isalnum() else " " for c in name).split()
    return "".join(w[:1].upper() + w[1:] for w in words) or "Tool"


_AT = r" - at `\$\.?([^`]*)`$"
_UNKNOWN = r"^Object contains unknown field `(.*)`$"


def describe_validation_error(exc: msgspec.ValidationError, arguments: Sequence[str] | None = None) -> str:
    """msgspec's message, reworded to name the argument first: ``b: Expected `int`, got `str```. An unknown
    top-level argument is named as such, with the ``arguments`` the function takes when they are given."""
    text = str(exc)
    unknown = re.match(_UNKNOWN, text)
    if unknown is not None:
        takes = "" if arguments is None else f" (it takes {', '.join(arguments) or 'none'})"
        return f"{unknown.group(1)}: unknown argument{takes}"
    m = re.search(_AT, text)
    if m is None:
        return text
    where = m.group(1) or "arguments"
    return f"{where}: {text[: m.start()]}"
