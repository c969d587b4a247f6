"""Where an MCP server may send the OAuth client (L6): every connection the client opens to authorize (discovery,
registration, token requests) goes to an address that the MCP server's own address allows.

A name is judged by the addresses it resolves to, and the connection is made to one of those very addresses (so
a name cannot resolve to a public address when judged and to 127.0.0.1 when connected). The rule is
:func:`jsonrpc_mcp.addresses.may_send_to`: a server on a public address may send the client to public addresses
only; a server on a private one to private ones too; only a loopback server to loopback. ``allow_networks``
(``OAuth(allow_networks=...)``) names networks that are allowed whatever the server's address. Nothing is sent
where the rule says no: the connection is refused before it is opened, with :class:`AuthorizationError`.

Requests through an HTTP proxy (``HTTPS_PROXY`` and the like) are judged by the proxy's address.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpcore
import httpx

from ..addresses import AddressClass, address_class, host_class, may_send_to
from ..errors import AuthorizationError

__all__ = ("Reach", "guarded_client", "parse_networks")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(networks: Iterable[str]) -> tuple[Network, ...]:
    """``allow_networks`` as networks (``"10.0.0.0/8"``, ``"127.0.0.1"``); :class:`ValueError` for a bad one."""
    if isinstance(networks, str):
        raise TypeError(f"allow_networks is a list of networks, not a string: allow_networks=[{networks!r}]")
    parsed: list[Network] = []
    for network in networks:
        try:
            parsed.append(ipaddress.ip_network(network, strict=False))
        except ValueError:
            raise ValueError(f"allow_networks: {network!r} is not an IP network (like 10.0.0.0/8)") from None
    return tuple(parsed)


async def _resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to (an IP literal: itself), in the resolver's order."""
    bare = host.strip("[]")
    try:
        return [str(ipaddress.ip_address(bare))]
    except ValueError:
        pass
    infos = await anyio.getaddrinfo(bare, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class Reach:
    """What one MCP server (``server_url``) may send the client to."""

    def __init__(self, server_url: str, allow_networks: Sequence[Network] = ()) -> None:
        parts = urlsplit(server_url)
        self.server_host = parts.hostname or ""
        self.server_port = parts.port or (443 if parts.scheme == "https" else 80)
        self.allow_networks = tuple(allow_networks)
        self._server_class: AddressClass | None = None

    async def server_class(self) -> AddressClass:
        """The class of the server's address: the farthest of those its name resolves to (public when it does not
        resolve here)."""
        if self._server_class is None:
            known = host_class(self.server_host)
            if known is None:
                try:
                    addresses = await _resolve(self.server_host, self.server_port)
                except OSError:
                    addresses = []
                known = min((address_class(a) for a in addresses), default=AddressClass.PUBLIC)
            self._server_class = known
        return self._server_class

    def _allowed(self, address: str) -> bool:
        ip = ipaddress.ip_address(address.partition("%")[0])
        return any(ip in network for network in self.allow_networks if network.version == ip.version)

    async def addresses(self, host: str, port: int) -> list[str]:
        """The addresses of ``host`` the client may connect to; :class:`AuthorizationError` when any of them is
        not allowed (a name that also resolves to the user's own network is refused whole)."""
        try:
            addresses = await _resolve(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} could not be resolved ({type(exc).__name__})") from None
        server = await self.server_class()
        for address in addresses:
            target = address_class(address)
            if not may_send_to(server, target) and not self._allowed(address):
                shown = host if _is_literal(host) else f"{host} ({address})"
                raise AuthorizationError(
                    "address check",
                    f"the MCP server {self.server_host} is on a {server.label} address and may not send the client "
                    f"to {shown}, a {target.label} address: refused before connecting (allow_networks widens this)",
                )
        if not addresses:
            raise httpcore.ConnectError(f"{host} resolves to no address")
        return addresses


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to addresses :class:`Reach` allows (and to those it judged)."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend, reach: Reach) -> None:
        self._inner = inner
        self._reach = reach

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await self._reach.addresses(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} took more than {timeout} s") from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("the OAuth client connects over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def guarded_client(
    reach: Reach, *, timeout: float, verify: Any, network: httpcore.AsyncNetworkBackend | None = None
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` (redirects not followed) whose connections :class:`Reach` judges; ``network``:
    the backend that connects (httpcore's own by default)."""
    transport = httpx.AsyncHTTPTransport(verify=verify)
    pool: Any = transport._pool  # httpx gives no other way to the network backend of its connection pool
    if not isinstance(getattr(pool, "_network_backend", None), httpcore.AsyncNetworkBackend):  # fail closed
        raise RuntimeError("this httpx/httpcore keeps its network backend elsewhere: the OAuth client cannot guard it")
    pool._network_backend = _GuardedBackend(network or pool._network_backend, reach)
    return httpx.AsyncClient(timeout=timeout, follow_redirects=False, verify=verify, transport=transport)
