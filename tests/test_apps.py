"""MCP Apps helpers: the view page and its own policy, the policy a host builds from ``_meta.ui.csp``, the tool
and resource ``_meta``, escaping, and the extension's negotiation through a real HTTP server (uvicorn) at a
handshake revision and at 2026-07-28."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

import anyio
import anyio.to_thread
import pytest
from helpers import TIMEOUT
from http_support import ServerThread

from jsonrpc_mcp import Client, Context, Server
from jsonrpc_mcp.apps import (
    UI_EXTENSION,
    UI_MIME_TYPE,
    Csp,
    View,
    add_view,
    csp_header,
    escape,
    host_extension,
    json_for_html,
    resource_meta,
    supports_views,
    tool_meta,
)
from jsonrpc_mcp.extensions import Extension
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp


def test_the_extension_default_policy_applies_when_a_view_declares_no_csp() -> None:
    policy = csp_header(None)
    assert "default-src 'none'" in policy and "connect-src 'none'" in policy and "frame-src 'none'" in policy


def test_a_declared_csp_adds_its_origins_where_the_extension_says_and_nothing_else() -> None:
    csp = Csp(connect_domains=("https://api.example.com",), resource_domains=("https://cdn.example.com",))
    policy = dict(part.split(" ", 1) for part in csp_header(csp.meta()).split("; "))
    assert policy["connect-src"] == "'self' https://api.example.com"
    assert policy["script-src"] == "'self' 'unsafe-inline' https://cdn.example.com"
    assert policy["frame-src"] == "'none'" and policy["object-src"] == "'none'" and policy["base-uri"] == "'self'"
    assert csp_header(Csp().meta())  # nothing declared: no origin at all
    assert "connect-src 'none'" in csp_header(Csp().meta())


def test_an_origin_that_would_inject_a_directive_is_refused_or_dropped() -> None:
    with pytest.raises(ValueError):
        Csp(connect_domains=("https://a.example; script-src *",))
    assert "script-src *" not in csp_header({"connectDomains": ["https://a.example; script-src *"]})


def test_a_string_given_for_a_list_of_origins_permissions_or_callers_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^connect_domains is a tuple of origins, not a string"):
        Csp(connect_domains="https://api.example.com")  # type: ignore[arg-type]  # (was: one origin per letter)
    with pytest.raises(TypeError, match=r"^frame_domains is a tuple of origins, not a string"):
        Csp(frame_domains="https://embed.example.com")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^permissions is a list of permission names, not a string"):
        resource_meta(permissions="camera")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r'^visibility is a list of "model" and "app", not a string'):
        tool_meta("ui://app/view", visibility="app")  # type: ignore[arg-type]


def test_tool_meta_names_the_view_and_who_may_call_the_tool() -> None:
    assert tool_meta("ui://app/view") == {"ui": {"resourceUri": "ui://app/view", "visibility": ["model", "app"]}}
    assert tool_meta("ui://app/view", visibility=["app"])["ui"]["visibility"] == ["app"]
    with pytest.raises(ValueError):
        tool_meta("https://app/view")
    with pytest.raises(ValueError):
        tool_meta("ui://app/view", visibility=["user"])  # type: ignore[list-item]


def test_resource_meta_carries_csp_permissions_and_presentation() -> None:
    meta = resource_meta(permissions=["camera"], prefers_border=True, domain="abc.example")
    assert meta == {
        "ui": {
            "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
            "permissions": {"camera": {}},
            "domain": "abc.example",
            "prefersBorder": True,
        }
    }
    with pytest.raises(ValueError):
        resource_meta(permissions=["usb"])  # type: ignore[list-item]


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_a_view_allows_exactly_its_own_script_and_style_by_hash() -> None:
    page = View("T <&>", body="<main></main>", script="run()", style="p{}", data={"x": "</script><b>"}).render()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    scripts = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    styles = re.findall(r"<style>(.*?)</style>", page, re.DOTALL)
    assert len(scripts) == 1 and len(styles) == 1
    assert f"script-src {_sha(scripts[0])};" in policy and f"style-src {_sha(styles[0])};" in policy
    assert "unsafe-inline" not in policy and "'self'" not in policy and "connect-src 'none'" in policy
    assert "window.mcpApp" in scripts[0] and scripts[0].rstrip().endswith("run()")
    assert "<title>T &lt;&amp;&gt;</title>" in page
    embedded = re.search(r'<script type="application/json" id="mcp-app-data">(.*?)</script>', page).group(1)  # type: ignore[union-attr]
    assert "<" not in embedded and json.loads(embedded) == {"x": "</script><b>"}


def test_escape_and_json_for_html_leave_nothing_that_ends_an_element() -> None:
    assert (
        escape("<img src=x onerror=\"a()\"> & 'q'") == "&lt;img src=x onerror=&quot;a()&quot;&gt; &amp; &#x27;q&#x27;"
    )
    text = json_for_html(["</script>", "a&b", "\u2028"])
    assert not set(text) & {"<", ">", "&", "\u2028"} and json.loads(text) == ["</script>", "a&b", "\u2028"]
    assert UI_MIME_TYPE == "text/html;profile=mcp-app"


# --- negotiation -----------------------------------------------------------------------------------------------


def clock_server() -> Server:
    server = Server("clock", version="1.0")
    add_view(server, "ui://clock/face", View("Clock", body="<p id=t></p>"), name="clock-face")

    @server.tool(meta=tool_meta("ui://clock/face"))
    def now(ctx: Context) -> dict[str, Any]:
        """The time, and whether the client shows the view."""
        return {"time": "12:00", "view": supports_views(ctx)}

    return server


HOSTS = {
    "host": ([host_extension()], True),
    "plain": ([], False),
    "other-mime-types": ([host_extension(["text/uri-list"])], False),
    "no-settings": ([Extension(UI_EXTENSION)], False),
}


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("host", list(HOSTS))
async def test_a_server_with_a_view_declares_the_extension_and_sees_which_clients_show_views(
    version: str, host: str
) -> None:
    extensions, shows = HOSTS[host]
    thread = ServerThread(McpAsgiApp(clock_server()))
    try:
        with anyio.fail_after(TIMEOUT * 3):
            async with Client.connect_http(thread.url, protocol_version=version, extensions=extensions) as client:
                declared = client.server_extension(UI_EXTENSION)
                result = await client.call_tool("now", {})
    finally:
        await anyio.to_thread.run_sync(thread.stop)
    assert declared == {}
    assert result.structured_content == {"time": "12:00", "view": shows}
