"""Every program in examples/ runs offline, as a user would start it, and says what it should.

Each example is a subprocess against the built-in local server (``--voice tone``: no
external voice needed). The assistant's replies play on a clocked output in real time, the
kiosk falls back from a missing speaker, and the interruption test runs under pytest.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from voxline.session.events import BargeIn, HeardTranscript, StateChanged, TranscriptDelta, TranscriptDone

pytestmark = pytest.mark.slow  # each example runs as a process, in real time

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run(*argv: str, stdin: str = "", timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "VOXLINE_API_KEY", "VOXLINE_URL")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, input=stdin, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize(
    "name", ["assistant.py", "kiosk.py", "kiosk_sideband.py", "interruption_test.py", "web_kiosk/backend.py"]
)
def test_every_example_says_how_to_run_it(name: str) -> None:
    source = (EXAMPLES / name).read_text()
    docstring = source.split('"""')[1]
    assert f"examples/{name}" in docstring and "Run it from the repository root" in docstring


def test_assistant_looks_up_and_cancels_with_approval() -> None:
    result = run("examples/assistant.py", "--yes", "--voice", "tone", stdin="where is my order?\ncancel it please\n")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("using the built-in local server at ws://127.0.0.1:")
    assert lines[1:] == [
        "you: where is my order?",
        "assistant: Let me look that up.",
        "tool: lookup_order {'order_id': 'A1234'}",
        'tool: lookup_order returned {"order_id":"A1234","item":"headphones","status":"shipped","eta":"Thursday"}',
        "assistant: I have the details of order A1234.",
        "you: cancel it please",
        'approve cancel_order {"order_id":"A1234","reason":"no longer needed"}? [y/N] y (--yes)',
        "tool: cancel_order {'order_id': 'A1234', 'reason': 'no longer needed'}",
        'tool: cancel_order returned {"order_id":"A1234","status":"cancelled","reason":"no longer needed"}',
        "assistant: I have passed your decision on to the order system.",
        "orders: A1234 cancelled",
    ]


