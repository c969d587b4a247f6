"""fetch_icon: a host fetches a server's icons over real loopback HTTP (uvicorn in a thread), with every check the
specification asks of a consumer of icon metadata: safe schemes, the server's origin, no redirect elsewhere, no
credentials, the server's address rule, a bounded body, and the type told from the bytes."""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from http_support import ServerThread

from jsonrpc_mcp.errors import MissingExtra
from jsonrpc_mcp.icons import FetchedIcon, IconError, fetch_icon, icon_uri_problem
from jsonrpc_mcp.mcp.types import Icon

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 24
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 16
GIF = b"GIF89a" + b"\x00" * 24
SVG = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
BODIES = {
    "/icon.png": PNG,
    "/icon.jpg": JPEG,
    "/icon.webp": WEBP,
    "/icon.gif": GIF,
    "/icon.svg": SVG,
    "/page.png": b"<!doctype html><html><body>not an image</body></html>",
    "/big.png": PNG + b"\x00" * 5000,
}


class Icons:
    """An icon server that keeps the headers of each request it was sent."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.thread = ServerThread(self, lifespan="off")
        self.origin = f"http://127.0.0.1:{self.thread.port}"
        self.server_url = self.origin + "/mcp"

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        path = scope["path"]
        self.requests.append((path, {k.decode(): v.decode() for k, v in scope["headers"]}))
        headers = [(b"content-type", b"application/octet-stream")]
        body = BODIES.get(path)
        status = 200 if body is not None else 404
        if path == "/elsewhere":  # the same host under another name: another origin
            status, headers = 302, [(b"location", f"http://localhost:{self.thread.port}/icon.png".encode())]
        elif path == "/moved":
            status, headers = 302, [(b"location", b"/icon.png"), (b"set-cookie", b"sid=s3cret; Path=/")]
        elif path == "/loop":
            status, headers = 302, [(b"location", b"/loop")]
        elif path == "/userinfo":
            where = f"http://user:pw@127.0.0.1:{self.thread.port}/icon.png"
            status, headers = 302, [(b"location", where.encode())]
        elif path == "/stall":  # answers nothing until the client goes away
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body or b""})


@pytest.fixture(scope="module")
def icons() -> Iterator[Icons]:
    served = Icons()
    yield served
    served.thread.stop()


@pytest.mark.parametrize(
    ("path", "mime_type"),
    [
        ("/icon.png", "image/png"),
        ("/icon.jpg", "image/jpeg"),
        ("/icon.webp", "image/webp"),
        ("/icon.gif", "image/gif"),
    ],
)
async def test_png_jpeg_webp_and_gif_icons_of_the_servers_origin_are_fetched(
    icons: Icons, path: str, mime_type: str
) -> None:
    fetched = await fetch_icon(Icon(src=icons.origin + path, mime_type=mime_type), server_url=icons.server_url)
    assert fetched == FetchedIcon(BODIES[path], mime_type)


async def test_image_jpg_is_jpeg_and_an_icon_without_a_declared_type_gets_the_detected_one(icons: Icons) -> None:
    jpeg = await fetch_icon(Icon(src=icons.origin + "/icon.jpg", mime_type="image/jpg"), server_url=icons.server_url)
    assert jpeg.mime_type == "image/jpeg"
    png = await fetch_icon(icons.origin + "/icon.png", server_url=icons.server_url)
    assert png == FetchedIcon(PNG, "image/png")


async def test_the_request_carries_no_cookie_or_authorization_even_after_a_redirect_that_sets_one(
    icons: Icons,
) -> None:
    fetched = await fetch_icon(icons.origin + "/moved", server_url=icons.server_url)
    assert fetched.data == PNG
    (moved, first), (followed, second) = icons.requests[-2:]
    assert (moved, followed) == ("/moved", "/icon.png")
    for headers in (first, second):
        assert "cookie" not in headers and "authorization" not in headers
        assert headers["accept"] == "image/png, image/jpeg, image/webp, image/gif"


@pytest.mark.parametrize(
    ("src", "problem"),
    [
        ("javascript:alert(1)", "the javascript: scheme is refused (https: and data: only)"),
        ("file:///etc/passwd", "the file: scheme is refused (https: and data: only)"),
        ("ftp://127.0.0.1/icon.png", "the ftp: scheme is refused (https: and data: only)"),
        ("ws://127.0.0.1/icon.png", "the ws: scheme is refused (https: and data: only)"),
        ("vscode://icon.png", "the vscode: scheme is refused (https: and data: only)"),
        ("/icon.png", "the relative scheme is refused (https: and data: only)"),
        ("http://mcp.example.com/icon.png", "http: is refused off loopback (https: and data: only)"),
        ("https://user:pw@mcp.example.com/icon.png", "a URL with credentials in it is refused"),
        ("https://cdn.example.com/icon.png", "https://cdn.example.com is not the MCP server's origin, nor one in "),
        ("https://mcp.example.com:8443/icon.png", "https://mcp.example.com:8443 is not the MCP server's origin, "),
    ],
)
def test_unsafe_schemes_and_other_origins_are_refused(src: str, problem: str) -> None:
    found = icon_uri_problem(src, "https://mcp.example.com/mcp")
    assert found is not None and found.startswith(problem)


def test_the_servers_origin_data_uris_and_allowed_origins_pass() -> None:
    server = "https://MCP.example.com/mcp"
    assert icon_uri_problem("https://mcp.example.com:443/a/icon.png", server) is None
    assert icon_uri_problem("data:image/png;base64,AAAA", server) is None
    assert icon_uri_problem("https://cdn.example.com/i.png", server, ["https://cdn.example.com"]) is None
    assert icon_uri_problem("https://cdn.example.com/i.png", server, ["http://cdn.example.com"]) is not None


async def test_a_refused_uri_is_never_fetched(icons: Icons) -> None:
    before = len(icons.requests)
    other = f"http://localhost:{icons.thread.port}/icon.png"  # the same server under another name
    with pytest.raises(IconError, match=r"is not the MCP server's origin, nor one in allow_origins$"):
        await fetch_icon(other, server_url=icons.server_url)
    with pytest.raises(IconError, match=r"^icon 'javascript:alert\(1\)': the javascript: scheme is refused"):
        await fetch_icon(Icon(src="javascript:alert(1)"), server_url=icons.server_url)
    assert len(icons.requests) == before
    assert (await fetch_icon(other, server_url=icons.server_url, allow_origins=[other[:-9]])).data == PNG


async def test_a_redirect_to_another_origin_is_refused_and_not_followed(icons: Icons) -> None:
    with pytest.raises(IconError, match="redirected to another origin or scheme: refused"):
        await fetch_icon(icons.origin + "/elsewhere", server_url=icons.server_url)
    assert icons.paths()[-1] == "/elsewhere"
    with pytest.raises(IconError, match="more than 3 redirects"):
        await fetch_icon(icons.origin + "/loop", server_url=icons.server_url)
    assert icons.paths()[-4:] == ["/loop"] * 4
    with pytest.raises(IconError, match="redirected to a URL with credentials in it: refused"):
        await fetch_icon(icons.origin + "/userinfo", server_url=icons.server_url)
    assert icons.paths()[-1] == "/userinfo"


async def test_a_fetch_that_takes_too_long_is_given_up(icons: Icons) -> None:
    with pytest.raises(IconError, match=r"not fetched within 0\.2 s$"):
        await fetch_icon(icons.origin + "/stall", server_url=icons.server_url, timeout=0.2)


async def test_an_svg_is_told_by_its_root_element() -> None:
    def data(content: bytes) -> str:
        return "data:;base64," + base64.b64encode(content).decode()

    server = "https://mcp.example.com/mcp"
    svg = b"\xef\xbb\xbf <!-- drawn by hand -->\n<!DOCTYPE svg>\n<svg/>"
    assert (await fetch_icon(data(svg), server_url=server, allow_svg=True)).mime_type == "image/svg+xml"
    for other in (b"<!doctype html><html><body><svg></svg></body></html>", b'<!DOCTYPE svg [<!ENTITY a "aa">]><svg/>'):
        with pytest.raises(IconError, match="its content is no PNG, JPEG, WebP, GIF or SVG image"):
            await fetch_icon(data(other), server_url=server, allow_svg=True)


async def test_without_the_http_extra_a_url_needs_it_and_a_data_uri_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(MissingExtra, match=r"^fetching an icon needs httpx: install the http extra \(pip install"):
        await fetch_icon("https://mcp.example.com/icon.png", server_url="https://mcp.example.com/mcp")
    data = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert (await fetch_icon(data, server_url="https://mcp.example.com/mcp")).data == PNG


async def test_a_public_server_cannot_make_the_host_fetch_from_loopback(icons: Icons) -> None:
    before = len(icons.requests)
    with pytest.raises(IconError) as caught:
        await fetch_icon(icons.origin + "/icon.png", server_url="https://8.8.8.8/mcp", allow_origins=[icons.origin])
    assert caught.value.reason == (
        "the MCP server 8.8.8.8 is on a public address and may not send the client to 127.0.0.1, a loopback address: "
        "refused before connecting (allow_networks widens this)"
    )
    assert len(icons.requests) == before
    fetched = await fetch_icon(
        icons.origin + "/icon.png",
        server_url="https://8.8.8.8/mcp",
        allow_origins=[icons.origin],
        allow_networks=["127.0.0.1"],
    )
    assert fetched.data == PNG


async def test_a_body_past_the_bound_is_refused(icons: Icons) -> None:
    with pytest.raises(IconError, match=r"larger than 1000 bytes$"):
        await fetch_icon(icons.origin + "/big.png", server_url=icons.server_url, max_bytes=1000)
    assert (await fetch_icon(icons.origin + "/big.png", server_url=icons.server_url)).mime_type == "image/png"


async def test_content_that_is_no_image_is_refused_whatever_it_is_declared(icons: Icons) -> None:
    with pytest.raises(IconError, match=r"its content is no PNG, JPEG, WebP, GIF or SVG image"):
        await fetch_icon(Icon(src=icons.origin + "/page.png", mime_type="image/png"), server_url=icons.server_url)
    with pytest.raises(IconError, match="answered HTTP 404"):
        await fetch_icon(icons.origin + "/missing.png", server_url=icons.server_url)


async def test_a_declared_type_other_than_the_content_is_refused(icons: Icons) -> None:
    with pytest.raises(IconError, match=r"declared as 'image/jpeg' but its content is image/png$"):
        await fetch_icon(Icon(src=icons.origin + "/icon.png", mime_type="image/jpeg"), server_url=icons.server_url)


async def test_an_svg_is_refused_unless_the_caller_opts_in(icons: Icons) -> None:
    svg = Icon(src=icons.origin + "/icon.svg", mime_type="image/svg+xml")
    with pytest.raises(IconError, match=r"an SVG image is refused without allow_svg=True \(an SVG can carry script\)"):
        await fetch_icon(svg, server_url=icons.server_url)
    with pytest.raises(IconError, match="an SVG image is refused"):  # declared as PNG, it is still an SVG
        await fetch_icon(Icon(src=svg.src, mime_type="image/png"), server_url=icons.server_url)
    assert await fetch_icon(svg, server_url=icons.server_url, allow_svg=True) == FetchedIcon(SVG, "image/svg+xml")


async def test_data_uris_are_decoded_bounded_and_checked() -> None:
    server = "https://mcp.example.com/mcp"
    encoded = base64.b64encode(PNG).decode()
    assert await fetch_icon(f"data:image/png;base64,{encoded}", server_url=server) == FetchedIcon(PNG, "image/png")
    with pytest.raises(IconError, match=r"declared as 'image/jpeg' but its content is image/png$"):
        await fetch_icon(f"data:image/jpeg;base64,{encoded}", server_url=server)
    with pytest.raises(IconError, match=r"declared as 'image/gif' but its content is image/png$"):
        await fetch_icon(Icon(src=f"data:;base64,{encoded}", mime_type="image/gif"), server_url=server)
    with pytest.raises(IconError, match=r"^icon data:image/png;base64,\.\.\.: larger than 16 bytes$"):
        await fetch_icon(f"data:image/png;base64,{encoded}", server_url=server, max_bytes=16)
    with pytest.raises(IconError, match="does not decode"):
        await fetch_icon("data:image/png;base64,not*base64", server_url=server)
    svg = "data:image/svg+xml," + SVG.decode().replace("<", "%3C").replace(">", "%3E")
    with pytest.raises(IconError, match="an SVG image is refused"):
        await fetch_icon(svg, server_url=server)
    assert (await fetch_icon(svg, server_url=server, allow_svg=True)).data == SVG
