"""ALSA's own messages, moved from the terminal to voxline's log.

On Linux, PortAudio reaches the sound server through ALSA, and ``libasound`` prints what it
recovers from by itself (``ALSA lib pcm.c:8570:(snd_pcm_recover) underrun occurred``) straight
to the process's stderr. Those lines come between voxline's own, break the one-line error a
command promises, and tell the user nothing they can act on: voxline counts underruns itself,
and a device that cannot be opened is PortAudio's error, which voxline reports.

:func:`route_alsa_messages` installs an ALSA error handler that logs where each message came
from at DEBUG on ``voxline.audio`` instead (``-vv`` shows them). The message text itself is a
C format with variable arguments, which a handler written in Python cannot expand; its source
position names it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading

__all__ = ["route_alsa_messages"]

log = logging.getLogger("voxline.audio")

# void handler(const char *file, int line, const char *function, int err, const char *fmt, ...)
_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p)
_lock = threading.Lock()
_installed: list[object] = []  # the handler, kept alive for as long as libasound may call it


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", "replace") if value else "?"


def _on_message(file: bytes | None, line: int, function: bytes | None, err: int, fmt: bytes | None) -> None:
    try:
        log.debug("ALSA: %s:%d (%s) error %d: %s", _text(file), line, _text(function), err, _text(fmt))
    except Exception:  # a C callback must not raise
        pass


def route_alsa_messages() -> bool:
    """Send libasound's messages to the log instead of stderr; True once installed (False where
    there is no libasound). Safe to call more than once."""
    with _lock:
        if _installed:
            return True
        name = ctypes.util.find_library("asound")
        if name is None:
            return False
        try:
            lib = ctypes.CDLL(name)
            handler = _HANDLER(_on_message)
            lib.snd_lib_error_set_handler.argtypes = [_HANDLER]
            lib.snd_lib_error_set_handler(handler)
        except (OSError, AttributeError):
            return False
        _installed.append(handler)
        return True
