"""The benchmark server: one typed tool ``echo(text: str) -> str`` through the public API.

Content only (``structured_output=False``), like every anchor. A plain ``def``: in jsonrpc-mcp a sync tool runs
inline on the event loop (the dispatcher's fast path), while the Python SDKs send sync tools to a worker thread,
which is why their anchors use ``async def``. ``echo_async.py`` is the same tool as ``async def``.

usage: python echo.py stdio | tcp PORT | unix PATH | http PORT
"""

from __future__ import annotations

import sys

from jsonrpc_mcp import Server

server = Server("bench-echo", version="1")


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Echo the given text back."""
    return text


if __name__ == "__main__":
    from _serve import main

    main(server, sys.argv[1:])
