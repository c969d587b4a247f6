"""Talking to the authorization server: bounded JSON requests over httpx, to URLs that are safe to send to (L6
helper of :mod:`jsonrpc_mcp.auth`; needs the ``auth`` extra).

A key set or an introspection answer decides who gets in, so both travel over HTTPS; plain HTTP is accepted
for loopback hosts only (a local authorization server in development and tests). Answers are JSON objects of at
most :data:`MAX_ANSWER` bytes; nothing of a token or a secret is ever logged here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
import msgspec

from ..addresses import is_loopback_host
from ..transports.http_bodies import read_limited
from .principal import VerifierUnavailable

__all__ = ("check_number", "check_url", "fetch_json", "MAX_ANSWER")

logger = logging.getLogger(__name__)

#: The largest key set or introspection answer read (bytes).
MAX_ANSWER: Final = 1 << 20


def check_url(url: str, what: str) -> str:
    """``url`` when it is an absolute https URL (or http on a loopback host); :class:`ValueError` otherwise."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "https" and host:
        return url
    if parts.scheme == "http" and is_loopback_host(host):
        return url
    raise ValueError(f"{what} must be an https URL (plain http only for a loopback host): {url!r}")


def check_number(value: Any, name: str, *, zero_ok: bool, whole: bool = False) -> Any:
    """``value`` when it is a number (a whole one when ``whole``) above zero, or zero too when ``zero_ok``;
    :class:`ValueError` (:class:`TypeError` for no number at all) naming the setting ``name`` otherwise."""
    wanted = ("zero or more" if zero_ok else "positive") + (" (a whole number)" if whole else "")
    if isinstance(value, bool) or not isinstance(value, (int,) if whole else (int, float)):
        raise TypeError(f"{name} must be a number, {wanted}, not {value!r}")
    if not (value > 0 or (zero_ok and value == 0)):  # (a NaN is neither)
        raise ValueError(f"{name} must be {wanted}, not {value!r}")
    return value


async def fetch_json(
    method: str,
    url: str,
    *,
    client: httpx.AsyncClient | None,
    timeout: float,
    data: Mapping[str, str] | None = None,
    auth: httpx.Auth | tuple[str, str] | None = None,
) -> dict[str, Any]:
    """One request answered by a JSON object. Any failure (network, status, size, shape) is
    :class:`VerifierUnavailable` naming ``url`` and what went wrong, never the request's content."""
    if client is None:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as own:
            return await fetch_json(method, url, client=own, timeout=timeout, data=data, auth=auth)
    headers = {"Accept": "application/json"}
    try:
        async with client.stream(method, url, data=data, auth=auth, headers=headers, timeout=timeout) as response:
            status = response.status_code
            body, whole = await read_limited(response, MAX_ANSWER) if status == 200 else (b"", True)
    except httpx.HTTPError as exc:
        raise VerifierUnavailable(f"{url} could not be reached ({type(exc).__name__})") from None
    if status != 200:
        raise VerifierUnavailable(f"{url} answered HTTP {status}")
    if not whole:
        raise VerifierUnavailable(f"{url} answered more than {MAX_ANSWER} bytes")
    try:
        value = msgspec.json.decode(body)
    except msgspec.DecodeError:
        raise VerifierUnavailable(f"{url} did not answer JSON") from None
    if not isinstance(value, dict):
        raise VerifierUnavailable(f"{url} did not answer a JSON object")
    return value
