"""The async tool runner: overlap, order, approval, timeouts, error outputs, closing."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from voxline.realtime.errors import ToolError
from voxline.base.clock import RealClock
from voxline.realtime import events as ev
from voxline.session.tools import (
    CallState,
    CallTracker,
    ToolCall,
    ToolEvent,
    ToolFinished,
    ToolRegistry,
    ToolRunner,
    ToolStarted,
)


class Ticks(RealClock):
    """Real sleeps, but a reading that advances one second each time (durations are whole seconds)."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        self.t += 1.0
        return self.t

    async def sleep(self, dt: float) -> None:
        await asyncio.sleep(dt)


class Harness:
    """A registry, a tracker and a runner, recording events and handed-out commands."""

    def __init__(self, registry: ToolRegistry, approve: Any = None) -> None:
        self.registry = registry
        self.tracker = CallTracker()
        self.events: list[ToolEvent] = []
        self.runner = ToolRunner(registry, self.tracker, approve, on_event=self.events.append, clock=Ticks())
        self._n = 0

    def call(self, name: str, arguments: Any = None, *, rid: str = "r1", call_id: str | None = None) -> list[ToolCall]:
        self._n += 1
        cid = call_id or f"call_{self._n}"
        text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        calls = self.tracker.on_arguments_done(rid, f"item_{cid}", cid, name, text)
        self.runner.submit(calls)
        return calls

    def outputs(self) -> dict[str, str]:
        return {
            c.item.call_id: c.item.output
            for c in self.tracker.commands()
            if isinstance(c, ev.ConversationItemCreate)
        }

    def finished(self) -> dict[str, ToolFinished]:
        return {e.call_id: e for e in self.events if isinstance(e, ToolFinished)}


@pytest.fixture
async def registry() -> ToolRegistry:
    return ToolRegistry()


@pytest.fixture
async def harness(registry: ToolRegistry) -> AsyncIterator[Harness]:
    h = Harness(registry)
    async with asyncio.timeout(10):
        async with h.runner:
            yield h


async def test_result_output_and_events(harness: Harness, registry: ToolRegistry) -> None:
    @registry.tool(read_only=True)
    async def get_weather(city: str, days: int = 1) -> dict[str, Any]:
        return {"city": city, "days": days}

    [call] = harness.call("get_weather", {"city": "Oslo"})
    await harness.runner.join()
    harness.tracker.on_response_done("r1", "completed")
    assert [ev.client_event_dict(c) for c in harness.tracker.commands()] == [
        {
            "type": "conversation.item.create",
            "item": {"type": "function_call_output", "call_id": call.call_id, "output": '{"city":"Oslo","days":1}'},
        },
        {"type": "response.create"},
    ]
    assert harness.events == [
        ToolStarted(call.call_id, "get_weather", {"city": "Oslo"}),
        ToolFinished(call.call_id, "get_weather", '{"city":"Oslo","days":1}', True, 1.0),
    ]


async def test_string_results_are_not_encoded_again(harness: Harness, registry: ToolRegistry) -> None:
    @registry.tool
    def already_json() -> str:
        return '{"a":1}'

    [call] = harness.call("already_json")
    await harness.runner.join()
    assert harness.outputs() == {call.call_id: '{"a":1}'}


async def test_read_only_tools_overlap(harness: Harness, registry: ToolRegistry) -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()

    @registry.tool(read_only=True, timeout=5)
    async def a() -> str:
        a_started.set()
        await b_started.wait()
        return "a"

    @registry.tool(read_only=True, timeout=5)
    async def b() -> str:
        b_started.set()
        await a_started.wait()
        return "b"

    [ca] = harness.call("a")
    [cb] = harness.call("b")
    await harness.runner.join()
    assert harness.outputs() == {ca.call_id: "a", cb.call_id: "b"}


