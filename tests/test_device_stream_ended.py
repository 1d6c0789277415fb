"""A device stream that ends on its own (killed by the sound server, a failing device) is reported and opened again.

The keeper's decisions are a table, checked on its own and through fake streams; then on
PulseAudio's virtual devices the server kills a running session's speaker and microphone
streams, and the session reports both, opens them again and goes on playing and recording.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voxline.audio.device_list import DeviceInfo
from voxline.audio.stream_keeper import TRANSITIONS, Action, StreamKeeper
from voxline.realtime.server import ServerConfig, serve
from voxline.session.device_loop import as_event
from voxline.session.events import DeviceLost, DeviceReturned, ResponseFinished, SessionEvent
from voxline.session.report.lines import EventLines
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.devices import VirtualDevices, vdev

__all__ = ["vdev"]  # fixture used below

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
    reopens: int = 0

    def reopen(self) -> bool:
        if self.can_open:
            self.ended = False
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


def test_a_stream_that_will_not_open_is_tried_each_poll_and_reported_back_once_it_runs() -> None:
    stream = FakeStream(can_open=False)
    keeper = StreamKeeper([stream])  # type: ignore[list-item]
    stream.ended = True
    assert [c.lost for c in keeper.poll()] == [True]
    assert keeper.poll() == [] and keeper.poll() == []
    stream.can_open = True
    assert [c.lost for c in keeper.poll()] == [False]
    assert stream.reopens == 1


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


# ---------------------------------------------------------------------------- the virtual devices


def _server_index(kind: str, tag: str) -> str:
    """The sound server's index of the stream tagged ``tag`` (``pactl list sink-inputs``/``source-outputs``)."""
    listing = subprocess.run(["pactl", "list", "sink-inputs" if kind == "output" else "source-outputs"],
                             capture_output=True, text=True, check=True).stdout
    for block in re.split(r"\n(?=\S)", listing):
        if f'voxline.stream = "{tag}"' in block:
            return block.split("#", 1)[1].split()[0]
    raise AssertionError(f"no {kind} stream tagged {tag} on the sound server")


async def _until(session: VoiceSession, seen: list[SessionEvent], wanted: type, count: int = 1,
                 limit_s: float = 15.0) -> None:
    async def read() -> None:
        while sum(isinstance(e, wanted) for e in seen) < count:
            seen.append(await session.__anext__())  # type: ignore[arg-type]
    await asyncio.wait_for(read(), limit_s)


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
            await _until(session, seen, DeviceReturned, 2)
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
            await _until(session, seen, ResponseFinished, limit_s=60.0)
            assert session.connected
        assert not any(getattr(e, "fatal", False) for e in seen)
