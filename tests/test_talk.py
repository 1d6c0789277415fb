"""``voxline talk``: argument and device errors, the plain view, and live runs on virtual devices.

The live runs start ``voxline talk`` as a subprocess on private clones of the PulseAudio
virtual devices (the ``vdev`` fixture of tests/support/devices.py) and play
``examples/audio/barge_in.wav`` into its microphone: a question at 0.5 s, then "stop,
wait a second" at 6.0 s, over the built-in server's reply. They wait on the program's
output lines (with deadlines), never on sleeps. The live panel is read off a terminal that
tmux emulates, polled until it shows what is awaited.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.wavio import read_wav, write_wav
from voxline.realtime.server import ServerConfig, serve
from voxline.session.cli import main
from voxline.session.cli.talk import LevelMeter, TalkSettings, demo_tools
from voxline.session.cli.talk_view import PlainScreen, TalkModel, describe, level_bar
from voxline.session.events import (AssistantAudioStarted, BargeIn, CutAdjusted, SessionError, SpeechStarted,
                                    SpeechStopped, StateChanged, TranscriptDelta, TranscriptDone, TurnMetrics)
from voxline.session.metrics.records import MetricsReport, SpeechSegment, TurnRecord
from voxline.session.tools import ToolFinished, ToolStarted
from tests.support.ci import require_tool
from tests.support.devices import VirtualDevices, pulse, vdev, wait_for

__all__ = ["pulse", "vdev"]  # fixtures used below

ROOT = Path(__file__).resolve().parent.parent
BARGE_IN_WAV = ROOT / "examples" / "audio" / "barge_in.wav"


# -- arguments and settings (no devices) -----------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--exit-after", "-3"], "argument --exit-after: expected a positive number of seconds, not '-3'"),
        (["--exit-after", "soon"], "argument --exit-after: expected a positive number of seconds, not 'soon'"),
        (["--transport", "carrier-pigeon"], "argument --transport: invalid choice: 'carrier-pigeon'"),
        (["--voice", "robot"], "argument --voice: invalid choice: 'robot'"),
        (["--bogus"], "unknown option --bogus"),
    ],
)
def test_argument_errors_are_one_line_and_exit_2(argv: list[str], message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["talk", *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("voxline talk: error: ") and message in err


@pytest.mark.parametrize("model", ["", " "])
def test_a_model_flag_that_names_no_model_is_refused_as_replay_refuses_it(model: str,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Before: '' ran on the default model, ' ' asked the server for '?model=+'."""
    assert main(["talk", "--local", "--no-ui", "--model", model]) == 2
    assert capsys.readouterr().err == (f"voxline talk: error: --model={model!r}: names no model: give a model's name, "
                                       "or leave it out for the default (see voxline talk --help)\n")


