"""Integrity-protected ``requestState`` for multi-round-trip requests (2026-07-28, SEP-2322) (L2).

The client echoes ``requestState`` verbatim, but the spec tells servers to treat it as attacker-controlled. Ours
is ``base64url(payload) "." base64url(HMAC-SHA256(key, payload))`` where the payload records the answers gathered
in earlier rounds, the keys asked in the last round, a digest of the request it belongs to, and an expiry. A
state that fails the MAC, has expired, or belongs to another request is rejected with -32602.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import msgspec

from ..errors import InvalidParams

__all__ = ("StatePayload", "seal", "open_state", "request_digest")


class StatePayload(msgspec.Struct, array_like=True):
    digest: str
    expires: float
    answers: dict[str, Any]
    asked: list[str]


_encode = msgspec.json.Encoder(order="sorted").encode
_decode = msgspec.json.Decoder(StatePayload).decode


def request_digest(method: str, params: dict[str, Any]) -> str:
    """A digest of what the request asks for, excluding the fields that change between rounds."""
    stable = {k: v for k, v in params.items() if k not in ("_meta", "inputResponses", "requestState")}
    return hashlib.sha256(method.encode() + b"\0" + _encode(stable)).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(key: bytes, payload: StatePayload) -> str:
    body = _encode(payload)
    mac = hmac.new(key, body, hashlib.sha256).digest()
    return f"{_b64(body)}.{_b64(mac)}"


def open_state(key: bytes, state: str, *, digest: str, now: float) -> StatePayload:
    """Verify and decode a state we issued; raise :class:`InvalidParams` on any doubt."""
    try:
        body_text, mac_text = state.split(".")
        body = _unb64(body_text)
        mac = _unb64(mac_text)
    except (ValueError, TypeError):
        raise InvalidParams("Invalid requestState") from None
    expected = hmac.new(key, body, hashlib.sha256).digest()
    if not hmac.compare_digest(mac, expected):
        raise InvalidParams("Invalid requestState: integrity check failed")
    try:
        payload = _decode(body)
    except msgspec.DecodeError:
        raise InvalidParams("Invalid requestState") from None
    if payload.expires < now:
        raise InvalidParams("Invalid requestState: expired")
    if not hmac.compare_digest(payload.digest, digest):
        raise InvalidParams("Invalid requestState: it belongs to a different request")
    return payload
