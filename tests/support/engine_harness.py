"""The local server's sans-I/O engine driven by hand: a fake voice, a clock moved by the test,
and every event it emits checked against the official SDK."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import numpy as np

from voxline.realtime.server.engine import Engine
from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.scenario import parse_scenario
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.engine.state import EngineConfig
from voxline.realtime.server.engine.voices import supply_speech
from tests.support.oracle import check_server_event

__all__ = ["CHAR_MS", "RATE", "GuardedVoice", "Harness", "b64", "error_of", "fake_voice", "only", "script", "silence",
           "speech", "types"]

RATE = 24000
CHAR_MS = 20


def fake_voice(text: str) -> np.ndarray:
    """20 ms of a saw-tooth per character: lengths are exact and the bytes recognisable."""
    return ((np.arange(len(text) * RATE * CHAR_MS // 1000) % 2000) - 1000).astype(np.int16)


def speech(seconds: float, dbfs: float = -20.0) -> np.ndarray:
    t = np.arange(int(round(seconds * RATE))) / RATE
    return np.round(32768 * 10 ** (dbfs / 20) * math.sqrt(2) * np.sin(2 * np.pi * 220 * t)).astype(np.int16)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(round(seconds * RATE)), dtype=np.int16)


def b64(samples: np.ndarray) -> str:
    return base64.b64encode(np.asarray(samples, dtype="<i2").tobytes()).decode()


def script(*turns: dict[str, Any], **extra: Any) -> Any:
    return parse_scenario({"turns": list(turns), **extra})


class GuardedVoice:
    """``fake_voice`` that records what it said and refuses to run while the engine handles a call."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self.engine_busy = False

    def __call__(self, text: str) -> np.ndarray:
        if self.engine_busy:
            raise AssertionError(f"the engine synthesized {text!r} inside receive() or poll()")
        self.said.append(text)
        return fake_voice(text)


class Harness:
    """An engine, a clock we move by hand, and every event checked against the SDK.

    It drives the engine the way the servers do: after each ``receive`` / ``poll`` it voices
    the texts the engine waits for (``supply_speech``), outside the engine.
    """

    def __init__(self, scenario: Any = None, *, speed: float = math.inf, **config: Any) -> None:
        pacing = Pacing(speed=speed, chunk_ms=100, latency_s=config.pop("latency_s", 0.0))
        scenario = scenario or script({"say": "Hi there."})
        self.voice = GuardedVoice()
        self.engine = Engine(
            EngineConfig(pacing=pacing, **config),
            scenario,
            VoiceCache.for_scenario(scenario, self.voice),
            wall_time=1_700_000_000.0,
            ids=IdFactory(7),
        )
        self.now = 0.0
        self.opened = self.check(self.engine.open())

    def receive(self, text: str | bytes) -> list[dict[str, Any]]:
        self.voice.engine_busy = True
        try:
            events = self.engine.receive(text, self.now)
        finally:
            self.voice.engine_busy = False
        supply_speech(self.engine, self.voice, self.now)
        return events

    def poll(self) -> list[dict[str, Any]]:
        self.voice.engine_busy = True
        try:
            events = self.engine.poll(self.now)
        finally:
            self.voice.engine_busy = False
        supply_speech(self.engine, self.voice, self.now)
        return events

    @staticmethod
    def check(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for ev in events:
            check_server_event(ev)
        return events

    def send(self, frame: dict[str, Any] | str | bytes) -> list[dict[str, Any]]:
        text = json.dumps(frame) if isinstance(frame, dict) else frame
        events = self.receive(text)
        return self.check(events + self.poll())

    def run(self, until: float = 1e9) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        while (due := self.engine.next_due()) is not None and due <= until:
            self.now = max(self.now, due)
            events += self.poll()
        self.now = max(self.now, until) if until < 1e9 else self.now
        return self.check(events)

    def feed(self, samples: np.ndarray, chunk_s: float = 0.1) -> list[dict[str, Any]]:
        """Append audio in real time, running due steps between chunks."""
        step = int(chunk_s * RATE)
        events: list[dict[str, Any]] = []
        for i in range(0, len(samples), step):
            events += self.send({"type": "input_audio_buffer.append", "audio": b64(samples[i : i + step])})
            events += self.run(until=self.now + chunk_s)
        return events

    def update(self, **session: Any) -> list[dict[str, Any]]:
        return self.send({"type": "session.update", "session": {"type": "realtime", **session}})

    def session(self) -> dict[str, Any]:
        return self.update()[0]["session"]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def only(events: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == type_]


def error_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert types(events) == ["error"], types(events)
    return events[0]["error"]


def failing_polls(monkeypatch: Any) -> None:
    """``Engine.poll`` raises (a bug of ours) while a response runs, and polls as it does otherwise."""
    real = Engine.poll

    def flaky(self: Engine, now: float) -> list[dict[str, Any]]:
        if any(not run.done for run in self._state.runs):
            raise RuntimeError("boom")
        return real(self, now)

    monkeypatch.setattr(Engine, "poll", flaky)
