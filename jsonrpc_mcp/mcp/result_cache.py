"""The client's result cache (2026-07-28 caching hints, SEP-2549): opt-in, ``Client.connect_*(..., cache=...)``.

A result is kept only when the server said how long it stays fresh (``ttlMs`` > 0), only for the cacheable
methods (``server/discover``, the four listings, ``resources/read``), only when it is ``resultType: "complete"``
and came from a request without ``inputResponses`` or ``requestState``. An entry is keyed by the server (its URL,
command or object), the protocol version, the method and the parameters that affect the result (every parameter
but ``_meta``: the ``cursor`` of a page, the ``uri`` of a read), and, for a ``"private"`` result, the
authorization context it was read in; a ``"public"`` one is shared by every context. It is fresh while
``now < t_received + ttlMs`` on a monotonic clock; a stale entry is never served (unless ``serve_stale_on_error``
and the re-fetch cannot reach the server) and is re-fetched on the next access, never in the background.
A change notification drops the entries it concerns at once (docs/spec-decisions.md, 107).
"""

from __future__ import annotations

import hashlib
import itertools
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from ..jsonrpc.codes import INVALID_PARAMS, METHOD_NOT_FOUND

__all__ = ("ResultCache", "CacheSlot", "CacheKey", "identity_of", "token_identity", "CACHEABLE")

