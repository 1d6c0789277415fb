"""``voxline serve --workers N``: several processes on one port, all started and stopped together."""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import websockets

from voxline.realtime.server import add_serve_arguments
from voxline.realtime.server.net import workers

pytestmark = pytest.mark.slow  # starts the server's worker processes

VOXLINE = Path(sys.executable).parent / "voxline"
BANNER = re.compile(r"ws://127\.0\.0\.1:(\d+)/v1/realtime — (\d+) worker processes share the port \(pids ([\d, ]+)\)")


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("value", ["0", "65", "two"])
def test_workers_must_be_a_small_positive_number(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--workers", value)
    assert "expected a number of processes 1..64" in capsys.readouterr().err
    assert parse().workers == 1 and parse("--workers", "3").workers == 3


BANNERS: list[str] = []  # what each start printed, newest last


def start(workers: int) -> tuple[subprocess.Popen[str], int, list[int]]:
    process = subprocess.Popen([str(VOXLINE), "serve", "--workers", str(workers), "--port", "0", "--voice", "tone",
                                "--log-level", "warning"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()  # the supervisor prints once every worker listens
    BANNERS.append(line)
    match = BANNER.search(line)
    if match is None:
        process.kill()
        raise AssertionError(f"no banner: {line!r} {process.communicate(timeout=10)}")
    pids = [int(p) for p in match.group(3).split(",")]
    assert int(match.group(2)) == workers == len(pids)
    return process, int(match.group(1)), pids


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")


def served_by(pid: int, port: int) -> int:
    """Established connections to ``port`` whose socket ``pid`` holds (from /proc)."""
    inodes = set()
    for name in ("tcp", "tcp6"):
        for row in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            fields = row.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                inodes.add(fields[9])
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        held += target.startswith("socket:[") and target[8:-1] in inodes
    return held


async def open_sessions(port: int, n: int) -> list[websockets.ClientConnection]:
    """``n`` sessions on the workers' port, each past its ``session.created``."""
    sockets = [await websockets.connect(f"ws://127.0.0.1:{port}/v1/realtime?model=gpt-realtime",
                                        additional_headers={"Authorization": "Bearer sk-local"})
               for _ in range(n)]
    for ws in sockets:
        assert json.loads(await ws.recv())["type"] == "session.created"
    return sockets


async def test_connections_are_spread_over_the_workers_and_all_stop_with_the_supervisor() -> None:
    process, port, pids = start(2)
    try:
        async with asyncio.timeout(60):
            sockets = await open_sessions(port, 24)
            try:
                counts = [served_by(pid, port) for pid in pids]
                assert sum(counts) == 24 and min(counts) > 0, counts
            finally:
                for ws in sockets:
                    await ws.close()
        # described as one worker is (before: without its scenario, voice, transcripts or GPT-Live's URL)
        assert (f"share the port (pids {', '.join(map(str, pids))}), each a stand-in that detects speech by energy "
                "and speaks scripted replies (scenario 'default', voice 'tone'); ") in BANNERS[-1]
        assert f"GPT-Live sessions at ws://127.0.0.1:{port}/v1/live/sessions. Ephemeral keys" in BANNERS[-1]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 143  # 128 + SIGTERM, as a service manager expects
        assert process.stderr is not None and "Traceback" not in process.stderr.read()
        assert all(gone(pid) for pid in pids)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_a_worker_that_dies_ends_the_server_with_an_error() -> None:
    process, _port, pids = start(2)
    try:
        os.kill(pids[0], signal.SIGKILL)
        assert process.wait(timeout=20) != 0
        assert process.stderr is not None and f"(pid {pids[0]}) ended" in process.stderr.read()
        assert all(gone(pid) for pid in pids)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_one_server_closes_on_a_stop_signal_with_its_exit_status(sig: signal.Signals) -> None:
    process = subprocess.Popen([str(VOXLINE), "serve", "--port", "0", "--voice", "tone"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().startswith("voxline local server at ")
        process.send_signal(sig)
        assert process.wait(timeout=20) == 128 + sig  # before, SIGTERM killed it without a word (-15)
        assert process.stderr is not None
        said = process.stderr.read()
        assert f"voxline: {sig.name}: closing the server" in said.splitlines() and "Traceback" not in said
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


async def test_stopping_the_supervisor_closes_each_open_session_as_one_server_does() -> None:
    process, port, _pids = start(2)
    try:
        async with asyncio.timeout(60):
            sockets = await open_sessions(port, 8)
            process.send_signal(signal.SIGTERM)
            for ws in sockets:
                await ws.wait_closed()
            # 1001, going away: each worker closed its sessions; a worker ended mid-step left them at 1006
            assert [ws.close_code for ws in sockets] == [1001] * 8
        assert await asyncio.to_thread(process.wait, 20) == 143
        assert process.stderr is not None and "Traceback" not in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def _ended_by_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as a spawned worker starts, whatever this test process holds
    os.kill(os.getpid(), signal.SIGTERM)


async def test_a_worker_ended_by_a_signal_before_listening_is_one_failure_not_a_negative_status() -> None:
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_ended_by_sigterm)
    process.start()
    sender.close()
    try:
        message = await workers._message(asyncio.get_running_loop(), process, receiver)
    finally:
        process.join(10)
        receiver.close()
    # the status became the supervisor's exit status: -15 made it 241
    assert process.exitcode == -signal.SIGTERM
    assert message[0] == "exited" and message[2] == 1 and "SIGTERM" in message[1]


def test_stopping_gives_the_workers_one_grace_period_together(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(workers, "time", type("FakeTime", (), {"monotonic": staticmethod(lambda: clock[0])}))
    joins: list[float] = []

    class Stubborn:  # ignores terminate() until killed, like a worker whose clients stopped reading
        alive = True

        def is_alive(self) -> bool:
            return self.alive

        def terminate(self) -> None:
            pass

        def join(self, timeout: float) -> None:  # waits its whole timeout
            joins.append(timeout)
            clock[0] += timeout

        def kill(self) -> None:
            self.alive = False

    class Receiver:
        def close(self) -> None:
            pass

    workers._stop([(Stubborn(), Receiver()) for _ in range(4)], 21.0)  # type: ignore[list-item]
    # one grace period for all four before the kills, not one each (four workers took 4 x the grace)
    assert sum(joins[:4]) == 21.0


def test_stopped_workers_are_given_the_close_a_server_makes_before_they_are_killed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker stopped with clients that do not answer the close takes up to its close bound, twice (the last
    events' flush, then the close), as one server does; it was killed at 5 s, its clients' sessions cut at 1006."""
    from voxline.realtime.server import ServerConfig

    clock = [0.0]
    monkeypatch.setattr(workers, "time", type("FakeTime", (), {"monotonic": staticmethod(lambda: clock[0])}))
    killed: list[str] = []

    class Closing:  # ends on its own once its sessions' closes have run out their bound
        def __init__(self, name: str, ends_at: float) -> None:
            self.name, self.ends_at, self.alive = name, ends_at, True

        def is_alive(self) -> bool:
            return self.alive

        def terminate(self) -> None:
            pass

        def join(self, timeout: float) -> None:
            if self.alive and clock[0] + timeout >= self.ends_at:
                clock[0] = max(clock[0], self.ends_at)
                self.alive = False
            elif self.alive:
                clock[0] += timeout

        def kill(self) -> None:
            killed.append(self.name)
            self.alive = False

    class Receiver:
        def close(self) -> None:
            pass

    config = ServerConfig(port=0, close_timeout_s=10.0)
    slow = Closing("flushing and closing", 2 * 10.0)  # a flush and a close, each at its bound
    stuck = Closing("ignores its stop", 1e9)
    workers._stop([(slow, Receiver()), (stuck, Receiver())], workers.stop_grace_s(config))  # type: ignore[list-item]
    assert killed == ["ignores its stop"]


def test_a_second_stop_during_the_grace_kills_every_worker_at_once() -> None:
    killed: list[int] = []

    class Closing:  # still closing its sessions when the user presses Ctrl-C again
        def __init__(self, k: int) -> None:
            self.k, self.alive = k, True

        def is_alive(self) -> bool:
            return self.alive

        def terminate(self) -> None:
            pass

        def join(self, timeout: float) -> None:
            if self.alive and timeout > 1.0:
                raise KeyboardInterrupt  # the second Ctrl-C lands in the grace's first wait

        def kill(self) -> None:
            killed.append(self.k)
            self.alive = False

    class Receiver:
        closed = False

        def close(self) -> None:
            self.closed = True

    receivers = [Receiver() for _ in range(3)]
    with pytest.raises(KeyboardInterrupt):
        workers._stop([(Closing(k), r) for k, r in enumerate(receivers)], 21.0)  # type: ignore[misc]
    assert killed == [0, 1, 2] and all(r.closed for r in receivers)  # it left them closing, for up to 21 s
