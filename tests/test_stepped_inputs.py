"""Paced inputs read by the loop's stepper: a file's blocks at the instants its async iteration
hands them out, and a session on a real clock that takes them with no task wake-up per block."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np

from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.recording import SteppedInput, file_blocks
from voxline.audio.sources import SilenceSource, WavFileSource
from voxline.audio.wavio import write_wav
from voxline.base.clock import RealClock, VirtualClock
from voxline.realtime.server import ServerConfig, serve
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession


async def _iterated(source: SilenceSource, clock: VirtualClock) -> list[tuple[float, int]]:
    out = []
    async for frame in source:
        out.append((clock.now(), len(frame.samples)))
    return out


def test_a_source_taken_by_steps_hands_out_the_blocks_its_iteration_would_at_the_same_instants() -> None:
    clock = VirtualClock(10.0)
    stepped = SilenceSource(clock, block=480, duration=0.21)
    assert isinstance(file_blocks(stepped), SteppedInput)
    got: list[tuple[float, int]] = []
    due = stepped.due
    while due is not None:
        clock.advance_to(due)
        got += [(clock.now(), len(b)) for b in stepped.take(clock.now())]
        due = stepped.due
    expected = [(10.0 + k * 0.02, 480) for k in range(10)] + [(10.2, 240)]
    assert [(round(t, 9), n) for t, n in got] == [(round(t, 9), n) for t, n in expected]
    late = SilenceSource(VirtualClock(), block=480, duration=0.1)
    late.take(0.0)
    assert sum(len(b) for b in late.take(1.0)) == 2400 - 480 and late.due is None  # a late step takes all that is due


class _CountedWav(WavFileSource):
    """A WAV source that counts the blocks handed out by async iteration (a task wake-up each)."""

    iterated = 0

    async def __anext__(self):  # type: ignore[no-untyped-def]
        frame = await super().__anext__()
        _CountedWav.iterated += 1
        return frame


async def test_a_session_on_a_real_clock_takes_a_files_blocks_by_steps(tmp_path: Path) -> None:
    path = tmp_path / "in.wav"
    samples = (np.arange(24_000) % 200 - 100).astype(np.int16)  # one second
    write_wav(path, samples, 24_000)
    clock = RealClock()
    appended: list[bytes] = []

    def on_wire(direction: str, text: str) -> None:
        if direction == "out" and '"input_audio_buffer.append"' in text:
            appended.append(base64.b64decode(json.loads(text)["audio"]))

    async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"))) as srv:
        settings = SessionSettings(url=srv.url, api_key="sk-test", transcribe=False)
        source = _CountedWav(path, clock)
        session = VoiceSession(settings, output=ClockedOutput(clock), input=file_blocks(source), clock=clock,
                               on_wire=on_wire)
        async with session:
            while not session.input_finished:
                await clock.sleep(0.05)
    assert _CountedWav.iterated == 0  # every block was taken by a step, none by a task's wake-up
    assert np.array_equal(np.frombuffer(b"".join(appended), dtype="<i2"), samples)


class _QuietMic:
    """What :class:`~voxline.audio.device_mic.MicBlocks` reads of a microphone, with no device behind it."""

    def __init__(self) -> None:
        import asyncio
        import math

        self._direct = None
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self.block, self.rate, self.max_blocks, self._arrived = 480, 24000, 100, -math.inf


def test_asking_whether_a_microphones_blocks_are_stepped_leaves_them_iterable() -> None:
    from voxline.audio.device_mic import MicBlocks

    mic = _QuietMic()
    blocks = MicBlocks(mic)  # type: ignore[arg-type]
    assert isinstance(blocks, SteppedInput)  # on Python 3.11 this reads every property of the protocol
    assert mic._direct is None  # so reading `due` must not switch the blocks away from the iteration's queue
    blocks.take(blocks.clock.now())
    assert mic._direct is not None  # the first take does


def test_a_microphone_opened_at_another_rate_is_refused_as_a_sessions_input(tmp_path: Path) -> None:
    """A session takes 24 kHz blocks: a 16 kHz microphone's would be sent as 24 kHz audio (played 1.5x fast)."""
    import pytest

    from voxline.audio.device_mic import MicBlocks
    from voxline.audio.recording import watched
    from voxline.realtime.errors import ConfigurationError
    from voxline.session.record import SessionRecorder

    mic = _QuietMic()
    mic.rate = 16000
    with pytest.raises(ConfigurationError, match=r"^the input captures at 16000 Hz; a session takes 24000 Hz"):
        VoiceSession(SessionSettings(), input=MicBlocks(mic))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="MicSource\\(rate=24000\\)"):  # watched, as `talk`'s meter has it
        VoiceSession(SessionSettings(), input=watched(MicBlocks(mic), lambda item: None))  # type: ignore[arg-type]
    recorder = SessionRecorder(tmp_path / "take")
    try:
        with pytest.raises(ConfigurationError):
            VoiceSession(SessionSettings(), input=recorder.mic(MicBlocks(mic)))  # type: ignore[arg-type]
    finally:
        recorder.abandon()
    VoiceSession(SessionSettings(), input=MicBlocks(_QuietMic()))  # type: ignore[arg-type]


