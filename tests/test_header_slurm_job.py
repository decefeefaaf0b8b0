"""The views' header names a Slurm run's job and node (trial 11: `ls` and the MCP tools said `job 4242` and its
node from the run's header; the live app, attach and replay said neither)."""
from __future__ import annotations

from pathlib import Path

from loratui import events
from loratui.logic.runstate import RunState
from loratui.tui.app import live_app
from loratui.tui.replay_app import replay_app
from loratui.tui.widgets.status import StatusBar
from tests.conftest import write_run

HEADER = events.Header(t=1.0, schema=1, run_id="20261205-150000-tiny", recipe_hash="h", name="tiny",
                       slurm={"SLURM_JOB_ID": "4242", "SLURM_JOB_NUM_NODES": "1"}, node="gpu07")
RUN = [HEADER, events.State(t=2.0, state=events.TRAINING, step=0),
       events.TrainBegin(t=3.0, max_steps=10, num_epochs=1.0, device="cpu"),
       events.Step(t=4.0, step=1, epoch=0.1, step_time=1.0)]


def test_the_header_event_says_the_job_as_ls_reads_it() -> None:
    assert HEADER.job_id == "4242"
    assert events.Header(t=1.0, schema=1, run_id="r", recipe_hash="h", node="vm").job_id == ""
    state = RunState().feed_all(RUN)
    assert (state.job_id, state.node) == ("4242", "gpu07")


async def _bar(app) -> str:  # type: ignore[no-untyped-def]
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            text = app.query_one(StatusBar).text
            if "step 1/" in text:
                return text
    return app.query_one(StatusBar).text


async def test_live_attach_and_replay_show_the_job_and_node(tmp_path: Path) -> None:
    run = write_run(tmp_path / "runs" / HEADER.run_id, RUN)
    for attached in (False, True):
        head = (await _bar(live_app(run, None, attached))).splitlines()[0]
        assert "job 4242 on gpu07" in head, head
    head = (await _bar(replay_app(list(RUN), None, "replay", speed=1000))).splitlines()[0]
    assert "job 4242 on gpu07" in head, head


async def test_a_run_outside_slurm_names_no_job(tmp_path: Path) -> None:
    plain = [events.Header(t=1.0, schema=1, run_id="r", recipe_hash="h", name="tiny", node="vm"), *RUN[1:]]
    head = (await _bar(replay_app(plain, None, "replay", speed=1000))).splitlines()[0]
    assert "job" not in head and "vm" not in head, head
