"""Sources paced by a virtual clock, WAV reading/writing, and the listener-timeline WAV sink."""

from __future__ import annotations

import asyncio
import struct
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from voxline.base.clock import VirtualClock
from voxline.base.errors import AudioError, OutputError
from voxline.audio import stereo, wavio
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.sinks import NullSink, Sink, WavSink
from voxline.audio.sources import AudioFrame, SilenceSource, Source, WavFileSource
from voxline.audio.wavio import WavReader, read_wav, write_wav
from tests.support.wav_bytes import write_chunked_wav

R = 24000


def write_raw_wav(path: Path, frames: bytes, rate: int, channels: int, width: int) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(frames)
    return path


async def collect(source: Source, clock: VirtualClock) -> list[tuple[float, AudioFrame]]:
    """Run the source to its end in lockstep with the virtual clock; note when each frame came."""
    got: list[tuple[float, AudioFrame]] = []

    async def consume() -> None:
        async for frame in source:
            got.append((clock.now(), frame))

    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(consume())
        while not task.done():
            for _ in range(5):
                await asyncio.sleep(0)
            deadline = clock.next_deadline()
            if deadline is not None:
                clock.advance_to(deadline)
    return got


# -- WAV reading ------------------------------------------------------------------------


def test_read_wav_converts_widths_and_downmixes(tmp_path: Path) -> None:
    stereo = np.array([[1000, 3000], [-1000, -3001], [32767, 32767]], dtype="<i2")
    samples, rate = read_wav(write_raw_wav(tmp_path / "s.wav", stereo.tobytes(), 44100, 2, 2))
    assert rate == 44100 and samples.tolist() == [2000, -2000, 32767]
    eight = bytes([128, 255, 0])
    assert read_wav(write_raw_wav(tmp_path / "8.wav", eight, 8000, 1, 1))[0].tolist() == [0, 127 << 8, -32768]
    wide = b"".join(v.to_bytes(3, "little", signed=True) for v in (0x123456, -0x123456, -1))
    assert read_wav(write_raw_wav(tmp_path / "24.wav", wide, 8000, 1, 3))[0].tolist() == [0x1234, -0x1235, -1]
    words = np.array([0x12345678, -0x12345678], dtype="<i4").tobytes()
    assert read_wav(write_raw_wav(tmp_path / "32.wav", words, 8000, 1, 4))[0].tolist() == [0x1234, -0x1235]


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    samples = np.arange(-500, 500, dtype=np.int16)
    write_wav(tmp_path / "a.wav", samples)
    back, rate = read_wav(tmp_path / "a.wav")
    assert rate == 24000 and back.tolist() == samples.tolist()
    with WavReader(tmp_path / "a.wav") as reader:
        assert reader.channels == 1 and reader.duration == pytest.approx(1000 / 24000)


def test_read_wav_takes_extensible_headers_and_converts_wide_and_float_samples(tmp_path: Path) -> None:
    pcm16 = np.array([100, -200, 32767], dtype="<i2").tobytes()
    ext16 = write_chunked_wav(tmp_path / "e16.wav", pcm16, 24000, 1, 16, 1, extensible=True, extra_chunk=True)
    with WavReader(ext16) as reader:
        assert reader.read(10).tolist() == [100, -200, 32767] and reader.conversion is None
    wide = b"".join(v.to_bytes(3, "little", signed=True) for v in (0x123456, -0x123456))
    with WavReader(write_chunked_wav(tmp_path / "e24.wav", wide, 48000, 1, 24, 1, extensible=True)) as reader:
        assert reader.read(10).tolist() == [0x1234, -0x1235] and reader.conversion == "24-bit integer samples"
    stereo = np.array([[0.5, 0.5], [-1.0, -1.0], [2.0, 2.0]], dtype="<f4").tobytes()
    with WavReader(write_chunked_wav(tmp_path / "f32.wav", stereo, 24000, 2, 32, 3)) as reader:
        assert reader.read(10).tolist() == [16384, -32768, 32767] and reader.conversion == "32-bit float samples"
    doubles = np.array([0.25, float("nan")], dtype="<f8").tobytes()
    assert read_wav(write_chunked_wav(tmp_path / "f64.wav", doubles, 16000, 1, 64, 3, extensible=True))[0].tolist() == [8192, 0]


