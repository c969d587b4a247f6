"""Authorization for the ``jsonrpc-mcp list|call --url`` commands (L6): their options, and the
:class:`~jsonrpc_mcp.auth.OAuth` those describe.

When a server answers 401 the command authorizes interactively: the authorization URL is written to stderr and
opened in the browser, the redirect comes back to a one-shot listener on 127.0.0.1, and the tokens are kept in
``$XDG_CONFIG_HOME/jsonrpc-mcp/tokens.json`` (``~/.config/…``, mode 0600), so the next command needs no browser.
Progress goes to stderr; a token or secret never does. A client secret is best given in
``JSONRPC_MCP_CLIENT_SECRET`` (the command line is visible to other users of the machine). The time spent in the
browser does not count against ``--timeout``.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a command needs them: ``jsonrpc-mcp serve`` never loads httpx
    import anyio

    from .oauth_client import OAuth
    from .oauth_consent import LoopbackConsent

__all__ = ("add_arguments", "oauth_from_arguments", "default_token_store", "SECRET_VARIABLE")

SECRET_VARIABLE = "JSONRPC_MCP_CLIENT_SECRET"


def default_token_store() -> Path:
    """``$XDG_CONFIG_HOME/jsonrpc-mcp/tokens.json`` (``~/.config`` when it is unset)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "jsonrpc-mcp" / "tokens.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The authorization options of ``list`` and ``call`` (they apply to ``--url``)."""
    group = parser.add_argument_group("authorization (with --url, when the server asks for it)")
    group.add_argument("--client-id", metavar="ID", help="a client registered with the authorization server")
    group.add_argument(
        "--client-secret",
        metavar="SECRET",
        help=f"its secret (better: the {SECRET_VARIABLE} environment variable, which ps does not show)",
    )
    group.add_argument("--client-metadata-url", metavar="URL", help="this client's client ID metadata document URL")
    group.add_argument("--scope", action="append", metavar="SCOPE", help="ask for this scope (repeatable)")
    group.add_argument(
        "--token-store",
        metavar="PATH",
        help="where tokens are kept (default $XDG_CONFIG_HOME/jsonrpc-mcp/tokens.json, ~/.config when it is unset)",
    )
    group.add_argument("--no-token-store", action="store_true", help="keep tokens in memory only")
    group.add_argument("--no-browser", action="store_true", help="do not open a browser; only print the URL")
    group.add_argument("--redirect-port", type=int, default=0, metavar="PORT", help="the redirect listener's port")


class _CommandConsent:
    """The loopback consent of a command with an overall deadline: lifted while the user is in the browser, a
    fresh ``--timeout`` afterwards."""

    def __init__(self, consent: LoopbackConsent, deadline: anyio.CancelScope | None, budget: float) -> None:
        self._consent = consent
        self._deadline = deadline
        self._budget = budget

    @property
    def redirect_uri(self) -> str:
        return self._consent.redirect_uri

    async def authorize(self, authorization_url: str) -> str:
        import anyio

        if self._deadline is None:
            return await self._consent.authorize(authorization_url)
        self._deadline.deadline = math.inf
        try:
            return await self._consent.authorize(authorization_url)
        finally:
            self._deadline.deadline = anyio.current_time() + self._budget


def oauth_from_arguments(args: argparse.Namespace) -> OAuth:
    """The OAuth of a ``list``/``call`` command (progress on stderr)."""
    from .oauth_client import OAuth
    from .oauth_consent import LoopbackConsent
    from .oauth_store import FileTokenStore, MemoryTokenStore, TokenStore

    secret = args.client_secret if args.client_secret is not None else (os.environ.get(SECRET_VARIABLE) or None)
    if secret is not None and args.client_id is None:
        raise SystemExit("jsonrpc-mcp: a client secret needs --client-id")
    store: TokenStore
    if args.no_token_store:
        store = MemoryTokenStore()
    else:
        store = FileTokenStore(args.token_store or default_token_store())
    loopback = LoopbackConsent(port=args.redirect_port, open_browser=not args.no_browser, show=_show)
    consent = _CommandConsent(loopback, getattr(args, "deadline", None), args.timeout)
    _progress_on_stderr()
    return OAuth(
        client_name="jsonrpc-mcp",
        client_id=args.client_id,
        client_secret=secret,
        client_metadata_url=args.client_metadata_url,
        scopes=args.scope,
        store=store,
        consent=consent,
    )


def _show(url: str) -> None:
    sys.stderr.write(f"jsonrpc-mcp: to authorize, open this URL in a browser:\n\n    {url}\n\n")
    sys.stderr.flush()


def _progress_on_stderr() -> None:
    """The authorization steps (INFO of ``jsonrpc_mcp.auth``) on stderr even without ``-v``, once."""
    log = logging.getLogger("jsonrpc_mcp.auth")
    if any(getattr(handler, "jsonrpc_mcp_cli", False) for handler in log.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("jsonrpc-mcp: %(message)s"))
    handler.jsonrpc_mcp_cli = True  # type: ignore[attr-defined]
    log.addHandler(handler)
    log.propagate = False  # not twice (the command's own handler prints warnings of everything)
    if log.level == logging.NOTSET or log.level > logging.INFO:
        log.setLevel(logging.INFO)
