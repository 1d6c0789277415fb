"""An application's own output (an object with ``playout``, ``now()`` and ``discard_pending()``) that fails:
the session says so, and closes whole all the same."""

from __future__ import annotations

import logging

import pytest

from voxline.audio.clocked_output import ClockedOutput
from voxline.base.clock import VirtualClock
from voxline.base.errors import AudioError
from voxline.realtime.connection import RealtimeConnection
from voxline.realtime.server import load_scenario
from voxline.session.events import SessionError
from voxline.session.lockstep import run_lockstep
from voxline.session.replay import engine_connector
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession


class LostOutput(ClockedOutput):
    """A sink whose device went: its clock can no longer be read."""

    lost = False

    def now(self) -> float:
        if self.lost:
            raise AudioError("the sink's device is gone")
        return super().now()


def test_an_output_whose_clock_fails_still_lets_the_session_close_its_connection() -> None:
    """aclose() raised the output's AudioError before anything was closed, each time it was called: the connection
    stayed open and the session could never be closed."""
    clock = VirtualClock()
    opened: list[RealtimeConnection] = []
    connect = engine_connector(load_scenario("default"), clock, voice="tone")

    async def counted() -> RealtimeConnection:
        opened.append(await connect())
        return opened[-1]

    output = LostOutput(clock)
    settings = SessionSettings(api_key="local", url="ws://in-process/v1", turn_detection="none")

    async def main() -> tuple[list[object], float]:
        session = VoiceSession(settings, output=output, clock=clock, connector=counted)
        async with session:
            await session.send_text("hello")
            await clock.sleep(1.0)
            output.lost = True
            await clock.sleep(0.2)
        await session.aclose()  # a second close is quiet too
        return [e async for e in session], session.metrics().at

    events, closed_at = run_lockstep(main(), clock)
    assert "output_failed" in [e.code for e in events if isinstance(e, SessionError)]  # said, as it happened
    assert len(opened) == 1 and opened[0].closed
    assert 1.0 <= closed_at < 1.2  # the figures stop where its audio did (handed out a block or so ahead)


class UnsayableLoss(AudioError):
    """An app's error whose own message cannot be read."""

    def __str__(self) -> str:
        raise RuntimeError("its __str__ is broken too")


class MuteOutput(ClockedOutput):
    """An output whose clock fails on every read once ``error`` is set."""

    error: Exception | None = None

    def now(self) -> float:
        if self.error is not None:
            raise self.error
        return super().now()


def _failing_turn(error: Exception) -> list[SessionError]:
    """The session's errors when a text turn's events arrive on an output whose clock raises ``error``."""
    clock = VirtualClock()
    output = MuteOutput(clock)
    settings = SessionSettings(api_key="local", url="ws://in-process/v1", turn_detection="none")
    connect = engine_connector(load_scenario("default"), clock, voice="tone")

    async def main() -> list[object]:
        session = VoiceSession(settings, output=output, clock=clock, connector=connect)
        async with session:
            await clock.sleep(0.5)
            output.error = error
            await session.send_text("hello")
            await clock.sleep(3.0)
        return [e async for e in session]

    return [e for e in run_lockstep(main(), clock) if isinstance(e, SessionError)]


def test_an_output_whose_clock_fails_is_said_for_every_event_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """Each server event an output's failing clock kept from being handled logged its own full traceback: a flood,
    a few hundred tracebacks a reply. Each is still an ``event_failed`` event; the traceback is logged once."""
    with caplog.at_level(logging.ERROR, logger="voxline.session"):
        errors = _failing_turn(AudioError("the sink's device is gone"))
    failed = [e for e in errors if e.code == "event_failed"]
    assert len(failed) > 3 and all(e.message.endswith("AudioError: the sink's device is gone") for e in failed)
    tracebacks = [r for r in caplog.records if r.exc_info is not None and "failed to handle" in r.getMessage()]
    assert len(tracebacks) == 1


def test_an_event_failure_whose_message_cannot_be_read_is_still_one_event() -> None:
    """Reporting the failure read the exception's message, whose ``__str__`` raised: the receive loop itself
    failed, and with it the session."""
    errors = _failing_turn(UnsayableLoss("gone"))
    codes = {e.code for e in errors}
    assert "receive_loop_failed" not in codes and "event_failed" in codes, errors
    assert [e for e in errors if e.code == "event_failed"][0].message.endswith(
        "UnsayableLoss: (its message could not be read)")
