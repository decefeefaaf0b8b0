"""Issue 23: what a series pasted with no names is, and what a person says the loss does, read by the mechanism
rather than the excerpt's words (ruleprose6). Lines quoted from dev records name their source; the others are other
wordings of the same mechanism; negatives keep their answers."""

from __future__ import annotations

import io

import pytest

from loratui import events
from loratui.commands.doctor import diagnose_stream
from loratui.logic.text_reader import TextReader


def first_id(text: str) -> str:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


def logged(text: str) -> list[float]:
    reader = TextReader()
    found = [e for line in text.splitlines(keepends=True) for e in reader.feed(line)] + reader.close()
    return [e.values["loss"] for e in found if isinstance(e, events.Log)]


# -- a running total is no loss column -------------------------------------------------------------------------

GPT2_BPE = ("That means, BPE takes a long time. Here is a quick benchmark in my 4th gen i7 CPU:\n```\n"
            "0     0.002872943878173828\n100     0.2857849597930908\n200     0.46935296058654785\n"
            "300     0.7295417785644531\n400     0.8204867839813232\n500     0.965552806854248\n"
            "600     1.0516178607940674\n700     1.1927227973937988\n800     1.3081107139587402\n"
            "900     1.354628086090088\n1000     1.4476778507232666\n```\nthe first column is the iteration number and "
            "the second one is elapsed time. 1000 iteration takes 1.44 seconds.\n")
"""https://github.com/huggingface/transformers/issues/1621 (dev): read as a loss rising 0.0096 -> 0.72 before."""


@pytest.mark.parametrize("text", [
    GPT2_BPE,
    "step  seconds\n10 0.41\n20 0.83\n30 1.22\n40 1.65\n50 2.04\n",  # wall-clock seconds since the start
    "0 0.0\n1000 12.5\n2000 25.1\n3000 37.4\n",  # tokens seen, in millions
    "5 0.013\n10 0.027\n15 0.041\n20 0.052\n25 0.068\n",  # hours elapsed
])
def test_a_column_that_starts_near_zero_and_only_grows_is_a_running_total(text: str) -> None:
    """A loss starts high and falls (or wanders); a bare column that starts near zero and grows at every row is a
    running total (elapsed time, tokens or samples seen), not a loss."""
    assert logged(text) == []


@pytest.mark.parametrize("text", [
    "76930 2.6496577\n76940 2.59109\n76950 2.596339\n76960 2.735384\n",  # prajdabre/yanmtt#7: a loss column
    "100 2.10\n200 3.40\n300 5.90\n400 9.80\n",  # a loss that climbs from where a loss starts
    "10 0.90\n20 0.50\n30 0.31\n40 0.22\n",
])
def test_a_loss_column_still_reads(text: str) -> None:
    assert len(logged(text)) == 4


def test_the_doctor_reads_the_bpe_benchmark_as_slow_preprocessing() -> None:
    assert first_id(GPT2_BPE) == "data_starved"


# -- a loss that fell and levelled off, or whose fall slows, is no standstill -------------------------------------

from loratui.logic.advisor import loss_words  # noqa: E402

BAICHUAN = ("在2块4090用deepspeed微调baichuan1和baichuan2开始loss为1.9，几十个step之后就在1.5附近不再下降。")
"""https://github.com/hiyouga/LlamaFactory/issues/987 (dev, healthy): read as a flat loss before."""
OLMO = ("We are now at steps 5000, with a perplexity around 20. currently the learning rate is 3 x E-4\n"
        "and we notice the loss is actually becoming flat.\nIs this a queue to decrease the learning rate to 3 x E-5?")
"""https://github.com/allenai/OLMo/issues/497 (dev, healthy): the warm-up's end, read as a flat loss before."""


@pytest.mark.parametrize("line", [
    BAICHUAN,
    "the loss started around 2.4 and after 300 steps it stays at about 1.1",
    "loss went from 3.2 down to 1.7 and then plateaued",
    "开始loss是2.0，后来一直维持在1.2左右",
    "and we notice the loss is actually becoming flat.",
    "the loss is starting to plateau around 1.8",
    "the training loss is getting flatter after epoch 2",
])
def test_a_fall_that_levels_off_or_slows_is_the_curves_usual_shape(line: str) -> None:
    said = loss_words.read(line)
    assert said is None or said.kind != "flat", said


