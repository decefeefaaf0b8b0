"""The `loratui` command line. Bad input exits 2 with one message; nothing here prints a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from loratui import __version__, events, rundir, runstatus, units
from loratui.commands import (apply, doctor, estimate, importer, init, mcp_server, notify_test, recipes,
                              replay, report, stacks)
from loratui.errors import EXIT_BAD_INPUT, EXIT_NO, EXIT_OK, UsageError
from loratui.held_interrupt import HeldInterrupt
from loratui.bounds import NotAFile, clip
from loratui.recipe import RecipeError, find_recipe
from loratui.text import inert, say_error, terminal_width
from loratui.units import to_gib


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="loratui", description=__doc__)
    parser.add_argument("--version", action="version", version=f"loratui {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    runs_dir = argparse.ArgumentParser(add_help=False)
    runs_dir.add_argument("--runs-dir", type=Path, default=None,
                          help="where runs live: new runs go there (default ./runs, or $LORATUI_RUNS); given, "
                          "ls/attach look only there, else also wherever you started runs before")

    run = sub.add_parser("run", parents=[runs_dir], help="start a training run from a TOML recipe, or watch "
                         "a command: loratui run [options] -- COMMAND [ARGS...]",
                         usage="loratui run [options] RECIPE\n       loratui run [options] -- COMMAND [ARGS...]",
                         description="Start a training run from a recipe (a file, or a built-in's name: "
                         "`loratui run tiny`; `loratui recipes` lists them), or watch your own training "
                         "command given after `--` (`loratui run -- python train.py`).")
    run.add_argument("recipe", type=Path, nargs="?",
                     help="a recipe file, or a built-in recipe's name (loratui recipes)")
    run.add_argument("--warn-gb", type=float, default=None,
                     help="-- COMMAND only: the VRAM warning line (GiB)")
    run.add_argument("--headless", action="store_true", help="print progress instead of the TUI")
    run.add_argument("--run-name", default=None,
                     help="a name for the run (its directory is runs/<time>-<name>; attach and ls take it)")
    run.add_argument("--max-steps", type=int, default=None,
                     help="recipes only: stop after this many optimizer steps (overrides [training] max_steps)")
    run.add_argument("--model-path", default=None, help="recipes only: overrides [model] path")
    run.add_argument("--force", action="store_true", help="start even when the pre-flight says it cannot fit")
    run.add_argument("--notify", default=None, metavar="URL",
                     help="send alerts to URL (ntfy topic, Slack/Discord webhook, or JSON webhook); a secret")
    run.add_argument("--save-before-limit", default=None, metavar="DURATION",
                     help="in a Slurm job: save a checkpoint this long before the job's time limit (10m, 90s, 1h; "
                     "overrides [slurm] save_before_limit)")
    run.add_argument("--requeue", action="store_true",
                     help="in a Slurm job: after that checkpoint, exit and requeue the job; the requeued job "
                     "resumes this run (needs --save-before-limit or [slurm] save_before_limit)")

    attach = sub.add_parser("attach", parents=[runs_dir], help="open the viewer on a running run")
    attach.add_argument("run", nargs="?", default=None, help="run id, name or path (default: newest)")
    attach.add_argument("--headless", action="store_true")

    ls = sub.add_parser("ls", parents=[runs_dir], help="list runs")
    ls.add_argument("--json", action="store_true")

    for name, text in (("stop", "stop a run"), ("pause", "pause a run at the next step"),
                       ("resume", "resume a paused or suspended run"),
                       ("suspend", "checkpoint, free the GPU, wait for resume"), ("save", "checkpoint now")):
        cmd = sub.add_parser(name, parents=[runs_dir], help=text)
        cmd.add_argument("run", nargs="?", default=None)
        if name == "resume":
            cmd.add_argument("--notify", default=None, metavar="URL",
                             help="send this run's alerts to URL from now on (default: where they went)")
        cmd.set_defaults(handler=cmd_control)

    run.set_defaults(handler=cmd_run)
    attach.set_defaults(handler=cmd_attach)
    ls.set_defaults(handler=cmd_ls)
    for module in (doctor, estimate, importer, init, recipes, replay, notify_test, stacks, mcp_server, report,
                   apply):
        module.register(sub, runs_dir).set_defaults(handler=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    watch: list[str] = []
    if argv[:1] == ["run"] and "--" in argv:  # `loratui run [options] -- COMMAND [ARGS...]`
        cut = argv.index("--")
        argv, watch = argv[:cut], argv[cut + 1:]
    args = build_parser().parse_args(argv)
    args.watch = watch
    # Runs are found wherever this user started them (the user's list of runs) unless a place is named.
    args.everywhere = getattr(args, "runs_dir", None) is None and "LORATUI_RUNS" not in os.environ
    if getattr(args, "runs_dir", None) is None and hasattr(args, "runs_dir"):
        args.runs_dir = rundir.default_runs_dir()
    try:
        return int(args.handler(args))
    except (RecipeError, UsageError, rundir.RunNotFound) as exc:
        say_error(f"loratui: {one_line(inert(clip(str(exc))))}")  # a huge argument quoted: cut
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # `loratui ... | head -1`: the reader left; say nothing more (and let Python's exit flush nowhere).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        # An unwritable or odd --runs-dir, a full disk, a file where a folder should be: one line.
        where = f"{exc.filename}: " if exc.filename else ""
        elsewhere = getattr(args, "runs_dir", None) and not isinstance(exc, NotAFile)  # a FIFO: not the dir's
        say_error(f"loratui: {one_line(inert(clip(where)))}{exc.strerror or exc}"
                  f"{'; pass another --runs-dir' if elsewhere else ''}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: one line for the user, the traceback kept for the report
        report = _crash_report()
        say_error(f"loratui: internal error: {type(exc).__name__}: {inert(str(exc))[:300]}"
                  f"{f' (traceback in {report}; please report it)' if report else ''}")
        return EXIT_NO


def one_line(message: str) -> str:
    """The message on one line: a newline in a quoted argument or file name is shown as `\\n`."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


