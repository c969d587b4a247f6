"""Protocol extensions (SEP-2133): one API for the server and the client (L5).

An extension has an identifier (``com.example/audit``; ``io.modelcontextprotocol/...`` for the official ones), a
settings object, and the revisions it is defined for. Each side declares the extensions it supports in its
capabilities, ``capabilities.extensions[id] = settings``:

* the client in ``initialize`` (handshake era) or in every request's
  ``_meta["io.modelcontextprotocol/clientCapabilities"]`` (2026-07-28, so per request);
* the server in the ``initialize`` result or in ``server/discover``.

An extension is *negotiated* for a request when both did: the server declares it for the request's revision and
the client declared it (in the session's ``initialize``, or in the request's own ``_meta``). Nothing an extension
adds is used otherwise — it is off unless both sides declare it.

What an :class:`Extension` may add, on the server:

* **methods** (:meth:`Extension.method`): answered only where it is negotiated. Asked at a revision the
  extension is not defined for, a method does not exist (-32601); asked by a client that did not declare the
  extension, it is refused with -32021 ``requiredCapabilities: {"extensions": {id: {}}}`` (an extension that
  defines no client declaration, ``server_only=True``, answers every client);
* **wrappers** (:meth:`Extension.wrap`): around an existing method's handler (``tools/call``, say), at every
  revision the extension is defined for, negotiated or not (so that the wrapper can refuse a request that needs
  the extension, or let it through unchanged);
* **result kinds** (``result_types``): ``resultType`` values its answers may carry (2026-07-28). A result of such a
  kind answering a request where the extension is not negotiated is a server bug: logged, and answered with
  -32603;
* **listen filters** (:meth:`Extension.listen`): keys of a ``subscriptions/listen`` filter it honours;
* **core capabilities** (``server_capabilities``): core server capabilities the extension needs declared with it
  (the skills extension serves its files as resources, so ``resources``): the server declares each wherever it
  declares the extension, in its usual form, and answers its methods, even before it has anything of that kind.

And on the client: the extensions a client was given are declared in its capabilities, and
:meth:`Extension.on_result` turns a result of the extension's kind into the method's own result.

::

    audit = Extension("com.example/audit", settings={"version": 1})

    @audit.method("audit/recent")
    def recent(ctx: Context, params: dict | None) -> dict:
        return {"entries": list(LOG)}

    @audit.wrap("tools/call")
    def record(ctx: Context, params: Any, call_next: WrapNext) -> Any:
        LOG.append(params.name)
        return call_next(ctx, params)

    server = Server("demo", extensions=[audit])
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeVar

import msgspec

from ..errors import InternalError, MethodNotFound, MissingClientCapability
from .methods import BOTH, HANDSHAKE_ONLY, STATELESS_ONLY, MethodSpec
from .versions import HANDSHAKE_VERSIONS, STATELESS_VERSIONS, SUPPORTED_VERSIONS, Era

if TYPE_CHECKING:
    from .context import Context

__all__ = (
    "CORE_SERVER_CAPABILITIES",
    "Extension",
    "ExtensionResult",
    "WrapNext",
    "Wrapper",
    "ResultHandler",
    "client_declares",
    "extension_methods",
    "extensions_capability",
    "needed_capabilities",
)

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

Handler = Callable[["Context", Any], Any]
#: ``call_next(ctx, params)``: the wrapped handler (or the next wrapper): its result, or an awaitable of it.
WrapNext = Callable[["Context", Any], Any]
#: ``wrapper(ctx, params, call_next)``: a plain function or an ``async def`` (``await call_next(...)``).
Wrapper = Callable[["Context", Any, WrapNext], Any]


class ExtensionResult(msgspec.Struct, frozen=True):
    """Client side: a result of an extension's kind, as its :meth:`Extension.on_result` handler gets it."""

    session: Any  #: the :class:`~jsonrpc_mcp.mcp.client.ClientSession` that sent the request
    method: str  #: the request's method
    params: dict[str, Any]  #: the request's params, as sent
    result: dict[str, Any]  #: the result the server answered with
    progress: Any = None  #: the caller's progress callback, when it gave one


#: Client side: ``async handler(answer)`` turns a result of the extension's kind into the method's own result (a
#: dict, a Struct, or its JSON as bytes).
ResultHandler = Callable[[ExtensionResult], Awaitable[Any]]

