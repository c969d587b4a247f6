"""The benchmark server: one typed tool ``echo(text: str) -> str`` through the public API.

Content only (``structured_output=False``), like every anchor. A plain ``def`` registered with ``inline=True``: it
never blocks, so it runs on the event loop (the dispatcher's fast path) instead of a worker thread, as its author
may choose. ``echo_thread.py`` is the same tool as a plain ``def`` on a worker thread (the default), and
``echo_async.py`` as ``async def`` (the anchors' form).

usage: python echo.py stdio | tcp PORT | unix PATH | http PORT
"""

from __future__ import annotations

import sys

from jsonrpc_mcp import Server

server = Server("bench-echo", version="1")


@server.tool(structured_output=False, inline=True)
def echo(text: str) -> str:
    """Echo the given text back."""
    return text


if __name__ == "__main__":
    from _serve import main

    main(server, sys.argv[1:])
