"""jsonrpc-mcp: the Model Context Protocol on a hand-written JSON-RPC 2.0 core.

The names most users need are exported here: :class:`Server`, :class:`Client`, :class:`Context`, the error
types, and the wire types module :mod:`jsonrpc_mcp.types`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    AuthorizationError,
    ConnectionClosed,
    InsufficientScope,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    RequestTimeout,
    ResourceNotFound,
    RpcError,
    ServerUnreachable,
    SessionExpired,
    ToolError,
)
from .mcp import types
from .mcp.context import Context, InputRequired, MissingClientCapability
from .mcp.server import CacheHint, Server
from .mcp.tracing import use_global_tracing
from .transports.session_store import open_backends_with
from .version import __version__

__all__ = (
    "Server",
    "Client",
    "ClientSession",
    "Context",
    "CacheHint",
    "ResultCache",
    "types",
    "structured_data",
    "NoStructuredData",
    "ToolResultError",
    "InvalidToolOutput",
    "RpcError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "InternalError",
    "ResourceNotFound",
    "InsufficientScope",
    "RequestTimeout",
    "ConnectionClosed",
    "AuthorizationError",
    "SessionExpired",
    "ServerUnreachable",
    "ToolError",
    "InputRequired",
    "MissingClientCapability",
    "__version__",
)

if TYPE_CHECKING:
    from .client import Client
    from .mcp.client import ClientSession, InvalidToolOutput, NoStructuredData, ToolResultError, structured_data
    from .mcp.result_cache import ResultCache
    from .mcp.tracing import TracingHook
    from .transports.session_store import SharedBackend

#: The client side is imported on first use, so a server process never loads it (start-up time and memory).
_LAZY = {
    "Client": "client",
    "ClientSession": "mcp.client",
    "NoStructuredData": "mcp.client",
    "ToolResultError": "mcp.client",
    "InvalidToolOutput": "mcp.client",
    "structured_data": "mcp.client",
    "ResultCache": "mcp.result_cache",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def _otel_tracing() -> TracingHook | None:
    """The tracing of OpenTelemetry's global providers, once configured: :mod:`jsonrpc_mcp.otel`, imported the
    first time OpenTelemetry is (the core asks through :func:`~jsonrpc_mcp.mcp.tracing.use_global_tracing`)."""
    from .otel import global_tracing

    return global_tracing()


def _redis_backend(url: str) -> SharedBackend:
    """A backend given as a URL (``McpAsgiApp(backend="redis://...")``): the one that ships, imported then."""
    from .backends.redis import RedisBackend

    return RedisBackend(url)


use_global_tracing(_otel_tracing)
open_backends_with(_redis_backend)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
