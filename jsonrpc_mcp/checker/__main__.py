"""``python -m jsonrpc_mcp.checker``: the same as ``jsonrpc-mcp check`` (L7)."""

import sys

from .cli import main

sys.exit(main())
