"""The tasks extension, ``io.modelcontextprotocol/tasks`` (SEP-2663), server side (L5).

A tool registered with ``task="optional"`` or ``task="required"`` may run as a *task*: when a 2026-07-28 client
declares the extension on its ``tools/call``, the request is answered at once with a ``CreateTaskResult`` (the
task's id, status, ``ttlMs``, ``pollIntervalMs``), and the tool runs on in the server's own tasks (the
connection's over stdio and sockets, the app's over Streamable HTTP), not the request's. The client follows it
with ``tasks/get`` (the task, with its ``result``, ``error`` or ``inputRequests`` as its status says), answers
its input requests with ``tasks/update``, and may ask for it to stop with ``tasks/cancel``; a
``subscriptions/listen`` stream asking for ``taskIds`` gets ``notifications/tasks`` at each change of status
(with several workers sharing a backend, whichever worker holds the stream).

Inside a task the tool's :class:`~jsonrpc_mcp.Context` is a :class:`TaskContext`: ``ctx.elicit()``,
``ctx.sample()``, ``ctx.list_roots()`` and ``ctx.request_inputs()`` put the task in ``input_required`` and wait
for the client's ``tasks/update``; ``ctx.report_progress()`` updates the task's ``statusMessage`` (and how far
it got, in ``_meta.progress`` of ``tasks/get``); ``ctx.cancelled`` turns true once the client asked to cancel,
and the tool is also interrupted at its next ``await`` (a ``def`` tool on a worker thread runs to its end, and
reads ``ctx.cancelled`` to stop early).

Where the extension is not negotiated the tool answers its request as any other — except a ``"required"`` one,
refused with -32021 ``requiredCapabilities: {"extensions": {"io.modelcontextprotocol/tasks": {}}}``. The
extension is defined for 2026-07-28 only; a 2025-11-25 session gets that revision's core tasks from this same
extension (:mod:`.core_tasks`: its methods, over the records made, run and ended here), and an earlier one never
sees a task.

Tasks are kept in a :class:`~jsonrpc_mcp.mcp.task_store.TaskStore` (in memory by default; SQLite to survive a
restart), bounded per client (``max_per_client``) and in all (``max_tasks``), and kept ``ttl`` seconds after they
finish. A task belongs to the principal the transport authenticated (anyone, when it authenticated nobody: the
task id, 128 random bits, is then the only key), and is invisible to others. It counts against the quota of its
client: that principal, or without one the session (``Mcp-Session-Id``) or the connection (an HTTP request's TCP
connection, a stdio or socket connection), so that one unauthenticated client cannot fill the quota of all.
"""

from __future__ import annotations

import inspect
import json
import logging
import secrets
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.lowlevel
import msgspec
from msgspec import UNSET, UnsetType

from ..errors import (
    ConnectionClosed,
    InputRequired,
    InternalError,
    InvalidParams,
    RequestTimeout,
    RpcError,
)
from ..jsonrpc import codes
from ..jsonrpc.dispatch import failure_error
from . import task_state as ts
from .context import Context, StartTask, _input_request, on_worker_thread
from .extensions import Extension, WrapNext
from .progress import Pacer
from .session import encode_stateless_result
from .task_store import MemoryTaskStore, TaskStore, TellsStopped
from .versions import STATELESS_VERSIONS

if TYPE_CHECKING:
    from .server import Server

__all__ = ("Tasks", "TaskContext", "TooManyTasks", "EXTENSION_ID")

logger = logging.getLogger(__name__)

EXTENSION_ID: Final = ts.EXTENSION_ID

#: How long a wait for a change of a task re-reads the store at the latest (a store shared by several processes
#: that cannot tell of a change made elsewhere is still read again this often).
_RECHECK: Final = 30.0
_STOPPED: Final = "The server stopped while the task was running"
#: How many tasks the last version told is kept of (a change arrives out of order only within moments).
_TOLD_KEPT: Final = 4096
#: Seconds before a store that failed is tried again (a task's end, its watch), doubling up to :data:`_RETRY_MOST`:
#: once the store is back, a task's end is stored within ``_RETRY_MOST`` seconds and one write.
_RETRY_FIRST: Final = 0.1
_RETRY_MOST: Final = 2.0


