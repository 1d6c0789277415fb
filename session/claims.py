"""The parts an open session owns, one open session at a time each.

A session's output is one listener's timeline, its mirror one conversation, its echo canceller one
listener's echo path, its voice detector one microphone's state: two open sessions sharing one would
mix their state. :class:`Claims` takes a session's parts when it opens and lets go of them when it
closes; an open given a part another open session holds is refused with one
:class:`~voxline.realtime.errors.ConfigurationError` naming it, with nothing taken.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

from voxline.realtime.errors import ConfigurationError

__all__ = ["Claims"]

_in_use: weakref.WeakSet[Any] = weakref.WeakSet()
"""The parts the open sessions hold: an output, a mirror, an echo canceller, a voice detector."""

_WHY_OWN = {
    "output": "one output is one listener's timeline",
    "mirror": "one mirror is one conversation: another session's turns would be sent into this one's",
    "echo canceller (aec)": "it holds one listener's echo path",
    "voice detector (local_vad)": "it holds one microphone's state",
}


class Claims:
    """One session's parts, by what each is (a key of ``_WHY_OWN``); None for a part it does not have."""

    def __init__(self, owned: dict[str, Any]) -> None:
        self._owned = owned
        self.held = False  # the session holds them (it opened, and has not let go)

    def take(self) -> None:
        """Each part for this session; :class:`ConfigurationError` naming the first that another open session
        holds, with nothing taken."""
        for what, part in self._owned.items():
            try:
                if part is not None and part in _in_use:
                    raise ConfigurationError(f"this {what} belongs to a session that is open: give each session its "
                                             f"own ({_WHY_OWN[what]})")
            except TypeError:  # one that cannot be weakly referenced goes unchecked
                pass
        for part in self._owned.values():
            if part is not None:
                with contextlib.suppress(TypeError):
                    _in_use.add(part)
        self.held = True

    def let_go(self) -> bool:
        """The parts are free for the next session; False when there was nothing to let go (never taken, refused,
        or let go already: another open session's parts stay its own)."""
        if not self.held:
            return False
        self.held = False
        for part in self._owned.values():
            if part is not None:
                with contextlib.suppress(TypeError):
                    _in_use.discard(part)
        return True
