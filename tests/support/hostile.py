"""A hostile network between a VoiceSession and the local server's engine, in lockstep.

:class:`Hostile` wraps the in-process engine transport and, once its trigger fires, does
what a broken server or network does: closes with a code, sends ``session_expired``, fails
like a network error, sends a malformed frame, closes the next connection right after its
handshake, or goes silent (no frames, no pong). :func:`run_faulted` plays one recorded
conversation (a text turn, tool calls, two spoken turns) through a real ``VoiceSession``
on a virtual clock with one fault injected, and returns what a test needs to check that
nothing was lost: the session's events, the mirror, every server conversation, the tool
invocations and every frame on the wire.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voxline.audio.sinks import TimelineSink
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import VirtualClock
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.errors import ConnectionClosed
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.responses import Pacing
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.realtime.server.engine.state import EngineConfig
from voxline.realtime.server.engine.voices import make_synth, warm_up
from voxline.realtime.server.net.inprocess import EngineTransport
from voxline.session.events import SessionError
from voxline.session.lockstep import run_lockstep
from voxline.audio.clocked_output import BLOCK, ClockedOutput
from voxline.audio.recording import Recording
from voxline.session.settings import SessionSettings
from voxline.session.tools import ToolRegistry
from voxline.session.voice import VoiceSession

__all__ = ["FAULTS", "POINTS", "Fault", "Outcome", "run_faulted"]

Frame = dict[str, Any]
Trigger = Callable[[str, Frame, "Run"], bool]  # (direction "in"/"out", frame, run) → fire now?

EXPIRED = {"type": "error", "event_id": "event_expired", "error": {
    "type": "invalid_request_error", "code": "session_expired",
    "message": "Your session hit the maximum duration of 60 minutes."}}
BAD_AUDIO = {"type": "response.output_audio.delta", "event_id": "event_bad", "response_id": "resp_x",
             "item_id": "item_x", "output_index": 0, "content_index": 0, "delta": "@@not base64@@"}


@dataclass(frozen=True)
class Fault:
    """What the network does once the trigger fires."""

    name: str
    kind: str  # "close", "expired", "network", "malformed", "close_at_once", "silent"
    code: int | None = None


FAULTS = [
    Fault("close 1000", "close", 1000),
    Fault("close 1001", "close", 1001),
    Fault("close 1006", "close", 1006),
    Fault("close 1011", "close", 1011),
    Fault("close 4000", "close", 4000),
    Fault("session_expired", "expired", 1000),
    Fault("network error", "network"),
    Fault("malformed frame", "malformed"),
    Fault("next connection closes at once", "close_at_once", 1011),
    Fault("server goes silent", "silent"),
]


@dataclass
class Run:
    """Shared state of one faulted run (what triggers look at)."""

    session: VoiceSession | None = None
    seen: Counter[str] = field(default_factory=Counter)  # "in:type" / "out:type" counts on every connection
    fired: bool = False
    closes_at_once_left: int = 0
    sent_output: bool = False


def _count(kind: str, n: int = 1) -> Trigger:
    return lambda d, f, run: f"{d}:{f['type']}" == kind and run.seen[kind] == n


def _after_output_before_create(d: str, f: Frame, run: Run) -> bool:
    if d == "out" and f["type"] == "conversation.item.create" and f["item"].get("type") == "function_call_output":
        run.sent_output = True
        return False
    return d == "out" and f["type"] == "response.create" and run.sent_output


def _tool_running(d: str, f: Frame, run: Run) -> bool:
    s = run.session
    return d == "out" and f["type"] == "input_audio_buffer.append" and s is not None and bool(s.machine.calls.running())


def _user_speaking(d: str, f: Frame, run: Run) -> bool:
    return (d == "out" and f["type"] == "input_audio_buffer.append" and run.seen["in:input_audio_buffer.speech_started"] >= 1
            and run.session is not None and run.session.core is not None and run.session.core.user_speaking
            and run.seen["out:input_audio_buffer.append"] % 7 == 0)


def _idle(d: str, f: Frame, run: Run) -> bool:
    s = run.session
    return (d == "out" and f["type"] == "input_audio_buffer.append" and run.seen["in:response.done"] >= 2
            and s is not None and s.idle)


POINTS: dict[str, tuple[str, Trigger]] = {
    # name: (state in the matrix, trigger)
    "idle": ("idle", _idle),
    "before the item is echoed": ("idle", _count("out:conversation.item.create")),
    "after response.created": ("assistant speaking", _count("in:response.created")),
    "mid audio": ("assistant speaking", _count("in:response.output_audio.delta", 3)),
    "mid function-call arguments": ("tool running", _count("in:response.function_call_arguments.delta")),
    "after arguments.done": ("tool running", _count("in:response.function_call_arguments.done")),
    "tool running": ("tool running", _tool_running),
    "between a tool output and its response.create": ("tool running", _after_output_before_create),
    "user speaking": ("user speaking", _user_speaking),
}


class Hostile:
    """A transport that passes frames through until its fault fires (see the module docstring)."""

    def __init__(self, inner: EngineTransport, run: Run, fault: Fault, trigger: Trigger, *, at_once: bool) -> None:
        self.inner = inner
        self.server_time = inner.server_time  # the engine's clock, as the transport underneath says it
        self.run = run
        self.fault = fault
        self.trigger = trigger
        self.at_once = at_once  # close right after delivering the handshake
        self.media = None
        self._armed: Fault | None = None
        self._silent = False
        self._hold: list[str] = []
        self._closed = asyncio.Event()
        self.close_code: int | None = None

    def _see(self, direction: str, text: str) -> bool:
        frame = json.loads(text)
        self.run.seen[f"{direction}:{frame['type']}"] += 1
        if self.run.fired or not self.trigger(direction, frame, self.run):
            return False
        self.run.fired = True
        return True

    async def _fire(self, fault: Fault) -> None:
        match fault.kind:
            case "close" | "expired":
                await self._close(fault.code or 1000, fault.name)
            case "network":
                await self._close(1006, "connection reset by peer")
            case "close_at_once":
                self.run.closes_at_once_left = 1
                await self._close(fault.code or 1011, fault.name)
            case "silent":
                self._silent = True
            case _:
                raise AssertionError(fault.kind)

    async def _close(self, code: int, reason: str) -> None:
        await self.inner.close(code, reason)
        self.close_code = code
        self._closed.set()
        raise ConnectionClosed(code, reason)

    async def send(self, text: str) -> None:
        if self.close_code is not None:
            raise ConnectionClosed(self.close_code, "closed")
        if self._silent:
            return
        if self._see("out", text):
            if self.fault.kind == "malformed":
                self._hold.append(json.dumps(BAD_AUDIO))  # the server's next frame is garbage
            else:
                await self._fire(self.fault)  # the frame is lost with the connection
        await self.inner.send(text)

    async def recv(self) -> str:
        if self._hold:
            return self._hold.pop(0)
        if self._armed is not None:
            fault, self._armed = self._armed, None
            await self._fire(fault)
        if self._silent:
            await self._closed.wait()
            raise ConnectionClosed(self.close_code, "closed")
        if self.close_code is not None:
            raise ConnectionClosed(self.close_code, "closed")
        text = await self.inner.recv()
        if self.at_once and json.loads(text)["type"] == "session.created":
            self._armed = Fault("closes at once", "close", 1011)
            return text
        if self._see("in", text):
            match self.fault.kind:
                case "malformed":
                    self._hold.append(text)
                    return json.dumps(BAD_AUDIO)
                case "expired":
                    self._armed = self.fault
                    self._hold.append(json.dumps(EXPIRED))
                case _:
                    self._armed = self.fault  # the client sees this frame, then the fault
        return text

    async def ping(self) -> None:
        if self._silent:
            await self._closed.wait()
        if self.close_code is not None:
            raise ConnectionClosed(self.close_code, "closed")

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.close_code is None:
            self.close_code = code
            self._closed.set()
        await self.inner.close(code, reason)


@dataclass
class Outcome:
    events: list[Any]
    mirror: list[Any]
    engines: list[Engine]
    invocations: Counter[str]
    wire: list[tuple[int, str, Frame]]  # (connection number, direction, frame)
    run: Run
    underruns: int = 0

    def server_items(self) -> list[dict[str, Any]]:
        """The final server conversation, item by item."""
        return [entry.item for entry in self.engines[-1]._state.conversation]


def speech(rng: np.random.Generator, seconds: float) -> np.ndarray:
    """Noise bursts the server's energy VAD takes for speech."""
    n = int(seconds * SAMPLE_RATE)
    envelope = 0.6 + 0.4 * np.sin(np.linspace(0, 12 * np.pi, n)) ** 2
    return (rng.standard_normal(n) * 4000 * envelope).astype(np.int16)


