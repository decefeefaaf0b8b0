"""One pattern of the GPU by name or model for the data-starvation readers (starve_words.DEVICE, which starve_said.py's
readers of utilisation and idling use too): a card of four digits or a plural RTX counts in either."""

from __future__ import annotations

import pytest

from loratui.logic.advisor.starve_words import fed_slowly


@pytest.mark.parametrize("said", ["the A6000 waits ~2 s for the loader each step", "the RTX 4090s are waiting on I/O",
                                  "the A100s are waiting on I/O", "the GPU waits for the data"])
def test_the_card_waiting_for_its_feed_by_any_name(said: str) -> None:
    assert fed_slowly(said) == "util"


@pytest.mark.parametrize("said", ["the A6000 waits for the NCCL barrier", "a 4090s waits for the data"])
def test_no_card_or_no_feed_is_no_wait_for_data(said: str) -> None:
    assert fed_slowly(said) is None
