"""Push-to-talk over a media track (WebRTC): the commit waits until the track has sent the turn.

When the key is let go, the microphone's track still holds the turn's last frames (it sends
each a frame after it was captured). A commit sent at once on the data channel reaches the
server before them, and the server commits the turn without its end. The session stops feeding
the track at the release and sends the commit once the track has sent what it holds.

The track here is a stand-in that sends what is pushed in real time on the virtual clock; the
server is the local one over a WebSocket, whose transport is given that track as its media.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import numpy as np

from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.recording import Recording
from voxline.base.clock import VirtualClock
from voxline.realtime.connection import RealtimeConnection, connect
from voxline.realtime.server import ServerConfig, serve
from voxline.session.settings import SessionSettings
from voxline.session.events import SessionError
from voxline.session.voice import VoiceSession

RATE = 24_000
FRAME = 480


class _Track:
    """Sends what is pushed in real time on ``clock``, from one frame after the first push, except
    while ``stalled`` (a span of time in which it sends nothing, as a congested network would)."""

    def __init__(self, clock: VirtualClock, stalled: tuple[float, float] = (0.0, 0.0)) -> None:
        self.clock = clock
        self.pushed = 0
        self.start: float | None = None
        self.stalled = stalled

    def push_audio(self, block: Any, *, age_s: float = 0.0) -> None:
        if self.start is None:
            self.start = self.clock.now() + FRAME / RATE
        self.pushed += len(block)

    @property
    def queued_audio_samples(self) -> int:
        if self.start is None:
            return 0
        now = self.clock.now()
        stalled = max(0.0, min(now, self.stalled[1]) - max(self.start, self.stalled[0]))
        sent = int(max(0.0, now - self.start - stalled) * RATE)
        return max(0, self.pushed - sent)


class _WithTrack:
    """A transport whose microphone goes out on ``media`` (as a WebRTC transport's does)."""

    def __init__(self, inner: Any, media: _Track) -> None:
        self._inner = inner
        self.media = media

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def _advance_until(clock: VirtualClock, done: asyncio.Future[Any], step: float = 0.005) -> None:
    for _ in range(400):
        if done.done():
            return
        clock.advance(step)
        for _ in range(5):
            await asyncio.sleep(0)
    raise AssertionError("the call did not return within 2 s of virtual time")


async def test_the_commit_waits_for_the_tracks_last_frames_and_nothing_after_the_release_is_pushed() -> None:
    clock = VirtualClock()
    track = _Track(clock)
    commits: list[tuple[float, int, int]] = []  # (virtual time, samples still queued, samples pushed)

    def on_wire(direction: str, text: str) -> None:
        if direction == "out" and '"input_audio_buffer.commit"' in text:
            commits.append((clock.now(), track.queued_audio_samples, track.pushed))

    async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"))) as srv:
        async def connector() -> RealtimeConnection:
            conn = await connect(srv.url, "sk-test", on_wire=on_wire)
            conn.transport = _WithTrack(conn.transport, track)  # type: ignore[assignment]
            return conn

        settings = SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none")
        mic = Recording(np.full(2 * RATE, 1000, np.int16), clock, origin=0.0)
        session = VoiceSession(settings, output=ClockedOutput(clock, origin=0.0), input=mic, clock=clock,
                               connector=connector)
        async with session:
            await session.start_talking()
            for k in range(1, 26):  # half a second of the user's turn, in 20 ms blocks
                clock.advance_to(k * FRAME / RATE)
                for _ in range(5):
                    await asyncio.sleep(0)
            released_at, pushed, held = clock.now(), track.pushed, track.queued_audio_samples
            assert held > 0  # the track still holds the turn's end
            stopping = asyncio.ensure_future(session.stop_talking())
            await _advance_until(clock, stopping)
            await stopping
            closing = asyncio.ensure_future(session.aclose())  # the reply plays on the clock meanwhile
            await _advance_until(clock, closing)
            await closing
    assert len(commits) == 1
    at, queued, pushed_then = commits[0]
    assert queued == 0  # the track had sent the whole turn
    assert pushed_then == pushed  # and nothing captured after the release went on it
    assert released_at < at <= released_at + (held + 2 * FRAME) / RATE  # and no longer than it took


class _Call:
    """A push-to-talk session over a stand-in track, its commits as (virtual time, samples still on the track)."""

    def __init__(self, stalled: tuple[float, float] = (0.0, 0.0)) -> None:
        self.clock = VirtualClock()
        self.track = _Track(self.clock, stalled)
        self.commits: list[tuple[float, int]] = []
        self.clears: list[float] = []

    def on_wire(self, direction: str, text: str) -> None:
        if direction == "out" and '"input_audio_buffer.commit"' in text:
            self.commits.append((self.clock.now(), self.track.queued_audio_samples))
        if direction == "out" and '"input_audio_buffer.clear"' in text:
            self.clears.append(self.clock.now())

    async def advance_to(self, t: float) -> None:
        """Move time on in 20 ms steps, so the microphone's blocks come as they would."""
        while self.clock.now() < t - 1e-9:
            self.clock.advance_to(min(t, self.clock.now() + FRAME / RATE))
            for _ in range(5):
                await asyncio.sleep(0)

    async def run(self, script: Any) -> None:
        async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"))) as srv:
            async def connector() -> RealtimeConnection:
                conn = await connect(srv.url, "sk-test", on_wire=self.on_wire)
                conn.transport = _WithTrack(conn.transport, self.track)  # type: ignore[assignment]
                return conn

            settings = SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none")
            mic = Recording(np.full(3 * RATE, 1000, np.int16), self.clock, origin=0.0)
            session = VoiceSession(settings, output=ClockedOutput(self.clock, origin=0.0), input=mic,
                                   clock=self.clock, connector=connector)
            async with session:
                await script(session)
                closing = asyncio.ensure_future(session.aclose())
                await _advance_until(self.clock, closing)
                await closing


async def test_a_stop_talking_cancelled_while_it_waits_still_commits_its_turn_once() -> None:
    call = _Call()

    async def script(session: VoiceSession) -> None:
        await session.start_talking()
        await call.advance_to(0.5)
        stopping = asyncio.ensure_future(session.stop_talking())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not stopping.done() and call.commits == []  # waiting for the track
        stopping.cancel()  # e.g. the app's own timeout
        with contextlib.suppress(asyncio.CancelledError):
            await stopping
        await call.advance_to(0.6)
        assert len(call.commits) == 1  # sent all the same, by the flush task
        await session.start_talking()  # the next turn: nothing of the last one is left to commit
        await call.advance_to(0.8)

    await call.run(script)
    assert len(call.commits) == 1 and call.commits[0][0] < call.clears[-1]


async def test_a_tap_whose_stop_talking_is_cancelled_while_it_waits_is_still_said() -> None:
    """The commit is made all the same when the wait is cancelled; a tap too short to commit was dropped then
    without a word (its turn_too_short error went with the cancelled call)."""
    call = _Call()
    said: list[Any] = []

    async def script(session: VoiceSession) -> None:
        await call.advance_to(0.3)
        await session.start_talking()
        await call.advance_to(0.34)  # 40 ms
        stopping = asyncio.ensure_future(session.stop_talking())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not stopping.done()  # waiting for the track
        stopping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopping
        await call.advance_to(0.5)
        said.extend(session.pending_events())

    await call.run(script)
    assert [e.code for e in said if isinstance(e, SessionError)] == ["turn_too_short"] and not call.commits


async def test_a_press_before_the_wait_ends_commits_the_first_turn_and_the_second_waits_for_its_own_end() -> None:
    call = _Call(stalled=(0.4, 0.63))  # the first wait is still on when the second turn is let go

    async def script(session: VoiceSession) -> None:
        await session.start_talking()
        await call.advance_to(0.5)
        first = asyncio.ensure_future(session.stop_talking())
        await call.advance_to(0.52)
        await session.start_talking()  # pressed again while the first turn's end is still on the track
        assert len(call.commits) == 1  # committed at once, before the press clears the buffer
        await call.advance_to(0.62)  # let go again (a turn of 100 ms: a shorter one is not sent) before the first
        # wait's bound (what its track held then, 120 ms, and two frames)
        second = asyncio.ensure_future(session.stop_talking())
        both = asyncio.ensure_future(asyncio.gather(first, second))
        await _advance_until(call.clock, both)
        await both

    await call.run(script)
    assert len(call.commits) == 2
    (pressed_at, _), (at, queued) = call.commits
    assert pressed_at <= call.clears[-1]  # the first turn went before the second one's clear
    assert queued == 0 and at > 0.62  # the second turn waited for its own last frames, not the first's wait


async def test_a_second_stop_talking_returns_only_once_the_turn_is_committed() -> None:
    call = _Call()
    returned: list[tuple[str, int]] = []  # (which call, commits sent by then)

    async def script(session: VoiceSession) -> None:
        await session.start_talking()
        await call.advance_to(0.5)

        async def stop(name: str) -> None:
            await session.stop_talking()
            returned.append((name, len(call.commits)))

        first = asyncio.ensure_future(stop("first"))
        for _ in range(5):
            await asyncio.sleep(0)
        second = asyncio.ensure_future(stop("second"))  # e.g. a key-up handler and a timeout both let go
        for _ in range(5):
            await asyncio.sleep(0)
        assert not second.done() and call.commits == []  # the turn still waits for the track
        both = asyncio.ensure_future(asyncio.gather(first, second))
        await _advance_until(call.clock, both)
        await both

    await call.run(script)
    assert len(call.commits) == 1
    assert sorted(returned) == [("first", 1), ("second", 1)]
