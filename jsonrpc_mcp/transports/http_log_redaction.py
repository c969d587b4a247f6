"""Session ids kept out of the HTTP client library's own log lines (L6; standard library only).

A session id is what lets a request into its session: the 2024-11-05 HTTP+SSE transport puts it in the URL that
messages are POSTed to (``/messages/?session_id=…``), which httpx's request log line (INFO) shows whole, and
httpcore's DEBUG trace shows the response headers, ``Mcp-Session-Id`` among them. :func:`redact_session_ids`
installs, once, a filter on their loggers that replaces the value by ``…`` in such a line; nothing else about
the line changes, and a record without one passes untouched.
"""

from __future__ import annotations

import logging
import re
from typing import Final

__all__ = ("redact_session_ids", "SessionIdRedaction")

#: ``session_id=<value>`` in a URL, and the ``mcp-session-id`` header's value in a headers list as httpcore logs it.
_PATTERNS: Final = (
    re.compile(r"(?i)([?&]session_id=)[^&\s\"'#]+"),
    re.compile(r"(?i)((?:b)?['\"]mcp-session-id['\"],\s*(?:b)?['\"])[^'\"]*"),
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


class SessionIdRedaction(logging.Filter):
    """Rewrites a record whose message shows a session id, the id replaced by ``…``."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = message
        for pattern in _PATTERNS:
            redacted = pattern.sub(r"\1…", redacted)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


_FILTER: Final = SessionIdRedaction()


def redact_session_ids() -> None:
    """Install the filter on httpx's and httpcore's loggers, once."""
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
