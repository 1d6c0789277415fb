"""What a :class:`~voxline.session.VoiceSession` plays into.

An *output* owns a :class:`~voxline.audio.playout.PlayoutBuffer` and a listener timeline:

* :class:`~voxline.audio.devices.SpeakerSink` — a sound device, timed by its DAC clock;
* :class:`ClockedOutput` — no device: a clock reads one block per 20 ms into an optional
  :class:`~voxline.audio.sinks.Sink` (a WAV file of what the listener heard, a timeline in
  memory, or nothing). Replays, kiosk tests and headless runs use it; ``latency_s`` makes
  it behave like a device that buffers that much audio ahead of the listener. While nothing
  can play it reads nothing and sleeps (at most ``idle_s``), until audio is queued or its
  tick is due; the silence it slept through reaches the sink when it wakes.

Inputs (recordings as a microphone) are in :mod:`voxline.audio.recording`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Protocol

import numpy as np

from voxline.base.arguments import clock_like, having, real, whole
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.clock import Clock
from voxline.base.steps import Alarm, run_steps
from voxline.audio.ledger import Cut
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.sinks import Sink
from voxline.audio.tick_gate import TickGate

__all__ = ["BLOCK", "IDLE_S", "ClockedOutput", "Output"]

BLOCK = 480  # 20 ms

IDLE_S = 0.2
"""The longest a :class:`ClockedOutput` with nothing to play goes without a pass: its sink has the
silence up to at most this long ago (a killed process's WAV lacks this much more than the sink's own
window), and a session's ticks in silence come at least this often."""

_log = logging.getLogger(__name__)