async def test_side_effects_run_one_at_a_time_in_call_order(harness: Harness, registry: ToolRegistry) -> None:
    log: list[str] = []
    gate = asyncio.Event()

    @registry.tool
    async def write(tag: str, wait: bool = False) -> str:
        log.append(f"start {tag}")
        if wait:
            await gate.wait()
        for _ in range(3):
            await asyncio.sleep(0)
        log.append(f"end {tag}")
        return tag

    harness.call("write", {"tag": "1", "wait": True})
    harness.call("write", {"tag": "2"})
    harness.call("write", {"tag": "3"}, rid="r2")  # order holds across responses too
    for _ in range(20):
        await asyncio.sleep(0)
    assert log == ["start 1"]  # 2 and 3 are held back while 1 is blocked
    gate.set()
    await harness.runner.join()
    assert log == ["start 1", "end 1", "start 2", "end 2", "start 3", "end 3"]


async def test_reads_and_writes_keep_call_order(harness: Harness, registry: ToolRegistry) -> None:
    log: list[str] = []
    gates = {name: asyncio.Event() for name in ("r1", "w", "r2")}

    @registry.tool(read_only=True)
    async def read(tag: str) -> str:
        log.append(f"start {tag}")
        await gates[tag].wait()
        log.append(f"end {tag}")
        return tag

    @registry.tool
    async def write() -> str:
        log.append("start w")
        await gates["w"].wait()
        log.append("end w")
        return "w"

    harness.call("read", {"tag": "r1"})
    harness.call("write")
    harness.call("read", {"tag": "r2"})
    for _ in range(10):
        await asyncio.sleep(0)
    assert log == ["start r1"]  # the write waits for the earlier read, the later read for the write
    gates["r1"].set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert log == ["start r1", "end r1", "start w"]
    gates["w"].set()
    gates["r2"].set()
    await harness.runner.join()
    assert log[3:] == ["end w", "start r2", "end r2"]


async def test_timeout_becomes_an_error_output(harness: Harness, registry: ToolRegistry) -> None:
    never = asyncio.Event()

    @registry.tool(timeout=0.05)
    async def slow() -> str:
        await never.wait()
        return "unreachable"

    [call] = harness.call("slow")
    await harness.runner.join()
    assert harness.outputs() == {call.call_id: '{"error":"slow timed out after 0.05 s"}'}
    assert harness.finished()[call.call_id].ok is False


async def test_timeout_of_a_sync_tool_answers_at_once(harness: Harness, registry: ToolRegistry) -> None:
    release = threading.Event()

    @registry.tool(timeout=0.05)
    def blocking() -> str:
        release.wait(5)
        return "late"

    [call] = harness.call("blocking")
    try:
        await harness.runner.join()
        assert harness.outputs() == {call.call_id: '{"error":"blocking timed out after 0.05 s"}'}
    finally:
        release.set()


async def test_a_sync_tools_result_is_encoded_on_its_thread_inside_its_timeout(registry: ToolRegistry) -> None:
    """Encoding a result is the tool's work: one whose serialiser holds (a large table, a model that
    waits) is timed out as the tool would be, and the event loop, which every session shares, goes on."""
    import pydantic

    release = threading.Event()
    encoding = threading.Event()

    class Slow(pydantic.BaseModel):
        rows: int

        @pydantic.model_serializer
        def serialise(self) -> dict[str, int]:
            encoding.set()
            release.wait(10)  # a bound, should it be encoded on the loop: the loop is held meanwhile
            return {"rows": self.rows}

    class OnceEncoding(Ticks):
        """The timeout runs from when the encoding began: however late the thread starts, it is what is timed."""

        async def sleep(self, dt: float) -> None:
            await asyncio.to_thread(encoding.wait, 10)
            await asyncio.sleep(dt)

    @registry.tool(timeout=0.05)
    def table() -> Any:
        return Slow(rows=3)

    harness = Harness(registry)
    harness.runner = ToolRunner(registry, harness.tracker, None, on_event=harness.events.append, clock=OnceEncoding())
    try:
        async with asyncio.timeout(10):
            async with harness.runner:
                [call] = harness.call("table")
                await harness.runner.join()
        assert encoding.is_set()
        assert harness.outputs() == {call.call_id: '{"error":"table timed out after 0.05 s"}'}
    finally:
        release.set()


