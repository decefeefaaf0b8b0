"""What `loratui run` checks and passes before the run starts: the pre-flight and the alert URL.

Module-level imports stay light: this module is imported when `loratui run` starts.
"""

from __future__ import annotations

import argparse
import sys

from loratui.text import inert


def preflight(args: argparse.Namespace) -> bool:
    """Whether the run may start: the estimate fits the chosen GPU's free memory, or `--force`."""
    from loratui.commands.estimate import find_config, read_config
    from loratui.recipe import load_recipe
    from loratui.supervisor import preflight as pf

    recipe = load_recipe(args.recipe, model_path=args.model_path)  # the override before the checks
    verdict = pf.at_launch(recipe, args.recipe.resolve().parent, lambda path, d: read_config(find_config(path, d)))
    if verdict.fits:
        return True
    if args.force:
        print(f"loratui: {inert(verdict.message.splitlines()[0])}; starting anyway (--force)", file=sys.stderr)
        return True
    print(f"loratui: {inert(verdict.message)}", file=sys.stderr)
    return False


def notify_url(args: argparse.Namespace) -> str | None:
    """`--notify URL`, checked; kept for the run (RunDir.alerts, 0600), never the log or the screen."""
    url = getattr(args, "notify", None)
    if not url:
        return None
    from loratui.supervisor.alerts import check_url

    return check_url(url)


def slurm_limit(args: argparse.Namespace) -> tuple[str, bool]:
    """`--save-before-limit DURATION` and `--requeue`, checked: (the duration as given, requeue)."""
    from loratui.errors import UsageError
    from loratui.units import seconds

    limit = args.save_before_limit or ""
    if limit and not (seconds(limit) or 0) > 0:
        raise UsageError(f"--save-before-limit {limit}: give a duration such as 10m, 90s or 1h (how long before "
                         "the Slurm job's time limit to save a checkpoint)")
    if args.requeue and not limit and (args.watch or args.recipe is None):
        raise UsageError("--requeue: needs --save-before-limit (the checkpoint the requeued job resumes from), "
                         "e.g. --save-before-limit 10m --requeue")
    return limit, bool(args.requeue)
