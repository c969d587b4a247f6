"""MCP Apps (``io.modelcontextprotocol/ui``, SEP-1865): views that hosts show for a tool's results (L7).

A *view* is an HTML page served as a ``ui://`` resource with the MIME type ``text/html;profile=mcp-app``; a tool
names it in ``_meta.ui.resourceUri``. A host that supports the extension reads the page, shows it in a sandboxed
frame, and talks to it over ``postMessage`` (JSON-RPC: ``ui/initialize``, then the tool's input and result as
notifications); a host that does not just shows the tool's content.

What this module gives a server:

* :class:`View`: an HTML5 page whose one script and one style sheet are allowed by their SHA-256 hashes in the
  page's own content security policy, and nothing else — no inline event attribute, no ``javascript:`` URL, no
  script or style from anywhere, no network. It carries a small script, ``window.mcpApp``, that speaks the
  host protocol and builds elements with text only through ``textContent``;
* :func:`add_view`: registers a view as a ``ui://`` resource, with its ``_meta.ui`` (the :class:`Csp` the host is
  to enforce: by default no external origin at all), and makes the server declare the extension;
* :func:`supports_views`: whether the client of a request declared the extension with the view MIME type (a
  tool may then leave to its view what the model does not need; its ``content`` must stay meaningful);
* :func:`host_extension`: the extension as a host (a client that shows views) declares it:
  ``Client.connect_...(..., extensions=[host_extension()])``;
* :func:`tool_meta`: the ``_meta`` linking a tool to its view (``visibility`` too);
* :func:`escape` and :func:`json_for_html`: for server-rendered text and data in a page;
* :func:`csp_header`: the policy a host builds from a resource's ``_meta.ui.csp`` (hosts and tests use it).
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from ..mcp import types as t
from ..mcp.extensions import Extension, client_declares

if TYPE_CHECKING:
    from ..mcp.context import Context
    from ..mcp.server import Server

__all__ = (
    "UI_EXTENSION",
    "UI_MIME_TYPE",
    "UI_SCHEME",
    "Csp",
    "View",
    "add_view",
    "supports_views",
    "host_extension",
    "tool_meta",
    "resource_meta",
    "csp_header",
    "escape",
    "json_for_html",
    "bridge_script",
)

#: The extension identifier.
UI_EXTENSION: Final = "io.modelcontextprotocol/ui"
#: The MIME type of a view.
UI_MIME_TYPE: Final = "text/html;profile=mcp-app"
UI_SCHEME: Final = "ui://"

Visibility = Literal["model", "app"]
Permission = Literal["camera", "microphone", "geolocation", "clipboardWrite"]

_encode: Final = msgspec.json.Encoder().encode


class Csp(msgspec.Struct, frozen=True, kw_only=True):
    """The origins a view may reach (``_meta.ui.csp``). Empty everywhere (the default) is the strictest: no
    network, no external script, style, image or font, no nested frame."""

    connect_domains: tuple[str, ...] = ()  #: fetch/XHR/WebSocket (``connect-src``)
    resource_domains: tuple[str, ...] = ()  #: scripts, styles, images, fonts, media
    frame_domains: tuple[str, ...] = ()  #: nested frames (``frame-src``)
    base_uri_domains: tuple[str, ...] = ()  #: ``base-uri``

    def __post_init__(self) -> None:
        for field in ("connect_domains", "resource_domains", "frame_domains", "base_uri_domains"):
            if isinstance(getattr(self, field), str):  # (its letters would be read as the origins)
                raise TypeError(f"{field} is a tuple of origins, not a string: {field}=({getattr(self, field)!r},)")
        for origin in (*self.connect_domains, *self.resource_domains, *self.frame_domains, *self.base_uri_domains):
            if not isinstance(origin, str) or not origin or any(c in origin for c in " ;,'\"\n\r\t"):
                raise ValueError(f"{origin!r} is not an origin (https://example.com, https://*.example.com)")

    def meta(self) -> dict[str, list[str]]:
        """The ``csp`` object of ``_meta.ui``."""
        return {
            "connectDomains": list(self.connect_domains),
            "resourceDomains": list(self.resource_domains),
            "frameDomains": list(self.frame_domains),
            "baseUriDomains": list(self.base_uri_domains),
        }


STRICT: Final = Csp()


def resource_meta(
    *,
    csp: Csp = STRICT,
    permissions: Iterable[Permission] = (),
    domain: str | None = None,
    prefers_border: bool | None = None,
) -> dict[str, Any]:
    """The ``_meta`` of a view resource: ``{"ui": {"csp": ..., "permissions": ..., ...}}``."""
    ui: dict[str, Any] = {"csp": csp.meta()}
    if isinstance(permissions, str):
        raise TypeError(f"permissions is a list of permission names, not a string: permissions=[{permissions!r}]")
    wanted = list(permissions)
    unknown = set(wanted) - {"camera", "microphone", "geolocation", "clipboardWrite"}
    if unknown:
        raise ValueError(f"unknown permissions: {', '.join(sorted(unknown))}")
    if wanted:
        ui["permissions"] = {name: {} for name in wanted}
    if domain is not None:
        ui["domain"] = domain
    if prefers_border is not None:
        ui["prefersBorder"] = prefers_border
    return {"ui": ui}


def tool_meta(resource_uri: str, *, visibility: Iterable[Visibility] = ("model", "app")) -> dict[str, Any]:
    """The ``_meta`` of a tool shown with a view (``@server.tool(meta=tool_meta("ui://app/view"))``).

    ``visibility``: who may call the tool — ``"model"`` (the agent's tool list) and/or ``"app"`` (the view, through
    its host, on this server only)."""
    if not resource_uri.startswith(UI_SCHEME):
        raise ValueError(f"a view's URI starts with {UI_SCHEME!r}, not {resource_uri!r}")
    if isinstance(visibility, str):
        raise TypeError(f'visibility is a list of "model" and "app", not a string: visibility=[{visibility!r}]')
    seen = list(dict.fromkeys(visibility))
    if not seen or set(seen) - {"model", "app"}:
        raise ValueError('visibility is one or both of "model" and "app"')
    return {"ui": {"resourceUri": resource_uri, "visibility": seen}}


def supports_views(ctx: Context) -> bool:
    """Did the client of this request declare the extension with ``text/html;profile=mcp-app`` among its
    ``mimeTypes`` (in its ``initialize``, or in the request's ``_meta`` in 2026-07-28)? Only such a client shows
    views; every other gets the tool's ``content`` alone."""
    settings = client_declares(ctx.client_capabilities, UI_EXTENSION)
    if settings is None:
        return False
    mime_types = settings.get("mimeTypes")
    return isinstance(mime_types, list) and UI_MIME_TYPE in mime_types


def host_extension(mime_types: Iterable[str] = (UI_MIME_TYPE,)) -> Extension:
    """The extension as a client that shows views declares it (``{"mimeTypes": [...]}``)."""
    return Extension(UI_EXTENSION, settings={"mimeTypes": list(mime_types)})


def csp_header(csp: Mapping[str, Any] | None) -> str:
    """The content security policy a host enforces for a view whose ``_meta.ui.csp`` is ``csp`` (``None``: the
    extension's restrictive default). Declared origins are added where the extension says; nothing else is."""

    def origins(key: str) -> list[str]:
        listed = (csp or {}).get(key) or []
        return [o for o in listed if isinstance(o, str) and o and not any(c in o for c in " ;,'\"\n\r\t")]

    if csp is None:
        return (
            "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; media-src 'self' data:; connect-src 'none'; frame-src 'none'; "
            "object-src 'none'; base-uri 'self'"
        )
    resource = " ".join(origins("resourceDomains"))
    connect = " ".join(origins("connectDomains"))
    frames = " ".join(origins("frameDomains")) or "'none'"
    base = " ".join(origins("baseUriDomains")) or "'self'"
    parts = [
        "default-src 'none'",
        f"script-src 'self' 'unsafe-inline' {resource}",
        f"style-src 'self' 'unsafe-inline' {resource}",
        f"connect-src 'self' {connect}" if connect else "connect-src 'none'",
        f"img-src 'self' data: {resource}",
        f"font-src 'self' {resource}",
        f"media-src 'self' data: {resource}",
        f"frame-src {frames}",
        "object-src 'none'",
        f"base-uri {base}",
    ]
    return "; ".join(" ".join(p.split()) for p in parts)


def escape(text: object) -> str:
    """``text`` for an HTML element or a quoted attribute: ``& < > " '`` as character references."""
    return html.escape(str(text), quote=True)


def json_for_html(value: Any) -> str:
    """``value`` as JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&`` or
    line separators left to end the element or confuse a parser."""
    text = _encode(value).decode()
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text


def bridge_script() -> str:
    """The view side of the host protocol (``window.mcpApp``), included in every :class:`View`."""
    return resources.files(__package__).joinpath("bridge.js").read_text(encoding="utf-8")


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii") + "'"


class View:
    """An HTML5 page for a view: a title, a body (trusted markup written by the server's author: put data in
    with :func:`escape`, or better, draw it in the script from the tool's result), one script and one style sheet.

    The page's own policy (a ``<meta http-equiv="Content-Security-Policy">``, which the host's can only narrow)
    allows exactly that script and that style by their hashes: stored text that reaches the page can never run,
    whatever the host allows. ``data`` is embedded as JSON the script reads with ``mcpApp.data()``.
    """

    def __init__(
        self,
        title: str,
        *,
        body: str = "",
        script: str = "",
        style: str = "",
        data: Any = None,
        lang: str = "en",
    ) -> None:
        self.title = title
        self.body = body
        self.script = script
        self.style = style
        self.data = data
        self.lang = lang

    def policy(self, script: str, style: str) -> str:
        """The page's content security policy for this exact script and style."""
        return "; ".join(
            [
                "default-src 'none'",
                f"script-src {_hash(script)}",
                f"style-src {_hash(style)}",
                "img-src data:",
                "connect-src 'none'",
                "frame-src 'none'",
                "object-src 'none'",
                "base-uri 'none'",
                "form-action 'none'",
            ]
        )

    def render(self) -> str:
        """The page, as the ``ui://`` resource's text."""
        script = "\n" + bridge_script() + "\n" + self.script + "\n"
        style = "\n" + self.style + "\n"
        data = (
            f'<script type="application/json" id="mcp-app-data">{json_for_html(self.data)}</script>\n'
            if self.data is not None
            else ""
        )
        return (
            "<!DOCTYPE html>\n"
            f'<html lang="{escape(self.lang)}">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{self.policy(script, style)}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(self.title)}</title>\n<style>{style}</style>\n</head>\n<body>\n{self.body}\n{data}"
            f"<script>{script}</script>\n</body>\n</html>\n"
        )


def add_view(
    server: Server,
    uri: str,
    view: View | str | Callable[[], View | str],
    *,
    name: str,
    title: str | None = None,
    description: str | None = None,
    csp: Csp = STRICT,
    permissions: Iterable[Permission] = (),
    domain: str | None = None,
    prefers_border: bool | None = None,
    scopes: Iterable[str] | None = None,
) -> None:
    """Serve ``view`` (a :class:`View`, an HTML string, or a function returning either on each read) as the
    ``ui://`` resource ``uri``, its ``_meta.ui`` on the listing and on what ``resources/read`` returns; the server
    declares the extension (``capabilities.extensions["io.modelcontextprotocol/ui"] = {}``) from then on.
    ``scopes``: the OAuth scopes reading it needs when the server is served with authorization."""
    if not uri.startswith(UI_SCHEME):
        raise ValueError(f"a view's URI starts with {UI_SCHEME!r}, not {uri!r}")
    if UI_EXTENSION not in server.extensions:
        server.add_extension(Extension(UI_EXTENSION))
    meta = resource_meta(csp=csp, permissions=permissions, domain=domain, prefers_border=prefers_border)

    def read() -> t.TextResourceContents:
        page = view() if callable(view) else view
        text = page.render() if isinstance(page, View) else page
        return t.TextResourceContents(uri=uri, mime_type=UI_MIME_TYPE, text=text, meta=meta)

    server.add_resource(
        read,
        uri,
        name=name,
        title=title,
        description=description,
        mime_type=UI_MIME_TYPE,
        meta=meta,
        inline=True,
        scopes=scopes,
    )
