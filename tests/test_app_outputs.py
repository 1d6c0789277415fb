"""An application's own output (an object with ``playout``, ``now()`` and ``discard_pending()``) that fails:
the session says so, and closes whole all the same."""

from __future__ import annotations

from voxline.audio.clocked_output import ClockedOutput
from voxline.base.clock import VirtualClock
from voxline.base.errors import AudioError
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.server import load_scenario
from voxline.session.events import SessionError
from voxline.session.lockstep import run_lockstep
from voxline.session.replay import engine_connector
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession


class LostOutput(ClockedOutput):
    """A sink whose device went: its clock can no longer be read."""

    lost = False

    def now(self) -> float:
        if self.lost:
            raise AudioError("the sink's device is gone")
        return super().now()


def test_an_output_whose_clock_fails_still_lets_the_session_close_its_connection() -> None:
    """aclose() raised the output's AudioError before anything was closed, each time it was called: the connection
    stayed open and the session could never be closed."""
    clock = VirtualClock()
    opened: list[RealtimeConnection] = []
    connect = engine_connector(load_scenario("default"), clock, voice="tone")

    async def counted() -> RealtimeConnection:
        opened.append(await connect())
        return opened[-1]

    output = LostOutput(clock)
    settings = SessionSettings(api_key="local", url="ws://in-process/v1", turn_detection="none")

    async def main() -> tuple[list[object], float]:
        session = VoiceSession(settings, output=output, clock=clock, connector=counted)
        async with session:
            await session.send_text("hello")
            await clock.sleep(1.0)
            output.lost = True
            await clock.sleep(0.2)
        await session.aclose()  # a second close is quiet too
        return [e async for e in session], session.metrics().at

    events, closed_at = run_lockstep(main(), clock)
    assert "output_failed" in [e.code for e in events if isinstance(e, SessionError)]  # said, as it happened
    assert len(opened) == 1 and opened[0].closed
    assert 1.0 <= closed_at < 1.2  # the figures stop where its audio did (handed out a block or so ahead)
