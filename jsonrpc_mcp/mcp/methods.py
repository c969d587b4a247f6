"""The MCP method table: which methods exist in which era and revision, and what gates them (L2: pure data).

A :class:`MethodSpec` pairs a method name with its handler and the rules the session enforces before calling
it: the server capability that must be advertised (else -32601), the eras it exists in (a method removed from the
stateless era is -32601 there), and whether it may answer with an ``InputRequiredResult``. The other way,
:func:`undefined_in` says which server-to-client requests and notifications a revision lacks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from ..errors import MissingClientCapability
from .versions import Era

__all__ = (
    "MethodSpec",
    "BOTH",
    "HANDSHAKE_ONLY",
    "STATELESS_ONLY",
    "INPUT_METHODS",
    "CLIENT_METHOD_CAPABILITY",
    "SENT_IN",
    "undefined_in",
    "require_defined",
)

BOTH: Final = frozenset({Era.HANDSHAKE, Era.STATELESS})
HANDSHAKE_ONLY: Final = frozenset({Era.HANDSHAKE})
STATELESS_ONLY: Final = frozenset({Era.STATELESS})

#: Only these may answer with ``resultType: "input_required"`` (2026-07-28, SEP-2322).
INPUT_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})

#: Server-to-client methods and the client capability each needs.
CLIENT_METHOD_CAPABILITY: Final = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}

#: The server-to-client requests and notifications that not every revision defines: the first revision that does,
#: and the last (``None``: every later one too). Any other (``ping``, ``sampling/createMessage``, ``roots/list``,
#: the ``notifications/*`` of 2024-11-05) is defined by all. ``elicitation/create#url`` is URL-mode elicitation,
#: ``sampling/createMessage#tools`` sampling with tools.
SENT_IN: Final[dict[str, tuple[str, str | None]]] = {
    "elicitation/create": ("2025-06-18", None),
    "elicitation/create#url": ("2025-11-25", None),
    "sampling/createMessage#tools": ("2025-11-25", None),
    "notifications/elicitation/complete": ("2025-11-25", "2025-11-25"),
}


def undefined_in(method: str, version: str, mode: str | None = None) -> str | None:
    """Why revision ``version`` does not define the server-to-client ``method`` (with ``mode``), or ``None`` when it
    does: "it needs 2025-06-18 or later" and the like."""
    span = SENT_IN.get(method if mode is None else f"{method}#{mode}")
    if span is None:
        return None
    first, last = span
    if version < first:
        return f"it needs {first} or later" if last is None else f"only {first} defines it"
    if last is not None and version > last:
        return f"only {first} defines it" if first == last else f"{first} to {last} define it"
    return None


class MethodSpec(msgspec.Struct, frozen=True):
    """One request method a server answers.

    ``handler(ctx, params)`` gets the decoded params (``params_type``; ``None`` when absent) and returns the
    result (a Struct, a dict, or already-encoded ``bytes``), or a coroutine producing it.

    A frozen Struct, not a frozen dataclass: the same constructor, ``==``, hash and ``repr``, for a fraction of the
    cost at import (``dataclasses`` generates its methods as source and runs ``exec`` on it).
    """

    name: str
    handler: Callable[[Any, Any], Any]
    params_type: Any = None
    capability: str | None = None
    eras: frozenset[Era] = BOTH
    min_version: str = "2024-11-05"
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


def require_defined(method: str, version: str | None, mode: str | None = None) -> None:
    """Raise :class:`~jsonrpc_mcp.errors.MissingClientCapability`, naming the revision, when ``version`` does not
    define the server-to-client ``method`` (``None``: no revision settled, nothing to check)."""
    why = None if version is None else undefined_in(method, version, mode)
    if why is not None:
        name = method if mode is None else f"{method} ({mode})"
        capability = CLIENT_METHOD_CAPABILITY.get(method) or method.removeprefix("notifications/").split("/")[0]
        message = f"Missing required client capability: protocol revision {version} does not define {name} ({why})"
        raise MissingClientCapability(capability, {mode: {}} if mode is not None else None, message=message)
