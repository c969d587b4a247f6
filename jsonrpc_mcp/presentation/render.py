"""From a payload to a ``CallToolResult``: format gating, MIME-typed text blocks, the inline budget (L7).

``format`` picks the text blocks:

``markdown`` (default)  one ``text/markdown`` block for people
``json``                one ``application/json`` block, the canonical machine contract
``both``                the markdown block first, the JSON block last

``structuredContent`` is always the payload. ``TextContent`` has no MIME type field, so the MIME type goes in
the block's ``_meta`` as ``{"mimeType": ...}``. Inline text is kept under ``limit`` characters (default
2,000): the payload is shrunk (:meth:`Payload.shrink`) until its JSON and its markdown fit, ``truncated`` is
set, and a ``resource_link`` to the full data is added when the caller names one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec

from ..mcp import types as t
from ..mcp.context import Context
from .payloads import FORMATS, SUMMARY_MAX, ErrorCode, Format, Payload, TokenUsage, fit_summary, tool_error

__all__ = (
    "MIME_MARKDOWN",
    "MIME_JSON",
    "INLINE_LIMIT",
    "FORMAT_HEADER",
    "Presented",
    "present",
    "resolve_format",
    "render_markdown",
)

logger = logging.getLogger(__name__)

MIME_MARKDOWN: Final = "text/markdown"
MIME_JSON: Final = "application/json"
INLINE_LIMIT: Final = 2000
#: The HTTP request header that sets the default ``format`` (an explicit ``format`` argument wins).
FORMAT_HEADER: Final = "x-response-format"

_encode: Final = msgspec.json.Encoder().encode
_CUT: Final = "\n\n… (cut to fit)"


@dataclass(slots=True)
class Presented:
    """A payload plus what goes around it: where the full data lives (linked when the result is cut) and extra
    content blocks (embedded resources, links) placed after the markdown and before the JSON block."""

    payload: Payload
    full_uri: str | None = None
    full_name: str = "full result"
    blocks: Sequence[t.ContentBlock] = field(default_factory=tuple)


def resolve_format(ctx: Context | None, value: str | None, default: Format = "markdown") -> Format:
    """The format to answer in: the explicit argument, else the ``X-Response-Format`` request header, else
    ``default``. Unknown header values are ignored."""
    for candidate in (value, _header(ctx)):
        if candidate in FORMATS:
            return candidate  # type: ignore[return-value]
    return default


def _header(ctx: Context | None) -> str | None:
    headers: Mapping[str, str] = ctx.request_headers if ctx is not None else {}
    value = headers.get(FORMAT_HEADER)
    return value.strip().lower() if isinstance(value, str) else None


def render_markdown(payload: Payload, full_uri: str | None = None, limit: int | None = None) -> tuple[str, bool]:
    """The markdown for people: headline, body, next steps. Returns the text and whether the body was cut."""
    head = f"**{payload.label()}:** {payload.summary}"
    tail: list[str] = []
    if payload.next_steps:
        tail.append("**Next steps**\n" + "\n".join(f"- {s}" for s in payload.next_steps))
    if payload.truncated:
        where = f" The full data is at `{full_uri}`." if full_uri else ""
        tail.append(f"_Showing part of the result._{where}")
    body = payload.markdown().strip()
    cut = False
    if limit is not None:
        room = limit - len(head) - sum(len(x) + 2 for x in tail) - 2
        if len(body) > room:
            body = body[: max(0, room - len(_CUT))].rstrip() + _CUT
            cut = True
    return "\n\n".join(part for part in (head, body, *tail) if part), cut


def _fit(payload: Payload, fmt: Format, limit: int) -> Payload:
    """Shrink until the JSON (always sent, as structuredContent) and the markdown (unless ``json``) fit."""
    current = payload
    while len(_encode(current)) > limit or (fmt != "json" and len(render_markdown(current)[0]) > limit):
        smaller = current.shrink()
        if smaller is None:
            break
        current = msgspec.structs.replace(smaller, truncated=True)
    return current


def present(
    value: Payload | Presented,
    *,
    format: Format = "markdown",
    limit: int = INLINE_LIMIT,
    estimate_tokens: bool = False,
) -> t.CallToolResult:
    """The ``CallToolResult`` of a payload: ``structuredContent`` always, text blocks as ``format`` says,
    ``isError`` when the payload is an error kind."""
    presented = value if isinstance(value, Presented) else Presented(value)
    payload = presented.payload
    if len(payload.summary) > SUMMARY_MAX or "\n" in payload.summary:
        payload = msgspec.structs.replace(payload, summary=fit_summary(payload.summary))
    payload = _fit(payload, format, limit)
    link = presented.full_uri
    md = ""
    if format != "json":
        md, cut = render_markdown(payload, link, limit)
        if cut:
            payload = msgspec.structs.replace(payload, truncated=True)
    if payload.truncated and link:
        step = f"Read {link} for the full result."
        payload = msgspec.structs.replace(payload, next_steps=[*payload.next_steps, step])
    if estimate_tokens:
        chars = len(render_markdown(payload, link, limit)[0]) if format != "json" else 0
        chars += len(_encode(payload)) if format != "markdown" else 0
        payload = msgspec.structs.replace(
            payload, token_usage=TokenUsage(output_tokens=math.ceil(chars / 4), estimated=True)
        )
    if format != "json":
        md = render_markdown(payload, link, limit)[0]
    data = msgspec.to_builtins(payload)
    try:
        msgspec.convert(data, type(payload))
    except msgspec.ValidationError as exc:
        logger.error("a %s payload does not match its schema: %s", type(payload).__name__, exc)
        return present(tool_error(ErrorCode.INTERNAL_ERROR, "The tool produced an invalid result."), format=format)
    content: list[t.ContentBlock] = []
    if format != "json":
        content.append(t.TextContent(text=md, meta={"mimeType": MIME_MARKDOWN}))
    if payload.truncated and link:
        content.append(
            t.ResourceLink(
                uri=link,
                name=presented.full_name,
                description="The complete data this result was cut from.",
                mime_type=MIME_JSON,
            )
        )
    content.extend(presented.blocks)
    if format != "markdown":
        content.append(t.TextContent(text=_encode(data).decode(), meta={"mimeType": MIME_JSON}))
    result = t.CallToolResult(content=content, structured_content=data)
    if payload.is_error:
        result.is_error = True
    return result
