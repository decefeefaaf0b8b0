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
