"""A battery of what people write about a loss that does not move and a loss that rises (issue 23), built from the
PATTERN of such reports, not from any corpus excerpt: the subject varied (loss, training loss, train_loss, the
model, accuracy), the verb and its tense, negation, numbers in every form, casing, quoting, English and Chinese;
and the sentences that must stay quiet (a validation loss rising while the training loss falls, a slow fall, a
hypothetical, code and config, an RL objective's metrics, a fall in numbers, a healthy log, a loss flat because
training is done). Each line is read end to end by `loratui doctor`, as a pasted report would be."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loratui.cli import main


def doctor(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    path = tmp_path / "pasted.txt"
    path.write_text(text, encoding="utf-8")
    main(["doctor", str(path), "--json", "--no-guess"])  # the rules alone: the word guess is tests/test_word_guess.py
    return [item["id"] for item in json.loads(capsys.readouterr().out)]


FLAT = [
    # the subject varied, a verb of staying put
    "The loss stays at 2.30 for the whole epoch.",
    "my training loss stayed around 1.9 for 3000 steps",
    "train_loss remains 0.693 from the first step to the last",
    "Training loss remained constant at ~4.6 after the first 50 steps.",
    "the loss is stuck at 10.37",
    "Loss gets stuck around 2 and never moves.",
    "The loss just hovers around 3.5.",
    "Loss hovered at 6.9-7.0 for two days of training",
    "the training loss keeps at 1.1 no matter how long I train",
    "The loss plateaus at 1.45 right after warmup.",
    "Loss plateaued around 0.9 from step 200 on",
    "My loss is always 2.3026, every single iteration.",
    "train loss sits at about 11 the whole time",
    "the loss is flat at 4.2 and eval loss is flat too",
    "Loss stagnates near 3 after epoch 1",
    "loss value does not change during training",
    "The loss doesn't change at all between epochs.",
    "The loss never changes, it prints 0.6931 at every step",
    "the loss did not move from 2.5 after 10 epochs",
    "loss barely moves: 2.31, 2.30, 2.31, 2.30",
    "loss is the same after every epoch",
    "Loss stays the same no matter the learning rate",
    "the loss is constant",
    "loss unchanged after 2000 iterations",
    # a fall denied, in every tense and form
    "Loss not decreasing",
    "Loss Not Decreasing During Fine-Tuning",
    "TRAINING LOSS IS NOT DECREASING",
    "[BUG] loss does not decrease when fine-tuning llama with LoRA",
    "the loss won't go down below 2.0",
    "the loss will not go down",
    "Training loss never drops below 1.8.",
    "why is my loss not going down?",
    "Why doesn't the training loss decrease?",
    "loss didn't decrease at all in 5 epochs",
    "The loss has not decreased since step 100.",
    "the loss hasn't improved in 20 epochs",
    "loss stopped decreasing after epoch 2 and sits at 0.95",
    "loss doesn't go lower than 3.1",
    "the `loss` is not decreasing",
    'my "loss" won\'t drop',
    "Model loss does not reduce",
    "no decrease in training loss after 3 epochs",
    # the model, not the loss
    "The model is not learning anything.",
    "model isn't learning",
    "my model does not converge",
    "The network doesn't seem to learn at all.",
    "Training is not converging with the default config",
    "the model never converges, even on 100 samples",
    "It seems that the model predicts the same thing for every input.",
    "the model outputs the same token for every prompt",
    # accuracy
    "The accuracy stays at 50% the whole time.",
    "val accuracy is stuck at 0.1 (10 classes)",
    "Accuracy doesn't improve beyond 0.25",
    # zero
    "the loss is 0 from the first step",
    "Training loss becomes 0.0 after 100 steps",
    "loss goes to zero after a few iterations and stays there",
    "I got 0 loss with the LoRA adapter",
    "the training loss is always 0.000",
    # more verbs, non-native grammar, the weights and gradients that do not move
    "The loss keeps fluctuating between 2.1 and 2.3 and does not converge.",
    "loss is around 2.3 all the time",
    "the loss value is always 1.0986",
    "losses remain high (around 5) for the whole run",
    "after 10 epochs the loss is still around 2.3",
    "There is no change in the loss.",
    "the loss doesn't seem to be decreasing",
    "the loss refuses to go down",
    "the loss won't budge",
    "Loss is not improving at all.",
    "the loss flatlines at 3",
    "The loss curve is completely flat.",
    "loss saturates at 0.5 and the model outputs garbage",
    "training loss levels off at 3.2 after one epoch",
    "loss keep at 2.3",
    "loss not decrease",
    "the loss can not decrease",
    "loss dosen't decrease",
    "loss no change after 3 epoch",
    "loss always 0.69 , why?",
    "loss is 2.302 2.302 2.302 2.302 every epoch",
    "The model can't learn even a tiny dataset.",
    "model learns nothing",
    "The network is not training at all.",
    "my model is not improving",
    "The weights are not updating.",
    "the parameters don't change after optimizer.step()",
    "grad_norm is always 0.0",
    "the gradients are all zero",
    "the learning rate is always 0, so nothing trains",
    "the model always predicts class 0",
    "predictions are all the same",
    "Accuracy is always 0.5.",
    "acc remains 0.1 for every epoch",
    "val_acc doesn't change",
    "loss一直在2.3左右波动",
    "loss下降不明显",
    "loss几乎没变",
    "loss保持不变",
    "模型学不到东西",
    "准确率一直在50%左右",
    "梯度一直为0",
    "loss变成0了",
    "When I fine-tune with LoRA, the loss stays at 2.3 the whole time.",
    "if I train without bf16, the loss becomes 0 after a few steps",
    # a second round, written before the reader was changed for it
    "Loss is stuck at ~0.69 (i.e. ln 2), the model outputs 0.5 for everything",
    "The loss curve looks like a straight horizontal line.",
    "training loss doesn't budge from 2.302",
    "the loss is not getting any lower",
    "My LoRA adapter doesn't learn anything.",
    "Loss is hovering between 0.68-0.70",
    "loss keeps bouncing between 4 and 5",
    "the loss decreases for the first 100 steps and then flattens out",
    "training loss hardly changes",
    "loss not converged after 100 epochs",
    "training loss = 2.302 forever",
    "the loss remains very high",
    "the model generates the same text regardless of the input",
    "all predictions are 0",
    "It always predicts the majority class.",
    "I trained for 3 epochs without any progress",
    "after I installed peft 0.10 the training shows no progress at all",  # an install named, training too
    "the gradients are None for the LoRA weights",
    "the optimizer doesn't update the weights",
    # VideoMAE (wave 66 dev): the adjective before the noun
    "I have tried different learning rates, but all of them leads to constant losses.",
    "learning rate stays at 0 for the whole run",
    "loss一直在0.69左右徘徊",
    "损失一直降不下来",
    "训练了很久loss还是很高",
    "acc一直上不去",
    "模型不学习",
    "loss曲线很平",
    "loss 为 0",
    # a third round: a fall said to be too small, verbs of shrinking, a request to make it fall
    "the loss only went down from 2.3 to 2.2 in 10 epochs",
    "Training loss decreases only slightly after many epochs.",
    "the loss just goes down a tiny bit",
    "the val loss and train loss only decrease by 0.01 per epoch",
    "the loss doesn't diminish",
    "loss is not declining",
    "loss won't shrink below 3",
    "How can I make the loss converge?",
    "how do I get the loss to go down?",
    "What should I change so that the model converges?",
    "应该如何修改，让loss可以下降呢",
    "怎样才能让模型收敛",
    # a fourth round: joined subjects, a negation as a noun, perplexity, a subject Chinese leaves out
    "the train loss and val loss didnot decrease",
    "the loss and the accuracy do not change",
    "Loss and accuracy stay the same for all epochs.",
    "No convergence at all after 20 epochs.",
    "No progress after 20 epochs, whatever learning rate I try.",
    "there is no learning happening",
    "the accuracy always stays zero",
    "accuracy is 0 for every epoch",
    "The loss converges quickly, but the accuracy stays at 0.",
    "The loss is decreasing but the accuracy is stuck at 50%.",
    "the perplexity stays at 1000",
    "validation perplexity does not decrease",
    "the ppl stays at a very high constant level",
    "一开始loss下降，后来就不降了",
    "loss前几个epoch还在降，之后就一直不动了",
    "损失刚开始下降很快，然后就停在3.2不动了",
    # a fifth round, written from the pattern before the reader was changed for it
    "Loss remains at 6.9 (which is ln(1000)) for all iterations",
    "Training loss stuck around 0.69 for binary classification",
    "the loss does not drop at all, it fluctuates around 1.1",
    "My train loss isn't going down at all",
    "The loss curve just goes flat after step 50",
    "Loss values don't seem to move much",
    "Loss does not go down even after 10k steps",
    "loss won't decrease no matter what lr I use",
    "After 3 epochs, loss is still 4.6, same as initialization",
    "Validation loss and training loss both stagnate",
    "the training loss has been flat since step 200",
    "loss is staying constant at 0.25",
    "the model doesn't seem to be training",
    "model is not converging properly",
    "The network fails to converge.",
    "训练过程中loss几乎没有变化",
    "loss一直在2.0上下浮动，不下降",
    "loss值始终保持在0.693",
    "准确率始终不变",
    # a sixth round, written from the pattern before the reader was changed for it
    "loss is not going down, it is always around 1.38",
    "The training loss has remained at 2.0 for 3 days",
    "loss stay 0.69 all the time",
    "Training loss doesn't decrease anymore after epoch 1",
    "my loss never went below 2.5",
    "The model does not learn: loss = 2.30 every epoch",
    "both losses plateau immediately",
    "the validation loss is stuck at 0.69 and so is the training loss",
    "the loss isn't decreasing as expected",
    "no drop in loss after 10 epochs",
    "the loss keeps the same value",
    "loss数值一直没怎么变",
    "训练loss一直维持在1.0左右，降不下去",
    "为什么loss一直不下降？",
    "模型训练后loss几乎不变",
    "验证集准确率一直是33%",
    # Chinese
    "loss不变",
    "训练时loss一直不降",
    "loss不下降，换了学习率也没用",
    "loss不收敛",
    "loss卡在2.3左右",
    "模型不收敛",
    "准确率一直是0.5",
    "训练loss一直在2.5附近",
    "损失值一直不变",
    "loss降不下去",
    "loss基本不动",
    "loss一直为0",
]

RISE = [
    "the loss increases after epoch 3",
    "Training loss increases over time instead of decreasing.",
    "My loss goes up after 500 steps",
    "The loss went up from 1.2 to 5.6 after resuming.",
    "training loss keeps rising",
    "the train loss keeps going up every epoch",
    "Loss explodes after 2k steps",
    "The loss exploded at step 4100.",
    "loss blows up with lr 1e-3",
    "Loss blew up to 1e6",
    "the loss jumps to 8 and stays there",
    "Loss jumped from 0.9 to 7.5 at step 3000 and never came back.",
    "training diverges after 1k steps",
    "The training diverged with bf16",
    "the loss diverges",
    "Loss is getting worse every epoch",
    "loss gets worse and worse",
    "The loss spikes and never recovers.",
    "the loss climbs back to 10",
    "Loss starts increasing after warmup",
    "LOSS INCREASING INSTEAD OF DECREASING",
    "Why does my training loss go up?",
    "train_loss went from 0.8 to 3.4",
    "the loss increased from 1.9 to 2.6 over the last 200 steps",
    "the loss grows larger and larger",
    "Loss shoots up after 10k iterations",
    "loss上升",
    "loss变大",
    "训练到后面loss爆炸",
    "loss发散了",
    "训练loss越来越大",
    "损失函数不降反升",
    "the loss keeps increasing",
    "loss is increasing",
    "loss become bigger and bigger",
    "the loss getting larger",
    "the loss suddenly jumps to 12",
    "loss becomes very large after 3 epochs",
    "loss skyrockets after 1000 steps",
    "the loss goes through the roof",
    "the loss started to rise again after going down",
    "loss decreases at first, then goes up",
    "loss went back up to 4",
    "the loss rebounds after epoch 10",
    "loss was 0.3, now it's 4.5",
    "loss: 1.2 -> 3.4 -> 8.9",
    "loss突然变大",
    "loss不断增大",
    "loss先降后升",
    "loss突然飙升",
    "训练发散",
    # a second round, written before the reader was changed for it
    "Loss goes up and up",
    "the loss gets higher every epoch",
    "loss increases steadily from 1.1 to 1.9",
    "after resuming from the checkpoint, the loss jumped back up",
    "the loss is trending upward",
    "Loss shoots to 20 after 300 iterations",
    "Loss becomes larger and larger",
    "loss蹭蹭往上涨",
    "loss越训越大",
    "loss不降反增",
    "If I set the learning rate to 1e-3, the loss explodes after 200 steps.",
    "the loss dropped to 70 by epoch 69, but it suddenly jumped to 800,000 in epoch 70",
    "loss回升",
    # a fifth round, written from the pattern before the reader was changed for it
    "Loss suddenly spikes to 10 and never recovers",
    "The loss starts going up after 2 epochs",
    "train loss rises sharply at step 1500",
    "the loss is increasing over epochs",
    "loss goes up instead of down",
    "The loss went crazy after 10k steps",
    "loss keeps growing",
    "Loss climbs steadily from 0.4 to 1.2",
    "model diverges after a few hundred steps",
    "loss值越来越大",
    "训练一段时间后loss突然升高",
    "loss在第3个epoch后开始上升",
    # a sixth round, written from the pattern before the reader was changed for it
    "loss started to blow up after epoch 3",
    "the loss suddenly went from 0.5 to 12",
    "Loss jumps up to 5.0 and doesn't come back down",
    "my training loss keeps increasing after lr warmup",
    "The loss is growing every step",
    "train loss goes up steadily",
    "loss突然从0.3变成了8",
    "训练loss越来越高",
    "loss在warmup之后开始爆炸",
    # a seventh round: instability
    "the training becomes unstable after 2k steps",
    "loss is very unstable with fp16 and then explodes",
    "the loss gets unstable when I raise the learning rate",
    "训练不稳定，loss忽高忽低",
    # a fourth round
    "loss从0.5变成了3.2",
    "loss从2.1涨到5.6",
    "the perplexity explodes to 1e7",
    "Perplexity 2.3e7 after epoch 1",
    "train ppl goes up from 30 to 900",
    "loss suddenly increased twice and the F1 dropped",
    "the loss increases and the accuracy drops",
    "loss went up a lot while mAP fell to 10%",
    "把模型调大了一些，在sft_512上训练竟然发散了",  # minimind#366: an adverb between the training and its divergence
]

HEALTHY = "".join(f"{{'loss': {2.5 * 0.97 ** i:.4f}, 'learning_rate': 0.0002, 'epoch': {i / 100:.2f}}}\n"
                  for i in range(60))

OVERFIT = [
    # a validation loss rising: overfitting, which the threads settle as a fault to act on (the corpus files it as
    # loss_diverging: sagemaker-python-sdk#591, moein-shariatnia/OpenAI-CLIP#9)
    "validation loss increases while training loss decreases",
    "val loss goes up after epoch 5 but the train loss keeps falling: overfitting?",
    "The eval loss rises from 0.9 to 1.3 while train loss goes down to 0.2.",
    "I observed the validation loss increases and never decreases. Is that supposed to happen?",
    "验证集loss一直上升，训练集loss在下降",
    "the train loss goes down but the val loss goes up",
    "eval perplexity increases while train perplexity keeps falling",
    # speech-emotion-recognition#33: a Chinese clause with no subject goes on about the validation loss too
    "train loss是稳定下降，但是再valid loss上，前30个迭代是下降，但是后续就开始上升了。应该是过拟合了吧？",
]

QUIET = [
    "we train with a constant loss scale of 1024",  # fp16's scaler, not a loss that stands
    "the model uses a constant loss weight of 0.5 for the auxiliary head",
    # a validation loss that stays is no overfitting said, and neither is one beside a metric that improves
    "validation loss stays at 0.5 while train loss falls",
    "while the validation loss is increasing after a while, the WER keeps decreasing. Is my model overfitting?",
    "the val loss goes up a little but the accuracy keeps improving",
    "after the validation loss started to rise, PER and WER kept descending.",  # DeepPhonemizer#18
    # a slow fall is a fall
    "the loss decreases slowly",
    "Loss is decreasing, just slower than I expected.",
    # hypotheticals and precautions
    "What if the loss doesn't decrease?",
    "If the loss explodes, lower the learning rate.",
    "how to avoid the loss exploding with fp16",
    "In case the loss is stuck, try a higher learning rate.",
    "Set max_grad_norm so the loss won't blow up.",
    # fixed, or denied
    "the loss is not stuck anymore after I fixed the labels",
    "After lowering the lr the loss no longer explodes.",
    "the loss does not explode, it decreases steadily",
    # code and config
    "    if loss > best_loss: patience += 1",
    "early_stopping: {monitor: val_loss, patience: 3, mode: min}",
    "assert loss.item() != 0, 'loss is 0'",
    "loss = criterion(outputs, labels)  # loss",
    # RL and preference objectives
    "GRPO loss is 0 at the first steps, which is expected",
    "rewards/margins is 0.0 and kl stays at 0",
    "DPO loss stays at 0.693 at the start",
    # a fall in numbers, a healthy log, a loss flat because training is done
    "the loss went down from 2.3 to 0.4",
    "Loss decreased from 1.8 to 0.35 in 3 epochs and the model works well.",
    "the learning rate increases during warmup, then decays",
    "the model converged after 3 epochs",
    "Loss converged to 0.31 and eval accuracy is 92%, training finished.",
    "the model is learning fine",
    "the loss scale increases every 2000 steps",
    "batch size increases the memory",
    "a significant loss of accuracy after quantization",
    "Epoch 00005: val_loss did not improve from 0.45123",
    "Epoch 00007: loss did not improve from 0.31200",
    "Monitored metric val_loss did not improve in the last 3 records. Best score: 0.412. Signaling Trainer to stop.",
    "Epoch 3: val_loss improved from 0.51 to 0.44, saving model",
    "the loss does decrease, but the outputs are garbage",
    "not sure if the loss is decreasing fast enough",
    "the loss converges nicely",
    "the reward keeps increasing",
    "the kl increases, as expected for GRPO",
    # a second round, written before the reader was changed for it
    "Expected behavior: the loss should go down.",
    "I expect the loss to plateau around 1.0",
    "validation accuracy doesn't improve while training accuracy reaches 99%",
    "Accuracy increases to 90%",
    "grad norm increases during the first steps",
    "the model is training, loss is going down",
    "loss: 2.3 -> 1.1 -> 0.6",
    "if your loss is stuck, check the learning rate",
    "Make sure the loss doesn't go to zero",
    "the model learns quickly",
    "we log the training loss every 10 steps",
    "loss_scale: 65536.0",
    "we use the same loss function as the paper",
    "a loss of precision in fp16 stays small",
    # a third round
    "how do I make the loss go down faster?",
    "the loss only spikes at the first step, then decreases smoothly",
    "the loss decreases only after warmup, as expected",
    "How to make the loss converge faster with a larger batch?",
    # a fourth round
    "Perplexity 12.31",
    "the loss decreases and the mAP increases",
    "the loss is going down and so is the perplexity",
    # a fifth round
    "the loss goes up and down a bit but trends downward",
    "loss increased slightly at the start of epoch 2 then kept decreasing",
    "the loss should decrease below 1.0",
    "if the loss plateaus, the scheduler reduces the lr",
    "scheduler = ReduceLROnPlateau(optimizer, monitor='val_loss')",
    "Epoch 5/10 - loss: 0.2314 - accuracy: 0.9123",
    "GRPO reward stays flat at 0.5",
    # a sixth round
    "the loss goes down steadily and the val loss too",
    "loss dropped from 2.0 to 1.2 in the first epoch",
    "I'm worried the loss might explode with fp16",
    "the learning rate is constant",
    "the gradient norm stays around 1.0",
    "Model weights are stored in bf16",
    "loss: 0.4521, accuracy: 0.89",
    "GRPO loss stays near 0, that's normal",
    # healthy runs, in the words of the people who ran them
    "Training went fine, loss decreased to 0.3",
    "I fine-tuned llama with lora; the loss curve looks good",
    "the model trains and the loss goes down, but inference outputs are empty",
    "loss is 1.2 after 3 epochs, is that good?",
    "how long should I train until the loss is stable?",
    "the eval loss is higher than train loss, is that normal?",
    "The loss is around 1.5 at the end of epoch 1, which matches the paper",
    "Loss reached 0.8 at step 1000 as expected",
    "the loss is stable now after lowering the lr",
    "The training loss is higher than the validation loss because of dropout",
    "the loss stays low and the eval accuracy is 95%",
    "| epoch 001 | loss 7.312 | ppl 158.9 | wps 11235 | lr 0.0005 |",
    "epoch 2: loss=2.31, aux_loss=4.80, ppl=10.1",
    "stable training, no issues so far",
    "bf16 makes the training more stable than fp16",
    # the prose of training libraries' own docs and comments (transformers, trl, torch.optim): no report
    "Each model flattens with its own hidden width.",
    "The reference model is a frozen copy of the initial policy.",
    "Aggregates token-level losses by normalizing with a global constant.",
    "Higher values make the model more random and increase diversity.",
    "If 0.0, the reference model is not loaded, reducing memory usage.",
    "The beta of the CPO loss is typically something in the range of 0.1 to 0.5.",
    "Coefficient for the auxiliary z-loss used to control logit growth during training.",
    "The model has been loaded with accelerate and therefore cannot be moved to a specific device.",
    "This was fixed in v5, so the model name stays as it was.",
    "If True, outputs keep the same dictionary shape.",
    "The OLMo2 model is identical to the OLMo model, except RMSNorm is used.",
    "Their corresponding output values are zeroed out.",
    "patience: the number of allowed epochs with no improvement after which training stops",
    "Unscorable completions carry no learning signal.",
    # a run that does not advance, over wall time: a hang, not a loss that stands still (a tmux trial)
    "GPU utilisation is 100% on both but no progress for an hour.",
    "it hangs at the very start.\nGPU utilisation is 100% on both but no progress for an hour.",
    "The job has shown no progress in 30 minutes, the bar sits at 0/500.",
    # a build or an install that makes no progress (omniparse's flash-attn wheel, wave 50)
    "it still gets stuck at 'Building wheel for flash-attn (setup.py)' without any progress",
    "pip install deepspeed hangs with no progress",
    HEALTHY,
]


@pytest.mark.parametrize("text", FLAT)
def test_a_loss_that_does_not_move_is_flat(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = doctor(text + "\n", tmp_path, capsys)
    assert ids and ids[0] in ("loss_flat", "loss_zero"), ids


@pytest.mark.parametrize("text", RISE)
def test_a_loss_that_rises_is_divergence(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = doctor(text + "\n", tmp_path, capsys)
    assert ids and ids[0] == "loss_diverging", ids


@pytest.mark.parametrize("text", OVERFIT)
def test_a_validation_loss_said_to_rise_is_overfitting(text: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pasted.txt"
    path.write_text(text + "\n", encoding="utf-8")
    main(["doctor", str(path), "--json", "--no-guess"])
    items = json.loads(capsys.readouterr().out)
    assert items and items[0]["id"] == "loss_diverging" and "overfitting" in items[0]["title"], items
    assert "learning rate" not in items[0]["title"]  # not the training loss's divergence advice


@pytest.mark.parametrize("text", QUIET)
def test_what_is_neither_stays_quiet(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = doctor(text + "\n", tmp_path, capsys)
    assert not {"loss_flat", "loss_zero", "loss_diverging"} & set(ids), ids


# -- the words against the printed losses ---------------------------------------------------------------------------


def _logs(losses: list[float]) -> str:
    return "".join(f"{{'loss': {v:.4f}, 'learning_rate': 0.0002, 'epoch': {i / 100:.2f}}}\n"
                   for i, v in enumerate(losses))


FALLING = [2.5 * 0.97 ** i + 0.02 * (i % 3) for i in range(60)]
"""A loss that falls to the end of the paste, with some noise: 2.5 -> 0.4."""
FELL_THEN_STOOD = [max(1.9, 2.5 * 0.97 ** i) + 0.01 * (i % 3) for i in range(60)]
"""A loss that fell during its first logs and then stood at 1.9 for the second half."""


@pytest.mark.parametrize("words", ["the loss is not decreasing\n", "Loss stuck at 1.9\n", "the loss increases\n"])
def test_losses_printed_falling_to_the_end_outweigh_words(words: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A maintainer shown a loss falling from 2.5 to 0.4 to the last log answers "it is decreasing": the words
    (about another run, another loss, or what the person expected) do not make it flat or rising."""
    ids = doctor(words + _logs(FALLING), tmp_path, capsys)
    assert not {"loss_flat", "loss_diverging"} & set(ids), ids


