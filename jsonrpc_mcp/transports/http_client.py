"""Streamable HTTP, client side: a :class:`MessageStream` over httpx (L6; needs the ``http`` extra).

::

    async with Client.connect_http("http://127.0.0.1:8000/mcp") as client:
        tools = await client.list_tools()

    async with connect_http(url, headers={"Authorization": f"Bearer {token}"}) as stream:  # the stream alone
        await stream.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        frames = await stream.receive()

Every frame the dispatcher writes becomes its own POST, sent from a background task so that a long answer
never holds up the next request. Whatever the server sends back — a JSON body, an SSE stream carrying
notifications and server-to-client requests before the response, the standalone GET stream — lands in one
bounded queue that :meth:`HttpClientStream.receive` reads.

Handshake era: ``Mcp-Session-Id`` is taken from the initialize answer and sent from then on, with the negotiated
``MCP-Protocol-Version``; after ``notifications/initialized`` the standalone GET stream is opened (405: the
server offers none, fine), and the handshake ends only once the server has answered that GET (at most
``get_stream_wait`` seconds): a server may send there what it has for us as soon as our next request arrives
(a server-to-client request of a tool call, for one) and drop it if the stream is not open yet. An SSE
stream that ends before its response is resumed with ``GET`` + ``Last-Event-ID`` after the server's ``retry``
delay (a bounded number of times). Closing sends ``DELETE``.

A 404 for the session means the server ended it (it restarted, or forgot it): the stream forgets the session and,
once per session ended, calls :attr:`~HttpClientStream.restart_session` (``Client`` sets it: the handshake again,
without a session id, as the spec says the client must). Requests made meanwhile wait for the new session. The
request answered 404 was refused before it ran: it is sent once more, in the new session. A request under way in
the ended session (its answer not come) may have run: it fails with :class:`~jsonrpc_mcp.errors.SessionExpired`
and is not sent again.

Redirects of the endpoint are followed within its origin, at most five in a row: 307 and 308 by every request
(a 308 moves the endpoint: later requests go straight to its target), 301, 302 and 303 by a GET only (they
would turn a POST into a GET). Any other redirect fails the request with an error naming it.

Stateless era (a request whose ``_meta`` names the protocol version): no session; the ``MCP-Protocol-Version``,
``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` headers mirror the body (``tool_headers`` is filled by
:meth:`Client.list_tools <jsonrpc_mcp.Client.list_tools>`).

Transport failures never pass silently: a request whose HTTP exchange fails is ended at once with a typed error
(:class:`~jsonrpc_mcp.errors.ServerUnreachable` when its POST could not connect, ``SessionExpired``,
:class:`~jsonrpc_mcp.errors.ConnectionClosed` when the exchange broke), so its caller does not wait for its
timeout; an answer that is none (an HTTP error status without a JSON-RPC error...) is an ``RpcError`` saying so. A
JSON answer, like an SSE event, is read up to ``max_event`` bytes (16 MiB, the frame limit of the other
transports): past that the request fails saying so, and nothing more of the body is read. A request given up
(timed out or cancelled by its caller) closes its response stream, so a server that never answers holds none of
the concurrent POSTs.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import anyio
import anyio.abc
import msgspec
from msgspec import UNSET

from ..errors import (
    AuthorizationError,
    ConnectionClosed,
    MissingExtra,
    RpcError,
    ServerUnreachable,
    SessionExpired,
    local_failure,
)
from ..jsonrpc import codes
from ..jsonrpc.streams import MessageStream, Network, Outgoing
from ..jsonrpc.wire import RequestId, decode_frame, encode_error, is_batch
from ..mcp.groups import unwrap_group
from ..mcp.headers import param_headers, standard_headers
from ..mcp.versions import META_PROTOCOL_VERSION
from .connect_errors import check_http_url, http_connect_failure
from .http_bodies import read_limited
from .http_log_redaction import redact_http_logs
from .sse import SseParser, SseTooLarge

if TYPE_CHECKING:
    import httpx

__all__ = ("HttpClientStream", "connect_http", "post_headers")

logger = logging.getLogger(__name__)

_PV_NEEDLE: Final = META_PROTOCOL_VERSION.encode()
_ACCEPT_BOTH: Final = "application/json, text/event-stream"
_MAX_ERROR_BODY: Final = 64 * 1024
_ENDED: Final = "the server ended the MCP session (HTTP 404) while this request was under way"
_NO_RESTART: Final = "the server ended the MCP session (HTTP 404)"
#: The redirects followed, by method: those that keep the method (and the body) and, for GET, any.
_FOLLOWED: Final = {"POST": (307, 308), "DELETE": (307, 308), "GET": (301, 302, 303, 307, 308)}
_MAX_REDIRECTS: Final = 5
_MAX_RETRY_MS: Final = 3_600_000
_SESSION_ID: Final = re.compile(r"[\x21-\x7e]+")


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise MissingExtra(f"the Streamable HTTP client needs httpx: {MissingExtra.install('http')}") from None
    return httpx


class _Out(msgspec.Struct):
    """What the stream needs to know about a frame it sends."""

    kind: str  # "request" | "notification" | "response"
    method: str | None = None
    ident: RequestId | None = None
    params: dict[str, Any] | None = None
    version: str | None = None  # the stateless-era protocol version the frame names


def _inspect(frame: bytes) -> _Out:
    if is_batch(frame):
        return _Out("response")  # we only ever batch answers
    env = decode_frame(frame)
    if env.method is UNSET:
        return _Out("response")
    method = env.method if isinstance(env.method, str) else None
    kind = "notification" if env.id is UNSET else "request"
    ident = env.id if kind == "request" else None
    params: dict[str, Any] | None = None
    version: str | None = None
    if env.params is not UNSET and _PV_NEEDLE in frame:
        value = msgspec.json.decode(env.params)
        if isinstance(value, dict):
            params = value
            meta = value.get("_meta")
            if isinstance(meta, dict) and isinstance(meta.get(META_PROTOCOL_VERSION), str):
                version = meta[META_PROTOCOL_VERSION]
    elif method in ("tools/call", "notifications/cancelled") and env.params is not UNSET:
        value = msgspec.json.decode(env.params)
        params = value if isinstance(value, dict) else None
    return _Out(kind, method, ident, params, version)


def _needs_session(out: _Out) -> bool:
    """Whether ``out`` is sent in the handshake era's session (all but the two frames that start one)."""
    return out.version is None and out.method not in ("initialize", "notifications/initialized")


