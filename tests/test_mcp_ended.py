"""Trial 7, an agent's shell script on `loratui mcp --allow-control`: `stop` on a run that had finished answered
"would stop RUN at its next step boundary (now finished, step 300/300)" with a token, and only the second call
said there was nothing to stop; control errors named the run twice ("RUN: RUN is not running")."""

from __future__ import annotations

from pathlib import Path

import pytest

from loratui.cli import main
from tests.test_mcp import call, session

LOG = "\n".join([*(f"{{'loss': {1.5 - i / 10}, 'grad_norm': 1.0, 'learning_rate': 2e-4}}" for i in range(5)),
                 # the summary says it finished (five dicts alone are a log that ends, at a step count unknown)
                 "{'train_runtime': 5.0, 'train_steps_per_second': 1.0, 'train_loss': 1.3}"])


async def test_stop_and_pause_on_a_finished_run_are_refused_at_once(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    (tmp_path / "train.log").write_text(LOG)
    assert main(["import", str(tmp_path / "train.log"), "--runs-dir", str(runs)]) == 0
    run_id = capsys.readouterr().out.strip().splitlines()[-1]
    async with session(runs, "--allow-control") as client:
        error, said = await call(client, "stop", run=run_id)
        assert error and "not running (finished); nothing to stop" in said and "token" not in said, said
        error, said = await call(client, "pause", run=run_id)
        assert error and said.count(run_id) == 1 and "nothing to pause" in said, said


@pytest.mark.parametrize("verb", ["resume", "save", "pause", "stop"])
def test_the_command_line_names_the_run_once_too(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 verb: str) -> None:
    """The MCP tools were fixed; `loratui resume RUN` on a finished run still said "loratui: RUN: RUN is not
    running (finished); nothing to resume"."""
    runs = tmp_path / "runs"
    (tmp_path / "train.log").write_text(LOG)
    assert main(["import", str(tmp_path / "train.log"), "--runs-dir", str(runs)]) == 0
    run_id = capsys.readouterr().out.strip().splitlines()[-1]
    assert main([verb, run_id, "--runs-dir", str(runs)]) == 2
    said = capsys.readouterr().err
    assert said.count(run_id) == 1 and f"nothing to {verb}" in said, said
