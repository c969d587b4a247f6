"""The client's result cache (2026-07-28 caching hints): opt-in, keyed, fresh by the server's ttlMs, never for a
multi round-trip retry, dropped by change notifications (docs/spec-decisions.md, 107).

Every test runs a real :class:`Server` over an in-memory pair; a tap on the server's end counts the requests that
reach it (and can change what it answers, as a server that sends other hints would). The cache reads a fake
clock, so that a result expires without waiting.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from http_support import start_app

from jsonrpc_mcp import CacheHint, Client, ConnectionClosed, Context, InvalidParams, ResultCache, Server, types
from jsonrpc_mcp.jsonrpc.streams import Outgoing
from jsonrpc_mcp.transports.memory import MemoryMessageStream

pytestmark = pytest.mark.anyio


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tap(MemoryMessageStream):
    """The server's end of the pair: each request that reaches the server is recorded (method, params without
    ``_meta``); ``rewrite`` may change each result the server sends; ``before`` runs as a request arrives."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.rewrite: Callable[[dict[str, Any]], None] | None = None
        self.before: Callable[[str, dict[str, Any]], None] | None = None

    async def receive(self) -> Any:
        frames = await super().receive()
        for frame in frames:
            message = json.loads(frame)
            if "method" in message and "id" in message:
                params = {k: v for k, v in (message.get("params") or {}).items() if k != "_meta"}
                self.seen.append((message["method"], params))
                if self.before is not None:
                    self.before(message["method"], params)
        return frames

    async def send(self, frames: Any) -> None:
        if self.rewrite is not None:
            changed = []
            for out in frames:
                message = json.loads(bytes(out.frame))
                if isinstance(message.get("result"), dict):
                    self.rewrite(message["result"])
                changed.append(Outgoing(json.dumps(message).encode(), out.related, out.kind))
            frames = changed
        await super().send(frames)

    def count(self, method: str) -> int:
        return sum(1 for seen, _ in self.seen if seen == method)


@asynccontextmanager
async def connected(server: Server, **options: Any) -> AsyncIterator[tuple[Client, Tap]]:
    """A client of ``server`` over a memory pair (options as ``Client.connect`` takes them) and the tap."""
    a_send, b_recv = anyio.create_memory_object_stream[bytes](256)
    b_send, a_recv = anyio.create_memory_object_stream[bytes](256)
    ours, theirs = MemoryMessageStream(a_send, a_recv), Tap(b_send, b_recv)
    options.setdefault("cache_origin", "memory:test")
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, theirs)
        try:
            async with Client.connect(ours, **options) as client:
                yield client, theirs
        finally:
            tg.cancel_scope.cancel()
            await ours.aclose()
            await theirs.aclose()


def make_server(ttl_ms: int = 10_000, scope: str = "public") -> Server:
    server = Server("cached", "1", page_size=2, cache=CacheHint(ttl_ms=ttl_ms, scope=scope))  # type: ignore[arg-type]
    for name in "abcde":
        server.add_tool(lambda: "x", name=name)
    server.add_resource(lambda: "A", uri="mem://a")
    server.add_resource(lambda: "B", uri="mem://b")
    server.add_prompt(lambda: "p", name="p")
    return server


def cursors(tap: Tap, method: str = "tools/list") -> list[Any]:
    return [params.get("cursor") for seen, params in tap.seen if seen == method]


async def test_a_fresh_result_is_served_from_the_cache_and_the_server_hears_nothing() -> None:
    """2026-07-28: "If ttlMs is positive, the client SHOULD consider the result fresh for that many milliseconds
    after receiving the response" (fresh while now < t_received + ttlMs)."""
    clock = FakeClock()
    async with connected(make_server(ttl_ms=10_000), cache=ResultCache(clock=clock)) as (client, tap):
        first = [tool.name for tool in await client.list_tools()]
        read = await client.read_resource("mem://a")
        prompts = await client.list_prompts()
        await client.request("server/discover")
        await client.request("server/discover")
        clock.now += 9.999
        assert [tool.name for tool in await client.list_tools()] == first == list("abcde")
        assert await client.read_resource("mem://a") == read
        assert await client.list_prompts() == prompts
    assert cursors(tap) == [None, cursors(tap)[1], cursors(tap)[2]]  # three pages, read once
    assert (tap.count("resources/read"), tap.count("prompts/list")) == (1, 1)
    assert tap.count("server/discover") == 2  # the connection's own, then one of the two asked


