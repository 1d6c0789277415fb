"""The async tool executor: ordering, approval, timeouts and outputs (docs/protocol.md §9).

:class:`ToolRunner` runs the calls a :class:`~voxline.session.tools.calls.CallTracker` made
runnable and reports each result back to it; the session then sends
``tracker.commands()``. Every failure becomes the call's output, a one-line JSON error
for the model: unknown tool, invalid arguments, a declined approval, an exception, a
timeout, an output too large to send. Nothing escapes into the session.

Containment: whatever a tool, its argument validators or the approval callback raise is
the call's error output, once, and the turn goes on: ``SystemExit`` (argparse or click in a
tool), ``GeneratorExit``, a ``CancelledError`` the tool raised itself, any other
``BaseException``, a ``StopIteration`` or ``KeyboardInterrupt`` a sync tool raised on its worker
thread (Ctrl-C only ever reaches the main thread), and an exception whose ``str()`` fails or
raises anything at all (described by its type). Only a ``KeyboardInterrupt`` on the event loop
and the runner's own cancellation (it is closing) go through.

Order: calls start in the order they were submitted, as readers and writers. A
read-only tool may overlap other read-only tools; a tool with side effects waits for
every earlier call and holds back every later one, so side effects happen one at a time
in call order and a read never overlaps a write. A tool with ``needs_approval`` asks the
approval callback when its turn comes (one prompt at a time) and runs only on ``True``; an
answer that has not come within :data:`APPROVAL_WAIT_S` of the session's clock (a kiosk's
visitor walked away) refuses the call, so that it is not owed for good nor the prompts queued
behind it held.

Concurrency is structured: the runner owns one :class:`asyncio.TaskGroup`, opened by
``async with`` and closed (running calls cancelled) by :meth:`ToolRunner.aclose` in the
task that opened it; calls cut short by closing stay unanswered (``running`` in the
tracker). A synchronous tool runs in a worker thread; a thread cannot be interrupted, so
on a timeout its call is answered at once while the thread finishes on its own.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from types import TracebackType
from typing import Any, assert_never

from voxline.base.clock import Clock, RealClock, wait_within
from voxline.base.loop_runner import hold
from voxline.base.contain import contain, outcome, run_apart
from voxline.realtime.errors import ToolError

from .calls import CallState, CallTracker, ToolCall
from .outputs import describe_exception, error_output
from .events import ToolEvent, ToolFinished, ToolStarted
from ..lockstep import waiting_for_tool
from .registry import TIMED_OUT, Failed, Tool, ToolRegistry, Unencodable
from .threads import ToolThreads

__all__ = ["APPROVAL_WAIT_S", "Approver", "ToolEvent", "ToolFinished", "ToolRunner", "ToolStarted"]

APPROVAL_WAIT_S = 300.0
"""How long an approval callback's answer is waited for, on the session's clock (see the module docstring)."""
_UNANSWERED = object()  # what an approval that did not answer in time stands for


Approver = Callable[[ToolCall], Awaitable[bool] | bool]
"""Asked before a tool with ``needs_approval`` runs: ``True`` runs it; async or a plain function."""


def _let_go(work: asyncio.Task[Any], why: str | None = None) -> None:
    """Cancel a tool call nobody will wait for, and hold it until it ends."""
    work.cancel(why)
    hold(work)


def _failure(tool: Tool, exc: BaseException) -> str:
    return error_output(f"{tool.name} failed: {describe_exception(exc)}")


async def _guarded(tool: Tool, kwargs: Mapping[str, Any], threads: ToolThreads) -> str | Unencodable | Failed | BaseException:
    """Run the tool in its own task and hand back its output, or what it raised.

    Nothing the tool raises leaves this task: a task that ends in ``SystemExit`` stops the
    event loop, and one that ends in a ``CancelledError`` of the tool's own is indistinguishable
    from one the runner cancelled.
    """
    try:
        return await tool.output(kwargs, threads)
    except BaseException as exc:  # the tool boundary
        contain(exc)
        return exc


class ToolRunner:
    """Runs tool calls for one session; use as ``async with ToolRunner(...) as runner``."""

    def __init__(
        self,
        registry: ToolRegistry,
        tracker: CallTracker,
        approve: Approver | None = None,
        *,
        on_event: Callable[[ToolEvent], None] | None = None,
        clock: Clock | None = None,
        offered: Callable[[], Collection[str] | None] | None = None,
    ) -> None:
        self._registry = registry
        self._offered = offered  # the names the session offers the model now (None: every registered tool)
        self._tracker = tracker
        self._approve = approve
        self._on_event = on_event
        self._clock = clock
        self._group: asyncio.TaskGroup | None = None
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._submitted: set[str] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._approval_lock = asyncio.Lock()
        self._last_writer: asyncio.Event | None = None
        self._readers: list[asyncio.Event] = []

    @property
    def tracker(self) -> CallTracker:
        return self._tracker

    @property
    def busy(self) -> bool:
        """Whether any submitted call has not finished."""
        return bool(self._tasks)

    async def __aenter__(self) -> ToolRunner:
        if self._group is not None or self._closed:
            raise ToolError("a tool runner can be opened only once")
        if self._clock is None:
            self._clock = RealClock()
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._close(exc_type, exc, tb)

    async def aclose(self) -> None:
        """Cancel every call still waiting or running and close the task group."""
        await self._close(None, None, None)

    async def _close(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        group, self._group = self._group, None
        self._closed = True
        if group is None:
            return
        for task in tuple(self._tasks):
            task.cancel()
        await group.__aexit__(exc_type, exc, tb)

    async def join(self) -> None:
        """Wait until every submitted call has finished (or been skipped)."""
        await self._idle.wait()

    def submit(self, calls: Iterable[ToolCall]) -> None:
        """Schedule runnable calls, in call order; calls already submitted or settled are skipped."""
        group = self._group
        if group is None:
            raise ToolError("the tool runner is not open")
        for call in calls:
            state = self._tracker.state(call.call_id)
            if state is None:
                raise ToolError(f"call {call.call_id!r} is unknown to the call tracker")
            if state is not CallState.PENDING or call.call_id in self._submitted:
                continue
            self._submitted.add(call.call_id)
            done = asyncio.Event()
            deps = self._order(self._registry.get(call.name), done)
            task = group.create_task(self._run(call, deps, done), name=f"tool call {call.call_id}")
            self._tasks.add(task)
            self._idle.clear()
            task.add_done_callback(self._forget)

    def _order(self, tool: Tool | None, done: asyncio.Event) -> tuple[asyncio.Event, ...]:
        """What this call waits for: the last writer, and for a writer also the readers since."""
        if tool is None:
            return ()
        before = () if self._last_writer is None else (self._last_writer,)
        if tool.read_only:
            self._readers = [e for e in self._readers if not e.is_set()] + [done]
            return before
        deps = before + tuple(self._readers)
        self._last_writer, self._readers = done, []
        return deps

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not self._tasks:
            self._idle.set()

    async def _run(self, call: ToolCall, deps: tuple[asyncio.Event, ...], done: asyncio.Event) -> None:
        try:
            for dep in deps:
                await dep.wait()
            await self._process(call)
        finally:
            done.set()
            self._submitted.discard(call.call_id)

    async def _process(self, call: ToolCall) -> None:
        """Answer one call: validate, ask for approval, run with its timeout, report."""
        if self._tracker.state(call.call_id) is not CallState.PENDING:
            return  # dropped or abandoned while it waited for its turn
        tool = self._registry.get(call.name)
        if tool is None:
            self._answer(call, error_output(f"unknown tool {call.name!r}"))
            return
        names = self._offered() if self._offered is not None else None
        if names is not None and call.name not in names:  # registered, for another session (a shared registry)
            self._answer(call, error_output(f"tool {call.name!r} is not offered in this session"))
            return
        try:
            decoded, kwargs = tool.parse(call.arguments)
        except ToolError as exc:
            self._answer(call, error_output(exc.message))
            return
        except BaseException as exc:  # an argument validator of the application's raised
            contain(exc)
            self._answer(call, error_output(f"invalid arguments: {describe_exception(exc)}"))
            return
        refusal = await self._approval(tool, call)
        if refusal is not None:
            self._answer(call, error_output(refusal))
            return
        if not self._tracker.begin(call.call_id):
            return
        self._emit(ToolStarted(call_id=call.call_id, name=tool.name, arguments=decoded))
        clock = self._now()
        started = clock.now()
        output, ok = await self._invoke(tool, kwargs, clock)
        self._finish(call, output, ok, clock.now() - started)

    async def _approval(self, tool: Tool, call: ToolCall) -> str | None:
        """``None`` to go ahead, or why the call may not run."""
        if not tool.needs_approval:
            return None
        if self._approve is None:
            return f"{tool.name} needs the user's approval and no approval callback is configured"
        async with self._approval_lock:
            if self._tracker.state(call.call_id) is not CallState.PENDING:
                return None  # settled meanwhile: begin() will refuse it, no prompt needed
            try:
                answer = self._approve(call)
                if inspect.isawaitable(answer):  # async, or a plain function
                    answer = await _settled(answer, self._now(), APPROVAL_WAIT_S)
                granted = answer
            except BaseException as exc:  # the application's callback: its failure answers the call
                contain(exc)
                return f"asking approval for {tool.name} failed: {describe_exception(exc)}"
        if granted is _UNANSWERED:
            return f"no answer came within {APPROVAL_WAIT_S:g} s to whether {tool.name} may run"
        if granted is True:
            return None
        if granted is False:
            return f"the user declined to run {tool.name}"
        return (f"asking approval for {tool.name} failed: the callback returned {type(granted).__name__}, "
                "not True or False")

    async def _invoke(self, tool: Tool, kwargs: Mapping[str, Any], clock: Clock) -> tuple[str, bool]:
        """Run the tool under its timeout on the session's clock; what it raises becomes an error output."""
        work = asyncio.get_running_loop().create_task(_guarded(tool, kwargs, self._registry.threads),
                                                      name=f"tool {tool.name}")
        with waiting_for_tool(work):  # on a lockstep loop, the session's time follows real time while it does
            return await self._answer_of(tool, work, clock)

    async def _answer_of(self, tool: Tool, work: asyncio.Task[Any], clock: Clock) -> tuple[str, bool]:
        """The tool's output, once ``work`` ends or its timeout; what it raised becomes an error output."""
        if tool.timeout is not None:
            try:
                done = await wait_within(clock, tool.timeout, work)
            except BaseException:  # the runner is cancelled: the call goes with it, never left behind
                _let_go(work)
                raise
            if not done:
                _let_go(work, TIMED_OUT)
                return error_output(f"{tool.name} timed out after {tool.timeout:g} s"), False
        else:
            try:  # not `await work`: cancelled, that would wait for a tool that ignores the cancel, forever
                await asyncio.wait((work,))
            except BaseException:  # the runner is cancelled (closing): the tool is told, and left behind
                _let_go(work)
                raise
        if work.cancelled():  # the tool cancelled its own task (the runner's cancel is handled above)
            return error_output(f"{tool.name} failed: CancelledError: it cancelled its own task"), False
        result = work.result()
        match result:
            case str():
                return result, True
            case Unencodable(why=why) | Failed(why=why):
                return error_output(f"{tool.name} failed: {why}"), False
            case BaseException():  # the tool boundary: a tool's failure is its output, never ours
                return _failure(tool, result), False
            case _:
                assert_never(result)

    def _answer(self, call: ToolCall, output: str) -> None:
        """Answer a call that will not run (unknown tool, bad arguments, refused)."""
        if self._tracker.begin(call.call_id):
            self._finish(call, output, False, 0.0)

    def _finish(self, call: ToolCall, output: str, ok: bool, duration: float) -> None:
        queued = self._tracker.on_result(call.call_id, output)
        if queued is not None and queued != output:  # refused by the tracker: too large to send
            output, ok = queued, False
        self._emit(ToolFinished(call_id=call.call_id, name=call.name, output=output, ok=ok, duration_s=duration))

    def _emit(self, event: ToolEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)

    def _now(self) -> Clock:
        clock = self._clock
        if clock is None:
            raise ToolError("the tool runner is not open")
        return clock


async def _settled(awaitable: Any, clock: Clock, seconds: float) -> Any:
    """What ``awaitable`` gives or raises within ``seconds`` of ``clock``, awaited in a task of its own (as
    :func:`_guarded` runs a tool), else :data:`_UNANSWERED` (and it is told to stop); cancelled meanwhile (the
    runner closes), it is told and left behind, never waited for: an approval callback that ignores its cancel
    does not hold the session's close."""
    work = run_apart(awaitable)  # what it raises is raised again here, where it is contained
    try:
        with waiting_for_tool(work):  # on a lockstep loop, a person's answer comes in real time, as a tool's does
            done = await wait_within(clock, seconds, work)
    except BaseException:
        work.cancel()
        raise
    if not done:
        work.cancel()
        return _UNANSWERED
    return outcome(work.result())