def test_assistant_declined_call_never_runs() -> None:
    result = run("examples/assistant.py", "--voice", "tone", stdin="where is my order?\ncancel it\nn\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert 'approve cancel_order {"order_id":"A1234","reason":"no longer needed"}? [y/N] n' in out
    assert 'tool: cancel_order did not run: {"error":"the user declined to run cancel_order"}' in out
    assert "tool: cancel_order {" not in out  # never started
    assert out.splitlines()[-1] == "orders: A1234 shipped"


def test_assistant_shows_a_question_that_piped_input_ended_before_answering() -> None:
    result = run("examples/assistant.py", "--voice", "tone", stdin="where is my order?\ncancel it\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert 'approve cancel_order {"order_id":"A1234","reason":"no longer needed"}? [y/N] (end of input)' in out
    assert 'tool: cancel_order did not run: {"error":"the user declined to run cancel_order"}' in out
    assert "(end of input)" not in out.replace("[y/N] (end of input)", "")  # the messages' end goes unsaid


def test_assistant_with_its_input_on_the_null_device_ends_at_once() -> None:
    """cron, nohup or a CI step gives it /dev/null: asyncio cannot watch that device, so the assistant printed a
    traceback and waited for ever for input that could never come."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "VOXLINE_API_KEY", "VOXLINE_URL")}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run([sys.executable, "examples/assistant.py", "--voice", "tone"], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout.splitlines()[-1] == "orders: A1234 shipped"


def test_kiosk_recovers_from_a_drop_and_a_missing_speaker() -> None:
    result = run("examples/kiosk.py", "--simulate-drop", "--voice", "tone", "--output-device", "no-such-speaker",
                 "--input-device", "no-such-mic")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "kiosk: simulating a network drop: the first connection dies after 20 server events" in out
    assert '"connection": "reconnecting"' in out and "kiosk: reconnected; the session sent 1 owed request(s) again" in out
    ui = [line for line in out.splitlines() if line.startswith("ui ")]
    # the device errors are shown as they came (here: no such device; elsewhere: no sound server at all)
    assert '"speaker": "unavailable, playing silently (' in ui[-1]
    assert '"microphone": "unavailable, text only (' in ui[-1]
    assert '"connection": "online"' in ui[-1] and '"barge_ins": 1' in ui[-1]
    assert out.splitlines()[-1] == "kiosk: done; 1 barge-in(s), connection online"


def test_a_kiosk_talk_button_let_go_with_nothing_said_ends_at_once_in_one_line() -> None:
    """With no microphone (or nothing said) ``--hold`` waited a minute for a reply nobody asked for, then ended
    in a traceback."""
    result = run("examples/kiosk.py", "--voice", "tone", "--output-device", "no-such-speaker", "--input-device",
                 "no-such-mic", "--hold", "0.5", timeout=30)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert "kiosk: no reply: push-to-talk: a turn of 0 ms is too short to send" in result.stdout
    assert lines[-1] == "kiosk: done; 0 barge-in(s), connection online"
    refused = run("examples/kiosk.py", "--hold", "nan", timeout=30)
    assert refused.returncode == 2 and "argument --hold: a positive number of seconds, not 'nan'" in refused.stderr


def test_interruption_test_passes_under_pytest() -> None:
    result = run("-m", "pytest", "examples/interruption_test.py", "-q", "-p", "no:cacheprovider")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout


def test_kiosk_sideband_backend_runs_the_tools_of_the_kiosks_call() -> None:
    result = run("examples/kiosk_sideband.py", "--voice", "tone")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    call_id = lines[1].split()[3]
    assert lines[1] == f"kiosk: WebRTC call {call_id} open with an ephemeral key" and call_id.startswith("rtc_")
    assert lines[2] == f"backend: attached to {call_id} over the sideband with the API key"
    assert lines[4] == 'backend: ran get_weather -> {"city":"Paris","temperature":21,"unit":"celsius","conditions":"clear"}'
    assert lines[5] == "kiosk: assistant says 'I have the weather report now. Thank you for waiting.'"
    assert lines[6].startswith("kiosk: visitor taps stop after ") and lines[6].endswith("the server cut its own buffer")


def test_kiosk_sideband_with_a_service_it_cannot_reach_is_one_line() -> None:
    """A --url nothing listens at (or a key refused) ended the example in a page of traceback."""
    env = {k: v for k, v in os.environ.items() if k not in ("VOXLINE_API_KEY", "VOXLINE_URL")}
    env.update(PYTHONPATH=str(ROOT), OPENAI_API_KEY="sk-unused")
    result = subprocess.run([sys.executable, "examples/kiosk_sideband.py", "--url", "http://127.0.0.1:9/v1"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("kiosk_sideband: error: cannot connect to http://127.0.0.1:9/v1/realtime/client_"
                                    "secrets") and result.stderr.count("\n") == 1, result.stderr


def test_the_web_kiosk_backend_on_a_port_in_use_or_out_of_range_is_one_line() -> None:
    """Its default port, 8080, is often taken: the backend ended in a traceback of http.server's bind."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("examples/web_kiosk/backend.py", "--port", str(port), "--voice", "tone")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr == (f"web_kiosk: cannot serve the page on port {port}: Address already in use (--port 0 "
                             "picks a free one)\n")
    result = run("examples/web_kiosk/backend.py", "--port", "99999")
    assert result.returncode == 2 and "argument --port: a port from 0 to 65535, not '99999'" in result.stderr
    result = run("examples/web_kiosk/backend.py", "--port", "0", "--voice", "bogus")
    assert result.returncode == 1 and result.stderr.startswith("web_kiosk: error: unknown voice 'bogus'"), result.stderr


def load_kiosk() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kiosk_example", ROOT / "examples" / "kiosk.py")
    assert spec is not None and spec.loader is not None
    kiosk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kiosk)
    return kiosk


