"""What `loratui mcp` answers, as plain data: the runs `ls` sees, a run's status, advice, summary and output.

Kept apart from the MCP glue (commands/mcp_server.py) so that every answer is a function of the run
directory, testable without a client, and built from the readers the app itself uses: `runstatus` for the
list, the indexed log's fold (RunState + Advisor, what `replay --summary` and the panel show) for one run.
Every string that came from a file or a process is made inert (`text.inert`) and bounded.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from loratui import events, rundir, runstatus
from loratui.errors import UsageError
from loratui.text import inert
from loratui.units import to_gib

MAX_OUTPUT_LINES = 200


def find_run(name: str, runs_dir: Path) -> rundir.RunDir:
    """The run `name` names among the runs `ls` lists: an id, or a unique prefix or suffix of one.

    A path is refused even when it holds a run: an agent reads only what is under the runs directory."""
    if not name.strip():
        raise UsageError("run: empty; name a run by its id (list_runs gives them)")
    if "/" in name or name in (".", ".."):
        raise UsageError(f"{name!r}: name a run by its id (list_runs gives them), not by a path")
    try:
        run = rundir.resolve(name, runs_dir)
    except rundir.RunNotFound as exc:
        raise UsageError(str(exc)) from None
    if run.path.resolve().parent != runs_dir.resolve():
        raise UsageError(f"{name!r}: not a run of {runs_dir}")
    return run


def list_runs(runs_dir: Path) -> list[dict[str, Any]]:
    """One row per run, as `loratui ls --json` prints them, plus who still runs it."""
    rows = []
    for run in rundir.list_runs(runs_dir):
        status = runstatus.read(run)
        rows.append({"run": inert(run.run_id), "state": status.state, "alive": status.alive or None,
                     "step": status.step, "max_steps": status.max_steps,
                     "loss": events.num_out(events.num_in(status.loss)) if status.loss is not None else None,
                     "peak_vram_gib": round(to_gib(status.peak_used), 2) if status.peak_used else None,
                     **({"slurm": _job(status)} if status.job_id else {})})
    return rows


def _job(status: runstatus.Status) -> dict[str, str]:
    """A Slurm run's job, as `loratui ls` shows it: Slurm's state now, or, once Slurm has forgotten the ended
    job, the end the run recorded."""
    from loratui import slurm

    job = slurm.job(status.job_id)
    said = job.state if job is not None else (status.end.cause or "ended" if status.end is not None else "unknown")
    return {"job": inert(status.job_id), "node": inert(status.node), "state": inert(said)}


def _fold(run: rundir.RunDir) -> tuple[Any, Any]:
    """(RunState, Advisor) at the log's end, through the replay index (cheap after its first build)."""
    from loratui.sources.logindex import IndexedLog

    log = IndexedLog.of_file(run.events, run.load_recipe()[0])
    log.update()
    return log.fold_at(log.n_events)


def _gib(value: int | None) -> float | None:
    return round(to_gib(value), 3) if value else None


def status(run: rundir.RunDir) -> dict[str, Any]:
    """What the app's status bar and VRAM pane show: step, loss, throughput, ETA, memory, phase."""
    state, _ = _fold(run)
    now = runstatus.read(run)
    warn = int(state.warn_gb * (1 << 30)) if state.warn_gb else None
    return {
        "run": inert(run.run_id), "name": inert(state.name), "state": now.state, "alive": now.alive or None,
        "reason": inert(state.pause_why or state.state_reason), "step": state.step, "max_steps": state.max_steps,
        "epoch": state.epoch, "loss": events.num_out(state.last_loss) if state.last_loss is not None else None,
        "tokens_per_s": state.tokens_per_s, "run_tokens_per_s": state.run_tokens_per_s,  # recent steps; the run's own
        "seconds_per_step": state.seconds_per_step, "eta_s": state.eta_s,
        "elapsed_s": state.elapsed_s, "phase": inert(state.phase),
        "device_used_gib": _gib(state.device_used_now), "device_used_peak_gib": _gib(state.device_used_peak),
        "torch_allocated_gib": _gib(state.torch_allocated), "torch_reserved_gib": _gib(state.torch_reserved),
        "step_peak_reserved_gib": _gib(state.step_peak_reserved), "warn_gib": state.warn_gb,
        "peak_over_warning_line": (state.device_used_peak > warn) if warn and state.gpus else None,
        "estimate_gib": now.estimate_gib, "gpu": state.gpu_available,
        "nan_steps": list(state.nan_steps)[-20:],
        "end": {"state": state.end.state, "cause": state.end.cause, "error": inert(state.end.error)}
        if state.end else None,
        **({"slurm": _job(now)} if now.job_id else {}),
    }


