"""The MCP types that few programs touch, created on first use (L2: msgspec only).

Part of :mod:`jsonrpc_mcp.mcp.types` and only reached through it: the first access to one of these names there
(``t.Task``, ``from jsonrpc_mcp.mcp.types import StringSchema``) imports this module, which puts every class and
alias below into that module and makes it their ``__module__`` (so annotations resolve, reprs and pickles name
``types``). A process that never touches tasks, completions, ``subscriptions/listen``, the logging params, the
elicitation schema builders or the error data Structs does not create these 40 Structs: about a third of what
importing ``types`` costs.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from . import types as _types
from .types import (
    ClientCapabilities,
    ElicitRequestParams,
    LoggingLevel,
    MCPModel,
    NotificationParams,
    PaginatedResult,
    RequestId,
    RequestParams,
    Result,
    ResultMetaObject,
    TaskStatus,
)

__all__ = (
    "SubscriptionsListenResultMetaObject",
    "SubscriptionFilter",
    "SubscriptionsListenRequestParams",
    "SubscriptionsListenResult",
    "SubscriptionsAcknowledgedNotificationParams",
    "RelatedTaskMetadata",
    "Task",
    "CreateTaskResult",
    "GetTaskRequestParams",
    "GetTaskPayloadRequestParams",
    "CancelTaskRequestParams",
    "GetTaskResult",
    "CancelTaskResult",
    "GetTaskPayloadResult",
    "ListTasksResult",
    "TaskStatusNotificationParams",
    "SetLevelRequestParams",
    "LoggingMessageNotificationParams",
    "PromptReference",
    "ResourceTemplateReference",
    "ResourceReference",
    "CompletionReference",
    "CompletionArgument",
    "CompletionContext",
    "CompleteRequestParams",
    "Completion",
    "CompleteResult",
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
    "UnsupportedProtocolVersionErrorData",
    "MissingRequiredClientCapabilityErrorData",
    "URLElicitationRequiredErrorData",
)


# --- Subscriptions (2026-07-28) ------------------------------------------------------------------------


class SubscriptionsListenResultMetaObject(ResultMetaObject):
    """``_meta`` of the result that ends a ``subscriptions/listen`` stream."""

    subscription_id: RequestId = msgspec.field(name="io.modelcontextprotocol/subscriptionId")


class SubscriptionFilter(MCPModel):
    """What a ``subscriptions/listen`` stream should deliver (2026-07-28)."""

    tools_list_changed: bool | UnsetType = UNSET
    prompts_list_changed: bool | UnsetType = UNSET
    resources_list_changed: bool | UnsetType = UNSET
    resource_subscriptions: list[str] | UnsetType = UNSET


class SubscriptionsListenRequestParams(RequestParams):
    notifications: SubscriptionFilter


class SubscriptionsListenResult(Result):
    """Ends a listen stream; ``_meta`` carries ``io.modelcontextprotocol/subscriptionId`` (required)."""


class SubscriptionsAcknowledgedNotificationParams(NotificationParams):
    notifications: SubscriptionFilter


# --- Tasks (2025-11-25; an extension since 2026-07-28) -------------------------------------------------


class RelatedTaskMetadata(MCPModel):
    """Value of ``_meta["io.modelcontextprotocol/related-task"]``."""

    task_id: str


class Task(MCPModel):
    task_id: str
    status: TaskStatus
    status_message: str | UnsetType = UNSET
    created_at: str
    last_updated_at: str
    ttl: int | None  # null: unlimited
    poll_interval: int | UnsetType = UNSET


class CreateTaskResult(Result):
    task: Task


class GetTaskRequestParams(RequestParams):
    task_id: str


class GetTaskPayloadRequestParams(RequestParams):
    task_id: str


class CancelTaskRequestParams(RequestParams):
    task_id: str


class _TaskResult(Result):
    # Result & Task, flattened (see _PaginatedCacheableResult).
    task_id: str
    status: TaskStatus
    status_message: str | UnsetType = UNSET
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | UnsetType = UNSET


class GetTaskResult(_TaskResult):
    pass


class CancelTaskResult(_TaskResult):
    pass


class GetTaskPayloadResult(Result):
    """``tasks/result`` answers with the underlying request's own result: decode with that type instead."""


class ListTasksResult(PaginatedResult):
    tasks: list[Task]


