"""Session events: what an application consumes from a :class:`~session.VoiceSession`.

A vocabulary of its own, apart from wire events (``voxline.realtime.events``) and protocol
notices (``voxline.realtime.notices``). Times are seconds on the session's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from voxline.audio.ledger import Cut
from voxline.base.shown import clip

from .metrics.records import TurnRecord

__all__ = [
    "CODE_CHARS",
    "MESSAGE_CHARS",
    "AssistantAudioStarted",
    "BargeIn",
    "ConnectionLost",
    "CutAdjusted",
    "DeviceLost",
    "DeviceReturned",
    "FalseBargeIn",
    "PlaybackHeld",
    "ConnectionRestored",
    "HeardTranscript",
    "LiveContinuity",
    "LiveDelegationRequested",
    "LiveDelivered",
    "LiveSessionEnded",
    "RawServerEvent",
    "ResponseFinished",
    "ResponseStarted",
    "SessionError",
    "SessionEvent",
    "SpeechStarted",
    "SpeechStopped",
    "StateChanged",
    "TranscriptDelta",
    "TranscriptDone",
    "TurnMetrics",
    "how_closed",
]

Role = Literal["user", "assistant"]
MESSAGE_CHARS = 4_000  # of a SessionError's message (ours are a line; a server's may be megabytes)
CODE_CHARS = 200  # of its code
State = Literal["idle", "listening", "thinking", "speaking"]


@dataclass(frozen=True, slots=True)
class StateChanged:
    state: State
    at: float


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """The user started speaking (server VAD or local VAD)."""

    at: float
    item_id: str | None
    audio_start_ms: int | None


@dataclass(frozen=True, slots=True)
class SpeechStopped:
    at: float
    item_id: str | None
    audio_end_ms: int | None


@dataclass(frozen=True, slots=True)
class TranscriptDelta:
    role: Role
    item_id: str
    text: str
    at: float | None = None
    """The listener time it arrived (s)."""


@dataclass(frozen=True, slots=True)
class TranscriptDone:
    role: Role
    item_id: str
    text: str
    at: float | None = None
    """The listener time it arrived (s)."""


@dataclass(frozen=True, slots=True)
class ResponseStarted:
    response_id: str
    at: float


@dataclass(frozen=True, slots=True)
class ResponseFinished:
    response_id: str | None
    status: str
    reason: str | None
    at: float
    usage: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class AssistantAudioStarted:
    """The first sample of an assistant item reached the listener."""

    item_id: str
    at: float
    reply_latency: float | None  # end of user speech → this instant, when known


@dataclass(frozen=True, slots=True)
class BargeIn:
    """The user talked over the assistant; the conversation was cut where the listener was.

    ``heard_ms`` is what the listener heard of ``item_id``; ``audio_end_ms`` the value sent
    in ``conversation.item.truncate`` (``None`` if the item was deleted or nothing needed a cut).
    ``in_device_ms`` is audio already handed to the output that the abort kept from the
    listener (device buffer), ``unplayed_ms`` what was still queued.
    """

    trigger: str
    at: float
    item_id: str | None
    heard_ms: float
    received_ms: float
    audio_end_ms: int | None
    deleted: tuple[str, ...]
    cancelled: bool
    reaction_s: float  # trigger → playout silent
    in_device_ms: float = 0.0
    unplayed_ms: float = 0.0
    server_cuts: bool = False  # WebRTC: the server owns the output buffer and truncates itself
    cut: Cut | None = field(default=None, repr=False, compare=False)  # the playout's side of it
    heard_parts: tuple[tuple[str, int, float], ...] = field(default=(), repr=False, compare=False)
    """(item_id, content_index, heard_ms) of every audio part of the interrupted responses."""
    live: bool = False  # GPT-Live: no truncate; ``audio_end_ms`` (into the utterance) is what the model was told

    def describe(self) -> str:
        """One line for people: the trigger, the cut and what was sent (``replay`` and ``talk`` print it)."""
        if self.live:
            cut = (f"told the model the listener heard {self.audio_end_ms} ms of {self.item_id} "
                   f"({self.received_ms:.1f} ms received)")
        elif self.server_cuts:
            cut = f"the server cuts its own buffer (WebRTC); the listener heard {self.heard_ms:.1f} ms of {self.item_id}"
        elif self.audio_end_ms is not None:
            cut = (f"truncate {self.item_id} at {self.audio_end_ms} ms "
                   f"(heard {self.heard_ms:.1f} of {self.received_ms:.1f} ms received)")
        elif self.item_id is not None:
            cut = f"no cut needed: {self.item_id} heard {self.heard_ms:.1f} of {self.received_ms:.1f} ms"
        else:
            cut = "nothing was playing"
        cut += f", deleted {', '.join(self.deleted)}" if self.deleted else ""
        cut += ", sent response.cancel" if self.cancelled else ""
        return f"barge-in ({self.trigger}): {cut}; silent after {self.reaction_s * 1000:.1f} ms"


@dataclass(frozen=True, slots=True)
class HeardTranscript:
    """What the listener heard of a cut assistant item's transcript: an *estimate*.

    ``text`` is a prefix of ``full_text`` (the transcript received up to the cut), found
    from the transcript deltas' arrival against the item's audio (``method="arrival"``)
    or by the heard share of its duration (``"duration"``); see
    :mod:`voxline.session.mirror.heard`. The conversation mirror keeps the same text
    and rebuilds the conversation with it after a reconnect.
    """

    item_id: str
    at: float
    text: str
    full_text: str
    heard_ms: float
    received_ms: float
    method: str
    estimate: bool = True


@dataclass(frozen=True, slots=True)
class TurnMetrics:
    """A user turn's figures, once its reply was heard (or the user spoke again): see :class:`TurnRecord`."""

    at: float
    turn: TurnRecord


