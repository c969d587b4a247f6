"""Whether OpenTelemetry tracing runs, and the middleware chains with it in front (L4).

A server and a client trace by themselves once the application has configured OpenTelemetry (a tracer or meter
provider of an SDK): no code of theirs changes. Until then nothing of OpenTelemetry is imported and the chains are
the user's own. ``Server(tracing=False)`` / ``ClientSession(tracing=False)`` turn it off; a
:class:`jsonrpc_mcp.otel.Tracing` given as ``tracing=`` traces with its own providers instead of the global ones.

What the core asks of a tracing is :class:`TracingHook` (:mod:`jsonrpc_mcp.otel` implements it); the global one is
found through the lookup given to :func:`use_global_tracing` (the package gives one that imports
:mod:`jsonrpc_mcp.otel` on first use): the core never imports it.

The global providers are looked up without cost to a process that never imported OpenTelemetry (a provider can only
be set by code that did), and at most once a second while none is set (the lookup reads the environment): tracing
starts at the latest a second after the SDK is configured. The API lets a global provider be set only once, so one
found is kept.
"""

from __future__ import annotations

import os
import sys
from importlib.util import find_spec
from time import monotonic
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..jsonrpc.wire import RequestId
    from .middleware import ClientMiddleware, Middleware
    from .session import ServerSession

__all__ = ("TracingHook", "TracingSwitch", "tracing_switch", "use_global_tracing")

#: Seconds between two lookups of the global providers while none is configured.
RECHECK: Final = 1.0
#: What configures OpenTelemetry's global providers besides code: these environment variables.
_PROVIDER_VARIABLES: Final = ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")
_API_MODULES: Final = ("opentelemetry.trace", "opentelemetry.metrics")

_api_installed: bool | None = None


class TracingHook(Protocol):
    """What traces a server's and a client's messages (:class:`jsonrpc_mcp.otel.Tracing` is the one that ships)."""

    #: The server's outermost middleware while tracing runs.
    server: Middleware
    #: The client's outermost middleware while tracing runs.
    client: ClientMiddleware

    def server_sends(
        self,
        session: ServerSession,
        method: str,
        params: Any,
        request_id: RequestId | None,
        send: Callable[[Any], Awaitable[Any]],
    ) -> Awaitable[Any]:
        """What a server sends its client (``method`` with ``params``; ``send`` sends it), traced."""
        ...


#: The tracing of the global providers once they are configured: given by :func:`use_global_tracing`.
_global_lookup: Callable[[], TracingHook | None] | None = None


def use_global_tracing(lookup: Callable[[], TracingHook | None] | None) -> None:
    """Where the automatic tracing is found: ``lookup()`` is the tracing of OpenTelemetry's global providers, or
    ``None`` while none is configured (called at most once a second, and only once OpenTelemetry was imported or
    configured through the environment). ``None``: no automatic tracing."""
    global _global_lookup
    _global_lookup = lookup


def tracing_switch(tracing: TracingHook | bool | None) -> TracingSwitch | None:
    """The switch for a ``tracing=`` option: ``None`` (or ``True``) is automatic, ``False`` off, a ``Tracing``
    explicit. ``None`` comes back where tracing can never run (off, or automatic without OpenTelemetry installed)."""
    global _api_installed
    if tracing is False:
        return None
    if tracing is None or tracing is True:
        if _api_installed is None:
            _api_installed = find_spec("opentelemetry") is not None
        return TracingSwitch(None) if _api_installed else None
    if not (hasattr(tracing, "server") and hasattr(tracing, "client")):  # (a provider, or "on", would fail later)
        raise TypeError(f"tracing is None (automatic), False (off) or a jsonrpc_mcp.otel.Tracing, not {tracing!r}")
    return TracingSwitch(tracing)


class TracingSwitch:
    """The tracing of one server or client: a given :class:`~jsonrpc_mcp.otel.Tracing`, or the global providers'
    once they are configured."""

    __slots__ = ("_chain", "_next_lookup", "_tracing")

    def __init__(self, tracing: TracingHook | None) -> None:
        self._tracing = tracing
        self._next_lookup = 0.0
        self._chain: tuple[tuple[Any, ...], tuple[Any, ...]] = ((), ())  # (chain given, chain with tracing)

    def current(self) -> TracingHook | None:
        """The tracing to use now, or ``None`` while OpenTelemetry is not configured."""
        tracing = self._tracing
        if tracing is None:
            now = monotonic()
            if now < self._next_lookup:
                return None
            tracing = self._look_up(now)
        return tracing

    def server_chain(self, middleware: tuple[Any, ...]) -> tuple[Any, ...]:
        """A server's middleware, with the tracing outermost while it runs. (Read for every message: while
        OpenTelemetry is not configured, one clock read.)"""
        tracing = self._tracing
        if tracing is None:
            now = monotonic()
            if now < self._next_lookup:
                return middleware
            tracing = self._look_up(now)
            if tracing is None:
                return middleware
        return self._with(middleware, tracing.server)

    def client_chain(self, middleware: tuple[Any, ...]) -> tuple[Any, ...]:
        """A client's middleware, with the tracing outermost while it runs."""
        tracing = self.current()
        if tracing is None:
            return middleware
        return self._with(middleware, tracing.client)

    def _look_up(self, now: float) -> TracingHook | None:
        self._next_lookup = now + RECHECK
        tracing = self._tracing = _global_tracing()
        return tracing

    def _with(self, middleware: tuple[Any, ...], first: Any) -> tuple[Any, ...]:
        given, chain = self._chain
        if given is not middleware or not chain or chain[0] is not first:
            chain = (first, *middleware)
            self._chain = (middleware, chain)
        return chain


def _global_tracing() -> TracingHook | None:
    """The tracing of the global providers if one of them is configured."""
    lookup = _global_lookup
    if lookup is None:
        return None
    if not any(name in sys.modules for name in _API_MODULES) and not any(
        name in os.environ for name in _PROVIDER_VARIABLES
    ):
        return None
    return lookup()