#: The methods whose complete results carry caching hints (2026-07-28, "Cacheable Results").
CACHEABLE: Final = frozenset(
    {"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
)
#: The listings a change notification makes stale (``notifications/resources/updated`` drops the read of its URI).
_CHANGED: Final[Mapping[str, tuple[str, ...]]] = {
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
}
#: The listings a request's "method not found" or "invalid params" answer makes suspect (the caching page: a client
#: MAY re-fetch early on "an unexpected error on a tool call indicating the method was not found or the parameters
#: were invalid"): the tool, prompt or resource asked for may be gone.
_LISTED_BY: Final[Mapping[str, tuple[str, ...]]] = {
    "tools/call": ("tools/list",),
    "prompts/get": ("prompts/list",),
    "resources/read": ("resources/list", "resources/templates/list"),
}
_SUSPECT_CODES: Final = frozenset({METHOD_NOT_FOUND, INVALID_PARAMS})
#: The parameters of a multi round-trip retry: its result depends on them, so it is never kept.
_RETRY_PARAMS: Final = ("inputResponses", "requestState")
_PUBLIC: Final = ("public",)
_encode_sorted = msgspec.json.Encoder(order="sorted").encode


class _Hints(msgspec.Struct, rename="camel"):
    result_type: Any = "complete"
    ttl_ms: Any = None
    cache_scope: Any = None
    next_cursor: Any = None


_hints: Final = msgspec.json.Decoder(_Hints)

#: (server, protocol version, method, the encoded parameters): what a result is for, whoever may read it.
CacheKey = tuple[str, str, str, bytes]


class _Entry:
    __slots__ = ("expires", "raw", "uri")

    def __init__(self, raw: bytes, expires: float, uri: Any) -> None:
        self.raw = raw
        self.expires = expires
        self.uri = uri


class ResultCache:
    """Results a server marked cacheable, kept while fresh; one may serve several clients (each server's entries,
    and each authorization context's private ones, apart).

    :param max_entries: the most results kept (the least recently used go first).
    :param max_bytes: the most bytes of results kept; a result larger than a tenth of it is not kept.
    :param clock: seconds on a monotonic clock (tests give a fake one).
    :param serve_stale_on_error: when the re-fetch of a stale entry cannot reach the server (the connection is
        closed, the request timed out), answer with the stale entry instead of the error (the spec's MAY; off).
    """

    def __init__(
        self,
        *,
        max_entries: int = 1000,
        max_bytes: int = 32 * 1024 * 1024,
        clock: Callable[[], float] = time.monotonic,
        serve_stale_on_error: bool = False,
    ) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries is a positive whole number, not {max_entries!r}")
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ValueError(f"max_bytes is a positive whole number, not {max_bytes!r}")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.clock = clock
        self.serve_stale_on_error = serve_stale_on_error
        self._entries: OrderedDict[tuple[CacheKey, tuple[str, ...]], _Entry] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0

    # --- keys ------------------------------------------------------------------------------------------------

    @staticmethod
    def key(server: str, version: str | None, method: str, params: Mapping[str, Any]) -> CacheKey | None:
        """The key of a request, or ``None`` when its result is never kept (a method without caching hints, a
        retry of a multi round-trip request)."""
        if method not in CACHEABLE or version is None or any(name in params for name in _RETRY_PARAMS):
            return None
        affecting = {name: value for name, value in params.items() if name != "_meta"}
        return (server, version, method, _encode_sorted(affecting))

    def slot(
        self, server: str, auth: str | None, version: str | None, method: str, params: Mapping[str, Any]
    ) -> CacheSlot | None:
        """Where the result of a request of ``server`` in the authorization context ``auth`` is kept, or ``None``
        when it never is."""
        key = self.key(server, version, method, params)
        return None if key is None else CacheSlot(self, key, auth)

    # --- reading and writing ---------------------------------------------------------------------------------

    def get(self, key: CacheKey, auth: str | None, *, stale: bool = False) -> bytes | None:
        """The fresh result for ``key`` in the authorization context ``auth`` (its private entry first, then the
        public one), or ``None``; ``stale=True`` takes one that has expired too (kept only with
        ``serve_stale_on_error``)."""
        now = self.clock()
        for scope in (("private", auth or ""), _PUBLIC):
            entry = self._entries.get((key, scope))
            if entry is None:
                continue
            if now < entry.expires or stale:
                self._entries.move_to_end((key, scope))
                return entry.raw
            if not self.serve_stale_on_error:
                self._drop((key, scope))
        return None

    def put(self, key: CacheKey, auth: str | None, raw: bytes, received: float) -> None:
        """Keep the result ``raw`` of ``key``, received at ``received`` (this cache's clock), as its hints say: a
        ``ttlMs`` absent, zero, negative or not a whole number is stale at once, so it is not kept (and what was
        kept for the key is dropped); a scope other than ``"public"`` is private to ``auth``."""
        try:
            hints = _hints.decode(raw)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return
        self.drop(key, auth)
        ttl = hints.ttl_ms
        if hints.result_type != "complete" or isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0:
            return
        if len(raw) * 10 > self.max_bytes:
            return
        scope = _PUBLIC if hints.cache_scope == "public" else ("private", auth or "")
        uri = msgspec.json.decode(key[3]).get("uri") if key[2] == "resources/read" else None
        self._entries[(key, scope)] = _Entry(bytes(raw), received + ttl / 1000, uri)
        self._bytes += len(raw)
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            self._drop(next(iter(self._entries)))

    def listing(self, server: str, version: str | None, method: str, auth: str | None, max_pages: int) -> list[bytes]:
        """Every page of a listing, when each one is fresh here (from the first, without a cursor, to the last,
        without ``nextCursor``); else ``[]``: the caller reads the whole listing from the server again."""
        pages: list[bytes] = []
        params: dict[str, Any] = {}
        seen: set[str] = set()
        while len(pages) < max_pages:
            key = self.key(server, version, method, params)
            raw = None if key is None else self.get(key, auth)
            if raw is None:
                return []
            pages.append(raw)
            cursor = _hints.decode(raw).next_cursor
            if not isinstance(cursor, str) or cursor in seen:
                return pages
            seen.add(cursor)
            params = {"cursor": cursor}
        return []

    # --- invalidation ----------------------------------------------------------------------------------------

    def drop(self, key: CacheKey, auth: str | None) -> None:
        """Forget what ``key`` holds for ``auth`` (its private entry and the public one)."""
        self._drop((key, ("private", auth or "")))
        self._drop((key, _PUBLIC))

    def drop_method(self, server: str, method: str, uri: str | None = None) -> None:
        """Forget every entry of ``method`` from ``server`` (every page, version and context; for
        ``resources/read`` with ``uri``, the reads of that URI only)."""
        for stored in [s for s, e in self._entries.items() if s[0][0] == server and s[0][2] == method]:
            if uri is None or self._entries[stored].uri == uri:
                self._drop(stored)

    def notified(self, server: str, method: str, params: Mapping[str, Any]) -> None:
        """A notification from ``server``: a list change drops the listing's pages, ``resources/updated`` the
        reads of its URI."""
        for listing in _CHANGED.get(method, ()):
            self.drop_method(server, listing)
        if method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            self.drop_method(server, "resources/read", params["uri"])

    def failed(self, server: str, method: str, params: Mapping[str, Any], code: int) -> None:
        """``server`` answered a request with an error: a page's cursor refused drops every page of that listing
        (the caching page: "discard all cached pages"); a call of a tool, prompt or resource answered "method not
        found" or "invalid params" drops the listing it came from, which may be out of date."""
        if method in CACHEABLE and "cursor" in params:
            self.drop_method(server, method)
        if code in _SUSPECT_CODES:
            for listing in _LISTED_BY.get(method, ()):
                self.drop_method(server, listing)

    def _drop(self, stored: tuple[CacheKey, tuple[str, ...]]) -> None:
        entry = self._entries.pop(stored, None)
        if entry is not None:
            self._bytes -= len(entry.raw)


_identities: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_counter = itertools.count(1)


def identity_of(obj: Any, kind: str) -> str:
    """A name for a live object (a ``Server`` served in-process, an ``httpx.Auth``) that no other object gets, not
    even one created later at the same address."""
    try:
        name = _identities.get(obj)
        if name is None:
            name = _identities[obj] = f"{kind}#{next(_counter)}"
        return name
    except TypeError:  # (an object without weak references: this use only)
        return f"{kind}#{next(_counter)}"


def token_identity(credential: str) -> str:
    """The authorization context of a credential (an ``Authorization`` header's value): its SHA-256, so that the
    cache never holds the secret itself."""
    return "token:" + hashlib.sha256(credential.encode()).hexdigest()


class CacheSlot:
    """One request's place in a :class:`ResultCache`: its key and the authorization context it is made in."""

    __slots__ = ("auth", "cache", "key")

    def __init__(self, cache: ResultCache, key: CacheKey, auth: str | None) -> None:
        self.cache = cache
        self.key = key
        self.auth = auth

    def get(self) -> bytes | None:
        """The fresh result kept for the request, or ``None``."""
        return self.cache.get(self.key, self.auth)

    def stale(self) -> bytes | None:
        """The result kept for it even if stale, when the cache serves those on errors; else ``None``."""
        return self.cache.get(self.key, self.auth, stale=True) if self.cache.serve_stale_on_error else None

    def keep(self, raw: bytes) -> None:
        """The server's result for it, kept as its hints say (received now)."""
        self.cache.put(self.key, self.auth, raw, self.cache.clock())
