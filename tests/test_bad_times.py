"""Times that are no times (NaN, infinity) and jumps far ahead: refused before anything changes, or held in bounded memory."""

from __future__ import annotations

import asyncio
import math
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.playout import PlayoutBuffer
from voxline.audio.sinks import WavSink
from voxline.audio.wavio import read_wav
from voxline.base.clock import VirtualClock


@pytest.mark.parametrize("bad", [math.nan, math.inf, "1"])
def test_a_virtual_clock_takes_only_finite_times(bad: object) -> None:
    clock = VirtualClock()
    with pytest.raises((TypeError, ValueError)):
        clock.advance(bad)  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError)):
        clock.advance_to(bad)  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError)):
        VirtualClock(bad)  # type: ignore[arg-type]
    clock.advance(1.0)
    assert clock.now() == 1.0  # still a clock


def test_a_sleeper_on_a_nan_deadline_is_refused_and_the_others_still_wake() -> None:
    async def run() -> None:
        clock = VirtualClock()
        with pytest.raises(ValueError, match="nan"):
            await clock.sleep_until(math.nan)
        woke = asyncio.ensure_future(clock.sleep_until(0.5))
        await asyncio.sleep(0)
        clock.advance(1.0)
        await asyncio.wait_for(woke, 1.0)

    asyncio.run(run())


def test_a_read_at_no_time_changes_nothing_and_the_ledger_stays_whole() -> None:
    playout = PlayoutBuffer()
    playout.enqueue(np.full(4800, 7, np.int16), "item_a")
    with pytest.raises(ValueError, match="play_time"):
        playout.read(480, math.nan)
    assert playout.heard_samples("item_a", 0, math.inf) == 0  # nothing counted as heard
    assert (playout.read(480, 0.0) == 7).all()
    assert playout.heard_samples("item_a", 0, math.inf) == 480


@pytest.mark.parametrize("fade_ms", [math.inf, math.nan, -5.0])
def test_a_cut_with_a_fade_that_is_no_length_is_refused_and_cuts_nothing_yet(fade_ms: float) -> None:
    playout = PlayoutBuffer()
    playout.enqueue(np.full(4800, 7, np.int16), "item_a")
    playout.read(480, 0.0)
    with pytest.raises(ValueError, match="fade_ms"):
        playout.interrupt(0.01, fade_ms=fade_ms)
    cut = playout.interrupt(0.01, fade_ms=5.0)  # the real cut still works, where the listener is
    assert cut.item_id == "item_a" and cut.revoked_samples > 0


def test_a_write_ten_minutes_ahead_puts_the_gap_on_disk_not_in_memory(tmp_path: Path) -> None:
    block = np.arange(480, dtype=np.int16)
    sink = WavSink(tmp_path / "heard.wav")
    sink.write(0.0, block)
    tracemalloc.start()
    try:
        sink.write(600.0, block)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2 * 24_000 * 2  # a few windows of int16, not ten minutes (29 MB)
    assert sink.held_samples <= 2 * 24_000
    sink.close()
    heard, _rate = read_wav(tmp_path / "heard.wav")
    assert len(heard) == 600 * 24_000 + 480
    assert (heard[:480] == block).all() and (heard[-480:] == block).all() and not heard[480:-480].any()


def test_a_long_write_at_once_is_kept_whole(tmp_path: Path) -> None:
    sink = WavSink(tmp_path / "heard.wav")
    sink.write(0.0, np.ones(3 * 24_000, np.int16))  # longer than the window in one call
    sink.write(3.0, np.ones(480, np.int16))
    sink.close()
    heard, _rate = read_wav(tmp_path / "heard.wav")
    assert len(heard) == 3 * 24_000 + 480 and (heard == 1).all()


def test_a_wav_sink_refuses_a_time_or_rate_that_is_none(tmp_path: Path) -> None:
    sink = WavSink(tmp_path / "heard.wav")
    with pytest.raises(ValueError, match="nan"):
        sink.write(math.nan, np.zeros(480, np.int16))
    sink.close()
    with pytest.raises(ValueError, match="rate"):
        WavSink("/nonexistent/never-made.wav", rate=0)
    with pytest.raises(TypeError, match="rate"):
        WavSink("/nonexistent/never-made.wav", rate=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rate"):  # before, a struct.error from inside the header
        WavSink(tmp_path / "fast.wav", rate=10**10)
    assert not (tmp_path / "fast.wav").exists()
