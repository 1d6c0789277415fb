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

It is the only driver of the session core: ``voxline talk`` runs it on sound devices,
``voxline replay`` on a recording and a WAV output, and ``replay --fast`` the same with a
:class:`~voxline.base.clock.VirtualClock` and the local server's engine in process
(:mod:`voxline.session.lockstep`). Time comes from ``clock`` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

import numpy as np

from voxline.base.clock import Clock, RealClock
from voxline.realtime.connection import RealtimeConnection, WireObserver, connect
from voxline.realtime.transports.webrtc import WebRTCTransport
from voxline.realtime.errors import ConfigurationError, ConnectionClosed, ConnectionFailed, RealtimeError

from .bargein import Trigger
from .core import Effects, SessionCore
from .events import BargeIn, ConnectionLost, ConnectionRestored, SessionError, SessionEvent
from .media import ClockedOutput, Output
from .mirror import ConversationMirror
from .settings import SessionSettings
from .tool_bridge import ToolBridge
from .track_audio import TrackTagger
from .tools import Approver, ToolEvent, ToolRegistry

__all__ = ["VoiceSession"]

Connector = Callable[[], Awaitable[RealtimeConnection]]
log = logging.getLogger("voxline.session")
Backoff = Callable[[int], float]  # reconnect attempt (0, 1, ...) → seconds to wait before it
TICK_S = 0.02
_CLOSED = object()


def exponential_backoff(first_s: float = 0.2, cap_s: float = 5.0, *, jitter: float = 0.2,
                        rng: random.Random | None = None) -> Backoff:
    """``first_s · 2^attempt``, at most ``cap_s``, spread by ± ``jitter`` of itself."""
    source = rng or random.Random()

    def delay(attempt: int) -> float:
        base = min(cap_s, first_s * 2.0 ** attempt)
        return base * (1.0 + jitter * (2.0 * source.random() - 1.0))

    return delay


