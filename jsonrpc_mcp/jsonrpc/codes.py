"""JSON-RPC 2.0 and MCP error codes (L0: no imports)."""

from __future__ import annotations

__all__ = (
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "RESOURCE_NOT_FOUND",
    "URL_ELICITATION_REQUIRED",
    "HEADER_MISMATCH",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "CONNECTION_CLOSED",
    "REQUEST_TIMEOUT",
    "UNAVAILABLE",
)

# JSON-RPC 2.0
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# MCP, handshake revisions (2024-11-05 .. 2025-11-25)
RESOURCE_NOT_FOUND = -32002
URL_ELICITATION_REQUIRED = -32042

# MCP 2026-07-28
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

# jsonrpc-mcp's own, in the range JSON-RPC leaves to implementations (docs/spec-decisions.md)
INSUFFICIENT_SCOPE = -32011  # the authenticated principal lacks a scope the operation needs
#: A shared service the server depends on (the Redis of several workers) cannot be reached: retry later.
UNAVAILABLE = -32012

# Local-only conditions: raised to callers of this library, never written to the wire.
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
AUTHORIZATION_FAILED = -32003
