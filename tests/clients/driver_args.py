"""What every driver under tests/clients/ shares: its command line and the user's WAV turns.

Standard library only: each driver runs in its client's own environment, without voxline, and
imports this file from beside its own folder.
"""

from __future__ import annotations

import argparse
import wave

__all__ = ["parse", "read_pcm"]


def parse(doc: str | None, *, turns: bool) -> argparse.Namespace:
    """``--url`` (the server's base URL), ``--audio`` (one WAV, or one per turn with ``turns``), ``--timeout``."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--url", required=True, help="the server's base URL, e.g. ws://127.0.0.1:8000/v1")
    if turns:
        parser.add_argument("--audio", action="append", required=True, help="one user turn: a 24 kHz mono 16-bit WAV")
    else:
        parser.add_argument("--audio", required=True, help="what the user says: a 24 kHz mono 16-bit WAV")
    parser.add_argument("--timeout", type=float, default=45.0)
    return parser.parse_args()


def read_pcm(path: str) -> bytes:
    """The samples of a 24 kHz mono 16-bit WAV, as bytes; exits with a one-line reason otherwise."""
    with wave.open(path, "rb") as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (24000, 1, 2):
            raise SystemExit(f"{path}: expected 24 kHz mono 16-bit PCM")
        return w.readframes(w.getnframes())
