"""One interaction suite, run over every byte transport: memory, a stdio subprocess, TCP and Unix sockets.

``stdio-threads`` is stdio as where the event loop can neither poll pipes nor run child processes (Windows, or
asyncio's selector loop there): the server reads and writes its stdin/stdout on worker threads, and so does the
client the pipes of the process it started with :mod:`subprocess`.

The ``transport`` fixture yields a :class:`Transport`; ``async with transport.serve() as connect`` starts one
server (in process, or nothing for stdio where each connection is its own process) and ``connect(**options)``
opens a :class:`~jsonrpc_mcp.Client` to it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import msgspec
import pytest
from fixtures.everything import make_server
from helpers import (
    BOTH_RUNNERS,
    FIXTURES,
    PYTHON,
    TIMEOUT,
    ConnectionTracker,
    init_frame,
    paced,
    serve_command,
    without_loop_processes,
)

from jsonrpc_mcp import Client, InvalidRequest, MethodNotFound, Server
from jsonrpc_mcp import types as t
from jsonrpc_mcp.transports.socket import serve_tcp, serve_unix

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("runner"), BOTH_RUNNERS]

HANDSHAKE = {"protocol_version": "2025-11-25"}
Connect = Callable[..., AbstractAsyncContextManager[Client]]


@dataclass
class Transport:
    name: str

    @asynccontextmanager
    async def serve(self) -> AsyncIterator[Connect]:
        if self.name == "stdio":

            def connect_stdio(**options: Any) -> AbstractAsyncContextManager[Client]:
                return Client.connect_stdio(serve_command(), stderr=subprocess.DEVNULL, **options)

            yield connect_stdio
            return
        if self.name == "stdio-threads":
            yield connect_stdio_threads
            return
        server = make_server()
        if self.name == "memory":
            yield lambda **options: Client.connect_server(server, **options)
            return
        async with socket_server(self.name, server) as (connect, _raw):
            yield connect


@asynccontextmanager
async def connect_stdio_threads(**options: Any) -> AsyncIterator[Client]:
    command = [PYTHON, str(FIXTURES / "threaded_stdio.py"), str(FIXTURES / "everything.py")]
    with without_loop_processes():
        async with Client.connect_stdio(command, stderr=subprocess.DEVNULL, **options) as client:
            yield client


#: (a stdio server runs in a subprocess, on the fast runner: only the in-process ones run on the plain one too)
SUBPROCESS = pytest.mark.fast_runner


@pytest.fixture(
    params=[
        "memory",
        pytest.param("stdio", marks=SUBPROCESS),
        pytest.param("stdio-threads", marks=SUBPROCESS),
        "tcp",
        "unix",
    ]
)
def transport(request: pytest.FixtureRequest) -> Transport:
    return Transport(request.param)


@pytest.fixture(params=["tcp", "unix"])
def socket_transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def sampling_handler(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
    first = params.messages[0].content
    question = first.text if isinstance(first, t.TextContent) else "?"
    return t.CreateMessageResult(role="assistant", content=t.TextContent(text=f"echo<{question}>"), model="fake-1")


async def elicitation_handler(params: t.ElicitRequestParams) -> t.ElicitResult:
    assert params.message == "Favourite colour?"
    return t.ElicitResult(action="accept", content={"answer": "green"})


async def test_initialize_and_features(transport: Transport) -> None:
    async with transport.serve() as connect, connect(**HANDSHAKE) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None and client.server_info.name == "everything"
        assert client.instructions == "A fixture server."
        caps = client.server_capabilities
        assert caps.tools is not msgspec.UNSET and caps.resources is not msgspec.UNSET
        await client.ping()

        tools = {tool.name: tool for tool in await client.list_tools()}
        assert {"add", "echo", "wait_for", "release", "progress", "sample", "elicit"} <= set(tools)
        assert tools["add"].input_schema["required"] == ["a"]
        added = await client.call_tool("add", {"a": 2, "b": 40})
        assert added.structured_content == {"result": 42}
        assert json.loads(added.content[0].text) == {"result": 42}  # type: ignore[union-attr]
        echoed = await client.call_tool("echo", {"text": "naïve ☃"})
        assert echoed.content[0].text == "naïve ☃"  # type: ignore[union-attr]
        failed = await client.call_tool("fail", {"message": "nope"})
        assert failed.is_error is True and failed.content[0].text == "nope"  # type: ignore[union-attr]
        crashed = await client.call_tool("crash")
        assert crashed.is_error is True and "secret" not in crashed.content[0].text  # type: ignore[union-attr]

        resources = await client.list_resources()
        assert {r.uri for r in resources} == {"text://hello", "blob://bytes"}
        templates = await client.list_resource_templates()
        assert [tpl.uri_template for tpl in templates] == ["item://{id}"]
        text = (await client.read_resource("text://hello")).contents[0]
        assert (text.text, text.mime_type) == ("Hello, world", "text/plain")
        blob = (await client.read_resource("blob://bytes")).contents[0]
        assert isinstance(blob.blob, str) and base64.b64decode(blob.blob) == b"\x00\x01\xff"
        item = (await client.read_resource("item://42")).contents[0]
        assert json.loads(item.text) == {"id": "42"}  # type: ignore[arg-type]

        prompts = await client.list_prompts()
        assert [p.name for p in prompts] == ["greet"]
        got = await client.get_prompt("greet", {"name": "Ada", "style": "formal"})
        assert got.messages[0].content.text == "Good day, Ada."  # type: ignore[union-attr]

        # client-side gating: a capability the server did not declare is refused without a round trip
        client.server_capabilities.prompts = msgspec.UNSET
        with pytest.raises(MethodNotFound):
            await client.list_prompts()


async def test_notifications_and_server_requests(transport: Transport) -> None:
    """Progress and log notifications, and sampling/elicitation requests answered by the client's handlers."""
    logs: list[t.LoggingMessageNotificationParams] = []
    progress: list[tuple[float, float | None, str | None]] = []
    options = {"on_log": logs.append, "sampling": sampling_handler, "elicitation": elicitation_handler}
    async with transport.serve() as connect, connect(**options, **HANDSHAKE) as client:
        result = await client.call_tool("progress", {"steps": 3}, progress=lambda *a: progress.append(a))
        assert result.content[0].text == "3 steps"  # type: ignore[union-attr]
        assert paced(progress, [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")])

        await client.call_tool("log", {"level": "debug", "message": "hidden"})  # default level: info
        await client.call_tool("log", {"level": "warning", "message": "shown"})
        await client.set_logging_level("debug")
        await client.call_tool("log", {"level": "debug", "message": "now shown"})
        await client.set_logging_level("error")
        await client.call_tool("log", {"level": "warning", "message": "filtered"})
        # Each notification was sent before its call's result, on the same connection: all are in by now.
        assert [(m.level, m.data, m.logger) for m in logs] == [
            ("warning", "shown", "fixture"),
            ("debug", "now shown", "fixture"),
        ]

        sampled = await client.call_tool("sample", {"prompt": "2+2?"})
        assert sampled.content[0].text == "fake-1: echo<2+2?>"  # type: ignore[union-attr]
        elicited = await client.call_tool("elicit", {"question": "Favourite colour?"})
        assert elicited.content[0].text == "accept: green"  # type: ignore[union-attr]


async def test_stateless_era_round_trips(transport: Transport) -> None:
    """The same scenarios in the 2026-07-28 era: server/discover, _meta on every request, input rounds."""
    async with transport.serve() as connect, connect(sampling=sampling_handler) as client:
        assert client.stateless and client.protocol_version == "2026-07-28"
        assert (await client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}
        sampled = await client.call_tool("sample", {"prompt": "hi"})
        assert sampled.content[0].text == "fake-1: echo<hi>"  # type: ignore[union-attr]


async def test_fast_request_overtakes_slow_one(transport: Transport) -> None:
    async with transport.serve() as connect, connect(**HANDSHAKE) as client:
        done: list[str] = []

        async def slow() -> None:
            result = await client.call_tool("wait_for", {"key": "gate"})
            done.append(result.content[0].text)  # type: ignore[union-attr]

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(slow)
                # Fast calls complete while the slow one is blocked on the server.
                for i in range(5):
                    assert (await client.call_tool("add", {"a": i})).structured_content == {"result": i}
                assert done == []
                await client.call_tool("release", {"key": "gate"})
        assert done == ["released gate"]


async def test_replies_larger_than_a_pipe_or_socket_buffer_arrive_whole(transport: Transport) -> None:
    # 3 MiB: the server's write of the answer is partial, waits for the reader to drain, and carries on from there
    text = "0123456789abcdef" * (3 * 65536)
    async with transport.serve() as connect, connect(**HANDSHAKE) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("echo", {"text": text})
            assert isinstance(result.content[0], t.TextContent) and result.content[0].text == text
            assert (await client.call_tool("add", {"a": 7})).structured_content == {"result": 7}


@asynccontextmanager
async def socket_server(kind: str, server: Server | None = None) -> AsyncIterator[tuple[Connect, Callable[[], Any]]]:
    """A socket server on loopback (port 0) or a short Unix path; yields a client factory and a raw connector."""
    server = server or make_server()
    tracker = ConnectionTracker(server)
    async with anyio.create_task_group() as tg:
        if kind == "tcp":
            port = await tg.start(lambda task_status: serve_tcp(server, port=0, task_status=task_status))
            yield (
                lambda **options: Client.connect_tcp("127.0.0.1", port, **options),
                lambda: anyio.connect_tcp("127.0.0.1", port),
            )
        else:
            directory = tempfile.mkdtemp(prefix="mcp-")  # short: AF_UNIX paths are limited to ~100 bytes
            path = os.path.join(directory, "s.sock")
            try:
                await tg.start(lambda task_status: serve_unix(server, path, task_status=task_status))
                yield (lambda **options: Client.connect_unix(path, **options), lambda: anyio.connect_unix(path))
            finally:
                shutil.rmtree(directory, ignore_errors=True)
        await tracker.wait_idle()
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("setting", "error", "message"),
    [
        (
            {"max_inflight": 8},
            TypeError,
            r"'max_inflight' is not a limit of a connection \(those are max_frame, max_in_flight",
        ),
        ({"max_frame": 0}, ValueError, "max_frame must be at least 2 bytes"),
        ({"max_in_flight": 0}, ValueError, "max_in_flight must be positive"),
        ({"max_queued_bytes": 1.5}, TypeError, "max_queued_bytes must be a whole number"),
        ({"request_timeout": 0}, ValueError, "request_timeout must be positive"),
        ({"drain_timeout": -1}, ValueError, "drain_timeout must be zero or more"),
    ],
)
async def test_a_socket_server_refuses_a_wrong_limit_before_it_listens(
    socket_transport: str, setting: dict[str, Any], error: type[Exception], message: str
) -> None:
    server = make_server()
    directory = tempfile.mkdtemp(prefix="mcp-")
    path = os.path.join(directory, "s.sock")
    try:
        with anyio.fail_after(TIMEOUT), pytest.raises(error, match=message):  # (not: listen, then fail each connection)
            if socket_transport == "tcp":
                await serve_tcp(server, port=0, **setting)
            else:
                await serve_unix(server, path, **setting)
        assert os.listdir(directory) == []  # (nothing was bound)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


async def test_many_connections_at_once(socket_transport: str) -> None:
    async with socket_server(socket_transport) as (connect, _raw):
        results: dict[int, Any] = {}

        async def one(i: int) -> None:
            async with connect(**HANDSHAKE) as client:
                results[i] = (await client.call_tool("add", {"a": i, "b": i})).structured_content

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(20):
                    tg.start_soon(one, i)
        assert results == {i: {"result": 2 * i} for i in range(20)}


async def test_per_connection_sessions_are_independent(socket_transport: str) -> None:
    """A wait_for on one connection is released from another: one server, separate sessions."""
    async with (
        socket_server(socket_transport) as (connect, _raw),
        connect(**HANDSHAKE) as first,
        connect(protocol_version="2024-11-05") as second,
    ):
        assert (first.protocol_version, second.protocol_version) == ("2025-11-25", "2024-11-05")
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(first.call_tool, "wait_for", {"key": "x"})
                await second.call_tool("release", {"key": "x"})


async def test_bad_connection_does_not_affect_others(socket_transport: str) -> None:
    async with socket_server(socket_transport) as (connect, raw):
        async with connect(**HANDSHAKE) as client:
            assert (await client.call_tool("add", {"a": 1})).structured_content == {"result": 1}
            conn = await raw()
            async with conn:
                await conn.send(b"\xff\xfe\x00garbage\n{{{{\n" + b"[" * 10000 + b"\n")
                await conn.send(init_frame()[:-5])  # a frame cut off by the close
            # a second bad connection that closes before sending anything
            await (await raw()).aclose()
            assert (await client.call_tool("add", {"a": 2})).structured_content == {"result": 2}
        async with connect(**HANDSHAKE) as fresh:
            assert (await fresh.call_tool("add", {"a": 3})).structured_content == {"result": 3}


async def test_garbage_connection_gets_error_replies(socket_transport: str) -> None:
    async with socket_server(socket_transport) as (_connect, raw):
        conn = await raw()
        async with conn:
            await conn.send(b"not json\n" + init_frame() + b"\n")
            data = b""
            with anyio.fail_after(10):
                while data.count(b"\n") < 2:
                    data += await conn.receive()
        first, second = [json.loads(line) for line in data.splitlines()[:2]]
        assert first["error"]["code"] == -32700 and "id" not in first
        assert second["id"] == 0 and second["result"]["protocolVersion"] == "2025-11-25"


async def read_lines(stream: anyio.abc.ByteReceiveStream, count: int) -> list[dict[str, Any]]:
    data = b""
    with anyio.fail_after(20):
        while data.count(b"\n") < count:
            data += await stream.receive()
    return [json.loads(line) for line in data.splitlines()]


@SUBPROCESS
async def test_stdio_exits_zero_on_stdin_eof() -> None:
    process = await anyio.open_process(serve_command(), stderr=subprocess.PIPE)
    async with process:
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        await process.stdin.send(init_frame() + b"\n")
        await process.stdin.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        # an async tool still running at EOF gets its answer before the process exits
        params = {"name": "progress", "arguments": {"steps": 2}}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
        await process.stdin.send(json.dumps(call).encode() + b"\n")
        await process.stdin.aclose()
        with anyio.fail_after(20):
            code = await process.wait()
        out = b""
        async for chunk in process.stdout:
            out += chunk
        async for _ in process.stderr:
            pass
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]  # nothing but frames on stdout
    assert [m.get("id") for m in lines] == [0, 2]
    assert lines[1]["result"]["content"][0]["text"] == "2 steps"


