"""``--processes P``: a farm's parts in worker processes that end with the command.

Each worker is a spawned process (never forked from a running loop) running
:func:`~.runner.run_part` on its share of the recordings (:func:`~.plan.deal`). Verdicts
come back one at a time, as each recording finishes, on the worker's own pipe (a queue shared by
all would hang them all on a lock one of them was killed holding), so the command can print
them as they come. A worker stops as the command does:

* the command, stopped by a signal, sends each worker SIGTERM; a worker ends its running
  replays where they are, reports them (``error``, interrupted) and exits; one still there
  after ``grace_s`` is killed;
* a worker whose parent is gone (killed outright, SIGKILL) stops itself the same way: a
  thread watches the parent's process id;
* a worker that dies (killed, out of memory) leaves the recordings it was running as ``error``,
  naming how it ended; those it had not started go to a new worker.

A worker killed (by the system, or here after ``grace_s``) may have been part way through a write
of an event log: once it is gone, the logs of the recordings it was running are cut back to their
last whole line.

So no worker writes into ``--out-dir`` after the command has exited.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

from ...eventlog import cut_to_whole_lines
from .layout import folder_of
from .manifest import FarmRecording
from .plan import deal
from .results import Outcome
from .runner import FarmOptions, OutcomeHook, complete, interrupted_outcome, run_part

__all__ = ["run_processes"]

_DONE, _STARTED, _OUTCOME = "done", "started", "outcome"  # what a worker sends on its pipe: (kind, what)


def _worker(recordings: list[dict[str, Any]], options: FarmOptions, out: Connection, parent: int) -> None:
    """One worker: its share, each start and verdict sent on its own pipe as it comes (a send is done before the
    replay goes on: a worker killed after a start was sent cannot have that recording run again elsewhere)."""
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="voxline-parent-watch").start()
    gone = threading.Event()

    def send(message: tuple[str, Any]) -> None:
        """To the parent; once its end of the pipe is gone (it was killed), the worker stops as on SIGTERM,
        without a word: nobody reads what it would say."""
        if gone.is_set():
            return
        try:
            out.send(message)
        except OSError:  # BrokenPipeError, ConnectionResetError
            gone.set()
            os.kill(os.getpid(), signal.SIGTERM)

    try:
        run_part(recordings, options, on_outcome=lambda o: send((_OUTCOME, o)), stoppable=True,
                 on_start=lambda name: send((_STARTED, name)))
    finally:
        send((_DONE, None))
        with contextlib.suppress(OSError):
            out.close()


def _watch_parent(parent: int, every_s: float = 0.25, grace_s: float = 10.0) -> None:
    """Stop this worker (as SIGTERM does) once its parent is gone; end it if that does not do."""
    while os.getppid() == parent:
        time.sleep(every_s)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os._exit(1)


@contextlib.contextmanager
def _as_a_worker_starts() -> Iterator[None]:
    """What a worker is started with, and keeps (an ignored signal stays ignored across exec):

    * the command's file descriptor 1 is its stderr while it starts, so the worker's is: the command's stdout
      may be a document (``--results -``), and what a worker or a tool module it imports prints (from its import
      on) must not land in it;
    * SIGINT ignored, until :func:`~.runner.run_part` installs its stop: Ctrl-C reaches the whole process group,
      and a worker still importing printed a ``KeyboardInterrupt`` traceback (the command stops its workers with
      SIGTERM)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: the worker starts with the handler it would have
        previous = None
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _tracker_outlives_a_hangup() -> None:
    """Start multiprocessing's resource tracker (a spawned worker is handed it) ignoring SIGHUP.

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
    """The recordings dealt over ``processes`` workers, each a :func:`run_part` with ``options.jobs``.

    A worker that dies (killed, out of memory, a tool calling ``os._exit``) costs only the recordings it was
    running: they are ``error``, naming how it ended; those it had not started go to a new worker. One that died
    running none leaves the rest of its share as errors too, so a worker that cannot start is not started for ever.
    """
    _tracker_outlives_a_hangup()
    context = multiprocessing.get_context("spawn")
    workers: list[Any] = []
    shares: list[list[FarmRecording]] = []
    started: list[set[str]] = []
    pipes: dict[int, Connection] = {}  # the pipes of the workers not yet ended, by worker
    finished: set[int] = set()  # workers that said they are done
    reported: set[str] = set()
    got: list[Outcome] = []

    def spawn(share: list[FarmRecording]) -> None:
        n = len(workers)
        reader, writer = context.Pipe(duplex=False)
        worker = context.Process(target=_worker, args=([r.model_dump(mode="json") for r in share], options, writer,
                                                       os.getpid()), name=f"voxline-farm-{n}", daemon=True)
        workers.append(worker)
        shares.append(share)
        started.append(set())
        with _as_a_worker_starts():
            worker.start()
        writer.close()  # the worker's own: its pipe ends (EOF) when the worker does
        pipes[n] = reader

    def mend_log(recording: FarmRecording) -> None:
        """The event log of a recording whose worker is gone, cut back to whole lines (it may have died mid-write)."""
        cut_to_whole_lines(options.out_dir / folder_of(recording) / "events.jsonl")

    def report(outcome: Outcome) -> None:
        reported.add(outcome.name)
        got.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)

    async def died(n: int) -> None:
        await asyncio.to_thread(workers[n].join, 5)  # its pipe ended: its exit status is there, or nearly
        how = _how_it_ended(workers[n].exitcode)
        running = [r for r in shares[n] if r.name in started[n] and r.name not in reported]
        waiting = [r for r in shares[n] if r.name not in started[n] and r.name not in reported]
        for r in running:
            mend_log(r)
            report(interrupted_outcome(r, f"its worker process {how} while it ran (what ran is in its folder)",
                                       options.out_dir))
        if waiting and running:
            spawn(waiting)
        else:
            for r in waiting:
                report(interrupted_outcome(r, f"its worker process {how} before it started", options.out_dir))

    async def read(n: int) -> None:
        """One message of worker ``n``, or the end of its pipe."""
        try:
            kind, what = pipes[n].recv()
        except Exception:  # EOF: the worker ended (a message cut short by a kill ends it too)
            pipes.pop(n).close()
            if n not in finished and signalled_at is None:
                await died(n)  # every message it sent was read before its pipe ended
            return
        if kind == _DONE:
            finished.add(n)
        elif kind == _STARTED:
            started[n].add(what)
        else:
            report(Outcome.from_json(what))

    signalled_at: float | None = None
    try:
        for part in deal(recordings, processes):
            spawn(part)
        while pipes:
            if stop is not None and stop.is_set() and signalled_at is None:
                signalled_at = time.monotonic()
                for worker in workers:
                    if worker.is_alive():
                        worker.terminate()  # SIGTERM: the worker reports what it has and exits
            if signalled_at is not None and time.monotonic() - signalled_at > grace_s:
                break  # what they did not report is an error below
            ready = await asyncio.to_thread(wait, list(pipes.values()), 0.2)
            for n in [n for n, pipe in pipes.items() if pipe in ready]:
                await read(n)
    finally:
        for pipe in pipes.values():
            pipe.close()
        for worker in workers:
            worker.join(timeout=5 if worker.is_alive() else None)
            if worker.is_alive():
                worker.kill()
                worker.join()
        for share, names in zip(shares, started):  # those a worker killed here was running: it may have been mid-write
            for r in share:
                if r.name in names and r.name not in reported:
                    mend_log(r)
    why = ("interrupted before its worker reported it (it may not have started)" if stop is not None and stop.is_set()
           else "its worker process ended without a verdict")
    return complete(recordings, got, why, options.out_dir)


def _how_it_ended(code: int | None) -> str:
    """``was killed by SIGKILL``, ``exited with status 3``: a dead worker's end, for its recordings' errors."""
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"
