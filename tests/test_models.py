"""Default models are current ones the SDK lists; every entry point takes another; the server takes any."""

from __future__ import annotations

import argparse
import inspect
import re
import typing

import pytest
import websockets
from openai.types.realtime import AudioTranscription, RealtimeSessionCreateRequest

from voxline.base.models import DEFAULT_REALTIME_MODEL, DEFAULT_TRANSCRIPTION_MODEL
from voxline.realtime.server import serve
from voxline.session.cli import talk
from voxline.session.cli.replay import add_arguments as add_replay_arguments
from voxline.session.settings import SessionSettings, load_settings
from voxline.realtime.errors import UsageError
from tests.support.oracle import WireRecorder
from tests.support.local_server import AUTH, Client, config


def _listed(model_class: type) -> set[str]:
    names: set[str] = set()
    for arg in typing.get_args(model_class.model_fields["model"].annotation):
        names.update(typing.get_args(arg))
    return names


def _deprecated(model_class: type) -> set[str]:
    """The names the SDK's docstring lists under "Deprecated values" (with a shutdown date)."""
    source = inspect.getsource(model_class)
    block = source.split("Deprecated values:", 1)[1].split('"""', 1)[0]
    return set(re.findall(r'"([^"]+)"', block))


@pytest.mark.parametrize(
    ("default", "model_class"),
    [(DEFAULT_REALTIME_MODEL, RealtimeSessionCreateRequest), (DEFAULT_TRANSCRIPTION_MODEL, AudioTranscription)],
)
def test_the_defaults_are_listed_by_the_sdk_and_not_scheduled_for_shutdown(default: str, model_class: type) -> None:
    deprecated = _deprecated(model_class)
    assert "gpt-realtime" in deprecated or "whisper-1" in deprecated  # the docstring was parsed
    assert default in _listed(model_class) and default not in deprecated


def test_settings_and_clis_default_to_the_current_model_and_take_another(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOXLINE_MODEL", raising=False)
    assert SessionSettings().model == DEFAULT_REALTIME_MODEL
    monkeypatch.setenv("VOXLINE_MODEL", "gpt-realtime-2.1-mini")
    monkeypatch.setenv("VOXLINE_TRANSCRIPTION_MODEL", "gpt-live-transcribe")
    settings = talk.TalkSettings(transcribe=True)
    assert settings.model == "gpt-realtime-2.1-mini"
    assert settings.session_config()["audio"]["input"]["transcription"] == {"model": "gpt-live-transcribe"}
    parser = argparse.ArgumentParser()
    add_replay_arguments(parser)
    args = parser.parse_args(["in.wav", "--out", "heard.wav", "--events", "events.jsonl"])
    from voxline.session.cli.replay import settings_for

    monkeypatch.delenv("VOXLINE_MODEL", raising=False)
    assert settings_for(args).model == DEFAULT_REALTIME_MODEL  # no --model, no VOXLINE_MODEL


def test_talk_takes_a_model_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "VOXLINE_API_KEY", "VOXLINE_URL", "VOXLINE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    parser = argparse.ArgumentParser()
    talk.add_arguments(parser)
    settings, local = talk._settings(parser.parse_args(["--model", "gpt-realtime-2"]))
    assert local and settings.model == "gpt-realtime-2"
    settings, _ = talk._settings(parser.parse_args([]))
    assert settings.model == DEFAULT_REALTIME_MODEL


@pytest.mark.parametrize("from_env", [False, True])
def test_model_names_the_live_model_when_the_interface_is_live(monkeypatch: pytest.MonkeyPatch, from_env: bool) -> None:
    """``--model`` with ``--api live`` (or ``VOXLINE_API=live``) is the Live model asked for, not dropped."""
    for name in ("OPENAI_API_KEY", "VOXLINE_API_KEY", "VOXLINE_URL", "VOXLINE_MODEL", "VOXLINE_LIVE_MODEL", "VOXLINE_API"):
        monkeypatch.delenv(name, raising=False)
    api = ["--api", "live"]
    if from_env:
        monkeypatch.setenv("VOXLINE_API", "live")
        api = []
    parser = argparse.ArgumentParser()
    talk.add_arguments(parser)
    settings, _ = talk._settings(parser.parse_args(["--model", "gpt-live-1.1", *api]))
    assert settings.api == "live" and settings.live_model == "gpt-live-1.1"
    assert settings.live_session_config([])["model"] == "gpt-live-1.1"
    assert settings.model == DEFAULT_REALTIME_MODEL  # the Realtime model is untouched
    assert settings.asked_model == "gpt-live-1.1"  # what the talk banner names
    from voxline.session.cli.replay import settings_for

    parser = argparse.ArgumentParser()
    add_replay_arguments(parser)
    args = parser.parse_args(["in.wav", "--model", "gpt-live-1.1", *api])
    assert settings_for(args).live_model == "gpt-live-1.1"
    with pytest.raises(UsageError, match=r"^--model='  ': names no model"):
        load_settings(SessionSettings, model="  ", api="live")


async def test_the_local_server_accepts_any_model_name() -> None:
    recorder = WireRecorder()
    async with serve(config(recorder)) as server:
        for model in ("gpt-realtime-2.1", "gpt-realtime-9-2031-01-01"):
            async with websockets.connect(f"{server.url}/realtime?model={model}", additional_headers=AUTH) as ws:
                c = Client(ws, recorder)
                created = (await c.until("session.created"))[-1]
                assert created["session"]["model"] == model
    recorder.verify()
