"""The session's watch over its sound devices: a device unplugged and plugged in again, a stream that ended.

Runs beside the session's other loops when it plays or records on sound devices: every
:data:`POLL_S`, in a thread, it opens again any stream that ended on its own
(:mod:`voxline.audio.stream_keeper`) and, for a sound-server device, asks the server what is
there (:mod:`voxline.audio.device_watch`); each change becomes a
:class:`~voxline.session.events.DeviceLost` or :class:`~voxline.session.events.DeviceReturned`
event. A failed poll is logged (one line; its traceback at DEBUG) and tried again; it never ends the session.
The polls run on daemon threads of their own (:func:`~voxline.base.daemon_calls.off_loop`): one that has not
returned within :data:`STUCK_S` (a device driver that never answers) ends the watch over those devices, with a
line that says so, and never holds the session's close or the process's exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from voxline.audio.device_watch import DeviceChange, DeviceWatch, Watched
from voxline.audio.stream_keeper import StreamKeeper
from voxline.base.clock import Clock
from voxline.base.errors import message_of
from voxline.base.daemon_calls import CallStuck, off_loop

from .events import DeviceLost, DeviceReturned

__all__ = ["POLL_S", "as_event", "device_watch_loop"]

T = TypeVar("T")
POLL_S = 0.5
CLOSE_WAIT_S = 2.0  # how long a close waits for a poll under way to end (it takes milliseconds unless stuck)
STUCK_S = 10.0  # a poll takes milliseconds; one that has not returned by then is stuck in a driver
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
    on the listener's timeline as the session's other events. A device back is reported once, whichever of the
    two saw it come back, and so is each loss; a watch whose server connection failed (the server restarted)
    connects again, keeping what it knew."""
    stamp = now or clock.now
    chosen = list(devices)
    keeper = StreamKeeper.of(chosen)
    try:
        watch = await off_loop(DeviceWatch.of, chosen, timeout_s=STUCK_S, name="voxline-device-watch")
    except CallStuck:
        _log.warning("the sound server did not answer within %g s: its devices are not watched", STUCK_S)
        watch = None
    if watch is None and keeper is None:
        return
    reported: dict[tuple[str, str], DeviceChange] = {}  # the last change said of each device
    failed = {"the devices' streams": False, "the sound server's devices": False}  # each said once until it works

    def failure(what: str, error: Exception) -> None:
        if not failed[what]:
            _log.warning("could not read %s: %s", what, message_of(error) or type(error).__name__)
            _log.debug("reading %s failed", what, exc_info=error)
        failed[what] = True

    in_flight: set[asyncio.Task[Any]] = set()

    async def call(fn: Callable[[], T]) -> T:
        """``fn`` off the loop; a poll cancelled by the session's close goes on to its end, which the close awaits
        (below): a stream being opened again is never left opening under PortAudio's shutdown at exit."""
        task = asyncio.ensure_future(off_loop(fn, timeout_s=STUCK_S, name="voxline-device-poll"))
        in_flight.add(task)
        task.add_done_callback(_settled_in(in_flight))
        return await asyncio.shield(task)

    try:
        while keeper is not None or watch is not None:
            await clock.sleep(POLL_S)
            changes: list[DeviceChange] = []
            if keeper is not None:
                try:
                    changes += await call(keeper.poll)
                    failed["the devices' streams"] = False
                except CallStuck:
                    _log.warning("the devices' streams did not answer within %g s: they are no longer watched", STUCK_S)
                    keeper = None
                except Exception as error:  # a device of the app's own that raised: the others are polled all the same
                    failure("the devices' streams", error)
            if watch is not None:
                for change in changes:
                    if change.lost and not change.ended:  # opened again on the server's default: move it back later
                        watch.moved(change.kind, change.device)
                try:  # after a failure, a fresh connection first: the watch keeps what it knew (which devices are lost)
                    if not failed["the sound server's devices"] or await call(watch.reconnect):
                        changes += await call(watch.poll)
                        failed["the sound server's devices"] = False
                except CallStuck:
                    _log.warning("the sound server did not answer within %g s: its devices are no longer watched",
                                 STUCK_S)
                    watch = None
                except Exception as error:  # the sound server restarting, a refused request: connect again next time
                    failure("the sound server's devices", error)
            for change in changes:
                key = (change.kind, change.device)
                last = reported.get(key)
                if change.lost == (last is not None and last.lost) and (not change.lost or change == last):
                    continue  # said already: back once, whichever saw it; the same loss once
                reported[key] = change
                publish(as_event(change, stamp()))
    finally:
        if in_flight:
            await asyncio.wait(in_flight, timeout=CLOSE_WAIT_S)
        if watch is not None:
            with contextlib.suppress(CallStuck):
                await off_loop(watch.close, timeout_s=STUCK_S, name="voxline-device-watch-close")


def _settled_in(tasks: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    """A done callback: ``task`` leaves ``tasks``, and what it raised counts as seen (its waiter may be gone)."""
    def settled(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()
    return settled
