"""The signals that stop a command, and which of them this process answers.

A stop signal the process was started with ignored stays ignored: ``nohup`` ignores SIGHUP so that
a job outlives its terminal, and a shell script starts a job it puts in the background (``&``)
with SIGINT ignored. The command line's stop handling and a farm's parts ask here alike.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable

__all__ = ["STOP_SIGNALS", "heeded"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def heeded(signals: Iterable[signal.Signals] = STOP_SIGNALS) -> tuple[signal.Signals, ...]:
    """Those of ``signals`` this process answers: the ones it is not ignoring."""
    return tuple(sig for sig in signals if signal.getsignal(sig) is not signal.SIG_IGN)
