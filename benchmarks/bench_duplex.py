"""CPU cost of one second of full-duplex audio, as a fraction of one core.

The voxline path, per second of conversation with the assistant talking and the
microphone open at the same time:

* **decode** -- ``response.output_audio.delta`` frames: ``parse_server_event(text).audio``;
* **playout** -- :meth:`PlayoutBuffer.enqueue` of each delta, :meth:`PlayoutBuffer.read_into`
  in device-sized blocks (the ledger records every block);
* **resample out** -- 24 kHz → device rate, :class:`voxline.audio.resample.StreamResampler`, per block;
* **resample in** -- device rate → 24 kHz for the captured blocks;
* **encode** -- ``input_audio_buffer.append``: :meth:`RealtimeProtocol.append_audio` + ``data_to_send``.

The baseline shares the playout and resampling stages; it decodes as the official SDK's
``recv`` does (``construct_type_unchecked`` over ``RealtimeServerEvent``, ``base64.b64decode``)
and encodes with ``base64.b64encode`` + ``json.dumps``. The SDK's send path
(``maybe_transform`` + ``json.dumps``) is reported apart. Each stage runs over the whole
stream, and the interleaved pipeline as a whole, timed with ``time.process_time_ns`` (CPU)
and ``time.perf_counter_ns`` (wall). Run: ``python3 -m benchmarks.bench_duplex``.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union, cast

import numpy as np
from openai._models import construct_type_unchecked
from openai._types import omit
from openai._utils import maybe_transform, strip_not_given
from openai.types.realtime import RealtimeClientEventParam, RealtimeServerEvent
from openai.types.realtime.response_create_event_with_references_param import (
    ResponseCreateEventWithReferencesParam,
)

import voxline.realtime.events as ev
from voxline.audio.playout import PlayoutBuffer
from voxline.audio.resample import StreamResampler
from voxline.realtime.protocol import RealtimeProtocol

from .common import environment, format_table, ratio, speechlike, time_regions
from .record import add_output_arguments, measure_and_report

__all__ = ["STAGES", "TIMED", "Stream", "check_paths", "decode_sdk", "decode_voxline", "main", "make_stream",
           "playout", "run", "section", "table"]

RATE = 24_000
ITEM_S = 10  # one assistant item per 10 s of reply
_SDK_SEND_TYPE = Union[RealtimeClientEventParam, ResponseCreateEventWithReferencesParam]


@dataclass(frozen=True, eq=False)
class Stream:
    """Inputs for ``seconds`` of duplex audio, prepared outside the timed regions."""

    seconds: float
    device_rate: int
    block: int  # samples per device block at 24 kHz
    frames: list[str]  # server frames: response.output_audio.delta
    frame_items: list[str]
    pcm: list[bytes]  # the decoded deltas
    out_blocks: list[np.ndarray]  # 24 kHz blocks the output reads
    mic_blocks: list[np.ndarray]  # device-rate captured blocks
    appends: list[bytes]  # 24 kHz PCM16 for input_audio_buffer.append


def make_stream(seconds: float = 60.0, *, delta_ms: int = 100, block_ms: int = 10, append_ms: int = 20,
                device_rate: int = 48_000) -> Stream:
    """Frames shaped like the service's, device blocks and capture blocks for ``seconds`` of audio."""
    n = int(seconds * RATE)
    reply, mic = speechlike(n, RATE, seed=1), speechlike(n, RATE, seed=2)
    per_delta, block, per_append = RATE * delta_ms // 1000, RATE * block_ms // 1000, RATE * append_ms // 1000
    frames, items, pcm = [], [], []
    for i, k in enumerate(range(0, n, per_delta)):
        chunk = reply[k : k + per_delta].astype("<i2").tobytes()
        item = f"item_{k // (ITEM_S * RATE):020d}"
        delta = base64.b64encode(chunk).decode("ascii")
        event = {"type": "response.output_audio.delta", "event_id": f"event_{i:020d}", "response_id": "resp_0001",
                 "item_id": item, "output_index": 0, "content_index": 0, "delta": delta}
        frames.append(json.dumps(event, separators=(",", ":")))
        items.append(item)
        pcm.append(chunk)
    mic_device = StreamResampler(RATE, device_rate).process(mic, last=True)
    device_block = device_rate * block_ms // 1000
    return Stream(
        seconds, device_rate, block, frames, items, pcm,
        [reply[k : k + block] for k in range(0, n - block + 1, block)],
        [mic_device[k : k + device_block] for k in range(0, len(mic_device) - device_block + 1, device_block)],
        [mic[k : k + per_append].astype("<i2").tobytes() for k in range(0, n, per_append)],
    )


# ---------------------------------------------------------------------------- stages
def decode_one_voxline(text: str) -> bytes:
    """``parse_server_event(text).audio``: validated, typed, strict base64."""
    event = ev.parse_server_event(text)
    assert isinstance(event, ev.ResponseOutputAudioDelta)
    return event.audio


