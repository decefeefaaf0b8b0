"""`loratui report RUN [--out DIR]`: the story of a run as Markdown with PNG charts, to paste anywhere.

The charts (loss and learning rate, VRAM against the warning line, throughput) are drawn with matplotlib,
an optional extra (`loratui[report]`); the facts and the story come from the same folds every view uses:
RunState, the Advisor and logic/story.py.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

GIB = float(1 << 30)


def register(sub: Any, runs_dir_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the `report` subparser."""
    cmd = sub.add_parser("report", parents=[runs_dir_parent],
                         help="write a run's story as Markdown with PNG charts (needs loratui[report])")
    cmd.add_argument("run", help="run id, name or directory")
    cmd.add_argument("--out", type=Path, default=None, help="folder to write (default ./<run id>-report)")
    return cmd


def main(args: argparse.Namespace) -> int:
    """Write report.md and its charts; print where."""
    from loratui import rundir
    from loratui.errors import EXIT_OK, UsageError

    try:
        import matplotlib
    except ImportError:
        raise UsageError("report draws its charts with matplotlib: pip install 'loratui[report]'") from None
    matplotlib.use("Agg")  # no display on a GPU box over SSH
    everywhere = getattr(args, "everywhere", False)
    run = rundir.resolve(args.run, args.runs_dir, everywhere)
    out = args.out or Path(f"{run.run_id}-report")
    try:  # its own message: the generic one for an OSError said "pass another --runs-dir"
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise UsageError(f"--out {out}: {exc.strerror or exc} (a file is there); give a folder to write the "
                         "report in") from None
    except OSError as exc:
        raise UsageError(f"--out {out}: {exc.strerror or exc}; give a folder you can write the report in") from None
    path = write_report(run, out)
    print(f"loratui: report of {run.run_id} in {path}")
    return EXIT_OK


def write_report(run: Any, out: Path) -> Path:
    """Fold the run's log and write `out/report.md` with `loss.png`, `vram.png`, `throughput.png`."""
    from loratui.eventlog import read_log
    from loratui.logic.advisor import Advisor
    from loratui.logic.runstate import RunState
    from loratui.logic.story import Story
    from loratui.logic.advisor.render import first_advice
    from loratui.logic.summary import summarize
    from loratui.tui import failure

    contents = read_log(run.events)
    found = contents.events
    state = RunState().feed_all(found)
    story = Story(failure.in_a_line).feed_all(found)
    items = Advisor(run.load_recipe()[0]).feed_all(found).items()
    facts = summarize(state, contents.notes(), [item.id for item in items], first_advice(items))
    facts["end_error"] = failure.in_a_line(state.end) if state.end else ""  # one line, not the stderr tail
    rates = step_rates(found)
    charts = {"loss.png": _loss_chart(state, out / "loss.png"), "vram.png": _vram_chart(state, out / "vram.png"),
              "throughput.png": _rate_chart(rates, out / "throughput.png")}
    text = render(facts, story.moments, items, charts)
    target = out / "report.md"
    target.write_text(text, encoding="utf-8")
    return target


def step_rates(found: list[Any]) -> list[tuple[int, float]]:
    """(step, tokens/s) for each of rank 0's steps: every rank's tokens at that step over rank 0's step time (the
    ranks step together; rank 0's share alone halved a 2-process run's rate). A step is counted within its life
    (a restart's TrainBegin starts another), so a step run again is its own point."""
    life = 0
    tokens: dict[tuple[int, int], int] = {}
    order: list[tuple[int, int, float]] = []
    for e in found:
        kind = type(e).__name__
        if kind == "TrainBegin":
            life += 1
        elif kind == "Step" and e.tokens:
            tokens[(life, e.step)] = tokens.get((life, e.step), 0) + e.tokens
            if e.rank == 0 and e.step_time > 0:
                order.append((life, e.step, e.step_time))
    return [(step, tokens[(lived, step)] / took) for lived, step, took in order]


def render(facts: dict[str, Any], moments: list[Any], items: list[Any], charts: dict[str, bool]) -> str:
    """The Markdown: the headline facts, what happened, the advice, and the charts that have data."""
    from loratui.events import num_in
    from loratui.logic import fmt

    end = facts["end_state"] + (f" ({facts['end_error']})" if facts["end_error"] else "")
    lines = [f"# {_md(facts['name'] or facts['run_id'])}", "",
             "| | |", "|---|---|", f"| run | `{_md(facts['run_id'])}` |", f"| end | {_md(end)} |",
             f"| steps | {facts['steps']}/{facts['max_steps'] or '?'} |",
             f"| loss | {fmt.number(num_in(facts['first_loss']))} → {fmt.number(num_in(facts['last_loss']))} "
             + (f"(min {fmt.number(facts['min_loss'])} at step {facts['min_loss_step']}) |"
                if facts["min_loss"] is not None else "(none finite) |"),
             f"| peak VRAM (device) | {_gib(facts['peak_device_used_gib'])} |",
             *_durations(facts), ""]
    if facts["nan_steps"]:
        steps = list(dict.fromkeys(facts["nan_steps"]))  # a restarted run's lives meet the same steps again
        again = " (again after a restart)" if len(steps) < len(facts["nan_steps"]) else ""
        lines += [f"Non-finite loss or gradient at step{'s' * (len(steps) > 1)} {', '.join(map(str, steps[:20]))}"
                  f"{again}.", ""]
    lines += ["## What happened", ""]
    lines += [f"- {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(m.t))} · step {m.step} · "
              f"{'**' + _md(m.text) + '**' if m.level != 'info' else _md(m.text)}" for m in moments] or ["- nothing of note"]
    lines += ["", "## Advice", ""]
    lines += [f"- **{_md(item.title)}**" + "".join(f"\n  - {_md(line)}" for line in item.evidence) for item in items
              if item.severity in ("error", "warning")] or ["- none: nothing looked wrong"]
    lines += ["", "## Charts", ""]
    for name, drawn in charts.items():
        lines += [f"![{name[:-4]}]({name})" if drawn else f"{name[:-4]}: no data in this run", ""]
    return "\n".join(lines) + "\n"


