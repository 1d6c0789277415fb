"""Real sound devices through PulseAudio's virtual devices (docs/testing.md §2), plus the pure parts.

The device tests run on private clones of ``vspk`` and ``vmic`` (null sinks kept clocked by
a loopback into ``vdump``, selected with ``PULSE_SINK`` / ``PULSE_SOURCE``), so that other
programs playing into the shared virtual devices cannot mix into the recordings: the
speaker's sink monitor records what was played, and a file played into the microphone's
sink is captured from its monitor. Device tests skip when PulseAudio is unavailable and
fail in CI, where they must run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from voxline.audio.device_list import DeviceInfo, list_devices, resolve_device, stream_options
from voxline.audio.device_mic import MicSource
from voxline.audio.device_resample import CaptureResampler, PlayoutReader
from voxline.audio.device_speaker import SpeakerSink
from voxline.audio.device_timing import DacTimeline, dac_time
from voxline.base.errors import AudioError
from voxline.base.shown import printable
from voxline.audio import sound_server
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.wavio import write_wav
from voxline.session.cli import devices as devices_cli

from tests.support.devices import (
    RATE,
    ROOT,
    MonitorRecorder,
    Samples,
    VirtualDevices,
    chirp,
    find,
    last_loud,
    pulse,
    running_sink,
    unavailable,
    vdev,
    wait_for,
)

__all__ = ["pulse", "vdev"]  # fixtures used below

# -- pure parts: DAC timeline, rate adapters, table ---------------------------------------


def test_dac_timeline_keeps_blocks_contiguous_and_follows_slow_drift() -> None:
    timeline = DacTimeline(RATE)
    jitter = [0.0, 15e-6, -12e-6, 30e-6, -25e-6, 8e-6]
    starts = [timeline.place(10.0 + k * 0.02 + jitter[k], 480) for k in range(len(jitter))]
    assert starts[0] == 10.0
    for k in range(1, len(starts)):  # each block starts within half a sample of the previous end
        assert abs(starts[k] - (starts[k - 1] + 0.02)) <= 0.4 / RATE + 1e-12
    drifting = DacTimeline(RATE)
    place = [drifting.place(k * 0.02 * 1.0005, 480) for k in range(2000)]  # 500 ppm fast DAC
    assert abs(place[-1] - 1999 * 0.02 * 1.0005) < 0.5e-3
    assert drifting.jumps == 0


def test_dac_timeline_reanchors_on_a_jump_and_after_reset() -> None:
    timeline = DacTimeline(RATE)
    timeline.place(1.0, 480)
    assert timeline.place(1.5, 480) == 1.5  # an underflow: the device resumed later
    assert timeline.jumps == 1
    timeline.reset()
    assert timeline.place(0.25, 480) == 0.25
    assert timeline.jumps == 1 and timeline.next_time == pytest.approx(0.27)


def test_dac_time_falls_back_to_current_time_plus_latency() -> None:
    assert dac_time(12.5, 12.0, 0.04) == 12.5
    assert dac_time(0.0, 12.0, 0.04) == pytest.approx(12.04)


def test_playout_reader_keeps_sample_times_through_resampling() -> None:
    playout = PlayoutBuffer(RATE)
    impulse = np.zeros(RATE, dtype=np.int16)
    impulse[2400] = 20000  # item sample 2400 plays 0.1 s after the first
    playout.enqueue(impulse, "a")
    reader = PlayoutReader(playout, 48000)
    out = np.zeros(48000 // 2, dtype=np.int16)
    for k in range(0, len(out), 960):
        reader.read_into(out[k : k + 960], 5.0 + k / 48000)
    assert int(np.argmax(np.abs(out))) == 4800  # 0.1 s at 48 kHz: no shift
    assert playout.playing_at(5.1) == ("a", 0, 2400)
    # the reader pulled audio ahead of the device; it is stamped after the last handed-out sample
    assert reader.buffered > 0 and playout.samples_played > RATE // 2
    assert playout.heard_samples("a", 0, 5.5 - 1 / RATE) == RATE // 2
    reader.reset()
    assert reader.buffered == 0


@pytest.mark.parametrize(("device_rate", "frames"), [(48000, 9600), (192000, 480 * 8)])
def test_a_device_block_larger_than_the_fifo_is_filled_and_nothing_is_dropped(device_rate: int, frames: int) -> None:
    """A 200 ms block at 48 kHz (9,600 samples) did not fit the 8,192-sample FIFO: what did not fit was cut, so the
    block never filled and the audio callback looped for ever, while the ledger counted the cut audio as heard."""
    playout = PlayoutBuffer()
    tone = (8000 * np.sin(2 * np.pi * 440 * np.arange(10 * RATE) / RATE)).astype(np.int16)
    playout.enqueue(tone, "a")
    reader = PlayoutReader(playout, device_rate)
    out = np.zeros(frames, dtype=np.int16)
    handed = 0
    for k in range(40):
        reader.read_into(out, 1.0 + handed / device_rate)
        handed += frames
        assert np.abs(out[frames // 2:]).max() > 4000  # a whole block of the tone each time
    # everything pulled from the playout was handed out or waits in the FIFO, but what soxr's filter still holds
    # (up to some 20 ms): none of it was cut
    unaccounted = playout.samples_played * device_rate / RATE - (handed + reader.buffered)
    assert 0 <= unaccounted < 0.03 * device_rate, unaccounted


def test_capture_resampler_stamps_output_with_input_time() -> None:
    resampler = CaptureResampler(48000, RATE)
    block = np.zeros(960, dtype=np.int16)
    outputs = []
    for k in range(20):
        chunk = block.copy()
        if k == 10:
            chunk[100] = 20000  # captured at 7.0 + (9600 + 100) / 48000
        outputs.append(resampler.process(chunk, 7.0 + k * 960 / 48000))
    stamped = [(when, out) for when, out in outputs if len(out)]
    for (w0, o0), (w1, _) in zip(stamped, stamped[1:]):
        assert w1 == pytest.approx(w0 + len(o0) / RATE, abs=1e-9)
    when, out = stamped[0]
    peak = int(np.argmax(np.abs(np.concatenate([o for _, o in stamped]))))
    assert when + peak / RATE == pytest.approx(7.0 + 9700 / 48000, abs=0.5 / RATE)


@pytest.mark.device
def test_a_sinks_description_with_terminal_controls_is_listed_escaped(pulse: None) -> None:
    description = "Evil\x1b[2J\x1b]0;pwned\x07Line"
    module = subprocess.run(["pactl", "load-module", "module-null-sink", "sink_name=voxline_evil",
                             f"sink_properties=device.description='{description}'"],
                            capture_output=True, text=True, check=True).stdout.strip()
    try:
        evil = next(d for d in list_devices() if d.route == "voxline_evil")
        assert evil.name == "Evil\\x1b[2J\\x1b]0;pwned\\x07Line"
        assert resolve_device("Evil", "output") == evil  # still found by what the table shows
    finally:
        subprocess.run(["pactl", "unload-module", module], check=True)


def test_a_device_description_with_terminal_controls_is_shown_escaped() -> None:
    """A sink's description is anyone's to set: printed raw, its escapes could clear the screen or rename the window."""
    evil = DeviceInfo(7, printable("Evil\x1b[2J\x1b]0;pwned\x07Line"), "PulseAudio", 0, 1, 48000.0, route="ev\x1bil")
    table = devices_cli.format_table([evil])
    assert "\x1b" not in table and "\x07" not in table and "\\x1b" in table
    assert "\x1b" not in evil.label


def test_a_device_label_an_error_shows_is_taken_as_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The labels messages list ("2 Null Output (vspk)") were refused as names: copied from an ambiguity or a
    "no device" error into --output-device, they said "no output device named"."""
    from voxline.audio import device_list

    listed = [DeviceInfo(0, "pulse", "ALSA", 32, 32, 44100.0, is_default_out=True),
              DeviceInfo(2, "Null Output", "PulseAudio", 0, 1, 48000.0, route="vspk"),
              DeviceInfo(3, "Null Output", "PulseAudio", 0, 1, 48000.0, route="kiosk")]
    monkeypatch.setattr(device_list, "list_devices", lambda: listed)
    with pytest.raises(AudioError, match=r"is ambiguous: 2 Null Output \(vspk\), 3 Null Output \(kiosk\)$"):
        resolve_device("Null Output", "output")
    assert resolve_device("2 Null Output (vspk)", "output") is listed[1]
    assert resolve_device("3 null output (KIOSK)", "output") is listed[2]
    assert resolve_device("0 pulse", "output") is listed[0]