async def test_an_expired_result_is_fetched_again_at_its_next_access_and_not_before() -> None:
    """2026-07-28: "Once the TTL expires, the response is stale and the client SHOULD re-fetch on next access";
    "Clients SHOULD NOT treat TTL as a polling interval that triggers automatic background refetches" (the
    cache starts no task: nothing runs that could ask the server on its own), so "Implementations that do choose
    to poll MUST apply jitter and backoff" holds with no polling to apply it to."""
    clock = FakeClock()
    async with connected(make_server(ttl_ms=1_000), cache=ResultCache(clock=clock)) as (client, tap):
        tasks_before = len(anyio.get_running_tasks())
        await client.read_resource("mem://a")
        clock.now += 1.0  # now == t_received + ttlMs: stale
        assert len(anyio.get_running_tasks()) == tasks_before
        await anyio.wait_all_tasks_blocked()
        assert tap.count("resources/read") == 1  # expired, and nobody asked: nothing sent
        await client.read_resource("mem://a")
        assert tap.count("resources/read") == 2
        await client.read_resource("mem://a")
        assert tap.count("resources/read") == 2  # fresh again from the re-fetch


@pytest.mark.parametrize("ttl", [0, -5, None], ids=["zero", "negative", "absent"])
async def test_a_result_without_a_positive_ttl_is_never_served_from_the_cache(ttl: int | None) -> None:
    """2026-07-28: "If ttlMs is 0, the response SHOULD be considered immediately stale"; "If ttlMs is negative,
    clients SHOULD ignore it and treat it as 0"; "If ttlMs is absent, clients SHOULD assume a default of 0
    (immediately stale)"."""

    def hints(result: dict[str, Any]) -> None:
        if "ttlMs" in result:
            if ttl is None:
                del result["ttlMs"]
            else:
                result["ttlMs"] = ttl

    cache = ResultCache(clock=FakeClock())
    async with connected(make_server(ttl_ms=10_000), cache=cache) as (client, tap):
        tap.rewrite = hints
        for _ in range(2):
            await client.read_resource("mem://a")
            await client.list_prompts()
            await client.request("server/discover")
    assert (tap.count("resources/read"), tap.count("prompts/list"), tap.count("server/discover")) == (2, 2, 3)
    assert len(cache) == 0


async def test_a_result_is_served_only_for_the_same_method_and_parameters() -> None:
    """2026-07-28: "Clients MUST NOT serve a cached response for a request whose method or parameters differ from
    the request that produced it" (the uri of a read, the cursor of a page, the method)."""
    async with connected(make_server(), cache=ResultCache(clock=FakeClock())) as (client, tap):
        a = await client.read_resource("mem://a")
        b = await client.read_resource("mem://b")
        first = await client.request("tools/list")
        second = await client.request("tools/list", {"cursor": first["nextCursor"]})
        await client.list_resources()
        templates = await client.list_resource_templates()
    assert tap.count("resources/read") == 2 and a != b
    assert [t["name"] for t in first["tools"]] == ["a", "b"] and [t["name"] for t in second["tools"]] == ["c", "d"]
    assert cursors(tap) == [None, first["nextCursor"]]
    assert (tap.count("resources/list"), tap.count("resources/templates/list"), templates) == (1, 1, [])


