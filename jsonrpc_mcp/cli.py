"""The ``jsonrpc-mcp`` command: serve a server on any transport, or poke one as a small client (L7).

::

    jsonrpc-mcp serve [APP] [--stdio | --tcp HOST:PORT | --unix PATH | --http HOST:PORT [--path /mcp] [HTTP options]]
    jsonrpc-mcp serve [APP] --http HOST:PORT --auth-issuer URL [--auth-jwks-url URL | --auth-keys FILE |
                      --auth-introspection-url URL]
                      [--auth-resource URL] [--auth-scope SCOPE]...
    jsonrpc-mcp list  (--tcp HOST:PORT | --unix PATH | --url URL | -- COMMAND...)
    jsonrpc-mcp call  (--tcp HOST:PORT | --unix PATH | --url URL) METHOD [NAME] [JSON]
    jsonrpc-mcp call  -- COMMAND... METHOD [NAME] [JSON]
    jsonrpc-mcp check (--url URL | -- COMMAND...) [--revision REV] [--json]

HTTP options: ``--certfile PEM [--keyfile PEM]`` (HTTPS), ``--header-timeout S``, ``--body-timeout S``,
``--max-connections N``, ``--allow-host NAME``.

``APP`` is ``module:attribute`` or ``path/to/file.py[:attribute]`` naming a :class:`~jsonrpc_mcp.Server` (or a
function returning one); without it the knowledge server is served. Results are printed as JSON on stdout;
logs and errors go to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec

__all__ = ("main", "load_app")

logger = logging.getLogger("jsonrpc_mcp.cli")

_METHODS = (
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "ping",
    "server/discover",
)


def load_app(spec: str | None) -> Any:
    """Import ``module:attr`` or ``file.py[:attr]`` and return the Server it names."""
    from .mcp.server import Server

    if spec is None:
        from .examples.knowledge import create_server
        from .examples.knowledge.db import KnowledgeStoreError

        try:
            return create_server(os.environ.get("KNOWLEDGE_DB", "knowledge.db"))
        except KnowledgeStoreError as exc:
            raise SystemExit(f"jsonrpc-mcp: {exc}") from None
    target, _, attr = spec.partition(":")
    if target.endswith(".py") or os.sep in target:
        path = os.path.abspath(target)
        if not os.path.exists(path):
            raise SystemExit(f"jsonrpc-mcp: no such file: {target}")
        sys.path.insert(0, os.path.dirname(path))
        module_spec = importlib.util.spec_from_file_location("_jsonrpc_mcp_app", path)
        if module_spec is None or module_spec.loader is None:
            raise SystemExit(f"jsonrpc-mcp: cannot import {target}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules["_jsonrpc_mcp_app"] = module
        module_spec.loader.exec_module(module)
    else:
        # Modules in the current directory come first, as with uvicorn and ``python -m`` (a console script's
        # sys.path starts with its own bin directory instead).
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (target == exc.name or target.startswith(exc.name + ".")):
                raise SystemExit(
                    f"jsonrpc-mcp: no module named {target!r} (looked in {os.getcwd()} and the installed packages)"
                ) from None
            raise SystemExit(f"jsonrpc-mcp: cannot import {target}: {exc}") from None
    if attr:
        obj = getattr(module, attr, None)
        if obj is None:
            raise SystemExit(f"jsonrpc-mcp: {target} has no attribute {attr!r}")
    else:
        found = [v for v in vars(module).values() if isinstance(v, Server)]
        if len(found) != 1:
            raise SystemExit(f"jsonrpc-mcp: name the server in {target} as {target}:ATTRIBUTE")
        obj = found[0]
    if callable(obj) and not isinstance(obj, Server):
        obj = obj()
    if not isinstance(obj, Server):
        raise SystemExit(f"jsonrpc-mcp: {spec} is not a jsonrpc_mcp.Server")
    return obj


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return number


def _count(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return int(value)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jsonrpc-mcp", description="Serve or call MCP servers.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve a Server (default: the knowledge server)")
    serve.add_argument("app", nargs="?", help="module:attr or file.py[:attr]")
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--stdio", action="store_true", help="serve on stdin/stdout (the default)")
    where.add_argument("--tcp", type=_host_port, metavar="HOST:PORT")
    where.add_argument("--unix", metavar="PATH")
    where.add_argument("--http", type=_host_port, metavar="HOST:PORT", help="Streamable HTTP (needs the http extra)")
    serve.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    serve.add_argument("--allow-host", action="append", default=None, help="extra allowed Host/Origin host names")
    serve.add_argument(
        "--header-timeout", type=_positive, default=10.0, metavar="S", help="HTTP: seconds to send request headers (10)"
    )
    serve.add_argument(
        "--body-timeout", type=_positive, default=30.0, metavar="S", help="HTTP: seconds to send a request body (30)"
    )
    serve.add_argument("--certfile", metavar="PEM", help="HTTP: serve HTTPS with this certificate (chain)")
    serve.add_argument("--keyfile", metavar="PEM", help="HTTP: the certificate's private key (with --certfile)")
    serve.add_argument(
        "--max-connections",
        type=_count,
        default=None,
        metavar="N",
        help="HTTP: open connections at most (default: 3/4 of the descriptor limit)",
    )
    auth = serve.add_argument_group("authorization (HTTP only; needs the auth extra; docs/authorization.md)")
    auth.add_argument("--auth-issuer", metavar="URL", help="require OAuth access tokens from this authorization server")
    auth.add_argument("--auth-jwks-url", metavar="URL", help="its key set (default: from its RFC 8414 metadata)")
    auth.add_argument("--auth-keys", metavar="FILE", help="its public keys from a file instead (a JWKS, or PEM)")
    auth.add_argument(
        "--auth-introspection-url",
        metavar="URL",
        help="check tokens by RFC 7662 introspection instead (credentials: $MCP_INTROSPECTION_CLIENT_ID and "
        "$MCP_INTROSPECTION_CLIENT_SECRET)",
    )
    auth.add_argument("--auth-resource", metavar="URL", help="this server's canonical URI (default: the served URL)")
    auth.add_argument("--auth-scope", action="append", default=[], metavar="SCOPE", help="a scope every request needs")

    for name, helptext in (("list", "list tools, resources and prompts"), ("call", "send one request")):
        cmd = sub.add_parser(name, help=helptext)
        target = cmd.add_mutually_exclusive_group()
        target.add_argument("--tcp", type=_host_port, metavar="HOST:PORT")
        target.add_argument("--unix", metavar="PATH")
        target.add_argument("--url", metavar="URL", help="Streamable HTTP endpoint")
        cmd.add_argument("rest", nargs=argparse.REMAINDER, help="[-- COMMAND...] METHOD [NAME] [JSON]")
        cmd.add_argument("--timeout", type=float, default=60.0)
        from .auth.oauth_cli import add_arguments

        add_arguments(cmd)

    from .checker import add_check_arguments

    check = sub.add_parser("check", help="replay the golden wire transcripts against a server, rule by rule")
    add_check_arguments(check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "check":
            from .checker import run_check_command

            return run_check_command(args)
        return anyio.run(_client_command, args)
    except KeyboardInterrupt:
        return 130


def _banner(args: argparse.Namespace, url: str) -> None:
    """How to connect, for a person starting a server by hand (on stderr: stdout may be the wire)."""
    app = args.app or ""
    db = os.path.abspath(os.environ.get("KNOWLEDGE_DB", "knowledge.db"))
    stdio_args = ["-m", "jsonrpc_mcp", "serve"] + ([app] if app else [])
    entry: dict[str, Any] = {"command": sys.executable, "args": stdio_args}
    if not app:
        entry["env"] = {"KNOWLEDGE_DB": db}
    config = {"mcpServers": {"server" if app else "knowledge": entry}}
    lines = [
        f"jsonrpc-mcp: serving {app if app else 'the knowledge server (' + db + ')'} at {url}",
        "  both protocol eras (2026-07-28 and the 2024-11-05 .. 2025-11-25 handshake) on this one URL",
        f"  try it:   jsonrpc-mcp list --url {url}",
        f"            jsonrpc-mcp call --url {url} tools/call "
        + ('store \'{"topic": "demo", "content": "hello"}\'' if not app else "TOOL '{}'"),
        "  stdio client configuration:",
        *("    " + line for line in json.dumps(config, indent=2).splitlines()),
        "  stop with Ctrl-C",
    ]
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()


def _serve(args: argparse.Namespace) -> int:
    if args.auth_issuer is None and (
        args.auth_jwks_url or args.auth_keys or args.auth_introspection_url or args.auth_resource
    ):
        raise SystemExit("jsonrpc-mcp: the --auth-* options need --auth-issuer")
    if args.auth_issuer is not None and not args.http:
        raise SystemExit(
            "jsonrpc-mcp: authorization is for --http only; stdio and sockets take their credentials from the "
            "environment"
        )
    server = load_app(args.app)
    if args.http:
        import ssl

        from .transports.http_serve import serve_http

        if args.keyfile and not args.certfile:
            raise SystemExit("jsonrpc-mcp serve: --keyfile needs --certfile")
        for pem in (args.certfile, args.keyfile):
            if pem and not os.path.isfile(pem):
                raise SystemExit(f"jsonrpc-mcp serve: no such file: {pem}")
        host, port = args.http
        shown = f"[{host}]" if ":" in host else host
        url = f"{'https' if args.certfile else 'http'}://{shown}:{port}{args.path}"
        options: dict[str, Any] = {
            "header_timeout": args.header_timeout,
            "body_timeout": args.body_timeout,
            "max_connections": args.max_connections,
            "ssl_certfile": args.certfile,
            "ssl_keyfile": args.keyfile,
        }
        if args.allow_host:
            options["allowed_hosts"] = args.allow_host
        if args.auth_issuer is not None:
            policy = options["http_policy"] = _auth_policy(args, url)
            sys.stderr.write(
                f"jsonrpc-mcp: requests need an access token from {args.auth_issuer} for {policy.resource}"
                f" (metadata: {policy.metadata_url})\n"
            )
        _banner(args, url)
        try:
            serve_http(server, host, port, path=args.path, **options)
        except ssl.SSLError as exc:  # not a certificate, or a key that does not match it
            raise SystemExit(f"jsonrpc-mcp serve: cannot use the certificate and key: {exc.reason or exc}") from None
        return 0
    if args.tcp:
        from .transports._run import run
        from .transports.socket import serve_tcp

        host, port = args.tcp
        run(serve_tcp, server, host, port)
        return 0
    if args.unix:
        from .transports._run import run
        from .transports.socket import serve_unix

        run(serve_unix, server, args.unix)
        return 0
    from .transports.stdio import run_stdio

    run_stdio(server)
    return 0


def _auth_policy(args: argparse.Namespace, url: str) -> Any:
    """The ``ProtectedResource`` the ``--auth-*`` options describe (``url``: where the server is served)."""
    try:
        from .auth import IntrospectionVerifier, JwtVerifier, ProtectedResource
        from .auth.jwt import discover_metadata
    except ImportError as exc:
        raise SystemExit(f"jsonrpc-mcp: {exc}") from None
    issuer: str = args.auth_issuer
    resource: str = args.auth_resource or url
    verifier: Any
    if args.auth_introspection_url:
        client_id = os.environ.get("MCP_INTROSPECTION_CLIENT_ID")
        secret = os.environ.get("MCP_INTROSPECTION_CLIENT_SECRET")
        if not client_id or not secret:
            raise SystemExit(
                "jsonrpc-mcp: set MCP_INTROSPECTION_CLIENT_ID and MCP_INTROSPECTION_CLIENT_SECRET for introspection"
            )
        verifier = IntrospectionVerifier(
            introspection_url=args.auth_introspection_url,
            audience=resource,
            client_id=client_id,
            client_secret=secret,
            issuer=issuer,
        )
    elif args.auth_keys:
        try:
            with open(args.auth_keys, "rb") as file:
                data = file.read()
            keys: Any = msgspec.json.decode(data) if data.lstrip().startswith(b"{") else data
            verifier = JwtVerifier(issuer=issuer, audience=resource, keys=keys)
        except (OSError, ValueError, msgspec.DecodeError) as exc:
            raise SystemExit(f"jsonrpc-mcp: --auth-keys {args.auth_keys}: {exc}") from None
    else:
        jwks_url = args.auth_jwks_url
        if jwks_url is None:
            try:
                metadata = anyio.run(discover_metadata, issuer)
            except Exception as exc:
                raise SystemExit(f"jsonrpc-mcp: cannot discover the key set of {issuer}: {exc}") from None
            jwks_url = metadata.get("jwks_uri")
            if not isinstance(jwks_url, str):
                raise SystemExit(f"jsonrpc-mcp: {issuer} publishes no jwks_uri; give --auth-jwks-url")
        try:
            verifier = JwtVerifier(issuer=issuer, audience=resource, jwks_url=jwks_url)
        except ValueError as exc:
            raise SystemExit(f"jsonrpc-mcp: {exc}") from None
    scopes = list(args.auth_scope)
    try:
        return ProtectedResource(
            resource=resource,
            authorization_servers=[issuer],
            verifier=verifier,
            scopes_supported=scopes or None,
            required_scopes=scopes,
        )
    except ValueError as exc:
        raise SystemExit(f"jsonrpc-mcp: {exc}") from None


def _split_command(rest: list[str]) -> tuple[list[str], list[str]]:
    """``[--] COMMAND... METHOD [NAME] [JSON]`` → (command, request words)."""
    words = rest[1:] if rest[:1] == ["--"] else list(rest)
    for i, word in enumerate(words):
        if word in _METHODS:
            return words[:i], words[i:]
    return words, []


@asynccontextmanager
async def _connect(args: argparse.Namespace, command: list[str]) -> AsyncIterator[Any]:
    from .client import Client

    if args.tcp:
        async with Client.connect_tcp(*args.tcp) as client:
            yield client
    elif args.unix:
        async with Client.connect_unix(args.unix) as client:
            yield client
    elif args.url:
        from .auth.oauth_cli import oauth_from_arguments

        async with Client.connect_http(args.url, auth=oauth_from_arguments(args)) as client:
            yield client
    elif command:
        async with Client.connect_stdio(command) as client:
            yield client
    else:
        raise SystemExit("jsonrpc-mcp: give --tcp, --unix, --url or -- COMMAND...")


def _print(value: Any) -> None:
    sys.stdout.write(json.dumps(msgspec.to_builtins(value), indent=2, ensure_ascii=False) + "\n")


async def _client_command(args: argparse.Namespace) -> int:
    from .errors import RpcError

    command, words = _split_command(list(args.rest))
    if args.command == "call" and not words:
        raise SystemExit("jsonrpc-mcp call: give METHOD [NAME] [JSON], e.g. tools/call add '{\"a\": 1}'")
    try:
        with anyio.fail_after(args.timeout) as args.deadline:  # authorization's time in the browser is not counted
            async with _connect(args, command) as client:
                if args.command == "list":
                    _print(await _list_everything(client))
                    return 0
                result = await _call(client, words)
                _print(result)
                is_error = isinstance(result, dict) and result.get("isError") is True
                return 1 if is_error else 0
    except RpcError as exc:
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:  # as on the wire: an error without data has no "data" key
            error["data"] = exc.data
        _print({"error": error})
        return 2
    except TimeoutError:
        sys.stderr.write(f"jsonrpc-mcp: no answer within {args.timeout} s\n")
        return 3
    except OSError as exc:  # nothing listening, no such socket file, no such program
        raise SystemExit(_unreachable(args, command, exc)) from None


def _unreachable(args: argparse.Namespace, command: list[str], exc: OSError) -> str:
    reason = exc.strerror or str(exc) or type(exc).__name__
    if args.tcp:
        return f"jsonrpc-mcp: cannot connect to tcp {args.tcp[0]}:{args.tcp[1]}: {reason}"
    if args.unix:
        return f"jsonrpc-mcp: cannot connect to unix socket {args.unix}: {reason}"
    if command:
        hint = ""
        if "://" in command[0]:
            hint = " (to reach a Streamable HTTP server, give --url URL)"
        return f"jsonrpc-mcp: cannot start {command[0]!r}: {reason}{hint}"
    return f"jsonrpc-mcp: {reason}"


async def _list_everything(client: Any) -> dict[str, Any]:
    caps = client.server_capabilities
    out: dict[str, Any] = {"serverInfo": client.server_info, "protocolVersion": client.protocol_version}
    if caps.tools is not msgspec.UNSET:
        out["tools"] = await client.list_tools()
    if caps.resources is not msgspec.UNSET:
        out["resources"] = await client.list_resources()
        out["resourceTemplates"] = await client.list_resource_templates()
    if caps.prompts is not msgspec.UNSET:
        out["prompts"] = await client.list_prompts()
    return out


async def _call(client: Any, words: list[str]) -> Any:
    method, *more = words
    params: dict[str, Any] = {}
    if method == "ping":
        await client.ping()  # the stateless era has no ping: the client knows what stands in for it
        return {}
    if method in ("tools/call", "prompts/get"):
        if not more:
            raise SystemExit(f"jsonrpc-mcp call: {method} needs a NAME")
        params["name"] = more[0]
        if len(more) > 1:
            params["arguments"] = _json_arg(more[1])
    elif method == "resources/read":
        if not more:
            raise SystemExit("jsonrpc-mcp call: resources/read needs a URI")
        params["uri"] = more[0]
    elif more:
        params = _json_arg(more[-1])
    return await client.request(method, params or None, dict)


def _json_arg(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"jsonrpc-mcp: arguments are not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise SystemExit("jsonrpc-mcp: arguments must be a JSON object")
    return value


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
