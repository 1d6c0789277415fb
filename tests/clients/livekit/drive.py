"""Drive LiveKit Agents' OpenAI realtime model (``livekit.plugins.openai.realtime.RealtimeModel``).

Runs in the client's own virtual environment (``.ci/install-clients``) and imports nothing from
voxline. No LiveKit room is involved: the driver opens the model's session itself, as an
``AgentSession`` would, pushes each WAV given with ``--audio`` (24 kHz mono 16-bit) as 10 ms
frames followed by silence so that server VAD ends the turn, and reads every reply the server
creates, text and audio. LiveKit's own log (``livekit.agents`` at ERROR and above, e.g. "failed to
transcribe input audio") goes to stderr for the test to search. It prints one JSON object: the
user transcripts, the assistant replies, the errors the session emitted, how many audio frames
it played and how many transcriptions failed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

import aiohttp
from livekit import rtc
from livekit.plugins.openai.realtime import RealtimeModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from driver_args import parse, read_pcm  # noqa: E402  (beside this folder)

FRAME = 240  # 10 ms at 24 kHz



async def speak(session: Any, pcm: bytes) -> None:
    pcm += bytes(24000 * 2)  # 1 s of silence: server VAD ends the turn
    for i in range(0, len(pcm), FRAME * 2):
        chunk = pcm[i : i + FRAME * 2]
        session.push_audio(rtc.AudioFrame(chunk, 24000, 1, len(chunk) // 2))
        await asyncio.sleep(0.002)  # faster than real time, but in order with the replies


async def read_reply(generation: Any, replies: list[str], frames: list[int]) -> None:
    async for message in generation.message_stream:
        async def audio(stream: Any) -> None:
            async for _frame in stream:
                frames[0] += 1

        player = asyncio.create_task(audio(message.audio_stream))
        replies.append("".join([str(piece) async for piece in message.text_stream]))
        await player
    async for _call in generation.function_stream:
        pass


async def main(url: str, audio: list[str], timeout: float) -> dict[str, Any]:
    heard: list[str] = []
    replies: list[str] = []
    errors: list[str] = []
    frames = [0]
    readers: list[asyncio.Task[None]] = []
    async with aiohttp.ClientSession() as http:
        model = RealtimeModel(model="gpt-realtime-2.1", base_url=url.replace("ws", "http", 1), api_key="sk-client",
                              http_session=http)
        session = model.session()
        session.on("input_audio_transcription_completed",
                   lambda ev: heard.append(ev.transcript) if ev.is_final else None)
        session.on("generation_created", lambda ev: readers.append(asyncio.create_task(read_reply(ev, replies, frames))))
        session.on("error", lambda ev: errors.append(f"{ev.label}: {ev.error}"))
        failed: list[dict[str, Any]] = []
        session.on("openai_server_event_received",
                   lambda ev: failed.append(ev) if ev.get("type", "").endswith("transcription.failed") else None)
        try:
            async with asyncio.timeout(timeout):
                for n, path in enumerate(audio, start=1):
                    await speak(session, read_pcm(path))
                    while len(readers) < n or not readers[n - 1].done() or len(heard) + len(failed) < n:
                        await asyncio.sleep(0.05)
        finally:
            await session.aclose()
            await model.aclose()
    return {"user": heard, "assistant": replies, "errors": errors, "audio_frames": frames[0],
            "transcriptions_failed": len(failed)}


if __name__ == "__main__":
    args = parse(__doc__, turns=True)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    json.dump(asyncio.run(main(args.url, args.audio, args.timeout)), sys.stdout)
