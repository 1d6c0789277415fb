"""The device-less output reads one block per 20 ms and catches up after a late wake-up."""

from __future__ import annotations

import asyncio

import numpy as np

from voxline.base.clock import VirtualClock
from voxline.audio.clocked_output import ClockedOutput


class Blocks:
    """A sink that keeps the listener time of each block written."""

    def __init__(self) -> None:
        self.at: list[float] = []

    def write(self, t: float, samples: np.ndarray) -> None:
        self.at.append(round(t, 6))

    def apply_cut(self, at: float, end: float) -> None:
        pass


async def test_a_late_wake_up_reads_every_block_due_at_once() -> None:
    clock = VirtualClock()
    sink = Blocks()
    output = ClockedOutput(clock, sink, origin=0.0)
    task = asyncio.create_task(output.run())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sink.at == [0.0]  # block 0 at once
    clock.advance(0.1)  # one wake-up, 80 ms late for block 1
    await asyncio.sleep(0)  # the output runs once
    assert sink.at == [0.0, 0.02, 0.04, 0.06, 0.08, 0.1]  # in one pass: no block waits for another turn of the loop
    assert clock.next_deadline() == 0.12
    clock.advance(0.02)
    await asyncio.sleep(0)
    assert sink.at[-1] == 0.12 and len(sink.at) == 7
    task.cancel()
