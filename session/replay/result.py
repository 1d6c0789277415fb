"""What a replay produced: the heard timeline, the barge-ins, and a per-turn summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..metrics import MetricsReport
from ..events import (
    AssistantAudioStarted,
    BargeIn,
    FalseBargeIn,
    PlaybackHeld,
    ResponseFinished,
    SpeechStarted,
    TranscriptDone,
)
from ..tools import ToolFinished

__all__ = ["ReplayResult", "TurnSummary", "describe"]


@dataclass(frozen=True)
class TurnSummary:
    response_id: str | None
    status: str
    reason: str | None
    at: float


@dataclass
class ReplayResult:
    # int16, sample n = what the listener heard when input sample n was captured (None: it went to a file)
    heard: np.ndarray | None
    events: list[Any] = field(default_factory=list)  # session and tool events, in the order they happened
    underrun_events: int = 0
    underrun_samples: int = 0
    duration_s: float = 0.0  # listener time covered
    metrics: MetricsReport | None = None  # the session's figures when the replay ended

    @property
    def barge_ins(self) -> list[BargeIn]:
        return [e for e in self.events if isinstance(e, BargeIn)]

    @property
    def turns(self) -> list[TurnSummary]:
        return [TurnSummary(e.response_id, e.status, e.reason, e.at) for e in self.events if isinstance(e, ResponseFinished)]

    @property
    def heard_speech(self) -> bool:
        """Whether the server's voice activity detection found speech in the recording."""
        return any(isinstance(e, SpeechStarted) for e in self.events)

    def summary_lines(self) -> list[str]:
        """One line per turn and per barge-in, in time order."""
        lines: list[tuple[float, int, str]] = []
        at = 0.0
        for e in self.events:
            at = getattr(e, "at", at)  # tool events are placed after the last timed event
            if (described := describe(e, at)) is not None:
                lines.append(described)
        lines.sort(key=lambda x: (x[0], x[1]))
        return [text for _t, _order, text in lines]


def describe(e: Any, at: float) -> tuple[float, int, str] | None:
    """The summary line of one event, with its time and its rank among lines of the same time
    (speech, barge-in, audio, response end, tool); None for events the summary leaves out."""
    match e:
        case ResponseFinished(response_id=rid, status=status, reason=reason, at=t):
            why = f" ({reason})" if reason else ""
            return t, 3, f"{t:7.3f}s  response {rid} {status}{why}"
        case ToolFinished():
            verdict = "ok" if e.ok else "failed"
            return at, 4, f"{at:7.3f}s  tool {e.name} ({e.call_id}) {verdict} in {e.duration_s * 1000:.0f} ms: {e.output[:60]}"
        case SpeechStarted(at=t, audio_start_ms=start_ms):
            return t, 0, f"{t:7.3f}s  user speech started (server VAD, buffer at {start_ms} ms)"
        case AssistantAudioStarted(item_id=item, at=t, reply_latency=latency):
            if latency is None:
                after = ""
            elif latency < 0:  # the first sample played in the block that delivered speech_stopped
                after = ", in the same 20 ms block as speech_stopped"
            else:
                after = f", {latency * 1000:.0f} ms after speech_stopped"
            return t, 2, f"{t:7.3f}s  assistant audio {item} reaches the listener{after}"
        case BargeIn():
            return e.at, 1, f"{e.at:7.3f}s  {e.describe()}"
        case TranscriptDone(role="user", text=text):
            return at, 0, f"{at:7.3f}s  user transcript: {text[:60]!r}"
        case PlaybackHeld():
            return e.at, 0, (f"{e.at:7.3f}s  local VAD: speech from {e.onset:.3f}s, assistant held at "
                             f"{e.heard_ms:.1f} ms heard of {e.item_id}")
        case FalseBargeIn():
            then = "resumed from the heard point" if e.resumed else "cut at the heard point"
            return e.at, 0, f"{e.at:7.3f}s  false barge-in: the server never confirmed the hold at {e.held_at:.3f}s; {then}"
        case _:
            return None

