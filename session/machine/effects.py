"""What one call into the session machine asks of its driver.

The machine has already done everything it decides: the cut is made, the mirror and the
metrics have it, and any client events wait in the protocol core's outbox. What is left is
I/O, and :class:`Effects` names it: the events to hand to the application, the tool calls to
run, the audio a barge-in revoked, for the output to keep from the listener, and whether the
connection is to be hung up on (its server ended the session on it).
"""

from __future__ import annotations

from dataclasses import dataclass

from voxline.audio.ledger import Cut

from ..app_events import AppEvent
from ..events import BargeIn
from ..tools.calls import ToolCall

__all__ = ["NO_EFFECTS", "Effects"]


@dataclass(frozen=True, slots=True)
class Effects:
    """The driver's part of one machine step (see the module docstring)."""

    events: tuple[AppEvent, ...] = ()
    barge_in: BargeIn | None = None
    calls: tuple[ToolCall, ...] = ()  # calls whose arguments are complete: for the tool runner
    hang_up: bool = False  # the server is done with this connection: the driver closes it, and takes that as a drop

    @property
    def discard(self) -> Cut | None:
        """The cut whose revoked audio the output must drop (audio already inside a device)."""
        cut = self.barge_in.cut if self.barge_in is not None else None
        return cut if cut is not None and cut.revoked_samples else None


NO_EFFECTS = Effects()
"""What a step that leaves the driver nothing to do returns (one frozen instance for all)."""
