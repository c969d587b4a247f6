"""The knowledge server's graph view in a real headless Chromium, hosted as an MCP Apps host hosts it.

The server runs as users run it (``python -m jsonrpc_mcp serve`` over stdio); the test is the host: it finds the
view through ``query_graph``'s ``_meta.ui``, reads the ``ui://`` resource, calls the tool, and shows the page in
a sandboxed frame of another origin under the policy built from the resource's ``_meta.ui.csp``
(``browser_host``). The graph holds hostile text — a ``<script>`` element, an event attribute, an attribute
break-out, a ``javascript:`` URL — stored through the public ``relate`` tool as any client could. The page must
show each as text, and nothing in it may run: no message of theirs reaches the host, no element carries an
event attribute, the title stays, and even markup injected past the page's own code is stopped by its policy.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import msgspec
import pytest
from browser_host import hosted_view, until, view_frame

from jsonrpc_mcp import Client
from jsonrpc_mcp.apps import UI_EXTENSION, UI_MIME_TYPE, csp_header, host_extension

# A real Chromium, which does not depend on the interpreter's version: once, in its own leg of .ci/run.
pytestmark = [pytest.mark.anyio, pytest.mark.once]

SERVE = [sys.executable, "-m", "jsonrpc_mcp", "serve"]
TIMEOUT = 120
WAIT_MS = 20_000

SCRIPT = "<script>parent.postMessage({pwned:'script'},'*');document.title='pwned'</script>"
HANDLER = "<img src=x onerror=\"parent.postMessage({pwned:'onerror'},'*')\">"
URL = "javascript:parent.postMessage({pwned:'url'},'*')"
BREAKOUT = "\" onmouseover=\"parent.postMessage({pwned:'attribute'},'*')\" x=\""
LINK = "https://example.com/docs"
TRIPLES = [
    ("hub", "links", SCRIPT),
    ("hub", HANDLER, "gil"),
    ("hub", "mentions", URL),
    ("hub", BREAKOUT, "threads"),
    ("hub", "documented-at", LINK),
    ("gil", "limits", "threads"),
]

_SHOWN = """() => ({
  title: document.title,
  start: document.querySelector("h1 .start") && document.querySelector("h1 .start").textContent,
  relations: [...document.querySelectorAll("li.relation")].map(li => [
    li.querySelector(".subject").textContent, li.querySelector(".predicate").textContent,
    li.querySelector(".object").textContent]),
  nodes: [...document.querySelectorAll("li.node")].map(li => li.dataset.node),
  openButtons: [...document.querySelectorAll("li.node")].filter(li => li.querySelector("button.open"))
    .map(li => li.dataset.node),
  vertices: [...document.querySelectorAll("g.vertex")].map(g => g.dataset.node),
  scripts: document.querySelectorAll("script").length,
  images: document.querySelectorAll("img").length,
  links: document.querySelectorAll("a").length,
  eventAttributes: [...document.querySelectorAll("*")].flatMap(e => [...e.attributes].map(a => a.name))
    .filter(name => name.startsWith("on")),
  pwned: window.__pwned === undefined ? null : String(window.__pwned),
})"""

_CLICK_NODE_BUTTON = """([node, which]) => {
  const item = [...document.querySelectorAll("li.node")].find(li => li.dataset.node === node);
  item.querySelector("button." + which).click();
}"""

_INJECT = """() => new Promise(resolve => {
  document.addEventListener("securitypolicyviolation", e => resolve(e.effectiveDirective), { once: true });
  document.body.insertAdjacentHTML("beforeend", '<img src="data:," onerror="window.__pwned = \\'injected\\'">');
})"""


def drive_browser(html: str, csp: str, arguments: dict[str, Any], result: dict[str, Any], call_tool: Any) -> Any:
    """Host the view, look at it, hover and click what it shows; return what the page and the host saw."""
    with hosted_view(html, csp, arguments, result, call_tool) as page:
        frame = view_frame(page)
        until(frame, "() => document.querySelector('h1 .start') !== null")
        first = frame.evaluate(_SHOWN)
        for index in range(len(first["vertices"])):
            frame.hover(f"g.vertex >> nth={index}")
        for item in frame.query_selector_all("li.relation span, li.relation em"):
            item.hover()
        frame.evaluate(_CLICK_NODE_BUTTON, [LINK, "open"])
        page.wait_for_function("window.host.openLinks.length === 1", timeout=WAIT_MS)
        frame.evaluate(_CLICK_NODE_BUTTON, [SCRIPT, "explore"])
        until(frame, "(node) => document.querySelector('h1 .start').textContent === node", SCRIPT)
        explored = frame.evaluate(_SHOWN)
        blocked = frame.evaluate(_INJECT)
        after = frame.evaluate("() => window.__pwned === undefined ? null : String(window.__pwned)")
        host = page.evaluate("() => window.host")
        # The same markup in a page without the view's protections does run: the payloads are live.
        page.evaluate("""() => document.body.insertAdjacentHTML("beforeend",
            '<img src="data:," onerror="window.controlRan = true">')""")
        page.wait_for_function("window.controlRan === true", timeout=WAIT_MS)
        return {"first": first, "explored": explored, "blocked": blocked, "after": after, "host": host}


async def test_the_graph_view_shows_stored_hostile_text_as_text_and_runs_none_of_it(tmp_path: Path) -> None:
    env = {"KNOWLEDGE_DB": str(tmp_path / "k.db")}
    with anyio.fail_after(TIMEOUT):
        async with Client.connect_stdio(
            SERVE, env=env, stderr=subprocess.DEVNULL, extensions=[host_extension()]
        ) as client:
            assert client.server_extension(UI_EXTENSION) == {}  # the knowledge server declares the extension
            for subject, predicate, obj in TRIPLES:
                await client.call_tool("relate", {"subject": subject, "predicate": predicate, "object": obj})
            tool = next(t for t in await client.list_tools() if t.name == "query_graph")
            assert isinstance(tool.meta, dict)
            view_uri = tool.meta["ui"]["resourceUri"]
            read = await client.read_resource(view_uri)
            content = read.contents[0]
            assert content.mime_type == UI_MIME_TYPE
            assert isinstance(content.meta, dict) and isinstance(content.text, str)
            policy = csp_header(content.meta["ui"]["csp"])
            arguments = {"node": "hub", "depth": 1}
            result = msgspec.to_builtins(await client.call_tool("query_graph", arguments))

            def call_tool(name: str, args: dict[str, Any]) -> Any:
                async def call() -> Any:
                    return msgspec.to_builtins(await client.call_tool(name, args))

                return anyio.from_thread.run(call)

            seen = await anyio.to_thread.run_sync(drive_browser, content.text, policy, arguments, result, call_tool)

    first = seen["first"]
    assert first["title"] == "Knowledge graph"
    assert first["start"] == "hub"
    assert sorted(first["relations"]) == sorted([s, p, o] for s, p, o in TRIPLES if s == "hub")
    assert set(first["vertices"]) == set(first["nodes"]) == {"hub", SCRIPT, "gil", URL, "threads", LINK}
    assert first["openButtons"] == [LINK]  # the javascript: node is text, never a link
    assert (first["scripts"], first["images"], first["links"], first["eventAttributes"]) == (1, 0, 0, [])
    assert first["pwned"] is None
    explored = seen["explored"]
    assert explored["start"] == SCRIPT  # explored through the host's tools/call, drawn as text again
    assert explored["relations"] == [["hub", "links", SCRIPT]]
    assert (explored["scripts"], explored["eventAttributes"], explored["title"]) == (1, [], "Knowledge graph")
    assert seen["blocked"] == "script-src-attr" and seen["after"] is None
    host = seen["host"]
    assert host["initialized"] is True
    assert host["openLinks"] == [LINK]
    assert not [m for m in host["received"] if isinstance(m, dict) and "pwned" in m]
    assert all(m.get("jsonrpc") == "2.0" for m in host["received"])
    assert host["sizes"], "the view reports its size"
