"""A protected Streamable HTTP server (``ProtectedResource``) over real HTTP (uvicorn, loopback) with a real
authorization server (``auth_server``): protected-resource metadata, every challenge with its exact status and
``WWW-Authenticate``, scopes per tool/resource/prompt in both eras, the principal on ``Context.auth``, sessions
bound to their principal; and the server's own scope check on a transport that carries a principal."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from auth_server import AuthServer
from auth_support import auth as auth
from auth_support import jwt_policy
from helpers import PrincipalStream, RawPeer, init_frame, notification_frame, request_frame
from http_support import (
    HTTPX_GENERATORS,
    JSON_HEADERS,
    STATELESS,
    ServerThread,
    call_body,
    init_body,
    messages,
    parse_sse,
    response_of,
    stateless_body,
    stateless_headers,
)
from http_support import collect_garbage as collect_garbage
from http_support import http as http
from joserfc import jwt
from joserfc.jwk import RSAKey

from jsonrpc_mcp import Context, InsufficientScope, Server
from jsonrpc_mcp.auth import (
    AccessToken,
    InvalidToken,
    ProtectedResource,
    VerifierUnavailable,
)
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.memory import MemoryMessageStream

RESOURCE = "https://notes.example.com/mcp"
METADATA_URL = "https://notes.example.com/.well-known/oauth-protected-resource/mcp"
HIERARCHY = {"notes:admin": ["notes:write"], "notes:write": ["notes:read"]}

pytestmark = [
    pytest.mark.anyio,
    HTTPX_GENERATORS,
    pytest.mark.usefixtures("collect_garbage"),
    pytest.mark.filterwarnings("ignore::joserfc.errors.SecurityWarning"),
]


def make_server() -> Server:
    server = Server("notes", "1.0", scope_hierarchy=HIERARCHY)

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Who is calling."""
        auth = ctx.auth
        assert auth is not None
        return f"{auth.subject}|{auth.client_id}|{' '.join(sorted(auth.scopes))}"

    @server.tool(inline=True)
    def whoami_inline(ctx: Context) -> str:
        """Who is calling (run at once, before the request's exchange exists)."""
        auth = ctx.auth
        return f"{auth.subject if auth else None}|{ctx.request_headers.get('x-probe')}"

    @server.tool(scopes=["notes:write"])
    def write_note(text: str) -> str:
        """Write a note."""
        return f"wrote {text}"

    @server.tool(scopes=["notes:admin"])
    async def purge(ctx: Context) -> str:
        """Delete every note (async: answered through the session's dispatcher)."""
        await anyio.lowlevel.checkpoint()
        assert ctx.auth is not None
        return f"purged by {ctx.auth.subject}"

    @server.tool()
    async def rename(ctx: Context, new_name: str) -> str:
        """Rename the notebook, once the user confirms (in the stateless era: an input round)."""
        answer = await ctx.elicit(f"Rename to {new_name}?", {"type": "object", "properties": {}}, key="confirm")
        assert ctx.auth is not None
        return f"{ctx.auth.subject} renamed it to {new_name}" if answer.action == "accept" else "kept"

    @server.resource("notes://secret", scopes=["notes:admin"])
    def secret() -> str:
        return "the secret"

    @server.resource("notes://open")
    def open_note() -> str:
        return "open"

    @server.prompt(scopes=["notes:write"])
    def draft(topic: str) -> str:
        return f"Draft a note on {topic}"

    return server


@pytest.fixture(scope="module")
def protected(auth: AuthServer) -> Iterator[ServerThread]:
    policy = jwt_policy(
        auth,
        RESOURCE,
        scopes_supported=["notes:read", "notes:write", "notes:admin"],
        required_scopes=["notes:read"],
        resource_name="Notes",
    )
    thread = ServerThread(McpAsgiApp(make_server(), http_policy=policy), lifespan="off")
    yield thread
    thread.stop()


def bearer(token: str) -> dict[str, str]:
    return {**JSON_HEADERS, "Authorization": f"Bearer {token}"}


def base(thread: ServerThread) -> str:
    return f"http://127.0.0.1:{thread.port}"


