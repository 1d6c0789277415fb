"""Drive LiveKit Agents' ``GPTLiveModel`` (GPT-Live over WebSocket) against a server at ``--url``.

Runs in the client's own virtual environment, so it imports nothing from voxline. The session is
configured through the framework's hook (``_update_session``: instructions, no chat context, and
with ``--tool`` a ``get_weather`` tool under Responses delegation, else none under client
delegation), the way an ``AgentSession`` configures it; a function call is run and its output
handed back through the framework's hook (``_append_items``), as the framework does. The WAV at ``--audio``
(24 kHz mono 16-bit) is pushed as 100 ms microphone frames, then silence as a quiet microphone
would, at ``--pace`` times real time, until the assistant's transcript has stopped growing for a
second of audio. It prints one JSON object: the assistant's transcript, the user's final
transcripts, the seconds of output audio and the errors the session emitted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import wave
from typing import Any

from livekit import rtc
from livekit.agents import function_tool, llm
from livekit.plugins.openai.realtime.gpt_live_model import GPTLiveModel

RATE = 24000
CHUNK = RATE // 10


def read_pcm(path: str) -> bytes:
    with wave.open(path, "rb") as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (RATE, 1, 2):
            raise SystemExit(f"{path}: expected 24 kHz mono 16-bit PCM")
        return w.readframes(w.getnframes())


def frame_of(pcm: bytes) -> rtc.AudioFrame:
    return rtc.AudioFrame(data=pcm, sample_rate=RATE, num_channels=1, samples_per_channel=len(pcm) // 2)


@function_tool
async def get_weather(city: str, unit: str = "celsius") -> str:
    """The weather in a city."""
    return f"It is 21 degrees {unit} and sunny in {city}."


async def main(url: str, audio: str, pace: float, timeout: float, want_tool: bool) -> dict[str, Any]:
    model = GPTLiveModel(api_key="sk-client", base_url=url, delegation="responses" if want_tool else "client",
                         responses_options={"model": "gpt-5.4-mini"})
    session = model.session()
    said: list[str] = []
    heard: list[str] = []
    errors: list[str] = []
    tools: list[str] = []

    def run_tool(call: llm.FunctionCall) -> None:
        """What the framework does with a call: run the tool, hand its output back as a chat item."""
        async def answer() -> None:
            args = json.loads(call.arguments)
            output = await get_weather(**args)
            tools.append(call.name)
            await session._append_items([llm.FunctionCallOutput(call_id=call.call_id, name=call.name,
                                                                output=output, is_error=False)])
        asyncio.ensure_future(answer())

    session.on("function_call", run_tool)
    session.on("transcript_delta", lambda ev: said.append(ev.text))
    session.on("input_audio_transcription_completed", lambda ev: heard.append(ev.transcript) if ev.is_final else None)
    session.on("error", lambda ev: errors.append(str(ev.error)))
    output = {"bytes": 0}

    async def listen() -> None:
        async for frame in session.audio_stream:
            output["bytes"] += len(frame.frame.data.tobytes())

    listener = asyncio.create_task(listen())
    await session._update_session(instructions="You are a test assistant.", chat_ctx=llm.ChatContext.empty(),
                                  tools=[get_weather] if want_tool else [])
    pcm = read_pcm(audio)
    async with asyncio.timeout(timeout):
        for i in range(0, len(pcm), CHUNK * 2):
            session.push_audio(frame_of(pcm[i : i + CHUNK * 2]))
            await asyncio.sleep(0.1 / pace)
        quiet = 0
        last = ""
        while quiet < 10 or not said or (want_tool and not tools):  # a microphone keeps streaming: the model's timeline runs on it
            session.push_audio(frame_of(bytes(CHUNK * 2)))
            await asyncio.sleep(0.1 / pace)
            quiet = quiet + 1 if "".join(said) == last else 0
            last = "".join(said)
        session.push_audio(frame_of(bytes(CHUNK * 2)))  # the user's turn ends on their own audio
    await session.aclose()
    listener.cancel()
    await model.aclose()
    return {"assistant": "".join(said), "user": heard, "audio_s": output["bytes"] / 2 / RATE, "errors": errors,
            "tools": tools}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True, help="the server's base URL, ws://… or http://…/v1")
    parser.add_argument("--audio", required=True)
    parser.add_argument("--pace", type=float, default=4.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--tool", action="store_true", help="Responses delegation with a get_weather tool")
    args = parser.parse_args()
    args.url = "http" + args.url.removeprefix("ws") if args.url.startswith("ws") else args.url
    result = asyncio.run(main(args.url, args.audio, args.pace, args.timeout, args.tool))
    json.dump(result, sys.stdout)
    print()
