"""Request checks of the Streamable HTTP app that need no session: headers sent twice, and the body's media type
and character set (L6 helper). Each returns the sentence of the refusal, or ``None`` when the request passes."""

from __future__ import annotations

from typing import Final

from ._http_io import Headers, is_json_content

__all__ = ("repeated_header_problem", "body_type_problem")

#: Headers that name one thing: sent twice, which one counts is anyone's guess (a proxy and the app may disagree).
_SINGLE: Final = ((b"mcp-session-id", "Mcp-Session-Id"), (b"mcp-protocol-version", "MCP-Protocol-Version"))


def repeated_header_problem(headers: Headers) -> str | None:
    """A refusal (400) when a header that must be single is sent more than once."""
    for raw, name in _SINGLE:
        if headers.repeated(raw):
            return f"Bad Request: the {name} header is sent more than once"
    return None


def body_type_problem(content_type: bytes | None) -> str | None:
    """A refusal (415) unless the body is declared ``application/json`` in UTF-8: a ``charset`` parameter, when
    present, must name UTF-8 (in any case, quoted or not); JSON text exchanged between systems is UTF-8 (RFC 8259
    §8.1), and a body in another charset would be misread."""
    value = content_type.decode("latin-1") if content_type is not None else None
    if not is_json_content(value):
        return "Unsupported Media Type: the body must be application/json"
    assert value is not None
    for param in value.split(";")[1:]:
        key, _, given = param.partition("=")
        if key.strip().lower() == "charset":
            charset = given.strip().strip('"').strip()
            if charset.lower() != "utf-8":
                return f"Unsupported Media Type: the body must be UTF-8, not charset={charset}"
    return None
