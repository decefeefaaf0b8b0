"""A watched command run by another interpreter than loratui's (a venv of the user's without loratui).

The hook's sitecustomize runs in it (PYTHONPATH), and when the script builds its first Trainer, loratui is
imported from LORATUI_HOOK_ROOT at the end of its path. The venv here sees the suite's packages (torch,
transformers) through a .pth line, as a venv made with the same packages would, but not loratui (its editable
finder is a .pth of its own, not run for a directory a .pth line adds).
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import venv
from pathlib import Path

import pytest

from loratui.supervisor.command import HOOK_DIR, ROOT_ENV, RUN_ENV
from tests.conftest import REPO

pytestmark = pytest.mark.slow
PROBE = """import json, sys
path = list(sys.path)
import torch
import transformers.trainer
from transformers import Trainer, TrainingArguments
trainer = Trainer(model=torch.nn.Linear(2, 2), args=TrainingArguments(output_dir="out", use_cpu=True, report_to="none"))
print(json.dumps({"path_before": path, "path_after": sys.path,
                  "patched": any(type(c).__name__ == "LoratuiCallback" for c in trainer.callback_handler.callbacks),
                  "loratui": sorted(m for m in sys.modules if m == "loratui" or m.startswith("loratui."))}))
"""


@pytest.fixture(scope="module")
def other_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv of the base interpreter, without loratui, that sees this suite's site-packages."""
    target = tmp_path_factory.mktemp("othervenv")
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    (Path(purelib) / "suite_packages.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    alone = subprocess.run([str(python), "-c", "import loratui"], cwd=target, env=env, capture_output=True,
                           text=True, timeout=120, check=False)
    if alone.returncode == 0:  # loratui installed into site-packages (not editable): no Python without it here
        pytest.skip("this suite's site-packages hold loratui itself; these tests need an editable install")
    return python


def _hooked(python: Path, cwd: Path, root: str, *extra_path: str) -> subprocess.CompletedProcess[str]:
    (cwd / "run").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORATUI_") and k != "PYTHONPATH"}
    env.update({RUN_ENV: str(cwd / "run"), ROOT_ENV: root, "OMP_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join([str(HOOK_DIR), *extra_path])})
    return subprocess.run([str(python), "-c", PROBE], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=600, check=False)


def test_another_interpreter_gets_loratui_from_the_hook_root(other_python: Path, tmp_path: Path) -> None:
    done = _hooked(other_python, tmp_path, str(REPO))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert str(REPO) not in seen["path_before"]
    assert seen["patched"] and seen["path_after"] == [*seen["path_before"], str(REPO)]


def test_an_interpreter_that_cannot_import_loratui_is_left_as_it_was_and_told_what_to_do(other_python: Path,
                                                                                        tmp_path: Path) -> None:
    """A root this Python cannot import loratui from (here: none there; as well a loratui whose packages this
    Python lacks): the root stayed on its sys.path, a half-imported loratui in its sys.modules, and the line
    said only "cannot hook this process's Trainer (No module named 'loratui')"."""
    done = _hooked(other_python, tmp_path, str(tmp_path / "gone"))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert not seen["patched"] and seen["loratui"] == []
    assert seen["path_after"] == seen["path_before"]
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("loratui:")]
    assert str(other_python) in line and "No module named 'loratui'" in line and "install loratui" in line


def _with_broken_msgspec(other_python: Path, tmp_path: Path, source: str) -> list[str]:
    """The hooked probe with loratui at the root and a `msgspec` of `source` first on the path (a dependency missing
    or broken in this Python): the script ran, nothing of loratui stayed, and loratui's lines on stderr."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "msgspec.py").write_text(source)
    done = _hooked(other_python, tmp_path, str(REPO), str(shadow))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert not seen["patched"] and seen["loratui"] == [] and seen["path_after"] == seen["path_before"]
    return [line for line in done.stderr.splitlines() if line.startswith("loratui:")]


def test_a_half_imported_loratui_leaves_no_module_behind(other_python: Path, tmp_path: Path) -> None:
    """loratui found at the root, but a package it needs missing in this Python (shadowed here by a module
    that fails to import, as a missing or broken dependency does): `loratui` and `loratui.trainer` stayed."""
    said = _with_broken_msgspec(other_python, tmp_path, "raise ImportError('msgspec is not installed for this Python')\n")
    assert any("msgspec is not installed" in line for line in said)


def test_a_loratui_this_python_cannot_compile_does_not_stop_the_scripts_import(other_python: Path,
                                                                               tmp_path: Path) -> None:
    """loratui found at the root but failing with another error than ImportError in this Python (syntax or an
    API of a newer Python than this one, here a module of its that does not compile): the error came out of the
    script's own `import transformers.trainer`, and the script that runs alone died watched."""
    (line,) = _with_broken_msgspec(other_python, tmp_path, "def newer_syntax(:\n")
    assert "SyntaxError" in line and "install loratui" in line
