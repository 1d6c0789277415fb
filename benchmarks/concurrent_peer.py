"""The nearest peer in the concurrent benchmark: N openai-agents sessions, in the client's own environment.

:mod:`benchmarks.peers.openai_agents_sessions` runs in the virtual environment that
``.ci/install-clients openai_agents`` builds (openai-agents' pins clash with voxline's), against a
fresh ``voxline serve`` of the same workload, for as long as voxline's sessions lasted; its CPU
per session-second is set beside voxline's and the bare receivers' measured in the same run.
Without that environment the peer is left out, and the benchmark says which command builds it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.support.real_clients import venv_root

__all__ = ["PEER", "peer_python", "run_peer"]

PEER = "openai_agents"
_SCRIPT = Path(__file__).resolve().parent / "peers" / "openai_agents_sessions.py"


def peer_python() -> Path | None:
    """The peer environment's interpreter, or None when it was not built."""
    python = venv_root() / PEER / "bin" / "python"
    return python if python.exists() else None


def run_peer(python: Path, n: int, url: str, recording: Path, run_s: float) -> dict[str, Any]:
    """``n`` openai-agents sessions for ``run_s`` seconds each against ``url``; their figures."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}  # no key of the user's, no tracing
    run = subprocess.run([str(python), str(_SCRIPT), "--url", url, "--audio", str(recording), "--sessions", str(n),
                          "--run-s", f"{run_s:.3f}"], capture_output=True, text=True, env=env,
                         timeout=run_s + 120)
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the openai-agents sessions failed (exit {run.returncode}): {last}")
    figures: dict[str, Any] = json.loads(run.stdout)
    return figures
