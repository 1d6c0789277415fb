"""Sound-server devices by the names users see, and a device unplugged and plugged in mid-session.

The watch's decisions are a table, checked on its own and through a fake server; the rest runs
on PulseAudio's virtual devices: a null sink (and its monitor) loaded for each test, listed and
chosen by name, then unloaded and loaded again while a session plays and records on it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voxline.audio.device_list import DeviceInfo, list_devices, resolve_device
from voxline.audio.device_watch import TRANSITIONS, Action, DeviceWatch, _Entry
from voxline.audio.sound_server import ServerDevice, connect
from voxline.base.errors import AudioError
from voxline.realtime.server import ServerConfig, serve
from voxline.session.events import DeviceLost, DeviceReturned, ResponseFinished, SessionEvent
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.cli import voxline
from tests.support.devices import require_pulse

# loads and unloads sinks of the shared PulseAudio daemon: never beside another test on it
pytestmark = pytest.mark.xdist_group("pulse")

# ---------------------------------------------------------------------------- the table, on its own


def test_the_transition_table_covers_every_case_and_reports_each_edge_once() -> None:
    assert set(TRANSITIONS) == {(lost, present) for lost in (False, True) for present in (False, True)}
    assert TRANSITIONS[(False, False)] == (True, Action.REPORT_LOST)
    assert TRANSITIONS[(True, True)] == (False, Action.MOVE_BACK)
    assert all(action is Action.NONE for (lost, present), (_, action) in TRANSITIONS.items() if lost != present)


@dataclass
class FakeServer:
    """What the watch asks of a sound server, kept in lists."""

    present: set[str] = field(default_factory=lambda: {"kiosk"})
    stream_on: str = "kiosk"
    refuse_moves: bool = False
    moves: list[str] = field(default_factory=list)

    def devices(self) -> list[ServerDevice]:
        return [ServerDevice("output", name, name, 48000, 1, False, False) for name in sorted(self.present)]

    def stream_device(self, kind: str, tag: str) -> str | None:
        return self.stream_on

    def move_stream(self, kind: str, tag: str, name: str) -> bool:
        if self.refuse_moves or name not in self.present:
            return False
        self.moves.append(name)
        self.stream_on = name
        return True

    def close(self) -> None:
        pass


def _watch(server: FakeServer) -> DeviceWatch:
    info = DeviceInfo(9, "Kiosk Speaker", "PulseAudio", 0, 1, 48000.0, route="kiosk")
    return DeviceWatch(server, [_Entry("output", info, "t1")])  # type: ignore[arg-type]


def test_unplugged_then_back_is_one_loss_on_the_fallback_then_one_return_with_the_stream_moved_back() -> None:
    server = FakeServer()
    watch = _watch(server)
    assert watch.poll() == []
    server.present, server.stream_on = {"builtin"}, "builtin"  # the server moved the stream to its fallback
    [lost] = watch.poll()
    assert (lost.lost, lost.now_on, lost.device) == (True, "builtin", "9 Kiosk Speaker (kiosk)")
    assert watch.poll() == []  # still gone: nothing new
    server.present = {"builtin", "kiosk"}
    [back] = watch.poll()
    assert (back.lost, back.now_on) == (False, "kiosk") and server.moves == ["kiosk"]
    assert watch.poll() == []


def test_a_move_that_fails_is_tried_again_and_reported_once_it_succeeds() -> None:
    server = FakeServer()
    watch = _watch(server)
    server.present = set()
    assert [c.lost for c in watch.poll()] == [True]
    server.present, server.refuse_moves = {"kiosk"}, True  # back, but the stream cannot be moved yet
    assert watch.poll() == [] and watch.poll() == []
    server.refuse_moves = False
    assert [c.lost for c in watch.poll()] == [False]


@given(st.lists(st.booleans(), max_size=40))
def test_losses_and_returns_alternate_and_follow_the_device(presence: list[bool]) -> None:
    server = FakeServer()
    watch = _watch(server)
    reported: list[bool] = []
    for here in presence:
        server.present = {"kiosk"} if here else set()
        reported += [c.lost for c in watch.poll()]
    assert all(a != b for a, b in zip(reported, reported[1:]))  # lost, back, lost, ...
    assert not reported or reported[0] is True
    edges = sum(1 for a, b in zip([True, *presence], presence) if a != b)
    assert len(reported) == edges


# ---------------------------------------------------------------------------- the virtual devices


def _pactl(*args: str) -> str:
    return subprocess.run(["pactl", *args], capture_output=True, text=True, check=True).stdout.strip()


def _load_sink(name: str, description: str) -> str:
    return _pactl("load-module", "module-null-sink", f"sink_name={name}", "rate=48000", "channels=1",
                  f"sink_properties=device.description={description}")


@pytest.fixture
def kiosk() -> Iterator[str]:
    """A null sink of this test's own, as a USB headset would appear; unloaded at the end if still there."""
    require_pulse()
    name = f"voxkiosk{os.getpid()}"
    modules = [_load_sink(name, "Kiosk_Headset")]
    yield name
    for module in modules:
        subprocess.run(["pactl", "unload-module", module], capture_output=True)
    for line in _pactl("list", "short", "modules").splitlines():
        if f"sink_name={name}" in line:
            subprocess.run(["pactl", "unload-module", line.split()[0]], capture_output=True)


