"""The MCP server API: registries of tools, resources, prompts and completions, and their methods (L5).

::

    server = Server("demo", version="1.0")

    @server.tool()
    def add(a: int, b: int = 0) -> int:
        "Add two numbers."
        return a + b

A :class:`Server` is transport-agnostic: it is served by :mod:`jsonrpc_mcp.transports` (stdio, sockets,
Streamable HTTP), one :class:`~jsonrpc_mcp.mcp.session.ServerSession` per connection, both eras on each.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypedDict, TypeVar, Unpack, get_args, get_origin

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..errors import InsufficientScope, InvalidParams, ResourceNotFound, RpcError, Unavailable
from ..jsonrpc.dispatch import Dispatcher
from ..jsonrpc.streams import MessageStream
from ..jsonrpc.workers import SyncCall
from . import types as t
from .bus import Bus, BusEvent, ExtensionEvent, ListChanged, LogMessage, ResourceUpdated
from .context import LOG_LEVELS, Context
from .extensions import Extension, extension_methods, extensions_capability, needed_capabilities
from .methods import BOTH, HANDSHAKE_ONLY, STATELESS_ONLY, MethodSpec
from .middleware import Middleware, checked_chain
from .pagination import paginate
from .principal import missing_scopes
from .progress import DEFAULT_INTERVAL as DEFAULT_PROGRESS_INTERVAL
from .progress import check_interval
from .session import ServerSession
from .signature import describe_validation_error, inspect_function
from .tools import ToolDef, ToolOptions, call_completer, check_options, make_tool, runner
from .tracing import TracingHook, TracingSwitch, tracing_switch
from .versions import CORE_TASKS_VERSION, META_SUBSCRIPTION_ID, SUPPORTED_VERSIONS

if TYPE_CHECKING:
    from .core_tasks import CoreTasks
    from .uri_template import UriTemplate

__all__ = (
    "Server",
    "ToolDef",
    "ResourceDef",
    "ResourceTemplateDef",
    "PromptDef",
    "CacheHint",
    "ToolOptions",
    "ResourceOptions",
    "PromptOptions",
    "TOOL_NAME",
    "resource_contents",
    "prompt_result",
    "complete_result",
)

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

#: SEP-986: 1-128 characters of A-Z a-z 0-9 _ - . (the official suite also fails names over 64 characters).
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
#: A resource URI (or template): an RFC 3986 scheme (a letter, then letters, digits, + - .), a colon, and no
#: whitespace or control character anywhere.
RESOURCE_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s\x00-\x1f\x7f]*$")
_encode = msgspec.json.Encoder().encode
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"


class CacheHint(msgspec.Struct, frozen=True):
    """2026-07-28 caching hints (SEP-2549): how long a client may reuse a result, and who may share it."""

    ttl_ms: int = 0
    scope: Literal["public", "private"] = "public"

    def __post_init__(self) -> None:
        if isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int):
            raise TypeError(f"ttl_ms is a whole number of milliseconds, not {self.ttl_ms!r}")
        if self.ttl_ms < 0:
            raise ValueError("ttl_ms must be >= 0")
        if self.scope not in ("public", "private"):  # (a misspelt "private" would have gone out as it is)
            raise ValueError(f'scope must be "public" or "private", not {self.scope!r}')


_DEFAULT_CACHE: Final = CacheHint()
#: The shortest ``request_state_key`` taken (bytes): 128 bits, beyond guessing.
_MIN_STATE_KEY: Final = 16


# --- params Structs the server decodes (lean: only what the handlers read) ----------------------------------


_NO_ARGUMENTS: Final = Raw(b"null")


class _CallToolParams(msgspec.Struct, rename="camel"):
    name: str
    arguments: Raw = _NO_ARGUMENTS
    input_responses: Any = UNSET  # (2026-07-28: the answers to an InputRequiredResult, and its state)
    request_state: Any = UNSET
    task: Any = UNSET  # (2025-11-25: task augmentation, {ttl?}; see core_tasks)
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class _CursorParams(msgspec.Struct, rename="camel"):
    cursor: str | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class _UriParams(msgspec.Struct, rename="camel"):
    uri: str
    input_responses: Any = UNSET
    request_state: Any = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class _GetPromptParams(msgspec.Struct, rename="camel"):
    name: str
    arguments: dict[str, Any] | UnsetType | None = UNSET
    input_responses: Any = UNSET
    request_state: Any = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class _SetLevelParams(msgspec.Struct):
    level: str
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class _CompleteParams(msgspec.Struct, rename="camel"):
    ref: dict[str, Any]
    argument: dict[str, Any]
    context: dict[str, Any] | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class _ListenParams(msgspec.Struct, rename="camel"):
    notifications: dict[str, Any] = {}
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


#: How long before the transport ends a listen stream by itself (its access token expiring) the server ends it.
_ENDS_EARLY: Final = 0.5


class _Listen:
    """A ``subscriptions/listen`` stream being served: ``stop`` is set when the server tears it down (``reason``),
    ``done`` once its handler has sent its end."""

    __slots__ = ("done", "reason", "stop")

    def __init__(self, stop: Any, done: Any) -> None:
        self.stop = stop
        self.done = done
        self.reason = ""

    def end(self, reason: str) -> None:
        if not self.stop.is_set():
            self.reason = reason
            self.stop.set()


# --- registry entries (Structs, not dataclasses: cheaper to define at import) ----------------------------------


class ResourceDef(msgspec.Struct):
    resource: t.Resource
    read: Callable[..., Any]
    cache: CacheHint | None = None
    wants_ctx: str | None = None
    wants_query: bool = False


class ResourceTemplateDef(msgspec.Struct):
    template: t.ResourceTemplate
    matcher: UriTemplate
    read: Callable[..., Any]
    cache: CacheHint | None = None
    wants_ctx: str | None = None
    wants_query: bool = False
    complete: dict[str, Callable[..., Any]] = msgspec.field(default_factory=dict)


class PromptDef(msgspec.Struct):
    prompt: t.Prompt
    render: Callable[..., Any]
    signature: Any
    complete: dict[str, Callable[..., Any]] = msgspec.field(default_factory=dict)


class ResourceOptions(TypedDict, total=False):
    """How a resource (or a resource template) is registered besides its function and URI: the keywords of
    :meth:`Server.resource` and :meth:`Server.add_resource` (described there; each may be left out)."""

    name: str | None
    title: str | None
    description: str | None
    mime_type: str | None
    size: int | None
    annotations: t.Annotations | None
    icons: list[t.Icon] | None
    cache: CacheHint | None
    meta: Mapping[str, Any] | None
    inline: bool  # default False
    scopes: Iterable[str] | None


class PromptOptions(TypedDict, total=False):
    """How a prompt is registered besides its function and name: the keywords of :meth:`Server.prompt` and
    :meth:`Server.add_prompt` (described there; each may be left out)."""

    title: str | None
    description: str | None
    icons: list[t.Icon] | None
    complete: Mapping[str, Callable[..., Any]] | None
    meta: Mapping[str, Any] | None
    inline: bool  # default False
    scopes: Iterable[str] | None


def _called_first(argument: Any, decorator: str, example: str) -> None:
    """Refuse a decorator used without its call (``@server.tool``): the function would be registered as nothing
    and replaced by the decorator itself."""
    if callable(argument):
        raise TypeError(f"@server.{decorator} is called to make the decorator: @server.{decorator}({example})")


class Server:
    """An MCP server: register tools, resources and prompts, then serve it on any transport.

    :param name: ``serverInfo.name``.
    :param version: ``serverInfo.version``.
    :param instructions: shown to the client's model as guidance on using this server.
    :param page_size: items per page of every ``*/list`` (``None``: everything in one page).
    :param cache: default 2026-07-28 caching hints for list results, ``resources/read`` and ``server/discover``.
    :param request_state_key: HMAC key for ``requestState`` (16 bytes or more), or several: the first seals, every
        one opens (to rotate, put the new key first and keep the old one until its states have expired). Give every
        worker behind one URL the same keys, or a shared backend (:meth:`use_backend`), whose keys are used when
        none is given here.
    :param middleware: callables around every inbound request and notification, outermost first (see
        :mod:`jsonrpc_mcp.middleware`); :meth:`add_middleware` adds more.
    :param scope_hierarchy: OAuth scopes that imply others (``{"notes:admin": ["notes:write"]}``): a token with
        the broader scope may do what the narrower one allows (docs/authorization.md).
    :param extensions: protocol extensions the server offers (:class:`~jsonrpc_mcp.mcp.extensions.Extension`);
        :meth:`add_extension` adds more.
    :param tracing: OpenTelemetry spans and metrics of every message (:mod:`jsonrpc_mcp.otel`): ``None``, by
        themselves once the application configures OpenTelemetry; ``False``, never; a
        :class:`~jsonrpc_mcp.otel.Tracing`, with its providers.
    :param progress_interval: seconds between two ``notifications/progress`` of one request (50 ms): reports
        within it are held and only the latest is sent, at the interval's end or before the response (decision
        104); ``0`` sends every report as it comes.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.0.0",
        *,
        title: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        website_url: str | None = None,
        icons: list[t.Icon] | None = None,
        page_size: int | None = 100,
        cache: CacheHint = _DEFAULT_CACHE,
        request_state_key: bytes | Sequence[bytes] | None = None,
        request_state_ttl: float = 600.0,
        capabilities: Mapping[str, Any] | None = None,
        middleware: Iterable[Middleware] = (),
        scope_hierarchy: Mapping[str, Iterable[str]] | None = None,
        extensions: Iterable[Extension] = (),
        tracing: TracingHook | bool | None = None,
        progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
    ) -> None:
        if page_size is not None and page_size < 1:
            raise ValueError("page_size must be positive or None")
        self.name = name
        self.version = version
        self.title = title
        self.description = description
        self.instructions = instructions
        self.website_url = website_url
        self.icons = icons
        self.page_size = page_size
        self.cache = cache
        if isinstance(request_state_key, bytes):
            request_state_key = (request_state_key,)
        self._state_keys: tuple[bytes, ...] = tuple(request_state_key or ())
        if not all(isinstance(key, bytes) and key for key in self._state_keys):
            raise ValueError("request_state_key must be bytes, or a sequence of non-empty bytes")
        if any(len(key) < _MIN_STATE_KEY for key in self._state_keys):  # (a short one can be guessed: states forged)
            raise ValueError(
                f"request_state_key must be at least {_MIN_STATE_KEY} bytes (secrets.token_bytes(32) makes a good one)"
            )
        self._own_state_key = os.urandom(32)
        if isinstance(request_state_ttl, bool) or not isinstance(request_state_ttl, (int, float)):
            raise TypeError(f"request_state_ttl must be a number of seconds, not {request_state_ttl!r}")
        if not request_state_ttl > 0:  # (a NaN is not either)
            raise ValueError(f"request_state_ttl must be positive, not {request_state_ttl!r}")
        self.request_state_ttl = request_state_ttl
        #: Seconds between two ``notifications/progress`` of one request (decision 104; 0: every report is sent).
        self.progress_interval = check_interval(progress_interval)
        self._spent_states: Any = None
        #: What this server shares with its other workers (:meth:`use_backend`), or ``None``: nothing to share.
        self.backend: Bus | None = None
        self._extra_capabilities = dict(capabilities or {})
        self._tools: dict[str, ToolDef] = {}
        self._resources: dict[str, ResourceDef] = {}
        self._templates: dict[str, ResourceTemplateDef] = {}
        self._prompts: dict[str, PromptDef] = {}
        self._completion: Callable[..., Any] | None = None
        self._custom: dict[str, MethodSpec] = {}
        if any(isinstance(implied, (str, bytes)) for implied in (scope_hierarchy or {}).values()):
            raise TypeError(
                'scope_hierarchy maps a scope to a list of the scopes it implies: {"a": ["b"]}, not a string'
            )
        self.scope_hierarchy = {k: tuple(v) for k, v in (scope_hierarchy or {}).items()}
        #: OAuth scopes each tool, resource (or template), prompt and custom method needs, by (kind, name).
        self._scopes: dict[tuple[str, str], tuple[str, ...]] = {}
        self._sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()
        self._listens: set[_Listen] = set()  # the subscriptions/listen streams served now (2026-07-28)
        self._notification_handlers: dict[str, list[Callable[[ServerSession, dict[str, Any]], Any]]] = {}
        self._info_cache: dict[str, Any] | None = None
        self.methods: Mapping[str, MethodSpec] = {}
        self._middleware: tuple[Middleware, ...] = checked_chain(middleware)
        #: Whether OpenTelemetry traces the messages (``None``: never).
        self.tracing: TracingSwitch | None = tracing_switch(tracing)
        self._extensions: dict[str, Extension] = {}
        #: The 2025-11-25 face of the tasks extension, once the server has one (:mod:`.core_tasks`).
        self._core_tasks: CoreTasks | None = None
        #: The core capabilities the extensions need declared (:meth:`_capability_map`).
        self._needed: frozenset[str] = frozenset()
        #: The capability maps :meth:`advertises` reads, by revision (``None``: any revision).
        self._declared: dict[str | None, dict[str, Any]] = {}
        for extension in extensions:
            self._add_extension(extension)
        self._rebuild_methods()

    @property
    def request_state_keys(self) -> tuple[bytes, ...]:
        """The keys that open ``requestState``, the one that seals first: those given to the constructor, else the
        backend's (shared by the workers), else this process's own random key."""
        if self._state_keys:
            return self._state_keys
        if self.backend is not None:
            shared = self.backend.state_keys()
            if shared:
                return shared
            raise Unavailable()  # (the backend has not reached its service yet)
        return (self._own_state_key,)

    @property
    def request_state_key(self) -> bytes:
        """The key that seals new ``requestState`` values."""
        return self.request_state_keys[0]

    @property
    def spent_states(self) -> Any:
        """The single-use ``requestState`` nonces already answered in this process (a
        ``request_state.SeenNonces``); with a backend, :meth:`claim_state` asks it instead."""
        if self._spent_states is None:
            from .request_state import SeenNonces

            self._spent_states = SeenNonces()
        return self._spent_states

    @property
    def middleware(self) -> tuple[Middleware, ...]:
        """The middleware, outermost first (empty: nothing runs around the handlers); the tracing is the first of
        them while it runs."""
        tracing = self.tracing
        return self._middleware if tracing is None else tracing.server_chain(self._middleware)

    @middleware.setter
    def middleware(self, middleware: Iterable[Middleware]) -> None:
        self._middleware = checked_chain(middleware)

    # --- extensions ----------------------------------------------------------------------------------------

    def add_extension(self, extension: Extension) -> Extension:
        """Offer a protocol extension: it is declared in the capabilities of the revisions it is defined for, and
        its methods and wrappers are added to the method table (see :mod:`jsonrpc_mcp.mcp.extensions`)."""
        self._add_extension(extension)
        self._rebuild_methods()
        self._info_cache = None
        return extension

    def _add_extension(self, extension: Extension) -> None:
        if extension.id in self._extensions:
            hint = ""
            if extension.id == TASKS_EXTENSION:
                hint = " (a tool registered with task= adds one: give Server(extensions=[Tasks(...)]) first)"
            raise ValueError(f"the server offers {extension.id} already{hint}")
        self._extensions[extension.id] = extension
        if extension.id == TASKS_EXTENSION:
            from .core_tasks import CoreTasks
            from .tasks import Tasks

            if isinstance(extension, Tasks):  # (its 2025-11-25 face: that revision's core tasks)
                self._core_tasks = CoreTasks(extension, self)
        self._needed = needed_capabilities(self._extensions.values())
        self._declarations_changed()
        extension.attach(self)

    @property
    def extensions(self) -> Mapping[str, Extension]:
        """The extensions this server offers, by identifier."""
        return MappingProxyType(self._extensions)

    def claim_state(self, nonce: str, expires: float, now: float) -> bool | Awaitable[bool]:
        """Spend a single-use state's nonce: True the first time only (awaitable with a backend: every worker's
        claims are in one place)."""
        if self.backend is not None:
            return self.backend.claim(nonce, expires)
        return bool(self.spent_states.claim(nonce, expires, now=now))

    def use_backend(self, backend: Bus | None) -> None:
        """Share notifications, ``requestState`` keys and single-use claims with the other workers through
        ``backend`` (see :mod:`jsonrpc_mcp.backends`); the HTTP app given it runs it. ``None``: share nothing.
        Each extension is told (:meth:`Extension.use_backend`): the tasks extension keeps its tasks there."""
        self.backend = backend
        if backend is not None:
            for extension in self._extensions.values():
                extension.use_backend(backend)

    def add_middleware(self, middleware: Middleware) -> Middleware:
        """Add a middleware inside those already there (it sees what they pass on); usable as a decorator."""
        self._middleware = (*self._middleware, *checked_chain([middleware]))
        return middleware

    # --- serving -------------------------------------------------------------------------------------------

    async def serve(
        self,
        stream: MessageStream,
        *,
        max_in_flight: int = 128,
        max_queued_bytes: int = 16 * 1024 * 1024,
        request_timeout: float | None = 300.0,
        drain_timeout: float = 5.0,
    ) -> None:
        """Serve one connection until the peer ends it (both eras, as each request decides).

        ``max_in_flight``: requests waiting for their handlers before reading pauses; ``max_queued_bytes``: bytes
        of answers not yet written (a peer that does not read) before reading pauses; ``request_timeout``: how
        long our own requests to the client (sampling, elicitation, roots) wait for an answer;
        ``drain_timeout``: after the client's end of stream, how long handlers still running may finish (their
        answers are still written).
        """
        session = self.open_session(
            stream,
            max_in_flight=max_in_flight,
            max_queued_bytes=max_queued_bytes,
            request_timeout=request_timeout,
            drain_timeout=drain_timeout,
        )
        try:
            await session.dispatcher.run()
        finally:
            session.close()

    def open_session(
        self,
        stream: MessageStream,
        *,
        max_in_flight: int = 128,
        max_queued_bytes: int = 16 * 1024 * 1024,
        request_timeout: float | None = 300.0,
        drain_timeout: float = 5.0,
    ) -> ServerSession:
        """The session :meth:`serve` runs on ``stream``, for a transport that drives it itself (it feeds frames to
        the session's ``dispatcher``, runs it, and closes the session). The arguments are :meth:`serve`'s."""
        dispatcher = Dispatcher(
            stream,
            max_in_flight=max_in_flight,
            max_queued_bytes=max_queued_bytes,
            request_timeout=request_timeout,
            drain_timeout=drain_timeout,
        )
        session = ServerSession(self, dispatcher)
        self.attach(session)
        return session

    # --- identity and capabilities -------------------------------------------------------------------------

    def server_info(self) -> dict[str, Any]:
        if self._info_cache is None:
            info: dict[str, Any] = {"name": self.name, "version": self.version}
            if self.title:
                info["title"] = self.title
            if self.description:
                info["description"] = self.description
            if self.website_url:
                info["websiteUrl"] = self.website_url
            if self.icons:
                info["icons"] = msgspec.to_builtins(self.icons)
            self._info_cache = info
        return self._info_cache

    def advertises(self, capability: str, sub: str | None = None, *, version: str | None = None) -> bool:
        """Whether the server declares ``capability`` (with its option ``sub`` set) at the revision ``version``: a
        session answers the methods of a capability only where it declares it. With no version: at any revision."""
        if sub is None and capability == "tools" and self._tools and "tools" not in self._extra_capabilities:
            return True  # every tools/call asks: answered without looking the capability up
        declared = self._declared
        caps = declared.get(version)
        if caps is None:
            caps = declared[version] = self._capability_map(version)
        cap = caps.get(capability)
        if cap is None:
            return False
        return sub is None or bool(cap.get(sub))

    def _declarations_changed(self) -> None:
        """Forget the capability maps :meth:`advertises` keeps per revision (a tool, resource, prompt, completion
        handler or extension came or went). A new dict, not a cleared one: a map being built from the old state
        lands in the dict no one reads any more."""
        self._declared = {}

    def _capability_map(self, version: str | None = None) -> dict[str, Any]:
        """The capabilities the server declares, before :meth:`capabilities` fits them to a revision: each core one
        it has something of or its extensions need (at ``version``, those defined there; with no version, those of
        any revision), then those given in ``capabilities=``, as given."""
        needed = self._needed if version is None else needed_capabilities(self._extensions.values(), version)
        extra = self._extra_capabilities
        caps: dict[str, Any] = {}
        if self._tools or "tools" in needed or "tools" in extra:
            caps["tools"] = {"listChanged": True}
        if self._resources or self._templates or "resources" in needed or "resources" in extra:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self._prompts or "prompts" in needed or "prompts" in extra:
            caps["prompts"] = {"listChanged": True}
        caps["logging"] = {}
        if self._completion is not None or self._prompts or self._templates or "completions" in needed:
            caps["completions"] = {}
        caps.update(extra)
        return caps

    def capabilities(self, version: str, *, identified: bool = False) -> dict[str, Any]:
        """Server capabilities as sent to a client speaking ``version``; ``identified``: the transport
        authenticated the client's principal (at ``initialize``), which 2025-11-25's ``tasks.list`` needs."""
        caps = self._capability_map(version)
        if version < "2025-03-26":
            caps.pop("completions", None)  # the capability flag arrived in 2025-03-26
        if version < "2026-07-28":
            caps.pop("extensions", None)  # (the raw ``capabilities=`` map: an Extension says where it is defined)
        if self._extensions:
            declared = extensions_capability(self._extensions.values(), version)
            if declared:
                caps["extensions"] = {**caps.get("extensions", {}), **declared}
        if self._core_tasks is not None and version == CORE_TASKS_VERSION:
            caps["tasks"] = self._core_tasks.capability(identified)
        return caps

    # --- sessions ------------------------------------------------------------------------------------------

    def attach(self, session: ServerSession) -> None:
        self._sessions.add(session)

    def detach(self, session: ServerSession) -> None:
        self._sessions.discard(session)

    def sessions(self) -> list[ServerSession]:
        return [s for s in self._sessions if not s.closed]

    def on_client_notification(self, session: ServerSession, method: str, params: dict[str, Any]) -> None:
        for handler in self._notification_handlers.get(method, ()):
            try:
                out = handler(session, params)
            except Exception:
                logger.exception("handler for %s failed", method)
                continue
            if out is not None and hasattr(out, "__await__"):
                session.dispatcher.spawn(_await_logged, out, method)

    def on_notification(self, method: str) -> Callable[[F], F]:
        """Register ``fn(session, params)`` for a client notification (``notifications/roots/list_changed``)."""

        _called_first(method, "on_notification", '"notifications/roots/list_changed"')

        def register(fn: F) -> F:
            self._notification_handlers.setdefault(method, []).append(fn)
            return fn

        return register

    # --- the method table ----------------------------------------------------------------------------------

    def _rebuild_methods(self) -> None:
        table: dict[str, MethodSpec] = {}

        def add(name: str, handler: Callable[[Any, Any], Any], params: Any, cap: str | None, **kw: Any) -> None:
            table[name] = MethodSpec(name, handler, params, cap, **kw)

        add("tools/list", self._list_tools, _CursorParams, "tools")
        add("tools/call", self._call_tool, _CallToolParams, "tools")
        add("resources/list", self._list_resources, _CursorParams, "resources")
        add("resources/templates/list", self._list_templates, _CursorParams, "resources")
        add("resources/read", self._read_resource, _UriParams, "resources")
        add("resources/subscribe", self._subscribe, _UriParams, "resources", eras=HANDSHAKE_ONLY)
        add("resources/unsubscribe", self._unsubscribe, _UriParams, "resources", eras=HANDSHAKE_ONLY)
        add("prompts/list", self._list_prompts, _CursorParams, "prompts")
        add("prompts/get", self._get_prompt, _GetPromptParams, "prompts")
        add("completion/complete", self._complete, _CompleteParams, "completions")
        add("logging/setLevel", self._set_level, _SetLevelParams, "logging", eras=HANDSHAKE_ONLY)
        add("server/discover", self._discover, None, None, eras=STATELESS_ONLY)
        add("subscriptions/listen", self._listen, _ListenParams, None, eras=STATELESS_ONLY)
        table.update(self._custom)
        if self._extensions:
            table = extension_methods(self._extensions.values(), table)
        if self._core_tasks is not None:
            table = self._core_tasks.methods(table)
        self.methods = table

    def method(
        self,
        name: str,
        *,
        capability: str | None = None,
        eras: Literal["both", "handshake", "stateless"] = "both",
        scopes: Iterable[str] | None = None,
    ) -> Callable[[F], F]:
        """Low-level escape hatch: answer ``name`` with ``fn(ctx, params: dict | None) -> result``.

        The result is a JSON-able value (dict or Struct) or a coroutine producing one; raise
        :class:`~jsonrpc_mcp.RpcError` for an error response. Replaces a built-in method of the same name.
        ``scopes``: the OAuth scopes a caller's token needs (checked when the request is authenticated).
        """
        era_sets = {"both": BOTH, "handshake": HANDSHAKE_ONLY, "stateless": STATELESS_ONLY}
        if eras not in era_sets:
            raise ValueError(f'eras must be "both", "handshake" or "stateless", not {eras!r}')
        era_set = era_sets[eras]

        _called_first(name, "method", '"x/name"')

        def register(fn: F) -> F:
            handler: Callable[..., Any] = fn
            self._set_scopes("method", name, scopes)
            needed = self._scopes.get(("method", name))
            if needed:

                def handler(ctx: Context, params: Any) -> Any:
                    self._authorize(ctx, needed)
                    return fn(ctx, params)

            self._custom[name] = MethodSpec(name, handler, None, capability, eras=era_set)
            self._rebuild_methods()
            return fn

        return register

    # --- tools ---------------------------------------------------------------------------------------------

    def tool(self, name: str | None = None, **options: Unpack[ToolOptions]) -> Callable[[F], F]:
        """Register a function as a tool. Its typed parameters become ``inputSchema``, its docstring the
        ``description``, its return annotation ``outputSchema`` (structured data) or plain content.

        ``input_schema`` declares a raw JSON Schema instead (validated with the ``validation`` extra when
        installed); ``structured_output=False`` returns content only, without ``structuredContent``. A plain
        ``def`` runs on a worker thread; ``inline=True`` runs it on the event loop instead, for code that never
        blocks (faster; one that holds the loop too long is named in a warning). ``single_use_state=True``: the
        ``requestState`` of the input it asks for (2026-07-28) can be answered once only (a replay is refused).
        ``scopes``: the OAuth scopes a caller's token needs to call it (docs/authorization.md).

        ``task`` (2026-07-28, the tasks extension; see docs/tasks.md): whether a call may run as a task —
        ``"forbidden"`` (the default), ``"optional"`` (a task when the client declared the extension, else answered
        in the request), ``"required"`` (a client that did not declare it gets -32021). The request is then
        answered at once with the task, and the function runs in the server's own tasks. ``task_start="in_handler"``
        (an ``async def``): the function runs in the request until it calls ``await ctx.start_task()``, so it can
        ask for input first, or answer at once when there is little to do. Registering such a tool adds the tasks
        extension (an in-memory store) unless the server offers it already. At 2025-11-25 it is that revision's
        ``execution.taskSupport``: a call with ``params.task`` is the task (``"forbidden"``: -32601), and a
        ``"required"`` tool called without it is -32601 (:mod:`.core_tasks`).
        """

        _called_first(name, "tool", "")
        check_options(options, ToolOptions, "tool")

        def register(fn: F) -> F:
            self.add_tool(fn, name=name, **options)
            return fn

        return register

    def add_tool(self, fn: Callable[..., Any], *, name: str | None = None, **options: Unpack[ToolOptions]) -> ToolDef:
        """Register (or replace) a tool at any time; connected clients get ``notifications/tools/list_changed``."""
        check_options(options, ToolOptions, "add_tool")
        tool_name = name or fn.__name__
        if not TOOL_NAME.match(tool_name):
            raise ValueError(
                f"invalid tool name {tool_name!r}: use 1-128 characters from A-Z a-z 0-9 _ - . (no spaces)"
            )
        if len(tool_name) > 64:
            logger.warning("tool name %r is longer than 64 characters; some clients refuse it", tool_name)
        scopes = options.pop("scopes", None)
        entry = make_tool(fn, name=tool_name, **options)
        if entry.task != "forbidden" and TASKS_EXTENSION not in self._extensions:
            from .tasks import Tasks

            self.add_extension(Tasks())
        self._tools[tool_name] = entry
        self._set_scopes("tool", tool_name, scopes)
        self._changed("tools")
        return entry

    def remove_tool(self, name: str) -> None:
        if self._tools.pop(name, None) is None:
            raise KeyError(name)
        self._scopes.pop(("tool", name), None)
        self._changed("tools")

    def list_tools(self) -> list[t.Tool]:
        return [entry.tool for entry in self._tools.values()]

    def tool_definition(self, name: str) -> ToolDef | None:
        """The registered tool called ``name`` as the server keeps it (its wire description, how it is called,
        whether it runs as a task), or ``None``."""
        return self._tools.get(name)

    def get_tool(self, name: str) -> t.Tool | None:
        """The registered tool called ``name``, or ``None``."""
        entry = self._tools.get(name)
        return entry.tool if entry is not None else None

    def _list_tools(self, ctx: Context, params: _CursorParams) -> Any:
        page, nxt = paginate(list(self._tools.values()), _cursor(params), self.page_size)
        if self._core_tasks is not None and ctx.version == CORE_TASKS_VERSION:
            result = t.ListToolsResult(tools=self._core_tasks.tools(page))
        else:
            result = t.ListToolsResult(tools=[e.tool for e in page])
        return self._finish_list(ctx, result, nxt)

    def _call_tool(self, ctx: Context, params: _CallToolParams) -> Any:
        entry = self._tools.get(params.name)
        if entry is None:
            raise InvalidParams(f"Unknown tool: {params.name}")
        if self._scopes and (needed := self._scopes.get(("tool", params.name))):
            self._authorize(ctx, needed)
        args = params.arguments  # (a present null is refused by the tool's call, as any other non-object)
        return entry.call(ctx, None if args is _NO_ARGUMENTS else args)

    # --- resources -----------------------------------------------------------------------------------------

    def resource(self, uri: str, **options: Unpack[ResourceOptions]) -> Callable[[F], F]:
        """Register a resource (``uri``) or a resource template (a URI with ``{variables}``, RFC 6570 level 1).

        The function returns ``str`` (text), ``bytes`` (a blob), resource contents, or JSON-able data (sent as
        ``application/json`` text). Template variables are passed as keyword arguments; a parameter named
        ``query`` receives the URI's query parameters as a dict; a ``Context`` parameter is injected. A plain
        ``def`` runs on a worker thread unless ``inline=True`` (see :meth:`tool`). ``scopes``: the OAuth scopes a
        caller's token needs to read it (or subscribe to it).
        """

        _called_first(uri, "resource", '"notes://{id}"')
        check_options(options, ResourceOptions, "resource")

        def register(fn: F) -> F:
            self.add_resource(fn, uri, **options)
            return fn

        return register

    def add_resource(self, fn: Callable[..., Any], uri: str, **options: Unpack[ResourceOptions]) -> None:
        check_options(options, ResourceOptions, "add_resource")
        import inspect

        if not isinstance(uri, str) or not RESOURCE_URI.match(uri):
            raise ValueError(
                f"invalid resource URI {uri!r}: an RFC 3986 URI with a scheme (letters, digits, + - .) and a colon, "
                "without spaces"
            )
        sig = inspect.signature(fn)
        read = runner(fn, inline=options.get("inline", False), what=f"resource {uri}")
        hints = _hints(fn)
        wants_ctx = next((p for p in sig.parameters if hints.get(p) is Context), None)
        wants_query = "query" in sig.parameters
        doc = inspect.getdoc(fn)
        meta = options.get("meta")
        common: dict[str, Any] = {
            "name": options.get("name") or fn.__name__,
            "title": options.get("title") or UNSET,
            "description": options.get("description") or (doc.strip() if doc else UNSET),
            "mime_type": options.get("mime_type") or UNSET,
            "annotations": options.get("annotations") or UNSET,
            "icons": options.get("icons") or UNSET,
            "meta": dict(meta) if meta else UNSET,
        }
        cache, size = options.get("cache"), options.get("size")
        from .uri_template import UriTemplate, is_template  # only servers with resources need it

        if is_template(uri):
            matcher = UriTemplate(uri)
            unknown = set(matcher.variables) - set(sig.parameters)
            if unknown and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
                raise TypeError(f"{fn.__name__} must accept the template variables {sorted(unknown)}")
            self._templates[uri] = ResourceTemplateDef(
                t.ResourceTemplate(uri_template=uri, **common), matcher, read, cache, wants_ctx, wants_query
            )
        else:
            self._resources[uri] = ResourceDef(
                t.Resource(uri=uri, size=size if size is not None else UNSET, **common),
                read,
                cache,
                wants_ctx,
                wants_query,
            )
        self._set_scopes("resource", uri, options.get("scopes"))
        self._changed("resources")

    def remove_resource(self, uri: str) -> None:
        if self._resources.pop(uri, None) is None and self._templates.pop(uri, None) is None:
            raise KeyError(uri)
        self._scopes.pop(("resource", uri), None)
        self._changed("resources")

    def _list_resources(self, ctx: Context, params: _CursorParams) -> Any:
        page, nxt = paginate(list(self._resources.values()), _cursor(params), self.page_size)
        return self._finish_list(ctx, t.ListResourcesResult(resources=[e.resource for e in page]), nxt)

    def _list_templates(self, ctx: Context, params: _CursorParams) -> Any:
        page, nxt = paginate(list(self._templates.values()), _cursor(params), self.page_size)
        result = t.ListResourceTemplatesResult(resource_templates=[e.template for e in page])
        return self._finish_list(ctx, result, nxt)

    def _find_resource(self, uri: str) -> tuple[Callable[..., Any], dict[str, Any], str | None, CacheHint | None]:
        entry = self._resources.get(uri)
        base, _, query = uri.partition("?")
        if entry is None and query:
            entry = self._resources.get(base)
        kwargs: dict[str, Any] = {}
        if entry is not None:
            if entry.wants_query:
                kwargs["query"] = dict(_parse_qsl(query))
            if entry.wants_ctx:
                kwargs[entry.wants_ctx] = None
            mime = entry.resource.mime_type
            return entry.read, kwargs, (mime if isinstance(mime, str) else None), entry.cache
        for tpl in self._templates.values():
            values = tpl.matcher.match(base if tpl.wants_query else uri)
            if values is None:
                continue
            kwargs.update(values)
            if tpl.wants_query:
                kwargs["query"] = dict(_parse_qsl(query))
            if tpl.wants_ctx:
                kwargs[tpl.wants_ctx] = None
            mime = tpl.template.mime_type
            return tpl.read, kwargs, (mime if isinstance(mime, str) else None), tpl.cache
        raise ResourceNotFound(uri)

    def _read_resource(self, ctx: Context, params: _UriParams) -> Any:
        uri = params.uri
        if self._scopes and (needed := self._resource_scopes(uri)):
            self._authorize(ctx, needed)
        try:
            fn, kwargs, mime, cache = self._find_resource(uri)
        except ResourceNotFound:
            raise _not_found(ctx, uri) from None
        for key, value in kwargs.items():
            if value is None and key != "query":
                kwargs[key] = ctx
        try:
            out = fn(**kwargs)
        except ResourceNotFound:
            raise _not_found(ctx, uri) from None
        if type(out) is SyncCall:  # (a plain function's, on the sync lane: the result made on its thread too)
            return SyncCall(self._read_on_thread, ctx, uri, out, mime, cache)
        if hasattr(out, "__await__"):
            return self._read_async(ctx, uri, out, mime, cache)
        return self._read_result(ctx, uri, out, mime, cache)

    def _read_on_thread(self, ctx: Context, uri: str, call: SyncCall, mime: str | None, cache: CacheHint | None) -> Any:
        """On a worker thread: a plain resource function's read, and its result, as :meth:`_read_async` makes it."""
        try:
            out = call.run()
        except ResourceNotFound:
            raise _not_found(ctx, uri) from None
        return self._read_result(ctx, uri, out, mime, cache)

    async def _read_async(
        self, ctx: Context, uri: str, pending: Awaitable[Any], mime: str | None, cache: CacheHint | None
    ) -> Any:
        try:
            out = await pending
        except ResourceNotFound:
            raise _not_found(ctx, uri) from None
        return self._read_result(ctx, uri, out, mime, cache)

    def _read_result(self, ctx: Context, uri: str, out: Any, mime: str | None, cache: CacheHint | None) -> Any:
        if isinstance(out, t.ReadResourceResult):
            result = out
        else:
            contents = resource_contents(uri, out, mime)
            if not contents:
                raise _not_found(ctx, uri)
            result = t.ReadResourceResult(contents=contents)
        if ctx.stateless:
            hint = cache or self.cache
            result.ttl_ms = hint.ttl_ms
            result.cache_scope = hint.scope
        return result

    def accepts_subscription(self, uri: str) -> bool | Awaitable[bool]:
        """Whether a subscription to ``uri`` is served: ``resources/subscribe`` (a refused URI is "resource not
        found") and a 2026-07-28 listen's ``resourceSubscriptions`` (a refused URI is left out of the
        acknowledgement).

        By default the URI of a registered resource, or one matching a registered resource template, is served:
        those are the URIs the server can tell about (:meth:`notify_resource_updated`). Override it, sync or async,
        to widen that (any URI under a directory resource, say) or to narrow it (a templated resource that must
        exist)."""
        if uri in self._resources:
            return True
        return any(tpl.matcher.match(uri) is not None for tpl in self._templates.values())

    async def _accepts(self, uri: str) -> bool:
        verdict = self.accepts_subscription(uri)
        return bool(await verdict) if hasattr(verdict, "__await__") else bool(verdict)

    def _subscribe(self, ctx: Context, params: _UriParams) -> Any:
        if self._scopes and (needed := self._resource_scopes(params.uri)):
            self._authorize(ctx, needed)
        verdict = self.accepts_subscription(params.uri)
        if hasattr(verdict, "__await__"):
            return self._subscribe_async(ctx, params.uri, verdict)
        return self._subscribed(ctx, params.uri, bool(verdict))

    async def _subscribe_async(self, ctx: Context, uri: str, pending: Awaitable[bool]) -> dict[str, Any]:
        return self._subscribed(ctx, uri, bool(await pending))

    def _subscribed(self, ctx: Context, uri: str, accepted: bool) -> dict[str, Any]:
        if not accepted:
            raise _not_found(ctx, uri)
        ctx.session.subscriptions.add(uri)
        return {}

    def _unsubscribe(self, ctx: Context, params: _UriParams) -> dict[str, Any]:
        ctx.session.subscriptions.discard(params.uri)
        return {}

    async def notify_resource_updated(
        self, uri: str, *, meta: Mapping[str, Any] | None = None, exact: bool = False
    ) -> None:
        """Tell every subscriber of ``uri`` (or of a URI it sits under, unless ``exact``) that it changed.

        ``meta`` goes in the notification's ``_meta`` (the spec's place for extra data, e.g. what changed); on a
        2026-07-28 listen stream the subscription id is added to it. ``exact`` keeps a notification about one item
        from reaching the subscribers of its collection, for a server that tells those about the collection
        itself. With a backend, the subscribers of every worker are told."""
        if self.backend is not None:
            await self._publish(ResourceUpdated(uri, dict(meta) if meta else None, exact))
            return
        await self._resource_updated(uri, meta, exact)

    async def _resource_updated(self, uri: str, meta: Mapping[str, Any] | None, exact: bool) -> None:
        params: dict[str, Any] = {"uri": uri}
        if meta:
            params["_meta"] = dict(meta)
        for session in self.sessions():
            if any(uri == s or (not exact and uri.startswith(s.rstrip("/") + "/")) for s in session.subscriptions):
                await _safe_notify(session, "notifications/resources/updated", params)
            for sub_id, wanted in list(session.listeners.items()):
                if uri in (wanted.get("resourceSubscriptions") or ()):
                    tagged = {**params, "_meta": {**(meta or {}), META_SUBSCRIPTION_ID: sub_id}}
                    await _safe_notify(session, "notifications/resources/updated", tagged, related=sub_id)

    async def notify_listeners(
        self, method: str, params: Mapping[str, Any], wants: Callable[[Mapping[str, Any]], bool]
    ) -> None:
        """Send a notification on every 2026-07-28 ``subscriptions/listen`` stream whose acknowledged filter
        ``wants`` it (an extension's own notifications: ``notifications/tasks`` for the streams that asked for
        the task's id, say); the stream's subscription id is added to its ``_meta``."""
        for session in self.sessions():
            for sub_id, honoured in list(session.listeners.items()):
                if wants(honoured):
                    meta = params.get("_meta")
                    tagged = {
                        **params,
                        "_meta": {**(meta if isinstance(meta, dict) else {}), META_SUBSCRIPTION_ID: sub_id},
                    }
                    await _safe_notify(session, method, tagged, related=sub_id)

    # --- prompts -------------------------------------------------------------------------------------------

    def prompt(self, name: str | None = None, **options: Unpack[PromptOptions]) -> Callable[[F], F]:
        """Register a prompt. Its parameters are the prompt's arguments (required unless they have a default);
        it returns a string (one user message), messages, content blocks, or a ``GetPromptResult``.
        ``complete`` maps an argument name to a function ``(value, context_arguments) -> list[str]`` (a plain
        ``def`` on a worker thread). A plain ``def`` runs on a worker thread unless ``inline=True`` (see
        :meth:`tool`). ``scopes``: the OAuth scopes a caller's token needs to get it (or complete its arguments)."""

        _called_first(name, "prompt", "")
        check_options(options, PromptOptions, "prompt")

        def register(fn: F) -> F:
            self.add_prompt(fn, name=name, **options)
            return fn

        return register

    def add_prompt(self, fn: Callable[..., Any], *, name: str | None = None, **options: Unpack[PromptOptions]) -> None:
        check_options(options, PromptOptions, "add_prompt")
        prompt_name = name or fn.__name__
        sig = inspect_function(fn, name=prompt_name, structured_output=False)
        arguments = [
            t.PromptArgument(
                name=p,
                description=sig.param_descriptions.get(p, UNSET),
                required=p in sig.required,
            )
            for p in sig.params
        ]
        auto = dict(options.get("complete") or {})
        for p in sig.params:
            choices = _choices(sig.args_type.__annotations__.get(p))
            if choices and p not in auto:
                auto[p] = _prefix_completer(choices)
        self._prompts[prompt_name] = PromptDef(
            t.Prompt(
                name=prompt_name,
                title=options.get("title") or UNSET,
                description=options.get("description") or sig.description or UNSET,
                arguments=arguments or UNSET,
                icons=options.get("icons") or UNSET,
                meta=dict(meta) if (meta := options.get("meta")) else UNSET,
            ),
            runner(fn, inline=options.get("inline", False), what=f"prompt {prompt_name}"),
            sig,
            auto,
        )
        self._set_scopes("prompt", prompt_name, options.get("scopes"))
        self._changed("prompts")

    def remove_prompt(self, name: str) -> None:
        if self._prompts.pop(name, None) is None:
            raise KeyError(name)
        self._scopes.pop(("prompt", name), None)
        self._changed("prompts")

    def _list_prompts(self, ctx: Context, params: _CursorParams) -> Any:
        page, nxt = paginate(list(self._prompts.values()), _cursor(params), self.page_size)
        return self._finish_list(ctx, t.ListPromptsResult(prompts=[e.prompt for e in page]), nxt)

    def _get_prompt(self, ctx: Context, params: _GetPromptParams) -> Any:
        entry = self._prompts.get(params.name)
        if entry is None:
            raise InvalidParams(f"Unknown prompt: {params.name}")
        if self._scopes and (needed := self._scopes.get(("prompt", params.name))):
            self._authorize(ctx, needed)
        if params.arguments is None:
            raise InvalidParams('Invalid params: "arguments" must be an object')
        given = params.arguments if isinstance(params.arguments, dict) else {}
        missing = [p for p in entry.signature.required if p not in given]
        if missing:
            raise InvalidParams(f"Missing required argument(s) for prompt {params.name}: {', '.join(missing)}")
        try:
            args = msgspec.convert(
                {k: v for k, v in given.items() if k in entry.signature.params},
                entry.signature.args_type,
                strict=False,
            )
        except msgspec.ValidationError as exc:
            raise InvalidParams(
                f"Invalid arguments for prompt {params.name}: {describe_validation_error(exc)}"
            ) from None
        kwargs = {p: getattr(args, p) for p in entry.signature.params}
        if entry.signature.context_param:
            kwargs[entry.signature.context_param] = ctx
        out = entry.render(**kwargs)
        if type(out) is SyncCall:
            return SyncCall(_prompt_on_thread, out, entry.prompt)
        if hasattr(out, "__await__"):
            return self._prompt_async(out, entry)
        return prompt_result(out, entry.prompt)

    async def _prompt_async(self, pending: Awaitable[Any], entry: PromptDef) -> Any:
        return prompt_result(await pending, entry.prompt)

    # --- completion ----------------------------------------------------------------------------------------

    def completion(self) -> Callable[[F], F]:
        """Register the completion handler: ``fn(ref, argument_name, value, context_arguments)`` returning a list of
        strings or a ``CompleteResult``. Per-prompt ``complete=`` functions and enum arguments are tried first. A
        plain ``def`` (here and in ``complete=``) runs on a worker thread, as a tool does."""

        def register(fn: F) -> F:
            self._completion = fn
            self._declarations_changed()
            return fn

        return register

    def _complete(self, ctx: Context, params: _CompleteParams) -> Any:
        ref = params.ref
        arg_name = params.argument.get("name")
        value = params.argument.get("value", "")
        if not isinstance(arg_name, str) or not isinstance(value, str):
            raise InvalidParams("Invalid params: argument needs a string name and value")
        context_args: dict[str, Any] = {}
        if isinstance(params.context, dict):
            context_args = params.context.get("arguments") or {}
        kind = ref.get("type")
        if self._scopes and (needed := self.scopes_for("completion/complete", {"ref": ref})):
            self._authorize(ctx, needed)
        local: Callable[..., Any] | None = None
        if kind == "ref/prompt":
            entry = self._prompts.get(ref.get("name", ""))
            if entry is None:
                raise InvalidParams(f"Unknown prompt: {ref.get('name')}")
            local = entry.complete.get(arg_name)
        elif kind == "ref/resource":
            tpl = self._templates.get(ref.get("uri", ""))
            if tpl is None and ref.get("uri") not in self._resources:
                raise InvalidParams(f"Unknown resource template: {ref.get('uri')}")
            local = tpl.complete.get(arg_name) if tpl else None
        else:
            raise InvalidParams(f"Invalid params: unknown reference type {kind!r}")
        if local is not None:
            out = call_completer(local, value, context_args)
        elif self._completion is not None:
            out = call_completer(self._completion, ref, arg_name, value, context_args)
        else:
            out = []
        if type(out) is SyncCall:
            return SyncCall(_complete_on_thread, out)
        if hasattr(out, "__await__"):
            return _complete_async(out)
        return complete_result(out)

    # --- logging, discovery, listen ------------------------------------------------------------------------

    def _set_level(self, ctx: Context, params: _SetLevelParams) -> dict[str, Any]:
        if params.level not in LOG_LEVELS:
            raise InvalidParams(f"Invalid params: unknown log level {params.level!r}")
        ctx.session.log_level = params.level
        return {}

    def _discover(self, ctx: Context, params: Any) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": [v for v in SUPPORTED_VERSIONS if v >= "2026-07-28"],
            "capabilities": self.capabilities(ctx.version),
            "ttlMs": self.cache.ttl_ms,
            "cacheScope": self.cache.scope,
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    async def _listen(self, ctx: Context, params: _ListenParams) -> dict[str, Any]:
        import anyio

        wanted = params.notifications if isinstance(params.notifications, dict) else {}
        honoured: dict[str, Any] = {}
        caps = self._capability_map(ctx.version)
        for flag, cap in (
            ("toolsListChanged", "tools"),
            ("promptsListChanged", "prompts"),
            ("resourcesListChanged", "resources"),
        ):
            if wanted.get(flag) is True and cap in caps:
                honoured[flag] = True
        subs = wanted.get("resourceSubscriptions")
        if self._scopes and (needed := self.scopes_for("subscriptions/listen", {"notifications": wanted})):
            self._authorize(ctx, needed)
        if isinstance(subs, list) and "resources" in caps:
            honoured["resourceSubscriptions"] = [s for s in subs if isinstance(s, str) and await self._accepts(s)]
        for extension in self._extensions.values():
            if extension.defined_for(ctx.version):
                honoured.update(await extension.listen(ctx, wanted))
        session = ctx.session
        self.attach(session)
        session.listeners[ctx.request_id] = honoured
        listen = _Listen(anyio.Event(), anyio.Event())
        self._listens.add(listen)
        try:
            await session.send_notification(
                "notifications/subscriptions/acknowledged",
                {"notifications": honoured, "_meta": {META_SUBSCRIPTION_ID: ctx.request_id}},
                related=ctx.request_id,
            )
            ends_at = ctx.intake.until
            if ends_at is None:
                await listen.stop.wait()
            else:  # (the transport ends the stream then, the access token expired: it is ended a moment before)
                with anyio.move_on_after(max(0.0, ends_at - _ENDS_EARLY - time.time())):
                    await listen.stop.wait()
                listen.end("The access token expired")
            # Torn down by the server: "A server MUST send notifications/cancelled referencing a
            # subscriptions/listen request ID when it tears down that subscription stream", then (graceful
            # closure, a SHOULD) the listen request's result, which ends its stream.
            session.listeners.pop(ctx.request_id, None)
            cancelled = {"requestId": ctx.request_id, "reason": listen.reason}
            await _safe_notify(session, "notifications/cancelled", cancelled, related=ctx.request_id)
        finally:
            session.listeners.pop(ctx.request_id, None)
            self._listens.discard(listen)
            listen.done.set()
        return {"_meta": {META_SUBSCRIPTION_ID: ctx.request_id}}

    async def end_listens(self, reason: str = "The server is shutting down", *, timeout: float = 1.0) -> int:
        """End every ``subscriptions/listen`` stream this server serves (2026-07-28), as the server does when it
        stops: each gets ``notifications/cancelled`` referencing its request id (with ``reason``), then the listen
        request's result (its graceful closure), which ends its stream. Waits until each has sent them, at most
        ``timeout`` seconds; returns how many were ended. :class:`~jsonrpc_mcp.transports.http_asgi.McpAsgiApp`
        calls it when it closes, and ``jsonrpc-mcp serve --http``, ``--tcp`` and ``--unix`` when stopped (on stdio
        the client ends the session, closing its end of the pipe)."""
        import anyio

        ending = list(self._listens)
        for listen in ending:
            listen.end(reason)
        with anyio.move_on_after(timeout):
            for listen in ending:
                await listen.done.wait()
        return len(ending)

    # --- authorization -------------------------------------------------------------------------------------

    def scopes_for(self, method: str, params: Mapping[str, Any] | None) -> tuple[str, ...]:
        """The OAuth scopes a request needs: those of the tool, resource (or template), prompt or custom method it
        names (``()``: none). The one place that decides it, for the HTTP app's 403 and for the server's own check.
        """
        if not self._scopes:
            return ()
        p = params if params is not None else {}
        if method == "tools/call":
            return self._scopes.get(("tool", str(p.get("name"))), ())
        if method in ("resources/read", "resources/subscribe"):
            uri = p.get("uri")
            return self._resource_scopes(uri) if isinstance(uri, str) else ()
        if method == "prompts/get":
            return self._scopes.get(("prompt", str(p.get("name"))), ())
        if method == "completion/complete":
            ref = p.get("ref")
            if not isinstance(ref, dict):
                return ()
            if ref.get("type") == "ref/prompt":
                return self._scopes.get(("prompt", str(ref.get("name"))), ())
            uri = ref.get("uri")
            return self._scopes.get(("resource", uri), ()) if isinstance(uri, str) else ()
        if method == "subscriptions/listen":
            wanted = p.get("notifications")
            subs = wanted.get("resourceSubscriptions") if isinstance(wanted, dict) else None
            found = {s for uri in (subs or ()) if isinstance(uri, str) for s in self._resource_scopes(uri)}
            return tuple(sorted(found))
        return self._scopes.get(("method", method), ())

    def declared_scopes(self) -> tuple[str, ...]:
        """Every OAuth scope this server's tools, resources, prompts and methods declare, and those its
        ``scope_hierarchy`` names, sorted: what its protected-resource metadata can advertise as
        ``scopes_supported`` (``jsonrpc-mcp serve --auth-*`` does)."""
        found = {scope for needed in self._scopes.values() for scope in needed}
        for broader, narrower in self.scope_hierarchy.items():
            found.add(broader)
            found.update(narrower)
        return tuple(sorted(found))

    def _resource_scopes(self, uri: str) -> tuple[str, ...]:
        """The scopes of the resource or template that answers ``uri`` (as :meth:`_find_resource` matches it)."""
        base = uri.partition("?")[0]
        for key in (uri, base):
            if key in self._resources:
                return self._scopes.get(("resource", key), ())
        for key, tpl in self._templates.items():
            if tpl.matcher.match(base if tpl.wants_query else uri) is not None:
                return self._scopes.get(("resource", key), ())
        return ()

    def _set_scopes(self, kind: str, name: str, scopes: Iterable[str] | None) -> None:
        if scopes is None:
            self._scopes.pop((kind, name), None)
            return
        if isinstance(scopes, str):
            raise TypeError("scopes is a list of scope names, not a string")
        wanted = tuple(sorted(set(scopes)))
        if wanted:
            self._scopes[(kind, name)] = wanted
        else:
            self._scopes.pop((kind, name), None)

    def _authorize(self, ctx: Context, needed: tuple[str, ...]) -> None:
        """Refuse (:class:`InsufficientScope`) when the request's principal lacks ``needed``. A request without a
        principal — stdio, sockets, HTTP without an authorization policy — is not an OAuth request: the scopes do
        not apply to it (its credentials came from the environment)."""
        principal = ctx.auth
        if principal is None:
            return
        missing = missing_scopes(principal.scopes, needed, self.scope_hierarchy)
        if missing:
            raise InsufficientScope(list(needed), list(missing))

    # --- change notifications ------------------------------------------------------------------------------

    def _changed(self, kind: Literal["tools", "resources", "prompts"]) -> None:
        self._info_cache = None
        self._declarations_changed()
        for session in self.sessions():
            session.dispatcher.spawn(self._notify_list_changed, session, kind)

    async def _notify_list_changed(self, session: ServerSession, kind: str) -> None:
        method = f"notifications/{kind}/list_changed"
        if session.initialized:
            await _safe_notify(session, method, None)
        flag = f"{kind}ListChanged"
        for sub_id, wanted in list(session.listeners.items()):
            if wanted.get(flag):
                await _safe_notify(session, method, {"_meta": {META_SUBSCRIPTION_ID: sub_id}}, related=sub_id)

    async def notify_list_changed(self, kind: Literal["tools", "resources", "prompts"]) -> None:
        """Tell every connected client that the list of ``kind`` changed (done for you by add/remove, to the
        clients of this process: another worker's lists are its own). With a backend, the clients of every worker
        are told."""
        if self.backend is not None:
            await self._publish(ListChanged(kind))
            return
        for session in self.sessions():
            await self._notify_list_changed(session, kind)

    async def broadcast_log(self, level: str, data: Any, logger_name: str | None = None) -> None:
        """Send a log message to every handshake-era client whose level lets it through (of every worker, with a
        backend)."""
        if self.backend is not None:
            await self._publish(LogMessage(level, data, logger_name))
            return
        await self._log(level, data, logger_name)

    async def _log(self, level: str, data: Any, logger_name: str | None) -> None:
        rank = {name: i for i, name in enumerate(LOG_LEVELS)}
        params: dict[str, Any] = {"level": level, "data": data}
        if logger_name:
            params["logger"] = logger_name
        for session in self.sessions():
            threshold = session.log_level
            if session.initialized and threshold is not None and rank[level] >= rank.get(threshold, 0):
                await _safe_notify(session, "notifications/message", params)

    async def publish_to_extension(self, extension_id: str, data: Any) -> None:
        """Hand ``data`` to :meth:`Extension.deliver <jsonrpc_mcp.extensions.Extension.deliver>` of the extension
        ``extension_id`` on every worker: with a backend through its bus (this worker included, in the bus's
        order; ``data`` must be JSON, and arrives as JSON decodes), else on this worker. When the backend cannot
        be reached, this worker's extension is still told."""
        extension = self._extensions.get(extension_id)
        if extension is None:
            raise ValueError(f"the server offers no extension {extension_id!r}")
        if self.backend is not None:
            await self._publish(ExtensionEvent(extension_id, data))
            return
        await extension.deliver(data)

    async def _publish(self, event: BusEvent) -> None:
        """Hand ``event`` to every worker through the backend; when it cannot be reached, this worker's own
        clients are still told (and the failure is logged by the backend)."""
        assert self.backend is not None
        try:
            await self.backend.publish(event)
        except Unavailable:
            await self.deliver(event)

    async def deliver(self, event: BusEvent) -> None:
        """Act on a notification event from the backend's bus (one that any worker published) for this process's
        clients."""
        if type(event) is ResourceUpdated:
            await self._resource_updated(event.uri, event.meta, event.exact)
        elif type(event) is ListChanged:
            if event.kind in ("tools", "resources", "prompts"):
                for session in self.sessions():
                    await self._notify_list_changed(session, event.kind)
        elif type(event) is LogMessage and event.level in LOG_LEVELS:
            await self._log(event.level, event.data, event.logger)
        elif type(event) is ExtensionEvent:
            extension = self._extensions.get(event.extension)
            if extension is not None:
                await extension.deliver(event.data)

    # --- helpers -------------------------------------------------------------------------------------------

    def _finish_list(self, ctx: Context, result: Any, next_cursor: str | None) -> Any:
        if next_cursor is not None:
            result.next_cursor = next_cursor
        if ctx.stateless:
            result.ttl_ms = self.cache.ttl_ms
            result.cache_scope = self.cache.scope
        return result


