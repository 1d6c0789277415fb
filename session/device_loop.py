"""The session's watch over its sound devices: a device unplugged and plugged in again, a stream that ended.

Runs beside the session's other loops when it plays or records on sound devices: every
:data:`POLL_S`, in a thread, it opens again any stream that ended on its own
(:mod:`voxline.audio.stream_keeper`) and, for a sound-server device, asks the server what is
there (:mod:`voxline.audio.device_watch`); each change becomes a
:class:`~voxline.session.events.DeviceLost` or :class:`~voxline.session.events.DeviceReturned`
event. A failed poll is logged and tried again; it never ends the session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from voxline.audio.device_watch import DeviceChange, DeviceWatch, Watched
from voxline.audio.stream_keeper import StreamKeeper
from voxline.base.clock import Clock

from .events import DeviceLost, DeviceReturned

__all__ = ["POLL_S", "as_event", "device_watch_loop"]

POLL_S = 0.5
_log = logging.getLogger(__name__)


def as_event(change: DeviceChange, at: float) -> DeviceLost | DeviceReturned:
    if change.lost:
        return DeviceLost(change.kind, change.device, change.now_on, at, ended=change.ended)
    return DeviceReturned(change.kind, change.device, at)


async def device_watch_loop(devices: Iterable[Watched], clock: Clock,
                            publish: Callable[[DeviceLost | DeviceReturned], None],
                            now: Callable[[], float] | None = None) -> None:
    """Poll the devices until cancelled: their streams (:class:`~voxline.audio.stream_keeper.StreamKeeper`) and, where
    they are on one, their sound server. ``clock`` paces the polls; ``now`` (default: the clock's) stamps the events,
    on the listener's timeline as the session's other events."""
    stamp = now or clock.now
    chosen = list(devices)
    keeper = StreamKeeper.of(chosen)
    watch = await asyncio.to_thread(DeviceWatch.of, chosen)
    if watch is None and keeper is None:
        return
    try:
        failed = False
        while True:
            await clock.sleep(POLL_S)
            changes = [] if keeper is None else await asyncio.to_thread(keeper.poll)
            if watch is not None:
                try:
                    changes += await asyncio.to_thread(watch.poll)
                except Exception:  # the sound server restarting, a refused request: try again next time
                    if not failed:
                        _log.warning("could not read the sound server's devices", exc_info=True)
                    failed = True
                else:
                    failed = False
            for change in changes:
                publish(as_event(change, stamp()))
    finally:
        if watch is not None:
            await asyncio.to_thread(watch.close)
