"""Round trips for every type in :mod:`jsonrpc_mcp.mcp.types`.

Each case is JSON bytes shaped after the spec's schema.ts: decode into the Struct, encode again, compare as parsed
JSON. ``SPEC_EXAMPLES`` inlines a selection of the specification's own example files (no file is read at run time).
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

import msgspec
import pytest
from msgspec import UNSET

from jsonrpc_mcp.mcp import types as t

# --- helpers ---------------------------------------------------------------------------------------------


def round_trip(tp: Any, data: bytes) -> tuple[Any, Any]:
    """Decode ``data`` as ``tp`` and encode it back; return (decoded value, re-encoded JSON parsed)."""
    value = msgspec.json.decode(data, type=tp)
    return value, json.loads(msgspec.json.encode(value))


def as_bytes(doc: Any) -> bytes:
    return json.dumps(doc).encode()


SERVER = {"name": "kb-server", "version": "2.1.0"}
CLIENT = {"name": "probe", "title": "Probe CLI", "version": "0.3.1"}
R5_REQUEST_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    "io.modelcontextprotocol/clientInfo": CLIENT,
}
ANNOTATIONS = {"audience": ["user", "assistant"], "priority": 0.25, "lastModified": "2026-02-01T08:30:00Z"}
ICON = {"src": "https://cdn.example.org/icons/kb.png", "mimeType": "image/png", "sizes": ["32x32", "64x64"]}
DARK_ICON = {
    "src": "data:image/svg+xml;base64,PHN2Zy8+",
    "mimeType": "image/svg+xml",
    "sizes": ["any"],
    "theme": "dark",
}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR4nGNgYAAAAAMAAWgmWQ0AAAAASUVORK5CYII="
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="
TEXT_BLOCK = {"type": "text", "text": "3 entries match"}
IMAGE_BLOCK = {"type": "image", "data": PNG, "mimeType": "image/png"}
AUDIO_BLOCK = {"type": "audio", "data": WAV, "mimeType": "audio/wav", "annotations": {"priority": 1}}
LINK_BLOCK = {
    "type": "resource_link",
    "uri": "kb://entries/42",
    "name": "entry-42",
    "title": "Entry 42: msgspec tagged unions",
    "mimeType": "text/markdown",
    "size": 1834,
}
EMBEDDED_BLOCK = {
    "type": "resource",
    "resource": {"uri": "kb://entries/42", "mimeType": "text/markdown", "text": "# Tagged unions\n..."},
    "annotations": {"audience": ["assistant"]},
}
TOOL = {
    "name": "kb.query",
    "title": "Query the knowledge base",
    "description": "Full-text search over entries.",
    "inputSchema": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "q": {"type": "string", "minLength": 1},
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
        },
        "required": ["q"],
        "additionalProperties": False,
    },
    "outputSchema": {"type": "array", "items": {"$ref": "#/$defs/hit"}, "$defs": {"hit": {"type": "object"}}},
    "annotations": {"title": "KB query", "readOnlyHint": True, "openWorldHint": False},
    "icons": [ICON],
    "_meta": {"com.example/cost": "low"},
}
TASK = {
    "taskId": "3f1c2a",
    "status": "working",
    "statusMessage": "indexing 120 of 400",
    "createdAt": "2025-11-25T10:00:00Z",
    "lastUpdatedAt": "2025-11-25T10:00:05Z",
    "ttl": 600000,
    "pollInterval": 2000,
}
FORM_SCHEMA = {
    "type": "object",
    "properties": {
        "handle": {"type": "string", "title": "Handle", "minLength": 2},
        "notify": {"type": "boolean", "default": True},
    },
    "required": ["handle"],
}
SAMPLING_PARAMS = {"messages": [{"role": "user", "content": TEXT_BLOCK}], "maxTokens": 256}


# --- one or more instances per Struct --------------------------------------------------------------------

CASES: list[tuple[Any, Any]] = [
    # base
    (t.MCPModel, {}),
    (
        t.RequestMetaObject,
        {
            **R5_REQUEST_META,
            "io.modelcontextprotocol/logLevel": "warning",
            "progressToken": 7,
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "tracestate": "kb=1",
            "baggage": "tenant=acme",
        },
    ),
    (t.NotificationMetaObject, {"io.modelcontextprotocol/subscriptionId": 42}),
    (t.ResultMetaObject, {"io.modelcontextprotocol/serverInfo": SERVER}),
    (
        t.SubscriptionsListenResultMetaObject,
        {"io.modelcontextprotocol/subscriptionId": "listen-7", "io.modelcontextprotocol/serverInfo": SERVER},
    ),
    (t.RequestParams, {}),
    (t.RequestParams, {"_meta": {"progressToken": "p-1", "com.example/trace": [1, 2]}}),
    (t.TaskAugmentedRequestParams, {"task": {"ttl": 60000}}),
    (
        t.InputResponseRequestParams,
        {"_meta": R5_REQUEST_META, "inputResponses": {"confirm": {"action": "decline"}}, "requestState": "c3RhdGU"},
    ),
    (t.NotificationParams, {"_meta": {"io.modelcontextprotocol/subscriptionId": "listen-7"}}),
    (t.Result, {}),
    (t.Result, {"resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": SERVER}}),
    (t.Result, {"resultType": "com.example/deferred"}),
    # cancellation, progress
    (t.CancelledNotificationParams, {"requestId": 17, "reason": "user pressed stop"}),
    (t.CancelledNotificationParams, {"requestId": "req-17"}),
    (t.CancelledNotificationParams, {}),
    (t.ProgressNotificationParams, {"progressToken": "upload-3", "progress": 0.25, "total": 1, "message": "a quarter"}),
    (t.ProgressNotificationParams, {"progressToken": 99, "progress": 3}),
    # capabilities
    (t.RootsCapability, {"listChanged": True}),
    (t.RootsCapability, {}),
    (t.SamplingCapability, {"context": {}, "tools": {}}),
    (t.ElicitationCapability, {"form": {}, "url": {}}),
    (t.ElicitationCapability, {}),
    (
        t.ClientTasksCapability,
        {"list": {}, "cancel": {}, "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}}},
    ),
    (
        t.ClientCapabilities,
        {
            "experimental": {"com.example/beta": {"level": 2}},
            "roots": {"listChanged": True},
            "sampling": {"tools": {}},
            "elicitation": {"form": {}, "url": {}},
            "tasks": {"list": {}, "requests": {"elicitation": {"create": {}}}},
        },
    ),
    (t.ClientCapabilities, {"roots": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}),
    (t.ClientCapabilities, {}),
    (t.PromptsCapability, {"listChanged": False}),
    (t.ResourcesCapability, {"subscribe": True, "listChanged": True}),
    (t.ToolsCapability, {"listChanged": True}),
    (t.ServerTasksCapability, {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
    (
        t.ServerCapabilities,
        {
            "experimental": {"com.example/graph": {}},
            "logging": {},
            "completions": {},
            "prompts": {"listChanged": True},
            "resources": {"subscribe": True},
            "tools": {},
            "tasks": {"cancel": {}},
            "extensions": {"com.example/ui": {"mimeTypes": ["text/html"]}},
        },
    ),
    # identity, lifecycle, discovery
    (t.Icon, DARK_ICON),
    (t.Icon, {"src": "https://cdn.example.org/a.webp"}),
    (t.BaseMetadata, {"name": "kb.query", "title": "Query"}),
    (t.BaseMetadata, {"name": "kb.query"}),
    (
        t.Implementation,
        {
            "name": "kb-server",
            "title": "Knowledge Base",
            "version": "2.1.0",
            "description": "Entries, relations, history.",
            "websiteUrl": "https://kb.example.org",
            "icons": [ICON, DARK_ICON],
        },
    ),
    (
        t.InitializeRequestParams,
        {
            "_meta": {"progressToken": 1},
            "protocolVersion": "2025-11-25",
            "capabilities": {"roots": {"listChanged": True}, "sampling": {}},
            "clientInfo": CLIENT,
        },
    ),
    (
        t.InitializeResult,
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": False}, "logging": {}},
            "serverInfo": SERVER,
            "instructions": "Use kb.query before kb.store.",
        },
    ),
    (
        t.DiscoverResult,
        {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28", "2025-11-25"],
            "capabilities": {"tools": {"listChanged": True}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
            "instructions": "Read-only on weekends.",
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": SERVER},
        },
    ),
    # pagination, caching
    (t.PaginatedRequestParams, {"cursor": ""}),
    (t.PaginatedRequestParams, {"_meta": R5_REQUEST_META, "cursor": "eyJvZmZzZXQiOjUwfQ"}),
    (t.PaginatedResult, {"nextCursor": "page-3"}),
    (t.CacheableResult, {"resultType": "complete", "ttlMs": 120000, "cacheScope": "public"}),
    # content
    (t.Annotations, ANNOTATIONS),
    (t.Annotations, {"priority": 1}),
    (t.TextContent, {**TEXT_BLOCK, "annotations": ANNOTATIONS, "_meta": {"com.example/lang": "en"}}),
    (t.ImageContent, {**IMAGE_BLOCK, "annotations": {"audience": ["user"]}}),
    (t.AudioContent, AUDIO_BLOCK),
    (t.ResourceLink, {**LINK_BLOCK, "description": "cached", "icons": [ICON], "annotations": ANNOTATIONS}),
    (t.EmbeddedResource, EMBEDDED_BLOCK),
    (
        t.EmbeddedResource,
        {"type": "resource", "resource": {"uri": "kb://blob/7", "blob": PNG}, "_meta": {"com.example/k": 1}},
    ),
    (
        t.ToolUseContent,
        {"type": "tool_use", "id": "toolu_01", "name": "kb.query", "input": {"q": "msgspec"}, "_meta": {"n": 1}},
    ),
    (
        t.ToolResultContent,
        {
            "type": "tool_result",
            "toolUseId": "toolu_01",
            "content": [TEXT_BLOCK, IMAGE_BLOCK, LINK_BLOCK],
            "structuredContent": {"hits": 3},
            "isError": False,
        },
    ),
    (t.ToolResultContent, {"type": "tool_result", "toolUseId": "toolu_02", "content": [], "isError": True}),
    # resources
    (
        t.Resource,
        {
            "uri": "kb://entries/42",
            "name": "entry-42",
            "title": "Entry 42",
            "description": "Notes on tagged unions",
            "mimeType": "text/markdown",
            "annotations": ANNOTATIONS,
            "size": 1834,
            "icons": [ICON],
            "_meta": {"com.example/rev": 3},
        },
    ),
    (t.Resource, {"uri": "file:///srv/kb/readme.txt", "name": "readme.txt"}),
    (
        t.ResourceTemplate,
        {
            "uriTemplate": "kb://entries/{id}{?rev}",
            "name": "entry",
            "title": "Entry by id",
            "description": "One entry, optionally at a revision",
            "mimeType": "text/markdown",
            "annotations": {"priority": 0.5},
            "icons": [DARK_ICON],
            "_meta": {"com.example/paged": False},
        },
    ),
    (t.ResourceContents, {"uri": "kb://entries/1", "text": "hello"}),
    (t.ResourceContents, {"uri": "kb://blob/1", "mimeType": "application/octet-stream", "blob": "AAEC"}),
    (t.TextResourceContents, {"uri": "kb://entries/1", "mimeType": "text/plain", "text": "", "_meta": {"a": 1}}),
    (t.BlobResourceContents, {"uri": "kb://blob/1", "blob": PNG}),
    (
        t.ListResourcesResult,
        {"resources": [{"uri": "kb://entries/1", "name": "entry-1"}], "nextCursor": "2"},
    ),
    (
        t.ListResourcesResult,
        {"resultType": "complete", "resources": [], "ttlMs": 5000, "cacheScope": "public"},
    ),
    (
        t.ListResourceTemplatesResult,
        {
            "resultType": "complete",
            "resourceTemplates": [{"uriTemplate": "kb://tags/{tag}", "name": "tag"}],
            "ttlMs": 60000,
            "cacheScope": "public",
        },
    ),
    (t.ResourceRequestParams, {"uri": "kb://entries/42"}),
    (t.ReadResourceRequestParams, {"_meta": R5_REQUEST_META, "uri": "kb://entries/42"}),
    (
        t.ReadResourceRequestParams,
        {"uri": "kb://private/9", "inputResponses": {"login": {"action": "accept"}}, "requestState": "AAAA"},
    ),
    (
        t.ReadResourceResult,
        {
            "resultType": "complete",
            "contents": [
                {"uri": "kb://dir/", "mimeType": "text/plain", "text": "a\nb"},
                {"uri": "kb://dir/logo", "mimeType": "image/png", "blob": PNG, "_meta": {"k": "v"}},
            ],
            "ttlMs": 1000,
            "cacheScope": "private",
        },
    ),
    (t.ReadResourceResult, {"contents": [{"uri": "kb://entries/1", "text": "legacy, no caching hints"}]}),
    (t.SubscribeRequestParams, {"uri": "kb://entries/42"}),
    (t.UnsubscribeRequestParams, {"uri": "kb://entries/42", "_meta": {"progressToken": 3}}),
    (
        t.ResourceUpdatedNotificationParams,
        {"uri": "kb://entries/42", "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-7"}},
    ),
    # subscriptions (2026-07-28)
    (
        t.SubscriptionFilter,
        {
            "toolsListChanged": True,
            "promptsListChanged": False,
            "resourcesListChanged": True,
            "resourceSubscriptions": ["kb://entries/42", "kb://entries/43"],
        },
    ),
    (t.SubscriptionFilter, {}),
    (t.SubscriptionsListenRequestParams, {"_meta": R5_REQUEST_META, "notifications": {"toolsListChanged": True}}),
    (
        t.SubscriptionsListenResult,
        {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": 12}},
    ),
    (
        t.SubscriptionsAcknowledgedNotificationParams,
        {"notifications": {"resourceSubscriptions": []}, "_meta": {"io.modelcontextprotocol/subscriptionId": 12}},
    ),
    # prompts
    (t.PromptArgument, {"name": "topic", "title": "Topic", "description": "What to summarise", "required": True}),
    (t.PromptArgument, {"name": "tone"}),
    (
        t.Prompt,
        {
            "name": "summarise",
            "title": "Summarise entries",
            "description": "Summarise the entries under a tag",
            "arguments": [{"name": "tag", "required": True}, {"name": "tone"}],
            "icons": [ICON],
            "_meta": {"com.example/v": 2},
        },
    ),
    (t.PromptMessage, {"role": "assistant", "content": EMBEDDED_BLOCK}),
    (t.PromptMessage, {"role": "user", "content": LINK_BLOCK}),
    (
        t.ListPromptsResult,
        {"resultType": "complete", "prompts": [{"name": "summarise"}], "ttlMs": 300000, "cacheScope": "public"},
    ),
    (t.ListPromptsResult, {"prompts": [], "nextCursor": "p2", "_meta": {"com.example/total": 31}}),
    (t.GetPromptRequestParams, {"name": "summarise", "arguments": {"tag": "python", "tone": "dry"}}),
    (
        t.GetPromptRequestParams,
        {
            "_meta": R5_REQUEST_META,
            "name": "summarise",
            "inputResponses": {"pick": {"action": "accept", "content": {"tag": "rust"}}},
            "requestState": "eyJ0IjoxfQ",
        },
    ),
    (
        t.GetPromptResult,
        {
            "resultType": "complete",
            "description": "Summary prompt for #python",
            "messages": [
                {"role": "user", "content": TEXT_BLOCK},
                {"role": "user", "content": IMAGE_BLOCK},
                {"role": "assistant", "content": AUDIO_BLOCK},
                {"role": "user", "content": LINK_BLOCK},
                {"role": "user", "content": EMBEDDED_BLOCK},
            ],
        },
    ),
    # tools
    (
        t.ToolAnnotations,
        {
            "title": "Delete entry",
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    ),
    (t.ToolExecution, {"taskSupport": "optional"}),
    (t.Tool, TOOL),
    (t.Tool, {"name": "kb.ping", "inputSchema": {"type": "object", "additionalProperties": False}}),
    (t.Tool, {**TOOL, "execution": {"taskSupport": "required"}, "outputSchema": {"type": "object"}}),
    (
        t.ListToolsResult,
        {"resultType": "complete", "tools": [TOOL], "nextCursor": "", "ttlMs": 300000, "cacheScope": "public"},
    ),
    (t.ListToolsResult, {"tools": []}),
    (t.CallToolRequestParams, {"name": "kb.query", "arguments": {"q": "msgspec", "limit": 5}}),
    (t.CallToolRequestParams, {"name": "kb.reindex", "task": {"ttl": 300000}, "_meta": {"progressToken": "r1"}}),
    (
        t.CallToolRequestParams,
        {
            "_meta": R5_REQUEST_META,
            "name": "kb.delete",
            "arguments": {"id": 42},
            "inputResponses": {
                "confirm": {"action": "accept", "content": {"sure": True}},
                "model": {"role": "assistant", "content": TEXT_BLOCK, "model": "m-1"},
            },
            "requestState": "c2lnbmVk",
        },
    ),
    (
        t.CallToolResult,
        {
            "resultType": "complete",
            "content": [TEXT_BLOCK, EMBEDDED_BLOCK],
            "structuredContent": {"hits": [{"id": 42, "score": 0.9}]},
            "_meta": {"io.modelcontextprotocol/serverInfo": SERVER},
        },
    ),
    (t.CallToolResult, {"content": [{"type": "text", "text": "limit: must be <= 50"}], "isError": True}),
    (t.CallToolResult, {"resultType": "complete", "content": [], "structuredContent": [1, "two", None]}),
    (t.CallToolResult, {"content": [], "structuredContent": "just a string"}),
    # tasks (2025-11-25)
    (t.TaskMetadata, {"ttl": 60000}),
    (t.TaskMetadata, {}),
    (t.RelatedTaskMetadata, {"taskId": "3f1c2a"}),
    (t.Task, TASK),
    (t.Task, {**TASK, "status": "completed", "ttl": None}),
    (
        t.CreateTaskResult,
        {"task": TASK, "_meta": {"io.modelcontextprotocol/model-immediate-response": "Indexing started."}},
    ),
    (t.GetTaskRequestParams, {"taskId": "3f1c2a"}),
    (t.GetTaskResult, {**TASK, "status": "input_required", "_meta": {"k": 1}}),
    (t.GetTaskPayloadRequestParams, {"taskId": "3f1c2a"}),
    (t.GetTaskPayloadResult, {"_meta": {"io.modelcontextprotocol/related-task": {"taskId": "3f1c2a"}}}),
    (t.CancelTaskRequestParams, {"taskId": "3f1c2a", "_meta": {"progressToken": 5}}),
    (t.CancelTaskResult, {**TASK, "status": "cancelled", "statusMessage": "cancelled by client"}),
    (t.ListTasksResult, {"tasks": [TASK, {**TASK, "taskId": "9", "status": "failed"}], "nextCursor": "t2"}),
    (t.TaskStatusNotificationParams, {**TASK, "status": "failed", "statusMessage": "disk full"}),
    # logging
    (t.SetLevelRequestParams, {"level": "notice"}),
    (t.LoggingMessageNotificationParams, {"level": "warning", "logger": "kb.store", "data": "slow query: 812 ms"}),
    (t.LoggingMessageNotificationParams, {"level": "emergency", "data": None}),
    (t.LoggingMessageNotificationParams, {"level": "debug", "data": {"rows": [1, 2], "ok": True}}),
    # sampling
    (t.ModelHint, {"name": "sonnet"}),
    (t.ModelHint, {}),
    (
        t.ModelPreferences,
        {"hints": [{"name": "haiku"}, {}], "costPriority": 1, "speedPriority": 0.75, "intelligencePriority": 0},
    ),
    (t.ToolChoice, {"mode": "required"}),
    (t.ToolChoice, {}),
    (t.SamplingMessage, {"role": "user", "content": AUDIO_BLOCK, "_meta": {"com.example/turn": 1}}),
    (
        t.SamplingMessage,
        {
            "role": "assistant",
            "content": [
                TEXT_BLOCK,
                {"type": "tool_use", "id": "toolu_9", "name": "kb.query", "input": {}},
            ],
        },
    ),
    (
        t.SamplingMessage,
        {
            "role": "user",
            "content": [{"type": "tool_result", "toolUseId": "toolu_9", "content": [TEXT_BLOCK, IMAGE_BLOCK]}],
        },
    ),
    (
        t.CreateMessageRequestParams,
        {
            "_meta": {"progressToken": "s-1"},
            "messages": [{"role": "user", "content": TEXT_BLOCK}, {"role": "assistant", "content": [IMAGE_BLOCK]}],
            "modelPreferences": {"hints": [{"name": "sonnet"}], "speedPriority": 0.2},
            "systemPrompt": "Answer in one line.",
            "includeContext": "thisServer",
            "temperature": 0.2,
            "maxTokens": 512,
            "stopSequences": ["\n\n"],
            "metadata": {"com.example/user": "u-1"},
            "tools": [TOOL],
            "toolChoice": {"mode": "auto"},
            "task": {"ttl": 1000},
        },
    ),
    (t.CreateMessageRequestParams, SAMPLING_PARAMS),
    (t.CreateMessageResult, {"role": "assistant", "content": TEXT_BLOCK, "model": "m-1", "stopReason": "endTurn"}),
    (
        t.CreateMessageResult,
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_3", "name": "kb.query", "input": {"q": "x"}}],
            "model": "m-1",
            "stopReason": "toolUse",
            "_meta": {"com.example/latency-ms": 840},
        },
    ),
    (t.CreateMessageResult, {"role": "assistant", "content": AUDIO_BLOCK, "model": "m-2", "stopReason": "refusal"}),
    # completion
    (t.PromptReference, {"type": "ref/prompt", "name": "summarise", "title": "Summarise"}),
    (t.ResourceTemplateReference, {"type": "ref/resource", "uri": "kb://entries/{id}"}),
    (t.CompletionArgument, {"name": "tag", "value": "py"}),
    (t.CompletionContext, {"arguments": {"lang": "en"}}),
    (t.CompletionContext, {}),
    (
        t.CompleteRequestParams,
        {
            "_meta": R5_REQUEST_META,
            "ref": {"type": "ref/resource", "uri": "kb://entries/{id}"},
            "argument": {"name": "id", "value": "4"},
            "context": {"arguments": {"rev": "2"}},
        },
    ),
    (
        t.CompleteRequestParams,
        {"ref": {"type": "ref/prompt", "name": "summarise"}, "argument": {"name": "tag", "value": ""}},
    ),
    (t.Completion, {"values": ["python", "pydantic"], "total": 7, "hasMore": True}),
    (t.Completion, {"values": []}),
    (t.CompleteResult, {"resultType": "complete", "completion": {"values": ["42", "43"], "hasMore": False}}),
    # roots
    (t.Root, {"uri": "file:///home/ada/src/kb", "name": "kb", "_meta": {"com.example/vcs": "git"}}),
    (t.Root, {"uri": "file:///tmp"}),
    (t.ListRootsResult, {"roots": [{"uri": "file:///home/ada/src/kb"}, {"uri": "file:///srv/data", "name": "data"}]}),
    (t.ListRootsResult, {"roots": []}),
    # elicitation: primitive schemas
    (
        t.StringSchema,
        {
            "type": "string",
            "title": "Birthday",
            "description": "YYYY-MM-DD",
            "minLength": 10,
            "maxLength": 10,
            "format": "date",
            "default": "2000-01-01",
        },
    ),
    (t.StringSchema, {"type": "string"}),
    (t.NumberSchema, {"type": "integer", "title": "Copies", "minimum": 1, "maximum": 9, "default": 2}),
    (t.NumberSchema, {"type": "number", "minimum": -0.5}),
    (t.BooleanSchema, {"type": "boolean", "title": "Subscribe", "description": "Weekly mail", "default": True}),
    (t.EnumOption, {"const": "s", "title": "Small"}),
    (t.UntitledSingleSelectEnumSchema, {"type": "string", "enum": ["s", "m", "l"], "default": "m"}),
    (
        t.TitledSingleSelectEnumSchema,
        {
            "type": "string",
            "title": "Size",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
    ),
    (t.UntitledEnumItems, {"type": "string", "enum": ["a", "b"]}),
    (t.TitledEnumItems, {"anyOf": [{"const": "a", "title": "Alpha"}]}),
    (
        t.UntitledMultiSelectEnumSchema,
        {
            "type": "array",
            "description": "Tags",
            "minItems": 0,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["py", "rs", "go"]},
            "default": [],
        },
    ),
    (
        t.TitledMultiSelectEnumSchema,
        {
            "type": "array",
            "title": "Days",
            "items": {"anyOf": [{"const": "mon", "title": "Monday"}]},
            "default": ["mon"],
        },
    ),
    (
        t.LegacyTitledEnumSchema,
        {"type": "string", "title": "Plan", "enum": ["f", "p"], "enumNames": ["Free", "Pro"], "default": "f"},
    ),
    # elicitation: requests and results
    (t.ElicitRequestParams, {"message": "Which handle?", "requestedSchema": FORM_SCHEMA}),
    (t.ElicitRequestParams, {"mode": "url", "message": "Sign in", "url": "https://kb.example.org/login?s=1"}),
    (
        t.ElicitRequestFormParams,
        {
            "mode": "form",
            "message": "Which handle?",
            "requestedSchema": FORM_SCHEMA,
            "task": {"ttl": 1000},
            "_meta": {"progressToken": 4},
        },
    ),
    (t.ElicitRequestFormParams, {"message": "Confirm?", "requestedSchema": {"type": "object", "properties": {}}}),
    (
        t.ElicitRequestURLParams,
        {"mode": "url", "message": "Authorise access", "elicitationId": "el-5", "url": "https://kb.example.org/oauth"},
    ),
    (t.ElicitRequestURLParams, {"mode": "url", "message": "Pay", "url": "https://pay.example.org/c/9"}),
    (
        t.ElicitResult,
        {"action": "accept", "content": {"handle": "ada", "notify": False, "copies": 2, "days": ["mon", "tue"]}},
    ),
    (t.ElicitResult, {"action": "cancel", "_meta": {"com.example/why": "closed"}}),
    (t.ElicitResult, {"resultType": "complete", "action": "decline"}),
    (t.ElicitationCompleteNotificationParams, {"elicitationId": "el-5"}),
    # multi round-trip (2026-07-28)
    (t.CreateMessageRequest, {"method": "sampling/createMessage", "params": SAMPLING_PARAMS}),
    (t.ListRootsRequest, {"method": "roots/list"}),
    (t.ListRootsRequest, {"method": "roots/list", "params": {"_meta": {"com.example/why": "scope"}}}),
    (
        t.ElicitRequest,
        {"method": "elicitation/create", "params": {"mode": "url", "message": "Sign in", "url": "https://x.example"}},
    ),
    (
        t.InputRequiredResult,
        {
            "resultType": "input_required",
            "inputRequests": {
                "handle": {
                    "method": "elicitation/create",
                    "params": {"message": "Handle?", "requestedSchema": FORM_SCHEMA},
                },
                "summary": {"method": "sampling/createMessage", "params": SAMPLING_PARAMS},
                "where": {"method": "roots/list"},
            },
            "requestState": "djEuc2lnbmVk",
            "_meta": {"io.modelcontextprotocol/serverInfo": SERVER},
        },
    ),
    (t.InputRequiredResult, {"resultType": "input_required", "requestState": "b25seQ"}),
    # error data
    (t.UnsupportedProtocolVersionErrorData, {"supported": ["2026-07-28", "2025-11-25"], "requested": "1999-01-01"}),
    (t.MissingRequiredClientCapabilityErrorData, {"requiredCapabilities": {"elicitation": {"url": {}}}}),
    (
        t.URLElicitationRequiredErrorData,
        {
            "elicitations": [
                {"mode": "url", "message": "Link account", "elicitationId": "e1", "url": "https://a.example/l"}
            ]
        },
    ),
]


def _case_id(case: tuple[Any, Any]) -> str:
    return str(case[0].__name__)


@pytest.mark.parametrize(("tp", "doc"), CASES, ids=[_case_id(c) for c in CASES])
def test_round_trip(tp: Any, doc: Any) -> None:
    value, again = round_trip(tp, as_bytes(doc))
    assert isinstance(value, tp)
    assert again == doc


def test_every_struct_has_a_case() -> None:
    structs = {
        obj for name in t.__all__ if isinstance(obj := getattr(t, name), type) and issubclass(obj, msgspec.Struct)
    }
    covered = {tp for tp, _ in CASES}
    assert structs - covered == set()


# --- the specification's own examples (schema/2026-07-28/examples/<Type>/<name>.json, inlined) -------------
# schema/2025-11-25 ships no example files; every 2026-07-28 example whose directory names one of our Structs
# was checked when this table was written, and this is a selection of them.

SPEC_EXAMPLES: list[tuple[str, str, str]] = [
    (
        "AudioContent",
        "audio-wav-content",
        '{"type":"audio","data":"UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=","mimeType":"audio/wav"}',
    ),
    (
        "BlobResourceContents",
        "image-file-contents",
        '{"uri":"file:///example.png","mimeType":"image/png",'
        '"blob":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9'
        'awAAAABJRU5ErkJggg=="}',
    ),
    (
        "BooleanSchema",
        "boolean-input-schema",
        '{"type":"boolean","title":"Display Name","description":"Description text","default":false}',
    ),
    (
        "CallToolRequestParams",
        "tool-call-params-with-progress-token",
        '{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        '"io.modelcontextprotocol/clientInfo":{"name":"ExampleClient","version":"1.0.0"},'
        '"io.modelcontextprotocol/clientCapabilities":{},"progressToken":"oivaizmir"},'
        '"name":"build_simulation","arguments":{"city":"Micropolis"}}',
    ),
    (
        "CallToolResult",
        "invalid-tool-input-error",
        '{"resultType":"complete","content":[{"type":"text",'
        '"text":"Invalid departure date: must be in the future. Current date is 08/08/2025."}'
        '],"isError":true}',
    ),
    (
        "CallToolResult",
        "result-with-array-structured-content",
        '{"resultType":"complete","content":[{"type":"text",'
        '"text":"Found 2 users: Alice (alice@example.com) and Bob (bob@example.com)."}],'
        '"structuredContent":[{"id":"1","name":"Alice","email":"alice@example.com"},'
        '{"id":"2","name":"Bob","email":"bob@example.com"}]}',
    ),
    (
        "CallToolResult",
        "result-with-structured-content",
        '{"resultType":"complete","content":[{"type":"text","text":"{\\"temperature\\": 22.5,'
        ' \\"conditions\\": \\"Partly cloudy\\", \\"humidity\\": 65}"}],'
        '"structuredContent":{"temperature":22.5,"conditions":"Partly cloudy","humidity":65}}',
    ),
    (
        "CancelledNotificationParams",
        "user-requested-cancellation",
        '{"requestId":"123","reason":"User requested cancellation"}',
    ),
    (
        "ClientCapabilities",
        "elicitation-form-and-url-mode-support",
        '{"elicitation":{"form":{},"url":{}}}',
    ),
    (
        "ClientCapabilities",
        "extensions-ui-mime-types",
        '{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}',
    ),
    (
        "CompleteRequestParams",
        "prompt-argument-completion-with-context",
        '{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        '"io.modelcontextprotocol/clientInfo":{"name":"ExampleClient","version":"1.0.0"},'
        '"io.modelcontextprotocol/clientCapabilities":{}},"ref":{"type":"ref/prompt",'
        '"name":"code_review"},"argument":{"name":"framework","value":"fla"},'
        '"context":{"arguments":{"language":"python"}}}',
    ),
    (
        "CompleteResult",
        "multiple-completion-values-with-more-available",
        '{"resultType":"complete","completion":{"values":["python","pytorch","pyside"],"total":10,"hasMore":true}}',
    ),
    (
        "CreateMessageRequest",
        "sampling-request",
        '{"method":"sampling/createMessage","params":{"messages":[{"role":"user",'
        '"content":{"type":"text","text":"What is the capital of France?"}}],'
        '"modelPreferences":{"hints":[{"name":"claude-3-sonnet"}],"intelligencePriority":0.8,'
        '"speedPriority":0.5},"systemPrompt":"You are a helpful assistant.","maxTokens":100}}',
    ),
    (
        "CreateMessageRequestParams",
        "follow-up-with-tool-results",
        '{"messages":[{"role":"user","content":{"type":"text",'
        '"text":"What\'s the weather like in Paris and London?"}},{"role":"assistant",'
        '"content":[{"type":"tool_use","id":"call_abc123","name":"get_weather",'
        '"input":{"city":"Paris"}},{"type":"tool_use","id":"call_def456",'
        '"name":"get_weather","input":{"city":"London"}}]},{"role":"user",'
        '"content":[{"type":"tool_result","toolUseId":"call_abc123",'
        '"content":[{"type":"text","text":"Weather in Paris: 18°C, partly cloudy"}]},'
        '{"type":"tool_result","toolUseId":"call_def456","content":[{"type":"text",'
        '"text":"Weather in London: 15°C, rainy"}]}]}],"tools":[{"name":"get_weather",'
        '"description":"Get current weather for a city","inputSchema":{"type":"object",'
        '"properties":{"city":{"type":"string"}},"required":["city"]}}],"maxTokens":1000}',
    ),
    (
        "CreateMessageRequestParams",
        "request-with-tools",
        '{"messages":[{"role":"user","content":{"type":"text",'
        '"text":"What\'s the weather like in Paris and London?"}}],'
        '"tools":[{"name":"get_weather","description":"Get current weather for a city",'
        '"inputSchema":{"type":"object","properties":{"city":{"type":"string",'
        '"description":"City name"}},"required":["city"]}}],"toolChoice":{"mode":"auto"},'
        '"maxTokens":1000}',
    ),
    (
        "CreateMessageResult",
        "tool-use-response",
        '{"role":"assistant","content":[{"type":"tool_use","id":"call_abc123",'
        '"name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use",'
        '"id":"call_def456","name":"get_weather","input":{"city":"London"}}],'
        '"model":"claude-3-sonnet-20240307","stopReason":"toolUse"}',
    ),
    (
        "DiscoverResult",
        "server-capabilities-discovery",
        '{"resultType":"complete","supportedVersions":["2026-07-28"],'
        '"capabilities":{"tools":{},"resources":{}},'
        '"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"ExampleServer",'
        '"version":"1.0.0"}},'
        '"instructions":"This server provides weather and resource utilities. Prefer `get_wea'
        'ther` for forecast lookups.","ttlMs":3600000,"cacheScope":"public"}',
    ),
    (
        "ElicitRequest",
        "elicitation-request",
        '{"method":"elicitation/create","params":{"mode":"form",'
        '"message":"Please provide your GitHub username","requestedSchema":{"type":"object",'
        '"properties":{"name":{"type":"string","title":"GitHub Username",'
        '"description":"Your GitHub username"}},"required":["name"]}}}',
    ),
    (
        "ElicitRequestFormParams",
        "elicit-multiple-fields",
        '{"mode":"form","message":"Please provide your contact information",'
        '"requestedSchema":{"type":"object","properties":{"name":{"type":"string",'
        '"description":"Your full name"},"email":{"type":"string","format":"email",'
        '"description":"Your email address"},"age":{"type":"number","minimum":18,'
        '"description":"Your age"}},"required":["name","email"]}}',
    ),
    (
        "ElicitRequestURLParams",
        "elicit-sensitive-data",
        '{"mode":"url","url":"https://mcp.example.com/ui/set_api_key",'
        '"message":"Please provide your API key to continue."}',
    ),
    (
        "ElicitResult",
        "input-multiple-fields",
        '{"action":"accept","content":{"name":"Monalisa Octocat","email":"octocat@github.com","age":30}}',
    ),
    (
        "EmbeddedResource",
        "embedded-file-resource-with-annotations",
        '{"type":"resource","resource":{"uri":"file:///project/src/main.rs",'
        '"mimeType":"text/x-rust",'
        '"text":"fn main() {\\n    println!(\\"Hello world!\\");\\n}"},'
        '"annotations":{"audience":["user","assistant"],"priority":0.7,'
        '"lastModified":"2025-05-03T14:30:00Z"}}',
    ),
    (
        "GetPromptRequestParams",
        "get-code-review-prompt",
        '{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        '"io.modelcontextprotocol/clientInfo":{"name":"ExampleClient","version":"1.0.0"},'
        '"io.modelcontextprotocol/clientCapabilities":{}},"name":"code_review",'
        '"arguments":{"code":"def hello():\\n    print(\'world\')"}}',
    ),
    (
        "GetPromptResult",
        "code-review-prompt",
        '{"resultType":"complete","description":"Code review prompt",'
        '"messages":[{"role":"user","content":{"type":"text",'
        '"text":"Please review this Python code:\\ndef hello():\\n    print(\'world\')"}}]}',
    ),
    (
        "ImageContent",
        "image-png-content-with-annotations",
        '{"type":"image",'
        '"data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9'
        'awAAAABJRU5ErkJggg==","mimeType":"image/png","annotations":{"audience":["user"],'
        '"priority":0.9}}',
    ),
    (
        "InputRequests",
        "elicitation-and-sampling-input-requests",
        '{"github_login":{"method":"elicitation/create","params":{"mode":"form",'
        '"message":"Please provide your GitHub username","requestedSchema":{"type":"object",'
        '"properties":{"name":{"type":"string"}},"required":["name"]}}},'
        '"capital_of_france":{"method":"sampling/createMessage",'
        '"params":{"messages":[{"role":"user","content":{"type":"text",'
        '"text":"What is the capital of France?"}}],"maxTokens":100}}}',
    ),
    (
        "InputRequiredResult",
        "input-required-result-with-elicitation-and-sampling-and-request-state",
        '{"resultType":"input_required",'
        '"inputRequests":{"github_login":{"method":"elicitation/create",'
        '"params":{"message":"Please provide your GitHub username",'
        '"requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},'
        '"required":["name"]}}},"capital_of_france":{"method":"sampling/createMessage",'
        '"params":{"messages":[{"role":"user","content":{"type":"text",'
        '"text":"What is the capital of France?"}}],"maxTokens":100}}},'
        '"requestState":"eyJsb2NhdGlvbiI6Ik5ldyBZb3JrIn0"}',
    ),
    (
        "InputRequiredResult",
        "input-required-result-with-request-state-only",
        '{"resultType":"input_required","requestState":"eyJwcm9ncmVzcyI6IjUwJSIsInN0YXRlIjoicHJvY2Vzc2luZyJ9"}',
    ),
    (
        "ListPromptsResult",
        "prompts-list-with-cursor-and-ttl",
        '{"resultType":"complete","prompts":[{"name":"code_review",'
        '"title":"Request Code Review",'
        '"description":"Asks the LLM to analyze code quality and suggest improvements",'
        '"arguments":[{"name":"code","description":"The code to review","required":true}],'
        '"icons":[{"src":"https://example.com/review-icon.svg","mimeType":"image/svg+xml",'
        '"sizes":["any"]}]}],"nextCursor":"next-page-cursor","ttlMs":600000,'
        '"cacheScope":"public"}',
    ),
    (
        "ListResourceTemplatesResult",
        "resource-templates-list-with-cursor-and-ttl",
        '{"resultType":"complete","resourceTemplates":[{"uriTemplate":"file:///{path}",'
        '"name":"Project Files","title":"📁 Project Files",'
        '"description":"Access files in the project directory",'
        '"mimeType":"application/octet-stream",'
        '"icons":[{"src":"https://example.com/folder-icon.png","mimeType":"image/png",'
        '"sizes":["48x48"]}]}],"nextCursor":"next-page-cursor","ttlMs":3600000,'
        '"cacheScope":"public"}',
    ),
    (
        "ListResourcesResult",
        "resources-list-with-cursor-and-ttl",
        '{"resultType":"complete","resources":[{"uri":"file:///project/src/main.rs",'
        '"name":"main.rs","title":"Rust Software Application Main File",'
        '"description":"Primary application entry point","mimeType":"text/x-rust",'
        '"icons":[{"src":"https://example.com/rust-file-icon.png","mimeType":"image/png",'
        '"sizes":["48x48"]}]}],"nextCursor":"eyJwYWdlIjogM30=","ttlMs":600000,'
        '"cacheScope":"private"}',
    ),
    (
        "ListRootsResult",
        "multiple-root-directories",
        '{"roots":[{"uri":"file:///home/user/repos/frontend","name":"Frontend Repository"},'
        '{"uri":"file:///home/user/repos/backend","name":"Backend Repository"}]}',
    ),
    (
        "ListToolsResult",
        "tools-list-with-cursor-and-ttl",
        '{"resultType":"complete","tools":[{"name":"get_weather",'
        '"title":"Weather Information Provider",'
        '"description":"Get current weather information for a location",'
        '"inputSchema":{"type":"object","properties":{"location":{"type":"string",'
        '"description":"City name or zip code"}},"required":["location"]},'
        '"icons":[{"src":"https://example.com/weather-icon.png","mimeType":"image/png",'
        '"sizes":["48x48"]}]}],"nextCursor":"next-page-cursor","ttlMs":300000,'
        '"cacheScope":"public"}',
    ),
    (
        "LoggingMessageNotificationParams",
        "log-database-connection-failed",
        '{"level":"error","logger":"database","data":{"error":"Connection failed",'
        '"details":{"host":"localhost","port":5432}}}',
    ),
    (
        "ModelPreferences",
        "with-hints-and-priorities",
        '{"hints":[{"name":"claude-3-sonnet"},{"name":"claude"}],"costPriority":0.3,'
        '"speedPriority":0.8,"intelligencePriority":0.5}',
    ),
    (
        "NumberSchema",
        "number-input-schema",
        '{"type":"number","title":"Display Name","description":"Description text",'
        '"minimum":0,"maximum":100,"default":50}',
    ),
    (
        "PaginatedRequestParams",
        "list-with-cursor",
        '{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        '"io.modelcontextprotocol/clientInfo":{"name":"ExampleClient","version":"1.0.0"},'
        '"io.modelcontextprotocol/clientCapabilities":{}},"cursor":"eyJwYWdlIjogMn0="}',
    ),
    (
        "ProgressNotificationParams",
        "progress-message",
        '{"progressToken":"oivaizmir","progress":50,"total":100,"message":"Reticulating splines..."}',
    ),
    (
        "ReadResourceResult",
        "file-resource-contents",
        '{"resultType":"complete","contents":[{"uri":"file:///project/src/main.rs",'
        '"mimeType":"text/x-rust",'
        '"text":"fn main() {\\n    println!(\\"Hello world!\\");\\n}"}],"ttlMs":60000,'
        '"cacheScope":"private"}',
    ),
    (
        "Resource",
        "file-resource-with-annotations",
        '{"uri":"file:///project/README.md","name":"README.md",'
        '"title":"Project Documentation","mimeType":"text/markdown",'
        '"annotations":{"audience":["user"],"priority":0.8,'
        '"lastModified":"2025-01-12T15:00:58Z"}}',
    ),
    (
        "ResourceLink",
        "file-resource-link",
        '{"type":"resource_link","uri":"file:///project/src/main.rs","name":"main.rs",'
        '"description":"Primary application entry point","mimeType":"text/x-rust"}',
    ),
    (
        "SamplingMessage",
        "multiple-content-blocks",
        '{"role":"user","content":[{"type":"tool_result","toolUseId":"call_123",'
        '"content":[{"type":"text","text":"Result 1"}]},{"type":"tool_result",'
        '"toolUseId":"call_456","content":[{"type":"text","text":"Result 2"}]}]}',
    ),
    (
        "ServerCapabilities",
        "resources-all-notifications",
        '{"resources":{"subscribe":true,"listChanged":true}}',
    ),
    (
        "StringSchema",
        "email-input-schema",
        '{"type":"string","title":"Display Name","description":"Description text",'
        '"minLength":3,"maxLength":50,"format":"email","default":"user@example.com"}',
    ),
    (
        "SubscriptionsListenResult",
        "listen-closed",
        '{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}',
    ),
    (
        "TextResourceContents",
        "text-file-contents",
        '{"uri":"file:///example.txt","mimeType":"text/plain","text":"Resource content"}',
    ),
    (
        "TitledMultiSelectEnumSchema",
        "titled-color-multi-select-schema",
        '{"type":"array","title":"Color Selection",'
        '"description":"Choose your favorite colors","minItems":1,"maxItems":2,'
        '"items":{"anyOf":[{"const":"#FF0000","title":"Red"},{"const":"#00FF00",'
        '"title":"Green"},{"const":"#0000FF","title":"Blue"}]},"default":["#FF0000",'
        '"#00FF00"]}',
    ),
    (
        "TitledSingleSelectEnumSchema",
        "titled-color-select-schema",
        '{"type":"string","title":"Color Selection",'
        '"description":"Choose your favorite color","oneOf":[{"const":"#FF0000",'
        '"title":"Red"},{"const":"#00FF00","title":"Green"},{"const":"#0000FF",'
        '"title":"Blue"}],"default":"#FF0000"}',
    ),
    (
        "Tool",
        "tool-with-array-output-schema",
        '{"name":"list_users","title":"User List",'
        '"description":"Returns a list of all users","inputSchema":{"type":"object",'
        '"properties":{}},"outputSchema":{"type":"array","items":{"type":"object",'
        '"properties":{"id":{"type":"string","description":"User ID"},'
        '"name":{"type":"string","description":"User name"},"email":{"type":"string",'
        '"description":"User email"}},"required":["id","name","email"]}}}',
    ),
    (
        "Tool",
        "tool-with-composition-input-schema",
        '{"name":"find_resource","title":"Resource Finder",'
        '"description":"Find a resource by ID or name","inputSchema":{"type":"object",'
        '"oneOf":[{"properties":{"id":{"type":"string","description":"Resource ID"}},'
        '"required":["id"]},{"properties":{"name":{"type":"string",'
        '"description":"Resource name"}},"required":["name"]}]}}',
    ),
    (
        "Tool",
        "with-explicit-draft-07-input-schema",
        '{"name":"calculate_sum","description":"Add two numbers",'
        '"inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",'
        '"properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}}',
    ),
    (
        "ToolResultContent",
        "get-weather-tool-result",
        '{"type":"tool_result","toolUseId":"call_abc123","content":[{"type":"text",'
        '"text":"Weather in Paris: 18°C, partly cloudy"}]}',
    ),
    (
        "ToolUseContent",
        "get-weather-tool-use",
        '{"type":"tool_use","id":"call_abc123","name":"get_weather","input":{"city":"Paris"}}',
    ),
    (
        "UntitledMultiSelectEnumSchema",
        "color-multi-select-schema",
        '{"type":"array","title":"Color Selection",'
        '"description":"Choose your favorite colors","minItems":1,"maxItems":2,'
        '"items":{"type":"string","enum":["Red","Green","Blue"]},"default":["Red","Green"]}',
    ),
    (
        "UntitledSingleSelectEnumSchema",
        "color-select-schema",
        '{"type":"string","title":"Color Selection",'
        '"description":"Choose your favorite color","enum":["Red","Green","Blue"],'
        '"default":"Red"}',
    ),
]

EXAMPLE_TYPES: dict[str, Any] = {"InputRequests": t.InputRequests}


@pytest.mark.parametrize(("type_name", "name", "text"), SPEC_EXAMPLES, ids=[f"{d}/{n}" for d, n, _ in SPEC_EXAMPLES])
def test_spec_example(type_name: str, name: str, text: str) -> None:
    tp = EXAMPLE_TYPES.get(type_name) or getattr(t, type_name)
    _, again = round_trip(tp, text.encode())
    assert again == json.loads(text)


def test_spec_example_with_undeclared_id_drops_it() -> None:
    # examples/ListRootsRequest/list-roots-request.json carries an "id" its (id-less) schema type does not have.
    value, again = round_trip(t.ListRootsRequest, b'{"id":"list-roots-example","method":"roots/list"}')
    assert value == t.ListRootsRequest()
    assert again == {"method": "roots/list"}


# --- behaviour the tables do not show --------------------------------------------------------------------


def test_unknown_fields_are_ignored_and_dropped() -> None:
    doc = {
        "content": [{"type": "text", "text": "ok", "x-future": 1}],
        "isError": False,
        "futureField": {"a": 1},
        "_meta": {"kept": True},
    }
    value, again = round_trip(t.CallToolResult, as_bytes(doc))
    assert again == {"content": [{"type": "text", "text": "ok"}], "_meta": {"kept": True}}
    assert value.meta == {"kept": True}
    tool = {"name": "a", "inputSchema": {"type": "object", "x-anything": [1]}, "outputFormat": "md"}
    assert round_trip(t.Tool, as_bytes(tool))[1] == {"name": "a", "inputSchema": {"type": "object", "x-anything": [1]}}


def test_unknown_fields_are_dropped_inside_meta_views_only() -> None:
    meta = {**R5_REQUEST_META, "com.example/extra": 1}
    params = msgspec.json.decode(as_bytes({"_meta": meta, "name": "kb.query"}), type=t.CallToolRequestParams)
    assert params.meta == meta  # `_meta` itself is a dict: every key survives
    view = t.convert(params.meta, t.RequestMetaObject)
    assert view.protocol_version == "2026-07-28"
    assert view.client_capabilities == t.ClientCapabilities(elicitation=t.ElicitationCapability(form={}))
    assert view.client_info == t.Implementation(name="probe", title="Probe CLI", version="0.3.1")
    assert view.log_level is UNSET


@pytest.mark.parametrize(
    ("tp", "field", "doc_absent", "doc_null"),
    [
        (t.CallToolResult, "structured_content", {"content": []}, {"content": [], "structuredContent": None}),
        (
            t.ToolResultContent,
            "structured_content",
            {"type": "tool_result", "toolUseId": "u", "content": []},
            {"type": "tool_result", "toolUseId": "u", "content": [], "structuredContent": None},
        ),
    ],
)
def test_absent_and_null_stay_apart(tp: Any, field: str, doc_absent: Any, doc_null: Any) -> None:
    absent, again_absent = round_trip(tp, as_bytes(doc_absent))
    null, again_null = round_trip(tp, as_bytes(doc_null))
    assert getattr(absent, field) is UNSET
    assert getattr(null, field) is None
    assert again_absent == doc_absent
    assert again_null == doc_null


def test_nullable_task_ttl_is_required_and_may_be_null() -> None:
    task, again = round_trip(t.Task, as_bytes({**TASK, "ttl": None}))
    assert task.ttl is None
    assert again["ttl"] is None
    with pytest.raises(msgspec.ValidationError, match="ttl"):
        msgspec.json.decode(as_bytes({k: v for k, v in TASK.items() if k != "ttl"}), type=t.Task)


def test_is_error_is_a_bool_on_the_wire_only_when_true() -> None:
    absent = msgspec.json.decode(b'{"content":[]}', type=t.CallToolResult)
    false = msgspec.json.decode(b'{"content":[],"isError":false}', type=t.CallToolResult)
    true = msgspec.json.decode(b'{"content":[],"isError":true}', type=t.CallToolResult)
    assert absent.is_error is False and false.is_error is False and true.is_error is True
    assert t.CallToolResult(content=[]).is_error == False  # noqa: E712 - what a user writes
    assert msgspec.json.encode(absent) == msgspec.json.encode(false) == b'{"content":[]}'
    assert msgspec.json.encode(true) == b'{"content":[],"isError":true}'
    assert t.to_builtins(t.CallToolResult(content=[], is_error=False)) == {"content": []}


def test_null_is_rejected_where_the_spec_does_not_allow_it() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"content":[],"isError":null}', type=t.CallToolResult)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"name":"a","title":null,"inputSchema":{"type":"object"}}', type=t.Tool)


def test_meta_is_kept_under_its_wire_name() -> None:
    cases: list[tuple[Any, dict[str, Any]]] = [
        (t.TextContent, {"type": "text", "text": "x", "_meta": {"a": 1}}),
        (t.Resource, {"uri": "u", "name": "n", "_meta": {"a": {"b": [1]}}}),
        (t.Root, {"uri": "file:///", "_meta": {}}),
        (t.ProgressNotificationParams, {"progressToken": 1, "progress": 1, "_meta": {"a": None}}),
        (t.Result, {"_meta": {"io.modelcontextprotocol/serverInfo": SERVER}}),
    ]
    for tp, doc in cases:
        value, again = round_trip(tp, as_bytes(doc))
        assert value.meta == doc["_meta"]
        assert again == doc
    assert msgspec.json.encode(t.Result(meta={"k": 1})) == b'{"_meta":{"k":1}}'


def test_content_blocks_decode_to_their_kind() -> None:
    blocks = [TEXT_BLOCK, IMAGE_BLOCK, AUDIO_BLOCK, LINK_BLOCK, EMBEDDED_BLOCK]
    decoded = msgspec.json.decode(as_bytes(blocks), type=list[t.ContentBlock])
    assert [type(b) for b in decoded] == [
        t.TextContent,
        t.ImageContent,
        t.AudioContent,
        t.ResourceLink,
        t.EmbeddedResource,
    ]
    assert json.loads(msgspec.json.encode(decoded)) == blocks
    sampling = [TEXT_BLOCK, {"type": "tool_use", "id": "1", "name": "n", "input": {}}]
    assert [type(b) for b in msgspec.json.decode(as_bytes(sampling), type=list[t.SamplingContent])] == [
        t.TextContent,
        t.ToolUseContent,
    ]


def test_a_tag_is_also_an_attribute_of_the_same_name() -> None:
    blocks = msgspec.json.decode(
        as_bytes([TEXT_BLOCK, IMAGE_BLOCK, AUDIO_BLOCK, LINK_BLOCK, EMBEDDED_BLOCK]), type=list[t.ContentBlock]
    )
    assert [b.type for b in blocks] == ["text", "image", "audio", "resource_link", "resource"]
    assert [b.text for b in blocks if b.type == "text"] == [TEXT_BLOCK["text"]]
    sampling = msgspec.json.decode(
        as_bytes([{"type": "tool_use", "id": "1", "name": "n", "input": {}}]), type=list[t.SamplingContent]
    )
    assert sampling[0].type == "tool_use"
    assert t.ToolResultContent(tool_use_id="1", content=[]).type == "tool_result"
    assert t.PromptReference(name="p").type == "ref/prompt"
    assert t.ResourceTemplateReference(uri="x://{y}").type == "ref/resource"
    assert t.StringSchema().type == "string"
    assert t.BooleanSchema().type == "boolean"
    assert t.UntitledMultiSelectEnumSchema(items=t.UntitledEnumItems(enum=["a"])).type == "array"
    assert t.ListRootsRequest().method == "roots/list"
    # an attribute, not a field: the tag is written once on the wire, and a constructor does not take it
    assert "type" not in t.TextContent.__struct_fields__
    assert msgspec.json.encode(t.TextContent(text="hi")) == b'{"type":"text","text":"hi"}'
    with pytest.raises(TypeError):
        t.TextContent(text="hi", type="image")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("tp", "doc"),
    [
        (t.ContentBlock, {"type": "tool_use", "id": "1", "name": "n", "input": {}}),  # sampling-only kind
        (t.SamplingContent, LINK_BLOCK),  # not allowed in sampling
        (t.ContentBlock, {"type": "video", "data": ""}),
        (t.ContentBlock, {"text": "no type"}),
        (t.CompletionReference, {"type": "ref/tool", "name": "x"}),
    ],
)
def test_wrong_or_missing_tag_is_rejected(tp: Any, doc: Any) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(as_bytes(doc), type=tp)


def test_annotations_fields() -> None:
    block = msgspec.json.decode(as_bytes({**TEXT_BLOCK, "annotations": ANNOTATIONS}), type=t.TextContent)
    assert isinstance(block.annotations, t.Annotations)
    assert block.annotations.audience == ["user", "assistant"]
    assert block.annotations.priority == 0.25
    assert block.annotations.last_modified == "2026-02-01T08:30:00Z"
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"audience":["system"]}', type=t.Annotations)


def test_icons_and_title_versus_name() -> None:
    impl = msgspec.json.decode(
        as_bytes({"name": "kb", "version": "1", "icons": [ICON, DARK_ICON]}), type=t.Implementation
    )
    assert impl.title is UNSET
    assert isinstance(impl.icons, list)
    assert [i.theme for i in impl.icons] == [UNSET, "dark"]
    assert impl.icons[0].sizes == ["32x32", "64x64"]
    prompt = msgspec.json.decode(b'{"name":"summarise","title":"Summarise entries"}', type=t.Prompt)
    assert (prompt.name, prompt.title) == ("summarise", "Summarise entries")
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"src":"https://x/a.png","theme":"sepia"}', type=t.Icon)


def test_prompt_and_sampling_messages_nest_content() -> None:
    result = msgspec.json.decode(
        as_bytes({"messages": [{"role": "user", "content": EMBEDDED_BLOCK}]}), type=t.GetPromptResult
    )
    content = result.messages[0].content
    assert isinstance(content, t.EmbeddedResource)
    assert content.resource.narrow() == t.TextResourceContents(
        uri="kb://entries/42", mime_type="text/markdown", text="# Tagged unions\n..."
    )
    single = msgspec.json.decode(as_bytes({"role": "user", "content": IMAGE_BLOCK}), type=t.SamplingMessage)
    assert isinstance(single.content, t.ImageContent)
    many = msgspec.json.decode(
        as_bytes({"role": "user", "content": [{"type": "tool_result", "toolUseId": "u", "content": [LINK_BLOCK]}]}),
        type=t.SamplingMessage,
    )
    assert isinstance(many.content, list)
    inner = many.content[0]
    assert isinstance(inner, t.ToolResultContent)
    assert isinstance(inner.content[0], t.ResourceLink)


def test_resource_contents_superset_and_narrowing() -> None:
    text = msgspec.json.decode(b'{"uri":"a","text":"hi","_meta":{"k":1}}', type=t.ResourceContents)
    blob = msgspec.json.decode(b'{"uri":"b","mimeType":"image/png","blob":"AAEC"}', type=t.ResourceContents)
    assert text.narrow() == t.TextResourceContents(uri="a", text="hi", meta={"k": 1})
    assert blob.narrow() == t.BlobResourceContents(uri="b", mime_type="image/png", blob="AAEC")
    built = t.TextResourceContents(uri="c", text="x")
    assert built.narrow() is built
    with pytest.raises(msgspec.ValidationError, match="text"):
        msgspec.json.decode(b'{"uri":"a"}', type=t.ResourceContents)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"uri":"a","blob":"AAEC"}', type=t.TextResourceContents)
    # the spec-named classes fit every field typed ResourceContents
    result = t.ReadResourceResult(contents=[built, t.BlobResourceContents(uri="d", blob="AA==")])
    assert json.loads(msgspec.json.encode(result)) == {
        "contents": [{"uri": "c", "text": "x"}, {"uri": "d", "blob": "AA=="}]
    }


def test_elicit_params_superset_and_narrowing() -> None:
    form = msgspec.json.decode(as_bytes({"message": "m", "requestedSchema": FORM_SCHEMA}), type=t.ElicitRequestParams)
    url = msgspec.json.decode(
        b'{"mode":"url","message":"m","url":"https://x.example","elicitationId":"e"}', type=t.ElicitRequestParams
    )
    assert form.narrow() == t.ElicitRequestFormParams(message="m", requested_schema=FORM_SCHEMA)
    assert url.narrow() == t.ElicitRequestURLParams(message="m", url="https://x.example", elicitation_id="e")
    with pytest.raises(msgspec.ValidationError, match="requestedSchema"):
        msgspec.json.decode(b'{"message":"m"}', type=t.ElicitRequestParams)
    with pytest.raises(msgspec.ValidationError, match="url"):
        msgspec.json.decode(b'{"mode":"url","message":"m"}', type=t.ElicitRequestParams)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"mode":"form","message":"m","url":"u"}', type=t.ElicitRequestURLParams)


def test_constant_fields_are_always_on_the_wire() -> None:
    assert json.loads(msgspec.json.encode(t.ElicitRequestURLParams(message="m", url="https://x.example"))) == {
        "mode": "url",
        "message": "m",
        "url": "https://x.example",
    }
    assert msgspec.json.encode(t.InputRequiredResult(request_state="s")) == (
        b'{"resultType":"input_required","requestState":"s"}'
    )
    assert msgspec.json.encode(t.NumberSchema()) == b'{"type":"number"}'
    assert msgspec.json.encode(t.BooleanSchema()) == b'{"type":"boolean"}'
    assert msgspec.json.encode(t.ListRootsRequest()) == b'{"method":"roots/list"}'
    assert msgspec.json.encode(t.TextContent(text="")) == b'{"type":"text","text":""}'
    assert msgspec.json.encode(t.PromptReference(name="p")) == b'{"type":"ref/prompt","name":"p"}'


def test_results_carry_no_result_type_unless_set() -> None:
    result = t.CallToolResult(content=[t.TextContent(text="hi")])
    assert msgspec.json.encode(result) == b'{"content":[{"type":"text","text":"hi"}]}'
    result.result_type = "complete"
    assert json.loads(msgspec.json.encode(result))["resultType"] == "complete"
    assert all(issubclass(tp, t.Result) for tp in (t.ElicitResult, t.CreateMessageResult, t.ListRootsResult))


def test_input_required_result_decodes_each_input_request() -> None:
    doc = {
        "resultType": "input_required",
        "inputRequests": {
            "a": {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": FORM_SCHEMA}},
            "b": {"method": "sampling/createMessage", "params": SAMPLING_PARAMS},
            "c": {"method": "roots/list", "params": {}},
        },
    }
    value, again = round_trip(t.InputRequiredResult, as_bytes(doc))
    assert isinstance(value.input_requests, dict)
    kinds = {k: type(v) for k, v in value.input_requests.items()}
    assert kinds == {"a": t.ElicitRequest, "b": t.CreateMessageRequest, "c": t.ListRootsRequest}
    assert again == doc
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"inputRequests":{"x":{"method":"tools/call","params":{}}}}', type=t.InputRequiredResult)
    # decoded without resultType (it is never absent on the wire, but the default is the right value)
    assert msgspec.json.decode(b'{"requestState":"s"}', type=t.InputRequiredResult).result_type == "input_required"


def test_input_responses_are_converted_by_the_caller() -> None:
    doc = {
        "name": "kb.delete",
        "inputResponses": {
            "ok": {"action": "accept", "content": {"sure": True}},
            "llm": {"role": "assistant", "content": TEXT_BLOCK, "model": "m"},
            "roots": {"roots": [{"uri": "file:///srv"}]},
        },
    }
    params = msgspec.json.decode(as_bytes(doc), type=t.CallToolRequestParams)
    assert isinstance(params.input_responses, dict)
    assert t.convert(params.input_responses["ok"], t.ElicitResult) == t.ElicitResult(
        action="accept", content={"sure": True}
    )
    llm = t.convert(params.input_responses["llm"], t.CreateMessageResult)
    assert llm.content == t.TextContent(text="3 entries match")
    assert t.convert(params.input_responses["roots"], t.ListRootsResult).roots == [t.Root(uri="file:///srv")]
    with pytest.raises(msgspec.ValidationError):
        t.convert(params.input_responses["roots"], t.ElicitResult)


def test_discover_result_and_caching_hints() -> None:
    doc = {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"prompts": {}},
        "ttlMs": 60000,
        "cacheScope": "public",
    }
    value, again = round_trip(t.DiscoverResult, as_bytes(doc))
    assert value.capabilities.prompts == t.PromptsCapability()
    assert (value.ttl_ms, value.cache_scope) == (60000, "public")
    assert again == doc
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"tools":[],"cacheScope":"shared"}', type=t.ListToolsResult)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"tools":[],"ttlMs":1.5}', type=t.ListToolsResult)


def test_schemas_are_kept_verbatim() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"n": {"type": "integer"}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/n", "x-mcp-header": "A"}},
        "if": {"required": ["a"]},
        "then": {"properties": {"a": {"minimum": 1.5}}},
    }
    tool = msgspec.json.decode(as_bytes({"name": "x", "inputSchema": schema, "outputSchema": {}}), type=t.Tool)
    assert tool.input_schema == schema
    assert json.loads(msgspec.json.encode(tool))["inputSchema"] == schema


def test_elicit_result_values() -> None:
    # schema.ts types the values `string | number | boolean | string[]`; schema.json narrows number to integer.
    doc = {"action": "accept", "content": {"i": 3, "f": 0.5, "b": True, "s": "x", "l": ["a"]}}
    value, again = round_trip(t.ElicitResult, as_bytes(doc))
    assert isinstance(value.content, dict)
    assert [type(v) for v in value.content.values()] == [int, float, bool, str, list]
    assert again == doc
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"action":"accept","content":{"o":{"nested":1}}}', type=t.ElicitResult)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"action":"ignore"}', type=t.ElicitResult)


def test_wire_names_are_the_specs_camel_case() -> None:
    allowed = re.compile(r"^(_meta|io\.modelcontextprotocol/[A-Za-z]+|[a-z][A-Za-z0-9]*)$")
    for name in t.__all__:
        obj = getattr(t, name)
        if not (isinstance(obj, type) and issubclass(obj, msgspec.Struct)):
            continue
        for field in msgspec.structs.fields(obj):
            assert allowed.match(field.encode_name), (name, field.encode_name)
            if field.name == "meta":
                assert field.encode_name == "_meta"
    fields = {f.name: f.encode_name for f in msgspec.structs.fields(t.Implementation)}
    assert fields["website_url"] == "websiteUrl"
    fields = {f.name: f.encode_name for f in msgspec.structs.fields(t.CacheableResult)}
    assert (fields["ttl_ms"], fields["result_type"]) == ("ttlMs", "resultType")


def test_optional_fields_default_to_unset_and_are_keyword_only() -> None:
    for name in t.__all__:
        obj = getattr(t, name)
        if not (isinstance(obj, type) and issubclass(obj, msgspec.Struct)):
            continue
        params = inspect.signature(obj).parameters.values()
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params), name
        # msgspec's own metaclass: a metaclass defined in Python would cost every instance msgspec's fast call
        assert type(obj) is msgspec.StructMeta, name
        assert not obj.__struct_config__.forbid_unknown_fields, name
        for field in msgspec.structs.fields(obj):
            if (name, field.name) == ("CallToolResult", "is_error"):  # a bool, left off the wire when false
                assert field.default is False
                continue
            assert field.default in (msgspec.NODEFAULT, UNSET, "url", "input_required", "number"), (name, field)
    with pytest.raises(TypeError):
        t.Root("file:///")  # type: ignore[call-arg]


def test_helpers() -> None:
    result = t.ListToolsResult(tools=[t.Tool(name="a", input_schema={"type": "object"})], ttl_ms=0)
    assert t.to_builtins(result) == {"tools": [{"name": "a", "inputSchema": {"type": "object"}}], "ttlMs": 0}
    assert t.convert({"name": "a", "inputSchema": {"type": "object"}}, t.Tool) == t.Tool(
        name="a", input_schema={"type": "object"}
    )
    with pytest.raises(msgspec.ValidationError):
        t.convert({"name": "a", "input_schema": {"type": "object"}}, t.Tool)  # attribute names are not wire names
    block = t.convert({"type": "audio", "data": WAV, "mimeType": "audio/wav"}, t.ContentBlock)
    assert isinstance(block, t.AudioContent)


def test_module_constants_and_exports() -> None:
    assert t.LATEST_PROTOCOL_VERSION == "2026-07-28"
    assert t.LEGACY_PROTOCOL_VERSIONS == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    assert len(set(t.__all__)) == len(t.__all__)
    assert all(hasattr(t, name) for name in t.__all__)
    assert t.ResourceReference is t.ResourceTemplateReference
    assert t.EmptyResult is t.Result


def test_the_rarely_used_types_are_created_on_first_use_and_belong_to_types() -> None:
    import ast
    import inspect

    from jsonrpc_mcp.mcp import _types_lazy

    # the one list of lazy names is exactly what the lazy module defines (classes and type aliases)
    tree = ast.parse(inspect.getsource(_types_lazy))
    defined = {node.name for node in tree.body if isinstance(node, ast.ClassDef) and not node.name.startswith("_")}
    defined |= {
        node.target.id
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and not node.target.id.startswith("_")
    }
    assert defined == t._LAZY
    assert set(t.__all__) >= t._LAZY
    for name in t._LAZY:
        obj = getattr(t, name)
        assert obj is getattr(_types_lazy, name)
        if isinstance(obj, type):
            assert obj.__module__ == t.__name__
    assert set(dir(t)) >= t._LAZY
    with pytest.raises(AttributeError):
        t.NoSuchType  # noqa: B018


def test_a_server_process_does_not_create_the_rarely_used_types() -> None:
    import subprocess
    import sys

    code = "import sys, jsonrpc_mcp, jsonrpc_mcp.transports.stdio; print('jsonrpc_mcp.mcp._types_lazy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
