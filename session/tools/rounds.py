"""A bound on tool rounds in a row without the user (``max_tool_rounds``), kept alike by both machines.

A response that makes calls is a tool round; its outputs go with a follow-up that asks the model to go on,
which may call tools again. A model that keeps calling, or a server that replays the same call, would keep
a session busy for good. Past the bound a round's outputs still go, with no follow-up, and the app is told.
A user turn starts the count again.
"""

from __future__ import annotations

from ..events import SessionError

__all__ = ["ToolRounds"]


class ToolRounds:
    """Rounds since the last user turn; plain and synchronous."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def user_turn(self) -> None:
        self.count = 0

    def over(self, response_id: str) -> SessionError | None:
        """A response with calls ended: why its follow-up is withheld, or None if it may go."""
        self.count += 1
        if self.count <= self.limit:
            return None
        return SessionError(f"{self.count} tool rounds in a row without a user turn (max_tool_rounds {self.limit}): "
                            f"the outputs of {response_id} are sent, and no response is asked for them",
                            "tool_rounds_exceeded")
