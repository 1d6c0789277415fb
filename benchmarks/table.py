"""The README's benchmark tables, generated from ``benchmarks/results.json``.

``python3 -m benchmarks.table`` rewrites what lies between ``<!-- benchmarks:begin -->`` and
``<!-- benchmarks:end -->`` in README.md with :func:`render` of the tracked results file;
``--check`` only says whether the README is up to date (exit status 1 if not). The block is
never edited by hand: ``run_all --write-results`` regenerates it, and a test checks that it
equals what this module makes of the committed file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .record import ROOT, SECTIONS, TRACKED, load

__all__ = ["BEGIN", "END", "README", "block", "main", "render", "update_readme"]

README = ROOT / "README.md"
BEGIN, END = "<!-- benchmarks:begin -->", "<!-- benchmarks:end -->"
Figures = dict[str, Any]


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _head(*cells: str) -> list[str]:
    return [_row(*cells), _row(*("---" for _ in cells))]


def _mm(e: dict[str, Any]) -> str:
    return f"{e['max_ms']:.1f} / {e['median_ms']:.1f}"


def _span(lo: float, hi: float) -> str:
    """``lo–hi`` rounded to whole numbers, or the one number when they round alike."""
    a, b = f"{lo:.0f}", f"{hi:.0f}"
    return a if a == b else f"{a}–{b}"


def _x(value: float | None, how: str = "baseline ÷ voxline") -> str:
    return "—" if value is None else f"{how} {value:.2f}"


_SLOWER = "voxline ÷ baseline"


def _truncation(f: Figures) -> list[str]:
    runs = sum(c["runs"] for c in f["cases"].values())
    lines = [f"**Truncation error at barge-in**, lockstep replays ({runs} barge-ins over a "
             f"{f['reply_ms'] / 1000:.0f} s reply; error against the heard audio found in the output, max / median ms). "
             "*Modelled*: the output hands each block over that long before the listener hears it; the ledger is told the "
             "same latency.", "",
             *_head("output", "barge-ins", "voxline ledger", "wall clock since first delta", "samples handed to the device")]
    for c in f["cases"].values():
        e = c["error_ms"]
        lines.append(_row(c["label"], c["runs"], _mm(e["ledger"]), _mm(e["wall_clock"]), _mm(e["handed_to_device"])))
    return lines


def _device(f: Figures) -> list[str]:
    cuts = sum(c["cuts"] for c in f["cases"].values())
    lines = [f"**Truncation error on a real device** (PulseAudio's virtual speaker, {cuts} cuts of a chirp; error against "
             "where the recorded audio stops, max / median ms):", "",
             *_head("device", "cuts", "audio inside the device at the cut", "voxline ledger", "wall clock since handed over",
                    "samples handed to the device")]
    for c in f["cases"].values():
        lo, hi = c["in_device_ms"]
        e = c["error_ms"]
        lines.append(_row(c["label"], c["cuts"], f"{_span(lo, hi)} ms", _mm(e["ledger"]), _mm(e["wall_clock"]),
                          _mm(e["handed_to_device"])))
    return lines


def _costs(sections: dict[str, Any]) -> list[str]:
    """One table of per-event, per-second and per-session costs, each against its baseline of the same run."""
    rows: list[str] = []
    if (d := _figures(sections, "decode")) is not None:
        for size, r in d["sizes"].items():
            us = r["us_per_event"]
            rows.append(_row(f"decode one {size} `response.output_audio.delta`, µs", f"{us['voxline']:.2f}",
                             f"official SDK's `recv` {us['sdk']:.2f}", _x(r["sdk_over_voxline"])))
            rows.append(_row("", "", f"plain `json.loads` + `b64decode` {us['floor']:.2f}",
                             _x(round(us["floor"] / us["voxline"], 2))))
    if (e := _figures(sections, "encode")) is not None:
        for size, r in e["sizes"].items():
            us = r["us_per_frame"]
            rows.append(_row(f"encode one {size} `input_audio_buffer.append`, µs", f"{us['voxline']:.2f}",
                             f"`json.dumps` + `b64encode` {us['stdlib']:.2f}", _x(r["stdlib_over_voxline"])))
            rows.append(_row("", "", f"official SDK's send {us['sdk']:.2f}", _x(r["sdk_over_voxline"])))
    if (u := _figures(sections, "duplex")) is not None:
        cpu = u["cpu_s_per_audio_s"]
        rows.append(_row("full duplex (decode, playout, resample both ways, encode), % of one core per audio second",
                         f"{cpu['voxline']['pipeline'] * 100:.3f}%",
                         f"SDK decode + stdlib encode {cpu['baseline']['pipeline'] * 100:.3f}%",
                         _x(u["ratios_cpu"]["baseline_over_voxline_pipeline"])))
    if (s := _figures(sections, "server")) is not None:
        srv = s["server"]
        rows.append(_row(f"local server engine + JSON, CPU ms per session-second ({s['sessions']} sessions)",
                         f"{srv['cpu_ms_per_session_second']:.3f}", "—", "—"))
        rows.append(_row("server event id, µs", f"{s['ids']['factory_us_per_id']:.3f}",
                         f"`secrets.choice` per character {s['ids']['secrets_us_per_id']:.3f}", _x(s["ids"]["speedup"])))
        rows.append(_row("server VAD, µs per audio second", f"{s['vad']['vectorised_us_per_audio_second']:.1f}",
                         f"per-frame loop {s['vad']['loop_us_per_audio_second']:.1f}", _x(s["vad"]["speedup"])))
    if (t := _figures(sections, "setup")) is not None:
        labels = {"engine": "in-process engine, no socket", "server": "local server in this process, loopback",
                  "serve": "`voxline serve` process, loopback"}
        for name, r in t["servers"].items():
            rows.append(_row(f"session ready ({labels[name]}), ms median", f"{r['voxline_ready']['median_ms']:.2f}",
                             f"bare connection's first frame {r['bare_first_frame']['median_ms']:.2f}",
                             _x(r["voxline_over_bare"], _SLOWER)))
        st = t["serve_start"]
        rows.append(_row("`voxline serve` start to listening, ms median", f"{st['serve_listening']['median_ms']:.0f}",
                         f"`python -c pass` {st['bare_python']['median_ms']:.0f}", _x(st["serve_over_python"], "serve ÷ python")))
    if (m := _figures(sections, "memory")) is not None:
        r, h = m["rss_per_ready_session"], m["held_per_audio_second"]
        rows.append(_row(f"RSS per ready idle session ({r['sessions']} at once), KiB", f"{r['voxline_kib_per_session']:.1f}",
                         f"bare WebSocket {r['bare_kib_per_connection']:.1f}", _x(r["voxline_over_bare"], _SLOWER)))
        rows.append(_row("held per audio-second of a session: peak while running / kept in the result, bytes",
                         f"{h['peak_bytes_per_audio_s']} / {h['kept_bytes_per_audio_s']}",
                         f"the PCM itself {h['pcm_bytes_per_audio_s']}",
                         f"{_x(h['peak_over_pcm'], _SLOWER)} / {h['kept_over_pcm']:.2f}"))
        if (g := m.get("peak_rss_by_length")) is not None:
            first, last = g["runs"][0], g["runs"][-1]
            rows.append(_row(f"`replay --fast` peak RSS, {last['minutes']:g}-minute recording, MiB",
                             f"{last['peak_rss_mib']:.1f}", f"{first['minutes']:g}-minute {first['peak_rss_mib']:.1f}",
                             f"+{g['growth_mib']:.1f} MiB ({g['growth_mib_per_audio_hour']:.1f} per audio-hour)"))
            rows.append(_row("`replay --fast` throughput, audio seconds per CPU second",
                             " / ".join(f"{r['audio_s_per_cpu_s']:.0f}" for r in g["runs"]),
                             "recordings of " + " / ".join(f"{r['minutes']:g}" for r in g["runs"]) + " min", "—"))
    if not rows:
        return []
    return ["**Costs**, each against a baseline measured in the same run:", "",
            *_head("figure", "voxline", "baseline", "ratio"), *rows]


def _open_speakers(f: Figures) -> list[str]:
    delays = f["delays_ms"]
    by: dict[str, list[dict[str, Any]]] = {}
    for r in f["replays"]:
        name = {"none": "no canceller", "speex": "Speex", "webrtc": "WebRTC AEC3"}[r["aec"]]
        name += " + local VAD" if r["local_vad"] else ""
        name += ", server VAD needing a louder voice" if r["late_server"] else ""
        by.setdefault(name, []).append(r)
    lines = [f"**Open speakers** (lockstep, echo at {f['echo_gain_db']:g} dB after {' / '.join(map(str, delays))} ms; "
             "\"stop\" spoken over the reply at 4 s and 7 s):", "",
             *_head("canceller", "self-interruptions, reply alone", "\"stop\" caught", "cut error vs heard, max ms",
                    "true onset → silence, ms")]
    for name, rows in by.items():
        talk = [d for r in rows for d in r["double_talk"]]
        found = [d for d in talk if d["measured"]]
        cut = f"{max(d['cut_error_ms'] for d in found):.1f}" if found else "—"
        onset = (_span(min(d['onset_to_silence_ms'] for d in found), max(d['onset_to_silence_ms'] for d in found))
                 if found else "—")
        lines.append(_row(name, " / ".join(str(r["self_interruptions"]) for r in rows),
                          f"{sum(d['detected'] for d in talk)} of {len(talk)}", cut, onset))
    lines += _no_echo(f)
    cpu = f["dsp"]["cpu_ms_per_audio_s"]
    lines += ["", "CPU ms per audio second: " + ", ".join(f"{k} {v}" for k, v in cpu.items() if k != "copy")
              + f" (a plain copy of the same blocks: {cpu['copy']})."]
    return lines


def _no_echo(f: Figures) -> list[str]:
    rows = f.get("no_echo")
    if not rows:
        return []
    labels = [k for k in rows[0]["late_ms"]]

    def ms(v: float | None) -> str:
        return "—" if v is None else f"{v:+.0f}"

    return ["", "**No echo** (headphones: the microphone hears only the user): the interruption detected later "
            "than with no canceller, ms (bare AEC3: before, it processes every block; gated: after, it stands "
            "aside without an echo path):", "",
            *_head("recording", *labels),
            *(_row(f"{r['recording']}, {r['voice']} voice, {r['clock']}", *(ms(r["late_ms"][k]) for k in labels))
              for r in rows)]


def _concurrent(f: Figures) -> list[str]:
    p = f["parameters"]
    hard = "scenario" in p and p["scenario"] != "default"
    workload = (f"the `{p['scenario']}` scenario in the {p['server_voice']} voice at 4x real time"
                + (", every session writing its heard WAV" if p.get("heard_wavs") else "")) if hard else "short replies"
    lines = [f"**Concurrent real-time sessions** in one process against `voxline serve` in another (each replays "
             f"{p['recording']}, {p['recording_s']:.1f} s, in real time, barging in over {workload}; lateness "
             "against the lockstep run of the same recording; CPU per session-second as a share of one core):", "",
             *_head("round", "N", "failed", "loop lag p50 / p99 ms", "barge-in late p50 / p99 ms", "spread ms",
                    "underran", "client CPU", "server CPU", "cores busy", "RSS MiB per session",
                    "load 1 min before → after")]
    rounds = _rounds(f["runs"])
    for r, round_ in zip(f["runs"], rounds, strict=True):
        lag, late = r["loop_lag"], r["barge_in_lateness"]

        def pct(x: float | None) -> str:
            return "—" if x is None else f"{100 * x:.2f}%"

        def ms(d: dict[str, Any]) -> str:
            return "—" if d.get("p50_ms") is None else f"{d['p50_ms']:.1f} / {d['p99_ms']:.1f}"

        spread = r.get("lateness_spread_ms")
        cores = r.get("cores_share")
        lines.append(_row(round_, r["sessions"], r["failed"], ms(lag), ms(late), "—" if spread is None else f"{spread:.1f}",
                          r.get("sessions_underran", "—"), pct(r["client_cpu_per_session_s"]),
                          pct(r["server_cpu_per_session_s"]), "—" if cores is None else f"{100 * cores:.0f}%",
                          f"{r['rss_per_session_mib']:.2f}", f"{r['load_before'][0]:.2f} → {r['load_after'][0]:.2f}"))
    cores = f["machine"].get("cpu_count") or 1
    # a run's load average before it holds the benchmark's own previous run (a minute's average
    # of a client and a server that kept most of the cores busy): other work shows before the first
    first = f["runs"][0]["load_before"][0] if f["runs"] else 0.0
    if first > cores / 2:  # other work held the machine: lag, lateness and underruns are its too
        lines += ["", f"**Measured under load**: the machine's 1-minute load average was {first:.2f} on "
                      f"{cores} cores before the first run (other work was running); lag, lateness and underruns "
                      f"above are those of a machine already busy, not of the sessions alone. "
                      f"`python3 -m benchmarks.bench_concurrent --write-results` measures them again."]
    elif len(f["runs"]) > 1:
        lines += ["", f"The load average before the first run was {first:.2f} on {cores} cores; before later runs it "
                      "holds the benchmark's own previous run."]
    lines += _beside(f)
    if f.get("peer_missing"):
        lines += ["", f"{f['peer_missing']}."]
    if (k := f.get("knee")) is not None:
        goal = p["goal"]
        where = (f"; degradation begins at N = {k['degrades_at']} ({'; '.join(k['why'])})" if "degrades_at" in k
                 else "")
        lines += ["", f"Goal: loop lag p99 <= {goal['lag_p99_ms']:g} ms, lateness spread <= {goal['spread_ms']:g} ms, no "
                      f"underrun, no failure, every cut what was heard, client + server <= "
                      f"{100 * goal['cores_share']:.0f}% of the cores. Largest N meeting it in every run: "
                      f"{k['largest_n_meeting_goal'] or 'none'}{where}."]
    return lines


def _rounds(runs: list[dict[str, Any]]) -> list[int]:
    """Each run's round: the runs of one N come one per round, in order."""
    seen: dict[int, int] = {}
    out = []
    for r in runs:
        seen[r["sessions"]] = seen.get(r["sessions"], 0) + 1
        out.append(seen[r["sessions"]])
    return out


