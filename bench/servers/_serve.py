"""Serve a benchmark server on the transport named on the command line (loopback only)."""

from __future__ import annotations

import logging
import sys
from typing import Any


def main(server: Any, argv: list[str]) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    mode = argv[0] if argv else "stdio"
    if mode == "stdio":
        from jsonrpc_mcp.transports.stdio import run_stdio

        run_stdio(server)
    elif mode == "tcp":
        from jsonrpc_mcp.transports.runner import run
        from jsonrpc_mcp.transports.socket import serve_tcp

        run(serve_tcp, server, "127.0.0.1", int(argv[1]))
    elif mode == "unix":
        from jsonrpc_mcp.transports.runner import run
        from jsonrpc_mcp.transports.socket import serve_unix

        run(serve_unix, server, argv[1])
    elif mode == "http":
        from jsonrpc_mcp.transports.http_serve import serve_http

        serve_http(server, "127.0.0.1", int(argv[1]), path="/mcp")
    else:
        raise SystemExit(f"unknown transport {mode!r}: stdio | tcp PORT | unix PATH | http PORT")