def test_device_table_lists_defaults() -> None:
    rows = [
        DeviceInfo(0, "pulse", "ALSA", 32, 32, 44100.0),
        DeviceInfo(1, "default", "ALSA", 32, 32, 44100.0, is_default_in=True, is_default_out=True),
    ]
    lines = devices_cli.format_table(rows).splitlines()
    assert lines[0].split() == ["#", "name", "server", "name", "host", "api", "in", "out", "rate", "default"]
    assert lines[1].split() == ["0", "pulse", "ALSA", "32", "32", "44100"]
    assert lines[2].split() == ["1", "default", "ALSA", "32", "32", "44100", "input,", "output"]


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_missing_portaudio_says_to_install_libportaudio2(tmp_path: Path) -> None:
    # a stand-in sounddevice module that fails the way the real one does without PortAudio
    (tmp_path / "sounddevice.py").write_text("raise OSError('PortAudio library not found')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    code = (
        "from audio.device_list import list_devices\n"
        "try:\n list_devices()\nexcept Exception as e:\n print(type(e).__name__, e)"
    )
    result = _python(code, env)
    assert result.stdout.strip() == (
        "AudioError the PortAudio library is not installed; install libportaudio2 (e.g. apt-get install libportaudio2)"
    )


def test_no_sound_server_is_one_clear_line(tmp_path: Path) -> None:
    empty = tmp_path / "xdg"
    empty.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(empty), "PULSE_SERVER": f"unix:{empty}/none", "PYTHONPATH": str(ROOT)}
    code = (
        "from audio.device_list import list_devices, resolve_device\n"
        "if list_devices():\n print('cards present')\nelse:\n"
        " try:\n  resolve_device(None, 'output')\n except Exception as e:\n  print(type(e).__name__, e)"
    )
    result = _python(code, env)
    if result.stdout.strip() == "cards present":
        pytest.skip("this machine has sound cards without a sound server")
    if "libportaudio2" in result.stdout:
        unavailable("PortAudio is not installed")
    assert result.stdout.strip() == (
        "AudioError no sound devices found; is a sound server (PulseAudio or PipeWire) running?"
    )


