"""One plain line per session event, in the words ``voxline talk --no-ui`` and ``voxline replay`` share.

Each word keeps one meaning, and every latency says from what to what:

* **your voice began / ended** — where the server's VAD placed the user's voice on the listener's
  timeline (``audio_start_ms`` plus the prefix padding, ``audio_end_ms`` less the silence);
* **speech_started / speech_stopped** — when the server's VAD event arrived;
* **heard** — reached the listener: a reply is heard from its first sample played, and a cut
  reply only up to the cut.

:class:`EventLines` reads the session's figures (:class:`~voxline.session.metrics.MetricsReport`)
to place the voice and to give a turn's reply latency the moment the reply starts. At
``verbose`` 1 each line adds the wire-level detail (event type, item ids, buffer ms), at 2 the
events that are not worth a line by default (state changes, completed responses) get one too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import assert_never

from voxline.base.shown import clip, printable

from ..events import (
    LiveContinuity,
    LiveDelegationRequested,
    LiveDelivered,
    LiveSessionEnded,
    AssistantAudioStarted,
    BargeIn,
    ConnectionLost,
    ConnectionRestored,
    CutAdjusted,
    DeviceLost,
    DeviceReturned,
    FalseBargeIn,
    HeardTranscript,
    PlaybackHeld,
    RawServerEvent,
    ResponseFinished,
    ResponseStarted,
    SessionError,
    SpeechStarted,
    SpeechStopped,
    StateChanged,
    TranscriptDelta,
    TranscriptDone,
    TurnMetrics,
)
from ..app_events import AppEvent
from ..metrics.records import MetricsReport, SpeechSegment, TurnRecord
from ..tools import ToolFinished, ToolStarted

__all__ = ["EventLines", "count", "reply_line", "short"]



def count(n: int, word: str) -> str:
    """``1 barge-in``, ``2 barge-ins``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def short(text: str, limit: int = 120) -> str:
    return clip(text, limit, flat=True)  # what a server sent may echo a key: redacted, before it is cut


def reply_line(turn: TurnRecord) -> str | None:
    """``turn N: reply heard … after your voice ended`` and its two parts; None without a reply heard."""
    if turn.reply_latency_ms is None:
        return None
    parts = ""
    if turn.first_delta_ms is not None and turn.client_ms is not None:
        # in real time a delta may be stamped after the start of the block that plays it: no client time then
        client = max(turn.client_ms, 0.0)
        parts = f" ({turn.first_delta_ms:.0f} ms to the first audio delta, then {client:.0f} ms in the client)"
    return f"turn {turn.index + 1}: reply heard {turn.reply_latency_ms:.0f} ms after your voice ended{parts}"


