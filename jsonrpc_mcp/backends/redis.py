"""Redis as the engine several workers and hosts share (L6; the ``redis`` extra: redis-py's asyncio client).

Under one key prefix (``jsonrpc-mcp`` unless told otherwise), a :class:`RedisBackend` keeps:

``<prefix>:bus``
    the publish/subscribe channel every worker listens on (:mod:`jsonrpc_mcp.backends` events);
``<prefix>:state-keys``
    a hash of the ``requestState`` keys, one per period of ``key_rotation`` seconds (made by the first worker that
    needs it, ``HSETNX``): a worker seals with the current period's key and opens with the previous, current and
    next ones, so a state outlives a rotation by at least one period;
``<prefix>:spent:<nonce>``
    a single-use state already answered (``SET NX``, until the state expires);
``<prefix>:session:<id>``
    a handshake-era session's record, expiring after ``session_idle_timeout`` without use;
``<prefix>:sessions``
    the sessions, scored by when each was last used (milliseconds): what bounds them across the workers (a new
    session past ``max_sessions`` ends the least recently used ones, and every worker is told).

Every command has a deadline (``timeout``): when Redis cannot be reached, the caller gets
:class:`~jsonrpc_mcp.errors.Unavailable` at once, the log gets one line per outage (never the URL's password),
and the next command tries again. At most ``max_connections`` commands are under way at once, each on a connection
of its own; more wait their turn (within their deadline), so that a burst of requests neither opens a connection
per request nor finds redis-py's pool exhausted. redis-py's asyncio client needs the asyncio event loop.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import anyio
import anyio.abc
import msgspec

from ..errors import MissingExtra, Unavailable
from ..mcp.bus import BusEvent, SessionChanged, SessionEnded, TaskChanged, decode_event, encode_event

if TYPE_CHECKING:
    from .redis_tasks import RedisTaskStore

__all__ = ("RedisBackend",)

logger = logging.getLogger(__name__)

_KEY_BYTES: Final = 32
_RETRY_FIRST: Final = 0.25  # seconds before the bus reconnects after a failure, doubling up to _RETRY_MOST
_RETRY_MOST: Final = 5.0
_LEASE_REFRESH: Final = 2.0  # seconds between two renewals of this worker's leases at most (hold_lease)
_KEEPER_TICK: Final = 1.0  # seconds between two looks of the keeper (leases, periodic jobs) at most


#: A session used: its record (``KEYS[1]``) lives ``ARGV[1]`` ms more, and it is the most recently used in
#: ``KEYS[2]`` (``ARGV[2]``: now, ``ARGV[3]``: its id). Its record, or nil.
_TOUCH_SCRIPT: Final = """
local record = redis.call('GET', KEYS[1])
if record then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
end
return record
"""

#: A session saved (``KEYS[1]``: its record, ``KEYS[2]``: the sessions by last use). ``ARGV``: the record, its
#: ttl (ms), now (ms), its id, the most sessions kept (-1: no bound, a session saved again), the start of a
#: record's key. Forgets the sessions whose records expired; past the bound, the least recently used give way
#: (their records deleted). Returns the ids of those that gave way.
_SAVE_SCRIPT: Final = """
local ttl, now, most = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5])
local ended = {}
if most >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - ttl)
  local over = redis.call('ZCARD', KEYS[2]) - most + 1
  if over > 0 then
    for _, sid in ipairs(redis.call('ZRANGE', KEYS[2], 0, over - 1)) do
      if sid ~= ARGV[4] then
        redis.call('DEL', ARGV[6] .. sid)
        redis.call('ZREM', KEYS[2], sid)
        table.insert(ended, sid)
      end
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[4])
return ended
"""


def _redis() -> Any:
    try:
        import redis.asyncio
    except ImportError:  # pragma: no cover - the extra is not installed
        raise ImportError(f"RedisBackend needs redis-py: {MissingExtra.install('redis')}") from None
    return redis.asyncio


def _where(url: str) -> str:
    """The URL as a log line may show it: scheme, host, port and database, never a user name or password."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix:{parts.path}"
    host = parts.hostname or "localhost"
    return f"{parts.scheme}://{host}:{parts.port or 6379}{parts.path or ''}"


