"""SEP-2243 (2026-07-28): the standard ``Mcp-Method``/``Mcp-Name`` headers and ``Mcp-Param-*`` headers mirrored
from tool parameters marked ``x-mcp-header`` (L2: pure functions, used by the HTTP client and server).

A tool property schema may carry ``"x-mcp-header": "Region"``; a client calling that tool over HTTP then sends
``Mcp-Param-Region: <value>``. The annotation is valid only when its value is a non-empty RFC 9110 token, unique
(case-insensitively) within the tool, on a property of primitive type (string, integer or boolean), reached
through ``properties`` alone. A client drops a tool whose annotations break these rules.

Values go as-is when they are plain visible ASCII without surrounding whitespace; anything else (non-ASCII,
control characters, leading or trailing space, or a value that looks like the encoding itself) is sent as
``=?base64?<base64 of UTF-8>?=``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .eras import Call
from .versions import META_PROTOCOL_VERSION

if TYPE_CHECKING:
    from .types import Tool

__all__ = (
    "InvalidHeaderAnnotation",
    "tool_header_params",
    "encode_header_value",
    "decode_header_value",
    "standard_headers",
    "param_headers",
    "name_of",
    "mirrored_header_problem",
    "HeaderValues",
    "ToolLookup",
)

#: ``values(name)``: every value a request carries for the header ``name`` (lower case), in order.
HeaderValues = Callable[[str], Sequence[str]]
#: ``get_tool(name)``: the server's tool of that name (its ``input_schema`` is read), or ``None``.
ToolLookup = Callable[[str], "Tool | None"]

_NAMED: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
_NUMBER: Final = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")

_TOKEN: Final = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_PRIMITIVE: Final = frozenset({"string", "integer", "boolean"})
_B64_PREFIX: Final = "=?base64?"
_B64_SUFFIX: Final = "?="
_MAX_SAFE_INT: Final = 2**53 - 1


class InvalidHeaderAnnotation(ValueError):
    """A tool's ``x-mcp-header`` annotations break SEP-2243's rules."""


def tool_header_params(input_schema: Mapping[str, Any]) -> dict[tuple[str, ...], str]:
    """The ``x-mcp-header`` annotations of a tool: ``{property path: header name}``.

    Raises :class:`InvalidHeaderAnnotation` when one is invalid (the whole tool is then unusable over HTTP).
    """
    found: dict[tuple[str, ...], str] = {}
    _walk(input_schema, (), found)
    if _header_keywords(input_schema) > len(found):
        raise InvalidHeaderAnnotation(
            "an x-mcp-header is on a property reached through other keywords than properties (items, anyOf, oneOf, "
            "allOf, if/then/else, ...): only a chain of properties from the root can be mirrored"
        )
    seen: set[str] = set()
    for name in found.values():
        key = name.lower()
        if key in seen:
            raise InvalidHeaderAnnotation(f"x-mcp-header {name!r} is used twice")
        seen.add(key)
    return found


def _walk(schema: Any, path: tuple[str, ...], found: dict[tuple[str, ...], str]) -> None:
    if not isinstance(schema, Mapping):
        return
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return
    for name, sub in props.items():
        if not isinstance(sub, Mapping):
            continue
        here = (*path, str(name))
        if "x-mcp-header" in sub:
            header = sub["x-mcp-header"]
            if not isinstance(header, str) or not header:
                raise InvalidHeaderAnnotation(f"x-mcp-header on {'.'.join(here)} must be a non-empty string")
            if not _TOKEN.match(header):
                raise InvalidHeaderAnnotation(f"x-mcp-header {header!r} is not a valid header name token")
            kind = sub.get("type")
            if kind not in _PRIMITIVE:
                raise InvalidHeaderAnnotation(
                    f"x-mcp-header {header!r} is on a {kind or 'untyped'} property; only string, integer and "
                    "boolean properties can be mirrored"
                )
            found[here] = header
        _walk(sub, here, found)


def _header_keywords(schema: Any, names: bool = False) -> int:
    """How many ``x-mcp-header`` keywords ``schema`` holds anywhere (``names``: ``schema`` is a ``properties`` map,
    whose keys are property names, not keywords)."""
    if isinstance(schema, Mapping):
        return sum(
            (not names and key == "x-mcp-header") + _header_keywords(sub, not names and key == "properties")
            for key, sub in schema.items()
        )
    if isinstance(schema, list):
        return sum(_header_keywords(sub) for sub in schema)
    return 0


def _needs_base64(text: str) -> bool:
    if text != text.strip(" \t"):
        return True
    if text.startswith(_B64_PREFIX) and text.endswith(_B64_SUFFIX):
        return True
    return any(ord(ch) < 0x20 or ord(ch) > 0x7E for ch in text)


def encode_header_value(value: Any) -> str | None:
    """A parameter value as a header value; ``None`` (omit the header) for null. An integer beyond the IEEE 754
    double's safe range (±(2**53 - 1)) is a ``ValueError``: SEP-2243 allows only those."""
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        if abs(value) > _MAX_SAFE_INT:
            raise ValueError(f"an integer sent in a header is within ±(2**53 - 1), not {value}")
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_SAFE_INT:
        return str(int(value))
    text = str(value)
    if _needs_base64(text):
        return _B64_PREFIX + base64.b64encode(text.encode()).decode("ascii") + _B64_SUFFIX
    return text


