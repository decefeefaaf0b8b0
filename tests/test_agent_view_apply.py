"""Trial 7, an agent reading `loratui mcp` answers: an item with can_apply false gave why_not_applicable "" (every
`doctor` item on pasted text did), where apply_advice itself says why ("it proposes no change")."""

from __future__ import annotations

from loratui.commands import agent_view


def test_an_item_that_cannot_be_applied_says_why() -> None:
    found = agent_view.doctor("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert found["items"], found
    for item in found["items"]:
        assert item["can_apply"] or item["why_not_applicable"], item
