"""Fetching a server's icons the safe way (L7: httpx through the ``http`` extra, imported when first used).

A host that shows the icons a server declares (``icons`` on its tools, resources, prompts and implementation) must
fetch them; :func:`fetch_icon` does it with the precautions the specification asks of a consumer of icon metadata:

- the ``src`` is ``https:`` or a ``data:`` URI; every other scheme (``javascript:``, ``file:``, ``ftp:``, ``ws:``,
  an app's own) is refused, and so is ``http:`` except to a host on loopback (a server in development);
- it is of the MCP server's origin (scheme, host and port of ``server_url``), or of one the caller trusts
  (``allow_origins``);
- a redirect is followed only within the origin it came from, at most :data:`MAX_REDIRECTS` times;
- the request carries no credentials: a client of its own, without cookies, ``Authorization`` or client
  certificate;
- it connects only where the MCP server's own address allows
  (:class:`jsonrpc_mcp.auth.oauth_reach.Reach`, the rule the OAuth client follows), widened by ``allow_networks``;
- the body is bounded (``max_bytes``) and the whole fetch by ``timeout``;
- its type is told from its first bytes, never from what anyone declares: PNG, JPEG, WebP and GIF, and SVG only
  when the caller opts in (``allow_svg=True``: an SVG can carry script, so the host must draw it as an image, never
  as a document) and its root is ``<svg`` with no DTD internal subset (no entities); a declared ``mimeType`` (the
  icon's, or a ``data:`` URI's) that names another type is refused; the ``Content-Type`` header is not read.

Image dimensions are not read: ``sizes`` is the server's word, and the host scales what it draws.
:func:`icon_uri_problem` is the check of the URI alone, without I/O.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote_to_bytes, urljoin, urlsplit

import anyio

from .addresses import is_loopback_host
from .errors import AuthorizationError, MissingExtra
from .mcp.types import Icon

if TYPE_CHECKING:
    import httpx

__all__ = ("FetchedIcon", "IconError", "fetch_icon", "icon_uri_problem")

#: The most a body (or a ``data:`` URI's decoded content) may weigh by default.
MAX_BYTES: Final = 1 << 20
#: Redirects followed within one origin before the fetch is refused.
MAX_REDIRECTS: Final = 3
PNG: Final = "image/png"
JPEG: Final = "image/jpeg"
WEBP: Final = "image/webp"
GIF: Final = "image/gif"
SVG: Final = "image/svg+xml"
#: Other names of the same types (``image/jpg`` is the specification's own alias).
_ALIASES: Final = {"image/jpg": JPEG, "image/pjpeg": JPEG}
_DEFAULT_PORTS: Final = {"https": 443, "http": 80}
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_ACCEPT: Final = "image/png, image/jpeg, image/webp, image/gif"
#: An SVG document: whitespace, an XML declaration, comments and a DOCTYPE without internal subset (which could
#: declare entities), then the ``<svg`` root element.
_SVG_ROOT: Final = re.compile(rb"(?:\s|<\?xml[^>]*\?>|<!--.*?-->|<!DOCTYPE[^>\[]*>)*<svg[\s>/]", re.DOTALL)


class IconError(ValueError):
    """An icon that was not fetched: refused (its URI, its address, its type, its size) or not answered;
    ``reason`` is one line, naming no credential."""

    def __init__(self, src: str, reason: str) -> None:
        super().__init__(f"icon {_shown(src)}: {reason}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class FetchedIcon:
    """An icon's bytes and their type, as told from the bytes themselves."""

    data: bytes
    mime_type: str


def _shown(src: str) -> str:
    """``src`` for a message: a ``data:`` URI by its header only, anything else cut to 200 characters."""
    if src[:5].lower() == "data:":
        return src.partition(",")[0][:60] + ",..."
    return repr(src[:200])


def _origin(url: str) -> tuple[str, str, int] | None:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        return None
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower().rstrip("."), port or _DEFAULT_PORTS[scheme]


def _origin_text(origin: tuple[str, str, int]) -> str:
    scheme, host, port = origin
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" + ("" if port == _DEFAULT_PORTS[scheme] else f":{port}")


def _has_userinfo(url: str) -> bool:
    parts = urlsplit(url)
    return parts.username is not None or parts.password is not None


def icon_uri_problem(src: str, server_url: str, allow_origins: Iterable[str] = ()) -> str | None:
    """Why the icon URI ``src`` may not be fetched for the MCP server at ``server_url`` (one line), or None when it
    may: ``https:`` (``http:`` to loopback only) of the server's origin or one of ``allow_origins``, or ``data:``."""
    scheme = urlsplit(src).scheme.lower() if ":" in src else ""
    if scheme == "data":
        return None
    if scheme not in _DEFAULT_PORTS:
        return f"the {scheme + ':' if scheme else 'relative'} scheme is refused (https: and data: only)"
    origin = _origin(src)
    if origin is None:
        return "not a URL with a host"
    if scheme == "http" and not is_loopback_host(origin[1]):
        return "http: is refused off loopback (https: and data: only)"
    if _has_userinfo(src):
        return "a URL with credentials in it is refused"
    trusted = {_origin(server_url)} | {_origin(o) for o in allow_origins}
    if origin not in trusted:
        return f"{_origin_text(origin)} is not the MCP server's origin, nor one in allow_origins"
    return None


