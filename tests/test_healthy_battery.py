"""Issue 23: healthy text stays healthy. A battery of the output working runs print, built from the patterns of
many tools (HF Trainer dicts and bars, TRL, Unsloth, LLaMA-Factory, axolotl, Lightning, Keras, fairseq, MMEngine,
DeepSpeed, accelerate), finished runs' summaries, and the harmless warnings they print along the way
(gradient checkpointing's use_cache, padding, deprecations, newly initialised heads, DDP's unused parameters, an
old kernel), and a person asking how to do something with such a log pasted: no rule of any category may give an
error or a warning, nor put data starvation first."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def judged(text: str) -> list[tuple[str, str]]:
    """What doctor would lead with that makes the text unhealthy (empty when it reads as healthy)."""
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    bad = [(a.id, a.severity) for a in items if a.severity in ("error", "warning")]
    return bad or ([(items[0].id, items[0].severity)] if items and items[0].id == "data_starved" else [])


def hf_dicts(n: int = 12, start: float = 2.4, drop: float = 0.09, noise: bool = True) -> list[str]:
    """HF Trainer's logged dicts: a loss falling with some noise, the lr decaying after warm-up."""
    rows = []
    for i in range(1, n + 1):
        loss = start - drop * i + (0.04 if noise and i % 3 == 0 else 0.0)
        rows.append(f"{{'loss': {loss:.4f}, 'grad_norm': {1.8 - 0.05 * i:.3f}, 'learning_rate': "
                    f"{2e-4 * min(1, i / 3) * (1 - i / (n + 2)):.3e}, 'epoch': {i / n * 3:.2f}}}")
    return rows


def bar(done: int, total: int, rate: str = "1.92it/s", spent: str = "03:12", left: str = "10:41") -> str:
    share = done * 100 // total
    return f"{share:3d}%|{'█' * (share // 10):<10}| {done}/{total} [{spent}<{left}, {rate}]"


