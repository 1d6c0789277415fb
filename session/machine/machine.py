"""The session machine: everything a voice session decides, with no I/O, no awaits and no clock reads.

It owns the :class:`~voxline.session.core.SessionCore` (playout and barge-in), the
conversation mirror, the input journal (through :class:`.microphone.MicrophonePath`), the
tool-call tracker, the metrics and, over WebRTC, the track tagger. A driver hands it what
happens, each with the listener time ``now``:

* :meth:`SessionMachine.receive` — a protocol output (server event or notice);
* :meth:`tick` — after a playout pass; :meth:`interrupt`, :meth:`local_speech`;
* :meth:`captured` — a microphone block; :meth:`input_ended`;
* :meth:`send_text`, :meth:`start_talking`, :meth:`stop_talking`, :meth:`update` — the app's commands;
* :meth:`tool_event` — the tool runner started or answered a call;
* :meth:`connection_lost`, then :meth:`attach` + :meth:`restore` on a new connection;
* :meth:`close`.

Each returns :class:`~.effects.Effects` (or says whether frames wait): the events for the
app, the calls to run, the audio a cut revoked. Client events go into the current
protocol core's outbox; the driver sends them. ``VoiceSession`` is the one driver.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
import dataclasses
from typing import Any, Protocol

import numpy as np

from voxline.audio.tick_gate import TickGate
from voxline.audio.playout import PlayoutBuffer
from voxline.base.arguments import as_error, unicode_text
from voxline.base.audio_format import SAMPLE_RATE
from voxline.realtime import events as ev
from voxline.realtime.errors import ConfigurationError, LocalProtocolError
from voxline.realtime.events.codec import MAX_CLIENT_EVENT_BYTES, json_text_bytes
from voxline.realtime.frames import frame_bytes
from voxline.realtime.notices import CommandFailed
from voxline.realtime.protocol import ProtocolOutput, RealtimeProtocol

from ..bargein import OutputOwner, Trigger
from ..capture import CapturePath
from ..core import NO_CORE_EFFECTS, CoreEffects, SessionCore
from ..events import ConnectionLost, ConnectionRestored, SessionError, SessionEvent
from ..local_barge import BargePolicy, LocalBarge
from ..metrics.records import MetricsReport
from ..metrics.tracker import SessionMetrics
from ..mirror import ConversationMirror
from ..restore import PLAIN_CREATE, Owed, creates_owed
from ..settings import SessionSettings
from ..tools.calls import CallTracker
from ..tools.names import chosen_tools
from ..tools.rounds import ToolRounds
from ..tools.events import ToolEvent
from ..track_audio import TrackTagger, gather_track_lead
from .effects import NO_EFFECTS, Effects
from .microphone import MIN_TURN_SAMPLES, Captured, MicrophonePath, audio_items
from .updates import AppUpdates, Update

__all__ = ["SessionMachine", "ToolSchemas"]


class ToolSchemas(Protocol):
    """What the machine reads of a tool registry: the tools' names and schemas to offer the model."""

    def names(self) -> list[str]: ...

    def schemas(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]: ...


_ENVELOPE_BYTES = 1024  # a text message's event around its text: type, ids, role, content part


