"""The app's ``update()`` calls on their way to the server: one ``session.update`` of the app's on the wire at a time.

Each ``session.update`` carries the whole configuration, so one sent before the last was answered would carry that
one's values, and be refused for them too. An update made while one is on the wire waits, taking in any made after
it, and goes once that one is answered. The service applies none of a refused update, so neither do the settings:
what it changed goes back to what the server had, but for what the waiting update changes again (that one goes
next, and goes back as far if refused too). A new connection is configured with all the settings, and forgets both.

Plain and synchronous: the machine owns the settings and sends; :class:`AppUpdates` says what waits, what goes
next and what a refusal undoes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["AppUpdates", "Undo", "Update"]


@dataclass(slots=True)
class Update:
    """What one or more ``update()`` calls changed (``changed``), what the server had before (``before``), and whether
    they chose the offered tools (then ``offered_before``: the tools offered before). ``event_id``: the
    ``session.update`` that carries them, once sent."""

    changed: dict[str, Any]
    before: dict[str, Any]
    tools_changed: bool
    offered_before: list[str] | None
    event_id: str | None = None

    def absorb(self, later: Update) -> None:
        """A later call's changes, sent with these: what was there before each stays the earliest."""
        self.changed.update(later.changed)
        for name, value in later.before.items():
            self.before.setdefault(name, value)
        if later.tools_changed and not self.tools_changed:
            self.tools_changed, self.offered_before = True, later.offered_before


@dataclass(frozen=True, slots=True)
class Undo:
    """What an answer to the app's update takes back: ``settings`` fields to set again (none if it was taken), and,
    when ``tools``, the tools offered to go back to ``offered``."""

    settings: dict[str, Any]
    tools: bool = False
    offered: list[str] | None = None


TAKEN = Undo({})
"""The answer to an update the server took: nothing goes back."""


class AppUpdates:
    """The app's update on the wire (``sent``) and the one waiting for its answer (``waiting``)."""

    def __init__(self) -> None:
        self.sent: Update | None = None
        self.waiting: Update | None = None

    def reset(self) -> None:
        """A new connection was configured with all the settings: nothing is on its way, nothing waits."""
        self.sent = self.waiting = None

    def made(self, update: Update) -> bool:
        """True if ``update`` goes now (then :meth:`went` with its event's id); else it waits for the one on the wire,
        with those made before it that wait too."""
        if self.sent is None:
            return True
        if self.waiting is None:
            self.waiting = update
        else:
            self.waiting.absorb(update)
        return False

    def went(self, update: Update, event_id: str) -> None:
        """``update`` is on the wire, as the ``session.update`` ``event_id``."""
        update.event_id = event_id
        self.sent = update

    def answered(self, event_id: str | None, *, refused: bool) -> Undo | None:
        """The server answered a ``session.update`` (``refused``: the error naming ``event_id``; else
        ``session.updated``). ``None`` if it was not the app's (a connection's first configuration, a sideband's);
        else what goes back. The waiting update, if any, is the one to send next (:attr:`waiting`)."""
        update = self.sent
        if update is None or (refused and event_id != update.event_id):
            return None
        self.sent = None
        if not refused:
            return TAKEN
        following = self.waiting
        settings = {name: value for name, value in update.before.items()
                    if following is None or name not in following.changed}
        if following is not None:
            for name in update.changed.keys() & following.changed.keys():
                following.before[name] = update.before[name]  # refused too, it goes back as far
        if not update.tools_changed:
            return Undo(settings)
        if following is not None and following.tools_changed:
            following.offered_before = update.offered_before
            return Undo(settings)
        return Undo(settings, tools=True, offered=update.offered_before)

    def take_waiting(self) -> Update | None:
        """The waiting update, to send now; it no longer waits."""
        following, self.waiting = self.waiting, None
        return following
