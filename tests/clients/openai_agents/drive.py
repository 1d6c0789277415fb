"""Drive openai-agents' realtime session (``RealtimeRunner``) against a server at ``--url``.

Runs in the client's own virtual environment (built by ``.ci/install-clients``), so it imports
nothing from voxline. It speaks the WAV at ``--audio`` (24 kHz mono 16-bit) into the session
in 100 ms chunks, with silence after it so that server VAD ends the turn, answers the
``get_weather`` tool call, and waits until the assistant's reply after the tool has been spoken.
It prints one JSON object on stdout: the session events it saw (less the raw ones), the tool calls it ran, the
assistant transcripts and the user transcripts (from the history).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import wave
from typing import Any

from agents import function_tool
from agents.realtime import RealtimeAgent, RealtimeRunner

CHUNK = 4800  # 100 ms at 24 kHz


@function_tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """The weather in a city."""
    return f"It is 21 degrees {unit} and sunny in {city}."


def read_pcm(path: str) -> bytes:
    with wave.open(path, "rb") as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (24000, 1, 2):
            raise SystemExit(f"{path}: expected 24 kHz mono 16-bit PCM")
        return w.readframes(w.getnframes())


async def speak(session: Any, pcm: bytes) -> None:
    for i in range(0, len(pcm), CHUNK * 2):
        await session.send_audio(pcm[i : i + CHUNK * 2])
    silence = bytes(CHUNK * 2)
    for _ in range(12):  # 1.2 s: enough for server VAD to end the turn
        await session.send_audio(silence)


async def main(url: str, audio: str, timeout: float) -> dict[str, Any]:
    agent = RealtimeAgent(name="Assistant", instructions="Answer briefly.", tools=[get_weather])
    runner = RealtimeRunner(
        starting_agent=agent,
        config={"model_settings": {"voice": "marin", "input_audio_transcription": {"model": "gpt-transcribe"}}},
    )
    seen: list[str] = []
    tools: list[str] = []
    errors: list[str] = []
    session = await runner.run(model_config={"url": f"{url}/realtime?model=gpt-realtime-2.1", "api_key": "sk-client"})
    async with session:
        speaker = asyncio.create_task(speak(session, read_pcm(audio)))
        audio_ends = 0
        async with asyncio.timeout(timeout):
            async for event in session:
                if event.type != "raw_model_event":
                    seen.append(event.type)
                if event.type == "tool_end":
                    tools.append(event.tool.name)
                elif event.type == "error":
                    errors.append(str(event.error))
                elif event.type == "audio_end":
                    audio_ends += 1
                    if tools:  # the reply after the tool output has been spoken
                        break
        await speaker
        history = list(session._history)  # noqa: SLF001 - the session keeps no public copy
    said = [part.transcript for item in history if item.type == "message" and item.role == "assistant"
            for part in item.content if getattr(part, "transcript", None)]
    heard = [part.transcript for item in history if item.type == "message" and item.role == "user"
             for part in item.content if getattr(part, "transcript", None)]
    return {"events": seen, "tools": tools, "errors": errors, "assistant": said, "user": heard,
            "audio_ends": audio_ends}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="the server's base URL, e.g. ws://127.0.0.1:8000/v1")
    parser.add_argument("--audio", required=True, help="what the user says: a 24 kHz mono 16-bit WAV")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    json.dump(asyncio.run(main(args.url, args.audio, args.timeout)), sys.stdout)
