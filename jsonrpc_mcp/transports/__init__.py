"""The transports: in-memory, stdio, TCP and Unix sockets, Streamable HTTP (server and client)."""

__all__ = ()
