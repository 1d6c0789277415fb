"""The benchmarks' core functions on tiny sizes: result structure and sanity, never speed."""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks import (
    bench_concurrent,
    bench_decode,
    bench_device,
    bench_duplex,
    bench_encode,
    bench_server,
    bench_truncation,
    concurrent_sessions,
    record,
    run_all,
)
from benchmarks.bench_truncation import METHODS, Case
from tests.support.ci import require_tool

pytestmark = pytest.mark.slow  # runs the benchmarks, some against a server process

CASES = [
    Case("wav", "WAV sink", 0.0, 4.0, (0.03, 0.5, 2.0)),
    Case("device_40ms", "device, 40 ms ahead (modelled)", 0.04, 4.0, (0.3, 1.5)),
    Case("wav_starved_x0.5", "WAV sink, server 0.5x", 0.0, 0.5, (0.3, 0.455)),
]


@pytest.fixture(scope="module")
def truncation() -> dict[str, Any]:
    require_tool("espeak-ng")
    require_tool("sox")
    return bench_truncation.run(CASES)


def rows(result: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [r for r in result["runs"] if r["case"].startswith(prefix)]


def test_truncation_result_has_every_case_and_method(truncation: dict[str, Any]) -> None:
    assert list(truncation["cases"]) == [c.name for c in CASES]
    assert len(truncation["runs"]) == sum(len(c.offsets) for c in CASES)
    for case in CASES:
        summary = truncation["cases"][case.name]
        assert summary["runs"] == len(case.offsets)
        for method in METHODS:
            assert set(summary["error_ms"][method]) == {"n", "max_ms", "median_ms", "mean_ms"}
    json.dumps(truncation)
    assert "WAV sink" in bench_truncation.table(truncation)


def test_the_ledger_matches_the_heard_samples_with_the_wav_sink(truncation: dict[str, Any]) -> None:
    for row in rows(truncation, "wav"):  # with and without starvation
        assert row["action"] == "truncate"
        assert row["errors_ms"]["ledger"] <= 10.0, row
    assert truncation["cases"]["wav"]["error_ms"]["ledger"]["max_ms"] <= 10.0


def test_truth_is_within_what_was_received(truncation: dict[str, Any]) -> None:
    for row in truncation["runs"]:
        low, high = row["truth_ms"]
        assert 0 < low <= high <= row["received_ms"] + 0.05, row
        assert row["values_ms"]["wall_clock"] <= row["received_ms"]
        assert row["values_ms"]["handed_to_device"] <= row["received_ms"]


def test_interruptions_land_where_they_were_placed(truncation: dict[str, Any]) -> None:
    for case in CASES:
        offsets = [r["offset_s"] for r in truncation["runs"] if r["case"] == case.name]
        assert all(abs(got - want) <= 0.03 for got, want in zip(offsets, case.offsets, strict=True)), offsets


def test_a_buffering_device_makes_the_baselines_overcount_but_not_the_ledger(truncation: dict[str, Any]) -> None:
    for row in rows(truncation, "device_40ms"):
        assert row["in_device_ms"] >= 20.0
        assert row["errors_ms"]["handed_to_device"] >= 20.0
        assert row["errors_ms"]["wall_clock"] >= 20.0
        assert row["errors_ms"]["ledger"] <= 10.0


def test_a_starved_playout_is_measured_in_and_out_of_gaps(truncation: dict[str, Any]) -> None:
    starved = rows(truncation, "wav_starved")
    assert {r["starved"] for r in starved} == {True, False}
    assert all(r["errors_ms"]["ledger"] <= 10.0 for r in starved)


def test_duplex_result_has_every_stage_for_both_paths(tmp_path: Path) -> None:
    result = bench_duplex.run(seconds=1.0, rounds=1)
    for clock in ("cpu_s_per_audio_s", "wall_s_per_audio_s"):
        for path in ("voxline", "baseline"):
            figures = result[clock][path]
            assert set(figures["stages"]) == set(bench_duplex.STAGES)
            assert all(v >= 0 for v in figures["stages"].values())
            assert figures["pipeline"] > 0
    assert result["parameters"]["deltas_per_s"] == 10
    assert result["parameters"]["appends_per_s"] == 50
    assert set(result["ratios_cpu"]) >= {"baseline_over_voxline_pipeline", "baseline_over_voxline_decode"}
    assert "voxline" in bench_duplex.table(result)
    out = tmp_path / "duplex.json"
    assert bench_duplex.main(["--seconds", "0.5", "--rounds", "1", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["parameters"]["seconds"] == 0.5


def test_duplex_paths_produce_the_same_audio() -> None:
    stream = bench_duplex.make_stream(0.5)
    bench_duplex.check_paths(stream)
    assert b"".join(bench_duplex.decode_voxline(stream)) == b"".join(stream.pcm)
    assert bench_duplex.playout(stream) == len(stream.out_blocks) * stream.block


def test_run_all_covers_every_benchmark() -> None:
    assert tuple(run_all.BENCHMARKS) == record.SECTIONS
    assert run_all.BENCHMARKS["decode"] is bench_decode and run_all.BENCHMARKS["concurrent"] is bench_concurrent
    for module in run_all.BENCHMARKS.values():
        assert callable(module.section) and callable(module.table) and callable(module.main)


def test_encode_paths_carry_the_same_audio_and_report_every_size(tmp_path: Path) -> None:
    result = bench_encode.run(rounds=1, repetitions=5)
    assert set(result["sizes"]) == {"20ms", "100ms"}
    for row in result["sizes"].values():
        assert set(row["us_per_frame"]) == {"stdlib", "sdk", "voxline"} and min(row["us_per_frame"].values()) > 0
    assert "std/vox" in bench_encode.table(result)
    out = tmp_path / "encode.json"
    assert bench_encode.main(["--rounds", "1", "--repetitions", "5", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["sizes"]["20ms"]["samples"] == 480


def test_a_benchmark_cli_updates_its_section_of_the_default_results_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXLINE_BENCH_OUT", str(tmp_path))
    assert bench_decode.main(["--rounds", "1", "--repetitions", "5"]) == 0
    assert bench_encode.main(["--rounds", "1", "--repetitions", "5"]) == 0
    data = record.load(tmp_path / "results.json")
    assert list(data["sections"]) == ["decode", "encode"] and record.problems(data) == []


def test_the_device_benchmark_skips_with_the_reason_without_pulseaudio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_device, "pulse_problem", lambda: "PulseAudio is not running")
    section = record.run_section(lambda: bench_device.section(short=True), short=True)
    assert section["skipped"] == "no PulseAudio virtual devices: PulseAudio is not running"


def test_the_truncation_device_rows_are_labelled_as_modelled() -> None:
    for case in bench_truncation.default_cases(3):
        assert case.modelled == (case.device_latency_s > 0) and ("(modelled)" in case.label) == case.modelled
    assert {c.name for c in bench_truncation.short_cases()} == {c.name for c in bench_truncation.default_cases()}


def test_server_benchmark_streams_replies_and_reports_every_figure(tmp_path: Path) -> None:
    frames = bench_server._frames(3.2)  # one turn: a second of speech, then silence long enough to reply
    assert bench_server.serve(2, frames) > 2 * 10  # VAD turns and streamed deltas, not just appends
    result = bench_server.run(sessions=2, seconds=1.0, rounds=1)
    assert result["server"]["cpu_ms_per_session_second"] > 0 and result["ids"]["speedup"] > 0
    assert result["vad"]["speedup"] > 0 and "sessions" in bench_server.table(result)
    assert bench_server.main(["--sessions", "1", "--seconds", "0.5", "--rounds", "1", "--out", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["sessions"] == 1



CONCURRENT_FIGURES = {
    "sessions", "failed", "failures", "barge_in_count_mismatch", "session_errors", "loop_lag", "probe_wakeups", "barge_in_lateness",
    "lateness_spread_ms", "barge_ins_compared", "sessions_underran", "underruns", "cuts", "session_seconds", "wall_s",
    "client_cpu_s", "server_cpu_s", "client_cpu_per_session_s", "server_cpu_per_session_s", "cores_share",
    "rss_per_session_mib", "server_survived", "load_before", "load_after",
}


def test_concurrent_sessions_against_a_separate_server_report_every_figure(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOXLINE_EVENT_LOOP", raising=False)  # the default loop, whatever the environment chose
    # two real-time sessions on the start of the recording (the question and the barge-in), short tail
    result = bench_concurrent.run((2,), seconds=7.0, tail_s=0.5, floor_at=(2,))
    assert set(result["machine"]) >= {"cpu_count", "platform", "python"}
    assert result["parameters"]["lockstep_barge_in_at_s"], "the lockstep run has a barge-in to compare against"
    assert result["parameters"]["event_loop"] == "asyncio"  # the loop voxline's commands run on, the server's too
    (figures,) = result["runs"]
    assert set(figures) == CONCURRENT_FIGURES
    assert record.gaps(result) == []
    assert figures["sessions"] == 2 and figures["failed"] == 0 and figures["server_survived"]
    assert figures["barge_ins_compared"] == 2 * len(result["parameters"]["lockstep_barge_in_at_s"])
    for name in ("loop_lag", "barge_in_lateness"):
        assert set(figures[name]) == {"p50_ms", "p99_ms", "max_ms"}
    assert figures["probe_wakeups"] > 0 and min(figures["loop_lag"].values()) >= 0
    assert figures["client_cpu_per_session_s"] > 0 and figures["server_cpu_per_session_s"] > 0
    assert len(figures["load_before"]) == len(figures["load_after"]) == 3
    json.dumps(result, allow_nan=False)
    assert "late p99 ms" in bench_concurrent.table(result)
    assert result["parameters"]["scenario"] == "long" and figures["cuts"]["checked"] == 2  # the hard case, WAVs checked
    assert figures["cuts"]["not_heard_audio"] == 0 and figures["cuts"]["max_error_samples"] <= 1
    (floor,) = result["floor"]
    assert floor["sessions"] == 2 and floor["failed"] == 0 and floor["frames_received"] > 0 and floor["voxline_ratio"] > 0
    around = floor["before_cpu_per_session_s"], floor["after_cpu_per_session_s"]  # the floor just before and after voxline's
    assert min(around) > 0 and floor["client_cpu_per_session_s"] == pytest.approx(sum(around) / 2, abs=1e-5)
    assert floor["session_seconds"] == 2 * 7.5 and "just before and after" in bench_concurrent.table(result)
    (lean,) = result["lean_floor"]  # the same frames through the leaner client
    assert lean["sessions"] == 2 and lean["failed"] == 0 and lean["frames_received"] > 0 and lean["audio_s_decoded"] > 0
    assert lean["floor_ratio"] > 0 and "lean bare receivers" in bench_concurrent.table(result)
    (both,) = result["side_by_side"]  # voxline's sessions and the bare receivers at once
    mine, bare = both["voxline"], both["bare"]
    assert both["sessions"] == 2 and mine["failed"] == bare["failed"] == 0 and bare["frames_received"] > 0
    assert both["voxline_ratio"] == round(mine["client_cpu_per_session_s"] / bare["client_cpu_per_session_s"], 2) > 0
    shared = min(mine["ended_at"], bare["ended_at"]) - max(mine["began_at"], bare["began_at"])
    assert shared >= 0.9 * min(mine["ended_at"] - mine["began_at"], bare["ended_at"] - bare["began_at"])
    assert both["server_cpu_per_session_s"] > 0 and "side by side at N = 2" in bench_concurrent.table(result)
    assert set(result["knee"]) in ({"largest_n_meeting_goal"}, {"largest_n_meeting_goal", "degrades_at", "why"})


def test_the_knee_is_the_largest_n_whose_every_run_meets_the_goal() -> None:
    def run(n: int, lag: float, underran: int = 0) -> dict[str, Any]:
        return {"sessions": n, "failed": 0, "barge_in_count_mismatch": 0, "server_survived": True,
                "loop_lag": {"p99_ms": lag}, "lateness_spread_ms": 10.0, "sessions_underran": underran,
                "cuts": {"not_heard_audio": 0, "max_error_samples": 0}, "cores_share": 0.3}

    runs = [run(50, 3.0), run(50, 4.0), run(100, 5.0), run(100, 25.0), run(150, 5.0)]
    assert bench_concurrent.knee(runs) == {"largest_n_meeting_goal": 50, "degrades_at": 100,
                                           "why": ["run 2: lag p99 25.0 ms"]}
    missed = [run(50, 3.0), run(100, 25.0, underran=2), run(100, 3.0), run(100, 3.0, underran=1)]
    assert bench_concurrent.knee(missed)["why"] == ["run 1: lag p99 25.0 ms, 2 sessions underran",
                                                    "run 3: 1 session underran"]
    assert bench_concurrent.knee([run(50, 3.0)]) == {"largest_n_meeting_goal": 50}
    assert bench_concurrent.knee([run(50, 30.0)])["largest_n_meeting_goal"] == 0


def test_concurrent_percentiles_of_nothing_are_not_a_number() -> None:
    assert all(math.isnan(v) for v in bench_concurrent.percentiles([]).values())
    assert bench_concurrent.percentiles([0.001, 0.002, 0.003]) == {"p50_ms": 2.0, "p99_ms": 2.98, "max_ms": 3.0}


def test_concurrent_session_counts_are_validated() -> None:
    with pytest.raises(SystemExit):
        bench_concurrent.main(["--sessions", "ten"])
    with pytest.raises(SystemExit):
        bench_concurrent.main(["--sessions", "0"])
    with pytest.raises(SystemExit):
        bench_concurrent.main(["--liveness-timeout", "-1"])


def test_a_lever_is_measured_with_its_former_and_new_path_at_once() -> None:
    from voxline.audio.wavio import read_wav

    from benchmarks.concurrent_at_once import run_levers_at_once

    samples, _rate = read_wav(concurrent_sessions.RECORDING)
    with concurrent_sessions.Server(workload=concurrent_sessions.Workload().resolved()) as server:
        pair = run_levers_at_once(server.url, 2, samples[: 24_000 * 7], 0.5, ("idle_sleep",))
    former, new = pair["former"], pair["new"]
    assert pair["levers_off"] == ["idle_sleep"] and former["failed"] == new["failed"] == 0
    assert former["session_seconds"] > 2 * 7 and new["session_seconds"] > 2 * 7
    assert pair["new_over_former"] == round(new["client_cpu_per_session_s"] / former["client_cpu_per_session_s"], 3)
    shared = min(former["ended_at"], new["ended_at"]) - max(former["began_at"], new["began_at"])
    assert shared >= 0.9 * min(former["ended_at"] - former["began_at"], new["ended_at"] - new["began_at"])


@pytest.mark.parametrize(("args", "said"), [
    (["--levers-off", "warp"], "--levers-off takes some of tick_gate, try_recv, barge_peek, idle_sleep, clock_read, "
                               "not 'warp'"),
    (["--levers-off", ""], "--levers-off takes some of"),
    (["--levers-off", "idle_sleep", "--repeat", "0"], "--repeat takes a count of at least 1, not 0"),
    (["--levers-off", "idle_sleep", "--sessions", "0"], "--sessions takes 1..2000, not 0"),
])
def test_the_levers_at_once_refuse_bad_requests(args: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import concurrent_at_once

    with pytest.raises(SystemExit) as exit_:
        concurrent_at_once.main(args)
    assert exit_.value.code == 2 and said in capsys.readouterr().err.strip().splitlines()[-1]


def test_the_hearing_benchmark_measures_every_system_in_every_condition() -> None:
    require_tool("espeak-ng")
    from benchmarks import bench_hearing

    result = bench_hearing.section(short=True)
    assert set(result["systems"]) == {"whisper", "whisper+phrases", "pocketsphinx", "pocketsphinx+grammar"}
    for figures in result["systems"].values():
        assert set(figures["conditions"]) == {"clean", "phone"}
        for f in figures["conditions"].values():
            assert 0 <= f["branch_right"] <= 1 and f["wer"] >= 0 and f["cpu_s_per_utterance"] > 0
    assert "| whisper+phrases | phone |" in bench_hearing.table(result)


def test_word_errors_count_substitutions_insertions_and_deletions() -> None:
    from benchmarks.bench_hearing import word_errors

    assert word_errors("what is the weather", "What is the weather?") == (0, 4)
    assert word_errors("what is the weather", "what the whether in") == (3, 4)
    assert word_errors("stop", "") == (1, 1)


def test_the_lever_benchmark_measures_each_lever_old_and_new() -> None:
    from benchmarks import bench_levers

    result = bench_levers.run(rounds=1)
    assert set(result["levers"]) == {"tick", "idle", "receive", "encode", "json", "outbox", "check"}
    for lever in result["levers"].values():
        assert lever["former_us"] > 0 and lever["new_us"] > 0 and lever["new_over_former"] > 0
    json.dumps(result, allow_nan=False)


@pytest.mark.slow
def test_the_nearest_peer_runs_its_own_sessions_against_the_same_server() -> None:
    from benchmarks import concurrent_peer
    from tests.support.real_clients import client_python

    python = client_python(concurrent_peer.PEER)  # built by .ci/install-clients; required in CI
    peer = bench_concurrent.peer_sessions(python, 2, concurrent_sessions.RECORDING, 3.0)
    assert peer["client"] == "openai-agents" and peer["sessions"] == 2 and peer["failed"] == 0, peer
    assert peer["events_read"] > 0 and peer["session_seconds"] == 6.0
    assert peer["client_cpu_per_session_s"] > 0 and peer["server_cpu_per_session_s"] > 0
    json.dumps(peer, allow_nan=False)


def test_voxline_and_the_nearest_peer_run_at_once_from_one_start() -> None:
    from voxline.audio.wavio import read_wav

    from benchmarks import concurrent_peer
    from tests.support.real_clients import client_python

    python = client_python(concurrent_peer.PEER)  # built by .ci/install-clients; required in CI
    samples, _rate = read_wav(concurrent_sessions.RECORDING)
    both = bench_concurrent.peer_at_once(2, samples[: 24_000 * 3], 0.5, python, concurrent_sessions.RECORDING,
                                         concurrent_sessions.Workload().resolved())
    mine, theirs = both["voxline"], both["peer"]
    assert mine["failed"] == theirs["failed"] == 0 and theirs["client"] == "openai-agents" and theirs["events_read"] > 0
    assert mine["session_seconds"] > 2 * 3
    assert both["voxline_ratio"] == round(mine["client_cpu_per_session_s"] / theirs["client_cpu_per_session_s"], 2)
    shared = min(mine["ended_at"], theirs["ended_at"]) - max(mine["began_at"], theirs["began_at"])
    assert shared >= 0.8 * min(mine["ended_at"] - mine["began_at"], theirs["ended_at"] - theirs["began_at"])
    json.dumps(both, allow_nan=False)


def test_each_client_lever_can_be_undone_alone() -> None:
    from types import SimpleNamespace

    from benchmarks.concurrent_levers import AlwaysOpenGate, hooks
    from benchmarks.concurrent_sessions import settings_for
    from voxline.audio.clocked_output import IDLE_S, ClockedOutput
    from voxline.base.clock import VirtualClock

    settings = settings_for("ws://127.0.0.1:9")
    for off in (("idle_sleep",), ("tick_gate",), ("idle_sleep", "tick_gate")):
        connector, on_session = hooks(off, settings)
        assert connector is None and on_session is not None
        session = SimpleNamespace(machine=SimpleNamespace(tick_gate=None), output=ClockedOutput(VirtualClock()))
        on_session(session)  # type: ignore[arg-type]
        assert (session.output._idle_s == 0.0) == ("idle_sleep" in off)
        assert session.output._idle_s in (0.0, IDLE_S)
        assert isinstance(session.machine.tick_gate, AlwaysOpenGate) == ("tick_gate" in off)
    with pytest.raises(ValueError, match="unknown levers"):
        hooks(("sleepless",), settings)


async def test_the_clock_lever_undone_asks_the_running_loop_at_every_read(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from benchmarks.concurrent_levers import clock_for
    from voxline.base.clock import RealClock

    asked: list[int] = []
    running = asyncio.get_running_loop

    def counted() -> asyncio.AbstractEventLoop:
        asked.append(1)
        return running()

    monkeypatch.setattr(asyncio, "get_running_loop", counted)
    former, new = clock_for(("clock_read",)), clock_for(())
    assert isinstance(former, RealClock) and type(new) is RealClock
    former.now(), new.now(), new.now()
    assert len(asked) == 1  # the former path's one read, none of the new one's


def test_a_bracketed_floor_is_the_mean_of_the_runs_around_voxlines_and_keeps_both() -> None:
    before = {"client_cpu_per_session_s": 0.004, "failed": 0, "failures": [], "sessions": 50, "frames_received": 9}
    after = {"client_cpu_per_session_s": 0.006, "failed": 1, "failures": ["OSError: x"], "sessions": 50,
             "frames_received": 10}
    floor = bench_concurrent.bracketed(before, after)
    assert floor["client_cpu_per_session_s"] == 0.005 and floor["failures"] == ["OSError: x"]
    assert (floor["failed_before"], floor["failed"]) == (0, 1)  # each run's, out of its own 50
    assert (floor["before_cpu_per_session_s"], floor["after_cpu_per_session_s"]) == (0.004, 0.006)
    assert floor["frames_received"] == 10  # the later run's own figures


def test_the_client_paths_are_put_back_after_they_were_measured() -> None:
    from benchmarks import concurrent_paths

    before = {name: owner.__dict__[attr] for name, (owner, attr) in concurrent_paths.PATHS.items()}
    figures = concurrent_paths.run_paths(2, seconds=7.0, tail_s=0.5)
    assert figures["failed"] == 0 and figures["client_us_per_session_s"] > 0
    paths = figures["paths"]
    assert set(paths) == set(concurrent_paths.PATHS)
    for name in ("output: a pass (its tick included)", "machine: a server event", "protocol: a frame parsed and checked",
                 "machine: a microphone block"):
        assert paths[name]["calls_per_session_s"] > 0 and paths[name]["us_per_session_s"] > 0, name
    # a path's own time is part of the client's: none can be more than all of it
    assert max(p["us_per_session_s"] for p in paths.values()) < figures["client_us_per_session_s"]
    assert {name: owner.__dict__[attr] for name, (owner, attr) in concurrent_paths.PATHS.items()} == before


def test_a_pair_run_at_once_stops_at_once_and_names_the_side_that_failed() -> None:
    from benchmarks.concurrent_at_once import at_once
    from tests.support import pair_sides

    def pair(left: Any, right: Any = pair_sides.reports_after_the_start, ready_s: float = 60.0) -> Any:
        return at_once({"left": (left, ("left",)), "right": (right, ("right",))}, run_s=1.0, ready_s=ready_s)

    with pytest.raises(RuntimeError, match=r"left: OSError: the server refused this side \(at pair_sides.py:\d+ "
                                           r"in fails_before_ready\)$"):
        pair(pair_sides.fails_before_ready)
    with pytest.raises(RuntimeError, match=r"the left side ended \(exit 3\) without a word"):
        pair(pair_sides.ends_without_a_word)
    with pytest.raises(RuntimeError, match=r"waited 10 s for the left side$"):  # the right one was ready
        pair(pair_sides.never_ready, ready_s=10.0)
    # a failure stops the pair without waiting for the other side: its set-up (stuck for 600 s, the pair giving
    # sides 200 s to get ready) or its run (600 s); each bound is well under what waiting would take
    began = time.monotonic()
    with pytest.raises(RuntimeError, match=r"left: OSError: the server refused this side"):
        pair(pair_sides.fails_before_ready, pair_sides.never_ready, ready_s=200.0)
    assert time.monotonic() - began < 100
    began = time.monotonic()
    with pytest.raises(RuntimeError, match=r"left: ConnectionResetError: the server went away mid-run"):
        pair(pair_sides.fails_after_the_start, pair_sides.runs_long_after_the_start)
    assert time.monotonic() - began < 300
    reports, _wall = pair(pair_sides.reports_after_the_start)
    assert reports == {"left": {"started": True}, "right": {"started": True}}


def _fake_peer(tmp_path: Path, body: str) -> Path:
    """An executable that stands in for the peer's interpreter (the arguments it is given are ignored)."""
    path = tmp_path / "fake-python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_a_peer_that_fails_before_it_is_ready_says_why_and_starts_nothing(tmp_path: Path) -> None:
    from benchmarks.concurrent_peer import run_peer_on_signal

    python = _fake_peer(tmp_path, "echo 'a warning first' >&2\necho 'boom: the server is not there' >&2\nexit 1\n")
    told: list[str] = []
    with pytest.raises(RuntimeError, match=r"openai-agents sessions failed \(exit 1\): boom: the server is not there"):
        run_peer_on_signal(python, 2, "ws://127.0.0.1:9", tmp_path / "x.wav", 1.0,
                           lambda: told.append("ready"), lambda: told.append("go"))
    assert told == []  # it never said it was ready: nothing started


def test_a_peer_says_ready_after_its_warnings_and_is_stopped_if_the_start_never_comes(tmp_path: Path) -> None:
    from benchmarks.concurrent_peer import run_peer_on_signal

    python = _fake_peer(tmp_path, "echo 'a warning first' >&2\necho ready >&2\nread line\n"
                                  "[ \"$line\" = go ] && echo '{\"client\": \"fake\"}'\n")
    told: list[str] = []
    figures = run_peer_on_signal(python, 2, "ws://127.0.0.1:9", tmp_path / "x.wav", 1.0,
                                 lambda: told.append("ready"), lambda: told.append("go"))
    assert figures == {"client": "fake"} and told == ["ready", "go"]

    pid_file = tmp_path / "pid"
    python = _fake_peer(tmp_path, f"echo $$ > {pid_file}\necho ready >&2\nexec sleep 600\n")

    def no_start() -> None:
        raise RuntimeError("no start signal came")

    with pytest.raises(RuntimeError, match="no start signal came"):
        run_peer_on_signal(python, 2, "ws://127.0.0.1:9", tmp_path / "x.wav", 1.0, lambda: None, no_start)
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(int(pid_file.read_text()), 0)


def test_the_benchmarks_run_on_the_loop_the_commands_run_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.concurrent_sessions import event_loop, run_on_command_loop
    from voxline.base.loop_runner import EVENT_LOOP_ENV, loop_name

    async def which() -> str:
        return loop_name(asyncio.get_running_loop())

    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    assert event_loop() == run_on_command_loop(which()) == "asyncio"
    monkeypatch.setenv(EVENT_LOOP_ENV, "uvloop")
    assert event_loop() == run_on_command_loop(which()) == "uvloop"
