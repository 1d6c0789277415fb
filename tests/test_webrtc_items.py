"""Over WebRTC a reply of two audio items plays as one track: the session gives each item its share.

The local server answers with two spoken items in one response over a real WebRTC call;
the session interrupts during the second one. The barge-in must name the second item, the
first must count as heard in full, and the mirror must keep a proper prefix of the second
item's transcript as heard, next to the server's own truncation of it. Every data-channel
frame goes through the oracle.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from voxline.base.clock import RealClock
from voxline.base.audio_format import SAMPLE_RATE as RATE
from voxline.realtime.server import ServerConfig, serve
from voxline.session.events import BargeIn, HeardTranscript, TranscriptDone
from voxline.audio.clocked_output import ClockedOutput
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.oracle import WireRecorder
from tests.support.session_events import until

KEY = "sk-webrtc-two-items"
FIRST = "This is the first item of the reply, and it is short."
SECOND = "And this is the second item, which goes on for quite a while longer so that it can be cut in its middle."
SCENARIO = f'''name = "two"
description = "One response of two spoken items."
[[turns]]
[[turns.output]]
say = "{FIRST}"
[[turns.output]]
say = "{SECOND}"
'''


@pytest.mark.slow
async def test_a_cut_in_the_second_item_of_a_reply_names_it_and_keeps_what_was_heard(tmp_path: Path) -> None:
    scenario = tmp_path / "two.toml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    wire = WireRecorder()
    config = ServerConfig(port=0, voice="tone", speed=4.0, api_key=KEY, scenario=scenario)
    async with serve(config) as server:
        settings = SessionSettings(url=server.http_url, api_key=KEY, transport="webrtc")
        output = ClockedOutput(RealClock())
        async with VoiceSession(settings, output=output, on_wire=wire) as session:
            await session.send_text("hello")
            done: list[str] = []

            def both_transcripts(event: Any) -> bool:
                if isinstance(event, TranscriptDone) and event.role == "assistant":
                    done.append(event.item_id)
                return len(done) == 2

            await until(session, both_transcripts)  # they come at generation speed, ahead of the audio
            first_item, second_item = done
            async with asyncio.timeout(20):  # a second of the second item reaches the listener
                while output.playout.heard_samples(second_item, 0, output.now()) < RATE:
                    await asyncio.sleep(0.05)
            barge = await session.interrupt()
            assert isinstance(barge, BargeIn) and barge.server_cuts
            assert barge.item_id == second_item  # not the response's first item
            async with asyncio.timeout(10):  # the server truncates every item that lost audio
                while not (item := session.mirror.get(second_item)) or not item.truncated:
                    await asyncio.sleep(0.02)
            first, cut = session.mirror.get(first_item), session.mirror.get(second_item)
            assert first is not None and cut is not None
            said = [e for e in session.pending_events() if isinstance(e, HeardTranscript)]
    # what the app was told at the barge-in: the share of the transcript heard, from the session's estimate
    # of the item's length (no audio comes as events over WebRTC), not the whole transcript
    assert [e.item_id for e in said] == [second_item], said
    assert said[0].estimate and said[0].method == "duration" and said[0].received_ms > said[0].heard_ms
    assert said[0].text and SECOND.startswith(said[0].text) and len(said[0].text) < len(SECOND)
    wire.verify()
    assert first.listened_ms is None and first.heard_text == FIRST  # played in full
    # Over WebRTC the server cuts at what it sent on the track: what the listener heard, plus what was
    # still on its way or queued here unplayed (a loop stalled on a busy machine lets a backlog build
    # up, and the track then plays behind the server by that much). The cut keeps what was heard and
    # goes no further than what had arrived; jitter and the data channel's delay in either direction
    # are within the tolerance.
    assert cut.cut_ms is not None
    received_ms = barge.heard_ms + barge.in_device_ms + barge.unplayed_ms
    assert barge.heard_ms - 250 <= cut.cut_ms <= received_ms + 250, (barge, cut.cut_ms)
    heard = cut.heard_text
    assert heard and SECOND.startswith(heard) and len(heard) < len(SECOND)
    share = cut.cut_ms / cut.audio_ms_received  # the item's length as the session estimated it
    assert abs(len(heard) / len(SECOND) - share) <= 0.1  # the share of the transcript the listener heard
