"""``VoiceSession``: a Realtime voice session for applications.

::

    async with VoiceSession(settings, output=ClockedOutput(RealClock()), tools=registry) as session:
        await session.send_text("What's the weather in Paris?")
        async for event in session:
            ...

It is the one driver of a :class:`~voxline.session.machine.SessionMachine`, which decides
everything (playout and barge-in, the mirror, the journal, tool calls, metrics); the
driver keeps only I/O, composed of parts that each do one thing: its open and close
(:class:`~.open_close.OpenClose`, with the parts it owns while open, :class:`~.claims.Claims`),
its loops in one ``asyncio.TaskGroup`` (:class:`~.session_loops.SessionLoops`: receive, tick,
flush, capture, and the output's own loop when it has one, with the loop's share for bulk work),
the connection (:class:`~.link.Link`: drops, liveness, hand-overs), the input
(:class:`~.input_feed.InputFeed`; push-to-talk's let-go, :class:`~.talk_release.TalkRelease`), a
barge-in's cut on the output (:class:`~.output_cut.OutputCut`), the app's events
(:class:`~.event_outlet.EventOutlet`), its sound devices (:mod:`~.session_devices`), and the async
tool runner. It applies what the machine returns (:meth:`VoiceSession._apply`) and takes the app's
commands.

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
from collections.abc import AsyncIterable, Iterable
from typing import TYPE_CHECKING, Self, Unpack

from voxline.audio.aec import EchoCanceller
from voxline.audio.device_watch import Watched
from voxline.audio.local_vad import LocalVad
from voxline.audio.recording import Recording
from voxline.base.clock import Clock, RealClock
from voxline.base.loop_share import Slices
from voxline.realtime.connection import RealtimeConnection, WireObserver
from voxline.realtime.errors import ConfigurationError

from .bargein import Trigger
from .capture import CapturePath
from .claims import Claims
from .core import SessionCore
from .dial import dial
from .event_outlet import EventOutlet
from .app_events import AppEvent
from .events import BargeIn
from .input_journal import InputJournal
from .input_feed import InputFeed
from .link import Connector, Link
from .local_barge import BargePolicy
from .live.controls import LiveControls
from .machine import Captured, Effects
from .machines import Machine, driven_settings, make_machine
from voxline.audio.clocked_output import ClockedOutput, Output
from .metrics import MetricsReport
from .mirror import ConversationMirror
from .open_close import OpenClose
from .output_cut import OutputCut
from .reconnect import Backoff, ReconnectBudget, exponential_backoff
from .session_args import check_input, check_session_arguments
from .session_devices import DeviceSessionOptions, open_on_devices
from .session_loops import SessionLoops
from .settings import SessionSettings
from .talk_release import TalkRelease
from .tools import Approver, ToolRegistry, ToolRunner
from .track_audio import TrackTagger

if TYPE_CHECKING:  # PortAudio is loaded only for devices
    from voxline.audio.devices import MicSource, SpeakerSink

__all__ = ["Backoff", "Connector", "DeviceSessionOptions", "VoiceSession", "exponential_backoff"]


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
        check_input(input, s.call_id)
        self.clock = clock or RealClock()
        self.output: Output = output or ClockedOutput(self.clock)
        capture = CapturePath(self.output.playout, aec=aec, vad=local_vad) if aec or local_vad else None
        registry = tools or ToolRegistry()
        self.machine: Machine = make_machine(s, self.output.playout, registry=registry, mirror=mirror, capture=capture,
                                             barge_policy=barge_policy, raw_events=raw_events, run_tools=run_tools)
        self._on_wire = on_wire
        self._events = EventOutlet()
        budget = ReconnectBudget(s.reconnect_attempts, s.reconnect_window_s, stable_s=s.reconnect_stable_s,
                                 backoff=backoff or exponential_backoff())
        self._link = Link(self.machine, s, self.clock, connector or self._connect, budget=budget,
                          now=self.output.now, apply=self._apply, publish=self._events.put, idle=lambda: self.idle,
                          observer=on_wire if connector is not None else None)  # the own dial gives it on_wire
        self._loops = SessionLoops(self.machine, self._link, self.output, self.clock, self._events, apply=self._apply)
        self._runner = ToolRunner(registry, self.machine.calls, approve, on_event=self._loops.tool_event,
                                  clock=self.clock, offered=lambda: self.machine.offered_tools)
        self._cut = OutputCut(self.output, self._events.put)
        wake_flush = self._loops.flush_needed.set
        self._feed = InputFeed(self.machine, self._link, now=self.output.now, apply=self._apply, wake_flush=wake_flush)
        self._feed.finished = input is None
        self._talk = TalkRelease(self.machine, self._feed, self._link, self.clock, self._events, now=self.output.now,
                                 wake_flush=wake_flush)
        self._devices: tuple[SpeakerSink, MicSource] | tuple[()] = ()  # opened and closed with it (on_devices)
        watched = tuple(watch_devices)  # reported when unplugged and back
        # what keeps one listener's or one conversation's state: one open session at a time each
        claims = Claims({"output": self.output, "mirror": mirror,
                         "echo canceller (aec)": None if isinstance(aec, str) else aec,
                         "voice detector (local_vad)": None if isinstance(local_vad, str) else local_vad})
        self._open_close = OpenClose(self.machine, self._link, self.output, self._events, claims, self._runner, input,
                                     lambda group: self._loops.start(group, self._feed, input, watched))
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
        return open_on_devices(cls._wired, settings, input_device, output_device, options)

    @classmethod
    def _wired(cls, settings: SessionSettings, speaker: SpeakerSink, mic: MicSource,
               options: DeviceSessionOptions) -> Self:
        session = cls(settings, output=speaker, input=mic.blocks(), watch_devices=(speaker, mic), **options)
        session._devices = (speaker, mic)  # opened for it: it closes them
        return session

    @property
    def devices(self) -> tuple[SpeakerSink, MicSource] | tuple[()]:
        """The sound devices the session opened and closes with it: ``(speaker, microphone)`` from
        :meth:`on_devices`, else ``()``."""
        return self._devices

    def __repr__(self) -> str:
        carrying, link = self.machine.carrying, self._link
        state = "open" if carrying else ("reconnecting" if link.conn is not None and not link.closing else "closed")
        if self._events.failed is not None and not link.closing:
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
        await self._open_close.open(self._devices)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection and stop every loop; safe to call twice, and from any task of the session.

        Returns within ``settings.close_timeout_s`` (plus the loops' own teardown) even when the
        server stops reading: the close handshake is abandoned after that. The teardown runs in a task
        of its own: a caller cancelled while it waits (a timeout around the close, or the input's own
        task, which the close cancels) leaves it running to its end, and a later call waits for it.
        """
        await self._open_close.close(self._devices)

    @property
    def _tasks(self) -> list[asyncio.Task[None]]:
        """The session's loops, once opened."""
        return self._open_close.tasks

    def _own_loop(self) -> None:
        """Refuse a command from another event loop than the one the session was opened on."""
        self._open_close.own_loop()

    def _usable(self) -> None:
        """Refuse a command from another event loop, or to a session that failed (a fatal error)."""
        self._own_loop()
        if self._events.failed is not None and not self._link.closing:
            raise ConfigurationError(f"the session failed ({self._events.failed.message}): close it and open a new one")

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
        if self._open_close.loop is None and not self._link.closing:
            raise ConfigurationError("the session is not open yet: use 'async with VoiceSession(...)' first")
        return await self._events.next()

    def pending_events(self) -> list[AppEvent]:
        """The events queued so far, without waiting (the iterator then starts after them). While the session's
        event loop runs, only on that loop: the queue is the loop's, and another thread's drain would race it."""
        return self._events.pending(self._open_close.loop)

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
        return self.machine.carrying and self._events.failed is None and not self.machine.ended

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
        if (closed_at := self._open_close.closed_at) is not None:
            return self.machine.report(closed_at)
        if self._open_close.loop is None:  # never opened, or an open that failed: its devices have no clock to ask
            return self.machine.report(0.0)
        return self.machine.report(self.output.now())

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
        await self._talk.release()

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
        if (cut := effects.discard) is not None:
            await self._cut.make(cut)
        if share is not None and effects.barge_in is not None:
            await share.wait()
        self._events.put_all(effects.events)
        await self._link.flush()
        if effects.hang_up and said is not None:  # the receive loop takes the close as a drop
            await self._link.close_quietly(said, 1000, "session closed")

