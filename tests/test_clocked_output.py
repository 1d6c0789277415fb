"""The device-less output reads one block per 20 ms and catches up after a late wake-up."""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voxline.base.clock import VirtualClock
from voxline.audio.clocked_output import IDLE_S, ClockedOutput
from voxline.audio.sinks import TimelineSink
from voxline.audio.tick_gate import TickGate


async def test_a_late_wake_up_reads_every_block_due_at_once() -> None:
    clock = VirtualClock()
    sink = Writes()
    output = ClockedOutput(clock, sink, origin=0.0, idle_s=0.0)  # a pass every block, even in silence
    task = asyncio.create_task(output.run())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sink.writes == [(0.0, 480)]  # block 0 at once
    clock.advance(0.1)  # one wake-up, 80 ms late for block 1
    await asyncio.sleep(0)  # the output runs once
    assert sink.writes == [(0.0, 480), (0.02, 480 * 5)]  # in one pass (silence: one write): no block waits
    assert clock.next_deadline() == 0.12
    output.playout.enqueue(np.full(4800, 7, np.int16), "item_a")
    clock.advance(0.06)  # late again, with audio to read: block by block
    await asyncio.sleep(0)
    assert sink.writes[2:] == [(0.12, 480), (0.14, 480), (0.16, 480)]
    assert output.playout.started_at("item_a") == 0.12
    task.cancel()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def advance_through(clock: VirtualClock, until: float) -> None:
    """Move ``clock`` from deadline to deadline up to ``until``, the loop settling after each."""
    while (deadline := clock.next_deadline()) is not None and deadline <= until:
        clock.advance_to(deadline)
        await settle()


class Writes:
    """A sink that keeps each write's listener time and length."""

    def __init__(self) -> None:
        self.writes: list[tuple[float, int]] = []

    def write(self, t: float, samples: np.ndarray) -> None:
        self.writes.append((round(t, 6), len(samples)))

    def apply_cut(self, at: float, end: float) -> None:
        pass

    @property
    def covered(self) -> int:
        return sum(n for _, n in self.writes)


async def test_with_nothing_to_play_it_sleeps_and_hands_the_sink_the_silence_when_it_wakes() -> None:
    clock, sink = VirtualClock(), Writes()
    output = ClockedOutput(clock, sink, origin=0.0)
    task = asyncio.create_task(output.run())
    await settle()
    assert sink.writes == [(0.0, 480)] and clock.next_deadline() == IDLE_S  # not 0.02: nothing can play
    clock.advance_to(IDLE_S)
    await settle()
    assert sink.writes == [(0.0, 480), (0.02, 480 * 10)]  # blocks 1 to 10 in one write
    assert output.playout.samples_read == 480 * 11
    clock.advance_to(0.25)  # asleep until 0.4: queued audio wakes it, from the next block on
    output.playout.enqueue(np.full(960, 1000, np.int16), "item_a")
    assert sink.writes[-1] == (0.22, 480 * 2)  # 0.22 and 0.24, due by now, were silence
    assert clock.next_deadline() == 0.26
    clock.advance_to(0.26)
    await settle()
    assert output.playout.started_at("item_a") == 0.26  # where it would have started without the sleep
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_stopped_while_asleep_the_sink_has_the_silence_up_to_the_stop() -> None:
    clock, sink = VirtualClock(), Writes()
    output = ClockedOutput(clock, sink, origin=0.0)
    task = asyncio.create_task(output.run())
    await settle()
    clock.advance_to(0.15)
    await settle()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert sink.covered == 480 * 8  # blocks 0 to 7: every block due by 0.15
    assert output.playout.before_change is None  # let go of


async def test_a_gate_lowered_while_asleep_brings_the_tick_to_the_next_block() -> None:
    clock, sink = VirtualClock(), Writes()
    output = ClockedOutput(clock, sink, origin=0.0)
    ticks: list[float] = []
    gate = TickGate()
    output.tick_gate = gate

    def tick() -> None:
        ticks.append(clock.now())
        gate.until = clock.now() + 10.0  # quiet for a long while

    output.after_read = tick
    task = asyncio.create_task(output.run())
    await settle()
    assert ticks == [0.0] and clock.next_deadline() == IDLE_S
    clock.advance_to(0.05)
    gate.until = -math.inf  # something changed: tick after the next pass
    assert clock.next_deadline() == 0.06
    clock.advance_to(0.06)
    await settle()
    assert ticks == [0.0, 0.06]
    gate.until = 0.5  # lowered, but beyond the next idle pass (0.26): that one stands
    assert clock.next_deadline() == 0.26
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert gate.on_lower is None


