"""The conversation mirror: the client's copy of the server conversation (docs/design.md §6).

:class:`ConversationMirror` follows the items of one conversation from the server's
events (in server order, with text, tool calls, outputs and cut points), records what
the listener heard at each barge-in, rebuilds the conversation on a new connection
(:func:`plan_rebuild`) and saves itself as plain JSON. Modules: :mod:`.records` (the
frozen :class:`MirrorItem`), :mod:`.order` (placement by ``previous_item_id``),
:mod:`.merge` (wire items into records), :mod:`.heard` (the heard-text estimate),
:mod:`.rebuild`, :mod:`.state` (JSON), :mod:`.wire_audio` (ms in audio deltas),
:mod:`.mirror` (the class).
"""

from __future__ import annotations

from .heard import HeardEstimate, estimate_heard, estimate_heard_text
from .mirror import ConversationMirror
from .rebuild import Rebuild, SkipReason, Skipped, plan_rebuild
from .records import ItemKind, MirrorItem, MirrorPart

__all__ = [
    "ConversationMirror",
    "HeardEstimate",
    "ItemKind",
    "MirrorItem",
    "MirrorPart",
    "Rebuild",
    "SkipReason",
    "Skipped",
    "estimate_heard",
    "estimate_heard_text",
    "plan_rebuild",
]
