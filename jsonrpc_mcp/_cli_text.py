"""What the ``jsonrpc-mcp`` command prints, and how it reads ``key=value`` arguments (L7; pure functions).

Everything here works on plain JSON values (``dict``, ``list``…) as they travel on the wire: a tool's
``inputSchema`` decides how ``days=3`` is typed, and the schemas of ``tools/list`` become Python-like signatures
such as ``forecast(city: str, days: int = 1) -> Forecast``.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

__all__ = ("UsageError", "arguments_from_words", "prompt_arguments", "type_text", "signature", "listing", "result")

_SCALARS: Final = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
_TRUE: Final = ("true", "yes", "on", "1")
_FALSE: Final = ("false", "no", "off", "0")
_INDENT: Final = "    "
#: A line that starts an item of a list (``- x``, ``* x``, ``• x``, ``1. x``, ``2) x``).
_LIST_ITEM: Final = re.compile(r"^([-*•]|\d+[.)])\s")


class UsageError(ValueError):
    """The command line asks for something that cannot be sent (one line, shown as it is)."""


# --- key=value arguments ---------------------------------------------------------------------------------------


def arguments_from_words(words: Sequence[str], schema: Mapping[str, Any] | None, tool: str) -> dict[str, Any]:
    """Tool arguments from the words after its name: one JSON object, or ``key=value`` words typed by the tool's
    ``inputSchema`` (integers, numbers, booleans, JSON for objects and arrays, strings otherwise) and ``key:=JSON``
    words taken as JSON whatever the schema says."""
    if len(words) == 1 and words[0].lstrip().startswith("{"):
        return _json_object(words[0])
    properties = dict((schema or {}).get("properties") or {})
    defs = dict((schema or {}).get("$defs") or {})
    out: dict[str, Any] = {}
    for word in words:
        key, value, explicit = _split_word(word)
        if key in out:
            raise UsageError(f"{key} is given twice")
        if explicit:
            out[key] = _json_value(key, value)
        elif key in properties:
            out[key] = typed_value(key, value, properties[key], defs)
        elif properties:
            known = ", ".join(properties)
            raise UsageError(f"{tool} has no parameter {key!r} (its parameters: {known}; {key}:=JSON sends it anyway)")
        else:
            out[key] = value
    return out


def prompt_arguments(words: Sequence[str]) -> dict[str, str]:
    """Prompt arguments (always strings): one JSON object, or ``key=value`` words."""
    if len(words) == 1 and words[0].lstrip().startswith("{"):
        return _json_object(words[0])
    out: dict[str, str] = {}
    for word in words:
        key, value, explicit = _split_word(word)
        out[key] = value if not explicit else json.dumps(_json_value(key, value))
    return out


def _split_word(word: str) -> tuple[str, str, bool]:
    key, eq, value = word.partition("=")
    if not eq or not key:
        raise UsageError(f"expected key=value or a JSON object, got {word!r}")
    if key.endswith(":"):
        return key[:-1], value, True
    return key, value, False


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"the arguments are not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError("the arguments must be a JSON object")
    return value


def _json_value(key: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{key}: not JSON: {exc}") from None


def typed_value(key: str, text: str, schema: Any, defs: Mapping[str, Any]) -> Any:
    """``text`` as the JSON type ``schema`` allows: the first of integer, number, boolean, object/array, null that
    it reads as, else a string (if allowed). A schema without a type takes JSON when the text is JSON."""
    kinds = _kinds(schema, defs)
    if not kinds:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    if "null" in kinds and text == "null":
        return None
    if "integer" in kinds:
        try:
            return int(text)
        except ValueError:
            pass
    if "number" in kinds:
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    if "boolean" in kinds and text.lower() in (*_TRUE, *_FALSE):
        return text.lower() in _TRUE
    if kinds & {"object", "array"}:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if (isinstance(value, dict) and "object" in kinds) or (isinstance(value, list) and "array" in kinds):
            return value
    if "string" in kinds:
        return text
    wanted = " or ".join(_KIND_WORDS.get(kind, kind) for kind in sorted(kinds))
    raise UsageError(f"{key}: expected {wanted}, got {text!r}")


_KIND_WORDS: Final = {
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "a JSON object",
    "array": "a JSON array",
    "null": "null",
}


def _kinds(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> set[str]:
    """The JSON types a schema admits (empty: any)."""
    if not isinstance(schema, dict) or depth > 20:
        return set()
    schema = _resolve(schema, defs)
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return {_json_kind(v) for v in values} if isinstance(values, list) else set()
    kinds: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        kinds.add(declared)
    elif isinstance(declared, list):
        kinds.update(k for k in declared if isinstance(k, str))
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            found = _kinds(option, defs, depth + 1)
            if not found:
                return set()
            kinds |= found
    return kinds


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


def _resolve(schema: dict[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.rsplit("/", 1)[1])
        if isinstance(target, dict):
            return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


# --- signatures --------------------------------------------------------------------------------------------------


def type_text(schema: Any, depth: int = 0) -> str:
    """A JSON Schema as a Python-like type: ``str``, ``list[int]``, ``Forecast``, ``'a' | 'b'``, ``int | None``."""
    if not isinstance(schema, dict) or not schema or depth > 5:
        return "Any"
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1]
    if "const" in schema:
        return repr(schema["const"])
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        shown = " | ".join(repr(v) for v in enum[:6])
        return shown + (" | …" if len(enum) > 6 else "")
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return " | ".join(dict.fromkeys(type_text(o, depth + 1) for o in options))
    declared = schema.get("type")
    if isinstance(declared, list):
        return " | ".join(type_text({**schema, "type": k}, depth + 1) for k in declared)
    if declared == "array":
        items = schema.get("items")
        return f"list[{type_text(items, depth + 1)}]" if isinstance(items, dict) and items else "list"
    if declared == "object":
        title = schema.get("title")
        if isinstance(title, str) and title:
            return title
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra and not schema.get("properties"):
            return f"dict[str, {type_text(extra, depth + 1)}]"
        return "dict"
    if isinstance(declared, str):
        return _SCALARS.get(declared, declared)
    title = schema.get("title")
    return title if isinstance(title, str) and title else "Any"


def _python_literal(value: Any) -> str:
    return repr(value) if not isinstance(value, str) or len(value) <= 40 else repr(value[:37] + "...")


def signature(tool: Mapping[str, Any]) -> str:
    """``forecast(city: str, days: int = 1) -> Forecast``; an optional parameter without a default is
    ``name?: type``."""
    schema = tool.get("inputSchema") or {}
    required = set(schema.get("required") or ())
    params = []
    for name, prop in (schema.get("properties") or {}).items():
        text = f"{name}: {type_text(prop)}"
        if isinstance(prop, dict) and "default" in prop:
            text += f" = {_python_literal(prop['default'])}"
        elif name not in required:
            text = f"{name}?: {type_text(prop)}"
        params.append(text)
    line = f"{tool.get('name', '?')}({', '.join(params)})"
    output = tool.get("outputSchema")
    if isinstance(output, dict) and output:
        line += f" -> {_output_type(output)}"
    return line


def _output_type(schema: Mapping[str, Any]) -> str:
    props = schema.get("properties")
    if not schema.get("title") and isinstance(props, dict) and list(props) == ["result"]:
        return type_text(props["result"])  # a value that is not an object, wrapped as {"result": ...}
    return type_text(dict(schema))


def _description(description: Any, indent: str, width: int, hanging: str = "") -> list[str]:
    """A description wrapped to ``width`` columns, ``indent`` before each line (``hanging`` after the first line of
    a paragraph): its paragraphs, list items and blank lines kept, the lines within a paragraph joined."""
    if not isinstance(description, str) or not description.strip():
        return []
    lines: list[str] = []
    for line in _reading_lines(description):
        if not line.strip():
            lines.append("")
            continue
        lines.extend(
            textwrap.wrap(
                line.strip(),
                width=max(40, width),
                initial_indent=indent,
                subsequent_indent=indent + hanging,
                break_on_hyphens=False,
            )
        )
    return lines


def _reading_lines(description: str) -> list[str]:
    """The lines of a description as a person reads them. A docstring breaks its paragraphs where its source
    did: those lines are joined; a blank line, a list item, and the line after one that ends with a colon start
    lines of their own."""
    lines: list[str] = []
    for raw in description.strip().splitlines():
        line = raw.strip()
        joins = bool(lines) and bool(lines[-1]) and line and not lines[-1].endswith(":")
        if joins and not _LIST_ITEM.match(line):
            lines[-1] += " " + line
        else:
            lines.append(line)
    return lines


def listing(found: Mapping[str, Any], width: int = 100) -> str:
    """What ``jsonrpc-mcp list`` prints: the server, then its tools, resources, templates and prompts, descriptions
    wrapped to ``width`` columns."""
    lines: list[str] = []
    info = found.get("serverInfo") or {}
    head = " ".join(str(part) for part in (info.get("name"), info.get("version")) if part)
    lines.append(f"{head or 'server'} (protocol {found.get('protocolVersion')})")
    lines.extend(_description(found.get("instructions"), "", width))
    sections: list[tuple[str, Iterable[str]]] = [
        ("tools", _tool_lines(found.get("tools"), width)),
        ("resources", _resource_lines(found.get("resources"), "uri", width)),
        ("resource templates", _resource_lines(found.get("resourceTemplates"), "uriTemplate", width)),
        ("prompts", _prompt_lines(found.get("prompts"), width)),
    ]
    for title, rows in sections:
        rendered = list(rows)
        if rendered:
            lines.extend(("", f"{title}:", *rendered))
    return "\n".join(lines)


def _tool_lines(tools: Any, width: int) -> Iterable[str]:
    for tool in tools or ():
        yield _INDENT + signature(tool)
        yield from _description(tool.get("description"), _INDENT * 2, width)
        for name, prop in ((tool.get("inputSchema") or {}).get("properties") or {}).items():
            if isinstance(prop, dict) and isinstance(prop.get("description"), str):
                yield from _description(f"{name}: {prop['description']}", _INDENT * 2, width, _INDENT)


def _resource_lines(items: Any, key: str, width: int) -> Iterable[str]:
    for item in items or ():
        mime = f" ({item['mimeType']})" if item.get("mimeType") else ""
        name = item.get("name")
        yield f"{_INDENT}{item.get(key)}{f'  {name}' if name else ''}{mime}"
        yield from _description(item.get("description"), _INDENT * 2, width)


def _prompt_lines(prompts: Any, width: int) -> Iterable[str]:
    for prompt in prompts or ():
        args = prompt.get("arguments") or []
        shown = ", ".join(a.get("name", "?") + ("" if a.get("required") else "?") for a in args)
        yield f"{_INDENT}{prompt.get('name')}({shown})"
        yield from _description(prompt.get("description"), _INDENT * 2, width)
        for arg in args:
            if arg.get("description"):
                yield from _description(f"{arg.get('name')}: {arg['description']}", _INDENT * 2, width, _INDENT)


# --- results -----------------------------------------------------------------------------------------------------


def result(method: str, value: Any) -> str:
    """A result for a person: a tool's structured data (as JSON) or its content, a resource's text, a prompt's
    messages; anything else as indented JSON."""
    if not isinstance(value, dict):
        return _json(value)
    if method == "tools/call":
        if "structuredContent" in value and not value.get("isError"):
            return _json(value["structuredContent"])
        return "\n".join(_block(b) for b in value.get("content") or ())
    if method == "resources/read":
        return "\n".join(_contents(c) for c in value.get("contents") or ())
    if method == "prompts/get":
        messages = value.get("messages") or ()
        return "\n".join(f"[{m.get('role')}] {_block(m.get('content') or {})}" for m in messages)
    return _json(value)


def _block(block: Any) -> str:
    if not isinstance(block, dict):
        return _json(block)
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        size = len(str(block.get("data", ""))) * 3 // 4
        return f"[{kind} {block.get('mimeType', '?')}, {size} bytes]"
    if kind == "resource_link":
        return f"[resource link {block.get('uri')}{' ' + block['name'] if block.get('name') else ''}]"
    if kind == "resource":
        return _contents(block.get("resource") or {})
    return _json(block)


def _contents(contents: Any) -> str:
    if not isinstance(contents, dict):
        return _json(contents)
    if isinstance(contents.get("text"), str):
        return str(contents["text"])
    size = len(str(contents.get("blob", ""))) * 3 // 4
    return f"[{contents.get('uri')} {contents.get('mimeType', 'binary')}, {size} bytes]"


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
