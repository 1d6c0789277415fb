"""``voxline talk``: a live voice assistant in the terminal, microphone in, speakers out.

With ``OPENAI_API_KEY`` set (and no ``--url``) it talks to the real service; without a
key (an empty one is none), or with ``--local``, it starts the built-in local server
in-process and says so (a scripted stand-in that detects speech by energy and does not
understand it). Turns are taken by the server's voice activity detection, or with
``--push-to-talk`` by pressing Enter to start and again to send. Two demo tools are
offered: ``get_time`` and ``get_weather`` (canned data).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import sys
from collections.abc import AsyncIterable, Coroutine
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
from pydantic import SecretStr

from voxline.audio.aec import EchoCanceller, make_canceller
from voxline.audio.device_list import DeviceInfo
from voxline.audio.device_mic import MicSource
from voxline.audio.local_vad import LocalVad, VadUnavailable
from voxline.audio.device_speaker import SpeakerSink
from voxline.base.cli_numbers import number_option
from voxline.base.clock import RealClock
from voxline.base.errors import AudioError
from voxline.base.redaction import redact_url
from voxline.base.shown import printable
from voxline.base.models import DEFAULT_LIVE_MODEL, DEFAULT_REALTIME_MODEL
from voxline.base.files import nonempty_path
from voxline.base.log_output import same_place, skip_records_said_as_events
from voxline.base.stop_signals import heeded
from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.errors import ConfigurationError, RealtimeError
from voxline.realtime.server.net.app import serve
from voxline.realtime.server.net.config import ServerConfig
from voxline.base.urls import LOCAL_KEY, is_loopback

from ..capture import default_capture
from ..events import SessionError
from voxline.audio.recording import Item, mic_blocks, watched
from ..record import SessionRecorder
from ..settings import DEFAULT_URL, SessionSettings, key_text, load_settings
from ..tools import ToolRegistry
from ..voice import VoiceSession
from .endpoint import add_local_argument, target_url
from .talk_view import EnterKeys, LiveScreen, PlainScreen, TalkModel, check_enter_source, quiet_terminal

__all__ = ["LevelMeter", "TalkSettings", "add_arguments", "demo_tools", "run"]

INSTRUCTIONS = ("You are a concise voice assistant in a terminal demo. Keep answers short. The get_weather tool "
                "returns canned demo data, not a real forecast: say so when you use it.")
FLOOR_DB = 20 * math.log10(1 / 32768)  # -90.3 dBFS: digital silence
CANNED_WEATHER = {"paris": (18, "light rain"), "oslo": (4, "snow showers"), "london": (12, "overcast")}


def _seconds(text: str) -> float:
    return number_option(text, float, lambda v: v > 0 and math.isfinite(v), "a positive number of seconds")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="Realtime API base URL, e.g. ws://127.0.0.1:8765/v1 for 'voxline serve' "
                        "(default: $VOXLINE_URL, else the real service with OPENAI_API_KEY, "
                        "else the built-in local server)")
    add_local_argument(parser)
    parser.add_argument("--model", help=f"model to ask for (default: $VOXLINE_MODEL, else {DEFAULT_REALTIME_MODEL}; "
                                        f"with --api live, $VOXLINE_LIVE_MODEL, else {DEFAULT_LIVE_MODEL})")
    parser.add_argument("--api", choices=["realtime", "live"], default=None,
                        help="the interface: realtime or live (GPT-Live, /v1/live/sessions); default $VOXLINE_API, "
                             "else realtime")
    parser.add_argument("--transport", choices=["ws", "webrtc"], default=None,
                        help="wire transport (default $VOXLINE_TRANSPORT, else ws); webrtc sends the mic and plays the reply as media tracks")
    parser.add_argument("--input-device", metavar="N", help="microphone: index or name from 'voxline devices'")
    parser.add_argument("--output-device", metavar="N", help="speakers: index or name from 'voxline devices'")
    parser.add_argument("--push-to-talk", action="store_true",
                        help="press Enter to start talking and Enter again to send (default: voice activity)")
    parser.add_argument("--scenario", help="built-in server only: scenario name (default, long, tools, listen) or TOML file")
    parser.add_argument("--voice", choices=["auto", "espeak", "tone"], default=None,
                        help="built-in server only: its voice (default auto: espeak-ng if installed)")
    echo = parser.add_mutually_exclusive_group()
    echo.add_argument("--aec", nargs="?", const="webrtc", choices=["webrtc", "speex"], default=None,
                      help="cancel the assistant's echo on the microphone with this canceller (default: webrtc "
                           "whenever voxline[aec] is installed; it stands aside where the microphone does not hear "
                           "the speaker) and stop the assistant by local voice activity before the server answers")
    echo.add_argument("--no-aec", action="store_true",
                      help="no echo cancellation and no local voice activity: the microphone goes to the server as it is")
    parser.add_argument("--exit-after", type=_seconds, metavar="SECONDS", help="end the session after this long")
    parser.add_argument("--record", type=nonempty_path, metavar="DIR",
                        help="keep the session in DIR: MIC.wav, HEARD.wav, EVENTS.jsonl, REPORT.html and SUMMARY.json "
                             "(MIC.wav can be replayed with 'voxline replay')")
    parser.add_argument("--no-ui", action="store_true",
                        help="print one plain line per event instead of the live display "
                             "(the default when stdout is not a terminal)")


class TalkSettings(SessionSettings):
    """Session settings for ``voxline talk``; it asks the real service to transcribe the user."""


def demo_tools() -> ToolRegistry:
    """``get_time`` and ``get_weather`` (canned data), both read-only."""
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    def get_time(zone: str = "UTC") -> str:
        """The current time in a time zone.

        Args:
            zone: an IANA time zone name such as Europe/Paris, or UTC.
        """
        try:
            return datetime.now(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z")
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {zone!r}") from None

    @tools.tool(read_only=True)
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> dict[str, Any]:
        """Demo weather for a city: canned data, not a real forecast.

        Args:
            city: the city name.
            unit: celsius or fahrenheit.
        """
        celsius, conditions = CANNED_WEATHER.get(city.strip().lower(), (21, "clear"))
        value = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32)
        return {"city": city, "temperature": value, "unit": unit, "conditions": conditions,
                "source": "canned demo data, not a real forecast"}

    return tools


class LevelMeter:
    """The input level in dBFS: the RMS of each microphone block as it goes by, falling back
    slowly (``fall_db`` per block) so that short words stay readable on the meter."""

    def __init__(self, fall_db: float = 1.5) -> None:
        self.db = FLOOR_DB
        self.fall_db = fall_db

    def watch(self, blocks: AsyncIterable[Item]) -> AsyncIterable[Item]:
        """``blocks`` (bare, or ``(adc_time, block)`` pairs) unchanged, each one measured as it goes by;
        a microphone's stepped blocks stay stepped (:func:`~voxline.audio.recording.watched`)."""
        return watched(blocks, self.measure)

    def measure(self, item: np.ndarray | tuple[float, np.ndarray]) -> None:
        block = item[1] if isinstance(item, tuple) else item
        rms = math.sqrt(float(np.mean(np.square(block, dtype=np.float64)))) if len(block) else 0.0
        self.db = max(20 * math.log10(max(rms, 1.0) / 32768), self.db - self.fall_db)


