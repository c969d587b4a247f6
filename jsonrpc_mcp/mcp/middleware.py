"""Middleware: callables around every inbound request and notification of a server (L4).

A middleware is called with the :class:`Message` and ``call_next``, and returns what ``call_next`` returned, or an
answer of its own::

    def no_op(message: Message, call_next: CallNext) -> Any:
        return call_next(message)

    async def timed(message: Message, call_next: CallNext) -> Any:
        started = time.perf_counter()
        try:
            return await call_next(message)
        finally:
            log.info("%s took %.3f s", message.method, time.perf_counter() - started)

It runs for every request and notification the server receives, in both eras, on every transport —
``initialize``, ``server/discover`` and unknown methods included — before the method is looked up. It may

* observe the message (method, params, ids, era, version, the transport's headers, the session);
* change it: assign ``message.params``, or put things in ``message.state``, which the handler reads as
  ``ctx.state``;
* answer early: return a result (a dict or a Struct) without calling ``call_next``, or raise an
  :class:`~jsonrpc_mcp.errors.RpcError` (the request's JSON-RPC error);
* see the outcome: ``call_next`` returns the handler's result as the handler made it (a ``CallToolResult`` whose
  ``is_error`` says a tool failed, a ``ListToolsResult``, a dict, ...) or raises the request's RpcError.

What ``call_next`` returns depends on the middleware's kind. An ``async def`` middleware awaits it (``await
call_next(message)``), and the request then runs in a task of its own: it needs the event loop. A plain ``def``
middleware gets the result at once when the handler answers at once, or an awaitable when the handler has to
wait, which it returns as it is (or wraps in a coroutine of its own to see the outcome): a server whose
middleware are plain functions keeps answering at once what its handlers answer at once, and a plain ``def``
tool's call passed on as it is stays on the sync lane (its worker thread runs it whole, no coroutine made for
it). A notification's ``call_next`` returns ``None``. A server without middleware pays nothing for the feature.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from ..jsonrpc.wire import Notification, Request, RequestId
from .eras import Call, notification_is_stateless, read_call
from .versions import META_PROTOCOL_VERSION, STATELESS_VERSIONS

if TYPE_CHECKING:
    from .client import ClientSession
    from .session import ServerSession

__all__ = (
    "Message",
    "Middleware",
    "CallNext",
    "ClientMessage",
    "ClientMiddleware",
    "checked_chain",
    "compose",
    "run_chain",
    "is_awaitable",
)

#: ``call_next(message)``: the rest of the chain, then the handler.
CallNext = Callable[["Message"], Any]
#: ``middleware(message, call_next)``: a plain function or an ``async def``.
Middleware = Callable[["Message", CallNext], Any]

_kinds: dict[Any, bool] = {}  # middleware -> it is an async function (decided once per middleware)
_NO_HEADERS: Final[Mapping[str, str]] = {}


_UNREAD: Final = object()


class Message(msgspec.Struct):
    """What a middleware sees of one inbound request or notification: ``Message(session, call)`` or
    ``Message(session, None, notification)``. (A Struct: one is made for every message, and a Struct is made for
    less than a class with an ``__init__``.)"""

    session: ServerSession
    #: The request as the session read it (``None`` for a notification).
    call: Call | Any = None
    #: The notification (``None`` for a request).
    notification: Notification | Any = None
    _params: Any = _UNREAD
    _state: dict[str, Any] | None = None

    @property
    def state(self) -> dict[str, Any]:
        """What the handler sees as ``ctx.state``: a middleware may put anything there."""
        state = self._state
        if state is None:
            state = self._state = {}
            if self.call is not None:
                self.call.state = state
        return state

    @property
    def kind(self) -> Literal["request", "notification"]:
        return "request" if self.call is not None else "notification"

    @property
    def method(self) -> str:
        return self.call.request.method if self.call is not None else self.notification.method

    @property
    def request_id(self) -> RequestId | None:
        """The request's id (``None`` for a notification)."""
        return self.call.request.id if self.call is not None else None

    @property
    def era(self) -> Literal["handshake", "stateless"]:
        if self.call is not None:
            stateless = self.call.stateless
        else:
            stateless = notification_is_stateless(self.notification)
        return "stateless" if stateless else "handshake"

    @property
    def version(self) -> str | None:
        """The protocol revision: the request's own (2026-07-28), or the session's (``None`` before
        ``initialize``)."""
        if self.era == "stateless":
            meta = self.meta.get(META_PROTOCOL_VERSION)
            return meta if isinstance(meta, str) else None
        return self.session.version

    @property
    def meta(self) -> Mapping[str, Any]:
        """The params' ``_meta`` (empty when they have none)."""
        params = self.params
        meta = params.get("_meta") if isinstance(params, dict) else None
        return meta if isinstance(meta, dict) else {}

    @property
    def params(self) -> Any:
        """The params as JSON data (a dict, or ``None`` without params); decoded on first use."""
        if self._params is _UNREAD:
            raw = self.call.request.params if self.call is not None else self.notification.params
            try:
                self._params = msgspec.json.decode(raw) if raw is not None else None
            except msgspec.DecodeError:
                self._params = None
        return self._params

    @params.setter
    def params(self, value: Any) -> None:
        """Replace the params: the handler gets these (they are read again, with the method's type)."""
        raw = msgspec.Raw(msgspec.json.encode(value)) if value is not None else None
        self._params = value
        if self.call is not None:
            request = self.call.request
            header = STATELESS_VERSIONS[0] if self.call.stateless else None
            self.call = read_call(
                self.session.app.methods, Request(request.id, request.method, raw), header, self.call.intake
            )
            if self._state is not None:
                self.call.state = self._state
        else:
            self.notification = Notification(self.notification.method, raw)

    @property
    def headers(self) -> Mapping[str, str]:
        """The transport-level headers of the message (HTTP), names in lower case; empty elsewhere."""
        if self.call is None:
            return _NO_HEADERS
        headers = self.call.intake.request_headers()
        return headers if headers is not None else _NO_HEADERS

    def __repr__(self) -> str:
        return f"<Message {self.kind} {self.method!r} id={self.request_id!r}>"