# -- listing and resolving ----------------------------------------------------------------


@pytest.mark.device
def test_list_devices_shows_pulse_with_defaults(pulse: None) -> None:
    devices = list_devices()
    names = [d.name for d in devices]
    assert "pulse" in names and "default" in names
    assert [d.index for d in devices] == list(range(len(devices)))
    ported = [d for d in devices if d.route is None]  # PortAudio's; the sound server's are marked on their own
    assert sum(d.is_default_out for d in ported) == 1 and sum(d.is_default_in for d in ported) == 1
    served = [d for d in devices if d.route is not None]
    assert sum(d.is_default_out for d in served) <= 1 and sum(d.is_default_in for d in served) <= 1
    pulse_dev = devices[names.index("pulse")]
    assert pulse_dev.max_output_channels > 0 and pulse_dev.max_input_channels > 0
    assert pulse_dev.default_samplerate > 0


@pytest.mark.parametrize("spec", [1.5, 2.0, True])
def test_a_device_that_is_neither_an_index_nor_a_name_is_a_one_line_type_error(spec: object) -> None:
    with pytest.raises(TypeError, match=rf"^an output device is an index, a name or None, not {type(spec).__name__} "):
        resolve_device(spec, "output")  # type: ignore[arg-type]  # before: an internal assertion, or True taken as 1


