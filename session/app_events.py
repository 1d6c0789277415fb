"""What an application reads from a session: its events and its tool events, as one type.

``async for event in session`` yields an :data:`AppEvent`; a handler that matches on it and
ends in ``assert_never`` is checked for every kind.
"""

from __future__ import annotations

from .events import SessionEvent
from .tools.events import ToolEvent

__all__ = ["AppEvent"]

AppEvent = SessionEvent | ToolEvent