@pytest.mark.parametrize("words, expected", [("the loss is not decreasing\n", "loss_flat"),
                                             ("Loss stuck at 1.9\n", "loss_flat"),
                                             ("the loss increases\n", "loss_diverging")])
def test_words_stand_where_the_printed_losses_stopped_falling(words: str, expected: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A loss that fell during warm-up and then stood still: the words say what the numbers cannot yet."""
    ids = doctor(words + _logs(FELL_THEN_STOOD), tmp_path, capsys)
    assert ids and ids[0] == expected, ids


# -- the reader's rules, one by one ---------------------------------------------------------------------------------

from loratui.logic.advisor import loss_words  # noqa: E402


@pytest.mark.parametrize("line, kind", [
    ("the loss does not seem to be decreasing", "flat"),  # a negation binds the verb up to four words after it
    ("the reference model is not loaded, reducing memory", "quiet"),  # not past a comma: a fall, no report
    ("if the loss explodes, lower the learning rate", "quiet"),  # the subject inside the supposing clause
    ("if I train without bf16, the loss becomes 0", "zero"),  # the main clause after it: a report
    ("the train loss and val loss didnot decrease", "flat"),  # joined subjects share one predicate
    ("一开始loss下降，后来就不降了", "flat"),  # a Chinese clause with no subject goes on about the last one
    ("the loss decreases at first, then goes up", "rise"),  # the last thing said of a subject is where it went
    ("val loss goes up while train loss goes down", "overfit"),  # the training loss falls: overfitting
    ("the loss increases and never decreases", "rise"),  # the fall denied is the rise going on
    ("the loss converges quickly but the accuracy stays at 0", "flat"),  # a falling loss leaves the accuracy
    ("the loss only went down from 0.7 to 0.6", "flat"),  # a fall said to be too small
    ("the loss was about 100, dropped to 70, but it suddenly became 800,000", "rise"),  # values across clauses
    ("Your loss is probably exploding", "quiet"),  # a hedge
])
def test_the_readers_rules(line: str, kind: str | None) -> None:
    said = loss_words.read(line)
    assert (said.kind if said is not None else None) == kind, said
