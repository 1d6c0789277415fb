"""Figures of a GPT-Live session, sans-I/O: reply latency as heard and barge-in reaction.

The same records as a Realtime session's (:mod:`voxline.session.metrics.records`), so the
replay's summary, farms and the report read them unchanged. One *turn* per assistant
utterance: the user's speech ended where the last input transcript delta before it ended
(its ``end_ms`` on the session timeline, which runs with the caller's audio: placed on the listener's
clock where that audio was captured, :meth:`LiveMetrics.input_sent`),
and the reply's latency as heard runs from there to its first sample heard. One record per
cut: trigger → silence (the fade's end).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field

from voxline.audio.ledger import Cut
from voxline.audio.playout import PlayoutBuffer
from voxline.base.ordered import keep_newest

from ..metrics.input_timeline import InputTimeline
from ..metrics.records import BargeInRecord, ItemRecord, MetricsReport, SpeechSegment, ToolRecord, TurnRecord
from ..tools.events import ToolEvent, ToolFinished, ToolStarted

__all__ = ["KEEP", "LiveMetrics"]

KEEP = 10_000  # records of each kind kept (utterances, cuts, stretches of speech, tool calls), newest


@dataclass(slots=True)
class _Utt:
    uid: str
    first_delta_at: float
    speech_end_at: float | None
    first_heard_at: float | None = None
    cut: bool = False
    barge_ins: int = 0
    heard_ms: float | None = None  # settled once the playout let the utterance go
    received_ms: float | None = None


@dataclass(slots=True)
class LiveMetrics:
    playout: PlayoutBuffer
    _input: InputTimeline | None = None  # where the caller's audio sent on this session was captured
    _utts: dict[str, _Utt] = field(default_factory=dict)
    _order: deque[str] = field(default_factory=deque)
    _barge: deque[BargeInRecord] = field(default_factory=lambda: deque(maxlen=KEEP))
    _speech: deque[SpeechSegment] = field(default_factory=lambda: deque(maxlen=KEEP))
    _tools: dict[str, ToolRecord] = field(default_factory=dict)
    _user_end_ms: int | None = None  # the end of the latest user words on the timeline
    _user_start_ms: int | None = None
    _user_item: str | None = None  # the id the session gave the stretch of speech under way
    _user_prefix: str = "live_user"  # ids of this connection's stretches (a new session's timeline starts at 0)

    def new_timeline(self, user_prefix: str) -> None:
        """A new session: its timeline starts again at zero, and its first words begin a new stretch."""
        if self._user_start_ms is not None and self._user_end_ms is not None:
            self._close_speech()
        self._user_start_ms = self._user_end_ms = self._user_item = None
        self._user_prefix = user_prefix
        self._input = None

    def input_sent(self, samples: int, end: float, rate: int) -> None:
        """``samples`` of the caller's audio at ``rate``, the last captured at ``end``, went to the session (after
        those sent before): the timeline ran on by as much."""
        if self._input is None:
            self._input = InputTimeline(rate)
        self._input.sent_audio(samples, end)

    @property
    def sent_ms(self) -> float:
        """The caller's audio sent to this session so far, in ms of its timeline."""
        return 0.0 if self._input is None else self._input.sent_ms

    def _time(self, ms: int) -> float | None:
        """The listener time at which the caller's audio at ``ms`` on the timeline was captured."""
        return None if self._input is None else self._input.at(ms)

    def user_words(self, start_ms: int, end_ms: int) -> bool:
        """The user's words on the timeline; True when they begin a new stretch of speech."""
        fresh = self._user_start_ms is None or (self._user_end_ms is not None and start_ms - self._user_end_ms > 500)
        if fresh:
            if self._user_start_ms is not None and self._user_end_ms is not None:
                self._close_speech()
            self._user_start_ms = start_ms
            self._user_item = f"{self._user_prefix}{start_ms}"
        self._user_end_ms = end_ms
        return fresh

    @property
    def user_item(self) -> str | None:
        """The id of the stretch of user speech under way (the one :meth:`user_words` began last)."""
        return self._user_item

    def _segment(self) -> SpeechSegment | None:
        if self._user_start_ms is None or self._user_end_ms is None:
            return None
        start, end = self._time(self._user_start_ms), self._time(self._user_end_ms)
        if start is None or end is None:
            return None
        return SpeechSegment(self._user_item, start, end, start, end, "live_transcript")

    def _close_speech(self) -> None:
        if (segment := self._segment()) is not None:
            self._speech.append(segment)

    def utterance(self, uid: str, now: float) -> None:
        end = None if self._user_end_ms is None else self._time(self._user_end_ms)
        if self._user_start_ms is not None:
            self._close_speech()
            self._user_start_ms = None
        self._utts[uid] = _Utt(uid, now, end)
        self._order.append(uid)
        while len(self._order) > KEEP:
            self._utts.pop(self._order.popleft(), None)

    def settle(self, uid: str) -> None:
        """The playout is about to let ``uid`` go: keep what was heard and received of it."""
        u = self._utts.get(uid)
        if u is not None:
            rate = self.playout.rate
            u.heard_ms = self.playout.heard_samples(uid, 0, float("inf")) * 1000 / rate
            u.received_ms = self.playout.received_samples(uid, 0) * 1000 / rate

    def first_heard(self, uid: str, at: float) -> float | None:
        """The reply latency as heard (s), when the user's speech end is known."""
        u = self._utts.get(uid)
        if u is None or u.first_heard_at is not None:
            return None
        u.first_heard_at = at
        return at - u.speech_end_at if u.speech_end_at is not None else None

    def cut(self, trigger: str, at: float, cut: Cut, received: int, heard_text: str, full_text: str) -> BargeInRecord:
        rate = cut.rate
        record = BargeInRecord(
            trigger=trigger, at=at, silent_at=cut.end, item_id=cut.item_id, heard_ms=cut.heard_ms,
            received_ms=received * 1000 / rate, audio_end_ms=None, applied_ms=None,
            reaction_ms=(cut.end - at) * 1000, onset_at=None, onset_to_silence_ms=None, cut_error_ms=None,
            in_device_ms=cut.revoked_samples * 1000 / rate, unplayed_ms=cut.flushed_samples * 1000 / rate,
            heard_text=heard_text, full_text=full_text, text_method="live_timeline")
        self._barge.append(record)
        if cut.item_id in self._utts:
            self._utts[cut.item_id].cut = True
            self._utts[cut.item_id].barge_ins += 1
        return record

    def tool(self, event: ToolEvent, now: float) -> None:
        match event:
            case ToolStarted():
                self._tools[event.call_id] = ToolRecord(event.call_id, event.name, now, now)
                keep_newest(self._tools, KEEP)
            case ToolFinished():
                rec = self._tools.get(event.call_id)
                if rec is not None:
                    self._tools[event.call_id] = dataclasses.replace(rec, finished_at=now, ok=event.ok)
            case _:
                pass

    def report(self, now: float) -> MetricsReport:
        rate = self.playout.rate
        turns, items = [], []
        for index, uid in enumerate(self._order):
            u = self._utts[uid]
            heard = u.heard_ms if u.heard_ms is not None else self.playout.heard_samples(uid, 0, now) * 1000 / rate
            received = u.received_ms if u.received_ms is not None else self.playout.received_samples(uid, 0) * 1000 / rate
            latency = (u.first_heard_at - u.speech_end_at) * 1000 \
                if u.first_heard_at is not None and u.speech_end_at is not None else None
            turns.append(TurnRecord(index, u.speech_end_at, None, u.first_delta_at, u.first_heard_at, latency,
                                    None if u.speech_end_at is None else (u.first_delta_at - u.speech_end_at) * 1000,
                                    None if u.first_heard_at is None else (u.first_heard_at - u.first_delta_at) * 1000,
                                    None, (uid,), ("cut" if u.cut else "completed",), 0, 0.0, u.barge_ins))
            items.append(ItemRecord(uid, 0, None, u.first_delta_at, u.first_heard_at, heard, received, cut=u.cut))
        under_way = self._segment() if self._user_start_ms is not None else None  # the words so far of a stretch not over
        speech = (*self._speech, under_way) if under_way is not None else tuple(self._speech)
        return MetricsReport(now, tuple(turns), tuple(self._barge), tuple(items), speech,
                             tuple(self._tools.values()), self.playout.underrun_events,
                             self.playout.underrun_samples * 1000 / rate)

    def sizes(self) -> dict[str, int]:
        """Records held per kind, to check memory stays bounded."""
        return {"metrics_utterances": len(self._utts), "metrics_cuts": len(self._barge),
                "metrics_speech": len(self._speech), "metrics_tools": len(self._tools)}
