"""Is a barge-in's cut what the listener heard? Checked against the session's heard WAV.

The WAV is the listener's timeline (sample ``n`` heard at listener time ``n / 24000``), with
silence wherever the playout underran. Up to the cut instant it must hold exactly the reply's
audio from its start, in order, with gaps: its non-zero samples equal the reply's non-zero
samples up to some point, and that point must be where the barge-in says the listener was
(``heard_ms`` less the fade, which is heard after the cut instant). The error is the distance
in samples between the two, the smallest over a run of zeros in the reply (a cut inside a
pause could be anywhere in it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE
from voxline.session.events import BargeIn

__all__ = ["CutCheck", "check_cut"]


@dataclass(frozen=True)
class CutCheck:
    same_audio: bool  # the heard samples are the reply's, in order, gaps aside
    error_samples: int  # how far the heard end is from where the cut says the listener was


def check_cut(heard: npt.NDArray[np.int16], reply: npt.NDArray[np.int16], barge: BargeIn) -> CutCheck:
    """``heard`` is the session's WAV, ``reply`` the interrupted reply's samples (it starts the WAV's audio)."""
    fade = barge.cut.fade_samples if barge.cut is not None else 0
    said = int(round(barge.heard_ms * SAMPLE_RATE / 1000)) - fade  # reply samples heard before the cut instant
    upto = heard[: int(round(barge.at * SAMPLE_RATE))]
    got = upto[upto != 0]
    where = np.flatnonzero(reply != 0)
    if len(got) > len(where) or not np.array_equal(got, reply[where[: len(got)]]):
        return CutCheck(False, abs(said - len(upto)))
    # the heard end lies anywhere between the last matched non-zero sample and the next one
    low = int(where[len(got) - 1]) + 1 if len(got) else 0
    high = int(where[len(got)]) if len(got) < len(where) else len(reply)
    error = 0 if low <= said <= high else min(abs(said - low), abs(said - high))
    return CutCheck(True, error)