async def test_a_tool_raising_timeout_error_is_a_failure_not_a_timeout(harness: Harness, registry: ToolRegistry) -> None:
    @registry.tool
    async def upstream() -> str:
        raise TimeoutError("upstream did not answer")

    [call] = harness.call("upstream")
    await harness.runner.join()
    assert harness.outputs() == {call.call_id: '{"error":"upstream failed: TimeoutError: upstream did not answer"}'}


async def test_sync_tools_run_in_a_worker_thread(harness: Harness, registry: ToolRegistry) -> None:
    @registry.tool
    def where() -> int:
        return threading.get_ident()

    [call] = harness.call("where")
    await harness.runner.join()
    assert int(harness.outputs()[call.call_id]) != threading.get_ident()


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({}, "invalid arguments: field 'city' is required"),
        ({"city": 3}, "invalid arguments: field 'city': input should be a valid string"),
        ("{not json", "invalid arguments: not valid JSON (Expecting property name enclosed in double quotes at position 1)"),
    ],
)
async def test_bad_arguments_are_answered_without_running(
    harness: Harness, registry: ToolRegistry, arguments: Any, error: str
) -> None:
    ran: list[str] = []

    @registry.tool
    def lookup(city: str) -> str:
        ran.append(city)
        return city

    [call] = harness.call("lookup", arguments)
    await harness.runner.join()
    assert harness.outputs() == {call.call_id: json.dumps({"error": error}, separators=(",", ":"))}
    assert ran == []
    assert harness.events == [ToolFinished(call.call_id, "lookup", harness.finished()[call.call_id].output, False, 0.0)]


async def test_raising_tool_output_is_one_redacted_line(harness: Harness, registry: ToolRegistry) -> None:
    @registry.tool
    async def fetch_account(user: str) -> str:
        raise ValueError(f"bad key sk-abcdef123456 for {user}\nsecond line")

    [call] = harness.call("fetch_account", {"user": "ann"})
    await harness.runner.join()
    assert harness.outputs() == {
        call.call_id: '{"error":"fetch_account failed: ValueError: bad key [redacted] for ann second line"}'
    }


