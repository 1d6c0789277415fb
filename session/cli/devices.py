"""``voxline devices``: the sound devices PortAudio sees, then the sound server's sinks and
sources (PulseAudio or PipeWire: what the desktop's sound settings show), defaults marked.

Indices, names and server names printed here are what ``--input-device`` / ``--output-device``
accept.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from voxline.base.errors import AudioError
from voxline.base.shown import printable
from voxline.audio.device_list import NO_DEVICES, DeviceInfo, list_devices

__all__ = ["add_arguments", "format_table", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object per device instead of a table")


def format_table(devices: list[DeviceInfo]) -> str:
    """An aligned text table: index, name, server name, host API, channels, default rate, defaults."""
    rows = [["#", "name", "server name", "host api", "in", "out", "rate", "default"]]
    for d in devices:
        marks = [m for m, on in (("input", d.is_default_in), ("output", d.is_default_out)) if on]
        rows.append(
            [
                str(d.index),
                d.name,
                printable(d.route or ""),
                d.hostapi,
                str(d.max_input_channels),
                str(d.max_output_channels),
                f"{d.default_samplerate:g}",
                ", ".join(marks),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = {0, 4, 5, 6}
    lines = [
        "  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


async def run(args: argparse.Namespace) -> int:
    try:
        devices = list_devices()
    except AudioError as exc:
        raise AudioError(str(exc)) from None
    if not devices:
        raise AudioError(NO_DEVICES)
    if args.json:
        for device in devices:
            print(json.dumps(asdict(device)))
    else:
        print(format_table(devices))
    return 0
