"""A kiosk embedding: a headless ``VoiceSession`` that drives a UI through one callback.

Run it from the repository root with voxline installed (in a clone, ``python3`` below is ``uv run --no-dev python``;
the folders install as one ``voxline`` namespace, so ``PYTHONPATH=.`` is not enough)::

    python3 examples/kiosk.py                      # speakers if there are any, else silent
    python3 examples/kiosk.py --simulate-drop      # the connection drops mid-reply and recovers
    python3 examples/kiosk.py --output-device 99   # a missing speaker: the kiosk falls back
    python3 examples/kiosk.py --hold 3             # hold the talk button 3 s (microphone)

The app never draws anything itself: :class:`KioskView` turns session events into a small
view-model dict and hands it to ``render`` (here: one JSON line per change; in a real kiosk,
your UI toolkit). The demo visitor taps the screen (a text message), listens for a second,
then taps "stop" (``session.interrupt()``: playback stops and the reply is cut where the
visitor was). With ``--hold`` the visitor instead holds the talk button (push-to-talk).

* **Device loss**: opening the speaker or microphone may fail (unplugged, busy, wrong
  index). The kiosk catches the ``AudioError``, carries on without it (a ``ClockedOutput``
  keeps the listener's timeline, silently) and says so in the view model.
* **Reconnects**: with ``--simulate-drop`` the first connection goes to a local server that
  drops the TCP connection after a few events (``FaultConfig(drop_after_events=...)``),
  as a network blip would; the session reconnects by itself (to a healthy server here),
  restores its configuration and conversation, and asks again for the reply the drop
  cut off: the kiosk only waits for it. The view model shows ``reconnecting`` and then
  ``online``; the part of the reply heard before the drop stays in the conversation.

The local server is a scripted stand-in (energy VAD, scripted replies); it does not
understand speech.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import sys
from collections.abc import AsyncIterable, Callable
from typing import Any

import numpy as np

from voxline.base.clock import RealClock
from voxline.audio.device_mic import MicSource
from voxline.audio.device_speaker import SpeakerSink
from voxline.base.errors import AudioError
from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.connection import RealtimeConnection, connect
from voxline.realtime.errors import RealtimeError
from voxline.realtime.server import FaultConfig, ServerConfig, serve
from voxline.session.events import (
    BargeIn,
    ConnectionLost,
    ConnectionRestored,
    HeardTranscript,
    ResponseFinished,
    SessionError,
    StateChanged,
    TranscriptDelta,
    TranscriptDone,
)
from voxline.audio.clocked_output import ClockedOutput, Output
from voxline.audio.recording import mic_blocks
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession

Render = Callable[[dict[str, Any]], None]


class KioskError(Exception):
    """What ends the demo early, said in one line."""


def render(view: dict[str, Any]) -> None:
    """The UI: here one JSON line per change."""
    print("ui", json.dumps(view, sort_keys=True), flush=True)


class KioskView:
    """The view model: connection, state, caption, audio devices and the last barge-in.

    The caption is what the visitor heard: the reply's words as they come, and after a
    barge-in only the part that was heard (the session's heard transcript), never the words
    the visitor's "stop" kept from them; ``caption_cut`` says the reply was cut there. The
    session publishes the heard transcript just after the barge-in (and the state change it
    causes): from the barge-in until then the view is held, so no update shows the uncut reply.

    :meth:`apply` takes every session event (the kiosk's event pump calls it); the app's
    own logic waits on events through :meth:`expect`.
    """

    def __init__(self, render: Render) -> None:
        self._render = render
        self._waiters: list[tuple[Callable[[object], bool], asyncio.Future[object]]] = []
        self.view: dict[str, Any] = {"connection": "connecting", "state": "idle", "caption": "",
                                     "caption_cut": False, "speaker": "", "microphone": "", "barge_ins": 0,
                                     "last_cut_ms": None}
        self._words: dict[str, str] = {}  # assistant item → its words so far
        self._cut: set[str] = set()  # items the visitor cut: their caption is what was heard
        self._captioned: str | None = None  # the item the caption is of
        self._held: str | None = None  # a cut item whose heard words are on their way: nothing renders till then
        self._shown = dict(self.view)  # the view as last rendered

    def set(self, **changes: Any) -> None:
        self.view.update(changes)
        if self._held is None and self.view != self._shown:
            self._shown = dict(self.view)
            self._render(dict(self.view))

    def expect(self, predicate: Callable[[object], bool]) -> asyncio.Future[object]:
        """A future for the next event matching ``predicate`` (create it before causing the event)."""
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, future))
        return future

    def apply(self, event: object) -> None:
        if not isinstance(event, StateChanged | HeardTranscript):
            self._held = None  # no heard transcript came with the barge-in: the cut caption stays empty
        match event:
            case StateChanged(state=state):
                self.set(state=state)
            case TranscriptDelta(role="assistant", item_id=item, text=delta) if item not in self._cut:
                self._words[item] = self._words.get(item, "") + delta
                self._captioned = item
                self.set(caption=self._words[item], caption_cut=False)
            case TranscriptDone(role="assistant", item_id=item, text=text) if item not in self._cut:
                self._captioned = item
                self.set(caption=text, caption_cut=False)
            case HeardTranscript(item_id=item, text=text):
                self._cut.add(item)  # later words of it were never heard: they stay off the screen
                if item == self._held:
                    self._held = None
                self.set(caption=text, caption_cut=True)
            case BargeIn(item_id=item, deleted=deleted, trigger=trigger, audio_end_ms=ms):
                self._cut.update(deleted)  # dropped before a word of them played
                cut: dict[str, Any] = {}
                if self._captioned is not None and self._captioned in (item, *deleted):
                    self._cut.add(self._captioned)  # its words past the cut leave the screen now
                    self._held = item  # what was heard of it comes next, in a HeardTranscript
                    cut = {"caption": "", "caption_cut": True}
                # a connection_lost cut is the network's, not the visitor's: the session asks for the reply again
                counts = {} if trigger == "connection_lost" else {"barge_ins": self.view["barge_ins"] + 1,
                                                                   "last_cut_ms": ms}
                self.set(**cut, **counts)
            case ConnectionLost():
                self.set(connection="reconnecting")
            case ConnectionRestored(replayed_items=n):
                self.set(connection="online", restored_items=n)
            case SessionError(fatal=True, message=message):
                self.set(connection="offline", caption=message)
            case _:
                self.set()  # a held view that nothing else renders
        for waiter in [w for w in self._waiters if not w[1].done() and w[0](event)]:
            waiter[1].set_result(event)
        self._waiters = [w for w in self._waiters if not w[1].done()]

    def ended(self) -> None:
        """The session's events ended (it failed, or closed): what is still expected gets ``None``."""
        for _predicate, future in self._waiters:
            if not future.done():
                future.set_result(None)
        self._waiters = []


def open_speaker(device: str | None, clock: RealClock, ui: KioskView) -> Output:
    """The speaker, or, if it cannot be opened, a silent ClockedOutput (reported in the UI)."""
    try:
        sink = SpeakerSink(PlayoutBuffer(), device=device)
        sink.start()
    except AudioError as error:
        ui.set(speaker=f"unavailable, playing silently ({error})")
        return ClockedOutput(clock)
    ui.set(speaker=f"{sink.device.index} {sink.device.name}")
    return sink


def open_microphone(device: str | None, ui: KioskView) -> MicSource | None:
    try:
        mic = MicSource(device=device)
        mic.start()
    except AudioError as error:
        ui.set(microphone=f"unavailable, text only ({error})")
        return None
    ui.set(microphone=f"{mic.device.index} {mic.device.name}")
    return mic


async def pump(session: VoiceSession, ui: KioskView) -> None:
    """The kiosk's event loop: every session event goes to the view model."""
    async for event in session:
        ui.apply(event)
    ui.ended()


def reply_arrived(event: object) -> bool:
    """The reply came; or none will: the session failed, or the talk button was let go of before a word was said
    (``turn_too_short``: nothing was asked)."""
    if isinstance(event, SessionError):
        return event.fatal or event.code == "turn_too_short"
    return isinstance(event, ResponseFinished) and event.status == "completed"


def no_reply(event: object) -> bool:
    """Whether what :func:`reply_arrived` waited for says that no reply comes (said on the way)."""
    if isinstance(event, ResponseFinished):
        return False
    why = event.message if isinstance(event, SessionError) else "the session ended"
    print(f"kiosk: no reply: {why}", flush=True)
    return True


async def ask(session: VoiceSession, ui: KioskView, text: str) -> bool:
    """Send a tap and wait for the whole reply (True), or word that none comes (False); across a drop the session
    itself asks for it again."""
    reply = ui.expect(reply_arrived)
    restored = ui.expect(lambda e: isinstance(e, ConnectionRestored))
    await session.send_text(text)
    await asyncio.wait([reply, restored], return_when=asyncio.FIRST_COMPLETED)
    if restored.done() and not reply.done() and isinstance(event := restored.result(), ConnectionRestored):
        print(f"kiosk: reconnected; the session sent {event.resent_creates} owed request(s) again", flush=True)
    return not no_reply(await reply)


async def visitor(session: VoiceSession, ui: KioskView, clock: RealClock, hold: float | None) -> None:
    """The scripted visitor: tap (or hold the talk button), listen for a second, tap "stop"."""
    if hold is not None:
        reply = ui.expect(reply_arrived)
        await session.start_talking()
        await clock.sleep(hold)
        await session.stop_talking()
        answered = not no_reply(await reply)
    else:
        answered = await ask(session, ui, "A visitor tapped the screen: say hello.")
    if not answered:  # nothing plays: there is nothing to stop
        return
    await clock.sleep(1.0)
    stopped = ui.expect(lambda e: isinstance(e, BargeIn))
    await session.interrupt()  # "stop": does nothing if the reply has already finished playing
    if ui.view["state"] == "speaking":
        await stopped


VISIT_S = 60.0  # the scripted visit, reply included, takes seconds


async def run_visitor(session: VoiceSession, ui: KioskView, clock: RealClock, hold: float | None) -> None:
    try:
        async with asyncio.timeout(VISIT_S), asyncio.TaskGroup() as group:
            events = group.create_task(pump(session, ui))
            await visitor(session, ui, clock, hold)
            events.cancel()
    except TimeoutError:
        raise KioskError(f"the visit took more than {VISIT_S:g} s: no reply came") from None


async def main(args: argparse.Namespace) -> int:
    ui, clock = KioskView(render), RealClock()
    async with contextlib.AsyncExitStack() as stack:
        output = open_speaker(args.output_device, clock, ui)
        if isinstance(output, SpeakerSink):
            stack.callback(output.close)
        mic = open_microphone(args.input_device, ui)
        if mic is not None:
            stack.callback(mic.close)
        urls = await start_servers(stack, args)

        async def connector() -> RealtimeConnection:
            url = urls.pop(0) if len(urls) > 1 else urls[0]  # with --simulate-drop: flaky first, then healthy
            return await connect(url, "local")

        settings = SessionSettings(url=urls[0], turn_detection="none", reconnect_attempts=3)
        blocks: AsyncIterable[np.ndarray] | None = mic_blocks(mic.blocks()) if mic is not None else None
        session = VoiceSession(settings, output=output, input=blocks, clock=clock, connector=connector)
        async with session:
            ui.set(connection="online", state="listening")
            await run_visitor(session, ui, clock, args.hold)
    print(f"kiosk: done; {ui.view['barge_ins']} barge-in(s), connection {ui.view['connection']}", flush=True)
    return 0


async def start_servers(stack: contextlib.AsyncExitStack, args: argparse.Namespace) -> list[str]:
    healthy = await stack.enter_async_context(serve(ServerConfig(port=0, voice=args.voice)))
    print(f"kiosk: using the built-in local server at {healthy.url} (scripted replies)", flush=True)
    if not args.simulate_drop:
        return [healthy.url]
    flaky = await stack.enter_async_context(serve(ServerConfig(
        port=0, voice=args.voice, faults=FaultConfig(drop_after_events=args.drop_after))))
    print(f"kiosk: simulating a network drop: the first connection dies after {args.drop_after} server events",
          flush=True)
    return [flaky.url, healthy.url]


def seconds(text: str) -> float:
    """A positive number of seconds, for argparse."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"a positive number of seconds, not {text!r}")
    return value


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A headless kiosk embedding (see the module docstring).")
    parser.add_argument("--simulate-drop", action="store_true", help="drop the first connection mid-reply")
    parser.add_argument("--drop-after", type=int, default=20, help="server events before the drop (default 20)")
    parser.add_argument("--output-device", help="speaker index or name (default: the system default)")
    parser.add_argument("--input-device", help="microphone index or name (default: the system default)")
    parser.add_argument("--hold", type=seconds, metavar="SECONDS", help="hold the talk button instead of tapping")
    parser.add_argument("--voice", default="auto", help="built-in server voice: auto, espeak or tone")
    return parser.parse_args()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(parse_args())))
    except (RealtimeError, AudioError, KioskError) as error:
        sys.exit(f"kiosk: error: {error}")
    except KeyboardInterrupt:
        sys.exit(130)
