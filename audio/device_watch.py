"""Sound-server devices that come and go: a device unplugged mid-session, and plugged in again.

When a sink or source disappears, the sound server moves the streams on it to its fallback
(PulseAudio's default device; PipeWire's session manager does the same), so the session goes on
there. It does not move them back when the device returns. :class:`DeviceWatch` notices both
and moves the stream back, and reports each change as a :class:`DeviceChange`. A device
unplugged and plugged in again between two polls comes back under a new server number
(``index``; PulseAudio's, and pipewire-pulse's object serial) with its stream on the fallback,
where the server moved it: both changes are reported and the stream is moved back. The first poll
(and the first after the watch reconnects) takes a stream found on the fallback the same way. A
stream moved while its device kept its number (by the user, or the desktop) is left where it is.
Older pipewire-pulse numbered devices by PipeWire ids, which come back: there a quick replug may
go unseen.

The decision is a table (:data:`TRANSITIONS`) over what was seen, tested on its own; the
watch's :meth:`~DeviceWatch.poll` asks the server and blocks for round trips, so it runs in a
thread (the session polls it every half second).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Literal, Protocol

from voxline.audio.device_list import DeviceInfo
from voxline.audio.sound_server import SoundServer, connect

__all__ = ["Action", "DeviceChange", "DeviceWatch", "TRANSITIONS", "Watched"]

Kind = Literal["input", "output"]


class Action(Enum):
    NONE = "none"
    REPORT_LOST = "report_lost"
    MOVE_BACK = "move_back"
    REPORT_LOST_AND_MOVE_BACK = "report_lost_and_move_back"


# (lost before, device present now, present under a new server number) -> (lost after, action); a new number is
# looked for only on a device present and not lost
TRANSITIONS: dict[tuple[bool, bool, bool], tuple[bool, Action]] = {
    (False, True, False): (False, Action.NONE),
    (False, False, False): (True, Action.REPORT_LOST),
    (True, False, False): (True, Action.NONE),
    (True, True, False): (False, Action.MOVE_BACK),  # stays lost if the move fails, and is tried again
    (False, True, True): (False, Action.REPORT_LOST_AND_MOVE_BACK),  # gone and back between two polls
}


@dataclass(frozen=True, slots=True)
class DeviceChange:
    """A chosen device went away (``lost``) or came back and has the stream again."""

    kind: Kind
    device: str  # the chosen device, as the device table labels it
    lost: bool
    now_on: str | None  # the server device the stream is on now (the fallback while lost); None: unknown
    ended: bool = False  # the stream itself ended (killed, the device failed) and is opened again, not moved


class Watched(Protocol):
    """What the watch needs of a speaker or microphone: its kind, its device and its stream's tag."""

    @property
    def kind(self) -> Kind: ...

    @property
    def device(self) -> DeviceInfo: ...

    @property
    def tag(self) -> str: ...


@dataclass
class _Entry:
    kind: Kind
    info: DeviceInfo
    tag: str
    lost: bool = False
    index: int | None = None  # the device's server number when last seen


class DeviceWatch:
    """Watches the sound-server devices of some opened streams; see the module docstring."""

    def __init__(self, server: SoundServer, entries: list[_Entry]) -> None:
        self._server = server
        self._entries = entries

    @classmethod
    def of(cls, devices: Iterable[Watched]) -> DeviceWatch | None:
        """A watch over the devices chosen on the sound server; None when there are none."""
        entries = [_Entry(d.kind, d.device, d.tag) for d in devices if d.device.route is not None]
        if not entries:
            return None
        server = connect("voxline-watch")
        if server is None:
            return None
        return cls(server, entries)

    def poll(self) -> list[DeviceChange]:
        """Ask the server what is there now; move streams back; the changes since the last poll."""
        present = {(d.kind, d.name): d.index for d in self._server.devices()}
        changes: list[DeviceChange] = []
        for entry in self._entries:
            route = entry.info.route
            assert route is not None
            index = present.get((entry.kind, route))
            here = index is not None
            renumbered, on = False, None
            if here and not entry.lost and index != entry.index:
                # a new number (or a first look): gone and back if its stream is on the fallback, where the server
                # put it; a stream not found this time is looked for again at the next poll, the number not taken
                on = self._server.stream_device(entry.kind, entry.tag)
                if on is not None:
                    entry.index = index
                    renumbered = on != route and on == self._server.default_name(entry.kind)
            lost, action = TRANSITIONS[(entry.lost, here, renumbered)]
            match action:
                case Action.NONE:
                    pass
                case Action.REPORT_LOST:
                    changes.append(DeviceChange(entry.kind, entry.info.label, True,
                                                self._server.stream_device(entry.kind, entry.tag)))
                case Action.MOVE_BACK:
                    if not self._moved_back(entry, route, changes):
                        continue
                case Action.REPORT_LOST_AND_MOVE_BACK:
                    changes.append(DeviceChange(entry.kind, entry.info.label, True, on))
                    if not self._moved_back(entry, route, changes):
                        continue
            entry.lost = lost
        return changes

    def _moved_back(self, entry: _Entry, route: str, changes: list[DeviceChange]) -> bool:
        """Move the stream back onto its device and say so; a move that fails (the stream not there yet) leaves the
        device lost, to be tried again at the next poll."""
        if not self._server.move_stream(entry.kind, entry.tag, route):
            entry.lost = True
            return False
        changes.append(DeviceChange(entry.kind, entry.info.label, False, route))
        return True

    def moved(self, kind: Kind, device: str) -> None:
        """The stream of ``device`` (its label) is elsewhere than on it: opened again on the server's default device
        (:mod:`voxline.audio.stream_keeper`). It counts as lost, so it is moved back once the device is there."""
        for entry in self._entries:
            if entry.kind == kind and entry.info.label == device:
                entry.lost = True

    def reconnect(self) -> bool:
        """A fresh connection to the sound server in place of one that failed (the server restarted), keeping what
        the watch knows (which devices are lost); False if the server cannot be reached yet."""
        server = connect("voxline-watch")
        if server is None:
            return False
        stale, self._server = self._server, server
        for entry in self._entries:  # a restarted server numbers its devices anew
            entry.index = None
        try:
            stale.close()
        except Exception:  # the old connection is gone with its server
            pass
        return True

    def close(self) -> None:
        self._server.close()
