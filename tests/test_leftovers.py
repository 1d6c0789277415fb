"""A test run leaves nothing in the shared temp dir: a passing test's ``tmp_path`` goes as it ends,
and Hypothesis keeps its example database in the user's own cache.

A small pytest session runs in a subprocess with this suite's settings (pyproject.toml and
tests/conftest.py) and its own HOME and TMPDIR, so what it leaves can be looked at.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

INNER = '''
import pytest
from hypothesis import given, strategies as st


def test_writes_to_its_tmp_path(tmp_path):
    (tmp_path / "recording.wav").write_bytes(bytes(200_000))


def test_a_falsified_example_is_kept_in_the_database():
    @given(st.integers())
    def below_ten(n):
        assert n < 10

    with pytest.raises(AssertionError):
        below_ten()
'''


def files_under(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if not path.is_dir())


@pytest.mark.slow
def test_a_passing_run_leaves_nothing_in_the_temp_dir_and_keeps_hypothesis_in_the_users_cache(tmp_path: Path) -> None:
    home, temp, tests = tmp_path / "home", tmp_path / "temp", tmp_path / "inner"
    for folder in (home, temp, tests):
        folder.mkdir()
    (tests / "test_inner.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_")) and k != "XDG_CACHE_HOME"}
    # no bytecode cache beside the inner test module: Python's own, whatever the caller's environment says
    env.update(HOME=str(home), TMPDIR=str(temp), PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tests),
         "-p", "tests.conftest", "-p", "no:cacheprovider", "-p", "no:randomly", str(tests)],
        cwd=tests, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
    assert files_under(temp) == []
    examples = home / ".cache" / "voxline" / "hypothesis" / "examples"
    assert files_under(examples) != []  # the falsified example, in this user's own cache
    assert files_under(tests) == ["test_inner.py"]  # and nothing in the working directory
