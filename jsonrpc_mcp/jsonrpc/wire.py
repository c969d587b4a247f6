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
once. Request ids are kept exactly as sent: a string stays a string, an integer of any size stays exact (one too
long for Python's int-string conversion stays its JSON text, :class:`LongIntId`), and ``null``, booleans and
fractions are refused (the MCP schemas admit only strings and integers).

What is never answered, not even with an error: a notification (``method`` without ``id``) and anything shaped
like a response (``result`` or ``error`` present, no ``method``). A malformed one is logged and dropped, so two
peers can never bounce error replies off each other.
"""

from __future__ import annotations

import re
import struct
from array import array
from collections.abc import Mapping
from itertools import accumulate
from typing import Any, Final, NoReturn

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..errors import InvalidRequest, ParseError, RpcError

__all__ = (
    "RequestId",
    "LongIntId",
    "OversizedFrame",
    "Envelope",
    "Request",
    "Notification",
    "Response",
    "ErrorResponse",
    "Message",
    "decode_frame",
    "ensure_json",
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
    "encode_message",
    "valid_id",
    "MAX_DEPTH",
    "Intake",
    "NO_INTAKE",
)


class Intake:
    """What arrived with a message besides its frame, as its transport learned it. The base is the empty intake
    (:data:`NO_INTAKE`: stdio, sockets, memory); a transport with more subclasses it (an HTTP request's
    :class:`~jsonrpc_mcp.transports._http_io.Headers`); :mod:`.streams` says how it travels."""

    __slots__ = ()

    #: The principal the transport authenticated the sender as (``Context.auth``); ``None``: nobody.
    auth: Any = None
    #: When the transport ends the stream carrying this message's answer by itself, in ``time.time()`` seconds
    #: (Streamable HTTP under an authorization policy: the access token's expiry); ``None``: it does not.
    until: float | None = None

    def request_headers(self) -> Mapping[str, str] | None:
        """The transport-level headers of the message (names in lower case); ``None`` on transports without."""
        return None

    def connection(self) -> str | None:
        """The connection the message came on, where one stream carries the messages of many (an HTTP request's
        TCP connection, ``host:port``); ``None``: the stream is the connection."""
        return None


#: The intake of a message that came with nothing but its frame (shared: nothing is made per message).
NO_INTAKE: Final[Intake] = Intake()


class LongIntId:
    """An integer id too long for Python's int-string conversion (over 4,300 digits): kept as its JSON text.

    Converting such a number is refused by the interpreter (its cost grows with the square of the length), and
    changing the process-wide limit is not a library's call; so the id stays the digits the peer sent, compares and
    hashes by them (never equal to a string id of the same digits), and is written back exactly as sent.
    """

    __slots__ = ("text",)

    def __init__(self, text: bytes) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return type(other) is LongIntId and other.text == self.text

    def __hash__(self) -> int:
        return hash((LongIntId, self.text))

    def __repr__(self) -> str:  # bounded: ids are logged
        return f"LongIntId({self.text[:12].decode()}...: {len(self.text.lstrip(b'-'))} digits)"


RequestId = str | int | LongIntId


def _encode_other(value: Any) -> Any:
    """What the encoder cannot write itself: a :class:`LongIntId` is written as its own JSON text."""
    if type(value) is LongIntId:
        return Raw(value.text)
    raise TypeError(f"cannot encode {type(value).__name__}")


_encoder: Final = msgspec.json.Encoder(enc_hook=_encode_other)
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


class _RawEnvelope(msgspec.Struct):
    """The envelope with every field kept as raw JSON: reads any object's shape and checks the whole text's syntax
    without making a value (for frames the typed decode refused)."""

    jsonrpc: Raw | UnsetType = UNSET
    id: Raw | UnsetType = UNSET
    method: Raw | UnsetType = UNSET
    params: Raw | UnsetType = UNSET
    result: Raw | UnsetType = UNSET
    error: Raw | UnsetType = UNSET


class _LongIdEnvelope(Envelope):
    """:class:`Envelope` for a frame whose ``id`` is a :class:`LongIntId` (``id`` kept raw, the rest as usual)."""

    id: Raw | UnsetType = UNSET


_envelope_decoder: Final = msgspec.json.Decoder(Envelope)
_raw_envelope_decoder: Final = msgspec.json.Decoder(_RawEnvelope)
_long_id_decoder: Final = msgspec.json.Decoder(_LongIdEnvelope)
_any_decoder: Final = msgspec.json.Decoder()
_syntax_decoder: Final = msgspec.json.Decoder(Raw)

#: The JSON text of an integer (RFC 8259 §6).
_INTEGER: Final = re.compile(rb"-?(?:0|[1-9][0-9]*)")


def valid_id(value: Any) -> bool:
    """True for the id types MCP admits: strings and integers (not booleans, not null, not fractions)."""
    t = type(value)
    return t is str or t is int or t is LongIntId


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
    not an object (a string, a number, an array handed here by mistake). Either error carries the frame's id in
    ``.request_id`` when it could be read, and ``.silent`` when the frame must not be answered.
    """
    if type(frame) is OversizedFrame:
        raise _refused(
            InvalidRequest(f"Invalid Request: message exceeds the {frame.limit}-byte limit"), _sniff_id(frame)
        )
    if len(frame) > MAX_DEPTH and nested_too_deeply(frame):
        raise _too_deep(frame)
    try:
        env = _envelope_decoder.decode(frame)
    except msgspec.ValidationError as exc:
        # The typed decode stops at the first value it cannot take, before it has seen the rest of the text.
        env = _reread(frame, str(exc))
    except (msgspec.DecodeError, UnicodeDecodeError):
        # msgspec reports invalid UTF-8 inside a string as UnicodeDecodeError; JSON text must be UTF-8.
        raise _unreadable(frame) from None
    except RecursionError:  # the interpreter's limit, reached first only on an already deep stack
        raise _too_deep(frame) from None
    if not (type(frame) is bytes and frame.isascii()) and not _strings_ok(frame):
        # Found only now, inside params/result (skipped as Raw): answer with the id we did read, and never
        # answer a notification.
        raise _refused(ParseError("Parse error: invalid UTF-8 in a string"), env.id, _unanswered(env))
    return env


def ensure_json(frame: bytes | bytearray | memoryview) -> None:
    """Raise :class:`ParseError` unless ``frame`` is one JSON value (checked without building it)."""
    try:
        _syntax_decoder.decode(frame)
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise ParseError("Parse error: invalid JSON") from None
    except RecursionError:
        raise InvalidRequest("Invalid Request: message is nested too deeply") from None


def _reread(frame: bytes | bytearray | memoryview, problem: str) -> Envelope:
    """A frame the typed envelope refused: not an object (or not JSON at all), or a number out of range somewhere.

    Returns the envelope when the only trouble was an integer id too long to convert (kept as a
    :class:`LongIntId`); raises otherwise, with the id when it is readable.
    """
    if problem.startswith("Expected `object`"):
        ensure_json(frame)  # "8 garbage", "[1," are parse errors; only well-formed JSON is the wrong shape
        raise InvalidRequest("Invalid Request: a message must be a JSON object")
    try:
        lax = _raw_envelope_decoder.decode(frame)  # reads the shape, and the syntax of the whole text
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise _unreadable(frame) from None
    except RecursionError:
        raise _too_deep(frame) from None
    except msgspec.ValidationError:  # pragma: no cover - the typed decode saw an object
        raise InvalidRequest("Invalid Request: a message must be a JSON object") from None
    ident = _raw_id(lax.id)
    silent = _unanswered(lax)
    if problem.endswith("`$.id`"):
        if type(ident) is LongIntId:
            try:
                env: Envelope = _long_id_decoder.decode(frame)
            except msgspec.ValidationError:
                _invalid("Invalid Request: a number is out of range", ident, silent)
            env.id = ident
            return env
        _invalid('Invalid Request: "id" must be a string or an integer', None, silent)
    _invalid("Invalid Request: a number is out of range", ident, silent)


def _raw_id(raw: Raw | UnsetType) -> Any:
    """The id held in raw JSON, :class:`LongIntId` for an integer too long to convert, UNSET when absent."""
    if raw is UNSET:
        return UNSET
    text = bytes(raw)
    try:
        return _any_decoder.decode(text)
    except msgspec.ValidationError:
        return LongIntId(text) if _INTEGER.fullmatch(text) else None
    except (msgspec.DecodeError, UnicodeDecodeError):  # pragma: no cover - the raw decode checked it
        return None


def _unanswered(env: Envelope | _RawEnvelope) -> bool:
    """A notification (``method``, no ``id``) or anything shaped like a response (``result`` or ``error``, no
    ``method``): never answered, even when malformed."""
    if env.method is not UNSET:
        return env.id is UNSET
    return env.result is not UNSET or env.error is not UNSET


#: A ``\uXXXX`` escape of a surrogate, paired or not; ``\\`` is matched too so that an escaped backslash is skipped.
_ESCAPE: Final = re.compile(
    rb"\\(?:u[dD][89abAB][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?|u[dD][c-fC-F][0-9a-fA-F]{2}|.)", re.DOTALL
)
_REPLACEMENT: Final = b"\\ufffd"


def _unreadable(frame: bytes | bytearray | memoryview) -> RpcError:
    """The parse error for a frame msgspec could not read. A string escape of an unpaired surrogate (``\\ud800``)
    makes a frame unreadable, yet the rest may be a well-formed request: its id is kept for the reply, as for a
    string of invalid UTF-8."""
    data = bytes(frame)
    if b"\\u" not in data:
        return ParseError("Parse error: invalid JSON")
    masked = _ESCAPE.sub(_mask_lone_surrogate, data)
    if masked == data:
        return ParseError("Parse error: invalid JSON")
    try:
        env = _envelope_decoder.decode(masked)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return ParseError("Parse error: invalid JSON")
    ident = env.id
    if type(ident) is str and "\ufffd" in ident:
        ident = None  # the id held the surrogate itself: it cannot be sent back as it was
    return _refused(ParseError("Parse error: a string holds an unpaired surrogate escape"), ident, _unanswered(env))


def _mask_lone_surrogate(match: re.Match[bytes]) -> bytes:
    escape = match.group()
    return _REPLACEMENT if len(escape) == 6 else escape


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

    Most frames are decided by their openers: fewer than the limit cannot nest past it (a frame holds a handful,
    found with ``bytes.find``, which skips the bytes between them; the search stops past the limit). The others are
    measured with whole-buffer operations only: escaped backslashes and quotes are dropped, so each remaining
    quote opens or closes a string; only quotes and brackets are kept; the pieces between a string's quotes
    are dropped; the brackets left are summed as +1/-1 and the deepest running total is the depth. (On text that
    is not JSON the answer is only an estimate; the decoder refuses such a frame anyway.)
    """
    data = bytes(frame) if type(frame) is memoryview else frame
    openers = 0  # (looked for with bytes.find, memchr, rather than counted: docs/performance.md)
    for opener in (b"{", b"["):
        at = data.find(opener)
        while at >= 0 and openers <= MAX_DEPTH:
            openers += 1
            at = data.find(opener, at + 1)
    if openers <= MAX_DEPTH:
        return False
    kept = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _QUOTES_AND_BRACKETS)
    outside_strings = b"".join(kept.split(b'"')[::2])
    steps = array("b", outside_strings.translate(_OPEN_CLOSE))
    return max(accumulate(steps), default=0) > MAX_DEPTH


def _too_deep(frame: bytes | bytearray | memoryview) -> RpcError:
    """Valid JSON nested deeper than :data:`MAX_DEPTH`: refused like an oversized frame, id sniffed."""
    return _refused(
        InvalidRequest("Invalid Request: message is nested too deeply"), _sniff_id(bytes(memoryview(frame)[:4096]))
    )


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
    and ``.silent`` set when the frame must not be answered at all: a malformed notification, or a malformed
    frame shaped like a response (answering it could start two peers bouncing errors off each other).
    """
    ident = env.id
    has_id = ident is not UNSET
    silent = _unanswered(env)
    if env.jsonrpc != "2.0":
        _invalid('Invalid Request: "jsonrpc" must be exactly "2.0"', ident, silent)
    if env.method is not UNSET:
        method = env.method
        if type(method) is not str:
            _invalid('Invalid Request: "method" must be a string', ident, silent)
        params = env.params
        if params is not UNSET and unpack_byte(params)[0] != 0x7B:  # "{" (a Raw value starts with its first byte)
            # MCP params are always objects (by-position arrays are not used)
            _invalid('Invalid Request: "params" must be an object', ident, silent)
        raw = None if params is UNSET else params
        if not has_id:
            return Notification(method, raw)
        if not valid_id(ident):
            _invalid('Invalid Request: "id" must be a string or an integer', ident)
        return Request(ident, method, raw)
    if env.error is not UNSET:
        err = env.error
        if (
            env.result is not UNSET
            or not isinstance(err, dict)
            or type(err.get("code")) is not int
            or not isinstance(err.get("message"), str)
        ):
            _invalid("Invalid Request: malformed error response", ident, silent)
        rid = ident if has_id and valid_id(ident) else None
        return ErrorResponse(rid, err["code"], err["message"], err.get("data"))
    if env.result is not UNSET:
        if not has_id or not valid_id(ident):
            _invalid('Invalid Request: a response needs a string or integer "id"', ident, silent)
        return Response(ident, env.result)  # type: ignore[arg-type]
    return _invalid("Invalid Request: not a request, notification or response", ident)


def read_message(frame: bytes | bytearray | memoryview) -> Message:
    """:func:`decode_frame` then :func:`classify`; a well-formed request (the common case) is recognised inline."""
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


def _invalid(message: str, ident: Any, silent: bool = False) -> NoReturn:
    raise _refused(InvalidRequest(message), ident, silent)


def _refused(err: RpcError, ident: Any, silent: bool = False) -> RpcError:
    """``err`` carrying the id its reply echoes (``None`` when unreadable), and ``silent`` when it must not be answered
    (a notification or a response: log it, answer nothing)."""
    err.request_id = ident if valid_id(ident) else None  # type: ignore[attr-defined]
    err.silent = silent  # type: ignore[attr-defined]
    return err


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


def encode_message(msg: Message) -> bytes:
    """A message read from a peer written back as a frame, as the peer sent it (to hand it on: another worker's
    session); the encoders above build our own."""
    if type(msg) is Request:
        return encode_request(msg.id, msg.method, bytes(msg.params) if msg.params is not None else None)
    if type(msg) is Notification:
        return encode_notification(msg.method, bytes(msg.params) if msg.params is not None else None)
    if type(msg) is Response:
        return encode_result(msg.id, bytes(msg.result))
    assert type(msg) is ErrorResponse
    return encode_error(msg.id, msg.code, msg.message, msg.data)