def test_the_sound_servers_sinks_and_sources_are_listed_with_the_names_the_desktop_shows(kiosk: str) -> None:
    devices = list_devices()
    sink = next(d for d in devices if d.route == kiosk)
    monitor = next(d for d in devices if d.route == f"{kiosk}.monitor")
    assert (sink.name, sink.hostapi, sink.max_output_channels, sink.max_input_channels) == (
        "Kiosk_Headset", "PulseAudio", 1, 0)
    assert monitor.max_input_channels == 1 and "Kiosk_Headset" in monitor.name
    assert sink.index > max(d.index for d in devices if d.route is None)  # numbered on after PortAudio's own
    for spec in (kiosk, "kiosk_headset", str(sink.index), sink.index):  # server name, shown name, index
        assert resolve_device(spec, "output").route == kiosk  # (its rate may change as the server runs it)
    assert resolve_device(f"{kiosk}.monitor", "input").route == f"{kiosk}.monitor"


def test_each_server_device_is_listed_at_the_rate_the_server_runs_it() -> None:
    """The rates ``pactl`` reports, every time: read after libpulse had freed its record, a rate
    was whatever that memory held (the 24 kHz virtual microphone listed at 48 kHz, a sink at 32691)."""
    require_pulse()
    expected = {}
    for kind in ("sinks", "sources"):
        for line in _pactl("list", "short", kind).splitlines():  # index, name, driver, "s16le 1ch 24000Hz", state
            fields = line.split("\t")
            expected[fields[1]] = int(fields[3].split()[-1].removesuffix("Hz"))
    assert expected.get("vmic") == 24000  # the virtual devices differ in rate (.ci/pulse-start)
    for _ in range(5):
        listed = {d.route: int(d.default_samplerate) for d in list_devices() if d.route in expected}
        assert listed == {name: rate for name, rate in expected.items() if name in listed}
        assert {"vmic", "vspk", "vmic.monitor"} <= set(listed)


def test_a_shown_name_several_devices_share_is_one_line_naming_them() -> None:
    require_pulse()
    with pytest.raises(AudioError, match=r"^output device name 'Null Output' is ambiguous: .*\(vspk\)"):
        resolve_device("Null Output", "output")


def test_voxline_devices_prints_the_server_devices_by_name(kiosk: str) -> None:
    result = voxline("devices")
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if kiosk in line.split())
    assert "Kiosk_Headset" in row and "PulseAudio" in row


def test_a_speaker_on_a_server_device_plays_there(kiosk: str) -> None:
    from voxline.audio.device_speaker import SpeakerSink
    from voxline.audio.playout import PlayoutBuffer

    with SpeakerSink(PlayoutBuffer(), device=kiosk) as speaker:
        server = connect()
        assert server is not None
        with server:
            assert server.stream_device("output", speaker.tag) == kiosk


async def _until(session: VoiceSession, seen: list[SessionEvent], wanted: type, count: int = 1,
                 limit_s: float = 15.0) -> None:
    """Read the session's events into ``seen`` until ``count`` of ``wanted`` came (bounded wait)."""
    async def read() -> None:
        while sum(isinstance(e, wanted) for e in seen) < count:
            seen.append(await session.__anext__())  # type: ignore[arg-type]
    await asyncio.wait_for(read(), limit_s)


@pytest.mark.alone  # a stream moved to the fallback stalls when the other workers hold both cores
async def test_unplugged_mid_session_the_session_goes_on_and_takes_the_device_back(kiosk: str) -> None:
    module = next(line.split()[0] for line in _pactl("list", "short", "modules").splitlines()
                  if f"sink_name={kiosk}" in line)
    async with serve(ServerConfig(port=0, voice="tone")) as srv:
        settings = SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none")
        session = VoiceSession.on_devices(settings, output_device=kiosk, input_device=f"{kiosk}.monitor")
        speaker, mic = session.devices
        seen: list[SessionEvent] = []
        async with session:
            await session.send_text("tell me a long story")
            _pactl("unload-module", module)  # unplugged: the sink and its monitor go
            await _until(session, seen, DeviceLost, 2)
            lost = {e.kind: e for e in seen if isinstance(e, DeviceLost)}
            assert set(lost) == {"input", "output"}
            # on the listener's timeline, as every other event (it was the monotonic clock: hours apart)
            assert all(abs(e.at - session.output.now()) < 5.0 for e in lost.values()), lost
            assert lost["output"].fallback not in (None, kiosk) and kiosk in lost["output"].device
            played = speaker.callbacks
            captured = mic.blocks_captured
            for _ in range(200):  # the session goes on, on the fallback devices
                if speaker.callbacks > played + 10 and mic.blocks_captured > captured + 10:
                    break
                await asyncio.sleep(0.05)
            assert speaker.callbacks > played + 10 and mic.blocks_captured > captured + 10
            assert session.connected

            _load_sink(kiosk, "Kiosk_Headset")  # plugged in again
            await _until(session, seen, DeviceReturned, 2)
            server = connect()
            assert server is not None
            with server:
                assert server.stream_device("output", speaker.tag) == kiosk
                assert server.stream_device("input", mic.tag) == f"{kiosk}.monitor"
            await _until(session, seen, ResponseFinished, limit_s=60.0)
        assert not any(getattr(e, "fatal", False) for e in seen)
