"""What `loratui run` checks and passes before the run starts: the pre-flight and the alert URL.

Module-level imports stay light: this module is imported when `loratui run` starts.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from loratui.text import inert, say_error


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
        say_error(f"loratui: {inert(verdict.message.splitlines()[0])}; starting anyway (--force)")
        return True
    say_error(f"loratui: {inert(verdict.message)}")
    return False


def notify_url(args: argparse.Namespace) -> str | None:
    """`--notify URL`, checked; kept for the run (RunDir.alerts, 0600), never the log or the screen."""
    url = getattr(args, "notify", None)
    if not url:
        return None
    from loratui.supervisor.alerts import check_url

    return check_url(url)


WEIGHTS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json")


def check_model_reachable(args: argparse.Namespace) -> None:
    """Refuse a recipe whose model is a hub id that is neither cached nor downloadable (no network, or
    HF_HUB_OFFLINE): the run would start, load for a while and end in a connection traceback."""
    from loratui.errors import UsageError
    from loratui.recipe import TINY_MODEL, load_recipe

    model = load_recipe(args.recipe, model_path=args.model_path).model
    if model.path == TINY_MODEL or (args.recipe.resolve().parent / Path(model.path).expanduser()).exists():
        return
    if not _hub_id(model.path) or _cached(model.path, model.revision):
        return  # a local path that is missing is the launch's to refuse
    offline = [name for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
               if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")]
    fix = f"pass --model-path /path/to/model (a copy of {inert(model.path)} on disk)"
    if offline:
        raise UsageError(f"{offline[0]} is set and the model is not cached: {fix}")
    why = _hub_unreachable(model.path, model.revision)
    if why:
        raise UsageError(f"no network and the model is not cached: {fix}; {why}")


def _hub_id(name: str) -> bool:
    """Whether `name` can be a hub repository id (not a path)."""
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(name)
    except Exception:  # HFValidationError: a path, or no id at all
        return False
    return not name.startswith((".", "~"))


def _cached(repo_id: str, revision: str | None) -> bool:
    """Whether the hub cache holds the model's config and weights (as from_pretrained would find them)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        config = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except Exception:  # an id the hub library rejects: not cached
        return False
    if not isinstance(config, str):
        return False
    snapshot = Path(config).parent
    return any(any(snapshot.glob(pattern)) for pattern in WEIGHTS)


def _hub_unreachable(repo_id: str, revision: str | None) -> str:
    """Why the hub cannot be asked for the model, "" when it answered (whatever it said: the trainer
    reports a missing or gated repository in its own words)."""
    from huggingface_hub import constants, model_info
    from huggingface_hub.errors import HfHubHTTPError

    try:
        model_info(repo_id, revision=revision, timeout=10)
    except HfHubHTTPError:
        return ""
    except Exception as exc:  # a refused or timed-out connection, no DNS, offline mode: out of reach
        return f"{constants.ENDPOINT}: {inert(str(exc))[:120] or type(exc).__name__}"
    return ""


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
    if (limit or args.requeue) and "SLURM_JOB_ID" not in os.environ:  # a batch script's line tried out by hand
        flags = " and ".join(f for f, given in (("--save-before-limit", limit), ("--requeue", args.requeue)) if given)
        print(f"loratui: note: {flags}: ignored outside a Slurm job (no SLURM_JOB_ID here): this run has no time "
              "limit to save before", file=sys.stderr)
    return limit, bool(args.requeue)
