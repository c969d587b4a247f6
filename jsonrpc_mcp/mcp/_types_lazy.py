"""The MCP types a server does not need to start, created on first use (L2: msgspec only).

Part of :mod:`jsonrpc_mcp.mcp.types` and only reached through it: the first access to one of these names there
(``t.Task``, ``from jsonrpc_mcp.mcp.types import StringSchema``) imports this module, which puts every class and
alias below into that module and makes it their ``__module__`` (so annotations resolve, reprs and pickles name
``types``). A server answering ``initialize``, ``tools/list`` and ``tools/call`` never looks them up, and does not
create these 98 Structs: most of what importing ``types`` used to cost. See the ``types`` docstring.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from . import types as _types
from .types import (
    Annotations,
    AudioContent,
    BaseMetadata,
    CacheableResult,
    ContentBlock,
    Cursor,
    ElicitAction,
    Icon,
    ImageContent,
    IncludeContext,
    JSONObject,
    LoggingLevel,
    MCPModel,
    Meta,
    NotificationParams,
    PaginatedResult,
    ProgressToken,
    RequestId,
    RequestParams,
    Resource,
    ResourceContents,
    Result,
    ResultType,
    Role,
    StopReason,
    TaskStatus,
    TextContent,
    Tool,
    _PaginatedCacheableResult,
)

# --- Request and notification params (the server decodes its own lean Structs) -------------------------


class TaskMetadata(MCPModel, kw_only=True):
    """``params.task``: run the request as a task, kept ``ttl`` ms after creation."""

    ttl: int | UnsetType = UNSET


class TaskAugmentedRequestParams(RequestParams, kw_only=True):
    """2025-11-25: a request that may ask to run as a task."""

    task: TaskMetadata | UnsetType = UNSET


class InputResponseRequestParams(RequestParams, kw_only=True):
    """2026-07-28: a retried request carrying the client's answers and the server's opaque state.

    ``input_responses`` values are plain dicts (see the module docstring); convert each with the type that
    was requested under its key.
    """

    input_responses: dict[str, Any] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET


class CancelledNotificationParams(NotificationParams, kw_only=True):
    """``request_id`` is optional in 2025-11-25 (task cancellation), required everywhere else."""

    request_id: RequestId | UnsetType = UNSET
    reason: str | UnsetType = UNSET


class ProgressNotificationParams(NotificationParams, kw_only=True):
    progress_token: ProgressToken
    progress: float
    total: float | UnsetType = UNSET
    message: str | UnsetType = UNSET


class PaginatedRequestParams(RequestParams, kw_only=True):
    cursor: Cursor | UnsetType = UNSET


# --- Typed views of `_meta` (2026-07-28) ---------------------------------------------------------------


class RequestMetaObject(MCPModel, kw_only=True):
    """Typed view of a 2026-07-28 request's ``_meta`` (``convert(params.meta, RequestMetaObject)``).

    ``_meta`` itself stays a plain dict on the params, so keys this view does not know survive.
    """

    protocol_version: str = msgspec.field(name="io.modelcontextprotocol/protocolVersion")
    client_capabilities: ClientCapabilities = msgspec.field(name="io.modelcontextprotocol/clientCapabilities")
    client_info: Implementation | UnsetType = msgspec.field(default=UNSET, name="io.modelcontextprotocol/clientInfo")
    log_level: LoggingLevel | UnsetType = msgspec.field(default=UNSET, name="io.modelcontextprotocol/logLevel")
    progress_token: ProgressToken | UnsetType = UNSET
    traceparent: str | UnsetType = UNSET
    tracestate: str | UnsetType = UNSET
    baggage: str | UnsetType = UNSET


class NotificationMetaObject(MCPModel, kw_only=True):
    """Typed view of a notification's ``_meta`` (2026-07-28)."""

    subscription_id: RequestId | UnsetType = msgspec.field(default=UNSET, name="io.modelcontextprotocol/subscriptionId")


class ResultMetaObject(MCPModel, kw_only=True):
    """Typed view of a result's ``_meta`` (2026-07-28)."""

    server_info: Implementation | UnsetType = msgspec.field(default=UNSET, name="io.modelcontextprotocol/serverInfo")


# --- Capabilities --------------------------------------------------------------------------------------


