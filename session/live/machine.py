"""The GPT-Live session machine: what a Live session decides, with no I/O, no awaits, no clock reads.

Beside the Realtime :class:`~voxline.session.machine.SessionMachine`, under the same driver
(:class:`~voxline.session.voice.VoiceSession` picks one by ``settings.api``). It takes the
same steps with the listener time ``now`` and returns the same
:class:`~voxline.session.machine.effects.Effects`; client events wait in the
:class:`~voxline.realtime.live.protocol.LiveProtocol`'s outbox.

What differs is the protocol (docs/protocol.md §14), each difference in a part the machine holds:

* assistant audio has no items: :class:`~.timeline.LiveTimeline` groups it into utterances,
  each tagged in the playout as ``(utterance id, 0)`` and placed on the session timeline;
* there is no truncate. A cut (the user's words arriving while the assistant is audible, a local-VAD
  onset, the app's :meth:`interrupt`, a drop) silences the playout at once (:mod:`.playback`, which also
  writes the note of what the listener heard) and the machine appends that note to the model's context;
  both sides' words are placed by :mod:`.transcripts`, the caller's audio goes through :mod:`.input_audio`;
* tools: with a registry, the Live model delegates to a Responses model whose function calls run
  once through the same tool runner and tracker as Realtime's (bridged by :mod:`.delegated`);
  without one, client delegations reach the app as :class:`~voxline.session.events.LiveDelegationRequested`;
* after a drop nothing resumes: a stored session is forked, else a new session starts with the
  conversation as text (:mod:`.history`); :mod:`.carrier` decides which, and keeps the app's
  commands (:mod:`.commands`) for the next connection.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import numpy as np

from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.live import events as lv
from voxline.realtime.live.protocol import LiveCommandFailed, LiveOutput, LiveProtocol
from voxline.realtime.notices import MalformedServerEvent

from ..bargein import Trigger
from ..capture import CapturePath
from ..events import (
    BargeIn, ConnectionLost, ConnectionRestored, LiveContinuity, LiveDelegationRequested, LiveSessionEnded,
    RawServerEvent, SessionError, SessionEvent, SpeechStarted,
)
from ..machine.effects import NO_EFFECTS, Effects
from ..machine.microphone import Captured, MicrophonePath
from ..metrics.records import MetricsReport
from ..mirror import ConversationMirror
from ..settings import SessionSettings
from ..tools.calls import CallTracker, ToolCall
from ..tools.events import ToolEvent
from ..tools.rounds import ToolRounds
from ..track_audio import gather_track_lead
from .carrier import LiveCarrier
from .commands import ContextKind, context_event, fixture_event, offered_schemas, tools_update
from .delegated import DelegatedCalls
from .history import HeardHistory
from .input_audio import LiveInputAudio
from .metrics import LiveMetrics
from .playback import LivePlayback
from .timeline import LiveTimeline
from .transcripts import LiveTranscripts

__all__ = ["LiveMachine"]


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
        self.metrics = LiveMetrics(playout)
        self.history = HeardHistory()  # what a new session is given after a drop, across every connection
        self.playback = LivePlayback(playout, self.metrics, self.history)
        if settings.voice_on_track:
            gather_track_lead(playout)
        self.carrier = LiveCarrier()
        self.input_audio = LiveInputAudio(settings, capture, self.carrier, self.metrics, playout.rate)
        self.transcripts = LiveTranscripts(settings, self.metrics, self.history, self.delegated.rounds)
        self._raw = raw_events
        self.closed = False
        self.config_version = 0
        self._now = 0.0  # the latest listener time a step was given (for the media track's blocks)

    @property
    def timeline(self) -> LiveTimeline:
        """The current connection's session timeline."""
        return self.playback.timeline

    @property
    def mic(self) -> MicrophonePath:
        return self.input_audio.mic

    # ------------------------------------------------------------------ connections
    @property
    def carrying(self) -> bool:
        """A connection carries the session (:attr:`.carrier.LiveCarrier.carrying`)."""
        return self.carrier.carrying

    @property
    def ended(self) -> bool:
        """The server closed the session for good: at the app's request or for its content (no reconnect)."""
        return self.carrier.ended

    @property
    def protocol(self) -> LiveProtocol:
        return self.carrier.protocol

    @property
    def fork_from(self) -> str | None:
        """The stored session the next connection forks (set on a drop)."""
        return self.carrier.fork_from

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
        history = self.history.messages() if self.carrier.continuity is not None else None
        return self.settings.live_session_config(self.tool_schemas(), history=history)

    def attach(self, protocol: Any) -> None:
        assert isinstance(protocol, LiveProtocol)
        if self.carrier.attach(protocol):  # a new session: a new track and timeline (ids stay unique)
            self.playback.new_timeline(f"live{self.carrier.connections}_utt")
            self.metrics.new_timeline(f"live{self.carrier.connections}_user")
        self.calls.limit = protocol.max_event_bytes  # tool outputs are sized for this connection
        if self.carrier.resuming:  # a fork is told what the listener heard of the reply cut last, once
            self.carrier.hand_over(self.playback.take_note() if self.carrier.fork_from is not None else None)

    def connection_lost(self, now: float, code: int | None, reason: str) -> Effects:
        """The connection dropped: the listener hears no more; what can come back is decided here."""
        self.carrier.connection_lost(now, store=self.settings.live_store)
        self.delegated.connection_lost()
        effects = self._cut(now, Trigger.CONNECTION_LOST) if self.playback.audible(now) else NO_EFFECTS
        told = self.playback.connection_lost(now)  # heard, and not yet told: what of it was heard
        return Effects((ConnectionLost(code, reason, now), *effects.events, *told), effects.barge_in)

    def fork_refused(self, why: str) -> None:
        """The stored session could not be forked (still running on the server after a drop it has not noticed, or
        its recording not final yet): the next connection starts a new session seeded with what was heard, as
        without ``store``, rather than the conversation ending with the reconnect budget."""
        if self.carrier.fork_refused(why):
            self.playback.last_note = None  # what was heard of the last cut is in the history a new session is given

    def reconnect_failed(self, protocol: Any) -> None:
        self.carrier.reconnect_failed()

    def restore(self, now: float, *, handover: bool = False) -> ConnectionRestored:
        """The new connection is attached: what the session owes it waits in its protocol for its
        ``session.started`` (:meth:`.carrier.LiveCarrier.hand_over`), so that a connection lost before then loses
        none of it."""
        return ConnectionRestored(now, 0, 0, 0.0, handover)

    def take_continuity(self) -> LiveContinuity | None:
        return self.carrier.take_continuity()

    # ------------------------------------------------------------------ server events
    def receive(self, output: LiveOutput | object, now: float) -> Effects:
        """One output of the Live core (the driver hands it whatever its connection's core produced)."""
        events: list[SessionEvent] = []
        calls: tuple[ToolCall, ...] = ()
        barge: BargeIn | None = None
        hang_up = False
        match output:
            case lv.LiveOutputAudioDelta() if self.settings.call_id is not None:
                return NO_EFFECTS  # a sideband's reflection: it has no listener of its own
            case lv.LiveOutputAudioDelta():
                return self._track(np.frombuffer(base64.b64decode(output.delta), dtype="<i2"), now)
            case lv.LiveOutputTranscriptDelta():
                events.extend(self.transcripts.reply(output, now, self.timeline, self.carrier.started_at))
            case lv.LiveInputTranscriptDelta():
                said, placed = self.transcripts.user(output, now, self.carrier.started_at)
                events.extend(said)
                # the model stops itself when talked over; the listener, now
                if placed and self.playback.spoken_over(now, output.end_ms):
                    cut = self._cut(now, Trigger.SERVER_VAD)
                    events.extend(cut.events)  # type: ignore[arg-type]
                    barge = cut.barge_in
            case lv.LiveSessionStarted():
                events.extend(self.carrier.session_started(now, output.session.id))
            case lv.LiveSessionClosed():
                self.timeline.end()  # no gap follows the last reply: it is reported once heard to its end
                events.append(LiveSessionEnded(output.reason, output.session.id, now))
                hang_up = True  # a server that leaves the socket open after it would be streamed to for nothing
            case lv.LiveDelegationCreated():
                if output.delegation.target == "client":
                    self.carrier.asked(output.delegation.id)
                    events.append(LiveDelegationRequested(output.delegation.id, output.offset_ms, now))
            case lv.LiveResponseEvent():
                if self.run_tools:
                    calls = self.delegated.see(output)
                    events.extend(self.delegated.withheld)
                    self.delegated.withheld.clear()
            case LiveCommandFailed() if output.command_type == "session.start" and not self.protocol.started:
                # no session: nothing is heard and every command waits for a start that never comes; the session
                # ends here (the driver does not reconnect a session that failed), its connection with it
                events.append(SessionError(f"the session could not start: {output.message}", output.code, fatal=True))
                hang_up = True
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

    def track_audio(self, block: np.ndarray) -> None:
        """WebRTC: a block of the remote media track (int16 24 kHz), the same track the deltas carry on a WebSocket.

        The transport's decoder keeps the blocks on the sender's RTP clock from its first packet (lost packets'
        time comes as silence), so a count of samples is the position on the session timeline.
        Called from the transport's pump with no listener time: the utterance's arrival is stamped with
        the last instant the driver gave the machine (it only feeds the metrics)."""
        self._track(np.asarray(block, dtype=np.int16), self._now)

    def _track(self, pcm: np.ndarray, now: float) -> Effects:
        self._now = max(self._now, now)
        self.playback.enqueue_track(pcm, now)
        return NO_EFFECTS

    # ------------------------------------------------------------------ time and cuts
    def tick(self, now: float) -> Effects:
        self._now = max(self._now, now)
        return self.playback.tick(now)

    def _cut(self, now: float, trigger: Trigger) -> Effects:
        """Silence at ``now``; the heard part reported and, while connected, told to the model."""
        effects, note = self.playback.cut(now, trigger)
        if note is not None and self.carrying and not self.ended:
            self.protocol.send(lv.LiveInstructionsAppend(content=note))
        return effects

    def interrupt(self, now: float, trigger: Trigger = Trigger.INTERRUPT) -> Effects:
        """Silence the assistant where the listener is: a local cut, so also once the session is over (the rest of
        a reply closed for its content still plays)."""
        self._check_started()
        if not self.playback.audible(now):
            return NO_EFFECTS
        return self._cut(now, trigger)

    def local_speech(self, now: float, onset: float) -> Effects:
        """A local-VAD onset: the user speaks. Live's model stops by itself when it hears them; the listener, now."""
        if not self.playback.audible(now):
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
        return (effects, *self.input_audio.send(pcm, end, media=media, padded=padded))

    def input_ended(self, now: float) -> bool:
        return self.input_audio.input_ended(now)

    # ------------------------------------------------------------------ the app's commands
    def _check_started(self) -> None:
        if self.closed:
            raise ConfigurationError("the session is closed")
        if self.carrier.current is None:
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
        self.carrier.set_muted(False)
        return self.interrupt(now) if self.playback.audible(now) else NO_EFFECTS

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
        return NO_EFFECTS, not self.closed and self.input_audio.commit(now, turn)

    def update(self, *, instructions: str | None = None, tools: list[str] | None = None,
               voice: str | None = None) -> bool:
        """Only the delegated tools can change: a Live session's instructions and voice are fixed at its start."""
        self.check_open()
        if instructions is not None or voice is not None:
            raise ConfigurationError("a GPT-Live session's instructions and voice are fixed when it starts")
        if tools is None or (offer := tools_update(self.registry, tools)) is None:
            return False
        self.carrier.command(offer[0])
        self.offered_tools = offer[1]
        return True

    def mute(self) -> None:
        self.check_open()
        self.carrier.set_muted(True)

    def unmute(self) -> None:
        self.check_open()
        self.carrier.set_muted(False)

    def append(self, content: str, *, kind: ContextKind = "instructions", delegation_id: str | None = None) -> str:
        """Append context: ``instructions`` (kept), ``thinking`` (silent) or ``commentary`` (for the model to say)."""
        self.check_open()
        event = context_event(content, kind, delegation_id)
        if delegation_id is not None:
            self.carrier.check_known(delegation_id)
        return self.carrier.command(event)

    def play_fixture(self, pcm: np.ndarray) -> str:
        """One whole audio fixture (PCM16 24 kHz) through the session's output."""
        self.check_open()
        return self.carrier.command(fixture_event(pcm))

    def close_session(self) -> str:
        self.check_open()
        return self.carrier.command(lv.LiveClose())

    # ------------------------------------------------------------------ tools
    def tool_schemas(self) -> list[dict[str, Any]] | None:
        """The tools a new connection offers: as :meth:`update` last chose them, else the registry's."""
        return offered_schemas(self.registry, self.offered_tools)

    def tool_event(self, event: ToolEvent, now: float) -> Effects:
        self.metrics.tool(event, now)
        return Effects((dataclasses.replace(event, at=now),))  # lines and logs place it when it happened

    def drain_tools(self) -> bool:
        """Tool outputs as ``response.item.create``, then the one ``response.create`` that continues."""
        protocol = self.carrier.current
        return self.carrying and protocol is not None and self.delegated.send(protocol)

    # ------------------------------------------------------------------ state
    @property
    def turn_open(self) -> bool:
        """GPT-Live has no turn events: the model finds turns itself, and none is open to the client."""
        return False

    def idle(self, now: float, *, tools_busy: bool) -> bool:
        if self.carrier.current is None:
            return True
        if not self.carrying:  # reconnecting is never idle; a session the server ended is, once its audio played
            return self.closed or (self.ended and not self.playback.audible(now))
        return (not self.playback.audible(now) and not tools_busy and not self.calls.running()
                and not self.calls.runnable())

    def close(self, now: float) -> tuple[SessionEvent, ...]:
        if self.closed:
            return ()
        self.closed, self.carrier.attached = True, False
        return ()

    def report(self, now: float) -> MetricsReport:
        return self.metrics.report(now)

    def sizes(self) -> dict[str, int]:
        out = dict(self.timeline.sizes())
        out.update(self.metrics.sizes())
        out.update(self.playback.sizes())
        out.update({"live_history": len(self.history), "live_orphan_calls": self.delegated.orphans,
                    "live_call_names": self.delegated.named, "live_delegations": self.delegated.delegations})
        if self.carrier.current is not None:
            out.update(self.carrier.current.sizes())
        out.update({f"calls_{k}": v for k, v in self.calls.sizes().items()})
        return out
