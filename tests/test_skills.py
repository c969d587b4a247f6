"""Skills (SEP-2640) published by a server and used by a client, through real transports (a stdio subprocess and
uvicorn), at a handshake revision and at 2026-07-28.

The server is tests/fixtures/skills_app.py: ``pdf-processing`` read from a folder, ``acme/git-workflow`` built in
Python, one skill to a page. A hostile server, built here with the same extension API, serves content that does
not match its entries: the client refuses it and reads nothing more of that skill.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from helpers import FIXTURES, TIMEOUT, RawPeer, init_frame, notification_frame, request_frame, serve_command
from http_support import ServerThread, stateless_body, stateless_headers

from jsonrpc_mcp import Client, InvalidParams, RpcError, Server
from jsonrpc_mcp.cli import load_app
from jsonrpc_mcp.extensions import Extension
from jsonrpc_mcp.middleware import CallNext, Message
from jsonrpc_mcp.skills import (
    DIRECTORY_MIME_TYPE,
    SKILLS_EXTENSION,
    InvalidSkillEntry,
    Skill,
    SkillError,
    SkillsClient,
    SkillsExtension,
    SkillVerificationError,
    digest_of,
)
from jsonrpc_mcp.transports.http_asgi import McpAsgiApp
from jsonrpc_mcp.transports.spawn import spawn

pytestmark = pytest.mark.anyio

APP = FIXTURES / "skills_app.py"
V4 = "2025-11-25"
V5 = "2026-07-28"
PDF = "skill://pdf-processing/SKILL.md"
GIT = "skill://acme/git-workflow/SKILL.md"
FORMS_MD = (FIXTURES / "skills" / "pdf-processing" / "references" / "FORMS.md").read_bytes()


@asynccontextmanager
async def http_client(server: Server, version: str, **options: Any) -> AsyncIterator[Client]:
    thread = ServerThread(McpAsgiApp(server))
    try:
        async with Client.connect_http(thread.url, protocol_version=version, **options) as client:
            yield client
    finally:
        await anyio.to_thread.run_sync(thread.stop)


@asynccontextmanager
async def stdio_client(version: str) -> AsyncIterator[Client]:
    async with Client.connect_stdio(serve_command(APP), protocol_version=version) as client:
        yield client


def recording(seen: list[tuple[str, Any]]) -> Callable[[Message, CallNext], Any]:
    """A middleware noting each request's method and params."""

    def note(message: Message, call_next: CallNext) -> Any:
        if message.kind == "request":
            seen.append((message.method, message.params))
        return call_next(message)

    return note


# --- a host using the skills of a server ---------------------------------------------------------------------


@pytest.mark.parametrize("version", [V4, V5])
async def test_a_host_lists_loads_and_reads_skills_over_stdio(version: str) -> None:
    with anyio.fail_after(TIMEOUT * 3):
        async with stdio_client(version) as client:
            skills = SkillsClient(client)
            assert skills.settings == {"directoryRead": True}
            assert client.server_capabilities.resources is not msgspec.UNSET  # skill files are resources
            entries = await skills.list()  # one to a page: two pages
            assert [e.uri for e in entries] == [PDF, GIT]
            pdf = entries[0]
            assert pdf.frontmatter == {
                "name": "pdf-processing",
                "description": "Extract text and tables from PDF files, fill forms, merge documents",
                "license": "MIT",
                "metadata": {"owner": "docs-team"},
            }
            assert not isinstance(pdf.resources, str)
            assert [f.uri for f in pdf.resources] == [
                PDF,
                "skill://pdf-processing/references/FORMS.md",
                "skill://pdf-processing/templates/cover.md",
            ]
            skill = await skills.load(pdf)
            assert "Read `references/FORMS.md` before filling a form" in skill.instructions
            assert await skill.read("references/FORMS.md") == FORMS_MD
            with pytest.raises(SkillVerificationError, match="not one of the files"):
                await skill.read("references/OTHER.md")
            with pytest.raises(SkillVerificationError, match="leaves the skill"):
                await skill.read("../../etc/passwd")
            git = await skills.load(GIT)  # by URI: skills/get, then SKILL.md
            assert await git.read_text("references/naming.md") == "Branches are named <ticket>-<topic>.\n"


