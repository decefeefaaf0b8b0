"""A run whose learning rate is far too high collapses: the loss falls a little, then sticks well above what
the data allows with its gradient norm gone to almost nothing. The recordings are two real 40-step tiny CPU runs
(`loratui run` of recipes/tiny.toml with learning_rate 0.9 and with its own 3e-3), recorded by the supervisor."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from loratui import events
from loratui.eventlog import read_log
from loratui.logic.advisor import Advisor
from loratui.recipe import load_recipe

DATA = Path(__file__).parent / "data" / "runs"
TINY = Path(__file__).resolve().parent.parent / "recipes" / "tiny.toml"


def _recipe(lr: float):  # type: ignore[no-untyped-def]
    tiny = load_recipe(TINY)
    return msgspec.structs.replace(tiny, training=msgspec.structs.replace(tiny.training, learning_rate=lr))


def test_a_collapse_at_a_learning_rate_of_0_9_says_lower_it() -> None:
    """lr 0.9: the loss falls from 6.57 (ln 707, the random model's uniform guess) to about 5.45 by step 7 and
    stays there with grad_norm ~0.03 (it was 2.6): advice to lower learning_rate, with the plateau against
    ln(vocab) and the rate."""
    log = read_log(DATA / "tiny_lr0.9_collapse.jsonl").events
    items = Advisor(_recipe(0.9)).feed_all(log).items()
    (advice,) = [a for a in items if a.id == "loss_flat"]
    assert advice.change == {"training.learning_rate": 0.009}
    assert "lower learning_rate from 0.9 to 0.009" in advice.title
    said = " ".join(advice.evidence)
    assert "ln 707 = 6.56" in said and "grad_norm median 0.039" in said and "learning_rate now" in said


def test_the_same_loss_without_the_model_facts_is_not_called_a_collapse() -> None:
    """Without the vocabulary (no pre-flight estimate: a pasted log) the level cannot be judged: no guess."""
    log = [e for e in read_log(DATA / "tiny_lr0.9_collapse.jsonl").events if not isinstance(e, events.Estimate)]
    assert [a.id for a in Advisor(_recipe(0.9)).feed_all(log).items()] == []


def test_a_healthy_tiny_run_is_no_collapse() -> None:
    """lr 3e-3, the recipe's own: the loss falls to 3.4 with grad_norm ~1 throughout; no advice at any point."""
    advisor = Advisor(_recipe(3e-3))
    for event in read_log(DATA / "tiny_lr3e-3_healthy.jsonl").events:
        advisor.feed(event)
        assert advisor.items() == []


def test_the_advised_rate_trains_in_one_apply_where_a_third_a_tenth_and_a_thirtieth_still_collapse() -> None:
    """Real 40-step tiny CPU runs from 0.9 (recorded as above): 0.3 (the third once advised) and 0.03 (a thirtieth)
    still collapsed (loss ~5.45, grad_norm 0.003 and 0.03; 0.09, a tenth, and 0.018, a fiftieth, too: 5.44 and 5.41,
    grad_norm 0.008 and 0.05); 0.009, a hundredth, trains: the loss falls to 4.7 by step 40 with grad_norm 0.3-1,
    and the advisor says nothing."""
    advised = Advisor(_recipe(0.9)).feed_all(read_log(DATA / "tiny_lr0.9_collapse.jsonl").events).items()
    (change,) = [a.change["training.learning_rate"] for a in advised if a.id == "loss_flat"]
    for lr, name in ((0.3, "tiny_lr0.3_collapse.jsonl"), (0.03, "tiny_lr0.03_collapse.jsonl")):
        still = Advisor(_recipe(lr)).feed_all(read_log(DATA / name).events).items()
        assert [a.id for a in still] == ["loss_flat"] and "collapsed" in still[0].title, (lr, still)
    log = read_log(DATA / "tiny_lr0.009_trains.jsonl").events
    rates = [float(e.values["learning_rate"]) for e in log if isinstance(e, events.Log) and "learning_rate" in e.values]
    assert max(rates) == pytest.approx(change, rel=0.01)  # the recording ran at the advised rate (its peak)
    assert Advisor(_recipe(change)).feed_all(log).items() == []
    losses = [float(e.values["loss"]) for e in log if isinstance(e, events.Log) and "loss" in e.values]
    assert change == 0.009 and len(losses) == 40 and max(losses[-5:]) < 4.85 and min(losses[:2]) > 6.5
