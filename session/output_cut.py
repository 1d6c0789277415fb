"""A barge-in's cut made on a session's output: the audio it revoked never reaches the listener.

An output that says ``discard_blocks`` (a sound device, whose stream is aborted and started again)
is cut on a daemon thread, awaited at most ``DISCARD_TIMEOUT_S``: a driver that never returns is
reported once as ``speaker_stuck`` and left out of every later cut, and the session goes on. An
application's output that raises is reported as ``discard_failed``; the cut stands all the same.
"""

from __future__ import annotations

from collections.abc import Callable

from voxline.audio.clocked_output import Output
from voxline.audio.ledger import Cut
from voxline.base.contain import contain
from voxline.base.daemon_calls import CallStuck, off_loop
from voxline.base.errors import message_of

from .events import SessionError, SessionEvent

__all__ = ["DISCARD_TIMEOUT_S", "OutputCut"]

DISCARD_TIMEOUT_S = 3.0  # a device's restart after a barge-in takes milliseconds; past this its driver is stuck
# (longer than a stream's own wait for its lock, LOCK_WAIT_S: a restart that finds the stream held says so first)


class OutputCut:
    """Cuts on one session's output, reporting what fails through ``report``."""

    def __init__(self, output: Output, report: Callable[[SessionEvent], None]) -> None:
        self._output = output
        self._report = report
        self.stuck = False  # its restart after a barge-in never returned: later cuts restart nothing

    async def make(self, cut: Cut) -> None:
        """Drop what ``cut`` revoked from the output (nothing once the output is stuck)."""
        if self.stuck:
            return
        output = self._output
        try:
            if getattr(output, "discard_blocks", True):  # a device abort: keep it off the event loop
                await off_loop(output.discard_pending, cut, timeout_s=DISCARD_TIMEOUT_S,
                               name="voxline-speaker-restart")
            else:
                output.discard_pending(cut)
        except CallStuck:  # its driver never returned: the rest of the session goes on without it
            self.stuck = True  # it plays nothing, and holds what a later cut would restart
            self._report(SessionError(
                f"the speaker did not start again within {DISCARD_TIMEOUT_S:g} s of a barge-in (its driver "
                "is stuck): nothing plays until it does", "speaker_stuck"))
        except BaseException as failure:  # an app's output: the cut stands, and the session goes on
            contain(failure)
            self._report(SessionError(
                f"the output could not drop the audio a barge-in revoked: {type(failure).__name__}: "
                f"{message_of(failure)}", "discard_failed"))
