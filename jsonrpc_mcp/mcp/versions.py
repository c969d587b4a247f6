"""Protocol revisions and eras (L2: pure data).

Two eras share one server: the *handshake* era (``initialize`` then a session; 2024-11-05 .. 2025-11-25) and the
*stateless* era (every request carries its version and capabilities in ``_meta``; 2026-07-28). The era is decided
per request, before the method is looked up (see :func:`jsonrpc_mcp.mcp.session.ServerSession`).
"""

from __future__ import annotations

from enum import Enum
from typing import Final

__all__ = (
    "CORE_TASKS_VERSION",
    "Era",
    "LATEST",
    "LATEST_HANDSHAKE",
    "HANDSHAKE_VERSIONS",
    "STATELESS_VERSIONS",
    "SUPPORTED_VERSIONS",
    "BATCH_VERSIONS",
    "negotiate",
    "era_of",
    "at_least",
    "META_PROTOCOL_VERSION",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_SERVER_INFO",
    "META_SUBSCRIPTION_ID",
)


class Era(Enum):
    HANDSHAKE = "handshake"
    STATELESS = "stateless"


STATELESS_VERSIONS: Final = ("2026-07-28",)
HANDSHAKE_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
SUPPORTED_VERSIONS: Final = STATELESS_VERSIONS + HANDSHAKE_VERSIONS
LATEST: Final = STATELESS_VERSIONS[0]
LATEST_HANDSHAKE: Final = HANDSHAKE_VERSIONS[0]
#: JSON-RPC batches exist only on this revision's wire (added in 2025-03-26, removed in 2025-06-18).
#: The one revision with tasks in its core protocol (2026-07-28 moved them to an extension).
CORE_TASKS_VERSION: Final = "2025-11-25"
BATCH_VERSIONS: Final = frozenset({"2025-03-26"})

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"


def negotiate(requested: str, offered: tuple[str, ...] = HANDSHAKE_VERSIONS) -> str:
    """The version to answer an ``initialize`` with: the client's if we speak it, else our latest (never an error)."""
    return requested if requested in offered else offered[0]


def era_of(version: str) -> Era:
    return Era.STATELESS if version in STATELESS_VERSIONS else Era.HANDSHAKE


def at_least(version: str, minimum: str) -> bool:
    """Revision comparison: revision names are ISO dates, so they order as strings."""
    return version >= minimum