async def test_a_huge_failure_message_is_read_only_as_far_as_its_line_needs(
        harness: Harness, registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool that raised with a 20 MB message had all of it collapsed and redacted on the event loop (seconds of a
    stalled loop for 100 MB), to keep 500 characters. Now what is redacted is bounded; the line is the same."""
    from voxline.base import shown

    redacted: list[int] = []
    real_redact = shown.redact
    monkeypatch.setattr(shown, "redact", lambda text: redacted.append(len(text)) or real_redact(text))

    @registry.tool
    async def dump() -> str:
        raise ValueError("key sk-abcdef123456 in\n" + "row of the table\n" * 1_250_000)

    @registry.tool
    async def blob() -> str:
        raise ValueError("x" * 20_000_000)

    [call] = harness.call("dump")
    [one_word] = harness.call("blob")
    await harness.runner.join()
    outputs = harness.outputs()
    line = json.loads(outputs[call.call_id])["error"]
    assert line.startswith("dump failed: ValueError: key [redacted] in row of the table row of") and line.endswith("…")
    assert len(line) == 500 and "\n" not in line
    assert json.loads(outputs[one_word.call_id])["error"] == ("blob failed: ValueError: " + "x" * 500)[:499] + "…"
    assert redacted and max(redacted) < 5_000


@pytest.mark.parametrize("before", ["oops sk-" + "A" * 2240 + ",", "sk-" + "A" * 4000 + " " + "sk-" + "B" * 4000 + " "])
def test_a_secret_cut_where_reading_stops_is_never_shown_though_redaction_shortened_what_came_before(
        before: str) -> None:
    """Reading stops a few thousand characters in; a registered secret cut there was not recognised, and the keys
    redacted before it pulled its first characters into the 500 shown."""
    from voxline.base.redaction import forget_secret, register_secret
    from voxline.session.tools.outputs import one_line

    secret = "Zq9LmT4xVbN2pR7s"
    register_secret(secret)
    try:
        for shift in range(len(secret) + 1):
            line = one_line("x" * shift + before + secret + " tail " * 10)  # the cut falls across the secret
            assert secret[:4] not in line, (shift, line)
    finally:
        forget_secret(secret)


async def test_unknown_tool(harness: Harness) -> None:
    [call] = harness.call("nope", {"x": 1})
    await harness.runner.join()
    assert harness.outputs() == {call.call_id: '{"error":"unknown tool \'nope\'"}'}


async def test_double_arguments_done_runs_once(harness: Harness, registry: ToolRegistry) -> None:
    runs: list[int] = []

    @registry.tool
    def count() -> int:
        runs.append(1)
        return len(runs)

    first = harness.call("count", call_id="same")
    second = harness.call("count", call_id="same")
    harness.runner.submit(first)  # submitting the same call again is harmless too
    await harness.runner.join()
    harness.runner.submit(first)
    await harness.runner.join()
    assert (len(first), second, runs) == (1, [], [1])
    assert harness.outputs() == {"same": "1"}


class Approvals:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def __call__(self, call: ToolCall) -> bool:
        self.asked.append(call.name)
        return self.answer


class PlainApprovals(Approvals):
    """A plain function for an approver: its answer is taken as it is."""

    def __call__(self, call: ToolCall) -> bool:  # type: ignore[override]
        self.asked.append(call.name)
        return self.answer


@pytest.mark.parametrize("plain", [False, True], ids=["async", "plain"])
@pytest.mark.parametrize("granted", [True, False])
async def test_approval(registry: ToolRegistry, granted: bool, plain: bool) -> None:
    ran: list[str] = []

    @registry.tool(needs_approval=True)
    def unlock_door(door: str) -> str:
        ran.append(door)
        return "unlocked"

    approvals = (PlainApprovals if plain else Approvals)(granted)
    h = Harness(registry, approvals)
    async with h.runner:
        [call] = h.call("unlock_door", {"door": "front"})
        await h.runner.join()
    assert approvals.asked == ["unlock_door"]
    if granted:
        assert (ran, h.outputs()) == (["front"], {call.call_id: "unlocked"})
    else:
        assert ran == []
        assert h.outputs() == {call.call_id: '{"error":"the user declined to run unlock_door"}'}


async def test_approval_without_a_callback_is_refused(harness: Harness, registry: ToolRegistry) -> None:
    @registry.tool(needs_approval=True)
    def arm() -> str:
        return "armed"

    [call] = harness.call("arm")
    await harness.runner.join()
    assert json.loads(harness.outputs()[call.call_id]) == {
        "error": "arm needs the user's approval and no approval callback is configured"
    }


async def test_failing_approval_callback_answers_the_call(registry: ToolRegistry) -> None:
    @registry.tool(needs_approval=True)
    def arm() -> str:
        return "armed"

    async def broken(call: ToolCall) -> bool:
        raise RuntimeError("dialog closed")

    h = Harness(registry, broken)
    async with h.runner:
        [call] = h.call("arm")
        await h.runner.join()
    assert json.loads(h.outputs()[call.call_id]) == {"error": "asking approval for arm failed: RuntimeError: dialog closed"}


async def test_cancelled_response_drops_calls_that_wait_their_turn(harness: Harness, registry: ToolRegistry) -> None:
    gate = asyncio.Event()
    ran: list[str] = []

    @registry.tool
    async def step(tag: str) -> str:
        ran.append(tag)
        await gate.wait()
        return tag

    [first] = harness.call("step", {"tag": "first"})
    [second] = harness.call("step", {"tag": "second"})
    for _ in range(5):
        await asyncio.sleep(0)
    dropped = harness.tracker.on_response_done("r1", "cancelled")
    assert dropped == [second]
    gate.set()
    await harness.runner.join()
    assert ran == ["first"]
    commands = harness.tracker.commands()
    assert [c.item.call_id for c in commands] == [second.call_id, first.call_id]
    assert all(isinstance(c, ev.ConversationItemCreate) for c in commands)  # no response.create


async def test_dropped_call_is_never_put_to_the_user(registry: ToolRegistry) -> None:
    gate = asyncio.Event()

    @registry.tool
    async def first() -> str:
        await gate.wait()
        return "first"

    @registry.tool(needs_approval=True)
    def second() -> str:
        return "second"

    approvals = Approvals(True)
    h = Harness(registry, approvals)
    async with h.runner:
        h.call("first")
        [call] = h.call("second")
        for _ in range(5):
            await asyncio.sleep(0)
        h.tracker.on_response_done("r1", "cancelled")
        gate.set()
        await h.runner.join()
    assert approvals.asked == []
    assert h.tracker.state(call.call_id) is CallState.DROPPED
    assert [e.name for e in h.events] == ["first", "first"]


@pytest.mark.parametrize("timeout", [None, 60.0])
async def test_aclose_cancels_running_tools(registry: ToolRegistry, timeout: float | None) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    @registry.tool(timeout=timeout)
    async def forever() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "unreachable"

    h = Harness(registry)
    async with asyncio.timeout(5):
        async with h.runner:
            [call] = h.call("forever")
            await started.wait()
            assert h.runner.busy
        assert cancelled.is_set() and not h.runner.busy
    assert h.tracker.state(call.call_id) is CallState.RUNNING
    assert h.outputs() == {}
    with pytest.raises(ToolError, match="not open"):
        h.runner.submit([call])
    await h.runner.aclose()  # idempotent


async def test_submit_before_open_and_unknown_calls(registry: ToolRegistry) -> None:
    h = Harness(registry)
    stranger = ToolCall("x", "t", "{}", "r", "i")
    with pytest.raises(ToolError, match="not open"):
        h.runner.submit([stranger])
    async with h.runner:
        with pytest.raises(ToolError, match="call 'x' is unknown to the call tracker"):
            h.runner.submit([stranger])


async def test_restored_tracker_runs_only_what_never_started(registry: ToolRegistry) -> None:
    runs: list[str] = []

    @registry.tool
    def act(tag: str) -> str:
        runs.append(tag)
        return tag

    tracker = CallTracker()
    tracker.on_arguments_done("r", "i1", "c1", "act", '{"tag":"one"}')
    tracker.on_arguments_done("r", "i2", "c2", "act", '{"tag":"two"}')
    tracker.begin("c1")
    tracker.on_result("c1", "one")
    restored = CallTracker.from_state(tracker.export_state())
    restored.on_response_done("r", "completed")
    runner = ToolRunner(registry, restored)
    async with runner:
        runner.submit(restored.runnable())
        await runner.join()
    assert runs == ["two"]
    commands = restored.commands()
    assert [getattr(getattr(c, "item", None), "call_id", None) for c in commands] == ["c1", "c2", None]
    assert commands[-1] == ev.ResponseCreate()


async def test_an_approval_callback_that_answers_neither_true_nor_false_says_so(registry: ToolRegistry) -> None:
    ran: list[str] = []

    @registry.tool(needs_approval=True)
    def unlock_door(door: str) -> str:
        ran.append(door)
        return "unlocked"

    def approve(call: ToolCall) -> str:
        return "yes"

    h = Harness(registry, approve)
    async with h.runner:
        [call] = h.call("unlock_door", {"door": "front"})
        await h.runner.join()
    assert ran == [] and h.outputs() == {call.call_id: '{"error":"asking approval for unlock_door failed: the callback '
                                                       'returned str, not True or False"}'}

