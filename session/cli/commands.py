"""The table of subcommands: name → (help, module). Each module has ``add_arguments`` and ``run``,
and may have ``loop_factory(args)`` returning the event loop factory its ``run`` needs (or None).

Modules are imported only for the subcommand that runs, so ``voxline devices`` does not pay
for the server and ``voxline serve`` does not load sound devices.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Awaitable, Callable
from types import ModuleType

__all__ = ["COMMANDS", "load"]

COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("run the built-in local Realtime server (a scripted stand-in for offline use)", "serve"),
    "talk": ("a live voice assistant in the terminal: microphone, speakers, live transcripts, barge-in", "talk"),
    "replay": ("replay a recording as the microphone; write what the listener heard and every wire event", "replay"),
    "devices": ("list the sound devices (indices and names for --input-device/--output-device)", "devices"),
    "token": ("mint an ephemeral client secret for a browser or kiosk", "secret"),
}

Runner = Callable[[argparse.Namespace], Awaitable[int]]


def load(name: str) -> ModuleType:
    """The module implementing subcommand ``name``."""
    return importlib.import_module(f"{__package__}.{COMMANDS[name][1]}")