def test_built_in_server_options_with_a_key_are_one_line_without_the_key(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secretsecretsecret")
    assert main(["talk", "--scenario", "tools"]) == 1
    err = capsys.readouterr().err
    assert err == ("voxline talk: error: --scenario and --voice apply to the built-in server only "
                   "(no OPENAI_API_KEY, no --url)\n")


def test_a_remote_url_without_a_key_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("OPENAI_API_KEY", "VOXLINE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert main(["talk", "--url", "wss://realtime.example.com/v1"]) == 1
    assert capsys.readouterr().err == "voxline talk: error: OPENAI_API_KEY is not set (needed for wss://realtime.example.com/v1)\n"


def test_the_real_service_is_asked_to_transcribe_the_user_and_the_local_server_is_not() -> None:
    real = TalkSettings(api_key="sk-test", transcribe=True).session_config()
    local = TalkSettings(api_key="sk-test").session_config()
    assert real["audio"]["input"]["transcription"] == {"model": "gpt-transcribe"}
    assert "transcription" not in local["audio"]["input"]
    assert real["audio"]["input"]["turn_detection"]["type"] == "server_vad"


# -- the view and the meter (plain data) -----------------------------------------------------


def test_plain_lines_and_the_live_model_follow_a_barge_in() -> None:
    model = TalkModel(endpoint="test", mode="voice activity")
    barge = BargeIn(trigger="server_vad", at=7.4, item_id="item_a", heard_ms=3262.5, received_ms=8990.0,
                    audio_end_ms=3262, deleted=(), cancelled=False, reaction_s=0.005)
    events = [SpeechStarted(1.9, "item_u", 1650), SpeechStopped(4.1, "item_u", 4150), StateChanged("speaking", 4.2),
              TranscriptDelta("assistant", "item_a", "Hello! "), TranscriptDone("assistant", "item_a", "Hello! There."),
              barge]
    lines = [describe(e) for e in events]
    for event in events:
        model.apply(event, " 1.00s")
    assert lines == [
        "you: started speaking",
        "you: stopped speaking",
        "state: speaking",
        None,
        "assistant: Hello! There.",
        "barge-in (server_vad): the reply cut where it was heard, 3.26 s of 8.99 s received; silent 5.0 ms later",
    ]
    user, assistant = model.turns
    assert (user.role, user.text, assistant.text) == ("user", "[2.5 s of speech]", "Hello! There.")
    assert assistant.cut == "cut: heard 3.26 s of 8.99 s"
    assert model.state == "speaking" and model.counts == {"turns": 1, "barge_ins": 1, "tool_calls": 0}
    assert model.summary() == "session ended: 1 assistant turn, 1 barge-in, 0 tool calls"


def test_an_assistant_turn_is_counted_once_whether_its_audio_or_its_text_says_so() -> None:
    """GPT-Live's replies have no transcript done: talk --api live ended with "0 assistant turns" after two replies,
    one of them cut. A turn counts when its audio reaches the listener or its transcript is done, once."""
    from voxline.session.events import AssistantAudioStarted

    model = TalkModel(endpoint="test", mode="voice activity")
    events = [AssistantAudioStarted("utt_1", 1.0, None), TranscriptDelta("assistant", "utt_1", "Hi"),
              AssistantAudioStarted("utt_2", 5.0, 0.6),  # Live: no done for either
              AssistantAudioStarted("item_a", 9.0, 0.5), TranscriptDone("assistant", "item_a", "Hello."),  # Realtime
              TranscriptDone("user", "item_u", "hey")]
    for event in events:
        model.apply(event, " 1.00s")
    assert model.counts["turns"] == 3
    assert model.summary() == "session ended: 3 assistant turns, 0 barge-ins, 0 tool calls"


def _report(speech: tuple[SpeechSegment, ...], turns: tuple[TurnRecord, ...]) -> MetricsReport:
    return MetricsReport(at=9.0, turns=turns, barge_ins=(), items=(), speech=speech, tools=(), underruns=0,
                         underrun_ms=0.0)


def test_each_latency_says_from_what_to_what_and_the_turn_line_comes_with_the_reply() -> None:
    """The end of the voice and the server's speech_stopped are two instants, each named; the turn's
    latency is printed when its reply starts, not once the turn is over (after the next barge-in)."""
    speech = (SpeechSegment("item_u", 10.2, 12.69, 10.5, 12.19),)
    turn = TurnRecord(0, 12.19, 12.72, 12.72, 12.74, 550.0, 530.0, 20.0, 530.0, ("resp_1",), ("in_progress",), 0,
                      0.0, 0)
    screen = PlainScreen(TalkModel(endpoint="test", mode="voice activity"), out=io.StringIO())
    screen.attach(lambda: _report(speech, (turn,)), verbose=1)
    shown = [describe(e, screen.lines) for e in (SpeechStarted(10.56, "item_u", 200),
                                                SpeechStopped(12.72, "item_u", 2690),
                                                AssistantAudioStarted("item_a", 12.74, 0.02),
                                                TurnMetrics(16.0, turn))]
    assert shown == [
        "you: started speaking [SpeechStarted item_u, audio_start_ms=200]",
        "you: stopped speaking [SpeechStopped item_u, audio_end_ms=2690]",
        "turn 1: reply heard 550 ms after your voice ended (530 ms to the first audio delta, then 20 ms in the "
        "client) [AssistantAudioStarted item_a]",
        None,  # shown already, with the reply
    ]
    # without the session's figures: the only latency there is, named from where it counts
    assert describe(AssistantAudioStarted("item_a", 12.74, 0.058)) == (
        "assistant: started speaking (58 ms after the server's speech_stopped)")


def test_push_to_talk_shows_its_own_state_until_the_session_answers() -> None:
    model = TalkModel(endpoint="test", mode="push-to-talk", push_to_talk=True)
    seen = [model.shown_state]
    model.push_to_talk(True, 1.0)
    seen.append(model.shown_state)
    model.apply(StateChanged("listening", 1.1), " 1.10s")  # a barge-in by Enter lands here while talking
    seen.append(model.shown_state)
    model.push_to_talk(False, 3.0)
    seen.append(model.shown_state)
    for state in ("thinking", "speaking", "listening"):
        model.apply(StateChanged(state, 3.5), " 3.50s")
        seen.append(model.shown_state)
    assert seen == ["idle", "talking", "talking", "sending", "thinking", "speaking", "idle"]
    model.push_to_talk(True, 5.0)
    model.push_to_talk(False, 5.1)
    model.apply(SessionError("input audio buffer is empty"), " 5.20s")  # no answer is coming
    assert model.shown_state == "idle"
    voice = TalkModel(endpoint="test", mode="voice activity")  # no push-to-talk: the session's state as it is
    assert voice.shown_state == "listening"


def test_tool_events_are_one_line_each() -> None:
    started = ToolStarted("call_1", "get_weather", {"city": "Paris"})
    finished = ToolFinished("call_1", "get_weather", '{"temperature":18}', True, 0.012)
    assert describe(started) == "tool: get_weather(city='Paris') started"
    assert describe(finished) == 'tool: get_weather returned {"temperature":18} in 12 ms'


def test_a_cut_adjusted_by_the_server_is_a_line_and_a_mark() -> None:
    model = TalkModel(endpoint="test", mode="voice activity")
    event = CutAdjusted("item_a", requested_ms=900, applied_ms=850)
    model.apply(event, " 2.00s")
    assert describe(event) == "cut adjusted: the server had 850 ms of item_a, not the 900 ms heard"
    assert list(model.marks) == [" 2.00s cut adjusted: the server had 850 ms of item_a, not the 900 ms heard"]


async def test_level_meter_measures_rms_in_dbfs_and_falls_back_slowly() -> None:
    async def blocks() -> AsyncIterator[np.ndarray]:
        yield np.zeros(480, dtype=np.int16)
        yield np.full(480, 16384, dtype=np.int16)  # half scale: -6.02 dBFS
        yield np.zeros(480, dtype=np.int16)
        yield np.full(480, 1024, dtype=np.int16)  # -30.1 dBFS: above where the meter has fallen to

    meter, seen = LevelMeter(fall_db=20.0), []
    async for block in meter.watch(blocks()):
        seen.append((len(block), round(meter.db, 2)))
    assert seen == [(480, -90.31), (480, -6.02), (480, -26.02), (480, -30.1)]
    assert level_bar(-6.02, width=10) == "█████████·" and level_bar(-90, width=4) == "····"


async def test_demo_weather_is_canned_and_says_so() -> None:
    tools = demo_tools()
    assert {s["name"] for s in tools.schemas()} == {"get_time", "get_weather"}
    weather = tools.get("get_weather")
    assert weather is not None and weather.read_only
    _decoded, kwargs = weather.parse('{"city": "Paris", "unit": "fahrenheit"}')
    result = await weather.invoke(kwargs)
    assert result["temperature"] == 64 and "canned" in result["source"]


# -- live runs on the virtual devices --------------------------------------------------------


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "VOXLINE_API_KEY", "VOXLINE_URL")}
    return {**env, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


class Talk:
    """A running ``voxline talk`` subprocess whose output lines are awaited with deadlines."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []

    async def wait_for_line(self, needle: str, timeout: float = 15.0) -> str:
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError(f"no line with {needle!r} before the end; got {self.lines}")
                self.lines.append(raw.decode().rstrip("\n"))
                if needle in self.lines[-1]:
                    return self.lines[-1]

    async def finish(self, timeout: float = 20.0) -> tuple[int, str]:
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            rest, err = await self.process.communicate()
        self.lines += rest.decode().splitlines()
        assert self.process.returncode is not None
        return self.process.returncode, (err or b"").decode()


@asynccontextmanager
async def talk(*argv: str, stdin: int | None = asyncio.subprocess.DEVNULL, merged: bool = False) -> AsyncIterator[Talk]:
    """``voxline talk`` with ``argv``; with ``merged``, its stderr goes where its stdout goes (one terminal)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "voxline", "talk", *argv, cwd=ROOT, env=_env(), stdin=stdin,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT if merged else asyncio.subprocess.PIPE)
    try:
        yield Talk(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def play_into(sink: str, wav: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec("paplay", "-d", sink, str(wav))


@pytest.mark.device
async def test_talk_hears_the_user_answers_and_is_cut_by_a_barge_in(vdev: VirtualDevices) -> None:
    async with talk("--no-ui", "-v", "--exit-after", "8", "--voice", "tone") as run:
        first = await run.wait_for_line("voxline talk:")
        await run.wait_for_line("ready: mic")
        player = await play_into(vdev.mic, BARGE_IN_WAV)
        await run.wait_for_line("you: started speaking")
        reply = await run.wait_for_line("turn 1: reply heard")  # with the reply, before the barge-in
        await run.wait_for_line("barge-in")
        code, err = await run.finish()
        await player.wait()
    assert code == 0, err
    assert "no OPENAI_API_KEY, so using the built-in local server" in first and "does not understand" in first
    text = "\n".join(run.lines)
    assert "assistant: Hello! This is the voxline local server." in text
    assert "ms after your voice ended (" in reply and "[AssistantAudioStarted item_" in reply
    # the server's VAD, or the local VAD (on by default with voxline[aec]) holding first and confirmed by it
    barge = next(line for line in run.lines if re.search(r"barge-in \((server|local)_vad\): the reply cut where it "
                                                         r"was heard", line))
    barge = barge.split("[BargeIn ")[1]  # -v: the truncate sent, in ms
    assert run.lines[-1].startswith("session ended: 1 assistant turn, 1 barge-in,")
    heard = barge.split("(heard ")[1].split(" of")[0]
    assert abs(int(barge.split(" at ")[1].split(" ms")[0]) - float(heard)) <= 1
    assert "Traceback" not in err


@pytest.mark.device
async def test_talk_record_writes_the_report_once_the_devices_are_closed(vdev: VirtualDevices, tmp_path: Path) -> None:
    """``talk --record DIR`` completes its folder after the session and the devices closed (before: every run
    ended "the speaker stream is not open", exit 1, without REPORT.html and SUMMARY.json)."""
    folder = tmp_path / "rec"
    async with talk("--no-ui", "--exit-after", "8", "--voice", "tone", "--record", str(folder)) as run:
        await run.wait_for_line("ready: mic")
        player = await play_into(vdev.mic, BARGE_IN_WAV)
        await run.wait_for_line("barge-in")
        code, err = await run.finish()
        await player.wait()
    assert code == 0, err
    assert err.strip().splitlines()[-1] == f"voxline talk: recorded the session in {folder}"
    assert sorted(p.name for p in folder.iterdir()) == ["EVENTS.jsonl", "HEARD.wav", "MIC.wav", "REPORT.html",
                                                        "SUMMARY.json"]
    summary = json.loads((folder / "SUMMARY.json").read_text())
    assert len(summary["barge_ins"]) == 1 and summary["duration_s"] > 5


def _shape(line: str) -> str:
    """A line with its figures masked (times, ms, the server's port)."""
    return re.sub(r"\d+(\.\d+)?", "#", line.strip())


@pytest.mark.device
async def test_the_readme_shows_what_talk_no_ui_prints(vdev: VirtualDevices) -> None:
    readme = (ROOT / "README.md").read_text()
    sample = readme[readme.index("  $ voxline talk --exit-after"):].split("  ```", 1)[0].splitlines()
    argv = sample[0].split()[3:]  # after "$ voxline talk"
    async with talk(*argv) as run:
        await run.wait_for_line("ready: mic")
        player = await play_into(vdev.mic, BARGE_IN_WAV)
        code, err = await run.finish(timeout=40)
        await player.wait()
    assert code == 0, err
    def keep(line: str) -> bool:  # the voice is the machine's (espeak-ng or tone): not the words, nor the states
        return ("state:" not in line and not line.strip().split("s ", 1)[-1].startswith("assistant")
                and "(local VAD): assistant held" not in line)  # the local VAD may hear the barge-in first

    def same(line: str) -> str:  # ... and then the barge-in is its, confirmed by the server's
        return _shape(line.replace("barge-in (local_vad)", "barge-in (server_vad)"))

    assert [same(line) for line in run.lines if keep(line)] == [same(line) for line in sample[1:] if keep(line)]
    assert sum("turn " in line and "ms after your voice ended (" in line for line in run.lines) == 2


@pytest.mark.device
async def test_push_to_talk_sends_what_was_said_between_two_enters(vdev: VirtualDevices, tmp_path: Path) -> None:
    samples, rate = read_wav(BARGE_IN_WAV)
    question = tmp_path / "question.wav"
    write_wav(question, samples[: 3 * rate], rate)  # "what is the weather like today", then silence
    async with talk("--no-ui", "--push-to-talk", "--voice", "tone", stdin=asyncio.subprocess.PIPE) as run:
        assert run.process.stdin is not None
        await run.wait_for_line("ready: mic")
        run.process.stdin.write(b"\n")
        await run.wait_for_line("push-to-talk: talking")
        assert await (await play_into(vdev.mic, question)).wait() == 0
        run.process.stdin.write(b"\n")
        await run.wait_for_line("push-to-talk: sent")
        await run.wait_for_line("assistant: started speaking")
        run.process.send_signal(signal.SIGINT)
        code, err = await run.finish()
    assert code == 130 and "Traceback" not in err
    assert not any("speech started" in line for line in run.lines)  # no server VAD in push-to-talk
    assert run.lines[-1].startswith("session ended:")


class Terminal:
    """A 120 × 40 terminal in a private tmux server, running one command; read as the screen shows it."""

    PANEL = "╭─ voxline talk"

    def __init__(self, command: list[str], folder: Path) -> None:
        self.socket = str(folder / "tmux")  # the server's socket goes with the test's tmp_path
        # the pane's shell runs on after Ctrl-C ends the command (a trap, not an ignore, which the command would
        # inherit): without it dash, a user's /bin/sh, exits with the command and takes the pane and its last lines
        shell = f"trap : INT; cd {shlex.quote(str(ROOT))} && {shlex.join(command)}; echo exited $?; sleep 60"
        self._tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "-s", "talk", shell)
        self.lines: list[str] = []

    def _tmux(self, *args: str) -> str:
        env = {**{k: v for k, v in _env().items() if k != "TMUX"}, "SHELL": "/bin/sh"}  # the same shell for everyone
        return subprocess.run(["tmux", "-S", self.socket, *args], env=env, check=True, capture_output=True,
                              text=True, timeout=10).stdout

    def press(self, key: str) -> None:
        self._tmux("send-keys", "-t", "talk", key)

    def read(self) -> list[str]:
        self.lines = self._tmux("capture-pane", "-p", "-t", "talk").splitlines()
        return self.lines

    def panel_top(self) -> int | None:
        return next((i for i, line in enumerate(self.read()) if line.startswith(self.PANEL)), None)

    def state(self) -> str | None:
        """The state the panel shows (``● thinking``), read from a fresh screen."""
        top = self.panel_top()
        found = re.search(r"● (\w+)", self.lines[top + 1]) if top is not None and top + 1 < len(self.lines) else None
        return found[1] if found else None

    def states_until(self, last: str) -> list[str]:
        """Every state shown until ``last`` (consecutive repeats once)."""
        seen: list[str] = []

        def shows_last() -> bool:
            state = self.state()
            if state is not None and (not seen or seen[-1] != state):
                seen.append(state)
            return state == last

        wait_for(shows_last, f"the panel to show {last!r} (screen: {self.lines})", timeout=20.0)
        return seen

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=10)


