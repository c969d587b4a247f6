"""The MCP method table: which methods exist in which era, and what gates them (L2: pure data).

A :class:`MethodSpec` pairs a method name with its handler and the rules the session enforces before calling
it: the server capability that must be advertised (else -32601), the eras it exists in (a method removed from the
stateless era is -32601 there), and whether it may answer with an ``InputRequiredResult``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec

from .versions import Era

__all__ = (
    "MethodSpec",
    "BOTH",
    "HANDSHAKE_ONLY",
    "STATELESS_ONLY",
    "INPUT_METHODS",
    "CLIENT_METHOD_CAPABILITY",
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
