"""What the local server hears: word error rate, phrase choice and time per utterance.

The utterances are a listening scenario's questions and commands, and some it does not listen
for, spoken by espeak-ng in three voices and heard in three conditions: clean (24 kHz, as made),
**phone** (G.711 μ-law at 8 kHz and back, as a SIP caller sounds) and **room** (a decaying
reverberant tail and white noise at 15 dB SNR, a deterministic stand-in for a far microphone).
No human recording ships with the project or any package it can install, so "recorded" here
means these degraded renderings; the README says so.

Systems, each measured in the same run:

* **whisper** -- the server's recogniser (Whisper tiny.en on CTranslate2, ``voxline[asr]``),
  free, and **whisper+phrases** steered by the scenario's phrases as previous text (what a
  listening scenario does);
* **pocketsphinx** -- the baseline: CMU PocketSphinx with the general English language model
  shipped in its wheel, and **pocketsphinx+grammar** constrained by a JSGF grammar of the
  scenario's phrases (its way of listening for them).

Figures: word error rate against the text spoken (for the constrained systems too, so it shows
what they miss), the share of utterances for which the scenario picks the right branch (or, for
the ones it does not listen for, none), and CPU-bound seconds per utterance on one thread.

Run: ``python3 -m benchmarks.bench_hearing`` (``--short``: three utterances, one voice).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import soxr

from voxline.audio.synth import synthesize
from voxline.base.audio_format import PCM16_24K, AudioFormat
from voxline.realtime.server.engine.wire_audio import from_pcm24k
from voxline.realtime.server.hearing.ears import load_ears
from voxline.realtime.server.hearing.phrases import first_heard, words

__all__ = ["BRANCHES", "UTTERANCES", "main", "run", "section", "table", "word_errors"]

BRANCHES: tuple[tuple[str, ...], ...] = (
    ("weather", "forecast", "temperature"),
    ("cancel my order", "cancel the order"),
    ("book a table",),
    ("what time",),
    ("stop", "wait a second"),
)
# (what is said, the branch it should pick or None)
UTTERANCES: tuple[tuple[str, int | None], ...] = (
    ("What is the weather in Paris?", 0),
    ("Could you tell me the forecast for tomorrow?", 0),
    ("What is the temperature outside?", 0),
    ("Please cancel my order.", 1),
    ("I would like to cancel the order I placed.", 1),
    ("Book a table for two at eight.", 2),
    ("Can you book a table for tonight?", 2),
    ("What time is it?", 3),
    ("Stop, wait a second.", 4),
    ("Stop talking please.", 4),
    ("Tell me a joke.", None),
    ("Thank you very much.", None),
)
VOICES = ("espeak", "espeak:en-gb+f3", "espeak:en-us+m3")
CONDITIONS = ("clean", "phone", "room")
RATE = 24000
Samples = npt.NDArray[np.int16]


def word_errors(said: str, heard: str) -> tuple[int, int]:
    """Word-level edit distance between ``said`` and ``heard``, and the number of words said."""
    ref, hyp = words(said), words(heard)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[len(hyp)], len(ref)


def render(text: str, voice: str, condition: str) -> tuple[bytes, AudioFormat]:
    """The utterance as wire bytes in the condition's format, with a little silence around it."""
    quiet = np.zeros(RATE // 4, np.int16)
    speech = np.concatenate([quiet, synthesize(text, voice), quiet]).astype(np.int16)
    if condition == "phone":
        ulaw = AudioFormat.from_wire({"type": "audio/pcmu"})
        return from_pcm24k(speech, ulaw), ulaw
    if condition == "room":
        rng = np.random.default_rng(7)
        n = RATE * 3 // 10  # a 300 ms tail, -12 dB below the direct path, decaying 60 dB
        tail = rng.standard_normal(n) * 10 ** (-12 / 20) * 10 ** (-3 * np.arange(n) / n)
        impulse = np.concatenate([[1.0], tail / np.sqrt(n)])
        wet = np.convolve(speech.astype(np.float64), impulse)[: speech.size]
        power = float(np.mean(wet[RATE // 4 : -RATE // 4] ** 2)) or 1.0
        noisy = wet + rng.standard_normal(wet.size) * np.sqrt(power / 10 ** (15 / 10))
        return np.clip(np.round(noisy), -32768, 32767).astype("<i2").tobytes(), PCM16_24K
    return speech.astype("<i2").tobytes(), PCM16_24K


Hear = Callable[[bytes, AudioFormat, Sequence[str]], str]


def _pocketsphinx(grammar: bool) -> Hear:
    from pocketsphinx import Decoder

    from voxline.realtime.server.engine.wire_audio import to_pcm

    decoder = Decoder(samprate=16000, loglevel="FATAL")
    if grammar:
        phrases = [p for branch in BRANCHES for p in branch]
        rule = " | ".join(f"( {' '.join(words(p))} )" for p in phrases)
        decoder.add_jsgf_string("phrases", f"#JSGF V1.0;\ngrammar phrases;\npublic <phrase> = {rule} ;\n")
        decoder.activate_search("phrases")

    def hear(audio: bytes, fmt: AudioFormat, phrases: Sequence[str]) -> str:
        pcm = to_pcm(audio, fmt).astype(np.float32)
        pcm16k = soxr.resample(pcm, fmt.rate, 16000) if fmt.rate != 16000 else pcm
        decoder.start_utt()
        decoder.process_raw(np.clip(pcm16k, -32768, 32767).astype(np.int16).tobytes(), full_utt=True)
        decoder.end_utt()
        hyp = decoder.hyp()
        return str(hyp.hypstr) if hyp is not None else ""

    return hear


def systems() -> dict[str, tuple[Hear, bool]]:
    """name -> (how it hears, whether it is given the scenario's phrases)."""
    ears = load_ears("on")
    assert ears is not None
    out: dict[str, tuple[Hear, bool]] = {"whisper": (ears.hear, False), "whisper+phrases": (ears.hear, True)}
    try:
        out["pocketsphinx"] = (_pocketsphinx(False), False)
        out["pocketsphinx+grammar"] = (_pocketsphinx(True), True)
    except ImportError:
        pass  # the baseline is a dev dependency; without it only the recogniser is measured
    return out


def run(utterances: Sequence[tuple[str, int | None]] = UTTERANCES, voices: Sequence[str] = VOICES,
        conditions: Sequence[str] = CONDITIONS) -> dict[str, Any]:
    phrases = [p for branch in BRANCHES for p in branch]
    rendered = [(text, branch, voice, condition, *render(text, voice, condition))
                for text, branch in utterances for voice in voices for condition in conditions]
    found = systems()
    found["whisper"][0](rendered[0][4], rendered[0][5], ())  # load the model outside the timing
    results: dict[str, Any] = {}
    for name, (hear, steered) in found.items():
        by_condition: dict[str, dict[str, float]] = {}
        samples: list[dict[str, Any]] = []
        for condition in conditions:
            errors = total = right = 0
            seconds = 0.0
            rows = [r for r in rendered if r[3] == condition]
            for text, branch, voice, _c, audio, fmt in rows:
                start = time.process_time()
                heard = hear(audio, fmt, phrases if steered else ())
                seconds += time.process_time() - start
                e, n = word_errors(text, heard)
                errors, total = errors + e, total + n
                right += first_heard(BRANCHES, heard) == branch
                if voice == voices[0] and len(samples) < 6:
                    samples.append({"said": text, "condition": condition, "heard": heard})
            by_condition[condition] = {"wer": round(errors / total, 3), "branch_right": round(right / len(rows), 3),
                                       "cpu_s_per_utterance": round(seconds / len(rows), 3), "utterances": len(rows)}
        results[name] = {"conditions": by_condition, "samples": samples}
    baseline = results.get("pocketsphinx+grammar")
    if baseline is not None:
        for name, result in results.items():
            result["branch_right_over_baseline"] = {
                c: round(v["branch_right"] / baseline["conditions"][c]["branch_right"], 2)
                if baseline["conditions"][c]["branch_right"] else None
                for c, v in result["conditions"].items()}
    return {"voices": list(voices), "conditions": list(conditions), "utterances": len(utterances),
            "systems": results}


def section(short: bool = False) -> dict[str, Any]:
    """The figures; ``short``: three utterances in one voice, clean and phone."""
    if short:
        return run(UTTERANCES[::4], VOICES[:1], ("clean", "phone"))
    return run()


def table(result: dict[str, Any]) -> str:
    lines = ["| system | condition | word error rate | right branch | CPU s / utterance |", "|---|---|---|---|---|"]
    for name, figures in result["systems"].items():
        for condition, f in figures["conditions"].items():
            lines.append(f"| {name} | {condition} | {f['wer']:.0%} | {f['branch_right']:.0%} | "
                         f"{f['cpu_s_per_utterance']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--short", action="store_true", help="three utterances, one voice (a check, not figures)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)
    result = section(args.short)
    print(table(result))
    if args.json:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