class VoiceSession:
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
    ) -> None:
        self.settings = settings or SessionSettings()
        self.clock = clock or RealClock()
        self.output: Output = output or ClockedOutput(self.clock)
        self._input = input
        self._input_finished = input is None
        self._backoff = backoff or exponential_backoff()
        self._tools = ToolBridge(tools or ToolRegistry(), approve=approve, on_event=self._on_tool_event,
                                 clock=self.clock)
        # WebRTC: assistant audio arrives on the media track, tagged into the output's playout
        self.track = TrackTagger(self.output.playout) if self.settings.transport == "webrtc" else None
        self._raw = raw_events
        self._connector = connector or self._connect
        self._on_wire = on_wire
        self.mirror = mirror if mirror is not None else ConversationMirror()
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._conn: RealtimeConnection | None = None
        self.core: SessionCore | None = None
        self._stack = contextlib.AsyncExitStack()
        self._talking = self.settings.turn_detection != "none"
        self._closing = False
        self._flush_needed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._offered: list[str] | None = None  # tool names offered to the model (None: all)

    def __repr__(self) -> str:
        state = "open" if self._conn is not None and not self._conn.closed else "closed"
        return f"<VoiceSession {self.settings.model} {state}>"

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> VoiceSession:
        self._conn = await self._open()
        group = await self._stack.enter_async_context(asyncio.TaskGroup())
        await self._stack.enter_async_context(self._tools.runner)
        loops = [self._receive_loop(), self._tick_loop(), self._flush_loop()]
        if self._input is not None:
            loops.append(self._capture_loop(self._input))
        if isinstance(self.output, ClockedOutput):
            loops.append(self.output.run())
        self._tasks = [group.create_task(loop) for loop in loops]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection and stop every loop; safe to call twice."""
        if self._closing:
            return
        self._closing = True
        if self._conn is not None:
            with contextlib.suppress(RealtimeError):
                await self._conn.close()
        for task in self._tasks:
            task.cancel()
        self._queue.put_nowait(_CLOSED)
        with contextlib.suppress(asyncio.CancelledError):
            await self._stack.aclose()

    async def _connect(self) -> RealtimeConnection:
        key = self.settings.api_key
        if key is None:
            raise ConfigurationError("no API key: set OPENAI_API_KEY, or point VOXLINE_URL at a local server")
        if self.track is not None:
            transport = await WebRTCTransport.connect(self.settings.url, key.get_secret_value(),
                                                      model=self.settings.model, on_audio=self.track.on_audio)
            return RealtimeConnection(transport, on_wire=self._on_wire)
        return await connect(self.settings.url, key.get_secret_value(), model=self.settings.model, on_wire=self._on_wire)

    async def _open(self) -> RealtimeConnection:
        conn = await self._connector()
        if self.core is None:
            self.core = SessionCore(conn.protocol, self.output.playout, raw_events=self._raw, track=self.track)
        else:
            conn.protocol.inherit_received_audio(self.core.protocol)
            self.core.protocol = conn.protocol
        conn.protocol.update_session(self.settings.session_config(self._schemas()))
        await conn.flush()
        return conn

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
    def idle(self) -> bool:
        """Nothing is playing, queued, being produced or owed: no response, no tool, no queued create."""
        core, conn = self.core, self._conn
        if core is None or conn is None:
            return True
        return (not core.assistant_audible(self.output.now()) and not conn.protocol.response_in_progress
                and conn.protocol.queued_creates == 0 and not self._tools.runner.busy
                and not self._tools.tracker.running() and not self._tools.tracker.runnable())

    def _publish(self, effects: Effects) -> None:
        for event in effects.events:
            self._queue.put_nowait(event)

    def _on_tool_event(self, event: ToolEvent) -> None:
        self._queue.put_nowait(event)
        self._flush_needed.set()

    # ------------------------------------------------------------------ commands
    async def send_text(self, text: str) -> None:
        """A user text message, then a response."""
        protocol = self._protocol()
        protocol.create_item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
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
        self._protocol().clear_audio()
        self._talking = True
        assert self.core is not None
        if self.core.playout.queued_samples or self.core.protocol.response_in_progress:
            await self.interrupt()
        await self._flush()

    async def stop_talking(self) -> None:
        """Push-to-talk: stop sending, commit what was said, and ask for a response."""
        self._talking = False
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
        if self._conn is not None and not self._conn.closed:
            self._tools.drain_into(self._conn.protocol)
            with contextlib.suppress(ConnectionClosed):
                await self._conn.flush()

    async def _apply(self, effects: Effects) -> None:
        """Act on what the core did: a barge-in reaches the mirror and the output; events reach the app."""
        barge_in = effects.barge_in
        if barge_in is not None:
            self.mirror.apply_barge_in(barge_in)
            cut = barge_in.cut
            if cut is not None and cut.revoked_samples:
                # a device abort takes a few milliseconds: keep it off the event loop
                await asyncio.to_thread(self.output.discard_pending, cut)
        self._publish(effects)
        await self._flush()

    # ------------------------------------------------------------------ loops
    async def _receive_loop(self) -> None:
        while not self._closing:
            assert self._conn is not None and self.core is not None
            try:
                out = await self._conn.recv()
            except ConnectionClosed as exc:
                if self._closing or not await self._reconnect(exc):
                    self._queue.put_nowait(_CLOSED)
                    return
                continue
            effects = self.core.handle(out, self.output.now())
            self._tools.handle(out)
            self.mirror.apply(out)
            await self._apply(effects)

    async def _tick_loop(self) -> None:
        while True:
            await self.clock.sleep(TICK_S)
            if self.core is not None:
                self._publish(self.core.tick(self.output.now()))

    async def _flush_loop(self) -> None:
        while True:
            await self._flush_needed.wait()
            self._flush_needed.clear()
            await self._flush()

    async def _capture_loop(self, blocks: AsyncIterable[np.ndarray]) -> None:
        try:
            async for block in blocks:
                if self._talking and self._conn is not None and not self._conn.closed:
                    pcm = np.ascontiguousarray(block, dtype="<i2")
                    media = self._conn.transport.media
                    if media is not None:  # WebRTC: the microphone is a media track
                        media.push_audio(pcm)
                        continue
                    self._conn.protocol.append_audio(pcm.tobytes())
                    with contextlib.suppress(ConnectionClosed):
                        await self._conn.flush()
        finally:
            self._input_finished = True

    async def _reconnect(self, exc: ConnectionClosed) -> bool:
        """After a drop: reconnect with backoff, restore config and conversation. False if given up."""
        assert self.core is not None
        self._queue.put_nowait(ConnectionLost(exc.code, exc.reason, self.output.now()))
        log.warning("connection lost (close code %s %s); reconnecting", exc.code, exc.reason)
        for attempt in range(self.settings.reconnect_attempts):
            await self.clock.sleep(self._backoff(attempt))
            try:
                conn = await self._open()
            except ConnectionFailed as failure:
                log.warning("reconnect attempt %d failed: %s", attempt + 1, failure)
                self._queue.put_nowait(SessionError(f"reconnect failed: {failure}", "reconnect_failed"))
                continue
            replayed = self._restore(conn)
            self._conn = conn
            await self._flush()
            log.info("connection restored after %d attempt(s); %d items replayed", attempt + 1, replayed)
            self._queue.put_nowait(ConnectionRestored(self.output.now(), replayed))
            return True
        log.error("the connection is lost and could not be restored")
        self._queue.put_nowait(SessionError("the connection is lost and could not be restored", "connection_lost",
                                            fatal=True))
        return False

    def _restore(self, conn: RealtimeConnection) -> int:
        """Recreate the conversation and settle tool calls of responses the drop left unknown."""
        plan = self.mirror.plan_rebuild()
        for command in plan.commands:
            conn.protocol.send(command)
        self.mirror.adopt_rebuild(plan)
        for call in self._tools.tracker.running() + self._tools.tracker.runnable():
            self._tools.tracker.on_response_done(call.response_id, "completed")
        return len(plan.item_ids)

