"""Opaque cursors over ordered lists (L2).

A cursor is ``base64url("o:<offset>")``; clients must treat it as opaque. Anything we did not issue is refused
with -32602. Pages are taken from the list as it is at each call (a list changed between pages may shift items;
``notifications/*/list_changed`` tells the client to start again).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import TypeVar

from ..errors import InvalidParams

__all__ = ("paginate", "encode_cursor", "decode_cursor")

T = TypeVar("T")


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode("ascii")


def decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        raise InvalidParams("Invalid params: invalid cursor") from None
    if not text.startswith("o:") or not text[2:].isdigit():
        raise InvalidParams("Invalid params: invalid cursor")
    return int(text[2:])


def paginate(items: Sequence[T], cursor: str | None, page_size: int | None) -> tuple[list[T], str | None]:
    """One page of ``items`` and the cursor of the next page (``None`` at the end)."""
    start = 0 if cursor is None else decode_cursor(cursor)
    if start > len(items):
        raise InvalidParams("Invalid params: cursor is past the end of the list")
    if page_size is None:
        return list(items[start:]), None
    end = start + page_size
    page = list(items[start:end])
    return page, (encode_cursor(end) if end < len(items) else None)
