"""MCP on the JSON-RPC core: types, versions, sessions, the server and the client session."""

__all__ = ()
