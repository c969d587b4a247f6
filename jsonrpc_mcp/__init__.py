"""jsonrpc-mcp: the Model Context Protocol on a hand-written JSON-RPC 2.0 core."""
