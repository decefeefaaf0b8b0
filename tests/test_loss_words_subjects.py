"""What is said of the GPU's or CPU's load is not said of the loss: the two batteries (loss words and data
starvation) met on `训练时CPU占满，GPU利用率上不去` (while training the CPU is full and GPU utilisation won't rise),
which the loss reader took as a training run that does not move."""

import pytest

from loratui.logic.advisor import loss_words


@pytest.mark.parametrize("line", [
    "训练时CPU占满，GPU利用率上不去",
    "GPU utilization stays at 30% during training",
    "the GPU usage is stuck at 20% while training",
    "训练的时候显存占用一直不变",
])
def test_the_devices_load_is_not_the_loss(line: str) -> None:
    assert loss_words.read(line) is None


@pytest.mark.parametrize("line", ["训练时loss一直不降", "during training the loss stays at 2.3 and GPU usage is 90%"])
def test_the_loss_beside_it_is_still_read(line: str) -> None:
    said = loss_words.read(line)
    assert said is not None and said.kind == "flat" and said.subject == "loss"
