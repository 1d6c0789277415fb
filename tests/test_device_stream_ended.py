"""A device stream that ends on its own (killed by the sound server, a failing device) is reported and opened again.

The keeper's decisions are a table, checked on its own and through fake streams; then on
PulseAudio's virtual devices the server kills a running session's speaker and microphone
streams, and the session reports both, opens them again and goes on playing and recording.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voxline.audio.device_list import DeviceInfo
from voxline.audio.sound_server import connect
from voxline.audio.stream_keeper import TRANSITIONS, Action, StreamKeeper
from voxline.realtime.server import ServerConfig, serve
from voxline.audio.device_watch import DeviceWatch
from voxline.base.clock import RealClock
from voxline.session import device_loop
from voxline.session.device_loop import as_event
from voxline.session.events import DeviceLost, DeviceReturned, ResponseFinished, SessionEvent
from voxline.session.report.lines import EventLines
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.devices import (KIOSK_SPEAKER, FakeSoundServer, VirtualDevices, kiosk, load_sink, read_until,
                                   unload_sink, vdev, watch_over)

__all__ = ["kiosk", "vdev"]  # fixtures used below

# kills streams on the shared PulseAudio daemon: never beside another test on it
pytestmark = pytest.mark.xdist_group("pulse")

# ---------------------------------------------------------------------------- the table, on its own


def test_the_table_covers_every_case_and_reports_an_end_once() -> None:
    assert set(TRANSITIONS) == {(before, now) for before in (False, True) for now in (False, True)}
    assert TRANSITIONS[(False, True)] is Action.REPORT_AND_REOPEN
    assert TRANSITIONS[(True, True)] is Action.REOPEN
    assert TRANSITIONS[(False, False)] is Action.NONE


@dataclass
class FakeStream:
    """A speaker whose stream ends when told, and opens again while ``can_open``."""

    kind: str = "output"
    device: DeviceInfo = field(default_factory=lambda: DeviceInfo(3, "Kiosk Speaker", "ALSA", 0, 2, 48000.0))
    ended: bool = False
    can_open: bool = True
    device_gone: bool = False  # it opens all the same, on the server's default device
    on_fallback: bool = False
    reopens: int = 0
    tries: int = 0

    def reopen(self) -> bool:
        self.tries += 1
        if self.can_open:
            self.ended = False
            self.on_fallback = self.device_gone
            self.reopens += 1
        return not self.ended


def test_an_ended_stream_is_reported_opened_again_and_reported_back() -> None:
    stream = FakeStream()
    keeper = StreamKeeper([stream])  # type: ignore[list-item]
    assert keeper.poll() == []
    stream.ended = True
    lost, back = keeper.poll()
    assert (lost.lost, lost.ended, lost.now_on, lost.device) == (True, True, None, "3 Kiosk Speaker")
    assert (back.lost, back.ended) == (False, True) and stream.reopens == 1
    assert keeper.poll() == []


def test_a_stream_that_will_not_open_is_tried_less_often_and_reported_back_once_it_runs() -> None:
    """While the sound server is away each failed try costs an open (and PortAudio's lines on stderr): tries come
    every poll, then every 2nd, 4th and at most 8th poll (4 s); the first that opens reports the stream back."""
    stream = FakeStream(can_open=False)
    keeper = StreamKeeper([stream])  # type: ignore[list-item]
    stream.ended = True
    assert [c.lost for c in keeper.poll()] == [True]
    tried = [stream.tries]
    for _ in range(40):
        assert keeper.poll() == []
        tried.append(stream.tries)
    gaps = [b - a for a, b in zip(tried, tried[1:])]
    polls_between = [len(run) for run in "".join(map(str, gaps)).split("1")[:-1]]  # polls skipped
    assert polls_between[:3] == [1, 3, 7] and set(polls_between[2:]) == {7}, gaps
    stream.can_open = True
    polls = 0
    while not (changes := keeper.poll()):
        polls += 1
    assert [c.lost for c in changes] == [False] and polls <= 8 and stream.reopens == 1
    assert keeper.poll() == []
    stream.ended = True  # a later end starts over at a try each poll
    assert [c.lost for c in keeper.poll()] == [True, False]


def test_a_stream_whose_device_is_gone_opens_on_the_servers_default_and_is_reported_lost_there() -> None:
    stream = FakeStream(device_gone=True)
    keeper = StreamKeeper([stream])  # type: ignore[list-item]
    stream.ended = True
    ended, moved = keeper.poll()
    assert (ended.lost, ended.ended) == (True, True) and (moved.lost, moved.ended, moved.now_on) == (True, False, None)
    assert keeper.poll() == []  # running: nothing more from the keeper (the device watch moves it back)


def test_a_reopen_that_raises_is_tried_again_not_raised() -> None:
    class Raising(FakeStream):
        def reopen(self) -> bool:
            raise RuntimeError("no such device")

    stream = Raising(ended=True)
    keeper = StreamKeeper([stream])  # type: ignore[list-item]
    assert [c.lost for c in keeper.poll()] == [True]
    assert keeper.poll() == []


@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=40))
def test_losses_and_returns_alternate_and_each_return_is_a_running_stream(steps: list[tuple[bool, bool]]) -> None:
    stream = FakeStream()
    keeper = StreamKeeper([stream])  # type: ignore[list-item]
    reported: list[bool] = []
    for ends, can_open in steps:
        stream.ended = stream.ended or ends
        stream.can_open = can_open
        changes = keeper.poll()
        reported += [c.lost for c in changes]
        if changes and not changes[-1].lost:
            assert not stream.ended
    assert all(a != b for a, b in zip(reported, reported[1:]))  # lost, back, lost, ...
    assert not reported or reported[0] is True
    assert (bool(reported) and reported[-1]) == stream.ended  # still lost exactly while it has not run again


def test_only_devices_that_can_be_opened_again_are_kept() -> None:
    assert StreamKeeper.of([object(), "speaker"]) is None
    assert StreamKeeper.of([FakeStream()]) is not None


def test_an_ended_stream_is_its_own_line_and_event() -> None:
    from voxline.audio.device_watch import DeviceChange

    event = as_event(DeviceChange("output", "3 Kiosk Speaker", True, None, ended=True), 1.5)
    assert event == DeviceLost("output", "3 Kiosk Speaker", None, 1.5, ended=True)
    assert EventLines().line(event) == "speaker 3 Kiosk Speaker: its stream ended; opening it again"


async def test_a_device_back_is_reported_once_though_its_stream_opened_again_and_was_moved_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Unplugged, and its stream ended with it: once the device is back the keeper opens the stream there again and
    the watch, which had it lost, moves it back. Both see it return; the session is told once."""
    server = FakeSoundServer()
    stream = FakeStream(device=KIOSK_SPEAKER)
    monkeypatch.setattr(device_loop, "POLL_S", 0.001)
    monkeypatch.setattr(DeviceWatch, "of", classmethod(lambda cls, devices: watch_over(server)))
    events: asyncio.Queue[DeviceLost | DeviceReturned] = asyncio.Queue()
    loop = asyncio.create_task(device_loop.device_watch_loop([stream], RealClock(), events.put_nowait))  # type: ignore[list-item]
    try:
        server.present, server.stream_on = set(), "builtin"
        stream.ended, stream.can_open = True, False
        first, second = [await asyncio.wait_for(events.get(), 10) for _ in range(2)]
        assert {(e.fallback, e.ended) for e in (first, second)} == {("builtin", False), (None, True)}  # type: ignore[union-attr]
        server.present, stream.can_open = {"kiosk"}, True
        back = await asyncio.wait_for(events.get(), 10)
        assert isinstance(back, DeviceReturned)
        polls = server.polls

        async def both_looked() -> None:  # the keeper's next try comes within 8 polls
            while stream.ended or server.polls < polls + 20:
                await asyncio.sleep(0.001)

        await asyncio.wait_for(both_looked(), 10)
        assert events.empty() and stream.reopens == 1 and server.moves == ["kiosk"]
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop


async def test_a_failed_poll_keeps_what_the_watch_knew_and_a_device_back_meanwhile_is_moved_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A poll that failed once (the server restarting) threw the watch away; the new one took every device as
    present, so one that came back meanwhile was never moved back off the fallback, and no return was said."""
    from voxline.audio import device_watch

    server = FakeSoundServer()
    monkeypatch.setattr(device_loop, "POLL_S", 0.001)
    monkeypatch.setattr(DeviceWatch, "of", classmethod(lambda cls, devices: watch_over(server)))
    monkeypatch.setattr(device_watch, "connect", lambda name: server)  # connecting again reaches the same server
    events: asyncio.Queue[DeviceLost | DeviceReturned] = asyncio.Queue()
    stream = FakeStream(device=KIOSK_SPEAKER)
    loop = asyncio.create_task(device_loop.device_watch_loop([stream], RealClock(), events.put_nowait))  # type: ignore[list-item]
    try:
        server.present, server.stream_on = set(), "builtin"
        lost = await asyncio.wait_for(events.get(), 10)
        assert isinstance(lost, DeviceLost) and lost.fallback == "builtin"
        server.failing = 3
        server.present = {"kiosk"}  # back while the server could not be read
        back = await asyncio.wait_for(events.get(), 10)
        assert isinstance(back, DeviceReturned) and server.moves == ["kiosk"] and server.stream_on == "kiosk"
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop


# ---------------------------------------------------------------------------- the virtual devices


def _server_index(kind: str, tag: str) -> str:
    """The sound server's index of the stream tagged ``tag`` (``pactl list sink-inputs``/``source-outputs``)."""
    listing = subprocess.run(["pactl", "list", "sink-inputs" if kind == "output" else "source-outputs"],
                             capture_output=True, text=True, check=True).stdout
    for block in re.split(r"\n(?=\S)", listing):
        if f'voxline.stream = "{tag}"' in block:
            return block.split("#", 1)[1].split()[0]
    raise AssertionError(f"no {kind} stream tagged {tag} on the sound server")


@pytest.mark.alone  # streams opened again compete with the other workers for both cores
async def test_streams_the_sound_server_kills_are_reported_opened_again_and_go_on(vdev: VirtualDevices) -> None:
    async with serve(ServerConfig(port=0, voice="tone")) as srv:
        settings = SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none")
        session = VoiceSession.on_devices(settings, output_device=vdev.speaker, input_device=f"{vdev.mic}.monitor",
                                          aec=None, local_vad=None)
        speaker, mic = session.devices
        seen: list[SessionEvent] = []
        async with session:
            await session.send_text("tell me a long story")
            speaker_index = await asyncio.to_thread(_server_index, "output", speaker.tag)
            mic_index = await asyncio.to_thread(_server_index, "input", mic.tag)
            for command in (["kill-sink-input", speaker_index], ["kill-source-output", mic_index]):
                subprocess.run(["pacmd", *command], check=True, capture_output=True)
            await read_until(session, seen, DeviceReturned, 2)
            lost = {e.kind: e for e in seen if isinstance(e, DeviceLost)}
            assert set(lost) == {"input", "output"} and all(e.ended for e in lost.values()), seen
            assert all(abs(e.at - session.output.now()) < 5.0 for e in lost.values()), lost
            assert (speaker.reopens, mic.reopens) == (1, 1)
            assert not speaker.ended and not mic.ended
            # fresh streams under the same tags: the device watch still finds them
            assert await asyncio.to_thread(_server_index, "output", speaker.tag) != speaker_index
            played, captured = speaker.callbacks, mic.blocks_captured
            for _ in range(200):  # and they run: the session goes on playing and recording
                if speaker.callbacks > played + 10 and mic.blocks_captured > captured + 10:
                    break
                await asyncio.sleep(0.05)
            assert speaker.callbacks > played + 10 and mic.blocks_captured > captured + 10
            await read_until(session, seen, ResponseFinished, limit_s=60.0)
            assert session.connected
        assert not any(getattr(e, "fatal", False) for e in seen)


@pytest.mark.alone  # a stream moved to the fallback stalls when the other workers hold both cores
async def test_a_stream_killed_while_its_device_is_unplugged_plays_on_the_fallback_and_moves_back(kiosk: str) -> None:
    """Unplugged, the speaker's stream was on the server's default device; killed there, it could not be opened on
    its own device, which was gone: the session stayed silent until the device came back."""
    async with serve(ServerConfig(port=0, voice="tone")) as srv:
        settings = SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none")
        session = VoiceSession.on_devices(settings, output_device=kiosk, input_device=f"{kiosk}.monitor",
                                          aec=None, local_vad=None)
        speaker, _mic = session.devices
        seen: list[SessionEvent] = []
        async with session:
            await session.send_text("tell me a long story")
            unload_sink(kiosk)  # unplugged: the server moves both streams to its default devices
            await read_until(session, seen, DeviceLost, 2)
            index = await asyncio.to_thread(_server_index, "output", speaker.tag)
            subprocess.run(["pacmd", "kill-sink-input", index], check=True, capture_output=True)
            await read_until(session, seen, DeviceLost, 4)
            ended, moved = [e for e in seen if isinstance(e, DeviceLost)][2:]
            assert (ended.kind, ended.ended, moved.kind, moved.ended, moved.fallback) == (
                "output", True, "output", False, None)
            assert speaker.on_fallback and not speaker.ended and speaker.reopens == 1
            played = speaker.callbacks
            for _ in range(200):  # it plays, on the fallback
                if speaker.callbacks > played + 10:
                    break
                await asyncio.sleep(0.05)
            assert speaker.callbacks > played + 10

            load_sink(kiosk, "Kiosk_Headset")  # plugged in again: both streams are moved back onto it
            await read_until(session, seen, DeviceReturned, 2)
            server = connect()
            assert server is not None
            with server:
                assert server.stream_device("output", speaker.tag) == kiosk
            await read_until(session, seen, ResponseFinished, limit_s=60.0)
        returned = [e.kind for e in seen if isinstance(e, DeviceReturned)]
        assert sorted(returned) == ["input", "output"], seen  # each once
        assert not any(getattr(e, "fatal", False) for e in seen)