def _settings(args: argparse.Namespace) -> tuple[TalkSettings, bool]:
    """The session settings and whether the built-in server is to be started."""
    # the flags and VOXLINE_* checked, one line naming a bad one
    base = load_settings(TalkSettings, transport=args.transport, api=args.api, model=args.model,
                         input_device=args.input_device, output_device=args.output_device)
    if args.push_to_talk or base.turn_detection == "none":  # VOXLINE_TURN_DETECTION may ask for semantic_vad
        base = base.model_copy(update={"turn_detection": "none" if args.push_to_talk else "server_vad"})
    key = key_text(base.api_key)  # an empty or blank variable is unset
    given = target_url(args)
    local = args.local or (given is None and key is None)
    if not local and (args.scenario or args.voice):
        raise ConfigurationError("--scenario and --voice apply to the built-in server only (no OPENAI_API_KEY, no --url)")
    url = given or DEFAULT_URL
    if not local and key is None and not is_loopback(_host(url)):
        raise ConfigurationError(f"OPENAI_API_KEY is not set (needed for {redact_url(url)})")
    updates: dict[str, Any] = {"url": url, "transcribe": not local}
    if base.instructions is None:
        updates["instructions"] = INSTRUCTIONS
    return base.model_copy(update=updates), local


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


async def _endpoint(stack: contextlib.AsyncExitStack, args: argparse.Namespace, settings: TalkSettings,
                    local: bool, cancelled: bool) -> tuple[str, str, str]:
    """The URL to connect to, its label for the display, and the line that says what it is (without echo
    cancellation, ``cancelled`` False, with the advice to use headphones)."""
    if not local:
        shown = redact_url(settings.url)
        advice = "" if cancelled else "; use headphones, or the assistant may hear itself"
        return settings.url, shown, f"voxline talk: connecting to {shown} (model {settings.asked_model}){advice}"
    server = await stack.enter_async_context(serve(ServerConfig(port=0, scenario=args.scenario,
                                                                voice=args.voice or "auto")))
    return server.url, "built-in local server (scripted)", (
        f"voxline talk: {'--local' if args.local else 'no OPENAI_API_KEY'}, so using the built-in local server at "
        f"{server.url} (scenario "
        f"'{server.scenario.name}', voice '{server.voice}'): a scripted stand-in that detects speech by energy "
        "and does not understand it")


