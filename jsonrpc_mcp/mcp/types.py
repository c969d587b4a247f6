"""The MCP data model: params, results and the types inside them, for every revision (L2: msgspec only).

Source of truth: ``schema/<rev>/schema.ts`` of the specification. The Structs cover everything in 2025-11-25
and 2026-07-28, plus what older revisions had and later ones dropped (2025-11-25 tasks, URL-elicitation ids,
``ElicitationCompleteNotification``). JSON-RPC envelopes (``jsonrpc``, ``id``, ``method``) live in
:mod:`jsonrpc_mcp.jsonrpc.wire`; only the 2026-07-28 *input requests* (``{method, params}`` without ``id``)
are modelled here, because they appear inside ``InputRequiredResult``.

Conventions
-----------
* Every Struct derives from :class:`MCPModel`: snake_case attributes, camelCase on the wire
  (``rename="camel"`` gives the spec's names; ``_meta`` and the ``io.modelcontextprotocol/...`` keys are
  spelled with ``msgspec.field(name=...)``). All fields are keyword-only.
* Optional fields default to :data:`msgspec.UNSET`, so *absent*, ``null`` (only where the spec allows it) and
  a value stay distinct. One exception: ``CallToolResult.is_error`` is a bool, ``False`` by default (left off the
  wire, as an unset field is), so that ``result.is_error == False`` holds for a success. Unknown fields are
  ignored on decode and therefore dropped on re-encode.
* Fields that must always be on the wire with a constant value are tags (``type`` of content blocks,
  completion references, elicitation primitives; ``method`` of input requests) or, where the value is a
  field of a shared base, a default on a class with ``omit_defaults=False`` (``ElicitRequestURLParams.mode``,
  ``InputRequiredResult.result_type``). Every other default is ``UNSET``, which msgspec never encodes, so
  ``omit_defaults=False`` emits nothing else. A tag is also a class attribute of the same name, so
  ``block.type == "text"`` tells content blocks apart (and narrows the union for a type checker).
* Schemas (``inputSchema``, ``outputSchema``, ``requestedSchema``) are plain dicts, kept verbatim.
* A revision's required field is optional here when another revision omits it (``resultType``, ``ttlMs``,
  ``cacheScope`` exist only in 2026-07-28; ``elicitationId`` only in 2025-11-25). Which fields a given
  revision may carry is the business of the layers above.

Untagged unions
---------------
msgspec decodes a union of several object types only when they are tagged. Three spec unions have no tag:

* ``TextResourceContents | BlobResourceContents`` (``EmbeddedResource.resource``,
  ``ReadResourceResult.contents``) is decoded as :class:`ResourceContents`, one Struct holding ``uri``,
  ``mimeType``, ``_meta`` and optional ``text`` / ``blob`` (at least one is required).
  :class:`TextResourceContents` and :class:`BlobResourceContents` are its subclasses with ``text`` / ``blob``
  required: build with them (they fit every field typed ``ResourceContents``);
  :meth:`ResourceContents.narrow` turns a decoded value into one of them.
* ``ElicitRequestFormParams | ElicitRequestURLParams`` (``mode`` is optional on the form variant) is decoded
  as :class:`ElicitRequestParams`, the superset, with the same subclass-and-``narrow()`` arrangement.
* ``InputResponse`` (``CreateMessageResult | ListRootsResult | ElicitResult``): ``inputResponses`` values stay
  plain ``dict``s; the server knows which type it asked for under each key and converts with :func:`convert`.
  Likewise ``PrimitiveSchemaDefinition`` is exported for annotations only (``requestedSchema`` is a dict).
  A result that may be ``InputRequiredResult`` or the method's own result is told apart by ``resultType``
  before it is decoded.

Created on first use
--------------------
What a server does not need to answer ``initialize``, ``tools/list`` and ``tools/call`` lives in ``_types_lazy``
and is created the first time one of these names is looked up here: request and notification params (the server
decodes its own lean Structs), the ``_meta`` views, capabilities, ``Implementation`` and the initialize/discover
types (it builds those answers as dicts), resource and prompt types (created with the first resource or prompt
registered), sampling, roots, elicitation and the input requests (the client side and
:class:`~jsonrpc_mcp.Context`'s requests), tasks, completion, ``subscriptions/listen``, logging, error data: 98
Structs and 12 aliases: the names of ``__all__`` this module does not define itself (:data:`_LAZY`). They are
this module's names all the same (``__module__``, ``__all__``, ``from ... import``). Importing this module
creates 24 Structs; the rest costs nothing until it is used.
"""

