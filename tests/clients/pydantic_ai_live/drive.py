"""Drive pydantic-ai's ``OpenAILiveModel`` (GPT-Live over WebSocket) against a server at ``--url``.

Runs in the client's own virtual environment, so it imports nothing from voxline. An agent with
one tool (``get_weather``) opens a realtime session on the Live model (Responses delegation, as
pydantic-ai always configures it); the WAV at ``--audio`` (24 kHz mono 16-bit) is sent in 100 ms
chunks, then silence as a quiet microphone would, at ``--pace`` times real time, until the
session reports a completed turn with the assistant's reply in its history (and, with ``--tool``, after the tool
ran). It prints one JSON object: the event kinds seen, the tools run, and the user's and the
assistant's transcripts from the session's message history.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import wave
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, SpeechPart
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.realtime.openai_live import OpenAILiveModel

RATE = 24000
CHUNK = RATE // 10


def read_pcm(path: str) -> bytes:
    with wave.open(path, "rb") as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (RATE, 1, 2):
            raise SystemExit(f"{path}: expected 24 kHz mono 16-bit PCM")
        return w.readframes(w.getnframes())


async def main(url: str, audio: str, pace: float, timeout: float, want_tool: bool) -> dict[str, Any]:
    agent = Agent(instructions="Answer briefly.")
    tools: list[str] = []

    @agent.tool_plain
    def get_weather(city: str, unit: str = "celsius") -> str:
        """The weather in a city."""
        tools.append("get_weather")
        return f"It is 21 degrees {unit} and sunny in {city}."

    model = OpenAILiveModel("gpt-live-1", provider=OpenAIProvider(base_url=url, api_key="sk-client"))
    kinds: list[str] = []
    pcm = read_pcm(audio)
    async with agent.realtime(model).session() as session:
        done = asyncio.Event()

        async def microphone() -> None:
            for i in range(0, len(pcm), CHUNK * 2):
                await session.send_audio(pcm[i : i + CHUNK * 2])
                await asyncio.sleep(0.1 / pace)
            while not done.is_set():  # the model's timeline runs on the caller's audio
                await session.send_audio(bytes(CHUNK * 2))
                await asyncio.sleep(0.1 / pace)

        mic = asyncio.create_task(microphone())
        async with asyncio.timeout(timeout):
            async for event in session:
                kind = getattr(event, "event_kind", type(event).__name__)
                kinds.append(kind)
                spoke = any(isinstance(m, ModelResponse) and m.parts for m in session.all_messages())
                if kind == "realtime_turn_complete" and spoke and (tools or not want_tool):
                    break
        done.set()
        await mic
        messages = session.all_messages()
    said = [p.transcript for m in messages if isinstance(m, ModelResponse) for p in m.parts
            if isinstance(p, SpeechPart) and p.transcript]
    heard = [p.transcript for m in messages if isinstance(m, ModelRequest) for p in m.parts
             if isinstance(p, SpeechPart) and p.transcript]
    return {"events": kinds, "tools": tools, "assistant": said, "user": heard}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True, help="the server's base URL, ws://… or http://…/v1")
    parser.add_argument("--audio", required=True)
    parser.add_argument("--pace", type=float, default=4.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--tool", action="store_true", help="wait until the tool has run")
    args = parser.parse_args()
    args.url = "http" + args.url.removeprefix("ws") if args.url.startswith("ws") else args.url
    result = asyncio.run(main(args.url, args.audio, args.pace, args.timeout, args.tool))
    json.dump(result, sys.stdout)
    print()
