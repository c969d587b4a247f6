"""Progress paced: at most one report per interval for each token, the latest one never lost (decision 104).

"Both parties SHOULD implement rate limiting to prevent flooding" (the progress page of every revision). A
:class:`Pacer` sits where progress goes out (a server's ``notifications/progress``) and where it comes in (a
client's progress callback). The first report of a key passes at once; the ones that come within the interval
after it are held, each replacing the one held before (progress only increases, so the latest says all), and the
held one passes when the interval ends, or earlier when its request ends (:meth:`Pacer.finish`: a server sends it
before the response, a client hands it to the callback before the result). One waiting task per key at most, never
one per report. ``interval=0`` lets every report pass as it comes.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Final

import anyio

__all__ = ("DEFAULT_INTERVAL", "MAX_KEYS", "Pacer", "check_interval", "clock")

logger = logging.getLogger("jsonrpc_mcp.progress")

#: Seconds between two reports of one token, by default: far below any request timeout a progress report resets
#: (a held report is late by this much at most), and more often than any person reads a progress bar.
DEFAULT_INTERVAL: Final = 0.05

#: The most keys a pacer follows at once: past it, a report of a new key passes as it comes (never held, never
#: lost). Keys are the requests in flight of one connection that asked for progress, which are bounded already.
MAX_KEYS: Final = 4096

_NOTHING: Final[Any] = object()


def clock() -> float:
    """The pacer's clock: anyio's (the tests put a clock of their own here)."""
    return anyio.current_time()


def check_interval(interval: object) -> float:
    """``interval`` as a number of seconds of a pacer, or a ``TypeError``/``ValueError`` naming the option."""
    if isinstance(interval, bool) or not isinstance(interval, (int, float)):
        raise TypeError(f"progress_interval must be a number of seconds, not {interval!r}")
    if not interval >= 0:  # (a NaN is not either)
        raise ValueError(f"progress_interval must be 0 or more seconds, not {interval!r}")
    return float(interval)


class _Slot:
    """What a pacer knows of one key: when the next report may pass, the report held meanwhile, the task waiting
    to pass it, and the passing of a held report under way."""

    __slots__ = ("held", "next_at", "scope", "sending", "waiting")

    def __init__(self, next_at: float) -> None:
        self.next_at = next_at
        self.held: Any = _NOTHING
        self.waiting = False
        self.scope: anyio.CancelScope | None = None
        self.sending: anyio.Event | None = None


class Pacer:
    """Reports of many keys, each passed to ``deliver`` at most once per ``interval`` seconds (see the module).

    ``spawn(fn, *args)`` starts the task that passes a held report when its interval ends (a dispatcher's
    :meth:`~jsonrpc_mcp.jsonrpc.dispatch.Dispatcher.spawn`); when it cannot, the report waits for :meth:`finish`.
    """

    __slots__ = ("_deliver", "_slots", "_spawn", "interval")

    def __init__(self, interval: float, deliver: Callable[[Any], Awaitable[None]], spawn: Callable[..., bool]) -> None:
        self.interval = interval
        self._deliver = deliver
        self._spawn = spawn
        self._slots: dict[Hashable, _Slot] = {}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._slots

    @property
    def held(self) -> int:
        """How many keys hold a report now."""
        return sum(slot.held is not _NOTHING for slot in self._slots.values())

    async def report(self, key: Hashable, value: Any) -> None:
        """Pass ``value`` now if the key's interval allows it, else hold it (in place of the one held)."""
        if self.offer(key, value):
            await self._deliver(value)

    def offer(self, key: Hashable, value: Any) -> bool:
        """True when ``value`` is to pass now (the caller passes it); else it is held, in place of the one held,
        and passed when the key's interval ends (or at :meth:`finish`)."""
        if not self.interval:
            return True
        now = clock()
        slot = self._slots.get(key)
        if slot is None:
            if len(self._slots) < MAX_KEYS:
                self._slots[key] = _Slot(now + self.interval)
            return True
        if slot.held is _NOTHING and not slot.waiting and now >= slot.next_at:
            slot.next_at = now + self.interval
            return True
        slot.held = value
        if not slot.waiting:
            slot.waiting = self._spawn(self._pass_later, key, slot)
        return False

    async def finish(self, key: Hashable) -> None:
        """The key's request ends: pass what it holds now (after a held report being passed, if one is), and
        forget the key."""
        slot = self._slots.pop(key, None)
        if slot is None:
            return
        if slot.scope is not None:
            slot.scope.cancel()
        if slot.sending is not None:
            await slot.sending.wait()
        value, slot.held = slot.held, _NOTHING
        if value is not _NOTHING:
            await self._deliver(value)

    def drop(self, key: Hashable) -> None:
        """The key's request was cancelled: forget it and what it holds."""
        slot = self._slots.pop(key, None)
        if slot is not None:
            slot.held = _NOTHING
            if slot.scope is not None:
                slot.scope.cancel()

    async def _pass_later(self, key: Hashable, slot: _Slot) -> None:
        """The key's task: wait for the end of its interval, then pass what it holds (unless finished meanwhile)."""
        if self._slots.get(key) is not slot:
            return
        with anyio.CancelScope() as slot.scope:
            await anyio.sleep(max(0.0, slot.next_at - clock()))
        slot.scope = None
        slot.waiting = False
        if self._slots.get(key) is not slot:
            return
        value, slot.held = slot.held, _NOTHING
        if value is _NOTHING:
            return
        slot.next_at = clock() + self.interval
        slot.sending = sent = anyio.Event()
        try:
            await self._deliver(value)
        except Exception as exc:  # (the connection ended meanwhile: nobody waits for it)
            logger.debug("a held progress report could not be passed on: %s", type(exc).__name__)
        finally:
            slot.sending = None
            sent.set()
