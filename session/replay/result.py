"""What a replay produced: the heard timeline, the barge-ins, and a per-turn summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any, assert_never

import numpy as np
import numpy.typing as npt

from voxline.base.shown import clip, printable

from ..app_events import AppEvent
from ..metrics import MetricsReport
from ..events import (BargeIn, ConnectionLost, ConnectionRestored, ResponseFinished, SessionError, SpeechStarted,
                      TranscriptDone, how_closed)
from ..report.lines import EventLines
from ..settings import SessionSettings

__all__ = ["NOT_OPENED", "SEMANTIC_WAIT_S", "TURN_LEFT_OPEN", "TURN_MARGIN_S", "ReplayLines", "ReplayResult",
           "TurnSummary", "not_opened", "turn_left_open", "turn_wait_s"]

NOT_OPENED = "session_not_opened"  # the code of the fatal error a replay ends with when no session ever began


def not_opened(events: list[AppEvent], opening: str) -> SessionError:
    """The fatal error of a replay whose server never opened a session (no ``opening`` event on any connection):
    the first thing it said and how it first closed, redacted and cut as any message of a server's is. The first:
    the session's own errors that follow (reconnects, a budget spent) only count the refusals."""
    connections = 1 + sum(isinstance(e, ConnectionRestored) and not e.handover for e in events)
    said = next((e for e in events if isinstance(e, SessionError)), None)
    closed = next((e for e in events if isinstance(e, ConnectionLost)), None)
    why = [] if said is None else [f"it said {said.message.rstrip('.')}" + (f" ({said.code})" if said.code else "")]
    if closed is not None:
        why.append(how_closed(closed.code, closed.reason))
    which = "the connection" if connections == 1 else f"any of {connections} connections"
    return SessionError(f"the server never opened a session (no {opening} on {which})"
                        + (f": {'; '.join(why)}" if why else ""), NOT_OPENED, fatal=True)


TURN_LEFT_OPEN = "turn_left_open"  # the code of the error a replay ends with when the recording ended mid-turn


TURN_MARGIN_S = 2.0  # past the silence that ends a turn: the server's speech_stopped on its way to the replay
SEMANTIC_WAIT_S = 8.0  # the longest semantic_vad waits for the end of a turn (eagerness low)


def turn_wait_s(settings: SessionSettings) -> float:
    """How long after the recording ended a replay waits for the server to end a turn it began: the silence that
    ends one, and a margin for its answer to come (0 without turn detection: push-to-talk turns are the app's)."""
    match settings.turn_detection:
        case "server_vad":
            return settings.silence_ms / 1000 + TURN_MARGIN_S
        case "semantic_vad":
            return SEMANTIC_WAIT_S + TURN_MARGIN_S
        case "none":
            return 0.0
        case _:
            assert_never(settings.turn_detection)


def turn_left_open(settings: SessionSettings) -> SessionError:
    """The error of a replay whose recording ended inside a turn of the user's: the server's turn detection had
    begun it and did not end it (the voice went on to the end, or stopped less than the silence that ends a turn
    before it), so it went unanswered, and the replay would otherwise pass for one that heard every turn."""
    wait = (f"{settings.silence_ms} ms of silence" if settings.turn_detection == "server_vad"
            else "the silence its turn detection waits for")
    return SessionError(f"the recording ended inside a turn of yours (the voice went on to its end, or stopped less "
                        f"than {wait} before it): the server never ended that turn, so it went unanswered; end the "
                        f"recording with more silence", TURN_LEFT_OPEN)


@dataclass(frozen=True)
class TurnSummary:
    response_id: str | None
    status: str
    reason: str | None
    at: float


@dataclass
class ReplayResult:
    # int16, sample n = what the listener heard when input sample n was captured (None: it went to a file)
    heard: npt.NDArray[np.int16] | None
    events: list[AppEvent] = field(default_factory=list)  # session and tool events, in the order they happened
    underrun_events: int = 0
    underrun_samples: int = 0
    duration_s: float = 0.0  # listener time covered
    metrics: MetricsReport | None = None  # the session's figures when the replay ended
    interrupted: bool = False  # stopped by a signal before its end: the figures cover what ran
    # input samples the session captured: the whole input, or its start when interrupted (None: not known)
    captured_samples: int | None = None

    @property
    def barge_ins(self) -> list[BargeIn]:
        return [e for e in self.events if isinstance(e, BargeIn)]

    @property
    def turns(self) -> list[TurnSummary]:
        return [TurnSummary(e.response_id, e.status, e.reason, e.at) for e in self.events if isinstance(e, ResponseFinished)]

    @property
    def heard_speech(self) -> bool:
        """Whether the server's voice activity detection found speech in the recording."""
        return any(isinstance(e, SpeechStarted) for e in self.events)

    def summary_lines(self, verbose: int = 0) -> list[str]:
        """One line per user turn, reply, barge-in and heard transcript (with ``verbose``, their wire
        detail and the events not worth a line by default), in the order they happened."""
        lines = ReplayLines(lambda: self.metrics, verbose)
        at = 0.0
        out = []
        for e in self.events:
            stamped = getattr(e, "at", None)
            at = at if stamped is None else stamped  # events without a time are placed at the last timed event
            if (line := lines.line(e, at)) is not None:
                out.append(line)
        return out


class ReplayLines:
    """The replay's lines: the shared words (:class:`~voxline.session.report.lines.EventLines`)
    stamped with the listener time, seconds since the recording's first sample."""

    def __init__(self, metrics: Callable[[], MetricsReport | None] | None = None, verbose: int = 0) -> None:
        self.words = EventLines(metrics, verbose=verbose)

    def line(self, e: Any, at: float) -> str | None:
        text: str | None
        match e:
            case TranscriptDone(role="user", text=said):
                text = printable(f"user transcript: {clip(said, 60)!r}" + self.words.detail(e.item_id))
            case _:
                text = self.words.line(e)
        return None if text is None else f"{at:7.3f}s  {text}"