@pytest.mark.device
def test_resolve_by_index_name_digits_and_default(pulse: None) -> None:
    devices = {d.name: d for d in list_devices()}
    pulse_dev = devices["pulse"]
    assert resolve_device(pulse_dev.index, "output") == pulse_dev
    assert resolve_device(str(pulse_dev.index), "input") == pulse_dev
    assert resolve_device("pulse", "output") == pulse_dev
    assert resolve_device("PULSE", "input") == pulse_dev
    assert resolve_device(None, "output").is_default_out
    assert resolve_device(None, "input").is_default_in


@pytest.mark.device
def test_bad_index_is_one_line_naming_the_devices(pulse: None) -> None:
    available = ", ".join(d.label for d in list_devices() if d.max_output_channels > 0)
    with pytest.raises(AudioError) as caught:
        resolve_device(77, "output")
    assert str(caught.value) == f"no output device 77; available: {available}"
    assert "\n" not in str(caught.value) and "0 pulse" in str(caught.value)
    with pytest.raises(AudioError, match=r"^no input device named 'nosuchmic'; available: .*pulse"):
        resolve_device("nosuchmic", "input")
    # digits other than ASCII are a name (int() refuses "²": before, a ValueError traceback), and an empty name
    # is said to be empty (before: "ambiguous", listing every device)
    with pytest.raises(AudioError, match=r"^no output device named '²'; available: "):
        resolve_device("²", "output")
    with pytest.raises(AudioError, match=r"^an output device name is empty: give an index or a name; available: "):
        resolve_device(" ", "output")


@pytest.mark.device
def test_sink_with_a_bad_device_fails_before_opening(pulse: None) -> None:
    with pytest.raises(AudioError, match=r"^no output device 99; available: "):
        SpeakerSink(PlayoutBuffer(RATE), device=99)


@pytest.mark.device
def test_a_device_that_cannot_open_is_one_line_naming_the_devices(pulse: None) -> None:
    sink = SpeakerSink(PlayoutBuffer(RATE), device="default", device_rate=1)  # a rate no device runs at
    with pytest.raises(AudioError) as caught:
        sink.start()
    message = str(caught.value)
    available = ", ".join(d.label for d in list_devices() if d.max_output_channels > 0)
    assert message.startswith(f"cannot open output device {sink.device.index} default: ")
    assert "Invalid sample rate" in message and message.endswith(f"; available: {available}")
    assert "\n" not in message


class _Vanished:
    """A stream whose device went away: its clock cannot be read, and it is still to be aborted and closed."""

    def __init__(self, stream: object, error: type[Exception]) -> None:
        self.stream, self.error = stream, error

    @property
    def time(self) -> float:
        raise self.error("the device is gone")

    def abort(self) -> None:
        self.stream.abort()  # type: ignore[attr-defined]

    def close(self) -> None:
        self.stream.close()  # type: ignore[attr-defined]


@pytest.mark.device
def test_a_speaker_closed_after_its_device_vanished_is_closed_and_a_closed_one_keeps_its_time(pulse: None) -> None:
    sink = SpeakerSink(PlayoutBuffer(RATE))
    sink.start()
    stream = sink._stream
    sink._stream = _Vanished(stream, sink._sd.PortAudioError)
    sink.close()  # before: the unreadable clock skipped the abort and the close
    assert stream.closed
    with pytest.raises(AudioError, match="the speaker stream is not open"):
        sink.now()  # no clock was read: none to give
    sink.start()
    sink.close()
    assert sink.now() == sink.now() > 0  # where the stream stopped, and it stays there


@pytest.mark.device
async def test_cli_prints_the_table_and_json(pulse: None, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    devices_cli.add_arguments(parser)
    assert await devices_cli.run(parser.parse_args([])) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:2] == ["#", "name"]
    assert any(line.split()[:2] == ["0", "pulse"] for line in table)
    assert await devices_cli.run(parser.parse_args(["--json"])) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {row["name"] for row in rows} >= {"pulse", "default"}


# -- the speaker --------------------------------------------------------------------------