_CORE_RESULT_TYPES: Final = frozenset({"complete", "input_required"})
#: The core server capabilities an extension may need declared (``Extension(server_capabilities=...)``).
CORE_SERVER_CAPABILITIES: Final = frozenset({"tools", "resources", "prompts", "logging", "completions"})
_NOTHING: Final[Mapping[str, Any]] = MappingProxyType({})


class Extension:
    """A protocol extension: its identifier, its settings, the revisions it is defined for, and what it adds.

    :param id: the extension identifier, ``vendor-prefix/name`` (a reversed domain you own as the prefix).
    :param settings: the extension's settings object, declared as ``capabilities.extensions[id]`` (an empty
        object means "supported, no settings").
    :param versions: the protocol revisions the extension is defined for (default: every revision we speak). At
        other revisions it is not declared, its methods do not exist and its wrappers do not run.
    :param result_types: ``resultType`` values the extension's answers may carry (2026-07-28).
    :param server_only: the extension defines no client declaration (the skills extension, SEP-2640): it is
        negotiated wherever the server declares it, and its methods answer every client.
    :param server_capabilities: core server capabilities (one name, or several) the extension needs declared
        wherever it is (``["resources"]``: the skills extension, whose files are resources). The server declares
        each in its usual form (``resources: {"subscribe": true, "listChanged": true}``) at the revisions the
        extension is defined for, and answers its methods (``resources/list`` answers ``[]`` while there is
        nothing to list); what the server declares itself or is given in ``Server(capabilities=...)`` stays as it
        is.
    """

    def __init__(
        self,
        id: str,
        *,
        settings: Mapping[str, Any] | None = None,
        versions: Collection[str] | None = None,
        result_types: Iterable[str] = (),
        server_only: bool = False,
        server_capabilities: Iterable[str] = (),
    ) -> None:
        prefix, slash, name = id.partition("/")
        if not slash or not prefix or not name or " " in id:
            raise ValueError(f"an extension identifier is 'vendor-prefix/name' (com.example/my-extension), not {id!r}")
        unknown = set(versions or ()) - set(SUPPORTED_VERSIONS)
        if unknown:
            raise ValueError(f"unknown protocol revisions: {', '.join(sorted(unknown))}")
        kinds = frozenset(result_types)
        if kinds & _CORE_RESULT_TYPES:
            raise ValueError('"complete" and "input_required" are core result kinds, not an extension\'s')
        needs = frozenset((server_capabilities,) if isinstance(server_capabilities, str) else server_capabilities)
        if needs - CORE_SERVER_CAPABILITIES:
            raise ValueError(
                f"not core server capabilities: {', '.join(sorted(needs - CORE_SERVER_CAPABILITIES))} "
                f"(an extension may need {', '.join(sorted(CORE_SERVER_CAPABILITIES))})"
            )
        self.id = id
        self.settings: Mapping[str, Any] = dict(settings or {})
        self.versions: frozenset[str] = frozenset(versions if versions is not None else SUPPORTED_VERSIONS)
        self.result_types = kinds
        self.server_only = server_only
        self.server_capabilities = needs
        self.methods: dict[str, Callable[[Context, Any], Any]] = {}
        self.params_types: dict[str, Any] = {}
        self.wrappers: dict[str, list[Wrapper]] = {}
        self.result_handlers: dict[str, ResultHandler] = {}

    def __repr__(self) -> str:
        return f"<Extension {self.id!r}>"

    # --- declaring what it adds ----------------------------------------------------------------------------

    def method(self, name: str, *, params: Any = None) -> Callable[[F], F]:
        """Add a request method: ``fn(ctx, params)`` returns the result (a dict or a Struct), or a coroutine of it.
        ``params`` is a ``msgspec.Struct`` type to decode the params with (default: a dict, or ``None``)."""
        if callable(name):  # (used without its call: nothing would be added, the function replaced)
            raise TypeError('Extension.method is called to make the decorator: @extension.method("x/name")')

        def register(fn: F) -> F:
            self.methods[name] = fn
            self.params_types[name] = params
            return fn

        return register

    def wrap(self, method: str) -> Callable[[F], F]:
        """Run ``fn(ctx, params, call_next)`` around ``method``'s handler (an existing method of the server, or
        one this extension adds). Wrappers added first run outermost. A plain function gets what ``call_next``
        returns (a result, or an awaitable it returns as it is); an ``async def`` awaits it."""
        if callable(method):  # (used without its call: nothing would be wrapped, the function replaced)
            raise TypeError('Extension.wrap is called to make the decorator: @extension.wrap("tools/call")')

        def register(fn: F) -> F:
            self.wrappers.setdefault(method, []).append(fn)
            return fn

        return register

    def on_result(self, result_type: str) -> Callable[[F], F]:
        """Client side: ``async fn(answer: ExtensionResult)`` turns a result whose ``resultType`` is ``result_type``
        into the method's own result (a dict, a Struct, or its JSON as bytes): a task handle into the task's result,
        say. The client's caller then gets that result as if the server had answered with it."""
        if result_type not in self.result_types:
            raise ValueError(f"{result_type!r} is not one of this extension's result kinds")

        def register(fn: F) -> F:
            self.result_handlers[result_type] = fn
            return fn

        return register

    async def listen(self, ctx: Context, wanted: Mapping[str, Any]) -> Mapping[str, Any]:
        """The part of a ``subscriptions/listen`` filter this extension honours (``wanted`` is the whole filter the
        client sent). Override it to serve keys of your own; raise an ``RpcError`` to refuse the stream."""
        return _NOTHING

    def attach(self, server: Any) -> None:
        """Called when the extension is added to a server (an extension that needs the server keeps it)."""

    async def deliver(self, data: Any) -> None:
        """What ``server.publish_to_extension(id, data)`` handed this extension on some worker of the server (this
        one's included): act on it for this worker's clients (the tasks extension tells its listen streams of a
        task's change). With a backend, every worker's extension gets each such ``data`` once, in the order the
        bus carries them. Nothing by default."""

    # --- negotiation ---------------------------------------------------------------------------------------

    def use_backend(self, backend: Any) -> None:
        """The server's workers share ``backend`` (a :class:`~jsonrpc_mcp.backends.Backend`): an extension that
        keeps state moves it there. Nothing by default."""

    def defined_for(self, version: str | None) -> bool:
        """Is the extension defined at this protocol revision?"""
        return version in self.versions

    def negotiated(self, ctx: Context) -> bool:
        """Did both sides declare the extension for this request (the server for its revision, the client in the
        session's ``initialize`` or the request's ``_meta``; a server-only extension needs the server alone)?"""
        if ctx.version not in self.versions:
            return False
        return self.server_only or client_declares(ctx.client_capabilities, self.id) is not None

    def client_settings(self, ctx: Context) -> Mapping[str, Any] | None:
        """The settings the client declared for this extension with this request, or ``None`` when it did not."""
        return client_declares(ctx.client_capabilities, self.id)

    def missing(self) -> MissingClientCapability:
        """The -32021 error of a request that needs this extension from a client that did not declare it."""
        return MissingClientCapability(
            "extensions", {self.id: {}}, message=f"Missing required client capability: the {self.id} extension"
        )