class TooManyTasks(RpcError):
    """The client has as many tasks as the server keeps for one (-31010, HTTP 429): some must finish and expire,
    or be cancelled, first."""

    code = codes.BUSY
    default_message = "Too many tasks"


def _too_many_tasks() -> TooManyTasks:
    """The refusal of a task that cannot be started: its client's quota (or the server's) is full of working
    tasks."""
    return TooManyTasks(
        "Too many tasks: this client (or the server) has as many tasks working as it keeps; cancel some, or wait "
        "until they finish"
    )


class _TaskIdParams(msgspec.Struct, rename="camel"):
    task_id: str
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class _UpdateParams(msgspec.Struct, rename="camel"):
    task_id: str
    input_responses: dict[str, dict[str, Any]]
    meta: dict[str, Any] | UnsetType = msgspec.field(default=UNSET, name="_meta")


class _StatusChange(msgspec.Struct):
    """A task's change of status as the workers tell each other: the ``DetailedTask``, and its record's version."""

    version: int
    task: dict[str, Any]


class _Versions:
    """The last version told of each of the ``kept`` tasks told most recently."""

    __slots__ = ("_kept", "_last")

    def __init__(self, kept: int) -> None:
        self._kept = kept
        self._last: OrderedDict[str, int] = OrderedDict()

    def newer(self, task_id: str, version: int) -> bool:
        """Is ``version`` newer than the last one told of ``task_id``? (If so, it is the last one from now on.)"""
        last = self._last.get(task_id)
        if last is not None and version <= last:
            return False
        self._last[task_id] = version
        self._last.move_to_end(task_id)
        if len(self._last) > self._kept:
            self._last.popitem(last=False)
        return True


class _Run:
    """A task this process runs: its id, what its work is stopped with, what it asked, how it ends."""

    __slots__ = ("cancel_requested", "ending", "keys", "paced", "progress_lost", "scope", "stopped", "task_id")

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.scope = anyio.CancelScope()
        self.cancel_requested = False  #: the client asked to cancel the task
        self.stopped = False  #: its work is being stopped (plain flags: a worker thread reads them)
        self.keys: set[str] = set()
        self.ending: _Ending | None = None  #: its end, until it is stored
        self.progress_lost = False  #: a progress report could not be stored (logged once)
        #: What paces its progress (decision 104), while its work runs.
        self.paced: Pacer | None = None

    def stop(self) -> None:
        """Interrupt the work at its next ``await``."""
        self.stopped = True
        self.scope.cancel()


async def _pass_held_progress(held: tuple[TaskContext, float, float | None, str | None]) -> None:
    ctx, progress, total, message = held
    await ctx._pass_progress(progress, total, message)


class _Ending(msgspec.Struct, frozen=True):
    """A task's end, as :meth:`Tasks._end` stores it."""

    status: Any
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    message: str | None = None


