"""2026-07-28 basic/index, "Error Codes": what this library emits from the range MCP reserves (the ids are in
conformance/spec/coverage/basic.toml), and the legacy sub-range -32000..-32019 it neither sends nor reads a meaning
into (conformance/spec/coverage/error-codes.toml; docs/spec-decisions.md, 103)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import pytest
from helpers import ROOT, PrincipalStream, RawPeer, raw_server, request_frame
from http_support import JSON_HEADERS, asgi_request, init_body, stateless_body, stateless_headers

from jsonrpc_mcp import Client, Context, Server, errors, middleware
from jsonrpc_mcp.errors import ResourceNotFound, RpcError, UrlElicitationRequired
from jsonrpc_mcp.jsonrpc import codes
from jsonrpc_mcp.jsonrpc.dispatch import Dispatcher, ErrorReply, Pending
from jsonrpc_mcp.jsonrpc.wire import Request
from jsonrpc_mcp.mcp import tasks
from jsonrpc_mcp.mcp.principal import AccessToken
from jsonrpc_mcp.mcp.task_store import MemoryTaskStore
from jsonrpc_mcp.transports import _http_io
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.memory import MemoryMessageStream

pytestmark = pytest.mark.anyio

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
#: The codes of -32020..-32099 the specification defines (-32042: 2025-11-25's URL elicitation required).
DEFINED = {
    -32020: "HEADER_MISMATCH",
    -32021: "MISSING_REQUIRED_CLIENT_CAPABILITY",
    -32022: "UNSUPPORTED_PROTOCOL_VERSION",
}


def finding_server() -> Server:
    server = Server("finds", "1")

    @server.resource("mem://notes/{name}")
    def note(name: str) -> str:
        raise ResourceNotFound(f"mem://notes/{name}")

    @server.method("custom/find", eras="both")
    def find(ctx: Context, params: Any) -> dict[str, Any]:
        raise ResourceNotFound("mem://elsewhere")

    return server


async def test_a_2026_07_28_request_never_gets_32002_whichever_handler_raised_it() -> None:
    """ "Implementations of this protocol version MUST NOT emit these codes: -32002 — resource not found (2025-11-25
    and earlier; replaced by -32602)": a resource function and a method of the application's own that raise
    ResourceNotFound answer a stateless request with -32602 and the URI; a handshake session keeps -32002."""
    async with raw_server(finding_server()) as peer:
        read = await peer.call(request_frame(1, "resources/read", {"uri": "mem://notes/a", "_meta": META}))
        custom = await peer.call(request_frame(2, "custom/find", {"_meta": META}))
    assert read["error"] == {"code": -32602, "message": "Resource not found", "data": {"uri": "mem://notes/a"}}
    assert custom["error"] == {"code": -32602, "message": "Resource not found", "data": {"uri": "mem://elsewhere"}}
    async with raw_server(finding_server(), version="2025-11-25") as peer:
        legacy = await peer.call(request_frame(3, "custom/find", {}))
    assert legacy["error"]["code"] == -32002


def test_the_mcp_sub_range_holds_the_specifications_codes_only() -> None:
    """ "-32020 to -32099 — reserved for the MCP specification ... Implementations MUST NOT emit any code from this
    sub-range that is not defined by this specification and MUST use defined codes only with their specified
    meanings": the library's codes of that range are the three 2026-07-28 defines (and 2025-11-25's -32042, raised
    only as its error class, which a 2026-07-28 request never answers with: below), and no other number of the range
    is written anywhere in its source."""
    ours = {value: name for name, value in vars(codes).items() if isinstance(value, int) and -32099 <= value <= -32020}
    assert ours == {**DEFINED, -32042: "URL_ELICITATION_REQUIRED"}
    literal = re.compile(r"(?<![\w.])-320([2-9]\d)(?!\d)")
    stray = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in (ROOT / "jsonrpc_mcp").rglob("*.py")
        for match in literal.finditer(path.read_text(encoding="utf-8"))
        if int(match.group(0)) not in (*DEFINED, -32042)
    ]
    assert stray == []
    raised = [
        path.relative_to(ROOT)
        for path in (ROOT / "jsonrpc_mcp").rglob("*.py")
        if "URL_ELICITATION_REQUIRED" in path.read_text(encoding="utf-8") and path.name != "codes.py"
    ]
    assert [str(path) for path in raised] == ["jsonrpc_mcp/errors.py"]  # (UrlElicitationRequired, and nothing else)


async def test_url_elicitation_required_is_never_32042_in_2026_07_28() -> None:
    """2026-07-28 defines no -32042: a handler raising ``UrlElicitationRequired`` answers a stateless request with
    an ``input_required`` result whose input requests are those URL-mode elicitations; 2025-11-25 keeps -32042."""
    server = Server("asks", "1")
    wanted = {"mode": "url", "elicitationId": "e1", "message": "Sign in", "url": "https://example.com/sign-in"}

    @server.tool()
    def sign_in() -> str:
        raise UrlElicitationRequired([wanted])

    call = {"name": "sign_in", "arguments": {}}
    async with raw_server(server) as peer:
        stateless = await peer.call(request_frame(1, "tools/call", {**call, "_meta": META}))
    assert "error" not in stateless, stateless
    result = stateless["result"]
    assert result["resultType"] == "input_required"
    assert result["inputRequests"] == {"e1": {"method": "elicitation/create", "params": wanted}}
    async with raw_server(server, version="2025-11-25") as peer:
        legacy = await peer.call(request_frame(2, "tools/call", call))
    assert legacy["error"]["code"] == -32042 and legacy["error"]["data"] == {"elicitations": [wanted]}


def legacy(code: int) -> bool:
    """A code of the legacy sub-range -32000..-32019."""
    return -32019 <= code <= -32000


def refusing_server() -> Server:
    """A rate-limited ``tools/list``, a scoped tool and a tool that meets the shared backend away (as the backend
    raises it)."""
    limiter = middleware.RateLimiter(rate=0.001, burst=1, methods=["tools/list"], clock=lambda: 0.0)
    server = Server("refuses", "1", middleware=[limiter])

    @server.tool(scopes=["notes:write"])
    def write_note(text: str) -> str:
        return f"wrote {text}"

    @server.tool()
    def shared() -> str:
        raise errors.Unavailable(3)

    return server


@asynccontextmanager
async def served(server: Server) -> AsyncIterator[tuple[PrincipalStream, RawPeer]]:
    """``server`` over a memory pair whose requests come from a principal with ``notes:read`` only."""
    send_a, receive_a = anyio.create_memory_object_stream[bytes](64)
    send_b, receive_b = anyio.create_memory_object_stream[bytes](64)
    async with send_a, receive_a, send_b, receive_b, anyio.create_task_group() as tg:
        theirs = PrincipalStream(send_a, receive_b)
        theirs.principal = AccessToken(subject="carol", client_id="c", scopes=frozenset({"notes:read"}))
        tg.start_soon(lambda: server.serve(theirs))
        yield theirs, RawPeer(MemoryMessageStream(send_b, receive_a))
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25", "2026-07-28"])
async def test_no_refusal_of_ours_uses_a_code_of_the_legacy_sub_range(version: str) -> None:
    """ "New codes MUST NOT be allocated in this sub-range, and new implementations SHOULD NOT use codes from this
    sub-range at all"; "New error codes for purposes not defined by this specification SHOULD be allocated outside
    the JSON-RPC reserved range": a rate limit, a missing scope and the shared backend away are refused with our own
    codes -31010, -31011 and -31012, outside -32768..-32000, in every revision (too many requests in flight: below)."""
    server = refusing_server()
    meta = {"_meta": {**META, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}
    extra = meta if version == "2026-07-28" else {}
    async with served(server) as (_, peer):
        if version != "2026-07-28":
            await peer.initialize(version)

        async def ask(ident: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
            return await peer.call(request_frame(ident, method, {**params, **extra}))

        assert "result" in await ask(1, "tools/list", {})
        limited = (await ask(2, "tools/list", {}))["error"]
        scope = (await ask(3, "tools/call", {"name": "write_note", "arguments": {"text": "x"}}))["error"]
        away = (await ask(4, "tools/call", {"name": "shared", "arguments": {}}))["error"]
    assert (limited["code"], limited["data"]) == (-31010, {"retryAfter": 1000})
    assert (scope["code"], scope["data"]) == (
        -31011,
        {"error": "insufficient_scope", "requiredScopes": ["notes:write"]},
    )
    assert (away["code"], away["data"]) == (-31012, {"retryAfter": 3})
    assert not any(-32768 <= error["code"] <= -32000 for error in (limited, scope, away))


def test_too_many_requests_in_flight_is_refused_outside_the_reserved_range() -> None:
    """The dispatcher's refusal of a request past ``max_in_flight`` (where a request is answered alone, as over
    Streamable HTTP; a stream's reader waits instead) is -31010, which that transport answers with 429."""

    async def hold() -> bytes:
        await anyio.sleep_forever()
        return b"{}"

    dispatcher = Dispatcher(cast(Any, None), lambda req, context: hold(), max_in_flight=1)
    assert type(dispatcher.answer_request(Request(1, "slow"))) is Pending
    busy = dispatcher.answer_request(Request(2, "more"))
    assert type(busy) is ErrorReply and busy.refused == "busy"
    assert json.loads(busy)["error"]["code"] == -31010
    assert _http_io.answer_status(busy, stateless=False) == 429
    dispatcher.close()


