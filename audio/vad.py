"""Energy voice activity detection, streaming and deterministic.

:class:`EnergyVad` consumes PCM16 mono blocks (``numpy.int16``) of any length and
reports :class:`SpeechStart` / :class:`SpeechStop` in **buffer time**: positions
are sample indices counted from the first sample ever fed, so the result does not
depend on how the signal was cut into blocks, nor on wall-clock time.

The signal is measured in fixed 10 ms frames aligned to sample 0. A frame's level
is its RMS in dBFS (full scale = 32768). The ``threshold`` knob (0..1, as in the
Realtime API's ``server_vad``) maps linearly onto an onset level::

    onset_dbfs = -70 + 60 * threshold        # 0.0 → -70 dBFS, 0.5 → -40 dBFS, 1.0 → -10 dBFS

Speech starts after ``min_speech_ms`` of consecutive frames at or above the onset
level; the onset is the first of those frames. While speaking, a frame counts as
voiced when it is at or above ``onset_dbfs - hysteresis_db`` (quieter word endings
do not end the turn). Speech stops once ``silence_duration_ms`` of unvoiced frames
have followed the last voiced frame.

Reported positions follow the Realtime API's conventions:
``SpeechStart.start = max(0, onset - prefix_padding)`` (the audio sent to the
model includes the padding) and ``SpeechStop.end = last voiced sample + silence
duration`` (the position at which the stop is detected).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voxline.base.audio_format import SAMPLE_RATE

__all__ = ["EnergyVad", "SpeechStart", "SpeechStop", "VadEvent", "threshold_to_dbfs"]

_FULL_SCALE = 32768.0


def threshold_to_dbfs(threshold: float) -> float:
    """Onset level in dBFS for a ``server_vad`` threshold in 0..1 (clamped)."""
    t = min(1.0, max(0.0, float(threshold)))
    return -70.0 + 60.0 * t


@dataclass(frozen=True, slots=True)
class SpeechStart:
    """Speech began: ``onset`` is the first loud sample, ``start`` includes the prefix padding."""

    onset: int
    start: int


@dataclass(frozen=True, slots=True)
class SpeechStop:
    """Speech ended: ``end`` is where the stop was detected, ``last_voiced`` the end of the last voiced frame."""

    end: int
    last_voiced: int


VadEvent = SpeechStart | SpeechStop


def _energy_at(dbfs: float, frame: int) -> float:
    """The sum of squared samples of a ``frame``-sample frame whose RMS is ``dbfs``."""
    return float(frame * (_FULL_SCALE * 10.0 ** (dbfs / 20.0)) ** 2)


class EnergyVad:
    """Streaming energy detector working in buffer time (see the module docstring)."""

    def __init__(
        self,
        *,
        sample_rate: int = SAMPLE_RATE,
        threshold: float = 0.5,
        prefix_padding_ms: int = 300,
        silence_duration_ms: int = 500,
        min_speech_ms: int = 30,
        hysteresis_db: float = 6.0,
        frame_ms: int = 10,
    ) -> None:
        if sample_rate <= 0 or frame_ms <= 0:
            raise ValueError("sample_rate and frame_ms must be positive")
        self.sample_rate = sample_rate
        self.frame = sample_rate * frame_ms // 1000
        self.frame_ms = frame_ms
        self.min_speech_ms = min_speech_ms
        self.hysteresis_db = hysteresis_db
        self.configure(
            threshold=threshold, prefix_padding_ms=prefix_padding_ms, silence_duration_ms=silence_duration_ms
        )
        self._pending = np.zeros(0, dtype=np.int16)
        self._position = 0  # samples measured so far (whole frames)
        self._fed = 0  # samples fed, including a partial frame
        self.reset()

    def configure(self, *, threshold: float, prefix_padding_ms: int, silence_duration_ms: int) -> None:
        """Change the knobs; takes effect from the next frame."""
        self.threshold = threshold
        self.onset_dbfs = threshold_to_dbfs(threshold)
        self.prefix_padding = max(0, int(prefix_padding_ms)) * self.sample_rate // 1000
        self.silence_frames = max(1, -(-max(0, int(silence_duration_ms)) // self.frame_ms))
        self.onset_frames = max(1, -(-max(0, int(self.min_speech_ms)) // self.frame_ms))
        # A frame is at or above a level L dBFS when its sum of squares reaches frame * (32768 * 10^(L/20))^2.
        self._loud_energy = _energy_at(self.onset_dbfs, self.frame)
        self._voiced_energy = _energy_at(self.onset_dbfs - self.hysteresis_db, self.frame)

    def reset(self) -> None:
        """Forget any speech in progress; the buffer-time position is kept."""
        self._speaking = False
        self._loud_run = 0
        self._loud_start = 0
        self._quiet_run = 0
        self._last_voiced = 0

    @property
    def position(self) -> int:
        """Samples fed so far (buffer time)."""
        return self._fed

    @property
    def speaking(self) -> bool:
        return self._speaking

    def process(self, block: np.ndarray) -> list[VadEvent]:
        """Feed one block of int16 samples; return the events it completes, in order.

        The frames' energies are exact integers (numpy, the whole block at once) compared with
        thresholds precomputed from the dBFS levels; the state machine then steps through them one
        frame at a time in plain Python (a few comparisons a frame: cheaper than finding runs of
        loud or voiced frames with numpy, for an append's four frames and for a minute's 6,000).
        """
        samples = np.asarray(block, dtype=np.int16).reshape(-1)
        self._fed += samples.size
        data = np.concatenate((self._pending, samples)) if self._pending.size else samples
        whole = data.size - data.size % self.frame
        self._pending = data[whole:].copy() if whole < data.size else _NO_SAMPLES
        if whole == 0:
            return []
        frames = data[:whole].reshape(-1, self.frame).astype(np.int64)
        energy = np.add.reduce(frames * frames, axis=1)
        return self._step(energy.tolist())

    def _step(self, energies: list[int]) -> list[VadEvent]:
        """Advance the state machine one frame at a time over the frames' energies."""
        frame = self.frame
        base = self._position
        self._position = base + len(energies) * frame
        loud_energy, voiced_energy = self._loud_energy, self._voiced_energy
        events: list[VadEvent] = []
        for k, energy in enumerate(energies):
            if not self._speaking:
                if energy < loud_energy:
                    self._loud_run = 0
                    continue
                if self._loud_run == 0:
                    self._loud_start = base + k * frame
                self._loud_run += 1
                if self._loud_run < self.onset_frames:
                    continue
                self._speaking = True
                self._quiet_run = 0
                self._last_voiced = base + (k + 1) * frame
                onset = self._loud_start
                events.append(SpeechStart(onset=onset, start=max(0, onset - self.prefix_padding)))
            elif energy >= voiced_energy:
                self._quiet_run = 0
                self._last_voiced = base + (k + 1) * frame
            else:
                self._quiet_run += 1
                if self._quiet_run >= self.silence_frames:
                    self._speaking = False
                    self._loud_run = 0
                    events.append(SpeechStop(end=base + (k + 1) * frame, last_voiced=self._last_voiced))
        return events


_NO_SAMPLES = np.zeros(0, dtype=np.int16)
