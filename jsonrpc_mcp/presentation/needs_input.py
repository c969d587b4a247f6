"""Needs-input: ask the user through elicitation when the client can answer, else return the payload (L7).

::

    need = NeedsInput(summary="Which entry?", reason="No entry has id 42.", fields=[InputField(name="id", ...)])
    answers = await ask(ctx, need)
    if answers is None:
        return need                  # the client cannot elicit, or the user declined: the model reads the payload
    entry_id = int(answers["id"])

:func:`ask` sends a real form-mode ``elicitation/create`` in a handshake session; in the 2026-07-28 stateless
era the same call raises :class:`~jsonrpc_mcp.InputRequired`, the client answers, and the tool runs again from
the start — so gather input before any side effect. What happened is recorded in ``need.details["elicitation"]``:
``unsupported`` (no elicitation capability), ``decline`` or ``cancel``.
"""

from __future__ import annotations

from typing import Any

from ..mcp.context import Context
from .payloads import InputField, NeedsInput

__all__ = ("ask", "elicitation_schema")


def elicitation_schema(fields: list[InputField]) -> dict[str, Any]:
    """The flat ``requestedSchema`` of a form elicitation for ``fields`` (options become a string enum)."""
    properties: dict[str, Any] = {}
    for f in fields:
        prop: dict[str, Any] = {"type": f.type, "title": f.name}
        if isinstance(f.description, str):
            prop["description"] = f.description
        if isinstance(f.options, list) and f.options:
            prop = {"type": "string", "title": f.name, "enum": list(f.options), **_described(prop)}
        properties[f.name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [f.name for f in fields if f.required]
    if required:
        schema["required"] = required
    return schema


def _described(prop: dict[str, Any]) -> dict[str, Any]:
    return {"description": prop["description"]} if "description" in prop else {}


async def ask(
    ctx: Context | None, need: NeedsInput, *, message: str | None = None, key: str | None = None
) -> dict[str, Any] | None:
    """Elicit ``need.fields`` and return the accepted values, or ``None`` (then answer with ``need``).

    ``key`` names the input request in the stateless era (stable across the replay); by default the context
    numbers them in call order, which is stable as long as the tool asks in the same order each run.
    """
    if ctx is None or not ctx.has_capability("elicitation", "form"):
        _note(need, "unsupported")
        return None
    result = await ctx.elicit(message or need.reason, elicitation_schema(need.fields), key=key)
    if result.action == "accept" and isinstance(result.content, dict):
        return dict(result.content)
    _note(need, result.action if result.action in ("decline", "cancel") else "cancel")
    return None


def _note(need: NeedsInput, outcome: str) -> None:
    details = dict(need.details) if isinstance(need.details, dict) else {}
    details["elicitation"] = outcome
    need.details = details
