"""A session on sound devices in two lines, and inputs checked where they are given.

``VoiceSession.on_devices`` opens the microphone and the speaker with the session, wires
them, and closes both with it; ``input=`` takes what the docs say and names it otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest

import voxline
import voxline.audio
from voxline.base.clock import VirtualClock
from voxline.realtime.errors import ConfigurationError, ConnectionFailed
from voxline.realtime.server import ServerConfig, serve
from voxline.audio.clocked_output import ClockedOutput
from voxline.session.events import ResponseFinished
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.devices import VirtualDevices, vdev
from tests.support.session_events import collect

__all__ = ["vdev"]  # fixture used below


def test_the_device_classes_are_named_where_a_user_looks() -> None:
    for name in ("MicSource", "SpeakerSink", "ClockedOutput"):
        assert getattr(voxline, name) is getattr(voxline.audio, name)


@pytest.mark.parametrize("wrong", [[np.zeros(480, np.int16)], np.zeros(480, np.int16), "mic", 3])
def test_an_input_that_is_not_an_async_iterable_is_a_type_error_at_construction(wrong: object) -> None:
    with pytest.raises(TypeError, match="async iterable of int16 blocks or \\(adc_time, block\\) pairs"):
        VoiceSession(SessionSettings(api_key="k"), input=wrong)  # type: ignore[arg-type]


async def _pairs(clock: VirtualClock) -> AsyncIterator[tuple[float, np.ndarray]]:
    """What MicSource.blocks() yields: (ADC time, block), with no echo canceller in the session."""
    for k in range(50):
        await clock.sleep(0.02)
        yield clock.now(), np.zeros(480, np.int16)


async def test_device_pairs_are_taken_without_a_capture_path() -> None:
    clock = VirtualClock()
    async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"))) as srv:
        settings = SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none")
        async with VoiceSession(settings, output=ClockedOutput(clock), clock=clock, input=_pairs(clock)) as session:
            await session.send_text("hello")
            seen = await collect(session, clock, lambda e: isinstance(e, ResponseFinished))
            assert seen and session.connected


async def test_figures_before_the_devices_open_and_after_an_open_that_failed_are_none(vdev: VirtualDevices) -> None:
    session = VoiceSession.on_devices(SessionSettings(url="ws://127.0.0.1:9/v1", api_key="sk-test"))
    assert session.metrics().items == ()  # before: "the speaker stream is not open"
    with pytest.raises(ConnectionFailed):
        async with session:
            pass
    assert session.metrics().items == ()


async def test_a_device_session_never_opened_or_whose_open_failed_closes_without_a_word(vdev: VirtualDevices) -> None:
    """A kiosk's `finally: await session.aclose()` with its server down at boot: before, aclose raised 'the speaker
    stream is not open', its teardown never ran, and an `async for` over the session waited for ever."""
    settings = SessionSettings(url="ws://127.0.0.1:9/v1", api_key="sk-test")
    never = VoiceSession.on_devices(settings)
    await never.aclose()
    failed = VoiceSession.on_devices(settings)
    with pytest.raises(ConnectionFailed):
        async with failed:
            pass
    await failed.aclose()
    assert [event async for event in failed] == [] and [event async for event in never] == []  # both ended


def test_an_output_that_cannot_tell_the_time_is_one_error_when_the_session_opens() -> None:
    """A SpeakerSink wired by hand and never started: before, the session opened and every server event failed
    on it ('the speaker stream is not open'), then its close raised the same."""
    class Unstarted(ClockedOutput):
        def now(self) -> float:
            raise voxline.audio.AudioError("the speaker stream is not open")

    session = VoiceSession(SessionSettings(url="ws://127.0.0.1:9/v1", api_key="sk-test"),
                           output=Unstarted(VirtualClock()))

    async def main() -> None:
        async with session:
            pass

    with pytest.raises(ConfigurationError, match=r"^the session's output cannot tell the time \(the speaker stream is "
                                                 r"not open\): start it before the session opens"):
        asyncio.run(main())


async def test_on_devices_opens_wires_and_closes_the_microphone_and_the_speaker(vdev: VirtualDevices) -> None:
    async with serve(ServerConfig(port=0, voice="tone")) as srv:
        settings = SessionSettings(url=srv.url, api_key="sk-test", turn_detection="none")
        session = VoiceSession.on_devices(settings)  # the default devices: the module's private sink and source
        speaker, mic = session.output, session.devices[1]
        async with session:
            await session.send_text("hello")
            for _ in range(400):  # the reply plays on the speaker; the microphone is read meanwhile
                if any(isinstance(e, ResponseFinished) for e in session.pending_events()) and mic.blocks_captured:
                    break
                await asyncio.sleep(0.02)
            assert mic.blocks_captured > 0 and speaker.callbacks > 0
    assert mic._closed and speaker._stream is None
    # the figures after the close, as an app shows them (before: "the speaker stream is not open")
    report = session.metrics()
    assert report.items and report.at == session.metrics().at <= speaker.now() == speaker.now()  # both stopped
