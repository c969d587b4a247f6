"""The benchmark server with the tool written as ``async def`` (the anchors' form): each call runs in its own task.

usage: python echo_async.py stdio | tcp PORT | unix PATH | http PORT
"""

from __future__ import annotations

import sys

from jsonrpc_mcp import Server

server = Server("bench-echo-async", version="1")


@server.tool(structured_output=False)
async def echo(text: str) -> str:
    """Echo the given text back."""
    return text


if __name__ == "__main__":
    from _serve import main

    main(server, sys.argv[1:])
