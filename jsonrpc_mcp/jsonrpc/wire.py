"""The JSON-RPC 2.0 envelope: decode one frame, classify it, encode replies (L1: msgspec only).

Every frame is decoded into one :class:`Envelope` whose fields are deliberately loose (``Any`` and
:class:`msgspec.Raw`), so that a frame with a wrong field type still yields its ``id`` for the error reply.
Classification is by key presence, as the specification defines the message kinds:

==============================  ================
keys present                    kind
==============================  ================
``method`` and ``id``           request
``method``, no ``id``           notification
``id`` and ``result``           response
``error`` (``id`` optional)     error response
==============================  ================

``params`` and ``result`` stay :class:`msgspec.Raw` until a method table picks their type, so a frame is parsed
once. Request ids are kept exactly as sent: a string stays a string, an integer of any size stays exact, and
``null``, booleans and fractions are refused (the MCP schemas admit only strings and integers).
"""

from __future__ import annotations

import re
import struct
from array import array
from itertools import accumulate
from typing import Any, Final, NoReturn

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..errors import InvalidRequest, ParseError, RpcError

__all__ = (
    "RequestId",
    "OversizedFrame",
    "Envelope",
    "Request",
    "Notification",
    "Response",
    "ErrorResponse",
    "Message",
    "decode_frame",
    "classify",
    "read_message",
    "is_batch",
    "decode_batch",
    "nested_too_deeply",
    "encode",
    "encode_request",
    "encode_notification",
    "encode_result",
    "encode_error",
    "error_from_exception",
    "valid_id",
    "MAX_DEPTH",
)

RequestId = str | int

_encoder: Final = msgspec.json.Encoder()
encode = _encoder.encode

#: ``unpack_byte(buffer)[0]``: the first byte of a non-empty buffer (``bytes``, :class:`msgspec.Raw`), for about
#: half what ``memoryview(buffer)[0]`` costs (no view object is made). ``struct.error`` when the buffer is empty.
unpack_byte: Final = struct.Struct("B").unpack_from


class OversizedFrame(bytes):
    """A frame the transport cut off at its size limit: holds the limit and the frame's first bytes."""

    limit: int = 0


class Envelope(msgspec.Struct, omit_defaults=True):
    """The union of every JSON-RPC field, loosely typed. Unknown keys are ignored."""

    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: Raw | UnsetType = UNSET
    result: Raw | UnsetType = UNSET
    error: Any = UNSET


class Request(msgspec.Struct):
    """An incoming call: answer it with exactly one response carrying ``id``."""

    id: RequestId
    method: str
    params: Raw | None = None


class Notification(msgspec.Struct):
    """An incoming one-way message: never answered, not even with an error."""

    method: str
    params: Raw | None = None


class Response(msgspec.Struct):
    """A successful answer to one of our requests; ``result`` is still raw JSON."""

    id: RequestId
    result: Raw


class ErrorResponse(msgspec.Struct):
    """An error answer; ``id`` is ``None`` when the peer could not read ours."""

    id: RequestId | None
    code: int
    message: str
    data: Any = None


Message = Request | Notification | Response | ErrorResponse

_envelope_decoder: Final = msgspec.json.Decoder(Envelope)
_any_decoder: Final = msgspec.json.Decoder()


def valid_id(value: Any) -> bool:
    """True for the id types MCP admits: strings and integers (not booleans, not null, not fractions)."""
    t = type(value)
    return t is str or t is int


def is_batch(frame: bytes) -> bool:
    """True when the frame's first non-blank byte opens a JSON array."""
    for b in frame[:64]:
        if b in b" \t\r\n":
            continue
        return b == 0x5B  # "["
    return False


def decode_frame(frame: bytes | bytearray | memoryview) -> Envelope:
    """Decode one JSON object frame into an :class:`Envelope`.

    Raises :class:`ParseError` when the bytes are not JSON, and :class:`InvalidRequest` when they are JSON but
    not an object (a string, a number, an array handed here by mistake).
    """
    if type(frame) is OversizedFrame:
        err = InvalidRequest(f"Invalid Request: message exceeds the {frame.limit}-byte limit")
        err.request_id = _sniff_id(frame)  # type: ignore[attr-defined]
        raise err
    if len(frame) > MAX_DEPTH and nested_too_deeply(frame):
        raise _too_deep(frame)
    try:
        env = _envelope_decoder.decode(frame)
    except msgspec.ValidationError as exc:
        problem = str(exc)
        if problem.startswith("Number out of range"):
            # An object, with a number no float can hold (1e400) in one of the envelope's own fields.
            if problem.endswith("`$.id`"):
                raise InvalidRequest('Invalid Request: "id" must be a string or an integer') from None
            raise InvalidRequest("Invalid Request: a number is out of range") from None
        # Well-formed JSON of the wrong shape: the envelope must be an object.
        raise InvalidRequest("Invalid Request: a message must be a JSON object") from None
    except (msgspec.DecodeError, UnicodeDecodeError):
        # msgspec reports invalid UTF-8 inside a string as UnicodeDecodeError; JSON text must be UTF-8.
        raise ParseError("Parse error: invalid JSON") from None
    except RecursionError:  # the interpreter's limit, reached first only on an already deep stack
        raise _too_deep(frame) from None
    if not (type(frame) is bytes and frame.isascii()) and not _strings_ok(frame):
        # Found only now, inside params/result (skipped as Raw): answer with the id we did read, and never
        # answer a notification.
        bad = ParseError("Parse error: invalid UTF-8 in a string")
        bad.request_id = env.id if valid_id(env.id) else None  # type: ignore[attr-defined]
        bad.silent = env.method is not UNSET and env.id is UNSET  # type: ignore[attr-defined]
        raise bad
    return env


