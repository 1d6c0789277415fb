"""``--processes P``: a farm's parts in worker processes that end with the command.

Each worker is a spawned process (never forked from a running loop) running
:func:`~.runner.run_part` on its share of the recordings (:func:`~.plan.deal`). Verdicts
come back one at a time, as each recording finishes, on a queue, so the command can print
them as they come. A worker stops as the command does:

* the command, stopped by a signal, sends each worker SIGTERM; a worker ends its running
  replays where they are, reports them (``error``, interrupted) and exits; one still there
  after ``grace_s`` is killed;
* a worker whose parent is gone (killed outright, SIGKILL) stops itself the same way: a
  thread watches the parent's process id;
* a worker that dies without a word leaves its unreported recordings as ``error``.

So no worker writes into ``--out-dir`` after the command has exited.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import queue as queues
import signal
import threading
import time
from typing import Any

from .manifest import FarmRecording
from .plan import deal
from .results import Outcome
from .runner import FarmOptions, OutcomeHook, complete, run_part

__all__ = ["run_processes"]

_DONE = "done"


def _worker(recordings: list[dict[str, Any]], options: FarmOptions, out: Any, parent: int) -> None:
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="voxline-parent-watch").start()
    try:
        run_part(recordings, options, on_outcome=out.put, stoppable=True)
    finally:
        out.put(_DONE)


def _watch_parent(parent: int, every_s: float = 0.25, grace_s: float = 10.0) -> None:
    """Stop this worker (as SIGTERM does) once its parent is gone; end it if that does not do."""
    while os.getppid() == parent:
        time.sleep(every_s)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os._exit(1)


def _tracker_outlives_a_hangup() -> None:
    """Start multiprocessing's resource tracker (it tracks the queue's semaphores) ignoring SIGHUP.

    It ignores SIGINT and SIGTERM by itself, not SIGHUP: a closed terminal (or ``timeout -s HUP``)
    signals the whole process group, and a tracker killed so prints a traceback for every
    semaphore the workers then let go. Started here with SIGHUP ignored, it keeps that (an
    ignored signal stays ignored across exec); it still ends when the command does."""
    from multiprocessing import resource_tracker

    try:
        previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    except ValueError:  # not the main thread: it cannot set handlers, and starts the tracker as it is
        resource_tracker.ensure_running()
        return
    try:
        resource_tracker.ensure_running()
    finally:
        signal.signal(signal.SIGHUP, previous)


async def run_processes(recordings: list[FarmRecording], options: FarmOptions, processes: int,
                        stop: asyncio.Event | None = None, on_outcome: OutcomeHook | None = None,
                        grace_s: float = 20.0) -> list[Outcome]:
    """The recordings dealt over ``processes`` workers, each a :func:`run_part` with ``options.jobs``."""
    parts = deal(recordings, processes)
    _tracker_outlives_a_hangup()
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    workers = [context.Process(target=_worker, args=([r.model_dump(mode="json") for r in part], options, out,
                                                     os.getpid()), name=f"voxline-farm-{n}", daemon=True)
               for n, part in enumerate(parts)]
    got: list[Outcome] = []
    signalled_at: float | None = None
    try:
        for worker in workers:
            worker.start()
        finished = 0
        while finished < len(workers):
            if stop is not None and stop.is_set() and signalled_at is None:
                signalled_at = time.monotonic()
                for worker in workers:
                    if worker.is_alive():
                        worker.terminate()  # SIGTERM: the worker reports what it has and exits
            try:
                item = await asyncio.to_thread(out.get, True, 0.2)
            except queues.Empty:
                if not any(w.is_alive() for w in workers):
                    break  # died without a word: what they did not report is an error below
                if signalled_at is not None and time.monotonic() - signalled_at > grace_s:
                    break
                continue
            if item == _DONE:
                finished += 1
                continue
            outcome = Outcome.from_json(item)
            got.append(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
    finally:
        for worker in workers:
            worker.join(timeout=5 if worker.is_alive() else None)
            if worker.is_alive():
                worker.kill()
                worker.join()
        out.close()
    why = ("interrupted before its worker reported it (it may not have started)" if stop is not None and stop.is_set()
           else "its worker process ended without a verdict")
    return complete(recordings, got, why)
