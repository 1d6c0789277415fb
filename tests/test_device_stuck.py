"""A device stream whose driver call never returns holds nothing else for ever.

Unplugging a speaker while a barge-in restarted its stream left PortAudio's start() waiting, holding the
stream's lock: the device poll asking whether the stream had ended, the session's close and the process's
exit (PortAudio's shutdown) all waited on it. Here a fake stream stands in for the driver: a thread holds
the lock as the stuck restart did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import types
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from voxline.audio import device_stream
from voxline.audio.device_watch import DeviceChange, DeviceWatch
from voxline.audio.stream_keeper import StreamKeeper
from voxline.base.clock import RealClock
from voxline.session import device_loop
from voxline.session.events import DeviceLost
from voxline.audio.device_list import DeviceInfo
from voxline.audio.device_stream import ReopenableStream
from tests.support.devices import kiosk

__all__ = ["kiosk"]  # a fixture used below


class FakeStream:
    active = True

    def abort(self) -> None:
        raise AssertionError("a stuck stream is never touched again")

    close = start = abort


class Speaker(ReopenableStream):
    _what = "speaker"

    def __init__(self) -> None:
        self.device = DeviceInfo(3, "Kiosk Speaker", "ALSA", 0, 2, 48000.0)
        self._sd = types.SimpleNamespace(_exit_handler=_portaudio_exit, PortAudioError=OSError)
        self._init_stream()
        self._stream = FakeStream()

    def _open(self, fallback: bool = False) -> Any:
        raise AssertionError("no reopen while the stream is held")

    def close(self) -> None:
        self._release_retired()
        with self._holding() as taken:
            stream, self._stream = self._stream, None
        if not taken:
            self._left_stuck(stream)


@contextlib.contextmanager
def held_by_a_stuck_call(device: ReopenableStream) -> Iterator[None]:
    """While inside: another thread holds the device's stream lock, as a driver call that does not return does."""
    held, release = threading.Event(), threading.Event()

    def stuck_call() -> None:
        with device._control:
            held.set()
            release.wait()

    thread = threading.Thread(target=stuck_call, daemon=True)
    thread.start()
    held.wait(5)
    try:
        yield
    finally:
        release.set()
        thread.join(5)


def _portaudio_exit() -> None:
    """What PortAudio's shutdown at exit stands for here."""


