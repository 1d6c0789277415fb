"""Scenarios that listen: a turn's reply chosen by what the user said, and responses that wait
for the words (the engine, sans-I/O, with the recogniser's answers given by hand)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.engine.scenario import load_scenario, parse_scenario
from voxline.realtime.server.net.config import ServerConfig
from voxline.realtime.server.net.hearer import HearingSupplier
from tests.support.engine_harness import Harness, only, silence, speech, types

WEATHER = {"call": "get_weather", "arguments": {"city": "Paris"}}


def listening(**extra: Any) -> Any:
    return parse_scenario({"turns": [{
        "say": "Sorry, I did not catch that.",
        "when": [
            {"heard": ["weather", "forecast"], "output": [WEATHER], "after": "It is sunny in Paris."},
            {"heard": "cancel my order", "say": "Your order is cancelled."},
        ],
    }], **extra})


def vad(h: Harness, *, transcribe: bool = False) -> None:
    audio: dict[str, Any] = {"turn_detection": {"type": "server_vad", "silence_duration_ms": 300}}
    if transcribe:
        audio["transcription"] = {"model": "gpt-transcribe"}
    h.update(audio={"input": audio})


def user_turn(h: Harness) -> list[dict[str, Any]]:
    return h.feed(speech(0.6)) + h.feed(silence(0.6))


def committed_item(events: list[dict[str, Any]]) -> str:
    return str(only(events, "input_audio_buffer.committed")[0]["item_id"])


def reply_of(events: list[dict[str, Any]]) -> list[Any]:
    done = only(events, "response.done")[-1]["response"]["output"]
    return [o.get("name") or o["content"][0].get("transcript") for o in done]


def test_a_listening_turn_waits_for_the_words_then_calls_the_tool_it_heard() -> None:
    h = Harness(listening(), hearing=True)
    vad(h, transcribe=True)
    events = user_turn(h)
    assert "response.created" not in types(events)  # deferred until the words are heard
    (job,) = h.engine.take_hearing()
    assert job.item_id == committed_item(events) and job.phrases == ("weather", "forecast", "cancel my order")
    assert h.engine.take_hearing() == []  # handed out once
    heard = Harness.check(h.engine.provide_hearing(job.item_id, "What's the weather in Paris?", h.now))
    assert types(heard)[-2:] == ["conversation.item.input_audio_transcription.completed", "response.created"]
    assert "".join(e["delta"] for e in only(heard, "conversation.item.input_audio_transcription.delta")) == \
        "What's the weather in Paris?"
    events = h.run()
    assert reply_of(events) == ["get_weather"]
    call = only(events, "response.function_call_arguments.done")[0]
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    h.send({"type": "conversation.item.create",
            "item": {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}})
    assert reply_of(h.send({"type": "response.create"}) + h.run()) == ["It is sunny in Paris."]


@pytest.mark.parametrize(("said", "reply"), [
    ("I would like to cancel my order.", "Your order is cancelled."),
    ("Tell me a joke.", "Sorry, I did not catch that."),
    ("", "Sorry, I did not catch that."),
])
def test_the_first_branch_heard_answers_else_the_turn_itself(said: str, reply: str) -> None:
    h = Harness(listening(), hearing=True)
    vad(h)  # no transcription asked for: a listening scenario hears all the same, silently
    user_turn(h)
    (job,) = h.engine.take_hearing()
    heard = h.engine.provide_hearing(job.item_id, said, h.now)
    assert types(heard) == ["response.created"]
    assert reply_of(h.run()) == [reply]


def test_typed_text_chooses_the_branch_too() -> None:
    h = Harness(listening())
    h.send({"type": "conversation.item.create", "item": {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "any forecast for Paris?"}]}})
    assert reply_of(h.send({"type": "response.create"}) + h.run()) == ["get_weather"]


def test_a_scripted_transcript_wins_over_the_recogniser() -> None:
    h = Harness(listening(user_says=["Please cancel my order."]), hearing=True)
    vad(h, transcribe=True)
    events = user_turn(h)
    assert h.engine.take_hearing() == []
    assert only(events, "conversation.item.input_audio_transcription.completed")[0]["transcript"] == \
        "Please cancel my order."
    assert reply_of(events + h.run()) == ["Your order is cancelled."]


def test_speaking_again_drops_the_deferred_response_and_the_newest_words_answer() -> None:
    h = Harness(listening(), hearing=True)
    vad(h)
    user_turn(h)
    first = h.engine.take_hearing()[0]
    events = user_turn(h)  # the user speaks again before the first utterance is heard
    second = h.engine.take_hearing()[0]
    assert "input_audio_buffer.speech_started" in types(events) and "response.created" not in types(events)
    assert h.engine.provide_hearing(first.item_id, "cancel my order", h.now) == []  # still hearing the newest
    assert types(h.engine.provide_hearing(second.item_id, "the weather please", h.now)) == ["response.created"]
    assert reply_of(h.run()) == ["get_weather"]


def test_cancelling_a_deferred_response_means_none_starts() -> None:
    h = Harness(listening(), hearing=True)
    vad(h)
    user_turn(h)
    job = h.engine.take_hearing()[0]
    assert h.send({"type": "response.cancel"})[0]["error"]["code"] == "response_cancel_not_active"
    assert h.engine.provide_hearing(job.item_id, "weather", h.now) == []
    assert h.run() == []


def test_a_failed_recognition_reports_failed_and_the_turn_answers_without_words() -> None:
    h = Harness(listening(), hearing=True)
    vad(h, transcribe=True)
    user_turn(h)
    job = h.engine.take_hearing()[0]
    events = Harness.check(h.engine.provide_hearing(job.item_id, None, h.now))
    assert types(events) == ["conversation.item.input_audio_transcription.failed", "response.created"]
    assert reply_of(h.run()) == ["Sorry, I did not catch that."]


def test_without_a_recogniser_nothing_waits_and_transcription_fails_as_before() -> None:
    h = Harness(listening())
    vad(h, transcribe=True)
    events = user_turn(h)
    assert h.engine.take_hearing() == []
    assert "conversation.item.input_audio_transcription.failed" in types(events)
    assert reply_of(events + h.run()) == ["Sorry, I did not catch that."]


def test_a_turn_that_does_not_listen_never_waits_but_the_words_still_come() -> None:
    h = Harness(parse_scenario({"turns": [{"say": "Hello."}]}), hearing=True)
    vad(h, transcribe=True)
    events = user_turn(h)
    assert "response.created" in types(events)  # a plain turn answers at once
    job = h.engine.take_hearing()[0]
    assert job.phrases == ()
    late = Harness.check(h.engine.provide_hearing(job.item_id, "hello there", h.now))
    assert types(late)[-1] == "conversation.item.input_audio_transcription.completed"


def test_the_builtin_listening_scenario_parses() -> None:
    scenario = load_scenario("listen")
    assert scenario.listens and "weather" in scenario.phrases


@pytest.mark.parametrize(("turn", "message"), [
    ({"say": "x", "when": []}, "non-empty list"),
    ({"say": "x", "when": [{"heard": [], "say": "y"}]}, "'heard' must be"),
    ({"say": "x", "when": [{"heard": ["?!"], "say": "y"}]}, "'heard' must be"),
    ({"say": "x", "when": [{"heard": "a b", "say": "y", "loud": True}]}, "unknown key(s) loud"),
    ({"say": "x", "when": [{"heard": "a b"}]}, "exactly one of 'say' or 'output'"),
])
def test_a_bad_branch_is_one_clear_error(turn: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_scenario({"turns": [turn]})


async def test_the_server_wakes_its_recogniser_only_when_a_turn_waits_to_be_heard() -> None:
    """The session's hearing job was woken after every client frame to ask the engine for work, almost always none:
    a task wake-up for each append of every session (a few percent of a busy server's CPU)."""
    class Ears:
        def hear(self, audio: bytes, fmt: Any, phrases: Any = ()) -> str:
            return "What's the weather in Paris?"

    h = Harness(listening(), hearing=True)
    vad(h, transcribe=True)
    asked: list[int] = []
    take = h.engine.take_hearing
    h.engine.take_hearing = lambda: asked.append(1) or take()  # type: ignore[method-assign]
    delivered: list[dict[str, Any]] = []
    hearer = HearingSupplier(h.engine, Ears(), ServerConfig().clock, delivered.extend)  # type: ignore[arg-type]
    job = asyncio.create_task(hearer.run())
    try:
        for _ in range(25):  # silence: a second of appends, none of which brings a turn
            h.feed(silence(0.04))
            hearer.check()
            await asyncio.sleep(0)
        assert asked == []
        h.feed(speech(0.6))
        h.feed(silence(0.6))  # the turn is committed: its audio waits to be heard
        hearer.check()
        async with asyncio.timeout(10):  # a bound, not a timing
            while not delivered:
                await asyncio.sleep(0.01)
        assert len(asked) == 1
        assert "conversation.item.input_audio_transcription.completed" in types(delivered)
    finally:
        job.cancel()
