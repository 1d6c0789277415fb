"""What the stand-in says, frame by frame: the utterance on the track, the outputs waiting, a fixture.

:class:`Speaker` owns the content of the output track (its framing and encoding are the
engine's). Outputs (scripted ``Say`` / ``Call``) wait in a queue with the earliest timeline
position the first may start at; when the track is free, a ``Say`` becomes an
:class:`~voxline.realtime.server.live.track.Utterance` and consecutive ``Call`` outputs are handed
to the engine's ``delegate`` (which returns the events of a delegation). A fixture plays over
everything. Words are reported as transcript events once their audio is out; a finished
utterance's words join the session's history.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from voxline.realtime.server.engine.scenario import Call, Output, Say
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.live.audio import Pcm
from voxline.realtime.server.live.track import Utterance, ms

__all__ = ["Delegate", "Make", "Speaker"]

Make = Callable[..., dict[str, Any]]
"""Builds a server event: ``make(type, client_event_id, **fields)``."""

Delegate = Callable[[list[Call], deque[Output], int], list[dict[str, Any]]]
"""Hands scripted calls over (calls, what follows them, timeline ms) and returns the delegation's events."""


@dataclass(slots=True)
class _Pending:
    """Outputs waiting their turn on the track, and the earliest timeline position for the first."""

    outputs: deque[Output]
    at: int


class Speaker:
    """The track's content (see the module docstring); positions are 24 kHz samples on the timeline."""

    def __init__(self, frame: int, voices: VoiceCache, history: deque[tuple[str, str]]) -> None:
        self.frame = frame
        self.rendered = 0
        self.current: Utterance | None = None
        self.fixture: Utterance | None = None
        self._fixture_event: str | None = None
        self._pending: _Pending | None = None
        self._voices = voices
        self._history = history
        self._said: list[str] = []  # words of the current utterance sent so far

    @property
    def busy(self) -> bool:
        """Speaking, or about to."""
        return self.current is not None or self._pending is not None

    def queue(self, outputs: deque[Output], at: int | None = None) -> None:
        """Say ``outputs`` after what waits already, the first not before ``at`` (default: now)."""
        if not outputs:
            return
        if self._pending is not None:
            self._pending.outputs.extend(outputs)
        else:
            self._pending = _Pending(outputs, max(at if at is not None else self.rendered, self.rendered))

    def interrupt(self, at: int) -> None:
        """Stop speaking at ``at``; drop what was still to say."""
        if self.current is not None:
            self.current.cut(at)
        self._pending = None

    def play_fixture(self, samples: Pcm, client_event_id: str | None) -> None:
        self.interrupt(self.rendered)
        self.fixture = Utterance("", samples, self.rendered, words=[])
        self._fixture_event = client_event_id

    def speech_needed(self) -> list[str]:
        pending = self._pending
        if pending is None or not pending.outputs:
            return []
        head = pending.outputs[0]
        return [head.text] if isinstance(head, Say) and head.text not in self._voices else []

    def render(self, make: Make, delegate: Delegate) -> tuple[Pcm, list[dict[str, Any]]]:
        """The next frame's samples, and the events that go with it (delegations, words, fixture played)."""
        a = self.rendered
        b = a + self.frame
        events = self._start_pending(a, b, make, delegate)
        frame = np.zeros(self.frame, dtype=np.int16)
        for source in (self.current, self.fixture):
            if source is not None:
                source.render_into(frame, a)
        self.rendered = b
        current = self.current
        if current is not None:
            for word in current.words_done_by(b):
                self._said.append(word.text)
                events.append(make("session.output_transcript.delta", None, delta=word.text,
                                   start_ms=ms(word.start), end_ms=ms(word.end)))
            if current.finished_by(b):
                self.finish()
                if current.cut_at is None and self._pending is not None:
                    self._pending.at = max(self._pending.at, current.end)
        if self.fixture is not None and b >= self.fixture.end:
            self.fixture = None
            events.append(make("session.output_audio.fixture.played", self._fixture_event))
        return frame, events

    def finish(self) -> None:
        """The current utterance is over (or the session is): its words join the history."""
        if self.current is not None and self._said:
            self._history.append(("assistant", "".join(self._said).strip()))
        self.current = None
        self._said = []

    def _start_pending(self, a: int, b: int, make: Make, delegate: Delegate) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        pending = self._pending
        while self.current is None and self.fixture is None and pending is not None and pending.at < b:
            head = pending.outputs[0]
            if isinstance(head, Say):
                samples = self._voices.get(head.text)
                if samples is None:
                    break  # waits for its speech; starts in a later frame
                self.current = Utterance(head.text, samples, max(pending.at, a))
                self._said = []
                pending.outputs.popleft()
            else:
                calls: list[Call] = []
                while pending.outputs and isinstance(call := pending.outputs[0], Call):
                    calls.append(call)
                    pending.outputs.popleft()
                then, pending.outputs = pending.outputs, deque()
                events += delegate(calls, then, ms(max(pending.at, a)))
            if not pending.outputs:
                self._pending = pending = None
        return events
