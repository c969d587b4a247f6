"""``Client``: the MCP client with a constructor for every transport (L7).

The protocol lives in :class:`jsonrpc_mcp.mcp.client.ClientSession` (L5), which talks over any
:class:`~jsonrpc_mcp.jsonrpc.streams.MessageStream`; this subclass only adds the ``connect_*`` context managers
that open a concrete transport (L6) first, so the layers keep pointing down.

::

    async with Client.connect_stdio(["python", "server.py"]) as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio

from .errors import RpcError, ServerUnreachable
from .mcp.client import ClientSession, refused_by_a_modern_server
from .mcp.groups import unwrap_group
from .mcp.result_cache import identity_of, token_identity
from .mcp.server import Server
from .transports.memory import memory_pair

if TYPE_CHECKING:
    import ssl

    from .transports.spawn import RestartPolicy

__all__ = ("Client",)

T = TypeVar("T")

logger = logging.getLogger(__name__)

#: How a server of the 2024-11-05 HTTP+SSE transport answers a POST to its event stream's URL.
_LEGACY_STATUSES: Final = (400, 404, 405)
#: The ``http_options`` of Streamable HTTP that the HTTP+SSE transport takes too.
_SSE_OPTIONS: Final = ("auth", "sse_read_timeout", "http_client", "max_event")


class Client(ClientSession):
    """A connection to one MCP server. Open it with one of the ``connect_*`` context managers; options are
    those of :class:`~jsonrpc_mcp.mcp.client.ClientSession` (handlers, ``protocol_version``, timeouts…)."""

    @classmethod
    @asynccontextmanager
    async def connect_stdio(
        cls,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
        cwd: str | None = None,
        stderr: int | None = None,
        restart: bool | RestartPolicy = True,
        **options: Any,
    ) -> AsyncIterator[Client]:
        """Spawn a server process and talk to it over its stdin/stdout (stopped on exit: EOF, SIGTERM, SIGKILL).

        The server gets a short default environment (``HOME``, ``PATH``... see
        :data:`~jsonrpc_mcp.transports.spawn.DEFAULT_ENV_VARS`) plus ``env``, not this process's whole environment
        unless ``inherit_env=True``. A server that exits before answering raises
        :class:`~jsonrpc_mcp.ConnectionClosed` naming its exit status.

        A server process that exits while connected (a crash, any exit status, a signal) is started again, in
        every era (decision 105): the requests it had not answered fail with ``ConnectionClosed`` naming its exit
        status (they are not sent again), the handshake is made again where the era has one (then the log level
        and the resource subscriptions), and the requests made meanwhile go to the new process. ``restart``: a
        :class:`~jsonrpc_mcp.transports.spawn.RestartPolicy` for the bounds (by default at most 5 restarts within
        60 s, 0.1 s after the exit doubling to 5 s; one more exit ends the connection, saying why), ``False``
        never starts it again. Leaving the block never does.
        """
        from .transports.spawn import RestartingProcessStream, spawn
        from .transports.spawn import RestartPolicy as Policy

        if not isinstance(restart, (bool, Policy)):
            raise TypeError(f"restart is True, False or a RestartPolicy, not {restart!r}")
        policy = Policy() if restart is True else restart or None
        origin = json.dumps([list(command), cwd, sorted((env or {}).items()), inherit_env])
        options.setdefault("cache_origin", "stdio:" + hashlib.sha256(origin.encode()).hexdigest())
        async with (
            spawn(command, env=env, inherit_env=inherit_env, cwd=cwd, stderr=stderr, restart=policy) as stream,
            cls.connect(stream, **options) as client,
        ):
            if isinstance(stream, RestartingProcessStream):
                stream.armed = True  # (connected: an exit from now on starts the server again)
            yield client

    @classmethod
    @asynccontextmanager
    async def connect_tcp(
        cls, host: str, port: int, *, ssl_context: ssl.SSLContext | None = None, **options: Any
    ) -> AsyncIterator[Client]:
        """NDJSON over a TCP connection (:class:`~jsonrpc_mcp.errors.ServerUnreachable` if none can be made); over
        TLS with ``ssl_context`` (e.g. :func:`ssl.create_default_context`: the server's certificate is checked)."""
        from .transports.socket import connect_tcp

        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        options.setdefault("cache_origin", f"tcp:{shown}")
        async with AsyncExitStack() as stack:
            stream = await _reach(stack, connect_tcp(host, port, ssl_context=ssl_context), shown)
            yield await stack.enter_async_context(cls.connect(stream, **options))

    @classmethod
    @asynccontextmanager
    async def connect_unix(cls, path: str, **options: Any) -> AsyncIterator[Client]:
        """NDJSON over a Unix socket (:class:`~jsonrpc_mcp.errors.ServerUnreachable` if none can be made)."""
        from .transports.socket import connect_unix

        options.setdefault("cache_origin", f"unix:{path}")
        async with AsyncExitStack() as stack:
            stream = await _reach(stack, connect_unix(path), path)
            yield await stack.enter_async_context(cls.connect(stream, **options))

    @classmethod
    @asynccontextmanager
    async def connect_http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        auth: Any = None,
        http_options: Mapping[str, Any] | None = None,
        legacy_sse: bool = True,
        **options: Any,
    ) -> AsyncIterator[Client]:
        """Streamable HTTP (needs the ``http`` extra). ``auth``: an ``httpx.Auth``, typically
        :class:`jsonrpc_mcp.auth.OAuth` (authorizes by itself when the server answers 401). ``http_options`` go to
        :func:`~jsonrpc_mcp.transports.http_client.connect_http` (``sse_read_timeout``, ``http_client``…).

        A server that answers the first request with HTTP 400, 404 or 405 may speak only the 2024-11-05 HTTP+SSE
        transport: the client then GETs ``url`` and, when an ``endpoint`` event comes, goes on over that transport
        (:meth:`connect_sse`), as the specification's backwards compatibility asks; else the first failure is
        raised. ``legacy_sse=False`` never tries it.

        A ``url`` that is not ``http://`` or ``https://`` is a :class:`ValueError`; a server that cannot be reached
        is :class:`~jsonrpc_mcp.errors.ServerUnreachable`, naming the host and the reason.
        """
        from .transports.http_client import connect_http

        http = dict(http_options or {})
        if auth is not None:
            http["auth"] = auth
        options.setdefault("cache_origin", url)
        options.setdefault("cache_auth", _authorization_context(headers, auth))
        refused: RpcError | None = None
        async with connect_http(url, headers=headers, timeout=timeout, **http) as stream:
            connected = False
            try:
                async with cls.connect(stream, **options) as client:
                    connected = True
                    yield client
            except RpcError as exc:
                if connected:
                    raise
                if stream.refused_status in _LEGACY_STATUSES and legacy_sse and not refused_by_a_modern_server(exc):
                    refused = exc  # (the HTTP+SSE transport is tried below, once this stream is closed)
                elif stream.unreachable is None:
                    raise
                else:
                    raise ServerUnreachable(stream.unreachable) from None
        if refused is None:
            return
        async with AsyncExitStack() as stack:
            try:
                legacy_options = {name: value for name, value in http.items() if name in _SSE_OPTIONS}
                client = await stack.enter_async_context(
                    cls.connect_sse(url, headers=headers, timeout=timeout, http_options=legacy_options, **options)
                )
            except (RpcError, ServerUnreachable) as legacy:
                logger.debug("the HTTP+SSE transport did not answer either: %s", legacy)
                raise refused from None
            yield client

    @classmethod
    @asynccontextmanager
    async def connect_sse(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        auth: Any = None,
        http_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AsyncIterator[Client]:
        """The 2024-11-05 HTTP+SSE transport (needs the ``http`` extra), for a server that speaks nothing newer:
        ``url`` is its event stream (``http://host:port/sse``, say). The handshake era only: with
        ``protocol_version="auto"`` (the default) the client asks for the newest handshake revision and the server
        answers with its own. ``http_options`` go to :func:`~jsonrpc_mcp.transports.sse_client.connect_sse`
        (``sse_read_timeout``, ``http_client``, ``max_event``). :meth:`connect_http` falls back to this by itself.
        """
        from .mcp.versions import LATEST_HANDSHAKE
        from .transports.sse_client import connect_sse

        http = dict(http_options or {})
        if auth is not None:
            http["auth"] = auth
        if options.get("protocol_version", "auto") == "auto":
            options["protocol_version"] = LATEST_HANDSHAKE
        options.setdefault("cache_origin", url)
        options.setdefault("cache_auth", _authorization_context(headers, auth))
        async with (
            connect_sse(url, headers=headers, timeout=timeout, **http) as stream,
            cls.connect(stream, **options) as client,
        ):
            yield client

    @classmethod
    @asynccontextmanager
    async def connect_server(cls, server: Server, **options: Any) -> AsyncIterator[Client]:
        """An in-process client for ``server`` over an in-memory stream pair (tests, embedding)."""
        ours, theirs = memory_pair()
        options.setdefault("cache_origin", identity_of(server, "server"))
        with unwrap_group():
            async with AsyncExitStack() as stack:
                stack.push_async_callback(theirs.aclose)  # closed last, after the server has stopped
                stack.push_async_callback(ours.aclose)
                tg = await stack.enter_async_context(anyio.create_task_group())
                tg.start_soon(server.serve, theirs)
                stack.callback(tg.cancel_scope.cancel)
                client = await stack.enter_async_context(cls.connect(ours, **options))
                yield client


def _authorization_context(headers: Mapping[str, str] | None, auth: Any) -> str | None:
    """Whose results a cache keeps apart (2026-07-28 ``"private"`` ones): the ``Authorization`` header sent (its
    digest), else the ``httpx.Auth`` that authorizes (each object one context: the tokens it obtains and refreshes
    are its own), else none."""
    for name, value in (headers or {}).items():
        if name.lower() == "authorization":
            return token_identity(value)
    return None if auth is None else identity_of(auth, "auth")


async def _reach(stack: AsyncExitStack, opening: AbstractAsyncContextManager[T], where: str) -> T:
    """Enter ``opening`` (a transport's connect), turning the OSError of a server that cannot be reached into
    :class:`ServerUnreachable` saying why in one line."""
    from .transports.connect_errors import connect_failure

    try:
        return await stack.enter_async_context(opening)
    except OSError as exc:
        raise ServerUnreachable(connect_failure(exc, where)) from exc
