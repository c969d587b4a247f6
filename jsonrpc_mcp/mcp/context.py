"""The per-request context handed to tool, resource and prompt functions (L4).

A handler declares a parameter annotated :class:`Context` to receive it. Through it the handler reports progress,
logs to the client, checks whether it was cancelled, and asks the client for input (sampling, elicitation,
roots). The same calls work in both eras:

* in a handshake session they become server-to-client requests on the same connection;
* in the stateless era (2026-07-28) the server may not send requests, so the first call whose answer is not yet
  known raises :class:`InputRequired`; the session turns that into an ``InputRequiredResult``, and when the
  client retries with ``inputResponses`` the handler runs again from the start and the same call returns the
  answer. Handlers therefore must do their side effects *after* they have gathered their input (see
  docs/design.md, "Input in the stateless era").
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Awaitable, Callable, Generator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, cast

import anyio
import msgspec

from ..errors import InputRequired, MissingClientCapability, RpcError
from ..jsonrpc import codes
from ..jsonrpc.wire import NO_INTAKE, Intake, RequestId
from . import types as t
from .eras import LOG_LEVELS
from .methods import CLIENT_METHOD_CAPABILITY, require_defined
from .output_schemas import schema_problems
from .sampling import conversation_problem
from .versions import Era

if TYPE_CHECKING:
    from .principal import AccessToken
    from .session import ServerSession

__all__ = (
    "Context",
    "InputRequired",
    "MissingClientCapability",
    "StartTask",
    "LOG_LEVELS",
    "call_on_worker_thread",
    "on_worker_thread",
)

logger = logging.getLogger(__name__)

_NO_ANSWERS: Final[Mapping[str, Any]] = MappingProxyType({})
_STATELESS: Final = Era.STATELESS
_LEVEL_RANK: Final = {name: i for i, name in enumerate(LOG_LEVELS)}
_UNREAD: Final[Any] = object()  # ``Context.auth`` not looked up yet


class _Done:
    """An awaitable that is already done: what :meth:`Context.report_progress` returns on a worker thread."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        return
        yield  # (a generator that ends at once)


_DONE: Final = _Done()

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]

#: Names in :mod:`.types`, looked up when needed: these types are created on first use (see ``_types_lazy``).
_RESULT_TYPE_OF: Final = {
    "sampling/createMessage": "CreateMessageResult",
    "elicitation/create": "ElicitResult",
    "roots/list": "ListRootsResult",
}

_worker_thread = threading.local()


#: How often a worker thread waiting for its progress report to be handed on looks whether the connection ended.
_GONE_CHECK: Final = 0.1