@pytest.mark.parametrize("line", [
    "the loss started at 2.3 and now stays at 2.29",  # a fall too small to be learning
    "loss starts at 0.9 and stays at 0.693",  # levelled at chance (ln 2)
    "loss started at 11 and is stuck at 7.5",  # levelled where a language model has learned nothing
    "loss stuck at 2.3", "The loss stays flat from the start", "the loss became flat at 6.9 and never moved",
])
def test_a_standstill_without_a_learned_fall_is_still_flat(line: str) -> None:
    said = loss_words.read(line)
    assert said is not None and said.kind == "flat", said


@pytest.mark.parametrize("text", [BAICHUAN, OLMO])
def test_the_doctor_reads_the_levelled_losses_as_healthy(text: str) -> None:
    assert first_id(text) not in ("loss_flat", "loss_flat_or_zero")


# -- a preference loss said to stay at ln 2 ------------------------------------------------------------------------

TRL_DPO = ('hello ! i open  this issure for the problem of "DPO loss remains 0.6931 from the first step and the rewards '
           'stuck at 0.0" , the problem primary in the #1311 , but now i cant find a solution for this')
"""https://github.com/huggingface/trl/issues/1627 (dev): read as nothing before (a DPO loss's words were all quiet)."""


@pytest.mark.parametrize("line", [
    TRL_DPO, "DPO loss stays at 0.693 and rewards/chosen are 0 the whole run",
    "my reward model's loss is stuck at 0.6931 from step 1", "DPO训练时loss一直是0.6931",
])
def test_a_preference_loss_stuck_at_ln2_is_flat(line: str) -> None:
    said = loss_words.read(line)
    assert said is not None and said.kind == "flat", said


@pytest.mark.parametrize("line", [
    "the DPO loss stays at 0.45", "GRPO loss stays at 0.0 for the first steps", "the DPO loss starts at 0.693 and falls",
])
def test_a_preference_loss_elsewhere_says_nothing_of_learning(line: str) -> None:
    said = loss_words.read(line)
    assert said is None or said.kind not in ("flat",), said


def test_the_doctor_reads_the_dpo_report_as_flat() -> None:
    assert first_id(TRL_DPO) == "loss_flat"


# -- the first evaluations' loss unmoved ---------------------------------------------------------------------------

STATIC_EMBEDDING = """Default learning rate: 5e-5
```python
{'loss': 5.8561, 'learning_rate': 4e-05, 'epoch': 0.2}
{'eval_loss': 2.8591532707214355, 'eval_all-nli-dev_cosine_accuracy': 0.7648845686512759, 'epoch': 0.2}
{'loss': 5.9103, 'learning_rate': 3e-05, 'epoch': 0.4}
{'eval_loss': 2.8587820529937744, 'eval_all-nli-dev_cosine_accuracy': 0.7645808019441069, 'epoch': 0.4}
{'loss': 5.7194, 'learning_rate': 2e-05, 'epoch': 0.6}
{'eval_loss': 2.8585257530212402, 'eval_all-nli-dev_cosine_accuracy': 0.7645808019441069, 'epoch': 0.6}
{'loss': 5.6334, 'learning_rate': 1e-05, 'epoch': 0.8}
{'eval_loss': 2.858367443084717, 'eval_all-nli-dev_cosine_accuracy': 0.7645808019441069, 'epoch': 0.8}
{'loss': 5.4788, 'learning_rate': 0.0, 'epoch': 1.0}
"""
"""https://github.com/huggingface/sentence-transformers/issues/2982 (dev): read as healthy before."""