class AwayBackend:
    """A shared backend whose service cannot be reached: each command that would reach it is refused (as the Redis
    backend's are when Redis is away)."""

    async def publish(self, event: Any) -> None:
        raise errors.Unavailable(2)

    def state_keys(self) -> tuple[bytes, ...]:
        return (b"k" * 32,)

    async def claim(self, nonce: str, expires: float) -> bool:
        raise errors.Unavailable(2)

    def task_store(self) -> Any:
        return MemoryTaskStore()  # (these tests start no task)

    async def load_session(self, sid: str, ttl: float) -> bytes | None:
        raise errors.Unavailable(2)

    async def save_session(
        self, sid: str, record: bytes, ttl: float, *, changed: bool, most: int | None = None
    ) -> None:
        raise errors.Unavailable(2)

    async def end_session(self, sid: str) -> None:
        raise errors.Unavailable(2)

    async def run(self, deliver: Any, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await anyio.sleep_forever()

    async def aclose(self) -> None:
        pass


async def test_the_http_refusals_use_our_codes_with_their_statuses() -> None:
    """Over Streamable HTTP (the ASGI app, in this event loop): the shared backend away is 503 with ``Retry-After``
    and -31012; a rate limit in a 2026-07-28 request is 429 and -31010."""
    away = McpAsgiApp(Server("away", "1"), backend=AwayBackend())
    try:
        status, headers, body = await asgi_request(away, "POST", JSON_HEADERS, json.dumps(init_body()).encode())
    finally:
        await away.aclose()
    assert (status, headers["retry-after"]) == (503, "2")
    assert json.loads(body)["error"] == {
        "code": -31012,
        "message": "Service unavailable: retry in 2 s",
        "data": {"retryAfter": 2},
    }
    limited = McpAsgiApp(refusing_server())
    try:
        answers = [
            await asgi_request(
                limited, "POST", stateless_headers("tools/list"), json.dumps(stateless_body(n, "tools/list")).encode()
            )
            for n in (1, 2)
        ]
    finally:
        await limited.aclose()
    assert answers[0][0] == 200 and answers[1][0] == 429
    assert json.loads(answers[1][2])["error"]["code"] == -31010


def test_no_code_the_library_sends_is_of_the_legacy_sub_range() -> None:
    """The codes of every refusal of ours (those the tests above cannot reach in memory too: a full task quota, too
    many HTTP sessions) are outside -32768..-32000; the HTTP statuses stay with them (429, 403 by the HTTP policy
    before any JSON-RPC error, 503). In codes.py the legacy sub-range holds only -32002 (resource not found, which
    2026-07-28 still asks clients to accept), the codes earlier releases sent (read, never sent) and the local-only
    codes, and no other module writes a number of that sub-range but those."""
    ours = {codes.BUSY, codes.INSUFFICIENT_SCOPE, codes.UNAVAILABLE}
    assert ours == {-31010, -31011, -31012}
    refusals = (middleware.RateLimited, tasks.TooManyTasks, errors.InsufficientScope, errors.Unavailable)
    assert {kind.code for kind in refusals} == ours
    assert _http_io.HTTP_STATUS[codes.BUSY] == 429 and _http_io.HTTP_STATUS[codes.UNAVAILABLE] == 503
    assert not any(legacy(code) for code in _http_io.HTTP_STATUS)
    in_legacy = {name for name, value in vars(codes).items() if isinstance(value, int) and legacy(value)}
    assert in_legacy == {
        "RESOURCE_NOT_FOUND",
        "LEGACY_INSUFFICIENT_SCOPE",
        "LEGACY_UNAVAILABLE",
        "CONNECTION_CLOSED",
        "REQUEST_TIMEOUT",
        "AUTHORIZATION_FAILED",
    }
    literal = re.compile(r"(?<![\w.])-320[01]\d(?!\d)")
    stray = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in (ROOT / "jsonrpc_mcp").rglob("*.py")
        if path.name != "codes.py"
        for match in literal.finditer(path.read_text(encoding="utf-8"))
        if int(match.group(0)) not in (-32000, -32001, -32002, -32003)
    ]
    assert stray == []


