"""User code is contained: whatever a tool or the approval callback raises answers its call, once.

``SystemExit`` (argparse or click inside a tool), ``GeneratorExit``, a ``CancelledError`` the
tool raised itself, any ``BaseException``, an exception whose ``str()`` fails: each becomes a
one-line JSON error output and a ``ToolFinished`` with ``ok=False``, and the response's
follow-up is still owed. An output bigger than one client event is refused before it is sent.
A wire observer that raises costs no frame. At the end, a real ``VoiceSession`` against the
local server's engine in lockstep meets all of them in one turn and goes on, its mirror equal
to the server's conversation.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.sinks import TimelineSink
from voxline.base.clock import RealClock, VirtualClock
from voxline.realtime import events as ev
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.scenario import parse_scenario
from voxline.realtime.server.engine.state import EngineConfig
from voxline.realtime.server.engine.voices import make_synth, warm_up
from voxline.realtime.server.net.inprocess import EngineTransport
from voxline.realtime.transports.base import memory_pair
from voxline.session.events import ResponseFinished, SessionError, TranscriptDone
from voxline.session.lockstep import run_lockstep
from voxline.session.settings import SessionSettings
from voxline.session.tools import CallState, CallTracker, ToolCall, ToolEvent, ToolFinished, ToolRegistry, ToolRunner
from voxline.realtime.errors import ToolError
from voxline.session.tools import outputs
from voxline.session.tools.outputs import MAX_EVENT_BYTES, encode_output
from voxline.session.voice import VoiceSession


class Custom(BaseException):
    """A BaseException of the application's own."""


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words")


class Query(BaseModel):
    text: str

    @field_validator("text")
    @classmethod
    def strict(cls, value: str) -> str:
        raise LookupError("the validator broke")  # not a ValueError: pydantic lets it through


class Harness:
    """A registry, a tracker and an open runner; calls of response ``r1``."""

    def __init__(self, registry: ToolRegistry, approve: Any = None) -> None:
        self.tracker = CallTracker()
        self.events: list[ToolEvent] = []
        self.runner = ToolRunner(registry, self.tracker, approve, on_event=self.events.append, clock=RealClock())
        self._n = 0

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> ToolCall:
        self._n += 1
        cid = f"call_{self._n}"
        [call] = self.tracker.on_arguments_done("r1", f"item_{cid}", cid, name, json.dumps(arguments or {}))
        self.runner.submit([call])
        return call

    def sent(self) -> list[dict[str, Any]]:
        return [ev.client_event_dict(c) for c in self.tracker.commands()]

    def finished(self) -> list[ToolFinished]:
        return [e for e in self.events if isinstance(e, ToolFinished)]


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry()


@pytest.fixture
async def harness(registry: ToolRegistry) -> AsyncIterator[Harness]:
    h = Harness(registry)
    async with asyncio.timeout(10):
        async with h.runner:
            yield h


async def answered_once(h: Harness, call: ToolCall) -> str:
    """Run to the end; the call's one error output (checked against its ToolFinished), follow-up included."""
    await h.runner.join()
    h.tracker.on_response_done("r1", "completed")
    sent = h.sent()
    assert [e["type"] for e in sent] == ["conversation.item.create", "response.create"], sent
    output = sent[0]["item"]["output"]
    assert sent[0]["item"]["call_id"] == call.call_id
    assert [(f.call_id, f.output, f.ok) for f in h.finished()] == [(call.call_id, output, False)]
    assert h.tracker.state(call.call_id) is CallState.ANSWERED or h.tracker.state(call.call_id) is None
    message = json.loads(output)["error"]
    assert "\n" not in message
    return str(message)


def raiser(exc: BaseException, *, is_async: bool) -> Any:
    if is_async:
        async def boom() -> str:
            raise exc
        return boom

    def boom_sync() -> str:
        raise exc
    return boom_sync


KINDS = {
    "SystemExit": SystemExit(2),
    "GeneratorExit": GeneratorExit(),
    "Custom": Custom("mine"),
    "CancelledError": asyncio.CancelledError(),
}


@pytest.mark.parametrize("is_async", [True, False], ids=["async", "sync"])
@pytest.mark.parametrize("kind", list(KINDS))
async def test_a_base_exception_from_a_tool_is_its_error_output(
        harness: Harness, registry: ToolRegistry, kind: str, is_async: bool) -> None:
    registry.register(raiser(KINDS[kind], is_async=is_async), name="boom")
    call = harness.call("boom")
    message = await answered_once(harness, call)
    assert message.startswith(f"boom failed: {kind}")


