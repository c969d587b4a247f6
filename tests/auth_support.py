"""The scaffolding of the protected-server tests: the authorization server of auth_server.py as a module's ``auth``
fixture, the JWT checks and policy a protected server trusts it with, and a server whose app is made once it
listens (the resource URI names its port).

A module imports the fixture by name (``from auth_support import auth as auth``), as it does http_support's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from auth_server import AuthServer, running_auth_server
from http_support import ServerThread

from jsonrpc_mcp.auth import JwtVerifier, ProtectedResource

__all__ = ("LateApp", "auth", "jwt_policy", "jwt_verifier", "serve_late")


@pytest.fixture(scope="module")
def auth() -> Iterator[AuthServer]:
    """The authorization server of auth_server.py (under uvicorn on loopback), one per test module."""
    with running_auth_server() as state:
        yield state


def jwt_verifier(auth: AuthServer, resource: str) -> JwtVerifier:
    """Checks the JWTs ``auth`` issues for ``resource``, with the keys of its JWKS endpoint."""
    return JwtVerifier(issuer=auth.issuer, audience=resource, jwks_url=f"{auth.issuer}/jwks")


def jwt_policy(auth: AuthServer, resource: str, **options: Any) -> ProtectedResource:
    """The protected resource ``resource`` whose authorization server is ``auth`` (its JWTs: :func:`jwt_verifier`);
    ``options``: the rest of :class:`ProtectedResource`'s."""
    return ProtectedResource(
        resource=resource, authorization_servers=[auth.issuer], verifier=jwt_verifier(auth, resource), **options
    )


class LateApp:
    """An ASGI app filled in once the server listens (the protected resource's URI names the port)."""

    app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def serve_late(build: Callable[[ServerThread], Any]) -> ServerThread:
    """A server (without ASGI lifespan) whose app is ``build(thread)``, made once the thread listens."""
    late = LateApp()
    thread = ServerThread(late, lifespan="off")
    late.app = build(thread)
    return thread
