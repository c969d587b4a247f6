"""Serve a :class:`~jsonrpc_mcp.Server` over Streamable HTTP with uvicorn (L6; needs the ``http`` extra).

``jsonrpc-mcp serve APP --http 127.0.0.1:8000`` calls :func:`serve_http`. Any other ASGI server can run the app
directly; build it with :class:`~jsonrpc_mcp.transports.http_asgi.McpAsgiApp`::

    # app.py                                  # then: uvicorn app:app   or   hypercorn app:app
    from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
    from myserver import server
    app = McpAsgiApp(server, allowed_hosts=["mcp.example.com"])

Shutdown is graceful: on SIGINT/SIGTERM uvicorn stops accepting connections, gives open ones
``graceful_timeout`` seconds, and the ASGI lifespan shutdown then ends every session.

Slow and surplus peers (:mod:`._uvicorn_guard`): a connection must send its request headers within
``header_timeout`` seconds (10 by default) and a request's body within ``body_timeout`` (30, an option of the
app: it answers 408), else it is closed; at most ``max_connections`` connections are open at once (by default three
quarters of the process's descriptor limit), and one more is closed as soon as it is accepted. A connection idle
between requests is closed after ``keep_alive`` seconds (5, uvicorn's own default; behind a proxy that reuses its
connections, make it longer than the proxy's idle timeout).
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Any

from ..addresses import is_loopback_host
from ..errors import MissingExtra
from ._uvicorn_guard import default_max_connections, guarded_protocol
from .http_asgi import McpAsgiApp

if TYPE_CHECKING:
    from ..mcp.server import Server

__all__ = ("serve_http", "serve_http_async", "make_uvicorn_server", "bind_socket")

logger = logging.getLogger(__name__)


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError:
        raise MissingExtra(f"Streamable HTTP needs uvicorn: {MissingExtra.install('http')}") from None
    return uvicorn


def make_uvicorn_server(
    server: Server,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    path: str = "/mcp",
    log_level: str = "warning",
    graceful_timeout: float = 5.0,
    header_timeout: float = 10.0,
    max_connections: int | None = None,
    keep_alive: float = 5.0,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    **app_options: Any,
) -> tuple[Any, McpAsgiApp]:
    """A configured ``uvicorn.Server`` for ``server`` and the app it runs (for embedding and tests).

    ``header_timeout``: seconds a connection may take to send a request's headers; ``max_connections``: open
    connections at most (``None``: three quarters of the descriptor limit); ``keep_alive``: seconds a connection
    may stay idle between requests before it is closed; ``ssl_certfile`` and ``ssl_keyfile``
    (PEM files; the key may sit in the certificate file): serve HTTPS. ``app_options`` go to
    :class:`McpAsgiApp` (``body_timeout`` among them).
    """
    if ssl_keyfile is not None and ssl_certfile is None:
        raise ValueError("ssl_keyfile needs ssl_certfile")
    if keep_alive <= 0:
        raise ValueError("keep_alive must be positive")
    uvicorn = _uvicorn()
    app = McpAsgiApp(server, path=path, **app_options)
    protocol = guarded_protocol(
        header_timeout=header_timeout,
        body_timeout=app.body_timeout,
        max_connections=max_connections if max_connections is not None else default_max_connections(),
    )
    if not is_loopback_host(host) and app_options.get("allowed_hosts") is None:
        logger.warning(
            "serving on %s, but only loopback Host names are accepted: pass allowed_hosts (the names clients use, "
            'or ["*"]) to accept others',
            host,
        )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_level=log_level,
        timeout_graceful_shutdown=graceful_timeout,
        timeout_keep_alive=keep_alive,
        access_log=False,
        # The app reads neither the client's address nor the scheme, so uvicorn's X-Forwarded-* rewriting (a
        # middleware around every request) has nothing to do; nor is the Server header of use to anyone.
        proxy_headers=False,
        server_header=False,
        http=protocol,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
    )
    return _stopping_server(uvicorn)(config, app), app


def _stopping_server(uvicorn: Any) -> Any:
    """``uvicorn.Server`` that ends the app's long-lived streams as its shutdown begins (uvicorn waits for open
    connections, ``graceful_timeout`` at most, before the ASGI lifespan ends: a ``subscriptions/listen`` stream
    would be cut off there, without the end that revision asks for)."""

    class StoppingServer(uvicorn.Server):  # type: ignore[misc]
        def __init__(self, config: Any, app: McpAsgiApp) -> None:
            super().__init__(config)
            self.mcp_app = app

        async def shutdown(self, sockets: Any = None) -> None:
            try:
                await self.mcp_app.end_streams()
            except Exception:
                logger.exception("ending the streams at shutdown failed")
            await super().shutdown(sockets)

    return StoppingServer


def bind_socket(host: str = "127.0.0.1", port: int = 8000) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free one), for :func:`serve_http`'s ``sock``: bound
    before serving, so an address in use is an :class:`OSError` here and the port is known before the first
    request."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def serve_http(
    server: Server,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    path: str = "/mcp",
    log_level: str = "warning",
    graceful_timeout: float = 5.0,
    header_timeout: float = 10.0,
    max_connections: int | None = None,
    keep_alive: float = 5.0,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    sock: socket.socket | None = None,
    **app_options: Any,
) -> None:
    """Serve until interrupted (blocking; runs its own asyncio loop). ``app_options`` go to :class:`McpAsgiApp`;
    the other settings are :func:`make_uvicorn_server`'s. ``sock``, a socket already listening
    (:func:`bind_socket`), is served instead of binding ``host:port``."""
    uv_server, _ = make_uvicorn_server(
        server,
        host,
        port,
        path=path,
        log_level=log_level,
        graceful_timeout=graceful_timeout,
        header_timeout=header_timeout,
        max_connections=max_connections,
        keep_alive=keep_alive,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        **app_options,
    )
    shown = sock.getsockname()[1] if sock is not None else port
    logger.info("serving MCP on %s://%s:%d%s", "https" if ssl_certfile else "http", host, shown, path)
    uv_server.run(sockets=[sock] if sock is not None else None)


async def serve_http_async(
    server: Server,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    path: str = "/mcp",
    sock: socket.socket | None = None,
    **options: Any,
) -> None:
    """Serve inside a running asyncio loop until cancelled (uvicorn needs asyncio; not trio)."""
    uv_server, _ = make_uvicorn_server(server, host, port, path=path, **options)
    await uv_server.serve(sockets=[sock] if sock is not None else None)
