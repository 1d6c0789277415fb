"""A GPT-Live session machine on a plain protocol core, its playout read block by block as a
listener would, and the server's output track as the service streams it (frames as plain lists)."""

from __future__ import annotations

import base64
import json

import numpy as np

from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.live.protocol import LiveProtocol
from voxline.session.live.machine import LiveMachine
from voxline.session.settings import SessionSettings
from voxline.session.tools import ToolRegistry
from tests.support.live_oracle import check_live_client_event

__all__ = ["BLOCK", "RATE", "SESSION", "WORDS", "Rig", "audio_delta", "frame", "sent", "start", "track"]

RATE = 24_000
BLOCK = 480  # 20 ms
SESSION = {"id": "sess_1", "model": "gpt-live-1", "expires_at": 1_900_000_000, "status": "active"}
WORDS = ["Paris", "is", "sunny", "today", "with", "a", "light", "breeze", "from", "the", "west"]


def frame(**event: object) -> str:
    return json.dumps(event)


def audio_delta(samples: np.ndarray) -> str:
    return frame(type="session.output_audio.delta", delta=base64.b64encode(samples.astype("<i2").tobytes()).decode())


def sent(protocol: LiveProtocol) -> list[dict[str, object]]:
    out = [json.loads(t) for t in protocol.data_to_send()]
    for e in out:
        check_live_client_event(e)  # every frame the client sends is the SDK's, with no unknown keys
    return out


class Rig:
    """A machine on a plain protocol core; ``play`` reads the playout like an output device."""

    def __init__(self, registry: ToolRegistry | None = None, **settings: object) -> None:
        self.playout = PlayoutBuffer()
        self.machine = LiveMachine(SessionSettings(api="live", **settings), self.playout, registry=registry)
        self.protocol = LiveProtocol()
        self.machine.configure(self.protocol)
        self.machine.attach(self.protocol)
        self.heard = np.zeros(0, dtype=np.int16)
        self.t = 0.0
        self.due: list[tuple[float, str]] = []  # frames the server streams, by arrival time
        self.events: list[object] = []

    def feed(self, text: str, now: float) -> list[object]:
        self.protocol.receive(text)
        out: list[object] = []
        for output in self.protocol.events():
            effects = self.machine.receive(output, now)
            out.extend(effects.events)
        return out

    def play(self, until: float) -> list[object]:
        events: list[object] = []
        while self.t + BLOCK / RATE <= until + 1e-9:
            while self.due and self.due[0][0] <= self.t + 1e-9:
                self.events.extend(self.feed(self.due.pop(0)[1], self.t))
            block = self.playout.read(BLOCK, self.t)
            self.heard = np.concatenate([self.heard, block])
            self.t += BLOCK / RATE
            events.extend(self.machine.tick(self.t).events)
        return events


def start(rig: Rig) -> list[dict[str, object]]:
    first = sent(rig.protocol)
    rig.feed(frame(type="session.started", event_id="e0", session=SESSION), 0.0)
    return first


def track(rig: Rig, speech: list[tuple[float, float]], total_s: float, lead: float = 0.3) -> None:
    """The server's output track as the service streams it: 100 ms frames, silence included, each sent ``lead`` s
    before its time on the timeline; ``speech`` is (start s, seconds) of each utterance, a tone that is never zero,
    with a transcript word per 200 ms sent as soon as its audio is (``WORDS``, from the start again each time)."""
    n = int(total_s * RATE)
    signal = np.zeros(n, np.int16)
    due = []
    for start, seconds in speech:
        a, b = int(start * RATE), int((start + seconds) * RATE)
        tone = (3000 * np.sin(np.arange(b - a) * 2 * np.pi * 220 / RATE)).astype(np.int16)
        tone[tone == 0] = 1
        signal[a:b] = tone
        for i, word in enumerate(WORDS[: int(seconds / 0.2)]):
            ms = int(start * 1000) + 200 * i
            due.append((max(0.0, ms / 1000 - lead), frame(
                type="session.output_transcript.delta", event_id=f"o{ms}", delta=(" " if i else "") + word,
                start_ms=ms, end_ms=ms + 200)))
    for i in range(0, n, 2400):
        due.append((max(0.0, i / RATE - lead), audio_delta(signal[i:i + 2400])))
    rig.due = sorted(rig.due + due, key=lambda d: d[0])
