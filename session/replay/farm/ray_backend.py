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

import logging
import os
import re
import signal
import socket
from collections.abc import Callable
from types import ModuleType

from voxline.realtime.errors import ConfigurationError

from .manifest import FarmRecording
from .plan import deal
from .results import Outcome
from .runner import FarmOptions, OutcomeHook, complete, run_part

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
            stopped: Callable[[], bool] = lambda: False, on_outcome: OutcomeHook | None = None) -> list[Outcome]:
    """``recordings`` dealt over ``tasks`` Ray tasks (one CPU each); outcomes in the recordings' order.

    Each task's verdicts reach ``on_outcome`` as that task ends. Once ``stopped()`` says so (the
    command got a stop signal), the tasks still running are cancelled with their worker
    processes (so none writes into ``--out-dir`` after the command) and their recordings are
    ``error`` outcomes, interrupted."""
    ray = import_ray()
    owned = not ray.is_initialized()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    if owned:
        _init(ray, address)
        for sig, handler in handlers.items():  # Ray's init puts in a SIGTERM handler that exits: the command's back
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    got: list[Outcome] = []
    try:
        part_task = ray.remote(num_cpus=1, max_retries=0)(run_part)
        pending = [part_task.remote([r.model_dump(mode="json") for r in part], options)
                   for part in deal(recordings, tasks)]
        while pending and not stopped():
            ready, pending = ray.wait(pending, num_returns=1, timeout=0.2)
            for ref in ready:
                for row in ray.get(ref):
                    got.append(Outcome.from_json(row))
                    if on_outcome is not None:
                        on_outcome(got[-1])
        for ref in pending:
            ray.cancel(ref, force=True)  # ends the task's worker process
    finally:
        if owned:
            ray.shutdown()
    return complete(recordings, got, "interrupted before its task reported it (it may not have started)",
                    options.out_dir)


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
