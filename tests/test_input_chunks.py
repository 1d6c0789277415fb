"""Microphone audio goes out in chunks: plain blocks in, chunks out, and the wire carries every sample once."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voxline.audio.wavio import read_wav
from voxline.base.clock import VirtualClock
from voxline.realtime.connection import connect
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server import load_scenario
from voxline.session.input_chunks import InputChunker
from voxline.audio.clocked_output import ClockedOutput
from voxline.audio.recording import Recording
from voxline.session.replay import replay_fast
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.oracle import WireRecorder

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def blocks(*sizes: int) -> list[np.ndarray]:
    start = 0
    out = []
    for n in sizes:
        out.append(np.arange(start, start + n, dtype=np.int16))
        start += n
    return out


def test_a_chunk_goes_once_it_is_full() -> None:
    chunker = InputChunker(960)
    a, b, c = blocks(480, 480, 480)
    assert chunker.add(a) is None and chunker.held == 480
    chunk = chunker.add(b)
    assert chunk is not None and np.array_equal(chunk, np.concatenate([a, b])) and chunker.held == 0
    assert chunker.add(c) is None
    rest = chunker.take()
    assert rest is not None and np.array_equal(rest, c) and chunker.take() is None


def test_a_chunk_no_larger_than_a_block_sends_every_block() -> None:
    chunker = InputChunker(480)
    for block in blocks(480, 480):
        assert chunker.add(block) is block


def test_clear_drops_what_is_held() -> None:
    chunker = InputChunker(960)
    chunker.add(np.zeros(300, dtype=np.int16))
    assert chunker.clear() == 300 and chunker.held == 0 and chunker.take() is None
    with pytest.raises(ValueError):
        InputChunker(0)


@given(st.integers(1, 2000), st.lists(st.integers(0, 1500), max_size=40))
def test_every_sample_goes_once_in_order(chunk: int, sizes: list[int]) -> None:
    chunker = InputChunker(chunk)
    sent = []
    for block in blocks(*sizes):
        out = chunker.add(block)
        if out is not None:
            assert len(out) >= chunk
            sent.append(out)
        assert chunker.held < chunk  # nothing waits once a chunk is full
    rest = chunker.take()
    if rest is not None:
        sent.append(rest)
    expected = np.concatenate(blocks(*sizes)) if sizes else np.zeros(0, dtype=np.int16)
    got = np.concatenate(sent) if sent else np.zeros(0, dtype=np.int16)
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("chunk_ms", [20, 40, 100])
def test_the_wire_carries_the_whole_input_in_chunks_of_the_setting(chunk_ms: int) -> None:
    samples, _ = read_wav(EXAMPLES / "audio" / "barge_in.wav")
    samples = samples[: 3 * 24_000]  # the question and its reply
    appends: list[int] = []

    def on_wire(direction: str, text: str) -> None:
        if direction == "out" and '"input_audio_buffer.append"' in text:
            appends.append(len(base64.b64decode(json.loads(text)["audio"])) // 2)

    settings = SessionSettings(api_key="local", input_chunk_ms=chunk_ms)
    replay_fast(samples, scenario=load_scenario("default"), settings=settings, voice="tone", tail_s=0.5,
                on_wire=on_wire, clock=VirtualClock())
    size = chunk_ms * 24
    assert sum(appends) == len(samples)  # every sample once
    assert all(n == size for n in appends[:-1]) and 0 < appends[-1] <= size


async def test_push_to_talk_sends_the_half_filled_chunk_before_its_commit() -> None:
    clock, rec = VirtualClock(), WireRecorder()
    async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"))) as srv:
        async def connector() -> Any:
            return await connect(srv.url, "sk-test", on_wire=rec)

        settings = SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none")  # 40 ms chunks
        mic = Recording(np.full(24_000, 1000, np.int16), clock, origin=0.0)
        session = VoiceSession(settings, output=ClockedOutput(clock, origin=0.0), input=mic, clock=clock,
                               connector=connector)
        async with session:
            await session.start_talking()
            for k in range(1, 14):  # 13 blocks of 20 ms: six chunks sent, one block held
                clock.advance_to(k * 480 / 24_000)
                for _ in range(5):
                    await asyncio.sleep(0)
            await session.stop_talking()  # flushed on the socket before it returns
    rec.verify()
    sent = [json.loads(text) for direction, text in rec.frames if direction == "out"]
    kinds = [e["type"] for e in sent]
    commit = kinds.index("input_audio_buffer.commit")
    before = [len(base64.b64decode(e["audio"])) // 2 for e in sent[:commit] if e["type"] == "input_audio_buffer.append"]
    after = [len(base64.b64decode(e["audio"])) // 2 for e in sent[commit:] if e["type"] == "input_audio_buffer.append"]
    assert sum(before) == 13 * 480 and before[-1] == 480, (before, after)  # the held block went before the commit


@pytest.mark.parametrize("chunk_ms", [10, 30, 40, 50])
def test_a_plain_replay_appends_as_a_microphone_of_20_ms_blocks_would(chunk_ms: int) -> None:
    samples, _ = read_wav(EXAMPLES / "audio" / "barge_in.wav")
    samples = samples[:24_000]
    clock = VirtualClock()
    appends: list[tuple[float, int]] = []

    def on_wire(direction: str, text: str) -> None:
        if direction == "out" and '"input_audio_buffer.append"' in text:
            appends.append((round(clock.now(), 6), len(base64.b64decode(json.loads(text)["audio"])) // 2))

    settings = SessionSettings(api_key="local", input_chunk_ms=chunk_ms)
    replay_fast(samples, scenario=load_scenario("default"), settings=settings, voice="tone", tail_s=0.5,
                on_wire=on_wire, clock=clock)
    chunker, expected = InputChunker(chunk_ms * 24), []
    for start in range(0, len(samples), 480):  # a device's 20 ms blocks, each handed over as it ends
        block = samples[start : start + 480]
        chunk = chunker.add(block)
        if chunk is not None:
            expected.append((round((start + len(block)) / 24_000, 6), len(chunk)))
    rest = chunker.take()
    if rest is not None:
        expected.append((round(len(samples) / 24_000, 6), len(rest)))
    assert appends == expected  # the same appends at the same instants, whatever blocks the replay used