class EventLines:
    """Lines for events in order. ``metrics`` gives the session's figures (None: lines without them);
    ``voice_times`` off leaves out where the voice began and ended (times on the listener's timeline,
    which a replay's lines are stamped with and a live session's are not)."""

    def __init__(self, metrics: Callable[[], MetricsReport | None] | None = None, *, verbose: int = 0,
                 voice_times: bool = True) -> None:
        self.metrics = metrics
        self.verbose = verbose
        self.voice_times = voice_times  # print where the voice began and ended (off: only that it did)
        self._turns_shown: set[int] = set()

    def _report(self) -> MetricsReport | None:
        return self.metrics() if self.metrics is not None else None

    def _speech(self, item_id: str | None) -> SpeechSegment | None:
        report = self._report() if self.voice_times else None
        if report is None or item_id is None:
            return None
        return next((s for s in reversed(report.speech) if s.item_id == item_id), None)

    def _turn(self, match: Callable[[TurnRecord], bool]) -> TurnRecord | None:
        report = self._report()
        return None if report is None else next((t for t in reversed(report.turns) if match(t)), None)

    def detail(self, text: str) -> str:
        """`` [text]`` at ``verbose`` 1 and up (wire-level detail), else nothing."""
        return f" [{text}]" if self.verbose else ""

    def line(self, event: AppEvent) -> str | None:
        """The line for ``event``, or None when it is not worth one at this verbosity; what a server
        wrote in it (a transcript, an error) shows its control characters as escapes."""
        text = self._line(event)
        return None if text is None else printable(text)

    def _line(self, event: AppEvent) -> str | None:
        match event:
            case SpeechStarted() | SpeechStopped():
                return self._user(event)
            case AssistantAudioStarted():
                return self._reply_started(event)
            case TurnMetrics(turn=turn):
                return self._turn_over(turn)
            case TranscriptDone(role=role, text=text, item_id=item):
                return f"{'you' if role == 'user' else 'assistant'}: {short(text, 400)}" + self.detail(item)
            case HeardTranscript(text=text, heard_ms=heard, received_ms=received, item_id=item):
                # heard to its end, the text is the whole transcript, not a share of it
                share = (f"estimate, {heard / 1000:.2f} of {received / 1000:.2f} s received" if event.estimate
                         else f"all of it, {received / 1000:.2f} s received")
                return f"assistant, as heard ({share}): {short(text, 400)}" + self.detail(f"{item}, {event.method}")
            case BargeIn():
                return self._barge_in(event)
            case ResponseFinished(status=status, reason=reason, response_id=rid):
                if status == "completed" and self.verbose < 2:
                    return None
                return f"assistant: reply {status}" + (f" ({reason})" if reason else "") + self.detail(f"{rid}")
            case StateChanged(state=state):
                return f"state: {state}" if self.verbose >= 2 else None
            case ResponseStarted(response_id=rid):
                return f"assistant: reply started [{rid}]" if self.verbose >= 2 else None
            case TranscriptDelta() | RawServerEvent():
                return None
            case CutAdjusted(item_id=item_id, requested_ms=requested, applied_ms=applied):
                return f"cut adjusted: the server had {applied} ms of {item_id}, not the {requested} ms heard"
            case PlaybackHeld(heard_ms=ms):
                return f"you (local VAD): assistant held at {ms:.0f} ms heard, waiting for the server"
            case FalseBargeIn(resumed=resumed):
                return "false barge-in: " + ("resuming where you stopped listening" if resumed else "reply cut")
            case ConnectionLost(code=code, reason=reason):
                return f"connection lost (code {code}{', ' + reason if reason else ''}); reconnecting"
            case ConnectionRestored(replayed_items=n, skipped_items=skipped, older_items=older):
                too_large = f"; {count(skipped, 'item')} too large for this connection not sent" if skipped else ""
                left = f"; the {count(older, 'oldest item')} left out" if older else ""
                return f"connection restored ({count(n, 'conversation item')} sent again{too_large}{left})"
            case DeviceLost(kind=kind, device=device, ended=True):
                return f"{'microphone' if kind == 'input' else 'speaker'} {device}: its stream ended; opening it again"
            case DeviceLost(kind=kind, device=device, fallback=fallback):
                where = f"now on {fallback}" if fallback else "on the sound server's fallback"
                return f"{'microphone' if kind == 'input' else 'speaker'} {device} lost; {where}"
            case DeviceReturned(kind=kind, device=device):
                return f"{'microphone' if kind == 'input' else 'speaker'} {device} is back"
            case SessionError(message=message, fatal=fatal):
                return f"{'fatal error' if fatal else 'error'}: {message}"
            case ToolStarted(name=name, arguments=arguments):
                args = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
                return f"tool: {name}({args}) started" + self.detail(event.call_id)
            case ToolFinished(name=name, output=output, ok=ok, duration_s=duration):
                verdict = "returned" if ok else "failed"
                return f"tool: {name} {verdict} {short(output, 160)} in {duration * 1000:.0f} ms" + self.detail(
                    event.call_id)
            case LiveDelivered(item_id=item, at_ms=at_ms, heard_text=text):
                where = f"{at_ms / 1000:.2f} s on the session timeline" if at_ms is not None else "an unknown instant"
                return f"told the model: the listener stopped at {where} and heard \"{short(text, 300)}\"" + \
                    self.detail(item)
            case LiveSessionEnded(reason=reason):
                return f"Live session closed ({reason})"
            case LiveContinuity(how=how, lost=lost, refused=refused):
                got = "forked the stored session" if how == "fork" else "started a new session from what was heard"
                if refused is not None:
                    got += f" (the stored session's fork was refused: {short(refused, 200)})"
                return f"continuity: {got}; lost: {', '.join(lost) or 'nothing'}"
            case LiveDelegationRequested(delegation_id=did):
                return f"the model delegated work to the app [{did}]"
            case _:
                assert_never(event)

    def _user(self, event: SpeechStarted | SpeechStopped) -> str:
        segment = self._speech(event.item_id)
        if isinstance(event, SpeechStarted):
            text = "you: started speaking"
            if segment is not None:
                later = (event.at - segment.speech_start) * 1000
                what = "transcript of it" if segment.source == "live_transcript" else "speech_started"
                text += f" (your voice began at {segment.speech_start:.2f} s" + (
                    f"; the server's {what} came {later:.0f} ms later)" if later >= 0 else ")")
            return text + self.detail(f"SpeechStarted {event.item_id}, audio_start_ms={event.audio_start_ms}")
        text = "you: stopped speaking"
        if segment is not None and segment.speech_end is not None:
            text += (f" (your voice ended at {segment.speech_end:.2f} s; the server's speech_stopped "
                     f"came {(event.at - segment.speech_end) * 1000:.0f} ms later)")
        return text + self.detail(f"SpeechStopped {event.item_id}, audio_end_ms={event.audio_end_ms}")

    def _reply_started(self, event: AssistantAudioStarted) -> str:
        detail = self.detail(f"AssistantAudioStarted {event.item_id}")
        turn = self._turn(lambda t: t.first_heard_at == event.at)
        if turn is not None and (line := reply_line(turn)) is not None:
            self._turns_shown.add(turn.index)
            return line + detail
        latency = event.reply_latency
        if latency is None:
            after = ""
        elif latency < 0:  # the first sample played in the block that delivered speech_stopped
            after = " (in the same 20 ms block as the server's speech_stopped)"
        else:
            after = f" ({latency * 1000:.0f} ms after the server's speech_stopped)"
        return f"assistant: started speaking{after}" + detail

    def _turn_over(self, turn: TurnRecord) -> str | None:
        """A turn's figures once it is over: its latency if it was not shown when the reply started, and underruns."""
        parts = []
        if turn.index not in self._turns_shown and (line := reply_line(turn)) is not None:
            parts.append(line)
        elif turn.underruns:
            parts.append(f"turn {turn.index + 1}:")
        if turn.underruns:
            parts.append(f"{count(turn.underruns, 'underrun')} ({turn.underrun_ms:.0f} ms) while the reply played")
        self._turns_shown.add(turn.index)
        return " ".join(parts) or None

    def _barge_in(self, event: BargeIn) -> str:
        heard, received = event.heard_ms / 1000, event.received_ms / 1000
        if event.live:
            cut = f"the reply silenced where it was heard, {heard:.2f} s of {received:.2f} s received"
        elif event.server_cuts:
            cut = f"the server cuts its own buffer (WebRTC); the listener heard {heard:.2f} s of the reply"
        elif event.audio_end_ms is not None:
            cut = f"the reply cut where it was heard, {heard:.2f} s of {received:.2f} s received"
        elif event.item_id is not None:
            cut = f"no cut needed: {heard:.2f} s of {received:.2f} s received, all of it heard"
        else:
            cut = "nothing was playing"
        if event.deleted:
            cut += f", {count(len(event.deleted), 'unheard item')} deleted"
        cut += ", its response cancelled" if event.cancelled else ""
        return (f"barge-in ({event.trigger}): {cut}; silent {event.reaction_s * 1000:.1f} ms later"
                + self.detail("BargeIn " + event.describe().split(": ", 1)[1]))
