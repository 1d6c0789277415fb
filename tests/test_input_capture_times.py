"""The user's speech is placed where it was said, however late the session went live.

A recording's first blocks are whole before a far server's connection is open; handed over at
once when it is, each still counts from when it was captured, so the server's
``audio_start_ms`` maps back to the instant in the recording, not to when the block was sent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from voxline.audio.wavio import read_wav
from voxline.base.clock import RealClock
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.replay import run_replay
from voxline.session.replay.driver import engine_connector
from tests.support.farm import make_recording

pytestmark = pytest.mark.slow  # two short replays in real time


def _first_speech_start(samples: object, delay_s: float) -> float:
    async def main() -> float:
        clock = RealClock()
        connect = engine_connector(load_scenario("default"), clock, voice="tone")

        async def far() -> RealtimeConnection:
            await asyncio.sleep(delay_s)  # the connection opens this much after the recording started
            return await connect()

        result = await run_replay(samples, connector=far, clock=clock, tail_s=0.5)  # type: ignore[arg-type]
        assert result.metrics is not None and result.metrics.speech, result.events
        return result.metrics.speech[0].speech_start

    return asyncio.run(main())


def test_a_session_live_late_places_the_speech_where_the_recording_has_it(tmp_path: Path) -> None:
    make_recording(tmp_path / "ask.wav", 1, False)  # a question at 0.3 s
    samples, _rate = read_wav(tmp_path / "ask.wav")
    samples = samples[: int(2.2 * 24_000)]
    at_once = _first_speech_start(samples, 0.0)
    late = _first_speech_start(samples, 0.4)
    assert at_once == pytest.approx(0.3, abs=0.05)
    assert late == pytest.approx(at_once, abs=0.012)  # not 0.4 s later: the blocks count from their capture
