"""The authenticated principal as the protocol core knows it, and the one scope rule it applies (L2: no I/O).

* :class:`AccessToken` — who a request was authenticated as: what a handler reads as ``ctx.auth``, and what a
  tool's ``scopes`` are checked against. An HTTP policy (:mod:`jsonrpc_mcp.auth`) builds it; the core never needs
  to know which one.
* :func:`missing_scopes` — does a set of granted scopes satisfy the scopes an operation needs, a scope hierarchy
  (a broader scope implying narrower ones) taken into account.

:mod:`jsonrpc_mcp.auth.principal` re-exports both beside the verifiers' rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

__all__ = ("AccessToken", "missing_scopes")


class AccessToken(msgspec.Struct, frozen=True, kw_only=True):
    """An accepted access token: what a handler sees as ``ctx.auth``.

    :param subject: the resource owner (``sub``), or ``None`` when the token names none.
    :param client_id: the OAuth client the token was issued to (``client_id``, else ``azp``).
    :param scopes: the scopes granted.
    :param expires_at: when the token expires, in seconds since the epoch (``None``: the token says nothing).
    :param audience: the resources the token was issued for (``aud``).
    :param issuer: the authorization server that issued it (``iss``).
    :param claims: everything the token (or the introspection response) said, as read.
    """

    subject: str | None
    client_id: str | None
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    audience: tuple[str, ...] = ()
    issuer: str | None = None
    claims: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def principal(self) -> tuple[str | None, str | None, str | None]:
        """Who this token stands for, as ``(issuer, subject, client_id)``: two tokens of the same principal may
        share a session; tokens of different principals may not."""
        return (self.issuer, self.subject, self.client_id)

    def has_scopes(self, needed: Iterable[str], implies: Mapping[str, Iterable[str]] | None = None) -> bool:
        """True when the granted scopes cover ``needed`` (see :func:`missing_scopes`)."""
        return not missing_scopes(self.scopes, needed, implies)


def missing_scopes(
    granted: Iterable[str], needed: Iterable[str], implies: Mapping[str, Iterable[str]] | None = None
) -> tuple[str, ...]:
    """The scopes of ``needed`` that ``granted`` does not cover, sorted; empty when it covers them all.

    ``implies`` is the server's scope hierarchy: ``{"notes:admin": ["notes:write"], "notes:write":
    ["notes:read"]}`` makes a token with ``notes:admin`` good for an operation that needs ``notes:read``
    (followed transitively; cycles are harmless)."""
    have = set(granted)
    wanted = set(needed)
    if wanted <= have:
        return ()
    if implies:
        todo = list(have)
        while todo:
            for narrower in implies.get(todo.pop(), ()):
                if narrower not in have:
                    have.add(narrower)
                    todo.append(narrower)
    return tuple(sorted(wanted - have))
