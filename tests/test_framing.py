"""NDJSON framing: the sans-I/O LineFramer, and an oversized frame end to end over a real socket."""

from __future__ import annotations

import itertools
import json

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from fixtures.everything import make_server
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jsonrpc_mcp.jsonrpc.wire import OversizedFrame
from jsonrpc_mcp.transports.framing import DEFAULT_MAX_FRAME, LineFramer
from jsonrpc_mcp.transports.socket import serve_tcp


def shape(frames: list[bytes]) -> list[tuple[str, bytes, int]]:
    return [(type(f).__name__, bytes(f), getattr(f, "limit", 0)) for f in frames]


def feed_all(framer: LineFramer, chunks: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for chunk in chunks:
        out.extend(framer.feed(chunk))
    return out


def test_crlf_and_lf_endings() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"a":1}\r\n{"b":2}\n') == [b'{"a":1}', b'{"b":2}']
    assert framer.feed(b'{"c":3}\r') == []
    assert framer.feed(b"\n") == [b'{"c":3}']


def test_blank_and_whitespace_lines_are_skipped() -> None:
    framer = LineFramer()
    assert framer.feed(b"\n\r\n   \n\t\n" + b"x\n\n") == [b"x"]
    assert framer.pending() == 0


def test_only_json_whitespace_makes_a_line_blank() -> None:
    """A form feed or a vertical tab is not JSON whitespace: such a line is a frame (its parse error is answered)."""
    framer = LineFramer()
    assert framer.feed(b"\x0c\n\x0b\n \x0c \r\n\x1c\n") == [b"\x0c", b"\x0b", b" \x0c ", b"\x1c"]


def test_partial_line_is_held_until_its_newline() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"jsonrpc":') == []
    assert framer.pending() == len(b'{"jsonrpc":')
    assert framer.feed(b'"2.0"}\n{"x"') == [b'{"jsonrpc":"2.0"}']
    assert framer.pending() == len(b'{"x"')


def test_default_limit_and_minimum() -> None:
    assert LineFramer().max_frame == DEFAULT_MAX_FRAME == 16 * 1024 * 1024
    with pytest.raises(ValueError):
        LineFramer(1)


def test_oversized_frame_whole() -> None:
    framer = LineFramer(max_frame=16)
    big = b'{"id":7,"pad":"' + b"x" * 40 + b'"}'
    frames = framer.feed(b"ok\n" + big + b"\nafter\n")
    assert shape(frames)[0] == ("bytes", b"ok", 0)
    assert type(frames[1]) is OversizedFrame and frames[1].limit == 16
    assert bytes(frames[1]).startswith(b'{"id":7')
    assert frames[2] == b"after"


def test_oversized_prefix_stops_at_its_own_newline() -> None:
    """The kept prefix of an oversized line never includes the next frame (whose id would be sniffed)."""
    framer = LineFramer(max_frame=16)
    frames = framer.feed(b'{"pad":"' + b"p" * 30 + b'"}\n{"id":44}\n')
    assert shape(frames) == [("OversizedFrame", b'{"pad":"' + b"p" * 30 + b'"}', 16), ("bytes", b'{"id":44}', 0)]


def test_oversized_frame_streamed_is_never_buffered_whole() -> None:
    framer = LineFramer(max_frame=100)
    assert framer.feed(b'{"id":"big","data":"') == []
    for _ in range(1000):
        assert framer.feed(b"y" * 1000) == []
        assert framer.pending() <= 100  # skipped, not kept
    frames = framer.feed(b'"}\n{"id":2}\n')
    assert type(frames[0]) is OversizedFrame
    assert bytes(frames[0]).startswith(b'{"id":"big"')
    assert len(bytes(frames[0])) <= 4096
    assert frames[1] == b'{"id":2}'


def test_frame_exactly_at_the_limit_is_accepted() -> None:
    framer = LineFramer(max_frame=10)
    assert framer.feed(b"0123456789\n") == [b"0123456789"]
    assert framer.feed(b"01234") == []
    assert shape(framer.feed(b"56789\n")) == [("bytes", b"0123456789", 0)]
    assert type(framer.feed(b"0123456789A\n")[0]) is OversizedFrame
    assert type(framer.feed(b"0123456789\r\n")[0]) is OversizedFrame  # the CR counts towards the limit


line_bytes = st.binary(max_size=60).map(lambda b: b.replace(b"\n", b""))


