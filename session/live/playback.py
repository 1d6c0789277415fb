"""What the listener hears of a GPT-Live session's assistant speech, and its cuts: no I/O, no clock reads.

The assistant's track goes into the playout by utterance (:class:`~.timeline.LiveTimeline`), each
tagged ``(utterance id, 0)``, and the track's silence between them as :data:`GAP`.
:class:`LivePlayback` follows each utterance from its audio's arrival to the listener: its first
sample heard, the assistant speaking or not, heard to its end (then reported and kept in the
:class:`~.history.HeardHistory`), or cut. A cut silences the playout at once, drops the rest of the
utterance as it keeps arriving, reports what was heard and words the note that tells the model so
(:func:`delivered_note`); in an ended utterance's closing silence, every word heard, nothing is
cut. Utterances done with beyond the newest :data:`KEEP_UTTERANCES` are let go.

It sends nothing: the machine tells the model a cut's note while a connection carries the
session, and a fork the last one (:attr:`LivePlayback.last_note`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from voxline.audio.playout import PlayoutBuffer

from ..bargein import Trigger
from ..events import AssistantAudioStarted, BargeIn, HeardTranscript, LiveDelivered, SessionEvent, StateChanged
from ..machine.effects import NO_EFFECTS, Effects
from .history import HeardHistory
from .metrics import LiveMetrics
from .timeline import Heard, LiveTimeline, Utterance

__all__ = ["GAP", "KEEP_UTTERANCES", "NOTE_CHARS", "LivePlayback", "delivered_note"]

GAP = "live_track_silence"  # the playout's tag for the track's silence between utterances
KEEP_UTTERANCES = 16  # utterances kept on the timeline once done with (a late word of one still finds it)
NOTE_CHARS = 1200  # each side of a delivered note; an append takes at most 500 tokens


def delivered_note(heard: Heard) -> str:
    """What the model is told of an utterance the listener did not hear to its end."""
    where = f"{heard.at_ms:.0f} ms on the session timeline" if heard.at_ms is not None else "an unknown point"
    said = heard.text.strip()[-NOTE_CHARS:]
    rest = heard.rest.strip()[:NOTE_CHARS]
    missed = f"They did not hear: \"{rest}\". " if rest else ""
    return (f"Playback note: the listener stopped hearing your last reply at {where}, "
            f"{heard.heard_ms:.0f} ms into it. They heard only: \"{said}\". {missed}"
            "Do not assume they heard more; say again what matters.")


class LivePlayback:
    """The current connection's timeline, its utterances in the playout, and what of them was heard and told (see
    the module docstring)."""

    def __init__(self, playout: PlayoutBuffer, metrics: LiveMetrics, history: HeardHistory) -> None:
        self.playout = playout
        self.metrics = metrics
        self.history = history
        self.timeline = LiveTimeline(playout.rate)
        self.last_note: str | None = None  # the latest delivered note, for a fork
        self._reported: set[str] = set()  # utterances whose first heard sample was reported
        self._finished: set[str] = set()  # utterances whose heard transcript was reported
        self._speaking = False
        self._dry_since: float | None = None  # when the utterance under way ran out of audio mid-sound

    def new_timeline(self, prefix: str) -> None:
        """A new session: a new track and timeline, its utterance ids starting with ``prefix`` (ids stay unique);
        the old timeline's utterances were all told when it was lost."""
        self.timeline = LiveTimeline(self.playout.rate, prefix=prefix)
        self._finished.clear()
        self._reported.clear()

    def take_note(self) -> str | None:
        """The latest delivered note, once."""
        note, self.last_note = self.last_note, None
        return note

    # ------------------------------------------------------------------ the track
    def enqueue_track(self, pcm: np.ndarray, now: float) -> None:
        """A block of the assistant's track (int16 24 kHz), arrived at ``now``: into the playout, tagged."""
        utt, opened = self.timeline.audio(pcm, now)
        if utt is None:  # the track's silence between utterances, played too: the track keeps its own time
            self.playout.enqueue(pcm.astype(np.int16), GAP, 0)
            return
        if opened:
            self.metrics.utterance(utt.uid, now)
        if utt.cut:
            return  # the listener stopped hearing this utterance: the rest of it stays silent
        self.playout.enqueue(pcm.astype(np.int16), utt.uid, 0)

    # ------------------------------------------------------------------ what is audible
    def audible(self, now: float) -> bool:
        return self._audible_utterance(now) is not None

    def spoken_over(self, now: float, end_ms: int) -> bool:
        """Do the user's words, ending at ``end_ms`` on the timeline, reach the assistant speech audible now?

        Transcripts trail the audio: words the user said before the reply began may arrive while it
        plays, and do not cut it."""
        uid = self._audible_utterance(now)
        if uid is None:
            return False
        utt = self.timeline.utterances.get(uid)
        return utt is None or end_ms > utt.start_ms(self.timeline.rate)

    def _audible_utterance(self, now: float) -> str | None:
        """The utterance playing, else the first one queued (the track's silence between them is not the
        assistant speaking), else one whose audio ran dry mid-sentence (heard in part, not ended: more is on its
        way, and the assistant is still speaking, to be stopped as any other); None when none. An utterance already
        cut is none of these, though its fade is still playing: it cannot be cut again."""
        playing = self.playout.playing_at(now)
        if playing is not None and playing.item_id != GAP:
            utt = self.timeline.utterances.get(playing.item_id)
            if utt is None or not utt.cut:
                return playing.item_id
        queued = next((key[0] for key in self.playout.queued_parts() if key[0] != GAP), None)
        if queued is not None:
            return queued
        dry = self._running_dry(now)
        return dry.uid if dry is not None else None

    def _running_dry(self, now: float, *, voiced: bool = True) -> Utterance | None:
        """The utterance under way if its audio ran out mid-sound (heard in part, its last sample voiced, not
        cut): more of it is on its way. One whose audio ends in silence may be over, and is not, unless ``voiced``
        is False: its closing silence may be late too, and until it ends the assistant has not stopped speaking
        (as it has not while that silence plays on time), though nothing of its voice is left to cut."""
        current = self.timeline.current
        if current is None or current.cut or (voiced and current.voiced_end < current.received):
            return None
        return current if self.playout.heard_samples(current.uid, 0, now) > 0 else None

    def _end_if_dry(self, now: float) -> None:
        """An utterance that ran dry and got no audio for as long as the silence that ends one: it ended (the
        track stalled or stopped), and the playout's silence from here on is no underrun."""
        dry = self._running_dry(now, voiced=False)
        playing = self.playout.playing_at(now)
        if dry is None or (playing is not None and playing.item_id == dry.uid) or any(
                key[0] == dry.uid for key in self.playout.queued_parts()):
            self._dry_since = None
            return
        if self._dry_since is None:
            self._dry_since = now
        elif now - self._dry_since >= self.timeline.gap / self.timeline.rate:
            self._dry_since = None
            self.timeline.end()
            self.playout.mark_complete(dry.uid)

    # ------------------------------------------------------------------ what was heard
    def tick(self, now: float) -> Effects:
        """The first sample of an utterance heard, the assistant speaking or not, utterances heard to their end."""
        events: list[SessionEvent] = []
        playing = self.playout.playing_at(now)
        if playing is not None and playing.item_id == GAP:
            playing = None
        if playing is not None and playing.item_id not in self._reported:
            self._reported.add(playing.item_id)
            started = self.playout.started_at(playing.item_id, 0) or now
            latency = self.metrics.first_heard(playing.item_id, started)
            events.append(AssistantAudioStarted(playing.item_id, started, latency))
        self._end_if_dry(now)
        speaking = playing is not None or self.audible(now) or self._running_dry(now, voiced=False) is not None
        if speaking != self._speaking:
            self._speaking = speaking
            events.append(StateChanged("speaking" if speaking else "listening", now))
        for uid, utt in list(self.timeline.utterances.items()):
            if uid in self._finished or utt.cut or not utt.closed:
                continue
            if self.playout.heard_samples(uid, 0, now) >= utt.received > 0:
                events.append(self._told(utt, utt.received, now))
        if len(self.timeline.utterances) > KEEP_UTTERANCES:
            self._forget_old()
        return Effects(tuple(events)) if events else NO_EFFECTS

    def connection_lost(self, now: float) -> list[SessionEvent]:
        """The track is over: each utterance heard in part and not cut or told yet is told, as far as it was heard."""
        self.timeline.end()
        told: list[SessionEvent] = []
        for uid, utt in self.timeline.utterances.items():
            if uid not in self._finished and not utt.cut and (heard := self.playout.heard_samples(uid, 0, now)):
                told.append(self._told(utt, heard, now))
        return told

    def _told(self, utt: Utterance, heard: int, now: float) -> HeardTranscript:
        """An utterance not cut is done with, ``heard`` samples of it heard: into the history, and reported (an
        estimate unless heard to its end)."""
        self._finished.add(utt.uid)
        if heard >= utt.received:
            self.last_note = None  # a reply heard to its end since: a note on an older cut is stale
        said = self.timeline.heard(utt.uid, heard)
        self.history.assistant(utt.uid, said.text)
        return HeardTranscript(utt.uid, now, said.text, said.full_text, said.heard_ms,
                               utt.received * 1000 / self.timeline.rate, "live_timeline", heard < utt.received)

    @staticmethod
    def _heard_out(utt: Utterance, heard: int) -> bool:
        """Was all of ``utt`` that could be heard heard with ``heard`` samples: it is closed (no more of it comes) and
        only its closing silence is left?"""
        return utt.closed and heard >= utt.voiced_end

    def _forget_old(self) -> None:
        """Let go of utterances done with beyond the newest :data:`KEEP_UTTERANCES`: closed, and heard to the
        end or cut. Their heard text is in the history and their figures in the metrics."""
        utts = list(self.timeline.utterances.values())
        waiting = {key[0] for key in self.playout.queued_parts()}
        for utt in utts[:-KEEP_UTTERANCES]:
            uid = utt.uid
            if utt.closed and uid not in waiting and (utt.cut or uid in self._finished):
                self.metrics.settle(uid)
                self.timeline.forget(uid)
                self.playout.forget(uid)
                self._finished.discard(uid)
                self._reported.discard(uid)
        oldest = next(iter(self.timeline.utterances.values()))
        self.timeline.forget_texts_before(oldest.start_ms(self.timeline.rate) - 1000)  # words of none of those kept

    # ------------------------------------------------------------------ cuts
    def cut(self, now: float, trigger: Trigger) -> tuple[Effects, str | None]:
        """Silence at ``now``; the heard part reported, and the note for the model on it (None when nothing of an
        utterance was cut)."""
        queued = [key[0] for key in self.playout.queued_parts() if key[0] in self.timeline.utterances]
        cut = self.playout.interrupt(now)
        told: list[SessionEvent] = []
        uid = cut.item_id if cut.item_id in self.timeline.utterances else None
        if uid is not None and self._heard_out(self.timeline.utterances[uid], cut.heard_samples):
            # in its closing silence, every word heard: only silence is revoked, and the reply was heard to its end
            told.append(self._told(self.timeline.utterances[uid], self.timeline.utterances[uid].received, now))
            uid = None
        if uid is None:
            uid = next((q for q in queued if q != cut.item_id), None)
        if uid is None:
            return (Effects(tuple(told)) if told else NO_EFFECTS), None
        utt = self.timeline.utterances[uid]
        if uid != cut.item_id:  # cut in the track's silence before the utterance began to play: none of it heard
            cut = dataclasses.replace(cut, item_id=uid, heard_samples=0, received_samples=utt.received, playing=False)
        utt.cut = True
        self._finished.add(utt.uid)
        heard = self.timeline.heard(utt.uid, cut.heard_samples)
        self.history.assistant(utt.uid, heard.text)
        received_ms = utt.received * 1000 / self.timeline.rate
        self.metrics.cut(trigger.value, now, cut, utt.received, heard.text, heard.full_text)
        barge = BargeIn(trigger.value, now, utt.uid, cut.heard_ms, received_ms, round(cut.heard_ms), (), False,
                        cut.end - now, cut.revoked_samples * 1000 / cut.rate, cut.flushed_samples * 1000 / cut.rate,
                        cut=cut, live=True)
        events: list[SessionEvent] = [*told, barge, HeardTranscript(utt.uid, now, heard.text, heard.full_text, heard.heard_ms,
                                                             received_ms, "live_timeline")]
        note = delivered_note(heard)
        self.last_note = note
        events.append(LiveDelivered(utt.uid, now, heard.at_ms, heard.text, note))
        return Effects(tuple(events), barge), note

    def sizes(self) -> dict[str, int]:
        return {"live_finished": len(self._finished), "live_reported": len(self._reported)}
