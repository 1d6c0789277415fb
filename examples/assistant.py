"""A command-line assistant with two tools: a read-only lookup, and a cancellation that asks first.

Run it from the repository root with voxline installed (in a clone, ``python3`` below is ``uv run --no-dev python``;
the folders install as one ``voxline`` namespace, so ``PYTHONPATH=.`` is not enough)::

    python3 examples/assistant.py                 # type a message and press Enter; Ctrl-D quits
    printf 'where is my order?\\ncancel it please\\n' | python3 examples/assistant.py --yes
    python3 examples/assistant.py --speakers      # hear the replies on the default sound device

Offline it runs against the built-in local server, a scripted stand-in: whatever you type,
its replies and tool calls come from the small scenario below (first ``lookup_order``, then
``cancel_order``). With ``--url`` and ``OPENAI_API_KEY`` it talks to a real model instead
(``--url wss://api.openai.com/v1``).

``cancel_order`` has a side effect, so it is registered with ``needs_approval=True``: the
session calls the approval callback, which asks ``[y/N]`` on stdin (``--yes`` approves
without asking). A declined call never runs; the model is told it was declined. The
assistant's audio plays to a :class:`~voxline.audio.clocked_output.ClockedOutput` (the listener's
timeline at real-time pace, silent) unless ``--speakers`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from voxline.base.clock import RealClock
from voxline.audio.device_speaker import SpeakerSink
from voxline.base.errors import AudioError
from voxline.audio.playout import PlayoutBuffer
from voxline.realtime.connection import RealtimeConnection, connect
from voxline.realtime.errors import RealtimeError
from voxline.realtime.server import ServerConfig, serve
from voxline.session.events import (
    RawServerEvent,
    ResponseFinished,
    ResponseStarted,
    SessionError,
    StateChanged,
    TranscriptDone,
)
from voxline.audio.clocked_output import ClockedOutput, Output
from voxline.session.settings import SessionSettings
from voxline.session.tools import ToolCall, ToolFinished, ToolRegistry, ToolStarted
from voxline.session.voice import VoiceSession

SCENARIO = """
name = "assistant"
description = "The assistant example: an order lookup, then a cancellation that needs approval."
after_last = "repeat_last"

[[turns]]
[[turns.output]]
say = "Let me look that up."
[[turns.output]]
call = "lookup_order"
arguments = { order_id = "A1234" }
[turns.after]
say = "I have the details of order A1234."

[[turns]]
[[turns.output]]
call = "cancel_order"
arguments = { order_id = "A1234", reason = "no longer needed" }
[turns.after]
say = "I have passed your decision on to the order system."

