"""Checking a tool's ``structuredContent`` against its ``outputSchema`` on the client side (L2: no I/O).

The spec says a client SHOULD validate structured results against the tool's output schema, and a server MUST
send structured results that conform to it. With the ``validation`` extra (jsonschema-rs) installed,
:class:`OutputSchemas` keeps the output schemas a ``tools/list`` answered, compiles each on first use, and
:meth:`OutputSchemas.check` raises :class:`InvalidToolOutput` for a result that breaks its schema (or that has
none of the structured content its schema promises). Without the extra nothing is checked, and that is said
once, at debug level.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from msgspec import UNSET

from ..errors import ProtocolViolation
from . import types as t

__all__ = (
    "OutputSchemas",
    "InvalidToolOutput",
    "schema_problems",
    "schema_validator",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_NODES",
)

logger = logging.getLogger(__name__)

#: At most this many problems are named in one :class:`InvalidToolOutput`.
_PROBLEMS_SHOWN: Final = 5


class InvalidToolOutput(ProtocolViolation):
    """A tool result whose ``structuredContent`` does not match the tool's ``outputSchema``: the server broke the
    spec's MUST. ``result`` is the result as received, ``problems`` says what is wrong (at most five)."""

    def __init__(self, tool: str, problems: Sequence[str], result: t.CallToolResult) -> None:
        super().__init__(f"tool {tool!r} returned a result that does not match its outputSchema: {'; '.join(problems)}")
        self.tool = tool
        self.problems = list(problems)
        self.result = result


class OutputSchemas:
    """The output schemas of one server's tools, as ``tools/list`` described them."""

    def __init__(self) -> None:
        self._schemas: dict[str, dict[str, Any] | None] = {}
        self._validators: dict[str, Any] = {}
        self._engine: Any = None
        self._looked = False

    def available(self) -> bool:
        """Can results be checked (is jsonschema-rs installed)? The first time it is not, say so at debug level."""
        if not self._looked:
            self._looked = True
            try:
                import jsonschema_rs
            except ImportError:
                logger.debug(
                    "tool results are not checked against their outputSchema: "
                    "the validation extra (jsonschema-rs) is not installed"
                )
            else:
                self._engine = jsonschema_rs
        return self._engine is not None

    def knows(self, tool: str) -> bool:
        """Has ``tools/list`` said (or been found not to say) what ``tool`` returns?"""
        return tool in self._schemas

    def learn(self, tools: Iterable[t.Tool]) -> None:
        """Take the output schemas of a complete ``tools/list`` (every page), replacing what was known."""
        self.forget()
        for tool in tools:
            schema = tool.output_schema
            self._schemas[tool.name] = schema if isinstance(schema, dict) else None

    def unlisted(self, tool: str) -> None:
        """``tools/list`` does not name ``tool``: there is nothing to check its results against."""
        self._schemas.setdefault(tool, None)

    def forget(self) -> None:
        """Drop everything (the server's tools changed)."""
        self._schemas.clear()
        self._validators.clear()

    def check(self, tool: str, result: t.CallToolResult) -> None:
        """Raise :class:`InvalidToolOutput` unless ``result`` (not an ``isError`` one) conforms to ``tool``'s
        ``outputSchema``. Tools without one, and every result while jsonschema-rs is missing, pass."""
        if result.is_error is True or not self.available():
            return
        validator = self._validator(tool)
        if validator is None:
            return
        data = result.structured_content
        if data is UNSET:
            raise InvalidToolOutput(
                tool, ["the tool has an outputSchema but the result has no structuredContent"], result
            )
        problems = _problems(validator, data, "structuredContent")
        if problems:
            raise InvalidToolOutput(tool, problems, result)

    def _validator(self, tool: str) -> Any:
        if tool in self._validators:
            return self._validators[tool]
        schema = self._schemas.get(tool)
        validator = None
        if schema is not None:
            try:
                validator = schema_validator(self._engine, schema)
            except Exception as exc:  # the server's schema itself is broken: nothing to check against
                logger.warning(
                    "tool %r has an outputSchema that cannot be compiled (%s); its results are not checked",
                    tool,
                    _first_line(exc),
                )
        self._validators[tool] = validator
        return validator


#: The bounds of a schema this library compiles (a peer's schema must not make a denial of service of the
#: validator): nested at most so deep, and so many objects and arrays in all (docs/spec-decisions.md, 17f).
MAX_SCHEMA_DEPTH: Final = 64
MAX_SCHEMA_NODES: Final = 10_000


def schema_validator(engine: Any, schema: Mapping[str, Any]) -> Any:
    """``engine.validator_for(schema)`` (jsonschema-rs) resolving only the references within the schema: a ``$ref``
    to a network URI is never fetched (2026-07-28 forbids it, and a peer's schema would have us fetch what it likes),
    so such a schema fails to compile. A schema past :data:`MAX_SCHEMA_DEPTH` or :data:`MAX_SCHEMA_NODES` is a
    ``ValueError``, never compiled."""
    _check_bounds(schema)
    return engine.validator_for(schema, retriever=_not_fetched)


def _check_bounds(schema: Any) -> None:
    nodes = 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > MAX_SCHEMA_DEPTH:
            raise ValueError(f"the schema is nested deeper than {MAX_SCHEMA_DEPTH} levels")
        if nodes > MAX_SCHEMA_NODES:
            raise ValueError(f"the schema has more than {MAX_SCHEMA_NODES} objects and arrays")
        children = node.values() if isinstance(node, Mapping) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (Mapping, list)))


def _not_fetched(uri: str) -> Any:
    raise ValueError(f"a $ref to {uri} is not fetched: only references within the schema are resolved")


def schema_problems(schema: Any, data: Any) -> list[str] | None:
    """What is wrong with ``data`` against ``schema`` (at most five problems; ``[]``: nothing), or ``None`` where it
    cannot be checked: jsonschema-rs missing, or a schema that is not one (it does not compile). For schemas used
    once, such as an elicitation's ``requestedSchema``."""
    try:
        import jsonschema_rs
    except ImportError:
        return None
    if not isinstance(schema, Mapping):
        return None
    try:
        validator = schema_validator(jsonschema_rs, schema)
    except Exception as exc:  # the peer's schema itself is broken: nothing to check against
        logger.warning(
            "a requested schema cannot be compiled (%s); the answer is not checked against it", _first_line(exc)
        )
        return None
    return _problems(validator, data, "content")


def _first_line(exc: Exception) -> str:
    """What a schema's compile error says, on one line (jsonschema-rs quotes the schema on the lines after)."""
    return str(exc).partition("\n")[0] or type(exc).__name__


def _problems(validator: Any, data: Any, root: str) -> list[str]:
    """What ``validator`` finds wrong with ``data``, at most :data:`_PROBLEMS_SHOWN`, each at its JSON path (``root``
    for the top)."""
    problems = []
    for error in validator.iter_errors(data):
        path = "/".join(str(part) for part in error.instance_path)
        problems.append(f"{path or root}: {error.message}")
        if len(problems) == _PROBLEMS_SHOWN:
            break
    return problems
