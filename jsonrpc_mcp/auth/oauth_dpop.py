"""DPoP, sender-constrained tokens (RFC 9449), for the OAuth client (L6; JOSE from joserfc, the ``auth`` extra).

A :class:`DPoPKey` holds one asymmetric key pair (EC P-256, ES256, by default) and makes proofs: a JWT with
``typ: dpop+jwt``, the public key in its ``jwk`` header, and the claims ``jti`` (fresh each time), ``htm``,
``htu`` (the URL without query and fragment), ``iat``, ``ath`` (the hash of the access token, on resource
requests) and ``nonce`` (when a server gave one). :class:`~jsonrpc_mcp.auth.OAuth` uses it when ``dpop`` is on:
proofs at the token endpoint (so the token is bound to the key), ``Authorization: DPoP <token>`` plus a proof on
every request to the resource, and one retry with the server's ``DPoP-Nonce`` after a ``use_dpop_nonce`` answer
(RFC 9449 §8, §9). The private key never leaves the process unless the token store keeps it (it does, so that
stored tokens stay usable).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from ..errors import MissingExtra

try:
    from joserfc import jwt
    from joserfc.jwk import ECKey, RSAKey, import_key
except ImportError:  # pragma: no cover - the auth extra is missing
    raise ImportError(f"DPoP needs joserfc: {MissingExtra.install('auth')}") from None

from .dpop import access_token_hash
from .oauth_wire import DPOP_ALGORITHMS

__all__ = ("DPoPKey", "htu_of", "access_token_hash")

_CURVES: Final = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}


def htu_of(url: str) -> str:
    """The ``htu`` of a proof: the request URL without its query and fragment (RFC 9449 §4.2)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", "", ""))


class DPoPKey:
    """A DPoP key pair and the proofs it signs.

    :param algorithm: ``ES256`` (default), ``ES384``, ``ES512``, ``RS256`` or ``PS256``; a new key of that kind is
        made unless ``private_jwk`` gives one.
    """

    def __init__(self, algorithm: str = "ES256", *, private_jwk: Mapping[str, Any] | None = None) -> None:
        if algorithm not in DPOP_ALGORITHMS:
            raise ValueError(f"DPoP proofs are signed with one of {', '.join(DPOP_ALGORITHMS)}, not {algorithm}")
        self.algorithm = algorithm
        if private_jwk is not None:
            self._key: Any = import_key(dict(private_jwk))
        elif algorithm in _CURVES:
            self._key = ECKey.generate_key(_CURVES[algorithm])
        else:
            self._key = RSAKey.generate_key(2048)
        self.public_jwk: dict[str, Any] = {
            k: v for k, v in self._key.as_dict(private=False).items() if k in ("kty", "crv", "x", "y", "n", "e")
        }
        #: RFC 7638 thumbprint of the public key (the ``jkt`` a bound token carries)
        self.thumbprint: str = self._key.thumbprint()

    def private_jwk(self) -> dict[str, Any]:
        """The key pair as a JWK (with the private part): for a token store, never for a log."""
        return dict(self._key.as_dict(private=True))

    def proof(self, method: str, url: str, *, access_token: str | None = None, nonce: str | None = None) -> str:
        """A fresh proof for one HTTP request."""
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(24),
            "htm": method.upper(),
            "htu": htu_of(url),
            "iat": int(time.time()),
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        if nonce is not None:
            claims["nonce"] = nonce
        header = {"typ": "dpop+jwt", "alg": self.algorithm, "jwk": self.public_jwk}
        return jwt.encode(header, claims, self._key, algorithms=[self.algorithm])
