"""Slow and surplus connections under uvicorn: header and body deadlines, and a cap on open connections (L6 helper
of :mod:`~jsonrpc_mcp.transports.http_serve`; needs the ``http`` extra).

uvicorn closes a connection that stays idle *between* requests (``timeout_keep_alive``), but not one that never
finishes its request: a peer that trickles its header lines forever, or connects and sends nothing, holds a file
descriptor until the process runs out of them. :func:`guarded_protocol` makes a subclass of uvicorn's own HTTP
protocol (httptools when installed, else h11 — uvicorn's ``"auto"`` choice), given to ``uvicorn.Config(http=...)``,
its public extension point. HTTP is still parsed by uvicorn; the subclass only arms timers on the protocol's own
events:

* **headers**: armed when a connection is made and when a request begins; disarmed once the request's headers are
  complete. On expiry the connection is closed.
* **body**: armed once the headers are complete; disarmed once the request's body is complete (at once for a
  request without one). On expiry the connection is closed. This is a backstop, a little later than the app's
  own body deadline (:class:`~jsonrpc_mcp.transports.http_asgi.McpAsgiApp` ``body_timeout``, which answers 408
  under any ASGI server): it also covers a body that never starts, which the app cannot time without a cancel
  scope on every request's first read.
* **connections**: past ``max_connections`` open connections a new one is closed as soon as it is accepted, before
  anything is read. This is a cap at accept time rather than uvicorn's ``limit_concurrency``, which is checked only
  once a request's headers are complete: connections that never complete their headers would all stay open under
  it, and they are the ones to bound. Closing the surplus at once costs it one descriptor for a moment only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

__all__ = ("guarded_protocol", "default_max_connections")

logger = logging.getLogger(__name__)

#: How much later than the app's body deadline uvicorn's backstop closes the connection (so the app's 408 wins).
BODY_GRACE = 1.0
_WARN_EVERY = 60.0


def default_max_connections() -> int:
    """Three quarters of this process's descriptor limit (``RLIMIT_NOFILE``), between 16 and 10,000: the rest is
    left for the listening socket, logs, databases and whatever the tools open."""
    try:
        import resource
    except ImportError:  # not on this platform (Windows): no descriptor limit to read
        return 1_000
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 10_000
    return max(16, min(10_000, soft * 3 // 4))


class _Deadlines:
    """The timers and the cap, shared by both protocol flavours (mixed in before uvicorn's class)."""

    header_timeout: float
    body_timeout: float | None
    max_connections: int

    loop: asyncio.AbstractEventLoop
    connections: set[Any]
    transport: asyncio.Transport

    _refused = False
    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _last_warning = [-_WARN_EVERY]  # (one list for all connections: the time of the last warning about the cap)

    def _over_capacity(self, transport: asyncio.Transport) -> bool:
        if len(self.connections) < self.max_connections:
            return False
        self._refused = True
        now = time.monotonic()
        if now - self._last_warning[0] >= _WARN_EVERY:
            self._last_warning[0] = now
            logger.warning(
                "refusing connections: %d are open, the most allowed (max_connections); more are closed at once",
                len(self.connections),
            )
        transport.close()
        return True

    def _arm_headers(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._expired, "its request headers")

    def _headers_done(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        if self.body_timeout is not None and self._body_timer is None:
            self._body_timer = self.loop.call_later(self.body_timeout + BODY_GRACE, self._expired, "its request body")

    def _body_done(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _disarm(self) -> None:
        self._body_done()
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expired(self, what: str) -> None:
        self._header_timer = self._body_timer = None
        if not self.transport.is_closing():
            logger.info("closing a connection that did not send %s in time", what)
            self.transport.close()


def guarded_protocol(
    *, header_timeout: float, body_timeout: float | None, max_connections: int, flavour: str = "auto"
) -> type[asyncio.Protocol]:
    """A uvicorn HTTP protocol class with these deadlines and this cap, for ``uvicorn.Config(http=...)``.

    ``flavour``: ``"httptools"``, ``"h11"``, or ``"auto"`` (httptools when it is installed, as uvicorn chooses).
    """
    if header_timeout <= 0 or (body_timeout is not None and body_timeout <= 0) or max_connections < 1:
        raise ValueError("header_timeout, body_timeout and max_connections must be positive")
    if flavour == "auto":
        try:
            import httptools  # noqa: F401
        except ImportError:
            flavour = "h11"
        else:
            flavour = "httptools"
    base = _httptools_protocol() if flavour == "httptools" else _h11_protocol() if flavour == "h11" else None
    if base is None:
        raise ValueError('flavour must be "httptools", "h11" or "auto"')
    settings = {"header_timeout": header_timeout, "body_timeout": body_timeout, "max_connections": max_connections}
    return type(base.__name__, (base,), settings)


def _httptools_protocol() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedHttpToolsProtocol(_Deadlines, HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if self._over_capacity(transport):
                return
            super().connection_made(transport)
            self._arm_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return  # never set up: nothing of uvicorn's to tear down
            self._disarm()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm_headers()  # (the next request of a kept-alive connection)

        def on_headers_complete(self) -> None:
            self._headers_done()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._body_done()
            super().on_message_complete()

    return GuardedHttpToolsProtocol


def _h11_protocol() -> type[asyncio.Protocol]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(_Deadlines, H11Protocol):
        # h11 reports no callback per header block: the state of the peer's side, read after each batch of bytes
        # uvicorn has handed it, says where the request stands (IDLE: headers pending; SEND_BODY; DONE).
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if self._over_capacity(transport):
                return
            super().connection_made(transport)
            self._arm_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            state = self.conn.their_state
            if state is h11.IDLE:
                self._arm_headers()
            elif state is h11.SEND_BODY:
                self._headers_done()
            else:
                self._headers_done()
                self._body_done()

    return GuardedH11Protocol