@dataclass(frozen=True, slots=True)
class CutAdjusted:
    """The server had less audio of ``item_id`` than the listener heard; it was cut at its length.

    Reported, not hidden: it means audio was counted that the server never stored
    (``Audio content of N ms is already shorter than M ms``).
    """

    item_id: str
    requested_ms: int
    applied_ms: int
    at: float | None = None
    """The listener time the server's answer arrived (s)."""


@dataclass(frozen=True, slots=True)
class ConnectionLost:
    code: int | None
    reason: str
    at: float


def how_closed(code: int | None, reason: str) -> str:
    """``it closed the connection (1008 bad key)``: a close as a message says it, its reason cut (a server's may be
    long)."""
    said = " ".join(str(part) for part in (code, clip(reason, 200)) if part)
    return "it closed the connection" + (f" ({said})" if said else "")


@dataclass(frozen=True, slots=True)
class ConnectionRestored:
    """A new connection carries the conversation on: ``replayed_items`` rebuilt from the mirror,
    ``resent_creates`` owed ``response.create`` sent again, ``resent_audio_ms`` of the user's
    unfinished turn appended again; ``handover`` when it replaced a connection about to expire;
    ``skipped_items`` not rebuilt because one is larger than an event on the new connection may be
    (a WebRTC data channel's messages are far smaller than a WebSocket's); ``older_items`` left out
    and forgotten, before the newest ``SessionSettings.rebuild_items`` (and the calls those need)."""

    at: float
    replayed_items: int
    resent_creates: int = 0
    resent_audio_ms: float = 0.0
    handover: bool = False
    skipped_items: int = 0
    older_items: int = 0


@dataclass(frozen=True, slots=True)
class SessionError:
    """A problem reported to the application; the session keeps running unless ``fatal``.

    The message and code are redacted (:func:`voxline.base.redaction.redact`): a server that echoes a
    key in an error does not put it in front of the application or its logs; and cut, to
    :data:`MESSAGE_CHARS` and :data:`CODE_CHARS` (a server's may be megabytes). ``code`` says what failed:

    - the server's own ``error`` event: its ``code`` (``invalid_value``…), or None if it gave none;
      on GPT-Live, the error that refuses the ``session.start`` (**fatal**, with the server's code: no
      session began, and nothing can be heard);
    - ``malformed_event``: a server frame that is not a valid event, or (WebRTC) a data channel message larger
      than this end takes, dropped unread; ignored;
      ``event_failed``: handling a server event raised, and the event was dropped;
      ``observer_failed``: the app's ``on_wire`` raised, or handed back an awaitable (every frame is still sent and read);
    - ``tool_rounds_exceeded``: more responses with tool calls in a row, without a user turn, than
      ``max_tool_rounds``: their outputs are sent, with no ``response.create``;
    - ``turn_too_short``: a push-to-talk turn with less audio than the service commits (100 ms): dropped,
      and nothing was asked;
    - ``cut_refused``: a barge-in's truncate the protocol would not send (the item is not the
      assistant's): the audio is stopped, the server's conversation is not cut;
    - ``server_silent``: no answer within ``liveness_timeout_s``, counted as a drop;
      ``reconnect_failed``: one reconnect try failed (more follow within the budget);
      ``backoff_failed``: the app's backoff raised, the default is used;
      ``handover_failed``: the next connection could not be prepared before ``expires_at``;
      ``connection_lost`` (**fatal**): the reconnect budget is spent, or a sideband's call ended (refused with 404);
      ``session_not_opened`` (**fatal**, added by a replay, :func:`~voxline.session.replay.run_replay`): no
      connection of the session ever opened its session (the server refused each connect), so nothing was heard;
      ``turn_left_open`` (added by a replay): the recording ended inside a turn of the user's, which the server's
      turn detection never ended, so it went unanswered;
      ``commands_not_sent``: GPT-Live commands given while a connection was replaced, too large for the
      new connection's events, were not sent;
    - ``speaker_stuck``: the speaker's device did not start again after a barge-in's abort (its driver
      never returned): the session goes on, and nothing plays until the device does;
      ``discard_failed``: the output's ``discard_pending`` raised (an app's output): the cut stands, and
      audio the output still held may play;
    - a loop of the session that raised: ``input_failed`` and ``device_watch_failed`` (the
      session goes on without them), ``receive_loop_failed``, ``tick_loop_failed``,
      ``flush_loop_failed`` and ``output_failed`` (**fatal**: close the session).

    After a fatal error the session's commands raise :class:`~voxline.realtime.errors.ConfigurationError`
    naming it, ``connected`` is False, its ``repr`` says ``failed``, and a drop ends its events rather than
    being reconnected (a refused GPT-Live start hangs up at once).
    """

    message: str
    code: str | None = None
    fatal: bool = False

    def __post_init__(self) -> None:
        # a server's message may be megabytes: cut before it is redacted whole, as a key in it would be shown cut
        object.__setattr__(self, "message", clip(self.message, MESSAGE_CHARS))
        if self.code is not None:
            object.__setattr__(self, "code", clip(self.code, CODE_CHARS))