@SUBPROCESS
async def test_stdio_frame_size_limit() -> None:
    command = [PYTHON, str(FIXTURES / "small_frames.py")]
    async with Client.connect_stdio(command, **HANDSHAKE) as client:
        assert client.server_info is not None and client.server_info.name == "small-frames"
        with pytest.raises(InvalidRequest) as info:
            await client.call_tool("echo", {"text": "x" * 10_000})
        assert info.value.code == -32600
        assert info.value.message == "Invalid Request: message exceeds the 4096-byte limit"
        # the connection lives on
        assert (await client.call_tool("echo", {"text": "small"})).content[0].text == "small"  # type: ignore[union-attr]
        # and replies larger than the server's own limit are still delivered (the limit is on input)
        big = await client.call_tool("add", {"a": 10**300})
        assert big.structured_content == {"result": 10**300}


@SUBPROCESS
@pytest.mark.parametrize("first", ["wait_a_little", "add_greeter"])
async def test_a_stdio_server_starts_its_event_loop_only_when_something_needs_it(first: str) -> None:
    """``jsonrpc-mcp serve`` (``run_stdio``) answers what handlers answer at once in a plain read loop: no event
    loop, and no asyncio import, until an async handler or work spawned into the session needs one."""
    command = serve_command(FIXTURES / "loop_probe.py")
    with anyio.fail_after(30):
        async with Client.connect_stdio(command, **HANDSHAKE) as client:
            assert client.server_info is not None and client.server_info.name == "loop-probe"
            names = [tool.name for tool in await client.list_tools()]
            assert names == ["loop_started", "was_cancelled", "wait_a_little", "add_greeter"]
            assert (await client.call_tool("was_cancelled")).structured_content == {"result": False}
            assert (await client.call_tool("loop_started")).structured_content == {"result": False}
            result = await client.call_tool(first)
            assert result.content[0].text in ("waited", "added")  # type: ignore[union-attr]
            assert (await client.call_tool("loop_started")).structured_content == {"result": True}
            assert (await client.call_tool("wait_a_little")).content[0].text == "waited"  # type: ignore[union-attr]
            assert (await client.call_tool("was_cancelled")).structured_content == {"result": False}


