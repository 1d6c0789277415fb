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

from voxline.audio.recording import WavFeed
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.errors import VoxlineError, message_of
from voxline.base.files import shown
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.engine.scenario import read_transcripts

from ..settings import UsageError
from ..tools import ToolRegistry

__all__ = ["load_input", "load_tools", "open_input", "pick_channel", "transcripts_for"]


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
    except VoxlineError:  # a tool the module registers is refused (ToolError): its own line says which and why
        raise
    except ImportError as exc:
        raise ConfigurationError(f"{what}: cannot import {module_name!r}: {exc}") from None
    except (Exception, GeneratorExit, SystemExit) as exc:  # the module's own code failed as it ran: a syntax
        # error (its message says where), an exception, even sys.exit(); Ctrl-C goes on
        raise ConfigurationError(f"{what}: importing {module_name!r} failed: {type(exc).__name__}: {message_of(exc)}") from None
    try:
        registry = getattr(module, attr)  # a module's __getattr__ is its own code too, whatever it raises
    except AttributeError:
        raise ConfigurationError(f"{what}: module {module_name!r} has no attribute {attr!r}") from None
    except (Exception, GeneratorExit, SystemExit) as exc:
        raise ConfigurationError(f"{what}: reading {spec} failed: {type(exc).__name__}: {message_of(exc)}") from None
    if not isinstance(registry, ToolRegistry):
        raise ConfigurationError(f"{what}: {spec} is not a ToolRegistry (got {type(registry).__name__})")
    return registry


def open_input(path: Path, quiet: bool = False, channel: str | None = None) -> WavFeed:
    """The recording, checked and ready to stream as int16 mono at 24 kHz (other rates are resampled as read).

    Of several channels, ``channel`` picks one (``left``, ``right`` or its number from 1) or
    ``mix`` averages them (the default). Conversions are noted on stderr unless ``quiet``. A
    header that lies (a file cut short, an absurd rate) is one line naming the file."""
    feed = WavFeed(path)
    reader = feed.reader
    try:
        reader.channel = pick_channel(channel, reader.channels, path)
        if feed.frames == 0:
            raise ConfigurationError(f"{path} holds no audio")
    except BaseException:
        feed.close()
        raise
    if quiet:
        return feed
    if reader.conversion:
        print(f"voxline: {shown(path)}: converting {reader.conversion} to 16-bit", file=sys.stderr)
    if reader.channels > 1:
        used = "averaged to mono" if reader.channel is None else f"using channel {reader.channel + 1} only"
        print(f"voxline: {shown(path)}: {reader.channels} channels, {used} (--channel left|right|N|mix picks)",
              file=sys.stderr)
    if reader.rate != SAMPLE_RATE:
        print(f"voxline: resampling {shown(path)} from {reader.rate} Hz to {SAMPLE_RATE} Hz (its sample m lines up with "
              f"HEARD.wav sample m*{SAMPLE_RATE}/{reader.rate})", file=sys.stderr)
    return feed


def load_input(path: Path, quiet: bool = False, channel: str | None = None) -> np.ndarray:
    """The whole recording as int16 mono at 24 kHz, in memory (:func:`open_input`, read to its end)."""
    with open_input(path, quiet, channel) as feed:
        return feed.read_all()


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
