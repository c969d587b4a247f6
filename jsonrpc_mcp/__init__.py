"""jsonrpc-mcp: the Model Context Protocol on a hand-written JSON-RPC 2.0 core.

The names most users need are exported here: :class:`Server`, :class:`Client`, :class:`Context`, the error
types, and the wire types module :mod:`jsonrpc_mcp.types`.
"""

from __future__ import annotations

from .client import Client
from .errors import (
    ConnectionClosed,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    RequestTimeout,
    ResourceNotFound,
    RpcError,
    ToolError,
)
from .mcp import types
from .mcp.client import ClientSession, NoStructuredData, structured_data
from .mcp.context import Context, InputRequired, MissingClientCapability
from .mcp.server import CacheHint, Server

__version__ = "0.1.0"

__all__ = (
    "Server",
    "Client",
    "ClientSession",
    "Context",
    "CacheHint",
    "types",
    "structured_data",
    "NoStructuredData",
    "RpcError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "InternalError",
    "ResourceNotFound",
    "RequestTimeout",
    "ConnectionClosed",
    "ToolError",
    "InputRequired",
    "MissingClientCapability",
    "__version__",
)
