"""``python -m jsonrpc_mcp``: the same as the ``jsonrpc-mcp`` command."""

import sys

from .cli import main

sys.exit(main())