def client_declares(capabilities: Mapping[str, Any], extension_id: str) -> Mapping[str, Any] | None:
    """The settings a peer's capabilities declare for ``extension_id`` (``None``: not declared)."""
    declared = capabilities.get("extensions")
    if not isinstance(declared, dict):
        return None
    settings = declared.get(extension_id)
    return settings if isinstance(settings, dict) else None


def extensions_capability(extensions: Iterable[Extension], version: str) -> dict[str, Any]:
    """``capabilities.extensions`` for a peer speaking ``version``: the extensions defined at that revision."""
    return {ext.id: dict(ext.settings) for ext in extensions if version in ext.versions}


def needed_capabilities(extensions: Iterable[Extension], version: str | None = None) -> frozenset[str]:
    """The core server capabilities ``extensions`` need declared: at ``version``, those of the extensions defined
    for it; with no version, those of every extension (what the server answers the methods of)."""
    return frozenset(
        name for ext in extensions if version is None or version in ext.versions for name in ext.server_capabilities
    )


def extension_methods(extensions: Iterable[Extension], table: Mapping[str, MethodSpec]) -> dict[str, MethodSpec]:
    """The method table with the extensions' methods added and their wrappers around the methods they wrap."""
    out = dict(table)
    exts = list(extensions)
    for ext in exts:
        for name, handler in ext.methods.items():
            if name in out:
                raise ValueError(f"extension {ext.id} adds {name}, which the server answers already")
            out[name] = MethodSpec(name, _gated(ext, handler), ext.params_types.get(name), None, eras=_eras(ext))
    for ext in exts:
        for name, wrappers in ext.wrappers.items():
            spec = out.get(name)
            if spec is None:
                raise ValueError(f"extension {ext.id} wraps {name}, which the server does not answer")
            handler = spec.handler
            for wrapper in reversed(wrappers):
                handler = _wrapped(ext, wrapper, handler)
            out[name] = msgspec.structs.replace(spec, handler=handler)
    if any(ext.result_types for ext in exts):
        kinds = {kind: ext for ext in exts for kind in ext.result_types}
        for name in {*(n for ext in exts for n in ext.methods), *(n for ext in exts for n in ext.wrappers)}:
            spec = out[name]
            out[name] = msgspec.structs.replace(spec, handler=_checked(kinds, spec.handler))
    return out


