"""Replay recorded audio as the microphone and record what the listener heard.

Two drivers share one :class:`~voxline.session.core.SessionCore`:

* :func:`run_lockstep` (``voxline replay --fast``): the built-in server's engine and the
  client advance together on a virtual clock, block by block, with every frame encoded
  and decoded as on the wire but no socket;
* :func:`run_realtime`: a real connection (the built-in server on loopback, or ``--url``),
  paced by the real clock.

Both produce a :class:`ReplayResult` whose ``heard`` array is sample-aligned with the input.
"""

from .lockstep import run_lockstep
from .realtime import run_realtime
from .result import ReplayResult, TurnSummary

__all__ = ["ReplayResult", "TurnSummary", "run_lockstep", "run_realtime"]
