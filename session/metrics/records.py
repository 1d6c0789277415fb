"""What the session metrics hold: plain frozen records, all times in seconds of listener time.

Listener time is the clock the playout's heard ledger uses (for a replay: 0 at the
capture of input sample 0). Durations are milliseconds (``*_ms``). ``None`` means the
figure does not exist for that turn (no user speech before it, no audio in it, ...).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Aggregate", "BargeInRecord", "ItemRecord", "MetricsReport", "SpeechSegment", "ToolRecord", "TurnRecord",
           "aggregate", "percentile"]


@dataclass(frozen=True, slots=True)
class SpeechSegment:
    """User speech as the server's VAD reported it, placed on the listener timeline.

    ``start``/``end`` are ``audio_start_ms``/``audio_end_ms`` (the padding before and the
    silence after included); ``speech_start``/``speech_end`` take the configured prefix
    padding and silence duration off them: where the voice itself began and ended.
    """

    item_id: str | None
    start: float
    end: float | None
    speech_start: float
    speech_end: float | None
    source: str = "server_vad"


@dataclass(frozen=True, slots=True)
class ItemRecord:
    """One assistant audio part as the listener got it."""

    item_id: str
    content_index: int
    response_id: str | None
    first_delta_at: float
    first_heard_at: float | None
    heard_ms: float
    received_ms: float
    cut: bool = False
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class BargeInRecord:
    """One barge-in: when it was triggered, when the listener heard silence, where the cut fell.

    ``reaction_ms`` is trigger → silence at the listener (the fade); ``onset_to_silence_ms``
    is the user's speech onset (server VAD: ``audio_start_ms`` + prefix padding) → silence,
    the time the two talked over each other after the user began. ``audio_end_ms`` is what
    the truncate asked for, ``applied_ms`` what the server kept (after an "already shorter"
    answer); ``cut_error_ms`` = ``applied_ms`` − ``heard_ms``, with ``heard_ms`` read from
    the ledger once the fade was over. ``heard_text`` is the estimated heard part of
    ``full_text`` (``text_method``: see :mod:`voxline.session.mirror.heard`).
    """

    trigger: str
    at: float
    silent_at: float
    item_id: str | None
    heard_ms: float
    received_ms: float
    audio_end_ms: int | None
    applied_ms: int | None
    reaction_ms: float
    onset_at: float | None
    onset_to_silence_ms: float | None
    cut_error_ms: float | None
    in_device_ms: float
    unplayed_ms: float
    deleted: tuple[str, ...] = ()
    heard_text: str | None = None
    full_text: str | None = None
    text_method: str | None = None


@dataclass(frozen=True, slots=True)
class ToolRecord:
    call_id: str
    name: str
    requested_at: float
    started_at: float | None = None
    finished_at: float | None = None
    ok: bool | None = None


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One user turn and the reply to it, up to the next time the user spoke.

    ``reply_latency_ms`` = speech end → first assistant sample at the listener (the
    silence a recording of the conversation shows); it is the sum of
    ``first_delta_ms`` (speech end → first audio delta received) and ``client_ms``
    (that delta → its first sample at the listener: queueing, device buffers).
    ``vad_ms`` is the part of ``first_delta_ms`` before ``speech_stopped`` arrived.
    A turn without user speech (text, push-to-talk) starts at its first response.
    """

    index: int
    speech_end_at: float | None
    speech_stopped_at: float | None
    first_delta_at: float | None
    first_heard_at: float | None
    reply_latency_ms: float | None
    first_delta_ms: float | None
    client_ms: float | None
    vad_ms: float | None
    response_ids: tuple[str, ...]
    statuses: tuple[str, ...]
    underruns: int
    underrun_ms: float
    barge_ins: int


@dataclass(frozen=True, slots=True)
class Aggregate:
    """``count`` values of one figure: median, 95th percentile (linear interpolation), extremes."""

    count: int
    p50: float | None
    p95: float | None
    min: float | None
    max: float | None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100), interpolated linearly between ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def aggregate(values: Sequence[float | None]) -> Aggregate:
    known = [v for v in values if v is not None]
    if not known:
        return Aggregate(0, None, None, None, None)
    return Aggregate(len(known), percentile(known, 50), percentile(known, 95), min(known), max(known))


@dataclass(frozen=True, slots=True)
class MetricsReport:
    """Everything the metrics know at one instant (:meth:`SessionMetrics.report`)."""

    at: float
    turns: tuple[TurnRecord, ...]
    barge_ins: tuple[BargeInRecord, ...]
    items: tuple[ItemRecord, ...]
    speech: tuple[SpeechSegment, ...]
    tools: tuple[ToolRecord, ...]
    underruns: int
    underrun_ms: float

    def shifted(self, offset: float) -> MetricsReport:
        """The same report with every instant moved by ``-offset`` (e.g. onto a recording's timeline)."""
        def move(record: Any) -> Any:
            changes = {f.name: getattr(record, f.name) - offset for f in dataclasses.fields(record)
                       if f.name in _INSTANTS and getattr(record, f.name) is not None}
            return dataclasses.replace(record, **changes)

        return MetricsReport(self.at - offset, tuple(map(move, self.turns)), tuple(map(move, self.barge_ins)),
                             tuple(map(move, self.items)), tuple(map(move, self.speech)), tuple(map(move, self.tools)),
                             self.underruns, self.underrun_ms)

    def aggregates(self) -> dict[str, Aggregate]:
        """p50/p95 per figure over the session's turns and barge-ins."""
        t, b = self.turns, self.barge_ins
        return {
            "reply_latency_ms": aggregate([x.reply_latency_ms for x in t]),
            "first_delta_ms": aggregate([x.first_delta_ms for x in t]),
            "client_ms": aggregate([x.client_ms for x in t]),
            "barge_in_reaction_ms": aggregate([x.reaction_ms for x in b]),
            "onset_to_silence_ms": aggregate([x.onset_to_silence_ms for x in b]),
            "cut_error_ms": aggregate([x.cut_error_ms for x in b]),
        }

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types (floats rounded to 4 decimals): every record, the aggregates, the underrun totals."""
        def rows(records: Sequence[Any]) -> list[dict[str, Any]]:
            return [dataclasses.asdict(r) for r in records]

        out: dict[str, Any] = _rounded({
            "at": self.at,
            "turns": rows(self.turns),
            "barge_ins": rows(self.barge_ins),
            "items": rows(self.items),
            "speech": rows(self.speech),
            "tools": rows(self.tools),
            "underruns": {"events": self.underruns, "ms": self.underrun_ms},
            "aggregates": {name: dataclasses.asdict(a) for name, a in self.aggregates().items()},
        })
        return out


_INSTANTS = frozenset({"at", "start", "end", "speech_start", "speech_end", "speech_end_at", "speech_stopped_at",
                       "first_delta_at", "first_heard_at", "silent_at", "onset_at", "requested_at", "started_at",
                       "finished_at"})


def _rounded(value: Any) -> Any:
    """Floats to 4 decimals (0.1 µs in seconds, 0.1 µs·1000 in ms: finer than a sample), lists as lists."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {key: _rounded(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value