class TaskContext(Context, kw_only=True):
    """The :class:`~jsonrpc_mcp.Context` of a tool running as a task (see the module docstring)."""

    tasks: Any  #: the Tasks extension running it
    run: Any  #: its _Run

    @property
    def task_id(self) -> str | None:
        return str(self.run.task_id)

    @property
    def cancelled(self) -> bool:
        """True once the client asked to cancel the task, or its work is being stopped (readable from a worker
        thread too: the task's request has been answered, so it is the task that says)."""
        if self.run.cancel_requested or self.run.stopped:
            return True
        return False if on_worker_thread() else super().cancelled

    async def start_task(self, message: str | None = None) -> None:
        """Already a task: ``message``, when given, becomes its ``statusMessage``."""
        if message is not None:
            await self.tasks.report(self.run, message=message)

    async def _report_progress(self, progress: float, total: float | None, message: str | None) -> None:
        """How far the task got: ``message`` becomes its ``statusMessage``, and ``progress``/``total`` are in the
        ``_meta.progress`` of ``tasks/get`` (a task sends no ``notifications/progress``). ``progress`` must
        increase."""
        if self._progress_last is not None and progress <= self._progress_last:
            raise ValueError("progress must increase with each report")
        self._progress_last = progress
        paced = self.run.paced
        if paced is None:  # (no work of Tasks runs it: passed as it comes)
            await self._pass_progress(progress, total, message)
        else:  # paced as a request's progress is: the latest held report is passed before the task ends
            await paced.report(self.run.task_id, (self, progress, total, message))

    async def _pass_progress(self, progress: float, total: float | None, message: str | None) -> None:
        """A report the pacer lets pass: stored in the task's record."""
        await self.tasks.report(self.run, message=message, progress=progress, total=total)

    async def log(self, level: Any, data: Any, logger_name: str | None = None) -> None:
        """A task sends no ``notifications/message`` (the extension leaves them out): logged here at debug."""
        logger.debug("task %s logged at %s: %r", self.run.task_id, level, data)

    async def send_notification(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """A task's request has been answered: there is no stream to send on (dropped)."""
        logger.debug("task %s: %s dropped (a task has no request stream)", self.run.task_id, method)

    async def close_sse_stream(self) -> bool:
        return False

    @property
    def _asks_in_rounds(self) -> bool:
        return True  # (the answers of the request's own rounds, before the task began, are its first answers)

    async def _input_round(self, missing: dict[str, dict[str, Any]], timeout: float | None) -> dict[str, Any]:
        """The task waits in ``input_required`` until the client answered them all."""
        answers: dict[str, Any] = await self.tasks.ask(self.run, missing, timeout)
        return answers


class Tasks(Extension):
    """The tasks extension for a :class:`~jsonrpc_mcp.Server` (a tool registered with ``task=`` adds one with
    the defaults; give your own to ``Server(extensions=[...])`` first to choose them).

    :param store: where tasks are kept (:class:`~jsonrpc_mcp.mcp.task_store.MemoryTaskStore` by default;
        :class:`~jsonrpc_mcp.storage.sqlite_tasks.SqliteTaskStore` survives a restart; served with a backend,
        e.g. ``McpAsgiApp(backend="redis://...")``, the backend's store, shared by every worker, unless one is given
        here).
    :param ttl: seconds a finished task (its result or error) is kept after it finished; then it is gone.
    :param poll_interval: seconds between two ``tasks/get`` the server suggests (``pollIntervalMs``).
    :param max_per_client: tasks one client may have kept at once (working, or finished and not yet expired). A
        client is the principal the transport authenticated, else its session, else its connection. One more
        makes the client's oldest finished task give way (its result is gone); when all of them are working it
        is refused with -31010 (HTTP 429) — a ``task="optional"`` tool then runs in its request instead.
    :param max_tasks: tasks the server keeps at once in all, whatever the client; one more makes the oldest
        finished task of any client give way, and is refused as above when every kept task is working.
    :param input_timeout: seconds a task waits for the answers to its input requests (default: ``ttl``); then the
        tool's request for input fails, as an unanswered request does in a handshake session.
    """

    def __init__(
        self,
        store: TaskStore | None = None,
        *,
        ttl: float = 3600.0,
        poll_interval: float = 1.0,
        max_per_client: int = 1000,
        max_tasks: int = 10_000,
        input_timeout: float | None = None,
    ) -> None:
        for name, value in (("ttl", ttl), ("poll_interval", poll_interval)):
            if not value > 0:  # (a NaN is not either)
                raise ValueError(f"{name} must be positive, not {value!r}")
        for name, count in (("max_per_client", max_per_client), ("max_tasks", max_tasks)):
            if not count >= 1:
                raise ValueError(f"{name} must be positive, not {count!r}")
        if input_timeout is not None and not input_timeout > 0:  # (0 would fail every request for input at once)
            raise ValueError(f"input_timeout must be positive (or None: the ttl), not {input_timeout!r}")
        if store is not None and (isinstance(store, type) or not isinstance(store, TaskStore)):
            raise TypeError(
                f"store must be a task store (MemoryTaskStore(), SqliteTaskStore(path), ...), not {store!r}"
            )
        super().__init__(EXTENSION_ID, versions=STATELESS_VERSIONS, result_types=["task"])
        self.store: TaskStore
        #: The tasks this process runs, by id (a cancellation reaches them at once; one asked of another process
        #: sharing the store reaches them through the store, :meth:`_watch`), until their end is stored.
        self._runs: dict[str, _Run] = {}
        self._use_store(store if store is not None else MemoryTaskStore())
        self._chosen_store = store is not None
        self.ttl = ttl
        self.poll_interval = poll_interval
        self.max_per_client = max_per_client
        self.max_tasks = max_tasks
        #: The quota key of each connection without a principal or a session (made on its first task).
        self._connections: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self.input_timeout = input_timeout if input_timeout is not None else ttl
        self.server: Server | None = None
        #: The last version of each task told to this worker's listen streams (the most recent tasks).
        self._told = _Versions(_TOLD_KEPT)
        self.method("tasks/get", params=_TaskIdParams)(self._get)
        self.method("tasks/update", params=_UpdateParams)(self._update)
        self.method("tasks/cancel", params=_TaskIdParams)(self._cancel)
        self.wrap("tools/call")(self._call_tool)

    def use_backend(self, backend: Any) -> None:
        """Keep the tasks in ``backend``'s store, shared by every worker, unless a store was chosen."""
        if not self._chosen_store:
            self._use_store(backend.task_store())

    def _use_store(self, store: TaskStore) -> None:
        """Keep the tasks in ``store``; one that fails the tasks of a stopped worker by itself has that change
        told as any other (:meth:`_publish`)."""
        self.store = store
        if isinstance(store, TellsStopped):
            store.tell_stopped(self._publish, running=self._runs.__contains__)

    def attach(self, server: Any) -> None:
        self.server = server

    # --- tools/call ----------------------------------------------------------------------------------------

    def _call_tool(self, ctx: Context, params: Any, call_next: WrapNext) -> Any:
        entry = self.server.tool_definition(params.name) if self.server is not None else None
        support = entry.task if entry is not None else "forbidden"
        if support == "forbidden":
            return call_next(ctx, params)
        if not self.negotiated(ctx):
            if support == "required":
                raise self.missing()
            return call_next(ctx, params)
        if entry is not None and entry.task_start == "in_handler":
            ctx._starts_task = True
            return self._until_started(ctx, params, call_next, support)
        return self._start(ctx, params, call_next, None, support)

    async def _until_started(self, ctx: Context, params: Any, call_next: WrapNext, support: str) -> Any:
        """Run the tool in the request until it calls ``ctx.start_task()``; one that returns first answers its
        request itself (the immediate-result shortcut)."""
        try:
            out = call_next(ctx, params)
            return await out if inspect.isawaitable(out) else out
        except StartTask as start:
            return await self._start(ctx, params, call_next, start.message, support)

    async def _start(self, ctx: Context, params: Any, call_next: WrapNext, message: str | None, support: str) -> Any:
        """Answer with a new task; when none can be started (the quotas are full of working tasks), a
        ``"optional"`` tool runs in its request instead (from its start), a ``"required"`` one is refused."""
        record = await self.start(ctx, params, call_next, message)
        if record is not None:
            return ts.create_result(record)
        if support != "optional":
            raise _too_many_tasks()
        logger.debug("no task could be started for %s: it runs in its request", params.name)
        ctx._starts_task = False
        out = call_next(ctx, params)
        return await out if inspect.isawaitable(out) else out

    async def start(
        self,
        ctx: Context,
        params: Any,
        call_next: WrapNext,
        message: str | None = None,
        *,
        ttl: float | None = None,
        context: type[TaskContext] | None = None,
    ) -> ts.TaskRecord | None:
        """Make the task of this request, kept ``ttl`` seconds after it finished (at most the extension's own), and
        start its work with a ``context`` (a :class:`TaskContext` by default): the record as it was created, or
        ``None`` when the quotas leave no room. The 2025-11-25 tasks of :mod:`.core_tasks` are made here too: one
        owner for a task's life."""
        record = ts.new_record(
            secrets.token_urlsafe(16),
            _owner_of(ctx),
            ctx.method,
            now=time.time(),
            ttl=self.ttl if ttl is None else min(ttl, self.ttl),
            poll_interval=self.poll_interval,
            status_message=message,
            client=self.client_of(ctx),
        )
        run = _Run(record.task_id)
        self._runs[run.task_id] = run  # (before the store holds it: a sweep never takes it for one run nowhere)
        created = False
        try:
            created = await self.store.create(record, max_per_client=self.max_per_client, max_total=self.max_tasks)
        finally:
            if not created:
                self._runs.pop(run.task_id, None)
        if not created:
            return None
        task_ctx = _task_context(ctx, self, run, context or TaskContext)
        try:
            await ctx.session.start_detached(self._run, run, call_next, task_ctx, params)
        except ConnectionClosed:
            self._runs.pop(run.task_id, None)  # (its end not stored: the store's sweep ends it, where it has one)
            error = _error(ctx.method, InternalError(_STOPPED))
            await self._end(run, "failed", error=error, message=_STOPPED, patient=False)
            raise
        return record

    def client_of(self, ctx: Context) -> str:
        """Whose quota a task counts against: the principal the transport authenticated; else the session; else
        the connection (a key of its own, made here for a connection that names none)."""
        auth = ctx.auth
        if auth is not None:
            return "principal:" + _owner_of(ctx)
        stream = ctx.session.dispatcher.stream
        named = _client_of_stream(stream, ctx)
        if named is not None:
            return named
        try:
            key = self._connections.get(stream)
            if key is None:
                key = self._connections[stream] = "connection:" + secrets.token_urlsafe(12)
        except TypeError:  # (a stream of one's own that cannot be weakly referenced)
            key = f"connection:{id(stream):x}"
        return key

    # --- the work ------------------------------------------------------------------------------------------

    async def _run(self, run: _Run, call_next: WrapNext, ctx: TaskContext, params: Any) -> None:
        """A task's work, in the server's own tasks: the tool, and a watch for its cancellation. Never raises but
        on cancellation (the server stopping), which leaves the task failed."""
        try:
            await self._work(run, call_next, ctx, params)
        finally:
            self._runs.pop(run.task_id, None)

    async def _work(self, run: _Run, call_next: WrapNext, ctx: TaskContext, params: Any) -> None:
        method = ctx.method
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch, run)

                def spawn(fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> bool:
                    tg.start_soon(fn, *args)
                    return True

                run.paced = Pacer(ctx.session.app.progress_interval, _pass_held_progress, spawn)
                try:
                    with run.scope:
                        out = call_next(ctx, params)
                        if inspect.isawaitable(out):
                            out = await out
                        result = msgspec.json.decode(encode_stateless_result(out))
                    if not (run.scope.cancelled_caught or run.cancel_requested):
                        await run.paced.finish(run.task_id)  # (the latest report held, before the end)
                    if run.scope.cancelled_caught or run.cancel_requested:
                        # (interrupted, or it ran to its end after the client asked: its answer is dropped, as
                        # a cancelled request's is)
                        await self._end(run, "cancelled", message="The task was cancelled")
                    else:
                        await self._end(run, "completed", result=result)
                except InputRequired:
                    logger.error("task %s raised InputRequired itself; a task asks through its Context", run.task_id)
                    await self._end(run, "failed", error=_error(method, InternalError()))
                except Exception as exc:  # (an RpcError is the task's error; anything else is logged, -32603)
                    await run.paced.finish(run.task_id)
                    error = _error(method, exc)
                    await self._end(run, "failed", error=error, message=error["message"])
                finally:
                    run.paced.drop(run.task_id)
                    tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # (the server stops: one more try, its own end if it had one; else the store's restart or a lease
            # ends it)
            ending = run.ending or _Ending("failed", error=_error(method, InternalError(_STOPPED)), message=_STOPPED)
            with anyio.CancelScope(shield=True):
                await self._end(
                    run, ending.status, result=ending.result, error=ending.error, message=ending.message, patient=False
                )
            raise

    async def _watch(self, run: _Run) -> None:
        """Stop the work when the client asks for it (``tasks/cancel``, whichever process it reached)."""
        version = -1
        delay = _RETRY_FIRST
        while True:
            try:
                record = await self.store.wait(run.task_id, version, _RECHECK)
            except Exception as exc:  # (the store is away: read again, a little later each time)
                logger.debug("task %s: the store could not be read (%s)", run.task_id, type(exc).__name__)
                await anyio.sleep(delay)
                delay = min(delay * 2, _RETRY_MOST)
                continue
            delay = _RETRY_FIRST
            if record is None or record.status in ts.TERMINAL or record.cancel_requested:
                if record is not None and record.cancel_requested:
                    _stop_now(run)
                run.stop()
                return
            version = record.version

    async def _end(
        self,
        run: _Run,
        status: Any,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        message: str | None = None,
        patient: bool = True,
    ) -> None:
        """The task's end, stored (a task that had ended already keeps its end) and told to listeners. A store
        that fails is tried again, after :data:`_RETRY_FIRST` seconds and twice as long each time up to
        :data:`_RETRY_MOST`, until the end is stored (``patient``; else once: the server is stopping, and the
        store's own rule for the tasks of a stopped server ends it)."""
        run.ending = _Ending(status, result, error, message)
        now = time.time()
        ended: list[ts.TaskRecord] = []

        def change(record: ts.TaskRecord) -> ts.TaskRecord | None:
            done = ts.finish(record, status, now, result=result, error=error, message=message)
            if done is not None:
                ended.append(done)
            return done

        delay, failures = _RETRY_FIRST, 0
        while True:
            try:
                await self.store.modify(run.task_id, change)
                break
            except Exception as exc:
                if not patient:
                    logger.error("task %s: its end (%s) could not be stored (%s)", run.task_id, status, _kind(exc))
                    return
                if not failures:
                    logger.warning(
                        "task %s: its end (%s) could not be stored (%s); trying again until it is",
                        run.task_id,
                        status,
                        _kind(exc),
                    )
                failures += 1
            await anyio.sleep(delay)
            delay = min(delay * 2, _RETRY_MOST)
        run.ending = None
        if failures:
            logger.warning("task %s: its end (%s) is stored (after %d failed tries)", run.task_id, status, failures)
        if ended:
            try:
                await self._publish(ended[-1])
            except Exception as exc:  # (stored: a tasks/get finds it; the listeners missed this one change)
                logger.warning("task %s: its end could not be told to listeners (%s)", run.task_id, _kind(exc))

    async def report(
        self, run: _Run, *, message: str | None, progress: float | None = None, total: float | None = None
    ) -> None:
        """Progress of the task, stored; a store that fails costs this report only (logged once per task), never
        the task."""
        now = time.time()
        try:
            await self.store.modify(
                run.task_id, lambda r: ts.report(r, now, message=message, progress=progress, total=total)
            )
        except Exception as exc:
            if not run.progress_lost:
                run.progress_lost = True
                logger.warning("task %s: its progress could not be stored (%s); it goes on", run.task_id, _kind(exc))

    async def ask(self, run: _Run, requests: dict[str, dict[str, Any]], timeout: float | None) -> dict[str, Any]:
        """Put the task in ``input_required`` with these requests and wait until every one is answered (through
        ``tasks/update``); the answers by the keys asked. A key the task used before gets a suffix: a key is
        never reused in a task's life, as the extension requires."""
        renamed: dict[str, str] = {}
        for key in requests:
            unique, n = key, 1
            while unique in run.keys:
                n += 1
                unique = f"{key}#{n}"
            run.keys.add(unique)
            renamed[key] = unique
        asked = {renamed[key]: request for key, request in requests.items()}
        now = time.time()
        record = await self.store.modify(run.task_id, lambda r: ts.ask(r, asked, now))
        if record is None or record.status != "input_required":
            await _stop(run)  # (gone, or finished: the work is over)
            raise AssertionError("unreachable")  # pragma: no cover - _stop raises the cancellation
        await self._publish(record)
        wanted = set(asked)
        limit = self.input_timeout if timeout is None else timeout
        try:
            with anyio.fail_after(limit):
                while not wanted <= record.answers.keys():
                    seen = record.version
                    waited = await self.store.wait(run.task_id, seen, _RECHECK)
                    if waited is None or waited.status in ts.TERMINAL:
                        await _stop(run)
                    assert waited is not None
                    record = waited
        except TimeoutError:
            raise RequestTimeout(f"the client did not answer the task's input request within {limit:g} s") from None
        answers = {key: record.answers[unique] for key, unique in renamed.items()}
        later = time.time()
        await self.store.modify(run.task_id, lambda r: ts.take_answers(r, wanted, later))
        return answers

    async def waiting(self, run: _Run, method: str, params: dict[str, Any] | None) -> str:
        """A 2025-11-25 task's request for input, sent as the session's own request: the task is
        ``input_required`` until :meth:`answered` (the key it waits under) says the client answered."""
        unique, n = f"session-{method}", 1
        while unique in run.keys:
            n += 1
            unique = f"session-{method}#{n}"
        run.keys.add(unique)
        now = time.time()
        await self.store.modify(run.task_id, lambda r: ts.ask(r, {unique: _input_request(method, params)}, now))
        return unique

    async def answered(self, run: _Run, key: str) -> None:
        """The client answered (or will not answer) the request :meth:`waiting` named: ``working`` again once
        nothing else is waited for."""
        now = time.time()
        await self.store.modify(run.task_id, lambda r: ts.deliver(r, {key: None}, now))
        await self.store.modify(run.task_id, lambda r: ts.take_answers(r, {key}, now))

    async def _publish(self, record: ts.TaskRecord) -> None:
        """``notifications/tasks`` on every listen stream that asked for this task: on every worker, with a
        backend (:meth:`deliver` tells each worker's streams)."""
        if self.server is None:
            return
        await self.server.publish_to_extension(self.id, {"version": record.version, "task": ts.detailed(record)})

    async def deliver(self, data: Any) -> None:
        """A task's change of status, published by the worker that changed it: ``notifications/tasks`` on this
        worker's listen streams that asked for the task (each acknowledged only the tasks of its own client). A
        change older than one already told here is dropped, so that a stream never sees its task go back."""
        try:
            change = msgspec.convert(data, _StatusChange)
        except msgspec.ValidationError:
            logger.warning("ignored a task change that is not one")
            return
        task_id = change.task.get("taskId")
        if self.server is None or not isinstance(task_id, str) or not self._told.newer(task_id, change.version):
            return
        await self.server.notify_listeners(
            "notifications/tasks", change.task, lambda honoured: task_id in (honoured.get("taskIds") or ())
        )

    # --- tasks/get, tasks/update, tasks/cancel -------------------------------------------------------------

    def owner_of(self, ctx: Context) -> str:
        """Whom a task made by this request belongs to (see the module docstring)."""
        return _owner_of(ctx)

    async def find(self, ctx: Context, task_id: str) -> ts.TaskRecord:
        """The task ``task_id`` of this request's client; -32602 when it is unknown, expired, or another's."""
        record = await self.store.get(task_id)
        if record is None or record.owner != _owner_of(ctx):
            raise InvalidParams("Failed to retrieve task: Task not found (unknown, or expired)")
        return record

    async def _get(self, ctx: Context, params: _TaskIdParams) -> dict[str, Any]:
        return ts.detailed(await self.find(ctx, params.task_id))

    async def _update(self, ctx: Context, params: _UpdateParams) -> dict[str, Any]:
        record = await self.find(ctx, params.task_id)
        now = time.time()
        changed = await self.store.modify(record.task_id, lambda r: ts.deliver(r, params.input_responses, now))
        if changed is not None and changed.status != record.status:
            await self._publish(changed)
        return {}

    async def _cancel(self, ctx: Context, params: _TaskIdParams) -> dict[str, Any]:
        record = await self.find(ctx, params.task_id)
        now = time.time()
        asked = await self.store.modify(record.task_id, lambda r: ts.request_cancel(r, now))
        run = self._runs.get(record.task_id)
        if run is not None and asked is not None and asked.cancel_requested:
            _stop_now(run)  # (here at once: the work reads ctx.cancelled as true from this answer on)
        return {}

    async def cancel_now(self, task_id: str, message: str = "The task was cancelled") -> ts.TaskRecord | None:
        """Cancel the task at once (2025-11-25: it is ``cancelled`` before ``tasks/cancel`` is answered): asked to
        stop, wherever it runs, and ended ``cancelled`` here. The record as it then is; ``None`` when it was gone
        or had ended already."""
        now = time.time()
        ended: list[ts.TaskRecord] = []

        def change(record: ts.TaskRecord) -> ts.TaskRecord | None:
            asked = ts.request_cancel(record, now) or record
            done = ts.finish(asked, "cancelled", now, message=message)
            if done is not None:
                ended.append(done)
            return done

        await self.store.modify(task_id, change)
        run = self._runs.get(task_id)
        if run is not None:
            _stop_now(run)
        if not ended:
            return None
        await self._publish(ended[-1])
        return ended[-1]

    # --- subscriptions/listen ------------------------------------------------------------------------------

    async def listen(self, ctx: Context, wanted: Mapping[str, Any]) -> Mapping[str, Any]:
        """``taskIds`` of a listen filter: the client's own tasks among them get ``notifications/tasks``."""
        ids = wanted.get("taskIds")
        if ids is None:
            return {}
        if not isinstance(ids, list):
            raise InvalidParams('Invalid params: "taskIds" must be an array of task ids')
        if not self.negotiated(ctx):
            raise self.missing()
        owner = _owner_of(ctx)
        honoured: list[str] = []
        for task_id in ids:
            if isinstance(task_id, str):
                record = await self.store.get(task_id)
                if record is not None and record.owner == owner:
                    honoured.append(task_id)
        return {"taskIds": honoured}


def _stop_now(run: _Run) -> None:
    """The client asked to cancel the task: its work is interrupted at its next ``await`` (a ``def`` tool on a
    worker thread reads ``ctx.cancelled``)."""
    run.cancel_requested = True
    run.stop()


async def _stop(run: _Run) -> None:
    """The task is over (gone, finished, or cancelled): its work stops here."""
    run.stop()
    await anyio.lowlevel.checkpoint()


def _client_of_stream(stream: Any, ctx: Context) -> str | None:
    """The session or connection a request came on, as its transport names it (``None``: the stream itself)."""
    sid = getattr(stream, "session_id", None)
    if isinstance(sid, str) and sid:
        return "session:" + sid
    peer = ctx.intake.connection()
    return "peer:" + peer if peer else None


def _owner_of(ctx: Context) -> str:
    """Whom a task belongs to: the principal the transport authenticated for this request ("" for nobody)."""
    auth = ctx.auth
    if auth is None:
        return ""
    return json.dumps(auth.principal, separators=(",", ":"))


def _task_context(ctx: Context, tasks: Tasks, run: _Run, kind: type[TaskContext]) -> TaskContext:
    """The context the tool gets in its task: the request's, with the answers of its input rounds."""
    ctx.auth  # noqa: B018 - (read now, from the request's intake: the task outlives the request)
    fields = {name: getattr(ctx, name) for name in Context.__struct_fields__}
    fields.update(_auto_keys=0, _progress_last=None, _starts_task=False, single_use_state=False)
    return kind(**fields, tasks=tasks, run=run)


def _kind(exc: BaseException) -> str:
    """What a log line says of a failure: its kind, never its text (which may hold an address or a secret)."""
    return type(exc).__name__


def _error(method: str, exc: Exception) -> dict[str, Any]:
    """A JSON-RPC error object, by the rule the request's own answer would have followed."""
    code, message, data = failure_error(method, exc)
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error
