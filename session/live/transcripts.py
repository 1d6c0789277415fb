"""The words of a GPT-Live session, the user's and the model's, placed on the session timeline (sans-I/O).

Both transcripts come as deltas with ``start_ms`` / ``end_ms`` on the session timeline
(docs/protocol.md §14). A reply's words go to the utterance they lie in
(:meth:`~.timeline.LiveTimeline.transcript`), and are not shown once that utterance was cut. The
user's words make the stretches of speech the metrics measure (a new one starts a user turn) and
go into the :class:`~.history.HeardHistory`. Times the session cannot have reached yet (past the
audio it sent or the track it received, and the time since it started, by more than
:data:`INPUT_SLACK_MS` / :data:`OUTPUT_SLACK_MS`) are refused with a ``malformed_event`` error:
the words stand, placed nowhere.
"""

from __future__ import annotations

from voxline.realtime.live import events as lv

from ..events import SessionError, SessionEvent, SpeechStarted, TranscriptDelta
from ..settings import SessionSettings
from ..tools.rounds import ToolRounds
from .history import HeardHistory
from .metrics import LiveMetrics
from .timeline import LiveTimeline

__all__ = ["INPUT_SLACK_MS", "OUTPUT_SLACK_MS", "LiveTranscripts"]

INPUT_SLACK_MS = 10_000  # how far past the input sent a user transcript may be placed before its times are refused
OUTPUT_SLACK_MS = 120_000  # how far past the track received a reply's words may be placed (text runs ahead of audio)


class LiveTranscripts:
    """Transcript deltas into events, the metrics and the history (see the module docstring)."""

    def __init__(self, settings: SessionSettings, metrics: LiveMetrics, history: HeardHistory,
                 rounds: ToolRounds) -> None:
        self.settings = settings
        self.metrics = metrics
        self.history = history
        self.rounds = rounds
        self._user_item = "live_user"  # the user's stretch of speech under way

    def reply(self, delta: lv.LiveOutputTranscriptDelta, now: float, timeline: LiveTimeline,
              started_at: float | None) -> list[SessionEvent]:
        """Words of the model's reply, on ``timeline`` (that of the session started at ``started_at``)."""
        if ahead := self._past_the_track(delta.start_ms, now, timeline, started_at):
            return [SessionError(ahead, "malformed_event"),  # its words stand, placed nowhere
                    TranscriptDelta("assistant", "live_utt", delta.delta, now)]
        utt = timeline.transcript(delta.start_ms, delta.end_ms, delta.delta)
        if utt is not None and utt.cut:
            return []
        return [TranscriptDelta("assistant", utt.uid if utt is not None else "live_utt", delta.delta, now)]

    def user(self, delta: lv.LiveInputTranscriptDelta, now: float, started_at: float | None
             ) -> tuple[list[SessionEvent], bool]:
        """Words of the user's, and whether their times stand (then they may talk over the reply audible now)."""
        if late := self._past_the_input(delta.start_ms, now, started_at):
            self.history.user(self._user_item, delta.delta)  # its words stand; its times count for nothing
            return [SessionError(late, "malformed_event"), TranscriptDelta("user", self._user_item, delta.delta, now)
                    ], False
        events: list[SessionEvent] = []
        if self.metrics.user_words(delta.start_ms, delta.end_ms):  # a new stretch of speech
            self.rounds.user_turn()
            self._user_item = self.metrics.user_item or f"live_user{delta.start_ms}"
            events.append(SpeechStarted(now, self._user_item, delta.start_ms))
        self.history.user(self._user_item, delta.delta)
        events.append(TranscriptDelta("user", self._user_item, delta.delta, now))
        return events, True

    def _past_the_input(self, start_ms: int, now: float, started_at: float | None) -> str | None:
        """Why words the server places at ``start_ms`` of its timeline cannot be there: later than both the audio
        this session sent and the time since it started, by more than :data:`INPUT_SLACK_MS` (the timeline is
        the caller's audio; one far ahead would make every figure of the turn nonsense). None if they can."""
        if started_at is None or self.settings.call_id is not None:  # a sideband came in mid-session
            return None
        limit = max(self.metrics.sent_ms, (now - started_at) * 1000) + INPUT_SLACK_MS
        if start_ms <= limit:
            return None
        return (f"ignored the times of a user transcript delta: {start_ms} ms on the session timeline is past the "
                f"{limit - INPUT_SLACK_MS:.0f} ms of audio the session has had")

    def _past_the_track(self, start_ms: int, now: float, timeline: LiveTimeline, started_at: float | None
                        ) -> str | None:
        """Why words of a reply placed at ``start_ms`` cannot be there: later than both the track received and the
        time since the session started, by more than :data:`OUTPUT_SLACK_MS` (kept until their audio came, words
        placed far ahead would pile up for ever). None if they can."""
        if started_at is None or self.settings.call_id is not None:  # a sideband came in mid-session
            return None
        track_ms = timeline.position * 1000 / timeline.rate
        limit = max(track_ms, (now - started_at) * 1000) + OUTPUT_SLACK_MS
        if start_ms <= limit:
            return None
        return (f"ignored the times of an output transcript delta: {start_ms} ms on the session timeline is past the "
                f"{limit - OUTPUT_SLACK_MS:.0f} ms of track the session has had")
