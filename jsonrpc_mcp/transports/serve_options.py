"""The settings of a server on sockets, checked before it listens (L6 helper of :mod:`.socket`).

``serve_tcp(server, max_inflight=8)`` would otherwise bind, accept, and fail every connection it accepted with a
``TypeError`` in the log; a ``max_frame`` or ``max_in_flight`` of 0 the same way, with a ``ValueError``. Here each
is refused once, at the call, naming the setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .framing import LineFramer

__all__ = ("check_serve_options",)

#: :meth:`Server.serve`'s limits for each connection, and what each must be.
_LIMITS: Final = {
    "max_in_flight": "count",
    "max_queued_bytes": "count",
    "request_timeout": "seconds or None",
    "drain_timeout": "seconds or zero",
}


def check_serve_options(max_frame: Any, limits: Mapping[str, Any]) -> None:
    """Refuse a wrong ``max_frame`` or a wrong or unknown limit of :meth:`Server.serve` (:class:`ValueError` or
    :class:`TypeError` naming it)."""
    LineFramer(max_frame)  # (its own check of max_frame)
    for name, value in limits.items():
        kind = _LIMITS.get(name)
        if kind is None:
            known = ", ".join(_LIMITS)
            raise TypeError(f"{name!r} is not a limit of a connection (those are max_frame, {known})")
        if value is None and kind == "seconds or None":
            continue
        whole = kind == "count"
        if isinstance(value, bool) or not isinstance(value, (int,) if whole else (int, float)):
            raise TypeError(f"{name} must be {'a whole number' if whole else 'a number of seconds'}, not {value!r}")
        if not (value > 0 or (kind == "seconds or zero" and value == 0)):  # (a NaN is neither)
            raise ValueError(
                f"{name} must be {'zero or more' if kind == 'seconds or zero' else 'positive'}, not {value!r}"
            )