def decode_one_sdk(text: str) -> bytes:
    """The SDK's ``recv``: ``construct_type_unchecked`` over ``RealtimeServerEvent``, then base64."""
    event: Any = construct_type_unchecked(value=json.loads(text), type_=cast(Any, RealtimeServerEvent))
    return base64.b64decode(event.delta)


def append_stdlib(pcm: bytes) -> str:
    return json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode("ascii")})


def append_sdk_send(pcm: bytes) -> str:
    """What ``connection.input_audio_buffer.append(audio=...)`` serialises in the SDK."""
    event = strip_not_given({"type": "input_audio_buffer.append", "event_id": omit,
                             "audio": base64.b64encode(pcm).decode("ascii")})
    return json.dumps(maybe_transform(event, _SDK_SEND_TYPE))


def decode_voxline(s: Stream) -> list[bytes]:
    return [decode_one_voxline(text) for text in s.frames]


def decode_sdk(s: Stream) -> list[bytes]:
    return [decode_one_sdk(text) for text in s.frames]


def playout(s: Stream) -> int:
    """Enqueue each delta, then read the blocks it covers, as the output callback would."""
    buffer, out = PlayoutBuffer(), np.empty(s.block, dtype=np.int16)
    t, played, per_frame = 0.0, 0, max(1, len(s.pcm[0]) // 2 // s.block)
    for pcm, item in zip(s.pcm, s.frame_items, strict=True):
        buffer.enqueue(np.frombuffer(pcm, dtype="<i2"), item, 0)
        for _ in range(per_frame):
            buffer.read_into(out, t)
            t += s.block / RATE
            played += s.block
    return played


def resample_out(s: Stream) -> int:
    resampler = StreamResampler(RATE, s.device_rate)
    return sum(len(resampler.process(block)) for block in s.out_blocks)


def resample_in(s: Stream) -> int:
    resampler = StreamResampler(s.device_rate, RATE)
    return sum(len(resampler.process(block)) for block in s.mic_blocks)


def voxline_appender() -> Callable[[bytes], list[str]]:
    """``RealtimeProtocol.append_audio`` + ``data_to_send`` on one protocol core."""
    protocol = RealtimeProtocol()

    def append(pcm: bytes) -> list[str]:
        protocol.append_audio(pcm)
        return protocol.data_to_send()

    return append


def encode_voxline(s: Stream) -> list[str]:
    append = voxline_appender()
    return [text for pcm in s.appends for text in append(pcm)]


def encode_stdlib(s: Stream) -> list[str]:
    return [append_stdlib(pcm) for pcm in s.appends]


def encode_sdk_send(s: Stream) -> list[str]:
    return [append_sdk_send(pcm) for pcm in s.appends]


def _pipeline(s: Stream, decode: Callable[[str], bytes], encode: Callable[[bytes], object]) -> None:
    """Every stage interleaved at device-block pace, as one duplex session runs them."""
    buffer, block = PlayoutBuffer(), np.empty(s.block, dtype=np.int16)
    out_rs, in_rs = StreamResampler(RATE, s.device_rate), StreamResampler(s.device_rate, RATE)
    per_frame = max(1, len(s.pcm[0]) // 2 // s.block)
    per_append = max(1, len(s.appends[0]) // 2 // s.block)
    ticks = min(len(s.mic_blocks), len(s.frames) * per_frame)
    for k in range(ticks):
        if k % per_frame == 0:
            i = k // per_frame
            buffer.enqueue(np.frombuffer(decode(s.frames[i]), dtype="<i2"), s.frame_items[i], 0)
        buffer.read_into(block, k * s.block / RATE)
        out_rs.process(block)
        in_rs.process(s.mic_blocks[k])
        if k % per_append == 0 and k // per_append < len(s.appends):
            encode(s.appends[k // per_append])


def pipeline_voxline(s: Stream) -> None:
    _pipeline(s, decode_one_voxline, voxline_appender())


def pipeline_baseline(s: Stream) -> None:
    _pipeline(s, decode_one_sdk, append_stdlib)


TIMED: dict[str, Callable[[Stream], object]] = {
    "decode.voxline": decode_voxline, "decode.baseline": decode_sdk,
    "encode.voxline": encode_voxline, "encode.baseline": encode_stdlib, "encode.sdk_send": encode_sdk_send,
    "playout": playout, "resample_out": resample_out, "resample_in": resample_in,
    "pipeline.voxline": pipeline_voxline, "pipeline.baseline": pipeline_baseline,
}
STAGES = ("decode", "playout", "resample_out", "resample_in", "encode")


def check_paths(s: Stream) -> None:
    """Every decoder yields the same PCM, every encoder the same audio payload."""
    if not decode_voxline(s) == decode_sdk(s) == s.pcm:
        raise AssertionError("the decode paths disagree")
    encoders = (encode_voxline, encode_stdlib, encode_sdk_send)
    payloads = [[json.loads(text)["audio"] for text in encode(s)] for encode in encoders]
    if not payloads[0] == payloads[1] == payloads[2]:
        raise AssertionError("the encode paths disagree")


def measure(s: Stream, rounds: int) -> dict[str, dict[str, float]]:
    """Median CPU and wall seconds per audio second of every timed region."""
    timed = time_regions({name: functools.partial(fn, s) for name, fn in TIMED.items()}, rounds)
    per_s = 1e9 * s.seconds
    return {name: {"cpu": cpu / per_s, "wall": wall / per_s} for name, (cpu, wall) in timed.items()}


def _path(m: dict[str, dict[str, float]], path: str, clock: str) -> dict[str, Any]:
    stages = {st: m[f"{st}.{path}" if st in ("decode", "encode") else st][clock] for st in STAGES}
    return {"pipeline": round(m[f"pipeline.{path}"][clock], 7), "sum_of_stages": round(sum(stages.values()), 7),
            "stages": {st: round(v, 7) for st, v in stages.items()}}


def _ratios(m: dict[str, dict[str, float]]) -> dict[str, float]:
    cpu = {name: v["cpu"] for name, v in m.items()}
    return {
        "baseline_over_voxline_pipeline": ratio(cpu["pipeline.baseline"], cpu["pipeline.voxline"]),
        "baseline_over_voxline_decode": ratio(cpu["decode.baseline"], cpu["decode.voxline"]),
        "baseline_over_voxline_encode": ratio(cpu["encode.baseline"], cpu["encode.voxline"]),
        "sdk_send_over_voxline_encode": ratio(cpu["encode.sdk_send"], cpu["encode.voxline"]),
    }


def run(seconds: float = 60.0, rounds: int = 7, **stream: Any) -> dict[str, Any]:
    """Measure: the figures of the ``duplex`` section (seconds per audio second)."""
    s = make_stream(seconds, **stream)
    check_paths(s)
    m = measure(s, rounds)
    return {
        "benchmark": "CPU cost of one second of full-duplex audio",
        "method": f"median of {rounds} interleaved rounds over {seconds:g} s of audio; time.process_time_ns (cpu), "
                  "time.perf_counter_ns (wall); seconds per audio second (0.004 = 0.4% of one core)",
        "environment": environment(),
        "base64_backend": ev.BASE64_BACKEND,
        "parameters": {
            "seconds": seconds,
            "rounds": rounds,
            "device_rate": s.device_rate,
            "device_block_samples_24k": s.block,
            "deltas_per_s": round(len(s.frames) / seconds, 2),
            "appends_per_s": round(len(s.appends) / seconds, 2),
        },
        "cpu_s_per_audio_s": {path: _path(m, path, "cpu") for path in ("voxline", "baseline")},
        "wall_s_per_audio_s": {path: _path(m, path, "wall") for path in ("voxline", "baseline")},
        "sdk_send_encode_cpu_s_per_audio_s": round(m["encode.sdk_send"]["cpu"], 7),
        "ratios_cpu": _ratios(m),
    }


def section(short: bool = False) -> dict[str, Any]:
    """The ``duplex`` figures; ``short``: one round over 1 s of audio."""
    return run(1.0, 1) if short else run()


def table(result: dict[str, Any]) -> str:
    """Per-stage CPU µs per audio second and the totals as % of one core."""
    cpu, p, r = result["cpu_s_per_audio_s"], result["parameters"], result["ratios_cpu"]
    vox, base = cpu["voxline"], cpu["baseline"]
    rows = [[st, f"{vox['stages'][st] * 1e6:.0f}", f"{base['stages'][st] * 1e6:.0f}"] for st in STAGES]
    rows.append(["sum of stages", f"{vox['sum_of_stages'] * 1e6:.0f}", f"{base['sum_of_stages'] * 1e6:.0f}"])
    rows.append(["interleaved pipeline", f"{vox['pipeline'] * 1e6:.0f}", f"{base['pipeline'] * 1e6:.0f}"])
    sdk_send = result["sdk_send_encode_cpu_s_per_audio_s"] * 1e6
    return "\n".join([
        f"full-duplex audio, CPU µs per audio second ({p['deltas_per_s']:g} deltas/s in, "
        f"{p['appends_per_s']:g} appends/s out, device {p['device_rate']} Hz, base64: {result['base64_backend']})",
        format_table(["stage", "voxline", "baseline"], rows),
        f"voxline: {vox['pipeline'] * 100:.2f}% of one core ({vox['pipeline']:.4f} s per audio s); "
        f"baseline: {base['pipeline'] * 100:.2f}%; baseline/voxline {r['baseline_over_voxline_pipeline']}x "
        f"(decode {r['baseline_over_voxline_decode']}x, encode {r['baseline_over_voxline_encode']}x)",
        f"the SDK's send path for the same appends (maybe_transform + json.dumps): {sdk_send:.0f} µs per audio "
        f"second, {r['sdk_send_over_voxline_encode']}x voxline's encode",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=60.0, help="audio per timed pass")
    parser.add_argument("--rounds", type=int, default=7)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if not args.seconds > 0 or args.rounds <= 0:
        parser.error("--seconds and --rounds must be positive")
    measure_and_report(args, "duplex", lambda: run(args.seconds, args.rounds), table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
