"""Replay a recording through a :class:`~voxline.session.VoiceSession`, the one session driver.

The recording is the microphone (:class:`~voxline.audio.recording.Recording`), a
:class:`~voxline.audio.clocked_output.ClockedOutput` writes what the listener heard into a sink
(HEARD.wav, or a timeline in memory), and everything else is the session an application
runs: the protocol core, barge-in, the tool dispatcher, the conversation mirror, reconnects.

* :func:`run_replay` — over any connection (the built-in server on loopback, ``--url``),
  on any clock;
* :func:`replay_fast` (``voxline replay --fast``) — the same coroutine with the local
  server's engine in process (:class:`~voxline.realtime.server.net.inprocess.EngineTransport`)
  on a :class:`~voxline.base.clock.VirtualClock`, run by the lockstep loop.

The replay ends once the input is over and the session is idle (nothing playing, queued,
produced or owed), or ``tail_s`` after the input ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import SecretStr

from voxline.audio.aec import EchoCanceller
from voxline.audio.local_vad import LocalVad
from voxline.audio.room import RoomEcho
from voxline.audio.sinks import Sink, TimelineSink
from voxline.base.arguments import real, text
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import Clock, VirtualClock
from voxline.base.contain import being_cancelled
from voxline.base.steps import run_steps
from voxline.base.urls import LOCAL_KEY
from voxline.realtime.connection import RealtimeConnection, WireObserver
from voxline.realtime.server.engine.core import Engine
from voxline.realtime.server.engine.responses import STREAM_BURST_S, Pacing
from voxline.realtime.server.engine.scenario import Scenario
from voxline.realtime.server.engine.state import EngineConfig
from voxline.realtime.server.engine.speech import VoiceCache
from voxline.realtime.server.engine.voices import make_synth, warm_up
from voxline.realtime.server.hearing.ears import load_ears
from voxline.realtime.live.connection import live_connection
from voxline.realtime.live.protocol import LiveProtocol
from voxline.realtime.protocol import RealtimeProtocol
from voxline.realtime.server.live.engine import LiveEngine
from voxline.realtime.server.live.settings import LiveConfig
from voxline.realtime.server.net.inprocess import EngineTransport

from ..app_events import AppEvent
from ..events import SessionError
from ..lockstep import run_lockstep
from ..capture import attach_ring
from ..local_barge import BargePolicy
from voxline.audio.clocked_output import BLOCK, ClockedOutput
from voxline.audio.recording import Recording, SampleFeed, as_feed, echoed_blocks
from ..live.inprocess import LiveEngineTransport
from ..settings import SessionSettings
from ..tools import Approver, ToolRegistry
from ..voice import Connector, VoiceSession
from .result import ReplayResult, not_opened, turn_left_open, turn_wait_s

__all__ = ["engine_connector", "replay_fast", "run_replay"]

EventHook = Callable[[AppEvent], None]
POLL_BLOCKS = 5


async def run_replay(
    samples: npt.NDArray[np.int16] | SampleFeed,
    *,
    connector: Connector | None,
    clock: Clock,
    settings: SessionSettings | None = None,
    sink: Sink | None = None,
    tools: ToolRegistry | None = None,
    approve: Approver | None = None,
    tail_s: float = 120.0,
    latency_s: float = 0.0,
    on_event: EventHook | None = None,
    on_wire: WireObserver | None = None,
    echo: RoomEcho | None = None,
    aec: EchoCanceller | str | None = None,
    local_vad: LocalVad | str | None = None,
    barge_policy: BargePolicy | None = None,
    on_session: Callable[[VoiceSession], None] | None = None,
    stop: asyncio.Event | None = None,
) -> ReplayResult:
    """Play ``samples`` (int16 mono 24 kHz, an array or a :class:`SampleFeed` streamed as it plays) as the
    microphone of a :class:`VoiceSession`.

    ``echo`` mixes what the listener heard back into the microphone through that room
    (:func:`~voxline.audio.recording.echoed_blocks`); ``aec``, ``local_vad`` and
    ``barge_policy`` go to the session.

    ``connector`` opens each connection; ``None`` lets the session connect as its
    ``settings`` say (URL, key, transport). Either way every frame is shown to ``on_wire``.
    Listener time 0 is the capture instant of input sample 0. Events are handed to
    ``on_event`` as they happen and gathered in the result. Without a ``sink`` the heard
    timeline is kept in memory (:attr:`ReplayResult.heard`). ``on_session`` is shown the
    session before it starts (to read its :meth:`~VoiceSession.metrics` as events come).
    Once ``stop`` is set (a signal), the replay ends there as if its input had ended, closes the
    session and returns what it has, marked ``interrupted``.
    """
    real(tail_s, "tail_s", low=0)
    real(latency_s, "latency_s", low=0)
    if settings is not None and not isinstance(settings, SessionSettings):
        raise TypeError(f"settings takes a SessionSettings, not {type(settings).__name__}")
    timeline = sink if sink is not None else TimelineSink()
    origin = clock.now()
    output = ClockedOutput(clock, timeline, origin=origin, latency_s=latency_s)
    settings = settings or SessionSettings(api_key=SecretStr(LOCAL_KEY))
    # a plain recording is handed over a chunk at a time when a chunk is whole 20 ms blocks: the
    # appends go out at the same instants as with 20 ms blocks, with fewer wake-ups (another chunk
    # size would change them); echo, AEC and a local VAD keep 20 ms blocks
    chunk = settings.input_chunk_samples
    plain = echo is None and not aec and not local_vad and chunk % BLOCK == 0
    feed = as_feed(samples)
    recording = Recording(feed, clock, origin, block=chunk if plain else BLOCK)
    mic: AsyncIterable[np.ndarray] = recording
    if echo is not None:
        mic = echoed_blocks(mic, echo, attach_ring(output.playout))
    session = VoiceSession(settings, output=output, input=mic, tools=tools,
                           approve=approve, clock=clock, connector=connector, on_wire=on_wire, aec=aec,
                           local_vad=local_vad, barge_policy=barge_policy)
    if on_session is not None:
        on_session(session)
    events: list[AppEvent] = []

    def take() -> bool:
        fatal = False
        for event in session.pending_events():
            events.append(event)
            if on_event is not None:
                on_event(event)
            fatal = fatal or (isinstance(event, SessionError) and event.fatal)
        return fatal

    input_end = origin + feed.frames / SAMPLE_RATE
    block_s = BLOCK / SAMPLE_RATE
    polled = interrupted = left_open = False
    turn_wait = turn_wait_s(settings)

    def poll(now: float) -> float | None:
        """Events gathered every 5 blocks while the input plays, the end looked for every block after."""
        nonlocal polled, interrupted, left_open
        if stop is not None and stop.is_set():
            interrupted = True
            return None
        if polled and session.input_finished:
            # a turn the server's turn detection began is waited for (its speech_stopped may be on its way from a
            # distant server), but no longer than the silence that ends one takes: past that the recording ended
            # inside it, and nothing will end it
            waited = now - input_end
            if waited >= tail_s or (session.idle and not (session.turn_open and waited < turn_wait)):
                left_open = session.turn_open
                return None
        polled = True
        if take():
            return None
        return now + (POLL_BLOCKS * block_s if now + POLL_BLOCKS * block_s <= input_end else block_s)

    metrics = None
    watch = _StopWatch(stop)
    try:
        async with session:
            watch.opened()
            # on a real clock, a step of the loop's stepper: no task wakes
            if await watch.steps(run_steps(clock, poll, clock.now())):
                interrupted = True  # stopped while no time passed (the poll never came round)
            metrics = session.metrics()
    except asyncio.CancelledError:
        if not watch.cancelled():
            raise
        interrupted = True  # stopped while connecting: nothing ran, nothing to wait for
    finally:
        watch.done()
    take()
    # a server that refuses every connect (an error and a close each time) sends events, but no session ever
    # began: nothing the recording holds was listened to, and the replay must not pass for one that ran. A fatal
    # error that says why already (GPT-Live's refused start) stands alone; a spent budget only counts the refusals
    explained = any(isinstance(e, SessionError) and e.fatal and e.code != "connection_lost" for e in events)
    if metrics is not None and not interrupted and not explained and not session.began:
        refused = not_opened(events, LiveProtocol.OPENING_EVENT if settings.api == "live"
                             else RealtimeProtocol.OPENING_EVENT)
        events.append(refused)
        if on_event is not None:
            on_event(refused)
    elif metrics is not None and not interrupted and left_open:
        unfinished = turn_left_open(settings)
        events.append(unfinished)
        if on_event is not None:
            on_event(unfinished)
    playout = output.playout
    heard = timeline.samples if isinstance(timeline, TimelineSink) else None
    return ReplayResult(heard, events, playout.underrun_events, playout.underrun_samples,
                        duration_s=clock.now() - origin, metrics=metrics, interrupted=interrupted,
                        captured_samples=recording.captured)


class _StopWatch:
    """A stop while the session connects ends the connect at once (not after its timeout): the
    replay's task is cancelled then, and only then. Once the session is open the stop ends its steps at
    once: their own look at it comes only with their next step, which a virtual clock may never reach
    (a server and its tools calling each other with no time passing)."""

    def __init__(self, stop: asyncio.Event | None) -> None:
        self._task = asyncio.current_task()
        self._fired = False
        self._open = False
        self._steps: asyncio.Future[object] | None = None
        self._watch = asyncio.ensure_future(self._wait(stop)) if stop is not None else None

    async def _wait(self, stop: asyncio.Event) -> None:
        await stop.wait()
        if not self._open:
            if self._task is not None:
                self._fired = True
                self._task.cancel()
            return
        steps = self._steps
        if steps is not None and not steps.done():
            steps.cancel()

    def opened(self) -> None:
        """The session is open: a stop from now on ends its steps."""
        self._open = True

    async def steps(self, run: Awaitable[object]) -> bool:
        """Run the steps; True if a stop had to cancel them."""
        steps = self._steps = asyncio.ensure_future(run)
        try:
            await steps
        except asyncio.CancelledError:
            if not steps.cancelled() or being_cancelled():
                raise  # our own cancel, not the stop's
            return True
        return False

    def done(self) -> None:
        """The attempt is over: the watch ends."""
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()

    def cancelled(self) -> bool:
        """Was the task cancelled by a stop while connecting, and by nothing else? (The stop's cancel is
        then taken back; another one, its owner's, still pending goes on.)"""
        if not self._fired or self._task is None:
            return False
        self._fired = False
        return self._task.uncancel() == 0


def engine_connector(scenario: Scenario, clock: Clock, *, voice: str = "auto", speed: float = 4.0,
                     on_wire: WireObserver | None = None, voices: VoiceCache | None = None,
                     hearing: str = "auto", api: str = "realtime") -> Connector:
    """Connections to a fresh local-server engine in this process, on ``clock``.

    ``voices`` is the scenario's fixed replies voiced already (:func:`warm_up`), for many
    replays of one scenario; by default they are voiced here. ``hearing`` is the server's
    (``auto``: a scenario that listens hears with ``voxline[asr]`` when it is installed).
    ``api="live"``: the server's GPT-Live engine instead, whose timeline runs on the caller's audio."""
    synth, _name = make_synth(voice)
    if voices is None:
        voices = warm_up(scenario, synth)  # the scenario's fixed replies, voiced once
    if api == "live":
        cache = voices

        async def connect_live() -> RealtimeConnection:
            engine = LiveEngine(LiveConfig(), scenario, cache, wall_time=clock.wall())
            return live_connection(LiveEngineTransport(engine, clock, synth), on_wire=on_wire)

        return connect_live

    ears = load_ears(hearing)

    async def connect() -> RealtimeConnection:
        # a replay never retrieves items: the engine keeps their audio's length, not its bytes
        config = EngineConfig(pacing=Pacing(speed=speed, burst_s=STREAM_BURST_S), keep_item_audio=False, hearing=ears is not None)
        engine = Engine(config, scenario, voices, wall_time=clock.wall())
        return RealtimeConnection(EngineTransport(engine, clock, synth, ears), on_wire=on_wire)

    return connect


def replay_fast(
    samples: npt.NDArray[np.int16] | SampleFeed,
    *,
    scenario: Scenario,
    settings: SessionSettings | None = None,
    voice: str = "auto",
    speed: float = 4.0,
    tail_s: float = 120.0,
    on_wire: WireObserver | None = None,
    clock: VirtualClock | None = None,
    device_latency_s: float = 0.0,
    **options: Any,
) -> ReplayResult:
    """:func:`run_replay` against the local server's engine, in lockstep on a virtual clock.

    Synchronous: it runs its own event loop. ``clock`` (starting at 0 by default) lets an
    event log stamp frames with virtual time; ``device_latency_s`` models an output that
    buffers ahead (see :class:`ClockedOutput`). ``options`` go to :func:`run_replay`.
    """
    if not isinstance(scenario, Scenario):
        raise TypeError(f"scenario takes a Scenario (load_scenario(name); replay_in_lockstep takes names), "
                        f"not {type(scenario).__name__}")
    text(voice, "voice")
    real(speed, "speed", low=0, above=True, finite=False)
    real(tail_s, "tail_s", low=0)
    real(device_latency_s, "device_latency_s", low=0)
    clock = clock or VirtualClock()
    connector = engine_connector(scenario, clock, voice=voice, speed=speed, on_wire=on_wire,
                                 api=settings.api if settings is not None else "realtime")
    return run_lockstep(run_replay(samples, connector=connector, clock=clock, settings=settings, tail_s=tail_s,
                                   latency_s=device_latency_s, **options), clock)
