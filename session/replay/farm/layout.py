"""Where a farm writes: one folder per recording under ``--out-dir``, named so it cannot escape.

A recording's name comes from a manifest or a file's stem and may be anything a file name
can be: ``..`` (the stem of ``...wav``), ``.hidden``, a name with spaces or a separator
from another system, or the name of an output of the farm itself (``results.jsonl``). Its
folder is the name made safe (:func:`safe_folder`) and unique (``-2``, ``-3`` … in name
order, case-insensitively, and never the name of a file the farm writes next to the
folders), so every output stays inside ``--out-dir`` and none overwrites another.
:func:`check_outputs` then refuses a farm any of whose outputs would be one of its inputs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from voxline.base.files import same_file, shown
from voxline.realtime.errors import ConfigurationError, UsageError

from .manifest import FarmRecording

__all__ = ["RECORDING_OUTPUTS", "assign_folders", "check_outputs", "folder_of", "safe_folder"]

RECORDING_OUTPUTS = ("heard.wav", "events.jsonl", "summary.json", "report.html", "stereo.wav")
_UNSAFE = re.compile(r"[^\w.\-]")
MAX_NAME = 100


def safe_folder(name: str) -> str:
    """``name`` as one path component that stays where it is put: letters, digits, ``_ . -`` kept, the rest
    ``_``; a name of dots only or starting with one gets a ``_`` in front; at most 100 bytes in UTF-8 (a file
    system's limit of 255 is in bytes: 100 characters of CJK are 300), cut between characters."""
    text = _UNSAFE.sub("_", name).encode()[:MAX_NAME].decode("utf-8", "ignore") or "_"
    if text.startswith("."):
        text = "_" + text
    return text


def folder_of(recording: FarmRecording) -> str:
    return recording.folder if recording.folder is not None else safe_folder(recording.name)


def assign_folders(recordings: list[FarmRecording], taken: Iterable[str] = ()) -> list[FarmRecording]:
    """Each recording with a safe folder name no other recording and no name in ``taken`` has."""
    used = {t.casefold() for t in taken}
    placed = []
    for r in recordings:
        base = safe_folder(r.name)
        folder, n = base, 2
        while folder.casefold() in used:
            folder, n = f"{base}-{n}", n + 1
        used.add(folder.casefold())
        placed.append(r.model_copy(update={"folder": folder}))
    return placed


def check_outputs(recordings: list[FarmRecording], out_dir: Path, files: list[Path], inputs: list[Path]) -> None:
    """No output (``files`` such as results and JUnit, every recording's outputs) may be an input or another
    output, by name or through a link: one ConfigurationError line naming both."""
    sources = {os.path.realpath(p): p for p in inputs}
    for r in recordings:
        sources.setdefault(os.path.realpath(r.path), r.path)
    written: dict[str, Path] = {}
    for path in [*files, *(out_dir / folder_of(r) / name for r in recordings for name in RECORDING_OUTPUTS)]:
        real = os.path.realpath(path)
        # ``files`` are named on the command line: a clash of one is a usage error (2); of the manifest's, its own
        error = UsageError if path in files or written.get(real) in files else ConfigurationError
        if real in sources or any(same_file(path, p) for p in inputs if path in files):
            raise error(f"{path} is the input {sources.get(real, path)}; inputs are never overwritten, "
                        "choose another output")
        if real in written:
            also = "" if shown(written[real]) == shown(path) else f" (also as {shown(written[real])})"
            raise error(f"{shown(path)} would be written twice{also}; choose another name")
        written[real] = path
