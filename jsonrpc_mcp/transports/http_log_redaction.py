"""Secrets kept out of the HTTP client library's own log lines (L6; standard library only).

httpx logs each request's URL (INFO) and httpcore the headers of each answer (DEBUG). What they would show that
lets someone in: an authorization code or a token in a URL (an OAuth redirect carries the code in its
``Location``), and a session id — the 2024-11-05 HTTP+SSE transport puts it in the URL that messages are POSTed
to (``/messages/?session_id=…``), Streamable HTTP in the ``Mcp-Session-Id`` header of an answer.
:func:`redact_http_logs` installs, once, a filter on their loggers that replaces each such value by
``[redacted]``; nothing else about the line changes, and a record without one passes untouched.
"""

from __future__ import annotations

import logging
import re
from typing import Final

__all__ = ("redact_http_logs", "HttpLogRedaction")

_PATTERNS: Final = (
    # a query (or fragment) parameter that carries an authorization code, a token or a session id
    re.compile(r"(?i)([?&#;](?:code|access_token|id_token|refresh_token|session_id)=)[^&#;\s'\"]*"),
    # the ``mcp-session-id`` header's value in a headers list as httpcore logs it
    re.compile(r"(?i)(b?['\"]mcp-session-id['\"],\s*b?['\"])[^'\"]*"),
)
#: The loggers the records come from (a logger's filters see only its own records, not its children's).
_LOGGERS: Final = (
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)


class HttpLogRedaction(logging.Filter):
    """Rewrites a record whose message shows a secret, its value replaced by ``[redacted]``."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = message
        for pattern in _PATTERNS:
            redacted = pattern.sub(r"\1[redacted]", redacted)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


_FILTER: Final = HttpLogRedaction()


def redact_http_logs() -> None:
    """Install the filter on httpx's and httpcore's loggers; calling it again changes nothing. Called by every
    HTTP client of the package (MCP connections, the OAuth client and its consents)."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
