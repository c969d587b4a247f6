"""Where an OAuth client keeps what it obtained (L6): tokens per MCP server, client registrations per
authorization server (keyed by its ``issuer``), DPoP keys.

A store is any object with ``load``, ``save`` and ``delete`` of JSON-ready dicts by string key
(:class:`TokenStore`). Two ship here: :class:`MemoryTokenStore` (the default: nothing outlives the process) and
:class:`FileTokenStore` (one JSON file, written atomically and readable by its owner only)::

    auth = OAuth(store=FileTokenStore("~/.config/my-app/mcp-tokens.json"))
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio
import msgspec

__all__ = ("TokenStore", "MemoryTokenStore", "FileTokenStore")

logger = logging.getLogger(__name__)


@runtime_checkable
class TokenStore(Protocol):
    """Storage for OAuth state: JSON-ready dicts by key. Values hold secrets: keep them where only the user can
    read them."""

    async def load(self, key: str) -> dict[str, Any] | None: ...

    async def save(self, key: str, value: Mapping[str, Any]) -> None: ...

    async def delete(self, key: str) -> None: ...


class MemoryTokenStore:
    """Keeps everything in this process's memory (the default)."""

    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {}

    async def load(self, key: str) -> dict[str, Any] | None:
        value = self._items.get(key)
        return dict(value) if value is not None else None

    async def save(self, key: str, value: Mapping[str, Any]) -> None:
        self._items[key] = dict(value)

    async def delete(self, key: str) -> None:
        self._items.pop(key, None)


class FileTokenStore:
    """Keeps everything in one JSON file that only its owner can read or write (mode 0600, its folder created
    0700). Every change rewrites the file atomically (a temporary file in the same folder, then a rename), so a
    crash never leaves half a file. A file found with wider permissions is narrowed to 0600, with a warning.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self._lock = anyio.Lock()

    async def load(self, key: str) -> dict[str, Any] | None:
        async with self._lock:
            items = await anyio.to_thread.run_sync(self._read)
        value = items.get(key)
        return dict(value) if isinstance(value, dict) else None

    async def save(self, key: str, value: Mapping[str, Any]) -> None:
        async with self._lock:
            items = await anyio.to_thread.run_sync(self._read)
            items[key] = dict(value)
            await anyio.to_thread.run_sync(self._write, items)

    async def delete(self, key: str) -> None:
        async with self._lock:
            items = await anyio.to_thread.run_sync(self._read)
            if items.pop(key, None) is not None:
                await anyio.to_thread.run_sync(self._write, items)

    def _read(self) -> dict[str, Any]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return {}
        if stat.S_IMODE(info.st_mode) & 0o077:
            logger.warning("%s was readable by others; narrowing it to its owner (0600)", self.path)
            os.chmod(self.path, 0o600)
        try:
            value = msgspec.json.decode(self.path.read_bytes())
        except msgspec.DecodeError:
            logger.warning("%s is not valid JSON; starting from an empty store", self.path)
            return {}
        return value if isinstance(value, dict) else {}

    def _write(self, items: dict[str, Any]) -> None:
        folder = self.path.parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=folder)  # created 0600
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(msgspec.json.encode(items))
                file.flush()
                os.fsync(file.fileno())
            os.chmod(temporary, 0o600)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
