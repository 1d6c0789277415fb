"""Streams that end on their own: killed by the sound server, or stopped by a failing device.

When the sound server kills a stream (a user's "terminate" in the desktop's sound settings, the
server's own recovery) or the device behind it fails, PortAudio ends the stream: its callback
stops and nothing plays or records any more, while the device itself may still be listed.
:class:`StreamKeeper` notices it, reports the loss once and opens the stream again on the same
device; then it reports the stream back. A speaker's playout goes on where it stopped; a
microphone's blocks follow the last one captured. Where the device itself is gone (unplugged,
then its stream killed on the fallback), the stream opens on the sound server's default device
and is reported lost there, for the device watch to move back. While no stream will open (the
sound server restarting), it is tried again 1, 2, then at most 4 seconds after the last try
(every second, fourth, then eighth poll).

The decision is a table (:data:`TRANSITIONS`) over what was seen, tested on its own; the
keeper's :meth:`~StreamKeeper.poll` opens streams and blocks for it, so it runs in a thread
(the session polls it with its device watch, :mod:`voxline.session.device_loop`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Literal, Protocol, assert_never, runtime_checkable

from voxline.audio.device_list import DeviceInfo
from voxline.audio.device_watch import DeviceChange

__all__ = ["Action", "Kept", "StreamKeeper", "TRANSITIONS"]

_log = logging.getLogger(__name__)


class Action(Enum):
    NONE = "none"
    REPORT_AND_REOPEN = "report_and_reopen"  # it just ended: say so, then try
    REOPEN = "reopen"  # still ended: try again
    REPORT_BACK = "report_back"  # it runs again without us (a barge-in's restart took)


# (ended before, ended now) -> action; after a reopen the stream is ended while it did not run
TRANSITIONS: dict[tuple[bool, bool], Action] = {
    (False, False): Action.NONE,
    (False, True): Action.REPORT_AND_REOPEN,
    (True, True): Action.REOPEN,
    (True, False): Action.REPORT_BACK,
}


@runtime_checkable
class Kept(Protocol):
    """What the keeper needs of a speaker or microphone (:class:`~voxline.audio.devices.SpeakerSink`,
    :class:`~voxline.audio.devices.MicSource`)."""

    @property
    def kind(self) -> Literal["input", "output"]: ...

    @property
    def device(self) -> DeviceInfo: ...

    @property
    def ended(self) -> bool: ...

    @property
    def on_fallback(self) -> bool: ...

    def reopen(self) -> bool: ...


_MOST_POLLS_SKIPPED = 7  # between tries at a stream that will not open


@dataclass
class _Entry:
    stream: Kept
    ended: bool = False
    failures: int = 0  # tries in a row that did not open it
    skip: int = 0  # polls to let pass before the next try


class StreamKeeper:
    """Keeps some opened streams running; see the module docstring."""

    def __init__(self, streams: Iterable[Kept]) -> None:
        self._entries = [_Entry(s) for s in streams]

    @classmethod
    def of(cls, devices: Iterable[object]) -> StreamKeeper | None:
        """A keeper over the devices that can be opened again; None when there are none."""
        kept = [d for d in devices if isinstance(d, Kept)]
        return cls(kept) if kept else None

    def poll(self) -> list[DeviceChange]:
        """Look at each stream; open the ended ones again; the changes since the last poll."""
        changes: list[DeviceChange] = []
        for entry in self._entries:
            stream = entry.stream
            label, route = stream.device.label, stream.device.route
            match TRANSITIONS[(entry.ended, stream.ended)]:
                case Action.NONE:
                    continue
                case Action.REPORT_AND_REOPEN:
                    changes.append(DeviceChange(stream.kind, label, True, None, ended=True))
                    running = self._reopened(entry)
                case Action.REOPEN:
                    running = self._reopened(entry)
                case Action.REPORT_BACK:
                    running = True
                case unreachable:
                    assert_never(unreachable)
            entry.ended = not running
            if running and stream.on_fallback:  # its device is gone: lost, on the server's default device
                changes.append(DeviceChange(stream.kind, label, True, None))
            elif running:
                changes.append(DeviceChange(stream.kind, label, False, route or label, ended=True))
        return changes

    @staticmethod
    def _reopened(entry: _Entry) -> bool:
        """One try at opening the stream again, unless it waits out polls after failed tries."""
        if entry.skip:
            entry.skip -= 1
            return False
        stream = entry.stream
        try:
            running = stream.reopen()
        except Exception:  # a stream of the app's own that fails to reopen: tried again later
            _log.warning("could not open the %s stream again", stream.kind, exc_info=True)
            running = False
        entry.failures = 0 if running else entry.failures + 1
        entry.skip = min(2 ** min(entry.failures, 3) - 1, _MOST_POLLS_SKIPPED)
        return running
