"""The supervisor with a scripted GPU: samples, the estimate check and per-process figures reach the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui import rundir
from loratui.supervisor.owner import Supervisor
from tests.conftest import REPO, TINY, kinds
from tests.fakes import ScriptedProbe, steady

pytestmark = pytest.mark.slow


def test_supervisor_records_samples_and_checks_the_estimate(tmp_path: Path) -> None:
    settings = rundir.RunSettings(run_id="probe", name="tiny", recipe_source=str(TINY),
                                  recipe_dir=str(REPO / "recipes"), max_steps=3)
    run = rundir.create(tmp_path, settings, TINY.read_text())
    code = Supervisor(run, ScriptedProbe(steady(1.5)), "").main()
    assert code == 0
    samples = kinds(run.path, "sample")
    assert samples and samples[0]["used_max"] == int(1.5 * 2**30)
    info = kinds(run.path, "gpu_info")[0]
    assert info["available"] is True and info["names"] == ["Fake H200"]
    checks = [n for n in kinds(run.path, "notice") if n.get("key") == "estimate"]
    assert any("vs estimate" in str(c["message"]) for c in checks)
    kinds_in_order = [e["kind"] for e in kinds(run.path, "notice") + kinds(run.path, "end")]
    assert kinds_in_order[-1] == "end"
