"""An option whose value may be left out takes the word after it only if that word may be its value.

``voxline replay --aec a.wav`` was refused ("argument --aec: invalid choice: 'a.wav'"), and
``voxline replay --ray recordings/`` took the directory for a Ray cluster's address.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from voxline.session.cli import _full_parser


def parse(command: str, *args: str) -> dict[str, object]:
    parsed = vars(_full_parser(command).parse_any_order(list(args)))
    if "inputs" in parsed:
        parsed["inputs"] = [str(path) for path in parsed["inputs"]]
    return parsed


@pytest.mark.parametrize(("args", "aec", "inputs"), [
    (["--aec", "a.wav"], "webrtc", ["a.wav"]),
    (["--aec", "speex", "a.wav"], "speex", ["a.wav"]),
    (["--aec=speex", "a.wav"], "speex", ["a.wav"]),
    (["a.wav", "--aec"], "webrtc", ["a.wav"]),
    (["--aec", "--fast", "a.wav"], "webrtc", ["a.wav"]),
    (["a.wav", "b.wav"], None, ["a.wav", "b.wav"]),
])
def test_replay_aec_takes_only_a_canceller_as_its_value(args: list[str], aec: str | None, inputs: list[str]) -> None:
    parsed = parse("replay", *args)
    assert (parsed["aec"], parsed["inputs"]) == (aec, inputs)


def test_replay_local_vad_and_talk_aec_too() -> None:
    parsed = parse("replay", "--local-vad", "a.wav", "--fast")
    assert (parsed["local_vad"], parsed["inputs"]) == ("webrtc", ["a.wav"])
    assert parse("replay", "--local-vad", "silero", "a.wav")["local_vad"] == "silero"
    assert parse("talk", "--aec")["aec"] == "webrtc"
    assert parse("talk", "--aec", "speex")["aec"] == "speex"


@pytest.mark.parametrize(("args", "ray", "inputs"), [
    (["--ray", "recordings/"], "", ["recordings"]),
    (["--ray", "a.wav", "b.wav"], "", ["a.wav", "b.wav"]),
    (["--ray", "auto", "recordings"], "auto", ["recordings"]),
    (["--ray", "ray://head:10001", "recordings"], "ray://head:10001", ["recordings"]),
    (["--ray", "10.0.0.5:6379", "recordings"], "10.0.0.5:6379", ["recordings"]),
    (["--ray", "[fd00::1]:6379", "recordings"], "[fd00::1]:6379", ["recordings"]),
    (["--ray=weird", "recordings"], "weird", ["recordings"]),
])
def test_farm_ray_takes_only_an_address_as_its_value(args: list[str], ray: str, inputs: list[str]) -> None:
    parsed = parse("replay", *args)
    assert (parsed["ray"], parsed["inputs"]) == (ray, inputs)


def test_a_folder_that_is_there_is_an_input_by_its_bare_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "recordings").mkdir()
    monkeypatch.chdir(tmp_path)
    parsed = parse("replay", "--ray", "recordings")
    assert (parsed["ray"], parsed["inputs"]) == ("", ["recordings"])


def test_an_option_before_a_double_dash_takes_its_default() -> None:
    parsed = parse("replay", "--aec", "--", "a.wav")
    assert (parsed["aec"], parsed["inputs"]) == ("webrtc", ["a.wav"])


def test_a_mistyped_value_is_still_refused_as_one() -> None:
    """``--aec spex a.wav`` took 'spex' for a second input (a farm: '--aec applies to a single replay'), and
    ``talk --aec spex`` said 'unrecognized arguments': a word close to a value is a mistyped value."""
    with pytest.raises(SystemExit):
        parse("replay", "--aec", "spex", "a.wav")
    with pytest.raises(SystemExit):  # a word that is no value and names no file: a mistake, not an input
        parse("replay", "a.wav", "--aec", "nope")
    with pytest.raises(SystemExit):
        parse("talk", "--aec", "webrct")


def test_stdin_after_an_option_is_an_input() -> None:
    parsed = parse("replay", "--aec", "-")
    assert (parsed["aec"], parsed["inputs"]) == ("webrtc", ["-"])


@pytest.mark.parametrize("word", ["speech/", "speex.wav", "webrtc.wav"])
def test_an_input_named_like_a_value_is_an_input(word: str) -> None:
    """Close to 'speex' or 'webrtc', these were refused as mistyped cancellers: a path is an input."""
    parsed = parse("replay", "--aec", word)
    assert (parsed["aec"], parsed["inputs"]) == ("webrtc", [word.rstrip("/")])
