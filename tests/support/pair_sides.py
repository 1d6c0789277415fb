"""Sides for a pair run at once (:mod:`benchmarks.concurrent_at_once`) that go wrong in known ways.

They run in ``spawn`` processes, so they live in an importable module, each taking the pair's
``(ready, go, out)`` after its own arguments.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from multiprocessing.synchronize import Event
from typing import Any

from benchmarks.concurrent_at_once import READY_S, report_failure

__all__ = ["ends_without_a_word", "fails_after_the_start", "fails_before_ready", "never_ready", "reports_after_the_start",
           "runs_long_after_the_start"]


def fails_before_ready(name: str, ready: multiprocessing.Queue[Any], go: Event, out: multiprocessing.Queue[Any]) -> None:
    try:
        raise OSError("the server refused this side")
    except OSError:
        report_failure(name, ready, False, out)


def ends_without_a_word(name: str, ready: multiprocessing.Queue[Any], go: Event, out: multiprocessing.Queue[Any]) -> None:
    ready.put((name, True))
    go.wait(READY_S)
    os._exit(3)  # as a crash would: no report, no clean-up


def reports_after_the_start(name: str, ready: multiprocessing.Queue[Any], go: Event,
                            out: multiprocessing.Queue[Any]) -> None:
    ready.put((name, True))
    if go.wait(READY_S):
        out.put((name, {"started": True}))


def never_ready(name: str, ready: multiprocessing.Queue[Any], go: Event, out: multiprocessing.Queue[Any]) -> None:
    time.sleep(600)  # stuck in its set-up


def fails_after_the_start(name: str, ready: multiprocessing.Queue[Any], go: Event,
                          out: multiprocessing.Queue[Any]) -> None:
    ready.put((name, True))
    try:
        if go.wait(READY_S):
            raise ConnectionResetError("the server went away mid-run")
    except ConnectionResetError:
        report_failure(name, ready, True, out)


def runs_long_after_the_start(name: str, ready: multiprocessing.Queue[Any], go: Event,
                              out: multiprocessing.Queue[Any]) -> None:
    ready.put((name, True))
    if go.wait(READY_S):
        time.sleep(600)
        out.put((name, {"started": True}))
