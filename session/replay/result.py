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

__all__ = ["ReplayResult", "TurnSummary"]



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

    def summary_lines(self) -> list[str]:
        """One line per turn and per barge-in, in time order."""
        lines: list[tuple[float, int, str]] = []
        for t in self.turns:
            why = f" ({t.reason})" if t.reason else ""
            lines.append((t.at, 3, f"{t.at:7.3f}s  response {t.response_id} {t.status}{why}"))
        at = 0.0
        for e in self.events:
            at = getattr(e, "at", at)  # tool events are placed after the last timed event
            if isinstance(e, ToolFinished):
                verdict = "ok" if e.ok else "failed"
                lines.append((at, 4, f"{at:7.3f}s  tool {e.name} ({e.call_id}) {verdict} in {e.duration_s * 1000:.0f} ms: "
                                     f"{e.output[:60]}"))
            if isinstance(e, TranscriptDone) and e.role == "user":
                lines.append((at, 0, f"{at:7.3f}s  user transcript: {e.text[:60]!r}"))
            if isinstance(e, SpeechStarted):
                lines.append((e.at, 0, f"{e.at:7.3f}s  user speech started (server VAD, buffer at {e.audio_start_ms} ms)"))
            elif isinstance(e, PlaybackHeld):
                lines.append((e.at, 0, f"{e.at:7.3f}s  local VAD: speech from {e.onset:.3f}s, assistant held at "
                                       f"{e.heard_ms:.1f} ms heard of {e.item_id}"))
            elif isinstance(e, FalseBargeIn):
                then = "resumed from the heard point" if e.resumed else "cut at the heard point"
                lines.append((e.at, 0, f"{e.at:7.3f}s  false barge-in: the server never confirmed the hold at "
                                       f"{e.held_at:.3f}s; {then}"))
            elif isinstance(e, AssistantAudioStarted):
                latency = f", {e.reply_latency * 1000:.0f} ms after speech_stopped" if e.reply_latency is not None else ""
                lines.append((e.at, 2, f"{e.at:7.3f}s  assistant audio {e.item_id} reaches the listener{latency}"))
        for b in self.barge_ins:
            if b.server_cuts:
                cut = f"the server cuts its own buffer (WebRTC); the listener heard {b.heard_ms:.1f} ms of {b.item_id}"
            elif b.audio_end_ms is not None:
                cut = f"truncate {b.item_id} at {b.audio_end_ms} ms (heard {b.heard_ms:.1f} of {b.received_ms:.1f} ms received)"
            elif b.item_id is not None:
                cut = f"no cut needed: {b.item_id} heard {b.heard_ms:.1f} of {b.received_ms:.1f} ms"
            else:
                cut = "nothing was playing"
            extra = f", deleted {', '.join(b.deleted)}" if b.deleted else ""
            extra += ", sent response.cancel" if b.cancelled else ""
            lines.append((b.at, 1, f"{b.at:7.3f}s  barge-in ({b.trigger}): {cut}{extra}; silent after {b.reaction_s * 1000:.1f} ms"))
        lines.sort(key=lambda x: (x[0], x[1]))
        return [text for _t, _order, text in lines]