class RootsCapability(MCPModel, kw_only=True):
    list_changed: bool | UnsetType = UNSET  # dropped in 2026-07-28 (`roots: {}`)


class SamplingCapability(MCPModel, kw_only=True):
    context: JSONObject | UnsetType = UNSET
    tools: JSONObject | UnsetType = UNSET


class ElicitationCapability(MCPModel, kw_only=True):
    """An empty object means form mode only (2025-11-25)."""

    form: JSONObject | UnsetType = UNSET
    url: JSONObject | UnsetType = UNSET


class ClientTasksCapability(MCPModel, kw_only=True):
    """2025-11-25. ``requests``, e.g. ``{"sampling": {"createMessage": {}}, "elicitation": {"create": {}}}``,
    stays a dict."""

    list: JSONObject | UnsetType = UNSET
    cancel: JSONObject | UnsetType = UNSET
    requests: JSONObject | UnsetType = UNSET


class ClientCapabilities(MCPModel, kw_only=True):
    experimental: dict[str, JSONObject] | UnsetType = UNSET
    roots: RootsCapability | UnsetType = UNSET
    sampling: SamplingCapability | UnsetType = UNSET
    elicitation: ElicitationCapability | UnsetType = UNSET
    tasks: ClientTasksCapability | UnsetType = UNSET
    extensions: dict[str, JSONObject] | UnsetType = UNSET


class PromptsCapability(MCPModel, kw_only=True):
    list_changed: bool | UnsetType = UNSET


class ResourcesCapability(MCPModel, kw_only=True):
    subscribe: bool | UnsetType = UNSET
    list_changed: bool | UnsetType = UNSET


class ToolsCapability(MCPModel, kw_only=True):
    list_changed: bool | UnsetType = UNSET


class ServerTasksCapability(MCPModel, kw_only=True):
    """2025-11-25. ``requests`` is e.g. ``{"tools": {"call": {}}}``."""

    list: JSONObject | UnsetType = UNSET
    cancel: JSONObject | UnsetType = UNSET
    requests: JSONObject | UnsetType = UNSET


class ServerCapabilities(MCPModel, kw_only=True):
    experimental: dict[str, JSONObject] | UnsetType = UNSET
    logging: JSONObject | UnsetType = UNSET
    completions: JSONObject | UnsetType = UNSET
    prompts: PromptsCapability | UnsetType = UNSET
    resources: ResourcesCapability | UnsetType = UNSET
    tools: ToolsCapability | UnsetType = UNSET
    tasks: ServerTasksCapability | UnsetType = UNSET
    extensions: dict[str, JSONObject] | UnsetType = UNSET


# --- Identity, lifecycle (2024-11-05 … 2025-11-25) and discovery (2026-07-28) --------------------------


class Implementation(BaseMetadata, kw_only=True):
    version: str
    description: str | UnsetType = UNSET
    website_url: str | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET


class InitializeRequestParams(RequestParams, kw_only=True):
    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation


class InitializeResult(Result, kw_only=True):
    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | UnsetType = UNSET


class DiscoverResult(CacheableResult, kw_only=True):
    """``server/discover`` (2026-07-28); identity goes in ``_meta["io.modelcontextprotocol/serverInfo"]``."""

    supported_versions: list[str]
    capabilities: ServerCapabilities
    instructions: str | UnsetType = UNSET


# --- Resources -----------------------------------------------------------------------------------------


class ResourceTemplate(BaseMetadata, kw_only=True):
    uri_template: str
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ListResourcesResult(_PaginatedCacheableResult, kw_only=True):
    resources: list[Resource]


class ListResourceTemplatesResult(_PaginatedCacheableResult, kw_only=True):
    resource_templates: list[ResourceTemplate]


class ResourceRequestParams(RequestParams, kw_only=True):
    uri: str


class ReadResourceRequestParams(InputResponseRequestParams, kw_only=True):
    uri: str


class ReadResourceResult(CacheableResult, kw_only=True):
    contents: list[ResourceContents]


class SubscribeRequestParams(ResourceRequestParams, kw_only=True):
    """``resources/subscribe`` (2024-11-05 … 2025-11-25)."""


class UnsubscribeRequestParams(ResourceRequestParams, kw_only=True):
    """``resources/unsubscribe`` (2024-11-05 … 2025-11-25)."""


