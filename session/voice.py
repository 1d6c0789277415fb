"""``VoiceSession``: a Realtime voice session for applications.

::

    async with VoiceSession(settings, output=ClockedOutput(RealClock()), tools=registry) as session:
        await session.send_text("What's the weather in Paris?")
        async for event in session:
            ...

It is the one driver of a :class:`~voxline.session.machine.SessionMachine`, which decides
everything (playout and barge-in, the mirror, the journal, tool calls, metrics); the
driver keeps only I/O: its loops in one ``asyncio.TaskGroup`` (receive, tick, flush, capture,
and the output's own loop when it has one), the loop's share for bulk work, the connection
(:class:`~.link.Link`: drops, liveness, hand-overs), and the async tool runner.

A kiosk can hold a WebRTC call's media with an ephemeral key while a trusted backend runs its
tools: the backend's session sets ``call_id`` (the kiosk's :attr:`VoiceSession.call_id`) and
attaches to the call's sideband with the API key, with no media of its own; the kiosk's
session passes ``run_tools=False`` so it leaves the calls to the backend.

Sound devices: :meth:`VoiceSession.on_devices` opens, wires and closes a microphone and a
speaker with the session. A device chosen on the sound server (PulseAudio, PipeWire) is
watched (``watch_devices``): unplugged, it gives a ``DeviceLost`` event and the session goes
on with the server's fallback; plugged in again, ``DeviceReturned`` and the stream is back on it.
A watched stream that ends on its own (killed by the sound server, a failing device) gives
``DeviceLost(ended=True)`` and is opened again on its device, then ``DeviceReturned``.

``voxline talk`` runs it on sound devices, ``voxline replay`` on a recording and a WAV output,
and ``replay --fast`` the same with a :class:`~voxline.base.clock.VirtualClock` and the local
server's engine in process (:mod:`voxline.session.lockstep`). Time comes from ``clock`` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Self, TypedDict, Unpack

from voxline.audio.aec import EchoCanceller
from voxline.audio.device_watch import Watched
from voxline.audio.local_vad import LocalVad
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.recording import Recording
from voxline.base import collector
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import Clock, RealClock
from voxline.base.contain import Raised, being_cancelled, contain, outcome, run_apart
from voxline.base.errors import AudioError, message_of
from voxline.base.daemon_calls import CallStuck, off_loop
from voxline.base.loop_runner import hold
from voxline.base.loop_share import SHORT_OF_AUDIO_S, SHORT_RUN, Slices, loop_share
from voxline.realtime import events as ev
from voxline.realtime.connection import RealtimeConnection, WireObserver
from voxline.realtime.errors import ConfigurationError, ConnectionClosed, ConnectionFailed

from .bargein import Trigger
from .capture import CapturePath, default_capture
from .core import SessionCore
from .device_loop import device_watch_loop
from .dial import dial
from .event_queue import EventQueue
from .app_events import AppEvent
from .events import BargeIn, SessionError, SessionEvent
from .input_journal import InputJournal
from .input_feed import InputFeed
from .loop_guard import guarded, let_go_if_stuck
from .link import Link
from .local_barge import BargePolicy
from .live.controls import LiveControls
from .machine import NO_EFFECTS, Captured, Effects, SessionMachine
from .machines import Machine, driven_settings, make_machine
from voxline.audio.clocked_output import ClockedOutput, Output
from .metrics import MetricsReport
from .mirror import ConversationMirror
from .reconnect import Backoff, ReconnectBudget, exponential_backoff
from .session_args import check_session_arguments
from .settings import SessionSettings
from .tools import Approver, ToolEvent, ToolRegistry, ToolRunner
from .track_audio import TrackTagger

if TYPE_CHECKING:  # PortAudio is loaded only for devices
    from voxline.audio.devices import MicSource, SpeakerSink

__all__ = ["Backoff", "Connector", "DeviceSessionOptions", "VoiceSession", "exponential_backoff"]

Connector = Callable[[], Awaitable[RealtimeConnection]]


class DeviceSessionOptions(TypedDict, total=False):
    """The constructor's keywords :meth:`VoiceSession.on_devices` passes on (it wires input, output and the watch)."""

    tools: ToolRegistry | None
    approve: Approver | None
    clock: Clock | None
    raw_events: bool
    connector: Connector | None
    mirror: ConversationMirror | None
    backoff: Backoff | None
    on_wire: WireObserver | None
    aec: EchoCanceller | str | None
    local_vad: LocalVad | str | None
    barge_policy: BargePolicy | None
    run_tools: bool