_SILENCE_BLOCKS = 50  # the silence handed to a sink in one write after a sleep: a second, at most


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
                 latency_s: float = 0.0, playout: PlayoutBuffer | None = None, idle_s: float = IDLE_S) -> None:
        clock_like(clock)
        if sink is not None:
            having(sink, "sink", "a Sink (WavSink, NullSink)", "write", "apply_cut")
        if playout is not None and not isinstance(playout, PlayoutBuffer):
            raise TypeError(f"playout takes a PlayoutBuffer, not {type(playout).__name__}")
        whole(block, "block (samples per block)", low=1)
        real(latency_s, "latency_s", low=0)
        real(idle_s, "idle_s", low=0)
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
        self._silence = np.zeros(block * _SILENCE_BLOCKS, dtype=np.int16)
        self._silence.flags.writeable = False  # handed to the sink for blocks that could only be silent
        self._silent_block = self._silence[:block]
        self._idle_s = idle_s  # 0: a pass every block, whatever plays
        self._alarm = Alarm()
        self._asleep = False  # the last pass asked for a later one than the next block: nothing could play
        self._failure: Exception | None = None  # the sink's, on a wake-up: raised by the next pass
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
        self._failure = None
        playout = self.playout
        playout.before_change = self._wake
        try:
            await run_steps(self._clock, self._pass, self._t0, self._alarm)
        finally:
            if playout.before_change == self._wake:
                playout.before_change = None
            gate = self.tick_gate
            if gate is not None and gate.on_lower == self._gate_lowered:
                gate.on_lower = None
            failure, self._failure = self._failure, None
            if self._asleep:  # the silence slept through, every block due by now (as a pass now would), for the sink
                self._asleep = False
                try:
                    self._read(self._last_due(self._clock.now()))
                except Exception as exc:  # (a full disk): the sink's own close reports it; the stop goes on
                    failure = failure or exc
            if failure is not None:  # stopped before a pass could raise it
                _log.warning("the output's silence did not reach its sink: %s", failure)

    def _pass(self, now: float) -> float:
        """Read the blocks due at ``now``; the time the next one is due (later while nothing can play)."""
        assert self._t0 is not None
        self._asleep = False
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure  # the sink failed on a wake-up: the output ends with it, as it would in a pass
        silent = self._read(self._last_due(now))
        t0, size, k = self._t0, self._block, self._k
        after, gate = self.after_read, self.tick_gate
        if after is not None and (gate is None or now - t0 >= gate.until):
            after()
        if silent and self._idle_s and self._alarm.armed and self.playout.idle:
            wake = now - t0 + self._idle_s  # in listener time, as the gate's
            if after is not None:
                if gate is None:
                    wake = -math.inf  # a call after every pass
                else:
                    wake = min(wake, gate.until)
                    if gate.on_lower != self._gate_lowered:
                        gate.on_lower = self._gate_lowered
            later = self._first_block_at(wake)
            if later > k:
                self._asleep = True
                return t0 + later * size / SAMPLE_RATE
        return t0 + k * size / SAMPLE_RATE

    def _read(self, due: int) -> bool:
        """Blocks ``_k`` to ``due``: at once as silence if nothing can play (after a sleep, say), else one by one.
        True if the last block read could only be silent. Each block counts as read before the sink has it, so a
        sink that fails leaves the next read where the playout's is."""
        size, k = self._block, self._k
        if due < k:
            return False
        buf, playout, sink = self._buf, self.playout, self._sink
        if due > k and playout.skip_silence((due + 1 - k) * size, (k * size + self._ahead) / SAMPLE_RATE):
            self._k = due + 1
            if sink is not None:  # nothing pending: no read to make
                silence = self._silence
                for first in range(k, due + 1, _SILENCE_BLOCKS):
                    count = min(_SILENCE_BLOCKS, due + 1 - first)
                    sink.write((first * size + self._ahead) / SAMPLE_RATE, silence[:count * size])
            return True
        silent = False
        while k <= due:
            heard_at = (k * size + self._ahead) / SAMPLE_RATE
            silent = playout.skip_silence(size, heard_at)
            if silent:
                block = self._silent_block  # nothing pending: no read to make
            else:
                playout.read_into(buf, heard_at)
                block = buf
            k += 1
            self._k = k
            if sink is not None:
                sink.write(heard_at, block)
        return silent

    def _wake(self) -> None:
        """Before the playout changes: if asleep, the sink gets the silence of every block due by now, and the next
        block is read when due: audio queued now starts there, as it does for a pass every block. (At the very
        instant a block is due, a pass every block plays it from that block if its queuing woke before the pass,
        which wake-ups in the same instant decide; asleep, the block due then counts as passed.)"""
        if not self._asleep:
            return
        assert self._t0 is not None
        self._asleep = False
        try:
            self._read(self._last_due(self._clock.now()))
        except Exception as exc:  # never into the caller queuing audio: the next pass raises it
            self._failure = exc
        finally:
            self._alarm.ring(self._t0 + self._k * self._block / SAMPLE_RATE)

    def _gate_lowered(self, until: float) -> None:
        """The session's tick comes sooner: if asleep, the pass at or after it (the next block's at the earliest;
        a block due this very instant counts as passed, as in :meth:`_wake`)."""
        if self._asleep:
            assert self._t0 is not None
            later = max(self._k, self._last_due(self._clock.now()) + 1, self._first_block_at(until))
            self._alarm.ring(self._t0 + later * self._block / SAMPLE_RATE)

    def _last_due(self, now: float) -> int:
        """The last block due by ``now`` on the clock, as its due time (``origin + k·block``) rounds; -1 if none."""
        assert self._t0 is not None
        t0, size = self._t0, self._block
        block = int((now - t0) * SAMPLE_RATE) // size
        while block >= 0 and t0 + block * size / SAMPLE_RATE > now:
            block -= 1  # rounding put it a block late (at most one step)
        while t0 + (block + 1) * size / SAMPLE_RATE <= now:
            block += 1  # or a block short
        return block

    def _first_block_at(self, listener: float) -> int:
        """The first block whose pass comes at or after listener time ``listener`` (as a pass compares it)."""
        if listener == -math.inf:
            return 0
        assert self._t0 is not None
        t0, size = self._t0, self._block
        block = max(0, math.ceil(listener * SAMPLE_RATE / size))
        if block and (t0 + (block - 1) * size / SAMPLE_RATE) - t0 >= listener:
            block -= 1  # rounding put it one block late
        elif (t0 + block * size / SAMPLE_RATE) - t0 < listener:
            block += 1  # or one early
        return block
