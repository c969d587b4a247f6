"""The client API: structured_data(), errors vs tool errors, client-side capability gating, era fallback,
pagination safety. Some tests talk to a scripted fake server that records every frame it receives."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest
from fixtures.everything import make_server
from helpers import send_raw

import jsonrpc_mcp
from jsonrpc_mcp import (
    Client,
    Context,
    InsufficientScope,
    InternalError,
    InvalidParams,
    InvalidToolOutput,
    MethodNotFound,
    MissingClientCapability,
    NoStructuredData,
    RequestTimeout,
    ResourceNotFound,
    RpcError,
    Server,
    ToolError,
    ToolResultError,
    errors,
    structured_data,
)
from jsonrpc_mcp import types as t
from jsonrpc_mcp.transports.memory import memory_pair

pytestmark = pytest.mark.anyio

V = {"protocol_version": "2025-11-25"}


class Point(msgspec.Struct):
    x: int
    y: int


def text(value: str, mime: str | None = None) -> t.TextContent:
    return t.TextContent(text=value, meta={"mimeType": mime} if mime else msgspec.UNSET)


# --- structured_data -------------------------------------------------------------------------------------------


def test_structured_content_comes_first() -> None:
    blocks: list[t.ContentBlock] = [text('{"x": 9, "y": 9}', "application/json")]
    result = t.CallToolResult(content=blocks, structured_content={"x": 1, "y": 2})
    assert structured_data(result) == {"x": 1, "y": 2}
    assert structured_data(result, Point) == Point(1, 2)


def test_json_mime_block_before_merely_parseable_text() -> None:
    result = t.CallToolResult(content=[text('"a json string"'), text('{"x": 3, "y": 4}', "application/json")])
    assert structured_data(result, Point) == Point(3, 4)


def test_first_parseable_text_block() -> None:
    result = t.CallToolResult(
        content=[t.ImageContent(data="AAAA", mime_type="image/png"), text("not json"), text('{"x": 5, "y": 6}')]
    )
    assert structured_data(result) == {"x": 5, "y": 6}
    assert structured_data(result, Point) == Point(5, 6)


def test_no_structured_data() -> None:
    with pytest.raises(NoStructuredData):
        structured_data(t.CallToolResult(content=[text("hello"), text("{broken")]))
    with pytest.raises(NoStructuredData):
        structured_data(t.CallToolResult(content=[]))


def test_structured_data_validates_against_the_type() -> None:
    with pytest.raises(msgspec.ValidationError):
        structured_data(t.CallToolResult(content=[], structured_content={"x": "one", "y": 2}), Point)


async def test_structured_data_from_a_real_tool() -> None:
    async with Client.connect_server(make_server(), **V) as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})
        assert structured_data(result) == {"result": 3}
        assert structured_data(await client.call_tool("echo", {"text": "[1, 2]"})) == [1, 2]
        with pytest.raises(NoStructuredData):
            structured_data(await client.call_tool("echo", {"text": "plain words"}))


def test_structured_data_of_a_failed_call_raises_with_the_error_payload() -> None:
    failed = t.CallToolResult(
        content=[text("No entry has id 4")], structured_content={"code": "NOT_FOUND"}, is_error=True
    )
    with pytest.raises(ToolResultError) as raised:
        structured_data(failed)
    assert isinstance(raised.value, ToolError)
    assert (raised.value.message, raised.value.structured, raised.value.result) == (
        "No entry has id 4",
        {"code": "NOT_FOUND"},
        failed,
    )
    with pytest.raises(ToolResultError) as plain:
        structured_data(t.CallToolResult(content=[text('{"x": 1, "y": 2}')], is_error=True))
    assert plain.value.structured is None


# --- the outputSchema check --------------------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def output_server(answers: dict[str, t.CallToolResult]) -> Server:
    """Tools that answer as told, whatever their outputSchema says (the library checks what *it* builds, so a
    ready CallToolResult is the way to send a broken one)."""
    server = Server("outputs")

    @server.tool(output_schema=SCHEMA)
    def checked(case: str) -> t.CallToolResult:
        return answers[case]

    @server.tool()
    def free(case: str) -> t.CallToolResult:
        return answers[case]

    return server


ANSWERS = {
    "good": t.CallToolResult(content=[text('{"ok": true}')], structured_content={"ok": True}),
    "wrong": t.CallToolResult(content=[text('{"ok": "yes"}')], structured_content={"ok": "yes"}),
    "missing": t.CallToolResult(content=[text("no data")]),
    "failed": t.CallToolResult(content=[text("it broke")], structured_content={"why": 1}, is_error=True),
}


@pytest.mark.parametrize("options", [V, {}], ids=["handshake", "stateless"])
async def test_structured_content_is_checked_against_the_output_schema(options: dict[str, Any]) -> None:
    async with Client.connect_server(output_server(ANSWERS), **options) as client:
        assert (await client.call_tool("checked", {"case": "good"})).structured_content == {"ok": True}  # no list first
        with pytest.raises(InvalidToolOutput) as wrong:
            await client.call_tool("checked", {"case": "wrong"})
        assert wrong.value.tool == "checked" and wrong.value.result.structured_content == {"ok": "yes"}
        assert wrong.value.problems == ['ok: "yes" is not of type "boolean"']
        with pytest.raises(InvalidToolOutput) as missing:
            await client.call_tool("checked", {"case": "missing"})
        assert missing.value.problems == ["the tool has an outputSchema but the result has no structuredContent"]
        assert (await client.call_tool("checked", {"case": "failed"})).is_error is True  # errors are not checked
        assert (await client.call_tool("free", {"case": "wrong"})).structured_content == {"ok": "yes"}
        client.validate_tool_output = False
        assert (await client.call_tool("checked", {"case": "wrong"})).structured_content == {"ok": "yes"}
    async with Client.connect_server(output_server(ANSWERS), validate_tool_output=False, **options) as client:
        assert (await client.call_tool("checked", {"case": "missing"})).content[0].text == "no data"  # type: ignore[union-attr]


async def test_the_output_schema_is_learnt_again_when_the_tools_change() -> None:
    server = output_server(ANSWERS)
    changed = anyio.Event()

    def on_notification(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tools/list_changed":
            changed.set()

    async with Client.connect_server(server, on_notification=on_notification, **V) as client:
        await client.list_tools()
        with pytest.raises(InvalidToolOutput):
            await client.call_tool("checked", {"case": "wrong"})
        server.remove_tool("checked")

        @server.tool(name="checked", output_schema={"type": "object", "properties": {"ok": {"type": "string"}}})
        def checked_again(case: str) -> t.CallToolResult:
            return ANSWERS[case]

        with anyio.fail_after(10):
            await changed.wait()
        assert (await client.call_tool("checked", {"case": "wrong"})).structured_content == {"ok": "yes"}


async def test_without_the_validation_extra_nothing_is_checked_and_that_is_said_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema_rs", None)  # import jsonschema_rs -> ImportError
    caplog.set_level(logging.DEBUG, logger="jsonrpc_mcp.mcp.output_schemas")
    async with Client.connect_server(output_server(ANSWERS), **V) as client:
        for _ in range(2):
            assert (await client.call_tool("checked", {"case": "wrong"})).structured_content == {"ok": "yes"}
    said = [r for r in caplog.records if r.name == "jsonrpc_mcp.mcp.output_schemas"]
    assert [r.levelno for r in said] == [logging.DEBUG] and "validation extra" in said[0].getMessage()


# --- errors ----------------------------------------------------------------------------------------------------


async def test_protocol_errors_raise_and_tool_errors_return() -> None:
    async with Client.connect_server(make_server(), **V) as client:
        with pytest.raises(InvalidParams) as unknown:
            await client.call_tool("no-such-tool")
        assert unknown.value.code == -32602 and unknown.value.message == "Unknown tool: no-such-tool"
        failed = await client.call_tool("fail", {"message": "model, try again"})
        assert failed.is_error is True
        assert failed.content[0].text == "model, try again"  # type: ignore[union-attr]
        bad_args = await client.call_tool("add", {"a": "x"})
        assert bad_args.is_error is True
        with pytest.raises(ResourceNotFound) as resource:
            await client.read_resource("nope://")
        assert (resource.value.code, resource.value.data, resource.value.uri) == (-32002, {"uri": "nope://"}, "nope://")
        with pytest.raises(MethodNotFound):
            await client.request("no/such/method")


# --- a scripted fake server -------------------------------------------------------------------------------------

Script = Callable[[dict[str, Any]], Any]  # request -> result dict, RpcError to raise, or None to stay silent


@asynccontextmanager
async def fake_server(script: Script) -> AsyncIterator[tuple[Any, list[dict[str, Any]]]]:
    """Yields (client stream, frames received). Requests are answered by ``script``."""
    ours, theirs = memory_pair()
    received: list[dict[str, Any]] = []

    async def run() -> None:
        while True:
            try:
                frames = await theirs.receive()
            except anyio.EndOfStream:
                return
            for frame in frames:
                msg = json.loads(frame)
                received.append(msg)
                if "id" not in msg or "method" not in msg:
                    continue
                try:
                    result = script(msg)
                except RpcError as exc:
                    error = {"code": exc.code, "message": exc.message}
                    await send_raw(theirs, json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": error}).encode())
                    continue
                if result is not None:
                    await send_raw(theirs, json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            yield ours, received
        finally:
            tg.cancel_scope.cancel()
            await ours.aclose()
            await theirs.aclose()


def handshake_only(capabilities: dict[str, Any], **more: Callable[[dict[str, Any]], Any]) -> Script:
    def script(msg: dict[str, Any]) -> Any:
        method = msg["method"]
        if method == "initialize":
            return {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": capabilities,
                "serverInfo": {"name": "fake", "version": "0"},
            }
        if method == "ping":
            return {}
        if method in more:
            return more[method](msg)
        raise MethodNotFound(f"Method not found: {method}")

    return script


def methods_sent(received: list[dict[str, Any]]) -> list[str]:
    return [m["method"] for m in received if "method" in m]


async def test_client_side_capability_gating_sends_nothing() -> None:
    async with (
        fake_server(handshake_only({"tools": {}})) as (stream, received),
        Client.connect(stream, **V) as client,
    ):
        for call in (
            client.list_prompts(),
            client.get_prompt("x"),
            client.list_resources(),
            client.read_resource("a://b"),
            client.subscribe("a://b"),
            client.complete(t.PromptReference(name="p"), "a", ""),
            client.set_logging_level("debug"),
        ):
            with pytest.raises(MethodNotFound):
                await call
        await client.ping()
    assert methods_sent(received) == ["initialize", "notifications/initialized", "ping"]


async def test_logging_from_a_server_that_did_not_declare_it_only_when_asked() -> None:
    async with (
        fake_server(handshake_only({"tools": {}})) as (stream, received),
        Client.connect(stream, **V) as client,
    ):
        with pytest.raises(MethodNotFound) as refused:
            await client.set_logging_level("debug")
        assert "even_if_undeclared=True" in refused.value.message
        await client.set_logging_level("debug", even_if_undeclared=True)  # the fake answers -32601: no error
    assert methods_sent(received) == ["initialize", "notifications/initialized", "logging/setLevel"]

    declared_but_missing = handshake_only({"tools": {}, "logging": {}})
    async with fake_server(declared_but_missing) as (stream, received), Client.connect(stream, **V) as client:
        with pytest.raises(MethodNotFound):  # it said it logs: its -32601 is an error
            await client.set_logging_level("debug")


async def test_auto_era_falls_back_to_the_handshake() -> None:
    """protocol_version="auto" probes server/discover; a handshake-only server's -32601 means initialize."""
    async with (
        fake_server(handshake_only({"tools": {}})) as (stream, received),
        Client.connect(stream) as client,
    ):
        assert not client.stateless
        assert client.protocol_version == "2025-11-25"
    assert methods_sent(received) == ["server/discover", "initialize", "notifications/initialized"]
    discover = received[0]
    assert discover["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"


async def test_the_client_names_itself_with_the_package_version() -> None:
    """``clientInfo`` (initialize) and the stateless era's ``_meta`` carry ``jsonrpc_mcp.__version__``."""
    async with fake_server(handshake_only({"tools": {}})) as (stream, received), Client.connect(stream):
        pass
    discover, initialize = received[0], received[1]
    ours = {"name": "jsonrpc-mcp", "version": jsonrpc_mcp.__version__}
    assert discover["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] == ours
    assert initialize["params"]["clientInfo"] == ours


async def test_pagination_stops_on_a_repeated_cursor() -> None:
    pages = iter(range(100))

    def tools_list(msg: dict[str, Any]) -> Any:
        n = next(pages)
        return {"tools": [{"name": f"t{n}", "inputSchema": {"type": "object"}}], "nextCursor": "same"}

    async with (
        fake_server(handshake_only({"tools": {}}, **{"tools/list": tools_list})) as (stream, received),
        Client.connect(stream, **V) as client,
    ):
        tools = await client.list_tools()
    assert [x.name for x in tools] == ["t0", "t1"]
    lists = [m for m in received if m.get("method") == "tools/list"]
    assert [m.get("params") for m in lists] == [None, {"cursor": "same"}]


async def test_error_codes_map_to_exception_types() -> None:
    def fail(msg: dict[str, Any]) -> Any:
        code = msg["params"]["arguments"]["code"]
        raise RpcError("boom", code=code)

    async with (
        fake_server(handshake_only({"tools": {}}, **{"tools/call": fail})) as (stream, _received),
        Client.connect(stream, **V) as client,
    ):
        for code, kind in ((-32602, InvalidParams), (-32601, MethodNotFound), (-32603, InternalError)):
            with pytest.raises(kind):
                await client.call_tool("x", {"code": code})
        with pytest.raises(RpcError) as other:
            await client.call_tool("x", {"code": -32050})
        assert type(other.value) is RpcError and other.value.code == -32050


#: The errors of errors.py that are raised locally and never read back from a peer (other implementations send
#: -32000 and -32001 for errors of their own).
LOCAL_ONLY = {errors.ConnectionClosed, errors.SessionExpired, errors.RequestTimeout, errors.AuthorizationError}


def rpc_error_classes() -> list[type[RpcError]]:
    found = [getattr(errors, name) for name in errors.__all__]
    return [kind for kind in found if isinstance(kind, type) and issubclass(kind, RpcError) and kind is not RpcError]


def test_every_error_class_is_read_back_from_its_code() -> None:
    """A class added to errors.py without a place in error_for_code fails here."""
    for kind in rpc_error_classes():
        assert kind.local == (kind in LOCAL_ONLY), kind  # (only what is made here is local)
        if kind in LOCAL_ONLY:
            continue
        data = {"uri": "a://b", "requiredScopes": ["s"], "requiredCapabilities": {"sampling": {}}, "retryAfter": 3}
        error = errors.error_for_code(kind.code, "as sent", data)
        assert type(error) is kind, kind
        assert (error.code, error.message, error.data) == (kind.code, "as sent", data)
    assert type(errors.error_for_code(-32000, "a server error of another implementation")) is RpcError
    assert type(errors.error_for_code(-32001, "a timeout of another implementation")) is RpcError


def error_server() -> Server:
    """A tool per error a server may answer with, raised as a handler would raise it."""
    server = Server("errors", "1.0")
    raised: dict[str, RpcError] = {
        "parse": errors.ParseError("odd bytes"),
        "request": errors.InvalidRequest("not a request", {"why": "test"}),
        "method": MethodNotFound("no such thing"),
        "params": InvalidParams("bad params", {"field": "x"}),
        "internal": InternalError(),
        "resource": ResourceNotFound("notes://gone"),
        "scope": InsufficientScope(["notes:read", "notes:write"], ["notes:write"]),
        "unavailable": errors.Unavailable(retry_after=7),
    }

    @server.tool()
    def fail(kind: str) -> str:
        raise raised[kind]

    @server.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Go on?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return str(answer.action)

    return server


@pytest.mark.parametrize("version", ["2025-11-25", "auto"])
async def test_every_error_a_server_raises_comes_back_as_its_own_class(version: str) -> None:
    """Over the wire from a real Server, in either era: the class, the code, the message and the data."""
    expected: dict[str, tuple[type[RpcError], int, str, Any]] = {
        "parse": (errors.ParseError, -32700, "odd bytes", None),
        "request": (errors.InvalidRequest, -32600, "not a request", {"why": "test"}),
        "method": (MethodNotFound, -32601, "no such thing", None),
        "params": (InvalidParams, -32602, "bad params", {"field": "x"}),
        "internal": (InternalError, -32603, "Internal error", None),
        "resource": (ResourceNotFound, -32002, "Resource not found", {"uri": "notes://gone"}),
        "scope": (
            InsufficientScope,
            -31011,
            "Insufficient scope: this request needs notes:write",
            {"error": "insufficient_scope", "requiredScopes": ["notes:read", "notes:write"]},
        ),
        "unavailable": (errors.Unavailable, -31012, "Service unavailable: retry in 7 s", {"retryAfter": 7}),
    }
    if version == "auto":  # 2026-07-28 has no -32002: a resource not found is -32602 with data.uri
        expected["resource"] = (InvalidParams, -32602, "Resource not found", {"uri": "notes://gone"})
    async with Client.connect_server(error_server(), protocol_version=version) as client:
        for kind, (cls, code, message, data) in expected.items():
            with pytest.raises(RpcError) as raised:
                await client.call_tool("fail", {"kind": kind})
            error = raised.value
            assert (type(error), error.code, error.message, error.data) == (cls, code, message, data), kind
        with pytest.raises(MissingClientCapability) as missing:
            await client.call_tool("ask")  # this client declared no elicitation handler
        assert missing.value.code == -32021 and missing.value.capability == "elicitation"
        assert missing.value.message == "Missing required client capability: elicitation"
    async with Client.connect_server(error_server(), protocol_version=version) as client:
        with pytest.raises(InsufficientScope) as scope:
            await client.call_tool("fail", {"kind": "scope"})
        assert scope.value.required == ["notes:read", "notes:write"]
        with pytest.raises(ResourceNotFound if version != "auto" else InvalidParams) as resource:
            await client.call_tool("fail", {"kind": "resource"})
        assert resource.value.data == {"uri": "notes://gone"}
        with pytest.raises(errors.Unavailable) as unavailable:
            await client.call_tool("fail", {"kind": "unavailable"})
        assert unavailable.value.retry_after == 7


@pytest.mark.parametrize(("version", "code"), [("2025-11-25", -32002), ("2025-03-26", -32002), ("auto", -32602)])
async def test_an_unknown_resource_is_resource_not_found_in_either_era(version: str, code: int) -> None:
    """-32002 in the handshake era, -32602 with data.uri in 2026-07-28: ResourceNotFound both times, its code as
    it came."""
    async with Client.connect_server(make_server(), protocol_version=version) as client:
        with pytest.raises(ResourceNotFound) as missing:
            await client.read_resource("nowhere://at-all")
        assert (missing.value.code, missing.value.uri) == (code, "nowhere://at-all")
        assert missing.value.data == {"uri": "nowhere://at-all"}
        assert (await client.read_resource("text://hello")).contents  # a known one still reads


@pytest.mark.parametrize("version", ["2025-11-25", "auto"])
async def test_invalid_params_of_a_read_stays_invalid_params(version: str) -> None:
    """Only a -32602 whose data names the URI asked for is a missing resource."""
    server = Server("reads", "1.0")

    @server.resource("item://{id}")
    def item(id: str) -> str:
        raise InvalidParams("id must be a number", {"field": "id"})

    async with Client.connect_server(server, protocol_version=version) as client:
        with pytest.raises(InvalidParams) as refused:
            await client.read_resource("item://x")
        assert type(refused.value) is InvalidParams and refused.value.data == {"field": "id"}


async def test_call_timeout_sends_a_cancellation() -> None:
    async with (
        fake_server(handshake_only({"tools": {}}, **{"tools/call": lambda msg: None})) as (stream, received),
        Client.connect(stream, **V) as client,
    ):
        with pytest.raises(RequestTimeout):
            await client.call_tool("slow", timeout=0.05)
        await client.ping()  # the cancellation was written before the ping
    call = next(m for m in received if m.get("method") == "tools/call")
    cancel = next(m for m in received if m.get("method") == "notifications/cancelled")
    assert cancel["params"] == {"requestId": call["id"], "reason": "Request timed out"}


async def test_on_notification_sees_every_server_notification() -> None:
    server = make_server()
    seen: list[str] = []
    async with Client.connect_server(server, on_notification=lambda m, p: seen.append(m), **V) as client:
        await client.call_tool("progress", {"steps": 1}, progress=lambda *a: None)
        await client.call_tool("log", {"level": "error", "message": "x"})
    assert seen == ["notifications/progress", "notifications/message"]


@pytest.mark.parametrize("version", ["2025-11-25", "auto"])
async def test_async_callbacks_are_each_awaited_and_on_notification_still_hears_everything(version: str) -> None:
    """An ``async`` on_log given with on_notification is awaited (its log lines were lost), and an async progress
    callback does not hide ``notifications/progress`` from on_notification: every callback a notification is for
    hears of it."""
    server = make_server()
    seen: list[str] = []
    logs: list[Any] = []
    steps: list[float] = []
    everything = anyio.Event()

    def heard() -> None:
        if len(seen) == 3 and logs:
            everything.set()

    async def on_notification(method: str, params: dict[str, Any]) -> None:
        seen.append(method)
        heard()

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)
        heard()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        steps.append(done)

    options: dict[str, Any] = {"on_notification": on_notification, "on_log": on_log, "protocol_version": version}
    async with Client.connect_server(server, **options) as client:
        await client.set_logging_level("info")  # (the stateless era sends log messages only to requests that ask)
        await client.call_tool("progress", {"steps": 2}, progress=progress)
        assert sorted(steps) == [1, 2]  # (awaited before the call returns; each notification's in a task of its own)
        await client.call_tool("log", {"level": "error", "message": "heard"})
        with anyio.fail_after(10):
            await everything.wait()
    assert sorted(seen) == ["notifications/message", "notifications/progress", "notifications/progress"]
    assert logs == ["heard"]


async def test_leaving_a_listen_ends_the_subscription_in_process() -> None:
    """On a stream transport, leaving ``listen()`` sends ``notifications/cancelled`` for it: the server ends the
    subscription (the HTTP transport closes the stream instead: tests/test_http_client.py)."""
    server = Server("listening", "1")

    @server.tool(inline=True)
    def listening() -> int:
        """How many subscriptions/listen streams the server serves."""
        return sum(1 for session in server.sessions() if session.listeners)

    async with Client.connect_server(server) as client:
        assert client.stateless
        async with client.listen(tools=True):
            assert (await client.call_tool("listening")).structured_content == {"result": 1}
        with anyio.fail_after(10):  # (the cancellation is a notification: it is read before a later call)
            while (await client.call_tool("listening")).structured_content != {"result": 0}:
                pass


@pytest.mark.parametrize(
    ("setting", "error", "message"),
    [
        ({"protocol_version": "2025-06-19"}, ValueError, 'protocol_version must be "auto" or one of 2026-07-28, '),
        ({"protocol_version": "latest"}, ValueError, 'protocol_version must be "auto" or one of'),
        ({"elicitation_modes": "form"}, ValueError, 'elicitation_modes is a list of "form" and "url", not \'form\''),
        ({"elicitation_modes": ["form", "popup"]}, ValueError, 'elicitation_modes is a list of "form" and "url"'),
        ({"request_timeout": 0}, ValueError, r"request_timeout must be positive \(or None\)"),
        ({"max_total_timeout": -1.0}, ValueError, r"max_total_timeout must be positive \(or None\)"),
        ({"request_timeout": "30"}, TypeError, "request_timeout must be a number of seconds"),
        ({"roots": "file:///home/me"}, TypeError, r'roots is a list of types.Root\(uri="file:///...", name=...\)'),
        ({"roots": ["file:///home/me"]}, TypeError, "roots is a list of types.Root"),
        ({"sampling": "gpt-4"}, TypeError, "^sampling is a function, not 'gpt-4'$"),
        ({"elicitation": True}, TypeError, "^elicitation is a function, not True$"),
    ],
)
async def test_a_client_setting_that_cannot_be_meant_is_refused_before_anything_is_sent(
    setting: dict[str, Any], error: type[Exception], message: str
) -> None:
    ours, theirs = memory_pair()  # (nobody answers: a client that sent anything would wait, and time out here)
    with anyio.fail_after(10), pytest.raises(error, match=message):
        async with Client.connect(ours, **setting):
            pass  # pragma: no cover
    await ours.aclose()
    await theirs.aclose()


async def test_a_command_line_given_as_one_string_is_refused_with_the_list_it_meant() -> None:
    with pytest.raises(
        TypeError,
        match=r"^command is a list of arguments, not a string: "
        r"command=\['python', 'server\.py', '--db', 'my notes\.db'\]$",
    ):
        async with Client.connect_stdio("python server.py --db 'my notes.db'"):  # type: ignore[arg-type]
            pass  # pragma: no cover  (was: FileNotFoundError naming 'p')
    with pytest.raises(ValueError, match="command is empty"):
        async with Client.connect_stdio([]):
            pass  # pragma: no cover


@pytest.mark.parametrize("options", [V, {}], ids=["handshake", "2026-07-28"])
async def test_a_client_whose_connection_is_over_is_freed_without_the_garbage_collector(
    options: dict[str, Any],
) -> None:
    """Once its connection is over, a client lets go of the handlers it gave its dispatcher and its stream (and its
    progress pacer of its dispatcher's task spawner): with the cyclic collector off, neither the client nor its
    pacer is left in a reference cycle (each such client left ~100 objects for the collector to find). (The
    server here ends with its stream rather than by a cancellation: trio keeps the frames of the code that cancels
    in the cycle of the cancellation it delivers, and with them whatever they hold, a client too.)"""
    from helpers import left_in_cycles_by

    from jsonrpc_mcp.mcp.client import ClientSession
    from jsonrpc_mcp.mcp.progress import Pacer

    server = make_server()
    names: list[str] = []

    async def connect_and_call() -> None:
        ours, theirs = memory_pair()
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, theirs)
            async with Client.connect(ours, **options) as client:
                result = await client.call_tool("add", {"a": 1, "b": 2}, progress=lambda *_: None)
                assert structured_data(result) == {"result": 3}
                assert client.server_info is not None
                names.append(client.server_info.name)
                del client  # (this frame, leaving the connection, is among those trio keeps: see above)
            await ours.aclose()  # the server's read ends, and so does its serve()
        await theirs.aclose()

    assert await left_in_cycles_by(connect_and_call, ClientSession, Pacer) == []
    assert names == [server.name] * 2