from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, Self, TypeAlias, TypeVar, dataclass_transform, overload

import msgspec
from msgspec import UNSET, UnsetType

__all__ = (
    # versions and scalar aliases
    "LATEST_PROTOCOL_VERSION",
    "LEGACY_PROTOCOL_VERSIONS",
    "RequestId",
    "ProgressToken",
    "Cursor",
    "Role",
    "LoggingLevel",
    "ResultType",
    "CacheScope",
    "TaskStatus",
    "IncludeContext",
    "StopReason",
    "ElicitAction",
    # base
    "MCPModel",
    "RequestMetaObject",
    "NotificationMetaObject",
    "ResultMetaObject",
    "SubscriptionsListenResultMetaObject",
    "RequestParams",
    "TaskAugmentedRequestParams",
    "InputResponseRequestParams",
    "NotificationParams",
    "Result",
    "EmptyResult",
    # cancellation, progress
    "CancelledNotificationParams",
    "ProgressNotificationParams",
    # capabilities, identity, lifecycle, discovery
    "RootsCapability",
    "SamplingCapability",
    "ElicitationCapability",
    "ClientTasksCapability",
    "ClientCapabilities",
    "PromptsCapability",
    "ResourcesCapability",
    "ToolsCapability",
    "ServerTasksCapability",
    "ServerCapabilities",
    "Icon",
    "BaseMetadata",
    "Implementation",
    "InitializeRequestParams",
    "InitializeResult",
    "DiscoverResult",
    # pagination, caching
    "PaginatedRequestParams",
    "PaginatedResult",
    "CacheableResult",
    # content
    "Annotations",
    "TextContent",
    "ImageContent",
    "AudioContent",
    "ResourceLink",
    "EmbeddedResource",
    "ToolUseContent",
    "ToolResultContent",
    "ContentBlock",
    "SamplingContent",
    "SamplingMessageContentBlock",
    # resources, subscriptions
    "Resource",
    "ResourceTemplate",
    "ResourceContents",
    "TextResourceContents",
    "BlobResourceContents",
    "ListResourcesResult",
    "ListResourceTemplatesResult",
    "ResourceRequestParams",
    "ReadResourceRequestParams",
    "ReadResourceResult",
    "SubscribeRequestParams",
    "UnsubscribeRequestParams",
    "ResourceUpdatedNotificationParams",
    "SubscriptionFilter",
    "SubscriptionsListenRequestParams",
    "SubscriptionsListenResult",
    "SubscriptionsAcknowledgedNotificationParams",
    # prompts
    "PromptArgument",
    "Prompt",
    "PromptMessage",
    "ListPromptsResult",
    "GetPromptRequestParams",
    "GetPromptResult",
    # tools
    "ToolAnnotations",
    "ToolExecution",
    "Tool",
    "ListToolsResult",
    "CallToolRequestParams",
    "CallToolResult",
    # tasks (2025-11-25)
    "TaskMetadata",
    "RelatedTaskMetadata",
    "Task",
    "CreateTaskResult",
    "GetTaskRequestParams",
    "GetTaskResult",
    "GetTaskPayloadRequestParams",
    "GetTaskPayloadResult",
    "CancelTaskRequestParams",
    "CancelTaskResult",
    "ListTasksResult",
    "TaskStatusNotificationParams",
    # logging
    "SetLevelRequestParams",
    "LoggingMessageNotificationParams",
    # sampling
    "ModelHint",
    "ModelPreferences",
    "ToolChoice",
    "SamplingMessage",
    "CreateMessageRequestParams",
    "CreateMessageResult",
    # completion
    "PromptReference",
    "ResourceTemplateReference",
    "ResourceReference",
    "CompletionReference",
    "CompletionArgument",
    "CompletionContext",
    "CompleteRequestParams",
    "Completion",
    "CompleteResult",
    # roots
    "Root",
    "ListRootsResult",
    # elicitation
    "StringSchema",
    "NumberSchema",
    "BooleanSchema",
    "EnumOption",
    "UntitledSingleSelectEnumSchema",
    "TitledSingleSelectEnumSchema",
    "UntitledEnumItems",
    "TitledEnumItems",
    "UntitledMultiSelectEnumSchema",
    "TitledMultiSelectEnumSchema",
    "LegacyTitledEnumSchema",
    "SingleSelectEnumSchema",
    "MultiSelectEnumSchema",
    "EnumSchema",
    "PrimitiveSchemaDefinition",
    "ElicitRequestParams",
    "ElicitRequestFormParams",
    "ElicitRequestURLParams",
    "ElicitResult",
    "ElicitationCompleteNotificationParams",
    # multi round-trip (2026-07-28)
    "CreateMessageRequest",
    "ListRootsRequest",
    "ElicitRequest",
    "InputRequest",
    "InputRequests",
    "InputResponse",
    "InputResponses",
    "InputRequiredResult",
    # error data
    "UnsupportedProtocolVersionErrorData",
    "MissingRequiredClientCapabilityErrorData",
    "URLElicitationRequiredErrorData",
    # helpers
    "to_builtins",
    "convert",
)

