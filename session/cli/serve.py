"""``voxline serve``: the built-in local Realtime server (see :mod:`voxline.realtime.server`).

SIGINT, SIGTERM and SIGHUP close it (its workers too) and exit 128 + the signal's number, as a
service manager or a CI job expects, with no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from voxline.realtime.server.net.cli import add_serve_arguments as add_arguments
from voxline.realtime.server.net.cli import main_serve

from .stopping import Stop

__all__ = ["add_arguments", "run"]


async def run(args: argparse.Namespace) -> int:
    with Stop(note="closing the server") as stop:
        serving = asyncio.ensure_future(main_serve(args))
        stopped = asyncio.ensure_future(stop.event.wait())
        try:
            await asyncio.wait((serving, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not serving.done():
                serving.cancel()  # the server closes, its workers are stopped
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
        if stop.stopped:
            return stop.exit_code
        return serving.result()
