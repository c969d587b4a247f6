"""The whole OAuth flow, as an MCP client meets it: the official Python SDK's client (``mcp``, dev-only) with its own
``OAuthClientProvider`` against our protected server (uvicorn, loopback) and a real authorization server
(``auth_server``): a 401 challenge → protected-resource metadata → authorization server metadata → dynamic client
registration → authorization code with PKCE → token (RFC 8707 resource) → ``tools/call``; then a 403 for a tool
that needs more, step-up authorization, and the call again. Also the ``jsonrpc-mcp serve --auth-*`` options."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from auth_server import AuthServer
from auth_support import auth as auth
from auth_support import jwt_policy, serve_late
from http_support import HTTPX_GENERATORS, JSON_HEADERS, ServerThread, init_body
from http_support import collect_garbage as collect_garbage

from jsonrpc_mcp import Context, Server
from jsonrpc_mcp.auth import JwtVerifier, ProtectedResource
from jsonrpc_mcp.auth.principal import SIGNATURE_ALGORITHMS
from jsonrpc_mcp.cli import _auth_policy, _parser, main
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp

mcp = pytest.importorskip("mcp")

from mcp.client.auth import OAuthClientProvider  # noqa: E402 - after the importorskip
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402
from mcp.shared.auth import (  # noqa: E402
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.interop,
    HTTPX_GENERATORS,
    pytest.mark.usefixtures("collect_garbage"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]

REDIRECT = "http://localhost:3000/callback"


def notes_server() -> Server:
    server = Server("notes", "1.0")

    @server.tool(scopes=["notes:read"])
    def whoami(ctx: Context) -> str:
        """Who is calling."""
        assert ctx.auth is not None
        return f"{ctx.auth.subject} via {ctx.auth.client_id}"

    @server.tool(scopes=["notes:write"])
    def write_note(text: str) -> str:
        """Write a note."""
        return f"wrote {text}"

    return server


@pytest.fixture(scope="module")
def protected(auth: AuthServer) -> Iterator[ServerThread]:
    def app(thread: ServerThread) -> McpAsgiApp:  # (the resource is where clients reach it: the thread's URL)
        policy = jwt_policy(
            auth, thread.url, scopes_supported=["notes:read", "notes:write"], required_scopes=["notes:read"]
        )
        return McpAsgiApp(notes_server(), http_policy=policy)

    thread = serve_late(app)
    yield thread
    thread.stop()


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """The user's browser: opens the authorization URL (the server consents at once) and hands back the code."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None
        self.scopes: list[str] = []
        self.resources: list[str] = []

    async def open(self, url: str) -> None:
        query = parse_qs(urlsplit(url).query)
        self.scopes.append(query.get("scope", [""])[0])
        self.resources.append(query.get("resource", [""])[0])
        assert query["code_challenge_method"] == ["S256"]
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.get(url)
        assert response.status_code == 302, response.text
        back = parse_qs(urlsplit(response.headers["location"]).query)
        self.result = AuthorizationCodeResult(code=back["code"][0], state=back.get("state", [None])[0])

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


