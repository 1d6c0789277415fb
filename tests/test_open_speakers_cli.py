"""``voxline replay --echo/--aec/--local-vad`` as a user runs it, and the open-speaker benchmark's structure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.ci import IN_CI, require_tool
from tests.support.cli import EXAMPLE, one_line_error, voxline

pytestmark = pytest.mark.slow  # each test runs the installed voxline command


def barge_ins(log: Path) -> list[dict]:
    return [e["event"] for e in map(json.loads, log.read_text().splitlines()) if e["event"].get("type") == "BargeIn"]


def test_replay_with_echo_interrupts_itself_and_with_aec_it_does_not(tmp_path: Path) -> None:
    require_tool("espeak-ng")
    out, log = tmp_path / "heard.wav", tmp_path / "events.jsonl"
    plain = voxline("replay", str(EXAMPLE), "--fast", "--out", str(out), "--events", str(log))
    assert plain.returncode == 0, plain.stderr
    wanted = len(barge_ins(log))
    echo = voxline("replay", str(EXAMPLE), "--fast", "--echo", "60,-6", "--out", str(out), "--events", str(log))
    assert echo.returncode == 0, echo.stderr
    assert len(barge_ins(log)) > wanted  # the assistant heard itself
    fixed = voxline("replay", str(EXAMPLE), "--fast", "--echo", "60,-6", "--aec", "--local-vad",
                    "--out", str(out), "--events", str(log))
    assert fixed.returncode == 0, fixed.stderr
    assert len(barge_ins(log)) == wanted


@pytest.mark.parametrize(("args", "expected"), [
    (["--echo", "60"], "--echo takes DELAY_MS,GAIN_DB"),
    (["--echo", "5000,-6"], "--echo delay must be 1 to 1000 ms"),
    (["--aec", "nope"], "invalid choice"),
    (["--local-vad", "--grace-ms", "0"], "--grace-ms"),
])
def test_open_speaker_mistakes_are_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    run = voxline("replay", str(EXAMPLE), "--fast", *args, "--out", str(tmp_path / "h.wav"),
                  "--events", str(tmp_path / "e.jsonl"), timeout=60)
    assert expected in one_line_error(run)


def test_the_open_speaker_benchmark_reports_every_figure() -> None:
    require_tool("espeak-ng")
    require_tool("sox")
    from benchmarks import bench_open_speakers
    from voxline.audio.aec import AecUnavailable, make_canceller

    try:
        make_canceller("speex")  # .ci/install brings Debian's libspeexdsp1
    except AecUnavailable as exc:
        if IN_CI:
            raise
        pytest.skip(str(exc))
    result = bench_open_speakers.run([60], rounds=1, short=True)
    kinds = {(r["aec"], r["local_vad"], r["late_server"]) for r in result["replays"]}
    assert kinds == {("none", False, False), ("speex", False, False), ("webrtc", False, False),
                     ("webrtc", False, True), ("webrtc", True, True)}
    for row in result["replays"]:
        assert len(row["double_talk"]) == 2 and row["self_interruptions"] >= 0
    assert set(result["dsp"]["cpu_ms_per_audio_s"]) == {"copy", "aec_speex", "aec_webrtc", "aec_webrtc_gated",
                                                        "vad_webrtc", "vad_silero", "vad_webrtc_double_talk",
                                                        "double_talk"}
    no_echo = result["no_echo"]
    assert [(r["recording"], r["voice"], r["clock"]) for r in no_echo] == [
        ("barge_in.wav", "tone", "lockstep"), ("barge_in.wav", "espeak", "lockstep"),
        ("\"stop\" at 4 s over the long reply", "espeak", "lockstep")]
    for row in no_echo:  # before: the bare canceller is late; after: the gated one is not
        assert row["late_ms"]["bare AEC3"] >= 120 and abs(row["late_ms"]["gated AEC3"]) <= 20
    assert "no echo: barge-in later than off" in bench_open_speakers.table(result)
    assert set(result["dsp"]["erle"]) == {"speex@60ms", "webrtc@60ms"}
    assert "self-int." in bench_open_speakers.table(result)