HF_TRAINER = "\n".join([
    "***** Running training *****",
    "  Num examples = 12,480",
    "  Num Epochs = 3",
    "  Instantaneous batch size per device = 4",
    "  Total train batch size (w. parallel, distributed & accumulation) = 16",
    "  Gradient Accumulation steps = 4",
    "  Total optimization steps = 2,340",
    "  Number of trainable parameters = 4,194,304",
    bar(1, 2340, "3.10s/it", "00:03", "2:01:00"),
    *hf_dicts(),
    bar(2340, 2340, "1.92it/s", "20:18", "00:00"),
    "{'train_runtime': 1218.4, 'train_samples_per_second': 30.72, 'train_steps_per_second': 1.92, "
    "'train_loss': 1.6123, 'epoch': 3.0}",
    "TrainOutput(global_step=2340, training_loss=1.6123, metrics={'train_runtime': 1218.4, "
    "'train_samples_per_second': 30.72, 'train_steps_per_second': 1.92, 'total_flos': 1.2e+17, 'train_loss': 1.6123, "
    "'epoch': 3.0})",
])
HARMLESS_WARNINGS = "\n".join([
    "`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.",
    "/opt/conda/lib/python3.10/site-packages/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: the "
    "use_reentrant parameter should be passed explicitly. In version 2.4 we will raise an exception if use_reentrant "
    "is not passed. use_reentrant=False is recommended, but if you need to preserve the current default behavior, "
    "you can pass use_reentrant=True.",
    "  warnings.warn(",
    "A decoder-only architecture is being used, but right-padding was detected! For correct generation results, "
    "please set `padding_side='left'` when initializing the tokenizer.",
    "Special tokens have been added in the vocabulary, make sure the associated word embeddings are fine-tuned or "
    "trained.",
    "/usr/local/lib/python3.11/site-packages/torch/cuda/amp/grad_scaler.py:120: FutureWarning: "
    "`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use `torch.amp.GradScaler('cuda', args...)` instead.",
    "Some weights of RobertaForSequenceClassification were not initialized from the model checkpoint at roberta-base "
    "and are newly initialized: ['classifier.dense.bias', 'classifier.dense.weight', 'classifier.out_proj.bias', "
    "'classifier.out_proj.weight']",
    "You should probably TRAIN this model on a down-stream task to be able to use it for predictions and inference.",
    "Token indices sequence length is longer than the specified maximum sequence length for this model (1412 > "
    "1024). Running this sequence through the model will result in indexing errors",
    "Detected kernel version 5.4.0, which is below the recommended minimum of 5.5.0; this can cause the process to "
    "hang. It is recommended to upgrade the kernel to the minimum version or higher.",
    "[rank0]:[W reducer.cpp:1389] Warning: find_unused_parameters=True was specified in DDP constructor, but did "
    "not find any unused parameters in the forward pass. This flag results in an extra traversal of the autograd "
    "graph every iteration, which can adversely affect performance.",
    "The attention mask and the pad token id were not set. As a consequence, you may observe unexpected behavior. "
    "Please pass your input's `attention_mask` to obtain reliable results.",
    "Setting `pad_token_id` to `eos_token_id`:2 for open-end generation.",
    "max_steps is given, it will override any value given in num_train_epochs",
    "Could not estimate the number of tokens of the input, floating-point operations will not be computed",
    "We detected that you are passing `past_key_values` as a tuple of tuples. This is deprecated and will be removed "
    "in v4.47. Please convert your cache or use an appropriate `Cache` class",
    "trainable params: 4,194,304 || all params: 6,742,609,920 || trainable%: 0.0622",
    "Loading checkpoint shards: 100%|██████████| 4/4 [00:05<00:00,  1.30s/it]",
    *hf_dicts(8),
])
UNSLOTH = "\n".join([
    "==((====))==  Unsloth 2024.9.post4: Fast Llama patching. Transformers = 4.44.2.",
    "   \\\\   /|    GPU: Tesla T4. Max memory: 14.748 GB. Platform = Linux.",
    "O^O/ \\_/ \\    Pytorch: 2.4.0+cu121. CUDA = 7.5. CUDA Toolkit = 12.1.",
    "\\        /    Bfloat16 = FALSE. FA [Xformers = 0.0.27.post2. FA2 = False]",
    ' "-____-"     Free Apache license: http://github.com/unslothai/unsloth',
    "Unsloth: Fast downloading is enabled - ignore downloading bars which are red colored!",
    "==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 1",
    "   \\\\   /|    Num examples = 51,760 | Num Epochs = 1",
    "O^O/ \\_/ \\    Batch size per device = 2 | Gradient Accumulation steps = 4",
    "\\        /    Total batch size = 8 | Total steps = 60",
    ' "-____-"     Number of trainable parameters = 41,943,040',
    "Step\tTraining Loss",
    *[f"{i}\t{1.85 - 0.018 * i + (0.05 if i % 4 == 0 else 0):.6f}" for i in range(1, 61)],
])
LLAMA_FACTORY = "\n".join([
    "[INFO|trainer.py:2134] 2024-06-10 12:00:01,222 >> ***** Running training *****",
    *[f"{{'loss': {1.92 - 0.07 * i:.4f}, 'grad_norm': 0.81, 'learning_rate': 4.9e-05, 'epoch': {0.3 * i:.2f}, "
      f"'num_input_tokens_seen': {81920 * i}}}" for i in range(1, 10)],
    "***** train metrics *****",
    "  epoch                    =        3.0",
    "  num_input_tokens_seen    =    2211840",
    "  total_flos               =  8534219GF",
    "  train_loss               =     1.5213",
    "  train_runtime            = 0:21:33.41",
    "  train_samples_per_second =     11.602",
    "  train_steps_per_second   =      0.725",
    "Figure saved at: saves/llama3-8b/lora/sft/training_loss.png",
    "[WARNING|ploting.py:89] 2024-06-10 12:21:35,111 >> No metric eval_loss to plot.",
])
LIGHTNING = "\n".join([
    "GPU available: True (cuda), used: True",
    "TPU available: False, using: 0 TPU cores",
    "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]",
    "  | Name  | Type             | Params",
    "-------------------------------------------",
    "0 | model | GPT2LMHeadModel  | 124 M",
    "-------------------------------------------",
    *[f"Epoch {e}: 100%|██████████| 500/500 [01:10<00:00,  7.10it/s, v_num=0, train_loss={0.9 - 0.15 * e:.3f}, "
      f"val_loss={0.95 - 0.14 * e:.3f}]" for e in range(4)],
    "`Trainer.fit` stopped: `max_epochs=4` reached.",
])
KERAS = "\n".join(["Epoch 1/5"] + [
    f"391/391 [==============================] - 18s 45ms/step - loss: {1.6 - 0.25 * e:.4f} - accuracy: "
    f"{0.42 + 0.09 * e:.4f} - val_loss: {1.45 - 0.2 * e:.4f} - val_accuracy: {0.48 + 0.07 * e:.4f}"
    + (f"\nEpoch {e + 2}/5" if e < 4 else "") for e in range(5)])
