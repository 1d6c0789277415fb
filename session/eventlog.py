"""EVENTS.jsonl: one line per wire event, ``{"t_ms", "dir", "event"}`` (README.md §Command line).

``dir`` is ``"out"`` (client → server), ``"in"`` (server → client) or ``"local"`` (what the
session decided, e.g. a barge-in). Events are logged whole except audio payloads, which are
replaced by a note of their byte length. Every string in an entry, whichever way it went,
passes through :func:`voxline.base.redaction.redact` (a server may echo a key it was sent, in an
error or anywhere else, and a conversation restored after a drop sends that text back), one
string at a time, so that a redaction never breaks the line's JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import heapq
import io
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import IO, Any

from voxline.base.clock import Clock
from voxline.base.errors import OutputError
from voxline.base.redaction import redacted
from voxline.base.shown import clip
from voxline.base.files import utf8

__all__ = ["FLUSH_EVERY_S", "EventLog", "cut_to_whole_lines", "flushing", "redacted", "strip_audio"]

_AUDIO_FIELDS = {
    # Realtime
    "input_audio_buffer.append": "audio",
    "response.output_audio.delta": "delta",
    # GPT-Live: the primary socket's appends and deltas, a fixture played, a sideband's reflected input
    "session.input_audio.append": "audio",
    "session.output_audio.delta": "delta",
    "session.output_audio.fixture.play": "audio",
}


def strip_audio(event: dict[str, Any]) -> dict[str, Any]:
    """Replace the base64 audio of appends, deltas and fixtures (Realtime or GPT-Live), and of an item's audio parts
    (a user turn sent again after a drop, an item retrieved), by ``"<N bytes of audio>"``."""
    field = _AUDIO_FIELDS.get(event.get("type", ""))
    if field and isinstance(event.get(field), str):
        event = {**event, field: _length_of(event[field])}
    item = event.get("item")
    if isinstance(item, dict) and isinstance(content := item.get("content"), list) and any(
            isinstance(part, dict) and isinstance(part.get("audio"), str) for part in content):
        parts = [{**part, "audio": _length_of(part["audio"])}
                 if isinstance(part, dict) and isinstance(part.get("audio"), str) else part for part in content]
        event = {**event, "item": {**item, "content": parts}}
    return event


def _length_of(data: str) -> str:
    size = len(data) * 3 // 4 - data[-2:].count("=") if data else 0
    return f"<{size} bytes of audio>"


class EventLog:
    """Appends events to a JSONL file (or any text stream) with times from ``now`` (seconds).

    Lines are in time order. A local event stamped with the earlier moment it happened (``at``)
    waits up to ``horizon_s`` so that it lands among the wire events of that moment; one later
    than that is stamped with the last time written (its own ``at`` stays in its payload).
    Lines are handed to the system whole as they leave that horizon (at the next event, or at a
    :meth:`flush_due`, which :func:`flushing` calls a few times a second), so a process killed
    outright leaves whole lines, lacking at most the last ``horizon_s`` of events and a little,
    unless the kill lands inside one of those writes: the kernel may then have put part of it
    on disk, and :func:`cut_to_whole_lines` mends the file once the writer is gone.

    A log that cannot be written (a full disk) never fails the caller that hands it an event (a
    wire observer, a session hook): it stops writing, and :meth:`close` raises the
    :class:`~voxline.base.errors.OutputError` naming the file.
    """

    def __init__(self, sink: Path | IO[str], now: Callable[[], float], horizon_s: float = 1.0) -> None:
        self.name = str(sink) if isinstance(sink, Path) else str(getattr(sink, "name", "the event log"))
        self.error: OutputError | None = None  # the first write that failed; nothing is written after it
        self._out: IO[str] | None = None if isinstance(sink, Path) else sink
        self._file: io.FileIO | None = None  # a file of the log's own, written unbuffered: whole lines or none
        self._whole = 0  # its bytes up to the end of the last whole line
        if isinstance(sink, Path):
            try:
                self._file = io.FileIO(sink, "w")
            except OSError as exc:
                raise self._failed(exc) from exc
        self._now = now
        self._horizon = horizon_s
        self._pending: list[tuple[float, int, str, Any]] = []  # (t, seq, dir, event), a heap
        self._last = float("-inf")
        self.count = 0

    def wire(self, direction: str, text: str) -> None:
        """A :data:`voxline.realtime.connection.WireObserver`."""
        try:
            event = json.loads(text)
            if isinstance(event, dict):
                event = strip_audio(event)
            event = redacted(event)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than a line of the log may be
            event = {"unparsed": clip(text, 200)}  # redacted before it is cut: a cut secret is not recognisable
        self._write(direction, event)

    def local(self, event: Any, at: float | None = None) -> None:
        """A session decision (a dataclass or dict), logged with ``dir: "local"``.

        ``at`` (seconds) stamps it with the time it happened instead of now.
        """
        if dataclasses.is_dataclass(event) and not isinstance(event, type):
            payload = {"type": type(event).__name__, **dataclasses.asdict(event)}
        else:
            payload = dict(event)
        self._write("local", redacted(json.loads(json.dumps(payload, default=str))), at)

    def flush_due(self) -> None:
        """Write the lines that left the horizon since the last event: without it they would wait for the next
        one, which may be long in coming (a reply over WebRTC sends no events while it plays)."""
        self._flush(self._now() - self._horizon)

    def _write(self, direction: str, event: Any, at: float | None = None) -> None:
        now = self._now()
        t = now if at is None else min(at, now)
        heapq.heappush(self._pending, (t, self.count, direction, event))
        self.count += 1
        self._flush(now - self._horizon)

    def _flush(self, upto: float) -> None:
        if self.error is not None:  # nowhere to go: the log holds nothing back
            self._pending.clear()
            return
        lines = []
        while self._pending and self._pending[0][0] <= upto:
            t, _seq, direction, event = heapq.heappop(self._pending)
            self._last = max(self._last, t)
            lines.append(json.dumps({"t_ms": round(self._last * 1000, 3), "dir": direction, "event": event}) + "\n")
        if lines:  # whole lines in one write, handed to the system at once: a killed process leaves no half line
            try:
                self._put("".join(lines))
            except OSError as exc:
                self.error = self._failed(exc)

    def _put(self, text: str) -> None:
        """Write ``text`` (whole lines); a write that fails part way (a full disk) is cut back to the last whole
        line, so the log stays a log of whole lines."""
        file = self._file
        if file is None:
            assert self._out is not None
            self._out.write(text)
            self._out.flush()
            return
        encoded = utf8(text)
        data = memoryview(encoded)
        try:
            while data:
                written = file.write(data)
                if not written:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                data = data[written:]
        except OSError:
            with contextlib.suppress(OSError):  # (a pipe or a terminal has nothing to cut)
                os.ftruncate(file.fileno(), self._whole)
            raise
        self._whole += len(encoded)

    def _failed(self, exc: OSError) -> OutputError:
        return OutputError(f"cannot write {self.name}: {exc.strerror or exc}")

    def close(self) -> None:
        """Write what is held back and close the file; :class:`OutputError` if any of the log could not be written."""
        self._flush(float("inf"))
        try:
            if self._file is not None:
                self._file.close()
            elif self._out is not None:
                self._out.flush()
        except OSError as exc:
            self.error = self.error or self._failed(exc)
        if self.error is not None:
            raise self.error




def cut_to_whole_lines(path: Path) -> None:
    """Cut the log a writer killed outright left at ``path`` back to its last whole line.

    Its lines go to the system whole, but a write the kernel was part way through when the process was killed
    (one that spans pages) can leave the start of a line without its end. Call it only once the writer is gone.
    A file that is missing, or cannot be read or cut, is left as it is."""
    with contextlib.suppress(OSError), open(path, "r+b") as file:
        end = file.seek(0, os.SEEK_END)
        keep, block = end, 1 << 16
        while keep > 0:  # back from the end, a block at a time, to the last line end
            start = max(0, keep - block)
            file.seek(start)
            found = file.read(keep - start).rfind(b"\n")
            if found >= 0:
                keep = start + found + 1
                break
            keep = start
        if keep < end:
            file.truncate(keep)


FLUSH_EVERY_S = 0.25


@contextlib.asynccontextmanager
async def flushing(log: EventLog, clock: Clock) -> AsyncIterator[EventLog]:
    """``log``, with :meth:`EventLog.flush_due` called every :data:`FLUSH_EVERY_S` on ``clock`` while the block runs."""
    async def flush() -> None:
        while True:
            await clock.sleep(FLUSH_EVERY_S)
            log.flush_due()

    task = asyncio.ensure_future(flush())
    try:
        yield log
    finally:
        task.cancel()
        await asyncio.wait([task])  # its cancel is not raised here; this task's own would be
