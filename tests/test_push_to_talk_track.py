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
from typing import Any

import numpy as np

from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.recording import Recording
from voxline.base.clock import VirtualClock
from voxline.realtime.connection import RealtimeConnection, connect
from voxline.realtime.server import ServerConfig, serve
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession

RATE = 24_000
FRAME = 480


class _Track:
    """Sends what is pushed in real time on ``clock``, from one frame after the first push."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.pushed = 0
        self.start: float | None = None

    def push_audio(self, block: Any, *, age_s: float = 0.0) -> None:
        if self.start is None:
            self.start = self.clock.now() + FRAME / RATE
        self.pushed += len(block)

    @property
    def queued_audio_samples(self) -> int:
        if self.start is None:
            return 0
        sent = int(max(0.0, self.clock.now() - self.start) * RATE)
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
