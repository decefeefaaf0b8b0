"""Issue 23, probe 8: ways of printing and saying a failure that the corpus did not show, each written from the
tool's own format (the tool and version named beside it), not copied from an excerpt."""

from __future__ import annotations

import io

from loratui.commands.doctor import diagnose_stream

NEW_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.38 GiB. GPU 0 has a total capacity of "
           "22.06 GiB of which 2.71 GiB is free. Including non-PyTorch memory, this process has 19.35 GiB memory in "
           "use. Of the allocated memory 18.04 GiB is allocated by PyTorch, and 1.02 GiB is reserved by PyTorch but "
           "unallocated.")


def first_id(text: str) -> str:
    """The id of the doctor's first item for a pasted text ('' when it finds nothing)."""
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


# -- generation is inference ---------------------------------------------------------------------------------


def test_generation_in_a_notebook_cell_is_inference_not_a_training_step() -> None:
    # IPython 8 / Jupyter: `Cell In[21]`, its `---->` arrow calling transformers 4.4x's GenerationMixin.generate
    text = "\n".join([
        "OutOfMemoryError                          Traceback (most recent call last)",
        "Cell In[21], line 4",
        "      3     with torch.no_grad():",
        "----> 4         out = model.generate(**batch, max_new_tokens=512, num_beams=4)",
        "",
        "File /opt/conda/lib/python3.11/site-packages/transformers/generation/utils.py:2298, in "
        "GenerationMixin.generate(self, inputs, generation_config, **kwargs)",
        "",
        NEW_OOM.replace("torch.", "", 1)])
    assert first_id(text) == "oom_at_eval"


def test_generation_in_a_plain_script_is_inference() -> None:
    # CPython's plain traceback of an inference script calling transformers' generate, then its beam search
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/home/u/infer.py", line 31, in <module>',
        "    outputs = model.generate(input_ids, max_new_tokens=1024)",
        '  File "/usr/lib/python3.10/site-packages/transformers/generation/utils.py", line 2024, in generate',
        "    result = self._sample(",
        '  File "/usr/lib/python3.10/site-packages/transformers/generation/utils.py", line 2982, in _sample',
        "    outputs = self(**model_inputs, return_dict=True)",
        NEW_OOM])
    assert first_id(text) == "oom_at_eval"


def test_generation_inside_a_training_step_stays_the_training_step() -> None:
    # TRL 0.14's GRPOTrainer generates its completions inside the training step: a training OOM
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.10/site-packages/transformers/trainer.py", line 3675, in training_step',
        "    inputs = self._prepare_inputs(inputs)",
        '  File "/usr/lib/python3.10/site-packages/trl/trainer/grpo_trainer.py", line 580, in _prepare_inputs',
        "    prompt_completion_ids = unwrapped_model.generate(",
        '  File "/usr/lib/python3.10/site-packages/transformers/generation/utils.py", line 2024, in generate',
        "    result = self._sample(",
        NEW_OOM])
    assert first_id(text) == "oom_full"


# -- a loss printed once an epoch that never moves -------------------------------------------------------------


def _lightning_epochs(losses: list[str]) -> str:
    # Lightning 2.x's bar at each epoch's end: `Epoch 3: 100%|...| 300/300 [...], v_num=0, train_loss=6.910]`
    return "\n".join(f"Epoch {i}: 100%|██████████| 300/300 [01:40<00:00,  2.99it/s, v_num=0, train_loss={loss}]"
                     for i, loss in enumerate(losses))


def _plain_epochs(losses: list[str]) -> str:
    # a plain PyTorch loop printing one line an epoch: `Epoch 3/10, Loss: 3.4521`
    return "\n".join(f"Epoch {i}/10, Loss: {loss}" for i, loss in enumerate(losses, 1))


def test_an_epochs_loss_that_never_moves_is_flat() -> None:
    assert first_id(_lightning_epochs(["6.910"] * 5)) == "loss_flat"
    assert first_id(_plain_epochs(["3.4521"] * 5)) == "loss_flat"
    assert first_id(_plain_epochs(["3.4521", "3.4519", "3.4522", "3.4520", "3.4521"])) == "loss_flat"


