"""Session metrics: latency as the listener heard it, barge-in reaction, cut accuracy, underruns.

:class:`SessionMetrics` is sans-I/O: the session feeds it what it already handles (protocol
outputs, the core's effects, input sent, tool events) with the listener time, and it
answers with session events (:class:`~voxline.session.events.TurnMetrics`,
:class:`~voxline.session.events.HeardTranscript`) and a :class:`MetricsReport`.
"""

from .records import (
    Aggregate,
    BargeInRecord,
    ItemRecord,
    MetricsReport,
    SpeechSegment,
    ToolRecord,
    TurnRecord,
    aggregate,
    percentile,
)
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tracker import SessionMetrics

__all__ = [
    "Aggregate",
    "BargeInRecord",
    "ItemRecord",
    "MetricsReport",
    "SessionMetrics",
    "SpeechSegment",
    "ToolRecord",
    "TurnRecord",
    "aggregate",
    "percentile",
]


def __getattr__(name: str) -> Any:
    # the tracker uses the session events, which use these records: load it on first use
    if name == "SessionMetrics":
        from .tracker import SessionMetrics

        return SessionMetrics
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
