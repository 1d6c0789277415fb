"""What ``voxline talk`` shows: a model of the conversation built from session events, and two screens.

* :class:`TalkModel` — the state (``StateChanged``), the turns with live transcripts, the
  input level, and marks for barge-ins (``BargeIn``), tools (``ToolStarted`` /
  ``ToolFinished``) and the connection; :func:`describe` gives one plain line per event.
* :class:`PlainScreen` — ``--no-ui``: one printed line per event worth a line.
* :class:`LiveScreen` — a ``rich`` Live display of the model, redrawn by the caller.
* :func:`quiet_terminal`, :class:`EnterKeys` — the keyboard side: no echo over the display,
  Enter presses for push-to-talk read without blocking the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
import termios
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from voxline.base.redaction import redact
from voxline.base.shown import printable
from voxline.realtime.errors import ConfigurationError

from ..events import (
    AssistantAudioStarted,
    BargeIn,
    ConnectionLost,
    ConnectionRestored,
    DeviceLost,
    DeviceReturned,
    CutAdjusted,
    FalseBargeIn,
    PlaybackHeld,
    HeardTranscript,
    SessionError,
    SpeechStarted,
    SpeechStopped,
    StateChanged,
    TranscriptDelta,
    TranscriptDone,
)
from ..app_events import AppEvent
from ..metrics.records import MetricsReport
from ..report.lines import EventLines, count
from ..tools import ToolFinished, ToolStarted

__all__ = ["EnterKeys", "LiveScreen", "PlainScreen", "TalkModel", "Turn", "describe", "level_bar", "quiet_terminal"]

_STATE_STYLE = {"idle": "dim", "listening": "green", "thinking": "yellow", "speaking": "cyan",
                "talking": "bold red", "sending": "yellow"}


def describe(event: AppEvent, lines: EventLines | None = None) -> str | None:
    """One plain line for ``event`` (the words ``replay`` uses too, and the state), or ``None`` for
    events shown only live (deltas); ``lines`` reads the session's figures when given."""
    if isinstance(event, StateChanged):
        return f"state: {event.state}"
    return (lines or EventLines()).line(event)


@dataclass
class Turn:
    role: str
    item_id: str
    text: str = ""
    done: bool = False
    placeholder: bool = False  # speech without a transcript (yet): replaced by the first delta
    cut: str | None = None  # what a barge-in left of an assistant turn
    heard: str | None = None  # the part of ``text`` the listener heard (an estimate), once cut