def _crash_report() -> str:
    """Write the current exception's traceback to a file; its path, or '' when nothing can be written."""
    import tempfile
    import traceback

    try:
        fd, path = tempfile.mkstemp(prefix="loratui-crash-", suffix=".txt")
        with os.fdopen(fd, "w") as handle:
            handle.write(traceback.format_exc())
        return path
    except OSError:
        return ""


def _requeued_run(runs_dir: Path) -> rundir.RunDir | None:
    """Inside a requeued Slurm job: the run this job left for its next start, if any: suspended (saved before
    the limit), or lost (Slurm's own requeue SIGKILLs every process, so the run has no end)."""
    from loratui import slurm

    job_id = slurm.job_env().get("SLURM_JOB_ID", "")
    if not job_id or slurm.job_env().get("SLURM_RESTART_COUNT", "0") in ("", "0"):
        return None
    import time

    for run in reversed(rundir.list_runs(runs_dir)):
        status = runstatus.read(run)
        if status.job_id != job_id or status.state not in (events.SUSPENDED, runstatus.LOST) or status.end is not None:
            continue
        deadline = time.monotonic() + 60  # the last start's supervisor may still be on its way out
        while status.alive and time.monotonic() < deadline:
            time.sleep(0.5)
            status = runstatus.read(run)
        return run if not status.alive else None
    return None


def cmd_run(args: argparse.Namespace) -> int:
    from loratui.commands import launch_checks
    from loratui.supervisor import inherited_fds
    from loratui.supervisor.launch import passed_stdin, start_command, start_run

    watching = bool(args.watch) or args.recipe is None  # `loratui run [options] -- COMMAND [ARGS...]`
    if watching and not args.watch:
        raise UsageError("run: give a recipe (`loratui run tiny`, or a recipe file; `loratui recipes` "
                         "lists the built-in ones) or a command to watch after `--` (loratui run -- python "
                         "train.py)")
    if watching and args.recipe is not None:
        raise UsageError(f"run: give a recipe or `-- COMMAND`, not both ({args.recipe} and "
                         f"`-- {args.watch[0]} ...`)")
    for flag, value in (("--max-steps", args.max_steps), ("--model-path", args.model_path)):
        if watching and value is not None:
            raise UsageError(f"run {flag}: applies to recipes only; with `-- COMMAND`, set it in your "
                             "command (e.g. TrainingArguments.max_steps, or your script's own model path)")
    if not watching and args.warn_gb is not None:
        raise UsageError(f"--warn-gb: for a recipe, set [monitor] warn_gb in {args.recipe}")
    if args.model_path and Path(args.model_path).expanduser().exists():
        # typed in this shell: a path from here, as `estimate --model-path` reads it (the checks resolve a relative
        # path from the recipe's folder, for a built-in inside the package; `models/x` read as a hub id)
        args.model_path = str(Path(args.model_path).expanduser().resolve())
    url = launch_checks.notify_url(args)  # refused before the pre-flight's wait
    if not watching:
        args.recipe = find_recipe(args.recipe)  # a path, or a built-in's name (`loratui run tiny`)
        if not launch_checks.preflight(args):
            return EXIT_NO
        launch_checks.check_model_reachable(args)  # before a run that would die on a download
    requeued = _requeued_run(args.runs_dir)
    if requeued is not None:  # this job ran before, saved before its limit and was requeued: go on with it
        return _go_on(requeued, args.headless)
    limit = launch_checks.slurm_limit(args)
    busy = others_running(args.runs_dir)
    with HeldInterrupt.hold() as held:  # from the spawn on, Ctrl-C leaves the run training: held for the viewer
        if watching:
            run = start_command(args.watch, args.runs_dir, args.run_name, args.warn_gb, alert_url=url,
                                slurm_limit=limit, stdin=passed_stdin(), fds=inherited_fds.inherited())
        else:
            run = start_run(args.recipe, args.runs_dir, args.run_name, args.model_path, args.max_steps,
                            alert_url=url, slurm_limit=limit)
    for other, status in busy:
        say_error(sharing_note(other.run_id, status))
    return _view(run, headless=args.headless, held=held)


