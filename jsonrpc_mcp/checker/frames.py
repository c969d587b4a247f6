"""Frames as the checker sees them: what a frame is (request, reply, notification), masks, one-line summaries (L7)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

__all__ = (
    "loads",
    "NOT_JSON",
    "frame_key",
    "reply_id",
    "apply_masks",
    "summarize",
    "frame_summary",
    "short",
)


# --- frames: keys, masks, summaries ---------------------------------------------------------------------


def loads(frame: bytes) -> Any:
    try:
        return json.loads(frame)
    except (ValueError, UnicodeDecodeError):
        return NOT_JSON


NOT_JSON: Final = object()


def frame_key(frame: bytes) -> tuple[str, str]:
    """What a frame is, for waiting and pairing: (kind, id or method)."""
    msg = loads(frame)
    if isinstance(msg, list):
        return ("batch", "")
    if not isinstance(msg, dict):
        return ("other", "")
    if isinstance(msg.get("method"), str):
        return ("request" if "id" in msg else "notification", msg["method"])
    if "result" in msg or "error" in msg:
        ident = msg.get("id")
        return ("reply", "" if ident is None else json.dumps(ident))
    return ("other", "")


def reply_id(frame: bytes) -> Any:
    msg = loads(frame)
    if isinstance(msg, dict) and ("result" in msg or "error" in msg):
        return msg.get("id", NOT_JSON)
    return NOT_JSON


def apply_masks(frame: bytes, keys: Sequence[str]) -> bytes:
    """Replace the string value of each JSON key in ``keys`` with ``"***"`` (values that change every run)."""
    for key in keys:
        pattern = re.compile(rb'("' + re.escape(key.encode()) + rb'":)"(?:[^"\\]|\\.)*"')
        frame = pattern.sub(rb'\1"***"', frame)
    return frame


def summarize(frames: Sequence[bytes]) -> str:
    """One line: what these frames are (``silence``, ``error -32602 (id 3)``, ``result (id 1)``...)."""
    if not frames:
        return "silence"
    return ", ".join(frame_summary(f) for f in frames)


def frame_summary(frame: bytes) -> str:
    msg = loads(frame)
    if msg is NOT_JSON:
        return f"non-JSON {frame[:40]!r}"
    if isinstance(msg, list):
        return "batch [" + ", ".join(frame_summary(json.dumps(m).encode()) for m in msg) + "]"
    if not isinstance(msg, dict):
        return f"JSON {type(msg).__name__}"
    ident = f"id {json.dumps(msg['id'])}" if "id" in msg else "no id"
    if isinstance(msg.get("method"), str):
        return f"{'request' if 'id' in msg else 'notification'} {msg['method']}"
    if isinstance(msg.get("error"), dict):
        return f"error {msg['error'].get('code')} ({ident})"
    if "result" in msg:
        result = msg["result"]
        extra = " isError" if isinstance(result, dict) and result.get("isError") is True else ""
        return f"result{extra} ({ident})"
    return f"object ({ident})"


def short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."
