"""The GPT-Live session machine: what a Live session decides, with no I/O, no awaits, no clock reads.

Beside the Realtime :class:`~voxline.session.machine.SessionMachine`, under the same driver
(:class:`~voxline.session.voice.VoiceSession` picks one by ``settings.api``). It takes the
same steps with the listener time ``now`` and returns the same
:class:`~voxline.session.machine.effects.Effects`; client events wait in the
:class:`~voxline.realtime.live.protocol.LiveProtocol`'s outbox.

What differs is the protocol (docs/protocol.md §14):

* assistant audio has no items: :class:`~.timeline.LiveTimeline` groups it into utterances,
  each tagged in the playout as ``(utterance id, 0)`` and placed on the session timeline;
* there is no truncate. A cut (the user's words arriving while the assistant is audible, a local-VAD
  onset, the app's :meth:`interrupt`, a drop) silences the playout at once, drops the rest of
  that utterance as it keeps arriving, and appends to the model's context what the listener
  heard (``session.instructions.append``: the timeline instant and the words), since the
  service asks apps to describe content already delivered. In an ended utterance's closing
  silence, every word heard, nothing is cut: it was heard to its end;
* tools: with a registry, the Live model delegates to a Responses model whose function calls
  arrive as ``response.event``; each runs once through the same tool runner and tracker as
  Realtime's (:class:`~voxline.session.tools.calls.CallTracker`, bridged by :mod:`.delegated`), answered by
  ``response.item.create`` and one ``response.create``. Without one, client delegations reach
  the app as :class:`~voxline.session.events.LiveDelegationRequested`;
* after a drop nothing resumes: a stored session is forked (its conversation goes on), else a
  new session starts with the conversation as text: the user's words and what the listener heard of
  each reply, across every connection (:mod:`.history`); :class:`~voxline.session.events.LiveContinuity`
  says which, and what was lost.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
from typing import Any, Literal

import numpy as np

from voxline.audio.playout import PlayoutBuffer
from voxline.base.arguments import as_error, unicode_text
from voxline.base.errors import redact
from voxline.base.ordered import keep_newest
from voxline.realtime.errors import ConfigurationError, LocalProtocolError
from voxline.realtime.frames import check_fits
from voxline.realtime.live import events as lv
from voxline.realtime.live.protocol import LiveCommandFailed, LiveOutput, LiveProtocol
from voxline.realtime.notices import MalformedServerEvent

from ..bargein import Trigger
from ..capture import CapturePath
from ..events import (
    AssistantAudioStarted, BargeIn, ConnectionLost, ConnectionRestored, HeardTranscript, LiveContinuity,
    LiveDelegationRequested, LiveDelivered, LiveSessionEnded, RawServerEvent, SessionError, SessionEvent,
    SpeechStarted, StateChanged, TranscriptDelta,
)
from ..machine.effects import NO_EFFECTS, Effects
from ..machine.microphone import Captured, MicrophonePath
from ..metrics.records import MetricsReport
from ..mirror import ConversationMirror
from ..settings import SessionSettings
from ..tools.calls import CallTracker, ToolCall
from ..tools.names import chosen_tools
from ..tools.events import ToolEvent
from ..tools.rounds import ToolRounds
from .delegated import DELEGATIONS, DelegatedCalls
from .history import HeardHistory
from .metrics import LiveMetrics
from .timeline import Heard, LiveTimeline, Utterance

__all__ = ["GAP", "LOST_ON_DROP", "ContextKind", "LiveMachine", "delivered_note"]

ContextKind = Literal["instructions", "thinking", "commentary"]
"""What :meth:`LiveMachine.append` appends: kept instructions, silent thinking, or commentary for the model to say."""

GAP = "live_track_silence"  # the playout's tag for the track's silence between utterances
INPUT_SLACK_MS = 10_000  # how far past the input sent a user transcript may be placed before its times are refused
OUTPUT_SLACK_MS = 120_000  # how far past the track received a reply's words may be placed (text runs ahead of audio)
MAX_KEPT_AWAY = 256  # commands kept for the next session while the connection is replaced
_MUTING = ("session.input_audio.mute", "session.input_audio.unmute")
KEEP_UTTERANCES = 16  # utterances kept on the timeline once done with (a late word of one still finds it)

NOTE_CHARS = 1200  # each side of a delivered note; an append takes at most 500 tokens
LOST_ON_DROP = ("audio-level context", "delegations in flight")
LOST_WITHOUT_STORE = ("the model's own conversation (only the user's words and what was heard are given back, as text)",
                      *LOST_ON_DROP)


def delivered_note(heard: Heard) -> str:
    """What the model is told of an utterance the listener did not hear to its end."""
    where = f"{heard.at_ms:.0f} ms on the session timeline" if heard.at_ms is not None else "an unknown point"
    said = heard.text.strip()[-NOTE_CHARS:]
    rest = heard.rest.strip()[:NOTE_CHARS]
    missed = f"They did not hear: \"{rest}\". " if rest else ""
    return (f"Playback note: the listener stopped hearing your last reply at {where}, "
            f"{heard.heard_ms:.0f} ms into it. They heard only: \"{said}\". {missed}"
            "Do not assume they heard more; say again what matters.")


class LiveMachine:
    """One Live conversation over one connection at a time (see the module docstring)."""

    def __init__(self, settings: SessionSettings, playout: PlayoutBuffer, *, registry: Any | None = None,
                 capture: CapturePath | None = None, raw_events: bool = False, run_tools: bool = True) -> None:
        self.settings = settings
        self.playout = playout
        self.registry = registry
        self.offered_tools: list[str] | None = None  # as update() last chose them (None: every tool of the registry)
        self.calls = CallTracker()
        self.delegated = DelegatedCalls(self.calls, ToolRounds(settings.max_tool_rounds))
        self.run_tools = run_tools
        self.mirror = ConversationMirror()  # Live keeps no items: the mirror stays empty
        self.track = None
        self.core = None  # no Realtime core under Live
        self.mic = MicrophonePath(padding_ms=0, chunk_samples=settings.input_chunk_samples, capture=capture,
                                  push_to_talk=settings.turn_detection == "none", journaled=False)
        self.timeline = LiveTimeline(playout.rate)
        self.metrics = LiveMetrics(playout)
        self._captured_at: float | None = None  # the capture time of the last block kept for the session
        self._raw = raw_events
        self._attached = False  # a connection is attached (until its drop is taken or the session ends)
        self.closed = False
        self._muted = False  # the input as the app (or push-to-talk) last left it: a new session is told again
        self._away: list[dict[str, Any]] = []  # commands given while no connection carries the session
        self._away_ids = itertools.count(1)
        self._resuming = False  # from a drop until the next session started
        self._asked: dict[str, None] = {}  # client delegations the session on this connection asked for, the newest
        self._lost_asks: dict[str, None] = {}  # those of sessions a drop lost: the next session does not know them
        self._not_sent = 0  # commands kept while away that the next connection could not carry, not told yet
        self.config_version = 0
        self._protocol: LiveProtocol | None = None
        self._reported: set[str] = set()  # utterances whose first heard sample was reported
        self._finished: set[str] = set()  # utterances whose heard transcript was reported
        self._speaking = False
        self._last_note: str | None = None  # the latest delivered note, for a fork
        self._session_id: str | None = None
        self._started_at: float | None = None  # when the current connection's session started
        self._dry_since: float | None = None  # when the utterance under way ran out of audio mid-sound
        self.fork_from: str | None = None  # the stored session the next connection forks (set on a drop)
        self._continuity: LiveContinuity | None = None
        self.history = HeardHistory()  # what a new session is given after a drop, across every connection
        self._connections = 1
        self._user_item = "live_user"
        self._now = 0.0  # the latest listener time a step was given (for the media track's blocks)

    # ------------------------------------------------------------------ connections
    @property
    def carrying(self) -> bool:
        """A connection is attached and carries the session: not once its protocol is closed, though its drop is
        not taken yet; commands meanwhile are kept for the next connection (:meth:`_command`)."""
        return self._attached and self._protocol is not None and not self._protocol.closed

    @property
    def ended(self) -> bool:
        """The server closed the session for good: at the app's request or for its content (no reconnect)."""
        return self._protocol is not None and self._protocol.close_reason in ("close_requested", "content")

    @property
    def protocol(self) -> LiveProtocol:
        if self._protocol is None:
            raise ConfigurationError("the session is not open; use 'async with VoiceSession(...)'")
        return self._protocol

    def configure(self, protocol: Any) -> None:
        """``session.start`` first on a WebSocket: the whole configuration, or a fork's overrides."""
        assert isinstance(protocol, LiveProtocol)
        if protocol.started:
            return  # WebRTC: the POST started it
        if protocol.fork_of is not None:
            protocol.start({"audio": {"format": {"type": "audio/pcm", "rate": 24000}}})
            return
        protocol.start(self.session_config())

    def session_config(self) -> dict[str, Any]:
        """A new session's whole configuration; after a drop, with what was said and heard as its history (a
        WebSocket's ``session.start``, a WebRTC offer's POST)."""
        history = self.history.messages() if self._continuity is not None else None
        return self.settings.live_session_config(self.tool_schemas(), history=history)

    def attach(self, protocol: Any) -> None:
        assert isinstance(protocol, LiveProtocol)
        if self._protocol is not None:  # a new session: a new track and timeline (ids stay unique)
            self._connections += 1
            self.timeline = LiveTimeline(self.playout.rate, prefix=f"live{self._connections}_utt")
            self._finished.clear()  # the old timeline's utterances: all told when it was lost
            self._started_at = None
            self._reported.clear()
            self.metrics.new_timeline(f"live{self._connections}_user")
        self._protocol = protocol
        self.calls.limit = protocol.max_event_bytes  # tool outputs are sized for this connection
        self._attached = True
        if self._resuming:
            self._hand_over(protocol)

    def _hand_over(self, protocol: LiveProtocol) -> None:
        """What the session owes a new connection, into its protocol, which holds it until its ``session.started``
        (and hands it back, :meth:`_keep_held`, if it is lost before then): the input muted again if the app had
        muted it (a new session starts unmuted: the model would hear the microphone again), a fork told what the
        listener heard of the reply cut last (once), then the commands the app gave meanwhile, in order."""
        if self._muted:
            protocol.send(lv.LiveMute())
        if self._last_note is not None and self.fork_from is not None:
            protocol.send(lv.LiveInstructionsAppend(content=self._last_note))
            self._last_note = None
        away, self._away = self._away, []
        for payload in away:
            try:
                protocol.send(payload)
            except LocalProtocolError:  # larger than the new connection carries (WebRTC after a WebSocket)
                self._not_sent += 1

    def connection_lost(self, now: float, code: int | None, reason: str) -> Effects:
        """The connection dropped: the listener hears no more; what can come back is decided here."""
        self._attached = False
        self._resuming = True
        self._lost_asks.update(self._asked)  # delegations in flight are lost with their session
        self._asked.clear()
        keep_newest(self._lost_asks, DELEGATIONS)
        self._keep_held()
        self.delegated.connection_lost()
        effects = self._cut(now, Trigger.CONNECTION_LOST) if self._audible(now) else NO_EFFECTS
        stored = self.settings.live_store and self._session_id is not None
        self.fork_from = self._session_id if stored else None
        self._continuity = LiveContinuity("fork" if stored else "new", self._session_id,
                                          LOST_ON_DROP if stored else LOST_WITHOUT_STORE, now)
        self.timeline.end()
        told: list[SessionEvent] = []
        for uid, utt in self.timeline.utterances.items():  # heard, and not yet told: what of it was heard
            if uid not in self._finished and not utt.cut and (heard := self.playout.heard_samples(uid, 0, now)):
                told.append(self._told(utt, heard, now))
        return Effects((ConnectionLost(code, reason, now), *effects.events, *told), effects.barge_in)

    def fork_refused(self, why: str) -> None:
        """The stored session could not be forked (still running on the server after a drop it has not noticed, or
        its recording not final yet): the next connection starts a new session seeded with what was heard, as
        without ``store``, rather than the conversation ending with the reconnect budget."""
        if self.fork_from is None:
            return
        self.fork_from = None
        self._last_note = None  # what was heard of the last cut is in the history a new session is given
        if self._continuity is not None:
            self._continuity = dataclasses.replace(self._continuity, how="new", lost=LOST_WITHOUT_STORE,
                                                   refused=redact(why))

    def reconnect_failed(self, protocol: Any) -> None:
        self._attached = False
        self._keep_held()

    def _keep_held(self) -> None:
        """Commands the lost connection held for a ``session.started`` that never came go to the next one, before
        any given since; but for mute and unmute, which the next one is given from the state the app left."""
        if self._protocol is not None:
            held = [p for p in self._protocol.take_held() if p.get("type") not in _MUTING]
            self._away[:0] = held

    def restore(self, now: float, *, handover: bool = False) -> ConnectionRestored:
        """The new connection is attached: what the session owes it waits in its protocol for its
        ``session.started`` (:meth:`_hand_over`), so that a connection lost before then loses none of it."""
        return ConnectionRestored(now, 0, 0, 0.0, handover)

    def _resume(self, now: float) -> list[SessionEvent]:
        """The next session started (its protocol sent what it held): the replacement is over; commands kept
        meanwhile that it could not carry are told."""
        if not self._resuming:
            return []
        self._resuming = False
        skipped, self._not_sent = self._not_sent, 0
        if not skipped:
            return []
        return [SessionError(f"{skipped} command{'s' if skipped > 1 else ''} given while the connection was "
                             "replaced did not fit an event of the new connection: not sent", "commands_not_sent")]

    def _past_the_input(self, start_ms: int, now: float) -> str | None:
        """Why words the server places at ``start_ms`` of its timeline cannot be there: later than both the audio
        this session sent and the time since it started, by more than :data:`INPUT_SLACK_MS` (the timeline is
        the caller's audio; one far ahead would make every figure of the turn nonsense). None if they can."""
        if self._started_at is None or self.settings.call_id is not None:  # a sideband came in mid-session
            return None
        limit = max(self.metrics.sent_ms, (now - self._started_at) * 1000) + INPUT_SLACK_MS
        if start_ms <= limit:
            return None
        return (f"ignored the times of a user transcript delta: {start_ms} ms on the session timeline is past the "
                f"{limit - INPUT_SLACK_MS:.0f} ms of audio the session has had")

    def _past_the_track(self, start_ms: int, now: float) -> str | None:
        """Why words of a reply placed at ``start_ms`` cannot be there: later than both the track received and the
        time since the session started, by more than :data:`OUTPUT_SLACK_MS` (kept until their audio came, words
        placed far ahead would pile up for ever). None if they can."""
        if self._started_at is None or self.settings.call_id is not None:  # a sideband came in mid-session
            return None
        track_ms = self.timeline.position * 1000 / self.timeline.rate
        limit = max(track_ms, (now - self._started_at) * 1000) + OUTPUT_SLACK_MS
        if start_ms <= limit:
            return None
        return (f"ignored the times of an output transcript delta: {start_ms} ms on the session timeline is past the "
                f"{limit - OUTPUT_SLACK_MS:.0f} ms of track the session has had")

    def take_continuity(self) -> LiveContinuity | None:
        out, self._continuity = self._continuity, None
        return out

    # ------------------------------------------------------------------ server events
    def receive(self, output: LiveOutput | object, now: float) -> Effects:
        """One output of the Live core (the driver hands it whatever its connection's core produced)."""
        events: list[SessionEvent] = []
        calls: tuple[ToolCall, ...] = ()
        barge: BargeIn | None = None
        hang_up = False
        match output:
            case lv.LiveOutputAudioDelta():
                return self._audio(output, now)
            case lv.LiveOutputTranscriptDelta() if (ahead := self._past_the_track(output.start_ms, now)):
                events.append(SessionError(ahead, "malformed_event"))  # its words stand, placed nowhere
                events.append(TranscriptDelta("assistant", "live_utt", output.delta, now))
            case lv.LiveOutputTranscriptDelta():
                utt = self.timeline.transcript(output.start_ms, output.end_ms, output.delta)
                if utt is None or not utt.cut:
                    events.append(TranscriptDelta("assistant", utt.uid if utt is not None else "live_utt", output.delta, now))
            case lv.LiveInputTranscriptDelta() if (late := self._past_the_input(output.start_ms, now)):
                events.append(SessionError(late, "malformed_event"))  # its words stand; its times count for nothing
                self.history.user(self._user_item, output.delta)
                events.append(TranscriptDelta("user", self._user_item, output.delta, now))
            case lv.LiveInputTranscriptDelta():
                fresh = self.metrics.user_words(output.start_ms, output.end_ms)
                if fresh:
                    self.delegated.rounds.user_turn()
                    self._user_item = self.metrics.user_item or f"live_user{output.start_ms}"
                    events.append(SpeechStarted(now, self._user_item, output.start_ms))
                self.history.user(self._user_item, output.delta)
                events.append(TranscriptDelta("user", self._user_item, output.delta, now))
                if self._spoken_over(now, output.end_ms):  # the model stops itself when talked over; we stop now
                    cut = self._cut(now, Trigger.SERVER_VAD)
                    events.extend(cut.events)  # type: ignore[arg-type]
                    barge = cut.barge_in
            case lv.LiveSessionStarted():
                self._started_at = now
                self._session_id = output.session.id
                events.extend(self._resume(now))
                events.append(StateChanged("listening", now))
                continuity = self.take_continuity()
                if continuity is not None:
                    events.append(continuity)
            case lv.LiveSessionClosed():
                self.timeline.end()  # no gap follows the last reply: it is reported once heard to its end
                events.append(LiveSessionEnded(output.reason, output.session.id, now))
                hang_up = True  # a server that leaves the socket open after it would be streamed to for nothing
            case lv.LiveDelegationCreated():
                if output.delegation.target == "client":
                    self._asked[output.delegation.id] = None
                    keep_newest(self._asked, DELEGATIONS)
                    events.append(LiveDelegationRequested(output.delegation.id, output.offset_ms, now))
            case lv.LiveResponseEvent():
                if self.run_tools:
                    calls = self.delegated.see(output)
                    events.extend(self.delegated.withheld)
                    self.delegated.withheld.clear()
            case LiveCommandFailed() if output.command_type == "session.start" and not self.protocol.started:
                # no session: nothing is heard and every command waits for a start that never comes
                events.append(SessionError(f"the session could not start: {output.message}", output.code, fatal=True))
            case LiveCommandFailed():
                events.append(SessionError(f"{output.command_type or 'a command'} failed: {output.message}",
                                           output.code))
            case MalformedServerEvent():
                events.append(SessionError(f"malformed server event: {output.reason}", "malformed_event"))
            case lv.LiveError():
                if not (output.error.client_event_id or output.client_event_id):  # else a LiveCommandFailed says it
                    events.append(SessionError(output.error.message, output.error.code))
            case _:
                pass
        if self._raw:
            events.append(RawServerEvent(output))
        if not events and not calls and barge is None:
            return NO_EFFECTS
        return Effects(tuple(events), barge, calls, hang_up)

    def _audio(self, delta: lv.LiveOutputAudioDelta, now: float) -> Effects:
        if self.settings.call_id is not None:
            return NO_EFFECTS  # a sideband's reflection: it has no listener of its own
        return self._track(np.frombuffer(base64.b64decode(delta.delta), dtype="<i2"), now)

    def track_audio(self, block: np.ndarray) -> None:
        """WebRTC: a block of the remote media track (int16 24 kHz), the same track the deltas carry on a WebSocket.

        The transport's decoder keeps the blocks on the sender's RTP clock from its first packet (lost packets'
        time comes as silence), so a count of samples is the position on the session timeline.
        Called from the transport's pump with no listener time: the utterance's arrival is stamped with
        the last instant the driver gave the machine (it only feeds the metrics)."""
        self._track(np.asarray(block, dtype=np.int16), self._now)

    def _track(self, pcm: np.ndarray, now: float) -> Effects:
        self._now = max(self._now, now)
        utt, opened = self.timeline.audio(pcm, now)
        if utt is None:  # the track's silence between utterances, played too: the track keeps its own time
            self.playout.enqueue(pcm.astype(np.int16), GAP, 0)
            return NO_EFFECTS
        if opened:
            self.metrics.utterance(utt.uid, now)
        if utt.cut:
            return NO_EFFECTS  # the listener stopped hearing this utterance: the rest of it stays silent
        self.playout.enqueue(pcm.astype(np.int16), utt.uid, 0)
        return NO_EFFECTS

    # ------------------------------------------------------------------ time and cuts
    def _spoken_over(self, now: float, end_ms: int) -> bool:
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

    def _audible(self, now: float) -> bool:
        return self._audible_utterance(now) is not None

    def tick(self, now: float) -> Effects:
        self._now = max(self._now, now)
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
        speaking = playing is not None or self._audible(now) or self._running_dry(now, voiced=False) is not None
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

    def _told(self, utt: Utterance, heard: int, now: float) -> HeardTranscript:
        """An utterance not cut is done with, ``heard`` samples of it heard: into the history, and reported (an
        estimate unless heard to its end)."""
        self._finished.add(utt.uid)
        if heard >= utt.received:
            self._last_note = None  # a reply heard to its end since: a note on an older cut is stale
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
        end or cut. Their heard text is in :attr:`history` and their figures in the metrics."""
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

    def _cut(self, now: float, trigger: Trigger) -> Effects:
        """Silence at ``now``; the heard part reported and, while connected, told to the model."""
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
            return Effects(tuple(told)) if told else NO_EFFECTS
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
        self._last_note = note
        if self.carrying and self._protocol is not None and not self._protocol.closed and not self.ended:
            self._protocol.send(lv.LiveInstructionsAppend(content=note))
        events.append(LiveDelivered(utt.uid, now, heard.at_ms, heard.text, note))
        return Effects(tuple(events), barge)

    def interrupt(self, now: float, trigger: Trigger = Trigger.INTERRUPT) -> Effects:
        """Silence the assistant where the listener is: a local cut, so also once the session is over (the rest of
        a reply closed for its content still plays)."""
        self._check_started()
        if not self._audible(now):
            return NO_EFFECTS
        return self._cut(now, trigger)

    def local_speech(self, now: float, onset: float) -> Effects:
        """A local-VAD onset: the user speaks. Live's model stops by itself when it hears them; the listener, now."""
        if not self._audible(now):
            return NO_EFFECTS  # the user's turns are the server's to report (its input transcript)
        cut = self._cut(now, Trigger.LOCAL_VAD)
        if cut.barge_in is None:
            return cut  # only the closing silence of a reply heard to its end was left: no cut, as when none is audible
        return Effects((SpeechStarted(onset, None, None), *cut.events), cut.barge_in)

    # ------------------------------------------------------------------ microphone
    def captured(self, item: Captured, now: float, *, media: bool = False, padded: int = 0
                 ) -> tuple[Effects, np.ndarray | None, bool]:
        """A microphone block, as :meth:`SessionMachine.captured` takes it (``padded``, the track's filler, only runs
        the timeline on: nothing of the input is resent on a new Live session)."""
        pcm, onset, end = self.mic.clean(item, now)
        effects = self.local_speech(now, onset) if onset is not None else NO_EFFECTS
        if self._protocol is None or not self.carrying:
            return effects, None, False
        pcm = np.ascontiguousarray(pcm, dtype="<i2")
        self._captured_at = end
        if media:  # the track's first sample is the timeline's input 0, and its filler counts as input
            self.metrics.input_sent(padded + len(pcm), end, self.timeline.rate)
            return effects, pcm, False
        return effects, None, self._append(self.mic.captured(pcm, carrying=True), end)

    def input_ended(self, now: float) -> bool:
        held = self.mic.chunker.take()  # captured by the last block's end, not now
        return self._append(held, self._captured_at if self._captured_at is not None else now)

    def _append(self, chunk: np.ndarray | None, now: float) -> bool:
        protocol = self._protocol
        if chunk is None or not self.carrying or protocol is None or protocol.closed or not protocol.started:
            return False
        self.metrics.input_sent(len(chunk), now, self.timeline.rate)  # its last sample captured at now
        protocol.append_audio(chunk.astype("<i2").tobytes())
        return True

    # ------------------------------------------------------------------ the app's commands
    def _check_started(self) -> None:
        if self.closed:
            raise ConfigurationError("the session is closed")
        if self._protocol is None:
            raise ConfigurationError("the session is not open yet: use 'async with VoiceSession(...)' first")

    def check_open(self) -> None:
        """Every command to the server needs an open session that is not over."""
        self._check_started()
        if self.ended:
            raise ConfigurationError(f"the GPT-Live session is over (closed: {self.protocol.close_reason}); "
                                     "open a new VoiceSession")

    def send_text(self, text: str) -> bool:
        self.check_open()
        raise ConfigurationError("a GPT-Live session takes no user text messages; append context with "
                                 "session.live.append(...) instead")

    def start_talking(self, now: float) -> Effects:
        """Push-to-talk over Live: unmute the model's input (and stop the assistant if it is on).
        A release whose mute still waits (:meth:`commit_talking`) is finished first."""
        self.check_open()
        self.commit_talking(now)
        self.mic.press()
        self._set_muted(False)
        return self.interrupt(now) if self._audible(now) else NO_EFFECTS

    def stop_talking(self, now: float) -> tuple[Effects, bool]:
        """Push-to-talk released: the last chunk, then mute (the model decides when to answer)."""
        turn = self.release_talking(now)
        return self.commit_talking(now, turn)

    def release_talking(self, now: float) -> int:
        """Push-to-talk released: nothing more of the microphone goes out; the mute waits for
        :meth:`commit_talking` (after a media track sent what it holds). The release's number."""
        self.check_open()
        return self.mic.release()

    def commit_talking(self, now: float, turn: int | None = None) -> tuple[Effects, bool]:
        """The released turn's last chunk, then mute (``turn``: only that release's); whether frames wait.
        Nothing is committed here (the model hears the stream), so a turn of any length is taken."""
        if self.closed or not self.mic.take_release(turn):
            return NO_EFFECTS, False
        self._append(self.mic.chunker.take(), now)
        self._set_muted(True)
        return NO_EFFECTS, True

    def update(self, *, instructions: str | None = None, tools: list[str] | None = None,
               voice: str | None = None) -> bool:
        """Only the delegated tools can change: a Live session's instructions and voice are fixed at its start."""
        self.check_open()
        if instructions is not None or voice is not None:
            raise ConfigurationError("a GPT-Live session's instructions and voice are fixed when it starts")
        if tools is None:
            return False
        names = chosen_tools(tools, self.registry.names() if self.registry is not None else ())
        if self.registry is None:
            return False
        schemas = self.registry.schemas(names)
        self._command(lv.LiveUpdate(session={"delegation": {"type": "responses", "responses": {"tools": schemas}}}))
        self.offered_tools = names
        return True

    def mute(self) -> None:
        self.check_open()
        self._set_muted(True)

    def unmute(self) -> None:
        self.check_open()
        self._set_muted(False)

    def _set_muted(self, muted: bool) -> None:
        """Mute or unmute the model's input now (held until its session started), or, while away, on the next
        connection (:meth:`_hand_over`)."""
        self._muted = muted
        if self.carrying:
            self.protocol.send(lv.LiveMute() if muted else lv.LiveUnmute())

    def _command(self, event: lv.LiveClientEvent) -> str:
        """Send ``event`` (held until its session started); while no connection carries the session, keep it
        for the next one (:meth:`_hand_over`). Its ``event_id`` either way."""
        carrying = self.carrying
        if carrying and self.protocol.started:
            return self.protocol.send(event)
        if len(self._away) + (self.protocol.holding if carrying else 0) >= MAX_KEPT_AWAY:
            raise ConfigurationError(f"{MAX_KEPT_AWAY} commands wait for a session that has not started; wait until "
                                     "it listens (StateChanged 'listening') before giving more")
        if carrying:
            return self.protocol.send(event)
        payload = event.model_dump(mode="json")
        payload["event_id"] = payload.get("event_id") or f"evt_vxl_away{next(self._away_ids):06d}"
        check_fits(json.dumps(payload, separators=(",", ":")), payload.get("type"), self.protocol.max_event_bytes)
        self._away.append(payload)
        return str(payload["event_id"])

    def append(self, content: str, *, kind: ContextKind = "instructions", delegation_id: str | None = None) -> str:
        """Append context: ``instructions`` (kept), ``thinking`` (silent) or ``commentary`` (for the model to say)."""
        self.check_open()
        model = {"instructions": lv.LiveInstructionsAppend, "thinking": lv.LiveThinkingAppend,
                 "commentary": lv.LiveCommentaryAppend}.get(kind) if isinstance(kind, str) else None
        if model is None:
            raise ConfigurationError(f"kind must be instructions, thinking or commentary, not {kind!r}")
        if not isinstance(content, str):
            raise ConfigurationError(f"append takes the content as a string, not {type(content).__name__}")
        if delegation_id is not None and not isinstance(delegation_id, str):
            raise ConfigurationError(f"delegation_id takes a string or None, not {type(delegation_id).__name__}")
        with as_error(ConfigurationError, "append"):
            unicode_text(content, "content")
        if delegation_id is not None and (not self.carrying or self._resuming):
            raise ConfigurationError(f"delegation {delegation_id!r} was the lost session's, and the connection is "
                                     "being replaced: the next session does not know it")
        if delegation_id is not None and delegation_id in self._lost_asks:
            raise ConfigurationError(f"delegation {delegation_id!r} was asked for by a session a dropped connection "
                                     "lost: this session does not know it (delegations in flight are lost on a drop)")
        return self._command(model(content=content, delegation_id=delegation_id))

    def play_fixture(self, pcm: np.ndarray) -> str:
        """One whole audio fixture (PCM16 24 kHz) through the session's output."""
        self.check_open()
        array = np.asarray(pcm)
        if array.dtype != np.int16 or array.ndim != 1:  # a float block cast to int16 would play as silence
            raise ConfigurationError(f"play_fixture takes a 1-D int16 array (PCM16 24 kHz mono), not {array.dtype} "
                                     f"of shape {array.shape}")
        data = np.ascontiguousarray(array, dtype="<i2").tobytes()
        return self._command(lv.LiveFixturePlay(audio=base64.b64encode(data).decode("ascii")))

    def close_session(self) -> str:
        self.check_open()
        return self._command(lv.LiveClose())

    def tool_schemas(self) -> list[dict[str, Any]] | None:
        """The tools a new connection offers: as :meth:`update` last chose them, else the registry's."""
        if self.registry is None:
            return None
        schemas: list[dict[str, Any]] = self.registry.schemas(self.offered_tools)  # None: every tool
        if self.offered_tools is None and not schemas:
            return None  # a registry without tools offers none
        return schemas

    # ------------------------------------------------------------------ tools
    def tool_event(self, event: ToolEvent, now: float) -> Effects:
        self.metrics.tool(event, now)
        return Effects((dataclasses.replace(event, at=now),))  # lines and logs place it when it happened

    def drain_tools(self) -> bool:
        """Tool outputs as ``response.item.create``, then the one ``response.create`` that continues."""
        if not self.carrying or self._protocol is None:
            return False
        commands = self.delegated.commands()
        for command in commands:
            try:
                self._protocol.send(command)
            except LocalProtocolError:  # larger than the connection carries even as an error output: not sent
                continue
        return bool(commands)

    # ------------------------------------------------------------------ state
    @property
    def turn_open(self) -> bool:
        """GPT-Live has no turn events: the model finds turns itself, and none is open to the client."""
        return False

    def idle(self, now: float, *, tools_busy: bool) -> bool:
        if self._protocol is None:
            return True
        if not self.carrying:  # reconnecting is never idle; a session the server ended is, once its audio played
            return self.closed or (self.ended and not self._audible(now))
        return (not self._audible(now) and not tools_busy and not self.calls.running() and not self.calls.runnable())

    def close(self, now: float) -> tuple[SessionEvent, ...]:
        if self.closed:
            return ()
        self.closed, self._attached = True, False
        return ()

    def report(self, now: float) -> MetricsReport:
        return self.metrics.report(now)

    def sizes(self) -> dict[str, int]:
        out = dict(self.timeline.sizes())
        out.update(self.metrics.sizes())
        out.update({"live_finished": len(self._finished), "live_reported": len(self._reported),
                    "live_history": len(self.history), "live_orphan_calls": self.delegated.orphans,
                    "live_call_names": self.delegated.named, "live_delegations": self.delegated.delegations})
        if self._protocol is not None:
            out.update(self._protocol.sizes())
        out.update({f"calls_{k}": v for k, v in self.calls.sizes().items()})
        return out