@pytest.mark.device
def test_push_to_talk_keeps_the_live_panel_still_and_shows_talking_then_the_session_state(
        vdev: VirtualDevices, tmp_path: Path) -> None:
    require_tool("tmux")
    terminal = Terminal([sys.executable, "-m", "voxline", "talk", "--push-to-talk", "--voice", "tone"], tmp_path)
    try:
        assert terminal.states_until("idle") == ["idle"]  # push-to-talk waits for Enter: the mic is not sent
        top = terminal.panel_top()
        for _ in range(2):  # the second Enter of the second round cuts the reply the first one asked for
            terminal.press("Enter")
            assert terminal.states_until("talking")[-2:] in (["talking"], ["idle", "talking"], ["speaking", "talking"])
            assert terminal.panel_top() == top
            time.sleep(0.3)  # the key held as a user holds it: a turn under 100 ms is a tap, dropped and not answered
            terminal.press("Enter")
            shown = terminal.states_until("speaking")
            assert shown == [s for s in ["talking", "sending", "thinking", "speaking"] if s in shown], shown
            assert terminal.panel_top() == top
        terminal.press("C-c")
        wait_for(lambda: any(line.startswith("exited 130") for line in terminal.read()), "the program to end")
        assert terminal.panel_top() == top
        assert not any(re.search(r"push-to-talk: (talking|sent)", line) for line in terminal.lines)  # none per Enter
        ended = [line for line in terminal.lines if line.startswith("session ended:")]
        assert len(ended) == 1 and ended[0].endswith(", 1 barge-in, 0 tool calls"), "\n".join(terminal.lines)
    finally:
        terminal.close()


