"""The README's library example runs as written (against the built-in server), and its test commands
are the full run CI makes and an inner loop that leaves out only the tests marked slow."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_readme_library_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Library") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    script = tmp_path / "example.py"
    script.write_text(code.group(1))
    run = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "ToolFinished" in run.stdout and "weather report" in run.stdout


def test_the_readme_runs_every_test_as_ci_does_and_an_inner_loop_without_the_slow_ones() -> None:
    section = (ROOT / "README.md").read_text().split("## Tests", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    full, inner = block.group(1).strip().splitlines()
    assert full == "uv run pytest -q -n 2 --dist loadgroup"  # every test, spread over two workers
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1] == full  # what CI runs
    assert inner == 'uv run pytest -q -m "not slow"'
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert any(marker.startswith("slow:") for marker in pytest_options["markers"])
    assert "-m" not in pytest_options.get("addopts", "").split()  # the full run deselects nothing
