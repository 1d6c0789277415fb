"""WebRTC: a reply of several audio items plays as one track; each item gets its share of it.

Plain events and blocks in, the playout's attribution out (no sockets, no clock).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from voxline.audio.playout import PlayoutBuffer
from voxline.base.audio_format import SAMPLE_RATE as RATE
from voxline.realtime import events as ev
from voxline.session.track_audio import DEFAULT_MS_PER_CHAR, SpeakingRate, TrackTagger

FIRST = "This is the first item of the reply, and it is short."
SECOND = "And this is the second one, which goes on for quite a while longer."


def feed(tagger: TrackTagger, *payloads: dict[str, Any]) -> None:
    for payload in payloads:
        tagger.handle(ev.parse_server_event(json.dumps({"event_id": "e", **payload})))


def message(item_id: str, response_id: str, index: int) -> dict[str, Any]:
    item = {"id": item_id, "object": "realtime.item", "type": "message", "role": "assistant", "content": []}
    return {"type": "response.output_item.added", "response_id": response_id, "output_index": index, "item": item}


def transcript(item_id: str, response_id: str, index: int, text: str) -> list[dict[str, Any]]:
    ref = {"response_id": response_id, "item_id": item_id, "output_index": index, "content_index": 0}
    half = len(text) // 2
    return [{"type": "response.output_audio_transcript.delta", **ref, "delta": text[:half]},
            {"type": "response.output_audio_transcript.delta", **ref, "delta": text[half:]},
            {"type": "response.output_audio_transcript.done", **ref, "transcript": text}]


def two_items(tagger: TrackTagger, response_id: str = "resp_1") -> None:
    a, b = f"{response_id}_a", f"{response_id}_b"
    feed(tagger, message(a, response_id, 0), *transcript(a, response_id, 0, FIRST),
         message(b, response_id, 1), *transcript(b, response_id, 1, SECOND),
         {"type": "output_audio_buffer.started", "response_id": response_id})


def play(tagger: TrackTagger, samples: int, block: int = 480) -> None:
    for _ in range(samples // block):
        tagger.on_audio(np.ones(block, np.int16))


def test_each_item_gets_its_estimated_share_of_the_track_in_order() -> None:
    playout = PlayoutBuffer()
    tagger = TrackTagger(playout)
    two_items(tagger)
    play(tagger, 10 * RATE)  # ten seconds of track audio, more than both items
    first = int(len(FIRST) * DEFAULT_MS_PER_CHAR * RATE / 1000)
    assert playout.received_samples("resp_1_a") == first  # split inside a block, to the sample
    assert playout.received_samples("resp_1_b") == 10 * RATE - first  # the last item takes the rest


def test_a_reply_heard_to_its_end_teaches_the_rate_the_next_reply_is_split_by() -> None:
    playout = PlayoutBuffer()
    tagger = TrackTagger(playout, grace_ms=40)
    two_items(tagger)
    true_ms_per_char = 80.0
    whole = int((len(FIRST) + len(SECOND)) * true_ms_per_char * RATE / 1000) // 480 * 480
    play(tagger, whole)
    feed(tagger, {"type": "output_audio_buffer.stopped", "response_id": "resp_1"})
    play(tagger, 960)  # the grace runs out: the reply was heard to its end
    chars = len(FIRST) + len(SECOND)
    assert tagger.rate.ms_per_char == pytest.approx((whole + 960) * 1000 / RATE / chars)  # the grace's frames too
    assert tagger.rate.ms_per_char == pytest.approx(true_ms_per_char, rel=0.05)
    two_items(tagger, "resp_2")
    play(tagger, 10 * RATE)
    expected = len(FIRST) * tagger.rate.ms_per_char * RATE / 1000
    assert playout.received_samples("resp_2_a") == pytest.approx(expected, abs=1)


def test_a_cleared_reply_teaches_nothing_and_the_estimates_go_to_the_mirror() -> None:
    tagger = TrackTagger(PlayoutBuffer())
    two_items(tagger)
    play(tagger, RATE)
    feed(tagger, {"type": "output_audio_buffer.cleared", "response_id": "resp_1"})
    assert tagger.rate.ms_per_char == DEFAULT_MS_PER_CHAR and not tagger.audible
    estimates = dict(tagger.audio_estimates())
    assert estimates["resp_1_a"] == pytest.approx(len(FIRST) * DEFAULT_MS_PER_CHAR, abs=0.1)
    assert estimates["resp_1_b"] == pytest.approx(len(SECOND) * DEFAULT_MS_PER_CHAR, abs=0.1)


def test_an_item_whose_transcript_is_still_coming_keeps_the_track() -> None:
    playout = PlayoutBuffer()
    tagger = TrackTagger(playout)
    feed(tagger, message("a", "r", 0), {"type": "response.output_audio_transcript.delta", "response_id": "r",
                                         "item_id": "a", "output_index": 0, "content_index": 0, "delta": "Hi"},
         message("b", "r", 1), {"type": "output_audio_buffer.started", "response_id": "r"})
    play(tagger, RATE)  # "Hi" would be 130 ms, but its length is not known until its transcript is done
    assert playout.received_samples("a") == RATE and playout.received_samples("b") == 0


def test_the_rate_needs_enough_text_to_learn_from() -> None:
    rate = SpeakingRate()
    rate.learn(RATE, 10)
    assert rate.ms_per_char == DEFAULT_MS_PER_CHAR
    rate.learn(RATE, 40)
    assert rate.ms_per_char == pytest.approx(2000 / 50)


def test_an_item_with_an_empty_transcript_is_not_skipped() -> None:
    playout = PlayoutBuffer()
    tagger = TrackTagger(playout)
    feed(tagger, message("a", "r", 0), *transcript("a", "r", 0, ""), message("b", "r", 1),
         {"type": "output_audio_buffer.started", "response_id": "r"})
    play(tagger, RATE)  # no length to go by: the audio stays with the item playing
    assert playout.received_samples("a") == RATE and playout.received_samples("b") == 0


def test_an_item_cut_while_its_transcript_runs_ahead_is_as_long_as_the_words_received_say() -> None:
    """The transcript arrives faster than the audio plays: an item cut after one second, with five
    seconds of words in, is at least five seconds long, so its heard share is a fifth of those words."""
    tagger = TrackTagger(PlayoutBuffer())
    words = "x" * 77  # about 5 s at the default rate
    feed(tagger, message("a", "r", 0), {"type": "response.output_audio_transcript.delta", "response_id": "r",
                                         "item_id": "a", "output_index": 0, "content_index": 0, "delta": words},
         {"type": "output_audio_buffer.started", "response_id": "r"})
    play(tagger, RATE)
    feed(tagger, {"type": "output_audio_buffer.cleared", "response_id": "r"})
    assert dict(tagger.audio_estimates())["a"] == pytest.approx(len(words) * DEFAULT_MS_PER_CHAR, abs=0.1)
