"""The advisor's memory proposal: the estimator's cheapest move predicted to land under the run's line."""

from __future__ import annotations

from typing import Any

from loratui.logic.advisor.advice import line_for
from loratui.logic.priced_moves import PricedMove, first_fitting, price_moves
from loratui.units import GIB


def run_line(adv: Any) -> int:
    """The line memory is judged against (bytes): the warning line, or 95% of a smaller card (the card's
    size from the OOM message, else from the samples)."""
    totals = [s.total for g, s in adv.ctx.last_sample.items() if adv.ctx.is_ours(g) and s.total > 0]
    if adv.oom is not None and adv.oom.facts["report"].total:
        totals.append(adv.oom.facts["report"].total)
    return line_for(adv.vram.line, min(totals)) if totals else adv.vram.line


def memory_moves(adv: Any) -> list[PricedMove]:
    """Every priced move for the advisor's run ([] without a recipe or an estimate that names the model)."""
    estimate = adv.estimate
    if adv.recipe is None or estimate is None or not estimate.config:
        return []
    line = run_line(adv) / GIB
    key = (id(estimate), id(adv.recipe), line)  # a watched run's Settings replace the recipe
    cached = getattr(adv, "_priced_cache", None)
    if cached is None or cached[0] != key:
        cached = (key, price_moves(adv.recipe, estimate.config, line, seq=estimate.seq, runtime=estimate.runtime))
        adv._priced_cache = cached
    return cached[1]


def memory_proposal(adv: Any) -> PricedMove | None:
    """The move to propose: the cheapest in speed that is predicted to fit, or None (then the recipe-only
    rules of advisor.moves speak)."""
    moves = memory_moves(adv)
    if moves and moves[0].now_gib <= run_line(adv) / GIB:
        # The estimate already fits under the line, yet the run ran out (or over): it does not describe this
        # run, and a move priced with it would be a guess. The recipe's own rules speak instead.
        return None
    return first_fitting(moves)
