"""What the server offers (tools, prompts, resources, both eras), learned once before a check (L7)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import anyio.abc

from ..mcp.groups import unwrap_group
from ..mcp.versions import (
    HANDSHAKE_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    STATELESS_VERSIONS,
)
from ..version import __version__
from .channels import Channel, Target, Unreachable
from .frames import NOT_JSON, loads, short
from .transcripts import Session

__all__ = (
    "DEFAULT_TIMEOUT",
    "DEFAULT_GRACE",
    "DEFAULT_STARTUP",
    "Timing",
    "DEFAULT_TIMING",
    "Offer",
    "CLIENT_INFO",
    "INITIALIZED",
    "handshake_frame",
    "stateless_meta",
    "await_reply",
    "probe",
)


DEFAULT_TIMEOUT: Final = 10.0
DEFAULT_GRACE: Final = 2.0
DEFAULT_STARTUP: Final = 30.0


@dataclass(frozen=True)
class Timing:
    """How long to wait. ``timeout``: for the sentinel's reply after an exchange's frames; ``grace``: after it, for
    replies the expectation still names (slow tools); ``startup``: for the first reply on a fresh connection."""

    timeout: float = DEFAULT_TIMEOUT
    grace: float = DEFAULT_GRACE
    startup: float = DEFAULT_STARTUP


#: The waits of a check when none are given.
DEFAULT_TIMING: Final = Timing()


# --- what the server offers ---------------------------------------------------------------------------------


@dataclass
class Offer:
    """What a server offers, learned once before a check (``None`` everywhere: assume everything)."""

    handshake: dict[str, Any] | None = None  # initialize result
    stateless: dict[str, Any] | None = None  # server/discover result
    tools: set[str] = field(default_factory=set)
    prompts: set[str] = field(default_factory=set)
    resources: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def missing(self, need: str, session: Session) -> str | None:
        """Why ``need`` is not met, or ``None``."""
        kind, _, name = need.partition(":")
        if kind == "tool" and name not in self.tools:
            return f"the server offers no tool {name}"
        if kind == "prompt" and name not in self.prompts:
            return f"the server offers no prompt {name}"
        if kind == "resource" and name not in self.resources:
            return f"the server lists no resource {name}"
        if kind in ("capability", "no-capability"):
            source = self.stateless if session.kind == "stateless" else self.handshake
            value: Any = (source or {}).get("capabilities") or {}
            for part in name.split("."):  # resources.subscribe: the sub-capability must be there and not false
                value = value.get(part) if isinstance(value, dict) else None
            advertised = value is not None and value is not False
            if kind == "capability" and not advertised:
                return f"the server does not advertise the {name} capability"
            if kind == "no-capability" and advertised:
                return f"the server advertises the {name} capability"
        if kind not in ("tool", "prompt", "resource", "capability", "no-capability"):
            return f"unknown requirement {need!r}"
        return None


CLIENT_INFO: Final = {"name": "jsonrpc-mcp-check", "version": __version__}
INITIALIZED: Final = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def handshake_frame(ident: str, revision: str, capabilities: dict[str, Any]) -> bytes:
    params = {"protocolVersion": revision, "capabilities": capabilities, "clientInfo": CLIENT_INFO}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "initialize", "params": params}).encode()


def stateless_meta(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        META_PROTOCOL_VERSION: STATELESS_VERSIONS[0],
        META_CLIENT_CAPABILITIES: capabilities or {},
    }


async def await_reply(channel: Channel, ident: str, timeout: float) -> dict[str, Any]:
    """The reply to the probe ``ident``: a response with its id, or a refusal of it (the probe is the only request
    in flight): an error without an id, or an HTTP status the channel reports as a line of text. A POST that could
    not connect is :class:`Unreachable`."""
    with anyio.fail_after(timeout):
        while True:
            frame = await channel.receive()
            msg = loads(frame)
            if isinstance(msg, dict) and msg.get("id") == ident and ("result" in msg or "error" in msg):
                return msg
            if isinstance(msg, dict) and msg.get("id") is None and isinstance(msg.get("error"), dict):
                return {"id": ident, "error": msg["error"], "refused": True}
            if msg is NOT_JSON and frame.startswith((b"HTTP ", b"HTTP request failed")):
                unreachable = getattr(channel, "unreachable", None)
                if unreachable is not None:
                    raise Unreachable(unreachable)
                text = frame.decode("utf-8", "replace")
                return {"id": ident, "error": {"code": None, "message": text}, "refused": True}


async def _first_reply(channel: Channel, frame: bytes, ident: str, method: str, timing: Timing) -> dict[str, Any]:
    """Send a probe's first request and wait ``--startup`` seconds for the reply; none at all (no answer in time,
    or the connection ended first) is :class:`Unreachable`, saying why."""
    try:
        try:
            await channel.send(frame)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError):
            pass  # the server has gone already: the end of its output, and why it ended, are read below
        return await await_reply(channel, ident, timing.startup)
    except TimeoutError:
        raise Unreachable(
            f"no answer to {method} within {timing.startup:g} s (--startup SECONDS waits longer)", timed_out=True
        ) from None
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        why_closed = getattr(channel, "why_closed", None)
        reason = await why_closed() if why_closed is not None else None
        raise Unreachable(f"{reason or 'the server closed the connection'} before answering {method}") from None


async def _list_all(channel: Channel, method: str, key: str, meta: dict[str, Any] | None, timeout: float) -> list[Any]:
    items: list[Any] = []
    cursor: Any = None
    for page in range(50):
        params: dict[str, Any] = {}
        if cursor is not None:
            params["cursor"] = cursor
        if meta is not None:
            params["_meta"] = meta
        ident = f"probe-{method}-{page}"
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params:
            frame["params"] = params
        await channel.send(json.dumps(frame).encode())
        reply = await await_reply(channel, ident, timeout)
        result = reply.get("result")
        if not isinstance(result, dict):
            break
        items.extend(result.get(key) or [])
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    return items


async def probe(target: Target, *, timing: Timing = DEFAULT_TIMING) -> Offer:
    """Learn what ``target`` offers: a handshake (initialize, the three lists) and a ``server/discover``. A probe
    the server refuses or does not answer is noted in :attr:`Offer.problems`; the check goes on without it. When
    neither probe reached the server at all, there is nothing to check: :class:`Unreachable` (the first's)."""
    offer = Offer()
    unreachable: list[Unreachable] = []
    session = Session("initialize", HANDSHAKE_VERSIONS[0], {}, [])
    try:
        with unwrap_group():
            await _probe_handshake(target, session, offer, timing)
    except Unreachable as exc:
        unreachable.append(exc)
        offer.problems.append(f"handshake probe failed: {exc.reason}")
    except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError) as exc:
        offer.problems.append(f"handshake probe failed: {_failure(exc)}")
    session = Session("stateless", STATELESS_VERSIONS[0], {}, [])
    try:
        with unwrap_group():
            await _probe_discover(target, session, offer, timing)
    except Unreachable as exc:
        unreachable.append(exc)
        offer.problems.append(f"server/discover probe failed: {exc.reason}")
    except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError) as exc:
        offer.problems.append(f"server/discover probe failed: {_failure(exc)}")
    if len(unreachable) == 2:
        raise unreachable[0]
    return offer


