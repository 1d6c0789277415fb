"""The sans-I/O Live engine driven by hand, every event it emits checked against ``openai.types.live``."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from voxline.realtime.server.engine.ids import IdFactory
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.live.engine import LiveEngine, Out
from voxline.realtime.server.live.settings import LiveConfig
from tests.support.engine_harness import RATE, fake_voice, script, silence, speech
from tests.support.live_oracle import check_live_server_event

__all__ = ["LiveHarness", "RATE", "audio_of", "script", "silence", "speech"]


def audio_of(events: list[dict[str, Any]], rate: int = RATE) -> np.ndarray:
    """The PCM16 samples of the ``session.output_audio.delta`` events, in order."""
    chunks = [np.frombuffer(base64.b64decode(e["delta"]), dtype="<i2") for e in events
              if e["type"] == "session.output_audio.delta"]
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)


class LiveHarness:
    """One engine; ``primary`` / ``observed`` / ``origin`` collect what each audience received."""

    def __init__(self, scenario: Any = None, *, observers: int = 0, **config: Any) -> None:
        scenario = scenario or script({"say": "Hello there, caller."}, {"say": "Second reply here."},
                                      user_says=["Hi.", "Tell me more."])
        voices = VoiceCache()
        for turn in scenario.turns:
            for output in (*turn.outputs, *(turn.after or ())):
                if hasattr(output, "text") and "{" not in output.text:
                    voices.put(output.text, fake_voice(output.text))
        self.engine = LiveEngine(LiveConfig(**config), scenario, voices, wall_time=1_000.0, ids=IdFactory(7))
        self.engine.observers = observers
        self.primary: list[dict[str, Any]] = []
        self.observed: list[dict[str, Any]] = []
        self.origin: list[dict[str, Any]] = []

    def take(self, outs: list[Out]) -> list[dict[str, Any]]:
        """Sort ``outs`` by audience (validating each for its audience); return the primary's new events."""
        new: list[dict[str, Any]] = []
        for out in outs:
            if out.to in ("all", "primary"):
                check_live_server_event(out.event, "primary")
                self.primary.append(out.event)
                new.append(out.event)
            if out.to in ("all", "observers"):
                check_live_server_event(out.event, "sideband")
                self.observed.append(out.event)
            if out.to == "origin":
                check_live_server_event(out.event, "primary")
                self.origin.append(out.event)
                new.append(out.event)
        return new

    def send(self, event: dict[str, Any] | str, source: str = "primary") -> list[dict[str, Any]]:
        frame = event if isinstance(event, str) else json.dumps(event)
        return self.take(self.engine.receive(frame, source))  # type: ignore[arg-type]

    def start(self, **session: Any) -> list[dict[str, Any]]:
        return self.send({"type": "session.start", "event_id": "evt_start", "session": {"model": "gpt-live-1", **session}})

    def feed(self, samples: np.ndarray, chunk_ms: int = 20) -> list[dict[str, Any]]:
        """Append 24 kHz PCM16 ``samples`` in ``chunk_ms`` appends; return the primary's new events."""
        step = RATE * chunk_ms // 1000
        new: list[dict[str, Any]] = []
        for i in range(0, len(samples), step):
            chunk = np.asarray(samples[i : i + step], dtype="<i2").tobytes()
            new += self.send({"type": "session.input_audio.append", "audio": base64.b64encode(chunk).decode()})
        return new

    def of(self, kind: str, events: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        return [e for e in (self.primary if events is None else events) if e["type"] == kind]

    def said(self, kind: str = "session.output_transcript.delta") -> str:
        return "".join(e["delta"] for e in self.of(kind))
