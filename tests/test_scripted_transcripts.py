"""Scripted input transcription: the scenario (or a replay sidecar) states what the user says.

The server does not recognise speech. With ``user_says`` the n-th committed user audio item
gets the n-th line as ``conversation.item.input_audio_transcription.delta`` events and
``.completed``; past the script it answers ``.failed`` as without one.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from openai import AsyncOpenAI

from voxline.audio.synth import synthesize
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.net.cli import config_from_args
from voxline.realtime.server.engine.scenario import load_scenario, parse_scenario, read_transcripts
from tests.support.oracle import WireRecorder
from tests.support.cli import EXAMPLE, voxline
from tests.support.engine_harness import Harness, only, silence, speech, types

KEY = "sk-transcripts-test"
SAYS = ["What is the weather in Paris?", "Thank you."]


def scripted(**extra: object) -> object:
    return parse_scenario({"turns": [{"say": "You said {user_text}."}], "user_says": SAYS, **extra})


def transcribing(h: Harness) -> None:
    h.update(audio={"input": {"transcription": {"model": "gpt-transcribe"}, "turn_detection": None}})


def commit_turn(h: Harness) -> list[dict[str, object]]:
    h.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(speech(0.5).tobytes()).decode()})
    return h.send({"type": "input_audio_buffer.commit"})


def test_each_committed_turn_gets_the_next_scripted_line_then_failed() -> None:
    h = Harness(scripted())
    transcribing(h)
    first, second, third = commit_turn(h), commit_turn(h), commit_turn(h)
    deltas = [e["delta"] for e in only(first, "conversation.item.input_audio_transcription.delta")]
    assert "".join(deltas) == SAYS[0] and len(deltas) == len(SAYS[0].split())
    (done,) = only(first, "conversation.item.input_audio_transcription.completed")
    assert done["transcript"] == SAYS[0] and done["item_id"] == first[0]["item_id"]
    usage = done["usage"]  # gpt-transcribe is billed by tokens: 10 audio tokens a second in, the text out
    assert usage["type"] == "tokens" and usage["input_tokens"] == usage["input_token_details"]["audio_tokens"] == 5
    assert usage["total_tokens"] == 5 + usage["output_tokens"] and usage["output_tokens"] > 0
    assert only(second, "conversation.item.input_audio_transcription.completed")[0]["transcript"] == SAYS[1]
    assert types(third)[-1] == "conversation.item.input_audio_transcription.failed"
    retrieved = h.send({"type": "conversation.item.retrieve", "item_id": first[0]["item_id"]})
    assert retrieved[0]["item"]["content"][0]["transcript"] == SAYS[0]


def test_whisper_1_reports_its_usage_as_seconds_of_audio() -> None:
    h = Harness(scripted())
    h.update(audio={"input": {"transcription": {"model": "whisper-1"}, "turn_detection": None}})
    (done,) = only(commit_turn(h), "conversation.item.input_audio_transcription.completed")
    assert done["usage"] == {"type": "duration", "seconds": 0.5}


def test_the_reply_can_echo_what_the_script_says_the_user_said() -> None:
    h = Harness(scripted())
    transcribing(h)
    commit_turn(h)
    events = h.send({"type": "response.create"}) + h.run()
    done = only(events, "response.output_audio_transcript.done")[0]
    assert done["transcript"] == f"You said {SAYS[0]}."


def test_without_transcription_in_the_session_nothing_is_transcribed_but_the_script_advances() -> None:
    h = Harness(scripted())
    assert not any("transcription" in t for t in types(commit_turn(h)))
    transcribing(h)
    assert only(commit_turn(h), "conversation.item.input_audio_transcription.completed")[0]["transcript"] == SAYS[1]


def test_server_vad_turns_are_transcribed_too() -> None:
    h = Harness(scripted())
    h.update(audio={"input": {"transcription": {"model": "gpt-transcribe"}}})
    events = h.feed(np.concatenate([silence(0.3), speech(0.8), silence(1.0)]))
    (done,) = only(events, "conversation.item.input_audio_transcription.completed")
    stopped = only(events, "input_audio_buffer.speech_stopped")[0]
    assert done["item_id"] == stopped["item_id"] and done["transcript"] == SAYS[0]


def test_a_bad_script_is_a_one_line_configuration_error(tmp_path: Path) -> None:
    for bad in ("hello", ["ok", ""], [1]):
        with pytest.raises(ConfigurationError, match="user_says"):
            parse_scenario({"turns": [{"say": "x"}], "user_says": bad})
    path = tmp_path / "t.txt"
    path.write_text("first line\n\n  second  \n", encoding="utf-8")
    assert read_transcripts(path) == ("first line", "second")
    with pytest.raises(ConfigurationError, match="cannot read transcripts"):
        read_transcripts(tmp_path / "missing.txt")


def test_a_turn_ends_at_a_line_end_only(tmp_path: Path) -> None:
    """A form feed, NEL, line or paragraph separator or file separator inside a line is part of the turn."""
    sidecar = tmp_path / "talk.txt"
    sidecar.write_bytes("one\x0ctwo\u0085three\nfour\u2028five\u2029six\x1cseven\r\neight\rnine\n".encode())
    assert read_transcripts(sidecar) == ("one\x0ctwo\u0085three", "four\u2028five\u2029six\x1cseven", "eight", "nine")


def test_files_saved_with_a_byte_order_mark_read_as_without_one(tmp_path: Path) -> None:
    """Notepad's UTF-8 starts with U+FEFF: a transcript must not begin with it, a TOML file must still parse."""
    sidecar = tmp_path / "talk.txt"
    sidecar.write_bytes("\ufeffhello there\r\nsecond\r\n".encode())
    assert read_transcripts(sidecar) == ("hello there", "second")
    scenario = tmp_path / "s.toml"
    scenario.write_bytes('\ufeffname = "bom"\n[[turns]]\nsay = "hi"\n'.encode())
    assert load_scenario(str(scenario)).name == "bom"