@pytest.mark.device
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
async def test_ctrl_c_closes_cleanly_with_130(pulse: None, sig: signal.Signals) -> None:
    """And a job's SIGTERM, a closed terminal's SIGHUP: they killed the command outright (the terminal left without
    echo and its cursor hidden, a --record folder without its report and summary)."""
    async with talk("--no-ui", "--voice", "tone") as run:
        await run.wait_for_line("ready: mic")
        run.process.send_signal(sig)
        code, err = await run.finish()
    assert code == 128 + int(sig)
    assert run.lines[-1] == "session ended: 0 assistant turns, 0 barge-ins, 0 tool calls"
    assert "Traceback" not in err and "interrupted" not in err  # ended by the session, not by KeyboardInterrupt


@pytest.mark.device
async def test_the_ready_line_names_each_device_as_the_sound_server_does(vdev: VirtualDevices) -> None:
    """Every null sink of PulseAudio is 'Null Output' to PortAudio: the ready line could not say which was picked."""
    async with talk("--no-ui", "--voice", "tone", "--output-device", vdev.speaker,
                    "--input-device", f"{vdev.mic}.monitor") as run:
        await run.wait_for_line("ready: mic")
        run.process.send_signal(signal.SIGINT)
        await run.finish()
    [ready] = [line for line in run.lines if line.startswith("ready: mic")]
    assert f"({vdev.mic}.monitor) → speaker " in ready and f"({vdev.speaker}) (voice activity" in ready, ready


