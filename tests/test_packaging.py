"""The distribution installs one namespace, ``voxline``, and nothing else.

The wheel is built from a copy of the tracked files and installed into a fresh virtual
environment beside PyPI's ``realtime`` (Supabase's client), which once collided with our
``realtime/`` folder. PyPI's wheel and its dependencies come from the wheelhouse that
``.ci/install`` downloads, so the test itself reaches no network.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

import voxline
from tests.support.ci import IN_CI

ROOT = Path(__file__).resolve().parents[1]
WHEELHOUSE = Path(os.environ.get("VOXLINE_WHEELHOUSE", Path.home() / ".cache" / "voxline" / "wheelhouse"))
LAYERS = {"realtime": "voxline.realtime", "audio": "voxline.audio", "session": "voxline.session",
          "session/voxline": "voxline"}


def _source_packages() -> set[str]:
    """Every package in the tree, by its installed name."""
    found = set()
    for folder, name in LAYERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if folder == "session" and rel.parts[:1] == ("voxline",):
                continue  # the root package has its own entry
            found.add(".".join([name, *rel.parts]))
    return found


def test_every_package_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    assert listed == _source_packages()


def test_tests_import_the_installed_package_not_the_folders() -> None:
    assert voxline.__file__ is not None
    for name in ("realtime", "audio", "session"):
        module = sys.modules.get(name)
        assert module is None or not str(getattr(module, "__file__", "")).startswith(str(ROOT)), name


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("tree")
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        source = ROOT / rel
        if source.is_file():
            target = tree / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(tree)], check=True, capture_output=True, timeout=300)
    (built,) = out.glob("voxline-*.whl")
    return built


@pytest.mark.slow
def test_wheel_holds_only_voxline_with_scenarios_and_py_typed(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"voxline", f"voxline-{voxline.__version__}.dist-info"}
    assert "voxline/py.typed" in names
    for scenario in ("default", "long", "tools"):
        assert f"voxline/realtime/server/scenarios/{scenario}.toml" in names
    packages = {n.rsplit("/", 1)[0].replace("/", ".") for n in names if n.endswith("/__init__.py")}
    assert packages == _source_packages()
    assert "voxline/__main__.py" in names and not any("tests" in n.split("/") for n in names)


@pytest.mark.slow
def test_wheel_installs_beside_pypi_realtime(wheel: Path, tmp_path: Path) -> None:
    if not any(WHEELHOUSE.glob("realtime-*.whl")):
        message = f"PyPI's realtime wheel is not in {WHEELHOUSE} (.ci/install downloads it)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # voxline's dependencies come from the environment running the tests, after the new venv's
    # own site-packages; a bare path line, so that environment's editable hook is not loaded
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(WHEELHOUSE)]
    subprocess.run([*pip, "realtime"], check=True, capture_output=True, timeout=300)
    subprocess.run([*pip, "--no-deps", str(wheel)], check=True, capture_output=True, timeout=300)
    check = (
        "import realtime, voxline, voxline.realtime.server, voxline.session\n"
        "from realtime import AsyncRealtimeClient\n"
        "assert 'site-packages' in voxline.__file__, voxline.__file__\n"
        "assert 'site-packages' in realtime.__file__, realtime.__file__\n"
        "print(voxline.__version__, voxline.VoiceSession.__module__)\n"
    )
    run = subprocess.run([str(python), "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [voxline.__version__, "voxline.session.voice"]
    version = subprocess.run([str(env_dir / "bin" / "voxline"), "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == f"voxline {voxline.__version__}"
    module = subprocess.run([str(python), "-m", "voxline", "--version"], capture_output=True, text=True,
                            cwd=tmp_path)
    assert module.stdout.strip() == f"voxline {voxline.__version__}"
    replay = subprocess.run(
        [str(env_dir / "bin" / "voxline"), "replay", str(ROOT / "examples" / "audio" / "barge_in.wav"), "--fast",
         "--voice", "tone", "--out", str(tmp_path / "heard.wav"), "--events", str(tmp_path / "events.jsonl")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stderr
    assert "barge-in" in replay.stdout and (tmp_path / "heard.wav").stat().st_size > 44