# --- conversions (module level: reusable by custom handlers) --------------------------------------------------


def resource_contents(uri: str, value: Any, mime: str | None) -> list[Any]:
    """What a resource function returned, as ``contents`` of a ``ReadResourceResult``."""
    if isinstance(value, (t.TextResourceContents, t.BlobResourceContents)):
        return [value]
    if isinstance(value, str):
        return [t.TextResourceContents(uri=uri, text=value, mime_type=mime or "text/plain")]
    if isinstance(value, (bytes, bytearray, memoryview)):
        blob = base64.b64encode(bytes(value)).decode("ascii")
        return [t.BlobResourceContents(uri=uri, blob=blob, mime_type=mime or "application/octet-stream")]
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, (t.TextResourceContents, t.BlobResourceContents)) for v in value)
    ):
        return list(value)
    if value is None:
        return []
    text = _encode(value).decode()
    return [t.TextResourceContents(uri=uri, text=text, mime_type=mime or "application/json")]


def prompt_result(value: Any, prompt: t.Prompt) -> t.GetPromptResult:
    if isinstance(value, t.GetPromptResult):
        return value
    items = value if isinstance(value, list) else [value]
    messages: list[t.PromptMessage] = []
    for item in items:
        if isinstance(item, t.PromptMessage):
            messages.append(item)
        elif isinstance(item, str):
            messages.append(t.PromptMessage(role="user", content=t.TextContent(text=item)))
        elif isinstance(item, (t.TextContent, t.ImageContent, t.AudioContent, t.ResourceLink, t.EmbeddedResource)):
            messages.append(t.PromptMessage(role="user", content=item))
        else:
            raise TypeError(f"a prompt cannot return {type(item).__name__}")
    return t.GetPromptResult(messages=messages, description=prompt.description)