ALGS = "RS256 RS384 RS512 PS256 PS384 PS512 ES256 ES384 ES512 EdDSA Ed25519"
BEARER = f'Bearer resource_metadata="{METADATA_URL}", scope="notes:read"'
DPOP = f'DPoP resource_metadata="{METADATA_URL}", scope="notes:read", algs="{ALGS}"'
#: what every 401 names: both schemes (httpx joins the two WWW-Authenticate headers with ", ")
CHALLENGE = f"{BEARER}, {DPOP}"


def invalid(reason: str) -> str:
    return f'{BEARER}, error="invalid_token", error_description="{reason}", {DPOP}'


def bad_request(reason: str) -> str:
    return f'{BEARER}, error="invalid_request", error_description="{reason}", {DPOP}'


# --- protected-resource metadata --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
async def test_the_metadata_is_served_at_the_path_aware_and_the_root_well_known_uri(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient, path: str
) -> None:
    response = await http.get(base(protected) + path, headers={"Origin": "https://app.example"})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.json() == {
        "resource": RESOURCE,
        "authorization_servers": [auth.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["notes:read", "notes:write", "notes:admin"],
        "resource_name": "Notes",
        "dpop_signing_alg_values_supported": ALGS.split(),
    }
    preflight = await http.options(
        base(protected) + path,
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "GET"},
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "GET" in preflight.headers["access-control-allow-methods"]
    assert (await http.post(base(protected) + path)).status_code == 405


async def test_without_root_metadata_only_the_path_aware_uri_serves_the_metadata(
    auth: AuthServer, http: httpx.AsyncClient
) -> None:
    policy = jwt_policy(auth, RESOURCE, root_metadata=False)
    thread = ServerThread(McpAsgiApp(make_server(), http_policy=policy))
    try:
        own = await http.get(f"{base(thread)}/.well-known/oauth-protected-resource/mcp")
        assert own.status_code == 200 and own.json()["resource"] == RESOURCE
        root = await http.get(f"{base(thread)}/.well-known/oauth-protected-resource")
        assert root.status_code == 404  # (left to another protected resource of this host)
        challenge = (await http.post(f"{base(thread)}/mcp", json=init_body(), headers=JSON_HEADERS)).headers
        assert f'resource_metadata="{METADATA_URL}"' in challenge["www-authenticate"]
    finally:
        thread.stop()


async def test_an_app_without_a_policy_serves_no_metadata(http: httpx.AsyncClient) -> None:
    thread = ServerThread(McpAsgiApp(make_server()))
    try:
        response = await http.get(f"{base(thread)}/.well-known/oauth-protected-resource/mcp")
        assert response.status_code == 404
        reply = await http.post(f"{base(thread)}/mcp", json=init_body(), headers=JSON_HEADERS)
        assert reply.status_code == 200  # no token needed: nothing changes without a policy
    finally:
        thread.stop()


# --- challenges -------------------------------------------------------------------------------------------------


def _wrong_key(auth: AuthServer) -> str:
    return jwt.encode(
        {"alg": "RS256", "kid": "rsa-1"},
        {"iss": auth.issuer, "aud": RESOURCE, "exp": int(time.time()) + 60, "scope": "notes:read"},
        RSAKey.generate_key(2048),
    )


def _unsigned(auth: AuthServer) -> str:
    import base64

    def b64(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    claims = {"iss": auth.issuer, "aud": RESOURCE, "exp": int(time.time()) + 60, "scope": "notes:read"}
    return f"{b64({'alg': 'none', 'kid': 'rsa-1'})}.{b64(claims)}."


def _unknown_kid(auth: AuthServer) -> str:
    return jwt.encode(
        {"alg": "RS256", "kid": "not-in-the-set"},
        {"iss": auth.issuer, "aud": RESOURCE, "exp": int(time.time()) + 60},
        RSAKey.generate_key(2048),
    )


#: case -> (headers of the request as a function of the server, query string, status, WWW-Authenticate)
CASES: dict[str, tuple[Any, str, int, str]] = {
    "no token": (lambda auth: {}, "", 401, CHALLENGE),
    "another scheme": (lambda auth: {"Authorization": "Basic YWxpY2U6c2VjcmV0"}, "", 401, CHALLENGE),
    "wrong signature": (
        lambda auth: {"Authorization": f"Bearer {_wrong_key(auth)}"},
        "",
        401,
        invalid("the access token's signature does not verify"),
    ),
    "alg none": (
        lambda auth: {"Authorization": f"Bearer {_unsigned(auth)}"},
        "",
        401,
        invalid("the access token's signature algorithm is not accepted"),
    ),
    "expired": (
        lambda auth: {"Authorization": f"Bearer {auth.mint(aud=RESOURCE, scope='notes:read', expires_in=-600)}"},
        "",
        401,
        invalid("the access token has expired"),
    ),
    "not yet valid": (
        lambda auth: {
            "Authorization": f"Bearer {auth.mint(aud=RESOURCE, scope='notes:read', nbf=int(time.time()) + 900)}"
        },
        "",
        401,
        invalid("the access token is not valid yet"),
    ),
    "wrong audience": (
        lambda auth: {"Authorization": f"Bearer {auth.mint(aud='https://other.example.com/mcp', scope='notes:read')}"},
        "",
        401,
        invalid("the access token was issued for another resource"),
    ),
    "wrong issuer": (
        lambda auth: {
            "Authorization": f"Bearer {auth.mint(aud=RESOURCE, scope='notes:read', iss='https://evil.example')}"
        },
        "",
        401,
        invalid("the access token was issued by another authorization server"),
    ),
    "unknown key id": (
        lambda auth: {"Authorization": f"Bearer {_unknown_kid(auth)}"},
        "",
        401,
        invalid("the access token's key id is not in the authorization server's key set"),
    ),
    "not a JWT": (
        lambda auth: {"Authorization": "Bearer abc.def"},
        "",
        401,
        invalid("the access token is not a well-formed JWT"),
    ),
    "malformed header": (
        lambda auth: {"Authorization": "Bearer two tokens"},
        "",
        400,
        bad_request("the Authorization header is malformed"),
    ),
    "empty bearer": (
        lambda auth: {"Authorization": "Bearer"},
        "",
        400,
        bad_request("the Authorization header is malformed"),
    ),
    "token in the query": (
        lambda auth: {},
        "access_token=whatever",
        400,
        bad_request("send the access token in the Authorization header"),
    ),
    "token in the query besides the header": (
        lambda auth: {"Authorization": f"Bearer {auth.mint(aud=RESOURCE, scope='notes:read')}"},
        "x=1&access_token=whatever",
        400,
        bad_request("send the access token in the Authorization header"),
    ),
    "missing a required scope": (
        lambda auth: {"Authorization": f"Bearer {auth.mint(aud=RESOURCE, scope='profile')}"},
        "",
        403,
        f'Bearer error="insufficient_scope", scope="notes:read", resource_metadata="{METADATA_URL}", '
        'error_description="this request needs the scope notes:read"',
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_each_refusal_has_its_exact_status_and_challenge(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    make_headers, query, status, challenge = CASES[case]
    headers = make_headers(auth)
    url = protected.url + (f"?{query}" if query else "")
    with caplog.at_level(logging.DEBUG):
        response = await http.post(url, json=init_body(), headers={**JSON_HEADERS, **headers})
    assert response.status_code == status, response.text
    assert response.headers["www-authenticate"] == challenge
    body = response.json()
    assert body["error"] in ("unauthorized", "invalid_token", "invalid_request", "insufficient_scope")
    assert "mcp-session-id" not in response.headers
    secret = headers.get("Authorization", "").partition(" ")[2]
    if len(secret) > 8:
        assert secret not in caplog.text and secret not in response.text


async def test_a_repeated_authorization_header_is_a_bad_request(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    token = auth.mint(aud=RESOURCE, scope="notes:read")
    headers = [*JSON_HEADERS.items(), ("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")]
    response = await http.post(protected.url, json=init_body(), headers=headers)
    assert response.status_code == 400
    assert response.headers["www-authenticate"] == bad_request("the Authorization header is sent more than once")


async def test_get_and_delete_need_a_token_too(protected: ServerThread, http: httpx.AsyncClient) -> None:
    get = await http.get(protected.url, headers={"Accept": "text/event-stream"})
    delete = await http.delete(protected.url)
    assert (get.status_code, delete.status_code) == (401, 401)
    assert get.headers["www-authenticate"] == delete.headers["www-authenticate"] == CHALLENGE


async def test_a_verifier_that_cannot_decide_makes_a_503_and_one_that_forgets_the_audience_a_401(
    http: httpx.AsyncClient,
) -> None:
    class Down:
        async def verify(self, token: str) -> AccessToken:
            raise VerifierUnavailable("the authorization server is down")

    class Careless:
        async def verify(self, token: str) -> AccessToken:
            return AccessToken(subject="s", client_id="c", audience=("https://other.example.com/mcp",))

    for verifier, status in ((Down(), 503), (Careless(), 401)):
        policy = ProtectedResource(resource=RESOURCE, authorization_servers=["https://as.example"], verifier=verifier)
        thread = ServerThread(McpAsgiApp(make_server(), http_policy=policy))
        try:
            response = await http.post(thread.url, json=init_body(), headers=bearer("a.b.c"))
        finally:
            thread.stop()
        assert response.status_code == status
        if status == 503:
            assert response.headers["retry-after"] == "5" and "www-authenticate" not in response.headers
        else:
            assert 'error="invalid_token"' in response.headers["www-authenticate"]


# --- a good token: the principal, scopes per operation, both eras ----------------------------------------------


async def open_session(http: httpx.AsyncClient, url: str, token: str, version: str = "2025-11-25") -> dict[str, str]:
    response = await http.post(url, json=init_body(version), headers=bearer(token))
    assert response.status_code == 200, response.text
    headers = {**bearer(token), "Mcp-Session-Id": response.headers["mcp-session-id"], "MCP-Protocol-Version": version}
    note = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert note.status_code == 202
    return headers


async def test_the_principal_reaches_the_handler_in_both_eras(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    token = auth.mint(aud=RESOURCE, scope="notes:read notes:admin", client_id="app-7")
    session = await open_session(http, protected.url, token)
    reply = await http.post(protected.url, json=call_body(2, "whoami", {}), headers=session)
    assert response_of(reply, 2)["result"]["content"][0]["text"] == "alice|app-7|notes:admin notes:read"
    purged = await http.post(protected.url, json=call_body(3, "purge", {}), headers=session)
    assert response_of(purged, 3)["result"]["content"][0]["text"] == "purged by alice"
    at_once = await http.post(
        protected.url, json=call_body(5, "whoami_inline", {}), headers={**session, "X-Probe": "p"}
    )
    assert response_of(at_once, 5)["result"]["content"][0]["text"] == "alice|p"
    stateless = await http.post(
        protected.url,
        json=stateless_body(4, "tools/call", {"name": "whoami", "arguments": {}}),
        headers={**stateless_headers("tools/call", "whoami"), "Authorization": f"Bearer {token}"},
    )
    assert response_of(stateless, 4)["result"]["content"][0]["text"] == "alice|app-7|notes:admin notes:read"


async def test_a_request_state_is_bound_to_the_principal_it_was_issued_to(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    """2026-07-28 input rounds: a ``requestState`` issued to one principal is refused (-32602) when another
    presents it; a fresh token of the same principal completes the round (spec-decisions 24a)."""
    caps = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    params: dict[str, Any] = {"name": "rename", "arguments": {"new_name": "Ideas"}}
    headers = stateless_headers("tools/call", "rename")

    async def call(ident: int, token: str, **extra: Any) -> dict[str, Any]:
        body = stateless_body(ident, "tools/call", {**params, **extra}, **caps)
        reply = await http.post(protected.url, json=body, headers={**headers, "Authorization": f"Bearer {token}"})
        assert reply.status_code == 200, reply.text
        return response_of(reply, ident)

    alice = auth.mint(aud=RESOURCE, scope="notes:read", client_id="app-1")
    asked = (await call(1, alice))["result"]
    assert asked["resultType"] == "input_required" and list(asked["inputRequests"]) == ["confirm"]
    answer = {"inputResponses": {"confirm": {"action": "accept", "content": {}}}, "requestState": asked["requestState"]}
    for sub, client_id in [("bob", "app-1"), ("alice", "another-app")]:  # another user; alice through another client
        other = auth.mint(aud=RESOURCE, scope="notes:read", sub=sub, client_id=client_id)
        refused = await call(2, other, **answer)
        assert refused["error"] == {
            "code": -32602,
            "message": "Invalid requestState: it was issued to another principal",
        }
    renewed = auth.mint(aud=RESOURCE, scope="notes:read", client_id="app-1")  # alice's next token
    done = await call(3, renewed, **answer)
    assert done["result"]["content"][0]["text"] == "alice renamed it to Ideas"


STEP_UP = (
    'Bearer error="insufficient_scope", scope="{scope}", resource_metadata="' + METADATA_URL + '", '
    'error_description="this request needs the scope {scope}"'
)


@pytest.mark.parametrize(
    ("method", "params", "scope"),
    [
        ("tools/call", {"name": "write_note", "arguments": {"text": "hi"}}, "notes:write"),
        ("tools/call", {"name": "purge", "arguments": {}}, "notes:admin"),
        ("resources/read", {"uri": "notes://secret"}, "notes:admin"),
        ("prompts/get", {"name": "draft", "arguments": {"topic": "x"}}, "notes:write"),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "draft"}, "argument": {"name": "topic", "value": ""}},
            "notes:write",
        ),
    ],
)
@pytest.mark.parametrize("era", ["handshake", "stateless"])
async def test_a_missing_scope_is_a_403_naming_it_for_step_up(
    protected: ServerThread,
    auth: AuthServer,
    http: httpx.AsyncClient,
    method: str,
    params: dict[str, Any],
    scope: str,
    era: str,
) -> None:
    token = auth.mint(aud=RESOURCE, scope="notes:read")
    if era == "handshake":
        headers = await open_session(http, protected.url, token)
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
    else:
        name = params.get("name") or params.get("uri")
        headers = {**stateless_headers(method, name), "Authorization": f"Bearer {token}"}
        body = stateless_body(9, method, params)
    response = await http.post(protected.url, json=body, headers=headers)
    assert response.status_code == 403, response.text
    assert response.headers["www-authenticate"] == STEP_UP.format(scope=scope)
    assert response.json()["scope"] == scope


async def test_a_broader_scope_implies_the_narrower_ones(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    token = auth.mint(aud=RESOURCE, scope="notes:admin")  # implies notes:write, which implies notes:read
    session = await open_session(http, protected.url, token)
    reply = await http.post(protected.url, json=call_body(2, "write_note", {"text": "hi"}), headers=session)
    assert response_of(reply, 2)["result"]["content"][0]["text"] == "wrote hi"


async def test_tools_list_shows_the_tools_a_token_may_not_call(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    """spec-decisions: listed, so that a client can discover them and step up when it calls one."""
    session = await open_session(http, protected.url, auth.mint(aud=RESOURCE, scope="notes:read"))
    reply = await http.post(protected.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
    names = {tool["name"] for tool in response_of(reply, 2)["result"]["tools"]}
    assert {"whoami", "write_note", "purge"} <= names


async def test_a_session_belongs_to_the_principal_that_opened_it(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    alice = await open_session(http, protected.url, auth.mint(aud=RESOURCE, scope="notes:read"))
    bob = {**alice, "Authorization": f"Bearer {auth.mint(aud=RESOURCE, scope='notes:read', sub='bob')}"}
    stolen = await http.post(protected.url, json=call_body(2, "whoami", {}), headers=bob)
    assert stolen.status_code == 404
    assert (await http.delete(protected.url, headers=bob)).status_code == 404
    # alice, with a fresh token of her own, goes on
    renewed = {**alice, "Authorization": f"Bearer {auth.mint(aud=RESOURCE, scope='notes:read')}"}
    reply = await http.post(protected.url, json=call_body(3, "whoami", {}), headers=renewed)
    assert response_of(reply, 3)["result"]["content"][0]["text"].startswith("alice|")


async def test_a_token_naming_neither_a_subject_nor_a_client_is_refused(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    """Two such tokens would be one principal (the issuer alone), and share each other's sessions."""
    for token in (
        auth.mint(aud=RESOURCE, scope="notes:read", sub=None, client_id=None),
        auth.mint(aud=RESOURCE, scope="notes:read", sub=None, client_id=None, azp=None, jti="other"),
    ):
        response = await http.post(protected.url, json=init_body(), headers=bearer(token))
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == invalid("the access token names neither a subject nor a client")
    # a subject alone, or a client alone (client credentials), is a principal
    for claims in ({"sub": None}, {"client_id": None}):
        token = auth.mint(aud=RESOURCE, scope="notes:read", **claims)  # type: ignore[arg-type]
        assert (await http.post(protected.url, json=init_body(), headers=bearer(token))).status_code == 200


# --- streams end with their token ---------------------------------------------------------------------------


async def read_to_the_end(response: httpx.Response) -> bytes:
    """Everything the stream carries until the server ends it (never more than 10 s)."""
    with anyio.fail_after(10):
        return b"".join([chunk async for chunk in response.aiter_bytes()])


async def test_a_get_stream_is_closed_when_its_access_token_expires(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    session = await open_session(http, protected.url, auth.mint(aud=RESOURCE, scope="notes:read"))
    expires = time.time() + 0.8
    headers = {**session, "Accept": "text/event-stream"}
    headers["Authorization"] = f"Bearer {auth.mint(aud=RESOURCE, scope='notes:read', exp=expires)}"
    async with http.stream("GET", protected.url, headers=headers) as response:
        assert response.status_code == 200
        await read_to_the_end(response)
    assert time.time() >= expires - 0.05  # (not before: a stream is not cut short)
    # the session goes on with a fresh token: a new stream opens
    async with http.stream("GET", protected.url, headers={**session, "Accept": "text/event-stream"}) as again:
        assert again.status_code == 200


async def test_a_listen_stream_is_closed_when_its_access_token_expires(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    expires = time.time() + 0.8
    token = auth.mint(aud=RESOURCE, scope="notes:read", exp=expires)
    body = stateless_body(8, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    headers = {**stateless_headers("subscriptions/listen"), "Authorization": f"Bearer {token}"}
    async with http.stream("POST", protected.url, json=body, headers=headers) as response:
        assert response.headers["content-type"] == "text/event-stream"
        events = await read_to_the_end(response)
    assert time.time() >= expires - 0.6  # (ended half a second before the token expires)
    # Torn down by the server (2026-07-28): notifications/cancelled referencing the listen, then its result.
    said = messages(parse_sse(events))
    assert [m.get("method", "result" if "result" in m else None) for m in said] == [
        "notifications/subscriptions/acknowledged",
        "notifications/cancelled",
        "result",
    ]
    assert said[1]["params"] == {"requestId": 8, "reason": "The access token expired"}
    assert said[2]["id"] == 8


@pytest.mark.parametrize("preference", ["auto", "json"])
async def test_a_request_still_running_when_its_token_expires(
    auth: AuthServer, http: httpx.AsyncClient, preference: str
) -> None:
    """Its SSE answer is a stream, ended then (the tool is cancelled, as when the client goes away); a JSON answer is
    one answer, not a stream, and waits for the tool."""
    server = make_server()
    expires = time.time() + 0.8

    @server.tool()
    async def wait() -> str:
        """Work until a moment after the token has expired (the SSE answer is ended before)."""
        await anyio.sleep(expires + 0.3 - time.time())
        return "done"

    policy = jwt_policy(auth, RESOURCE)
    app = McpAsgiApp(server, http_policy=policy, json_response_preference=preference)
    thread = ServerThread(app, lifespan="off")
    try:
        token = auth.mint(aud=RESOURCE, scope="notes:read", exp=expires)
        headers = {**stateless_headers("tools/call", "wait"), "Authorization": f"Bearer {token}"}
        body = stateless_body(2, "tools/call", {"name": "wait"})
        async with http.stream("POST", thread.url, json=body, headers=headers) as response:
            kind = "application/json" if preference == "json" else "text/event-stream"
            assert response.headers["content-type"] == kind
            events = await read_to_the_end(response)
        assert time.time() >= expires - 0.05
        if preference == "json":
            assert json.loads(events)["result"]["content"][0]["text"] == "done"
        else:
            assert b'"result"' not in events  # ended unanswered
    finally:
        thread.stop()


async def test_one_client_holds_at_most_its_share_of_sessions(auth: AuthServer, http: httpx.AsyncClient) -> None:
    policy = jwt_policy(auth, RESOURCE)
    thread = ServerThread(McpAsgiApp(make_server(), http_policy=policy, max_sessions_per_client=2), lifespan="off")
    try:
        alice = auth.mint(aud=RESOURCE, scope="notes:read")
        first, second, third = [await open_session(http, thread.url, alice) for _ in range(3)]
        # the third made room by ending alice's least recently used idle session, and no one else's
        assert (await http.post(thread.url, json=call_body(2, "whoami", {}), headers=first)).status_code == 404
        for headers in (second, third):
            reply = await http.post(thread.url, json=call_body(3, "whoami", {}), headers=headers)
            assert reply.status_code == 200
        bob = auth.mint(aud=RESOURCE, scope="notes:read", sub="bob")
        await open_session(http, thread.url, bob)
        await open_session(http, thread.url, bob)
        for headers in (second, third):  # bob's sessions took nothing of alice's
            reply = await http.post(thread.url, json=call_body(4, "whoami", {}), headers=headers)
            assert reply.status_code == 200
    finally:
        thread.stop()


async def test_a_batch_is_checked_by_the_server_itself(
    protected: ServerThread, auth: AuthServer, http: httpx.AsyncClient
) -> None:
    """A 2025-03-26 batch is not looked into by the HTTP policy: each request gets the server's -31011 error."""
    session = await open_session(http, protected.url, auth.mint(aud=RESOURCE, scope="notes:read"), "2025-03-26")
    batch = [call_body(2, "write_note", {"text": "x"}), call_body(3, "whoami", {})]
    reply = await http.post(protected.url, json=batch, headers=session)
    assert reply.status_code == 200
    answers = {m["id"]: m for m in reply.json()}
    assert answers[2]["error"] == {
        "code": -31011,
        "message": "Insufficient scope: this request needs notes:write",
        "data": {"error": "insufficient_scope", "requiredScopes": ["notes:write"]},
    }
    assert answers[3]["result"]["content"][0]["text"].startswith("alice|")


# --- the server's own check, on any transport that carries a principal ------------------------------------------


@asynccontextmanager
async def principal_pair() -> AsyncIterator[tuple[PrincipalStream, RawPeer]]:
    send_a, receive_a = anyio.create_memory_object_stream[bytes](64)
    send_b, receive_b = anyio.create_memory_object_stream[bytes](64)
    async with send_a, receive_a, send_b, receive_b:
        yield PrincipalStream(send_a, receive_b), RawPeer(MemoryMessageStream(send_b, receive_a))


@pytest.mark.parametrize("version", ["2025-11-25", STATELESS])
async def test_the_server_refuses_a_scope_the_principal_lacks_on_any_transport(version: str) -> None:
    server = make_server()
    meta = {
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    async with principal_pair() as (theirs, peer), anyio.create_task_group() as tg:
        theirs.principal = AccessToken(subject="carol", client_id="c", scopes=frozenset({"notes:read"}))
        tg.start_soon(server.serve, theirs)
        params: dict[str, Any] = {"name": "write_note", "arguments": {"text": "x"}}
        read: dict[str, Any] = {"uri": "notes://secret"}
        if version == STATELESS:
            params["_meta"] = read["_meta"] = meta
        else:
            await peer.initialize(version)
        refused = await peer.call(request_frame(1, "tools/call", params))
        assert refused["error"]["code"] == -31011
        assert refused["error"]["data"] == {"error": "insufficient_scope", "requiredScopes": ["notes:write"]}
        secret = await peer.call(request_frame(2, "resources/read", read))
        assert secret["error"]["data"]["requiredScopes"] == ["notes:admin"]
        theirs.principal = AccessToken(subject="carol", client_id="c", scopes=frozenset({"notes:admin"}))
        allowed = await peer.call(request_frame(3, "tools/call", params))
        assert allowed["result"]["content"][0]["text"] == "wrote x"
        tg.cancel_scope.cancel()


async def test_without_a_principal_scopes_do_not_apply() -> None:
    """stdio and sockets take no OAuth: a scoped tool is called as any other (credentials come from the
    environment)."""
    async with principal_pair() as (theirs, peer), anyio.create_task_group() as tg:
        tg.start_soon(make_server().serve, theirs)  # (its principal is None: no OAuth on this transport)
        await peer.send(init_frame())
        await peer.recv_json()
        await peer.send(notification_frame("notifications/initialized"))
        reply = await peer.call(request_frame(1, "tools/call", {"name": "write_note", "arguments": {"text": "y"}}))
        assert reply["result"]["content"][0]["text"] == "wrote y"
        tg.cancel_scope.cancel()


def test_scopes_are_a_list_not_a_string() -> None:
    with pytest.raises(TypeError, match="list of scope names"):
        Server("s").add_tool(lambda: "x", name="x", scopes="notes:read")
    assert InsufficientScope(["a", "b"], ["b"]).data == {"error": "insufficient_scope", "requiredScopes": ["a", "b"]}
    assert issubclass(InvalidToken, Exception)


def test_scopes_for_names_what_each_kind_of_request_needs() -> None:
    server = make_server()

    @server.resource("notes://by-id/{note_id}", scopes=["notes:read"])
    def by_id(note_id: str) -> str:
        return note_id

    @server.method("notes/export", scopes=["notes:admin"])
    def export(ctx: Context, params: Any) -> dict[str, Any]:
        return {}

    assert server.scopes_for("tools/call", {"name": "write_note"}) == ("notes:write",)
    assert server.scopes_for("tools/call", {"name": "whoami"}) == ()
    assert server.scopes_for("tools/call", {"name": "no-such-tool"}) == ()
    assert server.scopes_for("resources/read", {"uri": "notes://by-id/7"}) == ("notes:read",)
    assert server.scopes_for("resources/subscribe", {"uri": "notes://secret"}) == ("notes:admin",)
    assert server.scopes_for("resources/read", {"uri": "notes://open"}) == ()
    assert server.scopes_for("prompts/get", {"name": "draft"}) == ("notes:write",)
    complete = {"ref": {"type": "ref/resource", "uri": "notes://by-id/{note_id}"}, "argument": {}}
    assert server.scopes_for("completion/complete", complete) == ("notes:read",)
    listen = {"notifications": {"resourceSubscriptions": ["notes://secret", "notes://by-id/1", "notes://open"]}}
    assert server.scopes_for("subscriptions/listen", listen) == ("notes:admin", "notes:read")
    assert server.scopes_for("notes/export", None) == ("notes:admin",)
    assert server.scopes_for("tools/list", None) == ()
    server.remove_tool("write_note")
    assert server.scopes_for("tools/call", {"name": "write_note"}) == ()
    assert Server("plain").scopes_for("tools/call", {"name": "x"}) == ()


async def test_a_custom_method_with_scopes_is_checked_by_the_server() -> None:
    server = make_server()

    @server.method("notes/export", scopes=["notes:admin"])
    def export(ctx: Context, params: Any) -> dict[str, Any]:
        return {"exported": True}

    async with principal_pair() as (theirs, peer), anyio.create_task_group() as tg:
        theirs.principal = AccessToken(subject="dan", client_id="c", scopes=frozenset({"notes:write"}))
        tg.start_soon(server.serve, theirs)
        await peer.initialize()
        refused = await peer.call(request_frame(1, "notes/export"))
        assert refused["error"]["data"]["requiredScopes"] == ["notes:admin"]
        theirs.principal = AccessToken(subject="dan", client_id="c", scopes=frozenset({"notes:admin"}))
        assert (await peer.call(request_frame(2, "notes/export")))["result"] == {"exported": True}
        tg.cancel_scope.cancel()
