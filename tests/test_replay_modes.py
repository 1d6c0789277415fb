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


@pytest.mark.parametrize(("silence_after_s", "left_open"), [(0.0, True), (0.3, True), (1.5, False)])
def test_a_recording_that_ends_inside_a_turn_says_so_and_one_that_ends_in_silence_is_answered(
        silence_after_s: float, left_open: bool) -> None:
    """A recording whose voice goes on to its end, or stops less than the silence that ends a turn before it, leaves
    the server's turn open: it is never answered. Before, such a replay said nothing of it, and passed for one that
    heard every turn."""
    import numpy as np

    from voxline.base.audio_format import SAMPLE_RATE
    from voxline.session.events import ResponseStarted, SessionError
    from voxline.session.replay.result import TURN_LEFT_OPEN
    from tests.support.hostile import speech

    voice = speech(np.random.default_rng(7), 1.2)
    samples = np.concatenate([np.zeros(int(0.3 * SAMPLE_RATE), np.int16), voice,
                              np.zeros(int(silence_after_s * SAMPLE_RATE), np.int16)])
    result = replay_fast(samples, scenario=load_scenario("default"), voice="tone", tail_s=10.0)
    open_turns = [e for e in result.events if isinstance(e, SessionError) and e.code == TURN_LEFT_OPEN]
    answered = any(isinstance(e, ResponseStarted) for e in result.events)
    assert (len(open_turns), answered) == ((1, False) if left_open else (0, True)), result.events
    if left_open:
        assert not open_turns[0].fatal and open_turns[0].message.startswith(
            "the recording ended inside a turn of yours (the voice went on to its end, or stopped less than 500 ms "
            "of silence before it)")
