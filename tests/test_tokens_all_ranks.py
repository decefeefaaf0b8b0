"""Trial 12, `loratui run -- torchrun --nproc_per_node 2 train.py` (a Trainer + peft script, 2 CPU ranks): the bar
said `tok/s 1644` where the two ranks together trained 3756 tokens in 4 steps of ~0.27 s (rank 0's 1838 and rank 1's
1918): the rate was rank 0's share alone. A multi-process run's throughput is every rank's tokens over the steps'
time (the ranks step together); a single process's is unchanged."""

from __future__ import annotations

from pathlib import Path

from loratui import events, rundir
from loratui.eventlog import EventWriter
from loratui.logic.runstate import RunState
from loratui.sources.logindex import IndexedLog
from tests import scenarios


def _steps(ranks: dict[int, int], steps: int = 4, step_s: float = 0.25) -> list[events.AnyEvent]:
    """`ranks`: rank -> tokens each step; rank 1 sometimes reports a step before rank 0 does, as it did there."""
    out: list[events.AnyEvent] = [
        events.Header(t=scenarios.T0, schema=1, run_id="20270115-093000-train", recipe_hash="abc", name="train"),
        events.TrainBegin(t=scenarios.T0 + 1, max_steps=steps, num_epochs=1.0, world_size=len(ranks)),
        events.State(t=scenarios.T0 + 1, state=events.TRAINING)]
    t = scenarios.T0 + 1
    for step in range(1, steps + 1):
        t += step_s
        order = sorted(ranks, reverse=step % 2 == 0)
        for rank in order:
            seen = ranks[rank] * step
            out.append(events.Step(t=t, step=step, epoch=step / steps, step_time=step_s, tokens=ranks[rank],
                                   tokens_seen=seen, rank=rank))
    return out


def test_two_ranks_count_both_ranks_tokens() -> None:
    state = RunState().feed_all(_steps({0: 460, 1: 480}))
    assert state.tokens_per_s is not None and round(state.tokens_per_s) == round((460 + 480) / 0.25)
    assert state.step == 4  # rank 0 still speaks for the progress


def test_one_process_is_unchanged() -> None:
    state = RunState().feed_all(_steps({0: 460}))
    assert state.tokens_per_s is not None and round(state.tokens_per_s) == round(460 / 0.25)
    found = scenarios.run(30)  # the app's scripted run: 16384 tokens a step of 2.7 s
    assert round(RunState().feed_all(found).tokens_per_s or 0) == round(16384 / 2.7)


def test_a_step_run_again_after_a_restart_is_counted_once() -> None:
    found = _steps({0: 400, 1: 400}, steps=3)
    t = found[-1].t
    found += [events.TrainBegin(t=t + 1, max_steps=3, num_epochs=1.0, start_step=2, world_size=2)]
    found += [events.Step(t=t + 1.25, step=3, epoch=1.0, step_time=0.25, tokens=400, tokens_seen=1200, rank=rank)
              for rank in (1, 0)]
    state = RunState().feed_all(found)
    # steps 1, 2, 3 and 3 again in rank 0's window, each with both ranks' 800 tokens
    assert state.tokens_per_s is not None and round(state.tokens_per_s) == round(4 * 800 / (4 * 0.25))


def test_the_replay_index_folds_the_same(tmp_path: Path) -> None:
    settings = rundir.RunSettings(run_id="20270115-093000-train", name="train", recipe_source="")
    run = rundir.create(tmp_path / "runs", settings, rundir.IMPORTED_MARK + "\n")
    writer = EventWriter(run.events)
    for event in _steps({0: 460, 1: 480}, steps=40):
        writer.write(event)
    writer.close()
    log = IndexedLog.of_file(run.events, None)
    log.update()
    state, _ = log.fold_at(log.n_events)
    assert state.tokens_per_s is not None and round(state.tokens_per_s) == round(940 / 0.25)


def test_a_snapshot_in_the_index_keeps_every_ranks_tokens() -> None:
    from loratui.sources import indexcodec
    from loratui.sources.snapshot import freeze, thaw

    found = _steps({0: 460, 1: 480}, steps=10)
    half = RunState().feed_all(found[:12])
    back = thaw(indexcodec.decode(indexcodec.encode(freeze(half))))
    for event in found[12:]:
        back.feed(event)
    assert back.tokens_per_s == RunState().feed_all(found).tokens_per_s
    assert back.step_rank_tokens[10] == {0: 460, 1: 480}


def test_the_reports_throughput_chart_counts_every_rank_too() -> None:
    from loratui.commands.report import step_rates

    rates = step_rates(_steps({0: 460, 1: 480}))
    assert [step for step, _ in rates] == [1, 2, 3, 4]
    assert all(round(rate) == round(940 / 0.25) for _, rate in rates), rates
    assert [round(r) for _, r in step_rates(_steps({0: 460}))] == [round(460 / 0.25)] * 4
