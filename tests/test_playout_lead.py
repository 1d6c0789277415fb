"""Audio that arrives in real time (a WebRTC track) plays from a lead gathered first: 20 ms packets that come a few
milliseconds late against 20 ms reads left a gap each time, heard as clicks (8 underruns in a three-second reply)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from voxline.audio.playout import PlayoutBuffer
from voxline.base.audio_format import SAMPLE_RATE
from voxline.session.live.machine import LiveMachine
from voxline.session.machine.machine import SessionMachine
from voxline.session.settings import SessionSettings
from voxline.session.track_audio import TRACK_LEAD_MS

PACKET = SAMPLE_RATE // 50  # 20 ms


def _play_packets(lead: int, seed: int, packets: int = 150) -> PlayoutBuffer:
    """A reply's 20 ms packets, each late by a few ms (now and then by tens), against an output that reads 10 ms
    every 10 ms: every arrival and read in time order, on sample counts, no clock."""
    playout = PlayoutBuffer()
    playout.lead = lead
    late = random.Random(seed)
    arrivals = [(k * 20.0 + min(40.0, late.expovariate(1 / 5)), "packet") for k in range(packets)]
    reads = [(j * 10.0 + 3.0, "read") for j in range(2 * packets)]
    for at, what in sorted(arrivals + reads):
        if what == "packet":
            playout.enqueue(np.full(PACKET, 1000, dtype=np.int16), "item_1")
        else:
            playout.read(PACKET // 2, at / 1000)
    return playout


def test_packets_that_come_a_little_late_against_the_reads_are_gaps_without_a_lead() -> None:
    gaps = [_play_packets(lead=0, seed=seed).underrun_events for seed in range(8)]
    assert sum(gaps) >= 8 and all(gaps)  # what a track's audio did before: a click at each


@pytest.mark.parametrize("seed", range(8))
def test_the_tracks_lead_absorbs_their_lateness_and_nothing_is_lost(seed: int) -> None:
    lead = TRACK_LEAD_MS * SAMPLE_RATE // 1000
    playout = _play_packets(lead=lead, seed=seed)
    assert playout.underrun_events == 0
    playout.mark_complete("item_1")
    heard = playout.read(10 * PACKET, 10.0)  # the rest, once the packets stopped
    assert playout.samples_played == 150 * PACKET
    assert 0 < np.count_nonzero(heard) <= lead + PACKET  # what was held back, played last


def test_silence_while_the_lead_gathers_is_not_an_underrun_and_a_complete_part_plays_at_once() -> None:
    playout = PlayoutBuffer()
    playout.lead = 3 * PACKET
    playout.enqueue(np.full(PACKET, 1000, dtype=np.int16), "item_1")
    assert not playout.read(PACKET, 0.0).any()  # gathering: the reply has not begun, so no underrun
    assert playout.underrun_events == 0
    playout.mark_complete("item_1")  # all of it is here: nothing more to wait for
    assert playout.read(PACKET, 0.02).all()


def test_a_part_that_ran_dry_gathers_its_lead_again_within_one_underrun() -> None:
    playout = PlayoutBuffer()
    playout.lead = 2 * PACKET
    for _ in range(3):
        playout.enqueue(np.full(PACKET, 1000, dtype=np.int16), "item_1")
    assert playout.read(3 * PACKET, 0.0).all()
    assert not playout.read(PACKET, 0.06).any()  # ran dry: an underrun, and the lead is gathered again
    playout.enqueue(np.full(PACKET, 1000, dtype=np.int16), "item_1")  # less than the lead: still gathering
    assert not playout.read(PACKET, 0.08).any()
    assert playout.underrun_events == 1 and playout.underrun_samples == 2 * PACKET
    playout.enqueue(np.full(PACKET, 1000, dtype=np.int16), "item_1")
    assert playout.read(2 * PACKET, 0.10).all()


@pytest.mark.parametrize("api", ["realtime", "live"])
@pytest.mark.parametrize(("transport", "call_id", "lead_ms"), [
    ("webrtc", None, TRACK_LEAD_MS), ("ws", None, 0),
    ("webrtc", "rtc_1", 0),  # a sideband of a call: the media are the other side's
])
def test_a_session_whose_voice_comes_on_a_media_track_gathers_the_lead(api: str, transport: str, call_id: str | None,
                                                                      lead_ms: int) -> None:
    playout = PlayoutBuffer()
    settings = SessionSettings(api_key="k", api=api, transport=transport, call_id=call_id)
    if api == "live":
        LiveMachine(settings, playout)
    else:
        SessionMachine(settings, playout)
    assert playout.lead == lead_ms * SAMPLE_RATE // 1000


def test_the_next_reply_gathers_its_lead_too_after_the_output_skipped_the_silence_between() -> None:
    """A part that ended on a block's edge left the lead off: the output then skipped the idle silence, and the
    next reply's first packet played at once, with nothing in hand."""
    playout = PlayoutBuffer()
    playout.lead = 3 * PACKET
    for _ in range(3):
        playout.enqueue(np.full(PACKET, 1000, dtype=np.int16), "item_a")
    for k in range(3):
        assert playout.read(PACKET, k * 0.02).all()
    playout.mark_complete("item_a")
    assert playout.skip_silence(PACKET, 0.06)
    playout.enqueue(np.full(PACKET, 1000, dtype=np.int16), "item_b")
    assert not playout.read(PACKET, 0.08).any()


def test_a_reply_shorter_than_the_lead_whose_packets_stop_plays_after_waiting_the_lead() -> None:
    """Nothing more comes and nothing marks it complete (a track that goes quiet): it plays once it waited as long
    as the lead lasts, rather than never."""
    playout = PlayoutBuffer()
    playout.lead = 3 * PACKET
    playout.enqueue(np.full(2 * PACKET, 1000, dtype=np.int16), "item_a")
    played = [playout.read(PACKET, k * 0.02).any() for k in range(6)]
    assert played == [False, False, False, True, True, False]
    assert playout.samples_played == 2 * PACKET
    assert playout.underrun_events == 1  # the silence after it, while nothing says it ended: not the wait before
