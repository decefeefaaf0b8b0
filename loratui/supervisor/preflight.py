"""Pre-flight at launch: before any weights load, does the recipe's estimate fit what is free on the GPU now?

Free is the card's total minus what other processes hold (NVML's process list, named by PID and size), or
minus NVML's device "used" where the list cannot be read. A recipe that cannot fit is refused with the
numbers and the top move predicted to fit (a run would otherwise load for minutes and then OOM at step 0);
`loratui run --force` starts it anyway. Without a GPU (or NVML) there is no pre-flight.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loratui.logic.advisor.advice import line_for
from loratui.logic.estimate import ConfigError, estimate
from loratui.logic.priced_moves import PricedMove, first_fitting, price_moves
from loratui.supervisor.gpu import Device, GpuProbe
from loratui.units import GIB, gib


@dataclass(frozen=True)
class Free:
    """What one GPU has free now, and who holds the rest."""

    device: Device
    free: int
    holders: list[tuple[int, int]] = field(default_factory=list)  # (pid, bytes), largest first


@dataclass(frozen=True)
class Verdict:
    """The pre-flight's answer: fits, or refused with the message to print."""

    fits: bool
    message: str
    need_gib: float = 0.0
    move: PricedMove | None = None


def free_on(probe: GpuProbe, device: Device) -> Free:
    """Total minus what the compute processes hold (device used where NVML lists no processes)."""
    procs = probe.processes(device.index)
    if procs:
        holders = sorted(procs.items(), key=lambda item: -item[1])
        return Free(device, max(0, device.total - sum(procs.values())), holders)
    used = probe.memory_used(device.index)
    return Free(device, max(0, device.total - (used or 0)))


def devices_for(recipe: Any, probe: GpuProbe) -> list[Device]:
    """The cards the run will use: the first `num_processes` visible ones (all for "auto")."""
    devices = probe.devices()
    n = recipe.distributed.num_processes
    return devices if n == "auto" else devices[:max(1, n)]


def check(recipe: Any, config: dict[str, Any], probe: GpuProbe) -> Verdict:
    """Compare the estimate at max_length with the tightest chosen card's free memory."""
    try:
        need = estimate(recipe, config).peak_device_gib
    except ConfigError as exc:
        return Verdict(True, f"no pre-flight: {exc}")
    cards = [free_on(probe, d) for d in devices_for(recipe, probe)]
    if not cards:
        return Verdict(True, "no pre-flight: no GPU to check")
    tight = min(cards, key=lambda c: c.free)
    have = tight.free / GIB
    if need <= have:
        return Verdict(True, f"pre-flight: needs ~{need:.1f} GiB, GPU {tight.device.index} has {have:.1f} GiB "
                             "free", need)
    target = min(have, line_for(int(recipe.monitor.warn_gb * GIB), tight.device.total) / GIB)
    move = first_fitting(price_moves(recipe, config, target))
    return Verdict(False, _refusal(recipe, tight, need, move), need, move)


def _refusal(recipe: Any, card: Free, need: float, move: PricedMove | None) -> str:
    device = card.device
    held = ", ".join(f"PID {pid} holds {gib(used)} GiB" for pid, used in card.holders[:6] if used > 0)
    lines = [f"pre-flight: this recipe needs ~{need:.1f} GiB at max_length {recipe.data.max_length} (estimate), "
             f"but GPU {device.index} ({device.name}) has {gib(card.free)} GiB free of {gib(device.total)}"
             + (f" ({held})" if held else "")]
    if move is not None:
        lines.append(f"  predicted to fit: {move.describe()}")
        changes = ", ".join(f"{k} = {v!r}" for k, v in move.change.items())
        lines.append(f"  (in the recipe: {changes})")
    else:
        lines.append("  no recipe move is predicted to fit that; free the GPU or choose another "
                     "(CUDA_VISIBLE_DEVICES)")
    lines.append("  `loratui run --force` starts it anyway")
    return "\n".join(lines)


def at_launch(recipe: Any, recipe_dir: Any, load_config: Any, probe: GpuProbe | None = None) -> Verdict:
    """The pre-flight of `loratui run`: `load_config(model_path, recipe_dir)` gives the parsed config.json
    (or raises); `probe` defaults to NVML. No GPU, or no config to size the model: nothing to refuse."""
    if probe is None:
        from loratui.supervisor.gpu import open_probe

        probe, reason = open_probe()
        if probe is None:
            return Verdict(True, f"no pre-flight: {reason}")
    try:
        config = load_config(recipe.model.path, recipe_dir)
    except Exception as exc:  # a hub id not cached, an unreadable config: the trainer will say more
        return Verdict(True, f"no pre-flight: {exc}")
    return check(recipe, config, probe)