@dataclass(frozen=True, slots=True)
class PlaybackHeld:
    """Local voice activity stopped the assistant; nothing is cut until the server confirms.

    ``onset`` is where the local VAD placed the start of speech, ``at`` when playout was
    held; ``heard_ms`` is what the listener had heard of ``item_id`` then.
    """

    at: float
    onset: float
    item_id: str | None
    heard_ms: float


@dataclass(frozen=True, slots=True)
class FalseBargeIn:
    """The server did not confirm a local barge-in within the grace window (a cough, an "mhm").

    ``resumed``: the reply went on from the exact point heard at ``held_at``; otherwise the
    conversation was cut there (a :class:`BargeIn` follows).
    """

    at: float
    held_at: float
    item_id: str | None
    heard_ms: float
    resumed: bool


@dataclass(frozen=True, slots=True)
class DeviceLost:
    """A sound device the session plays or records on went away (unplugged, or its sink or
    source removed). The session goes on: the sound server moved the stream to ``fallback``
    (its default device), or ``fallback`` is None where it could not be read.

    With ``ended``, the device may still be there but the stream on it ended (the sound server
    killed it, the device failed): nothing plays or records until the session has opened it
    again on the same device (tried each poll, then every 1, 2 and at most 4 s while none opens);
    :class:`DeviceReturned` follows. Where the device itself is gone, the stream opens on the
    server's default device, said as a loss with no ``fallback`` name."""

    kind: Literal["input", "output"]
    device: str
    fallback: str | None
    at: float
    ended: bool = False


@dataclass(frozen=True, slots=True)
class DeviceReturned:
    """The lost device is back and the session's stream has been moved onto it again (or, after an
    ended stream, a fresh stream on it runs)."""

    kind: Literal["input", "output"]
    device: str
    at: float


@dataclass(frozen=True, slots=True)
class RawServerEvent:
    """A wire event, passed through when the application asked for raw events."""

    event: Any = field(repr=False)


@dataclass(frozen=True, slots=True)
class LiveDelivered:
    """GPT-Live: what the session told the model the listener got of a reply cut short.

    Live has no truncate: the model's context keeps words nobody heard, so the session appends
    ``content`` (``session.instructions.append``) naming the timeline instant ``at_ms`` where the
    listener stopped hearing utterance ``item_id`` and the words they heard
    (docs/protocol.md §14).
    """

    item_id: str
    at: float
    at_ms: float | None
    heard_text: str
    content: str


@dataclass(frozen=True, slots=True)
class LiveSessionEnded:
    """GPT-Live: the server closed the session (``session.closed``) with one of its reasons."""

    reason: str
    session_id: str | None
    at: float


@dataclass(frozen=True, slots=True)
class LiveContinuity:
    """GPT-Live after a drop: what the next connection recovered and what it could not.

    ``how`` is ``fork`` (a stored session forked: its conversation goes on) or ``new`` (a fresh
    session seeded with the text of what was heard); ``lost`` names what did not survive;
    ``refused``: why a stored session was not forked (the server refused the fork), if it was not.
    """

    how: Literal["fork", "new"]
    from_session: str | None
    lost: tuple[str, ...]
    at: float
    refused: str | None = None


@dataclass(frozen=True, slots=True)
class LiveDelegationRequested:
    """GPT-Live: the model handed work to the application (client delegation); answer it with
    :meth:`~voxline.session.live.controls.LiveControls.answer_delegation`."""

    delegation_id: str
    offset_ms: int
    at: float


SessionEvent = (
    StateChanged
    | SpeechStarted
    | SpeechStopped
    | TranscriptDelta
    | TranscriptDone
    | ResponseStarted
    | ResponseFinished
    | AssistantAudioStarted
    | BargeIn
    | HeardTranscript
    | TurnMetrics
    | CutAdjusted
    | PlaybackHeld
    | FalseBargeIn
    | ConnectionLost
    | ConnectionRestored
    | DeviceLost
    | DeviceReturned
    | SessionError
    | RawServerEvent
    | LiveDelivered
    | LiveSessionEnded
    | LiveContinuity
    | LiveDelegationRequested
)