def stop_how(run: rundir.RunDir) -> str:
    """How a stop would reach the run, as the app's stop question says it (RunState.stop_by_signal)."""
    state, _ = _fold(run)
    if state.stop_by_signal:
        return "now, by SIGTERM to its command's process group (it ends at once, not at a step boundary)"
    return "at its next step boundary"


def advice(run: rundir.RunDir) -> list[dict[str, Any]]:
    """The advisor's items, most important first, as the panel lists them, with whether `apply` works."""
    _, advisor = _fold(run)
    return [_item(item) for item in advisor.items()]


def _item(item: Any) -> dict[str, Any]:
    out = item.to_dict()
    out["title"] = inert(out["title"])
    out["evidence"] = [inert(line) for line in out["evidence"]]
    out["can_apply"] = bool(item.fix)
    # Never an empty reason beside can_apply false (trial 7: every doctor item said ""): what apply_advice answers.
    out["why_not_applicable"] = inert(item.no_fix or "it proposes no change") if not item.fix else ""
    return out


def summary(run: rundir.RunDir) -> dict[str, Any]:
    """What `loratui replay RUN --summary` prints."""
    from loratui.logic.advisor.render import first_advice
    from loratui.logic.summary import summarize

    state, advisor = _fold(run)
    items = advisor.items()
    return summarize(state, "", [item.id for item in items], first_advice(items))


def output_tail(run: rundir.RunDir, lines: int = 50) -> list[str]:
    """The last `lines` lines of the trainer's output (at most MAX_OUTPUT_LINES), made inert."""
    if lines < 1:  # an agent asking for none (or -5) is told, not handed one line as if it asked for it
        raise UsageError(f"lines = {lines}: ask for 1 to {MAX_OUTPUT_LINES} of the trainer's last lines (default 50)")
    state, _ = _fold(run)
    keep = min(int(lines), MAX_OUTPUT_LINES)
    return [inert(line)[:2000] for line in list(state.output_tail)[-keep:]]


def estimate(recipe: str, gpu_gb: float, runs_dir: Path) -> dict[str, Any]:
    """The pre-flight estimate for a built-in recipe (by name) or a run's own recipe (by run id)."""
    from loratui.commands.estimate import compute, verdict
    from loratui.recipe import builtin_recipes

    if not 0 < gpu_gb < 1e6:  # said here in the tool's own words: the CLI's would name --gpu-gb
        raise UsageError(f"gpu_gb = {gpu_gb}: the card's memory must be a positive number of GiB (80 for an 80 GB "
                         "card)")
    builtins = builtin_recipes()
    if not recipe.strip():  # find_run's "run: empty" named an argument this tool does not take
        raise UsageError(f"recipe: empty; name a built-in recipe ({', '.join(sorted(builtins))}) or a run's id "
                         "(list_runs gives them)")
    path = builtins.get(recipe)
    if path is None:
        try:
            run = find_run(recipe, runs_dir)
        except UsageError as exc:  # the tool takes a built-in's name first: say which exist, beside the runs
            if not str(exc).startswith(("no run named", "no runs in")):
                raise  # a path, or a name several runs fit: its own message says what to do
            raise UsageError(f"{recipe!r}: neither a built-in recipe ({', '.join(sorted(builtins))}) nor a run of "
                             f"{runs_dir} (list_runs gives them)") from None
        if not run.recipe.is_file():
            raise UsageError(f"{recipe}: this run has no recipe (a watched command's estimate is in its status)")
        path = run.recipe
    result, loaded, _, _ = compute(path, gpu_gb)
    return result.as_json() | {"verdict": verdict(result, loaded.monitor.warn_gb)}


def doctor(text: str) -> dict[str, Any]:
    """`loratui doctor -` on pasted training text."""
    from loratui.commands.doctor import diagnose_stream

    items, note = diagnose_stream(io.BytesIO(text.encode("utf-8", "replace")), "pasted text", guess=True)
    from loratui.logic.advisor.advice import named_step

    return {"items": [_item(item) | {"step": named_step(item)} for item in items], "note": note}