def evals(values: list[float], start: float = 0.1, every: float = 0.1, digits: int = 5) -> str:
    lines = []
    for i, value in enumerate(values):
        epoch = round(start + i * every, 2)
        lines.append(f"{{'loss': {2.5 - 0.01 * i:.4f}, 'learning_rate': 2e-05, 'epoch': {epoch}}}")
        lines.append(f"{{'eval_loss': {value:.{digits}f}, 'eval_runtime': 3.2, 'epoch': {epoch}}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text", [
    STATIC_EMBEDDING,
    evals([1.73412, 1.73398, 1.73405, 1.73391, 1.73388]),  # a classifier's head that never trains
    evals([0.69315, 0.69301, 0.69322, 0.69310], start=0.05, every=0.05),
    evals([3.21004, 3.20987, 3.20961, 3.20955], start=0.25, every=0.25),
])
def test_the_first_evaluations_loss_unmoved_is_a_model_not_learning(text: str) -> None:
    assert first_id(text) == "loss_flat"


@pytest.mark.parametrize("text", [
    evals([1.7341, 1.7150, 1.6962, 1.6801]),  # falls about 1% an evaluation: learning
    evals([1.73412, 1.73398, 1.73405, 1.73391], start=2.6),  # late in the run: converged
    evals([1.73412, 1.73398, 1.73405]),  # three: too few
    evals([1.73, 1.73, 1.73, 1.73], digits=2),  # printed too short to see a move
])
def test_evaluations_that_move_come_late_or_few_say_nothing(text: str) -> None:
    assert first_id(text) != "loss_flat"


def test_a_preference_loss_at_ln2_at_the_start_only_is_where_it_begins() -> None:
    for line in ("DPO loss stays at 0.693 at the start", "the DPO loss is 0.6931 for the first 20 steps",
                 "一开始DPO loss一直是0.6931"):
        said = loss_words.read(line)
        assert said is None or said.kind != "flat", (line, said)


# -- a whole epoch's loss doubling -------------------------------------------------------------------------------

FASTAI = ("fastai version: '1.0.46.dev0'\n\n%time learn.fit_one_cycle(cyc_len=2, max_lr=5e-4, moms=(0.8,0.7), wd=1e-3)\n\n"
          "Total time: 110:29:25\nepoch\ttrain_loss\tvalid_loss\taccuracy\n1\t2.760716\t2.756633\t0.442434\n"
          "2\t6.228361\t6.220452\t0.076458\n")
"""https://github.com/fastai/fastai/issues/1736 (dev): the table was not read (fastai's column names), so healthy."""


@pytest.mark.parametrize("text", [
    FASTAI,
    "epoch  train_loss  valid_loss  accuracy  time\n0  1.231  1.102  0.61  00:42\n1  3.054  2.981  0.12  00:41\n",
    "{'loss': 1.21, 'learning_rate': 3e-4, 'epoch': 1.0}\n{'loss': 2.93, 'learning_rate': 3e-4, 'epoch': 2.0}\n",
    "| epoch | train_loss | valid_loss | error_rate |\n| 0 | 0.52 | 0.48 | 0.13 |\n| 1 | 0.41 | 0.40 | 0.11 |\n"
    "| 2 | 1.37 | 1.52 | 0.64 |\n",
])
def test_a_whole_epochs_loss_doubling_is_divergence(text: str) -> None:
    assert first_id(text) == "loss_diverging"


@pytest.mark.parametrize("text", [
    "epoch  train_loss  valid_loss  accuracy  time\n0  1.231  1.102  0.61  00:42\n1  0.954  0.981  0.72  00:41\n",
    "epoch  train_loss  valid_loss  accuracy\n1  1.20  1.10  0.61\n2  1.62  1.31  0.55\n",  # up by a third: not doubled
    "{'loss': 1.2, 'epoch': 1.0}\n{'loss': 2.4, 'epoch': 2.0}\n",  # a whole multiple: summed over accumulation
    "{'loss': 0.2, 'epoch': 1.0}\n{'loss': 0.45, 'epoch': 2.0}\n",  # doubled but small
])
def test_an_epoch_that_falls_rises_less_or_by_a_whole_multiple_is_no_jump(text: str) -> None:
    assert first_id(text) != "loss_diverging"


