"""Open speakers: self-interruptions, real interruptions, latency, ERLE and CPU of the canceller and VAD.

Every replay is a lockstep ``voxline replay --fast`` of the ``long`` scenario (espeak voice)
with the listener's audio mixed back into the microphone through a room (:class:`RoomEcho`:
direct path at -6 dB after 30–120 ms, then a decaying tail). Per delay and canceller:

* **self-interruptions** — a spoken question, then the reply with nobody talking over it:
  every barge-in is the assistant hearing itself (goal 0);
* **double talk** — the same with a spoken "stop" over the reply at 4.0 s and, in a second
  run, at 7.0 s: the interruption must be detected; where the assistant had not cut itself
  before it (the reply the timeline analysis finds is the one cut), its cut error is ``audio_end_ms`` minus
  the reply length found in the heard timeline (``tests/support/heard.py``); *onset → silence* is the
  listener time of the last reply sample heard minus the true speech onset;
* **local VAD** — the double-talk runs with AEC3 and the local VAD (webrtcvad on the canceller's
  output, and its double-talk side on the raw microphone) against a server VAD that needs a
  louder voice (threshold 0.8), as a stand-in for a server whose ``speech_started`` arrives
  late over a network: the hold comes first.

* **no echo** (headphones) — the microphone hears only the user: ``examples/audio/barge_in.wav``
  (the ``default`` scenario, tone and espeak voices) and the double-talk timelines above, in
  lockstep, and ``barge_in.wav`` in real time (a ``RealClock``, the engine in process), each with
  no canceller, the bare AEC3 (before: it processes every block) and the gated AEC3 (after:
  it stands aside without an echo path), alone and with the local VAD; *lateness* is the
  barge-in's listener time minus that of the run with no canceller.

On the DSP alone (the reply's espeak speech as the far end, with and without near speech):
ERLE after 2 s and over everything, the near-speech level kept in double talk, CPU ms per
audio second of each canceller and VAD (median of rounds, ratio against a plain copy of the
same blocks measured in the same run).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from voxline.audio.aec import AecUnavailable, erle_db, make_canceller
from voxline.audio.double_talk import EchoBound
from voxline.audio.local_vad import LocalVad
from voxline.audio.reference import PlayedRing
from voxline.audio.room import RoomEcho
from voxline.audio.synth import synthesize
from voxline.audio.wavio import read_wav
from voxline.base.clock import RealClock
from voxline.realtime.server.engine.scenario import load_scenario
from voxline.session.events import AssistantAudioStarted, BargeIn, PlaybackHeld
from voxline.session.replay import engine_connector, replay_fast, run_replay
from voxline.session.settings import SessionSettings
from tests.support.heard import heard_length
from tests.support.speech import make_utterance, mix_timeline

from .common import MissingToolError, environment, format_table, require_tools, time_regions
from .record import add_output_arguments, finish, run_section

__all__ = ["main", "run", "section", "table"]

SCENARIO = load_scenario("long")
REPLY = SCENARIO.turns[0].outputs[0].text
QUESTION_AT = 0.5
STOPS = (4.0, 7.0)
RATE = 24_000
B = 480
CANCELLERS = ("none", "speex", "webrtc")
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "audio" / "barge_in.wav"
EXAMPLE_STOP = 6.0  # where "stop, wait a second" begins in it
REAL_TIME_ROUNDS = 2
NO_ECHO = {"off": (None, None), "bare AEC3": ("bare", None), "gated AEC3": ("gated", None),
           "bare AEC3 + local VAD": ("bare", "webrtc"), "gated AEC3 + local VAD": ("gated", "webrtc")}


def _replay(mic: np.ndarray, delay_ms: int, aec: str, *, local_vad: bool = False, late: bool = False,
            tail_s: float = 1.0) -> Any:
    settings = None
    if late:
        settings = SessionSettings(url="ws://local", api_key="local", turn_detection="server_vad", vad_threshold=0.8)
    return replay_fast(mic, scenario=SCENARIO, voice="espeak", tail_s=tail_s, settings=settings,
                       echo=RoomEcho(delay_ms, -6.0), aec=None if aec == "none" else aec,
                       local_vad="webrtc" if local_vad else None)


def _interruption(result: Any, stop_at: float, reply: np.ndarray) -> dict[str, Any]:
    """The barge-in for the "stop" at ``stop_at``: detected?, cut error, onset → silence."""
    real = [b for b in result.barge_ins if stop_at <= b.at <= stop_at + 0.6]
    out: dict[str, Any] = {"detected": bool(real), "self": len(result.barge_ins) - len(real), "measured": False}
    if not real:
        return out
    barge: BargeIn = real[0]
    starts = [e for e in result.events if isinstance(e, AssistantAudioStarted)]
    if result.barge_ins[0] is not barge or not starts or starts[0].item_id != barge.item_id:
        return out  # it had already cut itself: the reply heard is not the one the timeline analysis finds
    first = starts[0].at
    _onset, truth = heard_length(result.heard, reply)
    held = [e for e in result.events if isinstance(e, PlaybackHeld) and e.at <= barge.at]
    silent_at = first + barge.heard_ms / 1000  # the last reply sample the listener heard
    out |= {"measured": True, "trigger": barge.trigger, "cut_error_ms": round(abs((barge.audio_end_ms or 0) - truth * 1000 / RATE), 2),
            "onset_to_silence_ms": round((silent_at - stop_at) * 1000, 1),
            "held": bool(held)}
    return out


def replays(fx: dict[str, np.ndarray], delays: list[int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for delay in delays:
        for aec in CANCELLERS:
            alone = _replay(mix_timeline(12.0, [(QUESTION_AT, fx["question"])]), delay, aec)
            row: dict[str, Any] = {"delay_ms": delay, "aec": aec, "local_vad": False, "late_server": False,
                                   "self_interruptions": len(alone.barge_ins), "double_talk": []}
            for stop_at in STOPS:
                r = _replay(mix_timeline(10.0, [(QUESTION_AT, fx["question"]), (stop_at, fx["stop"])]), delay, aec)
                row["double_talk"].append({"stop_at": stop_at, **_interruption(r, stop_at, fx["reply"])})
            rows.append(row)
        for local in (False, True):  # a server VAD that hears speech later, without and with the local VAD
            row = {"delay_ms": delay, "aec": "webrtc", "local_vad": local, "late_server": True, "double_talk": []}
            alone = _replay(mix_timeline(12.0, [(QUESTION_AT, fx["question"])]), delay, "webrtc", local_vad=local,
                            late=True)
            row["self_interruptions"] = len(alone.barge_ins)
            row["false_holds"] = sum(isinstance(e, PlaybackHeld) for e in alone.events)
            for stop_at in STOPS:
                r = _replay(mix_timeline(10.0, [(QUESTION_AT, fx["question"]), (stop_at, fx["stop"])]), delay,
                            "webrtc", local_vad=local, late=True)
                row["double_talk"].append({"stop_at": stop_at, **_interruption(r, stop_at, fx["reply"])})
            rows.append(row)
    return rows


def _no_echo_run(samples: np.ndarray, scenario: Any, voice: str, aec: str | None, vad: str | None,
                 real_time: bool) -> Any:
    canceller = None if aec is None else make_canceller("webrtc", gated=aec == "gated")
    if not real_time:
        return replay_fast(samples, scenario=scenario, voice=voice, tail_s=1.0, aec=canceller, local_vad=vad)
    clock = RealClock()
    return asyncio.run(run_replay(samples, connector=engine_connector(scenario, clock, voice=voice), clock=clock,
                                  tail_s=1.0, aec=canceller, local_vad=vad))


def no_echo(fx: dict[str, np.ndarray], short: bool = False) -> list[dict[str, Any]]:
    """Barge-in lateness against no canceller where the microphone hears no echo (see the module docstring)."""
    example, _rate = read_wav(EXAMPLE)
    default = load_scenario("default")
    cases: list[tuple[str, str, str, np.ndarray, Any, float]] = [
        ("barge_in.wav", "tone", "lockstep", example, default, EXAMPLE_STOP),
        ("barge_in.wav", "espeak", "lockstep", example, default, EXAMPLE_STOP)]
    for stop_at in STOPS[:1] if short else STOPS:
        mic = mix_timeline(10.0, [(QUESTION_AT, fx["question"]), (stop_at, fx["stop"])])
        cases.append((f"\"stop\" at {stop_at:g} s over the long reply", "espeak", "lockstep", mic, SCENARIO, stop_at))
    if not short:
        cases.append(("barge_in.wav", "espeak", "real time", example, default, EXAMPLE_STOP))
    rows: list[dict[str, Any]] = []
    for name, voice, clock, mic, scenario, stop_at in cases:
        row: dict[str, Any] = {"recording": name, "voice": voice, "clock": clock, "stop_at": stop_at, "runs": {}}
        rounds = REAL_TIME_ROUNDS if clock == "real time" else 1
        for _round in range(rounds):  # real time: the rounds interleave the configurations
            for label, (aec, vad) in NO_ECHO.items():
                result = _no_echo_run(mic, scenario, voice, aec, vad, clock == "real time")
                row["runs"].setdefault(label, []).append(_detected(result, stop_at))
        off = row["runs"]["off"]
        row["late_ms"] = {label: _late(runs, off) for label, runs in row["runs"].items() if label != "off"}
        rows.append(row)
    return rows


def _detected(result: Any, stop_at: float) -> dict[str, Any] | None:
    """When the listener stopped hearing the reply for the interruption at ``stop_at``: the hold or the cut."""
    real = [b for b in result.barge_ins if stop_at <= b.at <= stop_at + 2.0]
    if not real:
        return None
    held = [e.at for e in result.events if isinstance(e, PlaybackHeld) and stop_at <= e.at <= real[0].at]
    return {"at_s": round(min([real[0].at, *held]), 4), "trigger": real[0].trigger, "held": bool(held),
            "audio_end_ms": real[0].audio_end_ms}


def _late(runs: list[dict[str, Any] | None], off: list[dict[str, Any] | None]) -> float | None:
    """Median over rounds of the detection time minus that of the same round with no canceller, ms."""
    pairs = [(r["at_s"] - o["at_s"]) * 1000 for r, o in zip(runs, off) if r is not None and o is not None]
    return round(float(np.median(pairs)), 1) if len(pairs) == len(runs) else None


def _echo_of(far: np.ndarray, delay_ms: int) -> np.ndarray:
    ring, room = PlayedRing(), RoomEcho(delay_ms, -6.0)
    mic = np.zeros_like(far)
    for s in range(0, len(far) - B + 1, B):
        ring.write(s / RATE, far[s : s + B])
        mic[s : s + B] = np.clip(np.rint(room.echo(ring, s, B)), -32768, 32767)
    return mic


def _run_aec(name: str, mic: np.ndarray, far: np.ndarray) -> np.ndarray:
    aec = make_canceller(name, gated=False)
    return np.concatenate([aec.process(mic[s : s + B], far[s : s + B]) for s in range(0, len(mic) - B + 1, B)])


def dsp(fx: dict[str, np.ndarray], delays: list[int], rounds: int) -> dict[str, Any]:
    far = fx["reply"][: len(fx["reply"]) // B * B]
    near = np.zeros_like(far)
    at = 5 * RATE
    near[at : at + len(fx["stop"])] = fx["stop"][: len(near) - at]
    span = slice(at, at + len(fx["stop"]))
    out: dict[str, Any] = {"erle": {}, "near_kept_db": {}}
    for name in CANCELLERS[1:]:
        for delay in delays:
            echo = _echo_of(far, delay)
            clean = _run_aec(name, echo, far)
            both = _run_aec(name, np.clip(echo.astype(np.int32) + near, -32768, 32767).astype(np.int16), far)
            key = f"{name}@{delay}ms"
            out["erle"][key] = {"after_2s_db": round(erle_db(echo[2 * RATE :], clean[2 * RATE :]), 1),
                                "all_db": round(erle_db(echo, clean), 1)}
            # near speech in the output over its own span, against the near speech itself (0 dB: all kept)
            out["near_kept_db"][key] = round(-erle_db(near[span], both[span]), 1)
    seconds = len(far) / RATE
    echo = _echo_of(far, 60)

    def blocks(process: Any) -> None:
        for s in range(0, len(far) - B + 1, B):
            process(echo[s : s + B], far[s : s + B], s)

    def copy(m: np.ndarray, r: np.ndarray, s: int) -> None:
        m.copy()

    regions: dict[str, Any] = {"copy": lambda: blocks(copy)}
    for name in CANCELLERS[1:]:
        regions[f"aec_{name}"] = lambda name=name: blocks(lambda m, r, s, a=make_canceller(name, gated=False):
                                                          a.process(m, r))
    regions["aec_webrtc_gated"] = lambda: blocks(lambda m, r, s, a=make_canceller("webrtc"): a.process(m, r))
    for backend in ("webrtc", "silero"):  # on the canceller's output alone
        regions[f"vad_{backend}"] = lambda b=backend: blocks(lambda m, r, s, v=LocalVad(b, double_talk=False):
                                                             v.process(m, r, s))
    # and with the double-talk side on the raw microphone (the session's default)
    regions["vad_webrtc_double_talk"] = lambda: blocks(lambda m, r, s, v=LocalVad("webrtc"): v.process(m, r, s, raw=m))
    regions["double_talk"] = lambda: blocks(lambda m, r, s, d=EchoBound(): d.process(m, r))
    timed = time_regions(regions, rounds)
    base = timed["copy"][0]
    out["cpu_ms_per_audio_s"] = {k: round(cpu / 1e6 / seconds, 2) for k, (cpu, _w) in timed.items()}
    out["cpu_ratio_vs_copy"] = {k: round(cpu / base, 1) for k, (cpu, _w) in timed.items() if k != "copy"}
    return out


def run(delays: list[int] | None = None, rounds: int = 5, short: bool = False) -> dict[str, Any]:
    require_tools("espeak-ng", "sox")
    delays = delays or [30, 60, 90, 120]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache:
        fx = {"question": make_utterance("what is the weather like today", Path(cache)).samples,
              "stop": make_utterance("stop, wait a second", Path(cache)).samples,
              "reply": synthesize(REPLY, "espeak")}
    try:
        make_canceller("speex")
    except AecUnavailable as exc:
        raise MissingToolError(str(exc)) from None
    rows = replays(fx, delays)
    return {"method": __doc__.split("\n\n")[1].strip() if __doc__ else "", "environment": environment(),
            "delays_ms": delays, "echo_gain_db": -6.0, "replays": rows, "no_echo": no_echo(fx, short),
            "dsp": dsp(fx, delays, rounds),
            "elapsed_s": round(time.perf_counter() - start, 1)}


def section(short: bool = False) -> dict[str, Any]:
    """The ``open_speakers`` figures; ``short``: the 60 ms echo only, one timing round."""
    return run([60], 1, short=True) if short else run()


def table(result: dict[str, Any]) -> str:
    rows = []
    for r in result["replays"]:
        dt = r["double_talk"]
        caught = sum(d["detected"] for d in dt)
        found = [d for d in dt if d["measured"]]
        name = r["aec"] + (" + local VAD" if r["local_vad"] else "") + (", late server" if r["late_server"] else "")
        rows.append([f"{r['delay_ms']} ms", name,
                     str(r["self_interruptions"]), f"{caught}/{len(dt)}",
                     str(sum(d["self"] for d in dt)),
                     "/".join(d.get("trigger", "-") for d in dt if d["detected"]) or "-",
                     " ".join(f"{d['cut_error_ms']:.1f}" for d in found) or "-",
                     " ".join(f"{d['onset_to_silence_ms']:.0f}" for d in found) or "-"])
    head = ["echo delay", "canceller", "self-int.", "stops caught", "self in DT", "trigger", "cut err ms",
            "onset→silence ms"]
    d = result["dsp"]
    late = [[f"{r['recording']}, {r['voice']}, {r['clock']}",
             *("-" if r["late_ms"][k] is None else f"{r['late_ms'][k]:+.0f}" for k in list(NO_ECHO)[1:])]
            for r in result["no_echo"]]
    lines = [format_table(head, rows), "",
             format_table(["no echo: barge-in later than off, ms", *list(NO_ECHO)[1:]], late), "",
             format_table(["canceller@delay", "ERLE after 2 s dB", "ERLE all dB", "near kept dB"],
                          [[k, f"{v['after_2s_db']}", f"{v['all_db']}", f"{d['near_kept_db'][k]}"]
                           for k, v in d["erle"].items()]), "",
             format_table(["stage", "CPU ms per audio s", "× plain copy"],
                          [[k, f"{v}", f"{d['cpu_ratio_vs_copy'].get(k, 1.0)}"]
                           for k, v in d["cpu_ms_per_audio_s"].items()])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--delays", default="30,60,90,120", help="echo delays in ms, comma-separated")
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds for the CPU figures")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    try:
        delays = [int(x) for x in args.delays.split(",")]
    except ValueError:
        parser.error(f"--delays takes integers separated by commas, not {args.delays!r}")
    if args.rounds <= 0 or not delays or min(delays) < 0:
        parser.error("--rounds must be positive and --delays at least one delay >= 0 ms")
    done = run_section(lambda: run(delays, args.rounds), short=False)
    if "skipped" in done:
        print(f"bench_open_speakers: {done['skipped']}")
        return 2
    result = done["figures"]
    print(table(result))
    print(f"{len(result['replays'])} configurations in {result['elapsed_s']} s; written to "
          f"{finish(args, 'open_speakers', done)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
