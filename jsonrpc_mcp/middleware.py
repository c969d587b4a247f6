"""Middleware that ships with the library: request logging with timings, a rate limiter, a response-size limit.

Give them to a server::

    server = Server("demo", middleware=[log_requests(), RateLimiter(rate=5, burst=20), ResponseSizeLimit(1 << 20)])

All three are plain functions of the request (no event loop needed): a server that answers at once keeps
answering at once. How to write your own, and what a middleware sees and may do: :mod:`jsonrpc_mcp.mcp.middleware`.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Final, cast

import msgspec

from .errors import InternalError, RpcError
from .jsonrpc import codes
from .mcp import types as t
from .mcp.middleware import CallNext, Message, Middleware
from .mcp.versions import META_CLIENT_INFO

__all__ = (
    "Message",
    "CallNext",
    "Middleware",
    "log_requests",
    "RateLimiter",
    "RateLimited",
    "ResponseSizeLimit",
    "by_session",
    "by_client",
    "by_header",
    "by_principal",
    "TASK_OPERATIONS",
)


def _after(message: Message, out: Any, then: Callable[[Any, BaseException | None], None]) -> Any:
    """Call ``then(value, error)`` once the outcome of ``call_next`` is known: now, or when its awaitable is done
    (then a coroutine that awaits it is returned in its place)."""
    if not inspect.isawaitable(out):
        then(out, None)
        return out

    async def finished() -> Any:
        try:
            value = await out
        except BaseException as exc:
            then(None, exc)
            raise
        then(value, None)
        return value

    return finished()


def _outcome(value: Any, error: BaseException | None) -> str:
    if error is not None:
        return f"error {error.code}" if isinstance(error, RpcError) else f"failed ({type(error).__name__})"
    if isinstance(value, t.CallToolResult) and value.is_error is True:
        return "tool error"
    return "ok"


def log_requests(logger: logging.Logger | None = None, level: int = logging.INFO) -> Middleware:
    """A middleware that logs each request and notification: method, id, era, outcome (``ok``, ``tool error``,
    ``error -32602``, ...) and how long it took. Only the method and the outcome, never params or results."""
    log = logger or logging.getLogger("jsonrpc_mcp.requests")

    def middleware(message: Message, call_next: CallNext) -> Any:
        if not log.isEnabledFor(level):
            return call_next(message)
        started = time.perf_counter()

        def report(value: Any, error: BaseException | None) -> None:
            took = (time.perf_counter() - started) * 1000
            ident = f" id={message.request_id!r}" if message.request_id is not None else ""
            log.log(level, "%s%s (%s): %s in %.1f ms", message.method, ident, message.era, _outcome(value, error), took)

        try:
            out = call_next(message)
        except BaseException as exc:
            report(None, exc)
            raise
        return _after(message, out, report)

    return middleware


log_requests.makes_middleware = True  # type: ignore[attr-defined]  # (Server refuses it in a middleware's place)

# --- rate limiting ------------------------------------------------------------------------------------------------


def by_session(message: Message) -> Hashable:
    """The connection (handshake era: the session; 2026-07-28 over HTTP every request has its own, so this keys on
    the client's declared identity there, as :func:`by_client` does)."""
    if message.era == "stateless":
        return by_client(message)
    return id(message.session)


def by_client(message: Message) -> Hashable:
    """The client's declared name (``clientInfo``). Declared by the client itself: use it against careless
    clients, not hostile ones (for those, key on what the transport or an authorization layer vouches for)."""
    if message.era == "stateless":
        info = message.meta.get(META_CLIENT_INFO)
    else:
        info = message.session.client_info
    name = info.get("name") if isinstance(info, dict) else None
    return ("client", name if isinstance(name, str) else None)


def by_principal(message: Message) -> Hashable:
    """The principal the transport authenticated for the request (an HTTP authorization policy: its issuer,
    subject and client), what a client cannot choose for itself; :func:`by_session` where none was."""
    auth = message.call.intake.auth if message.call is not None else None
    principal = getattr(auth, "principal", None)
    if isinstance(principal, tuple):
        return ("principal", principal)
    return by_session(message)


#: The requests that read or change a task once it is made (2025-11-25's, and the tasks extension's): the methods
#: of ``RateLimiter(..., methods=TASK_OPERATIONS)`` for a limit on polling and on guessing task ids.
TASK_OPERATIONS: Final = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update"})


def by_header(name: str) -> Callable[[Message], Hashable]:
    """A transport header's value (HTTP), e.g. the address a trusted proxy puts in ``x-forwarded-for``."""
    header = name.lower()

    def key(message: Message) -> Hashable:
        return ("header", message.headers.get(header))

    return key


class RateLimited(RpcError):
    """Too many requests from one key: -31010 (:data:`~jsonrpc_mcp.jsonrpc.codes.BUSY`) with ``data.retryAfter``
    (seconds); Streamable HTTP answers 429."""

    code = codes.BUSY
    default_message = "Too many requests"

    def __init__(self, retry_after: float) -> None:
        seconds = max(1, math.ceil(retry_after))
        super().__init__(f"Too many requests: retry after {seconds} s", {"retryAfter": seconds})


class RateLimiter:
    """A token bucket per key: ``burst`` requests at once, refilled at ``rate`` requests a second. A request over
    the limit is refused with :class:`RateLimited` (-31010, ``data.retryAfter``) before its handler runs.
    Notifications are never limited (they cannot be refused). At most ``max_keys`` buckets are kept (the least
    recently used go first)."""

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        key: Callable[[Message], Hashable] = by_session,
        methods: frozenset[str] | None = None,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not rate > 0:  # (a NaN is not either: it would never limit)
            raise ValueError(f"rate must be positive, not {rate!r}")
        for name, count in (("burst", burst), ("max_keys", max_keys)):
            if not count >= 1:
                raise ValueError(f"{name} must be positive, not {count!r}")
        if key is cast(Any, by_header):  # (it would key every request on a new function: a bucket each, no limit)
            raise TypeError('by_header makes the key of one header: key=by_header("x-api-key")')
        if isinstance(methods, str):  # (it would limit every method whose name is a part of it)
            raise TypeError(f"methods is a set of method names, not a string: methods={{{methods!r}}}")
        self.rate = rate
        self.burst = burst
        self.key = key
        #: only these methods are limited (``None``: every request)
        self.methods = None if methods is None else frozenset(methods)
        self.max_keys = max_keys
        self.clock = clock
        self._buckets: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()  # key -> (tokens, at)

    def __call__(self, message: Message, call_next: CallNext) -> Any:
        if message.kind == "request" and (self.methods is None or message.method in self.methods):
            self.take(self.key(message))
        return call_next(message)

    def take(self, key: Hashable) -> None:
        """Spend one token of ``key``'s bucket, or raise :class:`RateLimited`."""
        now = self.clock()
        tokens, at = self._buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens < 1:
            self._keep(key, tokens, now)
            raise RateLimited((1 - tokens) / self.rate)
        self._keep(key, tokens - 1, now)

    def _keep(self, key: Hashable, tokens: float, now: float) -> None:
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)


