"""The installed ``voxline`` command, run as a user runs it, and what its errors must look like."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks.common import peak_rss_run
from tests.support.ci import ROOT

__all__ = ["EXAMPLE", "VOXLINE", "measured_run", "one_line_error", "voxline"]

EXAMPLE = ROOT / "examples" / "audio" / "barge_in.wav"
VOXLINE = Path(sys.executable).parent / "voxline"  # the installed command, as a user runs it


def voxline(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VOXLINE), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def one_line_error(run: subprocess.CompletedProcess[str]) -> str:
    """The one line a failed command printed on stderr (no traceback)."""
    assert run.returncode != 0, run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


def measured_run(*args: str, cwd: Path, env: dict[str, str] | None = None,
                 timeout: float = 300) -> tuple[subprocess.CompletedProcess[str], int, float]:
    """``voxline ARGS`` without ``VOXLINE_*`` or a key from this environment, with the peak resident set
    it reached (KiB) and the CPU seconds it used."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("VOXLINE_") and k != "OPENAI_API_KEY"}
    return peak_rss_run([str(VOXLINE), *args], cwd=cwd, env={**clean, **(env or {})}, timeout=timeout)