@pytest.mark.device
@pytest.mark.parametrize("device_rate", [None, 48000], ids=["24k", "resampled-48k"])
def test_speaker_plays_a_signal_into_the_speaker_sink(vdev: VirtualDevices, device_rate: int | None) -> None:
    signal = chirp(1.0)
    playout = PlayoutBuffer(RATE)
    with MonitorRecorder(f"{vdev.speaker}.monitor") as recorder:
        sink = running_sink(playout, device_rate=device_rate)
        try:
            assert sink.device_rate == (device_rate or RATE)
            playout.enqueue(signal, "a")
            playout.mark_complete("a")
            wait_for(lambda: playout.queued_samples == 0, "the signal to be handed to the device")
            time.sleep(0.4)  # let the device play out what it holds
            end = sink.now()
        finally:
            sink.close()
        recording = recorder.stop()
    start, score = find(recording, signal)
    # the sink runs at 48 kHz: the server resamples on the way in and out of it, which leaves
    # the recording up to about half a sample off the 24 kHz grid (a run-to-run phase)
    assert score > 0.99
    heard = recording[start : start + len(signal)].astype(np.float64)
    assert np.sqrt(np.mean(heard**2)) == pytest.approx(np.sqrt(np.mean(signal.astype(np.float64) ** 2)), rel=0.02)
    assert last_loud(recording[start:], 600) == pytest.approx(len(signal), abs=24)
    assert playout.heard_samples("a", 0, end) == len(signal)
    assert sink.callback_errors == 0


@pytest.mark.device
def test_playout_underrun_is_counted_when_an_item_starves(vdev: VirtualDevices) -> None:
    playout = PlayoutBuffer(RATE)
    sink = running_sink(playout)
    try:
        playout.enqueue(chirp(0.2), "a")  # still streaming: not marked complete
        wait_for(lambda: playout.underrun_samples >= 4 * sink.block, "the playout to starve")
        first = playout.underrun_events
        playout.enqueue(chirp(0.1), "a")
        wait_for(lambda: playout.underrun_events > first, "a second underrun")
        assert playout.underrun_events == first + 1
        playout.mark_complete("a")
        starved = playout.underrun_samples
        time.sleep(0.2)
        assert playout.underrun_samples == starved  # idle after completion is not an underrun
        assert sink.callback_errors == 0
    finally:
        sink.close()


