"""The Streamable HTTP app's settings, checked when it is made (L6 helper).

A wrong setting is a :class:`ValueError` (or :class:`TypeError`) from ``McpAsgiApp(...)`` naming the parameter,
never a fault on the first request: a zero ``sse_keepalive`` would fill every waiting stream with comment lines
as fast as the loop turns, a zero ``request_timeout`` would fail every sampling or elicitation request at once,
and a single string given for a list of names (``allowed_hosts="api.example"``) would be read as its letters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from .events import EventStore

__all__ = ("check_app_options",)

#: Numbers that must be greater than zero.
_POSITIVE: Final = ("session_idle_timeout", "max_sessions", "max_body", "max_in_flight_per_session", "sse_keepalive")
#: Numbers that must be greater than zero, or ``None`` (no bound).
_POSITIVE_OR_NONE: Final = ("max_sessions_per_client", "body_timeout", "request_timeout")
#: Numbers that may be zero.
_NOT_NEGATIVE: Final = ("sse_retry_ms",)
#: Lists of names (``None``: none).
_NAME_LISTS: Final = ("allowed_hosts", "allowed_origins", "cors_origins")
#: The numbers that count something (sessions, bytes, requests, milliseconds): whole numbers.
_COUNTS: Final = frozenset(
    {"max_sessions", "max_sessions_per_client", "max_body", "max_in_flight_per_session", "sse_retry_ms"}
)
_PREFERENCES: Final = ("auto", "json", "sse")


def check_app_options(options: Mapping[str, Any]) -> None:
    """Refuse the first wrong setting among ``options`` (the app's constructor arguments, by name)."""
    if options["json_response_preference"] not in _PREFERENCES:
        raise ValueError('json_response_preference must be "auto", "json" or "sse"')
    for name in _POSITIVE:
        _check_number(name, options[name], minimum_excluded=True)
    for name in _POSITIVE_OR_NONE:
        if options[name] is not None:
            _check_number(name, options[name], minimum_excluded=True, none_ok=True)
    for name in _NOT_NEGATIVE:
        _check_number(name, options[name], minimum_excluded=False)
    path = options["path"]
    if path is not None and (not isinstance(path, str) or any(mark in path for mark in ("://", "?", "#"))):
        raise ValueError(f"path is the endpoint's path (/mcp), not a URL: {path!r}")  # (it never matched: 404)
    store = options["event_store"]
    if store is not None and (isinstance(store, type) or not isinstance(store, EventStore)):
        raise TypeError(f"event_store must be an event store (InMemoryEventStore(), or your own), not {store!r}")
    for name in _NAME_LISTS:
        value = options[name]
        if value is None:
            continue
        if isinstance(value, (str, bytes)):
            raise TypeError(f"{name} is a list of names, not a string: {name}=[{value!r}]")
        for entry in value:
            if not isinstance(entry, str):
                raise TypeError(f"{name} holds strings, not {type(entry).__name__} ({entry!r})")
            _check_entry(name, entry.strip())


def _check_entry(name: str, entry: str) -> None:
    """An entry that could never match a request (it would refuse, with 403, what it was meant to let in)."""
    if entry in ("*", "null"):
        return
    if name == "allowed_hosts" and ("/" in entry or "@" in entry):
        raise ValueError(
            f"allowed_hosts holds host names (mcp.example.com, or mcp.example.com:8443), not URLs: {entry!r}"
        )
    if name != "allowed_hosts":
        parts = urlsplit(entry)
        if not parts.scheme or not parts.netloc or parts.path.strip("/") or parts.query:  # (an Origin is no more)
            raise ValueError(f"{name} holds origins (https://app.example: a scheme and a host only), not {entry!r}")


def _check_number(name: str, value: Any, *, minimum_excluded: bool, none_ok: bool = False) -> None:
    wanted = ("positive" if minimum_excluded else "zero or more") + (" (or None)" if none_ok else "")
    kinds = (int,) if name in _COUNTS else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "a whole number" if name in _COUNTS else "a number"
        raise TypeError(f"{name} must be {kind} {wanted}, not {value!r}")
    if value < 0 or (minimum_excluded and value == 0) or value != value:  # (value != value: NaN)
        raise ValueError(f"{name} must be {wanted}, not {value!r}")