MMENGINE = "\n".join(
    f"2024/03/01 10:{i:02d}:00 - mmengine - INFO - Epoch(train)  [1][{i * 50:4d}/1000]  lr: 1.0000e-02  eta: "
    f"0:{40 - i}:00  time: 0.4120  data_time: 0.0081  memory: 9120  loss: {2.3 - 0.08 * i:.4f}  loss_cls: "
    f"{1.1 - 0.04 * i:.4f}" for i in range(1, 12))
AXOLOTL = "\n".join([
    "[2024-05-02 09:00:01,000] [INFO] [axolotl.load_model:734] [PID:1234] [RANK:0] GPU memory usage after model "
    "load: 4.512GB (+0.112GB cache, +0.910GB misc)",
    "[2024-05-02 09:00:05,000] [INFO] [axolotl.train.train:173] [PID:1234] [RANK:0] Starting trainer...",
    *hf_dicts(10, 1.4, 0.05),
    "[2024-05-02 10:10:05,000] [INFO] [axolotl.train.train:190] [PID:1234] [RANK:0] Training Completed!!! Saving "
    "pre-trained model to ./outputs/lora-out",
])
DEEPSPEED = "\n".join([
    "[2024-04-01 10:00:00,000] [INFO] [config.py:1000:print] DeepSpeedEngine configuration:",
    "[2024-04-01 10:00:00,000] [INFO] [config.py:1004:print]   zero_optimization_stage ...... 2",
    "[2024-04-01 10:00:00,000] [INFO] [config.py:1004:print]   train_micro_batch_size_per_gpu  4",
    *[f"[2024-04-01 10:{i:02d}:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step={i * 10}, skipped=0, "
      f"lr=[0.0001], mom=[(0.9, 0.999)]" for i in range(1, 5)],
    *[f"[2024-04-01 10:{i:02d}:00,000] [INFO] [timer.py:260:stop] epoch=0/micro_step={i * 40}/global_step={i * 10}, "
      f"RunningAvgSamplesPerSec=41.2, CurrSamplesPerSec=41.6, MemAllocated=11.2GB, MaxMemAllocated=17.9GB"
      for i in range(1, 5)],
    *hf_dicts(6),
])
TRL_DPO = "\n".join(
    f"{{'loss': {0.6931 - 0.04 * i:.4f}, 'grad_norm': 12.1, 'learning_rate': 5e-07, 'rewards/chosen': {0.02 * i:.3f}, "
    f"'rewards/rejected': {-0.03 * i:.3f}, 'rewards/accuracies': {0.5 + 0.04 * i:.3f}, 'rewards/margins': "
    f"{0.05 * i:.3f}, 'logps/rejected': -210.3, 'logps/chosen': -190.2, 'epoch': {0.1 * i:.2f}}}" for i in range(1, 9))