@pytest.mark.device
def test_a_cut_in_silence_keeps_the_stream_running(vdev: VirtualDevices) -> None:
    playout = PlayoutBuffer(RATE)
    sink = running_sink(playout)
    try:
        playout.enqueue(chirp(0.1), "a")
        playout.mark_complete("a")
        wait_for(lambda: playout.heard_samples("a", 0, sink.now()) == RATE // 10, "the item to be heard")
        cut = sink.interrupt(fade_ms=5)
        assert cut.item_id == "a" and not cut.playing and cut.heard_samples == RATE // 10
        assert cut.revoked_samples == 0 and sink.restarts == 0 and sink.running
    finally:
        sink.close()


class _StallingPlayout(PlayoutBuffer):
    """A playout whose read stalls once (to starve the device) and then raises once."""

    def __init__(self) -> None:
        super().__init__(RATE)
        self.reads = 0
        self.stall_at: int | None = None
        self.raise_at: int | None = None

    def read_into(self, out: npt.NDArray[np.int16], play_time: float) -> None:
        self.reads += 1
        if self.reads == self.stall_at:
            time.sleep(0.25)
        if self.reads == self.raise_at:
            raise RuntimeError("broken read")
        super().read_into(out, play_time)


@pytest.mark.device
def test_device_underflow_and_callback_errors_are_counted_apart(vdev: VirtualDevices) -> None:
    playout = _StallingPlayout()
    sink = running_sink(playout)
    try:
        playout.stall_at = playout.reads + 3
        wait_for(lambda: sink.device_underflows >= 1, "the device to report an underflow")
        wait_for(lambda: sink.running, "the stream to recover")
        assert sink.callback_errors == 0
        playout.raise_at = playout.reads + 3
        wait_for(lambda: sink.callback_errors == 1, "the guarded callback error")
        assert sink.last_callback_error == "RuntimeError: broken read"
        reads = playout.reads
        wait_for(lambda: playout.reads > reads + 5, "the stream to keep running after the error")
        assert sink.active
    finally:
        sink.close()


# -- the microphone -----------------------------------------------------------------------


async def _capture_while_playing(fixture: Path, sink: str, mic: MicSource) -> list[tuple[float, Samples]]:
    got: list[tuple[float, Samples]] = []

    async def collect() -> None:
        async for item in mic.blocks():
            got.append(item)

    async with asyncio.TaskGroup() as group:
        group.create_task(collect())
        while sum(len(b) for _, b in got) < RATE // 2 or not mic.blocks_captured:
            await asyncio.sleep(0.05)  # the capture stream is running
        player = await asyncio.create_subprocess_exec("paplay", "-d", sink, str(fixture))
        assert await player.wait() == 0
        await asyncio.sleep(0.3)
        mic.close()
    return got


@pytest.mark.device
async def test_mic_receives_what_is_played_into_the_mic_sink(vdev: VirtualDevices, tmp_path: Path) -> None:
    signal = chirp(1.0, amplitude=8000)
    fixture = tmp_path / "fixture.wav"
    write_wav(fixture, signal, RATE)
    mic = MicSource()
    mic.start()
    got = await _capture_while_playing(fixture, vdev.mic, mic)
    assert mic.callback_errors == 0 and mic.dropped_blocks == 0
    assert all(len(block) == 480 and block.dtype == np.int16 for _, block in got)
    times = np.array([t for t, _ in got])
    # ADC stamps advance block by block and follow the samples: one callback's stamp may come a few ms
    # early or late on a busy machine (seen: 14.4 ms, then 25.6 ms), but none drifts from the count
    assert np.all(np.diff(times) > 0)
    assert np.all(np.abs((times - times[0]) - 0.02 * np.arange(len(times))) < 0.010)
    loud = [block for _, block in got if np.sqrt(np.mean(block.astype(np.float64) ** 2)) > 2000]
    assert len(loud) >= 40  # about a second of non-silent blocks
    captured = np.concatenate([block for _, block in got])
    skip = 480  # the server alters the first few milliseconds of a new stream
    found, score = find(captured, signal[skip : skip + 4800])
    assert score > 0.999
    start = found - skip
    assert np.array_equal(captured[start + skip : start + len(signal)], signal[skip:])  # bit-exact


@pytest.mark.device
async def test_mic_queue_drops_oldest_when_nobody_reads(vdev: VirtualDevices) -> None:
    mic = MicSource(max_blocks=5)
    mic.start()
    try:
        while mic.blocks_captured < 40:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0)  # let the scheduled hand-overs run
    finally:
        mic.close()
    got = [item async for item in mic.blocks()]
    assert mic.dropped_blocks >= 30
    assert len(got) == 5  # the newest five
    times = [t for t, _ in got]
    assert times == sorted(times)


@pytest.mark.device
def test_a_mic_closed_from_another_thread_ends_its_blocks_on_its_loop(vdev: VirtualDevices) -> None:
    """A session closes its devices off the loop: the microphone's end was scheduled with the loop's
    non-thread-safe call_soon (a RuntimeError under asyncio's debug mode, and no wake-up without it)."""
    async def until_captured(mic: MicSource) -> None:
        while mic.blocks_captured < 5:
            await asyncio.sleep(0.02)  # polled for, bounded below: no duration asserted

    async def main() -> int:
        mic = MicSource()
        mic.start()
        await asyncio.wait_for(until_captured(mic), 10)
        await asyncio.to_thread(mic.close)
        # the end must reach the loop: a close that failed to hand it over (its RuntimeError is swallowed) hangs here
        return len(await asyncio.wait_for(_all(mic.blocks()), 5))

    assert asyncio.run(main(), debug=True) >= 1  # the blocks queued, then the end


async def _all(blocks: Any) -> list[Any]:
    return [item async for item in blocks]