async def test_the_sdk_client_completes_the_whole_flow_and_steps_up(protected: ServerThread, auth: AuthServer) -> None:
    browser = Browser()
    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=protected.url,
        client_metadata=OAuthClientMetadata(
            client_name="sdk test client",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    issued_before = len(auth.tokens)
    async with (
        create_mcp_http_client(auth=provider) as http,
        mcp.Client(streamable_http_client(protected.url, http_client=http), mode="legacy") as client,
    ):
        me = await client.call_tool("whoami", {})
        assert me.content[0].text.startswith("alice via ")
        assert storage.client is not None and me.content[0].text == f"alice via {storage.client.client_id}"
        wrote = await client.call_tool("write_note", {"text": "hello"})  # 403 → step-up → again
        assert wrote.content[0].text == "wrote hello"
    assert browser.resources == [protected.url, protected.url]  # RFC 8707: the token is for this resource
    assert browser.scopes[0] == "notes:read"  # the 401's scope
    assert "notes:write" in browser.scopes[1].split()  # the 403's scope
    assert len(auth.tokens) - issued_before == 2


# --- jsonrpc-mcp serve --auth-* ----------------------------------------------------------------------------------


def test_the_command_line_builds_the_protection_it_describes(auth: AuthServer) -> None:
    args = _parser().parse_args(
        ["serve", "--http", "127.0.0.1:8123", "--auth-issuer", auth.issuer, "--auth-scope", "knowledge:read"]
    )
    policy = _auth_policy(args, "http://127.0.0.1:8123/mcp")
    assert isinstance(policy, ProtectedResource)
    assert policy.metadata == {
        "resource": "http://127.0.0.1:8123/mcp",
        "authorization_servers": [auth.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["knowledge:read"],
        "dpop_signing_alg_values_supported": list(SIGNATURE_ALGORITHMS),
    }
    assert policy.required_scopes == ("knowledge:read",)
    assert isinstance(policy.verifier, JwtVerifier)
    assert policy.verifier.jwks is not None and policy.verifier.jwks.url == f"{auth.issuer}/jwks"  # discovered


@pytest.fixture(scope="module")
def knowledge(auth: AuthServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """The knowledge server, protected as ``serve --http ... --auth-issuer AS --auth-scope knowledge:read`` does."""
    from jsonrpc_mcp.examples.knowledge import create_server

    server = create_server(tmp_path_factory.mktemp("kb") / "k.db")

    def app(thread: ServerThread) -> McpAsgiApp:
        args = _parser().parse_args(
            [
                "serve",
                "--http",
                f"127.0.0.1:{thread.port}",
                "--auth-issuer",
                auth.issuer,
                "--auth-scope",
                "knowledge:read",
            ]
        )
        return McpAsgiApp(server, http_policy=_auth_policy(args, thread.url))

    thread = serve_late(app)
    yield thread
    thread.stop()
    server.close()


async def test_the_knowledge_server_protected_from_the_command_line(knowledge: ServerThread, auth: AuthServer) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        refused = await http.post(knowledge.url, json=init_body(), headers=JSON_HEADERS)
        assert refused.status_code == 401
        assert 'scope="knowledge:read"' in refused.headers["www-authenticate"]
        token = auth.mint(aud=knowledge.url, scope="knowledge:read")
        headers = {**JSON_HEADERS, "Authorization": f"Bearer {token}"}
        accepted = await http.post(knowledge.url, json=init_body(), headers=headers)
        assert accepted.status_code == 200
        assert accepted.json()["result"]["serverInfo"]["name"]
        narrow = auth.mint(aud=knowledge.url, scope="profile")
        step_up = await http.post(
            knowledge.url, json=init_body(), headers={**headers, "Authorization": f"Bearer {narrow}"}
        )
        assert step_up.status_code == 403


def test_authorization_is_refused_off_http(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="--http only"):
        main(["serve", "--tcp", "127.0.0.1:0", "--auth-issuer", "https://auth.example.com"])
    with pytest.raises(SystemExit, match="need --auth-issuer"):
        main(["serve", "--http", "127.0.0.1:0", "--auth-jwks-url", "https://auth.example.com/jwks"])
    with pytest.raises(SystemExit, match="need --auth-issuer"):  # (it served without authorization)
        main(["serve", "--http", "127.0.0.1:0", "--auth-scope", "notes:read"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--unix", "x.sock", "--certfile", "cert.pem"], "--certfile and --keyfile are for --http and --tcp"),
        (["--unix", "/tmp/x.sock", "--allow-host", "mcp.example.com"], "--allow-host is for --http"),
        (
            ["--max-connections", "10", "--keep-alive", "60", "--body-timeout", "5"],
            "--body-timeout, --max-connections, --keep-alive are for --http",
        ),
        (
            ["--stdio", "--path", "/api", "--header-timeout", "3"],
            "--path, --header-timeout are for --http",
        ),
    ],
)
def test_the_http_options_of_serve_are_refused_off_http(argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=f"^jsonrpc-mcp serve: {message}$"):
        main(["serve", *argv])


def test_a_url_given_to_allow_host_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:  # (was: taken, and every request for that name got 403)
        main(["serve", "--http", "127.0.0.1:0", "--allow-host", "https://mcp.example.com"])
    assert caught.value.code == 2
    assert (
        "argument --allow-host: expected a host name (mcp.example.com, or with :PORT), got 'https://mcp.example.com'"
        in capsys.readouterr().err
    )
