"""Results fitted to an older handshake revision: content blocks it does not define (L2: pure functions).

Every revision's JSON Schema leaves its objects open, so the fields later revisions added (``title``, ``icons``,
``_meta``, ``outputSchema``, ``structuredContent``, ...) are valid on every wire and go out as they are. Content
block *types* are a closed union in each revision: a 2024-11-05 client knows ``text``, ``image`` and ``resource``
blocks, 2025-03-26 added ``audio``, 2025-06-18 ``resource_link``. A block the negotiated revision does not
define would make the whole result undecodable for a client that checks the union, so it is sent as a text block
that says what it was (``docs/spec-decisions.md`` #22a): a resource link keeps its name and URI, which the client
can still read with ``resources/read``.

The session applies :func:`fit_content` to the results of ``tools/call`` and ``prompts/get`` on sessions whose
revision is in :data:`CONTENT_TYPES`; other results carry no content blocks, and results a handler hands over as
``bytes`` or plain dicts are sent as given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec
from msgspec import UNSET

from . import types as t

__all__ = ("CONTENT_TYPES", "FITTED_METHODS", "content_types", "fit_content")

_FIRST: Final = frozenset({"text", "image", "resource"})

#: The content block types of the revisions that lack some of ours (later revisions define them all).
CONTENT_TYPES: Final[dict[str, frozenset[str]]] = {
    "2024-11-05": _FIRST,
    "2025-03-26": _FIRST | {"audio"},
}

#: The methods whose results carry content blocks.
FITTED_METHODS: Final = frozenset({"tools/call", "prompts/get"})


def content_types(version: str | None) -> frozenset[str] | None:
    """The content block types ``version`` defines, or None when it defines every type we send."""
    return CONTENT_TYPES.get(version) if version is not None else None


def fit_content(result: Any, allowed: frozenset[str]) -> Any:
    """``result`` with each content block of a type outside ``allowed`` replaced by a text block; ``result``
    itself when there is nothing to replace (it is never changed in place)."""
    if isinstance(result, t.CallToolResult):
        blocks = _fit_blocks(result.content, allowed)
        return result if blocks is None else msgspec.structs.replace(result, content=blocks)
    if isinstance(result, t.GetPromptResult):
        messages = result.messages
        fitted = _fit_blocks([message.content for message in messages], allowed)
        if fitted is None:
            return result
        replaced = [
            message if block is message.content else msgspec.structs.replace(message, content=block)
            for message, block in zip(messages, fitted, strict=True)
        ]
        return msgspec.structs.replace(result, messages=replaced)
    return result


def _fit_blocks(blocks: Sequence[Any], allowed: frozenset[str]) -> list[Any] | None:
    """The blocks with the foreign ones replaced, or None when every block is allowed."""
    fitted: list[Any] | None = None
    for i, block in enumerate(blocks):
        kind = _kind(block)
        if kind is None or kind in allowed:
            continue
        if fitted is None:
            fitted = list(blocks)
        fitted[i] = _as_text(block, kind)
    return fitted


def _kind(block: Any) -> str | None:
    if isinstance(block, msgspec.Struct):
        tag = block.__struct_config__.tag
        return tag if isinstance(tag, str) else None
    if isinstance(block, dict):
        kind = block.get("type")
        return kind if isinstance(kind, str) else None
    return None


def _as_text(block: Any, kind: str) -> t.TextContent:
    if kind == "resource_link":
        uri = _field(block, "uri", "uri")
        label = _field(block, "title", "title") or _field(block, "name", "name")
        text = f"{label} ({uri})" if label and label != uri else str(uri)
        description = _field(block, "description", "description")
        if description:
            text += f": {description}"
    elif kind == "audio":
        mime = _field(block, "mime_type", "mimeType") or "audio"
        text = f"[{mime} audio, not shown: this protocol revision has no audio content]"
    else:
        text = f"[{kind} content, not shown: this protocol revision does not define it]"
    annotations = getattr(block, "annotations", UNSET)  # (a block given as a dict keeps none)
    if isinstance(annotations, t.Annotations):
        return t.TextContent(text=text, annotations=annotations)
    return t.TextContent(text=text)


def _field(block: Any, attribute: str, wire_name: str) -> str:
    """A string field of a block given as a Struct or as a dict ("" when absent or not a string)."""
    value = block.get(wire_name) if isinstance(block, dict) else getattr(block, attribute, None)
    return value if isinstance(value, str) else ""