FAIRSEQ_EPOCHS = "\n".join(
    f"2021-05-01 10:{i:02d}:00 | INFO | train | epoch {i:03d} | loss {6.9 - 0.4 * i:.3f} | nll_loss "
    f"{5.8 - 0.35 * i:.3f} | ppl {2 ** (5.8 - 0.35 * i):.2f} | wps 25112 | ups 7.1 | wpb 3534 | bsz 126 | "
    f"num_updates {i * 1100} | lr 0.0005 | gnorm 0.61 | train_wall 154 | gb_free 9.3 | wall {i * 160}"
    for i in range(1, 8))
QUESTION = "\n".join([
    "Training finished fine. How do I merge the LoRA adapter into the base model and push it to the hub?",
    "Here is my log:",
    *hf_dicts(6),
    "{'train_runtime': 612.1, 'train_samples_per_second': 6.5, 'train_steps_per_second': 0.41, 'train_loss': 1.91, "
    "'epoch': 1.0}",
])
QUESTION_WORKERS = "\n".join([
    "Everything runs fine; does dataloader_num_workers matter for QLoRA? Here is my config and the log:",
    "dataloader_num_workers: 4",
    "dataloader_pin_memory: true",
    *hf_dicts(8),
])
ACCELERATE = "\n".join([
    "The following values were not passed to `accelerate launch` and had defaults used instead:",
    "\t`--num_processes` was set to a value of `2`",
    "\t`--mixed_precision` was set to a value of `'no'`",
    "To avoid this warning pass in values for each of the problematic parameters or run `accelerate config`.",
    *[f"epoch {e}: loss {0.98 - 0.11 * e:.4f}, eval accuracy {0.71 + 0.04 * e:.3f}" for e in range(6)],
])
EVAL_SLOWER = "\n".join([
    *hf_dicts(6),
    bar(40, 40, "3.05s/it", "02:02", "00:00"),
    "{'eval_loss': 1.74, 'eval_runtime': 122.1, 'eval_samples_per_second': 2.61, 'eval_steps_per_second': 0.33, "
    "'epoch': 1.0}",
    *hf_dicts(6, 1.8, 0.03),
])
NVIDIA_SMI_BUSY = "\n".join([
    "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |",
    "|   0  NVIDIA A100-SXM4-80GB          On  |   00000000:07:00.0 Off |                    0 |",
    "| N/A   62C    P0            372W /  400W |   61234MiB /  81920MiB |     97%      Default |",
    "|   1  NVIDIA A100-SXM4-80GB          On  |   00000000:0B:00.0 Off |                    0 |",
    "| N/A   60C    P0            365W /  400W |   61210MiB /  81920MiB |     99%      Default |",
    *hf_dicts(6),
])

BATTERY = {
    "hf_trainer": HF_TRAINER, "harmless_warnings": HARMLESS_WARNINGS, "unsloth": UNSLOTH,
    "llama_factory": LLAMA_FACTORY, "lightning": LIGHTNING, "keras": KERAS, "mmengine": MMENGINE, "axolotl": AXOLOTL,
    "deepspeed": DEEPSPEED, "trl_dpo": TRL_DPO, "fairseq": FAIRSEQ_EPOCHS, "question": QUESTION,
    "question_workers": QUESTION_WORKERS, "accelerate": ACCELERATE, "eval_slower": EVAL_SLOWER,
    "nvidia_smi_busy": NVIDIA_SMI_BUSY,
}


@pytest.mark.parametrize("name", sorted(BATTERY))
def test_healthy_output_reads_healthy(name: str) -> None:
    assert judged(BATTERY[name]) == []


HARMLESS_LINES = [line for line in HARMLESS_WARNINGS.splitlines() if not line.startswith("{")]


@pytest.mark.parametrize("line", HARMLESS_LINES)
def test_each_harmless_warning_alone_reads_healthy(line: str) -> None:
    assert judged(line) == []


# -- noise a working run prints: libraries' notes, launchers, TensorFlow in Colab -------------------------------