@pytest.mark.parametrize("version", [V4, V5])
async def test_directories_are_read_level_by_level_over_http(version: str) -> None:
    server = load_app(str(APP))
    with anyio.fail_after(TIMEOUT * 3):
        async with http_client(server, version) as client:
            skills = SkillsClient(client)
            top = await skills.read_directory("skill://pdf-processing")
            assert [(r.uri, r.mime_type) for r in top] == [
                (PDF, "text/markdown"),
                ("skill://pdf-processing/references", DIRECTORY_MIME_TYPE),
                ("skill://pdf-processing/templates", DIRECTORY_MIME_TYPE),
            ]
            assert (top[0].name, top[0].size) == (
                "pdf-processing",
                len((FIXTURES / "skills/pdf-processing/SKILL.md").read_bytes()),
            )
            (forms,) = await skills.read_directory("skill://pdf-processing/references")
            assert (forms.uri, forms.size) == ("skill://pdf-processing/references/FORMS.md", len(FORMS_MD))
            assert [r.uri for r in await skills.read_directory("skill://acme")] == ["skill://acme/git-workflow"]
            for not_a_directory in (PDF, "skill://nowhere"):
                with pytest.raises(InvalidParams):
                    await skills.read_directory(not_a_directory)


async def test_listing_reads_no_skill_file_and_loading_reads_only_skill_md() -> None:
    seen: list[tuple[str, Any]] = []
    server = load_app(str(APP))
    server.add_middleware(recording(seen))
    with anyio.fail_after(TIMEOUT * 3):
        async with http_client(server, V5) as client:
            skills = SkillsClient(client)
            entries = await skills.list()
            assert not [m for m, _ in seen if m == "resources/read"]
            await skills.load(entries[0])
    reads = [params["uri"] for method, params in seen if method == "resources/read"]
    assert reads == [PDF]


async def test_skill_files_are_resources_named_from_the_frontmatter() -> None:
    with anyio.fail_after(TIMEOUT * 3):
        async with stdio_client(V4) as client:
            listed = {r.uri: r for r in await client.list_resources()}
            read = await client.read_resource(PDF)
    assert set(listed) == {
        PDF,
        "skill://pdf-processing/references/FORMS.md",
        "skill://pdf-processing/templates/cover.md",
        GIT,
        "skill://acme/git-workflow/references/naming.md",
    }
    assert (listed[PDF].name, listed[PDF].mime_type) == ("pdf-processing", "text/markdown")
    assert listed[PDF].description == "Extract text and tables from PDF files, fill forms, merge documents"
    assert listed["skill://pdf-processing/templates/cover.md"].name == "templates/cover.md"
    assert read.contents[0].mime_type == "text/markdown"
    assert read.contents[0].text == (FIXTURES / "skills/pdf-processing/SKILL.md").read_text()


# --- on the wire ---------------------------------------------------------------------------------------------


@asynccontextmanager
async def stdio_peer() -> AsyncIterator[RawPeer]:
    async with spawn(serve_command(APP)) as stream:
        yield RawPeer(stream)


async def test_the_extension_needs_no_client_declaration_and_is_declared_at_every_revision() -> None:
    with anyio.fail_after(TIMEOUT * 3):
        async with stdio_peer() as peer:
            await peer.send(init_frame("2024-11-05", "init"))
            reply, _ = await peer.recv_until(lambda m: m.get("id") == "init")
            await peer.send(notification_frame("notifications/initialized"))
            listed = await peer.call(request_frame(1, "skills/list"))
            got = await peer.call(request_frame(2, "skills/get", {"uri": GIT}))
            unknown = await peer.call(request_frame(3, "skills/get", {"uri": "skill://nope/SKILL.md"}))
            bad_cursor = await peer.call(request_frame(4, "skills/list", {"cursor": "not a cursor"}))
    assert reply["result"]["capabilities"]["extensions"] == {SKILLS_EXTENSION: {"directoryRead": True}}
    assert [e["uri"] for e in listed["result"]["skills"]] == [PDF] and listed["result"]["nextCursor"]
    assert got["result"]["skill"]["uri"] == GIT and "nextCursor" not in got["result"]
    assert unknown["error"]["code"] == -32602 and unknown["error"]["data"] == {"uri": "skill://nope/SKILL.md"}
    assert bad_cursor["error"]["code"] == -32602