def _strings_ok(frame: bytes | bytearray | memoryview) -> bool:
    """msgspec checks the UTF-8 of the strings it decodes, but not of the ``Raw`` values it skips over (params,
    result): a handler decoding them later would fail. Only frames with non-ASCII bytes pay for this check."""
    data = frame if isinstance(frame, (bytes, bytearray)) else bytes(frame)
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


#: The deepest nesting of arrays and objects a frame may have (the envelope's own object counts as one level).
#: The library's limit, the same on every Python version: the decoder's recursion would otherwise stop at the
#: interpreter's (about 1,000 levels on CPython 3.11, far more on 3.13).
MAX_DEPTH: Final = 256

_QUOTES_AND_BRACKETS: Final = bytes(sorted(set(range(256)) - set(b'"{}[]')))  # what translate deletes
_OPEN_CLOSE: Final = bytes.maketrans(b"{}[]", b"\x01\xff\x01\xff")  # an opener +1, a closer -1 (a signed byte)


def nested_too_deeply(frame: bytes | bytearray | memoryview) -> bool:
    """True when the frame nests arrays and objects deeper than :data:`MAX_DEPTH`, measured without decoding it.

    Most frames are decided by counting their openers (fewer than the limit cannot nest past it). The others are
    measured with whole-buffer operations only: escaped backslashes and quotes are dropped, so each remaining
    quote opens or closes a string; only quotes and brackets are kept; the pieces between a string's quotes
    are dropped; the brackets left are summed as +1/-1 and the deepest running total is the depth. (On text that
    is not JSON the answer is only an estimate; the decoder refuses such a frame anyway.)
    """
    data = bytes(frame) if type(frame) is memoryview else frame
    if data.count(b"{") + data.count(b"[") <= MAX_DEPTH:
        return False
    kept = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _QUOTES_AND_BRACKETS)
    outside_strings = b"".join(kept.split(b'"')[::2])
    steps = array("b", outside_strings.translate(_OPEN_CLOSE))
    return max(accumulate(steps), default=0) > MAX_DEPTH


def _too_deep(frame: bytes | bytearray | memoryview) -> InvalidRequest:
    """Valid JSON nested deeper than :data:`MAX_DEPTH`: refused like an oversized frame, id sniffed."""
    err = InvalidRequest("Invalid Request: message is nested too deeply")
    err.request_id = _sniff_id(bytes(memoryview(frame)[:4096]))  # type: ignore[attr-defined]
    return err


_TOKEN: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\]]')
_ID_VALUE: Final = re.compile(rb'\s*:\s*(-?\d{1,40}|"(?:[^"\\]|\\.){0,256}")\s*[,}]')


def _sniff_id(prefix: bytes) -> RequestId | None:
    """Best effort: the id of a frame we refused to read whole, so its sender learns which call failed.

    Only an ``"id"`` key of the top-level object counts (strings and nesting are followed, so an ``"id"`` inside
    ``params`` is never taken for the request's).
    """
    depth = 0
    for token in _TOKEN.finditer(prefix):
        text = token.group()
        first = text[:1]
        if first in (b"{", b"["):
            depth += 1
        elif first in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and text == b'"id"':
            value = _ID_VALUE.match(prefix, token.end())
            if value is None:
                continue  # "id" as a string value, or an id we cannot read: keep looking
            try:
                ident = msgspec.json.decode(value.group(1))
            except msgspec.DecodeError:
                return None
            return ident if valid_id(ident) else None
    return None