TICK_S = 0.02
WATCH_S = 0.2  # liveness and hand-over are checked this often (their limits are seconds)
DISCARD_TIMEOUT_S = 3.0  # a device's restart after a barge-in takes milliseconds; past this its driver is stuck
# (longer than a stream's own wait for its lock, LOCK_WAIT_S: a restart that finds the stream held says so first)
DEVICE_CLOSE_S = 10.0  # each device's close waits at most 2 s for its driver (stream, and one a reopen replaced)
_log = logging.getLogger("voxline.session")

_SPEECH_STARTED = ev.InputAudioBufferSpeechStarted.model_fields["type"].default
_STREAMED = (ev.ResponseOutputAudioDelta, ev.ResponseOutputAudioTranscriptDelta)  # a reply's stream, interleaved


class VoiceSession:
    """See the module docstring. All methods must be called from the session's event loop.

    The app's commands (:meth:`send_text`, :meth:`interrupt`, :meth:`start_talking`,
    :meth:`stop_talking`, :meth:`update`) need an open session: before ``async with`` and after
    :meth:`aclose` each raises one :class:`~voxline.realtime.errors.ConfigurationError` and
    changes nothing. While a dropped connection is being replaced the session is still open:
    commands are kept and reach the next connection.
    """

    def __init__(
        self,
        settings: SessionSettings | None = None,
        *,
        output: Output | None = None,
        input: AsyncIterable[Captured] | None = None,
        tools: ToolRegistry | None = None,
        approve: Approver | None = None,
        clock: Clock | None = None,
        raw_events: bool = False,
        connector: Connector | None = None,
        mirror: ConversationMirror | None = None,
        backoff: Backoff | None = None,
        on_wire: WireObserver | None = None,
        aec: EchoCanceller | str | None = None,
        local_vad: LocalVad | str | None = None,
        barge_policy: BargePolicy | None = None,
        run_tools: bool = True,
        watch_devices: Iterable[Watched] = (),
    ) -> None:
        check_session_arguments(settings=settings, output=output, tools=tools, clock=clock, mirror=mirror,
                                barge_policy=barge_policy, approve=approve, connector=connector, backoff=backoff,
                                on_wire=on_wire, raw_events=raw_events, run_tools=run_tools, aec=aec,
                                local_vad=local_vad, watch_devices=watch_devices or None)
        s = driven_settings(settings or SessionSettings())
        if input is not None and not hasattr(input, "__aiter__"):
            raise TypeError(f"input takes an async iterable of int16 blocks or (adc_time, block) pairs (such as "
                            f"MicSource().blocks() or a Recording), not {type(input).__name__}")
        rate = getattr(input, "capture_rate", SAMPLE_RATE)  # a microphone's blocks, watched or not
        if isinstance(rate, int) and rate != SAMPLE_RATE:
            raise ConfigurationError(f"the input captures at {rate} Hz; a session takes {SAMPLE_RATE} Hz blocks: "
                                     f"open the microphone with MicSource(rate={SAMPLE_RATE}) (the default)")
        if s.call_id is not None and input is not None:
            raise ConfigurationError("a session attached to a call (call_id) has no media of its own: drop input")
        if isinstance(input, Recording) and input.claimed:  # a second session read nothing, and said nothing
            raise ConfigurationError("this Recording is already another session's input (a recording is read once): "
                                     "give each session a Recording of its own")
        self.clock = clock or RealClock()
        self.output: Output = output or ClockedOutput(self.clock)
        capture = CapturePath(self.output.playout, aec=aec, vad=local_vad) if aec or local_vad else None
        registry = tools or ToolRegistry()
        self.machine: Machine = make_machine(s, self.output.playout, registry=registry, mirror=mirror, capture=capture,
                                             barge_policy=barge_policy, raw_events=raw_events, run_tools=run_tools)
        self._input = input
        self._on_wire = on_wire
        # what keeps one listener's or one conversation's state: one open session at a time each
        self._claimed = False  # this session holds the claim on its parts (it opened, and has not closed)
        self._owned = {"output": self.output, "mirror": mirror,
                       "echo canceller (aec)": None if isinstance(aec, str) else aec,
                       "voice detector (local_vad)": None if isinstance(local_vad, str) else local_vad}
        self._runner = ToolRunner(registry, self.machine.calls, approve, on_event=self._on_tool_event,
                                  clock=self.clock, offered=lambda: self.machine.offered_tools)
        budget = ReconnectBudget(s.reconnect_attempts, s.reconnect_window_s, stable_s=s.reconnect_stable_s,
                                 backoff=backoff or exponential_backoff())
        self._link = Link(self.machine, s, self.clock, connector or self._connect, budget=budget,
                          now=self.output.now, apply=self._apply, publish=self._publish_one, idle=lambda: self.idle,
                          observer=on_wire if connector is not None else None)  # the own dial gives it on_wire
        self._queue: EventQueue[AppEvent] = EventQueue()
        self._stack = contextlib.AsyncExitStack()
        self._flush_needed = asyncio.Event()
        self._committing: asyncio.Future[None] | None = None  # a released push-to-talk turn waiting for its commit
        self._feed = InputFeed(self.machine, self._link, now=self.output.now, apply=self._apply,
                               wake_flush=self._flush_needed.set)
        self._feed.finished = input is None
        self._tasks: list[asyncio.Task[None]] = []
        self._opening: asyncio.Task[Any] | None = None  # the first connection being made (aclose cancels it)
        self._failed: SessionError | None = None  # the first fatal error: the session can do no more
        self._speaker_stuck = False  # its restart after a barge-in never returned: later cuts restart nothing
        self._closed_at: float | None = None  # the listener time at the close: the figures stop there
        self._teardown: asyncio.Task[None] | None = None  # the close's own task, once begun
        self._observer_reported: RealtimeConnection | None = None  # on_wire failed on it, and the app was told
        self._event_failure_logged: RealtimeConnection | None = None  # handling an event on it failed, logged
        self._devices: tuple[SpeakerSink, MicSource] | tuple[()] = ()  # opened and closed with it (on_devices)
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop it was opened on: commands come from there
        self._watched: tuple[Watched, ...] = tuple(watch_devices)  # reported when unplugged and back
        if isinstance(input, Recording):
            input.claim()  # last: a constructor that failed took nothing

    @classmethod
    def on_devices(cls, settings: SessionSettings | None = None, *, input_device: int | str | None = None,
                   output_device: int | str | None = None, **options: Unpack[DeviceSessionOptions]) -> Self:
        """A session on a microphone and a speaker, opened, wired and closed with it::

            async with VoiceSession.on_devices(settings, tools=registry) as session:
                async for event in session: ...

        Devices are chosen by index or name as ``voxline devices`` lists them (the sound
        server's sinks and sources included; when not given, the settings' ``input_device`` and
        ``output_device``, which ``VOXLINE_INPUT_DEVICE`` and ``VOXLINE_OUTPUT_DEVICE`` set, else
        the default ones), and watched
        while the session runs; ``options`` are the constructor's other keywords. Echo
        cancellation and the local VAD are on by default when ``voxline[aec]`` is installed
        (:func:`~voxline.session.capture.default_capture`: the canceller stands aside while the
        microphone does not hear the speaker); ``aec=None, local_vad=None`` turns them off.
        """
        from voxline.audio.devices import MicSource, SpeakerSink  # PortAudio is loaded only for devices

        if "aec" not in options and "local_vad" not in options:
            chosen = default_capture()
            if isinstance(chosen, str):
                _log.info("on_devices: no echo cancellation: %s", chosen)
            else:
                options["aec"], options["local_vad"] = chosen

        # before a device is looked up: a keyword the constructor does not take, or one this wires itself
        unknown = sorted(set(options) - set(DeviceSessionOptions.__annotations__))
        if unknown:
            raise TypeError(f"VoiceSession.on_devices got {', '.join(map(repr, unknown))}: it takes the constructor's "
                            f"keywords but output, input and watch_devices, which it wires to the devices itself")
        check_session_arguments(settings=settings, **options)
        settings = settings or SessionSettings()
        if settings.call_id is not None:
            raise ConfigurationError("a session attached to a call (call_id) has no media of its own: on_devices "
                                     "opens a microphone and a speaker; use VoiceSession(settings) for a call")
        output_device = settings.output_device if output_device is None else output_device
        speaker = SpeakerSink(PlayoutBuffer(), device=output_device)
        mic: MicSource | None = None
        try:
            mic = MicSource(device=settings.input_device if input_device is None else input_device)
            session = cls(settings, output=speaker, input=mic.blocks(), watch_devices=(speaker, mic), **options)
        except BaseException:
            speaker.close()  # opened here, and nobody else will close them
            if mic is not None:
                mic.close()
            raise
        session._devices = (speaker, mic)
        return session

    @property
    def devices(self) -> tuple[SpeakerSink, MicSource] | tuple[()]:
        """The sound devices the session opened and closes with it: ``(speaker, microphone)`` from
        :meth:`on_devices`, else ``()``."""
        return self._devices

    def __repr__(self) -> str:
        carrying, link = self.machine.carrying, self._link
        state = "open" if carrying else ("reconnecting" if link.conn is not None and not link.closing else "closed")
        if self._failed is not None and not link.closing:
            state = "failed"
        if self.machine.ended:
            state = "ended"
        model = self.settings.asked_model
        return f"<VoiceSession {model} {state}>"

    # ------------------------------------------------------------------ what the machine holds
    @property
    def settings(self) -> SessionSettings:
        return self.machine.settings

    @property
    def core(self) -> SessionCore | None:
        return self.machine.core

    @property
    def mirror(self) -> ConversationMirror:
        return self.machine.mirror

    @property
    def journal(self) -> InputJournal:
        return self.machine.mic.journal

    @property
    def track(self) -> TrackTagger | None:
        return self.machine.track

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> Self:
        if self._loop is not None or self._link.closing:  # before anything connects: nothing to leak
            raise ConfigurationError("this session is already open" if not self._link.closing else
                                     "a closed session cannot be opened again: make a new VoiceSession")
        if self.output not in self._devices:  # an output of the app's must tell the time: once here, not per event
            try:
                self.output.now()
            except AudioError as exc:
                raise ConfigurationError(f"the session's output cannot tell the time ({exc}): start it before the "
                                         "session opens, or use VoiceSession.on_devices") from None
        _claim(self._owned)
        self._claimed = True
        self._loop = asyncio.get_running_loop()
        collector.settle()  # once per process: no collector pause walks what the process holds before its sessions
        # in a task aclose() can cancel (a cancel of this task reaches it too); what the connector raises, raised here
        opening = self._opening = run_apart(self._link.open())
        try:
            outcome(await opening)
        except BaseException as exc:
            caller_cancelled = isinstance(exc, asyncio.CancelledError) and being_cancelled()
            if self._link.closing and not caller_cancelled:  # aclose() stopped the open; its close has what it made
                raise _closed_while_opening() from None
            if opening.done() and not opening.cancelled() and not isinstance(opening.result(), Raised):
                # the caller was cancelled just as the connection was made: it is closed, and the session with it
                self._closed_at = 0.0
                await asyncio.shield(self._link.close())
                self._let_go()
                raise
            self._loop = None  # nothing opened: the session may be opened again
            self._let_go()
            if isinstance(exc, ConnectionClosed):
                raise ConnectionFailed(f"the server closed the connection while it was being set up "
                                       f"({exc.code} {exc.reason})".strip()) from None
            raise
        finally:
            self._opening = None
        if self._link.closing:  # aclose() came as the connection was made: its close has it
            raise _closed_while_opening()
        try:
            for device in self._devices:
                device.start()
        except BaseException:
            self._closed_at = 0.0  # a device that would not start: nothing was heard, and the session cannot go on
            try:
                await self._devices_closed()
            finally:  # a cancel in the devices' close (a stuck driver's 2 s) still closes the connection
                await asyncio.shield(self._link.close())
                self._let_go()
            raise
        group = await self._stack.enter_async_context(asyncio.TaskGroup())
        await self._stack.enter_async_context(self._runner)
        clocked = isinstance(self.output, ClockedOutput)
        report = self._publish_one
        # every loop guarded: one that raised would otherwise cancel the task that opened the session
        loops = [guarded(self._receive_loop, "receive loop", report),
                 guarded(lambda: self._tick_loop(clocked), "tick loop", report),
                 guarded(self._flush_loop, "flush loop", report)]
        if (blocks := self._input) is not None:  # a broken input ends the input, not the session
            async def feed(blocks: AsyncIterable[Captured] = blocks) -> None:
                await self._feed.run(blocks)

            loops.append(guarded(lambda: let_go_if_stuck(feed, "input", self.clock), "input", report, fatal=False))
        if self._watched:
            loops.append(guarded(lambda: device_watch_loop(self._watched, self.clock, self._queue.put, self.output.now),
                                 "device watch", report, fatal=False))
        if isinstance(self.output, ClockedOutput):
            self.output.after_read = self._tick  # the output's pass ticks the machine: one timer, not two
            if isinstance(self.machine, SessionMachine):  # and only once a tick could change something
                self.output.tick_gate = self.machine.tick_gate  # (a Live machine keeps no quiet horizon: every pass)
            loops.append(guarded(self.output.run, "output", report))
        self._tasks = [group.create_task(loop) for loop in loops]
        return self

    def _own_loop(self) -> None:
        """Refuse a command from another event loop than the one the session was opened on."""
        if self._loop is not None and asyncio.get_running_loop() is not self._loop:
            raise ConfigurationError("this session belongs to another event loop: use it where it was opened")

    def _usable(self) -> None:
        """Refuse a command from another event loop, or to a session that failed (a fatal error)."""
        self._own_loop()
        if self._failed is not None and not self._link.closing:
            raise ConfigurationError(f"the session failed ({self._failed.message}): close it and open a new one")

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection and stop every loop; safe to call twice, and from any task of the session.

        Returns within ``settings.close_timeout_s`` (plus the loops' own teardown) even when the
        server stops reading: the close handshake is abandoned after that. The teardown runs in a task
        of its own: a caller cancelled while it waits (a timeout around the close, or the input's own
        task, which the close cancels) leaves it running to its end, and a later call waits for it.
        """
        self._own_loop()
        if self._teardown is None:
            if isinstance(self._input, Recording):
                if self._tasks or self._input.captured:  # it was read (or its task was started): read once, let go of
                    self._input.close()
                else:  # never read (no open, or one that failed): the caller's again, for another session to take
                    self._input.release()
            if self._link.closing:  # an open that failed closed what it had opened
                return
            if self._opening is not None:  # still connecting: that stops, and __aenter__ says the session was closed
                self._opening.cancel()
            for task in self._tasks:
                task.cancel()
            self._closed_at = self._output_time()
            self._queue.put_all(self.machine.close(self._closed_at))
            self._link.begin_close()  # from now on the session takes no command
            self._teardown = asyncio.get_running_loop().create_task(self._tear_down())  # in a copy of this context
            self._teardown.add_done_callback(_log_failed_close)
            hold(self._teardown)
        elif self._teardown.done():  # closed; a failure was raised to the first caller still waiting, and logged
            return
        await asyncio.shield(self._teardown)

    def _output_time(self) -> float:
        """The output's clock at the close. One that cannot tell it (devices that never started, an app's output whose
        device went) gives where its audio stopped, else 0.0 (nothing was heard): the close goes on all the same."""
        try:
            return self.output.now()
        except Exception as failure:  # an app's output is the app's code: it must not keep the connection open
            if self.output not in self._devices:
                _log.warning("the output's clock failed at the close (%s: %s); the figures stop where its audio did",
                             type(failure).__name__, message_of(failure))
            stopped = self.output.playout.next_time
            return 0.0 if stopped is None else stopped

    async def _tear_down(self) -> None:
        try:
            await self._link.close()
            self._queue.end()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stack.aclose()
            await self._devices_closed()
        finally:
            self._let_go()

    def _let_go(self) -> None:
        """The parts this session claimed are free for the next (a session refused them, or never opened, has
        none to let go: another open session's stay its own); a reply cut short is not the next session's to play."""
        if self._claimed:
            self._claimed = False
            self.output.playout.clear()
            _release(self._owned)

    async def _devices_closed(self) -> None:
        """Close the session's devices off the loop, on a daemon thread: a close waits for a stuck driver, the loop
        does not."""
        if not self._devices:
            return
        try:
            await off_loop(self._close_devices, timeout_s=DEVICE_CLOSE_S, name="voxline-device-close")
        except CallStuck:
            _log.warning("the sound devices did not close within %g s: left to their drivers", DEVICE_CLOSE_S)

    def _close_devices(self) -> None:
        for device in self._devices:
            device.close()

    async def _connect(self) -> RealtimeConnection:
        return await dial(self.settings, self.machine, self._on_wire)

    @property
    def live(self) -> LiveControls:
        """GPT-Live's own commands (mute, context appends, fixtures, delegation answers); an error on Realtime,
        and once the session failed."""
        self._usable()
        return LiveControls(self.machine, self._link)

    @property
    def call_id(self) -> str | None:
        """The id of the WebRTC call this session holds (a new one after a reconnect), or the call it attached to."""
        if self.settings.call_id is not None:
            return self.settings.call_id
        conn = self._link.conn
        return getattr(conn.transport, "call_id", None) if conn is not None else None

    # ------------------------------------------------------------------ events
    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> AppEvent:
        """The next event; cancelling a wait loses nothing (events stay queued).

        Before the session is opened there is nothing to wait for: one ConfigurationError, not a wait
        that never ends. After it closed, the events still queued, then the end."""
        self._own_loop()
        if self._loop is None and not self._link.closing:
            raise ConfigurationError("the session is not open yet: use 'async with VoiceSession(...)' first")
        return await self._queue.get()

    def pending_events(self) -> list[AppEvent]:
        """The events queued so far, without waiting (the iterator then starts after them). While the session's
        event loop runs, only on that loop: the queue is the loop's, and another thread's drain would race it."""
        loop = self._loop
        if loop is not None and loop.is_running():
            try:
                running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:  # a plain thread: the app's UI, say
                running = None
            if running is not loop:
                raise ConfigurationError("pending_events() runs on the session's event loop, which is running in "
                                         "another thread: call it there (loop.call_soon_threadsafe)")
        return self._queue.drain()

    @property
    def input_finished(self) -> bool:
        """True once the input (if any) has ended."""
        return self._feed.finished

    @property
    def began(self) -> bool:
        """True once a connection of the session opened its session on the server (``session.created``, or
        GPT-Live's ``session.started``), and from then on: False for a server that refused every connect."""
        return self._link.began

    @property
    def connected(self) -> bool:
        """True while a connection carries the conversation (False while reconnecting, and once the session failed)."""
        return self.machine.carrying and self._failed is None and not self.machine.ended

    @property
    def idle(self) -> bool:
        """Nothing is playing, queued, being produced or owed: no response, no tool, no queued create.

        Never idle while reconnecting: the new connection may still owe a response.
        """
        if self._link.conn is None:
            return True
        return self.machine.idle(self.output.now(), tools_busy=self._runner.busy)

    @property
    def turn_open(self) -> bool:
        """The server's turn detection began a turn of the user's (``speech_started``) and has not ended it
        (``speech_stopped``) on the connection that carries the session; False on GPT-Live, which has no turn events."""
        return self.machine.turn_open

    def metrics(self) -> MetricsReport:
        """The session's figures so far: per turn, per barge-in, per item, and their p50/p95; once closed, as they were
        at the close (its output, a device, may be closed too); before a device was ever opened, none, at time 0."""
        if self._closed_at is not None:
            return self.machine.report(self._closed_at)
        if self._loop is None:  # never opened, or an open that failed: its devices have no clock to ask
            return self.machine.report(0.0)
        return self.machine.report(self.output.now())

    def _publish_one(self, event: SessionEvent) -> None:
        if isinstance(event, SessionError) and event.fatal and self._failed is None:
            self._failed = event  # the session can do no more: its commands say so from now on
        self._queue.put(event)

    def _on_tool_event(self, event: ToolEvent) -> None:
        self._queue.put_all(self.machine.tool_event(event, self.output.now()).events)
        self._flush_needed.set()

    # ------------------------------------------------------------------ commands
    async def send_text(self, text: str) -> None:
        """A user text message, then a response.

        While the session reconnects the message is kept: the new connection gets it with the
        rebuilt conversation, and its response is asked for then.
        """
        self._usable()
        if self.machine.send_text(text):
            await self._link.flush()

    async def interrupt(self) -> BargeIn | None:
        """Stop the assistant now and cut the conversation where the listener is.

        Returns the barge-in (also delivered as an event), or None when no assistant audio
        was playing, queued or being produced, and no response was asked for (a question just
        sent is stopped too: its answer is cancelled as the server creates it). GPT-Live has no
        cancel: there a reply whose audio has not begun is not stopped.
        """
        self._usable()
        effects = self.machine.interrupt(self.output.now(), Trigger.INTERRUPT)
        await self._apply(effects)
        return effects.barge_in

    async def start_talking(self) -> None:
        """Push-to-talk: start sending the microphone (clears what the server buffered)."""
        self._usable()
        await self._apply(self.machine.start_talking(self.output.now()))

    async def stop_talking(self) -> None:
        """Push-to-talk: stop sending, commit what was said, and ask for a response.

        Over WebRTC the microphone's track still holds the turn's last frames when the key is
        let go; the commit waits until the track has sent them (tens of milliseconds), so the
        server does not commit the turn without its end. Let go again meanwhile (a second call),
        it returns once that turn is committed too."""
        self._usable()
        turn = self.machine.release_talking(self.output.now())
        if not turn:
            if self._committing is not None:  # let go twice: return when the turn let go first is committed
                await asyncio.shield(self._committing)
            return
        committed = self._committing = asyncio.get_running_loop().create_future()
        try:
            try:
                await self._feed.track_sent(self.clock)
            finally:  # cancelled while waiting, the turn is committed all the same; the flush task writes it
                said, waiting = self.machine.commit_talking(self.output.now(), turn)
                if waiting:
                    self._flush_needed.set()
                self._queue.put_all(said.events)  # why there was no commit, if there was none: said all the same
            if waiting:
                await self._link.flush()
        finally:
            committed.set_result(None)
            if self._committing is committed:
                self._committing = None

    async def update(self, *, instructions: str | None = None, tools: list[str] | None = None,
                     voice: str | None = None) -> None:
        """``session.update`` with new instructions, voice, or the names of the registry's tools to offer.

        Changes are kept for reconnects. The voice is fixed by the service after the first audio:
        an update the server refuses is a :class:`SessionError` and is undone whole, so later
        updates and reconnects do not send it again.
        """
        self._usable()
        if self.machine.update(instructions=instructions, tools=tools, voice=voice):
            await self._link.flush()

    async def _apply(self, effects: Effects, share: Slices | None = None) -> None:
        """Do what the machine left to I/O: run calls, drop revoked audio, publish, send.

        With ``share``, what follows a barge-in once the output has it (the app's events and
        the frames on the wire) waits its turn: when many sessions' users speak at once,
        every waiting session's cut is made before the rest of any one of them.
        """
        said = self._link.conn  # the connection these effects came from: what follows may wait, and it be replaced
        if effects.calls:
            self._runner.submit(effects.calls)
        cut = effects.discard
        if cut is not None and not self._speaker_stuck:
            try:
                if getattr(self.output, "discard_blocks", True):  # a device abort: keep it off the event loop
                    await off_loop(self.output.discard_pending, cut, timeout_s=DISCARD_TIMEOUT_S,
                                   name="voxline-speaker-restart")
                else:
                    self.output.discard_pending(cut)
            except CallStuck:  # its driver never returned: the rest of the session goes on without it
                self._speaker_stuck = True  # it plays nothing, and holds what a later cut would restart
                self._publish_one(SessionError(
                    f"the speaker did not start again within {DISCARD_TIMEOUT_S:g} s of a barge-in (its driver "
                    "is stuck): nothing plays until it does", "speaker_stuck"))
            except BaseException as failure:  # an app's output: the cut stands, and the session goes on
                contain(failure)
                self._publish_one(SessionError(
                    f"the output could not drop the audio a barge-in revoked: {type(failure).__name__}: "
                    f"{message_of(failure)}", "discard_failed"))
        if share is not None and effects.barge_in is not None:
            await share.wait()
        self._queue.put_all(effects.events)
        await self._link.flush()
        if effects.hang_up and said is not None:  # the receive loop takes the close as a drop
            await self._link.close_quietly(said, 1000, "session closed")

    # ------------------------------------------------------------------ loops
    async def _receive_loop(self) -> None:
        # on a real clock each server event but a barge-in's waits its turn (:mod:`voxline.base.loop_share`):
        # replies streamed ahead of real time for many sessions do not hold up the outputs and
        # microphones of the loop, nor another session's barge-in
        share = Slices(loop_share()) if isinstance(self.clock, RealClock) else None
        playout = self.output.playout
        short = SHORT_OF_AUDIO_S * playout.rate  # a listener with less left to play than this is waited for
        urgent = SHORT_RUN  # deltas that may still go without a turn this turn, for a listener short of audio
        link = self._link
        watched: RealtimeConnection | None = None
        ahead = 0  # events that go without a turn: those read ahead of a speech_started
        turned = True  # a turn was taken since the last run of events without one
        while not link.closing:
            conn = link.conn
            assert conn is not None
            if share is not None and conn is not watched:  # a barge-in read while this waits for a turn ends the wait
                conn.watch_for(_SPEECH_STARTED, share.go_now)
                watched = conn
            try:
                out = await conn.recv()
            except ConnectionClosed as exc:
                if conn is not link.conn:
                    continue  # a connection handed over: its successor carries on
                if link.handing_over:  # the successor closed while being switched to: a drop, once it is
                    await link.hand_over_finished()
                    continue
                if link.closing or not await link.reconnect(exc):
                    self._queue.end()
                    return
                continue
            # a barge-in never waits for its cut: it is made where the listener is now; nor do the events
            # read ahead of it (the reply it cuts), which would hold it up by as many turns. One such run
            # per turn, of a few dozen events at most: a server sending nothing but barge-ins still
            # shares the loop
            if share is not None and not isinstance(out, ev.InputAudioBufferSpeechStarted):
                if ahead > 0:
                    ahead -= 1
                elif share.over:
                    if urgent > 0 and isinstance(out, _STREAMED) and playout.queued_samples < short:
                        urgent -= 1  # its listener would run out of audio while this waited: a reply begun
                    elif (found := conn.queued(_SPEECH_STARTED) if turned else None) is None:
                        await share.wait()
                        turned, urgent = True, SHORT_RUN
                    else:
                        ahead, turned = found, False
            if conn is not link.conn:
                continue  # the last words of a connection handed over (perhaps while this one waited)
            link.last_rx = self.clock.now()
            if conn.observer_failures and self._observer_reported is not conn:
                self._observer_reported = conn
                self._queue.put(SessionError("the wire observer (on_wire) failed; every frame is still sent "
                                                    "and read (the first failure is logged)", "observer_failed"))
            try:
                effects = self.machine.receive(out, self.output.now())
                if effects is NO_EFFECTS and not conn.has_data_to_send:
                    continue  # the bulk of a reply: nothing to publish or send
                await self._apply(effects, share)
            except Exception as exc:  # containment: no server event may end the session
                kind = getattr(out, "type", type(out).__name__)
                if self._event_failure_logged is not conn:  # one traceback a connection: a cause that stays
                    self._event_failure_logged = conn  # (an app output's clock) fails every event after it too
                    _log.exception("failed to handle %s (the next failures on this connection are said as "
                                   "events only)", kind)
                self._queue.put(SessionError(f"could not handle {kind}: {type(exc).__name__}: {message_of(exc)}",
                                             "event_failed"))

    def _tick(self) -> None:
        self._queue.put_all(self.machine.tick(self.output.now()).events)

    async def _tick_loop(self, clocked: bool) -> None:
        """The machine's tick every block (unless the output's own pass does it), liveness every WATCH_S."""
        watch_at = self.clock.now()
        while True:
            await self.clock.sleep(WATCH_S if clocked else TICK_S)
            if not clocked:
                self._tick()
            if self.machine.carrying and not self._link.closing and self.clock.now() >= watch_at:
                watch_at = self.clock.now() + WATCH_S
                await self._link.watch()

    async def _flush_loop(self) -> None:
        while True:
            await self._flush_needed.wait()
            self._flush_needed.clear()
            await self._link.flush()


_in_use: weakref.WeakSet[Any] = weakref.WeakSet()
"""The parts the open sessions own (:func:`_claim`): an output, a mirror, an echo canceller, a voice detector, each
one listener's or one conversation's state, one session at a time."""


def _closed_while_opening() -> ConfigurationError:
    return ConfigurationError("the session was closed (aclose) while it was being opened")


_WHY_OWN = {
    "output": "one output is one listener's timeline",
    "mirror": "one mirror is one conversation: another session's turns would be sent into this one's",
    "echo canceller (aec)": "it holds one listener's echo path",
    "voice detector (local_vad)": "it holds one microphone's state",
}


def _claim(owned: dict[str, Any]) -> None:
    """Each of ``owned`` (by what it is) for one open session; :class:`ConfigurationError` naming the first that
    another open session has, with nothing claimed."""
    for what, part in owned.items():
        try:
            if part is not None and part in _in_use:
                raise ConfigurationError(f"this {what} belongs to a session that is open: give each session its own "
                                         f"({_WHY_OWN[what]})")
        except TypeError:  # one that cannot be weakly referenced goes unchecked
            pass
    for part in owned.values():
        if part is not None:
            with contextlib.suppress(TypeError):
                _in_use.add(part)


def _log_failed_close(teardown: asyncio.Task[None]) -> None:
    """A close that failed is logged, whether or not a caller was still waiting for it."""
    if not teardown.cancelled() and (failure := teardown.exception()) is not None:
        _log.error("closing the session failed: %s: %s", type(failure).__name__, failure, exc_info=failure)


def _release(owned: dict[str, Any]) -> None:
    for part in owned.values():
        if part is not None:
            with contextlib.suppress(TypeError):
                _in_use.discard(part)
