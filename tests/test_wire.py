# ruff: noqa: E501  (the case table keeps one case per line)
"""What goes on the wire for every edge case: raw bytes in, exact bytes out (or silence).

Each row of :data:`CASES` runs against a real :class:`~jsonrpc_mcp.Server` over the in-memory transport, after
an ``initialize`` at the row's protocol version (``None``: no handshake at all). The expected value is the exact
list of frames the server writes in answer: ``[]`` is silence (checked with a ping sentinel, see
:mod:`helpers`). Below the table: hypothesis round trips of the envelope codec.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from helpers import raw_server
from hypothesis import given, settings
from hypothesis import strategies as st

from jsonrpc_mcp import Server
from jsonrpc_mcp.errors import InvalidRequest, ParseError
from jsonrpc_mcp.jsonrpc import wire
from jsonrpc_mcp.jsonrpc.wire import (
    ErrorResponse,
    Notification,
    OversizedFrame,
    Request,
    Response,
    classify,
    decode_frame,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
)

pytestmark = pytest.mark.anyio


def make_plain() -> Server:
    """Tools and one resource; no prompts, no completions. (Inline: the cases pin the answers of each frame, and
    an answer made at once comes before the ping that ``exchange`` sends after the frame.)"""
    server = Server("wire", "1.0")

    @server.tool(inline=True)
    def add(a: int, b: int = 0) -> int:
        """Add two integers."""
        return a + b

    @server.tool(inline=True)
    def crash() -> str:
        """Always fails."""
        raise RuntimeError("leaked secret at /home/alice/project/secret.py line 3")

    @server.resource("text://hello", inline=True)
    def hello() -> str:
        return "hi"

    return server


def make_prompted() -> Server:
    server = make_plain()

    @server.prompt(inline=True)
    def greet(name: str) -> str:
        return f"Hello {name}"

    return server


SERVERS = {"plain": make_plain, "prompted": make_prompted}

PLAIN_CAPS = b'{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"logging":{}}'
INFO = b'{"name":"wire","version":"1.0"}'
R5_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def init(version: str, ident: Any = 1) -> bytes:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "initialize", "params": params}).encode()


def init_reply(version: str, ident: bytes = b"1") -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":'
        + ident
        + b',"result":{"protocolVersion":"'
        + version.encode()
        + b'","capabilities":'
        + PLAIN_CAPS
        + b',"serverInfo":'
        + INFO
        + b"}}"
    )


def err(ident: bytes | None, code: int, message: str, data: bytes | None = None) -> bytes:
    head = b'{"jsonrpc":"2.0",' + (b'"id":' + ident + b"," if ident is not None else b"")
    body = b'"error":{"code":' + str(code).encode() + b',"message":' + json.dumps(message).encode()
    if data is not None:
        body += b',"data":' + data
    return head + body + b"}}"


def ok(ident: bytes, result: bytes = b"{}") -> bytes:
    return b'{"jsonrpc":"2.0","id":' + ident + b',"result":' + result + b"}"


LONG_ID = b"1" + b"0" * 4300  # one digit past Python's int-string conversion limit
PING1 = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
PING2 = b'{"jsonrpc":"2.0","id":2,"method":"ping"}'
NOTE = b'{"jsonrpc":"2.0","method":"notifications/unknown"}'
NOT_SUPPORTED = err(None, -32600, "Invalid Request: batches are not supported")
ADD_BAD_ARGS = (
    b'{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":'
    b'"Invalid arguments for tool add: a: Expected `int`, got `str`"}],"isError":true}}'
)
CRASH_REPLY = (
    b'{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":'
    b'"Tool crash failed: an internal error occurred"}],"isError":true}}'
)


@dataclass(frozen=True)
class Case:
    name: str
    version: str | None  # the handshake done first, None for none
    frame: bytes
    expected: list[bytes]  # [] is silence
    server: str = "plain"


V4, V3, V2, V1 = "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"

CASES = [
    # --- bytes that are not JSON: -32700, no id (it could not be read) ---------------------------------------
    Case(
        "parse-error-truncated",
        V4,
        b'{"jsonrpc":"2.0","id":1,"method":',
        [err(None, -32700, "Parse error: invalid JSON")],
    ),
    Case("parse-error-garbage", None, b"hello world", [err(None, -32700, "Parse error: invalid JSON")]),
    Case("parse-error-trailing", V4, PING1 + b" x", [err(None, -32700, "Parse error: invalid JSON")]),
    # (a value followed by junk, or an array cut short: the typed decode saw the wrong shape first, but it is not JSON)
    Case("parse-error-number-then-garbage", V4, b"8 garbage", [err(None, -32700, "Parse error: invalid JSON")]),
    Case("parse-error-string-then-garbage", V4, b'"a" b', [err(None, -32700, "Parse error: invalid JSON")]),
    Case("parse-error-broken-array", V4, b"[1,", [err(None, -32700, "Parse error: invalid JSON")]),
    Case("parse-error-broken-array-no-handshake", None, b"[1,", [err(None, -32700, "Parse error: invalid JSON")]),
    Case("parse-error-form-feed", V4, b"\x0c", [err(None, -32700, "Parse error: invalid JSON")]),
    Case(
        "parse-error-vertical-tab-before-a-ping", V4, b"\x0b" + PING1, [err(None, -32700, "Parse error: invalid JSON")]
    ),
    Case(
        "lone-surrogate-inside-params",
        V4,
        b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"a":"x\\ud800y"}}',
        [err(b"5", -32700, "Parse error: a string holds an unpaired surrogate escape")],
    ),
    Case(
        "lone-low-surrogate-inside-params",
        V4,
        b'{"jsonrpc":"2.0","id":"s","method":"ping","params":{"a":"\\udc00"}}',
        [err(b'"s"', -32700, "Parse error: a string holds an unpaired surrogate escape")],
    ),
    Case(
        "lone-surrogate-inside-a-notification",
        V4,
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"\\ud800","progress":1}}',
        [],
    ),
    Case(
        "lone-surrogate-inside-the-id",
        V4,
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
        [err(None, -32700, "Parse error: a string holds an unpaired surrogate escape")],
    ),
    Case(
        "surrogate-pair-is-fine",
        V4,
        b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"a":"\\ud83d\\ude00"}}',
        [ok(b"5")],
    ),
    Case(
        "escaped-backslash-before-ud800-is-no-surrogate",
        V4,
        b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"a":"\\\\ud800"}}',
        [ok(b"5")],
    ),
    Case(
        "parse-error-invalid-utf8",
        V4,
        b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
        [err(None, -32700, "Parse error: invalid JSON")],
    ),
    Case(
        "invalid-utf8-inside-params",
        V4,
        b'{"jsonrpc":"2.0","id":"u","method":"tools/call","params":{"name":"add","arguments":{"a":"\xc3\x28"}}}',
        [err(b'"u"', -32700, "Parse error: invalid UTF-8 in a string")],
    ),
    Case(
        "invalid-utf8-inside-notification",
        V4,
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"\xff","progress":1}}',
        [],
    ),
    Case(
        "valid-utf8-inside-params",
        V4,
        '{"jsonrpc":"2.0","id":"v","method":"ping","params":{"x":"é☃"}}'.encode(),
        [ok(b'"v"')],
    ),
    # --- JSON, but not a valid request: -32600, the id echoed when it is readable ----------------------------
    Case("not-an-object", V4, b"42", [err(None, -32600, "Invalid Request: a message must be a JSON object")]),
    Case("string-frame", V4, b'"ping"', [err(None, -32600, "Invalid Request: a message must be a JSON object")]),
    Case(
        "id-out-of-range",
        V4,
        b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
        [err(None, -32600, 'Invalid Request: "id" must be a string or an integer')],
    ),
    Case(
        "method-out-of-range",
        V4,
        b'{"jsonrpc":"2.0","id":3,"method":-1e999}',
        [err(b"3", -32600, "Invalid Request: a number is out of range")],
    ),
    Case(
        "number-out-of-range-after-a-long-id",
        V4,
        b'{"jsonrpc":"2.0","id":' + LONG_ID + b',"method":-1e999}',
        [err(LONG_ID, -32600, "Invalid Request: a number is out of range")],
    ),
    Case(
        "notification-number-out-of-range",
        V4,
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{},"x":1e999}',
        [],
    ),
    Case(
        "bad-jsonrpc-version",
        V4,
        b'{"jsonrpc":"1.0","id":7,"method":"ping"}',
        [err(b"7", -32600, 'Invalid Request: "jsonrpc" must be exactly "2.0"')],
    ),
    Case(
        "missing-jsonrpc",
        V4,
        b'{"id":"a","method":"ping"}',
        [err(b'"a"', -32600, 'Invalid Request: "jsonrpc" must be exactly "2.0"')],
    ),
    Case(
        "method-not-string",
        V4,
        b'{"jsonrpc":"2.0","id":8,"method":42}',
        [err(b"8", -32600, 'Invalid Request: "method" must be a string')],
    ),
    Case(
        "params-array",
        V4,
        b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":[]}',
        [err(b"9", -32600, 'Invalid Request: "params" must be an object')],
    ),
    Case(
        "params-string",
        V4,
        b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":"x"}',
        [err(b"9", -32600, 'Invalid Request: "params" must be an object')],
    ),
    Case(
        "params-null",
        V4,
        b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":null}',
        [err(b"9", -32600, 'Invalid Request: "params" must be an object')],
    ),
    Case(
        "id-null",
        V4,
        b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
        [err(None, -32600, 'Invalid Request: "id" must be a string or an integer')],
    ),
    Case(
        "id-bool",
        V4,
        b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
        [err(None, -32600, 'Invalid Request: "id" must be a string or an integer')],
    ),
    Case(
        "id-fraction",
        V4,
        b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}',
        [err(None, -32600, 'Invalid Request: "id" must be a string or an integer')],
    ),
    Case(
        "id-float-integral",
        V4,
        b'{"jsonrpc":"2.0","id":1.0,"method":"ping"}',
        [err(None, -32600, 'Invalid Request: "id" must be a string or an integer')],
    ),
    Case(
        "id-object",
        V4,
        b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
        [err(None, -32600, 'Invalid Request: "id" must be a string or an integer')],
    ),
    Case(
        "neither-request-nor-response",
        V4,
        b'{"jsonrpc":"2.0","id":5}',
        [err(b"5", -32600, "Invalid Request: not a request, notification or response")],
    ),
    Case(
        "too-deep",
        V4,
        b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"a":' + b"[" * 5000 + b"]" * 5000 + b"}}",
        [err(b"6", -32600, "Invalid Request: message is nested too deeply")],
    ),
    # --- method lookup and params -----------------------------------------------------------------------------
    Case(
        "method-not-found",
        V4,
        b'{"jsonrpc":"2.0","id":3,"method":"foo/bar"}',
        [err(b"3", -32601, "Method not found: foo/bar")],
    ),
    Case(
        "invalid-params",
        V4,
        b'{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":5}}',
        [err(b"3", -32602, "Invalid params: Expected `str`, got `int` - at `$.uri`")],
    ),
    Case(
        "invalid-params-missing",
        V4,
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}',
        [err(b"3", -32602, "Invalid params: Object missing required field `name`")],
    ),
    Case(
        "tools-call-arguments-not-object",
        V4,
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":[1]}}',
        [err(b"3", -32602, 'Invalid params: "arguments" must be an object')],
    ),
    Case(
        "tools-call-arguments-null",
        V4,
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments": null }}',
        [err(b"3", -32602, 'Invalid params: "arguments" must be an object')],
    ),
    Case(
        "bad-log-level",
        V4,
        b'{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"loud"}}',
        [err(b"3", -32602, "Invalid params: unknown log level 'loud'")],
    ),
    # --- lifecycle ---------------------------------------------------------------------------------------------
    Case(
        "request-before-initialize",
        None,
        b'{"jsonrpc":"2.0","id":"x","method":"tools/list"}',
        [err(b'"x"', -32600, "Invalid Request: the session is not initialized; send initialize first")],
    ),
    Case("ping-before-initialize", None, b'{"jsonrpc":"2.0","id":"p","method":"ping"}', [ok(b'"p"')]),
    Case("initialized-before-initialize", None, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', []),
    Case("initialize-unknown-version", None, init("1999-01-01"), [init_reply(V4)]),
    Case("initialize-garbage-version", None, init("latest please"), [init_reply(V4)]),
    Case("initialize-2025-11-25", None, init(V4), [init_reply(V4)]),
    Case("initialize-2025-06-18", None, init(V3), [init_reply(V3)]),
    Case("initialize-2025-03-26", None, init(V2), [init_reply(V2)]),
    Case("initialize-2024-11-05", None, init(V1), [init_reply(V1)]),
    Case("initialize-again", V4, init(V4, 2), [init_reply(V4, b"2")]),
    Case(
        "initialize-twice", V4, init(V2, 2), [err(b"2", -32600, "Invalid Request: the session is already initialized")]
    ),
    Case(
        "initialize-without-params",
        None,
        b'{"jsonrpc":"2.0","id":1,"method":"initialize"}',
        [err(b"1", -32602, "Invalid params: initialize needs protocolVersion, capabilities and clientInfo")],
    ),
    # --- notifications are never answered ----------------------------------------------------------------------
    Case("unknown-notification", V4, NOTE, []),
    Case("unknown-notification-before-init", None, NOTE, []),
    Case("notification-params-array", V4, b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}', []),
    Case("notification-bad-version", V4, b'{"jsonrpc":"1.0","method":"notifications/initialized"}', []),
    Case("notification-method-not-string", V4, b'{"jsonrpc":"2.0","method":17}', []),
    Case(
        "cancel-unknown-request",
        V4,
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}',
        [],
    ),
    Case(
        "cancel-malformed",
        V4,
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"x":[]}}}',
        [],
    ),
    Case(
        "progress-unknown-token",
        V4,
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}',
        [],
    ),
    Case("response-to-unknown-id", V4, b'{"jsonrpc":"2.0","id":12345,"result":{}}', []),
    # --- shaped like a response ("result" or "error", no "method"): never answered, however malformed -----------
    Case("response-error-null", V4, b'{"jsonrpc":"2.0","id":8,"error":null}', []),
    Case("response-error-not-an-object", V4, b'{"jsonrpc":"2.0","id":8,"error":"boom"}', []),
    Case("response-error-code-not-integer", V4, b'{"jsonrpc":"2.0","id":8,"error":{"code":"x","message":"m"}}', []),
    Case("response-error-code-out-of-range", V4, b'{"jsonrpc":"2.0","id":8,"error":{"code":1e999,"message":"m"}}', []),
    Case("response-result-and-error", V4, b'{"jsonrpc":"2.0","id":8,"result":{},"error":{"code":1,"message":"m"}}', []),
    Case("response-without-id", V4, b'{"jsonrpc":"2.0","result":{}}', []),
    Case("response-id-null", V4, b'{"jsonrpc":"2.0","id":null,"result":{}}', []),
    Case("response-bad-jsonrpc", V4, b'{"jsonrpc":"1.0","id":8,"result":{}}', []),
    Case("response-no-jsonrpc", V4, b'{"id":8,"error":{"code":-32600,"message":"m"}}', []),
    Case("response-invalid-utf8", V4, b'{"jsonrpc":"2.0","id":8,"result":{"a":"\xff"}}', []),
    Case("response-lone-surrogate", V4, b'{"jsonrpc":"2.0","id":8,"result":{"a":"\\ud800"}}', []),
    Case("error-response-without-id-is-not-answered", V4, err(None, -32600, "Invalid Request: x"), []),
    Case("error-to-unknown-id", V4, b'{"jsonrpc":"2.0","id":12345,"error":{"code":-1,"message":"no"}}', []),
    # --- ids are kept exactly ----------------------------------------------------------------------------------
    Case("id-string-one", V4, b'{"jsonrpc":"2.0","id":"1","method":"ping"}', [ok(b'"1"')]),
    Case("id-big", V4, b'{"jsonrpc":"2.0","id":18446744073709551617,"method":"ping"}', [ok(b"18446744073709551617")]),
    Case("id-negative", V4, b'{"jsonrpc":"2.0","id":-9007199254740993,"method":"ping"}', [ok(b"-9007199254740993")]),
    Case("id-zero", V4, b'{"jsonrpc":"2.0","id":0,"method":"ping"}', [ok(b"0")]),
    Case("id-4300-digits", V4, b'{"jsonrpc":"2.0","id":' + b"7" * 4300 + b',"method":"ping"}', [ok(b"7" * 4300)]),
    Case("id-4301-digits", V4, b'{"jsonrpc":"2.0","id":' + LONG_ID + b',"method":"ping"}', [ok(LONG_ID)]),
    Case("id-long-negative", V4, b'{"jsonrpc":"2.0","id":-' + LONG_ID + b',"method":"ping"}', [ok(b"-" + LONG_ID)]),
    Case(
        "id-long-with-an-invalid-method",
        V4,
        b'{"jsonrpc":"2.0","id":' + LONG_ID + b',"method":7}',
        [err(LONG_ID, -32600, 'Invalid Request: "method" must be a string')],
    ),
    Case(
        "id-long-unknown-method",
        V4,
        b'{"jsonrpc":"2.0","id":' + LONG_ID + b',"method":"nope"}',
        [err(LONG_ID, -32601, "Method not found: nope")],
    ),
    Case(
        "id-long-tool-call",
        V4,
        b'{"jsonrpc":"2.0","id":' + LONG_ID + b',"method":"tools/call","params":{"name":"add","arguments":{"a":2}}}',
        [ok(LONG_ID, b'{"content":[{"type":"text","text":"{\\"result\\":2}"}],"structuredContent":{"result":2}}')],
    ),
    Case(
        "id-long-fraction",
        V4,
        b'{"jsonrpc":"2.0","id":' + LONG_ID + b'.5,"method":"ping"}',
        [err(None, -32600, 'Invalid Request: "id" must be a string or an integer')],
    ),
    Case("id-empty-string", V4, b'{"jsonrpc":"2.0","id":"","method":"ping"}', [ok(b'""')]),
    Case("id-unicode", V4, '{"jsonrpc":"2.0","id":"ü\\n☃","method":"ping"}'.encode(), [ok('"ü\\n☃"'.encode())]),
    Case("unknown-fields-ignored", V4, b'{"jsonrpc":"2.0","id":1,"method":"ping","extra":{"x":1}}', [ok(b"1")]),
    # --- batches: arrays only on 2025-03-26 --------------------------------------------------------------------
    Case("batch-2025-03-26", V2, b"[" + PING1 + b"," + PING2 + b"]", [b"[" + ok(b"1") + b"," + ok(b"2") + b"]"]),
    Case(
        "batch-mixed-2025-03-26",
        V2,
        b"[" + PING1 + b"," + NOTE + b',{"jsonrpc":"2.0","id":3,"method":"nope"},5]',
        [
            b"["
            + ok(b"1")
            + b","
            + err(b"3", -32601, "Method not found: nope")
            + b","
            + err(None, -32600, "Invalid Request: a message must be a JSON object")
            + b"]"
        ],
    ),
    Case("batch-only-notifications", V2, b"[" + NOTE + b"," + NOTE + b"]", []),
    Case("batch-malformed-notification", V2, b'[{"jsonrpc":"2.0","method":"x","params":[]}]', []),
    Case("batch-empty-2025-03-26", V2, b"[]", [err(None, -32600, "Invalid Request: empty batch")]),
    Case("batch-parse-error", V2, b"[" + PING1 + b",", [err(None, -32700, "Parse error: invalid JSON")]),
    Case("batch-2025-11-25", V4, b"[" + PING1 + b"]", [NOT_SUPPORTED]),
    Case("batch-2025-06-18", V3, b"[" + PING1 + b"]", [NOT_SUPPORTED]),
    Case("batch-2024-11-05", V1, b"[" + PING1 + b"]", [NOT_SUPPORTED]),
    Case("batch-before-initialize", None, b"[" + PING1 + b"]", [NOT_SUPPORTED]),
    Case("batch-empty-2025-11-25", V4, b"[]", [NOT_SUPPORTED]),
    # --- capability gates and method-level errors ---------------------------------------------------------------
    Case(
        "prompts-not-advertised",
        V4,
        b'{"jsonrpc":"2.0","id":2,"method":"prompts/list"}',
        [err(b"2", -32601, "Method not found: prompts/list")],
    ),
    Case(
        "completion-not-advertised",
        V4,
        b'{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"x"},"argument":{"name":"a","value":""}}}',
        [err(b"2", -32601, "Method not found: completion/complete")],
    ),
    Case(
        "stateless-only-method-on-handshake",
        V4,
        b'{"jsonrpc":"2.0","id":2,"method":"server/discover"}',
        [err(b"2", -32601, "Method not found: server/discover")],
    ),
    Case(
        "unknown-tool",
        V4,
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope"}}',
        [err(b"2", -32602, "Unknown tool: nope")],
    ),
    Case(
        "unknown-resource",
        V4,
        b'{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///nope"}}',
        [err(b"2", -32002, "Resource not found", b'{"uri":"file:///nope"}')],
    ),
    Case(
        "unknown-resource-2024-11-05",
        V1,
        b'{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"x:y"}}',
        [err(b"2", -32002, "Resource not found", b'{"uri":"x:y"}')],
    ),
    Case(
        "sep-1303-bad-arguments",
        V4,
        b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add","arguments":{"a":"one"}}}',
        [ADD_BAD_ARGS],
    ),
    Case(
        "sep-1303-missing-argument",
        V4,
        b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add","arguments":{}}}',
        [
            b'{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"Invalid arguments for tool add: Object missing required field `a`"}],"isError":true}}'
        ],
    ),
    Case("tool-raises", V4, b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"crash"}}', [CRASH_REPLY]),
    Case(
        "tool-ok",
        V4,
        b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}',
        [ok(b"5", b'{"content":[{"type":"text","text":"{\\"result\\":5}"}],"structuredContent":{"result":5}}')],
    ),
    Case(
        "unknown-prompt",
        V4,
        b'{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"nope"}}',
        [err(b"6", -32602, "Unknown prompt: nope")],
        "prompted",
    ),
    Case(
        "prompt-missing-argument",
        V4,
        b'{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"greet"}}',
        [err(b"6", -32602, "Missing required argument(s) for prompt greet: name")],
        "prompted",
    ),
    Case(
        "bad-cursor",
        V4,
        b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"not-a-cursor"}}',
        [err(b"7", -32602, "Invalid params: invalid cursor")],
    ),
    Case(
        "resource-ok",
        V4,
        b'{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"text://hello"}}',
        [ok(b"8", b'{"contents":[{"uri":"text://hello","mimeType":"text/plain","text":"hi"}]}')],
    ),
    # --- the stateless era on the same connection (2026-07-28, no handshake needed) ----------------------------
    Case(
        "stateless-ping-removed",
        None,
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": R5_META}}).encode(),
        [err(b"1", -32601, "Method not found: ping")],
    ),
    Case(
        "stateless-unknown-resource",
        None,
        json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "x:y", "_meta": R5_META}}
        ).encode(),
        [err(b"1", -32602, "Resource not found", b'{"uri":"x:y"}')],
    ),
    Case(
        "stateless-unsupported-version",
        None,
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/list",
                "params": {"_meta": {**R5_META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}},
            }
        ).encode(),
        [
            err(
                b"1",
                -32022,
                "Unsupported protocol version: '2099-01-01'",
                b'{"supported":["2026-07-28"],"requested":"2099-01-01"}',
            )
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_wire_case(case: Case) -> None:
    assert len({c.name for c in CASES}) == len(CASES)
    async with raw_server(SERVERS[case.server](), version=case.version) as peer:
        got = await peer.exchange(case.frame)
        assert got == case.expected
        # Whatever the frame was, the connection still works.
        assert await peer.exchange(b'{"jsonrpc":"2.0","id":"after","method":"ping"}') == [ok(b'"after"')]


async def test_tool_failure_never_leaks_the_exception(caplog: pytest.LogCaptureFixture) -> None:
    async with raw_server(make_plain(), version=V4) as peer:
        got = await peer.exchange(b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"crash"}}')
    assert got == [CRASH_REPLY]
    text = got[0].decode()
    assert "secret" not in text and "/home" not in text and "Traceback" not in text and "RuntimeError" not in text
    # The details went to the log instead.
    logged = [r for r in caplog.records if r.exc_info and "crash" in r.getMessage()]
    assert logged and "leaked secret" in str(logged[0].exc_info[1])


async def test_batch_with_async_requests_answers_one_array() -> None:
    """A batch whose requests finish later is still answered by one array holding every reply."""
    server = make_plain()

    @server.tool()
    async def later(x: int) -> int:
        return x

    async with raw_server(server, version=V2) as peer:
        calls = [
            {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "later", "arguments": {"x": i}}}
            for i in (1, 2)
        ]
        await peer.send(json.dumps([*calls, {"jsonrpc": "2.0", "id": 3, "method": "ping"}]).encode())
        reply = await peer.recv_json()
    assert isinstance(reply, list)
    assert sorted(r["id"] for r in reply) == [1, 2, 3]
    by_id = {r["id"]: r for r in reply}
    assert by_id[1]["result"]["structuredContent"] == {"result": 1}
    assert by_id[2]["result"]["structuredContent"] == {"result": 2}


# --- the envelope codec: hypothesis round trips ---------------------------------------------------------------

ids = st.one_of(st.text(max_size=40), st.integers(min_value=-(2**70), max_value=2**70))
methods = st.text(min_size=1, max_size=40)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
objects = st.dictionaries(st.text(max_size=10), json_values, max_size=5)


def roundtrip(frame: bytes) -> Any:
    return classify(decode_frame(frame))


@settings(max_examples=60, deadline=None)
@given(ident=ids, method=methods, params=st.none() | objects)
def test_request_roundtrip(ident: str | int, method: str, params: dict[str, Any] | None) -> None:
    frame = encode_request(ident, method, None if params is None else msgspec.json.encode(params))
    msg = roundtrip(frame)
    assert type(msg) is Request
    assert msg.id == ident and type(msg.id) is type(ident)
    assert msg.method == method
    assert (None if msg.params is None else msgspec.json.decode(msg.params)) == params


@settings(max_examples=50, deadline=None)
@given(method=methods, params=st.none() | objects)
def test_notification_roundtrip(method: str, params: dict[str, Any] | None) -> None:
    frame = encode_notification(method, None if params is None else msgspec.json.encode(params))
    msg = roundtrip(frame)
    assert type(msg) is Notification
    assert msg.method == method
    assert (None if msg.params is None else msgspec.json.decode(msg.params)) == params


@settings(max_examples=60, deadline=None)
@given(ident=ids, result=objects)
def test_result_roundtrip(ident: str | int, result: dict[str, Any]) -> None:
    msg = roundtrip(encode_result(ident, msgspec.json.encode(result)))
    assert type(msg) is Response
    assert msg.id == ident and type(msg.id) is type(ident)
    assert msgspec.json.decode(msg.result) == result


@settings(max_examples=60, deadline=None)
@given(ident=st.none() | ids, code=st.integers(-(2**31), 2**31), message=st.text(max_size=40), data=json_values)
def test_error_roundtrip(ident: str | int | None, code: int, message: str, data: Any) -> None:
    frame = encode_error(ident, code, message, data)
    raw = json.loads(frame)
    assert ("id" in raw) is (ident is not None)  # never "id": null
    msg = roundtrip(frame)
    assert type(msg) is ErrorResponse
    assert msg.id == ident and type(msg.id) is type(ident)
    assert (msg.code, msg.message, msg.data) == (code, message, data)


@settings(max_examples=50, deadline=None)
@given(
    ident=st.one_of(
        st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False), st.lists(st.integers(), max_size=2)
    )
)
def test_invalid_ids_are_refused(ident: Any) -> None:
    frame = json.dumps({"jsonrpc": "2.0", "id": ident, "method": "ping"}).encode()
    with pytest.raises(InvalidRequest) as info:
        roundtrip(frame)
    assert info.value.request_id is None  # type: ignore[attr-defined]


@settings(max_examples=50, deadline=None)
@given(ident=ids, junk=st.sampled_from([b'"jsonrpc":"1.0"', b'"method":1', b'"params":[1]']))
def test_invalid_request_keeps_a_readable_id(ident: str | int, junk: bytes) -> None:
    fields = {"jsonrpc": "2.0", "id": ident, "method": "m"}
    key = junk.split(b":")[0].strip(b'"').decode()
    fields[key] = json.loads(junk.split(b":", 1)[1])
    with pytest.raises(InvalidRequest) as info:
        roundtrip(json.dumps(fields).encode())
    assert info.value.request_id == ident  # type: ignore[attr-defined]


def test_is_batch_looks_past_whitespace() -> None:
    assert wire.is_batch(b" \r\n\t[1]")
    assert not wire.is_batch(b' {"a":[1]}')
    assert not wire.is_batch(b"")


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"text":"xxx', 7),
        (b'{"jsonrpc":"2.0","method":"tools/call","params":{"id":99,"text":"xxx', None),  # params' own "id"
        (b'{"method":"m","params":{"id":99,"s":"}"},"id":"abc","pad":"xx', "abc"),  # past a brace in a string
        (b'{"params":{"s":"\\"id\\":5"},"id":3,"pad":"', 3),  # an escaped "id" inside a string
        (b'{"x":"id","id":"q","pad":"', "q"),  # "id" as a value is not the key
        (b'[{"id":1},{"id":2},', None),  # a batch has no one id
    ],
)
def test_an_oversized_frame_is_answered_with_its_top_level_id_only(prefix: bytes, expected: Any) -> None:
    frame = OversizedFrame(prefix)
    frame.limit = 16
    with pytest.raises(InvalidRequest) as caught:
        decode_frame(frame)
    assert getattr(caught.value, "request_id", None) == expected


def nested(depth: int) -> bytes:
    """A request whose frame nests exactly ``depth`` levels (the envelope's own object is the first)."""
    inner = b"[" * (depth - 2) + b"]" * (depth - 2)
    return b'{"jsonrpc":"2.0","id":4,"method":"m","params":{"a":' + inner + b"}}"


def test_the_nesting_limit_is_the_librarys_own() -> None:
    """MAX_DEPTH levels are read, one more is refused with the id sniffed, on every Python version alike (the
    interpreter's recursion limit, about 1,000 on 3.11 and far more on 3.13, is never what decides)."""
    assert isinstance(wire.read_message(nested(wire.MAX_DEPTH)), Request)
    for depth in (wire.MAX_DEPTH + 1, 600, 5_000, 100_000):
        with pytest.raises(InvalidRequest, match="nested too deeply") as caught:
            decode_frame(nested(depth))
        assert getattr(caught.value, "request_id", None) == 4
    with pytest.raises(InvalidRequest, match="nested too deeply"):
        wire.decode_batch(b"[" + nested(wire.MAX_DEPTH) + b"]")
    assert len(wire.decode_batch(b"[" + nested(wire.MAX_DEPTH - 1) + b"]")) == 1


@pytest.mark.parametrize(
    "text",
    [
        b"[" * 300,  # brackets inside a string are text
        b'\\"' + b"{" * 300,  # after an escaped quote the string goes on
        b"\\\\\\\\" + b"x" * 10,  # an escaped backslash does not escape the closing quote
    ],
)
def test_brackets_inside_strings_do_not_count(text: bytes) -> None:
    flat = b"[" + b",".join([b"{}"] * 300) + b"]"  # many brackets, shallow
    frame = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"s":"' + text + b'","t":' + flat + b"}}"
    json.loads(frame)  # (valid JSON)
    assert not wire.nested_too_deeply(frame)
    assert isinstance(wire.read_message(frame), Request)
    assert wire.nested_too_deeply(frame.replace(b'"t":', b'"t":' + b"[" * 300).replace(b"}}", b"]" * 300 + b"}}"))


@settings(max_examples=200, deadline=None)
@given(
    value=st.recursive(
        st.none() | st.text(alphabet='[]{}"\\ab'),
        lambda kids: st.lists(kids) | st.dictionaries(st.text(alphabet='[]{}"\\'), kids),
        max_leaves=40,
    )
)
def test_the_measured_depth_is_the_real_depth(value: Any) -> None:
    def depth(v: Any) -> int:
        if isinstance(v, list):
            return 1 + max(map(depth, v), default=0)
        if isinstance(v, dict):
            return 1 + max(map(depth, v.values()), default=0)
        return 0

    frame = json.dumps(value).encode()
    pad = wire.MAX_DEPTH - depth(value)  # wrap it to exactly the limit, then one level more
    assert not wire.nested_too_deeply(b"[" * pad + frame + b"]" * pad)
    assert wire.nested_too_deeply(b"[" * (pad + 1) + frame + b"]" * (pad + 1))


def test_a_long_integer_id_is_kept_as_its_digits_and_written_back_as_sent() -> None:
    digits = b"-" + b"9" * 5000
    msg = wire.read_message(b'{"jsonrpc":"2.0","id":' + digits + b',"method":"ping"}')
    assert type(msg) is Request and type(msg.id) is wire.LongIntId
    assert msg.id == wire.LongIntId(digits) and hash(msg.id) == hash(wire.LongIntId(digits))
    assert msg.id != digits.decode() and msg.id != wire.LongIntId(digits[1:])  # never a string id's equal
    assert encode_result(msg.id, b"{}") == b'{"jsonrpc":"2.0","id":' + digits + b',"result":{}}'
    assert encode_error(msg.id, -1, "m") == b'{"jsonrpc":"2.0","id":' + digits + b',"error":{"code":-1,"message":"m"}}'
    assert len(repr(msg.id)) < 60  # ids are logged: the repr stays short
    assert wire.valid_id(msg.id)


def test_ensure_json_checks_the_syntax_of_any_value() -> None:
    wire.ensure_json(b'[1, {"a": "b"}]')
    wire.ensure_json(b"8")
    for text in (b"8 garbage", b"[1,", b"\x0c", b"", b"[1]]"):
        with pytest.raises(ParseError):
            wire.ensure_json(text)
