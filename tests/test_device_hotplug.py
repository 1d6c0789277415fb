"""Sound-server devices by the names users see, and a device unplugged and plugged in mid-session.

The watch's decisions are a table, checked on its own and through a fake server; the rest runs
on PulseAudio's virtual devices: a null sink (and its monitor) loaded for each test, listed and
chosen by name, then unloaded and loaded again while a session plays and records on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voxline.audio.device_list import list_devices, resolve_device
from voxline.audio.device_watch import TRANSITIONS, Action
from voxline.audio.sound_server import connect
from voxline.base.errors import AudioError
from voxline.realtime.server import ServerConfig, serve
from voxline.session.events import (AssistantAudioStarted, DeviceLost, DeviceReturned, ResponseFinished, SessionError,
                                    SessionEvent)
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.cli import voxline
from tests.support.devices import FakeSoundServer, kiosk, load_sink, pactl, read_until, require_pulse, watch_over

__all__ = ["kiosk"]  # fixture used below

# loads and unloads sinks of the shared PulseAudio daemon: never beside another test on it
pytestmark = pytest.mark.xdist_group("pulse")

# ---------------------------------------------------------------------------- the table, on its own


def test_the_transition_table_covers_every_case_and_reports_each_edge_once() -> None:
    # a new server number is looked for only on a device present and not lost
    assert set(TRANSITIONS) == {(lost, present, renumbered) for lost in (False, True) for present in (False, True)
                                for renumbered in (False, True) if not renumbered or (present and not lost)}
    assert TRANSITIONS[(False, False, False)] == (True, Action.REPORT_LOST)
    assert TRANSITIONS[(True, True, False)] == (False, Action.MOVE_BACK)
    assert TRANSITIONS[(False, True, True)] == (False, Action.REPORT_LOST_AND_MOVE_BACK)
    # nothing to do exactly where nothing changed: a device here as it was, or one still gone
    assert {key for key, (_, action) in TRANSITIONS.items() if action is Action.NONE} == {
        (False, True, False), (True, False, False)}


def test_a_device_gone_and_back_between_two_polls_has_its_stream_moved_back() -> None:
    """Unplugged and plugged in again within one poll (half a second): the server had moved the stream to its
    fallback, the watch saw the device there both times, and the stream stayed on the fallback, with no event. The
    device is back under a new server number: the loss and the return are both said, and the stream moved back."""
    server = FakeSoundServer(present={"builtin", "kiosk"})
    watch = watch_over(server)
    assert watch.poll() == []
    server.replug("kiosk")
    assert [(c.lost, c.now_on) for c in watch.poll()] == [(True, "builtin"), (False, "kiosk")]
    assert server.moves == ["kiosk"] and watch.poll() == []
    server.replug("kiosk")
    server.refuse_moves = True  # again, and the move fails this time: it is tried at the next poll
    assert [c.lost for c in watch.poll()] == [True]
    server.refuse_moves = False
    assert [c.lost for c in watch.poll()] == [False] and server.stream_on == "kiosk"


def test_a_device_gone_and_back_before_the_watchs_first_look_has_its_stream_moved_back() -> None:
    server = FakeSoundServer(present={"builtin", "kiosk"})
    watch = watch_over(server)
    server.replug("kiosk")  # the number the watch never saw: the stream, opened there, is found elsewhere
    assert [(c.lost, c.now_on) for c in watch.poll()] == [(True, "builtin"), (False, "kiosk")]
    assert watch.poll() == []


def test_a_new_number_with_the_stream_still_on_the_device_is_no_replug(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sound server restarted numbers every device anew, and a desktop may have put the stream back already:
    neither is a loss and a return."""
    from voxline.audio import device_watch

    server = FakeSoundServer(present={"builtin", "kiosk"})
    watch = watch_over(server)
    assert watch.poll() == []
    server.indexes = {"builtin": 50, "kiosk": 51}  # the stream still on kiosk
    assert watch.poll() == [] and server.moves == []
    restarted = FakeSoundServer(present={"builtin", "kiosk", "hdmi"}, indexes={"builtin": 7, "kiosk": 8})
    monkeypatch.setattr(device_watch, "connect", lambda name: restarted)
    assert watch.reconnect()  # as after any failed poll: the numbers are looked at afresh
    restarted.stream_on = "hdmi"  # a user's move, not the server's: left where it was put
    assert watch.poll() == [] and restarted.moves == []


