# ruff: noqa: E501  (the frames are kept whole, one per line)
"""Odd frames end to end: the same bytes through a real stdio subprocess and a real uvicorn get the same verdicts
as in the wire table (:mod:`test_wire`): parse errors for text that is not JSON (a form feed included), a long
integer id written back digit for digit, the id kept past an unpaired surrogate, and silence for anything shaped
like a response."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
import httpx
import pytest
from helpers import init_frame, notification_frame, serve_command
from http_support import JSON_HEADERS, ServerThread, open_session, start_app

pytestmark = pytest.mark.anyio

LONG_ID = b"1" + b"0" * 4300
PARSE_ERROR = {"code": -32700, "message": "Parse error: invalid JSON"}
SURROGATE = {"code": -32700, "message": "Parse error: a string holds an unpaired surrogate escape"}

#: (frame, the one reply expected — None for silence)
ODD_FRAMES: list[tuple[bytes, bytes | None]] = [
    (b"8 garbage", b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: invalid JSON"}}'),
    (b"[1,", b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: invalid JSON"}}'),
    (b"\x0c", b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: invalid JSON"}}'),
    (b"\x0b", b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: invalid JSON"}}'),
    (
        b'{"jsonrpc":"2.0","id":' + LONG_ID + b',"method":"ping"}',
        b'{"jsonrpc":"2.0","id":' + LONG_ID + b',"result":{}}',
    ),
    (
        b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":"\\ud800"}}',
        b'{"jsonrpc":"2.0","id":7,"error":{"code":-32700,"message":"Parse error: a string holds an unpaired surrogate escape"}}',
    ),
    (b'{"jsonrpc":"2.0","id":8,"error":null}', None),
    (b'{"jsonrpc":"2.0","id":8,"result":{},"error":{"code":1,"message":"x"}}', None),
    (b'{"id":8,"result":{}}', None),
    (
        b'{"jsonrpc":"2.0","id":5}',
        b'{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"Invalid Request: not a request, notification or response"}}',
    ),
]


async def test_odd_frames_over_stdio() -> None:
    """Each frame on its own line, then a ping: what comes before the ping's answer is the frame's reply."""
    process = await anyio.open_process(serve_command(), stderr=subprocess.PIPE)
    async with process:
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        lines = [init_frame(), notification_frame("notifications/initialized")]
        for n, (frame, _) in enumerate(ODD_FRAMES):
            lines += [frame, b'{"jsonrpc":"2.0","id":"ping-%d","method":"ping"}' % n]
        await process.stdin.send(b"\n".join(lines) + b"\n")
        await process.stdin.aclose()
        out = b""
        with anyio.fail_after(20):
            async for chunk in process.stdout:
                out += chunk
            stderr = b"".join([chunk async for chunk in process.stderr])
            assert await process.wait() == 0
    replies = out.splitlines()
    assert json.loads(replies.pop(0))["id"] == 0  # initialize
    for n, (frame, expected) in enumerate(ODD_FRAMES):
        wanted = [expected] if expected is not None else []
        got = []
        while (reply := replies.pop(0)) != b'{"jsonrpc":"2.0","id":"ping-%d","result":{}}' % n:
            got.append(reply)
        assert got == wanted, frame[:60]
    assert replies == []
    assert b"Traceback" not in stderr


@pytest.fixture(scope="module")
def app() -> Any:
    thread: ServerThread = start_app()
    yield thread
    thread.stop()


async def test_odd_frames_over_http(app: ServerThread) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, app.url)
        for frame, expected in ODD_FRAMES:
            response = await http.post(app.url, content=frame, headers=session.headers)
            if expected is None:
                # Shaped like a response: refused at the HTTP level, and the refusal never carries its id.
                assert response.status_code == 400, frame
                assert "id" not in response.json() and response.json()["error"]["code"] == -32600
            elif b'"result"' in expected:
                assert response.status_code == 200 and response.content == expected, frame[:60]
            else:
                assert response.status_code == 400 and response.content == expected, frame[:60]
        # the session still answers
        ping = await session.post({"jsonrpc": "2.0", "id": "after", "method": "ping"})
        assert ping.json() == {"jsonrpc": "2.0", "id": "after", "result": {}}


async def test_a_batch_over_http_never_answers_its_malformed_notifications_or_responses(app: ServerThread) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, app.url, version="2025-03-26")
        batch = b'[{"jsonrpc":"2.0","id":8,"error":null},{"jsonrpc":"2.0","method":"x","params":[]},{"jsonrpc":"2.0","id":1,"method":"ping"}]'
        response = await http.post(app.url, content=batch, headers=session.headers)
        assert response.status_code == 200
        assert response.json() == [{"jsonrpc": "2.0", "id": 1, "result": {}}]  # the ping's answer alone
        # a batch that is not JSON is a parse error, checked before anything else
        broken = await http.post(app.url, content=b"[1,", headers={**JSON_HEADERS})
        assert broken.status_code == 400 and broken.json()["error"] == PARSE_ERROR
