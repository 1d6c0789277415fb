"""The files a run replaces, set aside until it began: a run that fails before it began leaves the last one's.

Files written as a run goes (a WAV of what was heard, an event log: each valid at every moment, so
a killed run leaves what it had) cannot wait for the end, as a file written whole (:func:`voxline.base.files.replaced`)
can. :class:`SetAside` moves the files they replace out of the way while the run starts and puts them back if it
never began (a server that cannot be reached), so a failed run does not leave empty files where a good one's
results were.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import secrets
import stat
import tempfile
from pathlib import Path

from .files import under_dev_or_proc

__all__ = ["SetAside"]


def _put_back_leftovers(path: Path) -> None:
    """The file a killed run set aside from ``path`` (``.NAME.XXXXXXXX.previous``, the name :class:`SetAside` gives
    it and no other output's), back at ``path``. Of several (runs killed one after another, each setting aside the
    last one's empty start), the oldest is the last result. One that is the file at ``path`` itself (a second name a
    run killed just after it made it left) only goes."""
    own = re.compile(re.escape(f".{path.name}.") + r"[a-z0-9_]{8}" + re.escape(".previous"))
    with contextlib.suppress(OSError):
        leftovers = sorted((p for p in path.parent.glob(f".{glob.escape(path.name)}.*.previous")
                            if own.fullmatch(p.name) and p.is_file() and not p.is_symlink()),
                           key=lambda p: p.stat().st_mtime)
        if leftovers:
            if os.path.lexists(path) and os.path.samefile(leftovers[0], path):  # killed once it linked: still in place
                leftovers[0].unlink()
            else:
                os.replace(leftovers[0], path)
            for stub in leftovers[1:]:
                stub.unlink()


def _linked_aside(path: Path) -> Path | None:
    """A second name for ``path``'s file beside it (``.NAME.XXXXXXXX.previous``, a hard link): made in one step, so a
    process killed at any moment leaves the old content under that name whole, or no such name at all. None where
    the folder or the file system takes no link (or no new name)."""
    for _attempt in range(100):
        old = path.parent / f".{path.name}.{secrets.token_hex(4)}.previous"
        try:
            os.link(path, old, follow_symlinks=False)
        except FileExistsError:
            continue
        except OSError:
            return None
        return old
    return None


class SetAside:
    """The files at ``paths`` moved aside (hidden, beside them) until :meth:`keep_new` or
    :meth:`put_back` says which stays.

    Each file moved aside is replaced at once by an empty one with its mode and owner, so the new
    content written there meanwhile is as private as the old was. :meth:`keep_new` (the run began:
    call it as often as convenient, the first call counts) deletes the old ones; :meth:`put_back`
    (the run failed before it began) renames each old file over the new one and removes a new file
    where there was none, and does nothing once :meth:`keep_new` was called. A symbolic link is followed (the file it names is set aside, the
    link stays). A path that is missing, no regular file, not writable (its writer then fails as it
    would have), or in a folder where it cannot be moved, is left to be written in place. The old file
    gets its hidden name as a hard link, in one step, before it leaves its own (where the file system
    takes no links, by a rename onto a name taken first), so a process killed at any moment leaves
    it whole under one name or the other. A process
    killed before either leaves the old file as ``.NAME.….previous`` beside the new one; the next
    run that sets the path aside first puts that file back (a run killed before it began made only
    the file there now), so the last run's result is the one set aside, and no leftovers pile up.
    """

    def __init__(self, paths: list[Path]) -> None:
        self._aside: list[tuple[Path, Path]] = []
        self._missing: list[Path] = []  # no file there yet: what the run writes there goes again on put_back()
        self.kept = False
        try:
            for path in paths:
                self._set_aside(Path(os.path.realpath(path)) if path.is_symlink() else path)
        except BaseException:
            self.put_back()
            raise

    def _set_aside(self, path: Path) -> None:
        if under_dev_or_proc(path):
            return
        _put_back_leftovers(path)  # a killed run's, even where it left no file (killed between its two steps)
        if not os.path.lexists(path):
            self._missing.append(path)
            return
        if not path.is_file() or path.is_symlink() or not os.access(path, os.W_OK):
            return
        status = path.stat()
        old = _linked_aside(path)
        if old is None:  # no hard links here: a name taken first, then the file renamed onto it
            try:
                handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".previous")
            except OSError:  # a folder that takes no new file: written in place, as without this
                return
            os.close(handle)
            old = Path(name)
            try:
                os.replace(path, old)
            except OSError:  # e.g. a sticky folder and another owner's file: written in place
                with contextlib.suppress(OSError):
                    old.unlink()
                return
        else:
            try:
                path.unlink()
            except OSError:
                with contextlib.suppress(OSError):
                    old.unlink()
                return
        self._aside.append((path, old))
        fresh = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.fchmod(fresh, stat.S_IMODE(status.st_mode))
            with contextlib.suppress(OSError):  # another owner's file, rewritten by root: it stays theirs
                os.fchown(fresh, status.st_uid, status.st_gid)
        finally:
            os.close(fresh)

    def keep_new(self) -> None:
        if self.kept:
            return
        self.kept = True
        for _path, old in self._aside:
            with contextlib.suppress(OSError):
                old.unlink()
        self._aside.clear()
        self._missing.clear()

    def put_back(self) -> None:
        if self.kept:
            return
        for path, old in self._aside:
            with contextlib.suppress(OSError):
                os.replace(old, path)
        for path in self._missing:  # the run's empty start of a file that was not there: no stub stays
            if path.is_file() and not path.is_symlink():
                with contextlib.suppress(OSError):
                    path.unlink()
        self._aside.clear()
        self._missing.clear()
