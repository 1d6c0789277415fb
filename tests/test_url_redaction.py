"""A key in a URL never leaves the process: ``redact_url`` and ``redact`` remove userinfo and
secret-looking query values, and every command that takes ``--url`` prints and writes it only
that way (stdout, stderr, REPORT.html, SUMMARY.json, EVENTS.jsonl, results.jsonl, JUnit, per-
recording reports). The key in ``user:key@`` is sent as the one bearer token."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.wavio import write_wav
from voxline.base.audio_format import SAMPLE_RATE
from voxline.base.redaction import forget_secret, redact, redact_url, register_url_secrets, url_secrets
from voxline.realtime.transports.http import split_userinfo
from tests.support.cli import EXAMPLE, VOXLINE, voxline
from tests.support.hostile import speech

USERINFO = "CanaryUserinfo0001"
API_KEY = "CanaryApiKey0002"
KEY = "CanaryKey0003"
AUTH = "CanaryAuth0004"
CANARIES = (USERINFO, API_KEY, KEY, AUTH)
QUERY = f"api-key={API_KEY}&key={KEY}&authorization=Bearer%20{AUTH}"


@pytest.mark.parametrize(("url", "shown"), [
    (f"wss://user:{USERINFO}@host:8/v1?{QUERY}&model=m",
     "wss://[redacted]@host:8/v1?api-key=[redacted]&key=[redacted]&authorization=[redacted]&model=m"),
    (f"ws://{USERINFO}@127.0.0.1:8765/v1", "ws://[redacted]@127.0.0.1:8765/v1"),
    (f"https://h/v1?access_token={KEY}&X-Amz-Signature={AUTH}", "https://h/v1?access_token=[redacted]&X-Amz-Signature=[redacted]"),
    ("ws://127.0.0.1:8765/v1?model=gpt-realtime&call_id=rtc_1", "ws://127.0.0.1:8765/v1?model=gpt-realtime&call_id=rtc_1"),
    (f"ws://h/v1?bearer={KEY}&jwt={AUTH}", "ws://h/v1?bearer=[redacted]&jwt=[redacted]"),
    (f"ws://h/v1?model=m;key={KEY};x=1", "ws://h/v1?model=m;key=[redacted];x=1"),
])
def test_redact_url_removes_userinfo_and_secret_query_values(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert not any(c in redact(f"cannot connect to {url}: refused") for c in CANARIES)


@pytest.mark.parametrize(("url", "shown"), [
    (f"ws://u:{KEY[:6]}/{KEY[6:]}@127.0.0.1:8765/v1", "ws://[redacted]@127.0.0.1:8765/v1"),  # a key holding '/'
    (f"wss:/u:{KEY}@h/v1", "wss:///[redacted]@h/v1"),  # one slash: a URL parser finds no host, nor userinfo
    (f"{KEY}@h:1/v1?api_key={API_KEY}", "[redacted]@h:1/v1?api_key=[redacted]"),
    (f"ws://u:{KEY}@[::1]:80/v1#top", "ws://[redacted]@[::1]:80/v1#[redacted]"),
    (f"ws://u:pa@{KEY}@[::1]/v1", "ws://[redacted]@[::1]/v1"),  # an '@' in the password: the last one ends it
    (f"wss://u:{KEY[:6]}?{KEY[6:]}@h/v1", "wss://[redacted]@h/v1"),  # a key holding '?': it ends the authority
    (f"wss://u:{KEY[:6]}#{KEY[6:]}@h/v1", "wss://[redacted]@h/v1"),  # or '#', and the '@' comes after
    (f"wss://{KEY[:6]}?{KEY[6:]}@h/v1", "wss://[redacted]@h/v1"),  # a parser reads the key's start as the host
    (f"wss://u:1234?{KEY}@h/v1", "wss://[redacted]@h/v1"),  # or as a host and a port
])
def test_the_userinfo_is_found_where_a_url_parser_misses_it(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    register_url_secrets(url)
    try:
        assert not any(c in redact(f"cannot connect to {url}: refused") for c in CANARIES)
    finally:
        for value in url_secrets(url):
            forget_secret(value)


def test_the_settings_dumps_redact_a_key_in_the_url_and_the_settings_still_use_it() -> None:
    """Apps log ``settings.model_dump()``: before, a key in the URL was in it whole (``api_key`` was masked)."""
    from voxline.session.settings import SessionSettings

    url = f"wss://user:{USERINFO}@api.example/v1?api-key={KEY}&model=m"
    settings = SessionSettings(url=url)
    assert settings.url == url  # what the session dials
    for shown in (settings.model_dump()["url"], settings.model_dump_json(), repr(settings)):
        assert USERINFO not in shown and KEY not in shown
    assert settings.model_dump()["url"] == "wss://[redacted]@api.example/v1?api-key=[redacted]&model=m"


def test_url_secrets_are_registered_so_they_are_redacted_anywhere() -> None:
    url = f"wss://user:{USERINFO}@host/v1?{QUERY}"
    assert set(CANARIES) <= set(url_secrets(url)) | {f"Bearer {AUTH}"} and f"Bearer {AUTH}" in url_secrets(url)
    register_url_secrets(url)
    try:
        assert redact(f"a server echoed {USERINFO} and {API_KEY} and {KEY}") == (
            "a server echoed [redacted] and [redacted] and [redacted]")
    finally:
        for value in url_secrets(url):
            forget_secret(value)


@pytest.mark.parametrize("url", ["https://host/path@v2/x", "wss://[::1]/v1/@foo", "ws://localhost:8080/@@",
                                 "wss://api.example.com/v1/@team/realtime", "ws://h/v1?x=a@b"])
def test_an_at_sign_in_a_urls_path_or_query_is_no_userinfo(url: str) -> None:
    """Taken for the end of a userinfo, it hid the host in every message ('[redacted]@team') and registered
    'host/path' as a secret, which then garbled every line naming the host."""
    assert redact_url(url) == url and url_secrets(url) == []
    if "?" in url:  # nor in the query of a URL a parser cannot read whole
        broken = url.replace("://", ":/", 1)
        assert "[redacted]" not in redact_url(broken) and url_secrets(broken) == []


@pytest.mark.parametrize("url", [f"wss:/u:{KEY}@h/v1", f"ws:///u:{KEY}@h/v1", f"ws://u:{KEY[:6]}/{KEY[6:]}@h:1/v1",
                                 f"u:{KEY}@h/v1", f"ws://u:{KEY}@h:99999/v1",
                                 f"wss://u:{KEY[:6]}?{KEY[6:]}@h/v1", f"wss://u:{KEY[:6]}#{KEY[6:]}@h/v1",
                                 f"wss://{KEY[:6]}?{KEY[6:]}@h/v1"])
def test_a_mistyped_url_is_named_without_its_key(url: str) -> None:
    from voxline.base.urls import url_problem

    problem = url_problem(url)
    assert problem is not None and not any(KEY[i:i + 5] in problem for i in range(len(KEY) - 4)), problem
    assert KEY in url_secrets(url) or KEY[6:] in "".join(url_secrets(url))


@pytest.mark.parametrize("query", [f"bearer={KEY}", f"jwt={KEY}", f"model=m;key={KEY}", f"m=1&session_token={KEY}"])
def test_every_secret_parameter_is_registered_however_the_query_is_written(query: str) -> None:
    """A URL's query is printed re-encoded (``;`` as ``%3B``), where no shape finds the value: it must be known."""
    assert KEY in url_secrets(f"ws://h/v1?{query}")