def test_epochs_that_learn_are_not_flat() -> None:
    assert first_id(_lightning_epochs(["2.410", "1.870", "1.620", "1.480", "1.400"])) == ""
    assert first_id(_plain_epochs(["3.4521", "3.1010", "2.9012", "2.7730", "2.6801"])) == ""
    # a slow but steady descent, 1% an epoch, is learning too
    assert first_id(_plain_epochs(["3.4521", "3.4180", "3.3822", "3.3511", "3.3170"])) == ""


# -- a short window: the loss climbs after a grad-norm spike ---------------------------------------------------


def _swift(rows: list[tuple[float, float]]) -> str:
    # ms-swift 2.x/3.x's printed dict: its own keys (`acc`, `memory(GiB)`, `global_step/max_steps`) beside the loss
    return "\n".join(f"{{'loss': {loss}, 'acc': 0.6, 'grad_norm': {grad}, 'learning_rate': 0.0001, 'memory(GiB)': 30.1, "
                     f"'train_speed(iter/s)': 0.2, 'epoch': {i / 10}, 'global_step/max_steps': '{i * 100}/1000'}}"
                     for i, (loss, grad) in enumerate(rows, 1))


def test_a_climb_after_a_grad_spike_two_logs_in_is_divergence() -> None:
    assert first_id(_swift([(1.2031, 0.52), (1.1412, 0.61), (1.5530, 9.81), (2.2874, 14.2), (3.1102, 20.5)])) \
        == "loss_diverging"


def test_a_grad_spike_two_logs_in_that_the_loss_shrugs_off_is_healthy() -> None:
    assert first_id(_swift([(1.2031, 0.52), (1.1412, 0.61), (1.1530, 9.81), (1.1274, 1.2), (1.1102, 0.7)])) == ""


# -- no gradient at all, whatever the objective ----------------------------------------------------------------


def _trl(loss: float, grads: list[float], extra: str) -> str:
    # TRL 0.8-0.19's printed dicts: DPOTrainer's `rewards/...` keys, GRPOTrainer's `reward`, `reward_std`, `kl`
    return "\n".join(f"{{'loss': {loss}, 'grad_norm': {g}, 'learning_rate': 5e-07, {extra}, 'epoch': {i / 100}}}"
                     for i, g in enumerate(grads, 1))


DPO_KEYS = "'rewards/chosen': 0.0, 'rewards/rejected': 0.0, 'rewards/accuracies': 0.0, 'rewards/margins': 0.0"
GRPO_KEYS = "'reward': 0.42, 'reward_std': 0.3, 'kl': 0.003"


def test_a_preference_or_rl_run_with_no_gradient_trains_nothing() -> None:
    assert first_id(_trl(0.6931, [0.0] * 5, DPO_KEYS)) == "loss_flat"
    assert first_id(_trl(0.0, [0.0] * 5, GRPO_KEYS)) == "loss_flat"


def test_a_preference_or_rl_run_with_a_gradient_is_judged_by_its_metrics() -> None:
    assert first_id(_trl(0.6931, [5.1, 4.9, 5.3, 5.0, 5.2], DPO_KEYS.replace("'rewards/margins': 0.0",
                                                                             "'rewards/margins': 0.12"))) == ""
    # one step whose completions all scored the same has no gradient: the next ones do
    assert first_id(_trl(0.0, [0.0, 0.41, 0.38, 0.45, 0.40], GRPO_KEYS)) == ""


# -- the Trainer's loss table pasted as HTML -------------------------------------------------------------------


def _html_table(losses: list[str]) -> str:
    # transformers' NotebookProgressCallback (4.2x-4.4x) in Jupyter/Colab, its HTML copied from the output cell
    rows = "\n".join(f"    <tr>\n      <td>{10 * i}</td>\n      <td>{loss}</td>\n    </tr>"
                     for i, loss in enumerate(losses, 1))
    return ("<div>\n  <progress value='50' max='50' style='width:300px; height:20px; vertical-align: middle;'></progress>\n"
            "  [50/50 03:12, Epoch 1/1]\n</div>\n<table border=\"1\" class=\"dataframe\">\n  <thead>\n"
            " <tr style=\"text-align: left;\">\n      <th>Step</th>\n      <th>Training Loss</th>\n    </tr>\n"
            f"  </thead>\n  <tbody>\n{rows}\n  </tbody>\n</table><p>")


