"""The built wheel and sdist carry the built-in recipes, their data and the stylesheet (issue 20).

`.ci/run` goes further: it installs the wheel into a fresh virtual environment and runs the demo from an
empty directory. Here the archives are built (offline: --no-isolation, the environment's setuptools) from
a copy of the tracked sources, so nothing is written into the checkout.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from loratui import __version__
from loratui.recipe import BUILTIN_DIR
from tests.conftest import REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(REPO / "loratui", src / "loratui", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def shipped() -> set[str]:
    """What must travel: every built-in recipe and data file, and the app's stylesheet."""
    files = {f"loratui/recipes/{p.relative_to(BUILTIN_DIR)}" for p in BUILTIN_DIR.rglob("*")
             if p.suffix in (".toml", ".jsonl")}
    return files | {"loratui/tui/app.tcss", "loratui/word_model.npz", "loratui/arbiter.npz"}


def test_the_wheel_carries_the_recipes_and_their_data(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    assert wheel.name.startswith(f"loratui-{__version__}-")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert shipped() <= names
    assert "loratui/recipes/tiny.toml" in names and "loratui/recipes/data/tiny-instructions.jsonl" in names
    assert "loratui/trainer/tiny.py" in names and "loratui/commands/init.py" in names


def test_the_sdist_carries_them_too(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    top = f"loratui-{__version__}/"
    names = {n.removeprefix(top) for n in tarfile.open(sdist).getnames()}
    assert shipped() <= names
