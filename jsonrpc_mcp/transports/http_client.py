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
delay (a bounded number of times). A 404 on a known session means the server ended it: the pending request
fails with a clear error and the stream ends. Closing sends ``DELETE``.

Redirects of the endpoint are followed within its origin, at most five in a row: 307 and 308 by every request
(a 308 moves the endpoint: later requests go straight to its target), 301, 302 and 303 by a GET only (they
would turn a POST into a GET). Any other redirect fails the request with an error naming it.

Stateless era (a request whose ``_meta`` names the protocol version): no session; the ``MCP-Protocol-Version``,
``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` headers mirror the body (``tool_headers`` is filled by
:meth:`Client.list_tools <jsonrpc_mcp.Client.list_tools>`).

Transport failures never pass silently: a request whose HTTP exchange fails gets an error response (code
-32000, made here, never sent) so its caller does not wait for its timeout. A JSON answer, like an SSE event, is
read up to ``max_event`` bytes (16 MiB, the frame limit of the other transports): past that the request fails
saying so, and nothing more of the body is read. A request given up (timed out or cancelled by its caller) closes
its response stream, so a server that never answers holds none of the concurrent POSTs.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import anyio
import anyio.abc
import msgspec
from msgspec import UNSET

from ..errors import AuthorizationError, MissingExtra, RpcError
from ..jsonrpc import codes
from ..jsonrpc.streams import MessageStream, Network, Outgoing
from ..jsonrpc.wire import RequestId, decode_frame, encode_error, is_batch
from ..mcp._groups import unwrap_group
from ..mcp.headers import param_headers, standard_headers
from ..mcp.versions import META_PROTOCOL_VERSION
from ._sse import SseParser, SseTooLarge
from .connect_errors import check_http_url, http_connect_failure

if TYPE_CHECKING:
    import httpx

__all__ = ("HttpClientStream", "connect_http")

logger = logging.getLogger(__name__)

_PV_NEEDLE: Final = META_PROTOCOL_VERSION.encode()
_ACCEPT_BOTH: Final = "application/json, text/event-stream"
_MAX_ERROR_BODY: Final = 64 * 1024
_LOST: Final = "the server ended this MCP session (HTTP 404); connect again"
#: The redirects followed, by method: those that keep the method (and the body) and, for GET, any.
_FOLLOWED: Final = {"POST": (307, 308), "DELETE": (307, 308), "GET": (301, 302, 303, 307, 308)}
_MAX_REDIRECTS: Final = 5
_MAX_RETRY_MS: Final = 3_600_000
_SESSION_ID: Final = re.compile(r"[\x21-\x7e]+")


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise MissingExtra(
            "the Streamable HTTP client needs httpx: install the http extra (pip install 'jsonrpc-mcp[http]')"
        ) from None
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
        self._get_answered = anyio.Event()  # the standalone GET stream has its answer (or will never have one)
        self._redirect_noted = False
        self._closed = False
        self._lost: str | None = None  # why the session is gone (HTTP 404): every request fails with it
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
        if out.method == "initialize" and out.version is None:
            self._init_id = out.ident
        if self._lost is not None and out.version is None:
            await self._fail(out, self._lost)
            return
        await self._posts.acquire()
        if out.method == "notifications/initialized" and out.version is None:
            # Sent inline, and the GET stream it opens is answered before the handshake ends: a server may
            # send on that stream what it has for us as soon as we make our next request.
            await self._post(bytes(frame), out)
            if self._get_started:
                with anyio.move_on_after(self.get_stream_wait):
                    await self._get_answered.wait()
            return
        if out.kind == "request" and out.ident is not None:
            scope = anyio.CancelScope()
            self._open_posts[out.ident] = (scope, out.version is not None)
            self._tg.start_soon(self._post_request, bytes(frame), out, scope)
            return
        self._tg.start_soon(self._post, bytes(frame), out)

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

    async def _post_request(self, frame: bytes, out: _Out, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                await self._post(frame, out)
        finally:
            entry = self._open_posts.get(out.ident)  # type: ignore[arg-type]
            if entry is not None and entry[0] is scope:
                del self._open_posts[out.ident]  # type: ignore[arg-type]

    async def aclose(self) -> None:
        """End the session (DELETE, when there is one) and stop delivering frames."""
        if self._closed:
            return
        self._closed = True
        sid = self.session_id
        if sid is not None:
            with anyio.move_on_after(5, shield=True):
                try:
                    async with self._request("DELETE", self._session_headers()) as response:
                        if response.status_code not in (200, 202, 204, 404, 405):
                            logger.debug("DELETE of the session answered %d", response.status_code)
                except Exception as exc:
                    logger.debug("DELETE of the session failed: %s", exc)
        self._in_send.close()
        self._in.close()

    # --- sending ---------------------------------------------------------------------------------------------

    def _session_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def _post_headers(self, out: _Out) -> dict[str, str]:
        headers = {**self.headers, "Accept": _ACCEPT_BOTH, "Content-Type": "application/json"}
        if out.version is not None:
            headers["MCP-Protocol-Version"] = out.version
            if out.method is not None and out.kind == "request":
                headers.update(standard_headers(out.method, out.params))
                if out.method == "tools/call" and out.params is not None:
                    name = out.params.get("name")
                    annotations = self.tool_headers.get(name) if isinstance(name, str) else None
                    if annotations:
                        arguments = out.params.get("arguments")
                        headers.update(param_headers(annotations, arguments if isinstance(arguments, dict) else None))
            return headers
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None and out.method != "initialize":
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    async def _post(self, frame: bytes, out: _Out) -> None:
        try:
            async with self._request("POST", self._post_headers(out), frame) as response:
                await self._answer(response, out)
        except AuthorizationError as exc:  # from the ``auth`` of the httpx client (jsonrpc_mcp.auth.OAuth)
            if not self._closed:
                await self._fail(out, exc.message, exc)
        except Exception as exc:
            if not self._closed:
                logger.debug("POST failed: %r", exc)
                await self._fail(out, self._request_failure(exc))
        finally:
            self._posts.release()

    async def _answer(self, response: httpx.Response, out: _Out) -> None:
        status = response.status_code
        sid = response.headers.get("mcp-session-id")
        if out.ident is not None and out.ident == self._init_id and sid and status == 200:
            if not _SESSION_ID.fullmatch(sid.strip()):  # (it would be sent back with every request)
                await self._fail(out, "the server's Mcp-Session-Id is not visible ASCII (0x21 to 0x7E), as it must be")
                return
            self.session_id = sid.strip()
        if status in (202, 204):
            if out.kind == "request":
                await self._fail(out, f"the server answered the request with HTTP {status} and no response")
            elif out.method == "notifications/initialized":
                self._open_get_stream()
            return
        if 300 <= status < 400:
            location = response.headers.get("location", "")
            await self._fail(
                out,
                f"the server answered HTTP {status} (to {location!r}), a redirect not followed: a POST follows only "
                f"307 and 308, to the same origin, at most {_MAX_REDIRECTS} in a row",
            )
            return
        if status == 404 and self.session_id is not None and out.version is None:
            self._session_lost()
            await self._fail(out, _LOST)
            return
        content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if 400 <= status < 500 and self.session_id is None and out.kind == "request":
            self.refused_status = status
        if status >= 400:
            body = await _read_limited(response, _MAX_ERROR_BODY)
            if content_type == "application/json" and out.ident is not None and _response_id(body) == out.ident:
                await self._deliver(body)  # a JSON-RPC error for our request (e.g. -32601 with HTTP 404)
            else:
                await self._fail(out, f"the server answered HTTP {status}{_reason(body, content_type)}")
            return
        if content_type == "text/event-stream" and out.kind != "request":
            # The spec wants 202 and no body for a notification or a response. A stream there would be read with no
            # end in sight, holding one of the concurrent POSTs (and the handshake, for notifications/initialized).
            logger.warning(
                "the server answered %s with an event stream, where 202 is due: not read", out.method or "a response"
            )
        elif content_type == "text/event-stream":
            await self._read_post_stream(response, out)
        elif content_type == "application/json":
            body = await _read_limited(response, self.max_event + 1)
            if len(body) > self.max_event:
                await self._fail(out, f"the server's answer exceeds {self.max_event} bytes (max_event)")
                return
            if out.kind != "request" and not body.strip():
                return
            await self._deliver(body)
        elif out.kind == "request":
            await self._fail(out, f"unexpected content type {content_type or 'none'!r} in the answer")

    def _request_failure(self, exc: Exception) -> str:
        """What the caller of a request whose HTTP exchange failed is told: why the server could not be reached
        (naming the host and the reason), or the kind of failure."""
        httpx = _httpx()
        if not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            return f"HTTP request failed: {type(exc).__name__}"
        self.unreachable = http_connect_failure(exc, self.url)
        return self.unreachable

    async def _fail(self, out: _Out, message: str, error: RpcError | None = None) -> None:
        if out.kind == "request" and out.ident is not None:
            code, data = (error.code, error.data) if error is not None else (codes.CONNECTION_CLOSED, None)
            await self._deliver(encode_error(out.ident, code, message, data))
        else:
            logger.warning("%s (%s)", message, out.method or "response")

    def _session_lost(self) -> None:
        if self._lost is None:
            logger.warning("the server ended the MCP session %s (HTTP 404)", self.session_id)
        self._lost = _LOST
        self.session_id = None  # nothing to DELETE any more

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

    async def _read_post_stream(self, response: httpx.Response, out: _Out) -> None:
        parser = SseParser(self.max_event)
        want = out.ident if out.kind == "request" else None
        got = await self._pump(response, parser, want)
        if got or want is None:
            return
        attempts = 0
        while parser.last_event_id is not None and self.session_id is not None and out.version is None:
            if attempts >= self.max_reconnects or self._closed:
                break
            attempts += 1
            await anyio.sleep(self._retry_delay(parser))
            before = parser.last_event_id
            headers = {**self._session_headers(), "Accept": "text/event-stream", "Last-Event-ID": before}
            try:
                async with self._request("GET", headers) as resumed:
                    if resumed.status_code == 404:
                        self._session_lost()
                        await self._fail(out, _LOST)
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
        await self._fail(out, "the server's SSE stream ended before the response arrived")

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
        self._tg.start_soon(self._get_stream)

    async def _get_stream(self) -> None:
        """The standalone GET stream: server messages unrelated to our requests; resumed when it drops."""
        try:
            await self._run_get_stream()
        finally:
            self._get_answered.set()

    async def _run_get_stream(self) -> None:
        parser = SseParser(self.max_event)
        failures = 0
        while not self._closed and self.session_id is not None and failures <= self.max_reconnects:
            headers = {**self._session_headers(), "Accept": "text/event-stream"}
            if parser.last_event_id is not None:
                headers["Last-Event-ID"] = parser.last_event_id
            before = parser.last_event_id
            try:
                async with self._request("GET", headers) as response:
                    self._get_answered.set()
                    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
                    if response.status_code == 404:
                        self._session_lost()
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
            self._get_answered.set()  # a first attempt that failed does not hold the handshake either
            failures = 0 if parser.last_event_id != before else failures + 1
            await anyio.sleep(self._retry_delay(parser))


async def _read_limited(response: httpx.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


_HTML_TITLE: Final = re.compile(rb"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)


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
    for name, seconds in (("timeout", timeout), ("sse_read_timeout", sse_read_timeout)):
        if seconds is not None and (
            isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0
        ):
            raise ValueError(f"{name} must be a positive number of seconds, not {seconds!r}")  # (0: nothing answers)
    if isinstance(max_reconnects, bool) or not isinstance(max_reconnects, int) or max_reconnects < 0:
        raise ValueError(f"max_reconnects must be a whole number, zero or more, not {max_reconnects!r}")
    httpx = _httpx()
    owned = http_client is None
    client = http_client
    if client is None:
        # A plain http:// endpoint never uses TLS (redirects are followed within its origin only), so skip loading
        # the CA bundle.
        tls = url.lower().startswith("https:")
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, read=sse_read_timeout), follow_redirects=False, verify=tls
        )
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
