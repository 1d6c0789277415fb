"""Inputs that lie: a recording cut short, absurd headers, codecs voxline does not read, manifests
and scenarios nested past what a parser can follow. Each is one line naming the file, an
``error`` verdict in a farm, and memory bounded whatever the header claims.

The command-line tests run the installed ``voxline`` as a user does.
"""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from voxline.audio.g711 import alaw_decode, ulaw_decode
from voxline.audio.recording import WavFeed
from voxline.audio.wavio import WavReader
from voxline.base.errors import AudioError
from tests.support.cli import measured_run, one_line_error
from tests.support.farm import make_recording
from tests.support.wav_bytes import write_chunked_wav, write_rf64

PCM, ADPCM, ALAW, MULAW = 1, 2, 6, 7
TWO_SECONDS = (np.sin(np.arange(48_000) / 7) * 8000).astype("<i2").tobytes()


def run(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """The installed command, and the peak resident set it reached, in MiB."""
    done, peak_kib, _cpu = measured_run(*args, cwd=cwd, timeout=180)
    return done, peak_kib // 1024


def lying_file(path: Path, kind: str) -> Path:
    match kind:
        case "cut short":  # the header says ten seconds, the file holds two
            return write_chunked_wav(path, TWO_SECONDS, 24_000, 1, 16, PCM, data_size=len(TWO_SECONDS) * 5)
        case "one hertz":  # 200 kB of samples that would be 28 hours at 1 Hz
            return write_chunked_wav(path, TWO_SECONDS * 2 + TWO_SECONDS[:8_000], 1, 1, 16, PCM)
        case "four gigahertz":
            return write_chunked_wav(path, TWO_SECONDS, 4_000_000_000, 1, 16, PCM)
        case "65535 channels":
            return write_chunked_wav(path, TWO_SECONDS, 24_000, 65535, 16, PCM)
        case "giant fmt chunk":
            path.write_bytes(b"RIFF\xff\xff\xff\xffWAVEfmt \xf0\xff\xff\x7f" + TWO_SECONDS)
            return path
        case "ADPCM":
            return write_chunked_wav(path, TWO_SECONDS[:16_000], 8_000, 1, 4, ADPCM)
        case "flac named .wav":
            path.write_bytes(b"fLaC\x00\x00\x00\x22" + bytes(200))
            return path
        case "six bytes of text":  # shorter than a header, and not the start of one
            path.write_bytes(b"hello\n")
            return path
        case "a header cut short":
            path.write_bytes(b"RIFF\x10\x00")
            return path
        case "a pipe named .wav":  # opened, it waited for a writer that never came: the command hung for ever
            os.mkfifo(path)
            return path
    raise AssertionError(kind)


EXPECTED = {
    "cut short": "cut short: its header says 10.00 s of audio, the file holds 2.00 s",
    "one hertz": "says 1 Hz",
    "four gigahertz": "says 4000000000 Hz",
    "65535 channels": "65535 channels",
    "giant fmt chunk": "fmt chunk claims",
    "ADPCM": "format tag 0x0002",
    "flac named .wav": "not a WAV file",
    "six bytes of text": "not a WAV file",
    "a header cut short": "the file is empty or truncated",
    "a pipe named .wav": "it is a pipe; a recording is read from a file",
}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_a_lying_recording_is_one_line_naming_it_in_bounded_memory(tmp_path: Path, kind: str) -> None:
    source = lying_file(tmp_path / "input.wav", kind)
    done, peak_mib = run("replay", str(source), "--fast", "--voice", "tone", cwd=tmp_path)
    line = one_line_error(done)
    assert str(source) in line and EXPECTED[kind] in line, line
    assert peak_mib < 400, f"{kind}: {peak_mib} MiB"
    assert not (tmp_path / "input.heard.wav").exists()  # refused before anything was written


def test_a_header_left_unfinished_by_a_streaming_writer_reads_what_is_there(tmp_path: Path) -> None:
    path = write_chunked_wav(tmp_path / "live.wav", TWO_SECONDS, 24_000, 1, 16, PCM, data_size=0xFFFFFFFF)
    with WavReader(path) as reader:
        assert reader.frames == 48_000
    with WavFeed(path) as feed:
        assert feed.frames == 48_000 and np.array_equal(feed.read_all(), np.frombuffer(TWO_SECONDS, "<i2"))
    with pytest.raises(AudioError, match="cut short"):
        WavReader(write_chunked_wav(tmp_path / "short.wav", TWO_SECONDS, 24_000, 1, 16, PCM, data_size=96_002))


@pytest.mark.parametrize("extensible", [False, True])
def test_a_telephone_recording_in_mu_law_or_a_law_is_decoded(tmp_path: Path, extensible: bool) -> None:
    """G.711 WAV files (tags 7 and 6, or those sub-formats of WAVE_FORMAT_EXTENSIBLE) were refused as codecs
    voxline does not read, though it decodes both on the wire."""
    codes = np.arange(256, dtype=np.uint8).repeat(40)
    for tag, decode, kind in ((MULAW, ulaw_decode, "µ-law"), (ALAW, alaw_decode, "A-law")):
        path = write_chunked_wav(tmp_path / f"{tag}.wav", codes.tobytes(), 8_000, 1, 8, tag, extensible=extensible)
        with WavReader(path) as reader:
            assert reader.conversion == f"8-bit {kind} samples"
            assert np.array_equal(reader.read(reader.frames), decode(codes))


def test_a_device_or_a_socket_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """Read, a terminal (``voxline replay /dev/tty``, or ``/dev/stdin`` at a prompt) waited for a key for ever; a
    device is no recording, whatever reading it would give."""
    import socket

    with pytest.raises(AudioError, match="cannot read /dev/zero: it is a device; a recording is read from a file"):
        WavReader("/dev/zero")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock.wav"))
        with pytest.raises(AudioError, match="it is a socket"):
            WavReader(tmp_path / "sock.wav")


def test_an_rf64_file_reads_the_size_its_ds64_chunk_gives(tmp_path: Path) -> None:
    """RF64 (files over 4 GiB) leaves 0xFFFFFFFF in the data chunk's size: the real one is in ds64, and chunks
    may follow the samples. It was refused as no WAV at all."""
    path = write_rf64(tmp_path / "long.wav", TWO_SECONDS, 24_000, trailer=b"LIST\x04\x00\x00\x00INFO")
    with WavFeed(path) as feed:
        assert feed.frames == 48_000 and np.array_equal(feed.read_all(), np.frombuffer(TWO_SECONDS, "<i2"))
    with pytest.raises(AudioError, match="cut short: its header says 4.00 s of audio, the file holds 2.00 s"):
        WavReader(write_rf64(tmp_path / "cut.wav", TWO_SECONDS, 24_000, data_size=2 * len(TWO_SECONDS)))
    rifx = tmp_path / "rifx.wav"
    rifx.write_bytes(b"RIFX" + (tmp_path / "long.wav").read_bytes()[4:])
    with pytest.raises(AudioError, match=r"big-endian \(RIFX\)"):
        WavReader(rifx)


def test_a_manifest_scenario_or_transcript_is_read_within_a_bound_and_never_from_a_device(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--manifest /dev/zero`` (or ``--scenario``) read without end, its memory growing until the machine ran out;
    ``/dev/tty`` waited for a key for ever. A device is refused, and a file or a pipe read to a bound."""
    import voxline.base.documents as documents
    from voxline.realtime.errors import ConfigurationError
    from voxline.realtime.server.engine.scenario import load_scenario, read_transcripts
    from voxline.session.replay.farm import load_manifest

    with pytest.raises(ConfigurationError, match="cannot read manifest /dev/null: it is a device, not a file"):
        load_manifest(Path("/dev/null"))
    with pytest.raises(ConfigurationError, match="cannot read scenario /dev/null: it is a device, not a file"):
        load_scenario("/dev/null")
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 1 << 10)
    big = tmp_path / "big.txt"
    big.write_text("a line\n" * 200)
    with pytest.raises(ConfigurationError, match="big.txt: it holds more than"):
        read_transcripts(big)
    small = tmp_path / "small.txt"
    small.write_text("hi\n")
    assert read_transcripts(small) == ("hi",)


def test_a_file_streams_in_blocks_of_its_own_that_join_to_the_whole(tmp_path: Path) -> None:
    samples = (np.arange(30_001) % 3000 - 1500).astype("<i2")
    path = write_chunked_wav(tmp_path / "s.wav", samples.tobytes(), 16_000, 1, 16, PCM)
    with WavFeed(path) as whole:
        expected = whole.read_all()
    assert len(expected) == round(30_001 * 24_000 / 16_000)
    with WavFeed(path) as feed:
        blocks = [feed.read(960) for _ in range(-(-feed.frames // 960))]
        assert len(feed.read(960)) == 0
    assert all(b.base is None for b in blocks)  # copies: keeping one block keeps nothing else alive
    assert np.array_equal(np.concatenate(blocks), expected)


NESTED = "a = " + "[" * 5000 + "]" * 5000 + "\n"


def test_a_manifest_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    manifest = tmp_path / "farm.toml"
    manifest.write_text(NESTED, encoding="utf-8")
    done, _peak = run("replay", "--manifest", str(manifest), "--fast", "--out-dir", str(tmp_path / "out"), cwd=tmp_path)
    line = one_line_error(done)
    assert str(manifest) in line and "too deeply" in line


def test_a_scenario_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    scenario = tmp_path / "deep.toml"
    scenario.write_text(NESTED, encoding="utf-8")
    make_recording(tmp_path / "call.wav", 1, interrupt=False)
    done, _peak = run("replay", str(tmp_path / "call.wav"), "--fast", "--voice", "tone", "--scenario", str(scenario),
                      cwd=tmp_path)
    line = one_line_error(done)
    assert str(scenario) in line and "too deeply" in line


@pytest.mark.slow
def test_in_a_farm_each_lying_recording_is_an_error_verdict_and_the_others_run(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    make_recording(calls / "good.wav", 3, interrupt=True)
    for kind in ("cut short", "one hertz", "ADPCM"):
        lying_file(calls / f"{kind.replace(' ', '_')}.wav", kind)
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    done, _peak = run("replay", str(calls), "--fast", "--voice", "tone", "--out-dir", str(out), "--junit", str(junit),
                      cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    rows = {r["name"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert rows["good"]["status"] == "pass"
    for name, expected in (("cut_short", "cut short"), ("one_hertz", "says 1 Hz"), ("ADPCM", "0x0002")):
        assert rows[name]["status"] == "error" and expected in rows[name]["error"], rows[name]
        assert str(calls / f"{name}.wav") in rows[name]["error"] and "\n" not in rows[name]["error"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("errors") == "3" and suite.get("failures") == "0"