class TaskStatusNotificationParams(NotificationParams):
    # NotificationParams & Task, flattened.
    task_id: str
    status: TaskStatus
    status_message: str | UnsetType = UNSET
    created_at: str
    last_updated_at: str
    ttl: int | None
    poll_interval: int | UnsetType = UNSET


# --- Logging -------------------------------------------------------------------------------------------


class SetLevelRequestParams(RequestParams):
    """``logging/setLevel`` (2024-11-05 … 2025-11-25)."""

    level: LoggingLevel


class LoggingMessageNotificationParams(NotificationParams):
    level: LoggingLevel
    logger: str | UnsetType = UNSET
    data: Any


# --- Completion ----------------------------------------------------------------------------------------


class PromptReference(MCPModel, tag_field="type", tag="ref/prompt"):
    name: str
    title: str | UnsetType = UNSET


class ResourceTemplateReference(MCPModel, tag_field="type", tag="ref/resource"):
    uri: str


ResourceReference: TypeAlias = ResourceTemplateReference  # its name before 2025-06-18
CompletionReference: TypeAlias = PromptReference | ResourceTemplateReference


class CompletionArgument(MCPModel):
    name: str
    value: str


class CompletionContext(MCPModel):
    arguments: dict[str, str] | UnsetType = UNSET


class CompleteRequestParams(RequestParams):
    ref: CompletionReference
    argument: CompletionArgument
    context: CompletionContext | UnsetType = UNSET


class Completion(MCPModel):
    values: list[str]
    total: int | UnsetType = UNSET
    has_more: bool | UnsetType = UNSET


class CompleteResult(Result):
    completion: Completion


# --- Elicitation: primitive schemas --------------------------------------------------------------------
# Builders for `requestedSchema` (a dict): `to_builtins(StringSchema(...))`.


class StringSchema(MCPModel, tag_field="type", tag="string"):
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    min_length: int | UnsetType = UNSET
    max_length: int | UnsetType = UNSET
    format: Literal["email", "uri", "date", "date-time"] | UnsetType = UNSET
    default: str | UnsetType = UNSET


class NumberSchema(MCPModel, omit_defaults=False):
    type: Literal["number", "integer"] = "number"
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    minimum: int | float | UnsetType = UNSET
    maximum: int | float | UnsetType = UNSET
    default: int | float | UnsetType = UNSET


class BooleanSchema(MCPModel, tag_field="type", tag="boolean"):
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    default: bool | UnsetType = UNSET


class EnumOption(MCPModel):
    """One ``{const, title}`` choice of a titled enum."""

    const: str
    title: str


class UntitledSingleSelectEnumSchema(MCPModel, tag_field="type", tag="string"):
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    enum: list[str]
    default: str | UnsetType = UNSET


class TitledSingleSelectEnumSchema(MCPModel, tag_field="type", tag="string"):
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    one_of: list[EnumOption]
    default: str | UnsetType = UNSET


class UntitledEnumItems(MCPModel, tag_field="type", tag="string"):
    enum: list[str]


class TitledEnumItems(MCPModel):
    any_of: list[EnumOption]


class UntitledMultiSelectEnumSchema(MCPModel, tag_field="type", tag="array"):
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    min_items: int | UnsetType = UNSET
    max_items: int | UnsetType = UNSET
    items: UntitledEnumItems
    default: list[str] | UnsetType = UNSET


class TitledMultiSelectEnumSchema(MCPModel, tag_field="type", tag="array"):
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    min_items: int | UnsetType = UNSET
    max_items: int | UnsetType = UNSET
    items: TitledEnumItems
    default: list[str] | UnsetType = UNSET


class LegacyTitledEnumSchema(MCPModel, tag_field="type", tag="string"):
    """Deprecated form (``enumNames``), still accepted."""

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


# --- Error data ----------------------------------------------------------------------------------------


class UnsupportedProtocolVersionErrorData(MCPModel):
    """``error.data`` of -32022 (2026-07-28)."""

    supported: list[str]
    requested: str


class MissingRequiredClientCapabilityErrorData(MCPModel):
    """``error.data`` of -32021 (2026-07-28): an object of capabilities, not a list."""

    required_capabilities: ClientCapabilities


class URLElicitationRequiredErrorData(MCPModel):
    """``error.data`` of -32042 (2025-11-25 only)."""

    elicitations: list[ElicitRequestParams]


# Hand everything over to `types` (aliases too: the classes' string annotations are resolved in its namespace).
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__ == __name__:
        _obj.__module__ = _types.__name__
    setattr(_types, _name, _obj)
