"""A DPO loss that climbs above ln 2 and stays there: the policy now prefers the rejected answers.

TRL's DPOTrainer (sigmoid loss, -log sigmoid(beta * margin)) starts at ln 2 = 0.693, the loss of a policy that prefers
neither answer, and falls as it learns to prefer the chosen one. The logged keys are DPOTrainer's own
(trl/trainer/dpo_trainer.py: rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins, logps/..., logits/...);
ORPO and CPO/SimPO log nll_loss (and ORPO log_odds_ratio), KTO kl: their losses carry other terms and are not judged.
"""

from __future__ import annotations

from loratui import events
from loratui.logic.advisor import Advisor


def dpo_logs(losses: list[float], margins: list[float] | None = None, extra: dict[str, float] | None = None
             ) -> list[events.Log]:
    """TRL DPOTrainer's logs, one every 10 steps."""
    found = []
    for i, loss in enumerate(losses, 1):
        margin = margins[i - 1] if margins is not None else None
        values: dict[str, float] = {"loss": loss, "grad_norm": 8.0, "learning_rate": 5e-6, "logps/chosen": -190.0,
                                    "logps/rejected": -210.0, "logits/chosen": -2.1, "logits/rejected": -2.0,
                                    "epoch": i / 50}
        if margin is not None:
            values.update({"rewards/chosen": margin / 2, "rewards/rejected": -margin / 2, "rewards/margins": margin,
                           "rewards/accuracies": 0.3 if margin < 0 else 0.7})
        else:
            values.update({"rewards/chosen": 0.0, "rewards/rejected": 0.0})  # an older log without margins
        found.append(events.Log(t=float(i), step=10 * i, values=values | (extra or {})))
    return found


RISING = [0.6931, 0.7012, 0.7450, 0.8123, 0.8790, 0.9302, 0.9877, 1.0411, 1.0902, 1.1320]
MARGINS = [0.0, -0.02, -0.10, -0.24, -0.37, -0.48, -0.60, -0.71, -0.81, -0.90]


def test_a_dpo_loss_climbing_above_ln2_is_flagged_with_its_margins() -> None:
    items = Advisor(None).feed_all(dpo_logs(RISING, MARGINS)).items()
    assert [i.id for i in items] == ["loss_diverging"]
    top = items[0]
    assert top.severity == "warning"
    assert "prefers the rejected" in top.title and "0.6931 -> 1.041" in top.title
    said = " ".join(top.evidence)
    assert "ln 2 = 0.693" in said and "rewards/margins" in said and "-0.24 ... -0.71" in said
    assert "swapped" in said  # the data's chosen and rejected, checked first


def test_without_logged_margins_the_loss_alone_says_it() -> None:
    items = Advisor(None).feed_all(dpo_logs(RISING)).items()
    assert [i.id for i in items] == ["loss_diverging"] and "rewards/margins" not in " ".join(items[0].evidence)


def test_a_healthy_dpo_run_and_a_spread_above_ln2_are_not_flagged() -> None:
    falling = [0.6931, 0.6712, 0.6101, 0.5532, 0.4907, 0.4420, 0.4013, 0.3630, 0.3281, 0.3011]
    assert Advisor(None).feed_all(dpo_logs(falling, [0.1 * i for i in range(10)])).items() == []
    # a mean loss above ln 2 beside a positive mean margin: a wide spread of pairs, the chosen still ahead
    assert Advisor(None).feed_all(dpo_logs(RISING, [0.05 * i for i in range(10)])).items() == []
    # a short excursion above ln 2 that comes back
    bump = [0.6931, 0.7050, 0.8123, 0.8401, 0.7902, 0.6620, 0.6013, 0.5532, 0.5101, 0.4807]
    assert Advisor(None).feed_all(dpo_logs(bump, [0.0, -0.05, -0.2, -0.25, -0.15, 0.05, 0.2, 0.3, 0.4, 0.5])
                                  ).items() == []


def test_other_preference_losses_are_not_judged_against_ln2() -> None:
    # ORPO (nll_loss + log_odds_ratio) and CPO/SimPO (nll_loss) add the language-model loss: above ln 2 by design
    for extra in ({"nll_loss": 1.2, "log_odds_ratio": -0.8}, {"nll_loss": 1.2}):
        assert Advisor(None).feed_all(dpo_logs(RISING, MARGINS, extra)).items() == [], extra