def test_the_kiosk_caption_after_a_barge_in_holds_only_what_was_heard() -> None:
    kiosk = load_kiosk()
    views: list[dict[str, object]] = []
    ui = kiosk.KioskView(views.append)
    full = "Hello and welcome to the museum, the east wing is open today."
    words = full.split(" ")
    for word in words[:5]:
        ui.apply(TranscriptDelta("assistant", "item_a", word + " "))
    ui.apply(HeardTranscript("item_a", 1.0, "Hello and welcome", "Hello and welcome to the museum,", 900.0,
                             2000.0, "arrival"))
    for word in words[5:]:  # late words and the transcript's done: never heard, never shown
        ui.apply(TranscriptDelta("assistant", "item_a", word + " "))
    ui.apply(TranscriptDone("assistant", "item_a", full))
    assert ui.view["caption"] == "Hello and welcome" and ui.view["caption_cut"] is True
    assert all(full not in str(view["caption"]) for view in views)


def barge_in(item_id: str | None, trigger: str = "interrupt", deleted: tuple[str, ...] = ()) -> BargeIn:
    return BargeIn(trigger, 2.0, item_id, 900.0, 4000.0, 900, deleted, False, 0.005)


FULL = "Hello and welcome to the museum, the east wing is open today."


def test_no_kiosk_update_after_a_stop_shows_the_reply_past_the_cut() -> None:
    views: list[dict[str, object]] = []
    ui = load_kiosk().KioskView(views.append)
    for word in FULL.split(" "):  # the transcript runs ahead of the speech: all of it is in before the stop
        ui.apply(TranscriptDelta("assistant", "item_a", word + " "))
    ui.apply(TranscriptDone("assistant", "item_a", FULL))
    before = len(views)
    # as the session publishes a stop: the barge-in, the state it causes, then what was heard
    ui.apply(barge_in("item_a"))
    ui.apply(StateChanged("listening", 2.0))
    ui.apply(HeardTranscript("item_a", 2.0, "Hello and welcome", FULL, 900.0, 4000.0, "arrival"))
    assert [(v["caption"], v["caption_cut"], v["barge_ins"], v["state"]) for v in views[before:]] == [
        ("Hello and welcome", True, 1, "listening")]
    ui.apply(TranscriptDone("assistant", "item_a", FULL))  # a late done changes nothing
    assert len(views) == before + 1


def test_a_kiosk_cut_with_no_heard_transcript_leaves_an_empty_caption() -> None:
    views: list[dict[str, object]] = []
    ui = load_kiosk().KioskView(views.append)
    ui.apply(TranscriptDone("assistant", "item_b", FULL))
    ui.apply(barge_in("item_b", trigger="connection_lost"))
    ui.apply(StateChanged("listening", 2.0))
    ui.apply(TranscriptDelta("user", "item_u", "hi"))  # the next event: the held view is shown
    assert (views[-1]["caption"], views[-1]["caption_cut"], views[-1]["barge_ins"], views[-1]["state"]) == (
        "", True, 0, "listening")
    assert all(FULL not in str(view["caption"]) for view in views[1:])


def test_a_kiosk_caption_of_an_item_the_stop_dropped_is_emptied() -> None:
    views: list[dict[str, object]] = []
    ui = load_kiosk().KioskView(views.append)
    ui.apply(TranscriptDelta("assistant", "item_d", "Next, "))  # its audio never played
    ui.apply(barge_in(None, deleted=("item_d",)))
    ui.apply(TranscriptDelta("assistant", "item_d", "the gift shop."))
    assert (views[-1]["caption"], views[-1]["caption_cut"], views[-1]["barge_ins"]) == ("", True, 1)


@pytest.mark.parametrize("argv", [["examples/assistant.py", "--voice", "tone"],
                                  ["examples/kiosk_sideband.py", "--voice", "tone"]])
def test_ctrl_c_ends_an_example_with_130_and_no_traceback(argv: list[str]) -> None:
    """kiosk_sideband.py had no Ctrl-C handler: the user got a page of traceback."""
    import signal

    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "VOXLINE_API_KEY", "VOXLINE_URL")}
    env["PYTHONPATH"] = str(ROOT)
    process = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # the server is up and the session is being opened
        assert first.startswith("using the built-in local server"), first
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130 and "Traceback" not in err, err
