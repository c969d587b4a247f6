"""Pydantic models as tool parameters and results, without pydantic as a dependency (L2: pure functions).

msgspec describes and validates Structs, dataclasses, TypedDicts, enums and the builtin types itself. A type it
does not know reaches the hooks here: a pydantic model gets its schema from pydantic (``model_json_schema``) and
is validated by pydantic (``model_validate``) and serialised by it (``model_dump(mode="json")``); any other
type is refused at registration with a one-line :class:`UnsupportedAnnotation` naming the tool and the kinds
that are supported.

This module never imports pydantic: a class can only be a pydantic model if the module that defines it has
imported pydantic already, so it is looked up in :data:`sys.modules`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Final, Literal, get_args

__all__ = (
    "UnsupportedAnnotation",
    "SUPPORTED_KINDS",
    "is_pydantic_model",
    "SchemaDefinitions",
    "dec_hook",
    "enc_hook",
    "unsupported",
)

SchemaMode = Literal["validation", "serialization"]

#: What a tool's parameters and return value may be annotated with (for the registration error).
SUPPORTED_KINDS: Final = (
    "str, int, float, bool, None, bytes, list/tuple/set/dict, Literal, Enum, Union, datetime/date/time, UUID, "
    "Decimal, msgspec.Struct, dataclasses, TypedDict, NamedTuple, attrs classes, and pydantic models"
)


class UnsupportedAnnotation(TypeError):
    """A parameter or return annotation that no JSON Schema can describe (raised at registration)."""

    def __init__(self, kind: Any) -> None:
        super().__init__(f"{_type_name(kind)} has no JSON Schema")
        self.kind = kind


def is_pydantic_model(kind: Any) -> bool:
    """True if ``kind`` is a pydantic ``BaseModel`` subclass (False whenever pydantic was never imported)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(kind, type) and issubclass(kind, pydantic.BaseModel)


class SchemaDefinitions:
    """The ``schema_hook`` of one ``msgspec.json.schema_components`` call: a pydantic model becomes a ``$ref``
    into ``$defs``, and its schema (with the models it nests) is kept in :attr:`defs` to merge into the
    document's own ``$defs`` (pydantic's references point at the root, as msgspec's do)."""

    def __init__(self, mode: SchemaMode = "validation") -> None:
        self.mode = mode
        self.defs: dict[str, Any] = {}

    def __call__(self, kind: Any) -> dict[str, Any]:
        if not is_pydantic_model(kind):
            raise UnsupportedAnnotation(kind)
        schema = dict(kind.model_json_schema(ref_template="#/$defs/{model}", mode=self.mode))
        self.defs.update(schema.pop("$defs", {}))
        ref = schema.get("$ref")
        if isinstance(ref, str) and len(schema) == 1:  # a model that refers to itself is a definition already
            return {"$ref": ref}
        self.defs[kind.__name__] = schema
        return {"$ref": f"#/$defs/{kind.__name__}"}

    def merge_into(self, components: dict[str, Any]) -> None:
        """Add the pydantic definitions to msgspec's; two different definitions under one name are an error."""
        for name, schema in self.defs.items():
            if name in components and components[name] != schema:
                raise TypeError(f"two types named {name!r} would share one schema definition: rename one of them")
            components[name] = schema


def dec_hook(kind: Any, value: Any) -> Any:
    """msgspec's ``dec_hook``: validate a decoded value as a pydantic model (errors name the field that failed)."""
    if not is_pydantic_model(kind):
        raise TypeError(f"cannot convert to {_type_name(kind)}")
    pydantic = sys.modules["pydantic"]
    try:
        return kind.model_validate(value)
    except pydantic.ValidationError as exc:
        raise ValueError(_describe(exc)) from None


def enc_hook(value: Any) -> Any:
    """msgspec's ``enc_hook``: a pydantic model instance as JSON-ready builtins (by alias, as its schema says)."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    raise NotImplementedError(f"Encoding objects of type {type(value).__name__} is unsupported")


def unsupported(tool: str, exc: UnsupportedAnnotation, fields: Sequence[tuple[Any, ...]] = ()) -> TypeError:
    """The one-line registration error for ``exc``: the tool, the parameter (among ``fields``, the ``(name,
    annotation, ...)`` tuples of its arguments; none given: the return annotation), what is supported."""
    where = "the return annotation"
    if fields:
        named = [field[0] for field in fields if _mentions(field[1], exc.kind)]
        where = f"parameter {named[0]!r}" if named else "a parameter"
    return TypeError(
        f"tool {tool!r}: {where} is {_type_name(exc.kind)}, which has no JSON Schema; supported: {SUPPORTED_KINDS}"
    )


def _mentions(annotation: Any, kind: Any) -> bool:
    if annotation is kind:
        return True
    return any(_mentions(arg, kind) for arg in get_args(annotation))


def _type_name(kind: Any) -> str:
    if isinstance(kind, type):
        module = kind.__module__
        return kind.__qualname__ if module in ("builtins", "__main__") else f"{module}.{kind.__qualname__}"
    return repr(kind)


def _describe(exc: Any) -> str:
    """A pydantic ValidationError on one line: ``city: Field required; days: Input should be a valid integer``."""
    problems = []
    for error in exc.errors(include_url=False)[:5]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        message = error.get("msg", "invalid")
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems) or str(exc).splitlines()[0]
