"""Files written whole: a reader finds the old file or the new one, never half of either.

:func:`replaced` writes through a temporary file beside the target and renames it over the
target once everything is written; a failure (a full disk, an exception of the writer) removes
the temporary file and leaves the target as it was. A target that exists and is no regular
file (a named pipe, a terminal), or that is or leads through ``/dev`` or ``/proc``
(``/dev/stdout``, which links to the shell's redirection, a file or not), is written in place
instead: renaming over it would put a file where a device or a link was. This process's own stdout
or stderr is written where the process's output stands, after what it wrote there. A symbolic link to a
regular file stays a link: the file it names is the one replaced. An existing file in a folder that takes
no new file (so no temporary file can be made beside it) is written in place too: there, a failure
midway leaves it cut short rather than as it was.

Files written as a run goes cannot wait for the end: :mod:`voxline.base.set_aside` keeps what they replace
until the run began.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from voxline.base.errors import OutputError
from voxline.base.shown import printable

__all__ = ["STDOUT", "descriptor_open", "drop_stale", "each_written", "fresh_file", "is_stdout",
           "nonempty_path", "own_stream_file", "replaced", "rewritten_file", "same_file", "shown", "stdout_reader_gone",
           "under_dev_or_proc", "utf8"]

STDOUT = Path("/dev/stdout")
"""An output named ``-`` on the command line: one object, so that a file a user names ``./-`` stays a file of
that name; :func:`replaced` writes it through the process's own descriptor."""


def nonempty_path(text: str) -> Path:
    """A path given on the command line (an argparse ``type``); an empty one is refused: ``Path("")`` would be the
    current directory. So is one of blanks alone (a quoted variable that held a space): a file named ``' '`` is
    never what was meant."""
    if not text:
        raise argparse.ArgumentTypeError("takes a path, not an empty string")
    if not text.strip():
        raise argparse.ArgumentTypeError(f"takes a path, not {text!r}, which is blank")
    return Path(text)


def utf8(text: str) -> bytes:
    """``text`` as UTF-8 for a file. A file name that is not UTF-8 holds its stray bytes as lone surrogates
    (``caf\udce9``), which UTF-8 cannot carry: each is written as its escape, ``\udce9``, which a JSON string
    reads back as the same character, and any other text shows as it is, where strict encoding raised."""
    return text.encode("utf-8", "backslashreplace")


def shown(path: str | os.PathLike[str]) -> str:
    """A path as the user named it, for a line of a terminal: :data:`STDOUT` as ``'-' (stdout)``, a file called ``-``
    as ``./-``, a control character or a byte that is not UTF-8 in its name as its escape (:func:`printable`)."""
    if path is STDOUT:
        return "'-' (stdout)"
    name = os.fspath(path)
    return "./-" if name == "-" else printable(name)