def decode_header_value(raw: str) -> str:
    """The value a header carries: the base64 form decoded, otherwise the text with optional whitespace trimmed."""
    text = raw.strip(" \t")
    if text.startswith(_B64_PREFIX) and text.endswith(_B64_SUFFIX) and len(text) >= len(_B64_PREFIX) + 2:
        try:
            return base64.b64decode(text[len(_B64_PREFIX) : -len(_B64_SUFFIX)], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise ValueError("invalid base64 header value") from None
    return text


def name_of(method: str, params: Mapping[str, Any] | None) -> str | None:
    """What ``Mcp-Name`` carries for ``method``: the tool or prompt name, the resource URI, or the task id (the
    tasks extension's ``tasks/get``, ``tasks/update``, ``tasks/cancel``)."""
    if not params:
        return None
    key = _NAMED.get(method) or ("taskId" if method in _TASK_METHODS else None)
    value = params.get(key) if key is not None else None
    return value if isinstance(value, str) else None


def standard_headers(method: str, params: Mapping[str, Any] | None) -> dict[str, str]:
    """``Mcp-Method`` and, where the method has one, ``Mcp-Name``."""
    headers = {"Mcp-Method": method}
    name = name_of(method, params)
    if name is not None:
        encoded = encode_header_value(name)
        if encoded is not None:
            headers["Mcp-Name"] = encoded
    return headers


def param_headers(annotations: Mapping[tuple[str, ...], str], arguments: Mapping[str, Any] | None) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers for a call with ``arguments`` (absent and null values send no header)."""
    headers: dict[str, str] = {}
    for path, header in annotations.items():
        value: Any = arguments or {}
        for part in path:
            value = value.get(part) if isinstance(value, Mapping) else None
            if value is None:
                break
        encoded = encode_header_value(value)
        if encoded is not None:
            headers[f"Mcp-Param-{header}"] = encoded
    return headers


# --- the server's check of a request's mirrored headers ------------------------------------------------------


def _one(values: HeaderValues, name: str, label: str) -> tuple[str | None, str | None]:
    """(value, problem) of a header that must appear at most once with valid characters (the value without
    optional whitespace)."""
    sent = values(name)
    if not sent:
        return None, None
    if len(sent) > 1:
        return None, f"Header mismatch: {label} is sent more than once"
    value = sent[0].strip(" \t")
    if value.isascii() and value.isprintable():  # the usual case, checked in C
        return value, None
    for ch in value:
        if not (" " <= ch <= "~" or ch == "\t"):
            return None, f"Header mismatch: {label} holds characters not allowed in a header value"
    return value, None


def _same(body: Any, text: str) -> bool:
    if isinstance(body, bool):
        return text == ("true" if body else "false")
    if isinstance(body, int | float):
        if not _NUMBER.match(text):
            return False
        if isinstance(body, int) and text.lstrip("-").isdigit():
            return int(text) == body
        return float(text) == float(body)
    if isinstance(body, str):
        return text == body
    return False


def mirrored_header_problem(values: HeaderValues, call: Call, get_tool: ToolLookup) -> str | None:
    """Why the headers of a 2026-07-28 request disagree with its body (a -32020 message), or ``None``:
    ``MCP-Protocol-Version`` (= the ``_meta`` version), ``Mcp-Method`` (= ``method``), ``Mcp-Name`` (=
    ``params.name`` / ``params.uri`` / ``params.taskId``) and the ``Mcp-Param-*`` headers of the called tool's
    ``x-mcp-header`` properties: missing, malformed or different. ``values(name)``: every value the request has
    for the header ``name`` (lower case); ``get_tool(name)``: our tool of that name (``Server.get_tool``)."""
    method = call.request.method
    params: Any = call.params
    if (call.problem is not None or call.spec is None) and call.request.params is not None:
        try:  # (params of no known type, or that it refused: their own error comes later, headers first)
            params = msgspec.json.decode(call.request.params)
        except msgspec.DecodeError:
            params = None
    version = (call.meta or {}).get(META_PROTOCOL_VERSION)
    value, problem = _one(values, "mcp-protocol-version", "MCP-Protocol-Version")
    if problem:
        return problem
    if value is None:
        return "Header mismatch: the MCP-Protocol-Version header is required"
    if value != version:
        return f"Header mismatch: MCP-Protocol-Version {value!r} does not match the body's protocol version {version!r}"
    value, problem = _one(values, "mcp-method", "Mcp-Method")
    if problem:
        return problem
    if value is None:
        return "Header mismatch: the Mcp-Method header is required"
    if value != method:
        return f"Header mismatch: Mcp-Method {value!r} does not match the body's method {method!r}"
    key = _NAMED.get(method) or ("taskId" if method in _TASK_METHODS else None)
    expected = _field(params, key) if key is not None else None
    if not isinstance(expected, str):
        expected = None
    value, problem = _one(values, "mcp-name", "Mcp-Name")
    if problem:
        return problem
    if expected is not None:
        if value is None:
            return "Header mismatch: the Mcp-Name header is required for " + method
        try:
            decoded = decode_header_value(value)
        except ValueError:
            return "Header mismatch: Mcp-Name is not valid =?base64?...?= encoding"
        if decoded != expected:
            return f"Header mismatch: Mcp-Name {decoded!r} does not match the body's {expected!r}"
    if method == "tools/call" and expected is not None:
        tool = get_tool(expected)
        if tool is not None:
            annotations = _header_params(tool.input_schema)
            if annotations:  # (None: our own tool's annotation is unusable: nothing to hold the client to)
                return _check_params(values, annotations, _arguments(params))
    return None


#: The attribute of each wire name, by params Struct type (read once per type: ``msgspec.structs.fields`` evaluates
#: the class's annotations on every call).
_attributes: dict[type, dict[str, str]] = {}


def _field(params: Any, key: str) -> Any:
    """The field of params whose wire name is ``key`` (params decoded as a dict, or as a Struct)."""
    if isinstance(params, dict):
        return params.get(key)
    if isinstance(params, msgspec.Struct):
        kind = type(params)
        names = _attributes.get(kind)
        if names is None:
            names = _attributes[kind] = {field.encode_name: field.name for field in msgspec.structs.fields(kind)}
        name = names.get(key)
        return None if name is None else getattr(params, name)
    return getattr(params, key, None)


def _arguments(params: Any) -> Any:
    """A ``tools/call``'s arguments as data (kept undecoded in its params until the tool decodes them)."""
    arguments = _field(params, "arguments")
    if isinstance(arguments, msgspec.Raw):
        try:
            arguments = msgspec.json.decode(arguments)
        except msgspec.DecodeError:
            return None
    return arguments


#: ``tool_header_params`` of the schemas seen, by identity (a tool's schema is built once, when it is registered).
_annotations: dict[int, tuple[Mapping[str, Any], dict[tuple[str, ...], str] | None]] = {}


def _header_params(schema: Mapping[str, Any]) -> dict[tuple[str, ...], str] | None:
    """The ``x-mcp-header`` annotations of a tool's schema, ``None`` when unusable (computed once per schema)."""
    cached = _annotations.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    try:
        annotations: dict[tuple[str, ...], str] | None = tool_header_params(schema)
    except InvalidHeaderAnnotation:
        annotations = None
    if len(_annotations) >= 1024:
        _annotations.clear()
    _annotations[id(schema)] = (schema, annotations)
    return annotations


def _check_params(values: HeaderValues, annotations: Mapping[tuple[str, ...], str], arguments: Any) -> str | None:
    for path, name in annotations.items():
        label = f"Mcp-Param-{name}"
        raw, problem = _one(values, f"mcp-param-{name.lower()}", label)
        if problem:
            return problem
        value: Any = arguments
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            if raw is not None:
                return f"Header mismatch: {label} is sent but the arguments have no value for it"
            continue
        if type(value) is int and abs(value) > _MAX_SAFE_INT:
            return f"Header mismatch: the value of {label} is an integer outside JavaScript's safe range (2**53 - 1)"
        if raw is None:
            return f"Header mismatch: the {label} header is required (the arguments have a value for it)"
        try:
            decoded = decode_header_value(raw)
        except ValueError:
            return f"Header mismatch: {label} is not valid =?base64?...?= encoding"
        if not _same(value, decoded):
            return f"Header mismatch: {label} does not match the argument's value"
    return None