def _named(device: DeviceInfo) -> str:
    """``3 'Null Output' (vspk)``: the sound server's own name too, where PortAudio's says less (every null sink of
    PulseAudio is 'Null Output')."""
    route = f" ({printable(device.route)})" if device.route is not None and device.route != device.name else ""
    return f"{device.index} '{printable(device.name)}'{route}"


async def run(args: argparse.Namespace) -> int:
    settings, local = _settings(args)
    if args.push_to_talk:
        check_enter_source()  # before a server starts or a device opens
    aec, vad, echo_note = echo_options(args)  # an --aec that cannot load: one line, before anything opens
    ptt = "push-to-talk: Enter starts and sends" if args.push_to_talk else "voice activity"
    recorder = SessionRecorder(args.record) if args.record is not None else None
    session: VoiceSession | None = None
    started = False
    async with contextlib.AsyncExitStack() as stack:
        if recorder is not None:  # first in, so last out: after the session and the devices closed
            stack.push_async_callback(_finish_recording, recorder, lambda: session if started else None)
        speaker = SpeakerSink(recorder.playout if recorder is not None else PlayoutBuffer(),
                              device=settings.output_device)
        mic = MicSource(device=settings.input_device)
        stack.callback(speaker.close)
        stack.callback(mic.close)
        if recorder is not None:
            recorder.now = speaker.now
            await stack.enter_async_context(recorder.flushing(RealClock()))  # out before the recording closes
        speaker.start()
        mic.start()
        url, label, note = await _endpoint(stack, args, settings, local, cancelled=aec is not None)
        token = settings.api_key or SecretStr(LOCAL_KEY)  # the built-in server takes any token on loopback
        settings = settings.model_copy(update={"url": url, "api_key": token})
        model = TalkModel(endpoint=label, mode=ptt, push_to_talk=args.push_to_talk)  # so from the first frame
        screen: PlainScreen | LiveScreen = PlainScreen(model) if args.no_ui or not sys.stdout.isatty() else LiveScreen(model)
        if isinstance(screen, PlainScreen) and same_place(sys.stdout, sys.stderr):
            skip_records_said_as_events()  # its event line says it where the log line would say it again
        screen.note(note)
        meter = LevelMeter()
        # metered (and recorded) on the way, the microphone's blocks stay on the loop's stepper
        blocks = meter.watch(mic.blocks() if recorder is None else recorder.mic(mic.blocks()))
        wire = recorder.wire if recorder is not None else None
        if aec is not None:  # the capture path aligns the reference by the microphone's ADC times
            session = VoiceSession(settings, output=speaker, input=blocks,
                                   tools=demo_tools(), aec=aec, local_vad=vad, on_wire=wire,
                                   watch_devices=(speaker, mic))
        else:
            session = VoiceSession(settings, output=speaker, input=mic_blocks(blocks), tools=demo_tools(),
                                   on_wire=wire, watch_devices=(speaker, mic))
        await stack.enter_async_context(session)
        started = True
        screen.note(echo_note)  # once connected, before "ready"
        ready = f"ready: mic {_named(mic.device)} → speaker {_named(speaker.device)} ({ptt}; Ctrl-C quits)"
        with screen:
            code = await TalkLoop(session, screen, meter, args, recorder).run(ready)
        screen.note(model.summary())
    if recorder is not None:
        print(f"voxline talk: recorded the session in {recorder.directory}", file=sys.stderr)
    return code


