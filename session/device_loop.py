"""The session's watch over its sound devices: a device unplugged and plugged in again.

Runs beside the session's other loops when it plays or records on a sound-server device
(:mod:`voxline.audio.device_watch`): every :data:`POLL_S` it asks the server, in a thread,
what is there, and turns each change into a :class:`~voxline.session.events.DeviceLost` or
:class:`~voxline.session.events.DeviceReturned` event. A failed poll is logged and tried
again; it never ends the session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from voxline.audio.device_watch import DeviceChange, DeviceWatch, Watched
from voxline.base.clock import Clock

from .events import DeviceLost, DeviceReturned

__all__ = ["POLL_S", "as_event", "device_watch_loop"]

POLL_S = 0.5
_log = logging.getLogger(__name__)


def as_event(change: DeviceChange, at: float) -> DeviceLost | DeviceReturned:
    if change.lost:
        return DeviceLost(change.kind, change.device, change.now_on, at)
    return DeviceReturned(change.kind, change.device, at)


async def device_watch_loop(devices: Iterable[Watched], clock: Clock,
                            publish: Callable[[DeviceLost | DeviceReturned], None],
                            now: Callable[[], float] | None = None) -> None:
    """Poll the devices' sound server until cancelled; nothing to do where none is on one. ``clock`` paces the polls;
    ``now`` (default: the clock's) stamps the events, on the listener's timeline as the session's other events."""
    stamp = now or clock.now
    watch = await asyncio.to_thread(DeviceWatch.of, list(devices))
    if watch is None:
        return
    try:
        failed = False
        while True:
            await clock.sleep(POLL_S)
            try:
                changes = await asyncio.to_thread(watch.poll)
            except Exception:  # the sound server restarting, a refused request: try again next time
                if not failed:
                    _log.warning("could not read the sound server's devices", exc_info=True)
                failed = True
                continue
            failed = False
            for change in changes:
                publish(as_event(change, stamp()))
    finally:
        await asyncio.to_thread(watch.close)