@settings(max_examples=120, deadline=None)
@given(
    lines=st.lists(line_bytes, max_size=12),
    endings=st.lists(st.sampled_from([b"\n", b"\r\n"]), min_size=12, max_size=12),
    limit=st.integers(min_value=2, max_value=80),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=20),
)
@example(lines=[b"\x0c", b" \x0b ", b"\t"], endings=[b"\n"] * 12, limit=80, cuts=[1])  # not JSON whitespace
def test_chunked_feeding_equals_whole_feeding(
    lines: list[bytes], endings: list[bytes], limit: int, cuts: list[int]
) -> None:
    data = b"".join(line + end for line, end in zip(lines, endings, strict=False))
    whole = LineFramer(limit).feed(data)
    one_by_one = feed_all(LineFramer(limit), [data[i : i + 1] for i in range(len(data))])
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    chunked = feed_all(LineFramer(limit), [data[a:b] for a, b in itertools.pairwise(points)])
    assert shape(one_by_one) == shape(whole)
    assert shape(chunked) == shape(whole)
    # and the frames are exactly the non-blank lines (oversized ones marked)
    expected = []
    for line, end in zip(lines, endings, strict=False):
        raw = line + end[:-1]  # what precedes the newline, CR included: it counts towards the limit
        body = raw[:-1] if raw.endswith(b"\r") else raw
        if len(raw) > limit:
            expected.append("OversizedFrame")
        elif body.strip(b" \t\r\n"):  # only JSON whitespace makes a line blank
            expected.append("bytes")
    assert [kind for kind, _, _ in shape(whole)] == expected


@pytest.mark.anyio
async def test_oversized_frame_over_a_socket_gets_an_invalid_request_with_its_id() -> None:
    server = make_server()
    async with anyio.create_task_group() as tg:
        port = await tg.start(lambda task_status: serve_tcp(server, port=0, max_frame=1024, task_status=task_status))
        async with await anyio.connect_tcp("127.0.0.1", port) as conn:
            buffered = BufferedByteReceiveStream(conn)

            async def reply() -> dict[str, object]:
                with anyio.fail_after(10):
                    return json.loads(await buffered.receive_until(b"\n", 1 << 20))  # type: ignore[no-any-return]

            big_first = b'{"jsonrpc":"2.0","id":42,"method":"ping","params":{"pad":"' + b"z" * 5000 + b'"}}\n'
            await conn.send(big_first)
            assert await reply() == {
                "jsonrpc": "2.0",
                "id": 42,
                "error": {"code": -32600, "message": "Invalid Request: message exceeds the 1024-byte limit"},
            }
            # the id comes too late to be seen: answered without one
            big_last = b'{"jsonrpc":"2.0","method":"ping","params":{"pad":"' + b"z" * 5000 + b'"},"id":43}\n'
            await conn.send(big_last)
            assert await reply() == {
                "jsonrpc": "2.0",
                "error": {"code": -32600, "message": "Invalid Request: message exceeds the 1024-byte limit"},
            }
            # an oversized frame without an id, in one write with a request: the request's id is not borrowed
            no_id = b'{"jsonrpc":"2.0","method":"ping","params":{"pad":"' + b"z" * 1500 + b'"}}\n'
            await conn.send(no_id + b'{"jsonrpc":"2.0","id":45,"method":"ping"}\n')
            assert "id" not in await reply()
            assert await reply() == {"jsonrpc": "2.0", "id": 45, "result": {}}
            # sent in many small writes, then a normal request in the same write as its end
            await conn.send(b'{"jsonrpc":"2.0","id":"s","method":"ping","params":{"pad":"')
            for _ in range(20):
                await conn.send(b"q" * 500)
            await conn.send(b'"}}\n{"jsonrpc":"2.0","id":44,"method":"ping"}\n')
            assert (await reply())["id"] == "s"
            assert await reply() == {"jsonrpc": "2.0", "id": 44, "result": {}}
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_oversized_response_fails_the_pending_call_at_once() -> None:
    from jsonrpc_mcp import Client, RequestTimeout, RpcError
    from jsonrpc_mcp.transports.socket import connect_tcp

    server = make_server()
    async with anyio.create_task_group() as tg:
        port = await tg.start(lambda task_status: serve_tcp(server, port=0, task_status=task_status))
        async with (
            connect_tcp("127.0.0.1", port, max_frame=2000) as stream,
            Client.connect(stream, protocol_version="2025-11-25", request_timeout=0.5) as client,
        ):
            with pytest.raises(RpcError) as info:
                await client.call_tool("echo", {"text": "x" * 5000})  # the answer is over the client's limit
            assert not isinstance(info.value, RequestTimeout)
        tg.cancel_scope.cancel()


def test_a_line_split_across_chunks_is_joined_before_the_next_frames() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"a":1}\n{"b":') == [b'{"a":1}']
    assert framer.feed(b'2}\n{"c":3}\n{"d"') == [b'{"b":2}', b'{"c":3}']
    assert framer.pending() == 4
    assert framer.feed(b":4}\r\n \n") == [b'{"d":4}']
    assert framer.pending() == 0
