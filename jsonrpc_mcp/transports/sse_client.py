"""The 2024-11-05 HTTP+SSE transport, client side: a :class:`MessageStream` over httpx (L6; the ``http`` extra).

::

    async with Client.connect_sse("http://127.0.0.1:8000/sse") as client:   # this transport outright
        tools = await client.list_tools()

    async with Client.connect_http(url) as client:   # Streamable HTTP, falling back to this transport by itself
        ...

The client GETs the server's SSE URL and waits for the ``endpoint`` event, which names the URL it POSTs its
messages to (of the same origin: one that names another is refused, so a server cannot send our messages, and
their credentials, elsewhere). Everything the server sends comes as ``message`` events on that one stream; each
POST is answered 202 with no body. A request whose POST the server refuses fails at once with an error made here,
never sent (code -32000, ``local``: :func:`~jsonrpc_mcp.errors.local_failure`), so its caller does not wait for its
timeout. When the stream ends the session is over:
requests still waiting fail with :class:`~jsonrpc_mcp.errors.ConnectionClosed`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urljoin, urlsplit

import anyio
import anyio.abc

from ..errors import ConnectionClosed, ServerUnreachable, local_failure
from ..jsonrpc import codes
from ..jsonrpc.streams import MessageStream, Outgoing
from ..jsonrpc.wire import encode_error
from ..mcp.groups import unwrap_group
from .connect_errors import check_http_url, http_connect_failure
from .http_bodies import read_limited
from .http_client import _check_timeouts, _httpx, _inspect, _network, _new_http_client, _reason
from .http_log_redaction import redact_http_logs
from .memory import receive_frames
from .sse import SseParser, SseTooLarge

if TYPE_CHECKING:
    import httpx

__all__ = ("SseClientStream", "connect_sse")

logger = logging.getLogger(__name__)

_MAX_ERROR_BODY: Final = 64 * 1024


class SseClientStream(MessageStream):
    """The client's end of an HTTP+SSE session. Create it with :func:`connect_sse`."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        endpoint: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: httpx.Auth | None = None,
        buffer: int = 256,
    ) -> None:
        self.http = http
        #: where messages are POSTed: the URL the server's ``endpoint`` event named
        self.endpoint = endpoint
        self.headers = {**(headers or {}), "Content-Type": "application/json"}
        self.auth = auth
        self.network = _network(endpoint)
        self.inbox, self._inbox = anyio.create_memory_object_stream[bytes](buffer)

    async def receive(self) -> Sequence[bytes]:
        return await receive_frames(self._inbox)

    async def send(self, frames: Sequence[Outgoing]) -> None:
        for out in frames:  # (one after the other: the server reads them in the order they were written)
            await self._post(out.frame)

    async def _post(self, frame: bytes) -> None:
        try:
            response = await self.http.post(self.endpoint, content=frame, headers=self.headers, auth=self._auth())
        except Exception as exc:
            logger.debug("POST failed: %r", exc)
            await self._refused(frame, f"HTTP request failed: {type(exc).__name__}")
            return
        if 200 <= response.status_code < 300:
            return
        body = response.content[:_MAX_ERROR_BODY]
        content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        await self._refused(frame, f"the server answered HTTP {response.status_code}{_reason(body, content_type)}")

    async def _refused(self, frame: bytes, message: str) -> None:
        out = _inspect(frame)
        if out.kind == "request" and out.ident is not None and self.fail_request is not None:
            self.fail_request(out.ident, local_failure(message))
        elif out.kind == "request" and out.ident is not None:
            try:  # (no dispatcher reads this stream: its reader gets the error as an error response)
                self.inbox.send_nowait(encode_error(out.ident, codes.CONNECTION_CLOSED, message))
            except (anyio.WouldBlock, anyio.ClosedResourceError):
                pass  # (the session is over, or its reader full: the request fails when the stream ends)
        else:
            logger.warning("%s (%s)", message, out.method or "response")

    def _auth(self) -> Any:
        return self.auth if self.auth is not None else self.http.auth

    async def aclose(self) -> None:
        self.inbox.close()
        self._inbox.close()


