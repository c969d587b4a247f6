"""The everything-server: every tool, resource, prompt and timed behaviour the official conformance suite calls.

Built only on jsonrpc_mcp's public API. Serves both eras on one URL::

    python conformance/everything_server.py --port 3000      # http://localhost:3000/mcp
    python conformance/everything_server.py --stdio          # for the golden wire transcripts
    python conformance/everything_server.py --port 3000 --skills   # and the skills extension (SEP-2640)

The same tool body serves a handshake client (server-to-client requests) and a 2026-07-28 client
(``InputRequiredResult`` round trips): ``ctx.elicit`` / ``ctx.sample`` / ``ctx.list_roots`` do the right thing.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Annotated, Any

import anyio
import msgspec

from jsonrpc_mcp import CacheHint, Context, RpcError, Server, ToolError, types
from jsonrpc_mcp.skills import Skill, SkillsExtension

IMAGE_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO_WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


def _form(prop: str, kind: str = "string") -> dict[str, Any]:
    return {"type": "object", "properties": {prop: {"type": kind}}, "required": [prop]}


def _answer(result: types.ElicitResult, field: str) -> str:
    content = result.content if isinstance(result.content, dict) else {}
    return str(content.get(field, "unknown"))


def skills() -> SkillsExtension:
    """The skills it publishes (SEP-2640): one with supporting files in two folders, one under a prefix."""
    return SkillsExtension(
        [
            Skill(
                "release-notes",
                "Write release notes from merged changes, in the project's format",
                "# Release notes\n\nFollow references/FORMAT.md; start each entry from templates/entry.md.\n",
                files={
                    "references/FORMAT.md": "# Format\n\nOne line per change, newest first.\n",
                    "templates/entry.md": "- {summary} ({reference})\n",
                },
                fields={"license": "MIT", "metadata": {"owner": "release-team"}},
            ),
            Skill(
                "code-review",
                "Review a change for correctness, tests and readability",
                "# Code review\n\nRead the diff twice: once for what it does, once for what it breaks.\n",
                prefix="acme/engineering",
            ),
        ]
    )


def create_server(*, with_skills: bool = False) -> Server:
    """The server; ``with_skills``: publish :func:`skills` too (the conformance runner's extension scenarios)."""
    server = Server(
        "jsonrpc-mcp-everything-server",
        version="1.0.0",
        instructions="The conformance test server of jsonrpc-mcp.",
        cache=CacheHint(ttl_ms=300_000, scope="public"),
        extensions=[skills()] if with_skills else (),
    )

    # --- content tools --------------------------------------------------------------------------------------

    @server.tool(description="Tests simple text content response")
    def test_simple_text() -> str:
        return "This is a simple text response for testing."

    @server.tool(description="Tests image content response")
    def test_image_content() -> types.ImageContent:
        return types.ImageContent(data=IMAGE_PNG, mime_type="image/png")

    @server.tool(description="Tests audio content response")
    def test_audio_content() -> types.AudioContent:
        return types.AudioContent(data=AUDIO_WAV, mime_type="audio/wav")

    @server.tool(description="Tests embedded resource content response")
    def test_embedded_resource() -> types.EmbeddedResource:
        return types.EmbeddedResource(
            resource=types.TextResourceContents(
                uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
            )
        )

    @server.tool(description="Tests response with multiple content types (text, image, resource)")
    def test_multiple_content_types() -> list[types.ContentBlock]:
        return [
            types.TextContent(text="Multiple content types test:"),
            types.ImageContent(data=IMAGE_PNG, mime_type="image/png"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(
                    uri="test://mixed-content-resource",
                    mime_type="application/json",
                    text=json.dumps({"test": "data", "value": 123}),
                )
            ),
        ]

    @server.tool(description="Tests error response handling")
    def test_error_handling() -> str:
        raise ToolError("This tool intentionally returns an error for testing")

    # --- timed behaviour ------------------------------------------------------------------------------------

    @server.tool(description="Tests tool that emits log messages during execution")
    async def test_tool_with_logging(ctx: Context) -> str:
        await ctx.info("Tool execution started")
        await anyio.sleep(0.05)
        await ctx.info("Tool processing data")
        await anyio.sleep(0.05)
        await ctx.info("Tool execution completed")
        return "Tool with logging executed successfully"

    @server.tool(description="Tests tool that reports progress notifications")
    async def test_tool_with_progress(ctx: Context) -> str:
        for step in (0, 50, 100):
            await ctx.report_progress(step, 100, f"Completed step {step} of 100")
            if step < 100:
                await anyio.sleep(0.05)
        return str(ctx.progress_token if ctx.progress_token is not None else 0)

    @server.tool(description="Diagnostic logging validator tool (logs only when the request asks for it)")
    async def test_logging_tool(ctx: Context) -> str:
        await ctx.info("Diagnostic trace logging activated")
        return "Logging evaluated"

    @server.tool(description="Diagnostic tool validating response progress streams")
    async def test_streaming_elicitation(ctx: Context) -> str:
        await ctx.report_progress(50, 100, "halfway")
        return "Streaming complete"

    @server.tool(
        description=(
            "Tests SSE stream disconnection and client reconnection (SEP-1699): the server closes the stream "
            "mid-call and sends the result after the client reconnects."
        )
    )
    async def test_reconnection(ctx: Context) -> str:
        await ctx.close_sse_stream()
        await anyio.sleep(0.1)
        return (
            "Reconnection test completed successfully. If you received this, the client properly reconnected "
            "after stream closure."
        )

    # --- input from the client (server requests or InputRequiredResult) ------------------------------------

    @server.tool(description="Tests server-initiated sampling (LLM completion request)")
    async def test_sampling(ctx: Context, prompt: str) -> str:
        result = await ctx.sample(prompt, max_tokens=100)
        text = getattr(result.content, "text", None) or "No response"
        return f"LLM response: {text}"

    @server.tool(description="Tests server-initiated elicitation (user input request)")
    async def test_elicitation(ctx: Context, message: str) -> str:
        schema = {  # (what the suite's scenario asks for, and answers)
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        }
        result = await ctx.elicit(message, schema)
        content = result.content if isinstance(result.content, dict) else {}
        return f"User response: action={result.action}, content={json.dumps(content)}"

    @server.tool(description="Tests elicitation with default values per SEP-1034")
    async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": True},
            },
            "required": [],
        }
        result = await ctx.elicit("Please review and update the form fields with defaults", schema)
        content = result.content if isinstance(result.content, dict) else {}
        return f"Elicitation completed: action={result.action}, content={json.dumps(content)}"

    @server.tool(description="Tests elicitation with enum schema improvements per SEP-1330")
    async def test_elicitation_sep1330_enums(ctx: Context) -> str:
        titled = [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"},
        ]
        schema = {
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Select one option",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": titled},
                "legacyEnum": {
                    "type": "string",
                    "description": "Select one option (legacy)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Select multiple options",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Select multiple options with titles",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
            "required": [],
        }
        result = await ctx.elicit("Please select options from the enum fields", schema)
        content = result.content if isinstance(result.content, dict) else {}
        return f"Elicitation completed: action={result.action}, content={json.dumps(content)}"

    @server.tool(description="Test tool requiring sampling")
    async def test_missing_capability(ctx: Context) -> str:
        await ctx.sample("Say hello", max_tokens=10)
        return "Success"

    @server.tool(description="MRTR: returns InputRequiredResult with elicitation request")
    async def test_input_required_result_elicitation(ctx: Context) -> str:
        result = await ctx.elicit("What is your name?", _form("name"), key="user_name")
        return f"Hello, {_answer(result, 'name')}!"

    @server.tool(description="MRTR: returns InputRequiredResult with sampling request")
    async def test_input_required_result_sampling(ctx: Context) -> str:
        result = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
        text = getattr(result.content, "text", None) or "no response"
        return f"Sampling result: {text}"

    @server.tool(description="MRTR: returns InputRequiredResult with roots/list request")
    async def test_input_required_result_list_roots(ctx: Context) -> str:
        result = await ctx.list_roots(key="client_roots")
        return f"Found {len(result.roots)} root(s)"

    @server.tool(description="MRTR: returns InputRequiredResult with requestState")
    async def test_input_required_result_request_state(ctx: Context) -> str:
        result = await ctx.elicit("Please confirm", _form("ok", "boolean"), key="confirm")
        return f"state-ok: requestState validated (action={result.action})"

    @server.tool(description="MRTR: returns InputRequiredResult with multiple input requests")
    async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
        answers = await ctx.request_inputs(
            {
                "user_name": (
                    "elicitation/create",
                    {"message": "What is your name?", "requestedSchema": _form("name")},
                ),
                "greeting": (
                    "sampling/createMessage",
                    {
                        "messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}],
                        "maxTokens": 50,
                    },
                ),
                "client_roots": ("roots/list", None),
            }
        )
        greeting = getattr(answers["greeting"].content, "text", "Hello there!")
        name = _answer(answers["user_name"], "name")
        return f"Name: {name}; Greeting: {greeting}; Roots: {len(answers['client_roots'].roots)}"

    @server.tool(description="MRTR: multi-round InputRequiredResult workflow")
    async def test_input_required_result_multi_round(ctx: Context) -> str:
        first = await ctx.elicit("Step 1: What is your name?", _form("name"), key="step1")
        second = await ctx.elicit("Step 2: What is your favorite color?", _form("color"), key="step2")
        return f"Multi-round complete for {_answer(first, 'name')} who likes {_answer(second, 'color')}"

    @server.tool(description="MRTR: HMAC-signed requestState integrity test")
    async def test_input_required_result_tampered_state(ctx: Context) -> str:
        await ctx.elicit("Please confirm", _form("ok", "boolean"), key="confirm")
        return "integrity-ok: state verified"

    @server.tool(description="MRTR: respects client capabilities in inputRequests")
    async def test_input_required_result_capabilities(ctx: Context) -> str:
        wanted: dict[str, tuple[str, dict[str, Any] | None]] = {}
        if ctx.has_capability("elicitation"):
            wanted["elicit_input"] = (
                "elicitation/create",
                {"message": "Elicitation input", "requestedSchema": _form("value")},
            )
        if ctx.has_capability("sampling"):
            wanted["sample_input"] = (
                "sampling/createMessage",
                {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "Sample request"}}],
                    "maxTokens": 50,
                },
            )
        if not wanted:
            return "No supported capabilities declared"
        answers = await ctx.request_inputs(wanted)
        return f"capabilities-ok: received {','.join(sorted(answers))}"

    @server.tool(description="Triggers notifications/tools/list_changed on listening streams")
    async def test_trigger_tool_change() -> str:
        await server.notify_list_changed("tools")
        return "Mutation triggered"

    @server.tool(description="Triggers notifications/prompts/list_changed on listening streams")
    async def test_trigger_prompt_change() -> str:
        await server.notify_list_changed("prompts")
        return "Mutation triggered"

    @server.tool(description="Mirrors parameters into Mcp-Param-* headers over HTTP (SEP-2243)")
    def test_custom_headers(
        region: Annotated[str, msgspec.Meta(extra_json_schema={"x-mcp-header": "Region"})],
        priority: Annotated[int, msgspec.Meta(extra_json_schema={"x-mcp-header": "Priority"})] = 0,
        verbose: Annotated[bool, msgspec.Meta(extra_json_schema={"x-mcp-header": "Verbose"})] = False,
    ) -> str:
        return f"region={region} priority={priority} verbose={verbose}"

    def json_schema_2020_12_tool(**arguments: Any) -> str:
        return f"JSON Schema 2020-12 tool called with: {json.dumps(arguments)}"

    server.add_tool(
        json_schema_2020_12_tool,
        name="json_schema_2020_12_tool",
        description="Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
        input_schema=JSON_SCHEMA_2020_12,
    )

    # --- tasks (2026-07-28, io.modelcontextprotocol/tasks): the fixtures of the suite's tasks-* scenarios -------

    @server.tool(description="Sync-only greeting: never a task")
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    @server.tool(description="May run as a task: sleeps `seconds`, then answers", task="optional")
    async def slow_compute(seconds: float = 0.0, label: str = "") -> str:
        await anyio.sleep(seconds)
        return f"computed {label} after {seconds:g} s"

    @server.tool(description="Runs only as a task; ends in a tool error", task="required")
    async def failing_job() -> str:
        await anyio.sleep(0.5)
        raise ToolError("failing_job failed, as it always does")

    @server.tool(description="May run as a task; ends in a JSON-RPC error (a protocol-level failure)", task="optional")
    async def protocol_error_job() -> str:
        await anyio.sleep(0.2)
        raise RpcError("the job hit a protocol-level failure", code=-32603)

    @server.tool(description="May run as a task; asks for a confirmation first", task="optional")
    async def confirm_delete(ctx: Context, filename: str) -> str:
        answer = await ctx.elicit(f"Delete {filename}?", _form("confirm", "boolean"), key="confirm")
        if answer.action == "accept" and (answer.content or {}).get("confirm"):
            return f"deleted {filename}"
        return f"kept {filename}"

    @server.tool(description="May run as a task; asks two questions at once", task="optional")
    async def multi_input(ctx: Context) -> str:
        answers = await ctx.request_inputs(
            {
                "first": ("elicitation/create", {"message": "First?", "requestedSchema": _form("name")}),
                "second": ("elicitation/create", {"message": "Second?", "requestedSchema": _form("name")}),
            }
        )
        names = [_answer(answers[key], "name") for key in ("first", "second")]
        return f"got {' and '.join(names)}"

    @server.tool(
        description="Runs only as a task: asks for a name in input rounds of the call, then becomes a task",
        task="required",
        task_start="in_handler",
    )
    async def test_tool_with_task(ctx: Context) -> str:
        answer = await ctx.elicit("What is your name?", _form("name"), key="user_name")
        await ctx.start_task("Greeting in the background")
        await anyio.sleep(0.2)
        return f"Hello, {_answer(answer, 'name')}!"

    # --- resources ------------------------------------------------------------------------------------------

    @server.resource(
        "test://static-text",
        name="static-text",
        title="Static Text Resource",
        description="A static text resource for testing",
        mime_type="text/plain",
        cache=CacheHint(ttl_ms=300_000, scope="private"),
    )
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource(
        "test://static-binary",
        name="static-binary",
        title="Static Binary Resource",
        description="A static binary resource (image) for testing",
        mime_type="image/png",
        cache=CacheHint(ttl_ms=300_000, scope="private"),
    )
    def static_binary() -> types.BlobResourceContents:
        return types.BlobResourceContents(uri="test://static-binary", mime_type="image/png", blob=IMAGE_PNG)

    @server.resource(
        "test://template/{id}/data",
        name="template",
        title="Resource Template",
        description="A resource template with parameter substitution",
        mime_type="application/json",
        cache=CacheHint(ttl_ms=300_000, scope="private"),
    )
    def template(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    watched = {"text": "Watched resource content"}

    @server.resource(
        "test://watched-resource",
        name="watched-resource",
        title="Watched Resource",
        description="A resource clients can subscribe to",
        mime_type="text/plain",
    )
    def watched_resource() -> str:
        return watched["text"]

    # --- prompts --------------------------------------------------------------------------------------------

    @server.prompt(title="Simple Test Prompt", description="A simple prompt without arguments")
    def test_simple_prompt() -> str:
        return "This is a simple prompt for testing."

    @server.prompt(title="Prompt With Arguments", description="A prompt with required arguments")
    def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
        """A prompt with required arguments.

        Args:
            arg1: First test argument
            arg2: Second test argument
        """
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @server.prompt(title="Prompt With Embedded Resource", description="A prompt that includes an embedded resource")
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[types.PromptMessage]:
        """A prompt that includes an embedded resource.

        Args:
            resourceUri: URI of the resource to embed
        """
        return [
            types.PromptMessage(
                role="user",
                content=types.EmbeddedResource(
                    resource=types.TextResourceContents(
                        uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
                    )
                ),
            ),
            types.PromptMessage(
                role="user", content=types.TextContent(text="Please process the embedded resource above.")
            ),
        ]

    @server.prompt(title="Prompt With Image", description="A prompt that includes image content")
    def test_prompt_with_image() -> list[types.PromptMessage]:
        return [
            types.PromptMessage(role="user", content=types.ImageContent(data=IMAGE_PNG, mime_type="image/png")),
            types.PromptMessage(role="user", content=types.TextContent(text="Please analyze the image above.")),
        ]

    @server.prompt(description="MRTR: prompt that requires elicitation input")
    async def test_input_required_result_prompt(ctx: Context) -> str:
        result = await ctx.elicit("What context should the prompt use?", _form("context"), key="user_context")
        return f"Prompt with context: {_answer(result, 'context')}"

    # --- completion -----------------------------------------------------------------------------------------

    @server.completion()
    def complete(ref: dict[str, Any], argument: str, value: str, context: dict[str, str]) -> list[str]:
        options = {"arg1": ["paris", "park", "party"], "arg2": ["blue", "green"], "id": ["1", "2", "42"]}
        return [o for o in options.get(argument, []) if o.startswith(value)]

    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--stdio", action="store_true", help="serve on stdin/stdout instead of HTTP")
    parser.add_argument("--skills", action="store_true", help="publish skills too (the skills extension, SEP-2640)")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--backend", metavar="URL", help="share sessions, notifications and keys through this Redis")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)
    server = create_server(with_skills=args.skills)
    if args.stdio:
        from jsonrpc_mcp.transports.stdio import run_stdio

        run_stdio(server)
        return 0
    from jsonrpc_mcp.transports.http_serve import serve_http

    options = {"backend": args.backend} if args.backend else {}
    serve_http(server, args.host, args.port, path="/mcp", **options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