def _failure(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer in time (--timeout SECONDS waits longer)"
    return f"{type(exc).__name__} {exc}".strip()


async def _probe_handshake(target: Target, session: Session, offer: Offer, timing: Timing) -> None:
    timeout = timing.timeout
    async with target.connect(session) as channel:
        init = handshake_frame("probe-init", HANDSHAKE_VERSIONS[0], {})
        reply = await _first_reply(channel, init, "probe-init", "initialize", timing)
        if isinstance(reply.get("result"), dict):
            offer.handshake = reply["result"]
            await channel.send(INITIALIZED)
        else:
            offer.problems.append(f"initialize failed: {short(reply.get('error'))}")
        caps = (offer.handshake or {}).get("capabilities") or {}
        if "tools" in caps:
            offer.tools |= {t.get("name") for t in await _list_all(channel, "tools/list", "tools", None, timeout)}
        if "prompts" in caps:
            found = await _list_all(channel, "prompts/list", "prompts", None, timeout)
            offer.prompts |= {p.get("name") for p in found}
        if "resources" in caps:
            found = await _list_all(channel, "resources/list", "resources", None, timeout)
            offer.resources |= {r.get("uri") for r in found}


async def _probe_discover(target: Target, session: Session, offer: Offer, timing: Timing) -> None:
    timeout = timing.timeout
    async with target.connect(session) as channel:
        frame = {
            "jsonrpc": "2.0",
            "id": "probe-discover",
            "method": "server/discover",
            "params": {"_meta": stateless_meta()},
        }
        reply = await _first_reply(channel, json.dumps(frame).encode(), "probe-discover", "server/discover", timing)
        if reply.get("refused"):
            offer.problems.append(
                f"server/discover was refused ({short(reply['error'].get('message'))}): the 2026-07-28 "
                "sessions are skipped, the handshake sessions go on"
            )
        result = reply.get("result")
        if isinstance(result, dict) and STATELESS_VERSIONS[0] in (result.get("supportedVersions") or []):
            offer.stateless = result
            if offer.handshake is None:
                meta = stateless_meta()
                caps = result.get("capabilities") or {}
                if "tools" in caps:
                    found = await _list_all(channel, "tools/list", "tools", meta, timeout)
                    offer.tools |= {t.get("name") for t in found}
                if "prompts" in caps:
                    found = await _list_all(channel, "prompts/list", "prompts", meta, timeout)
                    offer.prompts |= {p.get("name") for p in found}
                if "resources" in caps:
                    found = await _list_all(channel, "resources/list", "resources", meta, timeout)
                    offer.resources |= {r.get("uri") for r in found}
