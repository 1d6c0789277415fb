"""What a :class:`~voxline.session.VoiceSession` plays into.

An *output* owns a :class:`~voxline.audio.playout.PlayoutBuffer` and a listener timeline:

* :class:`~voxline.audio.devices.SpeakerSink` — a sound device, timed by its DAC clock;
* :class:`ClockedOutput` — no device: a clock reads one block per 20 ms into an optional
  :class:`~voxline.audio.sinks.Sink` (a WAV file of what the listener heard, a timeline in
  memory, or nothing). Replays, kiosk tests and headless runs use it; ``latency_s`` makes
  it behave like a device that buffers that much audio ahead of the listener.

Inputs (recordings as a microphone) are in :mod:`voxline.audio.recording`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from voxline.base.arguments import clock_like, having, real, whole
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import Clock
from voxline.base.steps import run_steps
from voxline.audio.ledger import Cut
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.sinks import Sink
from voxline.audio.tick_gate import TickGate

__all__ = ["BLOCK", "ClockedOutput", "Output"]

BLOCK = 480  # 20 ms


class Output(Protocol):
    playout: PlayoutBuffer
    discard_blocks: bool
    """True when :meth:`discard_pending` may block (a device abort): the session calls it on a thread."""

    def now(self) -> float:
        """The listener's time, on the clock the playout's ledger uses."""

    def discard_pending(self, cut: Cut) -> bool:
        """Keep audio revoked by a barge-in from ever reaching the listener."""


class ClockedOutput:
    """A device-less output: one block of playout per 20 ms of ``clock`` into ``sink``.

    Listener time 0 is ``origin`` on ``clock`` (default: when :meth:`run` starts). With
    ``latency_s`` each block is handed over that long (in whole blocks) before the listener
    hears it, as a buffering device would; a barge-in then revokes what is still inside.
    """

    def __init__(self, clock: Clock, sink: Sink | None = None, *, block: int = BLOCK, origin: float | None = None,
                 latency_s: float = 0.0, playout: PlayoutBuffer | None = None) -> None:
        clock_like(clock)
        if sink is not None:
            having(sink, "sink", "a Sink (WavSink, NullSink)", "write", "apply_cut")
        if playout is not None and not isinstance(playout, PlayoutBuffer):
            raise TypeError(f"playout takes a PlayoutBuffer, not {type(playout).__name__}")
        whole(block, "block (samples per block)", low=1)
        real(latency_s, "latency_s", low=0)
        if origin is not None:
            real(origin, "origin")
        self.playout = playout if playout is not None else PlayoutBuffer()
        self._clock = clock
        self._sink = sink
        self._block = block
        self._t0 = origin
        self._ahead = int(round(latency_s * SAMPLE_RATE / block)) * block
        self._k = 0  # the next block to read
        self._buf = np.zeros(block, dtype=np.int16)
        self._silence = np.zeros(block, dtype=np.int16)
        self._silence.flags.writeable = False  # handed to the sink for a block that could only be silent
        self.discard_blocks = False  # a sink's cut is bookkeeping: no thread needed
        self.after_read: Callable[[], None] | None = None
        """Called after every pass that read blocks (a session ticks its core there, with no timer of its own)."""
        self.tick_gate: TickGate | None = None
        """With a gate, :attr:`after_read` is called only after passes at or past its ``until``."""

    def now(self) -> float:
        return 0.0 if self._t0 is None else self._clock.now() - self._t0

    def discard_pending(self, cut: Cut) -> bool:
        if self._sink is not None:
            self._sink.apply_cut(cut.at, cut.end)
        return cut.revoked_samples > 0

    async def run(self) -> None:
        """Play until cancelled.

        Block ``k`` is read once the clock reaches ``origin + k·block``; a pass that came
        late reads every block due by then at once, so a busy loop never leaves the output
        behind real time. On a real clock every output of the loop is read by the loop's stepper
        (:func:`~voxline.base.steps.run_steps`).
        """
        if self._t0 is None:
            self._t0 = self._clock.now()
        await run_steps(self._clock, self._pass, self._t0)

    def _pass(self, now: float) -> float:
        """Read the blocks due at ``now``; the time the next one is due."""
        assert self._t0 is not None
        t0, size, k = self._t0, self._block, self._k
        due = max(k, int((now - t0) * SAMPLE_RATE) // size)  # the last block due now
        buf, playout = self._buf, self.playout
        while k <= due:
            heard_at = (k * size + self._ahead) / SAMPLE_RATE
            if playout.skip_silence(size, heard_at):
                block = self._silence  # nothing pending: no read to make
            else:
                playout.read_into(buf, heard_at)
                block = buf
            if self._sink is not None:
                self._sink.write(heard_at, block)
            k += 1
        self._k = k
        after = self.after_read
        if after is not None:
            gate = self.tick_gate
            if gate is None or now - t0 >= gate.until:
                after()
        return t0 + k * size / SAMPLE_RATE