NOISE = [
    "huggingface/tokenizers: The current process just got forked, after parallelism has already been used. Disabling "
    "parallelism to avoid deadlocks...",
    "To disable this warning, you can either:\n\t- Avoid using `tokenizers` before the fork if possible\n\t- "
    "Explicitly set the environment variable TOKENIZERS_PARALLELISM=(true | false)",
    "wandb: Network error (ReadTimeout), entering retry loop.",
    "Some weights of the model checkpoint at bert-base-uncased were not used when initializing BertModel: "
    "['cls.predictions.bias', 'cls.seq_relationship.weight']\n- This IS expected if you are initializing BertModel "
    "from the checkpoint of a model trained on another task or with another architecture.",
    "UserWarning: To copy construct from a tensor, it is recommended to use sourceTensor.clone().detach() or "
    "sourceTensor.clone().detach().requires_grad_(True), rather than torch.tensor(sourceTensor).",
    "The `load_in_4bit` and `load_in_8bit` arguments are deprecated and will be removed in the future versions. "
    "Please, pass a `BitsAndBytesConfig` object in `quantization_config` argument instead.",
    "You are using the default legacy behaviour of the <class 'transformers.models.llama.tokenization_llama."
    "LlamaTokenizer'>. This is expected, and simply means that the `legacy` (previous) behavior will be used so "
    "nothing changes for you.",
    "You are attempting to use Flash Attention 2.0 with a model not initialized on GPU. Make sure to move the model "
    "to GPU after initializing it on CPU with `model.to('cuda')`.",
    "NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\nNCCL INFO comm 0x55d1c3a0 rank 0 nranks 2 cudaDev 0 busId 7000 - "
    "Init COMPLETE",
    "[W ProcessGroupNCCL.cpp:1856] Warning: NCCL_BLOCKING_WAIT is deprecated and will be removed in a future "
    "release. Use TORCH_NCCL_BLOCKING_WAIT instead (function operator())",
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being "
    "overloaded, please further tune the variable for optimal performance in your application as needed.",
    "`torch_dtype` is deprecated! Use `dtype` instead!",
    "[2024-04-01 10:00:00,000] [INFO] [real_accelerator.py:203:get_accelerator] Setting ds_accelerator to cuda "
    "(auto detect)",
    "E0000 00:00:1718000000.000000    1234 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to "
    "register factory for plugin cuDNN when one has already been registered",
    "E0000 00:00:1718000000.000000    1234 cuda_blas.cc:1418] Unable to register cuBLAS factory: Attempting to "
    "register factory for plugin cuBLAS when one has already been registered",
    "2024-06-10 12:00:00.000000: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Could not "
    "find TensorRT",
    "I tensorflow/core/util/port.cc:113] oneDNN custom operations are on. You may see slightly different numerical "
    "results due to floating-point round-off errors from different computation orders.",
    "I0000 00:00:1718000000.000000 1234 cuda_executor.cc:1015] successful NUMA node read from SysFS had negative "
    "value (-1), but there must be at least one NUMA node, so returning NUMA node zero.",
    "UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you "
    "should call them in the opposite order: `optimizer.step()` before `lr_scheduler.step()`.  Failure to do this "
    "will result in PyTorch skipping the first value of the learning rate schedule.",
    "WARNING:tensorflow:It seems that global step (tf.train.get_global_step) has not been increased. Current value "
    "(could be stable): 1200 vs previous value: 1200. You could increase the global step by passing "
    "tf.train.get_global_step() to Optimizer.apply_gradients or Optimizer.minimize.",
    "torch._dynamo hit config.cache_size_limit (8)\n   function: 'forward' (modeling_llama.py:301)\n   last reason: "
    "L['self'].layer_idx == 3. To log all recompilation reasons, use TORCH_LOGS=\"recompiles\".",
]


@pytest.mark.parametrize("text", NOISE)
def test_a_libraries_note_alone_reads_healthy(text: str) -> None:
    assert judged(text) == []


