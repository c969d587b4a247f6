"""The benchmark server with the tool as a plain ``def`` registered the default way: each call runs on a worker
thread.

usage: python echo_thread.py stdio | tcp PORT | unix PATH | http PORT
"""

from __future__ import annotations

import sys

from jsonrpc_mcp import Server

server = Server("bench-echo-thread", version="1")


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Echo the given text back."""
    return text


if __name__ == "__main__":
    from _serve import main

    main(server, sys.argv[1:])
