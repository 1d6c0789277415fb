"""EVENTS.jsonl: one line per wire event, ``{"t_ms", "dir", "event"}`` (DESIGN.md, command line).

``dir`` is ``"out"`` (client → server), ``"in"`` (server → client) or ``"local"`` (what the
session decided, e.g. a barge-in). Events are logged whole except audio payloads, which are
replaced by a note of their byte length. Nothing secret crosses the wire as an event, and
local entries and ``error`` events pass through :func:`voxline.realtime.errors.redact`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from voxline.realtime.errors import redact

__all__ = ["EventLog", "strip_audio"]

_AUDIO_FIELDS = {"input_audio_buffer.append": "audio", "response.output_audio.delta": "delta"}


def strip_audio(event: dict[str, Any]) -> dict[str, Any]:
    """Replace the base64 audio of appends and deltas by ``"<N bytes of audio>"``."""
    field = _AUDIO_FIELDS.get(event.get("type", ""))
    if field and isinstance(event.get(field), str):
        data = event[field]
        size = len(data) * 3 // 4 - data[-2:].count("=") if data else 0
        event = {**event, field: f"<{size} bytes of audio>"}
    return event


class EventLog:
    """Appends events to a JSONL file (or any text stream) with times from ``now`` (seconds)."""

    def __init__(self, sink: Path | IO[str], now: Callable[[], float]) -> None:
        self._own = isinstance(sink, Path)
        self._out: IO[str] = sink.open("w", encoding="utf-8") if isinstance(sink, Path) else sink
        self._now = now
        self.count = 0

    def wire(self, direction: str, text: str) -> None:
        """A :data:`voxline.realtime.connection.WireObserver`."""
        try:
            event = json.loads(text)
        except ValueError:
            event = {"unparsed": text[:200]}
        if isinstance(event, dict):
            event = strip_audio(event)
            if event.get("type") == "error":  # a server may echo what it was sent, keys included
                event = json.loads(redact(json.dumps(event)))
        self._write(direction, event)

    def local(self, event: Any, at: float | None = None) -> None:
        """A session decision (a dataclass or dict), logged with ``dir: "local"``.

        ``at`` (seconds) stamps it with the time it happened instead of now.
        """
        if dataclasses.is_dataclass(event) and not isinstance(event, type):
            payload = {"type": type(event).__name__, **dataclasses.asdict(event)}
        else:
            payload = dict(event)
        self._write("local", json.loads(redact(json.dumps(payload, default=str))), at)

    def _write(self, direction: str, event: Any, at: float | None = None) -> None:
        t = self._now() if at is None else at
        line = json.dumps({"t_ms": round(t * 1000, 3), "dir": direction, "event": event})
        self._out.write(line + "\n")
        self.count += 1

    def close(self) -> None:
        if self._own:
            self._out.close()
        else:
            self._out.flush()


