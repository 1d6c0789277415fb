"""The session metrics tracker: sans-I/O, fed by what the session already handles.

The session calls, with the listener time ``now`` (:meth:`~voxline.audio.clocked_output.Output.now`):

* :meth:`SessionMetrics.wire` with each protocol output (audio deltas: when the first
  one of a turn came, how much of each item arrived; tool calls requested);
* :meth:`SessionMetrics.effects` with each :class:`~voxline.session.core.CoreEffects` the core
  returned (speech, responses, first samples heard, barge-ins); it answers with
  :class:`~voxline.session.events.TurnMetrics` and
  :class:`~voxline.session.events.HeardTranscript` events to publish;
* :meth:`SessionMetrics.input_sent` when microphone samples went to a connection, which
  places the server's ``audio_start_ms``/``audio_end_ms`` on the listener timeline;
* :meth:`SessionMetrics.tool` with each tool event.

It reads the playout's heard ledger (queries only) and, when given, the conversation
mirror's heard-text estimate. History is kept for the last ``keep`` records of each kind
(:data:`KEEP`: hours of turns; a kiosk's session of days would otherwise hold hundreds of
thousands of objects, and every full collection of the garbage collector walks them all).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from itertools import islice
from dataclasses import dataclass, field, replace

from voxline.audio.playout import PlayoutBuffer
from voxline.realtime import events as ev
from voxline.realtime.protocol import ProtocolOutput

from ..core import CoreEffects
from ..events import (
    AssistantAudioStarted,
    BargeIn,
    CutAdjusted,
    HeardTranscript,
    ResponseFinished,
    ResponseStarted,
    SessionEvent,
    SpeechStarted,
    SpeechStopped,
    TurnMetrics,
)
from ..mirror import ConversationMirror
from ..tools.events import ToolEvent, ToolFinished, ToolStarted
from .input_timeline import InputTimeline
from .records import BargeInRecord, ItemRecord, MetricsReport, SpeechSegment, ToolRecord, TurnRecord

__all__ = ["KEEP", "SessionMetrics"]

KEEP = 2_000
"""Records of each kind a session's metrics keep, the newest (about three hours of turns at one every 6 s)."""

_LIVE_ITEMS = 64  # assistant audio parts followed at once


def _ms(later: float | None, earlier: float | None) -> float | None:
    return None if later is None or earlier is None else (later - earlier) * 1000.0


@dataclass
class _Item:
    key: tuple[str, int]
    response_id: str | None
    first_delta_at: float
    received: int = 0
    heard: int = 0
    first_heard_at: float | None = None
    complete: bool = False
    cut: bool = False
    deleted: bool = False

    def record(self, rate: int) -> ItemRecord:
        return ItemRecord(self.key[0], self.key[1], self.response_id, self.first_delta_at, self.first_heard_at,
                          self.heard * 1000 / rate, self.received * 1000 / rate, self.cut, self.deleted)


@dataclass
class _Turn:
    index: int
    underrun_base: tuple[int, int]
    speech_end_at: float | None = None
    speech_stopped_at: float | None = None
    first_delta_at: float | None = None
    first_heard_at: float | None = None
    responses: dict[str, str | None] = field(default_factory=dict)  # id → final status (None: running)
    barge_ins: int = 0
    underruns: tuple[int, int] | None = None  # frozen once published

    def record(self, underruns: tuple[int, int], rate: int) -> TurnRecord:
        events, samples = self.underruns or (underruns[0] - self.underrun_base[0], underruns[1] - self.underrun_base[1])
        first_delta = _ms(self.first_delta_at, self.speech_end_at)
        return TurnRecord(
            index=self.index, speech_end_at=self.speech_end_at, speech_stopped_at=self.speech_stopped_at,
            first_delta_at=self.first_delta_at, first_heard_at=self.first_heard_at,
            reply_latency_ms=_ms(self.first_heard_at, self.speech_end_at), first_delta_ms=first_delta,
            client_ms=_ms(self.first_heard_at, self.first_delta_at),
            vad_ms=_ms(self.speech_stopped_at, self.speech_end_at),
            response_ids=tuple(self.responses), statuses=tuple(s or "in_progress" for s in self.responses.values()),
            underruns=events, underrun_ms=samples * 1000 / rate, barge_ins=self.barge_ins,
        )


@dataclass
class _Cut:
    record: BargeInRecord
    key: tuple[str, int] | None
    measured: bool = False
    heard_after_ms: float | None = None  # the ledger's count once the fade was over


