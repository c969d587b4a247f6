"""Running transcripts against a target: sessions, exchanges, the sentinel that makes silence observable (L7)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Final

import anyio
import anyio.abc

from ..mcp.versions import (
    HANDSHAKE_VERSIONS,
)
from .channels import Channel, Target
from .comparison import Mode
from .frames import apply_masks, frame_key, loads, reply_id, short
from .grading import Observation, RuleResult, judge
from .probe import DEFAULT_TIMING, INITIALIZED, Offer, Timing, await_reply, handshake_frame, probe, stateless_meta
from .transcripts import SERVER_REQUEST_ID, SILENCE, Exchange, Session, Transcript, load_transcripts

__all__ = (
    "observe",
    "replay",
    "rewrite",
    "run_check",
)


LINGER: Final = 0.5

# --- running ------------------------------------------------------------------------------------------------


class _Sentinels:
    def __init__(self) -> None:
        self.n = 0

    def next(self, session: Session) -> tuple[str, bytes]:
        self.n += 1
        ident = f"sentinel-{self.n}"
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": ident}
        if session.kind == "stateless":
            msg["method"] = "server/discover"
            msg["params"] = {"_meta": stateless_meta()}
        else:
            msg["method"] = "ping"
        return ident, json.dumps(msg, separators=(",", ":")).encode()


async def _run_exchange(
    channel: Channel,
    session: Session,
    exchange: Exchange,
    sentinels: _Sentinels,
    state: dict[str, Any],
    masks: Sequence[str],
    timeout: float,
    grace: float,
) -> tuple[list[bytes], str | None]:
    placeholder = SERVER_REQUEST_ID.encode()
    frames = [f.replace(placeholder, json.dumps(state.get("request_id")).encode()) for f in exchange.send]
    ident, sentinel = sentinels.next(session)
    await channel.send_all([*frames, sentinel])
    need = Counter(frame_key(f) for f in exchange.expect)
    named = set(need)
    got: list[bytes] = []
    counted = 0  # the frames of got that stand for an expected one (not a notification nothing asked for)
    seen = False

    def done(linger: bool = False) -> bool:
        # Everything named arrived; or as many frames as expected did and (lingering) the rest is overdue.
        return seen and (not +need or (linger and counted >= len(exchange.expect)))

    async def collect(linger: bool = False) -> str | None:
        nonlocal seen, counted
        while not done(linger):
            try:
                frame = await channel.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return "the server closed the connection"
            if reply_id(frame) == ident:
                seen = True
                return None
            msg = loads(frame)
            if isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg:
                state["request_id"] = msg["id"]
            frame = apply_masks(frame, masks)
            key = frame_key(frame)
            if key[0] != "notification" or key in named:  # a notification may come at any time: not an answer
                counted += 1
            need[key] -= 1
            got.append(frame)
        return None

    with anyio.move_on_after(timeout) as scope:
        problem = await collect()
    if scope.cancelled_caught:
        return got, f"timed out after {timeout:g} s waiting for the sentinel's reply"
    if problem is None and not done():
        # Frames the expectation names are still owed. If as many frames as expected came already, the server
        # answered differently: linger briefly (a late reply still belongs here), else wait the whole grace.
        enough = counted >= len(exchange.expect)
        with anyio.move_on_after(min(grace, LINGER) if enough else grace) as scope:
            problem = await collect()
        if scope.cancelled_caught and enough:
            return got, None
        if scope.cancelled_caught:
            waiting = "; ".join(f"{kind} {what}".strip() for kind, what in +need)
            problem = f"waited {grace:g} s after the sentinel's reply for {waiting}"
    return got, problem


async def _handshake(channel: Channel, session: Session, timeout: float) -> str | None:
    """Initialize a handshake session; returns why it cannot be used, or ``None``."""
    assert session.revision is not None
    await channel.send(handshake_frame("init", session.revision, session.capabilities))
    try:
        reply = await await_reply(channel, "init", timeout)
    except TimeoutError:
        return f"no answer to initialize within {timeout:g} s"
    result = reply.get("result")
    if not isinstance(result, dict):
        return f"initialize failed: {short(reply.get('error'))}"
    if result.get("protocolVersion") != session.revision:
        return f"the server does not speak {session.revision} (it answered {result.get('protocolVersion')})"
    await channel.send(INITIALIZED)
    return None


def _session_skip(session: Session, offer: Offer | None, revisions: Sequence[str] | None) -> str | None:
    if revisions:
        if session.kind == "raw":
            if not any(r in HANDSHAKE_VERSIONS for r in revisions):
                return "handshake-era session; not a selected revision"
        elif session.revision not in revisions:
            return f"{session.revision} is not a selected revision"
    if offer is None:
        return None
    if session.kind == "stateless" and offer.stateless is None:
        return f"the server does not serve {session.revision} (server/discover failed)"
    if session.kind != "stateless" and offer.handshake is None:
        return "the server does not complete an initialize handshake"
    return None


async def observe(
    transcript: Transcript,
    target: Target,
    *,
    offer: Offer | None = None,
    revisions: Sequence[str] | None = None,
    timing: Timing = DEFAULT_TIMING,
    concurrency: int = 4,
) -> dict[str, Observation]:
    """Replay ``transcript`` against ``target``; returns what was observed per case name."""
    out: dict[str, Observation] = {}
    limiter = anyio.CapacityLimiter(max(1, concurrency))

    async def run_session(session: Session) -> None:
        async with limiter:
            await _observe_session(transcript, session, target, offer, revisions, timing, out)

    async with anyio.create_task_group() as tg:
        for session in transcript.sessions:
            tg.start_soon(run_session, session)
    return out


async def _observe_session(
    transcript: Transcript,
    session: Session,
    target: Target,
    offer: Offer | None,
    revisions: Sequence[str] | None,
    timing: Timing,
    out: dict[str, Observation],
) -> None:
    skip = _session_skip(session, offer, revisions)
    if skip is not None:
        for case in session.cases:
            out[case.name] = Observation(None, skipped=skip)
        return
    sentinels = _Sentinels()
    state: dict[str, Any] = {}
    first = True  # the first reply on a connection may wait for the server to start
    try:
        async with target.connect(session) as channel:
            if session.kind == "initialize":
                why = await _handshake(channel, session, timing.startup)
                first = False
                if why is not None:
                    for case in session.cases:
                        out[case.name] = Observation(None, skipped=why)
                    return
            broken: str | None = None
            for case in session.cases:
                if broken is not None:
                    out[case.name] = Observation(None, problem=broken)
                    continue
                if case.transports and target.kind not in case.transports:
                    only = " and ".join(case.transports)
                    out[case.name] = Observation(
                        None, skipped=f"a {only} rule (the {target.kind} transport has its own)"
                    )
                    continue
                if offer is not None:
                    why = next((m for n in (*transcript.needs, *case.needs) if (m := offer.missing(n, session))), None)
                    if why is not None:
                        out[case.name] = Observation(None, skipped=why)
                        continue
                frames: list[list[bytes]] = []
                problem = None
                for exchange in case.exchanges:
                    timeout = timing.startup if first else timing.timeout
                    grace = case.timeout or timing.grace
                    first = False
                    got, problem = await _run_exchange(
                        channel, session, exchange, sentinels, state, case.mask, timeout, grace
                    )
                    frames.append(got)
                    if problem is not None:
                        break
                out[case.name] = Observation(frames, problem=problem)
                if problem is not None and "closed" in problem:
                    broken = "the server closed the connection in an earlier case"
    except (OSError, anyio.BrokenResourceError) as exc:
        for case in session.cases:
            out.setdefault(case.name, Observation(None, problem=f"cannot connect: {type(exc).__name__}: {exc}"))


async def replay(
    transcript: Transcript,
    target: Target,
    *,
    mode: Mode = "exact",
    offer: Offer | None = None,
    revisions: Sequence[str] | None = None,
    timing: Timing = DEFAULT_TIMING,
    concurrency: int = 4,
) -> tuple[RuleResult, dict[str, Observation]]:
    """Observe and judge one transcript."""
    observed = await observe(
        transcript, target, offer=offer, revisions=revisions, timing=timing, concurrency=concurrency
    )
    return judge(transcript, observed, mode), observed


def rewrite(transcript: Transcript, observed: dict[str, Observation], *, keep: Iterable[str] = ()) -> str:
    """The transcript's text with every ``<<<`` block replaced by what was observed (cases in ``keep`` untouched)."""
    lines = transcript.path.read_text(encoding="utf-8").split("\n")
    kept = set(keep)
    edits: list[tuple[tuple[int, int], list[str]]] = []
    for _, case in transcript.cases():
        obs = observed.get(case.name)
        if case.name in kept or obs is None or obs.frames is None:
            continue
        for exchange, frames in zip(case.exchanges, obs.frames, strict=False):
            new = [f"<<< {f.decode('utf-8', errors='backslashreplace')}" for f in frames] or [f"<<< {SILENCE}"]
            edits.append((exchange.span, new))
    for (start, stop), new in sorted(edits, reverse=True):
        lines[start:stop] = new
    return "\n".join(lines)


async def run_check(
    target: Target,
    *,
    transcripts: Sequence[Transcript] | None = None,
    mode: Mode = "semantic",
    revisions: Sequence[str] | None = None,
    timing: Timing = DEFAULT_TIMING,
    concurrency: int = 4,
    use_probe: bool = True,
) -> tuple[list[RuleResult], Offer | None]:
    """Replay every transcript against ``target`` (what it offers probed first, unless ``use_probe`` is false)."""
    files = list(transcripts) if transcripts is not None else load_transcripts()
    offer = await probe(target, timing=timing) if use_probe else None
    results: dict[str, RuleResult] = {}
    limiter = anyio.CapacityLimiter(max(1, concurrency))

    async def one(t: Transcript) -> None:
        async with limiter:
            result, _ = await replay(
                t, target, mode=mode, offer=offer, revisions=revisions, timing=timing, concurrency=1
            )
            results[t.name] = result

    async with anyio.create_task_group() as tg:
        for t in files:
            tg.start_soon(one, t)
    return [results[t.name] for t in files], offer