def test_a_replug_whose_stream_is_not_found_at_once_is_taken_up_at_the_next_look() -> None:
    server = FakeSoundServer(present={"builtin", "kiosk"})
    watch = watch_over(server)
    assert watch.poll() == []
    server.replug("kiosk")
    hidden = server.stream_on
    server.stream_on = None  # type: ignore[assignment]  # the stream not listed for a moment
    assert watch.poll() == []
    server.stream_on = hidden
    assert [(c.lost, c.now_on) for c in watch.poll()] == [(True, "builtin"), (False, "kiosk")]


def test_a_stream_moved_while_its_device_stayed_is_left_where_it_was_put() -> None:
    """A user's move in the desktop's mixer, or the desktop's to new headphones: the device kept its number."""
    server = FakeSoundServer(present={"builtin", "kiosk"})
    watch = watch_over(server)
    assert watch.poll() == []
    server.stream_on = "builtin"
    assert watch.poll() == [] and server.moves == []


def test_unplugged_then_back_is_one_loss_on_the_fallback_then_one_return_with_the_stream_moved_back() -> None:
    server = FakeSoundServer()
    watch = watch_over(server)
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
    server = FakeSoundServer()
    watch = watch_over(server)
    server.present = set()
    assert [c.lost for c in watch.poll()] == [True]
    server.present, server.refuse_moves = {"kiosk"}, True  # back, but the stream cannot be moved yet
    assert watch.poll() == [] and watch.poll() == []
    server.refuse_moves = False
    assert [c.lost for c in watch.poll()] == [False]


@given(st.lists(st.booleans(), max_size=40))
def test_losses_and_returns_alternate_and_follow_the_device(presence: list[bool]) -> None:
    server = FakeSoundServer()
    watch = watch_over(server)
    reported: list[bool] = []
    for here in presence:
        server.present = {"kiosk"} if here else set()
        reported += [c.lost for c in watch.poll()]
    assert all(a != b for a, b in zip(reported, reported[1:]))  # lost, back, lost, ...
    assert not reported or reported[0] is True
    edges = sum(1 for a, b in zip([True, *presence], presence) if a != b)
    assert len(reported) == edges


# ---------------------------------------------------------------------------- the virtual devices


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
    # a part of the speaker's name, as a microphone, matched only its monitor: the assistant would hear itself
    with pytest.raises(AudioError, match=r"^input device name 'kiosk' matches only what a speaker plays \("):
        resolve_device("kiosk", "input")


def test_each_server_device_is_listed_at_the_rate_the_server_runs_it() -> None:
    """The rates ``pactl`` reports, every time: read after libpulse had freed its record, a rate
    was whatever that memory held (the 24 kHz virtual microphone listed at 48 kHz, a sink at 32691)."""
    require_pulse()
    expected = {}
    for kind in ("sinks", "sources"):
        for line in pactl("list", "short", kind).splitlines():  # index, name, driver, "s16le 1ch 24000Hz", state
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