@SUBPROCESS
@pytest.mark.skipif(shutil.which("tee") is None, reason="needs tee")
async def test_our_client_speaks_stdio_and_writes_only_messages_to_the_servers_stdin() -> None:
    """What our client writes on a server's stdin, copied by ``tee`` on its way to the server, is JSON-RPC
    messages, one a line, and nothing else: the handshake, requests, notifications, answers to the server's
    requests, a cancellation."""
    with tempfile.TemporaryDirectory() as folder:
        copy = os.path.join(folder, "stdin")
        command = ["sh", "-c", 'copy=$1; shift; tee "$copy" | "$@"', "sh", copy, *serve_command()]
        async with Client.connect_stdio(command, stderr=subprocess.DEVNULL, **HANDSHAKE) as client:
            with anyio.fail_after(TIMEOUT):
                added = await client.call_tool("add", {"a": 2, "b": 40})
                assert added.structured_content == {"result": 42}
                await client.set_logging_level("debug")
                async with anyio.create_task_group() as tg:  # (a call given up on: notifications/cancelled)
                    tg.start_soon(client.call_tool, "wait_for", {"key": "never"})
                    await anyio.wait_all_tasks_blocked()
                    tg.cancel_scope.cancel()
                await client.ping()
        data = await anyio.Path(copy).read_bytes()
    assert data.endswith(b"\n")
    messages = [json.loads(line) for line in data.split(b"\n")[:-1]]
    assert all(isinstance(m, dict) and m.get("jsonrpc") == "2.0" for m in messages), messages
    methods = [m.get("method") for m in messages]
    assert methods[:2] == ["initialize", "notifications/initialized"]
    assert {"tools/call", "logging/setLevel", "notifications/cancelled", "ping"} <= set(methods)
