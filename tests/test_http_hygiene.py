"""Small holes of the Streamable HTTP endpoint, each through real sockets against a real uvicorn: a header that must
be single sent twice, a body declared in a charset other than UTF-8, CORS for an allowed browser origin (preflight
and responses, and its agreement with the Origin guard), and HTTPS with a certificate made here."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import pytest
from helpers import serve_command
from http_support import (
    JSON_HEADERS,
    ServerThread,
    free_port,
    init_body,
    make_server,
    open_session,
    raw_post,
    start_app,
)
from tls_support import self_signed, trusting

from jsonrpc_mcp.transports.http_serve import make_uvicorn_server

pytestmark = pytest.mark.anyio

APP_ORIGIN = "https://app.example"


@pytest.fixture(scope="module")
def plain() -> Iterator[ServerThread]:
    thread = start_app()
    yield thread
    thread.stop()


@pytest.fixture(scope="module")
def with_cors() -> Iterator[ServerThread]:
    thread = start_app(cors_origins=[APP_ORIGIN])
    yield thread
    thread.stop()


# --- headers sent twice, charsets ---------------------------------------------------------------------------------


async def test_a_session_id_sent_twice_is_refused(plain: ServerThread) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        session = await open_session(http, plain.url)
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    base = [("Accept", JSON_HEADERS["Accept"]), ("Content-Type", "application/json")]
    for twice in ([session.id, session.id], [session.id, "another"]):
        headers = base + [("Mcp-Session-Id", value) for value in twice]
        status, _, body = await raw_post(plain.url, headers, ping)
        assert status == 400
        assert json.loads(body)["error"]["message"] == "Bad Request: the Mcp-Session-Id header is sent more than once"
    status, _, body = await raw_post(plain.url, [*base, ("Mcp-Session-Id", session.id)], ping)
    assert status == 200 and json.loads(body) == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        ("application/json; charset=latin-1", 415),
        ("application/json; charset=utf-16", 415),
        ('application/json; charset="iso-8859-1"', 415),
        ("application/json; charset=UTF-8", 200),
        ('application/json;charset="utf-8"', 200),
        ("application/json", 200),
        ("text/plain", 415),
    ],
)
async def test_a_body_in_another_charset_is_refused(plain: ServerThread, content_type: str, status: int) -> None:
    headers = [("Accept", JSON_HEADERS["Accept"]), ("Content-Type", content_type)]
    got, _, body = await raw_post(plain.url, headers, json.dumps(init_body()).encode())
    assert got == status, body
    if status == 415:
        message = json.loads(body)["error"]["message"]
        assert message.startswith("Unsupported Media Type: the body must be")
        if "charset" in content_type:
            assert "UTF-8" in message


# --- CORS ---------------------------------------------------------------------------------------------------------


async def test_a_preflight_from_an_allowed_origin_is_answered(with_cors: ServerThread) -> None:
    asked = "content-type, mcp-session-id, mcp-protocol-version, authorization, mcp-param-region"
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.options(
            with_cors.url,
            headers={
                "Origin": APP_ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": asked,
            },
        )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == APP_ORIGIN
    assert response.headers["access-control-allow-methods"] == "GET, POST, DELETE, OPTIONS"
    allowed = {name.strip() for name in response.headers["access-control-allow-headers"].split(",")}
    assert {"content-type", "authorization", "mcp-session-id", "mcp-protocol-version", "mcp-method"} <= allowed
    assert {"mcp-name", "last-event-id", "mcp-param-region", "dpop"} <= allowed
    assert int(response.headers["access-control-max-age"]) > 0
    assert response.headers["vary"] == "Origin"


async def test_responses_to_an_allowed_origin_carry_the_cors_headers(with_cors: ServerThread) -> None:
    headers = {**JSON_HEADERS, "Origin": APP_ORIGIN}
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(with_cors.url, json=init_body(), headers=headers)
        assert response.status_code == 200  # an origin allowed for CORS is an allowed Origin
        assert response.headers["access-control-allow-origin"] == APP_ORIGIN
        exposed = {name.strip() for name in response.headers["access-control-expose-headers"].split(",")}
        assert exposed == {"mcp-session-id", "www-authenticate", "dpop-nonce"}  # (a browser client reads a DPoP nonce)
        assert response.headers["vary"] == "Origin"
        refused = await http.post(with_cors.url, content=b"{", headers={**headers, "Content-Type": "text/plain"})
        assert refused.status_code == 415 and refused.headers["access-control-allow-origin"] == APP_ORIGIN


async def test_other_origins_get_no_cors(with_cors: ServerThread) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        stranger = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
        assert (await http.options(with_cors.url, headers=stranger)).status_code == 403  # the Origin guard
        local = {"Origin": f"http://127.0.0.1:{with_cors.port}", "Access-Control-Request-Method": "POST"}
        preflight = await http.options(with_cors.url, headers=local)  # allowed as an Origin, not for CORS
        assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
        same = await http.post(with_cors.url, json=init_body(), headers={**JSON_HEADERS, **local})
        assert same.status_code == 200 and "access-control-allow-origin" not in same.headers
        no_preflight = await http.options(with_cors.url, headers={"Origin": APP_ORIGIN})
        assert no_preflight.status_code == 405


async def test_cors_is_off_by_default(plain: ServerThread) -> None:
    preflight = {"Origin": APP_ORIGIN, "Access-Control-Request-Method": "POST"}
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.options(plain.url, headers=preflight)).status_code == 403
        local = {"Origin": f"http://127.0.0.1:{plain.port}", "Access-Control-Request-Method": "POST"}
        response = await http.options(plain.url, headers=local)
        assert response.status_code == 405 and "access-control-allow-origin" not in response.headers


# --- TLS ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


async def test_serve_http_over_tls(certificate: tuple[Path, Path]) -> None:
    certfile, keyfile = certificate
    uv_server, app = make_uvicorn_server(
        make_server(), "127.0.0.1", 0, ssl_certfile=str(certfile), ssl_keyfile=str(keyfile)
    )
    thread = ServerThread(app, uv_server=uv_server)
    try:
        url = f"https://127.0.0.1:{thread.port}/mcp"
        async with httpx.AsyncClient(timeout=10, verify=trusting(certfile)) as http:
            session = await open_session(http, url)
            answer = await session.call(2, "add", {"a": 2, "b": 3})
            assert answer["result"]["structuredContent"] == {"result": 5}
        async with httpx.AsyncClient(timeout=10) as untrusting:  # the system's roots do not know this certificate
            with pytest.raises(httpx.ConnectError):
                await untrusting.post(url, json=init_body(), headers=JSON_HEADERS)
        async with httpx.AsyncClient(timeout=10) as http:  # nor is plain HTTP served on that port
            with pytest.raises(httpx.TransportError):
                await http.post(thread.url, json=init_body(), headers=JSON_HEADERS)
    finally:
        thread.stop()


async def test_the_cli_serves_https(certificate: tuple[Path, Path]) -> None:
    certfile, keyfile = certificate
    port = free_port()
    command = [
        *serve_command(),
        "--http",
        f"127.0.0.1:{port}",
        "--certfile",
        str(certfile),
        "--keyfile",
        str(keyfile),
    ]
    async with await anyio.open_process(command, stderr=subprocess.PIPE) as process:
        assert process.stderr is not None
        try:
            async with httpx.AsyncClient(timeout=10, verify=trusting(certfile)) as http:
                with anyio.fail_after(30):
                    while True:  # until it listens (bounded)
                        try:
                            response = await http.post(
                                f"https://127.0.0.1:{port}/mcp", json=init_body(), headers=JSON_HEADERS
                            )
                            break
                        except httpx.ConnectError:
                            assert process.returncode is None, "the server exited"
                            await anyio.sleep(0.05)
            assert response.status_code == 200 and response.json()["result"]["protocolVersion"]
        finally:
            process.terminate()
            with anyio.fail_after(10):
                await process.wait()
        banner = b"".join([chunk async for chunk in process.stderr])
    assert f"https://127.0.0.1:{port}/mcp".encode() in banner


def test_the_cli_names_tls_when_tls_is_what_fails(certificate: tuple[Path, Path]) -> None:
    """Not "Operation not permitted" (OpenSSL's error 1 read as an errno): an untrusted certificate, and an
    https:// URL to a plain-HTTP server or an http:// one to an HTTPS server, each say so in one line."""
    certfile, keyfile = certificate
    uv_tls, tls_app = make_uvicorn_server(
        make_server(), "127.0.0.1", 0, ssl_certfile=str(certfile), ssl_keyfile=str(keyfile)
    )
    uv_plain, plain_app = make_uvicorn_server(make_server(), "127.0.0.1", 0)
    tls, plain = ServerThread(tls_app, uv_server=uv_tls), ServerThread(plain_app, uv_server=uv_plain)
    https_url = f"https://127.0.0.1:{tls.port}/mcp"
    runs = {
        "untrusted": (https_url, {}),
        "trusted": (https_url, {"SSL_CERT_FILE": str(certfile)}),  # what the message says to do
        "https-to-plain": (plain.url.replace("http://", "https://"), {}),
        "http-to-tls": (f"http://127.0.0.1:{tls.port}/mcp", {}),
    }

    def run(url: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        command = [*serve_command()[:3], "list", "--url", url]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, env={**os.environ, **env})

    try:
        with ThreadPoolExecutor(max_workers=len(runs)) as pool:
            futures = {name: pool.submit(run, *args) for name, args in runs.items()}
            done = {name: future.result() for name, future in futures.items()}
    finally:
        tls.stop()
        plain.stop()
    where = f"127.0.0.1:{tls.port} ({https_url})"
    assert (done["untrusted"].returncode, done["untrusted"].stderr) == (
        4,
        f"jsonrpc-mcp: cannot connect to {where}: its TLS certificate is not trusted (self-signed certificate; to "
        "trust a self-signed certificate or a private CA, name its PEM file in SSL_CERT_FILE)\n",
    )
    assert done["trusted"].returncode == 0 and done["trusted"].stdout.startswith("http-fixture 1.0.0 ")
    plain_url = plain.url.replace("http://", "https://")
    assert (done["https-to-plain"].returncode, done["https-to-plain"].stderr) == (
        4,
        f"jsonrpc-mcp: cannot connect to 127.0.0.1:{plain.port} ({plain_url}): the server did not answer in TLS (a "
        "plain HTTP server? try http://)\n",
    )
    assert (done["http-to-tls"].returncode, done["http-to-tls"].stderr) == (
        4,
        "jsonrpc-mcp: the server closed the connection without an HTTP answer (a server that speaks TLS? try "
        "https://)\n",
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--keyfile", "key.pem"], b"--keyfile needs --certfile"),
        (["--certfile", "/nonexistent/cert.pem"], b"no such file: /nonexistent/cert.pem"),
    ],
)
def test_the_cli_refuses_a_tls_setting_it_cannot_use(options: list[str], message: bytes) -> None:
    done = subprocess.run([*serve_command(), "--http", "127.0.0.1:9", *options], capture_output=True, timeout=60)
    assert done.returncode == 1 and message in done.stderr and b"Traceback" not in done.stderr


def test_the_cli_refuses_a_key_that_is_not_a_key(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    bogus = tmp_path / "key.pem"
    bogus.write_text("not a key\n")
    command = [*serve_command(), "--http", f"127.0.0.1:{free_port()}", "--certfile", str(certificate[0])]
    done = subprocess.run([*command, "--keyfile", str(bogus)], capture_output=True, timeout=60)
    assert done.returncode == 1 and b"cannot use the certificate and key" in done.stderr
    assert b"Traceback" not in done.stderr
