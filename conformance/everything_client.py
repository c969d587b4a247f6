"""The everything-client: the official conformance suite's client contract, built on jsonrpc_mcp's ``Client``.

    MCP_CONFORMANCE_SCENARIO=tools_call python conformance/everything_client.py http://localhost:PORT/mcp

The scenario comes from ``MCP_CONFORMANCE_SCENARIO``, its context (JSON) from ``MCP_CONFORMANCE_CONTEXT``, the
revision to speak from ``MCP_CONFORMANCE_PROTOCOL_VERSION`` (a handshake revision forces ``initialize``; otherwise
the client's default applies: 2026-07-28 first, the handshake as a fallback). Exit status 0 when the scenario's
client side ran to its end.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from msgspec import UNSET

from jsonrpc_mcp import Client, types
from jsonrpc_mcp.mcp.versions import HANDSHAKE_VERSIONS

logger = logging.getLogger("everything_client")

Scenario = Callable[[str, dict[str, Any]], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(*names: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        for name in names:
            SCENARIOS[name] = fn
        return fn

    return register


def _options(**extra: Any) -> dict[str, Any]:
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")
    options: dict[str, Any] = {"name": "jsonrpc-mcp-conformance-client", "version": "1.0.0"}
    if version in HANDSHAKE_VERSIONS:
        options["protocol_version"] = version
    elif version:
        options["protocol_version"] = "auto"
    options.update(extra)
    return options


def apply_defaults(schema: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    """Fill the fields the user left empty with the ``default`` of the requested schema (SEP-1034)."""
    filled = dict(content)
    for name, prop in (schema.get("properties") or {}).items():
        if name not in filled and isinstance(prop, dict) and "default" in prop:
            filled[name] = prop["default"]
    return filled


async def _sampling(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(text="This is a test response"), model="conformance-model"
    )


async def _elicitation(params: types.ElicitRequestParams) -> types.ElicitResult:
    schema = params.requested_schema if isinstance(params.requested_schema, dict) else {}
    content = apply_defaults(schema, {"confirmed": True} if "confirmed" in (schema.get("properties") or {}) else {})
    return types.ElicitResult(action="accept", content=content)


ROOTS = [types.Root(uri="file:///tmp/conformance", name="conformance")]


@scenario("initialize", "tools_call", "tools-call")
async def basic(url: str, context: dict[str, Any]) -> None:
    async with Client.connect_http(url, **_options()) as client:
        tools = await client.list_tools()
        if tools:
            await client.call_tool(tools[0].name, {"a": 2, "b": 3})


@scenario("json-schema-ref-no-deref", "request-metadata")
async def list_only(url: str, context: dict[str, Any]) -> None:
    async with Client.connect_http(url, **_options()) as client:
        await client.list_tools()


@scenario("json-schema-2020-12-preservation")
async def schema_echo(url: str, context: dict[str, Any]) -> None:
    async with Client.connect_http(url, **_options()) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        focal = tools["json_schema_2020_12_tool"]
        await client.call_tool("json_schema_echo", {"schema": focal.input_schema})


@scenario("elicitation-sep1034-client-defaults", "elicitation-defaults")
async def elicitation_defaults(url: str, context: dict[str, Any]) -> None:
    async with Client.connect_http(url, **_options(elicitation=_elicitation)) as client:
        await client.list_tools()
        await client.call_tool("test_client_elicitation_defaults", {})


@scenario("sse-retry")
async def sse_retry(url: str, context: dict[str, Any]) -> None:
    async with Client.connect_http(url, **_options()) as client:
        for tool in await client.list_tools():
            await client.call_tool(tool.name, {})


@scenario("sep-2322-client-request-state")
async def request_state(url: str, context: dict[str, Any]) -> None:
    options = _options(elicitation=_elicitation, sampling=_sampling, roots=ROOTS)
    async with Client.connect_http(url, **options) as client:
        names = [tool.name for tool in await client.list_tools()]
        for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"):
            if not names or name in names:
                await client.call_tool(name, {})


@scenario("http-standard-headers")
async def standard_headers(url: str, context: dict[str, Any]) -> None:
    async with Client.connect_http(url, **_options()) as client:
        caps = client.server_capabilities
        tools = await client.list_tools()
        if tools:
            await client.call_tool(tools[0].name, {})
        if caps.resources is not UNSET:
            resources = await client.list_resources()
            if resources:
                await client.read_resource(resources[0].uri)
        if caps.prompts is not UNSET:
            prompts = await client.list_prompts()
            if prompts:
                await client.get_prompt(prompts[0].name)


@scenario("http-custom-headers")
async def custom_headers(url: str, context: dict[str, Any]) -> None:
    async with Client.connect_http(url, **_options()) as client:
        await client.list_tools()
        for call in context.get("toolCalls", []):
            await client.call_tool(call["name"], call.get("arguments") or {})


@scenario("http-invalid-tool-headers")
async def invalid_tool_headers(url: str, context: dict[str, Any]) -> None:
    async with Client.connect_http(url, **_options()) as client:
        for tool in await client.list_tools():
            await client.call_tool(tool.name, {})


# --- skills (SEP-2640) ---------------------------------------------------------------------------------------


@scenario("sep-2640-client-no-prefetch")
async def skills_listed(url: str, context: dict[str, Any]) -> None:
    """A host building its registry: entries only, no file read."""
    from jsonrpc_mcp.skills import SkillsClient

    async with Client.connect_http(url, **_options()) as client:
        for entry in await SkillsClient(client).list():
            logger.info("skill %s: %s", entry.name, entry.description)


@scenario("sep-2640-client-verify-digest", "sep-2640-client-verify-size", "sep-2640-client-verify-frontmatter")
async def skills_loaded(url: str, context: dict[str, Any]) -> None:
    """A host loading the first skill listed, then reading the supporting file its instructions point to; a
    skill that fails verification is refused and nothing more of it is read."""
    from jsonrpc_mcp.skills import SkillsClient, SkillVerificationError

    async with Client.connect_http(url, **_options()) as client:
        skills = SkillsClient(client)
        entries = await skills.list()
        if not entries:
            return
        try:
            skill = await skills.load(entries[0])
        except SkillVerificationError as exc:
            logger.info("refused %s: %s", entries[0].uri, exc)
            return
        for listed in entries[0].resources:
            if not isinstance(listed, str) and listed.uri != skill.uri:
                await skill.read(listed.uri)


# --- authorization ---------------------------------------------------------------------------------------------

#: The suite's client ID metadata document URL (its authorization servers accept it without fetching it).
CIMD_URL = "https://conformance-test.local/client-metadata.json"
#: The suite's authorization servers redirect at once: the headless consent follows the redirect back.
REDIRECT_URI = "http://localhost:3000/callback"


def _oauth(context: dict[str, Any], **options: Any) -> Any:
    from jsonrpc_mcp.auth import HeadlessConsent, OAuth

    return OAuth(
        client_name="jsonrpc-mcp-conformance-client",
        client_metadata_url=CIMD_URL,
        consent=HeadlessConsent(redirect_uri=REDIRECT_URI),
        **options,
    )


@scenario(
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
    "auth/dpop",
    "auth/dpop-nonce",
)
async def authorized(url: str, context: dict[str, Any]) -> None:
    async with Client.connect_http(url, auth=_oauth(context), **_options()) as client:
        await client.list_tools()
        await client.call_tool("test-tool", {})


@scenario("auth/pre-registration")
async def pre_registered(url: str, context: dict[str, Any]) -> None:
    auth = _oauth(context, client_id=context["client_id"], client_secret=context["client_secret"])
    async with Client.connect_http(url, auth=auth, **_options()) as client:
        await client.list_tools()


@scenario("auth/client-credentials-basic", "auth/client-credentials-jwt")
async def client_credentials(url: str, context: dict[str, Any]) -> None:
    from jsonrpc_mcp.auth import OAuth
    from jsonrpc_mcp.auth.oauth_grants import ClientCredentials

    if "private_key_pem" in context:
        grant = ClientCredentials(
            context["client_id"],
            private_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm"),
        )
    else:
        grant = ClientCredentials(context["client_id"], context["client_secret"])
    async with Client.connect_http(url, auth=OAuth(grant=grant), **_options()) as client:
        await client.list_tools()


@scenario("auth/wif-jwt-bearer")
async def workload_identity(url: str, context: dict[str, Any]) -> None:
    from jsonrpc_mcp.auth import OAuth
    from jsonrpc_mcp.auth.oauth_grants import JwtBearer

    grant = JwtBearer(context["valid_jwt"], client_id=context.get("client_id"))
    async with Client.connect_http(url, auth=OAuth(grant=grant), **_options()) as client:
        await client.list_tools()


@scenario("auth/enterprise-managed-authorization")
async def enterprise_managed(url: str, context: dict[str, Any]) -> None:
    from jsonrpc_mcp.auth import OAuth
    from jsonrpc_mcp.auth.oauth_grants import EnterpriseManaged

    grant = EnterpriseManaged(
        identity_assertion=context["idp_id_token"],
        idp_token_endpoint=context["idp_token_endpoint"],
        idp_client_id=context.get("idp_client_id"),
        client_id=context["client_id"],
        client_secret=context.get("client_secret"),
    )
    extension = {"extensions": {"io.modelcontextprotocol/enterprise-managed-authorization": {}}}
    async with Client.connect_http(url, auth=OAuth(grant=grant), **_options(capabilities=extension)) as client:
        await client.list_tools()
        await client.call_tool("test-tool", {})


async def run(name: str, url: str, context: dict[str, Any]) -> None:
    await SCENARIOS[name](url, context)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if not args or name not in SCENARIOS:
        sys.stderr.write(f"usage: MCP_CONFORMANCE_SCENARIO=<one of {sorted(SCENARIOS)}> everything_client.py URL\n")
        return 2
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    try:
        anyio.run(run, name, args[-1], context)
    except Exception:
        logger.exception("scenario %s failed", name)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