def _go_on(requeued: rundir.RunDir, headless: bool) -> int:
    """The requeued job's next life of its run: a supervisor that adopts it, and the view. The headless viewer
    prints the notices of this life only: the earlier lives' (a requeue prints them in each job's output again,
    one more copy a restart) are the history, which `loratui report` tells once."""
    import time

    from loratui.supervisor.launch import spawn_supervisor

    since = time.time()
    with HeldInterrupt.hold() as held:
        spawn_supervisor(requeued, adopt=True)
    return _view(requeued, headless=headless, held=held, since=since)


def others_running(runs_dir: Path) -> list[tuple[rundir.RunDir, runstatus.Status]]:
    """The live runs a new run's note names: this user's own. A runs directory or state directory shared by
    several users (one HOME, a LORATUI_RUNS on a shared filesystem; root reads every 0700 run) lists theirs too,
    whose names and states are not this user's to be told."""
    uid = os.getuid()
    return [(run, status) for run in rundir.list_runs(runs_dir, everywhere=True)
            if _owner(run) == uid and (status := runstatus.read(run)).alive]


def _owner(run: rundir.RunDir) -> int | None:
    try:
        return run.path.stat().st_uid
    except OSError:
        return None


def sharing_note(run_id: str, status: runstatus.Status) -> str:
    """The note for a run started beside a live one: GPU memory is what they compete for where the other
    run found a GPU; a run with no GPU (a CPU box) only shares the machine."""
    state = inert(status.state, newlines=False)
    if not (status.gpu or status.peak_used):
        return f"loratui: note: {run_id} is also {state}; the two share this machine"
    holds = f", holding {units.gib(status.peak_used)} GiB of GPU memory at its peak" if status.peak_used else ""
    return f"loratui: note: {run_id} is also {state}{holds}; on one GPU the two compete for memory"


def cmd_attach(args: argparse.Namespace) -> int:
    run = runstatus.pick_run(args.run, args.runs_dir, need_running=False, everywhere=args.everywhere)
    return _view(run, headless=args.headless, attached=True)


def _view(run: rundir.RunDir, headless: bool, attached: bool = False, held: HeldInterrupt | None = None,
          since: float | None = None) -> int:
    """The TUI on a terminal, the progress printer otherwise; Ctrl-C leaves the run training (`held`: a Ctrl-C
    pressed while the run was being started, answered here; `since`: the printer says no notice older)."""
    held = held or HeldInterrupt()
    if headless or not (sys.stdout.isatty() and sys.stdin.isatty()):
        from loratui.tui import headless as hl

        try:
            held.release()
            print(hl.started(run))
            state = hl.follow(run, since=since)
        except KeyboardInterrupt:
            print("\n" + hl.detached(run))
            return 0
        return hl.exit_code(state)
    from loratui.tui.app import run_app

    try:
        held.release()
    except KeyboardInterrupt:  # pressed while the run was being started: leave it training, as the app's Ctrl-C does
        from loratui.tui import headless as hl

        print(hl.detached(run))
        return 0
    return run_app(run, app_actions, attached)