async def test_a_tool_that_cancels_itself_is_answered_and_the_runner_goes_on(
        harness: Harness, registry: ToolRegistry) -> None:
    @registry.tool(timeout=None)
    async def gives_up() -> str:
        await asyncio.sleep(0)
        raise asyncio.CancelledError("gave up")

    @registry.tool
    async def fine() -> str:
        return "fine"

    first = harness.call("gives_up")
    assert await answered_once(harness, first) == "gives_up failed: CancelledError: gave up"
    second = harness.call("fine")  # the runner's group was not cancelled by the tool's CancelledError
    await harness.runner.join()
    assert harness.tracker.state(second.call_id) is CallState.ANSWERED


async def test_a_tool_that_cancels_its_own_task_is_answered(harness: Harness, registry: ToolRegistry) -> None:
    @registry.tool(timeout=2)
    async def cancels_its_task() -> str:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # as a library helper "cancelling the current request" might
        await asyncio.sleep(1)
        return "never"

    call = harness.call("cancels_its_task")  # before, it was never answered and the turn hung
    assert await answered_once(harness, call) == "cancels_its_task failed: CancelledError: it cancelled its own task"


async def test_an_exception_whose_str_raises_is_described_by_its_type(
        harness: Harness, registry: ToolRegistry) -> None:
    @registry.tool
    async def mumbles() -> str:
        raise BadStr()

    assert await answered_once(harness, harness.call("mumbles")) == "mumbles failed: BadStr"


async def test_a_sync_tools_exception_is_described_on_its_worker_thread(
        harness: Harness, registry: ToolRegistry) -> None:
    """Its message is the application's code, which may take long (a large validation error): it is made
    where the tool ran, within its timeout, never on the event loop every session shares."""
    described_on: list[threading.Thread] = []

    class Slow(Exception):
        def __str__(self) -> str:
            described_on.append(threading.current_thread())
            return "in its own words"

    @registry.tool
    def fails() -> str:
        raise Slow()

    assert await answered_once(harness, harness.call("fails")) == "fails failed: Slow: in its own words"
    assert described_on and threading.main_thread() not in described_on


