"""Why a connection to a server could not be made, in one line (L6 helper; standard library only).

anyio and httpx report a refused connection as "All connection attempts failed", with the reason a few causes
down; :func:`connect_failure` finds it and names the host: ``cannot connect to 127.0.0.1:9: connection
refused (is the server running?)``, ``cannot resolve host 'mcp.example': Name or service not known``; a TLS
failure is named as one (a certificate not trusted, a server that does not speak TLS), not by its errno.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
from typing import Final
from urllib.parse import urlsplit

__all__ = ("connect_failure", "http_connect_failure", "start_failure", "check_http_url")

#: What OpenSSL says when the peer answers a TLS handshake with something else (plain HTTP, say).
_NOT_TLS: Final = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "UNEXPECTED_RECORD"})


def connect_failure(exc: BaseException, where: str, *, url: str | None = None) -> str:
    """One line saying why connecting to ``where`` (``host:port``, or a socket path) failed, from ``exc`` and the
    exceptions it was raised from. ``url``, when given, is named too."""
    shown = f"{where} ({url})" if url else where
    for cause in _chain(exc):
        if isinstance(cause, socket.gaierror):
            host = where.rsplit(":", 1)[0].strip("[]") if ":" in where else where
            return f"cannot resolve host {host!r}{f' ({url})' if url else ''}: {cause.strerror or cause}"
        if isinstance(cause, ConnectionRefusedError):
            return f"cannot connect to {shown}: connection refused (is the server running?)"
        if isinstance(cause, FileNotFoundError):
            return f"cannot connect to {shown}: no such socket file"
        if isinstance(cause, TimeoutError) or type(cause).__name__ in ("ConnectTimeout", "TimeoutException"):
            return f"cannot connect to {shown}: timed out"
    for cause in _chain(exc):  # (before errno: an SSLError's errno is OpenSSL's 1, which strerror calls EPERM)
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"cannot connect to {shown}: its TLS certificate is not trusted ({cause.verify_message}; to trust "
                "a self-signed certificate or a private CA, name its PEM file in SSL_CERT_FILE)"
            )
        if isinstance(cause, ssl.SSLError):
            if cause.reason in _NOT_TLS:
                return f"cannot connect to {shown}: the server did not answer in TLS (a plain HTTP server? try http://)"
            return f"cannot connect to {shown}: TLS failed: {cause.reason or cause}"
    for cause in _chain(exc):
        code = getattr(cause, "errno", None)
        if isinstance(code, int) and code in errno.errorcode:
            return f"cannot connect to {shown}: {os.strerror(code)}"
    reason = str(exc) or type(exc).__name__
    return f"cannot connect to {shown}: {reason}"


def http_connect_failure(exc: BaseException, url: str) -> str:
    """:func:`connect_failure` for a request to the ``http://`` or ``https://`` URL ``url`` (its host and port)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    return connect_failure(exc, f"[{host}]:{port}" if ":" in host else f"{host}:{port}", url=url)


def start_failure(command: list[str], exc: OSError) -> str:
    """One line saying why the program of ``command`` (a stdio server) could not be started."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    program = command[0] if command else "?"
    hint = ""
    if "://" in program:
        hint = " (to reach a Streamable HTTP server, give --url URL)"
    elif program.endswith(".py"):
        hint = f" (a Python file: -- jsonrpc-mcp serve {program}, or -- python {program} if it serves itself)"
    return f"cannot start {program!r}: {reason}{hint}"


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from (``__cause__``, else ``__context__``), nearest first; the members of
    an exception group (trio reports each connection attempt in one) after the group."""
    seen: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending and len(seen) < 32:
        current = pending.pop(0)
        if current in seen:
            continue
        seen.append(current)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        after = current.__cause__ or current.__context__
        if after is not None:
            pending.append(after)
    return seen


def check_http_url(url: str) -> str:
    """``url`` if it is an ``http://`` or ``https://`` URL with a host, else :class:`ValueError` saying what is
    wrong in one line (a URL without a scheme gets the one it most likely lacks)."""
    if "://" not in url:
        raise ValueError(f"{url!r} has no scheme: an MCP endpoint URL starts with http:// or https:// (http://{url}?)")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError(f"{url!r} names no host")
    return url
