"""Replay recorded audio as the microphone and record what the listener heard.

A replay is a :class:`~voxline.session.VoiceSession` with a recording as its input and a
clocked output writing the listener's timeline (:mod:`.driver`): :func:`run_replay` over
any connection and clock, :func:`replay_fast` in lockstep against the local server's
engine on a virtual clock. Both produce a :class:`ReplayResult`.
"""

from .driver import engine_connector, replay_fast, run_replay
from .result import ReplayResult, TurnSummary

__all__ = ["ReplayResult", "TurnSummary", "engine_connector", "replay_fast", "run_replay"]
