"""The `loratui` command line. Bad input exits 2 with one message; nothing here prints a traceback."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from loratui import __version__, rundir
from loratui.commands import doctor, estimate, importer, replay
from loratui.errors import UsageError
from loratui.recipe import RecipeError
from loratui.units import to_gib


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="loratui", description=__doc__)
    parser.add_argument("--version", action="version", version=f"loratui {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    runs_dir = argparse.ArgumentParser(add_help=False)
    runs_dir.add_argument("--runs-dir", type=Path, default=None, help="where runs live (default ./runs)")

    run = sub.add_parser("run", parents=[runs_dir], help="start a training run from a TOML recipe")
    run.add_argument("recipe", type=Path)
    run.add_argument("--headless", action="store_true", help="print progress instead of the TUI")
    run.add_argument("--run-name", default=None)
    run.add_argument("--max-steps", type=int, default=None)
    run.add_argument("--model-path", default=None, help="overrides [model] path")

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
        cmd.set_defaults(handler=cmd_control)

    run.set_defaults(handler=cmd_run)
    attach.set_defaults(handler=cmd_attach)
    ls.set_defaults(handler=cmd_ls)
    for module in (doctor, estimate, importer, replay):
        module.register(sub, runs_dir).set_defaults(handler=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    args = build_parser().parse_args(argv)
    if getattr(args, "runs_dir", None) is None and hasattr(args, "runs_dir"):
        args.runs_dir = rundir.default_runs_dir()
    try:
        return int(args.handler(args))
    except (RecipeError, UsageError, rundir.RunNotFound) as exc:
        print(f"loratui: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def cmd_run(args: argparse.Namespace) -> int:
    from loratui.supervisor.launch import start_run

    run = start_run(args.recipe, args.runs_dir, args.run_name, args.model_path, args.max_steps)
    return _view(run, headless=args.headless, starting=True)


def cmd_attach(args: argparse.Namespace) -> int:
    run = rundir.resolve(args.run, args.runs_dir)
    return _view(run, headless=args.headless, starting=False)


def _view(run: rundir.RunDir, headless: bool, starting: bool) -> int:
    """The TUI on a terminal, the progress printer otherwise; Ctrl-C leaves the run training."""
    if headless or not (sys.stdout.isatty() and sys.stdin.isatty()):
        from loratui.tui import headless as hl

        print(f"run {run.run_id} in {run.path}  (loratui attach {run.run_id}; loratui stop {run.run_id})")
        try:
            state = hl.follow(run)
        except KeyboardInterrupt:
            print(f"\ndetached; the run goes on. `loratui attach {run.run_id}` to watch, "
                  f"`loratui stop {run.run_id}` to stop it.")
            return 0
        return hl.exit_code(state)
    from loratui.supervisor import control
    from loratui.supervisor.restart import restart_with, write_fixed_recipe
    from loratui.tui.app import RunActions, run_app

    def actions(run: rundir.RunDir) -> RunActions:
        return RunActions(send=lambda command: control.send(run.control, command, "tui"),
                          write_fix=lambda advice_id, change: write_fixed_recipe(run, advice_id, change),
                          restart=lambda recipe, env, send: restart_with(run, recipe, env, send))

    return run_app(run, actions)


def cmd_ls(args: argparse.Namespace) -> int:
    import json

    from loratui.eventlog import read_log
    from loratui.logic import fmt
    from loratui.logic.runstate import RunState

    rows: list[dict[str, Any]] = []
    for run in rundir.list_runs(args.runs_dir):
        state = RunState().feed_all(read_log(run.events).events)
        status = state.state
        if status not in ("finished", "failed", "stopped") and run.supervisor_pid() is None:
            status = "lost"  # no end event and no supervisor: it was killed
        rows.append({"run": run.run_id, "state": status, "step": state.step, "max_steps": state.max_steps,
                     "loss": state.last_loss, "peak_vram_gib": round(to_gib(state.device_used_peak), 2)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no runs in {args.runs_dir}/")
        return 0
    print(f"{'RUN':<40} {'STATE':<10} {'STEP':>11} {'LOSS':>8} {'PEAK VRAM':>10}")
    for r in rows:
        step = f"{r['step']}/{r['max_steps'] or '?'}"
        print(f"{r['run']:<40} {r['state']:<10} {step:>11} {fmt.number(r['loss']):>8} "
              f"{r['peak_vram_gib']:>8.1f}G")
    return 0


def cmd_control(args: argparse.Namespace) -> int:
    from loratui.supervisor import control

    run = rundir.resolve(args.run, args.runs_dir)
    try:
        control.send(run.control, args.command)
    except control.ControlError as exc:
        raise UsageError(f"{run.run_id}: {exc}") from None
    print(f"{args.command}: sent to {run.run_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