class SessionMetrics:
    """See the module docstring. ``silence_ms``/``padding_ms``: the server VAD's settings."""

    def __init__(self, playout: PlayoutBuffer, mirror: ConversationMirror | None = None, *,
                 received: Callable[[str, int], int], silence_ms: int = 0, padding_ms: int = 0,
                 keep: int = KEEP) -> None:
        self.playout = playout
        self._received = received  # samples received of (item, content index): the protocol core's tally
        self.mirror = mirror
        self.rate = playout.rate
        self.silence_s = silence_ms / 1000.0
        self.padding_s = padding_ms / 1000.0
        self._input: InputTimeline | None = None  # the input sent on this connection, on the listener timeline
        self._connection: int | None = None
        self._turns: deque[_Turn] = deque(maxlen=keep)
        self._turn: _Turn | None = None
        self._count = 0
        self._speech: deque[SpeechSegment] = deque(maxlen=keep)
        self._open_speech: SpeechSegment | None = None
        self._live: dict[tuple[str, int], _Item] = {}
        self._items: deque[_Item] = deque(maxlen=keep)
        self._cuts: deque[_Cut] = deque(maxlen=keep)
        self._unmeasured: list[_Cut] = []
        self._running: set[str] = set()  # tool calls requested and not answered yet
        self._tools: dict[str, ToolRecord] = {}
        self._tool_order: deque[str] = deque()
        self._keep = keep

    # ------------------------------------------------------------------ feeding
    def input_sent(self, samples: int, now: float, connection: object = None) -> None:
        """``samples`` of microphone audio, the last captured at ``now``, went to ``connection`` (after those sent
        to it before)."""
        if self._connection != id(connection) or self._input is None:
            self._connection = id(connection)
            self._input = InputTimeline(self.rate)
        self._input.sent_audio(samples, now)

    def wire(self, output: ProtocolOutput, now: float) -> None:
        """One protocol output, as the session received it."""
        match output:
            case ev.ResponseOutputAudioDelta():
                self._on_audio(output, now)
            case ev.ResponseOutputAudioDone():
                item = self._live.get((output.item_id, output.content_index))
                if item is not None:
                    item.complete = True
            case ev.ResponseFunctionCallArgumentsDone():
                if output.call_id not in self._tools:
                    self._running.add(output.call_id)
                    self._remember_tool(ToolRecord(output.call_id, output.name, now))
            case _:
                pass

    def tool(self, event: ToolEvent, now: float) -> None:
        """A tool started or finished."""
        old = self._tools.get(event.call_id)
        match event:
            case ToolStarted():
                base = old or ToolRecord(event.call_id, event.name, now)
                self._remember_tool(replace(base, started_at=now))
            case ToolFinished():
                base = old or ToolRecord(event.call_id, event.name, now)
                self._remember_tool(replace(base, finished_at=now, ok=event.ok))
                self._running.discard(event.call_id)

    def effects(self, effects: CoreEffects, now: float) -> list[SessionEvent]:
        """One call's effects; returns the events to publish after them."""
        out: list[SessionEvent] = []
        for event in effects.events:
            match event:
                case SpeechStarted():
                    self._on_speech_started(event)
                case SpeechStopped():
                    out += self._on_speech_stopped(event)
                case ResponseStarted():
                    turn = self._turn if self._turn is not None else self._open_turn()
                    turn.responses[event.response_id] = None
                case ResponseFinished() if event.response_id is not None:
                    for recent in (self._turn, *islice(reversed(self._turns), 4)):
                        if recent is not None and event.response_id in recent.responses:
                            recent.responses[event.response_id] = event.status
                            break
                case AssistantAudioStarted():
                    self._on_first_heard(event)
                case BargeIn():
                    out += self._on_barge_in(event)
                case CutAdjusted():
                    self._on_cut_adjusted(event)
                case _:
                    pass
        self._observe(now)
        out += self._maybe_publish(now)
        return out

    # ------------------------------------------------------------------ turns and speech
    def _at(self, ms: int | None) -> float | None:
        return None if ms is None or self._input is None else self._input.at(ms)

    def _on_speech_started(self, event: SpeechStarted) -> None:
        start = self._at(event.audio_start_ms)
        if start is None:
            start = event.at
        self._open_speech = SpeechSegment(event.item_id, start, None, start + self.padding_s, None)

    def _on_speech_stopped(self, event: SpeechStopped) -> list[SessionEvent]:
        end = self._at(event.audio_end_ms)
        speech_end = None if end is None else end - self.silence_s
        opened = self._open_speech
        if opened is not None:
            if speech_end is not None:
                speech_end = max(speech_end, opened.speech_start)
            self._speech.append(SpeechSegment(opened.item_id, opened.start, end, opened.speech_start, speech_end))
            self._open_speech = None
        out = self._close_turn(event.at)
        turn = self._open_turn()
        turn.speech_end_at = speech_end if speech_end is not None else event.at
        turn.speech_stopped_at = event.at
        return out

    def _open_turn(self) -> _Turn:
        self._close_turn(None)
        self._turn = _Turn(self._count, self._underruns())
        self._count += 1
        return self._turn

    def _close_turn(self, at: float | None) -> list[SessionEvent]:
        turn, self._turn = self._turn, None
        if turn is None:
            return []
        out = self._publish(turn, at) if turn.underruns is None and at is not None else []
        self._turns.append(turn)
        return out

    def _publish(self, turn: _Turn, at: float) -> list[SessionEvent]:
        now = self._underruns()
        turn.underruns = (now[0] - turn.underrun_base[0], now[1] - turn.underrun_base[1])
        return [TurnMetrics(at, turn.record(now, self.rate))]

    def _maybe_publish(self, now: float) -> list[SessionEvent]:
        """Publish the open turn once its reply was heard, every response ended and the playout drained."""
        turn = self._turn
        if turn is None or turn.underruns is not None or turn.first_heard_at is None:
            return []
        if None in turn.responses.values() or self._tools_running():
            return []
        playout = self.playout
        if playout.queued_samples or playout.pending_tail_samples or playout.playing_at(now) is not None:
            return []
        return self._publish(turn, now)

    def _tools_running(self) -> bool:
        return bool(self._running)

    def _underruns(self) -> tuple[int, int]:
        return self.playout.underrun_events, self.playout.underrun_samples

    # ------------------------------------------------------------------ items
    def _on_audio(self, delta: ev.ResponseOutputAudioDelta, now: float) -> None:
        key = (delta.item_id, delta.content_index)
        item = self._live.get(key)
        if item is None:
            item = self._live[key] = _Item(key, delta.response_id, now)
            turn = self._turn if self._turn is not None else self._open_turn()
            if turn.first_delta_at is None:
                turn.first_delta_at = now
        item.received = self._received(*key)

    def _on_first_heard(self, event: AssistantAudioStarted) -> None:
        for item in self._live.values():
            if item.key[0] == event.item_id and item.first_heard_at is None:
                item.first_heard_at = event.at
                break
        turn = self._turn
        if turn is not None and turn.first_heard_at is None:
            turn.first_heard_at = event.at

    @property
    def next_due(self) -> float:
        """The listener time a cut's silence is next due to be measured (inf when none waits)."""
        return min((cut.record.silent_at for cut in self._unmeasured), default=math.inf)

    def observe(self, now: float) -> None:
        """Follow the heard counts of the items still playing now (before the playout may forget one)."""
        self._observe(now)

    def _observe(self, now: float) -> None:
        """Heard counts of the items still playing; settle those that are over."""
        for key, item in list(self._live.items()):
            if item.cut or item.deleted:
                self._settle(key)
                continue
            heard = self.playout.heard_samples(key[0], key[1], now)
            if heard == 0 and item.heard > 0:  # the playout retired it: everything of it that played was heard
                if item.complete:
                    item.heard = item.received
                self._settle(key)
                continue
            item.heard = max(item.heard, heard)
            if item.complete and item.heard >= item.received:
                self._settle(key)
        while len(self._live) > _LIVE_ITEMS:  # parts whose fate never came: stop following the oldest
            self._settle(next(iter(self._live)))
        if self._unmeasured:
            for cut in [c for c in self._unmeasured if now >= c.record.silent_at]:
                self._unmeasured.remove(cut)
                self._measure(cut, now)

    def _settle(self, key: tuple[str, int]) -> None:
        self._items.append(self._live.pop(key))

    # ------------------------------------------------------------------ barge-ins
    def _on_barge_in(self, event: BargeIn) -> list[SessionEvent]:
        cut = event.cut
        key = (event.item_id, cut.content_index if cut is not None else 0) if event.item_id is not None else None
        item = self._live.get(key) if key is not None else None
        if item is not None:
            item.cut = True
            item.heard = round(event.heard_ms * self.rate / 1000)
        for other in self._live.values():
            if other.key[0] in event.deleted:
                other.deleted, other.heard = True, 0
        silent_at = cut.end if cut is not None else event.at + event.reaction_s
        onset = self._onset(event)
        text = self.mirror.get(event.item_id) if self.mirror is not None and event.item_id is not None else None
        heard = text.heard if text is not None and text.has_audio else None
        record = BargeInRecord(
            trigger=event.trigger, at=event.at, silent_at=silent_at, item_id=event.item_id, heard_ms=event.heard_ms,
            received_ms=event.received_ms, audio_end_ms=event.audio_end_ms, applied_ms=event.audio_end_ms,
            reaction_ms=event.reaction_s * 1000.0, onset_at=onset, onset_to_silence_ms=_ms(silent_at, onset),
            cut_error_ms=None, in_device_ms=event.in_device_ms, unplayed_ms=event.unplayed_ms, deleted=event.deleted,
            heard_text=None if heard is None else heard.text, full_text=None if text is None else text.text,
            text_method=None if heard is None else heard.method,
        )
        self._cuts.append(entry := _Cut(record, key))
        self._unmeasured.append(entry)
        if self._turn is not None:
            self._turn.barge_ins += 1
        if heard is None or text is None or event.item_id is None:
            return []
        # over WebRTC no audio comes as events: what the item holds is the session's estimate, in the mirror
        received = event.received_ms if event.received_ms > 0 else text.audio_ms_received
        return [HeardTranscript(event.item_id, event.at, heard.text, text.text, event.heard_ms, received,
                                heard.method, heard.estimate)]

    def _onset(self, event: BargeIn) -> float | None:
        if event.trigger == "server_vad":
            speech = self._open_speech
            return event.at if speech is None else speech.speech_start
        return event.at

    def _on_cut_adjusted(self, event: CutAdjusted) -> None:
        for cut in reversed(self._cuts):
            if cut.record.item_id == event.item_id:
                error = None if cut.heard_after_ms is None else event.applied_ms - cut.heard_after_ms
                cut.record = replace(cut.record, applied_ms=event.applied_ms, cut_error_ms=error)
                return

    def _measure(self, cut: _Cut, now: float) -> None:
        """After the fade: what the ledger says was heard of the cut item, against what the server keeps."""
        cut.measured = True
        record = cut.record
        if cut.key is None:
            return
        heard = self.playout.heard_samples(cut.key[0], cut.key[1], now) * 1000 / self.rate
        if heard == 0 and record.heard_ms > 0:
            return  # the playout forgot the item already: nothing to compare with
        cut.heard_after_ms = heard
        if record.applied_ms is not None:
            cut.record = replace(record, cut_error_ms=record.applied_ms - heard)

    # ------------------------------------------------------------------ tools
    def _remember_tool(self, record: ToolRecord) -> None:
        if record.call_id not in self._tools:
            self._tool_order.append(record.call_id)
            while len(self._tool_order) > self._keep:
                del self._tools[self._tool_order.popleft()]
        self._tools[record.call_id] = record

    def finish(self, now: float) -> list[SessionEvent]:
        """The session is closing: publish the open turn if it was not yet (its figures so far)."""
        self._observe(now)
        turn = self._turn
        if turn is None or turn.underruns is not None:
            return []
        return self._publish(turn, now)

    # ------------------------------------------------------------------ reading
    def report(self, now: float) -> MetricsReport:
        """Everything so far, the open turn and the items still playing included."""
        self._observe(now)
        underruns = self._underruns()
        turns = [t.record(underruns, self.rate) for t in self._turns]
        if self._turn is not None:
            turns.append(self._turn.record(underruns, self.rate))
        items = [i.record(self.rate) for i in (*self._items, *self._live.values())]
        items.sort(key=lambda r: r.first_delta_at)
        speech = list(self._speech)
        if self._open_speech is not None:
            speech.append(self._open_speech)
        return MetricsReport(
            at=now, turns=tuple(turns), barge_ins=tuple(c.record for c in self._cuts), items=tuple(items),
            speech=tuple(speech), tools=tuple(self._tools[c] for c in self._tool_order),
            underruns=underruns[0], underrun_ms=underruns[1] * 1000 / self.rate,
        )
