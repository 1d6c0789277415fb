"""Two-channel recordings of a conversation: the user on one channel, what the listener heard on the other.

Full-duplex scorers (turn-taking, interruption and overlap metrics) take one file with both
sides of a call, aligned sample for sample. A replay has both: its input (int16 mono 24 kHz,
as the session captured it) and HEARD.wav, whose sample ``n`` is what the listener heard
while input sample ``n`` was captured. :func:`write_stereo` interleaves them, left the
input and right the heard audio, the shorter padded with silence, reading both a block at a
time when the input is given as a feed (an hour's recording never sits in memory whole). A
replay stopped early captured only the start of its input: the left channel holds that
start, and the file ends where the replay did.
"""

from __future__ import annotations

import os
import wave

import numpy as np
import numpy.typing as npt

from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.errors import AudioError, OutputError
from voxline.base.files import drop_stale, replaced
from voxline.audio.recording import SampleFeed, as_feed
from voxline.audio.wavio import MAX_WAV_BYTES, PathLike, WavReader

__all__ = ["write_stereo"]

BLOCK = SAMPLE_RATE  # one second a write


def write_stereo(path: PathLike, left: npt.NDArray[np.int16] | SampleFeed, right: PathLike,
                 rate: int = SAMPLE_RATE, captured: int | None = None) -> int:
    """Write ``left`` (samples, or a feed read to its end) and the mono WAV ``right`` as one 16-bit
    stereo WAV; returns its frames. ``captured`` keeps only that many samples of ``left`` (what a
    replay stopped early captured of its input)."""
    mine_feed = as_feed(left)
    with WavReader(right) as heard:
        if heard.rate != rate:
            raise AudioError(f"cannot pair {os.fspath(right)} ({heard.rate} Hz) with audio at {rate} Hz")
        mine_frames = mine_feed.frames if captured is None else max(0, min(captured, mine_feed.frames))
        frames = max(mine_frames, heard.frames)
        if 44 + 4 * frames > MAX_WAV_BYTES:  # the header's sizes are 32 bits: said before anything is written
            drop_stale(path)
            raise OutputError(f"cannot write {os.fspath(path)}: {frames / rate / 3600:.1f} hours of stereo audio "
                              f"pass the 4 GiB a WAV file holds ({MAX_WAV_BYTES // 4 / rate / 3600:.1f} hours)")
        try:
            with replaced(path) as file, wave.open(file, "wb") as out:  # whole, or not at all
                out.setnchannels(2)
                out.setsampwidth(2)
                out.setframerate(rate)
                out.setnframes(frames)  # the header is right from the start: no seek back (a pipe takes it)
                for start in range(0, frames, BLOCK):
                    n = min(BLOCK, frames - start)
                    block = np.zeros((n, 2), dtype="<i2")
                    try:  # a reading's failure is the input's, not this file's
                        mine = mine_feed.read(max(0, min(n, mine_frames - start)))
                        theirs = heard.read(n)
                    except OSError as error:
                        raise AudioError(f"cannot read the audio to pair in {os.fspath(path)}: "
                                         f"{error.strerror or error}") from error
                    block[: len(mine), 0] = mine
                    block[: len(theirs), 1] = theirs
                    out.writeframesraw(block.tobytes())  # no header patch after each block: a pipe takes no seek
        except BrokenPipeError:
            raise  # stdout's reader went away: nothing to tell it (the command ends quietly)
        except OSError as error:
            drop_stale(path)  # a last run's pair would pass for this run's
            raise OutputError(f"cannot write {os.fspath(path)}: {error.strerror or error}") from error
    return frames
