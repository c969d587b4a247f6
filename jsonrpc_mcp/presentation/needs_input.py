"""Needs-input: ask the user through elicitation when the client can answer, else return the payload (L7).

::

    need = NeedsInput(summary="Which entry?", reason="No entry has id 42.", fields=[InputField(name="id", ...)])
    answers = await ask(ctx, need)
    if answers is None:
        return need                  # the client cannot elicit, or the user declined: the model reads the payload
    entry_id = int(answers["id"])

:func:`ask` sends a real form-mode ``elicitation/create`` in a handshake session; in the 2026-07-28 stateless
era the same call raises :class:`~jsonrpc_mcp.InputRequired`, the client answers, and the tool runs again from
the start — so gather input before any side effect. An answer is checked against the fields before the tool sees
it: a value outside a field's ``options``, a missing required field, or one that is not of the field's type is
refused and asked again, saying what was wrong (at most ``attempts`` times). Accepted values come back converted
to the field's type (``"9"`` for an ``integer`` field is ``9``). What happened is recorded in
``need.details["elicitation"]``: ``unsupported`` (no elicitation capability), ``decline``, ``cancel``, or
``invalid`` (no acceptable answer after the last attempt).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..mcp.context import Context
from .payloads import InputField, NeedsInput

__all__ = ("ask", "check_answers", "elicitation_schema")


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
    ctx: Context | None,
    need: NeedsInput,
    *,
    message: str | None = None,
    key: str | None = None,
    attempts: int = 3,
) -> dict[str, Any] | None:
    """Elicit ``need.fields`` and return the accepted values (only the fields', converted to their types), or
    ``None`` (then answer with ``need``).

    ``key`` names the input request in the stateless era (stable across the replay; a repeated question after a
    refused answer is ``key#2``, ``key#3``); by default the context numbers them in call order, which is stable as
    long as the tool asks in the same order each run.
    """
    if ctx is None or not ctx.has_capability("elicitation", "form"):
        _note(need, "unsupported")
        return None
    schema = elicitation_schema(need.fields)
    text = message or need.reason
    for attempt in range(1, max(1, attempts) + 1):
        round_key = key if key is None or attempt == 1 else f"{key}#{attempt}"
        result = await ctx.elicit(text, schema, key=round_key, validate=False)  # (checked here, and asked again)
        if result.action != "accept" or not isinstance(result.content, dict):
            _note(need, result.action if result.action in ("decline", "cancel") else "cancel")
            return None
        answers, problems = check_answers(need.fields, result.content)
        if not problems:
            return answers
        text = f"{' '.join(problems)} {message or need.reason}"
    _note(need, "invalid")
    return None


def check_answers(fields: list[InputField], content: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The answers to ``fields`` converted to their types, and what is wrong with them (empty when nothing is):
    a required field left out, a value outside ``options``, a value that is not of the field's type. Keys that
    name no field are dropped."""
    answers: dict[str, Any] = {}
    problems: list[str] = []
    for f in fields:
        value = content.get(f.name)
        if value is None or value == "":
            if f.required:
                problems.append(f"{f.name} is required.")
            continue
        if isinstance(f.options, list) and f.options and str(value) not in f.options:
            problems.append(f"{_shown(value)} is not one of the choices for {f.name} ({', '.join(f.options)}).")
            continue
        converted = _convert(f.type, value)
        if converted is None:
            problems.append(f"{f.name} must be {'an' if f.type == 'integer' else 'a'} {f.type}, not {_shown(value)}.")
            continue
        answers[f.name] = converted
    return answers, problems


def _convert(kind: str, value: Any) -> Any:
    """``value`` as a JSON ``kind`` (form answers may come as strings: an enum is always one), else ``None``."""
    if kind == "string":
        return value if isinstance(value, str) else None
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        return {"true": True, "false": False}.get(value) if isinstance(value, str) else None
    if isinstance(value, bool):
        return None
    if kind == "integer":
        if isinstance(value, int):
            return value
        text = value.strip() if isinstance(value, str) else ""
        digits = text[1:] if text[:1] == "-" else text
        return int(text) if digits.isascii() and digits.isdigit() and len(digits) <= 30 else None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        number = float(value) if isinstance(value, str) and len(value) <= 40 else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _note(need: NeedsInput, outcome: str) -> None:
    details = dict(need.details) if isinstance(need.details, dict) else {}
    details["elicitation"] = outcome
    need.details = details
