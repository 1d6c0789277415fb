"""A kiosk that holds only the media; a trusted backend runs the tools over the call's sideband.

Run it from the repository root with voxline installed (in a clone, ``python3`` below is ``uv run --no-dev python``;
the folders install as one ``voxline`` namespace, so ``PYTHONPATH=.`` is not enough)::

    python3 examples/kiosk_sideband.py               # the built-in local server, silent output
    python3 examples/kiosk_sideband.py --voice espeak

The split, as a deployment would have it:

* the **backend** holds the API key. It mints a short-lived ephemeral key for the kiosk
  (``POST /v1/realtime/client_secrets``) and keeps the tool code to itself;
* the **kiosk** opens a WebRTC call with the ephemeral key: microphone and speaker are media
  tracks, events run on the ``oai-events`` channel. Its session has no tools and passes
  ``run_tools=False``, so it leaves every call to the backend;
* the backend **attaches to the same call** by its id (``call_id``, the WebSocket
  ``/v1/realtime?call_id=…`` with the API key). It has no media: its tool registry and
  conversation mirror work from the call's events, and its tool outputs and follow-up
  ``response.create`` go back over the sideband.

Barge-in is still the server's: over WebRTC the server owns the output buffer and cuts it
where the listener is, whether the visitor speaks or the kiosk stops the reply.

The local server is a scripted stand-in (energy VAD, scripted replies and tool calls); it does
not understand speech. Against the real service, point ``--url`` at it and set OPENAI_API_KEY.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from voxline.base.errors import VoxlineError
from voxline.realtime.server import ServerConfig, serve
from voxline.session.cli.secret import mint_client_secret
from voxline.session.events import BargeIn, TranscriptDone
from voxline.session.settings import SessionSettings
from voxline.session.tools import ToolFinished, ToolRegistry
from voxline.session.voice import VoiceSession

BACKEND_KEY = "sk-local-backend"


def backend_tools() -> ToolRegistry:
    """The tools only the backend can run (canned data here)."""
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """Demo weather for a city: canned data, not a real forecast.

        Args:
            city: the city name.
            unit: celsius or fahrenheit.
        """
        return {"city": city, "temperature": 21, "unit": unit, "conditions": "clear"}

    return tools


class KioskError(Exception):
    """What ends the demo early, said in one line."""


async def wait_for(session: VoiceSession, kind: type, text: str = "") -> Any:
    try:
        async with asyncio.timeout(30):
            async for event in session:
                if isinstance(event, kind) and text in getattr(event, "text", ""):
                    return event
    except TimeoutError:
        raise KioskError(f"no {kind.__name__} came within 30 s") from None
    raise KioskError(f"the session ended before a {kind.__name__}")


async def run(http_url: str, ws_url: str, api_key: str, model: str) -> None:
    # Backend: mint the kiosk's ephemeral key (the API key never leaves the backend).
    secret = await asyncio.to_thread(mint_client_secret, http_url, api_key, model=model, ttl=600)
    kiosk_settings = SessionSettings(url=http_url, api_key=secret["value"], model=model, transport="webrtc",
                                     reconnect_attempts=0)
    async with VoiceSession(kiosk_settings, run_tools=False) as kiosk:
        print(f"kiosk: WebRTC call {kiosk.call_id} open with an ephemeral key")
        backend_settings = SessionSettings(url=ws_url, api_key=api_key, call_id=kiosk.call_id, reconnect_attempts=0,
                                           instructions="You help visitors at a kiosk. Use get_weather for weather.")
        async with VoiceSession(backend_settings, tools=backend_tools()) as backend:
            print(f"backend: attached to {backend.call_id} over the sideband with the API key")
            await kiosk.send_text("What is the weather in Paris?")
            print("kiosk: visitor asks 'What is the weather in Paris?'")
            done = await wait_for(backend, ToolFinished)
            print(f"backend: ran {done.name} -> {done.output}")
            reply = await wait_for(kiosk, TranscriptDone, "weather report")
            print(f"kiosk: assistant says {reply.text!r}")
            async with asyncio.timeout(30):  # the server plays the reply on the call's media track
                while kiosk.output.playout.ledger.heard_samples(reply.item_id, 0, kiosk.output.now()) == 0:
                    await asyncio.sleep(0.05)
            barge: BargeIn | None = await kiosk.interrupt()
            if barge is not None:
                who = "the server cut its own buffer" if barge.server_cuts else f"truncate at {barge.audio_end_ms} ms"
                print(f"kiosk: visitor taps stop after {barge.heard_ms:.0f} ms of the reply; {who}")
            items = [item.item_type for item in backend.mirror.items()]
            print(f"backend: its mirror holds {len(items)} items, the tool call and its output among them")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="Realtime API base URL (default: the built-in local server)")
    parser.add_argument("--model", default="gpt-realtime-2.1", help="realtime model (default gpt-realtime-2.1)")
    parser.add_argument("--voice", default="tone", help="built-in server voice: tone (default), espeak or auto")
    args = parser.parse_args()
    if args.url:
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            print("kiosk_sideband: OPENAI_API_KEY is not set (needed with --url)", file=sys.stderr)
            return 2
        await run(args.url, args.url, key, args.model)
        return 0
    config = ServerConfig(port=0, voice=args.voice, api_key=BACKEND_KEY, scenario="tools")
    async with serve(config) as server:
        print(f"using the built-in local server at {server.http_url}: scripted replies, not a language model")
        await run(server.http_url, server.url, BACKEND_KEY, args.model)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except (VoxlineError, KioskError) as error:  # the service unreachable, a key refused, a call that never came
        sys.exit(f"kiosk_sideband: error: {error}")
    except KeyboardInterrupt:  # Ctrl-C: the sessions are closed on the way out; no traceback
        sys.exit(130)
