"""libasound's own messages (``ALSA lib pcm.c:…(snd_pcm_recover) underrun occurred``) go to
voxline's log once the sound devices are loaded, not between a command's lines on stderr.

Each case runs in a process of its own (the handler is process-wide): it opens a PCM that does
not exist, which makes libasound report it through its error handler.
"""

from __future__ import annotations

import ctypes.util
import subprocess
import sys

import pytest

from tests.support.ci import IN_CI, INSTALL_HINT

PROBE = """
import ctypes, ctypes.util, logging, sys
logging.basicConfig(level=logging.DEBUG if "log" in sys.argv else logging.WARNING, stream=sys.stdout,
                    format="%(name)s %(message)s")
if "voxline" in sys.argv:
    from voxline.audio.device_list import load_sounddevice
    load_sounddevice()
lib = ctypes.CDLL(ctypes.util.find_library("asound"))
pcm = ctypes.c_void_p()
assert lib.snd_pcm_open(ctypes.byref(pcm), b"voxline_no_such_pcm", 0, 0) < 0
"""


def _probe(*args: str) -> subprocess.CompletedProcess[str]:
    if ctypes.util.find_library("asound") is None:
        if IN_CI:
            pytest.fail("libasound is required in CI but is not installed")
        pytest.skip(f"libasound is not installed ({INSTALL_HINT})")
    return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)


def test_without_voxline_libasound_prints_on_stderr() -> None:
    result = _probe()
    assert result.returncode == 0, result.stderr
    assert "voxline_no_such_pcm" in result.stderr  # what the handler below takes off the terminal


def test_with_the_devices_loaded_nothing_reaches_stderr_and_the_log_has_it() -> None:
    quiet = _probe("voxline")
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == "", quiet.stderr
    logged = _probe("voxline", "log")
    assert logged.returncode == 0 and logged.stderr == "", logged.stderr
    line = next(line for line in logged.stdout.splitlines() if line.startswith("voxline.audio ALSA:"))
    assert "pcm.c" in line and "snd_pcm_open" in line, line
