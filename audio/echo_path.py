"""Is there an echo path from the speaker to the microphone? Measured, not assumed.

:class:`EchoPathMonitor` is a plain synchronous DSP object. It is fed the microphone and the
reference (what reached the listener over the same listener samples, as the canceller is)
block by block, and says whether the microphone hears the speaker:

* ``None`` — not known yet (nothing loud enough has played since the start);
* ``True`` — an echo path: the microphone correlates with what played, at a gain that a voice
  activity detector could mistake for the user;
* ``False`` — none worth cancelling (headphones, a muted speaker, a microphone in another room).

How: both signals are taken to 8 kHz (mean of three samples) and pre-emphasised (a first
order whitening, the same filter on both, so the echo path between them is unchanged). Every
``hop_ms`` a window of ``window_ms`` of microphone is cross-correlated (one FFT) with the
reference at every lag from ``-10`` ms to ``max_delay_ms``; divided by the reference's
energy at each lag it is the least-squares gain of the path at that lag, and divided by both
energies the normalised correlation. Only windows over which the reference played at every
lag (power at least ``active_dbfs``) count:

* a window whose best lag correlates at least ``rho_echo`` with a gain of at least
  ``echo_db`` is an echo path at once (from any state);
* a window in which the gain stays below ``none_db`` *at every lag* is a vote for no echo
  path (its largest value includes the estimate's noise, so a microphone full of the user's
  own voice, which hides a weak path, never votes); ``votes`` votes in a row decide "none";
* anything else resets the votes and keeps the decision.

So the decision needs the far end to have played for about ``window_ms + votes · hop_ms``,
goes to "echo" within a window when an echo appears (a headset unplugged), and never goes to
"none" while the path's gain could be above ``none_db``. Work per block is bounded: three FFTs
of 8192 points per hop.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE

__all__ = ["EchoPathMonitor"]

Samples = npt.NDArray[np.int16]
_DECIMATE = 3
_RATE = SAMPLE_RATE // _DECIMATE  # 8 kHz
_LEAD = _RATE // 100  # lags down to -10 ms: device time stamps may place the echo a little early


class EchoPathMonitor:
    """Measures the speaker-to-microphone coupling (see the module docstring)."""

    def __init__(self, *, window_ms: int = 400, hop_ms: int = 100, max_delay_ms: int = 500, votes: int = 2,
                 rho_echo: float = 0.3, echo_db: float = -30.0, none_db: float = -35.0,
                 active_dbfs: float = -50.0) -> None:
        if not (0 < hop_ms <= window_ms and max_delay_ms > 0 and votes > 0 and none_db <= echo_db):
            raise ValueError("EchoPathMonitor needs 0 < hop_ms <= window_ms, max_delay_ms > 0, votes > 0 and "
                             "none_db <= echo_db")
        self._w = window_ms * _RATE // 1000
        self._hop = hop_ms * _RATE // 1000
        self._max_delay = max_delay_ms * _RATE // 1000
        self._lags = self._max_delay + _LEAD
        self._votes_needed = votes
        self._rho_echo = rho_echo
        self._echo_gain = 10.0 ** (echo_db / 20.0)
        self._none_gain = 10.0 ** (none_db / 20.0)
        self._active = (10.0 ** (active_dbfs / 20.0) * 32768.0) ** 2
        # a circular correlation of that size wraps nothing: n + k < window + lags for every lag read
        self._size = 1 << int(np.ceil(np.log2(self._w + self._lags)))
        self.reset()

    def reset(self) -> None:
        """Forget what was measured: the decision is unknown again."""
        # the microphone, 8 kHz, whitened: a window, then the last 10 ms (the window ends that early so
        # that lags down to -10 ms find reference to compare with); the reference, lags further back
        self._mic = np.zeros(self._w + _LEAD, dtype=np.float64)
        self._ref = np.zeros(self._w + self._lags, dtype=np.float64)
        self._filled = 0
        self._since = 0  # decimated samples since the last evaluation
        self._rest_mic = np.zeros(0, dtype=np.float64)  # 24 kHz samples short of a whole 8 kHz one
        self._rest_ref = np.zeros(0, dtype=np.float64)
        self._last = (0.0, 0.0)  # the previous decimated sample of each, for the whitening
        self._votes = 0
        self.echo: bool | None = None
        self.gain_db: float | None = None  # the path's gain at the best lag of the last window that counted
        self.delay_ms: float | None = None  # and that lag
        self.path_delay_ms: float | None = None  # that lag in the last window that found the echo path
        self.windows = 0  # windows that counted

    def feed(self, mic: Samples, ref: Samples) -> bool | None:
        """One block of microphone and its reference (same length) → the decision so far."""
        if len(mic) != len(ref):
            raise ValueError(f"mic and ref must be blocks of one length, got {len(mic)} and {len(ref)}")
        m = self._decimate(np.concatenate([self._rest_mic, np.asarray(mic, dtype=np.float64)]), 0)
        r = self._decimate(np.concatenate([self._rest_ref, np.asarray(ref, dtype=np.float64)]), 1)
        n = len(m)
        if n:
            self._push(m, r)
            self._filled = min(self._filled + n, len(self._ref))
            self._since += n
            if self._since >= self._hop and self._filled >= len(self._ref):
                self._since = 0
                self._evaluate()
        return self.echo

    def _decimate(self, x: npt.NDArray[np.float64], which: int) -> npt.NDArray[np.float64]:
        whole = len(x) // _DECIMATE * _DECIMATE
        rest = x[whole:].copy()
        if which == 0:
            self._rest_mic = rest
        else:
            self._rest_ref = rest
        d: npt.NDArray[np.float64] = x[:whole].reshape(-1, _DECIMATE).mean(axis=1)
        if not len(d):
            return d
        previous = self._last[which]
        out: npt.NDArray[np.float64] = d - 0.9 * np.concatenate([[previous], d[:-1]])
        self._last = (d[-1], self._last[1]) if which == 0 else (self._last[0], d[-1])
        return out

    def _push(self, m: npt.NDArray[np.float64], r: npt.NDArray[np.float64]) -> None:
        for ring, x in ((self._mic, m), (self._ref, r)):
            k = min(len(x), len(ring))
            ring[:-k] = ring[k:]
            ring[-k:] = x[-k:]

    def _evaluate(self) -> None:
        w, size = self._w, self._size
        m, s = self._mic[:w], self._ref
        # energy of the reference under the window at each lag k (reference index k … k + w)
        cum = np.concatenate([[0.0], np.cumsum(s * s)])
        e_ref = cum[w:] - cum[: len(s) - w + 1]
        if e_ref.min() < w * self._active * 0.1:  # pre-emphasis leaves about a tenth of a voice's power
            return
        self.windows += 1
        # c[k] = sum_n m[n] s[n + k]: the microphone against the reference max_delay - k samples earlier
        corr = np.fft.irfft(np.conj(np.fft.rfft(m, size)) * np.fft.rfft(s, size), size)[: len(e_ref)]
        gain = np.abs(corr) / e_ref
        rho = np.abs(corr) / np.sqrt(e_ref * max(float(np.dot(m, m)), 1e-9))
        best = int(np.argmax(rho))
        self.gain_db = float(20.0 * np.log10(max(gain[best], 1e-9)))
        self.delay_ms = (self._max_delay - best) * 1000.0 / _RATE
        if rho[best] >= self._rho_echo and gain[best] >= self._echo_gain:
            self.echo, self._votes = True, 0
            self.path_delay_ms = self.delay_ms  # a window of double talk finds some lag, not this one
        elif float(gain.max()) < self._none_gain:
            self._votes += 1
            if self._votes >= self._votes_needed:
                self.echo = False
        else:
            self._votes = 0
