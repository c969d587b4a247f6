"""Anchor: official Python SDK (mcp 2.3.0), high-level MCPServer API (the former FastMCP-style API).

usage: python mcpserver_server.py stdio
       python mcpserver_server.py http [PORT]     (Streamable HTTP at http://127.0.0.1:PORT/mcp via the SDK's own uvicorn runner)
"""
import sys

from mcp.server import MCPServer

mcp = MCPServer("anchor-py-mcpserver", log_level="WARNING")


# async def: keep the tool on the event loop (a sync def is dispatched to a worker thread by the SDK).
# structured_output=False: return only content[0].text, the same wire work as every other anchor
# (the default for `-> str` would also send structuredContent={"result": text}, doubling the payload).
@mcp.tool(structured_output=False)
async def echo(text: str) -> str:
    """Echo the given text back."""
    return text


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        mcp.run("stdio")
    else:
        port = int(sys.argv[2]) if len(sys.argv) > 2 else 18102
        mcp.run("streamable-http", host="127.0.0.1", port=port)


if __name__ == "__main__":
    main()
# ruff: noqa: E501  (copied unchanged from the shared anchors; only this line added)