@pytest.mark.alone  # a stream moved to the fallback stalls when the other workers hold both cores
async def test_unplugged_mid_session_the_session_goes_on_and_takes_the_device_back(kiosk: str) -> None:
    module = _module_of(kiosk)
    async with _on_the_kiosk(kiosk) as session:
        speaker, mic = session.devices
        seen: list[SessionEvent] = []
        async with session:
            await session.send_text("tell me a long story")
            pactl("unload-module", module)  # unplugged: the sink and its monitor go
            await read_until(session, seen, DeviceLost, 2)
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

            load_sink(kiosk, "Kiosk_Headset")  # plugged in again
            await read_until(session, seen, DeviceReturned, 2)
            _streams_on(kiosk, speaker.tag, mic.tag)
            await read_until(session, seen, ResponseFinished, limit_s=60.0)
        assert not any(getattr(e, "fatal", False) for e in seen)


@pytest.mark.alone  # a stream moved to the fallback stalls when the other workers hold both cores
async def test_unplugged_and_plugged_in_again_within_a_poll_the_stream_goes_back(kiosk: str) -> None:
    """Gone and back between two looks of the watch (a loose plug): the stream stayed on the fallback, unsaid."""
    module = _module_of(kiosk)
    async with _on_the_kiosk(kiosk) as session:
        speaker, mic = session.devices
        seen: list[SessionEvent] = []
        async with session:
            await session.send_text("tell me a long story")
            pactl("unload-module", module)
            load_sink(kiosk, "Kiosk_Headset")  # at once: a few milliseconds, well within the half-second poll
            await read_until(session, seen, DeviceReturned, 2)
            assert {e.kind for e in seen if isinstance(e, DeviceLost)} == {"input", "output"}
            _streams_on(kiosk, speaker.tag, mic.tag)
        assert not any(getattr(e, "fatal", False) for e in seen)


@pytest.mark.alone  # a stream moved to the fallback stalls when the other workers hold both cores
async def test_a_barge_in_after_an_unplug_goes_on_playing_on_a_fresh_stream(kiosk: str) -> None:
    """Unplugged mid-reply, the sound server moves the speaker's stream to its fallback. A barge-in then aborted the
    stream and started it again; over PulseAudio's ALSA plugin that start never returns once the stream was moved
    so: the session said speaker_stuck, and nothing played for the rest of it."""
    module = _module_of(kiosk)
    async with _on_the_kiosk(kiosk) as session:
        speaker, _mic = session.devices
        seen: list[SessionEvent] = []
        async with session:
            await session.send_text("tell me a long story")
            await read_until(session, seen, AssistantAudioStarted)
            pactl("unload-module", module)  # unplugged while the reply plays
            await read_until(session, seen, DeviceLost, 2)
            assert await session.interrupt() is not None  # the barge-in's cut drops what the device still held
            played = speaker.callbacks
            await session.send_text("go on")
            for _ in range(200):  # the next reply plays, on a fresh stream on the fallback
                if speaker.callbacks > played + 25:
                    break
                await asyncio.sleep(0.05)
            assert speaker.callbacks > played + 25
            seen += session.pending_events()
            stuck = [e for e in seen if isinstance(e, SessionError) and e.code == "speaker_stuck"]
            assert not stuck, stuck
            assert speaker.active
        assert not any(getattr(e, "fatal", False) for e in seen)


def _module_of(kiosk: str) -> str:
    """The sound server's module that made the kiosk's sink: unloading it unplugs the device."""
    return next(line.split()[0] for line in pactl("list", "short", "modules").splitlines()
                if f"sink_name={kiosk}" in line)


@contextlib.asynccontextmanager
async def _on_the_kiosk(kiosk: str) -> AsyncIterator[VoiceSession]:
    """A session on the kiosk's speaker and its monitor as the microphone, against a local server."""
    async with serve(ServerConfig(port=0, voice="tone")) as srv:
        settings = SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none")
        yield VoiceSession.on_devices(settings, output_device=kiosk, input_device=f"{kiosk}.monitor")


def _streams_on(kiosk: str, speaker_tag: str, mic_tag: str) -> None:
    server = connect()
    assert server is not None
    with server:
        assert server.stream_device("output", speaker_tag) == kiosk
        assert server.stream_device("input", mic_tag) == f"{kiosk}.monitor"