@pytest.mark.device
async def test_a_stepped_mic_hands_its_blocks_to_the_stepper_without_loop_wake_ups(vdev: VirtualDevices) -> None:
    from voxline.audio.recording import SteppedInput, mic_blocks
    from voxline.base.steps import run_steps

    mic = MicSource()
    mic.start()
    blocks = mic.blocks()
    assert isinstance(blocks, SteppedInput) and isinstance(mic_blocks(blocks), SteppedInput)
    got: list[tuple[float, Samples]] = []
    steps = [0]
    stop_at = blocks.clock.now() + 0.6

    def step(now: float) -> float | None:
        steps[0] += 1
        got.extend(blocks.take(now))
        if now >= stop_at:
            mic.close()
        return blocks.due

    try:
        await asyncio.wait_for(run_steps(blocks.clock, step, blocks.due or 0.0), 5)  # ends once closed and empty
    finally:
        mic.close()
    assert mic._direct is not None and mic._queue.empty()  # after the switch nothing went through the loop's queue
    assert len(got) >= 20 and mic.callback_errors == 0
    times = np.array([t for t, _ in got])
    assert np.all(np.diff(times) > 0)  # capture order
    assert steps[0] <= 2 * len(got) + 10  # about a step per block, not a poll loop


def test_the_sound_server_is_tried_briefly_first_and_for_a_second_in_all() -> None:
    """pulsectl waits out the whole timeout it is given even once connected: a second per connection, two per
    device a session opened, blocked the caller (an event loop) for two seconds."""
    class Refused(Exception):
        pass

    class Pulse:
        def __init__(self, answers_after: int) -> None:
            self.tries: list[float] = []
            self.answers_after = answers_after

        def connect(self, *, autospawn: bool, wait: bool, timeout: float) -> None:
            self.tries.append(timeout)
            if len(self.tries) <= self.answers_after:
                raise Refused(f"timed out [{timeout}s]")

    quick = Pulse(answers_after=0)
    sound_server._connect_within(quick, Refused)
    assert quick.tries == [0.02]
    slow = Pulse(answers_after=2)
    sound_server._connect_within(slow, Refused)
    assert slow.tries == [0.02, 0.1, 0.88]
    never = Pulse(answers_after=3)
    with pytest.raises(Refused):
        sound_server._connect_within(never, Refused)
    assert sum(never.tries) == pytest.approx(1.0)


def test_a_device_option_whole_in_value_is_taken_whatever_its_type() -> None:
    """A device's default_samplerate is a float (48000.0), a computed block may be a NumPy integer."""
    stream_options("SpeakerSink", np.int64(480), 24_000, 0.02, 48_000.0)
    with pytest.raises(AudioError, match="device_rate takes a whole number, not float"):
        stream_options("SpeakerSink", 480, 24_000, "low", 44_100.5)


@pytest.mark.parametrize(("make", "said"), [
    (lambda: SpeakerSink(PlayoutBuffer(RATE), latency=-1.0), "SpeakerSink: latency takes a number > 0 and ≤ 10, not -1.0"),
    (lambda: SpeakerSink(PlayoutBuffer(RATE), latency="bogus"),
     "SpeakerSink: latency takes 'low', 'high' or seconds, not 'bogus'"),
    (lambda: SpeakerSink(PlayoutBuffer(RATE), block=-1), "SpeakerSink: block takes a whole number ≥ 1 and ≤ 65536, not -1"),
    (lambda: SpeakerSink(PlayoutBuffer(RATE), device_rate=44100.5),  # type: ignore[arg-type]
     "SpeakerSink: device_rate takes a whole number, not float"),
    (lambda: MicSource(device_rate="48000"), "MicSource: device_rate takes a whole number, not str"),  # type: ignore[arg-type]
    (lambda: MicSource(max_blocks=0), "MicSource: max_blocks takes a whole number ≥ 1, not 0"),
])
def test_a_device_option_that_cannot_work_is_one_line_naming_it(make: Callable[[], object], said: str) -> None:
    """Before: a negative latency opened a stream whose callback spun; max_blocks=0 printed a traceback per block;
    the rest failed inside PortAudio in words that named no option."""
    with pytest.raises(AudioError) as refused:
        make()
    assert str(refused.value) == said