def test_fastais_table_reads_as_logs() -> None:
    from loratui.logic.text_reader.table import text_table

    table = text_table(FASTAI.splitlines())
    assert table is not None
    assert table.entries()[:2] == [(2, {"loss": 2.760716, "epoch": 1.0}),
                                   (2, {"eval_loss": 2.756633, "eval_accuracy": 0.442434, "epoch": 1.0})]


# -- a handful of logs, each above the one before ------------------------------------------------------------------

def dicts(losses: list[float], lrs: list[float] | None = None) -> str:
    lrs = lrs or [2e-4] * len(losses)
    return "\n".join(f"{{'loss': {loss}, 'grad_norm': 1.0, 'learning_rate': {lr}, 'epoch': {0.01 * (i + 1):.2f}}}"
                     for i, (loss, lr) in enumerate(zip(losses, lrs))) + "\n"


@pytest.mark.parametrize("text", [
    dicts([1.50, 1.58, 1.71, 1.86, 2.05]),
    "step 100 | loss 0.812\nstep 200 | loss 0.874\nstep 300 | loss 0.951\nstep 400 | loss 1.043\nstep 500 | loss 1.166\n",
    "Epoch 1: loss=2.31\nEpoch 2: loss=2.45\nEpoch 3: loss=2.67\nEpoch 4: loss=2.90\nEpoch 5: loss=3.21\n",
])
def test_five_logs_each_above_the_last_and_a_third_up_is_a_rise(text: str) -> None:
    """One order in 120 under noise, a third up: a permutation test over 5 logs cannot reach 1% (orders near it score
    as high), so the strict order is read as what it is (before: healthy)."""
    assert first_id(text) == "loss_diverging"


@pytest.mark.parametrize("text", [
    dicts([1.50, 1.55, 1.61, 1.66, 1.72]),  # up 15%: less than a third
    dicts([1.50, 1.71, 1.86, 2.05]),  # four logs: too few
    dicts([1.50, 1.58, 1.71, 1.86, 2.05], [1e-5, 2e-5, 3e-5, 4e-5, 5e-5]),  # the learning rate still warming up
    dicts([1.50, 1.71, 1.58, 1.86, 2.05]),  # out of order once: the permutation test's to judge
])
def test_a_smaller_shorter_warming_or_unordered_rise_is_not_this(text: str) -> None:
    assert first_id(text) != "loss_diverging"


FASTAI_07 = ("m3.fit(lrs, 7, metrics=[accuracy], cycle_len=2, cycle_save_name='imdb2')\n\nOutput:\n\n"
             "epoch trn_loss val_loss accuracy\n" + "".join(
                 f"{i} {t} {v} 0.92\n" for i, (t, v) in enumerate(
                     [(0.465, 0.355), (0.414, 0.326), (0.422, 0.330), (0.405, 0.320), (0.404, 0.333), (0.357, 0.330),
                      (0.416, 0.317), (0.365, 0.315), (0.378, 0.328), (0.367, 0.328), (0.720, 0.759), (0.806, 0.806),
                      (1.050, 1.036)])))
"""The shape of https://forums.fast.ai/t/stability-of-lstm-training-in-lesson-4/10961 (dev): fastai 0.7 names its
columns `trn_loss val_loss` and parts them by single spaces; the table was not read, so nothing was judged."""


def test_fastai_07s_single_spaced_table_is_read() -> None:
    from loratui.logic.text_reader.table import text_table

    table = text_table(FASTAI_07.splitlines())
    assert table is not None and len(table.rows) == 13
    assert table.entries()[-2:] == [(13, {"loss": 1.05, "epoch": 12.0}),
                                    (13, {"eval_loss": 1.036, "eval_accuracy": 0.92, "epoch": 12.0})]
    assert first_id(FASTAI_07) == "loss_diverging"


@pytest.mark.parametrize("text", [
    "epoch loss is what I plot\n1 2 3\n",  # words, not a header: no train-loss column
    "step trn_loss val_loss\nthe loss is fine\n",  # a header with no rows
])
def test_single_spaced_words_are_no_table_without_a_header_and_rows(text: str) -> None:
    from loratui.logic.text_reader.table import text_table

    assert text_table(text.splitlines()) is None
