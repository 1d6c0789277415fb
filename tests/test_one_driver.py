"""One machine, one driver: ``VoiceSession`` drives the session machine for replay, talk and apps.

A replay that pumped the session core or the machine its own way would skip the tools, the
conversation mirror and reconnect that applications run; these tests fail if one grows back.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ci import require_tool

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "audio" / "barge_in.wav"
MACHINE = ROOT / "session" / "machine" / "machine.py"
DRIVERS = {ROOT / "session" / name  # VoiceSession and its parts
           for name in ("voice.py", "link.py", "input_feed.py", "session_loops.py")}
SEAM = ROOT / "session" / "machines.py"  # the driver's choice of machine (Realtime or GPT-Live)
STEPS = ("receive", "tick", "interrupt", "local_speech", "captured", "connection_lost", "restore")


def _python_files() -> list[Path]:
    return [p for folder in ("realtime", "audio", "session", "examples", "benchmarks")
            for p in (ROOT / folder).rglob("*.py")]


def test_only_the_machine_builds_or_pumps_a_session_core() -> None:
    offenders = []
    for path in _python_files():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "SessionCore":
                if path != MACHINE:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} builds a SessionCore")
            if (isinstance(node, ast.Attribute) and node.attr in ("handle", "tick", "interrupt", "local_speech")
                    and isinstance(node.value, ast.Attribute) and node.value.attr == "core" and path != MACHINE):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} calls core.{node.attr}")
    assert offenders == []


def test_only_voice_session_drives_a_session_machine() -> None:
    offenders = []
    for path in _python_files():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("SessionMachine", "LiveMachine")):
                if path not in DRIVERS and path != SEAM:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} builds a {node.func.id}")
            if (isinstance(node, ast.Attribute) and node.attr in STEPS and isinstance(node.value, ast.Attribute)
                    and node.value.attr in ("machine", "_machine") and path not in DRIVERS):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} calls machine.{node.attr}")
    assert offenders == []


TOOLS = '''
import pathlib
from voxline import ToolRegistry

registry = ToolRegistry()
LOG = pathlib.Path(__file__).with_name("runs.log")


@registry.tool(read_only=True)
def get_weather(city: str, unit: str = "celsius") -> dict:
    """Current weather for a city."""
    with LOG.open("a") as f:
        f.write(f"weather {city}\\n")
    return {"city": city, "sky": "clear", "temperature": 21, "unit": unit}


@registry.tool(read_only=True)
def get_time(zone: str) -> str:
    """The time in a zone."""
    with LOG.open("a") as f:
        f.write(f"time {zone}\\n")
    return "12:00"
'''


@pytest.mark.slow
def test_replay_runs_the_servers_tool_calls_once_each_with_one_follow_up(tmp_path: Path) -> None:
    require_tool("espeak-ng")
    (tmp_path / "mytools.py").write_text(TOOLS)
    events = tmp_path / "events.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "voxline", "replay", str(EXAMPLE), "--fast", "--scenario", "tools", "--voice", "tone",
         "--tools", "mytools:registry", "--out", str(tmp_path / "heard.wav"), "--events", str(events)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": ""})
    assert run.returncode == 0, run.stderr
    assert "nothing ran them" not in run.stderr
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    calls = [e["event"]["call_id"] for e in lines
             if e["dir"] == "in" and e["event"]["type"] == "response.function_call_arguments.done"]
    outputs = [e["event"]["item"]["call_id"] for e in lines if e["dir"] == "out"
               and e["event"]["type"] == "conversation.item.create"
               and e["event"]["item"]["type"] == "function_call_output"]
    finished = [e["event"] for e in lines if e["dir"] == "local" and e["event"]["type"] == "ToolFinished"]
    runs = (tmp_path / "runs.log").read_text().splitlines()
    # the question starts turn 1 (one call), "stop, wait a second" turn 2 (two parallel calls)
    assert len(calls) == 3 and sorted(outputs) == sorted(calls) == sorted(f["call_id"] for f in finished)
    assert sorted(runs) == ["time UTC", "weather Oslo", "weather Paris"]
    assert all(f["ok"] for f in finished)
    # exactly one response.create after the last output of each response, none in between
    out = [e["event"]["type"] for e in lines if e["dir"] == "out"
           and e["event"]["type"] in ("conversation.item.create", "response.create")]
    assert out == ["conversation.item.create", "response.create",
                   "conversation.item.create", "conversation.item.create", "response.create"]
    assert "tool: get_weather(" in run.stdout and "tool: get_time(" in run.stdout