def decode_batch(frame: bytes | bytearray | memoryview) -> list[Raw]:
    """Split a batch frame into its raw elements (each decoded later by :func:`decode_frame`)."""
    if len(frame) > MAX_DEPTH and nested_too_deeply(frame):
        raise InvalidRequest("Invalid Request: message is nested too deeply")
    try:
        items = msgspec.json.decode(frame, type=list[Raw])
    except msgspec.ValidationError:
        raise InvalidRequest("Invalid Request: a batch must be an array") from None
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise ParseError("Parse error: invalid JSON") from None
    except RecursionError:  # the interpreter's limit, reached first only on an already deep stack
        raise InvalidRequest("Invalid Request: message is nested too deeply") from None
    return items


def classify(env: Envelope) -> Message:
    """Turn a decoded envelope into exactly one message kind, or raise :class:`InvalidRequest`.

    The raised error carries the request ``id`` in ``.request_id`` when it was readable, so the reply can echo it,
    and ``.silent`` set when the frame was a (malformed) notification, which must not be answered at all.
    """
    ident = env.id
    has_id = ident is not UNSET
    # A malformed notification (``method`` without ``id``) is never answered, not even with an error.
    silent = env.method is not UNSET and not has_id
    if env.jsonrpc != "2.0":
        _invalid('Invalid Request: "jsonrpc" must be exactly "2.0"', ident, silent)
    if env.method is not UNSET:
        method = env.method
        if type(method) is not str:
            _invalid('Invalid Request: "method" must be a string', ident, silent)
        params = env.params
        if params is not UNSET:
            first = _first_byte(params)
            if first != 0x7B:  # "{" — MCP params are always objects (by-position arrays are not used)
                _invalid('Invalid Request: "params" must be an object', ident, silent)
        raw = None if params is UNSET else params
        if not has_id:
            return Notification(method, raw)
        if not valid_id(ident):
            _invalid('Invalid Request: "id" must be a string or an integer', ident)
        return Request(ident, method, raw)
    if env.error is not UNSET:
        err = env.error
        if not isinstance(err, dict) or type(err.get("code")) is not int or not isinstance(err.get("message"), str):
            _invalid("Invalid Request: malformed error object", ident)
        rid = ident if has_id and valid_id(ident) else None
        return ErrorResponse(rid, err["code"], err["message"], err.get("data"))
    if env.result is not UNSET:
        if not has_id or not valid_id(ident):
            _invalid('Invalid Request: a response needs a string or integer "id"', ident)
        return Response(ident, env.result)  # type: ignore[arg-type]
    return _invalid("Invalid Request: not a request, notification or response", ident)


def read_message(frame: bytes | bytearray | memoryview) -> Message:
    """:func:`decode_frame` then :func:`classify`; a well-formed request (the common case) is recognised inline.

    Raises what they raise.
    """
    env = decode_frame(frame)
    ident = env.id
    method = env.method
    params = env.params
    kind = type(ident)
    if (
        (kind is int or kind is str)
        and type(method) is str
        and env.jsonrpc == "2.0"
        and (params is UNSET or unpack_byte(params)[0] == 0x7B)  # "{"
    ):
        return Request(ident, method, None if params is UNSET else params)
    return classify(env)


def _first_byte(raw: Raw) -> int:
    view = memoryview(raw)
    for b in view[:64]:
        if b not in b" \t\r\n":
            return int(b)
    return -1


def _invalid(message: str, ident: Any, silent: bool = False) -> NoReturn:
    err = InvalidRequest(message)
    err.request_id = ident if ident is not UNSET and valid_id(ident) else None  # type: ignore[attr-defined]
    err.silent = silent  # type: ignore[attr-defined]  # a malformed notification: log it, answer nothing
    raise err


# --- encoding -------------------------------------------------------------------------------------------------

_HEAD_RESULT: Final = b'{"jsonrpc":"2.0","id":'


def encode_result(ident: RequestId, result: bytes) -> bytes:
    """A success response around an already-encoded result object."""
    return b"".join((_HEAD_RESULT, _encoder.encode(ident), b',"result":', result, b"}"))


def encode_error(ident: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    """An error response. Without a readable id the ``id`` key is omitted (never ``null``)."""
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    if ident is None:
        return _encoder.encode({"jsonrpc": "2.0", "error": err})
    return _encoder.encode({"jsonrpc": "2.0", "id": ident, "error": err})


def encode_request(ident: RequestId, method: str, params: bytes | None) -> bytes:
    head = b"".join((_HEAD_RESULT, _encoder.encode(ident), b',"method":', _encoder.encode(method)))
    if params is None:
        return head + b"}"
    return b"".join((head, b',"params":', params, b"}"))


def encode_notification(method: str, params: bytes | None) -> bytes:
    head = b'{"jsonrpc":"2.0","method":' + _encoder.encode(method)
    if params is None:
        return head + b"}"
    return b"".join((head, b',"params":', params, b"}"))


def error_from_exception(exc: RpcError) -> tuple[int, str, Any]:
    return exc.code, exc.message, exc.data
