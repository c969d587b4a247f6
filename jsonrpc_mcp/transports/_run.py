"""Starting an event loop for a server (L6 helper)."""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

__all__ = ("run",)

T = TypeVar("T")


def run(fn: Callable[..., Awaitable[T]], *args: Any, backend: str = "asyncio") -> T:
    """``anyio.run(fn, *args)``; an asyncio loop is uvloop's when uvloop is installed (the ``http`` extra installs
    it), as uvicorn chooses for HTTP: a faster loop for the same code."""
    options: dict[str, Any] = {}
    if backend == "asyncio" and importlib.util.find_spec("uvloop") is not None:
        options["use_uvloop"] = True
    return anyio.run(fn, *args, backend=backend, backend_options=options)