def test_a_stream_held_by_a_stuck_call_is_busy_and_is_left_at_close(monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(device_stream, "LOCK_WAIT_S", 0.05)
    unregistered: list[object] = []
    monkeypatch.setattr(device_stream, "atexit", types.SimpleNamespace(unregister=unregistered.append))
    speaker = Speaker()
    with held_by_a_stuck_call(speaker):
        assert speaker.ended is False  # busy, not ended: the keeper does not try to open it again
        assert speaker.reopen() is False
        with caplog.at_level(logging.WARNING, logger="voxline.audio.device_stream"):
            speaker.close()  # returns: before, it waited for the lock for ever
        assert "the speaker stream did not answer within 0.05 s (its driver is stuck): left as it is" in caplog.text
        assert speaker._gone() and speaker._stuck is not None
        assert unregistered == [_portaudio_exit]  # PortAudio's shutdown at exit would abort under the stuck call


def test_a_call_that_returns_after_the_close_gave_up_closes_its_stream_and_gives_the_exit_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A restart that took seconds under load and then returned left a running stream nobody owned (it played on
    after the close) and PortAudio's shutdown turned off for the process."""
    monkeypatch.setattr(device_stream, "LOCK_WAIT_S", 0.05)
    monkeypatch.setattr(device_stream, "_STUCK", set())  # no stream of another test left stuck in this process
    calls: list[tuple[str, object]] = []
    monkeypatch.setattr(device_stream, "atexit", types.SimpleNamespace(
        unregister=lambda handler: calls.append(("unregister", handler)),
        register=lambda handler: calls.append(("register", handler))))

    class Slow:
        active = True
        ended: list[str] = []

        def abort(self) -> None:
            self.ended.append("abort")

        def close(self) -> None:
            self.ended.append("close")

    speaker = Speaker()
    slow = speaker._stream = Slow()
    held, returned = threading.Event(), threading.Event()

    def slow_restart() -> None:
        with speaker._control:
            held.set()
            returned.wait(5)
            speaker._reclaimed(slow)  # as the barge-in's restart does once its start() returns

    thread = threading.Thread(target=slow_restart, daemon=True)
    thread.start()
    held.wait(5)
    speaker.close()
    assert speaker._stuck is slow and calls == [("unregister", _portaudio_exit)]
    returned.set()
    thread.join(5)
    assert slow.ended == ["abort", "close"] and speaker._stuck is None
    assert calls[1:] == [("unregister", _portaudio_exit), ("register", _portaudio_exit)]  # once, and back


def test_a_stream_closed_in_time_leaves_portaudios_exit_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    unregistered: list[object] = []
    monkeypatch.setattr(device_stream, "atexit", types.SimpleNamespace(unregister=unregistered.append))
    speaker = Speaker()
    speaker._stream = None  # nothing open: a close takes the lock at once
    speaker.close()
    assert unregistered == [] and speaker._stuck is None


@pytest.mark.xdist_group("pulse")
@pytest.mark.parametrize("kind", ["speaker", "microphone"])
async def test_a_device_whose_lock_a_stuck_call_holds_closes_without_waiting(
        kind: str, kiosk: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The real streams on PulseAudio's virtual devices: their close left the stream to its driver in one line."""
    from voxline.audio.device_mic import MicSource
    from voxline.audio.device_speaker import SpeakerSink
    from voxline.audio.playout import PlayoutBuffer

    monkeypatch.setattr(device_stream, "LOCK_WAIT_S", 0.05)
    monkeypatch.setattr(device_stream, "atexit", types.SimpleNamespace(unregister=lambda handler: None))
    device: SpeakerSink | MicSource = (SpeakerSink(PlayoutBuffer(), device=kiosk) if kind == "speaker"
                                       else MicSource(device=f"{kiosk}.monitor"))
    device.start()
    stream = device._stream
    last = device.now() if isinstance(device, SpeakerSink) else None
    try:
        with held_by_a_stuck_call(device):
            with caplog.at_level(logging.WARNING, logger="voxline.audio.device_stream"):
                device.close()
            assert f"the {kind} stream did not answer" in caplog.text and device._stuck is stream
            if isinstance(device, SpeakerSink):
                assert device.now() == last  # the listener's time stops where it was last read
    finally:
        stream.abort()
        stream.close()


# ---------------------------------------------------------------------------- the session's device watch


class _SlowPolls:
    """A stream keeper or a device watch whose calls block while ``held`` is clear: a sound server not answering."""

    def __init__(self, found: list[DeviceChange] | None = None) -> None:
        self.held = threading.Event()
        self.held.set()
        self.polls = 0
        self.found = found or []
        self.closed = threading.Event()

    def poll(self) -> list[DeviceChange]:
        self.held.wait()
        self.polls += 1
        found, self.found = self.found, []
        return found

    def reconnect(self) -> bool:
        self.held.wait()
        return True

    def moved(self, kind: str, device: str) -> None:
        pass

    def close(self) -> None:
        self.closed.set()


@pytest.fixture
def quick_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_loop, "POLL_S", 0.005)
    monkeypatch.setattr(device_loop, "STUCK_S", 0.1)
    monkeypatch.setattr(device_loop, "CLOSE_WAIT_S", 0.05)


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.005)


