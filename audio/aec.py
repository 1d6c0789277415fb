"""Acoustic echo cancellation: the microphone minus what the speaker put into it.

An echo canceller is a plain synchronous DSP object::

    aec = make_canceller("webrtc")                  # or "speex"
    clean = aec.process(mic_block, ref_block)      # int16 in, int16 out, same length

``ref_block`` is what reached the listener over the same listener samples as ``mic_block``
(:class:`~voxline.audio.reference.PlayedRing` gives it); the echo arrives later than the
reference, within the canceller's reach (delay estimation in AEC3, the filter length in
Speex). Blocks of any length are cut into 10 ms frames; a partial frame waits for the next
call, so the output lags the input by less than one frame only when block lengths are not
multiples of 10 ms (the session's 20 ms blocks are).

Backends:

* ``webrtc`` — WebRTC's AEC3 through the ``pywebrtc-audio`` wheel (the ``voxline[aec]``
  extra), run at 48 kHz (it takes 16, 32 or 48 kHz) with the 24 kHz signal upsampled by soxr;
* ``speex`` — Speex's MDF canceller through ctypes over the system's ``libspeexdsp``
  (Debian ``libspeexdsp1``), at 24 kHz, with its residual-echo suppressor.

**A canceller stands aside where there is nothing to cancel.** AEC3 suppresses the start of
the user's voice while the assistant plays even when the microphone hears none of it
(headphones): a barge-in then reaches the server 120–240 ms late. :func:`make_canceller`
therefore wraps the backend in a :class:`GatedCanceller`, which runs it on every block (its
filter stays adapted) but hands back the microphone itself while an
:class:`~voxline.audio.echo_path.EchoPathMonitor` finds no echo path, and the canceller's
output while there is one or while it is not known yet (nothing has played); a change of
decision is cross-faded over one block.

A missing backend raises :class:`AecUnavailable` with a one-line reason.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.errors import AudioError

from .echo_path import EchoPathMonitor

__all__ = ["AecUnavailable", "EchoCanceller", "GatedCanceller", "SpeexCanceller", "WebRtcCanceller", "erle_db",
           "make_canceller", "BACKENDS"]

Samples = npt.NDArray[np.int16]
FRAME = SAMPLE_RATE // 100  # 10 ms
BACKENDS = ("webrtc", "speex")


class AecUnavailable(AudioError):
    """The echo canceller asked for cannot be loaded here."""


class EchoCanceller(Protocol):
    name: str

    def process(self, mic: Samples, ref: Samples) -> Samples:
        """The microphone block with the echo of ``ref`` removed (same length)."""

    def reset(self) -> None:
        """Forget the echo path (the filter restarts converging)."""


class _Framed:
    """Cuts blocks into 10 ms frames for ``_frame``; keeps a partial frame for the next call."""

    name = "?"

    def __init__(self) -> None:
        self._mic = np.zeros(0, dtype=np.int16)
        self._ref = np.zeros(0, dtype=np.int16)
        self._ready = np.zeros(0, dtype=np.int16)

    def process(self, mic: Samples, ref: Samples) -> Samples:
        mic = np.asarray(mic, dtype=np.int16)
        ref = np.asarray(ref, dtype=np.int16)
        if mic.ndim != 1 or ref.shape != mic.shape:
            raise ValueError(f"mic and ref must be 1-D blocks of one length, got {mic.shape} and {ref.shape}")
        m = np.concatenate([self._mic, mic]) if len(self._mic) else mic
        r = np.concatenate([self._ref, ref]) if len(self._ref) else ref
        whole = len(m) // FRAME * FRAME
        outs = [self._frame(m[i : i + FRAME], r[i : i + FRAME]) for i in range(0, whole, FRAME)]
        self._mic, self._ref = m[whole:].copy(), r[whole:].copy()
        done = np.concatenate([self._ready, *outs]) if outs else self._ready
        # hand back exactly len(mic) samples: pad the first call's shortfall with silence
        if len(done) < len(mic):
            done = np.concatenate([np.zeros(len(mic) - len(done), dtype=np.int16), done])
        out, self._ready = done[: len(mic)], done[len(mic) :]
        return out

    def _frame(self, mic: Samples, ref: Samples) -> Samples:
        raise NotImplementedError


class WebRtcCanceller(_Framed):
    """AEC3 (``pywebrtc-audio``) at 48 kHz around the 24 kHz signal."""

    name = "webrtc"

    def __init__(self, *, noise_suppression: bool = False) -> None:
        super().__init__()
        try:
            import pywebrtc_audio
        except ImportError:
            raise AecUnavailable("echo cancellation 'webrtc' needs pywebrtc-audio: pip install 'voxline[aec]' (in a clone: uv run --no-dev --extra aec voxline …)") from None
        import soxr

        self._ns = noise_suppression
        self._make: Callable[[], Any] = lambda: pywebrtc_audio.AudioProcessor(sample_rate=48000, echo_cancellation=True,
                                                           noise_suppression=noise_suppression)
        self._apm = self._make()
        self._up_mic = soxr.ResampleStream(SAMPLE_RATE, 48000, 1, dtype="int16", quality="QQ")
        self._up_ref = soxr.ResampleStream(SAMPLE_RATE, 48000, 1, dtype="int16", quality="QQ")
        self._down = soxr.ResampleStream(48000, SAMPLE_RATE, 1, dtype="int16", quality="QQ")
        self._pending_mic = np.zeros(0, dtype=np.int16)
        self._pending_ref = np.zeros(0, dtype=np.int16)
        self._back = np.zeros(0, dtype=np.int16)

    def _frame(self, mic: Samples, ref: Samples) -> Samples:
        self._pending_mic = np.concatenate([self._pending_mic, self._up_mic.resample_chunk(mic)])
        self._pending_ref = np.concatenate([self._pending_ref, self._up_ref.resample_chunk(ref)])
        outs = []
        while len(self._pending_mic) >= 480 and len(self._pending_ref) >= 480:
            outs.append(np.asarray(self._apm.process(self._pending_mic[:480], self._pending_ref[:480]),
                                   dtype=np.int16))
            self._pending_mic, self._pending_ref = self._pending_mic[480:], self._pending_ref[480:]
        if outs:
            self._back = np.concatenate([self._back, self._down.resample_chunk(np.concatenate(outs))])
        out = self._back[:FRAME]
        self._back = self._back[FRAME:]
        if len(out) < FRAME:  # the resamplers' start-up delay
            out = np.concatenate([np.zeros(FRAME - len(out), dtype=np.int16), out])
        return out

    def reset(self) -> None:
        self._apm = self._make()


class _SpeexLib:
    _lib: ctypes.CDLL | None = None

    @classmethod
    def load(cls) -> ctypes.CDLL:
        if cls._lib is None:
            name = ctypes.util.find_library("speexdsp") or "libspeexdsp.so.1"
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                raise AecUnavailable("echo cancellation 'speex' needs the system libspeexdsp "
                                     "(Debian: apt-get install libspeexdsp1)") from None
            lib.speex_echo_state_init.restype = ctypes.c_void_p
            lib.speex_echo_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
            lib.speex_echo_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
            lib.speex_echo_cancellation.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                                    ctypes.c_void_p]
            lib.speex_echo_state_destroy.argtypes = [ctypes.c_void_p]
            lib.speex_echo_state_reset.argtypes = [ctypes.c_void_p]
            lib.speex_preprocess_state_init.restype = ctypes.c_void_p
            lib.speex_preprocess_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
            lib.speex_preprocess_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
            lib.speex_preprocess_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            lib.speex_preprocess_state_destroy.argtypes = [ctypes.c_void_p]
            cls._lib = lib
        return cls._lib


_SPEEX_ECHO_SET_SAMPLING_RATE = 24
_SPEEX_PREPROCESS_SET_ECHO_STATE = 24
_SPEEX_PREPROCESS_SET_DENOISE = 0


class SpeexCanceller(_Framed):
    """Speex MDF echo canceller + residual echo suppression (ctypes over ``libspeexdsp``)."""

    name = "speex"

    def __init__(self, *, filter_ms: float = 250.0) -> None:
        super().__init__()
        self._echo: int | None = None
        self._pre: int | None = None
        self._lib = _SpeexLib.load()
        self._taps = int(filter_ms * SAMPLE_RATE / 1000)
        self._open()

    def _open(self) -> None:
        lib = self._lib
        self._echo = lib.speex_echo_state_init(FRAME, self._taps)
        rate = ctypes.c_int(SAMPLE_RATE)
        lib.speex_echo_ctl(self._echo, _SPEEX_ECHO_SET_SAMPLING_RATE, ctypes.byref(rate))
        self._pre = lib.speex_preprocess_state_init(FRAME, SAMPLE_RATE)
        off = ctypes.c_int(0)
        lib.speex_preprocess_ctl(self._pre, _SPEEX_PREPROCESS_SET_DENOISE, ctypes.byref(off))
        lib.speex_preprocess_ctl(self._pre, _SPEEX_PREPROCESS_SET_ECHO_STATE, ctypes.c_void_p(self._echo))

    def _frame(self, mic: Samples, ref: Samples) -> Samples:
        mic = np.ascontiguousarray(mic)
        ref = np.ascontiguousarray(ref)
        out = np.empty(FRAME, dtype=np.int16)
        self._lib.speex_echo_cancellation(self._echo, mic.ctypes.data, ref.ctypes.data, out.ctypes.data)
        self._lib.speex_preprocess_run(self._pre, out.ctypes.data)
        return out

    def reset(self) -> None:
        self._close()
        self._open()

    def _close(self) -> None:
        if self._pre is not None:
            self._lib.speex_preprocess_state_destroy(self._pre)
            self._pre = None
        if self._echo is not None:
            self._lib.speex_echo_state_destroy(self._echo)
            self._echo = None

    def __del__(self) -> None:
        if getattr(self, "_lib", None) is not None:
            self._close()


class GatedCanceller:
    """``inner`` where the microphone hears the speaker, the microphone itself where it does not.

    See the module docstring. :attr:`echo_path` is the monitor's decision (``None``: not known yet).
    """

    def __init__(self, inner: EchoCanceller, monitor: EchoPathMonitor | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.monitor = monitor if monitor is not None else EchoPathMonitor()
        self._passing = False  # handing back the microphone itself
        self.switches = 0

    @property
    def echo_path(self) -> bool | None:
        return self.monitor.echo

    def process(self, mic: Samples, ref: Samples) -> Samples:
        mic = np.asarray(mic, dtype=np.int16)
        cleaned = self.inner.process(mic, ref)  # always: its filter stays adapted for when an echo appears
        passing = self.monitor.feed(mic, np.asarray(ref, dtype=np.int16)) is False
        if passing == self._passing:
            return mic.copy() if passing else cleaned
        self._passing = passing
        self.switches += 1
        old, new = (cleaned, mic) if passing else (mic, cleaned)
        ramp = (np.arange(len(mic)) + 0.5) / max(1, len(mic))
        return np.rint(old * (1.0 - ramp) + new * ramp).astype(np.int16)

    def reset(self) -> None:
        self.inner.reset()
        self.monitor.reset()
        self._passing = False


def make_canceller(name: str, *, gated: bool = True) -> EchoCanceller:
    """An echo canceller by backend name (``webrtc`` or ``speex``); :class:`AecUnavailable` if it cannot load.

    ``gated`` (the default) wraps it in a :class:`GatedCanceller`; ``gated=False`` is the bare
    backend, which processes every block whether or not there is an echo.
    """
    inner: EchoCanceller
    match name:
        case "webrtc":
            inner = WebRtcCanceller()
        case "speex":
            inner = SpeexCanceller()
        case _:
            raise AecUnavailable(f"unknown echo canceller {name!r}: choose one of {', '.join(BACKENDS)}")
    return GatedCanceller(inner) if gated else inner


def erle_db(echo: npt.ArrayLike, residual: npt.ArrayLike) -> float:
    """Echo return loss enhancement: echo power over residual power, in dB."""
    e = np.asarray(echo, dtype=np.float64)
    r = np.asarray(residual, dtype=np.float64)
    return float(10.0 * np.log10((np.sum(e * e) + 1e-9) / (np.sum(r * r) + 1e-9)))
