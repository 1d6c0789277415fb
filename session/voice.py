"""``VoiceSession``: a Realtime voice session for applications.

::

    async with VoiceSession(settings, output=ClockedOutput(RealClock()), tools=registry) as session:
        await session.send_text("What's the weather in Paris?")
        async for event in session:
            ...

It owns one connection at a time, the :class:`~voxline.session.core.SessionCore` (playout and
barge-in), a :class:`~voxline.session.tool_bridge.ToolBridge` and the conversation mirror,
and runs its loops in one ``asyncio.TaskGroup``: receive, capture, tick, and the output's
own loop when it has one. If the connection drops (or the 60-minute cap ends it), it
reconnects, sends the session configuration again and rebuilds the conversation from the
mirror; the tool tracker carries over, so no tool runs twice.

A kiosk can hold a WebRTC call's media with an ephemeral key while a trusted backend runs its
tools: the backend's session sets ``call_id`` (the kiosk's :attr:`VoiceSession.call_id`) and
attaches to the call's sideband with the API key, with no media of its own; the kiosk's
session passes ``run_tools=False`` so it leaves the calls to the backend. Over WebRTC the
server cuts its own output buffer on barge-in either way.

It is the only driver of the session core: ``voxline talk`` runs it on sound devices,
``voxline replay`` on a recording and a WAV output, and ``replay --fast`` the same with a
:class:`~voxline.base.clock.VirtualClock` and the local server's engine in process
(:mod:`voxline.session.lockstep`). Time comes from ``clock`` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

import numpy as np

from voxline.audio.aec import EchoCanceller
from voxline.audio.local_vad import LocalVad
from voxline.base.clock import Clock, RealClock
from voxline.base.loop_share import Slices, loop_share
from voxline.realtime import events as ev
from voxline.realtime.connection import RealtimeConnection, WireObserver, connect
from voxline.realtime.transports.webrtc import WebRTCTransport
from voxline.realtime.errors import ConfigurationError, ConnectionClosed, ConnectionFailed, RealtimeError

from .bargein import Trigger
from .capture import CapturePath
from .local_barge import BargePolicy, LocalBarge
from .core import Effects, SessionCore
from .events import BargeIn, SessionError, SessionEvent
from .input_chunks import InputChunker
from .input_journal import InputJournal
from .media import ClockedOutput, Output
from .metrics import MetricsReport, SessionMetrics
from .microphone import Microphone
from .mirror import ConversationMirror
from .continuity import Continuity
from .reconnect import Backoff, ReconnectBudget, exponential_backoff
from .settings import SessionSettings
from .tool_bridge import ToolBridge
from .track_audio import TrackTagger
from .tools import Approver, ToolEvent, ToolRegistry

__all__ = ["Backoff", "Connector", "VoiceSession", "exponential_backoff"]

Connector = Callable[[], Awaitable[RealtimeConnection]]
TICK_S = 0.02
WATCH_S = 0.2  # liveness and hand-over are checked this often (their limits are seconds)
_CLOSED = object()
_log = logging.getLogger("voxline.session")


class VoiceSession(Continuity, Microphone):
    """See the module docstring. All methods must be called from the session's event loop."""

    def __init__(
        self,
        settings: SessionSettings | None = None,
        *,
        output: Output | None = None,
        input: AsyncIterable[np.ndarray] | None = None,
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
    ) -> None:
        self.settings = settings or SessionSettings()
        if self.settings.call_id is not None and input is not None:
            raise ConfigurationError("a session attached to a call (call_id) has no media of its own: drop input")
        self.clock = clock or RealClock()
        self.output: Output = output or ClockedOutput(self.clock)
        self._input = input
        self._input_finished = input is None
        s = self.settings
        self._budget = ReconnectBudget(s.reconnect_attempts, s.reconnect_window_s, stable_s=s.reconnect_stable_s,
                                       backoff=backoff or exponential_backoff())
        self._tools = ToolBridge(tools or ToolRegistry(), approve=approve, on_event=self._on_tool_event,
                                 clock=self.clock)
        # WebRTC: assistant audio arrives on the media track, tagged into the output's playout
        webrtc = self.settings.transport == "webrtc" and self.settings.call_id is None
        self.track = TrackTagger(self.output.playout) if webrtc else None
        self._run_tools = run_tools  # False: another session on the same call (a sideband) answers the calls
        self._raw = raw_events
        self._connector = connector or self._connect
        self._on_wire = on_wire
        self.mirror = mirror if mirror is not None else ConversationMirror()
        self.journal = InputJournal(padding_ms=s.prefix_padding_ms)
        self._chunker = InputChunker(s.input_chunk_samples)
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._conn: RealtimeConnection | None = None
        self._live = False  # the current connection is open and carries the conversation
        self._connected_at: float | None = None
        self._last_rx = 0.0
        self._texts_while_away = 0  # send_text() calls made while reconnecting: each owes a create
        self._spare: asyncio.Task[RealtimeConnection] | None = None  # the next connection, warming up
        self._ping: asyncio.Future[None] | None = None
        self._handing_over = False
        self.core: SessionCore | None = None
        self._stack = contextlib.AsyncExitStack()
        self._talking = self.settings.turn_detection != "none"
        self._closing = False
        self._flush_needed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._offered: list[str] | None = None  # tool names offered to the model (None: all)
        self._item_prefix = "item_vx" + secrets.token_hex(4)
        self._item_count = 0
        # open speakers: echo cancellation and local VAD on the microphone (:mod:`.capture`)
        self._capture = CapturePath(self.output.playout, aec=aec, vad=local_vad) if aec or local_vad else None
        self._barge_policy = barge_policy if local_vad else None
        vad = self.settings.turn_detection == "server_vad"  # speech ends audio_end_ms − silence_ms before
        self._metrics = SessionMetrics(self.output.playout, self.mirror,
                                       silence_ms=self.settings.silence_ms if vad else 0,
                                       padding_ms=self.settings.prefix_padding_ms if vad else 0)

    def __repr__(self) -> str:
        state = "open" if self._live else ("reconnecting" if self._conn is not None and not self._closing else "closed")
        return f"<VoiceSession {self.settings.model} {state}>"

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> VoiceSession:
        try:
            self._conn = await self._open()
        except ConnectionClosed as exc:
            raise ConnectionFailed(f"the server closed the connection while it was being set up "
                                   f"({exc.code} {exc.reason})".strip()) from None
        self._live = True
        self._connected_at = self._last_rx = self.clock.now()  # a clock need not start at 0
        group = await self._stack.enter_async_context(asyncio.TaskGroup())
        await self._stack.enter_async_context(self._tools.runner)
        clocked = isinstance(self.output, ClockedOutput)
        loops = [self._receive_loop(), self._tick_loop(clocked), self._flush_loop()]
        if self._input is not None:
            loops.append(self._capture_loop(self._input))
        if clocked:
            assert isinstance(self.output, ClockedOutput)
            self.output.after_read = self._tick  # the output's pass ticks the core: one timer, not two
            loops.append(self.output.run())
        self._tasks = [group.create_task(loop) for loop in loops]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection and stop every loop; safe to call twice.

        Returns within ``settings.close_timeout_s`` (plus the loops' own teardown) even when the
        server stops reading: the close handshake is abandoned after that.
        """
        if self._closing:
            return
        self._closing = True
        self._live = False
        for task in self._tasks:
            task.cancel()
        for event in self._metrics.finish(self.output.now()):
            self._queue.put_nowait(event)
        for pending in (self._spare, self._ping):
            if pending is not None:
                pending.cancel()
        if self._conn is not None:
            await self._close_quietly(self._conn)
        self._queue.put_nowait(_CLOSED)
        with contextlib.suppress(asyncio.CancelledError):
            await self._stack.aclose()

    async def _close_quietly(self, conn: RealtimeConnection, code: int = 1000, reason: str = "") -> None:
        """Close ``conn`` within ``close_timeout_s`` on the session's clock; errors are the peer's business."""
        closing = asyncio.ensure_future(conn.close(code, reason))
        timer = asyncio.ensure_future(self.clock.sleep(self.settings.close_timeout_s))
        try:
            await asyncio.wait((closing, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not closing.done():
                closing.cancel()
            with contextlib.suppress(asyncio.CancelledError, RealtimeError, OSError):
                await closing
            conn.protocol.connection_lost()

    async def _connect(self) -> RealtimeConnection:
        key = self.settings.api_key
        if key is None:
            raise ConfigurationError("no API key: set OPENAI_API_KEY, or point VOXLINE_URL at a local server")
        if self.track is not None:
            transport = await WebRTCTransport.connect(self.settings.url, key.get_secret_value(),
                                                      model=self.settings.model, on_audio=self.track.on_audio)
            return RealtimeConnection(transport, on_wire=self._on_wire)
        if self.settings.call_id is not None:  # the sideband of a call: WebSocket, API key, no model
            return await connect(self.settings.url, key.get_secret_value(), model=None, call_id=self.settings.call_id,
                                 on_wire=self._on_wire)
        return await connect(self.settings.url, key.get_secret_value(), model=self.settings.model, on_wire=self._on_wire)

    async def _open(self, *, adopt: bool = True) -> RealtimeConnection:
        """A new connection with the session's configuration sent; ``adopt`` makes it the core's."""
        conn = await self._connector()
        if adopt:
            self._adopt(conn)
        conn.protocol.update_session(self.settings.session_config(self._schemas()))
        await conn.flush()
        return conn

    def _adopt(self, conn: RealtimeConnection) -> None:
        if self.core is None:
            self.core = SessionCore(conn.protocol, self.output.playout, raw_events=self._raw, track=self.track)
            if self._capture is not None and self._capture.vad is not None:
                self.core.local = LocalBarge(self._barge_policy)
        else:
            conn.protocol.inherit_received_audio(self.core.protocol)
            self.core.protocol = conn.protocol

    @property
    def call_id(self) -> str | None:
        """The id of the WebRTC call this session holds (a new one after a reconnect), or the call it attached to."""
        if self.settings.call_id is not None:
            return self.settings.call_id
        return getattr(self._conn.transport, "call_id", None) if self._conn is not None else None

    # ------------------------------------------------------------------ events
    def __aiter__(self) -> VoiceSession:
        return self

    async def __anext__(self) -> SessionEvent | ToolEvent:
        """The next event; cancelling a wait loses nothing (events stay queued)."""
        item = await self._queue.get()
        if item is _CLOSED:
            self._queue.put_nowait(_CLOSED)
            raise StopAsyncIteration
        return item  # type: ignore[return-value]

    def pending_events(self) -> list[SessionEvent | ToolEvent]:
        """The events queued so far, without waiting (the iterator then starts after them)."""
        out: list[SessionEvent | ToolEvent] = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is _CLOSED:
                self._queue.put_nowait(_CLOSED)
                break
            out.append(item)  # type: ignore[arg-type]
        return out

    @property
    def input_finished(self) -> bool:
        """True once the input (if any) has ended."""
        return self._input_finished

    @property
    def connected(self) -> bool:
        """True while a connection carries the conversation (False while reconnecting)."""
        return self._live

    @property
    def idle(self) -> bool:
        """Nothing is playing, queued, being produced or owed: no response, no tool, no queued create.

        Never idle while reconnecting: the new connection may still owe a response.
        """
        core, conn = self.core, self._conn
        if core is None or conn is None:
            return True
        if not self._live:
            return self._closing
        return (not core.assistant_audible(self.output.now()) and not conn.protocol.response_in_progress
                and conn.protocol.queued_creates == 0 and not self._tools.runner.busy
                and not self._tools.tracker.running() and not self._tools.tracker.runnable())

    def metrics(self) -> MetricsReport:
        """The session's figures so far: per turn, per barge-in, per item, and their p50/p95."""
        return self._metrics.report(self.output.now())

    def _publish(self, effects: Effects, now: float | None = None) -> None:
        queue = self._queue
        for event in effects.events:
            queue.put_nowait(event)
        for event in self._metrics.effects(effects, self.output.now() if now is None else now):
            queue.put_nowait(event)

    def _on_tool_event(self, event: ToolEvent) -> None:
        if self.core is not None:
            self.core.wake()
        self._metrics.tool(event, self.output.now())
        self._queue.put_nowait(event)
        self._flush_needed.set()

    # ------------------------------------------------------------------ commands
    def _new_item_id(self) -> str:
        self._item_count += 1
        return f"{self._item_prefix}{self._item_count:06d}"

    async def send_text(self, text: str) -> None:
        """A user text message, then a response.

        While the session reconnects the message is kept: the new connection gets it with the
        rebuilt conversation, and its response is asked for then.
        """
        item = {"id": self._new_item_id(), "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text}]}
        create = ev.parse_client_dict({"type": "conversation.item.create", "item": item})
        assert isinstance(create, ev.ConversationItemCreate)
        self.mirror.record_local(create)
        if not self._live:
            if self._closing:
                raise ConfigurationError("the session is closed")
            self._texts_while_away += 1
            return
        protocol = self._protocol()
        protocol.send(create)
        protocol.create_response()
        await self._flush()

    async def interrupt(self) -> BargeIn | None:
        """Stop the assistant now and cut the conversation where the listener is.

        Returns the barge-in (also delivered as an event), or None when no assistant audio
        was playing, queued or being produced.
        """
        assert self.core is not None
        now = self.output.now()
        if not self.core.assistant_audible(now):
            return None
        effects = self.core.interrupt(now, Trigger.INTERRUPT)
        await self._apply(effects)
        return effects.barge_in

    async def start_talking(self) -> None:
        """Push-to-talk: start sending the microphone (clears what the server buffered)."""
        self._talking = True
        assert self.core is not None
        if not self._live:
            return
        self._protocol().clear_audio()
        if self.core.playout.queued_samples or self.core.protocol.response_in_progress:
            await self.interrupt()
        await self._flush()

    async def stop_talking(self) -> None:
        """Push-to-talk: stop sending, commit what was said, and ask for a response."""
        self._talking = False
        if not self._live:
            self._texts_while_away += 1  # the turn is resent with the journal's audio, then answered
            return
        self._send_input(self._chunker.take())  # the end of the turn goes before its commit
        protocol = self._protocol()
        protocol.commit_audio()
        protocol.create_response()
        await self._flush()

    async def update(self, *, instructions: str | None = None, tools: list[str] | None = None,
                     voice: str | None = None) -> None:
        """``session.update`` with new instructions, voice, or the names of the registry's tools to offer.

        Changes are kept for reconnects. The voice is fixed by the service after the first audio.
        """
        changes: dict[str, Any] = {}
        if instructions is not None:
            changes["instructions"] = instructions
        if voice is not None:
            changes["voice"] = voice
        self.settings = self.settings.model_copy(update=changes)
        if tools is not None:
            unknown = set(tools) - set(self._tools.registry.names())
            if unknown:
                raise ConfigurationError(f"no such tool: {', '.join(sorted(unknown))}")
            self._offered = list(tools)
        if self._live:  # else the next connection is configured from the settings
            self._protocol().update_session(self.settings.session_config(self._schemas()))
            await self._flush()

    def _schemas(self) -> list[dict[str, Any]] | None:
        if self._offered is None:
            return self._tools.registry.schemas() or None
        return self._tools.registry.schemas(self._offered)

    def _protocol(self) -> Any:
        if self._conn is None:
            raise ConfigurationError("the session is not open; use 'async with VoiceSession(...)'")
        return self._conn.protocol

    async def _flush(self) -> None:
        conn = self._conn
        if conn is not None and self._live and not conn.closed:
            self._drain_tools(conn)
            with contextlib.suppress(ConnectionClosed):
                await conn.flush()

    def _drain_tools(self, conn: RealtimeConnection) -> None:
        """Tool outputs and follow-ups into ``conn``; outputs enter the mirror as they are sent."""
        for command in self._tools.drain_into(conn.protocol, self._new_item_id):
            if isinstance(command, ev.ConversationItemCreate):
                self.mirror.record_local(command)

    async def _apply(self, effects: Effects, share: Slices | None = None) -> None:
        """Act on what the core did: a barge-in reaches the mirror and the output; events reach the app.

        With ``share``, what follows a barge-in once the mirror and the output have it (the app's
        events, the metrics, the truncate on the wire) waits its turn: when many sessions' users
        speak at once, every waiting session's cut is made before the rest of any one of them.
        """
        barge_in = effects.barge_in
        if barge_in is not None:
            if self.track is not None:  # WebRTC: each item's length, estimated from its transcript
                for item_id, audio_ms in self.track.audio_estimates():
                    self.mirror.record_audio(item_id, audio_ms)
            self.mirror.apply_barge_in(barge_in)
            cut = barge_in.cut
            if cut is not None and cut.revoked_samples:
                if getattr(self.output, "discard_blocks", True):  # a device abort: keep it off the event loop
                    await asyncio.to_thread(self.output.discard_pending, cut)
                else:
                    self.output.discard_pending(cut)
            if share is not None:
                await share.wait()
        self._publish(effects)
        await self._flush()

    # ------------------------------------------------------------------ loops
    async def _receive_loop(self) -> None:
        # on a real clock each server event but a barge-in's waits its turn (:mod:`voxline.base.loop_share`):
        # replies streamed ahead of real time for many sessions do not hold up the outputs and
        # microphones of the loop, nor another session's barge-in
        share = Slices(loop_share()) if isinstance(self.clock, RealClock) else None
        while not self._closing:
            conn = self._conn
            assert conn is not None and self.core is not None
            try:
                out = await conn.recv()
            except ConnectionClosed as exc:
                if conn is not self._conn or self._handing_over:
                    continue  # a connection handed over: its successor carries on
                if self._closing or not await self._reconnect(exc):
                    self._queue.put_nowait(_CLOSED)
                    return
                continue
            if share is not None and not isinstance(out, ev.InputAudioBufferSpeechStarted):
                await share.next()  # a barge-in never waits for its cut: it is made where the listener is now
            if conn is not self._conn:
                continue  # the last words of a connection handed over (perhaps while this one waited)
            self._last_rx = self.clock.now()
            try:
                effects = self._take(out)
                if (isinstance(out, ev.ResponseOutputAudioDelta) and not effects.events and effects.barge_in is None
                        and not conn.has_data_to_send):
                    continue  # the bulk of a reply: nothing to publish or send (the next tick observes it)
                await self._apply(effects, share)
            except Exception as exc:  # containment: no server event may end the session
                _log.exception("failed to handle %s", getattr(out, "type", type(out).__name__))
                kind = getattr(out, "type", type(out).__name__)
                self._queue.put_nowait(SessionError(f"could not handle {kind}: {type(exc).__name__}: {exc}",
                                                    "event_failed"))

    def _take(self, out: Any) -> Effects:
        """One protocol output through the core, the journal, the tools and the mirror."""
        assert self.core is not None
        effects = self.core.handle(out, self.output.now())
        self._metrics.wire(out, self.output.now())
        self.journal.handle(out)
        if self._run_tools:
            self._tools.handle(out)
        self.mirror.apply(out)
        return effects

    def _tick(self) -> None:
        core = self.core
        if core is None:
            return
        now = self.output.now()
        if now < core.quiet_until and now < self._metrics.next_due:
            return  # nothing a tick looks at can have changed (SessionCore.quiet_until)
        if now >= core.retire_due:
            self._metrics.observe(now)  # the heard counts of what the retire may forget, before it does
        self._publish(core.tick(now), now)

    async def _tick_loop(self, clocked: bool) -> None:
        """The core's tick every block (unless the output's own pass does it), liveness every WATCH_S."""
        watch_at = self.clock.now()
        while True:
            await self.clock.sleep(WATCH_S if clocked else TICK_S)
            if not clocked:
                self._tick()
            if self._live and not self._closing and self.clock.now() >= watch_at:
                watch_at = self.clock.now() + WATCH_S
                await self._watch()

    async def _watch(self) -> None:
        """Liveness of the server, and the hand-over before the session's time runs out."""
        conn, now = self._conn, self.clock.now()
        assert conn is not None
        timeout = self.settings.liveness_timeout_s
        silent = now - self._last_rx
        ping = getattr(conn.transport, "ping", None)
        if timeout and ping is not None and silent >= timeout / 2 and self._ping is None:
            self._ping = asyncio.ensure_future(self._ping_once(conn, ping))
        if timeout and silent >= timeout and (conn.protocol.response_in_progress or self._ping is not None):
            _log.warning("no word from the server for %.1f s; treating it as a drop", silent)
            self._queue.put_nowait(SessionError(f"the server sent nothing for {silent:.1f} s and did not answer a "
                                                "ping; reconnecting", "server_silent"))
            if self._ping is not None:
                self._ping.cancel()
                self._ping = None
            await self._close_quietly(conn, 4000, "server silent")
            return
        await self._maybe_hand_over(conn)

    async def _ping_once(self, conn: RealtimeConnection, ping: Callable[[], Awaitable[None]]) -> None:
        """Ask a quiet server whether it is there; its answer counts as hearing from it."""
        try:
            await ping()
        except (RealtimeError, OSError):
            pass  # the receive loop sees the close
        else:
            if conn is self._conn:
                self._last_rx = self.clock.now()
        finally:
            if self._ping is asyncio.current_task():
                self._ping = None

    async def _flush_loop(self) -> None:
        while True:
            await self._flush_needed.wait()
            self._flush_needed.clear()
            await self._flush()
