"""Integrity-protected ``requestState`` for multi-round-trip requests (2026-07-28, SEP-2322) (L2).

The client echoes ``requestState`` verbatim, but the spec tells servers to treat it as attacker-controlled. Ours
is ``base64url(payload) "." base64url(HMAC-SHA256(key, payload))`` where the payload records the answers gathered
in earlier rounds, the keys asked in the last round, a digest of the request it belongs to, an expiry, and a digest
of the authenticated principal it was issued to (empty on a server without authorization). A state that fails the
MAC, has expired, belongs to another request or was issued to another principal is rejected with -32602.

A request of an input round carries the answers gathered so far (:func:`read_answers`); a handler that asks for
more is answered with an ``InputRequiredResult`` (:func:`input_required_result`) sealing them in a new state.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import hmac
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from msgspec import UNSET, Raw

from ..errors import InvalidParams
from .versions import META_SERVER_INFO

__all__ = (
    "StatePayload",
    "seal",
    "open_state",
    "request_digest",
    "principal_digest",
    "new_nonce",
    "SeenNonces",
    "read_answers",
    "input_required_result",
)


class StatePayload(msgspec.Struct, array_like=True):
    digest: str
    expires: float
    answers: dict[str, Any]
    asked: list[str]
    #: Set for a state meant to be answered once (:class:`SeenNonces`); empty otherwise, and in states sealed
    #: before the field existed (which read the same).
    nonce: str = ""
    #: :func:`principal_digest` of the principal the state was issued to; empty when the request had none (a
    #: server without authorization), and in states sealed before the field existed.
    principal: str = ""


_encode = msgspec.json.Encoder(order="sorted").encode
_decode = msgspec.json.Decoder(StatePayload).decode


def request_digest(method: str, params: dict[str, Any]) -> str:
    """A digest of what the request asks for, excluding the fields that change between rounds."""
    stable = {k: v for k, v in params.items() if k not in ("_meta", "inputResponses", "requestState")}
    return hashlib.sha256(method.encode() + b"\0" + _encode(stable)).hexdigest()[:32]


def _digest_of(method: str, raw: Raw | None) -> str:
    """:func:`request_digest` of a request's raw params (a decode, a re-encode and a hash: made only when a state
    is opened or sealed)."""
    return request_digest(method, msgspec.json.decode(raw) if raw is not None else {})


def principal_digest(auth: object | None) -> str:
    """What a state is bound to of the request's authenticated principal (an ``AccessToken``, whose
    ``principal`` is ``(issuer, subject, client_id)``): a digest, so that the state, which the client can read,
    does not spell out who the user is. ``""`` for a request without one."""
    principal = getattr(auth, "principal", None)
    if principal is None:
        return ""
    return hashlib.sha256(b"principal\0" + _encode(list(principal))).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(key: bytes, payload: StatePayload) -> str:
    body = _encode(payload)
    mac = hmac.new(key, body, hashlib.sha256).digest()
    return f"{_b64(body)}.{_b64(mac)}"


def open_state(
    keys: bytes | Sequence[bytes], state: str, *, digest: str, now: float, principal: str = ""
) -> StatePayload:
    """Verify and decode a state we issued (sealed with one of ``keys``) for the request ``digest`` and the
    principal ``principal`` (a :func:`principal_digest`); raise :class:`InvalidParams` on any doubt."""
    try:
        body_text, mac_text = state.split(".")
        body = _unb64(body_text)
        mac = _unb64(mac_text)
    except (ValueError, TypeError):
        raise InvalidParams("Invalid requestState") from None
    if isinstance(keys, bytes):
        keys = (keys,)
    if not any(hmac.compare_digest(mac, hmac.new(key, body, hashlib.sha256).digest()) for key in keys):
        raise InvalidParams("Invalid requestState: integrity check failed")
    try:
        payload = _decode(body)
    except msgspec.DecodeError:
        raise InvalidParams("Invalid requestState") from None
    if payload.expires < now:
        raise InvalidParams("Invalid requestState: expired")
    if not hmac.compare_digest(payload.digest, digest):
        raise InvalidParams("Invalid requestState: it belongs to a different request")
    if not hmac.compare_digest(payload.principal, principal):
        raise InvalidParams("Invalid requestState: it was issued to another principal")
    return payload


def new_nonce() -> str:
    """A fresh random nonce for :attr:`StatePayload.nonce` (128 bits, URL-safe)."""
    return secrets.token_urlsafe(16)


class SeenNonces:
    """The nonces of single-use states already spent: bounded in count, each remembered until its state expires.

    :meth:`claim` a state's nonce when its round is answered: the first claim wins, any later one (a replay) is
    refused. A nonce need not be remembered past its state's expiry, since :func:`open_state` refuses an expired
    state anyway. Past ``max_size`` live nonces the one closest to its expiry is forgotten to make room (states
    share one lifetime, so that is the oldest): a replay of that one state would then pass, so size the set for
    the rounds a server answers within one state lifetime. In memory, per process: workers that share a state key
    must share this set too (or keep a session's rounds on one worker) for single use to hold across them.
    """

    def __init__(self, max_size: int = 100_000) -> None:
        if max_size < 1:
            raise ValueError("max_size must be positive")
        self.max_size = max_size
        self._expiry: dict[str, float] = {}
        self._by_expiry: list[tuple[float, str]] = []  # a heap: the soonest expiry first

    def __len__(self) -> int:
        return len(self._expiry)

    def __contains__(self, nonce: object) -> bool:
        return nonce in self._expiry

    def claim(self, nonce: str, expires: float, *, now: float) -> bool:
        """True the first time ``nonce`` (of a state valid until ``expires``) is claimed, False after."""
        self._forget_expired(now)
        if nonce in self._expiry:
            return False
        while len(self._expiry) >= self.max_size:
            _, oldest = heapq.heappop(self._by_expiry)
            self._expiry.pop(oldest, None)
        self._expiry[nonce] = expires
        heapq.heappush(self._by_expiry, (expires, nonce))
        return True

    def _forget_expired(self, now: float) -> None:
        heap = self._by_expiry
        while heap and heap[0][0] < now:
            _, nonce = heapq.heappop(heap)
            self._expiry.pop(nonce, None)


def read_answers(
    method: str, responses: Any, state: Any, raw: Raw | None, *, keys: Sequence[bytes], principal: str, now: float
) -> tuple[dict[str, Any], StatePayload | None]:
    """The answers a request of ``method`` carries: those sealed in its ``requestState`` (opened with ``keys``, for
    the request's ``principal``) and its ``inputResponses`` (those the state asked for, when it has one); and the
    state, opened (``None`` without one; a single-use state's ``nonce`` is the caller's to claim). ``responses``
    and ``state``: the params' fields (``UNSET`` when absent), ``raw`` the params as sent. Raises
    :class:`InvalidParams`."""
    if responses is not UNSET and not isinstance(responses, dict):
        raise InvalidParams('Invalid params: "inputResponses" must be an object')
    if state is not UNSET and not isinstance(state, str):
        raise InvalidParams('Invalid params: "requestState" must be a string')
    answers: dict[str, Any] = {}
    opened = None
    if state is not UNSET:
        opened = open_state(keys, state, digest=_digest_of(method, raw), now=now, principal=principal)
        answers.update(opened.answers)
    if responses is not UNSET:
        for key, value in responses.items():
            if opened is None or key in opened.asked:
                if not isinstance(value, dict):
                    raise InvalidParams(f"Invalid params: inputResponses[{key!r}] must be an object")
                answers[key] = value
    return answers, opened


def input_required_result(
    method: str,
    raw: Raw | None,
    requests: Mapping[str, Any],
    answers: dict[str, Any],
    *,
    opened: StatePayload | None,
    key: bytes,
    expires: float,
    single_use: bool,
    principal: str,
    server_info: dict[str, Any],
) -> dict[str, Any]:
    """The ``InputRequiredResult`` of a request (of ``method``, ``raw`` params, with the state it came with,
    ``opened``) whose handler asked for ``requests``: the answers so far sealed with ``key`` until ``expires``, for
    the request's ``principal``; a fresh nonce when the state is ``single_use``."""
    payload = StatePayload(
        digest=opened.digest if opened is not None else _digest_of(method, raw),
        expires=expires,
        answers=answers,
        asked=list(requests),
        nonce=new_nonce() if single_use else "",
        principal=principal,
    )
    return {
        "resultType": "input_required",
        "inputRequests": requests,
        "requestState": seal(key, payload),
        "_meta": {META_SERVER_INFO: server_info},
    }
