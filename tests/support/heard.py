"""Find an assistant item's audio in a HEARD timeline by analysing the samples themselves.

The heard timeline holds the item's samples bit-exact (the playout copies them), possibly
split by underrun gaps of silence, and ending in a fade of at most 5 ms. We align the
reference (the same synthesis the server used) with the timeline and count how many of
its samples the listener got.
"""

from __future__ import annotations

import numpy as np

__all__ = ["heard_length"]

PROBE = 48  # samples that must match exactly to (re)anchor the alignment
FADE_MAX = 130  # 5 ms at 24 kHz plus rounding


def _find(heard: np.ndarray, ref: np.ndarray, j: int, start: int) -> int | None:
    """First index >= start where heard continues ref[j:j+PROBE] exactly."""
    probe = ref[j : j + PROBE]
    if len(probe) < PROBE or not probe.any():
        return None
    window = np.lib.stride_tricks.sliding_window_view(heard[start:], len(probe))
    hits = np.flatnonzero((window == probe).all(axis=1))
    return start + int(hits[0]) if len(hits) else None


def heard_length(heard: np.ndarray, ref: np.ndarray, start: int = 0) -> tuple[int, int]:
    """(onset sample in ``heard``, samples of ``ref`` heard), searching from ``start``."""
    j0 = int(np.flatnonzero(ref)[0])
    onset = _find(heard, ref, j0, start)
    if onset is None:
        return -1, 0
    i, j = onset, j0
    while j < len(ref) and i < len(heard):
        if heard[i] == ref[j]:
            i, j = i + 1, j + 1
            continue
        # mismatch: an underrun gap (silence, then the item resumes), or the cut's fade
        resume = _find(heard, ref, j, i) if not heard[i : i + 24].any() else None
        if resume is not None and resume - i < 24_000:
            i = resume
            continue
        fade = 0
        while fade < FADE_MAX and j + fade < len(ref) and i + fade < len(heard):
            h, r = int(heard[i + fade]), int(ref[j + fade])
            if h == 0 and r != 0 and not heard[i + fade : i + fade + 24].any():
                break
            if abs(h) > abs(r) + 1 or (h and r and (h > 0) != (r > 0)):
                break
            fade += 1
        j += fade
        break
    return onset - j0, j
