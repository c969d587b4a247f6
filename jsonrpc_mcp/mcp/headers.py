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
from collections.abc import Mapping
from typing import Any, Final

__all__ = (
    "InvalidHeaderAnnotation",
    "tool_header_params",
    "encode_header_value",
    "decode_header_value",
    "standard_headers",
    "param_headers",
    "name_of",
)

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


def _needs_base64(text: str) -> bool:
    if text != text.strip(" \t"):
        return True
    if text.startswith(_B64_PREFIX) and text.endswith(_B64_SUFFIX):
        return True
    return any(ord(ch) < 0x20 or ord(ch) > 0x7E for ch in text)


def encode_header_value(value: Any) -> str | None:
    """A parameter value as a header value; ``None`` (omit the header) for null."""
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
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
    """What ``Mcp-Name`` carries for ``method``: the tool or prompt name, or the resource URI."""
    if not params:
        return None
    if method in ("tools/call", "prompts/get"):
        name = params.get("name")
        return name if isinstance(name, str) else None
    if method == "resources/read":
        uri = params.get("uri")
        return uri if isinstance(uri, str) else None
    return None


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