def _durations(facts: dict[str, Any]) -> list[str]:
    """The duration's rows: one, or, where the run was suspended (a requeued Slurm job in the queue, a suspend) or
    paused, the time it ran, the time it waited and the time it was paused apart, then their sum (the waiting and
    the pauses were counted as run time)."""
    from loratui.logic import fmt

    total, waiting, paused = facts["duration_s"], facts.get("waiting_s") or 0.0, facts.get("paused_s") or 0.0
    if total is None or (waiting < 1.0 and paused < 1.0):
        return [f"| duration | {fmt.duration(total)} |"]
    rows = [f"| run time | {fmt.duration(max(0.0, total - waiting - paused))} |"]
    if waiting >= 1.0:
        rows.append(f"| waiting | {fmt.duration(waiting)} (suspended: a requeued job in Slurm's queue, or a suspend "
                    "waiting for resume) |")
    if paused >= 1.0:
        rows.append(f"| paused | {fmt.duration(paused)} (held until resumed) |")
    return [*rows, f"| wall time | {fmt.duration(total)} |"]


def _md(text: str) -> str:
    """Text from the run, inert for the terminal and for Markdown's table and emphasis syntax."""
    from loratui.text import inert

    return inert(str(text)).replace("|", "\\|").replace("*", "\\*").replace("\n", " ")


def _gib(value: float | None) -> str:
    return f"{value:.2f} GiB" if value is not None else "not measured (no GPU)"


def _loss_chart(state: Any, path: Path) -> bool:
    import math

    import matplotlib.pyplot as plt

    loss = [(s, v) for s, v in state.loss if math.isfinite(v)]
    if not loss:
        return False
    fig, ax = plt.subplots(figsize=(8, 4))
    handles = _plot_lives(ax, loss, label="train loss", color="tab:blue")
    evals = [(s, v) for s, v in state.eval_loss if math.isfinite(v)]
    if evals:
        handles += _plot_lives(ax, evals, "o-", label="eval loss", color="tab:orange")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    if state.lr:
        lr = ax.twinx()
        handles += _plot_lives(lr, state.lr, color="tab:gray", alpha=0.6, label="learning rate")
        lr.set_ylabel("learning rate")
    ax.legend(handles=handles, loc="upper right")  # one legend for both axes
    return _save(fig, path)


def lives(points: list[tuple[int, float]]) -> list[list[tuple[int, float]]]:
    """A series cut where its step goes back (a restart from a checkpoint or from the start, a guard's move):
    one line through them all drew each restart as a stroke back across the chart."""
    cut: list[list[tuple[int, float]]] = []
    for point in points:
        if not cut or point[0] <= cut[-1][-1][0]:
            cut.append([])
        cut[-1].append(point)
    return cut


def _plot_lives(ax: Any, points: list[tuple[int, float]], *style: str, label: str, **kw: Any) -> list[Any]:
    """Each life of the series a line of its own, in one colour under one label; the handle for the legend."""
    drawn = [ax.plot(*zip(*life), *style, label=label if not i else "_" + label, **kw)[0]
             for i, life in enumerate(lives(points))]
    return drawn[:1]


def _vram_chart(state: Any, path: Path) -> bool:
    import matplotlib.pyplot as plt

    series = {index: list(zip(gpu.used.xs, gpu.used.ys)) for index, gpu in state.gpus.items() if len(gpu.used)}
    if not series:
        return False
    start = state.started or min(t for points in series.values() for t, _ in points)
    fig, ax = plt.subplots(figsize=(8, 4))
    for index, points in sorted(series.items()):
        ax.plot([(t - start) / 60 for t, _ in points], [v / GIB for _, v in points], label=f"GPU {index} used")
    if state.warn_gb:
        ax.axhline(state.warn_gb, color="tab:red", linestyle="--", label=f"warning line {state.warn_gb:g} GiB")
    if state.estimate is not None:
        ax.axhline(state.estimate.peak_device_gib, color="tab:green", linestyle=":", label="estimate")
    ax.set_xlabel("minutes")
    ax.set_ylabel("GiB")
    ax.legend(loc="lower right")
    return _save(fig, path)


def _rate_chart(rates: list[tuple[int, float]], path: Path) -> bool:
    import matplotlib.pyplot as plt

    if not rates:
        return False
    fig, ax = plt.subplots(figsize=(8, 3))
    ax.plot(*zip(*rates), color="tab:purple")
    ax.set_xlabel("step")
    ax.set_ylabel("tokens/s")
    return _save(fig, path)


def _save(fig: Any, path: Path) -> bool:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
