"""``--fast`` (lockstep, virtual clock) gives the same cut points as real time, within one block."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from voxline.audio.wavio import read_wav
from voxline.base.clock import RealClock
from voxline.realtime.connection import connect
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.replay import replay_fast, run_replay
from tests.support.ci import require_tool
from tests.support.oracle import WireRecorder

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "audio" / "barge_in.wav"
BLOCK_MS = 20


@pytest.mark.slow
@pytest.mark.alone  # the real-time cut is within a block of the lockstep one on a machine that is not saturated
async def test_fast_and_real_time_replays_cut_at_the_same_point() -> None:
    require_tool("espeak-ng")
    samples, _rate = read_wav(EXAMPLE)
    fast = await asyncio.to_thread(replay_fast, samples, scenario=load_scenario("long"), voice="espeak", tail_s=1.0)
    rec = WireRecorder()
    async with serve(ServerConfig(port=0, scenario="long", voice="espeak")) as server:
        async def connector():  # type: ignore[no-untyped-def]
            return await connect(server.url, "sk-test", on_wire=rec)

        real = await run_replay(samples, connector=connector, clock=RealClock(), tail_s=1.0)
    rec.verify()
    (f,), (r,) = fast.barge_ins, real.barge_ins
    assert f.audio_end_ms is not None and r.audio_end_ms is not None
    assert abs(f.audio_end_ms - r.audio_end_ms) <= BLOCK_MS
    assert abs(f.at - r.at) <= BLOCK_MS / 1000