def call_on_worker_thread(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
    """Call ``fn(**kwargs)`` as a plain handler on a worker thread (see :func:`on_worker_thread`)."""
    _worker_thread.busy = True
    try:
        return fn(**kwargs)
    finally:
        _worker_thread.busy = False


def on_worker_thread() -> bool:
    """True in a plain function called by :func:`call_on_worker_thread`: it runs on a worker thread, beyond the
    reach of the event loop's cancellation."""
    return getattr(_worker_thread, "busy", False)


class StartTask(Exception):
    """Raised by :meth:`Context.start_task` where the work is to go on as a task (2026-07-28, the tasks extension):
    the request is answered with the task, and the handler runs again in it. Handlers never catch it."""

    def __init__(self, message: str | None) -> None:
        super().__init__("start the task")
        self.message = message


class Context(msgspec.Struct, kw_only=True):
    """What a handler can do besides computing its result. One per request; do not keep it after returning.

    Made by the session for every request (a Struct: its constructor is msgspec's, in C)."""

    session: ServerSession
    request_id: RequestId
    method: str
    era: Era
    version: str
    client_capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] = _NO_ANSWERS
    meta: Mapping[str, Any] = _NO_ANSWERS
    log_level: str | None = None  #: the level the request asked for (2026-07-28)
    answers: Mapping[str, Any] = _NO_ANSWERS  #: inputs the client gave in earlier rounds (2026-07-28)
    state: Mapping[str, Any] = _NO_ANSWERS  #: what middleware put there for the handler (``Message.state``)
    #: 2026-07-28: the ``requestState`` of the input this request asks for is single-use (see docs/design.md,
    #: "Input in the stateless era"): set it before asking, or register the tool with ``single_use_state=True``.
    single_use_state: bool = False
    _auto_keys: int = 0
    _progress_last: float | None = None
    #: What came with the request (its transport's :class:`~jsonrpc_mcp.jsonrpc.wire.Intake`: its headers, its
    #: principal, its connection).
    intake: Intake = NO_INTAKE
    _request_headers: Mapping[str, str] | None = None
    _auth: Any = _UNREAD  # ``auth``, once looked up
    _starts_task: bool = False  # (set by the tasks extension: start_task() starts the task here)

    @property
    def progress_token(self) -> str | int | None:
        """The ``progressToken`` of the request's ``_meta``, when it has a usable one."""
        token = self.meta.get("progressToken")
        return token if type(token) is str or type(token) is int else None

    # --- state ---------------------------------------------------------------------------------------------

    @property
    def stateless(self) -> bool:
        return self.era is _STATELESS

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled this request (an ``async def`` handler is also interrupted at its next
        await; a plain ``def`` one, on a worker thread, runs on until it looks here)."""
        if on_worker_thread():  # no cancel scope of the event loop's reaches here: ask the dispatcher
            return not self.session.dispatcher.still_wanted(self.request_id)
        try:
            return anyio.current_effective_deadline() == -math.inf
        except RuntimeError:  # anyio's NoEventLoopError: no event loop runs yet (run_stdio answers sync
            return False  # handlers before it starts one), so nothing can have been cancelled

    @property
    def request_headers(self) -> Mapping[str, str]:
        """The transport-level headers of the request that carried this message, names in lower case (empty on
        transports without headers): what came with it (:attr:`intake`); assigning the attribute overrides it."""
        if self._request_headers is None:
            headers = self.intake.request_headers()
            self._request_headers = headers if headers is not None else {}
        return self._request_headers

    @request_headers.setter
    def request_headers(self, headers: Mapping[str, str]) -> None:
        self._request_headers = {k.lower(): v for k, v in headers.items()}

    @property
    def auth(self) -> AccessToken | None:
        """Who made this request: the principal of its OAuth access token (subject, client id, scopes, claims), or
        ``None`` on a transport without authorization (stdio, sockets, HTTP without an authorization policy). A
        transport provides it, with the request (:attr:`intake`); assigning the attribute overrides it."""
        auth: AccessToken | None = self._auth
        if auth is _UNREAD:
            auth = self._auth = cast("AccessToken | None", self.intake.auth)
        return auth

    @auth.setter
    def auth(self, principal: AccessToken | None) -> None:
        self._auth = principal

    def has_capability(self, name: str, sub: str | None = None) -> bool:
        """Did the client declare capability ``name`` (and, with ``sub``, its sub-capability)?"""
        cap = self.client_capabilities.get(name)
        if not isinstance(cap, dict):
            return False
        if sub is None:
            return True
        if name == "elicitation" and sub == "form" and not cap.get("url"):
            return True  # an empty elicitation capability means form mode
        return isinstance(cap.get(sub), dict) or cap.get(sub) is True

    # --- notifications -------------------------------------------------------------------------------------

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> Awaitable[None]:
        """Send ``notifications/progress`` if the client asked for progress; ``progress`` must increase. Once the
        request is answered (or cancelled) nothing more is sent: its token is no longer the client's active one.
        Reports are paced (``Server(progress_interval=...)``, 50 ms by default): one passes at once, those within
        the interval after it are held, and only the latest held is sent, when the interval ends or before the
        response, whichever comes first.

        Awaited in an ``async def`` handler; in a plain ``def`` one (on a worker thread) called as it is: the
        report is handed to the event loop, and the call returns once it is sent or held."""
        if on_worker_thread():
            self._report_from_thread(progress, total, message)
            return _DONE
        return self._report_progress(progress, total, message)

    def _report_from_thread(self, progress: float, total: float | None, message: str | None) -> None:
        """:meth:`report_progress` from a worker thread: run on the event loop, waited for here (so that it is
        sent or held before the handler returns, and its response goes out after it)."""
        done = threading.Event()
        failed: list[Exception] = []

        async def report() -> None:
            try:
                await self._report_progress(progress, total, message)
            except Exception as exc:  # (a progress that does not increase: raised in the handler)
                failed.append(exc)
            finally:
                done.set()

        dispatcher = self.session.dispatcher
        if dispatcher.spawn(report):  # (False once the connection ended: nothing to send to)
            # A connection that ends before the report's task runs drops it: the thread does not wait on for it.
            while not done.wait(_GONE_CHECK):
                if dispatcher.closed:
                    break
        if failed:
            raise failed[0]

    async def _report_progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.progress_token is None or not self.session.dispatcher.still_wanted(self.request_id):
            return
        if self._progress_last is not None and progress <= self._progress_last:
            raise ValueError("progress must increase with each report")
        self._progress_last = progress
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.session.report_progress(self.request_id, params)

    async def log(self, level: LogLevel, data: Any, logger_name: str | None = None) -> None:
        """Send ``notifications/message`` when the client's level lets it through (never in the stateless era
        unless the request carried a log level)."""
        threshold = self.log_level if self.stateless else self.session.log_level
        if threshold is None or level not in _LEVEL_RANK:
            return
        if _LEVEL_RANK[level] < _LEVEL_RANK.get(threshold, 0):
            return
        if not self.stateless and not self.session.app.advertises("logging", version=self.version):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger_name is not None:
            params["logger"] = logger_name
        await self.session.send_notification("notifications/message", params, related=self.request_id)

    async def debug(self, data: Any, logger_name: str | None = None) -> None:
        await self.log("debug", data, logger_name)

    async def info(self, data: Any, logger_name: str | None = None) -> None:
        await self.log("info", data, logger_name)

    async def warning(self, data: Any, logger_name: str | None = None) -> None:
        await self.log("warning", data, logger_name)

    async def error(self, data: Any, logger_name: str | None = None) -> None:
        await self.log("error", data, logger_name)

    # --- input from the client -----------------------------------------------------------------------------

    async def sample(
        self,
        messages: list[t.SamplingMessage] | str,
        *,
        max_tokens: int = 1000,
        system_prompt: str | None = None,
        key: str | None = None,
        timeout: float | None = None,
        **extra: Any,
    ) -> t.CreateMessageResult:
        """Ask the client's model for a completion (``sampling/createMessage``); messages that break the tool-use
        rules (a tool use without its result, results mixed with other content) are a ``ValueError``, unsent."""
        if isinstance(messages, str):
            messages = [t.SamplingMessage(role="user", content=t.TextContent(text=messages))]
        params: dict[str, Any] = {"messages": msgspec.to_builtins(messages), "maxTokens": max_tokens}
        problem = conversation_problem(params["messages"])
        if problem is not None:  # (servers MUST answer each tool use with its result, and with results only)
            raise ValueError(f"sample: {problem}")
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        params.update(extra)
        # Tools in sampling (2025-11-25): only to a client that declared sampling.tools. Since 2025-11-25 a context
        # other than "none" only to one that declared sampling.context.
        if extra.get("includeContext") not in (None, "none") and self.version >= "2025-11-25":
            self._check_capability("sampling/createMessage", "context")
        sub = "tools" if "tools" in extra or "toolChoice" in extra else None
        result: t.CreateMessageResult = await self._ask("sampling/createMessage", params, key, timeout, sub=sub)
        return result

    async def elicit(
        self,
        message: str,
        schema: Mapping[str, Any],
        *,
        key: str | None = None,
        timeout: float | None = None,
        validate: bool = True,
    ) -> t.ElicitResult:
        """Ask the user for structured input (form-mode ``elicitation/create``); ``schema`` is a flat object schema.
        Accepted content that does not match it is refused (-32602 naming what is wrong; with the validation extra
        installed): servers SHOULD validate received data against the requested schema. ``validate=False``: the
        caller checks the answer itself (and may ask again)."""
        params: dict[str, Any] = {"message": message, "requestedSchema": dict(schema)}
        if self.version >= "2025-11-25":
            params = {"mode": "form", **params}
        result: t.ElicitResult = await self._ask("elicitation/create", params, key, timeout, sub="form")
        if validate and result.action == "accept":
            problems = schema_problems(
                params["requestedSchema"], {} if result.content is msgspec.UNSET else result.content
            )
            if problems:
                raise RpcError(
                    "Invalid params: the elicitation answer does not match the requested schema: "
                    + "; ".join(problems),
                    code=codes.INVALID_PARAMS,
                )
        return result

    async def elicit_url(
        self,
        message: str,
        url: str,
        *,
        elicitation_id: str | None = None,
        key: str | None = None,
        timeout: float | None = None,
    ) -> t.ElicitResult:
        """Send the user to ``url`` (URL-mode elicitation, 2025-11-25 and later): an absolute ``https://`` URL
        (``http://`` only to this host, for development), else ``ValueError``."""
        from urllib.parse import urlsplit

        from ..addresses import is_loopback_host

        parts = urlsplit(url)
        if not parts.scheme or not parts.netloc:
            raise ValueError(f"elicit_url needs an absolute URL (a scheme and a host), not {url!r}")
        if parts.scheme.lower() != "https" and not (
            parts.scheme.lower() == "http" and is_loopback_host(parts.hostname)
        ):
            raise ValueError(f"elicit_url sends the user to an https:// URL (http:// only to this host), not {url!r}")
        params: dict[str, Any] = {"mode": "url", "message": message, "url": url}
        if not self.stateless:
            import secrets

            params["elicitationId"] = elicitation_id or secrets.token_urlsafe(16)
            sent = self.session.url_elicitations
            sent[params["elicitationId"]] = None
            if len(sent) > _URL_ELICITATIONS_KEPT:
                del sent[next(iter(sent))]
        result: t.ElicitResult = await self._ask("elicitation/create", params, key, timeout, sub="url")
        return result

    async def complete_elicitation(self, elicitation_id: str) -> None:
        """Tell the client that the URL-mode elicitation ``elicitation_id`` is complete
        (``notifications/elicitation/complete``, 2025-11-25): one :meth:`elicit_url` sent on this session (the
        client that initiated it), once; any other id is a ``ValueError`` and nothing is sent."""
        sent = self.session.url_elicitations
        if not isinstance(elicitation_id, str) or elicitation_id not in sent:
            raise ValueError(f"no URL-mode elicitation {elicitation_id!r} waits on this session to be completed")
        require_defined("notifications/elicitation/complete", self.version)
        del sent[elicitation_id]
        params = {"elicitationId": elicitation_id}
        await self.session.send_notification("notifications/elicitation/complete", params, related=self.request_id)

    async def list_roots(self, *, key: str | None = None, timeout: float | None = None) -> t.ListRootsResult:
        """The client's roots (``roots/list``)."""
        result: t.ListRootsResult = await self._ask("roots/list", None, key, timeout)
        return result

    async def request_inputs(
        self, requests: Mapping[str, tuple[str, Mapping[str, Any] | None]], *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Ask for several inputs at once: ``{key: (method, params)}`` → ``{key: typed result}``.

        In the stateless era all missing ones go out in one ``InputRequiredResult``; in a handshake session they
        are sent as concurrent server-to-client requests. ``method`` is one of ``elicitation/create``,
        ``sampling/createMessage`` and ``roots/list`` (the only inputs a server may ask for), else ``ValueError``.
        """
        for method, _ in requests.values():
            if method not in _RESULT_TYPE_OF:
                raise ValueError(f"request_inputs asks for {method!r}; an input is one of {', '.join(_RESULT_TYPE_OF)}")
            self._check_capability(method, None)
        if self._asks_in_rounds:
            missing = {k: _input_request(m, p) for k, (m, p) in requests.items() if k not in self.answers}
            answers = {**self.answers, **(await self._input_round(missing, timeout))} if missing else self.answers
            return {k: _typed(requests[k][0], answers[k]) for k in requests}
        results: dict[str, Any] = {}

        async def one(key: str, method: str, params: Mapping[str, Any] | None) -> None:
            results[key] = await self._ask(method, dict(params) if params else None, key, timeout)

        async with anyio.create_task_group() as tg:
            for key, (method, params) in requests.items():
                tg.start_soon(one, key, method, params)
        return results

    async def _ask(
        self,
        method: str,
        params: dict[str, Any] | None,
        key: str | None,
        timeout: float | None,
        sub: str | None = None,
    ) -> Any:
        """The one way a handler asks the client for something: in input rounds (the answer given in an earlier
        round by its ``key``, else a round asking for it), or as a request of the session."""
        self._check_capability(method, sub)
        if not self._asks_in_rounds:
            return await self._send_input_request(method, params, timeout)
        if key is None:
            self._auto_keys += 1
            key = f"{method.split('/')[0]}-{self._auto_keys}"
        if key in self.answers:
            return _typed(method, self.answers[key])
        answers = await self._input_round({key: _input_request(method, params)}, timeout)
        return _typed(method, answers[key])

    @property
    def _asks_in_rounds(self) -> bool:
        """Whether input is asked for in rounds of the request (2026-07-28) rather than as requests of the session."""
        return self.stateless

    async def _input_round(self, missing: dict[str, dict[str, Any]], timeout: float | None) -> dict[str, Any]:
        """Ask for ``missing`` (by key) in an input round; the answers by key. Here, the request's own round: it is
        answered with them (``InputRequired``), and the client retries with the answers."""
        raise InputRequired(missing)

    async def _send_input_request(self, method: str, params: dict[str, Any] | None, timeout: float | None) -> Any:
        raw = await self.session.send_request(method, params, related=self.request_id, timeout=timeout)
        return msgspec.json.decode(raw, type=getattr(t, _RESULT_TYPE_OF[method]))

    def _check_capability(self, method: str, sub: str | None) -> None:
        """Refuse what the request's revision does not define, then what the client did not declare."""
        require_defined(method, self.version, sub if sub != "form" else None)
        cap = CLIENT_METHOD_CAPABILITY.get(method)
        if cap is not None and not self.has_capability(cap, sub):
            detail: dict[str, Any] | None = {sub: {}} if sub is not None and sub != "form" else None
            raise MissingClientCapability(cap, detail)

    # --- tasks (2026-07-28, the tasks extension) -------------------------------------------------------------

    @property
    def task_id(self) -> str | None:
        """The id of the task this handler runs in (``None``: it answers its request itself)."""
        return None

    async def start_task(self, message: str | None = None) -> None:
        """Go on as a task from here (a tool registered with ``task_start="in_handler"``): what the handler asked
        the client before this call was gathered in input rounds of the request itself; the request is now
        answered with the task, and the handler runs again in it, from its start, with those answers (so ask
        first, act after). ``message`` is the task's first ``statusMessage``. Where the call is not made a task
        (no tasks extension negotiated, the handshake era, or already in the task) it returns at once."""
        if self._starts_task:
            raise StartTask(message)

    # --- escape hatches ------------------------------------------------------------------------------------

    async def close_sse_stream(self) -> bool:
        """Streamable HTTP, handshake era (SEP-1699): close this request's SSE stream now; the client comes back
        with GET + ``Last-Event-ID`` and receives the rest. False where the transport has no such stream, and in a
        session of a revision before 2025-11-25 (which says the server should not close the stream before its
        answer)."""
        if self.stateless or self.version < "2025-11-25":
            return False
        return self.session.dispatcher.stream.close_request_stream(self.request_id)

    async def send_notification(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send any notification related to this request (one the request's revision defines)."""
        require_defined(method, self.version)
        await self.session.send_notification(method, params, related=self.request_id)


#: How many URL-mode elicitations a session remembers while they wait to be completed.
_URL_ELICITATIONS_KEPT: Final = 1024


def _input_request(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    return {"method": method, "params": dict(params) if params is not None else {}}


def _typed(method: str, value: Any) -> Any:
    kind = _RESULT_TYPE_OF.get(method)
    if kind is None:
        return value
    try:
        return msgspec.convert(value, getattr(t, kind))
    except msgspec.ValidationError as exc:
        raise RpcError(f"Invalid input response for {method}: {exc}", code=codes.INVALID_PARAMS) from None