BURSTS = ((9.0, 1.2), (19.0, 1.0))  # (start, length) of the spoken turns, seconds


def spoken_bursts() -> list[np.ndarray]:
    """The spoken turns of :func:`recording`, as the user said them."""
    rng = np.random.default_rng(7)
    return [speech(rng, length) for _start, length in BURSTS]


def recording() -> np.ndarray:
    """Silence, a spoken turn at 9 s and another at 19 s, 30 s in all."""
    out = np.zeros(30 * SAMPLE_RATE, dtype=np.int16)
    for (start, _length), burst in zip(BURSTS, spoken_bursts(), strict=True):
        at = int(start * SAMPLE_RATE)
        out[at:at + len(burst)] = burst
    return out


def run_faulted(fault: Fault | None, trigger: Trigger | None, *, liveness_s: float = 2.0,
                max_session_s: float = 3600.0, handover_s: float = 120.0,
                samples: np.ndarray | None = None, scenario_name: str = "tools",
                on_event: Callable[[VoiceSession, Any], Awaitable[None]] | None = None) -> Outcome:
    """One conversation with ``fault`` injected when ``trigger`` first fires (None: no fault).

    ``max_session_s`` is each server session's maximum duration; ``samples`` replaces the
    recording (int16 mono 24 kHz); ``on_event`` is awaited with each session event as it is taken.
    """
    clock = VirtualClock()
    scenario = load_scenario(scenario_name)
    synth, _ = make_synth("tone")
    voices = warm_up(scenario, synth)
    run = Run()
    engines: list[Engine] = []
    wire: list[tuple[int, str, Frame]] = []
    invocations: Counter[str] = Counter()
    registry = ToolRegistry()

    @registry.tool(timeout=5.0)
    async def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """The weather in a city."""
        invocations[f"get_weather:{city}"] += 1
        await clock.sleep(0.8)
        return {"city": city, "temperature": 18, "unit": unit}

    @registry.tool(timeout=5.0)
    async def get_time(zone: str) -> str:
        """The time in a zone."""
        invocations[f"get_time:{zone}"] += 1
        await clock.sleep(0.5)
        return "12:00"

    async def connector() -> RealtimeConnection:
        config = EngineConfig(pacing=Pacing(speed=4.0), max_session_s=max_session_s)
        engine = Engine(config, scenario, voices, wall_time=clock.wall())
        engines.append(engine)
        number = len(engines)
        at_once = run.closes_at_once_left > 0
        run.closes_at_once_left = max(0, run.closes_at_once_left - 1)
        transport = Hostile(EngineTransport(engine, clock, synth), run, fault or FAULTS[0],
                            trigger or (lambda *_: False), at_once=at_once)

        def observe(direction: str, text: str) -> None:
            wire.append((number, direction, json.loads(text)))

        return RealtimeConnection(transport, on_wire=observe)

    settings = SessionSettings(api_key="local", url="ws://in-process/v1", turn_detection="server_vad",
                               reconnect_attempts=6, liveness_timeout_s=liveness_s, reconnect_stable_s=5.0,
                               handover_s=handover_s)
    samples = recording() if samples is None else samples

    async def main() -> list[Any]:
        origin = clock.now()
        output = ClockedOutput(clock, TimelineSink(), origin=origin)
        session = VoiceSession(settings, output=output, input=Recording(samples, clock, origin),
                               tools=registry, clock=clock, connector=connector, backoff=lambda attempt: 0.25)
        run.session = session
        events: list[Any] = []
        end = origin + len(samples) / SAMPLE_RATE
        async with session:
            await session.send_text("What is the weather in Paris?")
            while True:
                batch = session.pending_events()
                events.extend(batch)
                for event in batch if on_event is not None else ():
                    await on_event(session, event)
                if any(isinstance(e, SessionError) and e.fatal for e in batch):
                    break
                if session.input_finished and (session.idle or clock.now() - end > 30):
                    break
                await clock.sleep(BLOCK / SAMPLE_RATE)
            events.extend(session.pending_events())
        outcome.mirror = session.mirror.items()
        outcome.underruns = output.playout.underrun_events
        return events

    outcome = Outcome([], [], engines, invocations, wire, run)
    outcome.events = run_lockstep(main(), clock)
    return outcome