class RedisBackend:
    """The :class:`~jsonrpc_mcp.backends.Backend` of workers that share one Redis (or Valkey) server.

    :param url: ``redis://[user:password@]host:port/db``, ``rediss://`` for TLS, or ``unix:///path?db=N``.
    :param prefix: the start of every key and of the channel name (several servers may share one Redis).
    :param timeout: seconds any command may take before the caller gets :class:`~jsonrpc_mcp.errors.Unavailable`.
    :param key_rotation: seconds each ``requestState`` key seals new states (a day by default).
    :param max_connections: commands under way at once (each on a connection of its own; the bus's subscription
        has one more); more wait for one of them to finish.
    :param client: an already configured ``redis.asyncio.Redis`` to use instead of ``url`` (its pool must allow
        ``max_connections`` + 1 connections, and it must return bytes: not made with ``decode_responses=True``).
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str = "jsonrpc-mcp",
        timeout: float = 2.0,
        key_rotation: float = 86_400.0,
        max_connections: int = 32,
        client: Any = None,
    ) -> None:
        if timeout <= 0 or key_rotation <= 0 or max_connections < 1:
            raise ValueError("timeout, key_rotation and max_connections must be positive")
        scheme = urlsplit(url).scheme
        if client is None and scheme not in ("redis", "rediss", "unix"):  # (never shows a password the URL holds)
            raise ValueError(f"url must be redis://host:port/db, rediss://... or unix:///path (its scheme: {scheme!r})")
        if client is not None and url != "redis://localhost:6379/0":
            raise ValueError("give url or client, not both (the client's own address is used)")
        if client is not None and not inspect.iscoroutinefunction(getattr(client, "execute_command", None)):
            raise TypeError(
                "the Redis client must be a redis.asyncio.Redis (its commands are awaited), not a redis.Redis"
            )
        if client is not None and client.get_connection_kwargs().get("decode_responses"):
            # (what is stored is bytes, random key material among them: decoded as text, it would not read back)
            raise ValueError("the Redis client must return bytes: make it without decode_responses=True")
        self.url = url
        self.where = _where(url) if client is None else "the given Redis client"
        self.prefix = prefix
        self.timeout = timeout
        self.key_rotation = key_rotation
        self.max_connections = max_connections
        self._slots: anyio.Semaphore | None = None  # (made in the event loop, on the first command)
        self._client = client
        self._owns_client = client is None
        self._channel = f"{prefix}:bus"
        self._ring_key = f"{prefix}:state-keys"
        self._keys: tuple[bytes, ...] = ()
        self._keys_period = -1  # the period whose keys _keys holds
        self._down = False  # an outage was logged and has not ended
        self._back_at = -math.inf  # when the last outage ended (time.monotonic())
        self._task_listeners: list[Callable[[str], None]] = []  # told of each TaskChanged on the bus
        self._leases: dict[str, float] = {}  # key -> seconds: set while this worker lives (refreshed by run)
        self._leases_set = -math.inf  # when they were last set
        self._jobs: list[_Job] = []  # run every so often while this worker lives (every)

    def __repr__(self) -> str:
        return f"RedisBackend({self.where!r}, prefix={self.prefix!r})"

    @property
    def client(self) -> Any:
        """The ``redis.asyncio.Redis`` client (made on first use)."""
        if self._client is None:
            self._client = _redis().Redis.from_url(
                self.url,
                socket_timeout=self.timeout,
                socket_connect_timeout=self.timeout,
                max_connections=self.max_connections + 1,  # (+ the bus's subscription)
            )
        return self._client

    # --- failures ------------------------------------------------------------------------------------------

    def _failed(self, exc: BaseException) -> Unavailable:
        if not self._down:
            self._down = True
            logger.error("Redis at %s cannot be reached (%s): answering 'unavailable'", self.where, type(exc).__name__)
        return Unavailable()

    def _ok(self) -> None:
        if self._down:
            self._down = False
            self._back_at = time.monotonic()
            logger.warning("Redis at %s is reachable again", self.where)

    def back_within(self, seconds: float) -> bool:
        """Is Redis out of reach, or did it come back less than ``seconds`` ago? (Then what should have been renewed
        meanwhile, a worker's lease, may have lapsed though the worker lives.)"""
        return self._down or time.monotonic() - self._back_at < seconds

    async def _call(self, command: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """Run one command with the deadline (which its wait for a turn counts against); a failure to reach Redis
        becomes :class:`Unavailable`."""
        if self._slots is None:
            self._slots = anyio.Semaphore(self.max_connections)
        try:
            with anyio.fail_after(self.timeout):
                async with self._slots:
                    result = await command(*args, **kwargs)
        except _redis_errors() as exc:
            raise self._failed(exc) from None
        self._ok()
        return result

    # --- the bus -------------------------------------------------------------------------------------------

    async def publish(self, event: BusEvent) -> None:
        await self._call(self.client.publish, self._channel, encode_event(event))

    async def run(
        self,
        deliver: Callable[[BusEvent], Awaitable[None]],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on the bus until cancelled (reconnecting after failures, waiting longer each time up to a few
        seconds), keep the ``requestState`` keys of the current period at hand, renew this worker's leases and run
        its periodic jobs (:meth:`every`)."""
        async with anyio.create_task_group() as tg:
            await tg.start(self._receive, deliver)
            tg.start_soon(self._keep)
            task_status.started()

    async def _receive(
        self,
        deliver: Callable[[BusEvent], Awaitable[None]],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        started = False
        wait = _RETRY_FIRST
        errors = _redis_errors()
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                with anyio.fail_after(self.timeout):
                    await pubsub.subscribe(self._channel)
                await self._refresh_keys()
                if not started:
                    started = True
                    task_status.started()
                wait = _RETRY_FIRST
                await self._listen(pubsub, deliver)
            except errors as exc:
                self._failed(exc)
            except Unavailable:  # (a command of ours that failed, reading the keys: logged already; try again)
                pass
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout):
                    await pubsub.aclose()
            if not started:
                started = True
                task_status.started()  # serve anyway: requests that need Redis answer "unavailable" until it is back
            await anyio.sleep(wait)
            wait = min(wait * 2, _RETRY_MOST)

    async def _listen(self, pubsub: Any, deliver: Callable[[BusEvent], Awaitable[None]]) -> None:
        while True:
            message = await pubsub.get_message(timeout=1.0)  # (wakes at least once a second to rotate keys)
            if message is not None:  # (none in a second says nothing: a paused Redis sends none either)
                self._ok()
            if self._period() != self._keys_period:
                await self._refresh_keys()
            if message is None or message.get("type") != "message":
                continue
            try:
                event = decode_event(message["data"])
            except (msgspec.DecodeError, msgspec.ValidationError):
                logger.warning("ignored a message on %s that is not an event", self._channel)
                continue
            if type(event) is TaskChanged:
                for listener in self._task_listeners:
                    listener(event.task_id)
                continue
            try:
                await deliver(event)
            except Exception:
                logger.exception("delivering %s failed", type(event).__name__)

    # --- requestState keys ---------------------------------------------------------------------------------

    def _period(self) -> int:
        return math.floor(time.time() / self.key_rotation)

    def state_keys(self) -> tuple[bytes, ...]:
        return self._keys

    async def _refresh_keys(self) -> None:
        """Make sure the current and the next period have a key (the first worker to ask makes it), read the
        previous, current and next ones, and forget older ones."""
        period = self._period()
        client = self.client
        wanted = [str(period - 1), str(period), str(period + 1)]
        async with client.pipeline(transaction=False) as pipe:
            pipe.hsetnx(self._ring_key, wanted[1], os.urandom(_KEY_BYTES))
            pipe.hsetnx(self._ring_key, wanted[2], os.urandom(_KEY_BYTES))
            pipe.hmget(self._ring_key, wanted)
            pipe.hkeys(self._ring_key)
            *_, found, names = await self._call(pipe.execute)
        previous, current, following = found
        self._keys = tuple(key for key in (current, previous, following) if key)
        self._keys_period = period
        stale = [name for name in names if name.decode() not in wanted]
        if stale:
            await self._call(client.hdel, self._ring_key, *stale)

    # --- single-use states ---------------------------------------------------------------------------------

    async def claim(self, nonce: str, expires: float) -> bool:
        until = max(math.ceil(expires * 1000), math.ceil(time.time() * 1000) + 1)
        claimed = await self._call(self.client.set, f"{self.prefix}:spent:{nonce}", b"1", nx=True, pxat=until)
        return bool(claimed)

    # --- sessions ------------------------------------------------------------------------------------------

    def _session_key(self, sid: str) -> str:
        return f"{self.prefix}:session:{sid}"

    @property
    def _sessions_key(self) -> str:
        return f"{self.prefix}:sessions"

    async def load_session(self, sid: str, ttl: float) -> bytes | None:
        record: bytes | None = await self._call(
            self.client.eval, _TOUCH_SCRIPT, 2, self._session_key(sid), self._sessions_key, _ms(ttl), _now_ms(), sid
        )
        return record

    async def save_session(
        self, sid: str, record: bytes, ttl: float, *, changed: bool, most: int | None = None
    ) -> None:
        ended = await self._call(
            self.client.eval,
            _SAVE_SCRIPT,
            2,
            self._session_key(sid),
            self._sessions_key,
            record,
            _ms(ttl),
            _now_ms(),
            sid,
            -1 if most is None else most,
            self._session_key(""),
        )
        if ended:
            logger.info("%d session(s) gave way to a new one: the workers' sessions are at their bound", len(ended))
        for gone in ended:
            await self.publish(SessionEnded(gone.decode()))
        if changed:
            await self.publish(SessionChanged(sid))

    async def end_session(self, sid: str) -> None:
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.delete(self._session_key(sid))
            pipe.zrem(self._sessions_key, sid)
            await self._call(pipe.execute)
        await self.publish(SessionEnded(sid))

    # --- tasks ---------------------------------------------------------------------------------------------

    def task_store(self) -> RedisTaskStore:
        """A :class:`~jsonrpc_mcp.backends.redis_tasks.RedisTaskStore` on this backend (one per call)."""
        from .redis_tasks import RedisTaskStore

        return RedisTaskStore(self)

    def on_task_changed(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call ``listener(task_id)`` for each :class:`TaskChanged` on the bus; returns what stops it."""
        self._task_listeners.append(listener)
        return lambda: self._task_listeners.remove(listener)

    def hold_lease(self, key: str, seconds: float) -> None:
        """Keep ``key`` set in Redis while this worker lives: renewed by :meth:`run` every few seconds with
        ``seconds`` to live (it lapses within ``seconds`` of the worker's end, however it ended)."""
        self._leases[key] = seconds
        self._leases_set = -math.inf

    def drop_lease(self, key: str) -> None:
        self._leases.pop(key, None)

    def _lease_refresh(self) -> float:
        """Seconds between two renewals: a third of the shortest lease, at most :data:`_LEASE_REFRESH`."""
        return min(_LEASE_REFRESH, *(seconds / 3 for seconds in self._leases.values()))

    async def _renew_leases(self) -> None:
        self._leases_set = time.monotonic()
        async with self.client.pipeline(transaction=False) as pipe:
            for key, seconds in self._leases.items():
                pipe.set(key, b"1", px=_ms(seconds))
            await self._call(pipe.execute)

    # --- periodic jobs -------------------------------------------------------------------------------------

    def every(self, seconds: float, job: Callable[[], Awaitable[object]], name: str) -> Callable[[], None]:
        """Run ``job()`` every ``seconds`` while :meth:`run` runs (the first time at once); returns what stops it.
        A job that fails is logged (its ``name`` and the kind of failure, once per outage when Redis cannot be
        reached) and runs again at its next time: it never stops the worker."""
        if seconds <= 0:
            raise ValueError("seconds must be positive")
        entry = _Job(seconds, job, name)
        self._jobs.append(entry)
        return lambda: self._jobs.remove(entry) if entry in self._jobs else None

    async def _keep(self) -> None:
        """Renew the leases and run the jobs that are due, until cancelled."""
        while True:
            now = time.monotonic()
            if self._leases and now - self._leases_set >= self._lease_refresh():
                await _quietly(self._renew_leases, "renewing this worker's leases")
            for job in list(self._jobs):
                if now >= job.due:
                    job.due = now + job.seconds
                    await _quietly(job.run, job.name)
            pauses = [_KEEPER_TICK, *(job.seconds for job in self._jobs)]
            if self._leases:
                pauses.append(self._lease_refresh())
            await anyio.sleep(min(pauses))

    async def aclose(self) -> None:
        """Close the connections (a client given to the constructor stays open: it is the caller's); the next
        command opens new ones."""
        self._slots = None  # (the next command may run in another event loop)
        if not self._owns_client:
            return
        client, self._client = self._client, None
        if client is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout):
                await client.aclose()


class _Job:
    """A periodic job of :meth:`RedisBackend.every`: what it runs, how often, and when next."""

    __slots__ = ("due", "name", "run", "seconds")

    def __init__(self, seconds: float, run: Callable[[], Awaitable[object]], name: str) -> None:
        self.seconds = seconds
        self.run = run
        self.name = name
        self.due = -math.inf


async def _quietly(job: Callable[[], Awaitable[object]], name: str) -> None:
    """Run ``job``; a failure is logged (Redis out of reach: by :meth:`RedisBackend._call`, once per outage) and
    goes no further."""
    try:
        await job()
    except Unavailable:
        pass
    except Exception as exc:
        logger.error("%s failed (%s); tried again at its next time", name, type(exc).__name__)


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def _now_ms() -> int:
    return math.floor(time.time() * 1000)


def _redis_errors() -> tuple[type[BaseException], ...]:
    """What redis-py raises when the server cannot be reached, or answers too late (and our own deadline)."""
    import redis.exceptions

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError, TimeoutError)
