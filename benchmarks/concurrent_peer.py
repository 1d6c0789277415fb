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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.real_clients import venv_root

__all__ = ["PEER", "peer_python", "run_peer", "run_peer_on_signal"]

PEER = "openai_agents"
_SCRIPT = Path(__file__).resolve().parent / "peers" / "openai_agents_sessions.py"


def peer_python() -> Path | None:
    """The peer environment's interpreter, or None when it was not built."""
    python = venv_root() / PEER / "bin" / "python"
    return python if python.exists() else None


def _command(python: Path, n: int, url: str, recording: Path, run_s: float) -> list[str]:
    return [str(python), str(_SCRIPT), "--url", url, "--audio", str(recording), "--sessions", str(n),
            "--run-s", f"{run_s:.3f}"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}  # no key of the user's, no tracing


def _figures(returncode: int, stdout: str, stderr: str) -> dict[str, Any]:
    if returncode != 0:
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the openai-agents sessions failed (exit {returncode}): {last}")
    figures: dict[str, Any] = json.loads(stdout)
    return figures


def run_peer(python: Path, n: int, url: str, recording: Path, run_s: float) -> dict[str, Any]:
    """``n`` openai-agents sessions for ``run_s`` seconds each against ``url``; their figures."""
    run = subprocess.run(_command(python, n, url, recording, run_s), capture_output=True, text=True, env=_env(),
                         timeout=run_s + 120)
    return _figures(run.returncode, run.stdout, run.stderr)


def run_peer_on_signal(python: Path, n: int, url: str, recording: Path, run_s: float,
                       ready: Callable[[], None], go: Callable[[], None]) -> dict[str, Any]:
    """:func:`run_peer`, whose sessions start only once it is set up: ``ready()`` is called then, and the sessions
    start when ``go()`` returns."""
    with subprocess.Popen([*_command(python, n, url, recording, run_s), "--wait-for-start"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()) as peer:
        assert peer.stdin is not None and peer.stderr is not None
        said: list[str] = []
        try:
            for line in peer.stderr:  # what it says until it is ready (warnings), or why it ended
                if line.strip() == "ready":
                    ready()
                    go()
                    peer.stdin.write("go\n")
                    peer.stdin.flush()
                    break
                said.append(line)
            stdout, stderr = peer.communicate(timeout=run_s + 120)
        except BaseException:
            peer.kill()
            raise
    return _figures(peer.returncode, stdout, "".join(said) + stderr)