def app_actions(run: rundir.RunDir) -> Any:
    """What the app's keys do to `run`: its commands go the way `loratui pause/resume/stop` send them
    (control.deliver: the socket, else the run directory to a supervisor on another host, else the command file;
    a suspended run's `resume` re-adopts it, or says that its requeued Slurm job will). Through the socket alone,
    `r` on a run suspended before its job's limit said "the run is not running (no supervisor answers on its
    control socket)", and on a login node every key failed so."""
    from loratui.supervisor import control
    from loratui.supervisor.restart import restart_command_line, restart_with, write_fix
    from loratui.tui.app import RunActions

    def send(command: str) -> None:
        control.deliver(run, command, "tui")

    return RunActions(send=send,
                      write_fix=lambda advice_id, fix: write_fix(run, advice_id, fix),
                      restart=lambda recipe, env, send: restart_with(run, recipe, env, send),
                      stacks=lambda: _stacks_text(run),
                      command_for=lambda fixed: restart_command_line(run, fixed))


def _stacks_text(run: rundir.RunDir) -> str:
    from loratui.supervisor import stacks

    event = stacks.collect(run, "k in the app")
    return stacks.render(event) if event is not None else "no trainer process is running; nothing to dump"


def cmd_ls(args: argparse.Namespace) -> int:
    import json

    from loratui.logic import fmt

    rows: list[dict[str, Any]] = []
    runs = rundir.list_runs(args.runs_dir, args.everywhere)
    places = {run.path.resolve().parent for run in runs}
    recorded: dict[str, str] = {}  # run -> the end Slurm gave its job, as the run recorded it
    for run in runs:
        status = runstatus.read(run)  # the status file and the log's tail: independent of the log's size
        if status.end is not None and status.end.cause:
            recorded[run.run_id] = status.end.cause
        state = inert(status.state, newlines=False) + ("*" if status.alive == "trainer" else "")
        rows.append({"run": run.run_id, "state": state, "step": status.step, "max_steps": status.max_steps,
                     "loss": events.num_in(status.loss),
                     "peak_vram_gib": round(to_gib(status.peak_used), 2) if status.peak_used else None,
                     "path": str(run.path.resolve()),
                     **({"slurm": {"job": status.job_id}} if status.job_id else {})})
    _add_slurm_jobs(rows, recorded)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print(f"no runs in {rundir.where(args.runs_dir, args.everywhere)}")
        return EXIT_OK
    jobs = any("slurm" in r for r in rows)
    columns = terminal_width(sys.stdout)
    cells = []
    for r in rows:
        # A finished run took all its steps: its total is known at the end (as the views' full bar says).
        total = r["max_steps"] or (r["step"] if r["state"] == events.FINISHED else "?")
        step = f"{r['step']}/{total}" if total != 0 else "0 steps"  # finished with none: "0/0" reads as nothing
        peak = f"{r['peak_vram_gib']:.1f}G" if r["peak_vram_gib"] is not None else "—"
        cells.append((inert(r["run"]), f" {r['state']:<10} {step:>11} {fmt.number(r['loss']):>8} {peak:>10}",
                      inert(str(Path(r["path"]).parent)) if len(places) > 1 else ""))  # runs from several places
    # The job columns make a row about 100 wide: on a narrower terminal (the trial's 80x24 broke each row in two,
    # "RUNNIN" / "G"), each job goes on a line of its own under its run; piped, they stay in the row for scripts.
    job_below = jobs and bool(columns) and any(len(run) + len(rest) + len(_job_columns(r.get("slurm"))) >= columns
                                               for (run, rest, _), r in zip(cells, rows))
    if jobs and not job_below:
        cells = [(run, rest + _job_columns(r.get("slurm")), place) for (run, rest, place), r in zip(cells, rows)]
    width = _run_column(cells, columns)
    lines = [(f"{run}\n{'':<{width}}{rest}" if len(run) > width else f"{run:<{width}}{rest}", place)
             for run, rest, place in cells]
    # On a terminal too narrow for the WHERE column, each place goes on a line of its own under its run: the
    # terminal's wrap cut the path in two, back at column 0.
    below = bool(columns) and any(len(f"{row}  {place}".rsplit("\n", 1)[-1]) >= columns for row, place in lines
                                  if place)
    print(f"{'RUN':<{width}} {'STATE':<10} {'STEP':>11} {'LOSS':>8} {'PEAK VRAM':>10}"
          + (f"  {'JOB':>8} {'SLURM':<13} {'NODES':>5} {'LEFT':>7}" if jobs and not job_below else "")
          + ("  WHERE" if len(places) > 1 and not below else ""))
    for (row, place), r in zip(lines, rows):
        under = f"\n{_job_line(r['slurm'])}" if job_below and "slurm" in r else ""
        print(f"{row}{under}\n  in {place}" if below else f"{row}  {place}{under}" if place else row + under)
    if any(r["state"].endswith("*") for r in rows):
        print("* its supervisor died; the trainer goes on and obeys loratui pause/resume/stop")
    return EXIT_OK


