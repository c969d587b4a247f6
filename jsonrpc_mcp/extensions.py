"""Protocol extensions (SEP-2133): declare one, add methods and result kinds, wrap existing methods.

::

    from jsonrpc_mcp.extensions import Extension

    audit = Extension("com.example/audit", settings={"version": 1})
    server = Server("demo", extensions=[audit])

What an extension is, where it is declared and how it is negotiated (per session in the handshake era, per request
in the 2026-07-28 era, off unless both sides declare it): :mod:`jsonrpc_mcp.mcp.extensions`; a guide with a
runnable example: docs/extensions.md.
"""

from __future__ import annotations

from .mcp.extensions import Extension, ExtensionResult, ResultHandler, WrapNext, Wrapper, client_declares

__all__ = ("Extension", "ExtensionResult", "WrapNext", "Wrapper", "ResultHandler", "client_declares")