@pytest.mark.parametrize(("url", "stripped", "key"), [
    (f"ws://user:{USERINFO}@h:1/v1?m=1", "ws://h:1/v1?m=1", USERINFO),
    (f"https://{USERINFO}@h/v1", "https://h/v1", USERINFO),
    ("wss://user:a%40b%3Ac@h/v1", "wss://h/v1", "a@b:c"),
    ("ws://h/v1", "ws://h/v1", ""),
])
def test_split_userinfo(url: str, stripped: str, key: str) -> None:
    assert split_userinfo(url) == (stripped, key)


# ---------------------------------------------------------------- the installed command, as a user runs it


@pytest.fixture
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """``voxline serve`` whose key is the one in the URL's userinfo: it answers only if the
    client sends that key, once. Its one reply is short, so that a real-time replay ends soon after its input."""
    scenario = tmp_path_factory.mktemp("scenario") / "short.toml"
    scenario.write_text('name = "short"\nafter_last = "repeat_last"\n\n[[turns]]\nsay = "Yes."\n')
    server = subprocess.Popen([str(VOXLINE), "serve", "--port", "0", "--voice", "tone", "--speed", "instant",
                               "--scenario", str(scenario), "--api-key", USERINFO], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"})
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        found = re.search(r"127\.0\.0\.1:(\d+)/", banner)
        assert found, banner
        yield int(found.group(1)), server
    finally:
        server.terminate()
        out, err = server.communicate(timeout=30)
        assert not any(c in out + err for c in CANARIES)


def assert_no_canary(tmp_path: Path, *runs: subprocess.CompletedProcess[str]) -> None:
    for run in runs:
        for canary in CANARIES:
            assert canary not in run.stdout and canary not in run.stderr, (canary, run.stdout, run.stderr)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    for path in written:
        data = path.read_bytes()
        for canary in CANARIES:
            assert canary.encode() not in data, (canary, path)


NO_KEY = {"OPENAI_API_KEY": "", "VOXLINE_API_KEY": ""}


def short_call(path: Path) -> Path:
    """Two and a half seconds: a question at 0.3 s, then silence while the reply starts."""
    samples = np.zeros(int(2.5 * SAMPLE_RATE), dtype=np.int16)
    question = speech(np.random.default_rng(7), 0.8)
    samples[int(0.3 * SAMPLE_RATE):][: len(question)] = question
    write_wav(path, samples)
    return path


@pytest.mark.slow
def test_no_command_prints_or_writes_a_key_given_in_the_url(tmp_path: Path, served: tuple[int, object]) -> None:
    port, _server = served
    url = f"ws://user:{USERINFO}@127.0.0.1:{port}/v1?{QUERY}"
    recordings = tmp_path / "in"
    recordings.mkdir()
    call = short_call(tmp_path / "call.wav")  # a question and the reply it starts: every real-time replay is short
    for name in ("a.wav", "b.wav"):
        (recordings / name).write_bytes(call.read_bytes())
    single = voxline("replay", str(call), "--out", str(tmp_path / "heard.wav"), "--events",
                     str(tmp_path / "events.jsonl"), "--report", str(tmp_path / "report.html"), "--summary",
                     str(tmp_path / "summary.json"), "--url", url, env=NO_KEY)
    assert single.returncode == 0, single.stderr
    assert "[redacted]@127.0.0.1" in single.stdout and "api-key=[redacted]" in single.stdout
    assert "api-key=[redacted]" in (tmp_path / "summary.json").read_text()
    farm = voxline("replay", str(recordings), "--out-dir", str(tmp_path / "out"), "--junit", str(tmp_path / "junit.xml"),
                   "--results", str(tmp_path / "results.jsonl"), "--farm-report", "--url", url, env=NO_KEY)
    assert farm.returncode == 0, farm.stderr
    assert (tmp_path / "out" / "a" / "summary.json").is_file()
    webrtc = voxline("replay", str(call), "--out", str(tmp_path / "heard-rtc.wav"), "--events",
                     str(tmp_path / "events-rtc.jsonl"), "--transport", "webrtc", "--url", url, env=NO_KEY)
    assert webrtc.returncode == 0, webrtc.stderr
    http_url = url.replace("ws://", "http://")
    token = voxline("token", "--url", http_url, env=NO_KEY)
    assert token.returncode == 0 and '"ek_' in token.stdout, token.stderr
    refused = [
        voxline("replay", str(EXAMPLE), "--out", str(tmp_path / "f.wav"), "--events", str(tmp_path / "f.jsonl"),
                "--fast", "--report", str(tmp_path / "f.html"), "--summary", str(tmp_path / "f.json"), "--url", url),
        voxline("replay", str(recordings), "--out-dir", str(tmp_path / "fast"), "--fast", "--junit",
                str(tmp_path / "fast.xml"), "--results", str(tmp_path / "fast.jsonl"), env={"VOXLINE_URL": url}),
        voxline("replay", str(EXAMPLE), "--out", str(tmp_path / "x.wav"), "--events", str(tmp_path / "x.jsonl"),
                "--url", f"wss://example.invalid/v1?{QUERY}", env=NO_KEY),
        voxline("talk", "--no-ui", "--url", f"wss://user:{USERINFO}@example.invalid/v1?{QUERY}", env=NO_KEY),
        voxline("token", "--url", f"http://user:{USERINFO}@127.0.0.1:1/v1?{QUERY}", env=NO_KEY),
    ]
    assert all(run.returncode != 0 for run in refused)
    assert_no_canary(tmp_path, single, farm, webrtc, token, *refused)


def test_a_farms_options_show_their_url_redacted() -> None:
    """Their settings were redacted, their own url field was not: an app logging the options logged the key."""
    from pathlib import Path

    from voxline.session.replay.farm.runner import FarmOptions
    from voxline.session.settings import SessionSettings

    url = f"ws://u:{USERINFO}@127.0.0.1:8765/v1?api-key={API_KEY}"
    options = FarmOptions(out_dir=Path("out"), settings=SessionSettings(url=url), url=url)
    shown = repr(options)
    assert USERINFO not in shown and API_KEY not in shown and "url='ws://[redacted]@127.0.0.1:8765/v1" in shown
    assert options.url == url  # what the farm dials
