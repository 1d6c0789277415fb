"""The heard part of a cut reply: a prefix of its transcript whose length tracks heard/received,
published as an estimate, kept by the mirror (and its JSON), and used when a reconnect
rebuilds the conversation."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from voxline.base.clock import VirtualClock
from voxline.realtime.connection import connect
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.cli.talk_view import LiveScreen, TalkModel, describe
from voxline.session.events import (
    BargeIn,
    ConnectionRestored,
    HeardTranscript,
    StateChanged,
    TranscriptDelta,
    TurnMetrics,
)
from voxline.session.metrics import TurnRecord
from voxline.audio.clocked_output import ClockedOutput
from voxline.session.mirror import ConversationMirror
from voxline.session.replay import replay_fast
from voxline.session.settings import SessionSettings
from voxline.session.voice import VoiceSession
from tests.support.oracle import WireRecorder, sent
from tests.support.speech import make_utterance, mix_timeline
from tests.support.session_events import collect

LONG = load_scenario("long")


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    cache = tmp_path_factory.mktemp("speech")
    return {"question": make_utterance("what is the weather like today", cache).samples,
            "stop": make_utterance("stop, wait a second", cache).samples}


async def run_for(session: VoiceSession, clock: VirtualClock, seconds: float, step: float = 0.02) -> None:
    """Let ``seconds`` of virtual time pass, block by block, letting the session work in between."""
    end = clock.now() + seconds
    while clock.now() < end:
        clock.advance(step)
        await asyncio.sleep(0.005)


def cut_at(speech: dict[str, np.ndarray], stop_s: float) -> HeardTranscript:
    samples = mix_timeline(stop_s + 3.0, [(0.5, speech["question"]), (stop_s, speech["stop"])])
    result = replay_fast(samples, scenario=LONG, voice="espeak", tail_s=1.0)
    (heard,) = [e for e in result.events if isinstance(e, HeardTranscript)]
    (barge,) = [e for e in result.events if isinstance(e, BargeIn)]
    assert (heard.item_id, heard.heard_ms, heard.received_ms) == (barge.item_id, barge.heard_ms, barge.received_ms)
    return heard


def test_the_heard_text_is_a_prefix_that_tracks_heard_over_received(speech: dict[str, np.ndarray]) -> None:
    cuts = [cut_at(speech, stop) for stop in (3.6, 5.0, 7.0, 9.0)]  # the reply starts at about 2.7 s
    for heard in cuts:
        assert heard.estimate and heard.method == "arrival"
        assert heard.full_text.startswith(heard.text) and 0 < len(heard.text) < len(heard.full_text)
        # the full text is what had arrived by the cut, as the audio had: the heard share of one is
        # about the heard share of the other, to a word or two (speech is not evenly paced)
        share = heard.heard_ms / heard.received_ms
        assert abs(len(heard.text) - share * len(heard.full_text)) <= 10, (heard.text, share)
    lengths = [len(h.text) for h in cuts]
    assert lengths == sorted(lengths) and len(set(lengths)) == len(cuts)  # later cuts, more words
    texts = [h.full_text for h in cuts]
    assert all(later.startswith(earlier) for earlier, later in zip(texts, texts[1:]))  # one reply, cut later


async def test_the_heard_text_is_what_a_reconnect_recreates() -> None:
    rec, clock = WireRecorder(), VirtualClock()
    async with serve(ServerConfig(port=0, voice="tone", speed=float("inf"))) as second:
        first = await serve(ServerConfig(port=0, voice="tone", scenario="long", speed=float("inf"))).__aenter__()
        urls = [first.url, second.url]

        async def connector() -> Any:  # the first server goes away after the cut; the second one holds
            return await connect(urls.pop(0) if len(urls) > 1 else urls[0], "sk-test", on_wire=rec)

        settings = SessionSettings(api_key="sk-test", turn_detection="none", reconnect_attempts=2)
        async with VoiceSession(settings, output=ClockedOutput(clock), clock=clock, connector=connector,
                                backoff=lambda attempt: 0.1) as session:
            await session.send_text("tell me a long story")
            await collect(session, clock, lambda e: isinstance(e, StateChanged) and e.state == "speaking")
            await run_for(session, clock, 3.0)  # 3 s of the reply reach the listener
            barge = await session.interrupt()
            assert barge is not None and barge.audio_end_ms is not None
            events = await collect(session, clock, lambda e: isinstance(e, HeardTranscript))
            heard = events[-1]
            assert isinstance(heard, HeardTranscript) and heard.item_id == barge.item_id
            assert heard.estimate and 0 < len(heard.text) < len(heard.full_text)
            assert heard.full_text.startswith(heard.text)

            item = session.mirror.get(heard.item_id)
            assert item is not None and item.heard_text == heard.text
            exported = next(i for i in session.mirror.to_json()["items"] if i["id"] == heard.item_id)
            assert (exported["heard_text"], exported["heard_text_method"]) == (heard.text, heard.method)
            again = ConversationMirror.from_json(json.loads(json.dumps(session.mirror.to_json())))
            assert again.get(heard.item_id).heard_text == heard.text  # type: ignore[union-attr]

            await first.close()  # the connection drops
            await collect(session, clock, lambda e: isinstance(e, ConnectionRestored))
    rec.verify()
    recreated = [c["item"] for c in sent(rec, "conversation.item.create") if c["item"].get("id") == heard.item_id]
    assert recreated == [{"id": heard.item_id, "type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": heard.text}]}]


def test_talk_shows_the_heard_words_and_strikes_out_the_rest() -> None:
    model = TalkModel(endpoint="test", mode="voice activity")
    heard = HeardTranscript("item_a", 7.4, "Hello! This is", "Hello! This is a long reply.", 1200.0, 4000.0, "arrival")
    turn = TurnRecord(0, 1.0, 1.5, 1.5, 1.52, 520.0, 500.0, 20.0, 500.0, ("resp_1",), ("cancelled",), 0, 0.0, 1)
    for event in (TranscriptDelta("assistant", "item_a", "Hello! This is a long reply."), heard):
        model.apply(event, " 1.00s")
    assert describe(heard) == "assistant, as heard (estimate, 1.20 of 4.00 s received): Hello! This is"
    whole = HeardTranscript("item_b", 9.0, "All of it.", "All of it.", 1500.0, 1500.0, "live_timeline", False)
    assert describe(whole) == "assistant, as heard (all of it, 1.50 s received): All of it."  # no estimate
    assert describe(TurnMetrics(9.0, turn)) == ("turn 1: reply heard 520 ms after your voice ended "
                                                "(500 ms to the first audio delta, then 20 ms in the client)")
    (shown,) = model.turns
    assert shown.heard == "Hello! This is"
    console = Console(width=100, record=True, color_system="truecolor")
    console.print(LiveScreen(model, console).render())
    text = console.export_text()
    assert "Hello! This is a long reply." in text and "▍" not in text  # a cut reply is not still streaming
    styled = [(seg.text, seg.style) for seg in console.render(LiveScreen(model, console).render())]
    struck = "".join(t for t, style in styled if style is not None and style.strike)
    assert struck.strip() == "a long reply."
