"""JSON-RPC 2.0: envelope codec and a concurrent dispatcher. Knows nothing of MCP."""

__all__ = ()
