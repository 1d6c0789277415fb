"""The public API as a type checker in strict mode sees it from an application.

`mypy --strict` over an app that imports from ``voxline`` and ``voxline.audio`` (the README's
paths), the README's library example and the shipped examples: the names must be explicit
exports (a lazily loaded name must not make every other name ``Any``), the settings must take
their defaults and a key as text, and a wrong keyword or a misspelt name must be an error.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

APP = '''
from __future__ import annotations

from typing import assert_never

import voxline
import voxline.audio
from voxline import (AppEvent, SessionEvent, SessionSettings, ToolEvent, ToolFinished, ToolRegistry, ToolStarted,
                     VoiceSession)
from voxline.audio import MicSource, list_devices


def settings() -> SessionSettings:
    return SessionSettings(api_key="sk-text-is-taken", reconnect_attempts=3, turn_detection="none")


def key_of(settings: SessionSettings) -> str | None:
    return None if settings.api_key is None else settings.api_key.get_secret_value()  # read back as a SecretStr


def kind(event: AppEvent) -> str:
    match event:
        case ToolStarted() | ToolFinished():
            return "tool"
        case _:
            return type(event).__name__


def tool_name(event: ToolEvent) -> str:
    match event:
        case ToolStarted(name=name) | ToolFinished(name=name):
            return name
        case _:
            assert_never(event)


def session_only(event: SessionEvent) -> str:
    return type(event).__name__


class Kiosk(VoiceSession):
    banner = "welcome"


async def main() -> None:
    async with Kiosk(settings(), tools=ToolRegistry()) as session:
        banner: str = session.banner  # the subclass, not VoiceSession
        async for event in session:
            print(kind(event), banner)
    kiosk = Kiosk.on_devices(settings(), input_device="2 Null Output (vspk)", run_tools=False)
    print(kiosk.banner, MicSource, list_devices, voxline.__version__, voxline.audio.SAMPLE_RATE)
'''

WRONG = '''
import voxline
from voxline import VoiceSession, VoiceSesion
from voxline.audio import MicSorce

print(voxline.SessionSetings, VoiceSesion, MicSorce)
VoiceSession.on_devices(tool=None)
'''


def _readme_library_example() -> str:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    return next(block for block in blocks if "from voxline import" in block and "VoiceSession(settings" in block)


def _mypy(*files: Path, cache: Path) -> list[str]:
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--config-file", "",
                          "--cache-dir", str(cache), *map(str, files)], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    return [line for line in run.stdout.splitlines() if ": error:" in line]


@pytest.mark.slow
def test_an_app_the_readme_and_the_examples_type_check_in_strict_mode(tmp_path: Path) -> None:
    app, readme, wrong = tmp_path / "kiosk_app.py", tmp_path / "readme_example.py", tmp_path / "wrong.py"
    app.write_text(APP)
    readme.write_text(_readme_library_example())
    wrong.write_text(WRONG)
    examples = sorted((ROOT / "examples").glob("*.py")) + sorted((ROOT / "examples" / "web_kiosk").glob("*.py"))
    errors = _mypy(app, readme, wrong, *examples, cache=tmp_path / "cache")
    assert [e for e in errors if not e.startswith(str(wrong))] == []
    found = "\n".join(errors)
    for expected in ('has no attribute "VoiceSesion"', 'has no attribute "MicSorce"',
                     'has no attribute "SessionSetings"', 'Unexpected keyword argument "tool"'):
        assert expected in found, found


def test_the_settings_signature_a_type_checker_reads_is_the_fields_with_the_key_as_text_too() -> None:
    """SessionSettings spells its keywords out for type checkers (a key given as text is taken, and read back as a
    SecretStr): every field, in order, with its annotation and its default."""
    from voxline.base.models import DEFAULT_LIVE_MODEL, DEFAULT_REALTIME_MODEL, DEFAULT_TRANSCRIPTION_MODEL
    from voxline.session.settings import DEFAULT_URL, SessionSettings

    tree = ast.parse((ROOT / "session" / "settings.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SessionSettings")
    init = next(f for node in cls.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
                for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    names = {"DEFAULT_URL": DEFAULT_URL, "DEFAULT_REALTIME_MODEL": DEFAULT_REALTIME_MODEL,
             "DEFAULT_TRANSCRIPTION_MODEL": DEFAULT_TRANSCRIPTION_MODEL, "DEFAULT_LIVE_MODEL": DEFAULT_LIVE_MODEL}
    declared = [(a.arg, ast.unparse(a.annotation) if a.annotation else None,
                 names.get(ast.unparse(d)) if isinstance(d, ast.Name) else ast.literal_eval(d))
                for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults)]
    annotations = {n.target.id: ast.unparse(n.annotation) for n in cls.body
                   if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    expected = [(name, "SecretStr | str | None" if name == "api_key" else annotations[name], field.default)
                for name, field in SessionSettings.model_fields.items()]
    assert declared == expected


def test_the_top_level_names_are_one_list_three_ways() -> None:
    """voxline's names are in its lazy-load table, in __all__ and in the imports a type checker reads as exports."""
    import voxline

    tree = ast.parse((ROOT / "session" / "voxline" / "__init__.py").read_text())
    imported = {alias.asname for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names if alias.asname is not None}
    table = set(voxline._API)
    assert table == imported == set(voxline.__all__) - {"__version__"}
    import voxline.audio

    assert {"MicSource", "SpeakerSink", "list_devices", "DeviceInfo"} <= set(dir(voxline.audio))


def test_the_replay_fixtures_type_is_the_replay_functions_signature() -> None:
    """``ReplayRunner`` spells out ``replay_in_lockstep``'s signature for a test to annotate the fixture with."""
    import inspect

    from voxline.session.replay.check import ReplayRunner, replay_in_lockstep

    declared = list(inspect.signature(ReplayRunner.__call__).parameters.values())[1:]  # without self
    assert declared == list(inspect.signature(replay_in_lockstep).parameters.values())
    assert inspect.signature(ReplayRunner.__call__).return_annotation == "ReplayRun"