class SessionMachine:
    """One conversation's decisions over one connection at a time (see the module docstring)."""

    ended = False  # a Realtime session is never over while open: a closed connection is a drop

    def __init__(
        self,
        settings: SessionSettings,
        playout: PlayoutBuffer,
        *,
        registry: ToolSchemas | None = None,
        mirror: ConversationMirror | None = None,
        capture: CapturePath | None = None,
        barge_policy: BargePolicy | None = None,
        raw_events: bool = False,
        run_tools: bool = True,
    ) -> None:
        self.settings = settings
        self.playout = playout
        self.registry = registry  # None: no tools
        self.mirror = mirror if mirror is not None else ConversationMirror()
        self.calls = CallTracker()
        self.run_tools = run_tools  # False: another session on the same call (a sideband) answers the calls
        self.track = TrackTagger(playout) if settings.voice_on_track else None
        if settings.voice_on_track:
            gather_track_lead(playout)
        self.mic = MicrophonePath(padding_ms=settings.prefix_padding_ms, chunk_samples=settings.input_chunk_samples,
                                  capture=capture, push_to_talk=settings.turn_detection == "none",
                                  journaled=True, over_track=self.track is not None)
        self._barge_policy = barge_policy if capture is not None and capture.vad is not None else None
        self._local_vad = capture is not None and capture.vad is not None
        self._raw = raw_events
        vad = settings.turn_detection == "server_vad"  # speech ends audio_end_ms − silence_ms before
        self.metrics = SessionMetrics(playout, self.mirror, received=self._received_samples,
                                      silence_ms=settings.silence_ms if vad else 0,
                                      padding_ms=settings.prefix_padding_ms if vad else 0)
        self.core: SessionCore | None = None
        self.tick_gate = TickGate()
        """The core's quiet horizon (:attr:`SessionCore.quiet_until`) for an output to read: a tick before it does nothing."""
        self._attached = False  # a connection is attached (until its drop is taken or the session ends)
        self.closed = False
        self._offered: list[str] | None = None  # tool names offered to the model (None: all)
        self.config_version = 0  # counts the app's updates: a connection configured before one is stale
        self.updates = AppUpdates()  # the app's session.update on the wire, and the one waiting for its answer
        self._item_prefix = "item_vx" + secrets.token_hex(4)
        self._item_count = 0
        self._owed: list[Owed] = []  # what the lost connection owed, for the next restore
        self._captured_at: float | None = None  # the capture time of the last block kept for the server
        self._cut_short = False  # the drop cut a reply short for the listener
        self._texts_while_away = 0  # turns sent while away: each owes a create
        self.rounds = ToolRounds(settings.max_tool_rounds)
        self._released_while_away = False  # push-to-talk let go while away: the resent turn is committed

    @property
    def offered_tools(self) -> list[str] | None:
        """The tools offered to the model, as :meth:`update` last chose them (None: every tool of the registry); a
        call to another is refused, though the registry (shared by other sessions) has it."""
        return self._offered

    # ------------------------------------------------------------------ connections
    @property
    def protocol(self) -> RealtimeProtocol:
        """The protocol core of the connection the conversation is on."""
        if self.core is None:
            raise ConfigurationError("the session is not open; use 'async with VoiceSession(...)'")
        return self.core.protocol

    def _received_samples(self, item_id: str, content_index: int) -> int:
        """Assistant audio received of one part: the protocol core keeps the one tally."""
        return self.core.protocol.received_audio_samples(item_id, content_index) if self.core is not None else 0

    def configure(self, protocol: RealtimeProtocol) -> str:
        """Queue the session's configuration on a new connection's protocol core; the event's id."""
        return protocol.update_session(self.settings.session_config(self._schemas()))

    def attach(self, protocol: RealtimeProtocol) -> None:
        """Make ``protocol`` the conversation's; it inherits what the previous one received."""
        self.calls.limit = protocol.max_event_bytes  # texts and tool outputs are sized for this connection
        if self.core is None:
            # a sideband's call plays from the server's output buffer: an interrupt cancels and clears it there
            owner = OutputOwner.SERVER if self.settings.call_id is not None else OutputOwner.CLIENT
            self.core = SessionCore(protocol, self.playout, raw_events=self._raw, track=self.track,
                                    gate=self.tick_gate, owner=owner)
            if self._local_vad:
                self.core.local = LocalBarge(self._barge_policy)
        else:
            protocol.inherit_received_audio(self.core.protocol)
            self.core.protocol = protocol
            self.core.new_connection()
        self.updates.reset()  # the new connection was configured with all the settings
        self._attached = True

    def connection_lost(self, now: float, code: int | None, reason: str) -> Effects:
        """The connection dropped: the listener hears no more, and the conversation keeps what they heard."""
        assert self.core is not None
        self._attached = False
        lost = ConnectionLost(code, reason, now)
        self._cut_short = False
        effects = NO_EFFECTS
        # a sideband's drop is not the call's: the caller goes on hearing what the server plays
        if self.settings.call_id is None and self.core.assistant_audible(now):
            effects = self._settle(self.core.interrupt(now, Trigger.CONNECTION_LOST), now)
            cut = effects.barge_in
            self._cut_short = cut is not None and cut.unplayed_ms + cut.in_device_ms > 0
        self._owed = self.core.protocol.owed_creates()
        return Effects((lost, *effects.events), effects.barge_in)

    def reconnect_failed(self, protocol: RealtimeProtocol) -> None:
        """A restored connection closed at once: the next try owes what that one was given."""
        self._attached = False
        if protocol.closed:
            self._owed = protocol.owed_creates()

    def restore(self, now: float, *, handover: bool = False) -> ConnectionRestored:
        """Recreate the conversation on the attached connection: items, tool outputs, owed responses, the turn.

        Exactly one ``response.create`` for each one owed: responses with tool calls are
        followed up by the tool tracker once their outputs are in; a response the drop left
        unfinished, or cut short for the listener, is asked for again otherwise; and one for
        each turn sent while away. A sideband's call kept its conversation: nothing to send.
        """
        protocol = self.protocol
        if self.settings.call_id is not None:
            return ConnectionRestored(now, 0, 0, 0.0, handover)
        owed, cut_short = ([], False) if handover else (self._owed, self._cut_short)
        unfinished = self.calls.unfinished_items()
        plan = self.mirror.plan_rebuild(self.mic.journal.audio_of, max_event_bytes=protocol.max_event_bytes,
                                        new_id=self.new_item_id, keep=self.settings.rebuild_items, hold=unfinished)
        skipped = 0
        for left_out in plan.skipped:
            if left_out.reason == "too_large":
                skipped += 1
                self.calls.on_item_deleted(left_out.item_id)  # a call the new conversation lacks: its output neither
        carried = set(plan.item_ids)
        for item_id in unfinished - carried:  # let go past the mirror's bound, or left out: its output cannot go
            self.calls.on_item_deleted(item_id)
        for command in plan.commands:
            protocol.send(command)
        self.mirror.adopt_rebuild(plan)
        followed = set(self.calls.unsettled_responses())
        for rid in followed:
            self.calls.on_response_done(rid, "completed")  # the rebuilt conversation lets the model go on
        followed.update(self.calls.follow_ups_owed())  # calls still running: their outputs bring the create
        self.drain_tools()
        creates = creates_owed(owed, followed, cut_short=cut_short, texts_while_away=self._texts_while_away)
        self._texts_while_away = 0
        # push-to-talk let go while away: each turn whole and on its own; a turn still held goes on after them
        turns, rest = self.mic.resume_turns(handover=handover, released_while_away=self._released_while_away)
        resent = 0  # samples
        left = sum(map(len, turns)) + len(rest)  # from the next piece sent to the last sample captured
        captured = self._captured_at if self._captured_at is not None else now

        def resend(pcm: np.ndarray, *, whole: bool) -> int:
            nonlocal left
            left -= len(pcm)  # the pieces go in the order they were captured: this one ends ``left`` before the last
            return self._resend(pcm, whole=whole, end=captured - left / self.mic.journal.rate)

        for turn in turns:
            # the turn ended while away: its answer must hear it (again if this fails)
            resent += resend(turn, whole=True)
        if not turns:
            resent = resend(rest, whole=False)  # speech under way: the server hears it before what is asked of it
            if self.mic.speech_only and resent and not creates and not followed:
                # the old call's VAD would have answered it, and the new one hears only what follows: a user still
                # talking is heard by it and interrupts this answer, one who stopped while away is answered
                creates.append(dict(PLAIN_CREATE))
        for payload in creates:
            protocol.send(payload)
        if turns:
            resent += resend(rest, whole=False)  # the next turn, begun after those let go: after their answer
        resent_ms = resent * 1000 / self.mic.journal.rate
        return ConnectionRestored(now, len(plan.item_ids), len(creates), resent_ms, handover, skipped, plan.older)

    def _resend(self, pcm: np.ndarray, *, whole: bool, end: float) -> int:
        """Audio of the user's a new connection lacks, its last sample captured at ``end``: appended (and committed
        when ``whole``), or over WebRTC, whose track takes no audio from before the call, user audio items sized for
        its data channel (they are the turn: nothing to commit), kept as committed turns. The samples sent."""
        if not len(pcm):
            return 0
        protocol = self.protocol
        if self.track is None:
            self.metrics.input_sent(len(pcm), end, protocol)  # the server counts its input from these
            protocol.append_audio(pcm.astype("<i2").tobytes())
            if whole:
                protocol.commit_audio()
            return len(pcm)
        sent = []
        for payload, part in audio_items(pcm, protocol.max_event_bytes, self.new_item_id):
            try:
                protocol.send(payload)
            except LocalProtocolError:  # a channel too small for even a sample of audio: the turn cannot go
                break
            create = ev.parse_client_dict(payload)
            assert isinstance(create, ev.ConversationItemCreate)
            self.mirror.record_local(create)  # the conversation's now: a call lost before its echo rebuilds it
            sent.append((str(payload["item"]["id"]), part))
        self.mic.journal.resent_as_items(sent)  # their audio, under their ids, until a transcript comes
        return sum(len(part) for _id, part in sent)

    # ------------------------------------------------------------------ server events and time
    def receive(self, output: ProtocolOutput, now: float) -> Effects:
        """One protocol output through the core, the metrics, the journal, the tools and the mirror."""
        core = self.core
        assert core is not None
        if isinstance(output, CommandFailed) and output.command_type == "session.update":
            self._update_answered(output.event_id, refused=True)
        elif isinstance(output, ev.SessionUpdated):
            self._update_answered(None, refused=False)
        decided = core.handle(output, now)
        if isinstance(output, ev.InputAudioBufferCommitted):
            self._released_while_away = False  # the server has the turn
        self.metrics.wire(output, now)
        self.mic.journal.handle(output)
        calls: tuple[Any, ...] = ()
        withheld: SessionError | None = None
        if isinstance(output, ev.InputAudioBufferCommitted):
            self.rounds.user_turn()  # the model may go on with tools again
        elif isinstance(output, ev.ResponseDone) and self.run_tools:
            withheld = self._count_tool_round(output.response.id)
        if self.run_tools:
            calls = self._tools_see(output)
        self.mirror.apply(output)
        if decided is NO_CORE_EFFECTS and not calls and withheld is None:
            return NO_EFFECTS  # the bulk of a reply: nothing for the app (the next tick observes it)
        effects = self._settle(decided, now)
        if withheld is not None:
            effects = dataclasses.replace(effects, events=(*effects.events, withheld))
        return Effects(effects.events, effects.barge_in, calls) if calls else effects

    def _count_tool_round(self, response_id: str) -> SessionError | None:
        """A response that made calls is a tool round (:mod:`~voxline.session.tools.rounds`)."""
        if not self.calls.has_calls(response_id):
            return None
        withheld = self.rounds.over(response_id)
        if withheld is not None:
            self.calls.withhold_follow_up(response_id)
        return withheld

    def _tools_see(self, output: ProtocolOutput) -> tuple[Any, ...]:
        """Calls start on ``arguments.done`` only; ``response.done`` and deletions settle them."""
        match output:
            case ev.ResponseFunctionCallArgumentsDone():
                return tuple(self.calls.on_arguments_done(output.response_id, output.item_id, output.call_id,
                                                          output.name, output.arguments))
            case ev.ResponseDone():
                self.calls.on_response_done(output.response.id, output.response.status or "completed")
            case ev.ConversationItemDeleted():
                self.calls.on_item_deleted(output.item_id)
            case _:
                pass
        return ()

    def tick(self, now: float) -> Effects:
        """After a playout pass: first samples heard, speaking/listening, cuts measured. Cheap when nothing changed."""
        core = self.core
        if core is None:
            return NO_EFFECTS
        if now < core.quiet_until and now < self.metrics.next_due:
            return NO_EFFECTS  # nothing a tick looks at can have changed (SessionCore.quiet_until)
        if now >= core.retire_due:
            self.metrics.observe(now)  # the heard counts of what the retire may forget, before it does
        effects = self._settle(core.tick(now), now)
        gate = self.tick_gate  # the core's quiet horizon, no later than the next cut the metrics measure
        gate.until = min(gate.until, self.metrics.next_due)
        return effects

    def _settle(self, decided: CoreEffects, now: float) -> Effects:
        """A barge-in reaches the mirror; the metrics see every event and add their own."""
        barge_in = decided.barge_in
        if barge_in is not None:
            if self.track is not None:  # WebRTC: each item's length, estimated from its transcript
                for item_id, audio_ms in self.track.audio_estimates():
                    self.mirror.record_audio(item_id, audio_ms)
            self.mirror.apply_barge_in(barge_in)
        extra = self.metrics.effects(decided, now)
        if not extra and barge_in is None and not decided.events:
            return NO_EFFECTS
        events: tuple[SessionEvent, ...] = (*decided.events, *extra) if extra else decided.events
        return Effects(events, barge_in)

    # ------------------------------------------------------------------ barge-in
    def interrupt(self, now: float, trigger: Trigger = Trigger.INTERRUPT) -> Effects:
        """Stop the assistant at ``now`` and cut where the listener is; nothing when nothing is audible or asked for."""
        self.check_open()
        core = self.core
        if core is None or not core.interruptible(now):
            return NO_EFFECTS
        return self._settle(core.interrupt(now, trigger), now)

    def local_speech(self, now: float, onset: float) -> Effects:
        """Local VAD heard speech from ``onset``: hold the assistant until the server confirms."""
        if self.core is None:
            return NO_EFFECTS
        return self._settle(self.core.local_speech(now, onset), now)

    # ------------------------------------------------------------------ microphone
    def captured(self, item: Captured, now: float, *, media: bool = False, padded: int = 0
                 ) -> tuple[Effects, np.ndarray | None, bool]:
        """A microphone block: (effects of local speech in it, the block for a media track, whether frames wait).

        With ``media`` (WebRTC) the block is for the connection's media track, which the driver
        feeds (``padded``: the silence its track sent since the last block, for want of one in time); otherwise it
        is journaled and appended in chunks. Nothing goes out while not talking.
        """
        pcm, onset, end = self.mic.clean(item, now)
        effects = self.local_speech(now, onset) if onset is not None else NO_EFFECTS
        core = self.core
        if not self.mic.talking or core is None:
            return effects, None, False
        pcm = np.ascontiguousarray(pcm, dtype="<i2")
        self._captured_at = end
        if media and self.carrying:
            self.mic.keep(pcm, padded)  # kept until committed, for a new call after a drop
            self.metrics.input_sent(padded + len(pcm), end, core.protocol)  # the track's filler counts as sent
            return effects, pcm, False
        return effects, None, self._append(self.mic.captured(pcm, carrying=self.carrying), end)

    def input_ended(self, now: float) -> bool:
        """The input is over: its last chunk goes out. True if a frame waits."""
        held = self.mic.chunker.take()  # captured by the last block's end, not now
        return self._append(held, self._captured_at if self._captured_at is not None else now)

    def _append(self, chunk: np.ndarray | None, now: float) -> bool:
        if chunk is None or not self.carrying or self.core is None or self.core.protocol.closed:
            return False
        protocol = self.core.protocol
        self.metrics.input_sent(len(chunk), now, protocol)  # its last sample captured at now
        protocol.append_audio(chunk.tobytes())
        return True

    # ------------------------------------------------------------------ the app's commands
    def new_item_id(self) -> str:
        self._item_count += 1
        return f"{self._item_prefix}{self._item_count:06d}"

    def check_open(self) -> None:
        """Every command of the app's needs an open session: one clear error before it opens and after it closed.

        While a dropped connection is being replaced the session is still open: commands are
        kept and reach the next connection.
        """
        if self.closed:
            raise ConfigurationError("the session is closed")
        if self.core is None:
            raise ConfigurationError("the session is not open yet: use 'async with VoiceSession(...)' first")

    def send_text(self, text: str) -> bool:
        """A user text message and a response; kept for the next connection while away. True if frames wait."""
        self.check_open()
        if not isinstance(text, str):
            raise ConfigurationError(f"send_text takes a string, not {type(text).__name__}")
        _sendable(text, "send_text", "the text", self.calls.limit)  # refused here, or the mirror would send it again on every reconnect
        item = {"id": self.new_item_id(), "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text}]}
        create = ev.parse_client_dict({"type": "conversation.item.create", "item": item})
        assert isinstance(create, ev.ConversationItemCreate)
        self.mirror.record_local(create)
        self.rounds.user_turn()
        if not self.carrying:
            self._texts_while_away += 1
            return False
        self.protocol.send(create)
        self.protocol.create_response()
        return True

    def start_talking(self, now: float) -> Effects:
        """Push-to-talk pressed: clear what the server buffered; cut the assistant if it is on.

        A turn released and not committed yet (its audio still on the way over a media track) is
        committed first: the clear must not take it."""
        self.check_open()
        self._check_media("start_talking")
        early, _waiting = self.commit_talking(now)
        self.mic.press()
        if not self.carrying or self.core is None:
            return early
        self._released_while_away = False  # what the server buffered is cleared: a new turn begins
        self.protocol.clear_audio()
        self.mic.journal.clear_sent()  # the turn begins now, not when the server's reply comes
        if self.playout.queued_samples or self.protocol.response_in_progress:
            cut = self.interrupt(now)
            return dataclasses.replace(cut, events=(*early.events, *cut.events)) if early.events else cut
        return early

    def stop_talking(self, now: float) -> tuple[Effects, bool]:
        """Push-to-talk released: the turn's last chunk, its commit and a response; whether frames wait.

        Released without having been pressed (or twice): there is no turn, and nothing is sent.
        :meth:`release_talking` and :meth:`commit_talking` are its two halves, for a driver that
        lets a media track send what it holds of the turn before the commit."""
        turn = self.release_talking(now)
        return self.commit_talking(now, turn) if turn else (NO_EFFECTS, False)

    def release_talking(self, now: float) -> int:
        """Push-to-talk released: nothing more of the microphone goes out. The turn now waiting for
        :meth:`commit_talking`, named by a number (0: it was not pressed, there is no turn)."""
        self.check_open()
        self._check_media("stop_talking")
        return self.mic.release() if self.mic.talking else 0

    def _check_media(self, command: str) -> None:
        """Push-to-talk needs a microphone of the session's own: on a call's sideband the input buffer is the
        caller's, which a press would clear and a release find empty."""
        if self.settings.call_id is not None:
            raise ConfigurationError(f"{command}: a session attached to a call (call_id) has no microphone of its "
                                     "own, and the call's input is the caller's: push-to-talk is the media side's")

    def commit_talking(self, now: float, turn: int | None = None) -> tuple[Effects, bool]:
        """The released turn (``turn``, or whichever waits): its last chunk, its commit and a response
        (kept for the next connection while away); whether frames wait (not once that turn was
        committed: a press in between commits it first, nor after the session closed).

        A turn shorter than the service commits (100 ms: a tap of the key) is dropped instead, and said
        as a ``turn_too_short`` :class:`SessionError`: committed, it would be refused, and its response
        would answer nothing the user said."""
        if self.closed or not self.mic.take_release(turn):
            return NO_EFFECTS, False
        if self.mic.turn_samples < MIN_TURN_SAMPLES:
            return self._too_short(now), self._drop_turn()
        if not self.carrying:
            if not self._released_while_away:  # turns let go while away, one after another, get one answer
                self._texts_while_away += 1  # the turn is resent with the journal's audio, committed, then answered
            self._released_while_away = True
            self.mic.journal.turn_ended()  # a press before the next connection starts a turn of its own
            return NO_EFFECTS, False
        self._append(self.mic.chunker.take(), now)  # the end of the turn goes before its commit
        self.protocol.commit_audio()
        self.protocol.create_response()
        return NO_EFFECTS, True

    def _too_short(self, now: float) -> Effects:
        said = self.mic.turn_samples * 1000 / SAMPLE_RATE
        return Effects((SessionError(f"push-to-talk: a turn of {said:.0f} ms is too short to send (at least "
                                     f"{MIN_TURN_SAMPLES * 1000 // SAMPLE_RATE} ms of audio): it was dropped, and "
                                     "nothing was asked", "turn_too_short"),))

    def _drop_turn(self) -> bool:
        """A turn too short to commit: gone for the server too. True if a clear waits to be sent."""
        self.mic.chunker.clear()
        if not self.carrying or self.core is None:
            self.mic.journal.drop_last(self.mic.turn_samples)  # never sent: nothing of it goes on the next connection
            return False
        self.protocol.clear_audio()
        self.mic.journal.clear_sent()
        return True

    def update(self, *, instructions: str | None = None, tools: list[str] | None = None,
               voice: str | None = None) -> bool:
        """New instructions, voice or offered tools, kept for reconnects. True if a ``session.update`` waits."""
        self.check_open()
        changes: dict[str, Any] = {}
        for name, value in (("instructions", instructions), ("voice", voice)):
            if value is not None:
                if not isinstance(value, str):
                    raise ConfigurationError(f"{name} takes a string, not {type(value).__name__}")
                changes[name] = _sendable(value, "update", name, self.calls.limit)
        offered = self._offered
        if tools is not None:
            offered = chosen_tools(tools, self.registry.names() if self.registry is not None else ())
        before = self.settings, self._offered
        self.settings, self._offered = self.settings.model_copy(update=changes), offered
        size = frame_bytes({"type": "session.update", "session": self.settings.session_config(self._schemas())})
        if size + _ENVELOPE_BYTES > self.calls.limit:  # every reconnect would send it, and be refused
            self.settings, self._offered = before
            raise ConfigurationError(f"update: the session's configuration would be {size} bytes as JSON, and one "
                                     f"event on this connection carries at most {self.calls.limit} bytes")
        self.config_version += 1
        if not self.carrying:
            return False  # not live: the next connection is configured from the settings
        update = Update(changes, {name: getattr(before[0], name) for name in changes}, tools is not None, before[1])
        if not self.updates.made(update):
            return False  # goes once the one on the wire is answered, without what that one may be refused for
        try:
            event_id = self.configure(self.protocol)  # the frame is checked here: refused, it changes nothing
        except BaseException:
            self.settings, self._offered = before
            raise
        self.updates.went(update, event_id)
        return True

    def _update_answered(self, event_id: str | None, *, refused: bool) -> None:
        """The server answered a ``session.update`` (:mod:`.updates`): a refused one of the app's is undone in the
        settings, then the update made meanwhile goes."""
        undo = self.updates.answered(event_id, refused=refused)
        if undo is None:
            return  # not one of the app's
        if undo.settings:
            self.settings = self.settings.model_copy(update=undo.settings)
        if undo.tools:
            self._offered = undo.offered
        if self.updates.waiting is None or not self.carrying:
            return
        following = self.updates.take_waiting()
        assert following is not None
        try:
            event_id = self.configure(self.protocol)
        except LocalProtocolError:  # the connection cannot take it now: the next one is configured with it
            return
        self.updates.went(following, event_id)

    def _schemas(self) -> list[dict[str, Any]] | None:
        if self.registry is None:
            return None
        if self._offered is None:
            return self.registry.schemas() or None
        return self.registry.schemas(self._offered)

    # ------------------------------------------------------------------ tools
    def tool_event(self, event: ToolEvent, now: float) -> Effects:
        """The runner started or answered a call; its output waits for :meth:`drain_tools`."""
        if self.core is not None:
            self.core.wake()
        self.metrics.tool(event, now)
        return Effects((dataclasses.replace(event, at=now),))  # lines and logs place it when it happened

    def drain_tools(self) -> bool:
        """Tool outputs and their follow-up into the live protocol core; outputs enter the mirror as sent."""
        if not self.carrying or self.core is None:
            return False
        protocol = self.core.protocol
        sent = False
        for command in self.calls.commands():
            if isinstance(command, ev.ConversationItemCreate):
                if not isinstance(command.item, ev.UnknownItem) and not command.item.id:
                    command = command.model_copy(update={"item": command.item.model_copy(update={"id": self.new_item_id()})})
                self.mirror.record_local(command)
            protocol.send(command)
            sent = True
        return sent

    # ------------------------------------------------------------------ state
    @property
    def turn_open(self) -> bool:
        """The server's turn detection began a turn of the user's on this connection and has not ended it."""
        return self.core is not None and self.core.user_speaking

    def idle(self, now: float, *, tools_busy: bool) -> bool:
        """Nothing playing, queued, being produced or owed on the live connection."""
        core = self.core
        if core is None:
            return True
        if not self.carrying:
            return self.closed
        protocol = core.protocol
        return (not core.assistant_audible(now) and not protocol.response_in_progress
                and protocol.queued_creates == 0 and not tools_busy
                and not self.calls.running() and not self.calls.runnable())

    @property
    def carrying(self) -> bool:
        """A connection is attached and carries the conversation: not once its protocol is closed (a silent
        server given up on), though its drop is not taken yet; commands meanwhile are kept for the next one."""
        return self._attached and self.core is not None and not self.core.protocol.closed

    def close(self, now: float) -> tuple[SessionEvent, ...]:
        """The session ends: the metrics' last records, once."""
        if self.closed:
            return ()
        self.closed, self._attached = True, False
        return tuple(self.metrics.finish(now))

    def report(self, now: float) -> MetricsReport:
        return self.metrics.report(now)

    def sizes(self) -> dict[str, int]:
        """Entries per table of everything the machine keeps (to check that memory stays bounded)."""
        out: dict[str, int] = {}
        if self.core is not None:
            out.update(self.core.sizes())
            out.update(self.core.protocol.sizes())
        out.update({f"calls_{k}": v for k, v in self.calls.sizes().items()})
        out.update({f"journal_{k}": v for k, v in self.mic.journal.sizes().items()})
        return out


def _sendable(text: str, command: str, what: str, limit: int = MAX_CLIENT_EVENT_BYTES) -> str:
    """``text`` if one event can carry it: Unicode UTF-8 takes, no longer as JSON than an event may be
    (``limit``: on the session's connection, which over WebRTC is its data channel's message size)."""
    with as_error(ConfigurationError, command):
        unicode_text(text, what)
    if (size := json_text_bytes(text)) > limit - _ENVELOPE_BYTES:
        where = "one event" if limit >= MAX_CLIENT_EVENT_BYTES else "one event on this connection"
        raise ConfigurationError(f"{command}: {what} is {size} bytes as JSON, and {where} carries at most {limit} bytes")
    return text