class ClientMessage:
    """What a client middleware sees: a request or notification the client sends (``direction`` ``"outgoing"``:
    it may change ``params`` before they are encoded; ``call_next`` returns the result's raw JSON, a
    :class:`msgspec.Raw`, or raises the server's error) or one it receives from the server (``"incoming"``:
    sampling, elicitation, roots, ping, notifications; ``call_next`` returns what the client's handler answers)."""

    __slots__ = ("direction", "inbound", "method", "params", "request_id", "session", "state", "timeout")

    def __init__(
        self,
        session: ClientSession,
        direction: Literal["outgoing", "incoming"],
        method: str,
        params: dict[str, Any] | None,
        request_id: RequestId | None,
        *,
        timeout: Any = ...,
        inbound: Request | Notification | None = None,
    ) -> None:
        self.session = session
        self.direction = direction
        self.method = method
        self.params = params
        self.request_id = request_id
        self.state: dict[str, Any] = {}
        self.timeout = timeout  #: (outgoing requests: how long to wait for the answer)
        self.inbound = inbound  #: (incoming: the message as received)

    @property
    def kind(self) -> Literal["request", "notification"]:
        return "request" if self.request_id is not None else "notification"

    @property
    def era(self) -> Literal["handshake", "stateless"]:
        return "stateless" if self.session.stateless else "handshake"

    def __repr__(self) -> str:
        return f"<ClientMessage {self.direction} {self.kind} {self.method!r} id={self.request_id!r}>"


#: ``middleware(message, call_next)`` of a client: a plain function or an ``async def``.
ClientMiddleware = Callable[[ClientMessage, Callable[[ClientMessage], Any]], Any]


def checked_chain(middleware: Iterable[Any]) -> tuple[Any, ...]:
    """``middleware`` as a chain, each of them checked: a class, or a function that makes a middleware
    (``log_requests``), given in the place of a middleware would fail every message with an internal error."""
    chain = tuple(middleware)
    for item in chain:
        name = getattr(item, "__name__", repr(item))
        if isinstance(item, type):
            raise TypeError(f"{name} is a class: give a middleware made of it, {name}(...)")
        if not callable(item):
            raise TypeError(f"a middleware is a function (message, call_next), not {item!r}")
        if getattr(item, "makes_middleware", False):
            raise TypeError(f"{name} makes a middleware: give the one it makes, {name}()")
    return chain


def run_chain(chain: tuple[Any, ...], message: Any, inner: Callable[[Any], Any]) -> Any:
    """Run ``message`` through the middleware, then ``inner`` (the handling): a value, or an awaitable of it."""
    last = _last_composed.get(inner)
    if last is not None and last[0] is chain:  # the same chain as last time (one server in a process: always)
        return last[1](message)
    composed = _composed.get((chain, inner))
    if composed is None:
        composed = _composed[(chain, inner)] = compose(chain, inner)
    _last_composed[inner] = (chain, composed)
    return composed(message)


#: Chains already composed: by (middleware, inner). The inner functions are a few, the middleware tuples of a
#: process too; bounded all the same.
_composed: dict[tuple[tuple[Any, ...], Callable[[Any], Any]], Callable[[Any], Any]] = {}
#: The chain each inner function last ran behind, and its composition: found by identity, without hashing the
#: chain.
_last_composed: dict[Callable[[Any], Any], tuple[tuple[Any, ...], Callable[[Any], Any]]] = {}


def compose(chain: tuple[Any, ...], inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The middleware around ``inner`` as one function of the message (made once per chain: nothing is made per
    message)."""
    if len(_composed) > 256:
        _composed.clear()
    call = inner
    for middleware in reversed(chain):
        call = _link(middleware, call)
    return call


def _link(middleware: Any, call_next: Callable[[Any], Any]) -> Callable[[Any], Any]:
    if _is_async(middleware):

        async def awaited(message: Any) -> Any:
            out = call_next(message)
            return await out if is_awaitable(out) else out

        return lambda message: middleware(message, awaited)
    return lambda message: middleware(message, call_next)


def is_awaitable(value: Any) -> bool:
    """``inspect.isawaitable``, with the usual results (a Struct, bytes, a dict) answered first."""
    if type(value) is CoroutineType:
        return True
    if value is None or isinstance(value, (msgspec.Struct, bytes, dict, list, str)):
        return False
    return inspect.isawaitable(value)


def _is_async(middleware: Middleware) -> bool:
    known = _kinds.get(middleware)
    if known is None:
        call = getattr(middleware, "__call__", None)  # noqa: B004 - an object with an async __call__ counts too
        known = _kinds[middleware] = inspect.iscoroutinefunction(middleware) or inspect.iscoroutinefunction(call)
    return known