async def test_an_output_far_over_the_limit_is_refused_without_encoding_it(
        harness: Harness, registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    encoded: list[int] = []
    real_to_json = outputs.pydantic_core.to_json

    def counting_to_json(value: Any) -> bytes:
        encoded.append(1)
        return real_to_json(value)

    monkeypatch.setattr(outputs.pydantic_core, "to_json", counting_to_json)

    @registry.tool
    def dump() -> str:
        return "é" * (MAX_EVENT_BYTES + 1)

    message = await answered_once(harness, harness.call("dump"))
    assert message == (f"the output of dump is too large to send: {MAX_EVENT_BYTES + 1} characters, "
                       f"and one event carries at most {MAX_EVENT_BYTES} bytes")
    assert encoded == []  # its length alone said so


async def test_a_coroutine_an_async_tool_returns_is_awaited_as_a_sync_tools_is(
        registry: ToolRegistry, harness: Harness) -> None:
    async def inner(city: str) -> str:
        return f"cloudy in {city}"

    @registry.tool
    async def weather(city: str) -> Any:
        """The weather, from a coroutine it hands back."""
        return inner(city)

    harness.call("weather", {"city": "Oslo"})
    await harness.runner.join()
    assert [(f.output, f.ok) for f in harness.finished()] == [("cloudy in Oslo", True)]


def test_a_saved_tracker_whose_pending_command_is_no_client_event_is_refused() -> None:
    tracker = CallTracker()
    [call] = tracker.on_arguments_done("r1", "item_1", "call_1", "f", "{}")
    assert tracker.begin(call.call_id)
    tracker.on_result(call.call_id, "done")
    state = json.loads(json.dumps(tracker.export_state()))
    assert CallTracker.from_state(state).commands()  # as saved, it goes on
    state["pending"][0]["command"] = {"type": "bogus"}
    with pytest.raises(ToolError, match=r"invalid call tracker state at \('pending', 0, 'command'\): not a GA client"):
        CallTracker.from_state(state)


async def test_an_argument_validator_that_raises_answers_the_call(harness: Harness, registry: ToolRegistry) -> None:
    ran: list[Query] = []

    @registry.tool
    def search(query: Query) -> str:
        ran.append(query)
        return "found"

    message = await answered_once(harness, harness.call("search", {"text": "x"}))
    assert message == "invalid arguments: LookupError: the validator broke" and ran == []


@pytest.mark.parametrize("kind", ["SystemExit", "CancelledError", "Custom", "BadStr"])
async def test_an_approval_callback_that_raises_answers_the_call_and_the_tool_never_runs(kind: str) -> None:
    registry, ran = ToolRegistry(), []
    failure = BadStr() if kind == "BadStr" else KINDS[kind]

    @registry.tool(needs_approval=True)
    def delete_all() -> str:
        ran.append(1)
        return "deleted"

    async def approve(_call: ToolCall) -> bool:
        raise failure

    h = Harness(registry, approve)
    async with asyncio.timeout(10):
        async with h.runner:
            message = await answered_once(h, h.call("delete_all"))
    assert message.startswith(f"asking approval for delete_all failed: {kind}") and ran == []


async def test_user_code_raising_while_the_runner_closes_leaves_the_call_unanswered(registry: ToolRegistry) -> None:
    started = asyncio.Event()

    @registry.tool(timeout=None)
    async def stubborn() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            raise SystemExit(1)  # its cleanup exits instead of letting the cancellation through
        return "never"

    h = Harness(registry)
    async with asyncio.timeout(10):
        async with h.runner:
            call = h.call("stubborn")
            await started.wait()
            await h.runner.aclose()
    assert h.tracker.state(call.call_id) is CallState.RUNNING and h.finished() == [] and h.sent() == []


async def test_an_output_over_the_event_limit_is_refused_before_it_is_sent(
        harness: Harness, registry: ToolRegistry) -> None:
    @registry.tool
    def dump() -> str:
        return "x" * (MAX_EVENT_BYTES + 1)

    message = await answered_once(harness, harness.call("dump"))
    assert message == (f"the output of dump is too large to send: {MAX_EVENT_BYTES + 1} bytes, "
                       f"and one event carries at most {MAX_EVENT_BYTES} bytes")


async def test_a_large_output_that_fits_is_sent_as_it_is(harness: Harness, registry: ToolRegistry) -> None:
    big = "é" * (MAX_EVENT_BYTES // 2 - 1024)  # two bytes each: just under the limit

    @registry.tool
    def dump() -> str:
        return big

    harness.call("dump")
    await harness.runner.join()
    [finished] = harness.finished()
    assert finished.ok and finished.output is big
    assert [e["item"]["output"] == big for e in harness.sent()] == [True]


def test_the_tracker_refuses_what_cannot_be_sent_and_answers_once() -> None:
    tracker = CallTracker()
    for cid in ("c1", "c2"):
        tracker.on_arguments_done("r1", f"i_{cid}", cid, "dump", "{}")
    assert tracker.begin("c1") and tracker.begin("c2")
    too_big = tracker.on_result("c1", {"rows": ["y" * 1024] * (MAX_EVENT_BYTES // 1024)})
    not_text = tracker.on_result("c2", "half a pair: \ud800")
    assert tracker.on_result("c1", "late") is None
    tracker.on_response_done("r1", "completed")
    sent = [ev.client_event_dict(c) for c in tracker.commands()]
    assert [e["type"] for e in sent] == ["conversation.item.create"] * 2 + ["response.create"]
    assert [e["item"]["output"] for e in sent[:2]] == [too_big, not_text]
    assert "too large to send" in json.loads(str(too_big))["error"]
    assert "not valid Unicode" in json.loads(str(not_text))["error"]


async def test_a_wire_observer_that_raises_costs_no_frame_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[tuple[str, str]] = []

    def observer(direction: str, text: str) -> None:
        seen.append((direction, text))
        raise OSError("disk full")

    client, server = memory_pair()
    conn = RealtimeConnection(client, on_wire=observer)
    with caplog.at_level(logging.ERROR, logger="voxline.realtime"):
        async with asyncio.timeout(5):
            await conn.send({"type": "input_audio_buffer.clear"})
            await conn.send_raw('{"type":"input_audio_buffer.commit"}')
            assert [json.loads(await server.recv())["type"] for _ in range(2)] == [
                "input_audio_buffer.clear", "input_audio_buffer.commit"]
            await server.send(json.dumps({"type": "input_audio_buffer.cleared", "event_id": "e1"}))
            received = await conn.recv()
    assert isinstance(received, ev.InputAudioBufferCleared)
    assert [d for d, _t in seen] == ["out", "out", "in"] and conn.observer_failures == 3
    assert len([r for r in caplog.records if "wire observer" in r.getMessage()]) == 1


async def test_a_wire_observer_that_hands_back_an_awaitable_is_a_failure_said_once(
        caplog: pytest.LogCaptureFixture) -> None:
    """``on_wire=lambda d, t: queue.put((d, t))`` hands back a coroutine per frame that nobody runs: the app's log
    stayed empty, and nothing but a 'never awaited' warning said so."""
    log: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    client, server = memory_pair()
    conn = RealtimeConnection(client, on_wire=lambda d, t: log.put((d, t)))  # type: ignore[arg-type,return-value]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine left unawaited would warn when collected
        with caplog.at_level(logging.ERROR, logger="voxline.realtime"):
            async with asyncio.timeout(5):
                await conn.send({"type": "input_audio_buffer.clear"})
                assert json.loads(await server.recv())["type"] == "input_audio_buffer.clear"
                await server.send(json.dumps({"type": "input_audio_buffer.cleared", "event_id": "e1"}))
                assert isinstance(await conn.recv(), ev.InputAudioBufferCleared)
        gc.collect()
    assert conn.observer_failures == 2 and log.empty()
    [record] = [r for r in caplog.records if "wire observer" in r.getMessage()]
    assert "returned coroutine instead of doing its work" in record.getMessage()


# ---------------------------------------------------------------------------- end to end

SCENARIO = parse_scenario({
    "name": "containment",
    "after_last": "repeat_last",
    "turns": [
        {"output": [{"call": name, "arguments": {}} for name in ("gives_up", "exits", "mumbles", "dump")],
         "after": [{"say": "Every call was answered."}]},
        {"say": "Anything else?"},
    ],
})


def test_a_session_meets_every_failure_in_one_turn_and_goes_on() -> None:
    clock = VirtualClock()
    synth, _ = make_synth("tone")
    voices = warm_up(SCENARIO, synth)
    engines: list[Engine] = []
    wire: list[tuple[str, dict[str, Any]]] = []
    tools = ToolRegistry()

    @tools.tool
    async def gives_up() -> str:
        raise asyncio.CancelledError()

    @tools.tool
    def exits() -> str:
        raise SystemExit("usage: exits [-h]")

    @tools.tool
    async def mumbles() -> str:
        raise BadStr()

    @tools.tool
    def dump() -> str:
        return "z" * (MAX_EVENT_BYTES + 1)

    async def connector() -> RealtimeConnection:
        engine = Engine(EngineConfig(pacing=Pacing(speed=4.0)), SCENARIO, voices, wall_time=clock.wall())
        engines.append(engine)
        return RealtimeConnection(EngineTransport(engine, clock, synth),
                                  on_wire=lambda d, t: wire.append((d, json.loads(t))))

    settings = SessionSettings(api_key="local", url="ws://in-process/v1", turn_detection="none")

    async def main() -> tuple[list[Any], list[Any]]:
        session = VoiceSession(settings, output=ClockedOutput(clock, TimelineSink(), origin=clock.now()),
                               tools=tools, clock=clock, connector=connector)
        events: list[Any] = []

        async def until(text: str) -> None:
            """Events until the response that says ``text`` is over."""
            heard = False
            async with asyncio.timeout(60):
                async for event in session:
                    events.append(event)
                    heard = heard or (isinstance(event, TranscriptDone) and text in event.text)
                    if heard and isinstance(event, ResponseFinished):
                        return

        async with session:
            await session.send_text("Run all four tools.")
            await until("Every call was answered.")
            await session.send_text("Thanks.")
            await until("Anything else?")
            mirror = session.mirror.items()
        return events, mirror

    events, mirror = run_lockstep(main(), clock)
    finished = {e.name: e for e in events if isinstance(e, ToolFinished)}
    assert sorted(finished) == ["dump", "exits", "gives_up", "mumbles"]
    assert not any(e.ok for e in finished.values())
    assert "too large" in finished["dump"].output and "SystemExit" in finished["exits"].output
    assert not [e for e in events if isinstance(e, SessionError)]
    assert [e.status for e in events if isinstance(e, ResponseFinished)] == ["completed"] * 3
    out = [f for d, f in wire if d == "out"]
    outputs = [f["item"]["call_id"] for f in out
               if f["type"] == "conversation.item.create" and f["item"]["type"] == "function_call_output"]
    assert len(outputs) == len(set(outputs)) == 4
    kinds = [f["type"] for f in out if f["type"] in ("conversation.item.create", "response.create")]
    # the text and its response, then the four outputs and one follow-up, then the next text turn
    assert kinds == ["conversation.item.create", "response.create"] * 1 + ["conversation.item.create"] * 4 + [
        "response.create", "conversation.item.create", "response.create"]
    assert not [f for d, f in wire if d == "in" and f["type"] == "error"]
    assert len(engines) == 1
    server = [entry.item for entry in engines[0]._state.conversation]
    assert [m.id for m in mirror] == [i["id"] for i in server]


# ---------------------------------------------------------------- what a tool returns, and how it is written


async def test_a_sync_tool_that_raises_stopiteration_is_answered_at_once(registry: ToolRegistry,
                                                                          harness: Harness) -> None:
    @registry.tool(timeout=None)  # no timeout to stand in: an unsettled wait would hang the fixture's 10 s bound
    def next_item() -> str:
        return str(next(iter([])))

    message = await answered_once(harness, harness.call("next_item"))
    assert message == "next_item failed: StopIteration"  # described on its thread, as it was raised


@pytest.mark.parametrize("is_async", [False, True])
async def test_a_keyboardinterrupt_from_a_tools_thread_or_from_a_str_is_the_tools_failure(
        registry: ToolRegistry, harness: Harness, is_async: bool) -> None:
    class Sly(Exception):
        def __str__(self) -> str:
            raise KeyboardInterrupt

    if is_async:
        registry.tool(raiser(Sly(), is_async=True), name="sly")
    else:
        @registry.tool(name="sly")
        def ctrl_c() -> str:
            raise KeyboardInterrupt  # a worker thread: Ctrl-C never lands there

    message = await answered_once(harness, harness.call("sly"))
    assert message in ("sly failed: Sly", "sly failed: RuntimeError: KeyboardInterrupt raised on the tool's thread")


def test_generator_tools_are_refused_when_registered(registry: ToolRegistry) -> None:
    from voxline.realtime.errors import ToolError

    def rows() -> Any:
        yield {"row": 1}

    async def arows() -> Any:
        yield {"row": 1}

    class Rows:
        def __call__(self) -> Any:
            yield 1

    for func, name in ((rows, "rows"), (arows, "arows"), (Rows(), "rows_object")):
        with pytest.raises(ToolError, match="is a generator function: return the result whole"):
            registry.tool(func, name=name)
    assert registry.get("rows") is None


@pytest.mark.parametrize("lazy", ["generator", "map"])
async def test_a_tool_that_returns_an_iterator_is_answered_without_running_it_on_the_loop(
        registry: ToolRegistry, harness: Harness, lazy: str) -> None:
    made: list[int] = []

    def item(k: int) -> int:
        made.append(k)  # would run on the event loop, item by item, past the tool's timeout
        return k

    @registry.tool(timeout=None)
    def rows() -> Any:
        return (item(k) for k in range(3)) if lazy == "generator" else map(item, range(3))

    message = await answered_once(harness, harness.call("rows"))
    assert message.startswith("rows failed: result of type ") and "is an iterator" in message
    assert made == []


class ClaimsToBeStr:
    """A result whose ``__class__`` says ``str`` (as ``Mock(spec=str)`` does)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str


class ClassRaises:
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("no class today")


class ExitsWhenRead(BaseModel):
    value: int = 1

    def __getattribute__(self, name: str) -> Any:
        if name == "__dict__":
            raise SystemExit(3)
        return super().__getattribute__(name)


@pytest.mark.parametrize("result", [ClaimsToBeStr, ClassRaises], ids=["claims-str", "class-raises"])
async def test_a_result_that_lies_about_its_type_is_the_tools_failure(
        registry: ToolRegistry, harness: Harness, result: type) -> None:
    @registry.tool(timeout=None)
    def odd() -> Any:
        return result()

    message = await answered_once(harness, harness.call("odd"))
    assert message.startswith("odd failed: ") and ("result of type" in message or "no class today" in message)


def test_encoding_a_result_never_lets_its_own_code_escape() -> None:
    from unittest import mock

    with pytest.raises(ToolError, match="result of type Mock"):
        encode_output(mock.Mock(spec=str))
    with pytest.raises(ToolError, match="result of type ClassRaises"):
        encode_output(ClassRaises())


async def test_a_result_whose_encoding_raises_a_base_exception_is_the_tools_failure(
        registry: ToolRegistry, harness: Harness) -> None:
    @registry.tool(timeout=None)
    def exits() -> Any:
        return ExitsWhenRead()

    message = await answered_once(harness, harness.call("exits"))
    assert message.startswith("exits failed:") and "SystemExit" in message


async def test_async_tools_behind_decorators_are_awaited(registry: ToolRegistry, harness: Harness) -> None:
    import functools

    def logged(func: Any) -> Any:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return func(*args, **kwargs)
        return wrapper

    @registry.tool
    @logged
    async def weather(city: str) -> str:
        """The weather."""
        return f"sunny in {city}"

    async def inner(city: str) -> str:
        return f"cloudy in {city}"

    def hidden(city: str) -> Any:  # a plain function that hands back a coroutine, with no __wrapped__
        return inner(city)

    registry.tool(hidden, name="hidden")
    harness.call("weather", {"city": "Oslo"})
    harness.call("hidden", {"city": "Oslo"})
    await harness.runner.join()
    assert sorted((f.output, f.ok) for f in harness.finished()) == [("cloudy in Oslo", True), ("sunny in Oslo", True)]


async def test_results_are_plain_json_text(registry: ToolRegistry, harness: Harness) -> None:
    class Tracked(str):
        def __ne__(self, other: object) -> bool:
            raise TypeError("cannot compare a tracked string")

        __eq__ = __ne__  # type: ignore[assignment]

    @registry.tool
    def greet() -> str:
        return Tracked("hello")

    @registry.tool
    def readings() -> dict[str, float]:
        return {"t": float("nan"), "u": float("inf"), "v": 1.5}

    harness.call("greet")
    harness.call("readings")
    await harness.runner.join()
    outputs = {f.name: (f.output, f.ok) for f in harness.finished()}
    assert outputs["greet"] == ("hello", True) and type(outputs["greet"][0]) is str
    assert outputs["readings"] == ('{"t":null,"u":null,"v":1.5}', True)
    json.loads(outputs["readings"][0])  # JSON, not Python's NaN


def test_nan_in_a_calls_arguments_is_not_json(registry: ToolRegistry) -> None:
    from voxline.realtime.errors import ToolError

    @registry.tool
    def scale(x: float) -> float:
        return x

    tool = registry["scale"]
    for text in ('{"x": NaN}', '{"x": Infinity}', '{"x": -Infinity}'):
        with pytest.raises(ToolError, match="is no JSON value"):
            tool.parse(text)
    assert tool.parse('{"x": 2.5}')[1] == {"x": 2.5}


async def test_closing_does_not_wait_for_a_tool_that_ignores_its_cancel(registry: ToolRegistry) -> None:
    stop = asyncio.Event()
    cancels: list[int] = []

    @registry.tool(timeout=None)
    async def stubborn() -> str:
        while not stop.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                cancels.append(1)  # swallowed: the tool goes on
        return "done at last"

    h = Harness(registry)
    async with asyncio.timeout(10):
        await h.runner.__aenter__()
        h.call("stubborn")
        while not any(type(e).__name__ == "ToolStarted" for e in h.events):
            await asyncio.sleep(0.01)
        await asyncio.wait_for(h.runner.aclose(), 2)  # returns though the tool runs on
    assert cancels == [1]  # it was told
    stop.set()  # let it end, so the test's loop can close
    await asyncio.sleep(0.05)


async def test_closing_does_not_wait_for_an_approval_that_ignores_its_cancel(registry: ToolRegistry) -> None:
    stop = asyncio.Event()
    asked: list[str] = []
    cancels: list[int] = []

    async def approve(call: ToolCall) -> bool:
        asked.append(call.name)
        while not stop.is_set():  # the user never answers, and the prompt swallows its cancel
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                cancels.append(1)
        return True

    @registry.tool(needs_approval=True)
    def delete_everything() -> str:
        """Needs the user's yes."""
        return "deleted"

    h = Harness(registry, approve)
    async with asyncio.timeout(10):
        await h.runner.__aenter__()
        h.call("delete_everything")
        while not asked:
            await asyncio.sleep(0.01)
        await asyncio.wait_for(h.runner.aclose(), 2)  # returns though the prompt goes on
    assert cancels == [1] and h.finished() == []  # it was told; the tool never ran
    stop.set()
    await asyncio.sleep(0.05)