class ResourceUpdatedNotificationParams(NotificationParams, kw_only=True):
    uri: str


# --- Subscriptions (2026-07-28) ------------------------------------------------------------------------


class SubscriptionsListenResultMetaObject(ResultMetaObject, kw_only=True):
    """``_meta`` of the result that ends a ``subscriptions/listen`` stream."""

    subscription_id: RequestId = msgspec.field(name="io.modelcontextprotocol/subscriptionId")


class SubscriptionFilter(MCPModel, kw_only=True):
    """What a ``subscriptions/listen`` stream should deliver (2026-07-28)."""

    tools_list_changed: bool | UnsetType = UNSET
    prompts_list_changed: bool | UnsetType = UNSET
    resources_list_changed: bool | UnsetType = UNSET
    resource_subscriptions: list[str] | UnsetType = UNSET


class SubscriptionsListenRequestParams(RequestParams, kw_only=True):
    notifications: SubscriptionFilter


class SubscriptionsListenResult(Result, kw_only=True):
    """Ends a listen stream; ``_meta`` carries ``io.modelcontextprotocol/subscriptionId`` (required)."""


class SubscriptionsAcknowledgedNotificationParams(NotificationParams, kw_only=True):
    notifications: SubscriptionFilter


# --- Prompts -------------------------------------------------------------------------------------------


class PromptArgument(BaseMetadata, kw_only=True):
    description: str | UnsetType = UNSET
    required: bool | UnsetType = UNSET


class Prompt(BaseMetadata, kw_only=True):
    description: str | UnsetType = UNSET
    arguments: list[PromptArgument] | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


class PromptMessage(MCPModel, kw_only=True):
    role: Role
    content: ContentBlock


class ListPromptsResult(_PaginatedCacheableResult, kw_only=True):
    prompts: list[Prompt]


class GetPromptRequestParams(InputResponseRequestParams, kw_only=True):
    name: str
    arguments: dict[str, str] | UnsetType = UNSET


class GetPromptResult(Result, kw_only=True):
    description: str | UnsetType = UNSET
    messages: list[PromptMessage]


# --- Tools ---------------------------------------------------------------------------------------------


class CallToolRequestParams(InputResponseRequestParams, kw_only=True):
    name: str
    arguments: JSONObject | UnsetType = UNSET
    task: TaskMetadata | UnsetType = UNSET  # 2025-11-25


# --- Tasks (2025-11-25; an extension since 2026-07-28) -------------------------------------------------


class RelatedTaskMetadata(MCPModel, kw_only=True):
    """Value of ``_meta["io.modelcontextprotocol/related-task"]``."""

    task_id: str


class Task(MCPModel, kw_only=True):
    task_id: str
    status: TaskStatus
    status_message: str | UnsetType = UNSET
    created_at: str
    last_updated_at: str
    ttl: int | None  # null: unlimited
    poll_interval: int | UnsetType = UNSET


class CreateTaskResult(Result, kw_only=True):
    task: Task


class GetTaskRequestParams(RequestParams, kw_only=True):
    task_id: str


class GetTaskPayloadRequestParams(RequestParams, kw_only=True):
    task_id: str


class CancelTaskRequestParams(RequestParams, kw_only=True):
    task_id: str


class _TaskResult(Result, kw_only=True):
    # Result & Task, flattened (see _PaginatedCacheableResult).
    task_id: str
    status: TaskStatus
    status_message: str | UnsetType = UNSET
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | UnsetType = UNSET


class GetTaskResult(_TaskResult, kw_only=True):
    pass


class CancelTaskResult(_TaskResult, kw_only=True):
    pass


class GetTaskPayloadResult(Result, kw_only=True):
    """``tasks/result`` answers with the underlying request's own result: decode with that type instead."""


class ListTasksResult(PaginatedResult, kw_only=True):
    tasks: list[Task]


class TaskStatusNotificationParams(NotificationParams, kw_only=True):
    # NotificationParams & Task, flattened.
    task_id: str
    status: TaskStatus
    status_message: str | UnsetType = UNSET
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | UnsetType = UNSET


# --- Logging -------------------------------------------------------------------------------------------