@pytest.mark.device
async def test_push_to_talk_without_a_stdin_to_read_is_one_line_before_anything_opens(pulse: None) -> None:
    """``--push-to-talk < /dev/null`` started the server, opened the devices, connected and said it was ready before
    it refused, then printed 'coroutine … was never awaited' warnings."""
    async with talk("--no-ui", "--push-to-talk", "--voice", "tone") as run:  # stdin is /dev/null
        code, err = await run.finish()
    assert code == 1 and run.lines == []
    assert err == "voxline talk: error: --push-to-talk reads Enter from a terminal or a pipe on stdin\n", err


@pytest.mark.device
async def test_a_bad_input_device_is_one_line_naming_the_devices(pulse: None) -> None:
    async with talk("--no-ui", "--input-device", "99") as run:
        code, err = await run.finish()
    assert code == 1 and run.lines == []
    assert err.count("\n") == 1
    assert err.startswith("voxline talk: error: no input device 99; available: ") and "pulse" in err


@pytest.mark.device
@pytest.mark.parametrize("echo", ["--no-aec", "--aec"])
async def test_a_server_that_cannot_be_reached_is_one_line(pulse: None, echo: str) -> None:
    """The advice to use headphones is given only without echo cancellation (it stood beside 'echo cancellation
    on')."""
    async with talk("--no-ui", "--url", "ws://127.0.0.1:9/v1", echo) as run:
        code, err = await run.finish()
    advice = "" if echo == "--aec" else "; use headphones, or the assistant may hear itself"
    assert code == 1 and run.lines == [f"voxline talk: connecting to ws://127.0.0.1:9/v1 (model gpt-realtime-2.1){advice}"]
    assert err.count("\n") == 1 and err.startswith("voxline talk: error: cannot connect to ws://127.0.0.1:9/v1")


