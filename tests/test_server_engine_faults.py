"""A bug of the local server's engine on any path of a WebSocket session (a client frame, a scheduled step, words
heard) is answered as the service answers its own: one ``server_error`` event, and the session goes on."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import numpy as np
import pytest
import websockets

from voxline.base.audio_format import AudioFormat
from voxline.base.clock import VirtualClock
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.engine import errors
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.hearing import HearingJob
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.engine.state import EngineConfig
from voxline.realtime.server.engine.voices import make_synth, supply_speech
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.realtime.server.net.hearer import HearingSupplier
from voxline.realtime.server.net.inprocess import EngineTransport
from voxline.realtime.server.net.timing import first_of
from voxline.realtime.server.net.voicer import SpeechSupplier
from voxline.session.lockstep import run_lockstep
from tests.support.engine_harness import Harness, failing_polls, fake_voice, only, script, types


async def test_an_engine_failure_on_a_scheduled_step_is_a_server_error_event_not_a_1011(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failing_polls(monkeypatch)
    async with serve(ServerConfig(port=0, voice="tone", speed=math.inf)) as server:
        async with websockets.connect(f"{server.url}/realtime?model=gpt-realtime",
                                      additional_headers={"Authorization": "Bearer x"}) as ws:
            for _ in range(2):
                await ws.recv()
            await ws.send(json.dumps({"type": "response.create"}))
            seen = []
            while not seen or seen[-1]["type"] != "error":
                seen.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
            assert seen[-1]["error"]["type"] == "server_error"
            await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))  # the session goes on
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "input_audio_buffer.cleared"


class _Engine:
    """The hearing side of an engine, whose answer to the first words heard is a bug."""

    def __init__(self) -> None:
        self.jobs = [HearingJob(f"item_{k}", b"", AudioFormat("pcm16", 24000), ()) for k in range(2)]
        self.heard: list[str] = []

    def hearing_waits(self) -> bool:
        return bool(self.jobs)

    def take_hearing(self) -> list[HearingJob]:
        jobs, self.jobs = self.jobs, []
        return jobs

    def provide_hearing(self, item_id: str, text: str | None, now: float) -> list[dict[str, Any]]:
        if item_id == "item_0":
            raise RuntimeError("boom")
        self.heard.append(item_id)
        return [{"type": "conversation.item.input_audio_transcription.completed", "item_id": item_id}]

    def error(self, spec: errors.ErrorSpec) -> dict[str, Any]:
        return spec.to_event("event_1", None)


class _Ears:
    def hear(self, audio: bytes, fmt: AudioFormat, phrases: tuple[str, ...] = ()) -> str:
        return "hello"


async def test_an_engine_failure_on_words_heard_is_a_server_error_event_and_hearing_goes_on() -> None:
    engine = _Engine()
    delivered: list[dict[str, Any]] = []
    hearer = HearingSupplier(engine, _Ears(), ServerConfig().clock, delivered.extend)  # type: ignore[arg-type]
    task = asyncio.create_task(hearer.run())
    hearer.check()
    async with asyncio.timeout(10):
        while len(delivered) < 2 and not task.done():
            await asyncio.sleep(0.01)
    assert [e["type"] for e in delivered] == ["error", "conversation.item.input_audio_transcription.completed"]
    assert delivered[0]["error"]["type"] == "server_error" and engine.heard == ["item_1"]
    assert not task.done()
    task.cancel()


# A reply's speech: the voice or the engine raising on it is never the session's end.


def _waiting_engine() -> Engine:
    """An engine whose second response waits for the speech of a reply no cache holds."""
    scenario = script({"say": "Fixed."}, {"say": "You are on turn {turn}."})
    engine = Engine(EngineConfig(pacing=Pacing(speed=math.inf)), scenario,
                    VoiceCache.for_scenario(scenario, fake_voice), wall_time=0.0)
    engine.open()
    engine.receive(json.dumps({"type": "response.create"}), 0.0)
    engine.poll(0.0)
    assert types(engine.receive(json.dumps({"type": "response.create"}), 1.0)) == ["response.created"]
    assert engine.speech_needed() == ["You are on turn 2."]
    return engine


def _broken_voice(text: str) -> np.ndarray:
    raise RuntimeError("espeak-ng crashed")


async def _supply(engine: Engine, synth: Any, on_failed: Any = None) -> asyncio.Task[None]:
    """Run a speech supplier until it handed its speech in (or ended); the task, still running if all went well."""
    voiced = asyncio.Event()
    supplier = SpeechSupplier(engine, synth, VirtualClock(2.0), voiced.set, on_failed)
    supplier.check()
    task = asyncio.create_task(supplier.run())
    async with asyncio.timeout(10):
        await first_of(voiced.wait(), asyncio.wait([task]))
    return task


async def test_a_voice_that_raises_makes_a_silent_reply_and_its_response_ends() -> None:
    engine = _waiting_engine()
    task = await _supply(engine, _broken_voice)
    assert not task.done()  # the supplier (and the session around it) goes on
    task.cancel()
    events = Harness.check(engine.poll(2.0))
    assert only(events, "response.output_audio_transcript.done")[0]["transcript"] == "You are on turn 2."
    assert only(events, "response.output_audio.delta") == []
    assert only(events, "response.done")[0]["response"]["status"] == "completed"


def test_a_voice_that_raises_makes_a_silent_reply_for_lockstep_drivers_too() -> None:
    engine = _waiting_engine()
    assert supply_speech(engine, _broken_voice, 2.0) == 1
    assert only(engine.poll(2.0), "response.done")[0]["response"]["status"] == "completed"


async def test_an_engine_failure_on_a_replys_speech_is_said_once_and_speech_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = _waiting_engine()

    def broken(self: Engine, text: str, samples: Any, now: float) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(Engine, "provide_speech", broken)
    said: list[str] = []
    task = await _supply(engine, fake_voice, lambda: said.append("server_error"))
    assert not task.done() and said == ["server_error"]
    task.cancel()


class _SameReplyTwice:
    """What a speech supplier serves: one reply's text, asked for by a response, then by a later one. The engine
    raises on the first speech handed in."""

    def __init__(self) -> None:
        self.needed = ["Sorry, I did not catch that."]
        self.given: list[str] = []
        self.fail = True

    def speech_needed(self) -> list[str]:
        return list(self.needed)

    def provide_speech(self, text: str, samples: Any, now: float = 0.0) -> None:
        if self.fail:
            self.fail = False
            raise RuntimeError("boom")
        self.given.append(text)
        self.needed.remove(text)


async def test_a_reply_whose_speech_failed_is_voiced_again_when_a_later_response_asks_for_it() -> None:
    """The text the engine raised on was refused for the rest of the session: a later response asking for the same
    words (a canned apology, say) waited for good, with nothing said."""
    demand = _SameReplyTwice()
    voiced = asyncio.Event()
    said: list[str] = []
    supplier = SpeechSupplier(demand, fake_voice, VirtualClock(), voiced.set, lambda: said.append("server_error"))
    task = asyncio.create_task(supplier.run())
    try:
        supplier.check()
        async with asyncio.timeout(10):
            await voiced.wait()
        assert said == ["server_error"] and demand.given == []
        voiced.clear()
        demand.needed = []  # that response ended (cancelled)
        supplier.check()
        demand.needed = ["Sorry, I did not catch that."]  # and a later one asks for the same words
        supplier.check()
        async with asyncio.timeout(10):
            await voiced.wait()
        assert demand.given == ["Sorry, I did not catch that."] and said == ["server_error"]
    finally:
        task.cancel()


# The in-process transport of replays answers as a served session does.


class _FaultyEngine(Engine):
    """An engine whose steps of a running response, and whose answer to words heard, are a bug."""

    jobs: list[HearingJob] = []

    def poll(self, now: float) -> list[dict[str, Any]]:
        if any(not run.done for run in self._state.runs):
            raise RuntimeError("boom")
        return super().poll(now)

    def hearing_waits(self) -> bool:
        return bool(self.jobs)

    def take_hearing(self) -> list[HearingJob]:
        jobs, self.jobs = self.jobs, []
        return jobs

    def provide_hearing(self, item_id: str, text: str | None, now: float) -> list[dict[str, Any]]:
        raise RuntimeError("boom")


def _in_process(first: dict[str, Any], then: dict[str, Any], hearing: bool = False) -> list[str]:
    """The event types (errors with their type) an in-process client reads after ``first``, up to and with the
    answer to ``then``."""
    clock = VirtualClock()
    synth, _ = make_synth("tone")

    async def main() -> list[str]:
        engine = _FaultyEngine(EngineConfig(), load_scenario("default"), synth, wall_time=clock.wall())
        if hearing:
            engine.jobs = [HearingJob("item_0", b"", AudioFormat("pcm16", 24000), ())]
        transport = EngineTransport(engine, clock, synth, _Ears() if hearing else None)
        await transport.send(json.dumps(first))
        kinds: list[str] = []
        while "error:server_error" not in kinds:
            event = json.loads(await transport.recv())
            kinds.append(event["type"] + (":" + event["error"]["type"] if event["type"] == "error" else ""))
        await transport.send(json.dumps(then))
        kinds.append(json.loads(await transport.recv())["type"])
        return kinds

    return run_lockstep(main(), clock)


def test_in_process_an_engine_failure_on_a_scheduled_step_is_a_server_error_and_the_session_goes_on() -> None:
    kinds = _in_process({"type": "response.create"}, {"type": "input_audio_buffer.clear"})
    assert kinds[-3:] == ["response.created", "error:server_error", "input_audio_buffer.cleared"]


def test_in_process_an_engine_failure_on_words_heard_is_a_server_error_and_the_session_goes_on() -> None:
    kinds = _in_process({"type": "input_audio_buffer.clear"}, {"type": "input_audio_buffer.clear"}, hearing=True)
    assert kinds[-3:] == ["input_audio_buffer.cleared", "error:server_error", "input_audio_buffer.cleared"]
