"""The knowledge server's view (MCP Apps): the graph around a node, for hosts that show views (L7).

``query_graph`` names ``ui://knowledge/graph`` in its ``_meta.ui``; a host that supports the extension reads the
page, shows it in a sandboxed frame and hands it the tool's result, which the page draws (a ring per hop, the
relations under it); a node is explored further with another ``query_graph`` call through the host. The page is
a :class:`~jsonrpc_mcp.apps.View`: its own policy lets only its own script and style run, and it puts every
stored text on the page with ``textContent`` — a node named ``<script>…`` shows as those characters.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Final

from ...apps import View, add_view
from ...mcp.server import Server
from .app import READ_SCOPE

__all__ = ("GRAPH_VIEW", "graph_view", "register_views")

GRAPH_VIEW: Final = "ui://knowledge/graph"

_BODY: Final = '<main id="graph" aria-live="polite"></main>\n<p id="status">Waiting for the graph…</p>'


@cache
def graph_view() -> str:
    """The page of ``ui://knowledge/graph``."""
    here = resources.files(__package__)
    script = here.joinpath("graph_view.js").read_text(encoding="utf-8")
    style = here.joinpath("graph_view.css").read_text(encoding="utf-8")
    return View("Knowledge graph", body=_BODY, script=script, style=style).render()


def register_views(server: Server) -> None:
    add_view(
        server,
        GRAPH_VIEW,
        graph_view,
        name="knowledge-graph",
        title="Knowledge graph",
        description="The relations around a node, drawn as a graph (the view of query_graph).",
        prefers_border=True,
        scopes=[READ_SCOPE],
    )
