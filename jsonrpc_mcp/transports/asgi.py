"""The ASGI pieces of the Streamable HTTP app that code beside the transport builds on (L6): the typed aliases of
ASGI's scope, messages and callables, request :class:`Headers`, and the two small responses (:func:`send_bytes`, a
body with a status; :func:`send_error`, a JSON-RPC error body with an HTTP error status).

An HTTP policy (:class:`~jsonrpc_mcp.transports.http_policy.HttpPolicy`, the protected resource of
:mod:`jsonrpc_mcp.auth`) answers what it refuses with these, as the app does.
"""

from __future__ import annotations

from ._http_io import HeaderList, Headers, Message, Receive, Scope, Send, send_bytes, send_error

__all__ = ("Scope", "Message", "Receive", "Send", "Headers", "HeaderList", "send_bytes", "send_error")