def post_headers(
    base: Mapping[str, str],
    *,
    method: str | None,
    params: Mapping[str, Any] | None = None,
    version: str | None = None,
    session_id: str | None = None,
    protocol_version: str | None = None,
    param_annotations: Mapping[tuple[str, ...], str] | None = None,
) -> dict[str, str]:
    """The headers of a POST that carries one frame (``base`` first): ``Accept`` and ``Content-Type``; for a frame
    of the 2026-07-28 era (``version``: the one its ``_meta`` names) ``MCP-Protocol-Version`` and, for a request
    (``method``; ``None`` for a notification or an answer), ``Mcp-Method``, ``Mcp-Name`` and the ``Mcp-Param-*``
    headers ``param_annotations`` give a ``tools/call``; for a handshake-era frame the session's ``Mcp-Session-Id``
    and negotiated ``MCP-Protocol-Version`` (not on ``initialize``, which negotiates it)."""
    headers = {**base, "Accept": _ACCEPT_BOTH, "Content-Type": "application/json"}
    if version is not None:
        headers["MCP-Protocol-Version"] = version
        if method is not None:
            headers.update(standard_headers(method, params))
            if method == "tools/call" and param_annotations and params is not None:
                arguments = params.get("arguments")
                headers.update(param_headers(param_annotations, arguments if isinstance(arguments, Mapping) else None))
        return headers
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
    if protocol_version is not None and method != "initialize":
        headers["MCP-Protocol-Version"] = protocol_version
    return headers


def _response_id(frame: bytes) -> RequestId | None:
    """The id of a response frame (``None`` for anything else)."""
    try:
        env = decode_frame(frame)
    except RpcError:
        return None
    if env.method is not UNSET or env.id is UNSET:
        return None
    return env.id if isinstance(env.id, str | int) else None


def _network(url: str) -> Network:
    """What carries the frames to ``url``: HTTP over TCP, to its host and port (the scheme's own if it names none)."""
    parts = urlsplit(url)
    network: dict[str, str | int] = {"network.transport": "tcp", "network.protocol.name": "http"}
    if parts.hostname:
        network["server.address"] = parts.hostname
        try:
            network["server.port"] = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        except ValueError:  # a port that is not a number: the request fails, and says so, on its own
            pass
    return network