def echo_options(args: argparse.Namespace) -> tuple[EchoCanceller | None, LocalVad | None, str]:
    """The canceller and local VAD ``talk`` runs with, and the line that says so (no local VAD with
    ``--push-to-talk``: Enter is the turn, and speech without it holds nothing).

    ``--aec NAME`` must load (one line naming the extra otherwise); without ``--aec`` or
    ``--no-aec`` the gated AEC3 runs when the extra is installed, and the session goes without
    it, saying why, when it is not.
    """
    if args.no_aec:
        return None, None, "voxline talk: echo cancellation off (--no-aec)"
    if args.aec:
        aec, vad = make_canceller(args.aec), None
        if not args.push_to_talk:  # Enter is the turn there: no local VAD is needed
            try:
                vad = LocalVad("webrtc")
            except VadUnavailable as exc:
                raise VadUnavailable(f"--aec {args.aec} holds the assistant while you talk with a local VAD, and the "
                                     f"{exc} (or add --push-to-talk, which needs none)") from None
    else:
        chosen = default_capture()
        if isinstance(chosen, str):
            return None, None, f"voxline talk: echo cancellation off: {chosen}"
        aec, vad = chosen
    if args.push_to_talk:  # the user's Enter is the turn, and interrupts: speech without it holds nothing
        return aec, None, (f"voxline talk: echo cancellation on ({aec.name}; the microphone passes untouched while "
                           "it does not hear the speaker); Enter interrupts the assistant (--no-aec: off)")
    return aec, vad, (f"voxline talk: echo cancellation on ({aec.name}; the microphone passes untouched while it "
                      "does not hear the speaker), local voice activity holds the assistant (--no-aec: off)")


async def _finish_recording(recorder: SessionRecorder, session: Any) -> None:
    """After the session closed: complete the files and write the report; a session that never
    started (no devices, no server) leaves no empty recording behind."""
    current = session()
    if current is None:
        recorder.abandon()
        return
    recorder.close(current.metrics(), mode="live (voxline talk)")


class TalkLoop:
    """Runs the session's event loop against a screen until time is up, Ctrl-C, or the session ends."""

    def __init__(self, session: VoiceSession, screen: PlainScreen | LiveScreen, meter: LevelMeter,
                 args: argparse.Namespace, recorder: SessionRecorder | None = None) -> None:
        self.session = session
        self.recorder = recorder
        self.screen = screen
        self.meter = meter
        self.args = args
        self.stop = asyncio.Event()
        self.code = 0
        self._loop = asyncio.get_running_loop()
        self._t0 = self._loop.time()
        if isinstance(screen, PlainScreen):  # its lines read a turn's figures as its reply starts
            screen.attach(session.metrics, verbose=args.verbose)

    def _stamp(self) -> str:
        return f"{self._loop.time() - self._t0:6.2f}s"

    def _end(self, code: int) -> None:
        if not self.stop.is_set():
            self.code = code
            self.stop.set()

    async def run(self, ready: str) -> int:
        """Converse until stopped; ``ready`` is shown once Ctrl-C is handled here."""
        keys = EnterKeys() if self.args.push_to_talk else contextlib.nullcontext()
        stops = heeded()  # Ctrl-C, a job's SIGTERM, a closed terminal's SIGHUP: the same clean end (not under nohup)
        for sig in stops:
            self._loop.add_signal_handler(sig, self._end, 128 + int(sig))
        self.screen.note(ready)
        try:
            interactive = self.args.push_to_talk or isinstance(self.screen, LiveScreen)
            with quiet_terminal() if interactive else contextlib.nullcontext(), keys:
                loops: list[Coroutine[Any, Any, None]] = [self._events(), self._redraw()]  # made once they can run
                if isinstance(keys, EnterKeys):
                    loops.append(self._push_to_talk(keys))
                await self._until_stopped(loops)
        except* (RealtimeError, AudioError) as group:
            raise group.exceptions[0] from None
        finally:
            for sig in stops:
                self._loop.remove_signal_handler(sig)
        return self.code

    async def _until_stopped(self, loops: list[Coroutine[Any, Any, None]]) -> None:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(loop) for loop in loops]
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.args.exit_after):
                    await self.stop.wait()
            for task in tasks:
                task.cancel()

    async def _events(self) -> None:
        async for event in self.session:
            if self.recorder is not None:
                self.recorder.event(event)
            self.screen.show(event, self._stamp())
            if isinstance(event, SessionError) and event.fatal:
                self._end(1)
        self._end(self.code or 1)  # the session ended on its own: the connection is gone

    async def _redraw(self) -> None:
        while True:
            self.screen.model.level_db = self.meter.db
            self.screen.refresh()
            if self.recorder is not None:
                self.recorder.drain()
            await asyncio.sleep(0.1)

    async def _push_to_talk(self, keys: EnterKeys) -> None:
        model = self.screen.model
        while True:
            await keys.presses.get()
            talking = not model.talking
            model.push_to_talk(talking, self._loop.time() - self._t0)  # first: the session's answer comes after
            if talking:
                await self.session.start_talking()
            else:
                await self.session.stop_talking()
            if isinstance(self.screen, PlainScreen):  # the live panel shows it; a line printed above would push it down
                self.screen.note(f"{self._stamp()} push-to-talk: {'talking' if model.talking else 'sent'}")