@pytest.mark.parametrize("scope", ["private", "public"])
async def test_two_access_tokens_never_share_private_results_and_share_public_ones(scope: str) -> None:
    """2026-07-28: "Caches MUST NOT be shared across authorization contexts (e.g. a different access token requires
    a different cache)"; a "public" response "MAY" be served to any user. Two clients share one cache, each in
    its own authorization context; a third speaks to another server."""
    cache = ResultCache(clock=FakeClock())
    server = make_server(scope=scope)
    async with (
        connected(server, cache=cache, cache_auth="token:alice") as (alice, alice_tap),
        connected(server, cache=cache, cache_auth="token:bob") as (bob, bob_tap),
        connected(server, cache=cache, cache_auth="token:alice", cache_origin="memory:other") as (_, other_tap),
    ):
        await alice.read_resource("mem://a")
        await alice.read_resource("mem://a")
        await bob.read_resource("mem://a")
        await _.read_resource("mem://a")
    assert alice_tap.count("resources/read") == 1
    assert bob_tap.count("resources/read") == (1 if scope == "private" else 0)
    assert other_tap.count("resources/read") == 1  # another server: never its entries


async def test_a_result_of_a_multi_round_trip_retry_is_never_cached() -> None:
    """2026-07-28: "Results produced by retrying a request through the multi round-trip requests mechanism ... MUST
    NOT be cached"."""
    server = make_server()

    @server.resource("mem://asks")
    async def asks(ctx: Context) -> str:
        await ctx.elicit("sure?", {"type": "object", "properties": {}})
        return "yes"

    async def elicit(params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={})

    cache = ResultCache(clock=FakeClock())
    async with connected(server, cache=cache, elicitation=elicit) as (client, tap):
        for _ in range(2):
            assert (await client.read_resource("mem://asks")).contents[0].text == "yes"  # type: ignore[union-attr]
        retried = [params for method, params in tap.seen if method == "resources/read"]
        assert len(retried) == 4 and "inputResponses" in retried[1]  # each read: the request, then its retry
        assert len(cache) == 0
        await client.read_resource("mem://a")
        assert len(cache) == 1
        tap.seen.clear()
        with pytest.raises(InvalidParams):  # a request carrying requestState is never answered from the cache
            await client.request("resources/read", {"uri": "mem://a", "requestState": "x"})
        assert tap.count("resources/read") == 1


async def test_a_list_changed_or_resource_updated_notification_drops_what_it_concerns() -> None:
    """2026-07-28, caching: "When a relevant notification is received while a cached response is still fresh, the
    notification invalidates the cached response": the next access asks the server."""
    heard: list[str] = []
    arrived = anyio.Event()

    async def on_notification(method: str, params: Any) -> None:
        if method.endswith(("list_changed", "updated")):
            heard.append(method)
        if len(heard) == 2:
            arrived.set()

    server = make_server()
    cache = ResultCache(clock=FakeClock())
    async with (
        connected(server, cache=cache, on_notification=on_notification) as (c, tap),
        c.listen(tools=True, resource_uris=["mem://a"]),
    ):
        await c.list_tools()
        await c.read_resource("mem://a")
        await c.read_resource("mem://b")
        server.add_tool(lambda: "y", name="f")
        await server.notify_resource_updated("mem://a")
        with anyio.fail_after(5):
            await arrived.wait()
        assert [tool.name for tool in await c.list_tools()] == list("abcdef")
        await c.read_resource("mem://a")
        await c.read_resource("mem://b")
    assert sorted(heard) == ["notifications/resources/updated", "notifications/tools/list_changed"]
    assert cursors(tap).count(None) == 2  # the listing read again from its first page
    assert [params["uri"] for method, params in tap.seen if method == "resources/read"] == [
        "mem://a",
        "mem://b",
        "mem://a",
    ]