def _eras(ext: Extension) -> frozenset[Era]:
    stateless = any(v in STATELESS_VERSIONS for v in ext.versions)
    handshake = any(v in HANDSHAKE_VERSIONS for v in ext.versions)
    return BOTH if stateless and handshake else STATELESS_ONLY if stateless else HANDSHAKE_ONLY


def _gated(ext: Extension, handler: Callable[[Context, Any], Any]) -> Callable[[Context, Any], Any]:
    """An extension method: -32601 at a revision the extension is not defined for, -32021 for a client that did
    not declare it (unless the extension is server-only), else the handler."""

    def gate(ctx: Context, params: Any) -> Any:
        if ctx.version not in ext.versions:
            raise MethodNotFound(f"Method not found: {ctx.method}")
        if not ext.server_only and client_declares(ctx.client_capabilities, ext.id) is None:
            raise ext.missing()
        return handler(ctx, params)

    return gate


def _wrapped(
    ext: Extension, wrapper: Wrapper, call_next: Callable[[Context, Any], Any]
) -> Callable[[Context, Any], Any]:
    """``wrapper`` around ``call_next``, at the revisions ``ext`` is defined for (elsewhere ``call_next`` alone)."""
    if inspect.iscoroutinefunction(wrapper) or inspect.iscoroutinefunction(getattr(wrapper, "__call__", None)):  # noqa: B004

        async def awaited(ctx: Context, params: Any) -> Any:
            out = call_next(ctx, params)
            return await out if inspect.isawaitable(out) else out

        def run_async(ctx: Context, params: Any) -> Any:
            if ctx.version not in ext.versions:
                return call_next(ctx, params)
            return wrapper(ctx, params, awaited)

        return run_async

    def run(ctx: Context, params: Any) -> Any:
        if ctx.version not in ext.versions:
            return call_next(ctx, params)
        return wrapper(ctx, params, call_next)

    return run


def _checked(kinds: Mapping[str, Extension], handler: Callable[[Context, Any], Any]) -> Callable[[Context, Any], Any]:
    """``handler``, its result refused when it is of an extension's kind and that extension is not negotiated for
    the request (a server bug: the client was never told about such results)."""

    def check(ctx: Context, params: Any) -> Any:
        out = handler(ctx, params)
        if inspect.isawaitable(out):
            return _check_later(kinds, ctx, out)
        _check(kinds, ctx, out)
        return out

    return check


async def _check_later(kinds: Mapping[str, Extension], ctx: Context, pending: Awaitable[Any]) -> Any:
    out = await pending
    _check(kinds, ctx, out)
    return out


def _check(kinds: Mapping[str, Extension], ctx: Context, out: Any) -> None:
    if isinstance(out, dict):
        kind = out.get("resultType")
    else:
        kind = getattr(out, "result_type", None)
    ext = kinds.get(kind) if isinstance(kind, str) else None
    if ext is not None and not ext.negotiated(ctx):
        logger.error(
            "%s answered with a %r result, but %s is not negotiated for this request", ctx.method, kind, ext.id
        )
        raise InternalError()
