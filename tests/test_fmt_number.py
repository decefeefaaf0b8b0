"""The loss-like number shown in `ls`, `report`, the headless line and the status bar."""

from __future__ import annotations

import pytest

from loratui.logic.fmt import number


@pytest.mark.parametrize(("value", "shown"), [
    (2.34567, "2.3457"), (0.0, "0.0000"), (None, "--"), (float("nan"), "NaN"), (float("-inf"), "-inf"),
    (3e-8, "3e-08"), (-3.2e-8, "-3.2e-08"), (0.00004, "4e-05"), (0.00005, "0.0001"),
])
def test_a_tiny_loss_keeps_its_value_and_sign(value: float | None, shown: str) -> None:
    """A GRPO loss near zero (trial 8: about ±3e-8) read '0.0000' and '-0.0000': its value, in as few characters."""
    assert number(value) == shown
