"""Issue 26 item 13: the README gives a CPU path for each installer it names (pip, pipx, uv tool), since
each otherwise fetches the multi-GB CUDA build of torch on a box without a GPU."""

from __future__ import annotations

import re

from tests.conftest import REPO

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def test_each_installer_has_a_cpu_line() -> None:
    commands = re.findall(r"^(pip install|pipx install|uv tool install)\b(.*)$", (REPO / "README.md").read_text(),
                          re.M)
    for installer in ("pip install", "pipx install", "uv tool install"):
        lines = [rest for name, rest in commands if name == installer]
        assert any(CPU_INDEX in rest for rest in lines), (installer, lines)
    assert any("--pip-args='--extra-index-url " + CPU_INDEX in rest for name, rest in commands if name == "pipx install")
    assert any("--index " + CPU_INDEX in rest for name, rest in commands if name == "uv tool install")


def test_ci_and_the_develop_line_install_the_cpu_torch() -> None:
    """The README's "Develop and test" line names the CPU index: a bare `pip install torch==...` fetches the CUDA
    build (5.5-5.8 GB with its nvidia-* wheels) from PyPI on a newcomer's box. `.ci/run` pins torch before the
    project (so no bare requirement pulls the CUDA build) and names no index: CI's box reaches the package registries
    only, and its pip finds the CPU wheel on disk."""
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
          if re.search(r"pip install .*\btorch==", line) and not line.lstrip().startswith("#")]
    assert len(ci) == 2, ci  # the suite's venv and the wheel's fresh venv
    for line in ci:
        assert "download.pytorch.org" not in line, line
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    first_torch = next(i for i, line in enumerate(lines) if line in ci)
    assert first_torch < next(i for i, line in enumerate(lines) if "-e '.[test]'" in line)
    develop = re.search(r"^## Develop and test\n\n```bash\n(.*?)\n```", (REPO / "README.md").read_text(), re.M | re.S)
    assert develop is not None
    assert CPU_INDEX in develop.group(1), develop.group(1)
