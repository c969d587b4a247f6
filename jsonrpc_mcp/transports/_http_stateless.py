"""The stateless era (2026-07-28) on Streamable HTTP: one POST, one request, served on its own (L6 helper).

The app reads the request (:func:`~jsonrpc_mcp.mcp.eras.read_call`: its params decoded once, its era decided)
and checks, in the order of SPEC_MAP §2.6, ``params._meta`` (:func:`~jsonrpc_mcp.mcp.eras.meta_problem`, -32602)
and then the mirrored headers (:func:`~jsonrpc_mcp.mcp.headers.mirrored_header_problem`):
``MCP-Protocol-Version`` (= the ``_meta`` version), ``Mcp-Method`` (= ``method``), ``Mcp-Name`` (= ``params.name``
/ ``params.uri`` / ``params.taskId``) and the ``Mcp-Param-*`` headers of the called tool's ``x-mcp-header``
properties: missing, malformed or different → -32020, HTTP 400.

:func:`serve_alone` then hands the request to a fresh session's dispatcher, whose ``answer_request`` checks the
rest (the version -32022, the method -32601 with HTTP 404, ...). An answer ready at once is written as JSON; a
handler that has to wait runs in a task of this POST, and its answer is JSON, or SSE when notifications come
first (never requests: the stateless era has none). The client closing the connection cancels it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from ..jsonrpc.concurrency import open_handler_tasks
from ..jsonrpc.dispatch import Dispatcher, Pending
from ..jsonrpc.streams import NOTIFICATION, RESPONSE, MessageStream, Outgoing
from ..jsonrpc.wire import RequestId
from ..mcp.eras import Call
from ..mcp.session import ServerApp, ServerSession
from ._http_io import HTTP_NETWORK, Headers, Receive, Send, answer_status, send_bytes
from ._http_outlet import FINAL, OTHER, Outlet, ResponseFormat, respond

__all__ = ("serve_alone", "status_of")

logger = logging.getLogger(__name__)


def status_of(frame: bytes) -> int:
    """The HTTP status of a stateless JSON answer (:func:`._http_io.answer_status`: 404 for -32601, 400 for the
    request-level errors, else 200)."""
    return answer_status(frame, stateless=True)


class _OneRequestStream(MessageStream):
    """The session's stream for one stateless request: its notifications and response go to one outlet."""

    gathers_replies = False
    network = HTTP_NETWORK

    def __init__(self, request_id: RequestId) -> None:
        self.request_id = request_id
        self.outlet = Outlet(None)

    async def send(self, frames: Sequence[Outgoing]) -> None:
        for out in frames:
            if out.related != self.request_id:
                logger.debug("dropping a stateless-era frame unrelated to its request")
            elif out.kind == RESPONSE:
                await self.outlet.put(out.frame, FINAL)
            elif out.kind == NOTIFICATION:
                await self.outlet.put(out.frame, OTHER)
            else:
                logger.warning("a handler sent a request in the stateless era; it was dropped")

    def finished(self, request_id: RequestId) -> None:
        self.outlet.finish()

    async def aclose(self) -> None:
        self.outlet.finish()


async def serve_alone(
    server: ServerApp,
    call: Call,
    headers: Headers,
    receive: Receive,
    send: Send,
    fmt: ResponseFormat,
    *,
    handshake_version: str | None = None,
    detached: Callable[..., Awaitable[None]] | None = None,
) -> None:
    """Serve one request as this HTTP response (in the app's ``fmt``), by a session of its own; the client
    disconnecting cancels it.

    A stateless-era request (validated already); or, with ``handshake_version``, a handshake-era request of an app
    without sessions, served as if ``initialize`` had settled that version (``initialize`` itself is answered).
    ``detached(fn, *args)`` starts work that outlives the request (a task's) in the app's own tasks."""
    request = call.request
    stream = _OneRequestStream(request.id)
    dispatcher = Dispatcher(stream, max_in_flight=1, request_timeout=None, drain_timeout=0.0)
    session = ServerSession(server, dispatcher)
    session.detached = detached
    if handshake_version is not None and request.method != "initialize":
        session.assume_initialized(handshake_version)
    answer = dispatcher.answer_request(request, call)
    if type(answer) is not Pending:
        session.close()
        await send_bytes(send, 200 if fmt.status_of is None else fmt.status_of(answer), answer)  # type: ignore[arg-type]
        return
    outlet = stream.outlet
    connection = outlet.connect()
    try:
        async with open_handler_tasks() as tasks:  # (leaving it cancels a handler still running, and waits)
            dispatcher.use_tasks(tasks)
            await respond(
                send,
                receive,
                outlet,
                connection,
                fmt,
                headers=[],
                waiting=True,
                until=headers.until,
                soon=not answer.on_worker_thread,  # (a plain handler's answer comes after a thread's hop)
            )
    finally:
        outlet.disconnect(connection)
        session.close()