# --- Versions and scalar aliases -------------------------------------------------------------------------

LATEST_PROTOCOL_VERSION: Final = "2026-07-28"
LEGACY_PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

RequestId: TypeAlias = str | int
ProgressToken: TypeAlias = str | int
Cursor: TypeAlias = str
Role: TypeAlias = Literal["user", "assistant"]
LoggingLevel: TypeAlias = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
ResultType: TypeAlias = str
"""``"complete"``, ``"input_required"`` or an extension's value (2026-07-28); absent means complete."""
CacheScope: TypeAlias = Literal["public", "private"]
TaskStatus: TypeAlias = Literal["working", "input_required", "completed", "failed", "cancelled"]
IncludeContext: TypeAlias = Literal["none", "thisServer", "allServers"]
StopReason: TypeAlias = str
"""``"endTurn"``, ``"stopSequence"``, ``"maxTokens"``, ``"toolUse"`` or any provider-specific string."""
ElicitAction: TypeAlias = Literal["accept", "decline", "cancel"]

Meta: TypeAlias = dict[str, Any]
JSONObject: TypeAlias = dict[str, Any]


# --- Base types ------------------------------------------------------------------------------------------


@dataclass_transform(field_specifiers=(msgspec.field,), kw_only_default=True)
class MCPModel(
    msgspec.Struct,
    kw_only=True,
    omit_defaults=True,
    rename="camel",
    repr_omit_defaults=True,
):
    """Base of every MCP Struct: keyword-only fields, camelCase on the wire, unset optional fields left out.

    msgspec applies ``kw_only`` only to the fields a class defines itself, so every subclass says
    ``kw_only=True`` too (a test checks it). A metaclass could supply it, but a class whose metaclass is defined
    in Python loses msgspec's fast constructor call: each instance would cost ~2.5x as much to create."""


class RequestParams(MCPModel, kw_only=True):
    """Params every request may carry (2026-07-28 requires ``_meta`` with the protocol keys)."""

    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


class NotificationParams(MCPModel, kw_only=True):
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


class Result(MCPModel, kw_only=True):
    """Base of every result. ``result_type`` is required on 2026-07-28 wires and absent on older ones."""

    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")
    result_type: ResultType | UnsetType = UNSET


EmptyResult: TypeAlias = Result

# --- Identity (Implementation, capabilities, initialize and discover are in _types_lazy) ----------------


class Icon(MCPModel, kw_only=True):
    src: str
    mime_type: str | UnsetType = UNSET
    sizes: list[str] | UnsetType = UNSET
    theme: Literal["light", "dark"] | UnsetType = UNSET