def _beside(f: Figures) -> list[str]:
    """The clients measured beside voxline's in each round, as one table: the bare receivers
    (`websockets` + `json` + `pybase64`), the lean ones, openai-agents' realtime sessions, and
    voxline's sessions and the bare receivers run at the same time."""
    floors, leans, peers = f.get("floor", []), f.get("lean_floor", []), f.get("peers", [])
    with_bare, with_peer = f.get("side_by_side", []), f.get("peers_at_once", [])
    if not (floors or leans or peers or with_bare or with_peer):
        return []
    mine = {(r["sessions"], k): r for r, k in zip(f["runs"], _rounds(f["runs"]), strict=True)}

    def by_round(entries: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
        return {(e["sessions"], k): e for e, k in zip(entries, _rounds(entries), strict=True)}

    floor, lean, peer, bare_at_once, peer_at_once = (by_round(floors), by_round(leans), by_round(peers),
                                                     by_round(with_bare), by_round(with_peer))

    def pct(e: dict[str, Any] | None) -> str:
        """A client's CPU, how many times the bare receivers' it is, and how many times it voxline's is."""
        if e is None:
            return "—"
        said = ([f"the mean of {100 * e['before_cpu_per_session_s']:.2f}% just before and "
                 f"{100 * e['after_cpu_per_session_s']:.2f}% just after"] if "before_cpu_per_session_s" in e else [])
        said += [f"{e['floor_ratio']}x the bare"] if e.get("floor_ratio") is not None else []
        said += [f"voxline {e['voxline_ratio']}x that"] if e.get("voxline_ratio") is not None else []
        said += [f"{e['failed']} failed"] if e.get("failed") else []
        return f"{100 * e['client_cpu_per_session_s']:.2f}%" + (f" ({'; '.join(said)})" if said else "")

    def together(e: dict[str, Any] | None, other: str) -> str:
        """voxline's client and the ``other`` one, run at the same time, and their ratio."""
        if e is None:
            return "—"
        failed = e["voxline"]["failed"] + e[other]["failed"]
        return (f"{100 * e['voxline']['client_cpu_per_session_s']:.2f}% / {100 * e[other]['client_cpu_per_session_s']:.2f}%"
                f" (**{e['voxline_ratio']}x**{f'; {failed} failed' if failed else ''})")

    bracketed = (", measured just before and just after voxline's sessions"
                 if any("before_cpu_per_session_s" in e for e in floors) else "")
    lines = ["", "Clients measured beside voxline's in the same rounds, CPU per session-second as a share of one core "
                 f"(bare receivers: `websockets` + `json` + `pybase64`, no playout{bracketed}; lean: the same work, each session "
                 "one `asyncio.Protocol` driving websockets' sans-I/O protocol; openai-agents' realtime sessions, "
                 "no playout" + ("; at once: voxline's sessions and another client's run at the same time, each "
                                 "client in its own process against one server, so both see the same host"
                                 if with_bare or with_peer else "")
             + "):", "",
             *_head("round", "N", "voxline's client", "bare receivers", "lean bare receivers", "openai-agents",
                    *(["at once: voxline / bare receivers"] if with_bare else []),
                    *(["at once: voxline / openai-agents"] if with_peer else []))]
    for key in sorted(set(floor) | set(lean) | set(peer) | set(bare_at_once) | set(peer_at_once),
                      key=lambda k: (k[1], k[0])):
        own = mine.get(key)
        lines.append(_row(key[1], key[0], "—" if own is None else f"{100 * own['client_cpu_per_session_s']:.2f}%",
                          pct(floor.get(key)), pct(lean.get(key)), pct(peer.get(key)),
                          *([together(bare_at_once.get(key), "bare")] if with_bare else []),
                          *([together(peer_at_once.get(key), "peer")] if with_peer else [])))
    return lines


def _figures(sections: dict[str, Any], name: str) -> Figures | None:
    section = sections.get(name)
    return None if section is None or "figures" not in section else section["figures"]


def _measured(sections: dict[str, Any]) -> list[str]:
    """When, where and under what load each section was measured."""
    first = next(iter(sections.values()))["measured"]["machine"]
    lines = [f"Measured on {first['cpu_model']}, {first['cores']} cores, {first['os']}, Python {first['python']}:", "",
             *_head("section", "date (UTC)", "commit", "load 1 / 5 / 15 min before → after", "host work ms", "time",
                    "note")]
    for name in SECTIONS:
        if (s := sections.get(name)) is None:
            lines.append(_row(name, "—", "—", "—", "—", "—", "not measured"))
            continue
        m = s["measured"]
        commit = (m["commit"] or "?")[:10] + (" + changes" if m["dirty"] else "")
        load = f"{' / '.join(f'{x:.2f}' for x in m['load_before'])} → {' / '.join(f'{x:.2f}' for x in m['load_after'])}"
        note = f"skipped: {s['skipped']}" if "skipped" in s else ("--short" if m["short"] else "")
        machine = m["machine"]
        if (machine["cpu_model"], machine["cores"], machine["os"]) != (first["cpu_model"], first["cores"], first["os"]):
            note = f"{note}; on {machine['cpu_model']}, {machine['cores']} cores".lstrip("; ")
        speed = (f"{m['reference_ms_before']:.0f} → {m['reference_ms_after']:.0f}" if "reference_ms_before" in m
                 else "—")  # sections measured before the host's speed was
        lines.append(_row(name, m["date"].replace("+00:00", ""), f"`{commit}`", load, speed, f"{m['elapsed_s']:.0f} s",
                          note))
    lines += ["", "Host work: the milliseconds the host took for a fixed piece of Python work (2,000 frames of "
              "100 ms of audio decoded from JSON and base64) before and after the section. Hosts of one kind differ "
              "in speed, and a shared one slows down: read CPU figures of two sections against it."]
    return lines


def render(data: dict[str, Any]) -> str:
    """The markdown block for ``data`` (a results document), without the markers."""
    sections = data["sections"]
    if not sections:
        return "No figures recorded yet: `python3 -m benchmarks.run_all --write-results`."
    parts: list[list[str]] = []
    makers: dict[str, Callable[[Figures], list[str]]] = {
        "truncation": _truncation, "device": _device, "open_speakers": _open_speakers, "concurrent": _concurrent}
    for name in ("truncation", "device"):
        if (f := _figures(sections, name)) is not None:
            parts.append(makers[name](f))
    if costs := _costs(sections):
        parts.append(costs)
    for name in ("open_speakers", "concurrent"):
        if (f := _figures(sections, name)) is not None:
            parts.append(makers[name](f))
    parts.append(_measured(sections))
    note = ("<!-- generated by `python3 -m benchmarks.table` from benchmarks/results.json "
            "(`python3 -m benchmarks.run_all --write-results` measures it again); do not edit by hand -->")
    return "\n\n".join([note, *("\n".join(p) for p in parts)])


def block(readme: str) -> tuple[int, int]:
    """Offsets of the text between the markers in ``readme``."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start or readme.count(BEGIN) != 1 or readme.count(END) != 1:
        raise ValueError(f"README.md needs exactly one {BEGIN} followed by one {END}")
    return start + len(BEGIN), end


def update_readme(readme: Path = README, results: Path = TRACKED) -> Path:
    """Rewrite the README's generated block from ``results``."""
    text = readme.read_text()
    start, end = block(text)
    readme.write_text(text[:start] + "\n" + render(load(results)) + "\n" + text[end:])
    return readme


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only check that README.md is up to date")
    args = parser.parse_args(argv)
    if args.check:
        text = README.read_text()
        start, end = block(text)
        if text[start:end] != "\n" + render(load(TRACKED)) + "\n":
            print("README.md's benchmark table differs from benchmarks/results.json: run python3 -m benchmarks.table",
                  file=sys.stderr)
            return 1
        print("README.md's benchmark table is up to date")
        return 0
    print(f"regenerated the benchmark table in {update_readme()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
