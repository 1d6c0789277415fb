"""Session metrics: latency as heard, barge-in reaction and cut accuracy, underruns, p50/p95.

The figures of a lockstep replay are checked against what the recordings themselves show:
the input's samples (where the user's voice ends and begins) and the heard timeline
(where the assistant's audio starts and where the cut left silence), not against the
session's own bookkeeping.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxline.audio.ledger import Cut
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.synth import synthesize
from voxline.audio.wavio import read_wav
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.settings import SessionSettings
from voxline.session.core import CoreEffects
from voxline.session.events import (
    AssistantAudioStarted,
    BargeIn,
    CutAdjusted,
    HeardTranscript,
    ResponseFinished,
    ResponseStarted,
    SpeechStarted,
    SpeechStopped,
    TurnMetrics,
)
from voxline.session.metrics import MetricsReport, SessionMetrics, aggregate, percentile
from voxline.session.metrics.input_timeline import GAP_S, InputTimeline
from voxline.session.replay import ReplayResult, replay_fast
from voxline.session.tools import ToolFinished, ToolStarted
from tests.support.ci import require_tool
from tests.support.heard import heard_length
from tests.support.server_events import audio_b64, wire

RATE = 24000
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "audio" / "barge_in.wav"
LONG = load_scenario("long")
LONG_TEXT = LONG.turns[0].outputs[0].text
STOP_ONSET_S = 6.0  # examples/make_audio.sh pads "stop, wait a second" to start at exactly 6.0 s


def voiced(samples: np.ndarray, threshold: int = 300) -> np.ndarray:
    return np.flatnonzero(np.abs(samples.astype(np.int32)) > threshold)


@pytest.fixture(scope="module")
def mic() -> np.ndarray:
    return read_wav(EXAMPLE)[0]


@pytest.fixture(scope="module")
def run(mic: np.ndarray) -> ReplayResult:
    require_tool("espeak-ng")
    return replay_fast(mic, scenario=LONG, voice="espeak")


def metrics_of(result: ReplayResult) -> MetricsReport:
    assert result.metrics is not None
    return result.metrics


def test_reply_latency_is_the_silence_between_the_users_voice_and_the_reply(mic: np.ndarray, run: ReplayResult) -> None:
    metrics = metrics_of(run)
    first = metrics.turns[0]
    question_end = voiced(mic)[voiced(mic) < 4 * RATE][-1] / RATE
    assert run.heard is not None
    ref = synthesize(LONG_TEXT, "espeak")  # the reply as the server voiced it
    _onset, heard = heard_length(run.heard, ref)
    assert heard > 0
    lead = int(np.flatnonzero(ref)[0])  # the voice starts with a few silent samples
    item_start = (int(np.flatnonzero(run.heard)[0]) - lead) / RATE  # where sample 0 of the reply lies in HEARD
    assert first.first_heard_at == pytest.approx(item_start, abs=1 / RATE)
    assert first.speech_end_at == pytest.approx(question_end, abs=0.015)  # VAD frames are 10 ms
    assert first.reply_latency_ms == pytest.approx((item_start - question_end) * 1000, abs=15)
    # the parts add up to the whole: speech end → first delta → first sample at the listener
    assert first.first_delta_ms is not None and first.client_ms is not None
    assert first.first_delta_ms + first.client_ms == pytest.approx(first.reply_latency_ms, abs=1e-6)
    # the server waits out its silence duration, and hears its end with the chunk that holds it
    chunk_ms = SessionSettings(api_key="local").input_chunk_ms
    assert 500 - 15 <= first.vad_ms <= 500 + chunk_ms


def test_the_barge_in_is_placed_where_the_recordings_show_it(mic: np.ndarray, run: ReplayResult) -> None:
    (cut,) = metrics_of(run).barge_ins
    assert run.heard is not None
    heard = np.flatnonzero(run.heard)
    last_before_next_reply = heard[(heard > 5 * RATE) & (heard < 7.9 * RATE)][-1] / RATE
    assert cut.silent_at == pytest.approx(last_before_next_reply, abs=2 / RATE)
    assert voiced(mic)[voiced(mic) > 5 * RATE][0] / RATE == STOP_ONSET_S
    assert cut.onset_at == pytest.approx(STOP_ONSET_S, abs=0.015)
    assert cut.onset_to_silence_ms == pytest.approx((cut.silent_at - STOP_ONSET_S) * 1000, abs=15)
    assert cut.reaction_ms == pytest.approx(5.0)  # trigger → silence: the fade
    assert cut.audio_end_ms == cut.applied_ms and cut.audio_end_ms is not None
    assert cut.cut_error_ms is not None and -1.0 < cut.cut_error_ms <= 0.0
    (barge,) = [e for e in run.events if isinstance(e, BargeIn)]
    assert (cut.heard_ms, cut.received_ms, cut.audio_end_ms) == (barge.heard_ms, barge.received_ms, barge.audio_end_ms)


def test_turn_metrics_events_and_the_report_agree(run: ReplayResult) -> None:
    metrics = metrics_of(run)
    published = [e.turn for e in run.events if isinstance(e, TurnMetrics)]
    # the interrupted turn once its cut was silent, the last one when the session closed
    assert published == list(metrics.turns)
    assert metrics.turns[0].barge_ins == 1 and metrics.turns[1].barge_ins == 0
    assert [t.statuses for t in metrics.turns] == [("cancelled",), ("completed",)]
    (heard,) = [e for e in run.events if isinstance(e, HeardTranscript)]
    assert heard.text == metrics.barge_ins[0].heard_text and heard.estimate


def test_underruns_are_counted_per_turn(mic: np.ndarray) -> None:
    require_tool("espeak-ng")
    starved = replay_fast(mic, scenario=LONG, voice="espeak", speed=0.5)  # the server streams at half real time
    metrics = metrics_of(starved)
    assert metrics.underruns == starved.underrun_events > 0
    assert sum(t.underruns for t in metrics.turns) == metrics.underruns
    assert sum(t.underrun_ms for t in metrics.turns) == pytest.approx(metrics.underrun_ms)


def test_the_clients_share_grows_by_the_device_latency(mic: np.ndarray, run: ReplayResult) -> None:
    require_tool("espeak-ng")
    buffered = metrics_of(replay_fast(mic, scenario=LONG, voice="espeak", device_latency_s=0.1))
    plain = metrics_of(run)
    assert buffered.turns[0].first_delta_ms == pytest.approx(plain.turns[0].first_delta_ms, abs=1e-6)
    assert buffered.turns[0].client_ms == pytest.approx(plain.turns[0].client_ms + 100, abs=1e-6)
    assert buffered.barge_ins[0].in_device_ms > plain.barge_ins[0].in_device_ms


def test_aggregates_are_percentiles_over_turns_and_barge_ins(run: ReplayResult) -> None:
    metrics = metrics_of(run)
    latencies = sorted(t.reply_latency_ms for t in metrics.turns if t.reply_latency_ms is not None)
    agg = metrics.aggregates()["reply_latency_ms"]
    assert agg.count == len(latencies) == 2
    assert agg.p50 == pytest.approx((latencies[0] + latencies[1]) / 2)
    assert agg.min == latencies[0] and agg.max == latencies[-1]
    assert metrics.aggregates()["barge_in_reaction_ms"].p95 == pytest.approx(5.0)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([], 50, None), ([7.0], 95, 7.0), ([1.0, 2.0, 3.0, 4.0], 50, 2.5), ([4.0, 1.0, 3.0, 2.0], 95, 3.85),
     ([10.0, 20.0], 0, 10.0), ([10.0, 20.0], 100, 20.0)],
)
def test_percentile_interpolates_between_ranks(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == (None if expected is None else pytest.approx(expected))


def test_aggregate_skips_missing_figures() -> None:
    agg = aggregate([None, 3.0, None, 1.0])
    assert (agg.count, agg.p50, agg.min, agg.max) == (2, 2.0, 1.0, 3.0)
    assert aggregate([None]).count == 0 and aggregate([None]).p50 is None


# The tracker alone, fed plain lists: a playout read by hand, events and wire outputs built here.

PART = {"response_id": "resp_1", "output_index": 0, "item_id": "item_a", "content_index": 0}


RECEIVED = {("item_a", 0): 2400}  # what a protocol core would count of the deltas below (100 ms each)


def received(item_id: str, content_index: int) -> int:
    return RECEIVED.get((item_id, content_index), 0)


def effects(*events: object) -> CoreEffects:
    return CoreEffects(tuple(events))  # type: ignore[arg-type]


def test_a_turn_from_speech_to_the_first_heard_sample() -> None:
    playout = PlayoutBuffer()
    metrics = SessionMetrics(playout, received=received, silence_ms=500, padding_ms=300)
    metrics.input_sent(480, 0.02, connection="c1")  # the first block: input ms 0 is listener time 0
    metrics.effects(effects(SpeechStarted(0.6, "item_u", 200)), 0.6)
    metrics.effects(effects(SpeechStopped(2.5, "item_u", 2490)), 2.5)  # the voice ended at 1.99 s
    metrics.effects(effects(ResponseStarted("resp_1", 2.5)), 2.5)
    delta = wire("response.output_audio.delta", **PART, delta=audio_b64(100))
    metrics.wire(delta, 2.55)
    playout.enqueue(np.ones(2400, np.int16), "item_a")
    playout.read_into(np.zeros(480, np.int16), 2.6)
    metrics.effects(effects(AssistantAudioStarted("item_a", 2.6, None)), 2.62)
    (turn,) = metrics.report(2.62).turns
    assert turn.speech_end_at == pytest.approx(1.99) and turn.speech_stopped_at == 2.5
    assert turn.reply_latency_ms == pytest.approx(610.0)
    assert (turn.first_delta_ms, turn.client_ms, turn.vad_ms) == (pytest.approx(560.0), pytest.approx(50.0),
                                                                    pytest.approx(510.0))
    (speech,) = metrics.report(2.62).speech
    assert (speech.start, speech.speech_start, speech.end, speech.speech_end) == (
        pytest.approx(0.2), pytest.approx(0.5), pytest.approx(2.49), pytest.approx(1.99))
    # nothing is published while the reply still plays or its response runs
    assert metrics.effects(effects(), 2.64) == []
    metrics.effects(effects(ResponseFinished("resp_1", "completed", None, 2.7)), 2.7)
    playout.read_into(np.zeros(2400, np.int16), 2.62)
    published = metrics.effects(effects(), 3.0)
    assert [type(e).__name__ for e in published] == ["TurnMetrics"]


def test_a_turn_after_the_microphone_was_gone_for_seconds_is_timed_from_its_capture() -> None:
    # the server counts the samples it was sent: while the microphone stream was down (ended, opened again
    # 12 s later) its count stood still, and its milliseconds after the gap are 12 s behind the clock
    playout = PlayoutBuffer()
    metrics = SessionMetrics(playout, received=received, silence_ms=500, padding_ms=300)
    for k in range(1, 51):  # 1 s of blocks, captured up to 1.0 s
        metrics.input_sent(480, k * 0.02, connection="c1")
    for k in range(1, 101):  # the stream back at 13.0 s: 2 s more
        metrics.input_sent(480, 13.0 + k * 0.02, connection="c1")
    metrics.effects(effects(SpeechStarted(13.6, "item_u", 1200)), 13.6)  # 0.2 s into the audio after the gap
    metrics.effects(effects(SpeechStopped(14.6, "item_u", 2490)), 14.6)  # the voice ended at 13.99 s
    metrics.effects(effects(ResponseStarted("resp_1", 14.6)), 14.6)
    metrics.wire(wire("response.output_audio.delta", **PART, delta=audio_b64(100)), 14.65)
    playout.enqueue(np.ones(2400, np.int16), "item_a")
    playout.read_into(np.zeros(480, np.int16), 14.7)
    metrics.effects(effects(AssistantAudioStarted("item_a", 14.7, None)), 14.72)
    (turn,) = metrics.report(14.72).turns
    assert turn.speech_end_at == pytest.approx(13.99)
    assert turn.reply_latency_ms == pytest.approx(710.0)  # not 12.7 s
    (speech,) = metrics.report(14.72).speech
    assert (speech.start, speech.end) == (pytest.approx(13.2), pytest.approx(14.49))


def test_input_positions_before_a_gap_keep_their_own_times() -> None:
    timeline = InputTimeline(RATE)
    assert timeline.at(0) is None
    timeline.sent_audio(4800, 0.2)  # 0–200 ms captured 0.0–0.2 s
    timeline.sent_audio(480, 0.2 + 0.02 + GAP_S / 2)  # jitter within GAP_S: the same stretch
    timeline.sent_audio(2400, 5.0)  # after a gap: 220–320 ms captured 4.9–5.0 s
    assert timeline.at(100) == pytest.approx(0.1)
    assert timeline.at(210) == pytest.approx(0.21)  # the stretch's own start, not the jittered block's
    assert timeline.at(220) == pytest.approx(4.9)
    assert timeline.at(300) == pytest.approx(4.98)
    timeline.sent_audio(480, 4.0)  # captured before the audio sent before it (a clock set back): a stretch of its own
    assert timeline.at(320) == pytest.approx(3.98)


def test_single_dropped_blocks_and_a_drifting_capture_clock_do_not_add_up() -> None:
    """Each block was compared with the one before: a hole of one 20 ms block was no gap, and eleven of them put the
    last sample of a minute 200 ms early; a clock drifting 100 ppm from the sample count was never followed."""
    dropping = InputTimeline(RATE)
    sent = 0
    for k in range(3000):  # a minute of 20 ms blocks, one in every 250 dropped before it was sent
        if k % 250 == 100:
            continue
        dropping.sent_audio(480, 0.02 * (k + 1))
        sent += 480
    assert dropping.at(sent * 1000 // RATE) == pytest.approx(60.0, abs=0.001)
    drifting = InputTimeline(RATE)
    for k in range(30_000):  # ten minutes, the capture clock 100 ppm fast
        drifting.sent_audio(480, 0.02 * (k + 1) * 1.0001)
    assert drifting.at(600_000) == pytest.approx(600.06, abs=GAP_S)


def test_input_stretches_kept_are_bounded_and_the_oldest_are_placed_from_what_is_kept() -> None:
    timeline = InputTimeline(RATE)
    for k in range(2000):  # every block after a gap
        timeline.sent_audio(480, k * 1.0 + 0.02)
    assert len(timeline._firsts) <= 512
    assert timeline.at(1999 * 20) == pytest.approx(1999.0)
    oldest = timeline.at(0)
    assert oldest is not None and oldest < 1999.0


def test_a_text_turn_has_no_speech_latency_and_tools_are_timed() -> None:
    metrics = SessionMetrics(PlayoutBuffer(), received=received)
    metrics.effects(effects(ResponseStarted("resp_1", 1.0)), 1.0)
    metrics.wire(wire("response.function_call_arguments.done", response_id="resp_1", output_index=0,
                      item_id="item_f", call_id="call_1", name="get_weather", arguments="{}"), 1.1)
    metrics.tool(ToolStarted("call_1", "get_weather", {}), 1.2)
    metrics.tool(ToolFinished("call_1", "get_weather", "{}", True, 0.3), 1.5)
    report = metrics.report(2.0)
    (turn,) = report.turns
    assert turn.reply_latency_ms is None and turn.speech_end_at is None and turn.response_ids == ("resp_1",)
    (tool,) = report.tools
    assert (tool.requested_at, tool.started_at, tool.finished_at, tool.ok) == (1.1, 1.2, 1.5, True)


def test_an_already_shorter_answer_moves_the_kept_ms_and_the_cut_error() -> None:
    playout = PlayoutBuffer()
    metrics = SessionMetrics(playout, received=received)
    metrics.wire(wire("response.output_audio.delta", **PART, delta=audio_b64(100)), 0.0)
    playout.enqueue(np.ones(2400, np.int16), "item_a")
    playout.read_into(np.zeros(960, np.int16), 0.0)
    cut = playout.interrupt(0.03, fade_ms=5.0)
    barge = BargeIn("interrupt", 0.03, "item_a", cut.heard_ms, 100.0, cut.audio_end_ms, (), True, 0.005, cut=cut)
    metrics.effects(effects(barge), 0.03)
    metrics.effects(effects(), 0.05)  # after the fade: the ledger is read again
    (record,) = metrics.report(0.05).barge_ins
    assert record.applied_ms == 35 and record.cut_error_ms == pytest.approx(35 - cut.heard_ms)
    metrics.effects(effects(CutAdjusted("item_a", 35, 30)), 0.06)
    (record,) = metrics.report(0.06).barge_ins
    assert record.audio_end_ms == 35 and record.applied_ms == 30
    assert record.cut_error_ms == pytest.approx(30 - cut.heard_ms)
    assert record.onset_at == 0.03 and record.reaction_ms == 5.0
    assert isinstance(cut, Cut)


def test_history_is_bounded() -> None:
    metrics = SessionMetrics(PlayoutBuffer(), received=received, keep=3)
    for n in range(10):
        metrics.effects(effects(SpeechStopped(float(n), f"item_{n}", None)), float(n))
    assert [t.index for t in metrics.report(10.0).turns] == [6, 7, 8, 9]  # three kept, and the open one


def test_a_sessions_history_by_default_is_hours_not_days() -> None:
    """10,000 records of each kind were kept: a kiosk's session of days held some 250,000 objects in them, and each
    full collection walked them all (34 ms four hours in, and growing)."""
    from voxline.session.metrics.tracker import KEEP

    metrics = SessionMetrics(PlayoutBuffer(), received=received)
    for n in range(KEEP + 50):
        metrics.effects(effects(SpeechStopped(float(n), f"item_{n}", None)), float(n))
    turns = metrics.report(float(KEEP + 50)).turns
    assert len(turns) == KEEP + 1 and turns[0].index == 49  # the newest KEEP, and the open one


def test_received_audio_is_read_from_its_owner_not_counted_again() -> None:
    """The protocol core keeps the one tally of received audio; the metrics read it."""
    tally = {("item_a", 0): 0}
    metrics = SessionMetrics(PlayoutBuffer(), received=lambda item, part: tally.get((item, part), 0))
    tally[("item_a", 0)] = 7200  # what the protocol core counted: 300 ms, whatever the delta holds
    metrics.wire(wire("response.output_audio.delta", **PART, delta=audio_b64(100)), 0.0)
    (item,) = metrics.report(0.0).items
    assert item.received_ms == pytest.approx(300.0)
