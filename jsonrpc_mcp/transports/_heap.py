"""Handing the process's free heap memory back to the operating system (L6): what
``McpAsgiApp(trim_memory=True)`` does after a burst of sessions has ended. It acts on the whole process."""

from __future__ import annotations

import gc
import logging
import sys
from typing import Any

__all__ = ("release_memory", "find_malloc_trim")

logger = logging.getLogger(__name__)

_malloc_trim: Any = None


def release_memory() -> None:
    """After a burst of sessions: collect the cycles they left, then hand the free pages of the C heap back to the
    OS with glibc's ``malloc_trim`` (Linux with glibc only; elsewhere just the collection). Takes a few ms."""
    gc.collect()
    trim = find_malloc_trim()
    if trim:
        trim(0)


def find_malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or False. Looked up when the table starts: ``ctypes`` imported after a burst would
    put its long-lived objects in the free slots the burst's sessions left, and keep their arenas alive."""
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _malloc_trim = ctypes.CDLL(None).malloc_trim
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                logger.debug("no malloc_trim here: freed C-heap pages stay with the process")
    return _malloc_trim