class _PairedFile:
    """A file's blocks as ``(capture_time, block)`` pairs, the way a microphone hands them over:
    stepped, or iterated (counted: a task wake-up each)."""

    def __init__(self, source: WavFileSource) -> None:
        self._source = source
        self.iterated = 0

    @property
    def clock(self) -> RealClock:
        return self._source.clock  # type: ignore[return-value]

    @property
    def due(self) -> float | None:
        return self._source.due

    def take(self, now: float) -> list[tuple[float, np.ndarray]]:
        return [(now, block) for block in self._source.take(now)]

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        async for frame in self._source:
            self.iterated += 1
            yield self.clock.now(), frame.samples


async def test_a_metered_and_recorded_microphone_stays_on_the_stepper(tmp_path: Path) -> None:
    """``voxline talk`` meters (and with ``--record`` records) the microphone on the way in; both
    look at every block as it is taken, and the session still takes the blocks by steps."""
    from voxline.audio.recording import mic_blocks
    from voxline.session.cli.talk import FLOOR_DB, LevelMeter
    from voxline.session.record import SessionRecorder
    from voxline.audio.wavio import read_wav

    path = tmp_path / "in.wav"
    samples = (np.arange(24_000) % 200 - 100).astype(np.int16)
    write_wav(path, samples, 24_000)
    clock = RealClock()
    device = _PairedFile(WavFileSource(path, clock))
    meter, recorder = LevelMeter(), SessionRecorder(tmp_path / "rec")
    levels: list[float] = []
    watched_input = meter.watch(recorder.mic(device))  # type: ignore[arg-type]
    assert isinstance(watched_input, SteppedInput) and isinstance(mic_blocks(watched_input), SteppedInput)
    async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"))) as srv:
        settings = SessionSettings(url=srv.url, api_key="sk-test", transcribe=False)
        session = VoiceSession(settings, output=ClockedOutput(clock), input=mic_blocks(watched_input), clock=clock)
        async with session:
            while not session.input_finished:
                levels.append(meter.db)
                await clock.sleep(0.05)
    recorder.close(None)
    assert device.iterated == 0  # every block taken by a step
    assert round(meter.db) == -55 and max(levels) > FLOOR_DB + 30  # the RMS of ±100 steps (-55 dBFS), while it ran
    mic, _rate = read_wav(tmp_path / "rec" / SessionRecorder.MIC)
    assert np.array_equal(mic, samples)  # every block recorded, in order


async def test_a_watched_iterable_sees_each_block_in_order() -> None:
    from voxline.audio.recording import watched

    async def blocks():  # type: ignore[no-untyped-def]
        for k in range(3):
            yield np.full(4, k, dtype=np.int16)

    seen: list[int] = []
    out = watched(blocks(), lambda b: seen.append(int(b[0])))
    assert not isinstance(out, SteppedInput)
    assert [int(b[0]) async for b in out] == [0, 1, 2] and seen == [0, 1, 2]