async def test_idle_s_zero_reads_every_block_and_an_echo_reference_keeps_it_awake() -> None:
    from voxline.audio.reference import PlayedRing

    for idle_s, reference in ((0.0, False), (IDLE_S, True)):
        clock, sink = VirtualClock(), Writes()
        output = ClockedOutput(clock, sink, origin=0.0, idle_s=idle_s)
        if reference:
            output.playout.attach_reference(PlayedRing())
        task = asyncio.create_task(output.run())
        await settle()
        assert clock.next_deadline() == 0.02
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# a schedule: (listener time, what happens) with times off the block grid, so that no event ties with a pass (at a
# tie, a pass every block reads the audio or not by which wake-up came first; the tests above fix the rule asleep)
_EVENTS = st.lists(st.tuples(st.integers(0, 150).map(lambda k: k * 0.02 + 0.007),
                             st.sampled_from(["audio", "done", "lower", "never"]),
                             st.integers(1, 40)), max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_EVENTS, horizons=st.lists(st.integers(0, 60), min_size=1, max_size=8), latency=st.sampled_from([0.0, 0.04]))
def test_sleeping_in_silence_hears_and_ticks_exactly_as_a_pass_every_block(
        events: list[tuple[float, str, int]], horizons: list[int], latency: float) -> None:
    """Whatever is queued, completed or changed when: the same timeline, the same ticks, the same first-heard times."""
    def run(idle_s: float) -> tuple[np.ndarray, list[float], list[float | None]]:
        async def main() -> tuple[np.ndarray, list[float], list[float | None]]:
            clock, sink, gate = VirtualClock(), TimelineSink(), TickGate()
            output = ClockedOutput(clock, sink, origin=0.0, idle_s=idle_s, latency_s=latency)
            output.tick_gate = gate
            ticks: list[float] = []

            def tick() -> None:
                ticks.append(round(clock.now(), 6))
                gate.until = clock.now() + horizons[len(ticks) % len(horizons)] * 0.02

            output.after_read = tick
            task = asyncio.create_task(output.run())
            await settle()
            items: list[str] = []
            for k, (at, what, size) in enumerate(sorted(events)):
                await advance_through(clock, at)
                clock.advance_to(at)
                await settle()
                if what == "audio":
                    if not items or k % 3 == 0:
                        items.append(f"item_{k}")
                    output.playout.enqueue(np.full(size * 120, 100 + k, np.int16), items[-1])
                elif what == "done" and items:
                    output.playout.mark_complete(items[-1])
                elif what == "lower":
                    gate.until = at + size * 0.001
                else:
                    gate.until = -math.inf
            for item in items:
                output.playout.mark_complete(item)
            await advance_through(clock, 4.0)
            clock.advance_to(4.0)
            await settle()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return sink.samples.copy(), ticks, [output.playout.started_at(item) for item in items]

        return asyncio.run(main())

    every_block, sleeping = run(0.0), run(IDLE_S)
    assert np.array_equal(every_block[0], sleeping[0])
    assert every_block[1] == sleeping[1]
    assert every_block[2] == sleeping[2]


def _queued_at(idle_s: float, first_at: float, more_at: float | None = None) -> tuple[float | None, int, int]:
    """Audio queued by a task that went to sleep before the output started: where it starts (listener time, sample)
    and how long it then plays without a gap."""
    async def main() -> tuple[float | None, int, int]:
        clock, sink = VirtualClock(), TimelineSink()
        output = ClockedOutput(clock, sink, origin=0.0, idle_s=idle_s)

        async def server() -> None:
            await clock.sleep_until(first_at)
            output.playout.enqueue(np.full(240, 1000, np.int16), "a")
            if more_at is not None:
                await clock.sleep_until(more_at)
                output.playout.enqueue(np.full(4800, 2000, np.int16), "a")
            output.playout.mark_complete("a")

        serving = asyncio.create_task(server())
        await settle()
        task = asyncio.create_task(output.run())
        await settle()
        await advance_through(clock, 1.0)
        task.cancel()
        await asyncio.gather(task, serving, return_exceptions=True)
        heard = sink.samples
        first = int(np.flatnonzero(heard)[0])
        gap = np.flatnonzero(heard[first:] == 0)
        return output.playout.started_at("a"), first, int(gap[0]) if len(gap) else len(heard) - first

    return asyncio.run(main())


def test_audio_queued_a_hair_before_a_block_is_due_starts_in_it_and_at_the_instant_in_the_next() -> None:
    before = math.nextafter(0.1, 0.0)  # the sum that rounds to block 5 before block 5 is due
    assert _queued_at(IDLE_S, before) == _queued_at(0.0, before) == (0.1, 2400, 240)
    # at the very instant (a queuing task woken before the output's pass would start it a block sooner without
    # the sleep; which of the two wakes first, the instant does not say): asleep, the block due then has passed
    assert _queued_at(IDLE_S, 0.1) == (0.12, 2880, 240)
    # and no block is read before it is due: 0.22's block, read at 0.2, would hold half the audio and a gap
    assert _queued_at(IDLE_S, IDLE_S, IDLE_S + 0.01) == (0.22, 5280, 240 + 4800)