def peer_error_server() -> Server:
    """A server that answers ``fail`` with the error it is told (a peer of another implementation, or an earlier
    release of this one)."""
    server = Server("others", "1")

    @server.tool()
    def fail(code: int, data: Any = None) -> str:
        raise RpcError("as the peer says it", data, code=code)

    return server


#: What a peer may send with codes of the legacy sub-range, with the data our own errors of those codes carried.
FROM_THE_PEER = {
    -32000: None,
    -32001: None,
    -32003: {"step": "token request", "reason": "theirs"},
    -32010: {"retryAfter": 2},
    -32011: {"error": "insufficient_scope", "requiredScopes": ["notes:write"]},
    -32012: {"retryAfter": 7},
}


async def test_a_2026_07_28_client_gives_no_meaning_to_the_legacy_sub_range_but_32002() -> None:
    """ "Apart from -32002 (see below), receivers MUST NOT assume any specific meaning for these codes": in a
    2026-07-28 session each of them is a plain RpcError with the code, message and data as they came, ``local``
    False: no InsufficientScope, no Unavailable (whose retryAfter a task's wait would retry after), and no local
    AuthorizationError, ConnectionClosed or RequestTimeout. -32002 is still a resource not found."""
    async with Client.connect_server(peer_error_server()) as client:
        assert client.stateless
        for code, data in FROM_THE_PEER.items():
            with pytest.raises(RpcError) as raised:
                await client.call_tool("fail", {"code": code, "data": data})
            error = raised.value
            assert (type(error), error.code, error.message, error.data, error.local) == (
                RpcError,
                code,
                "as the peer says it",
                data,
                False,
            ), code
        with pytest.raises(ResourceNotFound) as missing:
            await client.call_tool("fail", {"code": -32002, "data": {"uri": "a://b"}})
        assert missing.value.uri == "a://b"
        with pytest.raises(errors.Unavailable) as ours:  # (our own code means what it says in every revision)
            await client.call_tool("fail", {"code": -31012, "data": {"retryAfter": 7}})
        assert ours.value.retry_after == 7


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25"])
async def test_a_handshake_era_client_still_reads_the_codes_earlier_releases_sent(version: str) -> None:
    """For servers of earlier releases of this library, a handshake-era session reads -32011 and -32012 as
    InsufficientScope and Unavailable (their code as it came); the local-only codes stay the peer's own."""
    async with Client.connect_server(peer_error_server(), protocol_version=version) as client:
        with pytest.raises(errors.InsufficientScope) as scope:
            await client.call_tool("fail", {"code": -32011, "data": FROM_THE_PEER[-32011]})
        assert (scope.value.code, scope.value.required, scope.value.local) == (-32011, ["notes:write"], False)
        with pytest.raises(errors.Unavailable) as away:
            await client.call_tool("fail", {"code": -32012, "data": FROM_THE_PEER[-32012]})
        assert (away.value.code, away.value.retry_after) == (-32012, 7)
        with pytest.raises(errors.Unavailable) as ours:
            await client.call_tool("fail", {"code": -31012, "data": {"retryAfter": 2}})
        assert ours.value.retry_after == 2
        for code in (-32000, -32001, -32003):
            with pytest.raises(RpcError) as raised:
                await client.call_tool("fail", {"code": code, "data": FROM_THE_PEER[code]})
            assert (type(raised.value), raised.value.local) == (RpcError, False), code