class HttpClientStream(MessageStream):
    """The client's end of a Streamable HTTP connection. Create it with :func:`connect_http`."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        task_group: anyio.abc.TaskGroup,
        *,
        headers: Mapping[str, str] | None = None,
        max_reconnects: int = 3,
        default_retry_ms: int = 1000,
        buffer: int = 256,
        max_concurrent_posts: int = 64,
        max_event: int = 16 * 1024 * 1024,
        get_stream_wait: float = 5.0,
        auth: httpx.Auth | None = None,
    ) -> None:
        self.http = http
        #: authorizes every request to the endpoint (e.g. :class:`jsonrpc_mcp.auth.OAuth`); None: the client's own
        self.auth = auth
        self.url = url
        self.headers = dict(headers or {})
        self.max_reconnects = max_reconnects
        self.default_retry_ms = default_retry_ms
        self.max_event = max_event
        self.get_stream_wait = get_stream_wait
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.network = _network(url)
        #: tool name -> {property path: x-mcp-header name}; filled by ``Client.list_tools`` (SEP-2243).
        self.tool_headers: dict[str, dict[tuple[str, ...], str]] = {}
        self._tg = task_group
        self._in_send, self._in = anyio.create_memory_object_stream[bytes](buffer)
        self._posts = anyio.Semaphore(max_concurrent_posts)
        self._init_id: RequestId | None = None
        self._get_started = False
        self._get_answered = anyio.Event()  # the session's GET stream has its answer (or will never have one)
        self._redirect_noted = False
        self._closed = False
        #: Why there is no session (the server ended it, and no new one was started yet): the error of a request
        #: that cannot be sent, made afresh for each.
        self._lost: Callable[[], Exception] | None = None
        self._renewal: anyio.Event | None = None  # set once the new session is started (or could not be)
        #: the requests whose answer is being read: their POST's scope, and whether they are of the 2026-07-28 era
        self._open_posts: dict[RequestId, tuple[anyio.CancelScope, bool]] = {}
        #: Why the server could not be reached, once a request failed to connect (one line, naming the host).
        self.unreachable: str | None = None
        #: The HTTP status (4xx) with which the server refused a request before there was a session: 400, 404 or
        #: 405 there is how a server of the 2024-11-05 HTTP+SSE transport answers a POST (``Client.connect_http``
        #: then falls back to it).
        self.refused_status: int | None = None

    # --- MessageStream ---------------------------------------------------------------------------------------

    async def receive(self) -> Sequence[bytes]:
        try:
            first = await self._in.receive()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise anyio.EndOfStream from None
        frames = [first]
        while True:
            try:
                frames.append(self._in.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return frames

    async def send(self, frames: Sequence[Outgoing]) -> None:
        for out in frames:
            await self._send_one(out.frame)

    async def _send_one(self, frame: bytes) -> None:
        if self._closed:
            raise anyio.BrokenResourceError()
        out = _inspect(frame)
        if out.method == "notifications/cancelled" and out.version is None and self._close_post(out):
            return  # (2026-07-28: closing the request's response stream is the cancellation; nothing is sent)
        frame = bytes(frame)
        if out.method == "initialize" and out.version is None:
            self._init_id = out.ident
        elif _needs_session(out) and self._lost is not None and self._renewal is None:
            if self.restart_session is None or self._closed:
                await self._fail(out, self._lost())
                return
            self._renew()  # (the last attempt to start a session failed: this frame tries once more)
        if out.method == "notifications/initialized" and out.version is None:
            # Sent inline, and the GET stream it opens is answered before the handshake ends: a server may
            # send on that stream what it has for us as soon as we make our next request.
            await self._posts.acquire()
            await self._post(frame, out)
            if self._get_started:
                with anyio.move_on_after(self.get_stream_wait):
                    await self._get_answered.wait()
            if self._renewal is not None:
                self._renewed(self._renewal)  # the frames that waited for the new session go now
            return
        # One of the concurrent POSTs is taken here (the sender waits when all are); not while a session is being
        # started, when the frame waits for it: its initialize may need one.
        slot = self._renewal is None
        if slot:
            await self._posts.acquire()
        if out.kind == "request" and out.ident is not None:
            scope = anyio.CancelScope()
            self._open_posts[out.ident] = (scope, out.version is not None)
            self._tg.start_soon(self._post_request, frame, out, scope, slot)
        else:
            self._tg.start_soon(self._post_in_session, frame, out, slot)

    def _close_post(self, cancel: _Out) -> bool:
        """A cancellation of one of our requests (its caller gave up: a timeout, a cancelled task): close the
        request's response stream, whose answer no one waits for any more. True when that stream was the
        2026-07-28 era's, where closing it is the cancellation (nothing is sent); False otherwise (the notification
        is then sent as it is, the handshake era's cancellation)."""
        ident = (cancel.params or {}).get("requestId")
        entry = self._open_posts.pop(ident, None) if isinstance(ident, str | int) else None
        if entry is None:
            return False
        scope, stateless = entry
        scope.cancel()
        return stateless

    async def _post_request(self, frame: bytes, out: _Out, scope: anyio.CancelScope, slot: bool) -> None:
        try:
            with scope:
                if await self._post_in_session(frame, out, slot):
                    await self._post_in_session(frame, out, False, again=True)  # refused unrun: in the new session
        finally:
            entry = self._open_posts.get(out.ident)  # type: ignore[arg-type]
            if entry is not None and entry[0] is scope:
                del self._open_posts[out.ident]  # type: ignore[arg-type]

    async def _post_in_session(self, frame: bytes, out: _Out, slot: bool, *, again: bool = False) -> bool:
        """:meth:`_post`, once there is a session to send ``frame`` in: while a new one is being started it waits
        (holding none of the concurrent POSTs: the new ``initialize`` may need one); when none could be started,
        ``out`` fails saying why (an answer to a request of the ended session is dropped). ``slot``: one of the
        concurrent POSTs is taken for it already."""
        while True:
            if not (_needs_session(out) and (self._lost is not None or self._renewal is not None)):
                if slot:
                    return await self._post(frame, out, again=again)
                await self._posts.acquire()
                slot = True
                continue  # (the session may have ended while it waited for a slot)
            if slot:
                self._posts.release()
                slot = False
            if out.kind == "response":
                logger.info("an answer to a request of the ended MCP session was not sent")
                return False
            if self._renewal is None:
                await self._fail(out, self._lost() if self._lost is not None else ConnectionClosed())
                return False
            await self._renewal.wait()

    # --- the session ended: a new one ------------------------------------------------------------------------

    def _session_lost(self, sid: str) -> None:
        """The server answered 404 for the session ``sid``: it ended. When it is the current one, forget it and
        start a new one (once per session ended: an earlier session's 404 was handled when it came)."""
        if sid != self.session_id:
            return
        restart = self.restart_session is not None and not self._closed
        logger.warning("the server ended the MCP session (HTTP 404)%s", ": starting a new one" if restart else "")
        self.session_id = None  # nothing to DELETE any more
        self._lost = partial(SessionExpired, _NO_RESTART)
        self._get_started = False
        self._get_answered = anyio.Event()
        if restart:
            self._renew()

    def _renew(self) -> None:
        gate = self._renewal = anyio.Event()
        self._tg.start_soon(self._restart, gate)

    async def _restart(self, gate: anyio.Event) -> None:
        assert self.restart_session is not None
        try:
            await self.restart_session()
        except ServerUnreachable as exc:
            self._lost = partial(ServerUnreachable, str(exc))
            logger.warning("could not start a new MCP session: %s", exc)
        except AuthorizationError as exc:
            self._lost = partial(AuthorizationError, exc.step, exc.reason, message=exc.message)
            logger.warning("could not start a new MCP session: %s", exc.message)
        except Exception as exc:
            why = exc.message if isinstance(exc, RpcError) else str(exc) or type(exc).__name__
            self._lost = partial(SessionExpired, f"{_NO_RESTART}, and a new session could not be started: {why}")
            logger.warning("could not start a new MCP session: %s", why)
        finally:
            self._renewed(gate)

    def _renewed(self, gate: anyio.Event) -> None:
        if self._renewal is gate:
            self._renewal = None
        gate.set()

    async def aclose(self) -> None:
        """End the session (DELETE, when there is one) and stop delivering frames."""
        if self._closed:
            return
        self._closed = True
        if self._renewal is not None:
            self._renewed(self._renewal)
        sid = self.session_id
        if sid is not None:
            with anyio.move_on_after(5, shield=True):
                try:
                    async with self._request("DELETE", self._session_headers(sid)) as response:
                        if response.status_code not in (200, 202, 204, 404, 405):
                            logger.debug("DELETE of the session answered %d", response.status_code)
                except Exception as exc:
                    logger.debug("DELETE of the session failed: %s", exc)
        self._in_send.close()
        self._in.close()

    # --- sending ---------------------------------------------------------------------------------------------

    def _session_headers(self, sid: str | None) -> dict[str, str]:
        headers = dict(self.headers)
        if sid is not None:
            headers["Mcp-Session-Id"] = sid
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def _post_headers(self, out: _Out) -> dict[str, str]:
        name = (out.params or {}).get("name") if out.method == "tools/call" else None
        return post_headers(
            self.headers,
            method=out.method if out.kind == "request" else None,
            params=out.params,
            version=out.version,
            session_id=self.session_id,
            protocol_version=self.protocol_version,
            param_annotations=self.tool_headers.get(name) if isinstance(name, str) else None,
        )

    async def _post(self, frame: bytes, out: _Out, *, again: bool = False) -> bool:
        """POST one frame and take its answer. True when the server refused the request unrun because its session
        ended (404), for the first time (``again``: this is the second): it may be sent once more."""
        headers = self._post_headers(out)
        try:
            async with self._request("POST", headers, frame) as response:
                return await self._answer(response, out, headers.get("Mcp-Session-Id"), again)
        except AuthorizationError as exc:  # from the ``auth`` of the httpx client (jsonrpc_mcp.auth.OAuth)
            if not self._closed:
                await self._fail(out, exc)
        except Exception as exc:
            if not self._closed:
                logger.debug("POST failed: %r", exc)
                await self._fail(out, self._request_failure(exc))
        finally:
            self._posts.release()
        return False

    async def _answer(self, response: httpx.Response, out: _Out, sent_in: str | None, again: bool) -> bool:
        """Take the answer to a POST (``sent_in``: the session id it named); True: see :meth:`_post`."""
        status = response.status_code
        sid = response.headers.get("mcp-session-id")
        if out.ident is not None and out.ident == self._init_id and status == 200:
            if sid and not _SESSION_ID.fullmatch(sid.strip()):  # (it would be sent back with every request)
                await self._fail(out, "the server's Mcp-Session-Id is not visible ASCII (0x21 to 0x7E), as it must be")
                return False
            if sid:
                self.session_id = sid.strip()
            self._lost = None  # a session again (a new one, when the server ended the last)
        if status in (202, 204):
            if out.kind == "request":
                await self._fail(out, f"the server answered the request with HTTP {status} and no response")
            elif out.method == "notifications/initialized":
                self._open_get_stream()
            return False
        if 300 <= status < 400:
            location = response.headers.get("location", "")
            await self._fail(
                out,
                f"the server answered HTTP {status} (to {location!r}), a redirect not followed: a POST follows only "
                f"307 and 308, to the same origin, at most {_MAX_REDIRECTS} in a row",
            )
            return False
        if status == 404 and sent_in is not None and out.version is None:
            self._session_lost(sent_in)
            if out.kind == "request" and not again and self.restart_session is not None:
                return True
            await self._fail(out, SessionExpired(_NO_RESTART))
            return False
        content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if 400 <= status < 500 and self.session_id is None and out.kind == "request":
            self.refused_status = status
        if status >= 400:
            body, _ = await read_limited(response, _MAX_ERROR_BODY)
            if content_type == "application/json" and out.ident is not None and _response_id(body) == out.ident:
                await self._deliver(body)  # a JSON-RPC error for our request (e.g. -32601 with HTTP 404)
            else:
                await self._fail(
                    out, f"the server answered HTTP {status}{_reason(body, content_type)}{_hint(self.url, status)}"
                )
            return False
        if content_type == "text/event-stream" and out.kind != "request":
            # The spec wants 202 and no body for a notification or a response. A stream there would be read with no
            # end in sight, holding one of the concurrent POSTs (and the handshake, for notifications/initialized).
            logger.warning(
                "the server answered %s with an event stream, where 202 is due: not read", out.method or "a response"
            )
        elif content_type == "text/event-stream":
            await self._read_post_stream(response, out, sent_in)
        elif content_type == "application/json":
            body, whole = await read_limited(response, self.max_event)
            if not whole:
                await self._fail(out, f"the server's answer exceeds {self.max_event} bytes (max_event)")
            elif out.kind == "request" or body.strip():
                await self._deliver(body)
        elif out.kind == "request":
            await self._fail(out, f"unexpected content type {content_type or 'none'!r} in the answer")
        return False

    def _request_failure(self, exc: Exception) -> Exception:
        """What the caller of a request whose HTTP exchange failed is told: :class:`ServerUnreachable` naming the
        host and the reason when it could not connect, else :class:`ConnectionClosed` naming the kind of failure."""
        httpx = _httpx()
        plain = self.url.lower().startswith("http:")
        # A TLS server that reads a plain request closes the connection, or resets it, before any answer.
        closed = isinstance(exc, httpx.RemoteProtocolError) and "without sending a response" in str(exc)
        reset = isinstance(exc, httpx.ReadError) and "reset by peer" in str(exc)
        if plain and (closed or reset):
            return ConnectionClosed(
                "the server closed the connection without an HTTP answer (a server that speaks TLS? try https://)"
            )
        if not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            return ConnectionClosed(f"HTTP request failed: {type(exc).__name__}")
        self.unreachable = http_connect_failure(exc, self.url)
        return ServerUnreachable(self.unreachable)

    async def _fail(self, out: _Out, error: Exception | str) -> None:
        """End the request ``out`` with ``error``, raised to its caller; for a notification or an answer, a log line.
        A message is an answer of the server's that is not one (an error status without a JSON-RPC error, a
        redirect not followed, a body too large...): an :class:`RpcError` saying it (code -32000, ``local``:
        :func:`~jsonrpc_mcp.errors.local_failure`), which is no :class:`ConnectionClosed` (the server is there: the
        era fallback may try the handshake after it). A stream no dispatcher reads gets the error as an error
        response (code -32000 unless the error has its own)."""
        if isinstance(error, str):
            error = local_failure(error)
        message = error.message if isinstance(error, RpcError) else str(error)
        if out.kind != "request" or out.ident is None:
            logger.warning("%s (%s)", message, out.method or "response")
        elif self.fail_request is not None:
            self.fail_request(out.ident, error)
        else:
            code, data = (error.code, error.data) if isinstance(error, RpcError) else (codes.CONNECTION_CLOSED, None)
            await self._deliver(encode_error(out.ident, code, message, data))

    async def _deliver(self, frame: bytes) -> None:
        if self._init_id is not None and _response_id(frame) == self._init_id:
            self._sniff_version(frame)
        try:
            await self._in_send.send(frame)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("dropping a frame that arrived after the stream closed")

    def _sniff_version(self, frame: bytes) -> None:
        try:
            result = msgspec.json.decode(frame).get("result")
        except (msgspec.DecodeError, AttributeError):
            return
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
            self.protocol_version = result["protocolVersion"]

    @asynccontextmanager
    async def _request(
        self, method: str, headers: Mapping[str, str], content: bytes | None = None
    ) -> AsyncIterator[httpx.Response]:
        """An HTTP request to the endpoint, following the redirects that keep its method and body (any, for a GET)
        within the endpoint's origin: the session id and the caller's headers never go to another one."""
        url = self.url
        for hop in range(_MAX_REDIRECTS + 1):
            auth = self.auth if self.auth is not None else _httpx().USE_CLIENT_DEFAULT
            async with self.http.stream(method, url, headers=headers, content=content, auth=auth) as response:
                target = self._redirect(method, response) if hop < _MAX_REDIRECTS else None
                if target is None:
                    yield response
                    return
            url = target

    def _redirect(self, method: str, response: httpx.Response) -> str | None:
        """Where ``response`` redirects a request to (None: it is not a redirect to follow). A permanent redirect
        moves the endpoint: later requests go straight to its target."""
        status = response.status_code
        location = response.headers.get("location")
        if status not in _FOLLOWED.get(method, ()) or not location:
            return None
        origin = response.url
        try:
            target = origin.join(location)
        except _httpx().InvalidURL:  # reported like any redirect not followed
            return None
        if (target.scheme, target.host, target.port) != (origin.scheme, origin.host, origin.port):
            logger.warning("not following a redirect of the MCP endpoint to another origin: %s", target)
            return None
        if status in (301, 308):
            self.url = str(target)
        elif not self._redirect_noted:
            self._redirect_noted = True
            logger.info(
                "the MCP endpoint %s redirects (HTTP %d) to %s: using that URL saves a round trip",
                origin,
                status,
                target,
            )
        return str(target)

    # --- SSE -------------------------------------------------------------------------------------------------

    async def _read_post_stream(self, response: httpx.Response, out: _Out, sid: str | None) -> None:
        """Read the SSE answer to a POST made in the session ``sid``, resuming the stream when it drops."""
        parser = SseParser(self.max_event)
        want = out.ident if out.kind == "request" else None
        got = await self._pump(response, parser, want)
        if got or want is None:
            return
        attempts = 0
        while parser.last_event_id is not None and sid is not None and out.version is None:
            if attempts >= self.max_reconnects or self._closed:
                break
            if sid != self.session_id:  # (the session ended meanwhile: resuming would be refused)
                await self._fail(out, SessionExpired(_ENDED))
                return
            attempts += 1
            await anyio.sleep(self._retry_delay(parser))
            before = parser.last_event_id
            headers = {**self._session_headers(sid), "Accept": "text/event-stream", "Last-Event-ID": before}
            try:
                async with self._request("GET", headers) as resumed:
                    if resumed.status_code == 404:  # (the request may have run: it is not sent again)
                        self._session_lost(sid)
                        await self._fail(out, SessionExpired(_ENDED))
                        return
                    kind = resumed.headers.get("content-type", "").partition(";")[0].strip().lower()
                    if resumed.status_code != 200 or kind != "text/event-stream":
                        break
                    if await self._pump(resumed, parser, want):
                        return
            except Exception as exc:
                logger.debug("resuming an SSE stream failed: %r", exc)
            if parser.last_event_id != before:
                attempts = 0
        await self._fail(out, ConnectionClosed("the server's SSE stream ended before the response arrived"))

    async def _pump(self, response: httpx.Response, parser: SseParser, want: RequestId | None) -> bool:
        """Deliver the frames of an SSE response; True once the response to ``want`` arrived."""
        got = False
        try:
            async for chunk in response.aiter_bytes():
                for event in parser.feed(chunk):
                    if not event.data.strip() or event.event != "message":
                        continue
                    if want is not None and _response_id(event.data) == want:
                        got = True
                    await self._deliver(event.data)
                if got:
                    return True
        except SseTooLarge as exc:
            logger.warning("closing an SSE stream: %s", exc)
        except Exception as exc:
            logger.debug("an SSE stream broke: %r", exc)
        return got

    def _retry_delay(self, parser: SseParser) -> float:
        """Seconds to wait before resuming a stream: the server's ``retry`` (else ``default_retry_ms``), at most
        an hour (a ``retry`` of a hundred digits is no reason to wait for ever, or to fail converting it)."""
        retry_ms = parser.retry_ms if parser.retry_ms is not None else self.default_retry_ms
        return min(retry_ms, _MAX_RETRY_MS) / 1000

    def _open_get_stream(self) -> None:
        if self._get_started or self.session_id is None or self._closed:
            return
        self._get_started = True
        self._tg.start_soon(self._get_stream, self.session_id, self._get_answered)

    async def _get_stream(self, sid: str, answered: anyio.Event) -> None:
        """The standalone GET stream of the session ``sid``: server messages unrelated to our requests; resumed
        when it drops, for as long as that session lasts (a new session opens its own)."""
        try:
            await self._run_get_stream(sid, answered)
        finally:
            answered.set()

    async def _run_get_stream(self, sid: str, answered: anyio.Event) -> None:
        parser = SseParser(self.max_event)
        failures = 0
        while not self._closed and self.session_id == sid and failures <= self.max_reconnects:
            headers = {**self._session_headers(sid), "Accept": "text/event-stream"}
            if parser.last_event_id is not None:
                headers["Last-Event-ID"] = parser.last_event_id
            before = parser.last_event_id
            try:
                async with self._request("GET", headers) as response:
                    answered.set()
                    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
                    if response.status_code == 404:
                        self._session_lost(sid)
                        return
                    if response.status_code != 200 or kind != "text/event-stream":
                        logger.debug("no standalone GET stream (HTTP %d)", response.status_code)
                        return
                    await self._pump(response, parser, None)
            except AuthorizationError as exc:
                logger.warning("no standalone GET stream: %s", exc.message)
                return
            except Exception as exc:
                logger.debug("the GET stream broke: %r", exc)
            answered.set()  # a first attempt that failed does not hold the handshake either
            failures = 0 if parser.last_event_id != before else failures + 1
            await anyio.sleep(self._retry_delay(parser))


