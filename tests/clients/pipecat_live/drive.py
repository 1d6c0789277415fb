"""Drive pipecat's ``OpenAILiveLLMService`` (GPT-Live over WebSocket) against a server at ``--url``.

Runs in the client's own virtual environment, so it imports nothing from voxline. A pipeline
``[listener, live model, collector]`` is started with a context (its system message becomes the
session's instructions); once the session has started, the WAV at ``--audio`` (24 kHz mono
16-bit) is sent as microphone frames of 100 ms, then silence as a quiet microphone would, at
``--pace`` times real time. The driver waits until the service has closed the assistant's turn (pipecat infers turns
from a quiet gap), then ends the pipeline, which closes the session gracefully. It prints one
JSON object: the assistant's text, the user's transcripts, the seconds of output audio and
whether the session started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import wave
from typing import Any

from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InputAudioRawFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    OutputAudioRawFrame,
    TranscriptionFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.task import PipelineParams
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.live.llm import OpenAILiveLLMService
from pipecat.workers.runner import WorkerRunner

RATE = 24000
CHUNK = RATE // 10


class Collector(FrameProcessor):
    """Keeps what flows past it in one direction."""

    def __init__(self, direction: FrameDirection) -> None:
        super().__init__()
        self.direction = direction
        self.frames: list[Frame] = []
        self.turn_ended = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction == self.direction:
            self.frames.append(frame)
            if isinstance(frame, LLMFullResponseEndFrame):
                self.turn_ended.set()
        await self.push_frame(frame, direction)


def read_pcm(path: str) -> bytes:
    with wave.open(path, "rb") as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (RATE, 1, 2):
            raise SystemExit(f"{path}: expected 24 kHz mono 16-bit PCM")
        return w.readframes(w.getnframes())


async def main(url: str, audio: str, pace: float, timeout: float) -> dict[str, Any]:
    llm = OpenAILiveLLMService(
        api_key="sk-client",
        base_url=f"{'ws' + url.removeprefix('http') if url.startswith('http') else url}/live/sessions",
        settings=OpenAILiveLLMService.Settings(system_instruction="You are a test assistant."),
    )
    started = asyncio.Event()

    @llm.event_handler("on_session_started")
    async def _started(service: Any, session: Any) -> None:
        started.set()

    upstream = Collector(FrameDirection.UPSTREAM)
    downstream = Collector(FrameDirection.DOWNSTREAM)
    worker = PipelineWorker(Pipeline([upstream, llm, downstream]), cancel_on_idle_timeout=False,
                            params=PipelineParams(audio_in_sample_rate=RATE, audio_out_sample_rate=RATE))
    pcm = read_pcm(audio)
    silence = bytes(CHUNK * 2)

    async def converse() -> None:
        await worker.queue_frame(LLMContextFrame(LLMContext()))
        await started.wait()
        for i in range(0, len(pcm), CHUNK * 2):
            await worker.queue_frame(InputAudioRawFrame(audio=pcm[i : i + CHUNK * 2], sample_rate=RATE, num_channels=1))
            await asyncio.sleep(0.1 / pace)
        while not downstream.turn_ended.is_set():  # a microphone keeps streaming: the model's timeline runs on it
            await worker.queue_frame(InputAudioRawFrame(audio=silence, sample_rate=RATE, num_channels=1))
            await asyncio.sleep(0.1 / pace)
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    async with asyncio.timeout(timeout):
        await asyncio.gather(runner.run(), converse())
    said = "".join(f.text for f in downstream.frames if isinstance(f, TTSTextFrame))
    heard = [f.text for f in upstream.frames if isinstance(f, TranscriptionFrame)]
    audio_bytes = sum(len(f.audio) for f in downstream.frames if isinstance(f, OutputAudioRawFrame))
    return {"started": started.is_set(), "assistant": said, "user": heard, "audio_s": audio_bytes / 2 / RATE}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True, help="the server's base URL, ws://… or http://…/v1")
    parser.add_argument("--audio", required=True)
    parser.add_argument("--pace", type=float, default=4.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    result = asyncio.run(main(args.url, args.audio, args.pace, args.timeout))
    json.dump(result, sys.stdout)
    print()