async def test_a_local_timeout_or_closed_connection_is_told_apart_from_the_peers_code() -> None:
    """ "Implementations surfacing local errors in JSON-RPC-shaped structures should ensure they cannot be mistaken
    for errors received from the peer": our timeout and closed connection carry -32001 and -32000 as a peer's error
    may, but are RequestTimeout and ConnectionClosed with ``local`` True, which no peer's error is."""
    server = Server("slow", "1")
    gone = anyio.Event()

    @server.tool()
    async def slow() -> str:
        await gone.wait()
        return "late"

    async with Client.connect_server(server, request_timeout=0.05) as client:
        with pytest.raises(errors.RequestTimeout) as timeout:
            await client.call_tool("slow")
        gone.set()
    assert (timeout.value.code, timeout.value.local) == (-32001, True)
    closed = errors.error_for_code(-32000, "closed, says the peer")
    assert (type(closed), closed.local) == (RpcError, False)
    assert errors.ConnectionClosed().local and errors.local_failure("HTTP 500 without an answer").local
    failure = errors.local_failure("x")
    assert failure.code == -32000 and not isinstance(failure, errors.ConnectionClosed)


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_a_local_error_escaping_a_handler_never_puts_its_code_on_the_wire(version: str) -> None:
    """A handler that lets escape an error of ours about its own exchange (here the -32000 of an HTTP answer that
    was none, as a handler that calls another server may meet) answers -32603 "Internal error", not -32000."""
    server = Server("proxy", "1")

    @server.method("custom/forward", eras="both")
    def forward(ctx: Context, params: Any) -> dict[str, Any]:
        raise errors.local_failure("the server answered the request with HTTP 502 and no response")

    params = {"_meta": META} if version == "2026-07-28" else {}
    async with raw_server(server, version=None if version == "2026-07-28" else version) as peer:
        answer = await peer.call(request_frame(1, "custom/forward", params))
    assert answer["error"] == {"code": -32603, "message": "Internal error"}
