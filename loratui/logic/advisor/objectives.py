"""Objectives whose loss is not a language model's, by name: one list for reinforcement learning, one for preference
optimisation, read by every reader of a person's words about a loss (core's whole-text RL flag, loss_words'
sentences, said's lines). A GRPO loss grows with the KL to the reference while the reward is flat, a value or Q loss
moves as the policy improves, a DPO loss starts at ln 2: their rise or standstill in words says nothing of whether
a model learns. Pure: names and patterns."""

from __future__ import annotations

LM_RL = ("PPO", "GRPO", "RLOO", "RLHF", "RLVR")
"""Reinforcement learning of language models: a GRPO loss is 0 at its first steps by design (the KL to the reference
is), so a loss said to be 0 is no report there either."""
RL = ("DQN", "DDQN", "DDPG", "TD3", "SAC", "A2C", "A3C", "MuZero") + LM_RL
"""Reinforcement-learning algorithms, classic and for language models: a classic agent's value or Q loss said to be
0 is still a report (its targets equal its predictions: nothing is learned)."""
PREFERENCE = ("DPO", "ORPO", "KTO", "SimPO", "IPO", "CPO")
"""Preference objectives: their implicit rewards are a metric of the policy against the reference."""


def named(names: tuple[str, ...], *more: str) -> str:
    """A pattern for any of `names` (and the `more` alternatives) as a word of its own, bounded by ASCII word
    characters: Chinese beside it is no word of its own (`做dpo训练时`)."""
    return rf"(?<![A-Za-z0-9_])(?:{'|'.join(names + more)})(?![A-Za-z0-9_])"