@pytest.mark.slow
async def test_the_sdk_sees_scripted_transcripts_over_websocket(tmp_path: Path) -> None:
    transcripts = tmp_path / "says.txt"
    transcripts.write_text("\n".join(SAYS) + "\n", encoding="utf-8")
    args = type("Args", (), {"host": "127.0.0.1", "port": 0, "api_key": KEY, "scenario": None, "voice": "tone",
                             "speed": float("inf"), "max_session_minutes": 60.0, "transcripts": transcripts})()
    config = config_from_args(args)
    assert config.transcripts == tuple(SAYS)
    recorder = WireRecorder()

    def on_wire(direction: str, text: str) -> None:
        recorder("out" if direction == "in" else "in", text)

    voice = synthesize("Hello there, what is the weather like?", "tone")
    audio = np.concatenate([np.zeros(12000, np.int16), voice, np.zeros(24000, np.int16)])
    async with serve(ServerConfig(**{**config.__dict__, "on_wire": on_wire})) as server:
        async with AsyncOpenAI(api_key=KEY, websocket_base_url=server.url) as client:
            async with client.realtime.connect(model="gpt-realtime-2.1") as conn:
                await conn.session.update(session={
                    "type": "realtime",
                    "audio": {"input": {"transcription": {"model": "gpt-transcribe"}}},
                })
                for start in range(0, len(audio), 2400):
                    chunk = audio[start : start + 2400].astype("<i2").tobytes()
                    await conn.input_audio_buffer.append(audio=base64.b64encode(chunk).decode())
                deltas: list[str] = []
                async with asyncio.timeout(15):
                    async for event in conn:
                        if event.type == "conversation.item.input_audio_transcription.delta":
                            deltas.append(event.delta or "")
                        if event.type == "conversation.item.input_audio_transcription.completed":
                            assert event.transcript == SAYS[0] and "".join(deltas) == SAYS[0]
                            break
    recorder.verify()


@pytest.mark.slow
def test_replay_reads_a_sidecar_transcript(tmp_path: Path) -> None:
    recording = tmp_path / "talk.wav"
    shutil.copy(EXAMPLE, recording)
    recording.with_suffix(".txt").write_text("Tell me a long story.\n", encoding="utf-8")
    out, log = tmp_path / "heard.wav", tmp_path / "events.jsonl"
    run = voxline("replay", str(recording), "--fast", "--voice", "tone", "--out", str(out), "--events", str(log))
    assert run.returncode == 0, run.stderr
    assert "user transcript: 'Tell me a long story.'" in run.stdout
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    update = next(e for e in events if e.get("type") == "session.update")
    assert update["session"]["audio"]["input"]["transcription"]["model"] == "gpt-transcribe"
    completed = [e for e in events if e.get("type") == "conversation.item.input_audio_transcription.completed"]
    # the script's one line wins for the first turn; the second ("stop, wait a second") is heard when
    # voxline[asr] is installed, as it is in the test environment
    assert [e["transcript"] for e in completed][0] == "Tell me a long story."
    heard = [e["transcript"] for e in completed][1:]
    assert len(heard) == 1 and "wait a second" in heard[0].lower(), heard


@pytest.mark.slow
def test_serve_banner_says_transcripts_are_scripted(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "voxline", "serve", "--port", "0", "--voice", "tone"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "input transcripts are scripted" in banner and "machine-made" in banner, banner
    assert "approximate" in banner, banner


async def test_an_intent_transcription_session_transcribes_and_never_answers() -> None:
    recorder = WireRecorder()

    def on_wire(direction: str, text: str) -> None:
        recorder("out" if direction == "in" else "in", text)

    voice = synthesize("Hello there, what is the weather like?", "tone")
    audio = np.concatenate([np.zeros(12000, np.int16), voice, np.zeros(24000, np.int16)])
    config = ServerConfig(port=0, api_key=KEY, voice="tone", speed=float("inf"), transcripts=tuple(SAYS),
                          on_wire=on_wire)
    async with serve(config) as server:
        async with AsyncOpenAI(api_key=KEY, websocket_base_url=server.url) as client:
            async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
                created = await conn.recv()
                assert created.type == "session.created" and created.session.type == "transcription"
                await conn.session.update(session={
                    "type": "transcription",
                    "audio": {"input": {"transcription": {"model": "gpt-transcribe", "language": "en"}}},
                })
                await conn.send({"type": "session.update", "session": {"type": "realtime", "instructions": "x"}})
                await conn.response.create()
                for start in range(0, len(audio), 2400):
                    chunk = audio[start : start + 2400].astype("<i2").tobytes()
                    await conn.input_audio_buffer.append(audio=base64.b64encode(chunk).decode())
                seen: list[str] = []
                errors: list[str] = []
                async with asyncio.timeout(15):
                    async for event in conn:
                        seen.append(event.type)
                        if event.type == "error":
                            errors.append(event.error.param or "")
                        if event.type == "conversation.item.input_audio_transcription.completed":
                            assert event.transcript == SAYS[0]
                            break
            assert errors == ["session.type", "type"]
            assert "session.updated" in seen and not any(t.startswith("response.") for t in seen)
            with pytest.raises(Exception, match="400"):
                async with client.realtime.connect(model="gpt-realtime-2.1", extra_query={"intent": "transcription"}):
                    pass
    recorder.verify()