class SetLevelRequestParams(RequestParams, kw_only=True):
    """``logging/setLevel`` (2024-11-05 … 2025-11-25)."""

    level: LoggingLevel


class LoggingMessageNotificationParams(NotificationParams, kw_only=True):
    level: LoggingLevel
    logger: str | UnsetType = UNSET
    data: Any


# --- Sampling ------------------------------------------------------------------------------------------


class ToolUseContent(MCPModel, tag_field="type", tag="tool_use", kw_only=True):
    """Sampling only (2025-11-25+): the model asks to call a tool."""

    type: ClassVar[Literal["tool_use"]] = "tool_use"

    id: str
    name: str
    input: JSONObject
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ToolResultContent(MCPModel, tag_field="type", tag="tool_result", kw_only=True):
    """Sampling only (2025-11-25+): the outcome of a ``tool_use``."""

    type: ClassVar[Literal["tool_result"]] = "tool_result"

    tool_use_id: str
    content: list[ContentBlock]
    structured_content: Any | UnsetType = UNSET
    is_error: bool | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


SamplingContent: TypeAlias = TextContent | ImageContent | AudioContent | ToolUseContent | ToolResultContent
SamplingMessageContentBlock: TypeAlias = SamplingContent


class ModelHint(MCPModel, kw_only=True):
    name: str | UnsetType = UNSET


class ModelPreferences(MCPModel, kw_only=True):
    hints: list[ModelHint] | UnsetType = UNSET
    cost_priority: float | UnsetType = UNSET
    speed_priority: float | UnsetType = UNSET
    intelligence_priority: float | UnsetType = UNSET


class ToolChoice(MCPModel, kw_only=True):
    mode: Literal["auto", "required", "none"] | UnsetType = UNSET


class SamplingMessage(MCPModel, kw_only=True):
    """``content`` is one block or (2025-11-25+) a list of blocks."""

    role: Role
    content: SamplingContent | list[SamplingContent]
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


class CreateMessageRequestParams(TaskAugmentedRequestParams, kw_only=True):
    messages: list[SamplingMessage]
    model_preferences: ModelPreferences | UnsetType = UNSET
    system_prompt: str | UnsetType = UNSET
    include_context: IncludeContext | UnsetType = UNSET
    temperature: float | UnsetType = UNSET
    max_tokens: int
    stop_sequences: list[str] | UnsetType = UNSET
    metadata: JSONObject | UnsetType = UNSET
    tools: list[Tool] | UnsetType = UNSET
    tool_choice: ToolChoice | UnsetType = UNSET


class CreateMessageResult(Result, kw_only=True):
    """Result & SamplingMessage. As a 2026-07-28 input response it carries no ``resultType``."""

    role: Role
    content: SamplingContent | list[SamplingContent]
    model: str
    stop_reason: StopReason | UnsetType = UNSET


# --- Completion ----------------------------------------------------------------------------------------


class PromptReference(MCPModel, tag_field="type", tag="ref/prompt", kw_only=True):
    type: ClassVar[Literal["ref/prompt"]] = "ref/prompt"
    name: str
    title: str | UnsetType = UNSET


class ResourceTemplateReference(MCPModel, tag_field="type", tag="ref/resource", kw_only=True):
    type: ClassVar[Literal["ref/resource"]] = "ref/resource"
    uri: str


ResourceReference: TypeAlias = ResourceTemplateReference  # its name before 2025-06-18
CompletionReference: TypeAlias = PromptReference | ResourceTemplateReference


class CompletionArgument(MCPModel, kw_only=True):
    name: str
    value: str


class CompletionContext(MCPModel, kw_only=True):
    arguments: dict[str, str] | UnsetType = UNSET


class CompleteRequestParams(RequestParams, kw_only=True):
    ref: CompletionReference
    argument: CompletionArgument
    context: CompletionContext | UnsetType = UNSET


class Completion(MCPModel, kw_only=True):
    values: list[str]
    total: int | UnsetType = UNSET
    has_more: bool | UnsetType = UNSET


class CompleteResult(Result, kw_only=True):
    completion: Completion


# --- Roots ---------------------------------------------------------------------------------------------


class Root(MCPModel, kw_only=True):
    uri: str
    name: str | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(default=UNSET, name="_meta")


class ListRootsResult(Result, kw_only=True):
    roots: list[Root]


