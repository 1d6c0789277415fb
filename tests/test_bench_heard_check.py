"""The concurrent benchmark's check of a cut against the heard WAV finds a cut off what was heard."""

from __future__ import annotations

import numpy as np

from benchmarks.heard_check import check_cut
from voxline.audio.ledger import Cut
from voxline.session.events import BargeIn

RATE = 24_000


def _barge(at: float, heard_samples: int, fade: int = 0) -> BargeIn:
    cut = Cut("item_1", 0, heard_samples, 10 * RATE, True, at, at + fade / RATE, fade, 0, 0, 0)
    return BargeIn("server_vad", at, "item_1", heard_samples * 1000 / RATE, 10_000.0, heard_samples * 1000 // RATE,
                   (), True, 0.0, cut=cut)


def _reply() -> np.ndarray:
    reply = (np.arange(4 * RATE) % 300 + 1).astype(np.int16)
    reply[RATE: RATE + 2400] = 0  # a pause of 100 ms
    return reply


def test_a_cut_where_the_listener_was_is_exact_with_gaps() -> None:
    reply = _reply()
    start, heard = 4800, 2 * RATE  # the reply starts 200 ms in; 2 s of it heard before the cut
    wav = np.zeros(4 * RATE, np.int16)
    wav[start: start + RATE] = reply[:RATE]
    gap = 960  # a 40 ms underrun in the middle
    wav[start + RATE + gap: start + heard + gap] = reply[RATE:heard]
    at = (start + heard + gap) / RATE
    assert check_cut(wav, reply, _barge(at, heard)).same_audio
    assert check_cut(wav, reply, _barge(at, heard)).error_samples == 0
    late = check_cut(wav, reply, _barge(at, heard - 480))  # says 20 ms less than was heard
    assert late.same_audio and late.error_samples == 480


def test_audio_that_is_not_the_replys_is_found() -> None:
    reply = _reply()
    wav = np.zeros(3 * RATE, np.int16)
    wav[:RATE] = reply[:RATE]
    wav[1000:1480] = reply[5000:5480]  # a block out of order
    assert not check_cut(wav, reply, _barge(1.0, RATE)).same_audio