async def test_an_expired_page_is_fetched_again_with_its_cursor() -> None:
    """2026-07-28: "When a cached page expires, the client SHOULD re-fetch that page using its cursor"."""
    clock = FakeClock()
    async with connected(make_server(ttl_ms=1_000), cache=ResultCache(clock=clock)) as (client, tap):
        first = await client.request("tools/list")
        cursor = first["nextCursor"]
        await client.request("tools/list", {"cursor": cursor})
        await client.request("tools/list", {"cursor": cursor})
        assert cursors(tap) == [None, cursor]
        clock.now += 2
        again = await client.request("tools/list", {"cursor": cursor})
    assert cursors(tap) == [None, cursor, cursor]
    assert [tool["name"] for tool in again["tools"]] == ["c", "d"]


async def test_a_full_listing_with_a_stale_page_is_read_again_from_the_first_page() -> None:
    """2026-07-28: "Clients that require a consistent snapshot of the full list SHOULD re-fetch from the beginning
    (without a cursor)": list_tools() serves every page from the cache only when all are fresh, else reads them
    all again from the first, even those still fresh."""
    clock = FakeClock()

    def short_last_page(result: dict[str, Any]) -> None:
        if "tools" in result and "nextCursor" not in result:
            result["ttlMs"] = 1_000  # the last page expires first

    async with connected(make_server(ttl_ms=60_000), cache=ResultCache(clock=clock)) as (client, tap):
        tap.rewrite = short_last_page
        await client.list_tools()
        await client.list_tools()
        assert len(cursors(tap)) == 3
        clock.now += 2
        assert [tool.name for tool in await client.list_tools()] == list("abcde")
    assert cursors(tap)[3:] == cursors(tap)[:3] and cursors(tap)[3] is None


async def test_a_refused_cursor_drops_every_cached_page_and_the_listing_starts_again() -> None:
    """2026-07-28: "If a cursor becomes invalid (e.g., the server returns an error for a previously valid cursor),
    the client SHOULD discard all cached pages and re-fetch from the beginning"."""
    clock = FakeClock()
    server = make_server(ttl_ms=1_000)
    cache = ResultCache(clock=clock)
    async with connected(server, cache=cache) as (client, tap):
        await client.list_tools()
        valid = cursors(tap)[1]

        def shrink(method: str, params: dict[str, Any]) -> None:
            if params.get("cursor") == valid:  # the list shrinks just before the second page is read
                tap.before = None
                for name in "bcde":
                    server.remove_tool(name)

        clock.now += 2
        tap.before = shrink
        assert [tool.name for tool in await client.list_tools()] == ["a"]
        assert cursors(tap)[3:] == [None, valid, None]
        # a page still fresh goes too when its listing's cursor is refused
        first = await client.request("tools/list")
        assert "nextCursor" not in first and len(cache) == 1
        with pytest.raises(InvalidParams):
            await client.request("tools/list", {"cursor": valid})
        assert len(cache) == 0


async def test_a_tool_call_refused_as_unknown_drops_the_tool_listing_kept() -> None:
    """The caching page's MAY: "Clients MAY re-fetch before the TTL expires if they have reason to believe the data
    has changed (e.g., receiving an unexpected error on a tool call indicating the method was not found or the
    parameters were invalid)": the next list_tools() asks the server, which no longer has the tool."""
    server = make_server(ttl_ms=60_000)
    async with connected(server, cache=ResultCache(clock=FakeClock())) as (client, tap):
        await client.list_tools()
        await client.read_resource("mem://a")
        server.remove_tool("a")  # (no listen stream: no notification tells the client)
        assert [tool.name for tool in await client.list_tools()] == list("abcde")  # fresh in the cache
        with pytest.raises(InvalidParams):
            await client.call_tool("a", {})
        assert [tool.name for tool in await client.list_tools()] == list("bcde")
        await client.read_resource("mem://a")
    assert cursors(tap).count(None) == 2 and tap.count("resources/read") == 1  # the reads were not suspect


