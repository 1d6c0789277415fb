"""Output paths on the command line: ``-`` is stdout, defaults, and the checks made before a run starts.

``-`` becomes :data:`~voxline.base.files.STDOUT` (the path ``/dev/stdout``, one object, so that a file a user
names ``./-`` stays a file of that name); the files written whole go there through the process's own descriptor
(:func:`voxline.base.files.replaced`), and the command's lines for people then go to stderr
(:func:`documents_to_stdout`). No output may be an input or another output (:func:`check_paths`), and each must be
writable before anything runs (:func:`writable`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib.machinery
import os
import sys
from collections.abc import Callable
from pathlib import Path

from voxline.base.files import STDOUT, is_stdout, nonempty_path, own_stream_file, same_file, shown
from voxline.realtime.errors import ConfigurationError, UsageError

__all__ = ["check_paths", "default_output", "document_path", "documents_to_stdout", "folder_path", "output_path",
           "read_with",
           "writable"]

def output_path(text: str) -> Path:
    """An output flag's value: ``-`` is :data:`STDOUT`, anything else the path it names (never empty, and never one
    ending in ``/``: that names a folder, which ``Path`` would take for a file of that name)."""
    if text == "-":
        return STDOUT
    path = nonempty_path(text)
    if text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"takes a file, not {text!r}, which names a folder (it ends in /)")
    return path


def document_path(what: str) -> Callable[[str], Path]:
    """The value of an output flag for a file that is no audio (``what`` it holds): as :func:`output_path`, and never
    a ``.wav`` name, which says "recording" to people and to a farm of its folder, which would replay it."""
    def parse(text: str) -> Path:
        path = output_path(text)
        if path.suffix.lower() in (".wav", ".wave"):
            raise argparse.ArgumentTypeError(f"writes {what}, not audio: name it other than {text!r} (a farm of its "
                                             "folder would take a .wav for a recording)")
        return path

    return parse


def folder_path(text: str) -> Path:
    """A folder flag's value (``--out-dir``): the path it names, a trailing ``/`` welcome; ``-`` is :data:`STDOUT`,
    for the flag to refuse in words of its own."""
    return STDOUT if text == "-" else nonempty_path(text)


def default_output(recording: Path, suffix: str) -> Path:
    """Where one replay writes an output that was not named: ``talk.wav`` → ``talk.heard.wav`` in the
    current directory (:func:`check_paths` still keeps it off the input)."""
    return Path(recording.stem + suffix)


def read_with(recording: Path, scenario: str | None = None, tools: str | None = None) -> list[Path]:
    """What a replay of ``recording`` reads besides it, which no output may overwrite: its sidecar transcript
    (``talk.txt``), a scenario file, and a tools module's source (``MODULE:ATTR`` of a top-level module, found
    without importing it)."""
    read = [recording.with_suffix(".txt")] if recording.with_suffix(".txt").is_file() else []
    if scenario is not None and Path(scenario).is_file():
        read.append(Path(scenario))
    module = (tools or "").partition(":")[0]
    source: str | None = None
    if module in sys.modules:  # imported already (loaded to check it): where it came from
        source = getattr(sys.modules[module], "__file__", None)
    elif module and "." not in module:  # a submodule's search would import its package
        with contextlib.suppress(ImportError, ValueError, OSError):
            spec = importlib.machinery.PathFinder.find_spec(module, [os.getcwd(), *sys.path])  # as --tools looks
            source = spec.origin if spec is not None else None
    if source and os.path.isfile(source):
        read.append(Path(source))
    return read


def check_paths(inputs: list[Path], outputs: list[Path]) -> None:
    """No output may be an input or another output, by name or through a link (outputs may share a
    device that discards what it is given, as ``/dev/null``): a command line that cannot work as given."""
    # inputs are only read: one named twice (a scenario that is the recording or its sidecar) is no clash here, and
    # what reads it says what is wrong with it
    seen: list[Path] = list(inputs)
    for path in outputs:
        for other in seen:
            if same_file(path, other):
                if other in inputs:
                    raise UsageError(f"{path} is the input {other}; inputs are never overwritten, choose another name")
                if not _discards(path):
                    raise UsageError(f"{shown(path)} is named for two outputs; choose another name for one")
        seen.append(path)


def _discards(path: Path) -> bool:
    """Is ``path`` the null device (every output may go there at once)?"""
    try:
        return os.path.samefile(path, os.devnull)
    except OSError:
        return False


def writable(path: Path, flag: str | None = None) -> None:
    """ConfigurationError unless this process can write ``path``, found by trying, since permissions alone do not
    tell (a read-only or pseudo file system, ``/proc``): a regular file is opened to append, nothing written; a
    missing one is made and removed again. A pipe, a device or a link is left alone: opening a pipe to find out
    would end its reader's input, or wait for one. The line names ``flag`` where one is given."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            where = path if existed else path.parent
            reason = f"permission denied ({where} is not writable)"
        else:
            reason = exc.strerror or str(exc)
        raise ConfigurationError(f"{flag} {path}: {reason}" if flag else f"cannot write {path}: {reason}") from None
    if not existed:
        with contextlib.suppress(OSError):
            path.unlink()


_DOCUMENTS = ("report", "summary", "stereo_out", "results", "junit")
"""Outputs written whole once the run is over: ``-`` names stdout for them."""
_STREAMED = ("out", "events")


def documents_to_stdout(args: argparse.Namespace) -> bool:
    """``-`` is stdout for a document; with one written there, the lines for people go to stderr, so that stdout
    carries the document alone (``--summary - | jq``)."""
    for name in _STREAMED:
        path = getattr(args, name, None)
        flag = "--" + name.replace("_", "-")
        if path is STDOUT:
            raise UsageError(f"{flag} writes a file as the run goes; '-' (stdout) is for --summary, --report, "
                             "--stereo-out, --results and --junit")
        if path is not None and (stream := own_stream_file(path)) is not None:  # opened anew, it would be written over
            raise UsageError(f"{flag} {shown(path)} is the file this command's {stream} goes to: opened again it "
                             "would be written over from its start; name another file")
    return any(path is not None and is_stdout(path) for path in (getattr(args, name, None) for name in _DOCUMENTS))
