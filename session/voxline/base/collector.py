"""Keeping Python's cyclic garbage collector from pausing real-time audio.

A full collection walks every container object the process tracks, and it holds the GIL
while it does: the event loop stops, and so does a sound device's callback thread. In a
process with voxline, its dependencies and an application imported, that walk takes
50–100 ms on a small machine, several times during the first minute of a run, while sessions
build up their state. Playout then runs dry: a device plays a gap, a recording's
:class:`~voxline.audio.clocked_output.ClockedOutput` catches up on audio that was late, and
every session of the process hears the gap at once.

What a process holds when its first session starts (modules, the application's setup) lives as
long as the process; :func:`settle` collects once and then moves all of it into the collector's
permanent generation (:func:`gc.freeze`), so later collections walk only what sessions create.
:class:`~voxline.session.VoiceSession` and the local server call it when they start, once per
process. An application that wants the collector left exactly as it is calls
:func:`leave_alone` before its first session (``gc.unfreeze()`` afterwards undoes a settle).
"""

from __future__ import annotations

import gc
import logging

__all__ = ["leave_alone", "settle", "settled"]

log = logging.getLogger("voxline.collector")

_state = {"done": False}


def settle() -> bool:
    """Collect once and freeze what survives, the first time in this process; True if it did now.

    Later calls do nothing: objects made after the first call stay in the collector's sight,
    so a session's own cycles are collected when it ends.
    """
    if _state["done"]:
        return False
    _state["done"] = True
    gc.collect()
    gc.freeze()
    log.debug("froze %d objects alive at the first session's start", gc.get_freeze_count())
    return True


def leave_alone() -> None:
    """Never :func:`settle` in this process: the application manages the collector itself."""
    _state["done"] = True


def settled() -> bool:
    """True once :func:`settle` ran (or :func:`leave_alone` took its place) in this process."""
    return _state["done"]