class TalkModel:
    """The conversation as the screen shows it; fed every event in order."""

    def __init__(self, *, endpoint: str, mode: str, push_to_talk: bool = False, keep_turns: int = 6,
                 keep_marks: int = 6) -> None:
        self.endpoint = endpoint
        self.mode = mode
        self.state = "listening"
        self.level_db = -90.0
        self.talking: bool | None = False if push_to_talk else None  # push-to-talk: sending the microphone or not
        self.turns: deque[Turn] = deque(maxlen=keep_turns)
        self.marks: deque[str] = deque(maxlen=keep_marks)
        self.counts = {"turns": 0, "barge_ins": 0, "tool_calls": 0}
        self._counted: set[str] = set()  # assistant turns counted: by their audio reaching the listener, or their text
        self._by_item: dict[str, Turn] = {}
        self._speech_from: dict[str, int] = {}
        self._ptt_turn: Turn | None = None
        self._ptt_from = 0.0
        self._sending = False  # push-to-talk: a turn was sent and the session has not changed state since

    def _turn(self, role: str, item_id: str) -> Turn:
        turn = self._by_item.get(item_id)
        if turn is None:
            turn = self._by_item[item_id] = Turn(role, item_id)
            self.turns.append(turn)
        return turn

    def apply(self, event: AppEvent, stamp: str) -> None:
        match event:
            case StateChanged(state=state):
                self.state = state
                self._sending = False
            case SpeechStarted(item_id=item_id, audio_start_ms=ms) if item_id is not None:
                turn = self._turn("user", item_id)
                turn.text, turn.placeholder = "…", True
                self._speech_from[item_id] = ms or 0
            case SpeechStopped(item_id=item_id, audio_end_ms=ms) if item_id is not None:
                turn = self._turn("user", item_id)
                if turn.placeholder and ms is not None:
                    turn.text = f"[{(ms - self._speech_from.get(item_id, ms)) / 1000:.1f} s of speech]"
            case TranscriptDelta(role=role, item_id=item_id, text=text):
                turn = self._turn(role, item_id)
                turn.text = text if turn.placeholder else turn.text + text
                turn.placeholder = False
            case TranscriptDone(role=role, item_id=item_id, text=text):
                turn = self._turn(role, item_id)
                turn.text, turn.done, turn.placeholder = text, True, False
                if role == "assistant":
                    self._count_turn(item_id)
            case AssistantAudioStarted(item_id=item_id):  # GPT-Live's replies have no transcript done
                self._count_turn(item_id)
            case BargeIn(item_id=item_id) if item_id in self._by_item:
                self._by_item[item_id].cut = f"cut: heard {event.heard_ms / 1000:.2f} s of {event.received_ms / 1000:.2f} s"
                self.counts["barge_ins"] += 1
                self.marks.append(f"{stamp} {describe(event)}")
            case HeardTranscript(item_id=item_id, text=text) if item_id in self._by_item:
                self._by_item[item_id].heard = text
            case BargeIn():
                self.counts["barge_ins"] += 1
                self.marks.append(f"{stamp} {describe(event)}")
            case ToolStarted() | ToolFinished() | ConnectionLost() | ConnectionRestored() | SessionError() \
                    | PlaybackHeld() | FalseBargeIn() | CutAdjusted() | DeviceLost() | DeviceReturned():
                if isinstance(event, SessionError):
                    self._sending = False  # a sent turn the server refused: no state change is coming
                self.counts["tool_calls"] += isinstance(event, ToolFinished)
                self.marks.append(f"{stamp} {describe(event)}")
            case _:
                pass

    def _count_turn(self, item_id: str) -> None:
        """An assistant turn, once however many of its events say so."""
        if item_id not in self._counted:
            self._counted.add(item_id)
            self.counts["turns"] += 1

    def push_to_talk(self, talking: bool, at: float) -> None:
        """Push-to-talk pressed: a user turn opens, or closes with its length (no server VAD events)."""
        self.talking = talking
        self._sending = not talking
        if talking:
            self._ptt_from = at
            self._ptt_turn = Turn("user", f"ptt{len(self._by_item)}", "…", placeholder=True)
            self._by_item[self._ptt_turn.item_id] = self._ptt_turn
            self.turns.append(self._ptt_turn)
        elif self._ptt_turn is not None:
            self._ptt_turn.text = f"[{at - self._ptt_from:.1f} s of speech]"
            self._ptt_turn = None

    @property
    def shown_state(self) -> str:
        """The state on screen: the session's, except that push-to-talk has its own while the user holds
        the floor (``talking``), until the session answers a sent turn (``sending``), and between turns
        (``idle``: the microphone is not sent, whatever the session's ``listening`` says)."""
        if self.talking:
            return "talking"
        if self._sending:
            return "sending"
        if self.talking is not None and self.state == "listening":
            return "idle"
        return self.state

    def summary(self) -> str:
        c = self.counts
        return (f"session ended: {count(c['turns'], 'assistant turn')}, {count(c['barge_ins'], 'barge-in')}, "
                f"{count(c['tool_calls'], 'tool call')}")


def level_bar(db: float, width: int = 24, floor: float = -60.0) -> str:
    """A text meter for an RMS level in dBFS (``floor`` dB and below is empty)."""
    filled = round(width * min(1.0, max(0.0, (db - floor) / -floor)))
    return "█" * filled + "·" * (width - filled)


class PlainScreen:
    """``--no-ui``: one line per event worth a line, flushed at once."""

    def __init__(self, model: TalkModel, out: TextIO | None = None) -> None:
        self.model = model
        self._out = out or sys.stdout
        self.lines = EventLines(voice_times=False)  # the session's figures come once it runs (:meth:`attach`)

    def attach(self, metrics: Callable[[], MetricsReport | None], verbose: int = 0) -> None:
        """Read the session's figures; ``verbose`` adds the wire-level detail (event types, item ids,
        buffer ms) to each line."""
        self.lines.metrics, self.lines.verbose = metrics, min(verbose, 1)

    def __enter__(self) -> PlainScreen:
        return self

    def __exit__(self, *exc: object) -> None:
        self._out.flush()

    def note(self, text: str) -> None:
        print(text, file=self._out, flush=True)

    def show(self, event: AppEvent, stamp: str) -> None:
        self.model.apply(event, stamp)
        line = describe(event, self.lines)
        if line is not None:
            self.note(f"{stamp} {line}")

    def refresh(self) -> None:
        """Plain lines are written as they come; nothing to redraw."""


