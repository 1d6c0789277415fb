"""What a speaker and a microphone share: one PortAudio stream, opened again when it ends on its own.

When the sound server kills a stream or its device fails, PortAudio ends it: :attr:`ReopenableStream.ended`
says so, and :meth:`ReopenableStream.reopen` starts a fresh stream on the same device under the same tag,
or where that fails (the device is gone) on the sound server's default device
(:attr:`ReopenableStream.on_fallback`). The open runs outside the stream's lock, so that a close or a
barge-in never waits for it; the fresh stream is swapped in only if the device was not closed meanwhile.
The ended stream is closed at the next reopen or close, not at once: another thread may be reading its
clock. A session polls this from a thread (:mod:`voxline.audio.stream_keeper`).

A driver call may never return (a sound server that hangs; a stream the server moved off a device that went,
started again: the speaker replaces such a stream instead), holding the stream's lock: nothing waits for that lock longer than :data:`LOCK_WAIT_S`. A poll then sees the stream
as running (busy), and a close leaves the stream to its driver (:meth:`ReopenableStream._left_stuck`,
one line) instead of waiting for ever, and keeps PortAudio from being shut down at exit under it (its
shutdown would abort the process).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from voxline.audio.device_list import DeviceInfo, close_ended, started_again

__all__ = ["LOCK_WAIT_S", "ReopenableStream"]

LOCK_WAIT_S = 2.0  # a swap takes milliseconds; a lock held longer is held by a driver call that never returned
_log = logging.getLogger(__name__)
_STUCK: set[int] = set()  # streams left to a driver call, by id: PortAudio's shutdown at exit waits for none of them
_EXIT_LOCK = threading.Lock()  # _STUCK and PortAudio's exit handler, changed from several close threads
T = TypeVar("T")


def _hold_portaudio_exit(sd: Any, stream: Any) -> None:
    """No PortAudio shutdown at exit while ``stream`` is left stuck: it would abort the process under the call."""
    with _EXIT_LOCK:
        _STUCK.add(id(stream))
        handler = getattr(sd, "_exit_handler", None)
        if handler is not None:
            atexit.unregister(handler)


def _release_portaudio_exit(sd: Any, stream: Any) -> None:
    """``stream`` is stuck no more: once none is, PortAudio is shut down at exit again."""
    with _EXIT_LOCK:
        _STUCK.discard(id(stream))
        handler = getattr(sd, "_exit_handler", None)
        if not _STUCK and handler is not None:
            atexit.unregister(handler)  # never twice
            atexit.register(handler)


class ReopenableStream:
    """The base of :class:`~voxline.audio.devices.SpeakerSink` and :class:`~voxline.audio.devices.MicSource`."""

    device: DeviceInfo
    _sd: Any  # the sounddevice module
    _what = "stream"  # how log lines name it: "speaker", "microphone"

    def _init_stream(self) -> None:
        self._control = threading.Lock()  # the stream's swaps: start, close, a barge-in's restart, reopen
        self._stream: Any = None
        self._retired: Any = None  # the stream the last reopen replaced
        self.reopens = 0  # streams started again after theirs ended on its own
        self.on_fallback = False  # the last reopen found the device gone: on the server's default device
        self._stuck: Any = None  # a stream left to a driver call that never returned (see _left_stuck)
        self._displaced = False  # the sound server moved the stream off its device, which went: a fresh one replaces it

    def _open(self, fallback: bool = False) -> Any:
        raise NotImplementedError

    def _fresh_state(self) -> None:
        """Forget what the ended stream left (a timeline, a resampler's state): called before the fresh one starts."""

    def _gone(self) -> bool:
        """Closed: no stream is ever opened again."""
        return self._stream is None

    @contextlib.contextmanager
    def _holding(self) -> Iterator[bool]:
        """The stream's lock, waited for at most :data:`LOCK_WAIT_S`: whether it was taken."""
        taken = self._control.acquire(timeout=LOCK_WAIT_S)
        try:
            yield taken
        finally:
            if taken:
                self._control.release()

    def _left_stuck(self, stream: Any) -> None:
        """Closing, the stream's lock was not let go: a driver call on ``stream`` has not returned. It is left to its
        driver, untouched (another call on it would hang too), and PortAudio is not shut down at exit while it is
        (:meth:`_reclaimed` undoes both if the call returns after all)."""
        self._keep_stuck(stream)
        self._say_stuck()

    def _keep_stuck(self, stream: Any) -> None:
        self._stuck = stream  # kept: a stream collected while its driver runs would be closed under it
        _hold_portaudio_exit(self._sd, stream)

    def _say_stuck(self) -> None:
        _log.warning("the %s stream did not answer within %g s (its driver is stuck): left as it is", self._what,
                     LOCK_WAIT_S)

    def _shut(self, stream: Any, first: Callable[[], T] | None = None) -> T | None:
        """Abort and close ``stream`` on a thread of its own, waiting at most :data:`LOCK_WAIT_S`; what ``first``
        gave (run just before, e.g. a last read of its clock; None if it raised, or the wait gave up). A driver call
        that does not return (a sound server that hangs) leaves the stream to it (as :meth:`_left_stuck`) rather
        than the caller, an event loop, held with it; once the call returns after all, PortAudio's exit is its own
        again. The thread and the caller settle which of them was last under one lock."""
        lock = threading.Lock()
        done: list[T | None] = []
        finished = threading.Event()
        gave_up: list[bool] = []

        def shut() -> None:
            value: T | None = None
            if first is not None:
                with contextlib.suppress(self._sd.PortAudioError):  # a vanished device has no clock to read
                    value = first()
            with contextlib.suppress(self._sd.PortAudioError):  # and is closed all the same
                stream.abort()
                stream.close()
            with lock:
                done.append(value)
                finished.set()
                if gave_up:
                    if self._stuck is stream:
                        self._stuck = None
                    _release_portaudio_exit(self._sd, stream)

        threading.Thread(target=shut, name=f"voxline-{self._what}-close", daemon=True).start()
        finished.wait(LOCK_WAIT_S)
        with lock:
            if done:
                return done[0]
            gave_up.append(True)
            self._keep_stuck(stream)
        self._say_stuck()
        return None

    def _reclaimed(self, stream: Any) -> None:
        """After a slow driver call on ``stream`` returned, with its lock held: if a close gave the stream up
        meanwhile, it is closed now (it would play or capture on, unowned), and PortAudio's exit is its own again."""
        if self._stuck is not stream:
            return
        self._stuck = None
        with contextlib.suppress(self._sd.PortAudioError):
            stream.abort()
            stream.close()
        _release_portaudio_exit(self._sd, stream)

    @property
    def ended(self) -> bool:
        """The stream stopped without being closed (the sound server killed it, the device failed): nothing plays or
        is captured until :meth:`reopen`. False while another thread holds the stream past :data:`LOCK_WAIT_S`."""
        with self._holding() as taken:
            stream = self._stream
            return taken and not self._gone() and stream is not None and not stream.active

    def reopen(self) -> bool:
        """Start a fresh stream in place of an ended one (see the module docstring). True if it runs now; False if
        no stream could open and start, or the device was closed. Blocks for the open: call it from a thread."""
        with self._holding() as taken:
            old = self._stream
            if not taken or self._gone():
                return False
            if old.active:
                return True
        fresh = started_again(self._open, self.device, self._fresh_state, self._what)
        if fresh is None:
            return False
        with self._holding() as taken:
            if not taken or self._stream is not old:  # closed meanwhile (or held): the fresh stream goes too
                retired, running = fresh[0], False
            else:
                self._stream, self.on_fallback = fresh
                self._displaced = False  # opened where it is: no server moved it
                retired, self._retired = self._retired, old
                self.reopens += 1
                running = True
        close_ended(retired)
        return running

    def _release_retired(self) -> None:
        """On close: the stream the last reopen replaced goes too (unless the lock is held past its wait)."""
        with self._holding() as taken:
            if not taken:
                return
            retired, self._retired = self._retired, None
        if retired is not None:  # on a thread, waited for at most LOCK_WAIT_S, as the stream itself
            self._shut(retired)