def complete_result(value: Any) -> t.CompleteResult:
    if isinstance(value, t.CompleteResult):
        return value
    values = [str(v) for v in (value or [])]
    total = len(values)
    return t.CompleteResult(
        completion=t.Completion(values=values[:100], total=total, has_more=total > 100),
    )


async def _complete_async(pending: Awaitable[Any]) -> t.CompleteResult:
    return complete_result(await pending)


def _complete_on_thread(call: SyncCall) -> t.CompleteResult:
    """On a worker thread: a plain completion function's call and its result (the sync lane)."""
    return complete_result(call.run())


def _prompt_on_thread(call: SyncCall, prompt: t.Prompt) -> t.GetPromptResult:
    """On a worker thread: a plain prompt function's call and its result (the sync lane)."""
    return prompt_result(call.run(), prompt)


def _not_found(ctx: Context, uri: str) -> RpcError:
    if ctx.stateless:
        return InvalidParams("Resource not found", {"uri": uri})
    return ResourceNotFound(uri)


def _cursor(params: _CursorParams | None) -> str | None:
    if params is None or params.cursor is UNSET:
        return None
    return params.cursor


def _parse_qsl(query: str) -> list[tuple[str, str]]:
    from urllib.parse import parse_qsl  # only resource templates with a query need it: imported on first use

    return parse_qsl(query)


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(fn)
    except Exception as exc:  # an annotation that cannot be resolved: no Context injection by type
        logger.debug("cannot resolve the type hints of %r: %s", fn, exc)
        return {}


def _choices(annotation: Any) -> list[str] | None:
    if annotation is None:
        return None
    if get_origin(annotation) is Annotated:  # a documented parameter: Annotated[Literal[...], Meta(...)]
        annotation = get_args(annotation)[0]
    if get_origin(annotation) is Literal:
        return [str(a) for a in get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [str(m.value) for m in annotation]
    return None


class _prefix_completer:  # (named as the function it stands for)
    """The completion of an argument whose type lists its values: those that start with what was typed (on the
    event loop: it never blocks)."""

    runs_inline: Final = True

    def __init__(self, choices: Iterable[str]) -> None:
        self.options = list(choices)

    def __call__(self, value: str, context: dict[str, Any]) -> list[str]:
        return [c for c in self.options if c.startswith(value)]


async def _safe_notify(
    session: ServerSession, method: str, params: Mapping[str, Any] | None, *, related: Any = None
) -> None:
    try:
        await session.send_notification(method, params, related=related)
    except RpcError:
        logger.debug("could not notify a closed session of %s", method)


async def _await_logged(pending: Awaitable[Any], what: str) -> None:
    try:
        await pending
    except Exception:
        logger.exception("handler for %s failed", what)