def _run_column(cells: list[tuple[str, str, str]], columns: int) -> int:
    """The RUN column's width: the longest id, but on a terminal only the longest whose row fits it. A longer id
    (a long script's name) goes whole on a line of its own, its figures under it: one such id made every row wider
    than 80 columns, and the terminal broke each in two (piped, every row stays one line for scripts)."""
    width = max([3] + [len(run) for run, _, _ in cells])
    if columns:
        fits = [len(run) for run, rest, _ in cells if len(run) + len(rest) < columns]
        width = max([3, *fits]) if fits else width
    return width


def _add_slurm_jobs(rows: list[dict[str, Any]], recorded: dict[str, str]) -> None:
    """Each Slurm run's job as Slurm says now: state, nodes, time left (one cached `scontrol` for all); a job
    Slurm has forgotten (MinJobAge after its end, without accounting): the end its run `recorded`. A run with
    nobody alive whose job waits to start again is `requeued`, not lost."""
    import time

    from loratui import slurm

    if not any("slurm" in r for r in rows):
        return
    known, now = slurm.jobs(), time.time()
    for r in rows:
        job = known.get(r["slurm"]["job"]) if "slurm" in r else None
        if job is not None:
            left = job.time_left(now)
            r["slurm"].update(state=job.state, nodes=job.num_nodes, node_list=job.node_list,
                              time_left_s=round(left) if left is not None else None)
            # nobody runs it now (lost to a requeue, or suspended before the job's limit to requeue it), and its
            # job's next start resumes it (_requeued_run); "suspended" asked for a `resume` that refuses it
            if r["state"] in (runstatus.LOST, events.SUSPENDED) and (job.state == "PENDING" or
                                                                     job.state.startswith("REQUEUE")):
                r["state"] = "requeued"
        elif "slurm" in r and r["run"] in recorded:
            r["slurm"]["state"] = recorded[r["run"]]
        elif "slurm" in r and r["state"] in events.FINAL_STATES:
            r["slurm"]["state"] = "ended"  # forgotten by Slurm; its run ended on its own: "unknown" told nothing


def _job_columns(job: dict[str, Any] | None) -> str:
    from loratui.logic import fmt

    if not job:
        return ""
    nodes = job.get("nodes")
    left = job.get("time_left_s")
    return (f"  {inert(job['job']):>8} {job.get('state', 'unknown'):<13} {nodes if nodes else '?':>5} "
            f"{fmt.duration(left) if left is not None else '--':>7}")


def _job_line(job: dict[str, Any]) -> str:
    """A Slurm run's job on a line of its own under its row (a terminal too narrow for the job columns)."""
    from loratui.logic import fmt

    nodes, left = job.get("nodes"), job.get("time_left_s")
    facts = [job.get("state", "unknown")] + ([f"{nodes} node{'s' if nodes != 1 else ''}"] if nodes else []) + (
        [f"{fmt.duration(left)} left"] if left is not None else [])
    return f"  job {inert(job['job'])}: {', '.join(facts)}"


def cmd_control(args: argparse.Namespace) -> int:
    from loratui.supervisor import control

    run = runstatus.pick_run(args.run, args.runs_dir, need_running=True, everywhere=args.everywhere)
    url = getattr(args, "notify", None)
    try:
        said = control.deliver(run, args.command) if not url else _resume_with_alerts(run, url)
    except control.ControlError as exc:
        told = str(exc)  # most already name the run: "RUN: RUN is not running" said it twice
        raise UsageError(told if run.run_id in told else f"{run.run_id}: {told}") from None
    print(said)
    return EXIT_OK


def _resume_with_alerts(run: rundir.RunDir, url: str) -> str:
    """`resume --notify URL`: store the new target first (the supervisor that resumes reads it), and put
    the old one back if the run cannot be resumed."""
    from loratui.supervisor import alerts, control

    alerts.check_url(url)
    before = alerts.saved_target(run)
    alerts.save_target(run, url)
    try:
        said = control.deliver(run, "resume")
    except control.ControlError:
        alerts.save_target(run, before)
        raise
    return f"{said}; alerts now go to {alerts.describe(url)}"


if __name__ == "__main__":
    sys.exit(main())
