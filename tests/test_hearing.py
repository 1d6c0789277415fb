"""What the local server hears: the recogniser (Whisper tiny.en from voxline[asr]), its input
features, phrase matching, and recognition on the served paths, off the event loop."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import websockets

from voxline.audio.synth import synthesize
from voxline.base.audio_format import PCM16_24K, AudioFormat
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.hearing import whisper
from voxline.realtime.server.hearing.ears import Ears, load_ears
from voxline.realtime.server.hearing.features import FRAMES, RATE, log_mel, mel_filters
from voxline.realtime.server.hearing.phrases import first_heard, heard, words
from tests.support.ci import IN_CI, require_tool
from tests.support.engine_harness import speech
from tests.support.local_server import AUTH, Client, config
from tests.support.oracle import WireRecorder

PREFIX = "conversation.item.input_audio_transcription"


def require_asr() -> Ears:
    ears = load_ears("auto")
    if ears is None:
        if IN_CI:
            pytest.fail(f"voxline[asr] is required in CI ({whisper.missing()} is missing)")
        pytest.skip(f"voxline[asr] is not installed ({whisper.missing()} is missing)")
    return ears


def spoken(text: str, voice: str = "espeak") -> np.ndarray:
    require_tool("espeak-ng")
    quiet = np.zeros(6000, np.int16)
    return np.concatenate([quiet, synthesize(text, voice), quiet, quiet, quiet])


# Phrases: pure.

def test_words_are_lowercase_without_punctuation_and_small_numbers_spelled() -> None:
    assert words("Book a table for 2, please!") == ["book", "a", "table", "for", "two", "please"]


@pytest.mark.parametrize(("phrase", "text", "expected"), [
    ("weather in paris", "What is the weather in Paris?", True),
    ("weather in paris", "Could you tell me the whether in Paris?", True),  # one letter in five may differ
    ("table for two", "Welcome table for 2.", True),
    ("cancel my order", "I would like to cancel an order.", False),  # the words, in order
    ("cat", "cut the rope", False),  # short words must be exact
    ("stop", "", False),
])
def test_a_phrase_is_heard_when_its_words_follow_one_another(phrase: str, text: str, expected: bool) -> None:
    assert heard(phrase, text) is expected


def test_the_first_choice_with_a_phrase_heard_wins() -> None:
    choices = [["forecast"], ["cancel", "weather"], ["weather"]]
    assert first_heard(choices, "The weather, please.") == 1
    assert first_heard(choices, "Tell me a joke.") is None


# Features.

def test_the_mel_bank_covers_0_to_8_khz_with_unit_area_triangles() -> None:
    bank = mel_filters()
    assert bank.shape == (80, 201)
    assert (bank >= 0).all() and (bank.sum(axis=1) > 0).all()
    centres = bank.argmax(axis=1)
    assert (np.diff(centres) >= 0).all() and centres[0] <= 2 and centres[-1] >= 185


def test_a_tone_lights_the_band_of_its_frequency() -> None:
    t = np.arange(RATE) / RATE
    tone = (0.5 * np.sin(2 * np.pi * 1000.0 * t)).astype(np.float32)
    features = log_mel(tone)
    assert features.shape == (80, FRAMES)
    band = int(features[:, 10:90].mean(axis=1).argmax())
    bins = np.linspace(0, RATE / 2, 201)
    assert abs(bins[mel_filters()[band].argmax()] - 1000.0) <= 80.0
    assert features[:, 200:].max() < features[:, :90].max()  # the padding after the tone is quieter


# The recogniser.

def test_hearing_off_never_loads_and_on_without_the_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_ears("off") is None
    monkeypatch.setattr(whisper, "missing", lambda: "ctranslate2")
    assert load_ears("auto") is None
    with pytest.raises(ConfigurationError, match=r"needs voxline\[asr\] \(ctranslate2 is not installed\)"):
        load_ears("on")
    with pytest.raises(ConfigurationError, match="hearing takes auto, on or off"):
        ServerConfig(hearing="maybe")


async def test_serve_with_hearing_on_and_no_extra_exits_1_as_a_missing_extra_does_everywhere(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """What this machine lacks is not a command line that cannot work: 1, as ``replay --aec`` without its extra."""
    import argparse

    from voxline.realtime.server.net.cli import add_serve_arguments, main_serve

    monkeypatch.setattr(whisper, "missing", lambda: "ctranslate2")
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    assert await main_serve(parser.parse_args(["--port", "0", "--voice", "tone", "--hearing", "on"])) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs voxline[asr]" in err


@pytest.mark.slow
def test_espeak_speech_is_heard_at_24_khz_and_over_g711() -> None:
    ears = require_asr()
    audio = spoken("What is the weather in Paris?")
    assert words(ears.hear(audio.astype("<i2").tobytes(), PCM16_24K)) == ["what", "is", "the", "weather", "in", "paris"]
    from voxline.realtime.server.engine.wire_audio import from_pcm24k

    ulaw = AudioFormat.from_wire({"type": "audio/pcmu"})
    # phone-band speech is harder for it: the scenario's phrases, given as previous text, steer it
    assert heard("weather in paris", ears.hear(from_pcm24k(audio, ulaw), ulaw, ["weather", "cancel my order"]))
    assert ears.hear(np.zeros(24000, np.int16).tobytes(), PCM16_24K) == ""


# Served: recognition off the loop.

class BlockingEars(Ears):
    """Hears a fixed text, but only once the test lets it: recognition that takes as long as the test wants."""

    def __init__(self, text: str) -> None:
        super().__init__(lambda: self, "blocking")  # type: ignore[arg-type]
        self.text = text
        self.started = threading.Event()
        self.release = threading.Event()
        self.phrases: list[tuple[str, ...]] = []

    def hear(self, audio: bytes, fmt: AudioFormat, phrases: Sequence[str] = ()) -> str:
        self.phrases.append(tuple(phrases))
        self.started.set()
        if not self.release.wait(10):
            raise TimeoutError("the test never released the recogniser")
        return self.text


def turn_audio() -> list[str]:
    samples = np.concatenate([np.zeros(6000, np.int16), speech(0.6), np.zeros(24000, np.int16)])
    return [base64.b64encode(samples[i : i + 2400].astype("<i2").tobytes()).decode()
            for i in range(0, samples.size, 2400)]


async def test_a_barge_in_is_not_held_up_by_recognition(monkeypatch: pytest.MonkeyPatch) -> None:
    ears = BlockingEars("What is the weather?")
    monkeypatch.setattr("voxline.realtime.server.net.app.load_ears", lambda mode: ears)
    recorder = WireRecorder()
    async with serve(config(recorder, scenario="long", speed=1.0)) as server:
        async with websockets.connect(f"{server.url}/realtime?model=gpt-realtime", additional_headers=AUTH) as ws:
            c = Client(ws, recorder)
            await c.until("conversation.created")
            vad = {"type": "server_vad", "silence_duration_ms": 300}
            await c.send({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {
                "turn_detection": vad, "transcription": {"model": "gpt-transcribe"}}}}})
            await c.until("session.updated")
            for chunk in turn_audio():
                await c.send({"type": "input_audio_buffer.append", "audio": chunk})
            await c.until("response.output_audio.delta")  # the long reply is speaking; recognition is stuck
            assert await asyncio.to_thread(ears.started.wait, 5)
            for chunk in turn_audio()[:6]:  # the user talks over it
                await c.send({"type": "input_audio_buffer.append", "audio": chunk})
            cut = await c.until("response.done")
            assert cut[-1]["response"]["status_details"]["reason"] == "turn_detected"
            assert not any(e["type"].startswith(PREFIX) for e in cut)  # the cut came first
            ears.release.set()
            done = (await c.until(f"{PREFIX}.completed"))[-1]
            assert done["transcript"] == "What is the weather?"
    assert ears.phrases[0] == ()  # the long scenario listens for nothing
    recorder.verify()


@pytest.mark.slow
async def test_a_served_listening_scenario_hears_a_weather_question_and_calls_the_tool() -> None:
    require_asr()
    audio = spoken("What is the weather like in Paris today?")
    recorder = WireRecorder()
    async with serve(config(recorder, scenario="listen", hearing="on")) as server:
        async with websockets.connect(f"{server.url}/realtime?model=gpt-realtime", additional_headers=AUTH) as ws:
            c = Client(ws, recorder)
            await c.until("conversation.created")
            await c.send({"type": "session.update", "session": {"type": "realtime", "audio": {"input": {
                "turn_detection": {"type": "server_vad", "silence_duration_ms": 400},
                "transcription": {"model": "whisper-1"}}}}})
            await c.until("session.updated")
            for i in range(0, audio.size, 2400):
                await c.send({"type": "input_audio_buffer.append",
                              "audio": base64.b64encode(audio[i : i + 2400].astype("<i2").tobytes()).decode()})
            events: list[dict[str, Any]] = []
            async with asyncio.timeout(30):
                while not any(e["type"] == "response.done" for e in events):
                    events.append(json.loads(await ws.recv()))
    completed = next(e for e in events if e["type"] == f"{PREFIX}.completed")
    assert heard("weather", completed["transcript"]) and completed["usage"]["type"] == "duration"
    types = [e["type"] for e in events]
    assert types.index(f"{PREFIX}.completed") < types.index("response.created")  # it waited for the words
    output = next(e for e in events if e["type"] == "response.done")["response"]["output"]
    assert [o["type"] for o in output] == ["message", "function_call"] and output[1]["name"] == "get_weather"
    recorder.verify()
