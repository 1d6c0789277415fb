"""The session's watch over its sound devices: a device unplugged and plugged in again, a stream that ended.

Runs beside the session's other loops when it plays or records on sound devices: every
:data:`POLL_S`, in a thread, it opens again any stream that ended on its own
(:mod:`voxline.audio.stream_keeper`) and, for a sound-server device, asks the server what is
there (:mod:`voxline.audio.device_watch`); each change becomes a
:class:`~voxline.session.events.DeviceLost` or :class:`~voxline.session.events.DeviceReturned`
event. A failed poll is logged (one line; its traceback at DEBUG) and tried again; it never ends the session.
The polls run on daemon threads of their own (:func:`~voxline.base.daemon_calls.off_loop`): one that has not
returned within :data:`STUCK_S` (a device driver or a sound server that does not answer, a machine suspended
mid-poll) pauses the watch over those devices, with a line that says so; once the call returns, what it found
is taken and the watch goes on (a sound server's connection is made again first). A call still stuck when the
session ends never holds its close or the process's exit, and a watch it leaves behind is closed when the call
returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from voxline.audio.device_speaker import SpeakerSink
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


def _displacing(chosen: list[Watched], changes: list[DeviceChange]) -> list[DeviceChange]:
    """``changes``, the speakers the sound server moved off a device that went told so (a barge-in then opens them a
    fresh stream: :meth:`~voxline.audio.device_speaker.SpeakerSink.displaced`)."""
    for change in changes:
        if change.lost and change.kind == "output":
            for device in chosen:
                if isinstance(device, SpeakerSink) and device.device.label == change.device:
                    device.displaced()
    return changes


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
    watch: DeviceWatch | None = None
    opening: asyncio.Future[Any] | None = None  # the watch being made, stuck past STUCK_S
    try:
        watch = await off_loop(DeviceWatch.of, chosen, timeout_s=STUCK_S, name="voxline-device-watch")
    except CallStuck as late:
        _log.warning("the sound server did not answer within %g s: its devices are watched once it does", STUCK_S)
        opening = late.job
    if watch is None and keeper is None and opening is None:
        return
    reported: dict[tuple[str, str], DeviceChange] = {}  # the last change said of each device
    failed = {"the devices' streams": False, "the sound server's devices": False}  # each said once until it works
    stuck: dict[str, asyncio.Future[Any]] = {}  # a call still running past STUCK_S, by what it reads

    def failure(what: str, error: Exception) -> None:
        if not failed[what]:
            _log.warning("could not read %s: %s", what, message_of(error) or type(error).__name__)
            _log.debug("reading %s failed", what, exc_info=error)
        failed[what] = True

    def answered(what: str) -> asyncio.Future[Any] | None:
        """``what``'s stuck call once it has ended (said once; it is no longer stuck), else None."""
        job = stuck.get(what)
        if job is None or not job.done():
            return None
        del stuck[what]
        _log.warning("%s answer again: watched again", what)
        return job

    def late_changes(what: str) -> list[DeviceChange]:
        """What ``what``'s stuck call found, once it has ended (a poll's changes; a reconnect's answer is none)."""
        job = answered(what)
        if job is None or job.cancelled():
            return []
        if (error := job.exception()) is not None:
            if isinstance(error, Exception):
                failure(what, error)
            return []
        result = job.result()
        return list(result) if isinstance(result, list) else []

    in_flight: set[asyncio.Task[Any]] = set()

    async def call(what: str, fn: Callable[[], T]) -> T:
        """``fn`` off the loop; a poll cancelled by the session's close goes on to its end, which the close awaits
        (below): a stream being opened again is never left opening under PortAudio's shutdown at exit. One stuck
        past STUCK_S is kept in ``stuck`` (``what``'s polls wait for it) and raised."""
        task = asyncio.ensure_future(off_loop(fn, timeout_s=STUCK_S, name="voxline-device-poll"))
        in_flight.add(task)
        task.add_done_callback(_settled_in(in_flight))
        try:
            return await asyncio.shield(task)
        except CallStuck as slow:
            if slow.job is not None:
                stuck[what] = slow.job
            _log.warning("%s did not answer within %g s: watched again once they do", what, STUCK_S)
            raise

    streams, server = "the devices' streams", "the sound server's devices"
    try:
        while keeper is not None or watch is not None or opening is not None:
            await clock.sleep(POLL_S)
            changes: list[DeviceChange] = []
            if opening is not None and opening.done():  # the watch, made late
                made, opening = opening, None
                if not made.cancelled() and made.exception() is None and made.result() is not None:
                    watch = made.result()
                    _log.warning("the sound server answers again: its devices are watched")
            if keeper is not None:
                changes += late_changes(streams)  # what the late poll found (a stream it opened again)
                if streams not in stuck:
                    try:
                        changes += await call(streams, keeper.poll)
                        failed[streams] = False
                    except CallStuck:
                        pass
                    except Exception as error:  # a device of the app's own that raised: the others are polled all the same
                        failure(streams, error)
            if server in stuck and stuck[server].done():
                changes += _displacing(chosen, late_changes(server))  # the watch took them as found: said now
                failed[server] = True  # its connection is suspect: made again before the next poll
            if watch is not None and server not in stuck:
                for change in changes:
                    if change.lost and not change.ended:  # opened again on the server's default: move it back later
                        watch.moved(change.kind, change.device)
                try:  # after a failure, a fresh connection first: the watch keeps what it knew (which devices are lost)
                    if not failed[server] or await call(server, watch.reconnect):
                        changes += _displacing(chosen, await call(server, watch.poll))
                        failed[server] = False
                except CallStuck:
                    failed[server] = True
                except Exception as error:  # the sound server restarting, a refused request: connect again next time
                    failure(server, error)
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
        if opening is not None:  # made after the session: closed then
            opening.add_done_callback(_close_made)
        if watch is not None:
            if server in stuck:  # a call on it still runs: closed once it returns, not waited for now
                stuck[server].add_done_callback(functools.partial(_close_when_done, watch))
            else:
                with contextlib.suppress(CallStuck):
                    await off_loop(watch.close, timeout_s=STUCK_S, name="voxline-device-watch-close")


def _close_when_done(watch: DeviceWatch, _job: asyncio.Future[Any]) -> None:
    """A done callback: ``watch``, whose stuck call just returned after the session ended, closed."""
    _close_off_loop(watch)


def _close_made(job: asyncio.Future[Any]) -> None:
    """A done callback: the watch a stuck ``DeviceWatch.of`` made after the session ended, closed."""
    if not job.cancelled() and job.exception() is None and job.result() is not None:
        _close_off_loop(job.result())


def _close_off_loop(watch: DeviceWatch) -> None:
    """Close ``watch`` on a daemon thread of its own (its sound server may still be slow): nothing waits for it."""
    threading.Thread(target=_quietly(watch.close), name="voxline-device-watch-close", daemon=True).start()


def _quietly(fn: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except Exception as error:  # nobody to tell but the log: the session is over
            _log.debug("closing a device watch after its session failed: %s", error)
    return run


def _settled_in(tasks: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    """A done callback: ``task`` leaves ``tasks``, and what it raised counts as seen (its waiter may be gone)."""
    def settled(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()
    return settled