@pytest.mark.parametrize("kind", ["missing", "adpcm", "garbage", "empty", "directory"])
def test_unreadable_files_raise_one_clear_line(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"{kind}.wav"
    match kind:
        case "adpcm":
            write_chunked_wav(path, b"\x00" * 100, 8000, 1, 4, 2)
        case "garbage":
            path.write_bytes(b"this is not a wav file at all")
        case "empty":
            path.write_bytes(b"")
        case "directory":
            path.mkdir()
    with pytest.raises(AudioError) as err:
        WavFileSource(path, VirtualClock())
    message = str(err.value)
    assert str(path) in message and "\n" not in message
    if kind == "adpcm":
        assert "PCM" in message


def test_writing_to_an_impossible_path_is_an_audio_error(tmp_path: Path) -> None:
    with pytest.raises(AudioError, match="cannot write"):
        WavSink(tmp_path / "no" / "such" / "dir" / "x.wav")


# -- sources ----------------------------------------------------------------------------


async def test_wav_source_paces_blocks_by_the_clock(tmp_path: Path) -> None:
    samples = (np.arange(24000 + 100) % 2000).astype(np.int16)
    write_wav(tmp_path / "in.wav", samples)
    clock = VirtualClock(start=5.0)
    source = WavFileSource(tmp_path / "in.wav", clock, block=480)
    got = await collect(source, clock)
    assert source.started_at == 5.0
    assert [f.index for _, f in got] == list(range(0, 24100, 480))
    for when, frame in got:
        assert when == pytest.approx(5.0 + frame.index / R)
        assert frame.t == pytest.approx(frame.index / R)
    assert len(got[-1][1].samples) == 100  # the last block is shorter
    assert np.concatenate([f.samples for _, f in got]).tolist() == samples.tolist()


async def test_wav_source_resamples_and_downmixes(tmp_path: Path) -> None:
    rate = 44100
    n = rate  # one second
    tone = 8000 * np.sin(2 * np.pi * 1000 * np.arange(n) / rate)
    stereo = np.stack([tone, tone], axis=1).astype("<i2")
    write_raw_wav(tmp_path / "st.wav", stereo.tobytes(), rate, 2, 2)
    clock = VirtualClock()
    source = WavFileSource(tmp_path / "st.wav", clock, block=480)
    assert source.file_rate == 44100 and source.channels == 2 and source.duration == pytest.approx(1.0)
    got = await collect(source, clock)
    out = np.concatenate([f.samples for _, f in got])
    assert abs(len(out) - 24000) <= 1
    spectrum = np.abs(np.fft.rfft(out[4000:20000].astype(float) * np.hanning(16000)))
    assert abs(np.argmax(spectrum) * R / 16000 - 1000) < 3
    assert clock.now() == pytest.approx(got[-1][1].index / R)


async def test_silence_source_for_a_duration() -> None:
    clock = VirtualClock()
    got = await collect(SilenceSource(clock, block=240, duration=0.025), clock)
    assert [len(f.samples) for _, f in got] == [240, 240, 120]
    assert all(not f.samples.any() for _, f in got)
    assert [when for when, _ in got] == pytest.approx([0.0, 0.01, 0.02])


async def test_an_endless_source_stops_when_closed() -> None:
    clock = VirtualClock()
    source = SilenceSource(clock)
    assert isinstance(source, Source)
    first = await anext(source)
    source.close()
    with pytest.raises(StopAsyncIteration):
        await anext(source)
    assert first.index == 0 and len(first.samples) == 480


# -- sinks ------------------------------------------------------------------------------


def test_wav_sink_places_samples_on_the_listener_timeline(tmp_path: Path) -> None:
    with WavSink(tmp_path / "out.wav") as sink:
        assert isinstance(sink, Sink)
        sink.write(0.01, np.full(240, 5, dtype=np.int16))  # index 240
        sink.write(0.05, np.full(10, 7, dtype=np.int16))  # index 1200, a gap before it
        sink.write(0.01 + 100 / R, np.full(10, 9, dtype=np.int16))  # overwrites inside the first run
    out, rate = read_wav(tmp_path / "out.wav")
    assert rate == 24000 and len(out) == 1210
    assert not out[:240].any() and not out[480:1200].any()
    assert (out[240:340] == 5).all() and (out[340:350] == 9).all() and (out[350:480] == 5).all()
    assert (out[1200:] == 7).all()


def test_wav_sink_flushes_old_audio_and_counts_late_writes(tmp_path: Path) -> None:
    sink = WavSink(tmp_path / "long.wav", keep_s=0.01, window_s=0.02)  # keeps 240 to 480 samples in memory
    blocks = [np.full(480, k + 1, dtype=np.int16) for k in range(50)]
    for k, block in enumerate(blocks):
        sink.write(k * 480 / R, block)
    sink.write(0.0, np.full(480, 99, dtype=np.int16))  # long gone to disk
    sink.close()
    out, _ = read_wav(tmp_path / "long.wav")
    assert out.tolist() == np.concatenate(blocks).tolist()
    assert sink.late_samples == 480 and sink.samples_written == 24000


def test_a_wav_sink_holds_at_most_its_window_and_its_file_is_valid_at_every_moment(tmp_path: Path) -> None:
    """What a process killed outright (SIGKILL) leaves: a valid WAV lacking at most the last two seconds."""
    path = tmp_path / "heard.wav"
    sink = WavSink(path)  # the defaults a replay uses
    assert read_wav(path)[0].size == 0  # valid and empty before the first sample
    rng = np.random.default_rng(3)
    timeline = (rng.standard_normal(30 * R) * 3000).astype(np.int16)
    for k in range(0, len(timeline), 480):
        sink.write(k / R, timeline[k : k + 480])
        assert sink.held_samples <= 2 * R
        if k % (7 * 480) == 0:
            on_disk, _ = read_wav(path)  # what a reader sees now is a prefix of the timeline
            assert len(on_disk) >= k + 480 - 2 * R and np.array_equal(on_disk, timeline[: len(on_disk)])
    sink.close()
    assert np.array_equal(read_wav(path)[0], timeline)


def test_apply_cut_fades_and_silences_what_was_already_written(tmp_path: Path) -> None:
    sink = WavSink(tmp_path / "cut.wav")
    sink.write(0.0, np.full(960, 1000, dtype=np.int16))
    sink.apply_cut(at=470 / R, end=590 / R)
    sink.close()
    out, _ = read_wav(tmp_path / "cut.wav")
    assert (out[:471] == 1000).all()
    expected = np.rint(1000 * (1 - (np.arange(471, 591) - 470) / 121)).astype(np.int16)
    assert out[471:591].tolist() == expected.tolist()
    assert not out[591:].any() and len(out) == 960


def test_null_sink_counts() -> None:
    sink = NullSink()
    sink.write(0.0, np.zeros(100, dtype=np.int16))
    sink.apply_cut(0.0, 0.005)
    sink.close()
    assert sink.samples_written == 100


async def test_heard_file_matches_the_ledger_after_a_barge_in(tmp_path: Path) -> None:
    """Lockstep replay: read each block at its own listener time, cut mid-block, and the
    heard WAV holds exactly the samples the ledger reports as heard."""
    clock = VirtualClock()
    buf = PlayoutBuffer()
    buf.enqueue(np.full(2000, 1000, dtype=np.int16), "A")
    buf.enqueue(np.full(2000, 2000, dtype=np.int16), "B")
    sink = WavSink(tmp_path / "heard.wav")
    start = clock.now()
    cut = None
    for k in range(12):
        play_time = start + k * 480 / R
        clock.advance_to(play_time)
        sink.write(play_time - start, buf.read(480, play_time))
        if k == 5:  # the listener speaks 7.3 ms into block 5; the output already holds block 5
            cut = buf.interrupt(play_time + 0.0073 - start, fade_ms=5.0)
            sink.apply_cut(cut.at - start, cut.end - start)
    sink.close()
    assert cut is not None and cut.item_id == "B" and cut.playing
    out, _ = read_wav(tmp_path / "heard.wav")
    assert int((out != 0).sum()) == buf.ledger.heard_total(1e9)
    assert int((out == 1000).sum()) == buf.heard_samples("A", 0, 1e9) == 2000
    assert int(((out != 0) & (out != 1000)).sum()) == cut.heard_samples == buf.heard_samples("B", 0, 1e9)
    assert cut.heard_samples == 2400 + round(0.0073 * R) + 1 + 120 - 2000


def test_a_wav_writer_dropped_unclosed_completes_its_file_quietly(tmp_path: Path) -> None:
    import gc
    import sys

    from voxline.audio.wavio import WavWriter

    raised: list[object] = []
    previous, sys.unraisablehook = sys.unraisablehook, raised.append
    try:
        writer = WavWriter(tmp_path / "dropped.wav")
        writer.write(np.arange(480, dtype=np.int16))
        del writer  # an error before its owner closed it
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert raised == []  # the wave module's finalizer did not flush a closed file
    samples, rate = read_wav(tmp_path / "dropped.wav")
    assert rate == 24_000 and np.array_equal(samples, np.arange(480, dtype=np.int16))


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full (Linux has one)")
def test_a_wav_sink_on_a_full_disk_names_its_file_and_leaves_nothing_to_report_later() -> None:
    import gc
    import sys

    raised: list[object] = []
    previous, sys.unraisablehook = sys.unraisablehook, raised.append
    try:
        with pytest.raises(AudioError, match=r"^cannot write /dev/full: No space left on device$"):
            WavSink("/dev/full")  # the header's flush fails, and would again on every close
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert raised == []  # no "Exception ignored" from the wave module's finalizer on a closed file


_FILLS_UP = """
import resource, sys
import numpy as np
from voxline.audio.sinks import WavSink
from voxline.base.errors import AudioError
resource.setrlimit(resource.RLIMIT_FSIZE, (100_001, resource.RLIM_INFINITY))  # the disk fills mid-block
sink = WavSink(sys.argv[1], 24_000)
try:
    for k in range(20):
        sink.write(k * 0.25, np.full(6_000, 1_000 + k, dtype=np.int16))
    sink.close()
except AudioError as exc:
    print(exc)
    try:
        sink.close()  # the rest cannot be written either; the file is settled all the same
    except AudioError as again:
        print(again)
"""


def test_a_wav_whose_disk_fills_mid_write_holds_what_its_header_counts(tmp_path: Path) -> None:
    """Before, the failed write's first part stayed on disk past the samples the header counts (and the header was
    patched again at close with the buffer's leftovers)."""
    path = tmp_path / "heard.wav"
    run = subprocess.run([sys.executable, "-c", _FILLS_UP, str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"cannot write {path}: File too large"), run.stdout
    data = path.read_bytes()
    riff, = struct.unpack("<I", data[4:8])
    declared, = struct.unpack("<I", data[40:44])
    assert data[36:40] == b"data" and riff == len(data) - 8 and declared == len(data) - 44
    samples, rate = read_wav(path)
    assert rate == 24_000 and 0 < len(samples) == declared // 2
    timeline = np.repeat(np.arange(1_000, 1_020, dtype=np.int16), 6_000)
    assert np.array_equal(samples, timeline[: len(samples)])  # the timeline's start, nothing of the failed write


def test_a_wav_stops_at_the_size_its_header_can_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, a WAV past 4 GiB (24.8 hours of heard audio, 12.4 of stereo) raised struct.error from the header's
    patch: a traceback, the file's header wrong. Here the limit is 1,000 samples."""
    monkeypatch.setattr(wavio, "MAX_WAV_BYTES", 44 + 2_000)
    writer = wavio.WavWriter(tmp_path / "long.wav")
    writer.write(np.full(600, 3, np.int16))
    with pytest.raises(AudioError, match=r"it holds the .* hours a WAV file can \(4 GiB\)$"):
        writer.write(np.full(600, 4, np.int16))
    writer.close()
    assert np.array_equal(read_wav(tmp_path / "long.wav")[0], np.full(600, 3, np.int16))

    monkeypatch.setattr(stereo, "MAX_WAV_BYTES", 44 + 4 * 500)
    (tmp_path / "pair.wav").write_bytes(b"a last run's pair")  # it would pass for this run's
    with pytest.raises(OutputError, match=r"pass the 4 GiB a WAV file holds"):
        stereo.write_stereo(tmp_path / "pair.wav", np.zeros(600, np.int16), tmp_path / "long.wav")
    assert not (tmp_path / "pair.wav").exists()
