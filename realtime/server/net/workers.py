"""``voxline serve --workers N``: N server processes listening on one port (``SO_REUSEPORT``).

The supervisor reserves the port (a bound, non-listening ``SO_REUSEPORT`` socket, so
``--port 0`` picks one free port for all), starts N worker processes that each run
the ordinary server on it with ``reuse_port``, waits until every one listens, prints
one line, and then waits. The kernel spreads new connections over the workers.

Each worker is a whole server with its own memory: an ephemeral key minted by one
worker, or a WebRTC call created on one, is unknown to the others. Clients that mint
keys or create calls need a single worker (the default).

If a worker ends, the supervisor stops the others and exits with its status; when
the supervisor is cancelled or terminated it stops every worker it started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import signal
import socket
import sys
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

from voxline.base.log_output import log_to_stderr
from voxline.base.loop_runner import bounded_runner
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server.net.app import serve
from voxline.realtime.server.net.config import ServerConfig

__all__ = ["MAX_WORKERS", "reserve_port", "stop_grace_s", "supervise"]

MAX_WORKERS = 64
_STOP_TIMEOUT_S = 5.0  # a worker that has not started listening, or that ended, to be joined
_STOP_MARGIN_S = 1.0  # past the longest close a stopped worker makes, for its process to end


def stop_grace_s(config: ServerConfig) -> float:
    """How long stopped workers get to end before they are killed: a worker's stop closes its sessions as one
    server does, each first flushing its last events and then closing, both bounded by ``close_timeout_s``."""
    return 2 * config.close_timeout_s + _STOP_MARGIN_S


def reserve_port(host: str, port: int) -> socket.socket:
    """A bound (not listening) ``SO_REUSEPORT`` socket holding ``host:port`` for the workers."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host.strip("[]"), port))
    except BaseException:
        sock.close()
        raise
    return sock


async def supervise(args: argparse.Namespace, config: ServerConfig, workers: int) -> int:
    """Run ``workers`` server processes on ``config``'s port until one ends or this is cancelled."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise ConfigurationError("--workers needs SO_REUSEPORT, which this system does not have")
    holder = reserve_port(config.host, config.port)
    port = int(holder.getsockname()[1])
    context = multiprocessing.get_context("spawn")
    started: list[tuple[Any, Connection]] = []
    loop = asyncio.get_running_loop()
    try:  # cancelled (the command's stop signal), the finally stops the workers
        for index in range(workers):
            receiver, sender = context.Pipe(duplex=False)
            process = context.Process(
                target=_worker, args=(args, port, sender), name=f"voxline-serve-{index + 1}", daemon=True
            )
            process.start()
            sender.close()
            started.append((process, receiver))
        what = ""
        for process, receiver in started:
            message = await _message(loop, process, receiver)
            if message[0] != "ready":
                print(f"voxline serve: worker {process.name} failed: {message[1]}", file=sys.stderr)
                return int(message[2]) if len(message) > 2 else 1
            what = message[2]  # every worker serves the same configuration
        pids = ", ".join(str(p.pid) for p, _r in started)
        host = f"[{config.host}]" if ":" in config.host else config.host
        print(f"voxline local server at ws://{host}:{port}/v1/realtime — {workers} worker processes share the port "
              f"(pids {pids}), each {what} Ephemeral keys and WebRTC calls are per worker.", flush=True)
        ended = await _first_exit(loop, [p for p, _r in started])
        code = ended.exitcode if ended.exitcode is not None else 1
        print(f"voxline serve: worker {ended.name} (pid {ended.pid}) ended with status {code}", file=sys.stderr)
        return code if code > 0 else 1
    finally:
        _stop(started, stop_grace_s(config))
        holder.close()


async def _message(loop: asyncio.AbstractEventLoop, process: Any, receiver: Connection) -> tuple[Any, ...]:
    """The worker's first message, or a failure if it exits without one."""
    readable: asyncio.Future[None] = loop.create_future()

    def done() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(receiver.fileno(), done)
    loop.add_reader(process.sentinel, done)
    try:
        await readable
    finally:
        loop.remove_reader(receiver.fileno())
        loop.remove_reader(process.sentinel)
    if receiver.poll():
        with contextlib.suppress(EOFError):
            return tuple(receiver.recv())
    process.join(_STOP_TIMEOUT_S)
    code = process.exitcode
    if code is not None and code < 0:  # a signal: the supervisor's own status stays 1, as for any failure
        return ("exited", f"it was ended by {_signal_name(-code)} before listening", 1)
    return ("exited", f"it exited with status {code} before listening", code if code else 1)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


async def _first_exit(loop: asyncio.AbstractEventLoop, processes: list[Any]) -> Any:
    ended: asyncio.Future[Any] = loop.create_future()

    def exited(process: Any) -> None:
        if not ended.done():
            ended.set_result(process)

    for process in processes:
        loop.add_reader(process.sentinel, exited, process)
    try:
        process = await ended
    finally:
        for p in processes:
            loop.remove_reader(p.sentinel)
    process.join(_STOP_TIMEOUT_S)
    return process


def _stop(started: list[tuple[Any, Connection]], grace_s: float) -> None:
    """Terminate every worker, give them all one ``grace_s`` together (:func:`stop_grace_s`), then kill what is
    left; a second stop (Ctrl-C again) during the grace kills them at once."""
    try:
        for process, _receiver in started:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + grace_s
        for process, _receiver in started:
            process.join(max(0.0, deadline - time.monotonic()))
    finally:
        for process, receiver in started:
            if process.is_alive():
                process.kill()
                process.join(_STOP_TIMEOUT_S)
            receiver.close()


def _worker(args: argparse.Namespace, port: int, ready: Connection) -> None:
    """One worker process: the ordinary server on the shared port."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor stops its workers; Ctrl-C goes to it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # until the loop runs; then _serve closes in order
    if (level := getattr(args, "resolved_log_level", None)) is not None:  # as the command set up its own
        log_to_stderr(level)
    from voxline.realtime.server.net.cli import config_from_args

    try:
        config = replace(config_from_args(args), port=port, reuse_port=True)
        with bounded_runner(None) as runner:  # on the loop the command runs on
            runner.run(_serve(config, ready))
    except (ConfigurationError, OSError) as exc:
        with contextlib.suppress(OSError):
            ready.send(("error", str(exc), 2 if isinstance(exc, ConfigurationError) else 1))
        sys.exit(2 if isinstance(exc, ConfigurationError) else 1)


async def _serve(config: ServerConfig, ready: Connection) -> None:
    """Serve until the supervisor's SIGTERM, then close as one server does: every open session
    gets a 1001 close and its handler finishes, rather than the process ending mid-step."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    from voxline.realtime.server.net.cli import described

    async with serve(config) as server:
        ready.send(("ready", os.getpid(), described(server)))
        ready.close()
        forever = asyncio.ensure_future(server.serve_forever())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({forever, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (forever, stopped):
                task.cancel()
            await asyncio.wait({forever, stopped})
        if not forever.cancelled():
            forever.result()  # the server's own failure, as the worker's exit status