async def test_without_a_cache_every_call_reaches_the_server() -> None:
    """``cache=`` not given: nothing is kept, the hints go to the application on each result as they came."""
    async with connected(make_server()) as (client, tap):
        assert client.cache is None
        for _ in range(2):
            await client.list_tools()
            await client.read_resource("mem://a")
            await client.request("server/discover")
    assert (len(cursors(tap)), tap.count("resources/read"), tap.count("server/discover")) == (6, 2, 3)


async def test_the_handshake_era_keeps_nothing() -> None:
    """The hints exist only in 2026-07-28: a client of an older revision asks the server each time."""
    cache = ResultCache(clock=FakeClock())
    async with connected(make_server(), cache=cache, protocol_version="2025-11-25") as (client, tap):
        await client.read_resource("mem://a")
        await client.read_resource("mem://a")
    assert tap.count("resources/read") == 2 and len(cache) == 0


async def test_a_stale_result_answers_only_when_asked_to_and_the_server_is_gone() -> None:
    """The spec's MAY ("Clients MAY serve stale responses if errors occur during re-fetching"), off by default."""
    for serve_stale in (False, True):
        clock = FakeClock()
        cache = ResultCache(clock=clock, serve_stale_on_error=serve_stale)
        async with connected(make_server(ttl_ms=1_000), cache=cache) as (client, tap):
            read = await client.read_resource("mem://a")
            clock.now += 2
            await tap.aclose()
            if serve_stale:
                assert await client.read_resource("mem://a") == read
            else:
                with pytest.raises(ConnectionClosed):
                    await client.read_resource("mem://a")


def test_a_cache_is_bounded_and_checks_its_options() -> None:
    clock = FakeClock()
    cache = ResultCache(max_entries=2, clock=clock)
    result = b'{"contents":[],"ttlMs":1000,"cacheScope":"private"}'
    keys = [ResultCache.key("s", "2026-07-28", "resources/read", {"uri": f"mem://{n}"}) for n in range(3)]
    for key in keys:
        assert key is not None
        cache.put(key, None, result, clock())
    assert len(cache) == 2 and keys[0] is not None and cache.get(keys[0], None) is None
    assert keys[2] is not None and cache.get(keys[2], None) == result
    assert ResultCache.key("s", "2026-07-28", "tools/call", {"name": "x"}) is None
    with pytest.raises(ValueError, match="max_entries"):
        ResultCache(max_entries=0)
    send, receive = anyio.create_memory_object_stream[bytes](1)
    with send, receive, pytest.raises(TypeError, match="ResultCache"):
        Client(MemoryMessageStream(send, receive), cache="yes")  # type: ignore[arg-type]


async def test_over_http_the_authorization_header_is_the_context_of_private_results() -> None:
    """2026-07-28: "a different access token requires a different cache", over Streamable HTTP: clients sharing a
    cache and sending another ``Authorization`` header (or none) read a private result again, one sending the same
    reads it from the cache; a public result is shared by all."""
    server = Server("http-cached", "1", cache=CacheHint(ttl_ms=60_000, scope="private"))
    reads = {"private": 0, "public": 0}

    def read(which: str) -> Callable[[], str]:
        def count() -> str:
            reads[which] += 1
            return which

        return count

    server.add_resource(read("private"), uri="mem://private")
    server.add_resource(read("public"), uri="mem://public", cache=CacheHint(ttl_ms=60_000, scope="public"))
    thread = start_app(server)
    cache = ResultCache()
    try:
        for header in ("Bearer alice", "Bearer bob", "Bearer alice", None):
            headers = {"Authorization": header} if header else None
            async with Client.connect_http(thread.url, headers=headers, cache=cache) as client:
                assert client.stateless and (client.cache_auth is None) == (header is None)
                assert "alice" not in (client.cache_auth or "")  # (a digest: the cache holds no credential)
                await client.read_resource("mem://private")
                await client.read_resource("mem://public")
    finally:
        thread.stop()
    assert reads == {"private": 3, "public": 1}  # alice, bob, nobody; the second alice from the cache