@pytest.mark.parametrize("text", NOISE)
def test_a_libraries_note_inside_a_training_log_reads_healthy(text: str) -> None:
    rows = hf_dicts(10)
    assert judged("\n".join(rows[:5] + [text] + rows[5:])) == []


# -- what worries people in a healthy run ------------------------------------------------------------------------

EPOCH_DROP = "\n".join(  # the loss steps down at each epoch boundary, the data is seen again
    f"{{'loss': {1.30 - 0.004 * (i % 10) - 0.35 * (i // 10):.4f}, 'learning_rate': 1e-05, 'epoch': {i / 10:.1f}}}"
    for i in range(1, 30))
SPIKY = "\n".join(  # noisy, single-sample batches, falling on average
    f"step {i * 50}: loss {1.9 - 0.03 * i + (0.6 if i % 5 == 0 else -0.1 if i % 2 else 0.1):.4f}" for i in range(1, 31))
NEGATIVE_NLL = "\n".join(f"Epoch 0 iter {i * 100}: loss {0.4 - 0.09 * i:.4f}" for i in range(1, 12))
SLOWING = "\n".join(f"Epoch {e}/500\n32/32 [==============================] - 0s 2ms/step - loss: "
                    f"{0.09 + 0.4 / e:.4f} - val_loss: {0.12 + 0.45 / e:.4f}" for e in range(2, 60, 3))
LOW_LATE = "\n".join(f"{{'loss': {0.041 - 0.0004 * i:.4f}, 'grad_norm': 0.21, 'learning_rate': 1.2e-05, "
                     f"'epoch': {1.25 + 0.02 * i:.2f}}}" for i in range(10))
NULL_LAST = "\n".join([
    *[f'{{"current_steps": {i * 10}, "total_steps": 100, "loss": {2.2 - 0.12 * i:.4f}, "learning_rate": 1e-05, '
      f'"epoch": {i * 0.3:.1f}, "percentage": {i * 10}.0, "elapsed_time": "0:{i:02d}:00", "remaining_time": '
      f'"0:{10 - i:02d}:00"}}' for i in range(1, 10)],
    '{"current_steps": 100, "total_steps": 100, "loss": null, "learning_rate": null, "epoch": 3.0, "percentage": '
    '100.0, "elapsed_time": "0:10:00", "remaining_time": "0:00:00"}',
])
FP16_FIRST = "\n".join([
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 16384.0",
    *hf_dicts(10),
])
WORRIES = {"epoch_drop": EPOCH_DROP, "spiky": SPIKY, "negative_nll": NEGATIVE_NLL, "slowing": SLOWING,
           "low_late": LOW_LATE, "null_last": NULL_LAST, "fp16_first": FP16_FIRST}


@pytest.mark.parametrize("name", sorted(WORRIES))
def test_what_worries_people_in_a_healthy_run(name: str) -> None:
    assert judged(WORRIES[name]) == []


# -- words and numbers near data starvation, in a run that is fed fine ---------------------------------------------

