"""Applications built on the library: the knowledge server (:mod:`jsonrpc_mcp.examples.knowledge`)."""

__all__ = ()
