"""A stop (Ctrl-C, SIGTERM) while a replay is still connecting ends it then, not after the connect
times out, and leaves the last run's files as they were."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
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


async def test_a_farm_recording_stopped_while_connecting_keeps_its_last_files_and_leaves_no_new_folder(
        tmp_path: Path) -> None:
    from tests.support.farm import make_recording
    from voxline.session.replay.farm.manifest import FarmRecording
    from voxline.session.replay.farm.runner import FarmOptions, replay_recording

    stop = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def never_answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        if len(held) == 2:
            stop.set()  # both recordings are connecting: the user gives up now

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    out = tmp_path / "out"
    (out / "a").mkdir(parents=True)
    (out / "a" / "heard.wav").write_bytes(b"a: the last run's audio")
    options = FarmOptions(out_dir=out, settings=SessionSettings(url=url, api_key=SecretStr("local")), fast=False,
                          url=url, voice="tone")
    recordings = []
    for name in ("a", "b"):
        make_recording(tmp_path / f"{name}.wav", 0, False)
        recordings.append(FarmRecording(name=name, path=tmp_path / f"{name}.wav"))
    try:
        outcomes = await asyncio.wait_for(asyncio.gather(
            *(replay_recording(r, options, RealClock(), stop=stop) for r in recordings)), 30)
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
    assert [(o.status, o.error) for o in outcomes] == [
        ("error", "interrupted before the server answered: nothing was replayed")] * 2
    assert (out / "a" / "heard.wav").read_bytes() == b"a: the last run's audio"
    assert sorted(p.name for p in (out / "a").iterdir()) == ["heard.wav"] and not (out / "b").exists()


async def test_a_cancel_of_its_own_while_a_stop_ends_the_connect_still_cancels_the_replay() -> None:
    stop = asyncio.Event()
    arrived = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def never_answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        arrived.set()

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    settings = SessionSettings(url=f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1",
                               api_key=SecretStr("local"))
    replay = asyncio.create_task(run_replay(np.zeros(24_000, np.int16), connector=None, clock=RealClock(),
                                            settings=settings, stop=stop))
    try:
        await arrived.wait()
        stop.set()
        replay.cancel()  # its owner gives up at the same moment (a timeout, a sibling that failed)
        with pytest.raises(asyncio.CancelledError):
            await replay
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
