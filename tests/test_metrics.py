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

from voxline.audio.voice import synthesize
from voxline.audio.wavio import read_wav
from voxline.realtime.server.scenario import load_scenario
from voxline.session.events import BargeIn, HeardTranscript, TurnMetrics
from voxline.session.metrics import MetricsReport, aggregate, percentile
from voxline.session.replay import ReplayResult, replay_fast
from tests.conftest import require_tool
from tests.heard import heard_length

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
    assert first.vad_ms == pytest.approx(500, abs=15)  # the server waits out its silence duration


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
    assert published and published[0] == metrics.turns[0]  # the interrupted turn, published when the user spoke
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
