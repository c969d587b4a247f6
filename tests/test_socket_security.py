"""The socket transports' own protection (they carry no credentials): a Unix socket only its owner may connect to,
TCP kept to loopback unless beyond it is asked for, TLS when wanted."""

from __future__ import annotations

import os
import shutil
import ssl
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from fixtures.everything import make_server
from tls_support import self_signed, trusting

from jsonrpc_mcp import Client, ServerUnreachable
from jsonrpc_mcp.transports.socket import RemoteListenRefused, check_listen_host, serve_tcp, serve_unix

pytestmark = pytest.mark.anyio


@pytest.fixture
def folder() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="mcp-")  # short: AF_UNIX paths are limited to ~100 bytes
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.mark.parametrize(("mode", "expected"), [(None, 0o600), (0o660, 0o660)])
async def test_a_unix_socket_is_its_owners_alone_unless_a_mode_says_otherwise(
    folder: str, mode: int | None, expected: int
) -> None:
    path = os.path.join(folder, "s.sock")
    options = {} if mode is None else {"mode": mode}
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: serve_unix(make_server(), path, task_status=task_status, **options))
        assert stat.S_IMODE(os.stat(path).st_mode) == expected
        assert os.listdir(folder) == ["s.sock"]  # (bound elsewhere first: nothing of that is left)
        with anyio.fail_after(10):
            async with Client.connect_unix(path) as client:
                assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"
        tg.cancel_scope.cancel()
    assert os.listdir(folder) == []


async def test_a_unix_socket_keeps_its_mode_under_a_permissive_umask(folder: str) -> None:
    """With umask 0 a socket file is made world-writable: anyone could connect. Ours has its mode, and was given it
    before it was moved to ``path`` (nobody could connect to it in between: its folder was its owner's alone)."""
    path = os.path.join(folder, "s.sock")
    previous = os.umask(0)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve_unix(make_server(), path, task_status=task_status))
            assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
            tg.cancel_scope.cancel()
    finally:
        os.umask(previous)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.168.1.20", "mcp.example.com"])
async def test_tcp_beyond_loopback_is_refused_unless_allowed(host: str) -> None:
    with pytest.raises(RemoteListenRefused, match="allow_remote=True"):
        await serve_tcp(make_server(), host, 0)
    check_listen_host(host, allow_remote=True)  # (allowed: what it then binds to is the caller's)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_tcp_on_loopback_needs_no_permission(host: str) -> None:
    check_listen_host(host, allow_remote=False)


async def test_tcp_over_tls(certificate: tuple[Path, Path]) -> None:
    certfile, keyfile = certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda task_status: serve_tcp(make_server(), port=0, ssl_context=context, task_status=task_status)
        )
        with anyio.fail_after(10):
            async with Client.connect_tcp("127.0.0.1", port, ssl_context=trusting(certfile)) as client:
                assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"
            with pytest.raises(ServerUnreachable, match="TLS certificate is not trusted"):
                async with Client.connect_tcp("127.0.0.1", port, ssl_context=ssl.create_default_context()):
                    pass
            async with Client.connect_tcp("127.0.0.1", port, ssl_context=trusting(certfile)) as client:
                await client.ping()  # (a refused handshake of another client left the server serving)
        tg.cancel_scope.cancel()
