"""DNS-rebinding protection: the ``Host`` and ``Origin`` allow-lists of the Streamable HTTP app (L6 helper).

A web page on ``evil.example`` whose name its owner re-points at 127.0.0.1 makes the browser send requests to a
local server with ``Host: evil.example`` and ``Origin: http://evil.example``; refusing both (403) defeats it.

* ``Host`` must name a loopback host (as :func:`jsonrpc_mcp.addresses.is_loopback_host` tells one: ``localhost``
  and its subdomains, ``127.0.0.0/8``, ``[::1]``; any port) or an entry of
  ``allowed_hosts`` (``"name"`` for any port, ``"name:port"`` for one port, ``"*"`` for any host). A request
  without ``Host`` (HTTP/1.0) passes: browsers always send one.
* ``Origin``, when present, must be a loopback origin, an origin whose host is in ``allowed_hosts``, the same
  origin as the request's ``Host``, or an entry of ``allowed_origins`` (``"*"`` for any). ``Origin: null``
  (sandboxed pages, ``file:``) is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from ..addresses import is_loopback_host

__all__ = ("HostGuard", "origin_list", "split_host")

_HOST_CACHE_SIZE: Final = 256


def split_host(value: str) -> tuple[str, str | None]:
    """``"Name:8000"`` → ``("name", "8000")``; IPv6 literals keep their brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        host, rest = value[: end + 1], value[end + 1 :]
        return host, rest[1:] if rest.startswith(":") else None
    if value.count(":") > 1:  # a bare IPv6 literal
        return f"[{value}]", None
    host, sep, port = value.partition(":")
    return host, port if sep else None


def origin_list(entries: Iterable[str]) -> tuple[bool, set[str]]:
    """An allow-list of origins as configured: whether ``"*"`` (any origin) is on it, and the others as a request's
    ``Origin`` is compared with them (no blanks around, no trailing ``/``, lower case); empty entries name nothing."""
    origins = {entry.strip().rstrip("/").lower() for entry in entries}
    return "*" in origins, origins - {"*", ""}


class HostGuard:
    def __init__(self, allowed_hosts: Iterable[str] | None = None, allowed_origins: Iterable[str] | None = None):
        self.any_host = False
        self._names: set[str] = set()
        self._host_ports: set[tuple[str, str]] = set()
        for entry in allowed_hosts or ():
            if entry.strip() == "*":
                self.any_host = True
                continue
            host, port = split_host(entry)
            if port:
                self._host_ports.add((host, port))
            else:
                self._names.add(host)
        self._host_cache: dict[str, bool] = {}  # Host header -> verdict (clients send the same one every time)
        self.any_origin, self._origins = origin_list(allowed_origins or ())

    def _named(self, host: str, port: str | None) -> bool:
        return is_loopback_host(host) or host in self._names or (port is not None and (host, port) in self._host_ports)

    def host_ok(self, host_header: str | None) -> bool:
        if host_header is None or self.any_host:
            return True
        ok = self._host_cache.get(host_header)
        if ok is None:
            ok = self._named(*split_host(host_header))
            if len(self._host_cache) >= _HOST_CACHE_SIZE:
                self._host_cache.clear()
            self._host_cache[host_header] = ok
        return ok

    def origin_ok(self, origin: str | None, host_header: str | None) -> bool:
        if origin is None:
            return True
        origin = origin.strip().rstrip("/").lower()
        if self.any_origin or origin in self._origins:
            return True
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc or "@" in parts.netloc:
            return False
        host, port = split_host(parts.netloc)
        if self._named(host, port):
            return True
        return host_header is not None and split_host(host_header) == (host, port)