[[turns]]
say = "This scripted demo has nothing more to say."
"""

ORDERS: dict[str, dict[str, str]] = {"A1234": {"item": "headphones", "status": "shipped", "eta": "Thursday"}}


def order_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    def lookup_order(order_id: str) -> dict[str, str]:
        """Look up an order's item, status and delivery estimate.

        Args:
            order_id: the order number, e.g. A1234.
        """
        if order_id not in ORDERS:
            raise LookupError(f"no order {order_id}")
        return {"order_id": order_id, **ORDERS[order_id]}

    @tools.tool(needs_approval=True)
    def cancel_order(order_id: str, reason: str = "") -> dict[str, str]:
        """Cancel an order. This changes the order: the user is asked first.

        Args:
            order_id: the order number.
            reason: why the user cancels.
        """
        if order_id not in ORDERS:
            raise LookupError(f"no order {order_id}")
        ORDERS[order_id]["status"] = "cancelled"
        return {"order_id": order_id, "status": "cancelled", "reason": reason}

    return tools


class Lines:
    """Lines typed on stdin, read without blocking the event loop (messages and y/n answers)."""

    def __init__(self) -> None:
        self._reader = asyncio.StreamReader()
        self._tty = sys.stdin.isatty()

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        pipe = open(os.dup(sys.stdin.fileno()), "rb", buffering=0)  # closed at end of input, not sys.stdin
        mode = os.fstat(pipe.fileno()).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or pipe.isatty():  # input that comes as it is typed or sent
            try:
                await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(self._reader), pipe)
            except BaseException:
                pipe.close()
                raise
            return
        with pipe:  # a file (``< messages.txt``) or ``/dev/null`` (cron, nohup, a CI step): nothing to wait for
            self._reader.feed_data(pipe.read())
        self._reader.feed_eof()

    async def read(self, prompt: str, *, question: bool = False) -> str | None:
        """The next line (``None`` at end of input); the prompt is shown on a terminal only, and a
        ``question`` left unanswered by piped input is shown with its answer, the end of input."""
        if self._tty:
            print(prompt, end="", flush=True)
        raw = await self._reader.readline()
        if not raw:
            if not self._tty and question:
                print(f"{prompt}(end of input)")  # the question was asked all the same: say what answered it
            return None
        line = raw.decode().strip()
        if not self._tty:
            print(f"{prompt}{line}")  # echo piped input, so the transcript reads in order
        return line


def approver(lines: Lines, auto_yes: bool) -> Any:
    async def approve(call: ToolCall) -> bool:
        prompt = f"approve {call.name} {call.arguments}? [y/N] "
        if auto_yes:
            print(prompt + "y (--yes)")
            return True
        answer = await lines.read(prompt, question=True)
        return (answer or "").lower() in ("y", "yes")

    return approve


class TurnWatch:
    """Is the assistant done with this turn? Every response finished, every tool call answered
    and followed up, and its audio played out."""

    def __init__(self, output: Output) -> None:
        self.output = output
        self.answered = False
        self.open_calls = 0
        self.follow_up = False
        self.responses = 0
        self.state = "listening"

    def update(self, event: object) -> bool:
        match event:
            case RawServerEvent(event=raw) if getattr(raw, "type", "") == "response.function_call_arguments.done":
                self.open_calls += 1
            case ToolFinished():
                self.open_calls -= 1
                self.follow_up = True  # the session sends one response.create after the outputs
            case ResponseStarted():
                self.responses += 1
                self.follow_up = False
            case ResponseFinished():
                self.responses -= 1
                self.answered = True
            case StateChanged(state=state):
                self.state = state
            case _:
                pass
        idle = self.state != "speaking" and self.output.playout.queued_samples == 0
        return self.answered and not self.open_calls and not self.follow_up and self.responses <= 0 and idle


def show(event: object) -> None:
    match event:
        case TranscriptDone(role=role, text=text):
            print(f"{'you (heard)' if role == 'user' else 'assistant'}: {text}")
        case ToolStarted(name=name, arguments=arguments):
            print(f"tool: {name} {arguments}")
        case ToolFinished(name=name, output=output, ok=ok):
            print(f"tool: {name} {'returned' if ok else 'did not run:'} {output}")
        case SessionError(message=message):
            print(f"error: {message}")
        case _:
            pass


async def one_turn(session: VoiceSession, text: str) -> None:
    watch = TurnWatch(session.output)
    await session.send_text(text)
    async with asyncio.timeout(60):
        async for event in session:
            show(event)
            if watch.update(event):
                return


async def converse(session: VoiceSession, lines: Lines) -> None:
    while (text := await lines.read("you: ")) is not None:
        if text in ("quit", "exit"):
            break
        if text:
            await one_turn(session, text)


def make_output(speakers: bool, clock: RealClock, stack: contextlib.ExitStack) -> Output:
    if not speakers:
        return ClockedOutput(clock)
    sink = SpeakerSink(PlayoutBuffer())
    sink.start()
    stack.callback(sink.close)
    return sink


async def main(args: argparse.Namespace) -> int:
    lines = Lines()
    await lines.open()
    clock = RealClock()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as devices:
        scenario = Path(tmp) / "assistant.toml"
        scenario.write_text(SCENARIO)
        output = make_output(args.speakers, clock, devices)
        async with contextlib.AsyncExitStack() as stack:
            if args.url:
                url, token = args.url, os.environ.get("OPENAI_API_KEY", "")
            else:
                server = await stack.enter_async_context(serve(ServerConfig(port=0, scenario=scenario, voice=args.voice)))
                url, token = server.url, "local"
                print(f"using the built-in local server at {url}: scripted replies, not a language model")

            async def connector() -> RealtimeConnection:
                return await connect(url, token)

            settings = SessionSettings(url=url, turn_detection="none",
                                       instructions="You are a helpful order-support assistant. Be brief.")
            session = VoiceSession(settings, output=output, tools=order_tools(), approve=approver(lines, args.yes),
                                   clock=clock, connector=connector, raw_events=True)
            async with session:
                await converse(session, lines)
    print("orders:", ", ".join(f"{k} {v['status']}" for k, v in ORDERS.items()))
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A command-line assistant with tools (see the module docstring).")
    parser.add_argument("--yes", action="store_true", help="approve every tool call that asks for approval")
    parser.add_argument("--speakers", action="store_true", help="play the replies on the default sound device")
    parser.add_argument("--voice", default="auto", help="built-in server voice: auto, espeak or tone")
    parser.add_argument("--url", help="another Realtime server (OPENAI_API_KEY is the token)")
    return parser.parse_args()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(parse_args())))
    except (RealtimeError, AudioError) as error:
        sys.exit(f"assistant: error: {error}")
    except KeyboardInterrupt:
        sys.exit(130)