@contextlib.contextmanager
def _naming(path: Path) -> Iterator[None]:
    """An OSError that names no file (a write or a close that failed: a full device, a lost mount) names
    ``path``; its kind stays (a reader gone is still a :class:`BrokenPipeError`)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from None


@contextlib.contextmanager
def replaced(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content to; it becomes ``path`` when the block ends normally."""
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "it is a directory", str(target))
    own = _own_stream(target)
    if own is not None:  # this process's stdout or stderr: after what was written to it, never over it
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: closed when the process began
                stream.flush()
        with _blocking(own), os.fdopen(os.dup(own), "wb") as out:
            yield out
        return
    if under_dev_or_proc(target) or (target.exists() and not target.is_file()):  # written in place, never replaced
        with _naming(target), open(target, "wb") as stream:  # a full device (/dev/full) is named
            yield stream
        return
    if target.is_symlink():
        target = Path(os.path.realpath(target))  # the link stays; the file it names is replaced
    status = target.stat() if target.exists() else None
    try:
        handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")  # never a file of the user's
    except OSError as exc:
        if status is None or not os.access(target, os.W_OK):
            raise OSError(exc.errno, exc.strerror, str(target)) from None  # the file named, not the temporary one
        with _naming(target), open(target, "wb") as stream:  # a folder that takes no new file: the file itself
            yield stream
        return
    temporary = Path(name)
    try:
        with open(handle, "wb") as file:
            yield file
        if status is not None:
            os.chmod(temporary, stat.S_IMODE(status.st_mode))  # a private file stays private
            if (status.st_uid, status.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(OSError):  # an owner this process may give it back to (it runs as root)
                    os.chown(temporary, status.st_uid, status.st_gid)
        else:
            os.chmod(temporary, 0o666 & ~_UMASK)  # as open() would have made it
        os.replace(temporary, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        if isinstance(exc, OSError) and exc.filename in (None, name):  # a full disk: the user's file is named,
            raise OSError(exc.errno, exc.strerror, str(path)) from None  # not the temporary one
        raise


def rewritten_file(path: str | os.PathLike[str]) -> Path | None:
    """The regular file :func:`replaced` writes ``path`` to by renaming a new one over it (a link's target), or None
    where it writes in place (this process's stdout or stderr, a device, anything under ``/dev`` or ``/proc``), or
    no file is there yet."""
    target = Path(path)
    if _own_stream(target) is not None or under_dev_or_proc(target):
        return None
    real = Path(os.path.realpath(target)) if target.is_symlink() else target
    return real if real.is_file() else None


def stdout_reader_gone() -> None:
    """stdout's reader went away (``voxline … | head``): point stdout at the null device, so that flushing it at
    exit raises no second ``BrokenPipeError`` (which Python would print)."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, sys.stdout.fileno())
        finally:
            os.close(null)


def drop_stale(path: str | os.PathLike[str]) -> None:
    """Remove a last run's document at ``path`` that this run will not replace (beside this run's files it would
    pass for this run's): the file :func:`rewritten_file` names, a link's target rather than the link; nothing
    where documents are written in place (stdout, a device, ``/dev/null``), nor where no file is."""
    stale = rewritten_file(path)
    if stale is not None:
        with contextlib.suppress(OSError):
            stale.unlink()


def fresh_file(path: str | os.PathLike[str]) -> BinaryIO | None:
    """A new, empty file put in place of ``path`` (or made there), open for writing as a run goes: a file
    :func:`replaced` later writes whole. Never the old file itself, so that another hard link to it keeps what it
    held; with the old file's mode, or a new file's. None where :func:`replaced` writes in place (see
    :func:`rewritten_file`)."""
    target = Path(path)
    old = rewritten_file(target)
    if old is None and (target.exists() or target.is_symlink()):
        return None
    target = old or target
    mode = stat.S_IMODE(old.stat().st_mode) if old is not None else 0o666 & ~_UMASK
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.chmod(name, mode)
        os.replace(name, target)
    except BaseException:
        os.close(handle)
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    return os.fdopen(handle, "wb")


def each_written(*writes: Callable[[], object]) -> None:
    """Make every write in turn. One that fails (an :class:`OSError` or an
    :class:`~voxline.base.errors.OutputError`: a full disk, a reader of stdout that went away) keeps none of the
    others from being made: once all were, the first failure is raised, one that is not a reader gone
    (:class:`BrokenPipeError`, which ends a command quietly) before one that is."""
    failed: OSError | OutputError | None = None
    gone: BrokenPipeError | None = None
    for write in writes:
        try:
            write()
        except BrokenPipeError as exc:
            gone = gone or exc
        except (OSError, OutputError) as exc:
            failed = failed or exc
    if failed is not None:
        raise failed
    if gone is not None:
        raise gone


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file: the same path once links are followed, or hard links to one file."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def is_stdout(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is this process's stdout (``/dev/stdout``, or the file or pipe it was redirected to)."""
    return _own_stream(Path(path)) == 1


def own_stream_file(path: str | os.PathLike[str]) -> str | None:
    """``'stdout'`` or ``'stderr'`` if ``path`` is that stream of this process and the stream is a regular file (the
    shell's ``> out.txt``): opened anew, such a file starts over at its beginning and is written over. None
    otherwise, a terminal or a pipe included, which go on where they are."""
    fd = _own_stream(Path(path))
    if fd is None:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return None
    return ("stdout" if fd == 1 else "stderr") if regular else None


_NAMED = {"/dev/stdout": 1, "/dev/fd/1": 1, "/proc/self/fd/1": 1, "/dev/stderr": 2, "/dev/fd/2": 2,
          "/proc/self/fd/2": 2}


def _own_stream(path: Path) -> int | None:
    """The descriptor of this process's stdout or stderr if ``path`` is that very file (``/dev/stdout``, or the file
    the shell redirected it to); None otherwise. Opened anew, it would start over at its beginning and write over
    what the process had written there. The null device is no stream of the process's, whatever goes there."""
    if (fd := _NAMED.get(os.fspath(path))) is not None:  # without looking: /proc may be missing
        return fd if descriptor_open(fd) else None
    try:
        named = os.stat(path)
        if os.path.samefile(path, os.devnull):
            return None
    except (OSError, ValueError):
        return None
    for fd in (1, 2):
        try:
            own = os.fstat(fd)
        except OSError:
            continue
        if (own.st_dev, own.st_ino) == (named.st_dev, named.st_ino):
            return fd
    return None


def descriptor_open(fd: int) -> bool:
    """Is ``fd`` an open descriptor of this process?"""
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def _blocking(fd: int) -> Iterator[None]:
    """``fd`` in blocking mode meanwhile: a parent may hand over a pipe that is not, and a document is written whole
    or the write fails, never half of it for want of room in the pipe (the mode is the open file's: put back after)."""
    try:
        was = os.get_blocking(fd)
    except OSError:
        yield
        return
    if not was:
        os.set_blocking(fd, True)
    try:
        yield
    finally:
        if not was:
            with contextlib.suppress(OSError):
                os.set_blocking(fd, False)


def under_dev_or_proc(path: Path) -> bool:
    """True if ``path``, or a symbolic link it goes through, lies in ``/dev`` or ``/proc``."""
    here = Path(os.path.abspath(path))
    for _hop in range(40):  # the kernel's own limit on links followed
        if len(here.parts) > 1 and here.parts[1] in ("dev", "proc"):
            return True
        if not here.is_symlink():
            return False
        here = Path(os.path.abspath(here.parent / os.readlink(here)))
    return True  # a loop of links: nothing to rename over


def _umask() -> int:
    """The process's umask (read by setting it, and setting it back: once, when this module loads)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()