def test_a_gate_lowered_a_hair_before_a_block_is_due_ticks_on_that_block() -> None:
    def ticks(idle_s: float, at: float) -> list[float]:
        async def main() -> list[float]:
            clock, gate = VirtualClock(), TickGate()
            output = ClockedOutput(clock, Writes(), origin=0.0, idle_s=idle_s)
            output.tick_gate = gate
            seen: list[float] = []

            def tick() -> None:
                seen.append(clock.now())
                gate.until = clock.now() + 10.0

            async def lower() -> None:
                await clock.sleep_until(at)
                gate.until = -math.inf

            lowering = asyncio.create_task(lower())
            await settle()
            output.after_read = tick
            task = asyncio.create_task(output.run())
            await settle()
            await advance_through(clock, 0.15)
            task.cancel()
            await asyncio.gather(task, lowering, return_exceptions=True)
            return seen

        return asyncio.run(main())

    before = math.nextafter(0.1, 0.0)
    assert ticks(IDLE_S, before) == ticks(0.0, before) == [0.0, 0.1]
    assert ticks(IDLE_S, 0.1) == [0.0, 0.12]  # at the very instant: the block due then has passed


class FailsOnce(Writes):
    """A sink whose first write past listener time 0 fails as a full disk does."""

    failed = False

    def write(self, t: float, samples: np.ndarray) -> None:
        if t > 0 and not self.failed:
            self.failed = True
            raise OSError("no space left on device")
        super().write(t, samples)


async def _asleep_until_a_failing_wake_up() -> tuple[VirtualClock, ClockedOutput, asyncio.Task[None], bool]:
    """An output asleep in silence, woken at 0.05 by queued audio while its sink's catch-up write fails."""
    clock = VirtualClock()
    output = ClockedOutput(clock, FailsOnce(), origin=0.0)
    task = asyncio.create_task(output.run())
    await settle()
    clock.advance_to(0.05)
    queued = output.playout.enqueue(np.full(960, 5, np.int16), "a")
    return clock, output, task, queued


async def test_a_sink_that_fails_on_a_wake_up_loses_no_audio_and_ends_the_output_at_its_next_pass() -> None:
    clock, output, task, queued = await _asleep_until_a_failing_wake_up()
    assert queued  # the sink's failure is not the queue's
    assert output.playout.queued_samples == 960 and clock.next_deadline() == 0.06  # rung for the next block
    assert output.playout.samples_read == 480 * 3  # blocks 0 to 2 (the silence due by 0.05), read once each
    clock.advance_to(0.06)
    await settle()
    assert task.done() and isinstance(task.exception(), OSError)  # as a failing write in a pass ends it


def test_the_last_block_due_is_the_one_its_due_time_reaches_at_every_rounding() -> None:
    for origin in (0.0, 1234.5678, 1e6 + 0.1):
        output = ClockedOutput(VirtualClock(), origin=origin)
        output._t0 = origin
        for k in range(0, 3000, 7):
            at = origin + k * 480 / 24_000
            assert output._last_due(at) == k  # due at the instant: passed
            assert output._last_due(math.nextafter(at, -math.inf)) == k - 1
            assert output._last_due(math.nextafter(at, math.inf)) == k


async def test_a_sink_failure_on_a_wake_up_just_before_the_stop_is_logged_and_not_carried_into_the_next_run(
        caplog: pytest.LogCaptureFixture) -> None:
    clock, output, task, _queued = await _asleep_until_a_failing_wake_up()  # the wake-up's write fails
    with caplog.at_level(logging.WARNING, logger="voxline.audio.clocked_output"):
        task.cancel()  # before the next pass
        await asyncio.gather(task, return_exceptions=True)
    assert "no space left on device" in caplog.text
    output.playout.clear()
    again = asyncio.create_task(output.run())  # the output taken up again (by another session, say)
    for at in (0.06, 0.08, 0.1):
        clock.advance_to(at)
        await settle()
    assert not again.done()  # the first run's failure stayed with it
    again.cancel()
    await asyncio.gather(again, return_exceptions=True)


async def test_asleep_in_silence_the_heard_wav_on_disk_lacks_at_most_the_sinks_window_and_idle_s(tmp_path: Path) -> None:
    """What a process killed outright leaves while nothing plays: the WAV on disk at every moment."""
    from voxline.audio.sinks import WavSink
    from voxline.audio.wavio import read_wav

    clock, path = VirtualClock(), tmp_path / "heard.wav"
    with WavSink(path) as sink:
        output = ClockedOutput(clock, sink, origin=0.0)
        task = asyncio.create_task(output.run())
        await settle()
        worst = 0.0
        for k in range(1, 400):  # 8 s, 20 ms at a time
            clock.advance_to(k * 0.02)
            await settle()
            worst = max(worst, clock.now() - len(read_wav(path)[0]) / 24_000)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert 2.0 < worst <= 2.0 + IDLE_S + 0.02  # the sink's window, the sleep, and the block being read
