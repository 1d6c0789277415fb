"""Echo cancellation by default on real devices, where the microphone does not hear the speaker.

``VoiceSession.on_devices`` turns the gated AEC3 and the local VAD on by default. On the virtual
devices the speaker's sink is not heard by the microphone (as with headphones): the monitor
must find no echo path while the reply plays, and from then on the server must receive the
microphone bit for bit, so the interruption in ``examples/audio/barge_in.wav`` reaches it as
early as with no canceller at all. A canceller that processed the voice would alter it (AEC3
filters and, at the start of the voice, suppresses it).
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys

import numpy as np
import pytest

from voxline.audio.aec import GatedCanceller
from voxline.audio.local_vad import LocalVad
from voxline.audio.wavio import read_wav
from voxline.realtime.server import ServerConfig, serve
from voxline.session.events import BargeIn
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.ci import IN_CI
from tests.support.cli import EXAMPLE, one_line_error, voxline
from tests.support.devices import VirtualDevices, find, vdev

__all__ = ["vdev"]  # the module's fixture, used below

STOP_AT = 6.0  # "stop, wait a second" in barge_in.wav


@pytest.mark.device
async def test_on_devices_cancels_by_default_and_passes_the_voice_untouched_without_an_echo(
        vdev: VirtualDevices) -> None:
    if not IN_CI:  # CI installs voxline[aec]: there the test must run
        pytest.importorskip("pywebrtc_audio", reason="needs voxline[aec]")
    appended: list[bytes] = []

    def wire(direction: str, text: str) -> None:
        if direction == "out" and '"input_audio_buffer.append"' in text:
            appended.append(base64.b64decode(json.loads(text)["audio"]))

    async with serve(ServerConfig(port=0, voice="tone")) as srv:
        settings = SessionSettings(url=srv.url, api_key="sk-test")
        session = VoiceSession.on_devices(settings, on_wire=wire)
        capture = session.machine.mic.capture
        assert capture is not None and isinstance(capture.aec, GatedCanceller) and isinstance(capture.vad, LocalVad)
        barges: list[BargeIn] = []
        async with session:
            player = await asyncio.create_subprocess_exec("paplay", "-d", vdev.mic, str(EXAMPLE))
            try:
                async with asyncio.timeout(30):
                    while not barges:
                        barges += [e for e in await _next(session) if isinstance(e, BargeIn)]
            finally:
                await player.wait()
    assert capture.aec.echo_path is False  # the speaker is not heard: no echo path was measured
    sent = np.frombuffer(b"".join(appended), dtype="<i2")
    samples, rate = read_wav(EXAMPLE)
    stop = samples[int(STOP_AT * rate) : int((STOP_AT + 0.5) * rate)]
    at, score = find(sent, stop)
    assert score > 0.999 and np.array_equal(sent[at : at + len(stop)], stop)  # the voice as captured


async def _next(session: VoiceSession) -> list[object]:
    return [await anext(session)]


def test_talk_cancels_by_default_and_no_aec_refuses_it() -> None:
    import argparse

    from voxline.session.cli.talk import add_arguments, echo_options

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    aec, vad, note = echo_options(parser.parse_args([]))
    if aec is None:  # voxline[aec] is not installed: the session goes without, and says why
        assert not IN_CI and "echo cancellation off: " in note and "voxline[aec]" in note
    else:
        assert isinstance(aec, GatedCanceller) and isinstance(vad, LocalVad) and "--no-aec" in note
    assert echo_options(parser.parse_args(["--no-aec"])) == (None, None, "voxline talk: echo cancellation off (--no-aec)")
    # push-to-talk: Enter is the turn and interrupts; speech without it held the assistant for a second
    for given in (["--push-to-talk"], ["--push-to-talk", "--aec", "speex"]):
        aec, vad, note = echo_options(parser.parse_args(given))
        assert vad is None and "local voice activity" not in note, note
        assert aec is None or "Enter interrupts the assistant" in note


def test_aec_speex_without_the_vad_says_what_the_vad_is_for_and_push_to_talk_needs_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without webrtcvad, ``--aec speex`` said "local VAD 'webrtc' needs webrtcvad-wheels", naming a VAD the user never
    chose, and ``--push-to-talk --aec speex``, which uses no VAD, failed the same way."""
    import argparse

    from voxline.audio.aec import AecUnavailable
    from voxline.audio.local_vad import VadUnavailable
    from voxline.session.cli.talk import add_arguments, echo_options

    monkeypatch.setitem(sys.modules, "webrtcvad", None)  # as if voxline[aec] were not installed
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    try:
        aec, vad, note = echo_options(parser.parse_args(["--push-to-talk", "--aec", "speex"]))
    except AecUnavailable:  # no system libspeexdsp: nothing more to check here
        assert not IN_CI
        return
    assert vad is None and aec is not None and "Enter interrupts the assistant" in note
    with pytest.raises(VadUnavailable) as refused:
        echo_options(parser.parse_args(["--aec", "speex"]))
    said = str(refused.value)
    assert said.startswith("--aec speex holds the assistant while you talk with a local VAD, and the local VAD")
    assert "voxline[aec]" in said and said.endswith("(or add --push-to-talk, which needs none)")


def test_aec_and_no_aec_together_are_one_line() -> None:
    run = voxline("talk", "--aec", "--no-aec", timeout=60)
    assert "not allowed with argument" in one_line_error(run)