# --- Elicitation ---------------------------------------------------------------------------------------


class ElicitRequestParams(TaskAugmentedRequestParams, kw_only=True):
    """``elicitation/create`` params as decoded: form mode (``requested_schema``) or URL mode (``url``).

    The spec's union ``ElicitRequestFormParams | ElicitRequestURLParams`` cannot be tagged (``mode`` is
    optional in form mode), so this superset decodes and :meth:`narrow` gives the spec-named variant.
    ``elicitation_id`` is 2025-11-25 only (required there in URL mode); ``_meta``/``task`` are 2025-11-25.
    """

    mode: Literal["form", "url"] | UnsetType = UNSET
    message: str
    requested_schema: JSONObject | UnsetType = UNSET
    url: str | UnsetType = UNSET
    elicitation_id: str | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.mode == "url":
            if self.url is UNSET:
                raise ValueError("URL-mode elicitation needs `url`")
        elif self.requested_schema is UNSET:
            raise ValueError("form-mode elicitation needs `requestedSchema`")

    def narrow(self) -> ElicitRequestFormParams | ElicitRequestURLParams:
        if isinstance(self, ElicitRequestFormParams | ElicitRequestURLParams):
            return self
        common: dict[str, Any] = {"message": self.message, "meta": self.meta, "task": self.task}
        if self.mode == "url":
            assert isinstance(self.url, str)
            return ElicitRequestURLParams(url=self.url, elicitation_id=self.elicitation_id, **common)
        assert isinstance(self.requested_schema, dict)
        mode: Literal["form"] | UnsetType = UNSET if self.mode is UNSET else "form"
        return ElicitRequestFormParams(mode=mode, requested_schema=self.requested_schema, **common)


class ElicitRequestFormParams(ElicitRequestParams, kw_only=True):
    mode: Literal["form"] | UnsetType = UNSET
    requested_schema: JSONObject


class ElicitRequestURLParams(ElicitRequestParams, omit_defaults=False, kw_only=True):
    mode: Literal["url"] = "url"
    url: str


class ElicitResult(Result, kw_only=True):
    """``content`` only for ``accept`` in form mode. As a 2026-07-28 input response: no ``resultType``."""

    action: ElicitAction
    content: dict[str, str | int | float | bool | list[str]] | UnsetType = UNSET


class ElicitationCompleteNotificationParams(NotificationParams, kw_only=True):
    """``notifications/elicitation/complete`` (2025-11-25 only)."""

    elicitation_id: str


# --- Elicitation: primitive schemas --------------------------------------------------------------------
# Builders for `requestedSchema` (a dict): `to_builtins(StringSchema(...))`.


class StringSchema(MCPModel, tag_field="type", tag="string", kw_only=True):
    type: ClassVar[Literal["string"]] = "string"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    min_length: int | UnsetType = UNSET
    max_length: int | UnsetType = UNSET
    format: Literal["email", "uri", "date", "date-time"] | UnsetType = UNSET
    default: str | UnsetType = UNSET


class NumberSchema(MCPModel, omit_defaults=False, kw_only=True):
    type: Literal["number", "integer"] = "number"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    minimum: int | float | UnsetType = UNSET
    maximum: int | float | UnsetType = UNSET
    default: int | float | UnsetType = UNSET


class BooleanSchema(MCPModel, tag_field="type", tag="boolean", kw_only=True):
    type: ClassVar[Literal["boolean"]] = "boolean"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    default: bool | UnsetType = UNSET


class EnumOption(MCPModel, kw_only=True):
    """One ``{const, title}`` choice of a titled enum."""

    const: str
    title: str


class UntitledSingleSelectEnumSchema(MCPModel, tag_field="type", tag="string", kw_only=True):
    type: ClassVar[Literal["string"]] = "string"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    enum: list[str]
    default: str | UnsetType = UNSET


class TitledSingleSelectEnumSchema(MCPModel, tag_field="type", tag="string", kw_only=True):
    type: ClassVar[Literal["string"]] = "string"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    one_of: list[EnumOption]
    default: str | UnsetType = UNSET


class UntitledEnumItems(MCPModel, tag_field="type", tag="string", kw_only=True):
    type: ClassVar[Literal["string"]] = "string"
    enum: list[str]