@pytest.mark.device
async def test_without_the_panel_a_lost_server_is_said_once_per_try_where_both_streams_go(pulse: None) -> None:
    """``--no-ui`` in a terminal: each reconnect failure was said twice, as an event line and as a log line."""
    async with serve(ServerConfig(port=0, voice="tone")) as server:
        async with talk("--no-ui", "--url", f"ws://127.0.0.1:{server.port}/v1", merged=True) as run:
            await run.wait_for_line("ready: mic")
            await server.close()  # the server goes, and stays gone
            await run.wait_for_line("could not be restored", timeout=40)
            code, _err = await run.finish()
    assert code == 1
    failed = [line for line in run.lines if "reconnect failed" in line]
    assert len(failed) == 5 and all(" WARNING " not in line for line in failed), run.lines
    assert sum("could not be restored" in line for line in run.lines) == 1, run.lines
    assert sum("connection lost" in line for line in run.lines) == 1, run.lines


@pytest.mark.device
@pytest.mark.parametrize("failing", [("--input-device", "99"), ("--url", "ws://127.0.0.1:9/v1")], ids=["device", "server"])
async def test_a_recording_talk_that_never_started_leaves_no_folder(pulse: None, tmp_path: Path,
                                                                     failing: tuple[str, str]) -> None:
    folder = tmp_path / "rec"
    async with talk("--no-ui", *failing, "--record", str(folder)) as run:
        code, err = await run.finish()
    assert code == 1 and err.count("\n") == 1 and "Exception ignored" not in err, err  # one line, no finalizer noise
    assert not folder.exists() and list(tmp_path.iterdir()) == []


def test_a_webrtc_barge_in_says_the_server_cuts() -> None:
    from voxline.session.events import BargeIn

    line = BargeIn("server_vad", 7.36, "item_a", 3252.0, 3320.0, None, (), False, 0.005, server_cuts=True).describe()
    assert "the server cuts its own buffer (WebRTC)" in line and "truncate" not in line