async def test_2026_07_28_results_carry_the_cache_attributes() -> None:
    server = load_app(str(APP))
    thread = ServerThread(McpAsgiApp(server))
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            answers = {}
            for method, params in (("skills/list", {}), ("skills/get", {"uri": PDF})):
                response = await http.post(
                    thread.url, json=stateless_body(1, method, params), headers=stateless_headers(method)
                )
                answers[method] = response.json()["result"]
            discover = await http.post(
                thread.url, json=stateless_body(2, "server/discover"), headers=stateless_headers("server/discover")
            )
    finally:
        await anyio.to_thread.run_sync(thread.stop)
    for result in answers.values():
        assert (result["ttlMs"], result["cacheScope"], result["resultType"]) == (0, "public", "complete")
    capabilities = discover.json()["result"]["capabilities"]
    assert capabilities["extensions"][SKILLS_EXTENSION] == {"directoryRead": True}
    assert "resources" in capabilities


# --- a server that lies about its skills ----------------------------------------------------------------------

SKILL_MD = b"---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nSkill body.\n"
EXTRA = b"# Forms\n"


def lying_server(served: bytes, entry_for: bytes = SKILL_MD, frontmatter: dict[str, Any] | None = None) -> Server:
    """A server whose entry describes ``entry_for`` (and ``frontmatter``) while it serves ``served``."""
    liar = Extension(SKILLS_EXTENSION, server_only=True)
    entry = {
        "uri": PDF,
        "frontmatter": frontmatter
        or {"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents"},
        "resources": [
            {"uri": PDF, "digest": digest_of(entry_for), "size": len(entry_for)},
            {"uri": "skill://pdf-processing/references/FORMS.md", "digest": digest_of(EXTRA), "size": len(EXTRA)},
        ],
    }

    @liar.method("skills/list")
    def listed(ctx: Any, params: Any) -> dict[str, Any]:
        return {"skills": [entry]}

    server = Server("liar", version="1", extensions=[liar])

    @server.resource(PDF, mime_type="text/markdown")
    def skill_md() -> str:
        return served.decode()

    @server.resource("skill://pdf-processing/references/FORMS.md", mime_type="text/markdown")
    def forms() -> str:
        return EXTRA.decode()

    return server


TAMPERED = {  # what the server serves, and what its entry describes
    "digest": (SKILL_MD.replace(b"Skill body.", b"Evil body!!"), SKILL_MD),
    "bytes read": (SKILL_MD + b"more\n", SKILL_MD),
    "frontmatter": (  # the file and its digest agree; the entry's frontmatter does not
        SKILL_MD.replace(b"Extract, fill, and assemble PDF documents", b"Exfiltrate credentials"),
        SKILL_MD.replace(b"Extract, fill, and assemble PDF documents", b"Exfiltrate credentials"),
    ),
}


@pytest.mark.parametrize("reason", list(TAMPERED))
@pytest.mark.parametrize("version", [V4, V5])
async def test_a_skill_that_fails_verification_is_refused_and_nothing_more_is_read(reason: str, version: str) -> None:
    served, described = TAMPERED[reason]
    server = lying_server(served, entry_for=described)
    seen: list[tuple[str, Any]] = []
    server.add_middleware(recording(seen))
    with anyio.fail_after(TIMEOUT * 3):
        async with http_client(server, version) as client:
            skills = SkillsClient(client)
            (entry,) = await skills.list()
            with pytest.raises(SkillVerificationError, match=reason):
                await skills.load(entry)
    assert [params["uri"] for method, params in seen if method == "resources/read"] == [PDF]


async def test_a_client_refuses_a_server_that_did_not_declare_skills_and_an_entry_outside_the_rules() -> None:
    plain = Server("plain", version="1")

    @plain.resource(PDF, mime_type="text/markdown")
    def skill_md() -> str:
        return SKILL_MD.decode()

    with anyio.fail_after(TIMEOUT * 3):
        async with http_client(plain, V5) as client:
            with pytest.raises(Exception, match="did not declare"):
                await SkillsClient(client).list()
        wrong_name = lying_server(SKILL_MD, frontmatter={"name": "other", "description": "d"})
        async with http_client(wrong_name, V5) as client:
            (entry,) = await SkillsClient(client).list()
            with pytest.raises(InvalidSkillEntry, match=r"frontmatter\.name"):
                await SkillsClient(client).load(entry)


