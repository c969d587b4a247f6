"""The smoke test of an installed wheel: run by `make release` with the Python of a fresh virtual environment,
from a directory outside the checkout, so only what the wheel installed is imported.

    python .ci/smoke.py EXTRA CHECKOUT

Every extra: `jsonrpc-mcp serve` (the knowledge server on stdio) answers `list` and `call` through the CLI. The
`http` extra: the same server over Streamable HTTP. The `validation` extra: a raw-schema tool refuses arguments
its schema refuses, and `jsonrpc-mcp check` passes every golden transcript against the everything-server (whose
raw-schema tools need this extra). The `auth` extra: a JWT verifier accepts a token signed with its key and
refuses one signed with another.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
CLI = str(BIN / "jsonrpc-mcp")


def run(*args: str, cwd: str, timeout: float = 300) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        sys.exit(f"smoke: {' '.join(args)} exited with {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def stdio(work: str) -> None:
    serve = ["--", CLI, "serve"]
    listing = run(CLI, "list", *serve, cwd=work)
    assert "store" in listing, listing
    stored = run(
        CLI, "call", *serve, "tools/call", "store", '{"topic": "smoke", "content": "from the wheel"}', cwd=work
    )
    assert "smoke" in stored, stored
    print("smoke: serve, list and call over stdio")


def check(work: str, checkout: Path) -> None:
    server = [sys.executable, str(checkout / "conformance" / "everything_server.py"), "--stdio"]
    run(CLI, "check", "--", *server, cwd=work, timeout=900)  # the wheel's own transcripts; exit 0: no rule failed
    print("smoke: check passes every golden transcript the wheel ships")


def http(work: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [CLI, "serve", "--http", f"127.0.0.1:{port}"], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 60
        while True:  # the server's start: poll its port (nothing else says when uvicorn listens)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit("smoke: the HTTP server did not start")
                time.sleep(0.2)
        listing = run(CLI, "list", "--url", url, cwd=work)
        assert "store" in listing, listing
        called = run(
            CLI, "call", "--url", url, "tools/call", "store", '{"topic": "smoke", "content": "over HTTP"}', cwd=work
        )
        assert "smoke" in called, called
        print("smoke: serve, list and call over Streamable HTTP")
    finally:
        server.terminate()
        server.wait(30)


def validation() -> None:
    import anyio

    from jsonrpc_mcp import Client, Server

    server = Server("smoke", "1.0")

    @server.tool(input_schema={"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}})
    def count(n: int) -> str:
        return "ok"

    async def main() -> None:
        async with Client.connect_server(server) as client:
            assert (await client.call_tool("count", {"n": 2})).is_error is not True
            assert (await client.call_tool("count", {"n": 0})).is_error is True

    anyio.run(main)
    print("smoke: a raw JSON Schema is enforced")


def auth() -> None:
    import anyio
    from joserfc import jwt
    from joserfc.jwk import RSAKey

    from jsonrpc_mcp.auth import InvalidToken, JwtVerifier

    key = RSAKey.generate_key(2048, {"kid": "k"})
    other = RSAKey.generate_key(2048, {"kid": "k"})
    now = int(time.time())
    claims = {
        "iss": "https://as.example",
        "aud": "https://mcp.example/mcp",
        "sub": "smoke",
        "iat": now,
        "exp": now + 60,
    }
    good = jwt.encode({"alg": "RS256", "kid": "k"}, claims, key)
    bad = jwt.encode({"alg": "RS256", "kid": "k"}, claims, other)
    verifier = JwtVerifier(
        issuer="https://as.example", audience="https://mcp.example/mcp", keys=key.as_dict(private=False)
    )

    async def main() -> None:
        assert (await verifier.verify(good)).subject == "smoke"
        try:
            await verifier.verify(bad)
        except InvalidToken:
            return
        raise AssertionError("a token signed with another key was accepted")

    anyio.run(main)
    print("smoke: a JWT is verified")


def otel() -> None:
    """The otel extra alone (the API, no SDK): a server and a client given a Tracing answer as before."""
    import anyio

    from jsonrpc_mcp import Client, Server
    from jsonrpc_mcp.otel import Tracing

    server = Server("smoke-otel", "1", tracing=Tracing())

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    async def main() -> None:
        async with Client.connect_server(server, tracing=Tracing()) as client:
            result = await client.call_tool("add", {"a": 1, "b": 2})
            assert result.structured_content == {"result": 3}, result

    anyio.run(main)
    print("smoke: a server and a client traced with the API alone answer")


def main() -> None:
    extra, checkout = sys.argv[1], Path(sys.argv[2]).resolve()
    with tempfile.TemporaryDirectory() as work:
        os.chdir(work)
        import jsonrpc_mcp

        assert checkout not in Path(jsonrpc_mcp.__file__).resolve().parents, "imported from the checkout"
        stdio(work)
        if extra == "http":
            http(work)
        elif extra == "validation":
            validation()
            check(work, checkout)  # the everything-server's raw-schema tools are enforced with this extra only
        elif extra == "auth":
            auth()
        elif extra == "otel":
            otel()
    print(f"smoke: the wheel with extra {extra!r} works")


if __name__ == "__main__":
    main()
