"""The payloads every presented tool result carries: one envelope, a ``kind`` discriminator with a version (L7).

A payload is a :class:`msgspec.Struct` tagged on ``kind`` (``"entrySearchResults:v1"``). Its envelope fields are
the same for every kind:

``status``     ``ok`` | ``error`` | ``info`` | ``warn``
``summary``    one line for people, at most 80 characters
``details``    an object of structured specifics (optional)
``nextSteps``  what to do next, as short sentences (every error and needs-input has one)
``truncated``  true when this payload leaves out items of its list to stay under the size limit of structured
               data; ``omitted`` then names them (the list and each item's id). Values are never altered: an
               item is there whole or not at all. The ~2,000-character budget is the markdown preview's only.
``fullResult`` the URI of a resource that returns the whole result (every item, a page at a time), when the
               tool has one
``tokenUsage`` ``rateLimit``  optional hints for hosts that surface them

Kind-specific fields sit beside them at the top level. Two kinds are shared by every tool: :class:`NeedsInput`
(``needsInput:v1``) and :class:`ToolErrorPayload` (``toolError:v1``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Final, Literal, Union, dataclass_transform

import msgspec
from msgspec import UNSET, UnsetType

from ..mcp.signature import schema_for

__all__ = (
    "Status",
    "Format",
    "FORMATS",
    "SUMMARY_MAX",
    "TokenUsage",
    "RateLimit",
    "Payload",
    "Omitted",
    "InputField",
    "InputOption",
    "NeedsInput",
    "ErrorCode",
    "ToolErrorPayload",
    "RETRYABLE_BY_DEFAULT",
    "DEFAULT_NEXT_STEPS",
    "tool_error",
    "fit_summary",
    "output_schema",
    "kind_of",
)

Status = Literal["ok", "error", "info", "warn"]
Format = Literal["markdown", "json", "both"]
FORMATS: Final = ("markdown", "json", "both")
SUMMARY_MAX: Final = 80
_LABELS: Final = {"ok": "OK", "info": "Info", "warn": "Warning", "error": "Error"}


class _WireMeta(msgspec.StructMeta):
    # msgspec applies ``kw_only`` only to the fields a class defines itself; kinds add required fields after the
    # envelope's optional ones, so every subclass needs it.
    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], /, **kwargs: Any) -> _WireMeta:
        kwargs.setdefault("kw_only", True)
        return super().__new__(mcls, name, bases, namespace, **kwargs)


@dataclass_transform(field_specifiers=(msgspec.field,), kw_only_default=True)
class _Wire(msgspec.Struct, metaclass=_WireMeta, kw_only=True, rename="camel"):
    """Keyword-only fields (in subclasses too), camelCase on the wire; UNSET optional fields are left out."""


class TokenUsage(_Wire):
    """Token counts for hosts that show or budget them; ``estimated`` when counted as characters / 4."""

    input_tokens: int | UnsetType = UNSET
    output_tokens: int | UnsetType = UNSET
    total_tokens: int | UnsetType = UNSET
    estimated: bool = False


class RateLimit(_Wire):
    """Rate-limit state: how many calls are left and when to come back (``retryAfterMs`` guides retries)."""

    limit: int | UnsetType = UNSET
    remaining: int | UnsetType = UNSET
    reset_at: str | UnsetType = UNSET
    retry_after_ms: int | UnsetType = UNSET


class Omitted(_Wire):
    """What a truncated payload left out: the list (``field``) and the id of each item left out, in order (its
    position in the list when the item has no ``id``)."""

    field: str
    ids: list[Any]


class Payload(_Wire, tag_field="kind"):
    """The envelope. Subclass it with ``tag="yourKind:v1"`` and add the kind's fields.

    Name the kind's list in ``trim_field``: when the structured data is over its size limit, whole items are left
    out from its end (:meth:`keep_first`, ``truncated``, ``omitted``); when the markdown is over its budget, the
    preview shows fewer (:meth:`shrink`). Override :meth:`markdown` to render the kind's body for people, and
    :meth:`keep_first` when other fields depend on the list.
    """

    status: Status = "ok"
    summary: Annotated[str, msgspec.Meta(max_length=SUMMARY_MAX)]
    details: dict[str, Any] | UnsetType = UNSET
    next_steps: list[str] = msgspec.field(default_factory=list)
    truncated: bool = False
    omitted: Omitted | UnsetType = UNSET
    full_result: str | UnsetType = UNSET
    token_usage: TokenUsage | UnsetType = UNSET
    rate_limit: RateLimit | UnsetType = UNSET

    #: A result of this kind is a failure (``isError: true``).
    is_error: ClassVar[bool] = False
    #: The list whose items may be left out (``None``: nothing to cut).
    trim_field: ClassVar[str | None] = None

    def label(self) -> str:
        """The headline's label: ``OK``, ``Info``, ``Warning``, ``Error``."""
        return _LABELS[self.status]

    def markdown(self) -> str:
        """The body under the headline, for people (markdown). The default lists ``details``."""
        if not isinstance(self.details, dict) or not self.details:
            return ""
        return "\n".join(f"- **{k}**: {_inline(v)}" for k, v in self.details.items())

    def trim_items(self) -> list[Any]:
        """The items of ``trim_field`` (empty without one)."""
        items = getattr(self, self.trim_field) if self.trim_field is not None else None
        return items if isinstance(items, list) else []

    def keep_first(self, count: int) -> Payload:
        """This payload with only the first ``count`` items of ``trim_field``; override to cut what depends on
        them too (never to alter the items kept)."""
        if self.trim_field is None:
            return self
        return msgspec.structs.replace(self, **{self.trim_field: self.trim_items()[:count]})

    def item_id(self, item: Any, position: int) -> Any:
        """How ``omitted`` names a left-out item: its ``id``, else its position in the list."""
        ident = getattr(item, "id", None)
        return ident if ident is not None else position

    def shrink(self) -> Payload | None:
        """A smaller payload for the markdown preview, or ``None`` when nothing more can go. The default keeps
        all but the last quarter of the items of ``trim_field`` (at least one goes)."""
        items = self.trim_items()
        if not items:
            return None
        return self.keep_first(len(items) - max(1, len(items) // 4))


def _inline(value: Any) -> str:
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


# --- needs input --------------------------------------------------------------------------------------------


class InputField(_Wire):
    """One value the tool needs. ``type`` is a JSON Schema primitive; ``options`` (if any) are the allowed
    values; ``suggestions`` are likely good values (e.g. the nearest existing ids)."""

    name: str
    type: Literal["string", "integer", "number", "boolean"] = "string"
    description: str | UnsetType = UNSET
    required: bool = True
    options: list[str] | UnsetType = UNSET
    suggestions: list[Any] = msgspec.field(default_factory=list)


class InputOption(_Wire):
    """A ready-made alternative: call ``tool`` with ``arguments``."""

    label: str
    tool: str | UnsetType = UNSET
    arguments: dict[str, Any] | UnsetType = UNSET


class NeedsInput(Payload, tag="needsInput:v1"):
    """The tool cannot go on without more input: which ``fields``, why (``reason``), and ``options``. Without
    ``next_steps`` of its own it gets one saying to call again with the fields."""

    status: Status = "info"
    reason: str
    fields: list[InputField]
    options: list[InputOption] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.next_steps:
            pick = ", or use one of the options" if self.options else ""
            self.next_steps = [f"Call the tool again with the fields listed{pick}."]

    def label(self) -> str:
        return "Needs input"

    def markdown(self) -> str:
        lines = [self.reason, ""]
        for f in self.fields:
            label = f"- `{f.name}` ({f.type}{'' if f.required else ', optional'})"
            if isinstance(f.description, str):
                label += f": {f.description}"
            lines.append(label)
            if isinstance(f.options, list) and f.options:
                lines.append(f"  - one of: {', '.join(f.options)}")
            if f.suggestions:
                lines.append(f"  - suggestions: {', '.join(_inline(s) for s in f.suggestions)}")
        if self.options:
            lines += ["", "**Options**"]
            lines += [f"- {o.label}" for o in self.options]
        return "\n".join(lines).strip()

    def suggestions_for(self, name: str) -> list[Any]:
        return next((f.suggestions for f in self.fields if f.name == name), [])


# --- tool errors --------------------------------------------------------------------------------------------


class ErrorCode(StrEnum):
    """Stable tool-error codes: programs branch on these, never on messages."""

    NOT_FOUND = "NOT_FOUND"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    CONFLICT = "CONFLICT"
    RATE_LIMITED = "RATE_LIMITED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    TIMEOUT = "TIMEOUT"
    DEPENDENCY_ERROR = "DEPENDENCY_ERROR"
    INTERNAL_ERROR = "INTERNAL_ERROR"


#: Codes whose failures are worth retrying unless the tool says otherwise.
RETRYABLE_BY_DEFAULT: Final = frozenset({ErrorCode.RATE_LIMITED, ErrorCode.TIMEOUT, ErrorCode.DEPENDENCY_ERROR})

#: The next step of a failure whose tool named none: every error says what to do about it.
DEFAULT_NEXT_STEPS: Final = {
    ErrorCode.NOT_FOUND: "Check the id or name (search or list to find it) and call again.",
    ErrorCode.VALIDATION_ERROR: "Fix the arguments as the message says and call again.",
    ErrorCode.CONFLICT: "Read the current state again, then retry.",
    ErrorCode.RATE_LIMITED: "Wait (rateLimit.retryAfterMs says how long, when given) and call again.",
    ErrorCode.PERMISSION_DENIED: "Ask for access: the same call will fail the same way.",
    ErrorCode.TIMEOUT: "Try again, perhaps with a smaller request.",
    ErrorCode.DEPENDENCY_ERROR: "Try again later: a service the tool relies on failed.",
    ErrorCode.INTERNAL_ERROR: "Try again; if it keeps failing, tell the server's operator.",
}


class ToolErrorPayload(Payload, tag="toolError:v1"):
    """A tool failure as data: a stable ``code``, a safe ``message``, whether a retry may succeed."""

    status: Status = "error"
    code: ErrorCode
    message: str
    retryable: bool = False

    is_error: ClassVar[bool] = True

    def label(self) -> str:
        return f"Error {self.code.value}"

    def markdown(self) -> str:
        body = self.message if self.message != self.summary else ""
        if self.retryable:
            body = (body + "\n\n" if body else "") + "_This may succeed if retried._"
        details = Payload.markdown(self)
        return "\n\n".join(part for part in (body, details) if part)


def fit_summary(text: str) -> str:
    """One line of at most 80 characters (cut with an ellipsis)."""
    line = " ".join(text.split())
    return line if len(line) <= SUMMARY_MAX else line[: SUMMARY_MAX - 1].rstrip() + "…"


def tool_error(
    code: ErrorCode | str,
    message: str,
    *,
    retryable: bool | None = None,
    details: Mapping[str, Any] | None = None,
    next_steps: Sequence[str] = (),
    summary: str | None = None,
) -> ToolErrorPayload:
    """A ``toolError:v1`` payload; ``retryable`` defaults by code (:data:`RETRYABLE_BY_DEFAULT`), and so does the
    next step when none is given (:data:`DEFAULT_NEXT_STEPS`)."""
    kind = ErrorCode(code)
    return ToolErrorPayload(
        code=kind,
        message=message,
        retryable=(kind in RETRYABLE_BY_DEFAULT) if retryable is None else retryable,
        summary=fit_summary(summary or message),
        details=dict(details) if details else UNSET,
        next_steps=list(next_steps) or [DEFAULT_NEXT_STEPS[kind]],
    )


# --- schemas ------------------------------------------------------------------------------------------------


def output_schema(*kinds: type[Payload]) -> dict[str, Any]:
    """The ``outputSchema`` of a tool answering with ``kinds`` (plus ``needsInput:v1`` and ``toolError:v1``).

    The root is an object (2025-06-18 requires it) with one ``anyOf`` branch per kind, each pinning its
    ``kind`` constant. A field that is always emitted (required, or with a default other than UNSET in a Struct
    that does not omit defaults) is required in the schema, in nested records too.
    """
    every = tuple(dict.fromkeys((*kinds, NeedsInput, ToolErrorPayload)))
    union: Any = every[0] if len(every) == 1 else Union[every]  # noqa: UP007 - a runtime union of a tuple
    schema = schema_for(union)
    structs: dict[str, msgspec.inspect.StructType] = {}
    _collect(msgspec.inspect.type_info(union), structs)
    for name, definition in schema.get("$defs", {}).items():
        info = structs.get(name)
        if info is None or definition.get("type") != "object":
            continue
        keeps = not info.cls.__struct_config__.omit_defaults
        emitted = [f for f in info.fields if f.required or (keeps and _has_default(f))]
        always = {f.encode_name for f in emitted}
        if info.tag_field:
            always.add(info.tag_field)
        definition["required"] = sorted(always)
    schema.pop("discriminator", None)
    return {"type": "object", **schema}


def _has_default(f: msgspec.inspect.Field) -> bool:
    """A real default (an UNSET default shows as none at all: such a field is left out when unset)."""
    return f.default is not msgspec.NODEFAULT or f.default_factory is not msgspec.NODEFAULT


def _collect(node: msgspec.inspect.Type, found: dict[str, msgspec.inspect.StructType]) -> None:
    if isinstance(node, msgspec.inspect.StructType):
        if node.cls.__name__ in found:
            return
        found[node.cls.__name__] = node
        children = [f.type for f in node.fields]
    elif isinstance(node, msgspec.inspect.UnionType):
        children = list(node.types)
    elif isinstance(node, (msgspec.inspect.ListType, msgspec.inspect.SetType, msgspec.inspect.VarTupleType)):
        children = [node.item_type]
    elif isinstance(node, msgspec.inspect.DictType):
        children = [node.value_type]
    else:
        return
    for child in children:
        _collect(child, found)


def kind_of(payload: Payload | type[Payload]) -> str:
    """The ``kind`` tag of a payload class or instance (``"needsInput:v1"``)."""
    cls = payload if isinstance(payload, type) else type(payload)
    tag = cls.__struct_config__.tag
    if not isinstance(tag, str):
        raise TypeError(f"{cls.__name__} has no kind tag")
    return tag
