"""A stop (Ctrl-C, SIGTERM) while a replay is still connecting ends it then, not after the connect
times out, and leaves the last run's files as they were."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
from pydantic import SecretStr

from voxline.base.clock import RealClock
from voxline.realtime.errors import ConnectionFailed
from voxline.session.replay.driver import run_replay
from voxline.session.replay.outputs import ReplayOutputs
from voxline.session.replay.result import ReplayResult
from voxline.session.settings import SessionSettings


async def test_a_stop_while_the_server_has_not_answered_the_handshake_ends_the_replay() -> None:
    stop = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def never_answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # the upgrade request is read by nobody: the handshake waits
        stop.set()  # the user gives up now

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = SessionSettings(url=f"ws://127.0.0.1:{port}/v1", api_key=SecretStr("local"))
    try:
        result = await asyncio.wait_for(run_replay(np.zeros(24_000, np.int16), connector=None, clock=RealClock(),
                                                   settings=settings, stop=stop), 30)
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
    assert result.interrupted and not result.events
    assert asyncio.current_task() is not None and asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


def test_a_stop_before_the_server_answered_puts_the_last_runs_files_back(tmp_path: Path) -> None:
    out, events = tmp_path / "heard.wav", tmp_path / "events.jsonl"
    out.write_bytes(b"last run's audio")
    outputs = ReplayOutputs([out, events])
    with outputs.run():
        out.write_bytes(b"")  # the writers opened the new files
        events.write_text("")
        stopped = outputs.stopped_unanswered(ReplayResult(None, [], 0, 0, duration_s=0.5, interrupted=True))
    assert stopped
    assert out.read_bytes() == b"last run's audio" and not events.exists()


def test_a_run_that_ended_unanswered_without_a_stop_is_still_a_failed_connection(tmp_path: Path) -> None:
    outputs = ReplayOutputs([tmp_path / "heard.wav"])
    result = ReplayResult(None, [], 0, 0, duration_s=0.5)
    try:
        with outputs.run():
            assert not outputs.stopped_unanswered(result)
            outputs.ended(result)
    except ConnectionFailed:
        pass
    else:
        raise AssertionError("a server that never spoke is a failed connection")
