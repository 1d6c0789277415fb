"""EVENTS.jsonl lines come out in time order, each stamped with when it happened."""

from __future__ import annotations

import io
import json
import typing
from pathlib import Path

import pytest

from voxline.base.clock import VirtualClock
from voxline.base.errors import OutputError
from voxline.session.eventlog import FLUSH_EVERY_S, EventLog, cut_to_whole_lines, flushing
from voxline.session.lockstep import run_lockstep


def test_a_local_event_stamped_in_the_past_lands_among_the_wire_events_of_its_moment() -> None:
    now = [0.0]
    out = io.StringIO()
    log = EventLog(out, lambda: now[0], horizon_s=0.5)
    for t in (1.00, 1.02, 1.04):
        now[0] = t
        log.wire("in", json.dumps({"type": "response.output_audio.delta", "delta": "AAAA"}))
    log.local({"type": "AssistantAudioStarted", "at": 1.01}, at=1.01)  # noticed at 1.04, heard at 1.01
    now[0] = 3.0
    log.local({"type": "late"}, at=1.5)  # later than the horizon: stamped no earlier than what was written
    log.close()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["t_ms"] for line in lines] == [1000.0, 1010.0, 1020.0, 1040.0, 1500.0]
    assert lines[1]["event"]["type"] == "AssistantAudioStarted" and lines[1]["dir"] == "local"


def test_a_line_is_written_once_it_leaves_the_horizon_though_no_event_follows() -> None:
    """Before, held lines waited for the next event: a replay killed while a reply played over WebRTC (no events
    then), or after its input ended, had lost many seconds of its log, not at most its last one."""
    clock = VirtualClock()
    out = io.StringIO()
    log = EventLog(out, clock.now, horizon_s=1.0)

    async def main() -> tuple[str, str]:
        async with flushing(log, clock):
            log.wire("in", json.dumps({"type": "response.done"}))
            await clock.sleep(0.9)
            held = out.getvalue()
            await clock.sleep(0.1 + FLUSH_EVERY_S)
            return held, out.getvalue()

    held, written = run_lockstep(main(), clock)
    assert held == "" and json.loads(written)["event"]["type"] == "response.done"
    log.close()


def test_a_stamp_never_runs_backwards_and_close_writes_everything_held() -> None:
    now = [5.0]
    out = io.StringIO()
    log = EventLog(out, lambda: now[0], horizon_s=0.1)
    log.wire("out", json.dumps({"type": "a"}))
    now[0] = 6.0
    log.wire("out", json.dumps({"type": "b"}))  # flushes "a"
    log.local({"type": "old"}, at=4.0)  # before the last line written: stamped with that line's time
    assert [json.loads(line)["t_ms"] for line in out.getvalue().splitlines()] == [5000.0, 5000.0]
    log.close()  # "b" was held within the horizon; close writes it
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["t_ms"], line["event"]["type"]) for line in lines] == [(5000.0, "a"), (5000.0, "old"), (6000.0, "b")]