class BaseMetadata(MCPModel, kw_only=True):
    """``name`` identifies (programmatic), ``title`` displays (falls back to ``name``)."""

    name: str
    title: str | UnsetType = UNSET


# --- Pagination and caching ------------------------------------------------------------------------------


class PaginatedResult(Result, kw_only=True):
    next_cursor: Cursor | UnsetType = UNSET


class CacheableResult(Result, kw_only=True):
    """2026-07-28 caching hints, required on list results, ``resources/read`` and ``server/discover``."""

    ttl_ms: int | UnsetType = UNSET
    cache_scope: CacheScope | UnsetType = UNSET


class _PaginatedCacheableResult(PaginatedResult, kw_only=True):
    # PaginatedResult & CacheableResult: msgspec Structs with fields cannot inherit from two bases.
    ttl_ms: int | UnsetType = UNSET
    cache_scope: CacheScope | UnsetType = UNSET


# --- Content -------------------------------------------------------------------------------------------


class Annotations(MCPModel, kw_only=True):
    audience: list[Role] | UnsetType = UNSET
    priority: float | UnsetType = UNSET
    last_modified: str | UnsetType = UNSET


class TextContent(MCPModel, tag_field="type", tag="text", kw_only=True):
    type: ClassVar[Literal["text"]] = "text"
    text: str
    annotations: Annotations | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


#: A MIME type: ``type/subtype`` of RFC 6838's restricted names (parameters after ``;`` allowed).
_MIME_TYPE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(;.*)?$")


def _base64_of(data: bytes, mime_type: str) -> str:
    """``data`` base64-encoded, once ``mime_type`` is checked to be one (else ``ValueError``): the spec's "MUST be
    base64-encoded and include a valid MIME type" for images, audio and blobs."""
    if not isinstance(mime_type, str) or not _MIME_TYPE.match(mime_type):
        raise ValueError(f"not a MIME type (type/subtype, such as image/png): {mime_type!r}")
    return base64.b64encode(bytes(data)).decode("ascii")


class ImageContent(MCPModel, tag_field="type", tag="image", kw_only=True):
    type: ClassVar[Literal["image"]] = "image"
    data: str
    mime_type: str
    annotations: Annotations | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")

    @classmethod
    def from_bytes(cls, data: bytes, mime_type: str) -> Self:
        """An image of these bytes, base64-encoded, with its MIME type (checked: ``ValueError`` if it is none)."""
        return cls(data=_base64_of(data, mime_type), mime_type=mime_type)


class AudioContent(MCPModel, tag_field="type", tag="audio", kw_only=True):
    type: ClassVar[Literal["audio"]] = "audio"
    data: str
    mime_type: str
    annotations: Annotations | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")

    @classmethod
    def from_bytes(cls, data: bytes, mime_type: str) -> Self:
        """Audio of these bytes, base64-encoded, with its MIME type (checked: ``ValueError`` if it is none)."""
        return cls(data=_base64_of(data, mime_type), mime_type=mime_type)


class Resource(BaseMetadata, kw_only=True):
    uri: str
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    size: int | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ResourceLink(Resource, tag_field="type", tag="resource_link", kw_only=True):
    """A resource the client may read; it need not appear in ``resources/list``."""

    type: ClassVar[Literal["resource_link"]] = "resource_link"


class ResourceContents(MCPModel, kw_only=True):
    """Either kind of resource contents, as decoded: ``text`` or ``blob`` (base64) is set, at least one.

    The spec's union ``TextResourceContents | BlobResourceContents`` has no tag, so this superset is what
    decodes; build with the two subclasses, or narrow a decoded value with :meth:`narrow`.
    """

    uri: str
    mime_type: str | UnsetType = UNSET
    text: str | UnsetType = UNSET
    blob: str | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")

    def __post_init__(self) -> None:
        if self.text is UNSET and self.blob is UNSET:
            raise ValueError("resource contents need `text` or `blob`")

    def narrow(self) -> TextResourceContents | BlobResourceContents:
        """The spec-named variant of these contents (text wins if a peer sent both)."""
        if isinstance(self, TextResourceContents | BlobResourceContents):
            return self
        if isinstance(self.text, str):
            return TextResourceContents(uri=self.uri, mime_type=self.mime_type, text=self.text, meta=self.meta)
        assert isinstance(self.blob, str)
        return BlobResourceContents(uri=self.uri, mime_type=self.mime_type, blob=self.blob, meta=self.meta)