# --- publishing ----------------------------------------------------------------------------------------------


def test_a_folder_given_as_the_skills_or_a_prefix_without_a_folder_is_refused() -> None:
    folder = FIXTURES / "skills"
    with pytest.raises(TypeError, match=r"skills is a list of Skill objects; to publish a folder: directory="):
        SkillsExtension(str(folder))  # type: ignore[arg-type]  # (its letters were taken for skills)
    with pytest.raises(TypeError, match="to publish a folder"):
        SkillsExtension(folder)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix is for the skills read from directory: give directory too"):
        SkillsExtension([Skill("one", "The first")], prefix="team")  # (was: ignored)
    published = [skill.uri for skill in SkillsExtension(directory=folder, prefix="team").catalog]
    assert published and all(uri.startswith("skill://team/") for uri in published), published


async def test_skills_added_and_removed_while_serving_are_listed_and_served_accordingly() -> None:
    skills = SkillsExtension()
    server = Server("live", version="1", extensions=[skills])
    skills.add(Skill("one", "The first", "# One\n"))
    with anyio.fail_after(TIMEOUT * 3):
        async with http_client(server, V5) as client:
            assert [e.name for e in await SkillsClient(client).list()] == ["one"]
            skills.add(Skill("two", "The second", "# Two\n", files={"notes.txt": "n\n"}))
            assert [e.name for e in await SkillsClient(client).list()] == ["one", "two"]
            assert "skill://two/notes.txt" in {r.uri for r in await client.list_resources()}
            skills.remove("skill://two/SKILL.md")
            assert [e.name for e in await SkillsClient(client).list()] == ["one"]
            assert "skill://two/notes.txt" not in {r.uri for r in await client.list_resources()}
    with pytest.raises(SkillError, match="published at"):
        skills.add(Skill("one", "Again", "# One\n"))


@pytest.mark.parametrize("version", ["2024-11-05", V4, V5])
async def test_a_server_publishing_no_skill_yet_declares_resources_and_lists_those_added_later(version: str) -> None:
    skills = SkillsExtension()
    server = Server("empty", version="1", extensions=[skills])
    changed = anyio.Event()

    def on_notification(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/resources/list_changed":
            changed.set()

    with anyio.fail_after(TIMEOUT * 3):
        async with Client.connect_server(server, protocol_version=version, on_notification=on_notification) as client:
            declared = msgspec.to_builtins(client.server_capabilities)  # SEP-2640: resources with the extension
            assert declared["resources"] == {"subscribe": True, "listChanged": True}
            assert server.advertises("resources")
            assert await client.list_resources() == [] and await client.list_resource_templates() == []
            assert await SkillsClient(client).list() == []
            with pytest.raises(RpcError) as unknown:
                await client.read_resource(PDF)
            skills.add(Skill("one", "The first", "# One\n"))
            if version != V5:  # (2026-07-28 tells of changes on a subscriptions/listen stream only)
                await changed.wait()
            assert [r.uri for r in await client.list_resources()] == ["skill://one/SKILL.md"]
            assert [e.name for e in await SkillsClient(client).list()] == ["one"]
            (contents,) = (await client.read_resource("skill://one/SKILL.md")).contents
    assert unknown.value.code == (-32602 if version == V5 else -32002) and unknown.value.data == {"uri": PDF}
    assert "# One" in contents.text  # type: ignore[union-attr]


async def test_without_directory_read_the_method_does_not_exist() -> None:
    server = Server(
        "flat", version="1", extensions=[SkillsExtension([Skill("one", "The first")], directory_read=False)]
    )
    with anyio.fail_after(TIMEOUT * 3):
        async with http_client(server, V5) as client:
            skills = SkillsClient(client)
            assert skills.settings == {} and not skills.directory_read
            with pytest.raises(Exception, match="directoryRead"):
                await skills.read_directory("skill://one")
            with pytest.raises(Exception) as raised:
                await client.request("resources/directory/read", {"uri": "skill://one"})
    assert getattr(raised.value, "code", None) == -32601