def test_a_frame_nested_too_deep_is_logged_as_unparsed_without_a_traceback() -> None:
    out = io.StringIO()
    log = EventLog(out, lambda: 1.0, horizon_s=0.0)
    for depth in (100_000, 900):  # deeper than the decoder takes; shallow enough to decode, too deep to walk
        log.wire("in", "[" * depth + "]" * depth)
    log.wire("in", '{"type": "after", "key": "sk-abcdefghijklmnopqrstuvwxyz0123"}')
    log.close()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"].get("unparsed", "")[:5] for line in lines[:2]] == ["[[[[[", "[[[[["]
    assert lines[2]["event"] == {"type": "after", "key": "[redacted]"}


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full (Linux has one)")
def test_a_log_on_a_full_disk_takes_every_event_and_names_its_file_on_closing() -> None:
    log = EventLog(Path("/dev/full"), lambda: 1.0, horizon_s=0.0)
    for n in range(3):  # a wire observer that raised would be logged with a traceback on every replay
        log.wire("in", json.dumps({"type": "event", "n": n}))
    log.local({"type": "BargeIn"})
    assert log.error is not None
    with pytest.raises(OutputError, match=r"^cannot write /dev/full: No space left on device$"):
        log.close()


def _audio_carriers() -> set[tuple[str, str]]:
    """(type, field) of every event, in both vocabularies and either direction, that carries base64 audio."""
    from voxline.realtime.events import client, registry
    from voxline.realtime.live import events as live

    models = [*client.CLIENT_EVENT_CLASSES, *registry.SERVER_EVENT_CLASSES.values(),
              *live._CLIENT_MODELS, *live._SERVER_MODELS, *live._SIDEBAND_ONLY]
    found = set()
    for model in models:
        (kind,) = typing.get_args(model.model_fields["type"].annotation)
        for name in ("audio", "delta"):
            field = model.model_fields.get(name)
            if field is not None and "audio" in kind and "transcript" not in kind and field.annotation in (str, "str"):
                found.add((kind, name))
    return found


def test_every_event_that_carries_audio_is_logged_with_its_length_only() -> None:
    carriers = _audio_carriers()
    assert {("input_audio_buffer.append", "audio"), ("session.output_audio.delta", "delta"),
            ("session.input_audio.append", "audio")} <= carriers  # the vocabularies were read
    out = io.StringIO()
    log = EventLog(out, lambda: 0.0, horizon_s=0.0)
    audio = "QUFB" * 600  # 1,800 bytes
    for kind, name in sorted(carriers):
        log.wire("in", json.dumps({"type": kind, name: audio, "event_id": "e"}))
    log.close()
    lines = [json.loads(line)["event"] for line in out.getvalue().splitlines()]
    assert len(lines) == len(carriers)
    for event in lines:
        name = next(n for k, n in carriers if k == event["type"])
        assert event[name] == "<1800 bytes of audio>", event["type"]


def test_an_items_audio_parts_are_logged_with_their_length_only() -> None:
    """A user turn sent again after a drop (conversation.item.create with an input_audio part) was logged whole."""
    out = io.StringIO()
    log = EventLog(out, lambda: 0.0, horizon_s=0.0)
    audio = "QUFB" * 600
    item = {"id": "u1", "type": "message", "role": "user",
            "content": [{"type": "input_audio", "audio": audio, "transcript": None}, {"type": "input_text", "text": "hi"}]}
    log.wire("out", json.dumps({"type": "conversation.item.create", "item": item}))
    log.wire("in", json.dumps({"type": "conversation.item.retrieved", "event_id": "e", "item": item}))
    log.close()
    for line in out.getvalue().splitlines():
        parts = json.loads(line)["event"]["item"]["content"]
        assert parts[0]["audio"] == "<1800 bytes of audio>" and parts[1] == {"type": "input_text", "text": "hi"}


def test_a_log_whose_disk_fills_mid_line_keeps_whole_lines_only(tmp_path: Path) -> None:
    """A write that fitted only in part (a full disk) left half a line at the end of the log: it is cut back to
    the last whole line. The limit on the file's size stands for the disk, in a process of its own."""
    import subprocess
    import sys

    script = f"""
import resource, signal
from pathlib import Path
from voxline.base.clock import VirtualClock
from voxline.base.errors import OutputError
from voxline.session.eventlog import FLUSH_EVERY_S, EventLog, flushing
from voxline.session.lockstep import run_lockstep
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (5000, 5000))
log = EventLog(Path({str(tmp_path / "events.jsonl")!r}), lambda: 0.0, horizon_s=0.0)
for n in range(200):
    log.wire("in", '{{"type": "response.output_text.delta", "delta": "' + "word " * (n % 7 + 3) + '"}}')
try:
    log.close()
except OutputError as exc:
    print(exc)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"cannot write {tmp_path / 'events.jsonl'}: File too large"
    text = (tmp_path / "events.jsonl").read_text(encoding="utf-8")
    assert text.endswith("\n") and 0 < len(text) <= 5000
    assert all(json.loads(line)["event"]["type"] == "response.output_text.delta" for line in text.splitlines())


def test_a_log_its_killed_writer_left_mid_line_is_cut_back_to_its_last_whole_line(tmp_path: Path) -> None:
    whole = "".join(json.dumps({"t_ms": n, "dir": "in", "event": {"type": "x" * 300}}) + "\n" for n in range(400))
    cases = {
        "mid_line": (whole + '{"t_ms": 400, "dir": "in", "ev', whole),
        "long_half_line": (whole + '{"t_ms": 400, "event": "' + "y" * 200_000, whole),  # past one block of the search
        "no_line_end": ('{"t_ms": 0, "di', ""),
        "whole": (whole, whole),
        "empty": ("", ""),
    }
    for name, (text, kept) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        cut_to_whole_lines(tmp_path / name)
        assert (tmp_path / name).read_text(encoding="utf-8") == kept, name
    cut_to_whole_lines(tmp_path / "missing")  # nothing there: nothing made
    assert not (tmp_path / "missing").exists()