# --- response size ------------------------------------------------------------------------------------------------


class ResponseSizeLimit:
    """Answers larger than ``max_bytes`` (their result encoded as JSON) do not go out: a tool's becomes a tool
    error the model can read (it may ask for less); any other is -32603. Encoding to measure costs a second encode
    of each result: give the limit only where you need it."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        self.max_bytes = max_bytes

    def __call__(self, message: Message, call_next: CallNext) -> Any:
        out = call_next(message)
        if message.kind != "request":
            return out
        if inspect.isawaitable(out):
            return self._checked_later(message, out)
        return self._checked(message, out)

    async def _checked_later(self, message: Message, pending: Any) -> Any:
        return self._checked(message, await pending)

    def _checked(self, message: Message, value: Any) -> Any:
        size = len(value) if type(value) is bytes else len(msgspec.json.encode(value, enc_hook=_as_builtins))
        if size <= self.max_bytes:
            return value
        logging.getLogger(__name__).warning(
            "%s: an answer of %d bytes was refused (limit %d)", message.method, size, self.max_bytes
        )
        text = f"The answer is {size} bytes, over this server's limit of {self.max_bytes} bytes: ask for less."
        if message.method == "tools/call":
            return t.CallToolResult(content=[t.TextContent(text=text)], is_error=True)
        raise InternalError(f"Internal error: {text}")


def _as_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)
