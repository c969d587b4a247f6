"""The benchmark server of ``bench/scale.py``: ``echo.py``'s tool, and ``pid()``, the process that answers.

Several workers serve one socket; ``pid`` tells the benchmark which of them answered, so that it starts measuring
only once every worker serves (a worker still starting takes no connection, and a driver's keep-alive connections
stay where they were first accepted). ``echo`` is the same inline tool as in ``echo.py``.

usage: jsonrpc-mcp serve bench/servers/echo_pid.py:server --http HOST:PORT [--workers N --backend URL]
"""

from __future__ import annotations

import os

from jsonrpc_mcp import Server

server = Server("bench-echo", version="1")


@server.tool(structured_output=False, inline=True)
def echo(text: str) -> str:
    """Echo the given text back."""
    return text


@server.tool(structured_output=False, inline=True)
def pid() -> str:
    """The process id of the worker that answers."""
    return str(os.getpid())
