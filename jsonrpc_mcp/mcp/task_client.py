"""The tasks extension, ``io.modelcontextprotocol/tasks`` (SEP-2663), client side (L5).

Two ways to use it:

* **Transparently**: ``Client(..., extensions=[ClientTasks()])`` declares the extension on every request, and a
  tool the server runs as a task is followed to its end by :meth:`~ClientSession.call_tool` itself — polled at
  the interval the server suggests, its input requests answered with the client's own handlers (elicitation,
  sampling, roots), its progress given to the call's ``progress`` callback — which then returns the tool's result
  as if the server had answered with it. A call cancelled while it waits cancels the task (``tasks/cancel``), and
  so does one that waits longer than the client's ``max_total_timeout`` (it raises
  :class:`~jsonrpc_mcp.errors.RequestTimeout`).
* **With the task in hand**: :meth:`~ClientSession.start_tool_task` declares the extension for that call and
  returns a :class:`TaskHandle` at once (the server may also answer at once: the handle is then done already).
  Its id can be kept, and :meth:`~ClientSession.task` follows it again later, from another connection or process.

A task that failed raises the JSON-RPC error it failed with (:class:`~jsonrpc_mcp.errors.RpcError`), as the
request would have; one that was cancelled raises :class:`TaskCancelled`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Self

import anyio
import msgspec

from ..errors import ProtocolViolation, RequestTimeout, Unavailable, error_for_code
from .extensions import Extension, ExtensionResult
from .task_state import EXTENSION_ID, TERMINAL
from .versions import STATELESS_VERSIONS

if TYPE_CHECKING:
    from .client import ClientSession, ProgressCallback

__all__ = ("ClientTasks", "TaskHandle", "CoreTaskHandle", "TaskCancelled", "EXTENSION_ID")

logger = logging.getLogger(__name__)

#: How long a task that is abandoned (its waiter cancelled) may take to be told so (``tasks/cancel``).
_CANCEL_TIMEOUT: Final = 5.0
#: The poll interval when the server suggests none (seconds).
_DEFAULT_POLL: Final = 1.0
#: The longest wait between two ``tasks/get`` (seconds), whatever ``pollIntervalMs`` the server suggests.
MOST_POLL: Final = 3600.0
#: The longest a wait follows a server's ``retryAfter`` before it asks again (seconds).
_MOST_RETRY_AFTER: Final = 30.0


class TaskCancelled(Exception):
    """The task ended ``cancelled`` (asked by this client, or by the server): it has no result."""

    def __init__(self, task_id: str, message: str | None = None) -> None:
        super().__init__(f"task {task_id} was cancelled" + (f": {message}" if message else ""))
        self.task_id = task_id
        self.status_message = message


class ClientTasks(Extension):
    """The tasks extension for a :class:`~jsonrpc_mcp.Client`: declare it (``extensions=[ClientTasks()]``) and a
    call the server runs as a task is followed to its result (see the module docstring).

    :param cancel_abandoned: send ``tasks/cancel`` for a task whose call was cancelled (default ``True``).
    """

    def __init__(self, *, cancel_abandoned: bool = True) -> None:
        super().__init__(EXTENSION_ID, versions=STATELESS_VERSIONS, result_types=["task"])
        self.cancel_abandoned = cancel_abandoned
        self.on_result("task")(self._follow)

    async def _follow(self, answer: ExtensionResult) -> dict[str, Any]:
        handle = TaskHandle(answer.session, answer.result, method=answer.method)
        limit = answer.session.max_total_timeout
        try:
            return await handle.outcome(progress=answer.progress, timeout=limit)
        except TimeoutError:
            if self.cancel_abandoned:
                await handle.abandon()
            waited = f"{limit:g} s (the client's max_total_timeout)"
            raise RequestTimeout(f"{answer.method}: task {handle.task_id} did not end within {waited}") from None
        except BaseException:
            if self.cancel_abandoned and not handle.done:
                await handle.abandon()
            raise


class TaskHandle:
    """A request the server runs as a task: follow it, answer its input requests, cancel it, get its result.

    ``task_id`` is ``None`` when the server answered the request at once (the handle is then :attr:`done` and
    :meth:`wait` returns that answer). :attr:`last` is the task as last seen (a ``tasks/get`` answer).
    """

    def __init__(
        self,
        session: ClientSession,
        answer: Mapping[str, Any],
        *,
        method: str = "tools/call",
        result_type: Any = dict,
    ) -> None:
        self.session = session
        self.method = method
        self.result_type = result_type
        self._answered: set[str] = set()
        if answer.get("resultType") == "task":
            task_id = answer.get("taskId")
            if not isinstance(task_id, str) or not task_id:
                raise ProtocolViolation(f"{method}: the server answered with a task without a taskId")
            self.task_id: str | None = task_id
            self.last: dict[str, Any] = dict(answer)
        else:
            self.task_id = None
            self.last = {"status": "completed", "result": dict(answer)}

    def __repr__(self) -> str:
        return f"<TaskHandle {self.task_id!r} {self.status}>"

    @property
    def status(self) -> str:
        """``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``, as last seen."""
        return str(self.last.get("status"))

    @property
    def status_message(self) -> str | None:
        message = self.last.get("statusMessage")
        return message if isinstance(message, str) else None

    @property
    def done(self) -> bool:
        """Has the task ended (as last seen)?"""
        return self.status in TERMINAL

    @property
    def poll_interval(self) -> float:
        """Seconds between two ``tasks/get``, as the server suggests."""
        interval = self.last.get("pollIntervalMs")
        if not isinstance(interval, (int, float)) or not interval > 0:
            return _DEFAULT_POLL
        return min(interval / 1000, MOST_POLL)

    async def refresh(self) -> dict[str, Any]:
        """Ask the server how the task is (``tasks/get``) and return it."""
        if self.task_id is None:
            return self.last
        self.last = await self._request("tasks/get", {"taskId": self.task_id})
        return self.last

    async def cancel(self) -> None:
        """Ask the server to stop the task (``tasks/cancel``). It is cooperative: the task may still complete;
        :meth:`wait` tells how it ended."""
        if self.task_id is not None and not self.done:
            await self._request("tasks/cancel", {"taskId": self.task_id})

    async def wait(self, *, progress: ProgressCallback | None = None, timeout: float | None = None) -> Any:
        """Follow the task to its end and return its result, decoded as the request's own result
        (a :class:`~jsonrpc_mcp.types.CallToolResult` for a tool).

        Polls at the server's interval; answers the task's input requests with the client's handlers (each key
        once); gives ``progress(progress, total, message)`` each change of the task's progress or
        ``statusMessage``. A failed task raises its JSON-RPC error, a cancelled one :class:`TaskCancelled`;
        ``timeout`` (seconds, default none) raises ``TimeoutError`` and leaves the task as it is. A ``tasks/get``
        answered -31012 (:class:`~jsonrpc_mcp.errors.Unavailable`: the server's shared store is away) is asked
        again after its ``retryAfter``."""
        outcome = await self.outcome(progress=progress, timeout=timeout)
        try:
            return msgspec.convert(outcome, self.result_type)
        except msgspec.ValidationError as exc:
            name = getattr(self.result_type, "__name__", None) or repr(self.result_type)
            raise ProtocolViolation(
                f"{self.method}: task {self.task_id}'s result is not a valid {name}: {exc}"
            ) from None

    async def outcome(
        self, *, progress: ProgressCallback | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """:meth:`wait`, its result as the dict the server sent."""
        shown: tuple[Any, ...] | None = None
        with anyio.fail_after(timeout):
            while True:
                task = self.last
                status = task.get("status")
                if progress is not None and status not in TERMINAL:
                    now = _progress_of(task)
                    if now != shown and (shown is not None or any(x is not None for x in now)):
                        shown = now
                        out = progress(now[0] or 0.0, now[1], now[2])
                        if out is not None:
                            await out
                if status == "completed":
                    result = task.get("result")
                    return result if isinstance(result, dict) else {}
                if status == "failed":
                    raise _error_of(task)
                if status == "cancelled":
                    raise TaskCancelled(str(self.task_id), self.status_message)
                if status == "input_required":
                    await self._answer(task.get("inputRequests"))
                await anyio.sleep(self.poll_interval)
                try:
                    await self.refresh()
                except Unavailable as exc:  # (what the server shares is away for a moment: ask again)
                    logger.debug("task %s: the server is unavailable; asking again", self.task_id)
                    await anyio.sleep(min(max(exc.retry_after, 0), _MOST_RETRY_AFTER))

    async def abandon(self) -> None:
        """The waiter is gone (cancelled, or failed): tell the server, briefly and whatever happens here."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_TIMEOUT):
            try:
                await self.cancel()
            except Exception as exc:  # (the connection may be what failed)
                logger.debug("task %s could not be cancelled: %s", self.task_id, exc)

    async def _answer(self, requests: Any) -> None:
        """``tasks/update`` with the answers to the input requests not answered yet (a key is answered once)."""
        if not isinstance(requests, dict):
            return
        new = {key: item for key, item in requests.items() if key not in self._answered and isinstance(item, dict)}
        if not new:
            return
        answers = await self.session._answer_inputs(new)
        self._answered.update(new)
        await self._request("tasks/update", {"taskId": self.task_id, "inputResponses": answers})

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        tasks = self.session.extensions.get(EXTENSION_ID)
        declare = [tasks] if tasks is not None else [ClientTasks()]
        raw = await self.session._request_raw(method, params, declare=declare)
        answer = msgspec.json.decode(raw)
        return answer if isinstance(answer, dict) else {}


def _progress_of(task: Mapping[str, Any]) -> tuple[float | None, float | None, str | None]:
    """How far the task got: ``_meta.progress`` (this library's servers put it there) and its ``statusMessage``."""
    meta = task.get("_meta")
    reported = meta.get("progress") if isinstance(meta, dict) else None
    done = total = None
    if isinstance(reported, dict):
        value, limit = reported.get("progress"), reported.get("total")
        done = float(value) if isinstance(value, (int, float)) else None
        total = float(limit) if isinstance(limit, (int, float)) else None
    message = task.get("statusMessage")
    return done, total, message if isinstance(message, str) else None


def _error_of(task: Mapping[str, Any]) -> Exception:
    error = task.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        return ProtocolViolation(f"task {task.get('taskId')} failed without a JSON-RPC error")
    return error_for_code(error["code"], str(error.get("message", "")), error.get("data"))


class CoreTaskHandle:
    """A tool call a 2025-11-25 server runs as a task (that revision's core tasks): the same interface as
    :class:`TaskHandle`. Its result comes from ``tasks/result``, its input requests as the session's own requests
    (answered by the client's handlers as any other), its progress from the ``statusMessage`` of ``tasks/get``.

    ``task_id`` is ``None`` when the server answered the call at once (the handle is then :attr:`done`)."""

    def __init__(self, session: ClientSession, answer: Mapping[str, Any], *, result_type: Any = dict) -> None:
        self.session = session
        self.method = "tools/call"
        self.result_type = result_type
        task = answer.get("task")
        self._result: dict[str, Any] | None = None
        if isinstance(task, dict):
            task_id = task.get("taskId")
            if not isinstance(task_id, str) or not task_id:
                raise ProtocolViolation("tools/call: the server answered with a task without a taskId")
            self.task_id: str | None = task_id
            self.last: dict[str, Any] = dict(task)
            logger.debug("task %s of tools/call: %s", task_id, self.status)
        else:
            self.task_id = None
            self.last = {"status": "completed"}
            self._result = dict(answer)

    def __repr__(self) -> str:
        return f"<CoreTaskHandle {self.task_id!r} {self.status}>"

    @classmethod
    async def create(cls, session: ClientSession, params: dict[str, Any], *, result_type: Any = dict) -> Self:
        """Send ``tools/call`` asking for a task (``params["task"]``) and return the handle of its answer.

        A task-augmented request is cancelled with ``tasks/cancel``, never ``notifications/cancelled``
        (2025-11-25): a caller cancelled while it waits for the task still waits for it (shielded, a few seconds
        at most), cancels the task, and only then is cancelled. Only a server that has not answered by then has
        the request itself cancelled, since there is no task to name."""
        answers: list[bytes] = []
        failures: list[Exception] = []
        finished = anyio.Event()
        request = anyio.CancelScope(shield=True)

        async def send() -> None:
            with request:
                try:
                    answers.append(bytes(await session._request_raw("tools/call", params)))
                except Exception as exc:
                    failures.append(exc)
            finished.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(send)
            try:
                await finished.wait()
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    with anyio.move_on_after(_CANCEL_TIMEOUT):
                        await finished.wait()
                    request.cancel()
                    if answers:
                        await cls(session, msgspec.json.decode(answers[0]), result_type=result_type).abandon()
                raise
        if failures:
            raise failures[0]
        return cls(session, msgspec.json.decode(answers[0]), result_type=result_type)

    @property
    def status(self) -> str:
        """``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``, as last seen."""
        return str(self.last.get("status"))

    @property
    def status_message(self) -> str | None:
        message = self.last.get("statusMessage")
        return message if isinstance(message, str) else None

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @property
    def poll_interval(self) -> float:
        """Seconds between two ``tasks/get``, as the server suggests (``pollInterval``, milliseconds)."""
        interval = self.last.get("pollInterval")
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or not interval > 0:
            return _DEFAULT_POLL
        return min(interval / 1000, MOST_POLL)

    async def refresh(self) -> dict[str, Any]:
        """``tasks/get``: the task as it is now."""
        if self.task_id is not None:
            self._seen(await self._request("tasks/get", {"taskId": self.task_id}))
        return self.last

    async def cancel(self) -> None:
        """``tasks/cancel``: a 2025-11-25 server ends the task ``cancelled`` before it answers."""
        if self.task_id is not None and not self.done:
            self._seen(await self._request("tasks/cancel", {"taskId": self.task_id}))

    def _seen(self, task: dict[str, Any]) -> None:
        """The task as the server last told it; each change of its status is logged (DEBUG), by its id."""
        before = self.status
        self.last = task
        if self.status != before:
            logger.debug("task %s: %s -> %s", self.task_id, before, self.status)

    async def wait(self, *, progress: ProgressCallback | None = None, timeout: float | None = None) -> Any:
        """Follow the task to its end and return its result, decoded as a tool call's; see :meth:`TaskHandle.wait`."""
        outcome = await self.outcome(progress=progress, timeout=timeout)
        try:
            return msgspec.convert(outcome, self.result_type)
        except msgspec.ValidationError as exc:
            raise ProtocolViolation(f"tools/call: task {self.task_id}'s result is not valid: {exc}") from None

    async def outcome(
        self, *, progress: ProgressCallback | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """:meth:`wait`, its result as the dict the server sent. Polls ``tasks/get`` at the server's interval
        until the task ends or needs input (``input_required``: the server asks through the session, while
        ``tasks/result`` waits), then ``tasks/result``. A failed task raises its JSON-RPC error (a tool error is
        a result with ``isError``), a cancelled one :class:`TaskCancelled`."""
        if self._result is not None:
            return self._result
        shown: str | None = None
        task_id = str(self.task_id)
        changed = self.session._task_changed_event(task_id)
        try:
            with anyio.fail_after(timeout):
                while True:
                    status = self.last.get("status")
                    message = self.status_message
                    if progress is not None and message is not None and message != shown:
                        shown = message
                        out = progress(0.0, None, message)
                        if out is not None:
                            await out
                    if status == "cancelled":
                        raise TaskCancelled(task_id, self.status_message)
                    if status in TERMINAL or status == "input_required":
                        break
                    # The next tasks/get at the task's interval, or as soon as the server tells of a change of
                    # its status (notifications/tasks/status, optional: the poll is what the client counts on).
                    with anyio.move_on_after(self.poll_interval):
                        await changed.wait()
                    changed = self.session._task_changed_event(task_id)  # (before the read: none is missed)
                    await self.refresh()
                raw = await self.session._request_raw("tasks/result", {"taskId": self.task_id}, timeout=None)
        finally:
            self.session._forget_task_event(task_id, changed)
        result = msgspec.json.decode(raw)
        if not isinstance(result, dict):
            raise ProtocolViolation(f"tasks/result: task {self.task_id}'s result is not an object")
        self._result = result
        self._seen({**self.last, "status": "failed" if result.get("isError") is True else "completed"})
        return result

    async def abandon(self) -> None:
        """The waiter is gone: cancel the task, briefly and whatever happens here."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_TIMEOUT):
            try:
                await self.cancel()
            except Exception as exc:  # (the connection may be what failed)
                logger.debug("task %s could not be cancelled: %s", self.task_id, exc)

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = msgspec.json.decode(await self.session._request_raw(method, params))
        return answer if isinstance(answer, dict) else {}
