"""Keeping Python's cyclic garbage collector from pausing real-time audio.

A full collection walks every container object the process tracks, and it holds the GIL
while it does: the event loop stops, and so does a sound device's callback thread. In a
process with voxline, its dependencies and an application imported, one such walk measured
50–100 ms on a small machine, and full collections come again and again while sessions build
up their state. Playout then runs dry: a device plays a gap, a recording's
:class:`~voxline.audio.clocked_output.ClockedOutput` catches up on audio that was late, and
every session of the process hears the gap at once.

What a process holds when its first session starts (modules, the application's setup) lives as
long as the process. :func:`settle` moves all of it into the collector's permanent generation
(:func:`gc.freeze`, which walks nothing), so later collections walk only what sessions create;
at exit it is handed back (:func:`gc.unfreeze`), so that the interpreter's last collections
finalize it as they would have (extension objects that check for leaks at exit find none).
:class:`~voxline.session.VoiceSession` and the local server call it when they start, once per
process. An application that wants the collector left exactly as it is calls
:func:`leave_alone` before its first session.
"""

from __future__ import annotations

import atexit
import gc
import logging

__all__ = ["leave_alone", "settle"]

log = logging.getLogger("voxline.collector")

_state = {"done": False}


def settle() -> bool:
    """Freeze what is alive, the first time in this process (until exit); True if it did now.

    No collection runs first: that would be the very pause this avoids, with a device perhaps
    already playing. Garbage alive at that moment is kept until exit, when it is collected.
    Later calls do nothing: objects made after the first call stay in the collector's sight,
    so a session's own cycles are collected when it ends.
    """
    if _state["done"]:
        return False
    _state["done"] = True
    gc.freeze()
    atexit.register(gc.unfreeze)
    log.debug("froze %d objects alive at the first session's start", gc.get_freeze_count())
    return True


def leave_alone() -> None:
    """Never :func:`settle` in this process: the application manages the collector itself."""
    _state["done"] = True

