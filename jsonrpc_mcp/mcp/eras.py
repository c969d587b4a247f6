"""Which era a request belongs to, and what a stateless-era request must carry (L2: sans I/O).

The one owner of both rules, used by the session (every transport) and by Streamable HTTP (which must know the
era before it picks a session, and checks its headers between the two checks below):

* :func:`read_call` decodes a request's params once, with the type its method declares, and decides its era
  (SPEC_MAP §6.3): a stateless version in the transport's version header, or
  ``_meta["io.modelcontextprotocol/protocolVersion"]`` in the params, makes it a 2026-07-28 request; anything
  else belongs to the handshake era;
* :func:`meta_problem` says what is wrong with a stateless request's ``_meta`` (-32602), with one set of messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, Final, NamedTuple

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..errors import InvalidParams, RpcError
from ..jsonrpc.wire import NO_INTAKE, Intake, Notification, Request
from .methods import MethodSpec
from .versions import (
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    STATELESS_VERSIONS,
)

__all__ = ("Call", "LOG_LEVELS", "read_call", "notification_is_stateless", "meta_problem")

LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

_PV_NEEDLE: Final = META_PROTOCOL_VERSION.encode()


class _Meta(msgspec.Struct):
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


_meta_decoder: Final = msgspec.json.Decoder(_Meta)
_NOTHING: Final[Mapping[str, Any]] = MappingProxyType({})


class Call(msgspec.Struct, kw_only=True):
    """A request as the session sees it before its handler runs: its method's spec (``None``: unknown method),
    its params decoded with the method's type (``problem``: why they could not be, reported in its turn), their
    ``_meta``, its era, and what came with it (its transport's :class:`~jsonrpc_mcp.jsonrpc.wire.Intake`)."""

    request: Request
    spec: MethodSpec | None
    params: Any = None
    problem: RpcError | None = None
    meta: dict[str, Any] | None = None
    stateless: bool = False
    state: Mapping[str, Any] = _NOTHING  #: what middleware put for the handler (``ctx.state``)
    intake: Intake = NO_INTAKE  #: what came with the request: its headers, its principal, its connection


class _Reader(NamedTuple):
    decoder: msgspec.json.Decoder[Any]
    has_meta: bool  # the type has a ``_meta`` field: the era is read from the decoded params


@cache
def _reader(kind: Any) -> _Reader:
    """How the params of ``kind`` are read (made once per type)."""
    fields = msgspec.structs.fields(kind) if isinstance(kind, type) and issubclass(kind, msgspec.Struct) else ()
    return _Reader(msgspec.json.Decoder(kind), any(f.encode_name == "_meta" for f in fields))


def read_call(
    methods: Mapping[str, MethodSpec],
    request: Request,
    header_version: str | None = None,
    intake: Intake = NO_INTAKE,
) -> Call:
    """Decode ``request``'s params once and decide its era; never raises (problems are kept in the call).
    ``intake``: what came with the request (:class:`~jsonrpc_mcp.jsonrpc.wire.Intake`)."""
    spec = methods.get(request.method)
    raw = request.params
    params: Any = None
    problem: RpcError | None = None
    meta: Any = None
    meta_unread = True  # (the usual case reads it with the params: their type has a ``_meta`` field)
    if spec is not None:
        kind = spec.params_type
        try:
            if kind is None:
                params = _decode_any(raw)
                meta_unread = type(params) is not dict
                meta = None if meta_unread else params.get("_meta")
            else:
                reader = _reader(kind)
                try:
                    params = reader.decoder.decode(raw if raw is not None else b"{}")
                except msgspec.ValidationError as exc:
                    raise InvalidParams(f"Invalid params: {exc}") from None
                meta_unread = not reader.has_meta
                meta = None if meta_unread else params.meta
        except InvalidParams as exc:
            problem = exc
    if meta_unread and raw is not None and (header_version in STATELESS_VERSIONS or _may_name_version(raw)):
        try:
            meta = _meta_decoder.decode(raw).meta
        except msgspec.ValidationError:
            problem = InvalidParams('Invalid params: "_meta" must be an object')
    if type(meta) is not dict:
        meta = None
    return Call(
        request=request,
        spec=spec,
        params=params,
        problem=problem,
        meta=meta,
        stateless=header_version in STATELESS_VERSIONS or (meta is not None and META_PROTOCOL_VERSION in meta),
        intake=intake,
    )


def notification_is_stateless(note: Notification) -> bool:
    """The era rule for a notification (which has no method spec): its ``_meta`` names a protocol version."""
    if not _may_name_version(note.params):
        return False
    try:
        meta = _meta_decoder.decode(note.params).meta  # type: ignore[arg-type]
    except msgspec.ValidationError:
        return False
    return type(meta) is dict and META_PROTOCOL_VERSION in meta


def _decode_any(raw: Raw | None) -> Any:
    if raw is None:
        return None
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:  # (a number no float holds, say: the frame itself was read)
        raise InvalidParams(f"Invalid params: {exc}") from None


def meta_problem(meta: Mapping[str, Any] | None) -> InvalidParams | None:
    """What a stateless-era request's ``_meta`` lacks (a -32602 error), or ``None`` when it is usable."""
    meta = meta or {}
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str) or not version:
        return InvalidParams(f"Invalid params: _meta[{META_PROTOCOL_VERSION!r}] must be a string")
    if not isinstance(meta.get(META_CLIENT_CAPABILITIES), dict):
        return InvalidParams(f"Invalid params: _meta[{META_CLIENT_CAPABILITIES!r}] is required")
    level = meta.get(META_LOG_LEVEL)
    if level is not None and level not in LOG_LEVELS:
        return InvalidParams(f"Invalid params: unknown log level {level!r}")
    return None


def _may_name_version(raw: Raw | None) -> bool:
    """Could these params carry the stateless-era version key? The key holds a ``/``, which most params lack:
    looking for that one byte first rules most of them out before the substring search."""
    if raw is None:
        return False
    data = bytes(raw)
    return b"/" in data and _PV_NEEDLE in data
