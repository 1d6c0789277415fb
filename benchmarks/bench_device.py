"""Truncation error on a real sound device: the ledger's cut against where the recorded audio stops.

The measured counterpart of ``bench_truncation``'s modelled device rows, the way
``tests/test_device_bargein.py`` checks it: a 3 s chirp plays through
:class:`~voxline.audio.device_speaker.SpeakerSink` into a private clone of PulseAudio's virtual
speaker while ``parec`` records its monitor; some time into each play the playout is cut
(5 ms fade) and the stream aborted and restarted. The recording alone says how much of each
play reached the speaker (where the chirp starts by correlation, where it stops by its last
loud sample). Against that length, per cut, in ms:

* **ledger** -- ``cut.heard_samples``, what voxline would send as ``audio_end_ms``;
* **wall clock** -- the time since the item was handed to the playout, capped at its length;
* **handed to device** -- heard plus what was already inside the device (``revoked_samples``).

For each stream latency PortAudio is asked for (``low``, ``high``, 150 ms, and ``low`` with the
device at 48 kHz behind the resampler). Without PulseAudio's virtual devices (``.ci/pulse-start``)
the section is recorded as skipped, with the reason. Run: ``python3 -m benchmarks.bench_device``.
"""

from __future__ import annotations

import argparse
from typing import Any

from tests.support.virtual_devices import CUT_AFTER, RATE, bursts, chirp, play_and_cut, private_devices, pulse_problem

from .common import Unavailable, format_table, stats
from .record import add_output_arguments, finish, run_section

__all__ = ["CONFIGS", "METHODS", "main", "measure", "run", "section", "table"]

SECONDS = 3.0
METHODS = ("ledger", "wall_clock", "handed_to_device")
# (name, label, latency asked of PortAudio, device rate or None for 24 kHz)
CONFIGS: tuple[tuple[str, str, str | float, int | None], ...] = (
    ("low", "PulseAudio, latency low", "low", None),
    ("high", "PulseAudio, latency high", "high", None),
    ("150ms", "PulseAudio, latency 150 ms", 0.15, None),
    ("low_48k", "PulseAudio, latency low, 48 kHz device", "low", 48000),
)


def measure(speaker: str, latency: str | float, device_rate: int | None,
            cut_after: tuple[float, ...]) -> list[dict[str, Any]]:
    """One series of cuts on ``speaker``: every method's value and error per cut."""
    played = play_and_cut(speaker, latency, device_rate, cut_after, SECONDS)
    found = bursts(played.recording, chirp(SECONDS), len(played.cuts))
    rows = []
    for cut, enqueued_at, (_start, recorded) in zip(played.cuts, played.enqueued_at, found, strict=True):
        values = {
            "ledger": cut.heard_samples,
            "wall_clock": min(round((cut.at - enqueued_at) * RATE), played.total),
            "handed_to_device": cut.heard_samples + cut.revoked_samples,
        }
        rows.append({
            "recorded_ms": round(recorded * 1000 / RATE, 3),
            "in_device_ms": round(cut.revoked_samples * 1000 / RATE, 3),
            "values_ms": {m: round(v * 1000 / RATE, 3) for m, v in values.items()},
            "errors_ms": {m: round(abs(v - recorded) * 1000 / RATE, 3) for m, v in values.items()},
        })
    return rows


def run(configs: tuple[tuple[str, str, str | float, int | None], ...] = CONFIGS,
        cut_after: tuple[float, ...] = CUT_AFTER) -> dict[str, Any]:
    """Every configuration on one pair of private devices: the figures of the ``device`` section."""
    if (problem := pulse_problem()) is not None:
        raise Unavailable(f"no PulseAudio virtual devices: {problem}")
    cases: dict[str, Any] = {}
    with private_devices() as devices:
        for name, label, latency, rate in configs:
            rows = measure(devices.speaker, latency, rate, cut_after)
            cases[name] = {
                "label": label,
                "latency": latency,
                "device_rate": rate or RATE,
                "cuts": len(rows),
                "in_device_ms": [min(r["in_device_ms"] for r in rows), max(r["in_device_ms"] for r in rows)],
                "error_ms": {m: stats([r["errors_ms"][m] for r in rows]) for m in METHODS},
                "runs": rows,
            }
    return {
        "benchmark": "truncation error on a real device",
        "method": f"a {SECONDS:g} s chirp through SpeakerSink into a PulseAudio null sink, cut after "
                  f"{', '.join(f'{x:g}' for x in cut_after)} s; error = |method - length found in the recording|",
        "cases": cases,
    }


def section(short: bool = False) -> dict[str, Any]:
    """The ``device`` figures; ``short``: latency ``low`` only, two cuts."""
    return run(CONFIGS[:1], CUT_AFTER[:2]) if short else run()


def table(result: dict[str, Any]) -> str:
    rows = []
    for case in result["cases"].values():
        lo, hi = case["in_device_ms"]
        cells = [f"{e['max_ms']:.1f} / {e['median_ms']:.1f}" for e in (case["error_ms"][m] for m in METHODS)]
        rows.append([case["label"], str(case["cuts"]), f"{lo:.0f}–{hi:.0f}", *cells])
    head = ["device", "cuts", "in device ms", "ledger max/med", "wall clock max/med", "handed max/med"]
    return "truncation error on a real device, ms (|method - recorded|, max / median)\n" + format_table(head, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    done = run_section(run, short=False)
    if "skipped" in done:
        print(f"bench_device: {done['skipped']}")
        finish(args, "device", done)
        return 2
    print(table(done["figures"]))
    print(f"written to {finish(args, 'device', done)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