def _detect(data: bytes) -> str | None:
    """The image type of ``data`` from its first bytes (None for anything else)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return WEBP
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return GIF
    if _SVG_ROOT.match(data[:4096].removeprefix(b"\xef\xbb\xbf")):
        return SVG
    return None


def _normal_type(mime_type: str) -> str:
    bare = mime_type.partition(";")[0].strip().lower()
    return _ALIASES.get(bare, bare)


def _checked(src: str, data: bytes, declared: Sequence[str], allow_svg: bool) -> FetchedIcon:
    detected = _detect(data)
    if detected is None:
        raise IconError(src, "its content is no PNG, JPEG, WebP, GIF or SVG image (told from its first bytes)")
    if detected == SVG and not allow_svg:
        raise IconError(src, "an SVG image is refused without allow_svg=True (an SVG can carry script)")
    for mime_type in declared:
        if mime_type and _normal_type(mime_type) != detected:
            raise IconError(src, f"declared as {_normal_type(mime_type)!r} but its content is {detected}")
    return FetchedIcon(data, detected)


def _data_uri(src: str, icon_type: str, max_bytes: int, allow_svg: bool) -> FetchedIcon:
    header, comma, payload = src[5:].partition(",")
    if not comma:
        raise IconError(src, "a data: URI without a comma")
    params = header.split(";")
    is_base64 = params[-1].strip().lower() == "base64"
    if len(payload) > 4 * max_bytes + 4:  # more than any encoding of max_bytes takes: not even decoded
        raise IconError(src, f"larger than {max_bytes} bytes")
    try:
        data = base64.b64decode(payload, validate=True) if is_base64 else unquote_to_bytes(payload)
    except (binascii.Error, ValueError):
        raise IconError(src, "a data: URI whose base64 does not decode") from None
    if len(data) > max_bytes:
        raise IconError(src, f"larger than {max_bytes} bytes")
    return _checked(src, data, (icon_type, params[0]), allow_svg)


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS settings of every fetch, made once (50 ms each time otherwise): httpx's trusted certificates (or
    ``SSL_CERT_FILE``), and no client certificate ever loaded into it."""
    import httpx

    return httpx.create_ssl_context()


def _httpx() -> Any:
    try:
        import httpx

        from .auth.oauth_reach import Reach, guarded_client, parse_networks
    except ImportError:  # the http extra is missing
        raise MissingExtra(f"fetching an icon needs httpx: {MissingExtra.install('http')}") from None
    return httpx, Reach, guarded_client, parse_networks


async def fetch_icon(
    icon: Icon | str,
    *,
    server_url: str,
    allow_origins: Iterable[str] = (),
    allow_networks: Iterable[str] = (),
    allow_svg: bool = False,
    max_bytes: int = MAX_BYTES,
    timeout: float = 10.0,
) -> FetchedIcon:
    """Fetch ``icon`` (an :class:`~jsonrpc_mcp.mcp.types.Icon` or its ``src``) declared by the MCP server at
    ``server_url``, with the checks of this module's docstring; :class:`IconError` when it is refused or fails.

    :param allow_origins: origins (``"https://cdn.example.com"``) trusted besides the server's own.
    :param allow_networks: networks (``"10.0.0.0/8"``) the fetch may reach whatever the server's address.
    :param allow_svg: accept SVG images (the host then draws them as images, never as documents).
    :param max_bytes: the most an icon may weigh.
    :param timeout: seconds for the whole fetch, redirects included.
    """
    src = icon if isinstance(icon, str) else icon.src
    icon_type = "" if isinstance(icon, str) or not isinstance(icon.mime_type, str) else icon.mime_type
    allow_origins = tuple(allow_origins)
    problem = icon_uri_problem(src, server_url, allow_origins)
    if problem is not None:
        raise IconError(src, problem)
    if src[:5].lower() == "data:":
        return _data_uri(src, icon_type, max_bytes, allow_svg)
    httpx, reach_type, guarded_client, parse_networks = _httpx()
    reach = reach_type(server_url, parse_networks(allow_networks))
    try:
        with anyio.fail_after(timeout):
            async with guarded_client(reach, timeout=timeout, verify=_tls()) as http:
                data = await _get(http, src, max_bytes)
    except TimeoutError:
        raise IconError(src, f"not fetched within {timeout} s") from None
    except AuthorizationError as exc:
        raise IconError(src, exc.reason) from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise IconError(src, f"not fetched ({type(exc).__name__})") from None
    return _checked(src, data, (icon_type,), allow_svg)


async def _get(http: httpx.AsyncClient, src: str, max_bytes: int) -> bytes:
    """The body at ``src``, following redirects within its origin only."""
    url = src
    for _ in range(MAX_REDIRECTS + 1):
        http.cookies.clear()  # nothing a response set is sent back
        request = http.build_request("GET", url, headers={"Accept": _ACCEPT})
        response = await http.send(request, stream=True)
        try:
            if response.status_code in _REDIRECTS:
                target = urljoin(url, response.headers.get("location", ""))
                if _origin(target) != _origin(url):
                    raise IconError(src, "redirected to another origin or scheme: refused")
                if _has_userinfo(target):
                    raise IconError(src, "redirected to a URL with credentials in it: refused")
                url = target
                continue
            if response.status_code != 200:
                raise IconError(src, f"answered HTTP {response.status_code}")
            data, whole = await _read(response, max_bytes)
            if not whole:
                raise IconError(src, f"larger than {max_bytes} bytes")
            return data
        finally:
            await response.aclose()
    raise IconError(src, f"more than {MAX_REDIRECTS} redirects")


async def _read(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    from .transports.http_bodies import read_limited

    return await read_limited(response, limit)
