"""Drive pipecat's ``OpenAIRealtimeLLMService`` in a pipeline of its own against ``--url``.

Runs in the client's own virtual environment (``.ci/install-clients``) and imports nothing from
voxline. The pipeline is the service between a context aggregator pair and a sink that
records what comes out; no transport is involved: each WAV given with ``--audio`` (24 kHz mono
16-bit) is queued into the pipeline as 20 ms ``InputAudioRawFrame`` s, followed by silence so
that server VAD ends the turn, after ``LLMRunFrame`` has configured the session (and asked for
the opening reply, as pipecat applications do). It answers ``get_weather``. It prints one JSON object: the tools it ran, the user transcripts, the assistant's
text per response, the error frames, and how many audio frames the service produced.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from loguru import logger
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    InputAudioRawFrame,
    LLMFullResponseEndFrame,
    LLMRunFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.realtime import events
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from driver_args import parse, read_pcm  # noqa: E402  (beside this folder)

FRAME = 480  # 20 ms at 24 kHz


class Recorder(FrameProcessor):
    """What the service produced, in order; ``downstream`` is a second recorder sharing the lists."""

    def __init__(self, shared: Recorder | None = None) -> None:
        super().__init__()
        self.heard: list[str] = []
        self.replies: list[str] = [""]
        self.errors: list[str] = []
        self.audio_frames = 0
        self.last_frame = 0.0
        if shared is not None:
            self.heard, self.replies, self.errors = shared.heard, shared.replies, shared.errors
            self.downstream = self
        else:
            self.downstream = Recorder(self)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        self.last_frame = asyncio.get_running_loop().time()
        if isinstance(frame, TranscriptionFrame):
            self.heard.append(frame.text)
        elif isinstance(frame, TTSTextFrame):
            self.replies[-1] += frame.text
        elif isinstance(frame, TTSAudioRawFrame):
            self.audio_frames += 1
            if self.downstream is not self:
                self.downstream.audio_frames += 1
        elif isinstance(frame, ErrorFrame):
            self.errors.append(frame.error)
        elif isinstance(frame, LLMFullResponseEndFrame):
            self.replies.append("")
        await self.push_frame(frame, direction)



async def main(url: str, audio: list[str], timeout: float) -> dict[str, Any]:
    session = events.SessionProperties(audio=events.AudioConfiguration(input=events.AudioInput(
        transcription=events.InputAudioTranscription(model="gpt-transcribe"))))
    llm = OpenAIRealtimeLLMService(api_key="sk-client", base_url=f"{url}/realtime", session_properties=session)
    weather = FunctionSchema(name="get_weather", description="The weather in a city.",
                             properties={"city": {"type": "string"}, "unit": {"type": "string"}}, required=["city"])
    tools: list[str] = []

    async def get_weather(params: Any) -> None:
        tools.append(params.function_name)
        await params.result_callback({"sky": "clear", "city": params.arguments.get("city")})

    llm.register_function("get_weather", get_weather)
    context = LLMContext([{"role": "system", "content": "Answer briefly."}], tools=ToolsSchema(standard_tools=[weather]))
    aggregators = LLMContextAggregatorPair(context)
    recorder = Recorder()  # sees the frames the service sends downstream and, before it, upstream
    pipeline = Pipeline([aggregators.user(), recorder, llm, recorder.downstream, aggregators.assistant()])
    task = PipelineTask(pipeline, params=PipelineParams(audio_in_sample_rate=24000, audio_out_sample_rate=24000))
    runner = PipelineRunner(handle_sigint=False)
    running = asyncio.create_task(runner.run(task))
    try:
        async with asyncio.timeout(timeout):
            await task.queue_frame(LLMRunFrame())  # configures the session from the context
            for n, path in enumerate(audio, start=1):
                pcm = read_pcm(path) + bytes(24000 * 2)  # 1 s of silence: server VAD ends the turn
                for i in range(0, len(pcm), FRAME * 2):
                    await task.queue_frame(InputAudioRawFrame(pcm[i : i + FRAME * 2], 24000, 1))
                    await asyncio.sleep(0.002)
                loop = asyncio.get_running_loop()
                while len(recorder.heard) < n or loop.time() - max(recorder.last_frame, recorder.downstream.last_frame) < 1.0:
                    await asyncio.sleep(0.05)  # the turn is heard, and its replies (and tool follow-ups) are over
    finally:
        await task.cancel()
        await running
    return {"tools": tools, "user": recorder.heard, "assistant": [r for r in recorder.replies if r], "errors": recorder.errors,
            "audio_frames": recorder.downstream.audio_frames}


if __name__ == "__main__":
    args = parse(__doc__, turns=True)
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    json.dump(asyncio.run(main(args.url, args.audio, args.timeout)), sys.stdout)
