"""What a replay reads before it starts: the recording, its sidecar transcript, a tool registry.

Shared by ``voxline replay`` on one recording and by replay farms; every failure is one
:class:`~voxline.realtime.errors.ConfigurationError` line.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import numpy as np

from voxline.audio.resample import StreamResampler
from voxline.audio.wavio import WavReader
from voxline.base.audio_format import SAMPLE_RATE
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.engine.scenario import read_transcripts

from ..settings import UsageError
from ..tools import ToolRegistry

__all__ = ["load_input", "load_tools", "pick_channel", "transcripts_for"]


def transcripts_for(recording: Path) -> tuple[str, ...] | None:
    """The sidecar transcript of a recording (``talk.wav`` → ``talk.txt``): one user turn per line."""
    sidecar = recording.with_suffix(".txt")
    return read_transcripts(sidecar) if sidecar.is_file() else None


def load_tools(spec: str, what: str = "--tools") -> ToolRegistry:
    """``MODULE:ATTR`` → the :class:`ToolRegistry` it names (the current directory is importable).

    ``what`` names the setting in errors (the flag, or a manifest's field)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"{what} takes MODULE:ATTR (e.g. mytools:registry), not {spec!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"{what}: cannot import {module_name!r}: {exc}") from None
    registry = getattr(module, attr, None)
    if not isinstance(registry, ToolRegistry):
        raise ConfigurationError(f"{what}: {spec} is not a ToolRegistry (got {type(registry).__name__})")
    return registry


def load_input(path: Path, quiet: bool = False, channel: str | None = None) -> np.ndarray:
    """The recording as int16 mono at 24 kHz (other rates are resampled).

    Of several channels, ``channel`` picks one (``left``, ``right`` or its number from 1) or
    ``mix`` averages them (the default). Conversions are noted on stderr unless ``quiet``."""
    with WavReader(path) as reader:
        reader.channel = pick_channel(channel, reader.channels, path)
        samples, rate = reader.read(reader.frames), reader.rate
        if reader.conversion and not quiet:
            print(f"voxline: {path}: converting {reader.conversion} to 16-bit", file=sys.stderr)
        if reader.channels > 1 and not quiet:
            used = "averaged to mono" if reader.channel is None else f"using channel {reader.channel + 1} only"
            print(f"voxline: {path}: {reader.channels} channels, {used} (--channel left|right|N|mix picks)",
                  file=sys.stderr)
    if rate != SAMPLE_RATE:
        if not quiet:
            print(f"voxline: resampling {path} from {rate} Hz to {SAMPLE_RATE} Hz (its sample m lines up with "
                  f"HEARD.wav sample m*{SAMPLE_RATE}/{rate})", file=sys.stderr)
        samples = StreamResampler(rate, SAMPLE_RATE).process(samples, last=True)
    if len(samples) == 0:
        raise ConfigurationError(f"{path} holds no audio")
    return samples


def pick_channel(channel: str | None, channels: int, path: Path) -> int | None:
    """``--channel`` as an index into ``channels`` (None: their average); one line if the file has no such channel."""
    if channel is None or channel == "mix":
        return None
    index = {"left": 0, "right": 1}.get(channel)
    if index is None:
        if not channel.isdigit() or int(channel) < 1:
            raise UsageError(f"--channel takes left, right, a channel number from 1, or mix, not {channel!r}")
        index = int(channel) - 1
    if index >= channels:
        raise UsageError(f"--channel {channel}: {path} has {channels} channel{'s' if channels > 1 else ''}")
    return index
