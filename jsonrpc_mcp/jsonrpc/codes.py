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
    "BUSY",
    "INSUFFICIENT_SCOPE",
    "LEGACY_INSUFFICIENT_SCOPE",
    "LEGACY_UNAVAILABLE",
    "AUTHORIZATION_FAILED",
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

# jsonrpc-mcp's own, outside the range JSON-RPC reserves (-32768..-32000), as 2026-07-28 asks of new codes; the last
# digits are those of the codes earlier releases used (docs/spec-decisions.md, 103).
#: Too many requests: a rate limit, the requests in flight, a task quota (Streamable HTTP answers 429).
BUSY = -31010
INSUFFICIENT_SCOPE = -31011  # the authenticated principal lacks a scope the operation needs
#: A shared service the server depends on (the Redis of several workers) cannot be reached: retry later.
UNAVAILABLE = -31012

# What earlier releases of jsonrpc-mcp sent for the last two (busy was -32010), from the legacy sub-range
# -32000..-32019: never sent now; a client reads them as the codes above in a handshake-era session only, for servers
# of those releases.
LEGACY_INSUFFICIENT_SCOPE = -32011
LEGACY_UNAVAILABLE = -32012

# Local-only conditions: raised to callers of this library, never written to the wire, never read from it (a peer's
# error of these codes is its own, and is no error of these kinds).
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
AUTHORIZATION_FAILED = -32003