def test_a_pasted_html_loss_table_is_read() -> None:
    items, _ = diagnose_stream(io.BytesIO(_html_table(["1.923400", "1.611200", "nan", "nan", "nan"]).encode()),
                               "pasted", guess=False)
    assert items and items[0].id == "nan_loss"
    assert first_id(_html_table(["1.412300", "1.201100", "1.633400", "2.512200", "3.870100", "5.120000"])) \
        == "loss_diverging"
    assert first_id(_html_table(["2.104000", "1.652100", "1.410200", "1.301100", "1.247300"])) == ""


# -- the loss in Japanese prose (kohya-ss/sd-scripts' and many LoRA trainers' users write in it) ------------------


def test_a_loss_said_to_stand_still_in_japanese_is_flat() -> None:
    assert first_id("学習してもlossが全く下がりません。ずっと0.693のままです。") == "loss_flat"
    assert first_id("何エポック回してもlossが下がらない、2.3から変わらない") == "loss_flat"


def test_a_loss_said_to_climb_in_japanese_is_divergence() -> None:
    assert first_id("LoRAの学習中、ステップが進むごとにlossがどんどん上がっていきます。学習率は1e-3です。") \
        == "loss_diverging"
    assert first_id("途中からlossが増えていき、最後は発散しました。") == "loss_diverging"


def test_a_loss_said_to_fall_in_japanese_is_no_problem() -> None:
    assert first_id("lossは順調に下がっています。") == ""
    # 上がったり下がったり: up and down by turns, the swing every minibatch loss shows
    assert first_id("lossが下がったり上がったりしています。") == ""
    assert first_id("lossが上がったり下がったりしますが、全体的には下がっています。") == ""


# -- a CUDA fault named in words --------------------------------------------------------------------------------


def test_a_device_side_assert_named_in_prose_is_a_cuda_error() -> None:
    assert first_id("Training crashes with a device-side assert in the embedding layer after I added new special "
                    "tokens to the tokenizer without resizing the embeddings.") == "cuda_error"


def test_torchs_note_on_device_side_assertions_is_no_fault_of_its_own() -> None:
    # torch 2.1+ prints the note after every CUDA error, an OOM's included
    text = ("RuntimeError: CUDA error: out of memory\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    assert first_id(text) == "oom_full"


# -- the split after the loss's name ------------------------------------------------------------------------------


def test_litgpts_loss_train_column_is_read() -> None:
    # LitGPT 0.4+: `Epoch 1 | iter 10 step 1 | loss train: 2.431, val: n/a | iter time: 512.31 ms (step)`
    from loratui.logic.text_reader import values
    found = values.loss_line("Epoch 1 | iter 10 step 1 | loss train: 2.431, val: n/a | iter time: 512.31 ms (step)")
    assert found is not None and found[1]["loss"] == 2.431
    text = "\n".join(f"Epoch 1 | iter {i * 10} step {i} | loss train: 10.375, val: n/a | iter time: 512.31 ms (step)"
                     for i in range(1, 9))
    assert first_id(text) == "loss_flat"


# -- the loss in Korean prose ---------------------------------------------------------------------------------------


def test_a_loss_said_to_stand_still_or_climb_in_korean() -> None:
    assert first_id("loss가 전혀 줄어들지 않고 2.3에서 그대로입니다.") == "loss_flat"
    assert first_id("학습을 계속해도 loss가 떨어지지 않아요.") == "loss_flat"
    assert first_id("학습 중 loss가 계속 올라갑니다. 0.5에서 시작해서 3까지 올라갔어요.") == "loss_diverging"
    assert first_id("loss가 잘 줄어들고 있습니다.") == ""
    assert first_id("loss가 올라갔다 내려갔다 합니다.") == ""  # up and down by turns: the minibatch's swing


def test_a_device_side_assert_someone_fixed_is_no_fault() -> None:
    assert first_id("I fixed the device-side assert by resizing the token embeddings; training runs fine now.") == ""
