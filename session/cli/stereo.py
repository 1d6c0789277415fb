"""``--stereo-out FILE``: a replay's input and what the listener heard as one two-channel WAV.

The input of full-duplex scorers (hotato, deepeval's voice metrics, Full-Duplex-Bench,
TurnBench): left the user (the input as the session captured it: mono, 24 kHz), right what
the listener heard (HEARD.wav), sample-aligned (:mod:`voxline.audio.stereo`).
"""

from __future__ import annotations

import argparse

from .paths import output_path

__all__ = ["add_stereo_argument"]


def add_stereo_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stereo-out", type=output_path, metavar="STEREO.wav",
                        help="one recording: also write a 16-bit stereo WAV, left the input (mono, 24 kHz) and right "
                             "what the listener heard, sample-aligned: the input of full-duplex scorers (- for "
                             "stdout; a farm: --farm-stereo)")