class LiveScreen:
    """A ``rich`` Live display of a :class:`TalkModel`; :meth:`refresh` redraws it."""

    def __init__(self, model: TalkModel, console: Console | None = None) -> None:
        self.model = model
        self.console = console or Console()
        self._live = Live(console=self.console, auto_refresh=False, transient=False)

    def __enter__(self) -> LiveScreen:
        self._live.__enter__()
        self.refresh()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.refresh()
        self._live.__exit__(*exc)

    def note(self, text: str) -> None:
        self.console.print(Text(text), highlight=False)

    def show(self, event: AppEvent, stamp: str) -> None:
        self.model.apply(event, stamp)

    def refresh(self) -> None:
        self._live.update(self.render(), refresh=True)

    def render(self) -> RenderableType:
        m = self.model
        head = Table.grid(padding=(0, 2))
        shown = m.shown_state
        state = Text(f"● {shown}", style=_STATE_STYLE.get(shown, ""))
        mic = Text(f"mic {level_bar(m.level_db)} {m.level_db:5.0f} dB", style="magenta")
        cells: list[RenderableType] = [state, mic]
        if m.talking is not None:
            cells.append(Text("Enter to send" if m.talking else "Enter to talk", style="dim"))
        head.add_row(*cells)
        turns = Table.grid(padding=(0, 1))
        turns.add_column(style="bold", no_wrap=True)
        turns.add_column()
        for turn in m.turns:
            who = "you" if turn.role == "user" else "assistant"
            text = _turn_text(turn)
            if not turn.done and not turn.placeholder and turn.heard is None:
                text.append(" ▍")
            if turn.cut is not None:
                text.append(f"  [{turn.cut}]", style="bold yellow")
            turns.add_row(Text(who, style="green" if who == "you" else "cyan"), text)
        marks = Text("\n".join(map(printable, m.marks)) or "no barge-ins or tool calls yet",
                     style="dim" if not m.marks else "yellow")
        body = Group(head, Text(""), turns, Text(""), marks)
        return Panel(body, title=f"voxline talk — {m.endpoint}", subtitle=f"{m.mode} · Ctrl-C quits",
                     title_align="left", subtitle_align="left")


def _turn_text(turn: Turn) -> Text:
    """A turn's text; for a cut reply the words the listener did not hear are dimmed and struck through. What a
    server said may echo a key: redacted, shown whole (a split at what was heard could halve the key)."""
    shown = redact(turn.text)
    if turn.heard is None or not turn.text.startswith(turn.heard) or shown != turn.text:
        return Text(printable(shown), style="" if turn.done else "italic")  # the server's words, as text
    text = Text(printable(turn.heard))
    text.append(printable(turn.text[len(turn.heard):]), style="dim strike")
    return text


@contextlib.contextmanager
def quiet_terminal() -> Iterator[None]:
    """While open, keys typed on a terminal are neither echoed nor line-buffered (Ctrl-C still works)."""
    fd = sys.stdin.fileno()
    if not os.isatty(fd):
        yield
        return
    saved = termios.tcgetattr(fd)
    quiet = termios.tcgetattr(fd)
    quiet[3] &= ~(termios.ECHO | termios.ECHOCTL | termios.ICANON)
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        with contextlib.suppress(termios.error, OSError):  # a terminal that closed (SIGHUP) has nothing to restore
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


ENTER_SOURCE = "--push-to-talk reads Enter from a terminal or a pipe on stdin"


def check_enter_source() -> None:
    """Before anything opens: stdin can give Enter presses (a terminal, a pipe or a socket the loop can watch),
    else one :class:`ConfigurationError` line (``< /dev/null`` or a file cannot be watched)."""
    try:
        fd = sys.stdin.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):  # no stdin at all, or a closed one
        mode = 0
    else:
        if os.isatty(fd):
            return
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        raise ConfigurationError(ENTER_SOURCE)


class EnterKeys:
    """Enter presses on stdin, read by the event loop's reader callback, so the loop never blocks."""

    def __init__(self) -> None:
        self.presses: asyncio.Queue[None] = asyncio.Queue()
        self._fd = sys.stdin.fileno()
        self._loop = asyncio.get_running_loop()

    def __enter__(self) -> EnterKeys:
        try:
            self._loop.add_reader(self._fd, self._readable)
        except (OSError, ValueError):
            raise ConfigurationError(ENTER_SOURCE) from None
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.remove_reader(self._fd)

    def _readable(self) -> None:
        data = os.read(self._fd, 1024)
        if not data:
            self._loop.remove_reader(self._fd)  # end of input: no more presses
        for byte in data:
            if byte in (0x0A, 0x0D):
                self.presses.put_nowait(None)
