"""A minimal MCP Apps host in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

The host page and the view are served from two different origins (``https://host.test`` and
``https://sandbox.test``, answered by Playwright's request interception: no sockets). The view is the HTML a
server returned from ``resources/read``, served with the content security policy the host builds from the
resource's ``_meta.ui.csp`` (:func:`jsonrpc_mcp.apps.csp_header`), in an ``<iframe sandbox="allow-scripts">``:
an opaque origin, no access to the host page. The host page speaks the extension's ``postMessage`` protocol:
it answers ``ui/initialize``, sends the tool's input and result after ``ui/notifications/initialized``, proxies
``tools/call`` to the real MCP server (a Python function the test gives), records ``ui/open-link``, and records
every message the view sends, so that a test sees anything a hostile script managed to post.

Playwright's synchronous API runs in a worker thread (:func:`anyio.to_thread.run_sync`); the proxied tool calls
come back to the test's event loop with :func:`anyio.from_thread.run`, on asyncio and trio alike.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

HOST_ORIGIN = "https://host.test"
SANDBOX_ORIGIN = "https://sandbox.test"
VIEW_URL = SANDBOX_ORIGIN + "/view"

_HOST_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>host</title></head>
<body>
<iframe id="view" sandbox="allow-scripts" src="%(view)s" width="640" height="900"></iframe>
<script>
"use strict";
const frame = document.getElementById("view");
const toolInput = %(input)s;
const toolResult = %(result)s;
window.host = { received: [], openLinks: [], initialized: false, sizes: [] };
function send(message) {
  frame.contentWindow.postMessage(Object.assign({ jsonrpc: "2.0" }, message), "*");
}
window.addEventListener("message", async function (event) {
  if (event.source !== frame.contentWindow) return;
  const m = event.data;
  window.host.received.push(m);
  if (!m || m.jsonrpc !== "2.0") return;
  if (m.method === "ui/initialize") {
    send({ id: m.id, result: {
      protocolVersion: "2026-01-26",
      hostInfo: { name: "test-host", version: "1.0.0" },
      hostCapabilities: { openLinks: {}, serverTools: {} },
      hostContext: { theme: "light", displayMode: "inline", availableDisplayModes: ["inline"] },
    } });
  } else if (m.method === "ui/notifications/initialized") {
    window.host.initialized = true;
    send({ method: "ui/notifications/tool-input", params: { arguments: toolInput } });
    send({ method: "ui/notifications/tool-result", params: toolResult });
  } else if (m.method === "tools/call") {
    try {
      const result = await window.callServerTool(m.params.name, m.params.arguments || {});
      send({ id: m.id, result: result });
    } catch (error) {
      send({ id: m.id, error: { code: -32603, message: String(error) } });
    }
  } else if (m.method === "ui/open-link") {
    window.host.openLinks.push(m.params.url);
    send({ id: m.id, result: {} });
  } else if (m.method === "ui/notifications/size-changed") {
    window.host.sizes.push(m.params);
  } else if (m.id !== undefined) {
    send({ id: m.id, error: { code: -32601, message: "Method not found" } });
  }
});
</script>
</body></html>
"""


def _script_json(value: Any) -> str:
    """JSON for the host page's own inline script: ``<`` escaped, so stored text cannot end the script."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def chromium() -> str:
    """Debian's Chromium (``.ci/system-packages`` installs it; ``CHROMIUM`` names another binary)."""
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("no chromium on PATH: run .ci/system-packages (apt-get install chromium) or set CHROMIUM")
    return path


@contextmanager
def hosted_view(
    html: str,
    csp: str,
    tool_input: dict[str, Any],
    tool_result: dict[str, Any],
    call_tool: Callable[[str, dict[str, Any]], dict[str, Any]],
) -> Iterator[Any]:
    """A page hosting ``html`` as a view (served with the policy ``csp``), given the tool's input and result;
    yields the Playwright ``Page`` of the host (the view is its frame at :data:`VIEW_URL`)."""
    from playwright.sync_api import sync_playwright

    host_page = _HOST_PAGE % {"view": VIEW_URL, "input": _script_json(tool_input), "result": _script_json(tool_result)}
    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium's own process sandbox refuses root
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=args)
        try:
            page = browser.new_page()
            page.route(
                HOST_ORIGIN + "/",
                lambda route: route.fulfill(status=200, content_type="text/html", body=host_page),
            )
            page.route(
                VIEW_URL,
                lambda route: route.fulfill(
                    status=200,
                    headers={"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": csp},
                    body=html,
                ),
            )
            page.expose_function("callServerTool", call_tool)
            page.goto(HOST_ORIGIN + "/")
            yield page
        finally:
            browser.close()


_UNTIL = """([arg, ms]) => new Promise((resolve, reject) => {
  const test = %s;
  const timer = setTimeout(() => { observer.disconnect(); reject(new Error("timed out waiting in the view")); }, ms);
  const observer = new MutationObserver(check);
  function check() {
    if (test(arg)) { clearTimeout(timer); observer.disconnect(); resolve(true); }
  }
  observer.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
  check();
})"""


def until(frame: Any, predicate: str, arg: Any = None, timeout_ms: int = 20_000) -> None:
    """Wait until the JavaScript function ``predicate(arg)`` holds in ``frame``, checked on every change of its
    DOM. (``Frame.wait_for_function`` evaluates a string in the page, which the view's policy rightly refuses;
    this sends the predicate as part of a function, the way ``evaluate`` does.)"""
    frame.evaluate(_UNTIL % predicate, [arg, timeout_ms])


def view_frame(page: Any) -> Any:
    """The view's frame in the host page."""
    frame = page.frame(url=VIEW_URL)
    assert frame is not None, "the view's frame did not load"
    return frame
