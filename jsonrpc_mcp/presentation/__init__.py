"""Presentation helpers for tool results that serve people and programs at once (L7).

* **Format gating** — a tool taking ``format`` (``markdown`` by default, ``json``, ``both``) answers with a
  ``text/markdown`` block, an ``application/json`` block (the machine contract, always last), or both; the MIME
  type sits in each text block's ``_meta.mimeType`` because ``TextContent`` has no such field.
  ``structuredContent`` is always set and matches the tool's ``outputSchema``. Over HTTP the
  ``X-Response-Format`` request header sets the default (an explicit argument wins).
* **One envelope** — every payload has a versioned ``kind`` (``entrySearchResults:v1``), ``status``, a one-line
  ``summary`` (≤ 80 characters), ``details``, ``nextSteps``, ``truncated``, and optional ``tokenUsage`` and
  ``rateLimit`` hints. The markdown stays under ~2,000 characters (a preview, saying so, when the result is
  bigger); structured data carries every item whole, and past 256 KiB leaves out whole items, naming them
  (``truncated``, ``omitted``); ``fullResult`` and a ``resource_link`` point to the whole result.
* **Needs input** — :func:`ask` elicits missing input when the client can answer (a real ``elicitation/create``,
  or an input-required round trip in the stateless era); otherwise the tool answers with a ``needsInput:v1``
  payload (fields, reason, suggestions per field, options).
* **Tool errors** — ``toolError:v1`` with a stable :class:`ErrorCode`, ``message``, ``retryable`` and
  ``details``, as an ``isError`` result; :func:`call_tool_with_retry` retries the retryable ones on the client.

See ``docs/knowledge-server.md`` for the wire output of a server built with them.
"""

from __future__ import annotations

from .needs_input import ask, check_answers, elicitation_schema
from .payloads import (
    DEFAULT_NEXT_STEPS,
    FORMATS,
    RETRYABLE_BY_DEFAULT,
    SUMMARY_MAX,
    ErrorCode,
    Format,
    InputField,
    InputOption,
    NeedsInput,
    Omitted,
    Payload,
    RateLimit,
    Status,
    TokenUsage,
    ToolErrorPayload,
    fit_summary,
    kind_of,
    output_schema,
    tool_error,
)
from .render import (
    DATA_LIMIT,
    FORMAT_HEADER,
    INLINE_LIMIT,
    MIME_JSON,
    MIME_MARKDOWN,
    Presented,
    fit_data,
    present,
    resolve_format,
)
from .retry import backoff_delay, call_tool_with_retry, is_retryable
from .tool import ToolFailure, presented_tool

__all__ = (
    "DATA_LIMIT",
    "DEFAULT_NEXT_STEPS",
    "FORMATS",
    "FORMAT_HEADER",
    "INLINE_LIMIT",
    "MIME_JSON",
    "MIME_MARKDOWN",
    "RETRYABLE_BY_DEFAULT",
    "SUMMARY_MAX",
    "ErrorCode",
    "Format",
    "InputField",
    "InputOption",
    "NeedsInput",
    "Omitted",
    "Payload",
    "Presented",
    "RateLimit",
    "Status",
    "TokenUsage",
    "ToolErrorPayload",
    "ToolFailure",
    "ask",
    "backoff_delay",
    "call_tool_with_retry",
    "check_answers",
    "elicitation_schema",
    "fit_data",
    "fit_summary",
    "is_retryable",
    "kind_of",
    "output_schema",
    "present",
    "presented_tool",
    "resolve_format",
    "tool_error",
)
