"""The session core: wire events in, playout and barge-in decisions out. No I/O, no clock reads.

A driver (the async :class:`~session.VoiceSession`, or the lockstep replay) owns the
transport, the devices and the clock. It hands every protocol output to
:meth:`SessionCore.handle` with the current listener time, calls :meth:`tick` after each
playout block, and sends whatever the protocol core has queued. Times are seconds on the
listener's timeline: the one the playout buffer's ledger uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, assert_never

import numpy as np

from voxline.base.audio_format import SAMPLE_RATE as RATE
from voxline.audio.tick_gate import TickGate
from voxline.audio.playout import PlayoutBuffer
from voxline.realtime import events as ev
from voxline.realtime.notices import CommandFailed, MalformedServerEvent, ResponseStatusChanged, TruncateAdjusted
from voxline.realtime.errors import LocalProtocolError
from voxline.realtime.lifecycle import Slot
from voxline.realtime.protocol import ProtocolOutput, RealtimeProtocol

from .bargein import CutPart, OutputOwner, Trigger, plan_barge_in
from .events import (
    AssistantAudioStarted,
    BargeIn,
    CutAdjusted,
    FalseBargeIn,
    PlaybackHeld,
    RawServerEvent,
    ResponseFinished,
    ResponseStarted,
    SessionError,
    SessionEvent,
    SpeechStarted,
    SpeechStopped,
    StateChanged,
    TranscriptDelta,
    TranscriptDone,
)
from .local_barge import Action, LocalBarge, LocalInput
from .track_audio import TrackTagger
from .turn_state import TurnInput, TurnState, step

__all__ = ["NO_CORE_EFFECTS", "CoreEffects", "SessionCore"]

FADE_MS = 5.0
RETIRE_S = 0.2  # how often played-out audio parts are forgotten (listener seconds)
QUIET_MARGIN_S = 0.04  # a steady reply's ticks resume this long before its queue runs out
_NEVER = -math.inf


@dataclass(frozen=True, slots=True)
class CoreEffects:
    """What one call into the core did: the events for the app, and a barge-in if one happened."""

    events: tuple[SessionEvent, ...] = ()
    barge_in: BargeIn | None = None
    commands: tuple[ev.ClientEvent, ...] = field(default=(), repr=False)  # what the barge-in queued


NO_CORE_EFFECTS = CoreEffects()
"""What a call that did nothing returns (CoreEffects is frozen: one instance serves every such call)."""


@dataclass
class _Part:
    """One assistant audio part: (item_id, content_index) of a response."""

    response_id: str
    item_id: str
    content_index: int
    complete: bool = False
    first_heard: float | None = None
    settled: bool = False  # a barge-in already decided its fate


class SessionCore:
    """Session logic for one conversation over one (or, after reconnects, several) connections."""

    def __init__(
        self,
        protocol: RealtimeProtocol,
        playout: PlayoutBuffer,
        *,
        owner: OutputOwner = OutputOwner.CLIENT,
        raw_events: bool = False,
        fade_ms: float = FADE_MS,
        track: TrackTagger | None = None,
        gate: TickGate | None = None,
    ) -> None:
        self.gate = gate if gate is not None else TickGate()  # holds quiet_until, for an output to read
        self.protocol = protocol
        self.playout = playout
        self.track = track  # WebRTC: audio comes on a media track, tagged by the server's playback
        self.owner = OutputOwner.SERVER if track is not None else owner
        # a sideband (the server's output, no track): its output buffer, from its events; a WebSocket session, whose
        # output is its own, takes no notice of them (a server has no reason to send them there)
        self._follows_buffer = self.owner is OutputOwner.SERVER and track is None
        self._buffer_playing = False
        self.raw_events = raw_events
        self.fade_ms = fade_ms
        self._events: list[SessionEvent] = []
        self._parts: dict[tuple[str, int], _Part] = {}
        self._order: list[tuple[str, int]] = []
        self._awaiting: dict[tuple[str, int], None] = {}  # parts whose first heard sample is still to report
        self._speech_stopped_at: float | None = None
        self.user_speaking = False  # between the server's speech_started and speech_stopped
        self._state = TurnState.LISTENING
        self._fade_end = float("-inf")  # the last cut's fade is not speech
        self._retire_at = float("-inf")  # bookkeeping is trimmed every RETIRE_S, not every block
        self._barge_in: BargeIn | None = None
        self._commands: list[ev.ClientEvent] = []
        self.local: LocalBarge | None = None  # local-VAD holds (:mod:`.local_barge`), when enabled
        self.quiet_until = _NEVER

    @property
    def quiet_until(self) -> float:
        """Before this listener time a :meth:`tick` changes nothing, unless another call comes first.

        Set by each tick that did nothing: while a reply plays steadily from the queue (every
        part in it already heard) until shortly before the queue runs out, and in silence
        (nothing queued, nothing handed out still to come) indefinitely; never past the next
        retire. Every other call resets it, except the bulk of a reply: more audio of a part
        already heard while speaking, and transcript words. A driver may skip such ticks: it is
        kept in :attr:`gate`, which a :class:`~voxline.audio.clocked_output.ClockedOutput` reads
        after each pass to skip them without a call.
        """
        return self.gate.until

    @quiet_until.setter
    def quiet_until(self, value: float) -> None:
        self.gate.until = value

    def _effects(self) -> CoreEffects:
        if not self._events and self._barge_in is None and not self._commands:
            return NO_CORE_EFFECTS  # most blocks and deltas: nothing happened
        out = CoreEffects(tuple(self._events), self._barge_in, tuple(self._commands))
        self._events, self._barge_in, self._commands = [], None, []
        return out

    # ------------------------------------------------------------------ input
    def handle(self, output: ProtocolOutput, now: float) -> CoreEffects:
        """Take one protocol output (server event or notice) at listener time ``now``."""
        if not self._keeps_quiet(output):
            self.quiet_until = _NEVER
        if self.track is not None:
            self.track.handle(output)
        if self.raw_events and not isinstance(output, (CommandFailed, MalformedServerEvent, ResponseStatusChanged,
                                                           TruncateAdjusted)):
            self._events.append(RawServerEvent(output))
        match output:
            case ev.ResponseOutputAudioDelta():
                self._on_audio(output)
            case ev.ResponseOutputItemAdded() if self.track is not None:
                item = output.item  # over WebRTC the track carries its audio, tagged under content index 0
                if isinstance(item, ev.MessageItem) and isinstance(item.id, str) and (item.id, 0) not in self._parts:
                    self._new_part((item.id, 0), output.response_id)
            case ev.ResponseOutputAudioDone():
                part = self._parts.get((output.item_id, output.content_index))
                if part is not None:
                    part.complete = True
                self.playout.mark_complete(output.item_id, output.content_index)
            case ev.InputAudioBufferSpeechStarted():
                self.user_speaking = True
                self._events.append(SpeechStarted(now, output.item_id, output.audio_start_ms))
                if self.local is not None and self.local.held:
                    self._local_step(LocalInput.SERVER_SPEECH, now)
                elif self.assistant_audible(now):
                    self._barge_in = self._cut(now, Trigger.SERVER_VAD)
            case ev.InputAudioBufferSpeechStopped():
                self._speech_stopped_at = now
                self.user_speaking = False
                self._events.append(SpeechStopped(now, output.item_id, output.audio_end_ms))
                self._step(TurnInput.SPEECH_STOPPED, now)
            case ev.ResponseCreated():
                self._events.append(ResponseStarted(output.response.id, now))
                self._step(TurnInput.RESPONSE_CREATED, now)
            case ev.ResponseDone():
                r = output.response
                reason = _reason(r.status_details)
                usage = r.usage.model_dump() if r.usage is not None else None
                self._events.append(ResponseFinished(r.id, r.status or "completed", reason, now, usage))
            case ev.ResponseOutputAudioTranscriptDelta() | ev.ResponseOutputTextDelta():
                self._events.append(TranscriptDelta("assistant", output.item_id, output.delta, now))
            case ev.ResponseOutputAudioTranscriptDone():
                self._events.append(TranscriptDone("assistant", output.item_id, output.transcript, now))
            case ev.ResponseOutputTextDone():
                self._events.append(TranscriptDone("assistant", output.item_id, output.text, now))
            case ev.ConversationItemInputAudioTranscriptionDelta():
                self._events.append(TranscriptDelta("user", output.item_id, output.delta or "", now))
            case ev.ConversationItemInputAudioTranscriptionCompleted():
                self._events.append(TranscriptDone("user", output.item_id, output.transcript, now))
            case CommandFailed() if not output.handled:
                self._events.append(SessionError(f"{output.command_type or 'server'}: {output.message}", output.code))
            case TruncateAdjusted():
                self._events.append(CutAdjusted(output.item_id, output.requested_ms, output.applied_ms, now))
            case MalformedServerEvent():
                self._events.append(SessionError(f"ignored a malformed server event: {output.reason}", "malformed_event"))
            case ev.OutputAudioBufferStarted() if self._follows_buffer:
                self._buffer_playing = True
            case ev.OutputAudioBufferStopped() | ev.OutputAudioBufferCleared() if self._follows_buffer:
                self._buffer_playing = False
            case _:
                pass
        return self._effects()

    def _keeps_quiet(self, output: ProtocolOutput) -> bool:
        """True for what changes nothing a tick looks at (see :attr:`quiet_until`)."""
        match output:
            case ev.ResponseOutputAudioDelta():
                part = self._parts.get((output.item_id, output.content_index))
                return part is not None and part.first_heard is not None and self._state is TurnState.SPEAKING
            case ev.ResponseOutputAudioTranscriptDelta():
                return True
            case _:
                return False

    def wake(self) -> None:
        """Something outside the core changed what a tick reports on (a tool started or ended)."""
        self.quiet_until = _NEVER

    @property
    def retire_due(self) -> float:
        """The listener time of the next tick that forgets played-out parts."""
        return self._retire_at

    def _on_audio(self, delta: ev.ResponseOutputAudioDelta) -> None:
        key = (delta.item_id, delta.content_index)
        part = self._parts.get(key)
        if part is None:
            self._new_part(key, delta.response_id)
        samples = np.frombuffer(delta.audio, dtype="<i2")
        self.playout.enqueue(samples, delta.item_id, delta.content_index)

    def _new_part(self, key: tuple[str, int], response_id: str) -> None:
        self._parts[key] = _Part(response_id, key[0], key[1])
        self._order.append(key)
        self._awaiting[key] = None

    # ------------------------------------------------------------------ time
    def tick(self, now: float) -> CoreEffects:
        """Call after each playout block: notices first samples heard and speaking/listening."""
        playout = self.playout  # its queries take the lock the audio thread's read() holds
        if self.local is not None and self.local.due(now):
            self._local_step(LocalInput.GRACE_OVER, now)
        if self._awaiting:
            self._report_first_heard(now)
        audible = playout.playing_at(now) is not None and now >= self._fade_end
        if audible:
            self._step(TurnInput.AUDIBLE, now)
        elif self.playout.queued_samples == 0 and not self.protocol.response_in_progress:
            self._step(TurnInput.DRAINED, now)
        else:
            self._step(TurnInput.UNDERRUN, now)  # nothing audible yet, but the reply is not over
        if now >= self._retire_at:
            self._retire(now)
            self._retire_at = now + RETIRE_S
        effects = self._effects()
        self.quiet_until = self._quiet_horizon(now, audible) if effects is NO_CORE_EFFECTS else _NEVER
        return effects

    def _report_first_heard(self, now: float) -> None:
        """``AssistantAudioStarted`` for every part whose first sample reached the listener by ``now``, once."""
        playout = self.playout
        for key in list(self._awaiting):
            part = self._parts.get(key)
            heard = playout.heard_samples(key[0], key[1], now) if part is not None else 0
            if part is None or (heard == 0 and part.settled):
                del self._awaiting[key]  # forgotten, or cut before any of it played: nothing to report
                continue
            if heard > 0:
                del self._awaiting[key]
                first = playout.started_at(key[0], key[1])
                part.first_heard = first if first is not None else now  # when it reached the listener
                latency = None if self._speech_stopped_at is None else part.first_heard - self._speech_stopped_at
                self._events.append(AssistantAudioStarted(part.item_id, part.first_heard, latency))
                self._speech_stopped_at = None

    def _quiet_horizon(self, now: float, audible: bool) -> float:
        """Until when later ticks can change nothing, absent other calls (see :attr:`quiet_until`)."""
        playout = self.playout
        if (self.track is not None or self.local is not None or now < self._fade_end or playout.held
                or playout.pending_tail_samples):
            return _NEVER
        queued = playout.queued_samples
        if queued == 0:  # silence: nothing left to start, end or become audible
            silent = self._state is not TurnState.SPEAKING and playout.audio_until() <= now
            return self._retire_at if silent else _NEVER
        start = playout.next_time
        if not audible or self._state is not TurnState.SPEAKING or start is None:
            return _NEVER
        waiting = set(playout.queued_parts())
        for key in self._awaiting:  # a part still to reach the listener is a first-heard to report
            if key in waiting or playout.started_at(*key) is not None:
                return _NEVER
        return min(self._retire_at, start + queued / RATE - QUIET_MARGIN_S)  # the queue plays on from start

    def _step(self, event: TurnInput, now: float) -> None:
        """Apply one input to the turn table (:mod:`.turn_state`); report a change of state."""
        state = step(self._state, event)
        if state is not self._state:
            self._state = state
            self._events.append(StateChanged(state.value, now))

    def _retire(self, now: float) -> None:
        """Forget parts that can no longer be cut: older than the last part heard, and cut or wholly heard."""
        heard = [i for i, key in enumerate(self._order) if self._parts[key].first_heard is not None]
        older = [self._parts[key] for key in self._order[: heard[-1]]] if heard else []
        done = {(p.item_id, p.content_index) for p in older
                if p.settled or self.playout.heard_samples(p.item_id, p.content_index, now)
                >= self.protocol.received_audio_samples(p.item_id, p.content_index)}
        if done:
            self._order = [key for key in self._order if key not in done]
            for key in done:
                del self._parts[key]
                self._awaiting.pop(key, None)
        self.playout.retire(now)

    def sizes(self) -> dict[str, int]:
        """Entries per table: assistant audio parts the session can still cut."""
        return {"parts": len(self._parts), "awaiting_first_heard": len(self._awaiting)}

    def assistant_audible(self, now: float) -> bool:
        """Is assistant audio playing or waiting to play, or a response still producing it?

        The fade-out of a cut already made does not count: there is nothing left to cut; nor does
        a response we are cancelling (its late audio is dropped as it comes).
        """
        return (
            self.playout.queued_samples > 0
            or (self.playout.playing_at(now) is not None and now >= self._fade_end)
            or (self.protocol.active_response_id is not None and self.protocol.slot is not Slot.CANCELLING)
            or self.server_playing
        )

    def interruptible(self, now: float) -> bool:
        """What :meth:`interrupt` would stop: assistant audio (:meth:`assistant_audible`), or a response asked for
        that the server has not named yet (a question just sent: its answer is cancelled once it is created)."""
        return self.assistant_audible(now) or self.protocol.slot is Slot.REQUESTED

    def new_connection(self) -> None:
        """A connection replaced the last: what its server was playing is not known (a call's new track starts
        silent; a sideband attached again learns of the call's buffer from its next events), nor is a turn of the
        user's the last one's server had begun: the new server never heard its start."""
        self._buffer_playing = False
        self.user_speaking = False
        if self.track is not None:
            self.track.server_playing = False

    @property
    def server_playing(self) -> bool:
        """The server's output buffer is playing a response to the call (WebRTC, SIP; a sideband sees it too):
        between ``output_audio_buffer.started`` and ``.stopped`` or ``.cleared``."""
        return self.track.server_playing if self.track is not None else self._buffer_playing

    # ------------------------------------------------------------------ barge-in
    def interrupt(self, now: float, trigger: Trigger = Trigger.INTERRUPT) -> CoreEffects:
        """Stop playout at ``now`` and cut the conversation where the listener is (docs/design.md §5)."""
        self.quiet_until = _NEVER
        if self.local is not None:
            self.local.feed(LocalInput.CUT, now)
        self._barge_in = self._cut(now, trigger)
        return self._effects()

    # ------------------------------------------------------------------ local VAD
    def local_speech(self, now: float, onset: float) -> CoreEffects:
        """Local VAD heard speech starting at ``onset``: hold the assistant until the server confirms."""
        self.quiet_until = _NEVER
        if self.local is not None and self.assistant_audible(now) and not self.playout.held:
            self._local_step(LocalInput.LOCAL_ONSET, now, onset)
        return self._effects()

    def _local_step(self, event: LocalInput, now: float, onset: float | None = None) -> None:
        assert self.local is not None
        held_at = self.local.held_at
        action = self.local.feed(event, now, onset)
        match action:
            case Action.NONE:
                pass
            case Action.HOLD:
                self.playout.hold()
                self._events.append(PlaybackHeld(now, self.local.onset or now, *self._heard_now(now)))
            case Action.CONFIRM:  # the server heard it too, and cancels the response itself
                self._barge_in = self._cut(now, Trigger.LOCAL_VAD, plan_as=Trigger.SERVER_VAD)
            case Action.RESUME:
                self.playout.release()
                self._events.append(FalseBargeIn(now, held_at or now, *self._heard_now(now), resumed=True))
            case Action.CUT_UNCONFIRMED:
                self._events.append(FalseBargeIn(now, held_at or now, *self._heard_now(now), resumed=False))
                self._barge_in = self._cut(now, Trigger.LOCAL_VAD)
            case _:
                assert_never(action)

    def _heard_now(self, now: float) -> tuple[str | None, float]:
        last = self.playout.last_heard(now)
        if last is None:
            return None, 0.0
        return last.item_id, self.playout.heard_ms(last.item_id, last.content_index, now)

    def _cut(self, now: float, trigger: Trigger, plan_as: Trigger | None = None) -> BargeIn:
        cut = self.playout.interrupt(now, fade_ms=self.fade_ms)
        self._fade_end = cut.end
        end = now + self.fade_ms / 1000.0
        heard = {key: self.playout.heard_samples(key[0], key[1], end) for key in self._order}
        responses = self._interrupted_responses(cut.item_id, heard)
        parts = [p for key in self._order if not (p := self._parts[key]).settled and p.response_id in responses]
        received = self.protocol.received_audio_samples
        items = [CutPart(p.item_id, p.content_index, heard[(p.item_id, p.content_index)],
                           received(p.item_id, p.content_index), p.complete) for p in parts]
        for p in parts:
            p.settled = True
        plan = plan_barge_in(
            items,
            response_active=self.protocol.active_response_id is not None or self.protocol.response_in_progress,
            server_cancels=self.protocol.server_cancels_on_speech,
            trigger=plan_as or trigger,
            owner=self.owner,
            server_playing=self.server_playing,
        )
        for rid in responses:
            self.protocol.drop_response(rid)
        for command in plan.commands() if not self.protocol.closed else ():  # a lost connection takes none
            try:
                self.protocol.send(command)
            except LocalProtocolError as exc:  # e.g. the server said the item was not an assistant's
                self._events.append(SessionError(f"barge-in: {exc.message}", "cut_refused"))
                continue
            self._commands.append(command)
        playing = next((i for i in items if i.item_id == cut.item_id), None)
        event = BargeIn(
            trigger=trigger.value,
            at=now,
            item_id=cut.item_id,
            heard_ms=(playing.heard_samples if playing else cut.heard_samples) * 1000 / RATE,
            received_ms=(playing.received_samples if playing else cut.received_samples) * 1000 / RATE,
            audio_end_ms=next((ms for i, _c, ms in plan.truncate if i == cut.item_id), None),
            deleted=plan.delete,
            cancelled=plan.cancel,
            reaction_s=cut.fade_samples / RATE,
            in_device_ms=cut.revoked_samples * 1000 / RATE,
            unplayed_ms=cut.flushed_samples * 1000 / RATE,
            server_cuts=self.owner is OutputOwner.SERVER,
            cut=cut,
            heard_parts=tuple((i.item_id, i.content_index, i.heard_samples * 1000 / RATE) for i in items),
        )
        self._events.append(event)
        self._step(TurnInput.BARGE_IN, now)
        return event

    def _interrupted_responses(self, playing_item: str | None, heard: dict[tuple[str, int], int]) -> set[str]:
        """Responses whose audio was playing, still unheard, or still being produced."""
        out: set[str] = set()
        if self.protocol.active_response_id is not None:
            out.add(self.protocol.active_response_id)
        for key in self._order:
            part = self._parts[key]
            if not part.settled and (part.item_id == playing_item
                                     or heard[key] < self.protocol.received_audio_samples(*key)):
                out.add(part.response_id)
        return out


def _reason(details: Any) -> str | None:
    if details is None:
        return None
    if isinstance(details, dict):
        return details.get("reason")
    return getattr(details, "reason", None)