@asynccontextmanager
async def _watching(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, keeper: Any,
                    watch: Callable[[], Any]) -> AsyncIterator[tuple[asyncio.Task[None], list[object]]]:
    """The session's device watch loop over a ``keeper`` and the watch ``watch()`` makes; its task and what it said."""
    monkeypatch.setattr(StreamKeeper, "of", classmethod(lambda cls, devices: keeper))
    monkeypatch.setattr(DeviceWatch, "of", classmethod(lambda cls, devices: watch()))
    caplog.set_level(logging.WARNING, "voxline")
    said: list[object] = []
    task = asyncio.create_task(device_loop.device_watch_loop([], RealClock(), said.append))
    try:
        yield task, said
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_stuck_poll_pauses_the_watch_and_what_it_found_late_is_said(
        quick_watch: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A poll past STUCK_S (a sound server that stopped answering, a machine suspended mid-poll) ended the watch for
    the rest of the session: a stream that ended later was never opened again."""
    keeper = _SlowPolls()
    async with _watching(monkeypatch, caplog, keeper, lambda: None) as (_task, said):
        await _until(lambda: keeper.polls >= 2)
        keeper.held.clear()
        await _until(lambda: "did not answer within 0.1 s" in caplog.text)  # a poll is stuck, for the loop too
        keeper.found = [DeviceChange("output", "3 Kiosk Speaker", True, None, ended=True)]  # what it finds, late
        keeper.held.set()  # it answers: what it found is said, and the polls go on
        await _until(lambda: said != [] and keeper.polls >= 5)
        assert said == [DeviceLost("output", "3 Kiosk Speaker", None, said[0].at, ended=True)]  # type: ignore[attr-defined]
        assert "the devices' streams answer again" in caplog.text


async def test_a_sound_server_poll_that_returns_late_has_what_it_found_said(
        quick_watch: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The watch takes what its poll finds as known (a device lost, a device back): a late poll's changes thrown away
    were never said, and a device lost before was never said to be back."""
    watch = _SlowPolls([DeviceChange("output", "3 Kiosk Speaker", True, "builtin")])
    async with _watching(monkeypatch, caplog, None, lambda: watch) as (_task, said):
        await _until(lambda: len(said) == 1)  # lost
        watch.held.clear()
        await _until(lambda: "did not answer within 0.1 s" in caplog.text)
        watch.found = [DeviceChange("output", "3 Kiosk Speaker", False, None)]  # back, found late
        watch.held.set()
        await _until(lambda: len(said) == 2)
        assert [type(e).__name__ for e in said] == ["DeviceLost", "DeviceReturned"]


async def test_a_watch_made_late_is_taken_and_one_left_stuck_at_the_end_is_closed_when_it_returns(
        quick_watch: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A sound server that answered the first connection late: its devices went unwatched for the session, and the
    watch made late was never closed; the same for a watch whose call was stuck when the session ended."""
    watch = _SlowPolls()
    watch.held.clear()
    try:
        async with _watching(monkeypatch, caplog, None, lambda: watch.poll() and None or watch) as (task, _said):
            await _until(lambda: "the sound server did not answer within 0.1 s" in caplog.text)
            assert not task.done()  # still waiting for it, not given up
            watch.held.set()
            await _until(lambda: watch.polls >= 4)  # made late, taken, and polled
            watch.held.clear()  # stuck again, and the session ends meanwhile
            await _until(lambda: "the sound server's devices did not answer within 0.1 s" in caplog.text)
        assert not watch.closed.is_set()  # not waited for at the close
        watch.held.set()
        await _until(watch.closed.is_set)  # closed once its call returned
    finally:
        watch.held.set()


def test_a_close_whose_abort_never_returns_is_left_to_it_and_ends_when_it_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sound server that hangs (SIGSTOPped PulseAudio) held the abort in a device's close: aclose(), on the event
    loop, waited for as long as it hung. The abort now runs on a thread of its own, waited for LOCK_WAIT_S."""
    monkeypatch.setattr(device_stream, "LOCK_WAIT_S", 0.05)
    monkeypatch.setattr(device_stream, "_STUCK", set())
    calls: list[tuple[str, object]] = []
    monkeypatch.setattr(device_stream, "atexit", types.SimpleNamespace(
        unregister=lambda handler: calls.append(("unregister", handler)),
        register=lambda handler: calls.append(("register", handler))))
    release = threading.Event()
    done: list[str] = []

    class Hung:
        active = True

        def abort(self) -> None:
            release.wait(30)
            done.append("abort")

        def close(self) -> None:
            done.append("close")

    speaker, stream = Speaker(), Hung()
    speaker._shut(stream)  # returns though the abort does not
    assert speaker._stuck is stream and done == [] and calls == [("unregister", _portaudio_exit)]
    release.set()
    for thread in [t for t in threading.enumerate() if t.name == "voxline-speaker-close"]:
        thread.join(10)
    assert done == ["abort", "close"] and speaker._stuck is None
    assert calls[-1] == ("register", _portaudio_exit)  # PortAudio's exit is its own again