async def _read_events(chunks: AsyncIterator[bytes], parser: SseParser, stream: SseClientStream) -> None:
    """Hand each ``message`` event of the stream to ``stream``; its end (or a fault) ends the session."""
    try:
        async for chunk in chunks:
            for event in parser.feed(chunk):
                if event.event == "message" and event.data:
                    await stream.inbox.send(event.data)
    except SseTooLarge as exc:
        logger.warning("the server's event stream sent an event over the limit: %s", exc)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # (closed here)
    except Exception as exc:
        logger.debug("the event stream failed: %r", exc)
    finally:
        stream.inbox.close()


async def _endpoint(chunks: AsyncIterator[bytes], parser: SseParser, url: str) -> tuple[str, list[bytes]]:
    """The URL of the stream's ``endpoint`` event (and the messages that came with it in the same chunk)."""
    async for chunk in chunks:
        early: list[bytes] = []
        found: str | None = None
        for event in parser.feed(chunk):
            if event.event == "endpoint" and found is None:
                found = event.data.decode("utf-8", "replace").strip()
            elif event.event == "message" and event.data and found is not None:
                early.append(event.data)
        if found is not None:
            target = urljoin(url, found)
            if _origin(target) != _origin(url):
                raise ConnectionClosed(
                    f"the server's endpoint event names another origin ({_origin(target)}): not followed"
                )
            return target, early
    raise ConnectionClosed("the server's event stream ended before its endpoint event")


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.hostname, parts.port or (443 if parts.scheme.lower() == "https" else 80)


@asynccontextmanager
async def connect_sse(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    sse_read_timeout: float | None = 300.0,
    auth: Any = None,
    http_client: httpx.AsyncClient | None = None,
    max_event: int = 16 * 1024 * 1024,
) -> AsyncIterator[SseClientStream]:
    """An :class:`SseClientStream` to the server's SSE URL (``http://host:port/sse``, say), once its ``endpoint``
    event has come (within ``timeout`` seconds). The arguments are :func:`~.http_client.connect_http`'s;
    ``max_event``: the largest event read (bytes)."""
    check_http_url(url)
    _check_timeouts(timeout, sse_read_timeout)
    redact_http_logs()  # (the endpoint's URL holds the session id)
    httpx = _httpx()
    owned = http_client is None
    client = http_client if http_client is not None else _new_http_client(url, timeout, sse_read_timeout)
    try:
        request = client.build_request("GET", url, headers={**(headers or {}), "Accept": "text/event-stream"})
        try:
            response = await client.send(request, stream=True, auth=auth if auth is not None else client.auth)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable(http_connect_failure(exc, url)) from None
        try:
            if response.status_code != 200:
                body, _ = await read_limited(response, _MAX_ERROR_BODY)
                content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
                raise ConnectionClosed(
                    f"the server answered HTTP {response.status_code}{_reason(body, content_type)} to the GET of "
                    "its event stream"
                )
            parser = SseParser(max_event)
            chunks = response.aiter_bytes()
            with anyio.move_on_after(timeout) as waited:
                endpoint, early = await _endpoint(chunks, parser, url)
            if waited.cancelled_caught:
                raise ConnectionClosed(f"the server sent no endpoint event within {timeout:g} seconds")
            stream = SseClientStream(client, endpoint, headers=headers, auth=auth)
            for frame in early:
                stream.inbox.send_nowait(frame)
            with unwrap_group():
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_read_events, chunks, parser, stream)
                    try:
                        yield stream
                    finally:
                        tg.cancel_scope.cancel()
                        await stream.aclose()
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
    finally:
        if owned:
            with anyio.CancelScope(shield=True):
                await client.aclose()