class TextResourceContents(ResourceContents, kw_only=True):
    text: str


class BlobResourceContents(ResourceContents, kw_only=True):
    blob: str

    @classmethod
    def from_bytes(cls, uri: str, data: bytes, mime_type: str) -> Self:
        """The contents of resource ``uri``: these bytes, base64-encoded, with their MIME type (checked)."""
        return cls(uri=uri, blob=_base64_of(data, mime_type), mime_type=mime_type)


class EmbeddedResource(MCPModel, tag_field="type", tag="resource", kw_only=True):
    type: ClassVar[Literal["resource"]] = "resource"
    resource: ResourceContents
    annotations: Annotations | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


ContentBlock: TypeAlias = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource

# --- Tools (the resource, prompt and request params types are in _types_lazy) -------------------------


class ToolAnnotations(MCPModel, kw_only=True):
    """Hints only; untrusted unless the server is. Spec defaults: read-only false, destructive true,
    idempotent false, open-world true."""

    title: str | UnsetType = UNSET
    read_only_hint: bool | UnsetType = UNSET
    destructive_hint: bool | UnsetType = UNSET
    idempotent_hint: bool | UnsetType = UNSET
    open_world_hint: bool | UnsetType = UNSET


class ToolExecution(MCPModel, kw_only=True):
    """2025-11-25 only (tasks left the core in 2026-07-28)."""

    task_support: Literal["forbidden", "optional", "required"] | UnsetType = UNSET


class Tool(BaseMetadata, kw_only=True):
    """``input_schema`` / ``output_schema`` are kept verbatim (2026-07-28: any JSON Schema 2020-12 keyword,
    ``x-mcp-header`` annotations inside property schemas)."""

    description: str | UnsetType = UNSET
    input_schema: JSONObject
    output_schema: JSONObject | UnsetType = UNSET
    annotations: ToolAnnotations | UnsetType = UNSET
    execution: ToolExecution | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ListToolsResult(_PaginatedCacheableResult, kw_only=True):
    tools: list[Tool]


class CallToolResult(Result, kw_only=True):
    """``content`` is required even with ``structured_content`` (any JSON value in 2026-07-28, an object
    before). ``is_error`` is a bool, ``False`` unless the tool failed; ``isError`` is on the wire only when true
    (an absent ``isError`` and ``false`` read the same, so a decoded ``false`` is not sent on again)."""

    content: list[ContentBlock]
    structured_content: Any | UnsetType = UNSET
    is_error: bool = False


# --- Created on first use (see the module docstring) --------------------------------------------------


if TYPE_CHECKING:  # (the names ``_types_lazy`` creates, for type checkers; at run time see ``__getattr__``)
    from ._types_lazy import *  # noqa: F403


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt `t.Name` is still an error

    def __getattr__(name: str) -> Any:
        if name in _LAZY:
            from . import _types_lazy  # noqa: F401 - it puts its names into this module

            return globals()[name]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)


# --- Helpers -------------------------------------------------------------------------------------------

T = TypeVar("T")


def to_builtins(obj: Any) -> Any:
    """``obj`` as dicts/lists/scalars with wire names; unset fields left out."""
    return msgspec.to_builtins(obj)


@overload
def convert(data: Any, type: type[T]) -> T: ...
@overload
def convert(data: Any, type: Any) -> Any: ...
def convert(data: Any, type: Any) -> Any:
    """Validate builtins (keys as on the wire) into ``type``; raises :class:`msgspec.ValidationError`."""
    return msgspec.convert(data, type, from_attributes=False)


#: The names of ``__all__`` this module does not define: ``_types_lazy`` creates them on first use.
_LAZY: Final = frozenset(name for name in __all__ if name not in globals())
