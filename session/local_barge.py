"""Local-VAD barge-in and false barge-in, as a table.

Local voice activity (:class:`voxline.audio.local_vad.LocalVad`) hears the user before the
server does. On a local onset while the assistant is audible the playout is *held* (silent,
queue kept, the heard ledger stopped at the listener): nothing is truncated yet. Then:

* the server confirms (``input_audio_buffer.speech_started``) within ``grace_s`` → the cut is
  made at the held point (a :class:`~voxline.session.events.BargeIn` with trigger ``local_vad``);
* no confirmation by ``grace_s`` → a false barge-in (a cough, an "mhm"): reported with
  :class:`~voxline.session.events.FalseBargeIn`, and either the reply resumes from the exact
  heard point (``resume=True``) or the cut is made then.

Sans-I/O: :class:`LocalBarge` takes inputs with listener times and returns the action for
the session core to carry out; the transitions are the table :data:`TABLE`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from voxline.base.arguments import flag, real

__all__ = ["Action", "BargePolicy", "Hold", "LocalBarge", "LocalInput", "TABLE"]


class Hold(enum.Enum):
    IDLE = "idle"
    HELD = "held"  # playout held on local speech, waiting for the server


class LocalInput(enum.Enum):
    LOCAL_ONSET = "local_onset"  # local VAD: speech began, assistant audible
    SERVER_SPEECH = "server_speech"  # input_audio_buffer.speech_started
    GRACE_OVER = "grace_over"  # grace_s passed since the hold
    CUT = "cut"  # the conversation was cut some other way (interrupt(), server VAD)


class Action(enum.Enum):
    NONE = "none"
    HOLD = "hold"  # hold the playout
    CONFIRM = "confirm"  # cut at the held point, trigger local_vad
    RESUME = "resume"  # false barge-in: release the playout
    CUT_UNCONFIRMED = "cut_unconfirmed"  # false barge-in, no resume: cut at the held point


_I, _H = Hold.IDLE, Hold.HELD
TABLE: dict[tuple[Hold, LocalInput, bool], tuple[Hold, Action]] = {}
for _resume in (False, True):
    TABLE |= {
        (_I, LocalInput.LOCAL_ONSET, _resume): (_H, Action.HOLD),
        (_I, LocalInput.SERVER_SPEECH, _resume): (_I, Action.NONE),  # the core's server-VAD cut
        (_I, LocalInput.GRACE_OVER, _resume): (_I, Action.NONE),
        (_I, LocalInput.CUT, _resume): (_I, Action.NONE),
        (_H, LocalInput.LOCAL_ONSET, _resume): (_H, Action.NONE),
        (_H, LocalInput.SERVER_SPEECH, _resume): (_I, Action.CONFIRM),
        (_H, LocalInput.GRACE_OVER, _resume): (_I, Action.RESUME if _resume else Action.CUT_UNCONFIRMED),
        (_H, LocalInput.CUT, _resume): (_I, Action.NONE),
    }


@dataclass(frozen=True, slots=True)
class BargePolicy:
    """How long to wait for the server to confirm a local barge-in, and what to do if it does not."""

    grace_s: float = 1.0
    resume: bool = True

    def __post_init__(self) -> None:
        flag(self.resume, "resume")
        if not 0.0 < real(self.grace_s, "grace_s") <= 10.0:
            raise ValueError(f"grace_s must be in (0, 10] seconds, not {self.grace_s}")


class LocalBarge:
    """The hold state of one session (see the module docstring)."""

    def __init__(self, policy: BargePolicy | None = None) -> None:
        self.policy = policy or BargePolicy()
        self.state = Hold.IDLE
        self.held_at: float | None = None
        self.onset: float | None = None

    @property
    def held(self) -> bool:
        return self.state is Hold.HELD

    def feed(self, event: LocalInput, now: float, onset: float | None = None) -> Action:
        self.state, action = TABLE[(self.state, event, self.policy.resume)]
        if action is Action.HOLD:
            self.held_at, self.onset = now, onset if onset is not None else now
        return action

    def due(self, now: float) -> bool:
        """Has the grace window of the current hold passed?"""
        return self.held and self.held_at is not None and now - self.held_at >= self.policy.grace_s - 1e-9