class TitledEnumItems(MCPModel, kw_only=True):
    any_of: list[EnumOption]


class UntitledMultiSelectEnumSchema(MCPModel, tag_field="type", tag="array", kw_only=True):
    type: ClassVar[Literal["array"]] = "array"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    min_items: int | UnsetType = UNSET
    max_items: int | UnsetType = UNSET
    items: UntitledEnumItems
    default: list[str] | UnsetType = UNSET


class TitledMultiSelectEnumSchema(MCPModel, tag_field="type", tag="array", kw_only=True):
    type: ClassVar[Literal["array"]] = "array"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    min_items: int | UnsetType = UNSET
    max_items: int | UnsetType = UNSET
    items: TitledEnumItems
    default: list[str] | UnsetType = UNSET


class LegacyTitledEnumSchema(MCPModel, tag_field="type", tag="string", kw_only=True):
    """Deprecated form (``enumNames``), still accepted."""

    type: ClassVar[Literal["string"]] = "string"

    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    enum: list[str]
    enum_names: list[str] | UnsetType = UNSET
    default: str | UnsetType = UNSET


# For annotations only: msgspec cannot decode these unions (several variants share a tag).
SingleSelectEnumSchema: TypeAlias = UntitledSingleSelectEnumSchema | TitledSingleSelectEnumSchema
MultiSelectEnumSchema: TypeAlias = UntitledMultiSelectEnumSchema | TitledMultiSelectEnumSchema
EnumSchema: TypeAlias = SingleSelectEnumSchema | MultiSelectEnumSchema | LegacyTitledEnumSchema
PrimitiveSchemaDefinition: TypeAlias = StringSchema | NumberSchema | BooleanSchema | EnumSchema


# --- Multi round-trip requests (2026-07-28) ------------------------------------------------------------
# Server-to-client requests embedded in `InputRequiredResult.inputRequests`: `{method, params}`, no id.


class CreateMessageRequest(MCPModel, tag_field="method", tag="sampling/createMessage", kw_only=True):
    method: ClassVar[Literal["sampling/createMessage"]] = "sampling/createMessage"
    params: CreateMessageRequestParams


class ListRootsRequest(MCPModel, tag_field="method", tag="roots/list", kw_only=True):
    method: ClassVar[Literal["roots/list"]] = "roots/list"
    params: RequestParams | UnsetType = UNSET


class ElicitRequest(MCPModel, tag_field="method", tag="elicitation/create", kw_only=True):
    method: ClassVar[Literal["elicitation/create"]] = "elicitation/create"
    params: ElicitRequestParams


InputRequest: TypeAlias = CreateMessageRequest | ListRootsRequest | ElicitRequest
InputRequests: TypeAlias = dict[str, InputRequest]
InputResponse: TypeAlias = CreateMessageResult | ListRootsResult | ElicitResult  # annotations only
InputResponses: TypeAlias = dict[str, Any]


class InputRequiredResult(Result, omit_defaults=False, kw_only=True):
    """The server needs answers before it can complete ``tools/call``, ``prompts/get`` or ``resources/read``.

    At least one of ``input_requests`` / ``request_state`` must be present.
    """

    result_type: ResultType = "input_required"
    input_requests: InputRequests | UnsetType = UNSET
    request_state: str | UnsetType = UNSET


# --- Error data ----------------------------------------------------------------------------------------


class UnsupportedProtocolVersionErrorData(MCPModel, kw_only=True):
    """``error.data`` of -32022 (2026-07-28)."""

    supported: list[str]
    requested: str


class MissingRequiredClientCapabilityErrorData(MCPModel, kw_only=True):
    """``error.data`` of -32021 (2026-07-28): an object of capabilities, not a list."""

    required_capabilities: ClientCapabilities


class URLElicitationRequiredErrorData(MCPModel, kw_only=True):
    """``error.data`` of -32042 (2025-11-25 only)."""

    elicitations: list[ElicitRequestParams]


# Hand everything over to `types` (aliases too: the classes' string annotations are resolved in its namespace).
# `types.__all__` is the one list of these names (`types._LAZY`: those it does not define); a test checks it.
for _name in _types._LAZY:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__ == __name__:
        _obj.__module__ = _types.__name__
    setattr(_types, _name, _obj)