FED = {
    "busy_util": "GPU utilization ~98%, 2.1 it/s, everything looks good.\n" + "\n".join(hf_dicts(8)),
    "config_dump": "\n".join(["dataloader_num_workers: 0", "preprocessing_num_workers: 16", "dataloader_pin_memory: true",
                              "streaming: false", *hf_dicts(8)]),
    "fast_tokenizer_bar": "Running tokenizer on dataset (num_proc=16): 100%|██████████| 52002/52002 [00:35<00:00, "
                          "1480.11 examples/s]\n" + "\n".join(hf_dicts(8)),
    "fast_maps": "\n".join([
        "Generating train split: 100%|██████████| 9846/9846 [00:00<00:00, 41234.12 examples/s]",
        "Map: 100%|██████████| 9846/9846 [00:03<00:00, 2910.55 examples/s]",
        "Filter: 100%|██████████| 9846/9846 [00:01<00:00, 8120.10 examples/s]",
        "Resolving data files: 100%|██████████| 18/18 [00:00<00:00, 512.33it/s]", *hf_dicts(8)]),
    "small_loader_profile": "\n".join([
        "| Action                                        | Mean duration (s) | Num calls | Total time (s) | "
        "Percentage % |",
        "| Total                                         | -                 | 3120      | 720.1          | 100 %        |",
        "| run_training_batch                            | 0.61              | 1000      | 610.2          | 84.740       |",
        "| [_TrainingEpochLoop].train_dataloader_next    | 0.03              | 1000      | 30.1           | 4.180        |"]),
    "steady_bar_with_eval": "\n".join(
        [bar(i * 50, 1000, "2.41it/s", f"0{i // 3}:{i * 20 % 60:02d}", "05:00") for i in range(1, 10)]
        + ["{'eval_loss': 1.61, 'eval_runtime': 31.2, 'epoch': 1.0}"]
        + [bar(i * 50, 1000, "2.39it/s", f"0{i // 3}:{i * 20 % 60:02d}", "03:00") for i in range(10, 19)]),
    "quick_loader_words": "Data loading takes 0.01 s per batch, the GPU is at 99% the whole time.",
    "question_streaming": "How do I use streaming=True with the SFTTrainer? My run is fine, I just want to save disk.",
    "user_timers_quick": "\n".join(f"step {i}: data 0.004s, fwd 0.110s, bwd 0.205s" for i in range(1, 6)),
    "dmon_busy": "\n".join(
        ["# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec   mclk   pclk",
         "# Idx      W      C      C      %      %      %      %    MHz    MHz"]
        + [f"    0    {300 + sm}     61      -    {sm:3d}     {sm // 3:2d}      0      0   1593   1410"
           for sm in (97, 99, 94, 100, 96, 98, 91, 99)]),
}


@pytest.mark.parametrize("name", sorted(FED))
def test_a_run_fed_fine_reads_healthy(name: str) -> None:
    assert judged(FED[name]) == []


# -- words the starvation readers look for, in healthy output ------------------------------------------------------

STARVE_WORDS = {
    "deepspeed_timers": "\n".join(
        f"[2024-04-01 10:{i:02d}:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | fwd: 120.3{i} | "
        f"bwd: 240.1{i} | bwd_inner: 230.2 | bwd_allreduce: 9.8 | step: 30.2{i}" for i in range(1, 6)),
    "store_barrier": "[INFO] Waiting in store based barrier to initialize process group for rank: 0, key: "
                     "store_based_barrier_key:1 (world_size=2, worker_count=1, timeout=0:30:00)\n" + "\n".join(hf_dicts(6)),
    "persistent_workers": "The dataloader workers are reused across epochs with persistent_workers=True.\n"
                          + "\n".join(hf_dicts(6)),
    "lightning_limits": "`Trainer(limit_train_batches=1.0)` was configured so 100% of the batches per epoch will be "
                        "used..\n" + "\n".join(hf_dicts(6)),
    "eval_every_n": "Every 500 steps the run pauses for evaluation, which takes about 2 minutes.\n" + "\n".join(hf_dicts(6)),
    "save_every_n": "After every epoch training stalls for a minute while the checkpoint is written.\n"
                    + "\n".join(hf_dicts(6)),
    "dataset_shards": "Loading dataset shards: 100%|██████████| 18/18 [00:12<00:00,  1.46it/s]\n" + "\n".join(hf_dicts(6)),
    "keras_eta": "\n".join(["Epoch 1/10"] + [f" {i * 50}/391 [===>..........................] - ETA: 1:0{i} - loss: "
                                              f"{1.9 - 0.1 * i:.4f}" for i in range(1, 6)]),
    "cpu_offload_busy_gpu": "offload_optimizer:\n  device: cpu\nGPU utilization 95-100% throughout, CPU at 100% "
                            "during the optimizer step.\n" + "\n".join(hf_dicts(6)),
}


@pytest.mark.parametrize("name", sorted(STARVE_WORDS))
def test_starvation_words_in_a_healthy_run(name: str) -> None:
    assert judged(STARVE_WORDS[name]) == []
