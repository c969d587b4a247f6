"""From a payload to a ``CallToolResult``: format gating, MIME-typed text blocks, the inline budget (L7).

``format`` picks the text blocks:

``markdown`` (default)  one ``text/markdown`` block for people
``json``                one ``application/json`` block, the canonical machine contract
``both``                the markdown block first, the JSON block last

``structuredContent`` is always the payload, and the JSON block is the same payload: the machine contract,
with every item whole. The inline budget (``limit``, default 2,000 characters) is the markdown's only: a
markdown over it is a preview of fewer items (:meth:`Payload.shrink`) with a note saying how many are shown and
where all of them are. Structured data is cut only past ``data_limit`` (256 KiB of JSON), and then by leaving
out whole items from the end of the kind's list, never by altering a value: ``truncated`` is set and
``omitted`` names each item left out (:func:`fit_data`). ``fullResult`` and, when the result shows less than
all of it, a ``resource_link`` point to a resource returning the whole result, when the tool names one.
``TextContent`` has no MIME type field, so the MIME type goes in the block's ``_meta`` as
``{"mimeType": ...}``.
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
from .payloads import FORMATS, SUMMARY_MAX, ErrorCode, Format, Omitted, Payload, TokenUsage, fit_summary, tool_error

__all__ = (
    "MIME_MARKDOWN",
    "MIME_JSON",
    "INLINE_LIMIT",
    "DATA_LIMIT",
    "FORMAT_HEADER",
    "Presented",
    "present",
    "resolve_format",
    "render_markdown",
    "fit_data",
)

logger = logging.getLogger(__name__)

MIME_MARKDOWN: Final = "text/markdown"
MIME_JSON: Final = "application/json"
INLINE_LIMIT: Final = 2000
#: Characters of JSON the structured data may take before whole items are left out (``truncated``).
DATA_LIMIT: Final = 256 * 1024
#: The HTTP request header that sets the default ``format`` (an explicit ``format`` argument wins).
FORMAT_HEADER: Final = "x-response-format"

_encode: Final = msgspec.json.Encoder().encode
_CUT: Final = "\n\n… (cut to fit)"


@dataclass(slots=True)
class Presented:
    """A payload plus what goes around it: ``full_uri``, a resource that returns the whole result (it becomes
    the payload's ``fullResult``, and a ``resource_link`` whenever the result shows less than all of it), ``more``
    (a limit left out items that exist: link them too), and extra content blocks (embedded resources, links)
    placed after the markdown and before the JSON block."""

    payload: Payload
    full_uri: str | None = None
    full_name: str = "full result"
    blocks: Sequence[t.ContentBlock] = field(default_factory=tuple)
    more: bool = False


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


def render_markdown(payload: Payload, limit: int | None = None, note: str | None = None) -> str:
    """The markdown for people: headline, body, next steps, and ``note`` (what a preview leaves out). With
    ``limit``, a body that still does not fit is cut with a marker."""
    head = f"**{payload.label()}:** {payload.summary}"
    tail: list[str] = []
    if payload.next_steps:
        tail.append("**Next steps**\n" + "\n".join(f"- {s}" for s in payload.next_steps))
    if note:
        tail.append(note)
    body = payload.markdown().strip()
    if limit is not None:
        room = limit - len(head) - sum(len(x) + 2 for x in tail) - 2
        if len(body) > room:
            body = body[: max(0, room - len(_CUT))].rstrip() + _CUT
    return "\n\n".join(part for part in (head, body, *tail) if part)


def fit_data(payload: Payload, data_limit: int, full_uri: str | None = None) -> Payload:
    """The payload whole when its JSON fits in ``data_limit`` characters; else with whole items left out from
    the end of its list (never a value altered), ``truncated``, ``omitted`` naming each, and a next step saying
    where the rest is."""
    if len(_encode(payload)) <= data_limit:
        return payload
    name = payload.trim_field
    items = payload.trim_items()
    if name is None or not items:
        logger.warning(
            "a %s payload is over the %d-character limit and has nothing to leave out",
            type(payload).__name__,
            data_limit,
        )
        return payload

    def leaving(count: int) -> Payload:
        gone = len(items) - count
        where = f"read {full_uri} for them" if full_uri else "ask for fewer at a time"
        step = f"{gone} of the {len(items)} {name} were left out to stay under {data_limit // 1024} KiB: {where}."
        ids = [payload.item_id(item, count + i) for i, item in enumerate(items[count:])]
        return msgspec.structs.replace(
            payload.keep_first(count),
            truncated=True,
            omitted=Omitted(field=name, ids=ids),
            next_steps=[*payload.next_steps, step],
        )

    low, high = 0, len(items) - 1  # the most items that fit: binary search (each try encodes the payload once)
    while low < high:
        middle = (low + high + 1) // 2
        if len(_encode(leaving(middle))) <= data_limit:
            low = middle
        else:
            high = middle - 1
    return leaving(low)


def _preview(payload: Payload, fmt: Format, limit: int, full_uri: str | None) -> tuple[str, bool]:
    """The markdown, within ``limit`` characters: the whole payload when it fits, else a preview of fewer items
    (:meth:`Payload.shrink`) with a note saying how many are shown and where all of them are. Returns the text
    and whether it shows less than the payload holds."""
    text = render_markdown(payload)
    if len(text) <= limit:
        return text, False
    preview = payload
    while True:
        smaller = preview.shrink()
        if smaller is None:
            break
        preview = smaller
        if len(render_markdown(preview, note=_preview_note(payload, preview, fmt, full_uri))) <= limit:
            break
    return render_markdown(preview, limit, _preview_note(payload, preview, fmt, full_uri)), True


def _preview_note(payload: Payload, preview: Payload, fmt: Format, full_uri: str | None) -> str:
    total, shown = len(payload.trim_items()), len(preview.trim_items())
    what = f"{shown} of the {total} {payload.trim_field} shown" if shown < total else "cut to fit"
    whole = f"all {total}" if shown < total else "the whole result"
    where = "the JSON block below" if fmt == "both" else "structuredContent (format json sends it as text)"
    also = f", and at `{full_uri}`" if full_uri else ""
    return f"_Preview: {what}; {whole} in {where}{also}._"


def present(
    value: Payload | Presented,
    *,
    format: Format = "markdown",
    limit: int = INLINE_LIMIT,
    data_limit: int = DATA_LIMIT,
    estimate_tokens: bool = False,
) -> t.CallToolResult:
    """The ``CallToolResult`` of a payload: ``structuredContent`` always (every item whole, up to
    ``data_limit``), text blocks as ``format`` says (the markdown a preview within ``limit``), ``isError`` when
    the payload is an error kind."""
    presented = value if isinstance(value, Presented) else Presented(value)
    payload = presented.payload
    link = presented.full_uri
    if len(payload.summary) > SUMMARY_MAX or "\n" in payload.summary:
        payload = msgspec.structs.replace(payload, summary=fit_summary(payload.summary))
    if link:
        payload = msgspec.structs.replace(payload, full_result=link)
    payload = fit_data(payload, data_limit, link)
    md, previewed = _preview(payload, format, limit, link) if format != "json" else ("", False)
    if estimate_tokens:
        chars = len(md) + (len(_encode(payload)) if format != "markdown" else 0)
        payload = msgspec.structs.replace(
            payload, token_usage=TokenUsage(output_tokens=math.ceil(chars / 4), estimated=True)
        )
    data = msgspec.to_builtins(payload)
    try:
        msgspec.convert(data, type(payload))
    except msgspec.ValidationError as exc:
        logger.error("a %s payload does not match its schema: %s", type(payload).__name__, exc)
        return present(tool_error(ErrorCode.INTERNAL_ERROR, "The tool produced an invalid result."), format=format)
    content: list[t.ContentBlock] = []
    if format != "json":
        content.append(t.TextContent(text=md, meta={"mimeType": MIME_MARKDOWN}))
    if link and (previewed or payload.truncated or presented.more):
        content.append(
            t.ResourceLink(
                uri=link,
                name=presented.full_name,
                description="The whole result, a page at a time.",
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
