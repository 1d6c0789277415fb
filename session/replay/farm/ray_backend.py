"""``--ray [ADDRESS]``: a farm's parts as Ray tasks, on a cluster or a local Ray instance.

Each task is :func:`~.runner.run_part`, the body of a ``--processes`` worker: one process
with its own event loop running its recordings ``jobs`` at a time. Recordings go out and
verdicts come back as plain dicts; the heard audio and event logs are written by the task
under the farm's ``--out-dir``, so on a cluster that directory must be a filesystem every
node shares (the verdicts reach the driver either way). Workers import voxline, so the
cluster's nodes need it installed (the same image as the driver).

Ray is optional (``pip install 'voxline[ray]'``). A Ray already initialised in this process
is used as it is and left running; otherwise this starts or joins one (``ADDRESS``, else
``RAY_ADDRESS``, else a local instance on loopback) and shuts it down at the end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from voxline.base.shown import clip
from voxline.realtime.errors import ConfigurationError

from .manifest import FarmRecording
from .plan import deal
from .results import Outcome
from .runner import FarmOptions, OutcomeHook, complete, interrupted_outcome, run_part

__all__ = ["check_ray", "import_ray", "run_ray"]

INSTALL = "pip install 'voxline[ray]' (in a clone: uv run --no-dev --extra ray voxline …)"


def import_ray() -> ModuleType:
    """The ``ray`` module, or one line saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigurationError(f"--ray needs Ray, which is not installed: {INSTALL}") from None
    return ray


def check_ray(address: str | None) -> None:
    """Before anything starts: Ray is installed, and a cluster named by ``HOST:PORT`` answers."""
    import_ray()
    target = address or os.environ.get("RAY_ADDRESS")
    if target:
        _check_reachable(target, f"the Ray cluster at {target}")


def run_ray(recordings: list[FarmRecording], options: FarmOptions, tasks: int, address: str | None,
            stopped: Callable[[], bool] = lambda: False, on_outcome: OutcomeHook | None = None,
            grace_s: float = 20.0) -> list[Outcome]:
    """``recordings`` dealt over ``tasks`` Ray tasks (one CPU each); outcomes in the recordings' order.

    Each task's verdicts reach ``on_outcome`` as that task ends. Once ``stopped()`` says so (the
    command got a stop signal), each task still running is stopped as a ``--processes`` worker is
    by SIGTERM: it ends its replays where they are, closes their files and reports them
    (``error``, interrupted). A task still running ``grace_s`` later is cancelled with its worker
    process (so none writes into ``--out-dir`` after the command), and its recordings are
    ``error`` outcomes too."""
    ray = import_ray()
    owned = not ray.is_initialized()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    if owned:
        _init(ray, address)
        for sig, handler in handlers.items():  # Ray's init puts in a SIGTERM handler that exits: the command's back
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    got: list[Outcome] = []
    pending: list[Any] = []
    try:
        part_task = ray.remote(num_cpus=1, max_retries=0)(run_part)
        parts = {part_task.remote([r.model_dump(mode="json") for r in part], options, stoppable=True): part
                 for part in deal(recordings, tasks)}
        pending = list(parts)

        def collect(until: Callable[[], bool]) -> None:
            nonlocal pending
            while pending:
                ready, pending = ray.wait(pending, num_returns=len(pending), timeout=0.2)  # those done by then
                for ref in ready:
                    try:
                        rows = [Outcome.from_json(row) for row in ray.get(ref)]
                    except ray.exceptions.RayError as exc:  # its worker died, or it was cancelled before it began
                        why = ("interrupted before its task reported it (it may not have begun)" if stopped()
                               else f"its Ray task failed: {clip(str(exc), 300, flat=True)}")
                        rows = [interrupted_outcome(r, why, options.out_dir) for r in parts[ref]]
                    for outcome in rows:
                        got.append(outcome)
                        if on_outcome is not None:
                            on_outcome(outcome)
                if until():
                    return

        collect(stopped)
        for ref in pending:
            ray.cancel(ref, force=False)  # SIGINT in the task, its stop: its replays end and it reports them
        deadline = time.monotonic() + grace_s
        collect(lambda: time.monotonic() > deadline)
    finally:  # past the grace, or a second signal that gives up waiting (KeyboardInterrupt)
        for ref in pending:
            with contextlib.suppress(Exception):  # one that cannot be cancelled keeps neither the others nor the error
                ray.cancel(ref, force=True)  # ends the task's worker process: none writes on after the command
        if owned:
            ray.shutdown()
    return complete(recordings, got, f"interrupted: its task did not report within {grace_s:g} s of the stop "
                    "(what ran is in its folder)", options.out_dir)


def _init(ray: ModuleType, address: str | None) -> None:
    local = address is None and not os.environ.get("RAY_ADDRESS")
    where = "a local Ray instance" if local else f"the Ray cluster at {address or os.environ['RAY_ADDRESS']}"
    extra = {"_node_ip_address": "127.0.0.1", "include_dashboard": False} if local else {}
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, **extra)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        ray.shutdown()
        raise ConfigurationError(f"--ray: cannot start or reach {where}: {' '.join(str(exc).split())}") from None


def _check_reachable(address: str, where: str) -> None:
    """A ``HOST:PORT`` (or ``ray://HOST:PORT``) nobody answers on is one line now, not minutes of Ray's retries."""
    match = re.fullmatch(r"(?:ray://)?\[?([^\]/]+?)\]?:(\d+)", address.strip())
    if match is None:
        return  # "auto" and other forms: Ray resolves them
    try:
        socket.create_connection((match[1], int(match[2])), timeout=5).close()
    except OSError as exc:
        raise ConfigurationError(f"--ray: cannot reach {where}: {exc.strerror or exc}") from None