_HTML_TITLE: Final = re.compile(rb"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)


def _hint(url: str, status: int) -> str:
    """What to try after an HTTP error with no JSON-RPC answer: a 404 most often means a wrong path."""
    if status != 404:
        return ""
    path = urlsplit(url).path or "/"
    usual = "" if path.rstrip("/") == "/mcp" else "; the endpoint is usually /mcp"
    return f" (no MCP endpoint at {path}{usual})"


def _reason(body: bytes, content_type: str) -> str:
    """A short reason from an error body: the JSON-RPC error message, the title of an HTML page (a proxy's "502 Bad
    Gateway"), or the first line of text; printable characters only, at most 200 of them."""
    text = ""
    if content_type == "application/json":
        try:
            error = msgspec.json.decode(body).get("error")
        except (msgspec.DecodeError, AttributeError):
            error = None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            text = error["message"]
    elif content_type in ("text/html", "application/xhtml+xml"):
        title = _HTML_TITLE.search(body)
        text = html.unescape(title.group(1).decode("utf-8", "replace")) if title else ""
    elif content_type.startswith("text/"):
        lines = body.decode("utf-8", "replace").strip().splitlines()
        text = lines[0] if lines else ""
    shown = " ".join("".join(c if c.isprintable() else " " for c in text).split())[:200]
    return f": {shown}" if shown else ""


def _check_timeouts(timeout: float, sse_read_timeout: float | None) -> None:
    """Refuse a timeout that is not a positive number of seconds (``sse_read_timeout`` may be ``None``: no limit),
    naming it: with 0 nothing would ever be answered."""
    for name, seconds in (("timeout", timeout), ("sse_read_timeout", sse_read_timeout)):
        if seconds is not None and (
            isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0
        ):
            raise ValueError(f"{name} must be a positive number of seconds, not {seconds!r}")


def _new_http_client(url: str, timeout: float, sse_read_timeout: float | None) -> httpx.AsyncClient:
    """The httpx client of a connection to ``url``: ``timeout`` for connecting, writing and JSON answers,
    ``sse_read_timeout`` for the silence of a stream, redirects left to the caller. A plain ``http://`` URL never
    uses TLS (redirects are followed within its origin only), so the CA bundle is not loaded for it."""
    lib = _httpx()
    tls = url.lower().startswith("https:")
    client: httpx.AsyncClient = lib.AsyncClient(
        timeout=lib.Timeout(timeout, read=sse_read_timeout), follow_redirects=False, verify=tls
    )
    return client


@asynccontextmanager
async def connect_http(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    sse_read_timeout: float | None = 300.0,
    max_reconnects: int = 3,
    auth: Any = None,
    http_client: httpx.AsyncClient | None = None,
    **stream_options: Any,
) -> AsyncIterator[HttpClientStream]:
    """A :class:`HttpClientStream` to the MCP endpoint ``url``; the session is DELETEd on exit. A ``url`` that is
    not ``http://`` or ``https://`` is a :class:`ValueError` saying so.

    :param headers: sent with every HTTP request (e.g. ``Authorization``).
    :param timeout: connect, write and pool timeouts (seconds), and the read timeout of JSON answers.
    :param sse_read_timeout: the longest silence tolerated on an SSE stream (``None``: no limit).
    :param max_reconnects: resumption attempts of a dropped SSE stream before its request fails.
    :param auth: an ``httpx.Auth`` for every request to the endpoint (:class:`jsonrpc_mcp.auth.OAuth` authorizes by
        itself when the server answers 401); used with ``http_client`` too.
    :param http_client: an ``httpx.AsyncClient`` of your own (its settings are used as they are, it is not closed).
    :param stream_options: go to :class:`HttpClientStream`: ``get_stream_wait`` (how long the handshake waits for
        the server to answer the standalone GET stream, seconds), ``default_retry_ms``, ``max_event`` (the largest
        JSON answer or SSE event read, bytes; 16 MiB), ``max_concurrent_posts`` (64)…
    """
    check_http_url(url)
    _check_timeouts(timeout, sse_read_timeout)
    redact_http_logs()
    if isinstance(max_reconnects, bool) or not isinstance(max_reconnects, int) or max_reconnects < 0:
        raise ValueError(f"max_reconnects must be a whole number, zero or more, not {max_reconnects!r}")
    owned = http_client is None
    client = http_client if http_client is not None else _new_http_client(url, timeout, sse_read_timeout)
    try:
        with unwrap_group():
            async with anyio.create_task_group() as tg:
                stream = HttpClientStream(
                    client, url, tg, headers=headers, max_reconnects=max_reconnects, auth=auth, **stream_options
                )
                try:
                    yield stream
                finally:
                    with anyio.CancelScope(shield=True):
                        await stream.aclose()
                    tg.cancel_scope.cancel()
    finally:
        if owned:
            with anyio.CancelScope(shield=True):
                await client.aclose()
