"""The engine's entry points agree: a raw-audio append and a parsed event act as the JSON frame does."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from voxline.realtime.server.engine import Engine
from voxline.realtime.server.engine.errors import RequestRejected
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.engine.state import EngineConfig
from tests.support.engine_harness import b64, fake_voice, script, silence, speech


def engine(**config: Any) -> Engine:
    scenario = script({"say": "Hi there."})
    return Engine(EngineConfig(pacing=Pacing(speed=1.0, chunk_ms=100), **config), scenario,
                  VoiceCache.for_scenario(scenario, fake_voice), wall_time=1_700_000_000.0, ids=IdFactory(11))


def blocks() -> list[np.ndarray]:
    signal = np.concatenate([silence(0.4), speech(0.8), silence(1.5), speech(0.5), silence(1.0)])
    return [signal[i : i + 480] for i in range(0, signal.size, 480)]


def test_raw_appends_give_exactly_the_events_of_json_appends() -> None:
    by_json, by_bytes = engine(), engine()
    assert by_json.open() == by_bytes.open()
    seen: list[dict[str, Any]] = []
    for i, block in enumerate(blocks()):
        now = i * 0.02
        frame = json.dumps({"type": "input_audio_buffer.append", "audio": b64(block)})
        expected = by_json.receive(frame, now) + by_json.poll(now)
        got = by_bytes.append_audio(block.astype("<i2").tobytes(), now) + by_bytes.poll(now)
        assert got == expected
        seen += got
    kinds = {ev["type"] for ev in seen}
    assert {"input_audio_buffer.speech_started", "input_audio_buffer.committed", "response.output_audio.delta"} <= kinds


def test_a_raw_append_past_the_buffer_cap_is_the_same_error_event() -> None:
    by_json, by_bytes = engine(max_buffer_bytes=1000), engine(max_buffer_bytes=1000)
    audio = speech(0.05).astype("<i2").tobytes()  # 2400 bytes
    expected = by_json.receive(json.dumps({"type": "input_audio_buffer.append", "audio": b64(speech(0.05))}), 0.0)
    got = by_bytes.append_audio(audio, 0.0)
    assert [ev["type"] for ev in got] == ["error"] and got == expected


def test_parse_then_handle_is_receive() -> None:
    a, b = engine(), engine()
    frame = json.dumps({"type": "session.update", "event_id": "c1", "session": {"type": "realtime", "instructions": 5}})
    assert b.handle(b.parse(frame), 0.0) == a.receive(frame, 0.0)
    assert a.receive(frame, 0.0)[0]["error"]["event_id"] == "c1"


@pytest.mark.parametrize("frame", [b"{}", "[1]", "{", "x" * 30])
def test_parse_refuses_what_receive_answers_with_an_error(frame: str | bytes) -> None:
    e = engine(max_event_bytes=20)
    with pytest.raises(RequestRejected) as refused:
        e.parse(frame)
    assert e.receive(frame, 0.0)[0]["error"]["code"] == refused.value.spec.code
