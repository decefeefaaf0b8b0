"""Issue 23: a battery of OOM texts built from the PATTERNS people paste, not from any one excerpt: the message of
every PyTorch era and of other frameworks, with the kind its numbers imply; the person's words about what holds
the card; and the phase, from any frame, banner or bar, crossed with messages of every era (the phase must not
depend on how the message is worded). Negatives: healthy text, an evaluation or a save that finished before a
training step's OOM, evaluation named only in a config dump.

Every number, model and path here is made up from the pattern; none is copied from a corpus excerpt.
"""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic import oom


def first_id(text: str) -> str:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


def ids(text: str) -> list[str]:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return [item.id for item in items]


# -- the message of every era, and the kind its numbers imply -------------------------------------------

def v04(req: str, total: str, alloc: str, free: str, cached: str) -> str:
    """PyTorch 0.4-1.3: the cache as `N cached`."""
    return (f"RuntimeError: CUDA out of memory. Tried to allocate {req} (GPU 0; {total} total capacity; {alloc} "
            f"already allocated; {free} free; {cached} cached)")


def v1(req: str, total: str, alloc: str, free: str, reserved: str, gpu: int = 0) -> str:
    """PyTorch 1.4-2.0, with its hint about max_split_size_mb."""
    return (f"RuntimeError: CUDA out of memory. Tried to allocate {req} (GPU {gpu}; {total} total capacity; {alloc} "
            f"already allocated; {free} free; {reserved} reserved in total by PyTorch) If reserved memory is >> "
            "allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
            "Management and PYTORCH_CUDA_ALLOC_CONF")


def v2(req: str, total: str, free: str, this: str | None, alloc: str, spare: str,
       procs: tuple[tuple[int, str], ...] = (), device: str = "CUDA",
       exc: str = "torch.OutOfMemoryError") -> str:
    """PyTorch 2.1+: `Process N has X` for the processes NVML lists, `this process has Y`."""
    listed = "".join(f"Process {pid} has {size} memory in use. " for pid, size in procs)
    mine = f"Including non-PyTorch memory, this process has {this} memory in use. " if this else ""
    return (f"{exc}: {device} out of memory. Tried to allocate {req}. GPU 0 has a total capacity of {total} of which "
            f"{free} is free. {listed}{mine}Of the allocated memory {alloc} is allocated by PyTorch, and {spare} is "
            "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
            "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


FULL_MESSAGES = [
    v04("20.00 MiB", "7.93 GiB", "7.21 GiB", "6.56 MiB", "7.40 GiB"),
    v1("128.00 MiB", "23.69 GiB", "22.48 GiB", "45.06 MiB", "22.81 GiB"),
    v1("50.00 MiB", "14.75 GiB", "13.92 GiB", "11.06 MiB", "14.12 GiB", gpu=3),
    v2("1.02 GiB", "79.15 GiB", "412.31 MiB", "78.73 GiB", "77.10 GiB", "1.13 GiB"),
    v2("256.00 MiB", "39.39 GiB", "120.44 MiB", "39.26 GiB", "38.45 GiB", "310.20 MiB",
       procs=((51234, "39.26 GiB"),)),
    v2("64.00 MiB", "10.75 GiB", "30.62 MiB", "10.71 GiB", "10.21 GiB", "104.55 MiB", exc="torch.cuda.OutOfMemoryError"),
    # a container: the driver cannot see the process, PyTorch's reserved memory is what it holds
    v2("2.00 GiB", "23.64 GiB", "1.12 GiB", "0 bytes", "21.80 GiB", "540.00 MiB"),
    # ROCm
    v2("896.00 MiB", "63.98 GiB", "310.00 MiB", "63.60 GiB", "62.70 GiB", "512.00 MiB", device="HIP"),
    "[rank1]: " + v2("3.50 GiB", "79.33 GiB", "2.81 GiB", "76.51 GiB", "74.90 GiB", "1.02 GiB"),
]
FRAGMENTED_MESSAGES = [
    v1("2.00 GiB", "39.59 GiB", "30.12 GiB", "1.19 GiB", "37.10 GiB"),
    v1("3.00 GiB", "23.70 GiB", "14.02 GiB", "2.53 GiB", "20.91 GiB"),
    v2("4.00 GiB", "79.15 GiB", "1.20 GiB", "77.90 GiB", "70.01 GiB", "7.39 GiB"),
    v2("8.00 GiB", "23.64 GiB", "2.50 GiB", "21.10 GiB", "15.20 GiB", "5.66 GiB"),
    v2("12.00 GiB", "93.10 GiB", "5.33 GiB", "87.70 GiB", "71.96 GiB", "15.24 GiB",
       procs=((9911, "87.70 GiB"),)),
    "[rank0]: " + v2("1.50 GiB", "44.53 GiB", "903.00 MiB", "43.62 GiB", "36.02 GiB", "7.08 GiB"),
]
OTHER_PROCESS_MESSAGES = [
    v1("20.00 MiB", "10.76 GiB", "2.10 GiB", "20.44 MiB", "2.31 GiB"),
    v04("58.00 MiB", "11.17 GiB", "1.02 GiB", "3.12 MiB", "1.29 GiB"),
    v2("2.00 GiB", "23.65 GiB", "30.12 MiB", "3.20 GiB", "2.91 GiB", "150.00 MiB"),
    # NVML lists others beside this one
    v2("512.00 MiB", "47.54 GiB", "80.00 MiB", "19.80 GiB", "18.95 GiB", "650.00 MiB",
       procs=((3301, "27.60 GiB"), (4412, "19.80 GiB"))),
    v2("1.00 GiB", "79.15 GiB", "500.00 MiB", "40.10 GiB", "39.20 GiB", "700.00 MiB",
       procs=((71, "38.50 GiB"), (72, "40.10 GiB"))),
    # a container: this process reads 0 bytes, the card is full, PyTorch holds a fifth of it
    v2("1.00 GiB", "23.65 GiB", "20.00 MiB", "0 bytes", "4.80 GiB", "210.00 MiB"),
]
NO_NUMBERS = [
    "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some other API "
    "call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "RuntimeError: HIP error: out of memory\nHIP kernel errors might be asynchronously reported at some other API call",
    "torch.cuda.OutOfMemoryError: CUDA out of memory.",
    "RuntimeError: CUDA driver error: out of memory",
    "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
    "shape[16,1024,4096] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes.",
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for 3.00GiB (3221225472B) on "
    "device ordinal 0",
    "2024-01-09 11:12:13.141516: W external/xla/xla/tsl/framework/bfc_allocator.cc:482] Allocator (GPU_0_bfc) ran out "
    "of memory trying to allocate 6.00GiB (rounded to 6442450944)requested by op\n"
    "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 6442450944 bytes.",
    "RuntimeError: CUDA error: cudaErrorMemoryAllocation: out of memory",
    "hipErrorOutOfMemory: out of memory",
]


@pytest.mark.parametrize("message", FULL_MESSAGES)
def test_a_full_card_in_every_era(message: str) -> None:
    report = oom.parse_oom(message)
    assert report is not None and report.kind == oom.FULL, report
    assert first_id(message) == "oom_full"


@pytest.mark.parametrize("message", FRAGMENTED_MESSAGES)
def test_fragmentation_in_every_era(message: str) -> None:
    report = oom.parse_oom(message)
    assert report is not None and report.kind == oom.FRAGMENTATION, report
    assert first_id(message) == "oom_fragmentation"


@pytest.mark.parametrize("message", OTHER_PROCESS_MESSAGES)
def test_another_process_in_every_era(message: str) -> None:
    report = oom.parse_oom(message)
    assert report is not None and report.kind == oom.OTHER_PROCESS, report
    assert first_id(message) == "oom_other_process"


@pytest.mark.parametrize("message", NO_NUMBERS)
def test_a_message_with_no_numbers_is_an_oom(message: str) -> None:
    """Every framework's and runtime's wording of an allocation that failed on the GPU: an OOM (the card full,
    as nothing else is said), not a generic CUDA error or exception."""
    assert first_id(message) == "oom_full"


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k)`",
    "RuntimeError: [enforce fail at alloc_cpu.cpp:83] . DefaultCPUAllocator: can't allocate memory: you tried to "
    "allocate 34359738368 bytes. Error code 12 (Cannot allocate memory)",
    "RESOURCE_EXHAUSTED: Quota exceeded for quota metric 'Generate Content API requests per minute'",
    "Memory-Usage: 10240MiB / 24576MiB",
])
def test_what_is_not_a_gpu_oom(line: str) -> None:
    assert not first_id(line).startswith("oom")


# -- the person's words about what holds the card (a message with no numbers) --------------------------

_BARE = "RuntimeError: CUDA error: out of memory\n"


@pytest.mark.parametrize("words", [
    "nvidia-smi shows 20 GB of memory used even though nothing is running on the GPU.",
    "The GPU memory stays occupied after I killed the script, no process is listed in nvidia-smi.",
    "Someone else is using the same GPU on our lab server.",
    "Another training job was running on that card at the same time.",
    "It was a zombie process from my previous run holding the memory.",
    "There is a dead python process still holding 15GB on GPU 0.",
    "The card is shared with other users of the cluster.",
    "显存被其他程序占用了",
    "显存被占用，nvidia-smi 显示有别的进程",
    "GPU memory is already occupied by a background process.",
    "All 4 ranks are on GPU 0: nvidia-smi lists four python processes on the first card.",
    "Other people are running experiments on this server too.",
])
def test_the_persons_words_name_another_process(words: str) -> None:
    assert first_id(_BARE + words) == "oom_other_process"
    assert first_id(words + "\n" + _BARE) == "oom_other_process"


@pytest.mark.parametrize("words", [
    "I run it on a single 24 GB card, nothing else on it.",
    "No other process is using the GPU, I checked nvidia-smi.",
    "I made sure no other jobs are running.",
    "Training is a separate step from evaluation in my script.",
])
def test_words_that_rule_a_neighbour_out_are_no_neighbour(words: str) -> None:
    assert first_id(_BARE + words) == "oom_full"


# -- the phase, from frames of every dialect, crossed with messages of every era ------------------------

SITE = "/usr/local/lib/python3.10/site-packages/"
PHASE_MESSAGES = [
    v1("128.00 MiB", "23.69 GiB", "22.48 GiB", "45.06 MiB", "22.81 GiB"),
    v2("1.02 GiB", "79.15 GiB", "412.31 MiB", "78.73 GiB", "77.10 GiB", "1.13 GiB"),
    "RuntimeError: CUDA error: out of memory",
    "torch.cuda.OutOfMemoryError: CUDA out of memory.",
]


def frame(path: str, func: str, code: str) -> str:
    return f'  File "{path}", line 123, in {func}\n    {code}\n'


def plain(*frames: str) -> str:
    return "Traceback (most recent call last):\n" + "".join(frames)


TRAIN_TOP = frame("/home/me/run_sft.py", "main", "trainer.train()") + \
    frame(SITE + "transformers/trainer.py", "train", "return inner_training_loop(")
EVAL_FRAMES = {
    "trainer_evaluate": plain(
        TRAIN_TOP, frame(SITE + "transformers/trainer.py", "_inner_training_loop",
                         "self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch)"),
        frame(SITE + "transformers/trainer.py", "_maybe_log_save_evaluate", "metrics = self._evaluate(trial)"),
        frame(SITE + "transformers/trainer.py", "_evaluate", "metrics = self.evaluate(ignore_keys=ignore_keys)"),
        frame(SITE + "transformers/trainer.py", "evaluate", "output = eval_loop("),
        frame(SITE + "transformers/trainer.py", "evaluation_loop", "losses, logits, labels = self.prediction_step("),
        frame(SITE + "transformers/trainer.py", "prediction_step", "outputs = model(**inputs)"),
        frame(SITE + "torch/nn/modules/module.py", "_call_impl", "return forward_call(*args, **kwargs)"),
        frame(SITE + "transformers/models/qwen2/modeling_qwen2.py", "forward", "logits = logits.float()")),
    "predict_concat": plain(
        frame("/home/me/infer.py", "<module>", "out = trainer.predict(test_set)"),
        frame(SITE + "transformers/trainer.py", "predict", "output = eval_loop("),
        frame(SITE + "transformers/trainer.py", "evaluation_loop", "all_preds.add(logits)"),
        frame(SITE + "transformers/trainer_pt_utils.py", "add", "self.tensors = nested_concat(self.tensors, t)"),
        frame(SITE + "transformers/trainer_pt_utils.py", "nested_concat", "return torch_pad_and_concatenate(a, b)"),
        frame(SITE + "transformers/trainer_pt_utils.py", "torch_pad_and_concatenate", "result = t1.new_full(")),
    "compute_metrics": plain(
        frame(SITE + "transformers/trainer.py", "evaluation_loop", "metrics = self.compute_metrics(EvalPrediction("),
        frame("/home/me/train_cls.py", "compute_metrics", "probs = torch.softmax(torch.tensor(logits).cuda(), -1)")),
    "lightning_validation_step": plain(
        frame(SITE + "lightning/pytorch/trainer/trainer.py", "fit", "call._call_and_handle_interrupt("),
        frame(SITE + "lightning/pytorch/loops/fit_loop.py", "advance", "self.epoch_loop.run(self._data_fetcher)"),
        frame(SITE + "lightning/pytorch/loops/training_epoch_loop.py", "on_advance_end", "self.val_loop.run()"),
        frame(SITE + "lightning/pytorch/loops/utilities.py", "_decorator", "return loop_run(self, *args, **kwargs)"),
        frame(SITE + "lightning/pytorch/loops/evaluation_loop.py", "run", "self._evaluation_step(batch, batch_idx)"),
        frame(SITE + "lightning/pytorch/strategies/strategy.py", "validation_step",
              "return self.lightning_module.validation_step(*args, **kwargs)"),
        frame("/home/me/lit_model.py", "validation_step", "out = self.model(x)")),
    "custom_validate": plain(
        frame("/home/me/train.py", "main", "val_loss = validate(model, val_loader, device)"),
        frame("/home/me/train.py", "validate", "logits = model(batch['input_ids'].to(device))"),
        frame(SITE + "torch/nn/modules/module.py", "_call_impl", "return forward_call(*args, **kwargs)")),
    "generate_in_eval": plain(
        frame("/home/me/finetune.py", "train", "scores = run_eval(model, tok, eval_prompts)"),
        frame("/home/me/finetune.py", "run_eval", "out = model.generate(**enc, max_new_tokens=512)"),
        frame(SITE + "transformers/generation/utils.py", "generate", "result = self._sample("),
        frame(SITE + "transformers/generation/utils.py", "_sample", "outputs = self(**model_inputs, return_dict=True)")),
    "keras_fit_evaluate": plain(
        frame("/home/me/train_keras.py", "<module>", "model.fit(train_ds, validation_data=val_ds, epochs=10)"),
        frame(SITE + "keras/src/utils/traceback_utils.py", "error_handler", "raise e.with_traceback(filtered_tb)"),
        frame(SITE + "keras/src/backend/tensorflow/trainer.py", "fit", "val_logs = self.evaluate("),
        frame(SITE + "keras/src/backend/tensorflow/trainer.py", "evaluate", "logs = self.test_function(iterator)")),
    "ipython_old_predict": (
        "OutOfMemoryError                          Traceback (most recent call last)\n"
        "<ipython-input-12-6b2d3a7f> in <cell line: 1>()\n"
        "----> 1 preds = trainer.predict(tokenized['test'])\n\n"
        "3 frames\n"
        "/usr/local/lib/python3.10/dist-packages/transformers/trainer_pt_utils.py in nested_concat(tensors, "
        "new_tensors, padding_index)\n"
        "--> 117         return torch_pad_and_concatenate(tensors, new_tensors, padding_index=padding_index)\n"),
    "jupyter_cell_evaluate": (
        "---------------------------------------------------------------------------\n"
        "OutOfMemoryError                          Traceback (most recent call last)\n"
        "Cell In[27], line 1\n"
        "----> 1 trainer.evaluate()\n\n"
        "File /opt/conda/lib/python3.11/site-packages/transformers/trainer.py:4100, in Trainer.evaluate(self, "
        "eval_dataset, ignore_keys, metric_key_prefix)\n"
        "   4097 start_time = time.time()\n"
        "-> 4100 output = eval_loop(\n\n"
        "File /opt/conda/lib/python3.11/site-packages/torch/nn/functional.py:3104, in cross_entropy(input, target)\n"
        "-> 3104 return torch._C._nn.cross_entropy_loss(input, target)\n"),
}
EVAL_BANNERS = {
    "trainer_banner": "***** Running Evaluation *****\n  Num examples = 2400\n  Batch size = 16\n"
                      " 37%|███▋      | 56/150 [00:21<00:35,  2.64it/s]\n",
    "prediction_banner": "***** Running Prediction *****\n  Num examples = 812\n  Batch size = 4\n",
    "lightning_bar": "Epoch 0: 100%|██████████| 812/812 [05:11<00:00,  2.61it/s, v_num=3, train_loss=1.92]\n"
                     "Validation DataLoader 0:  45%|████▌     | 45/100 [00:10<00:12,  4.50it/s]\n",
    "lightning_validation": "Validation: |          | 0/? [00:00<?, ?it/s]\n",
    "tqdm_evaluating": "Evaluating:  12%|█▏        | 30/250 [00:05<00:40,  5.40it/s]\n",
    "logger_line": "2025-03-01 10:00:00 | INFO | trainer:fit:212 - Running evaluation on 2000 samples\n",
    "start_eval": "[INFO] Start evaluating epoch 3 ...\n",
    "zh_banner": "开始评估...\n",
    "zh_validation": "第3轮训练结束，开始验证\n",
    "running_eval": "[2025-01-02 03:04:05] Running eval on 1200 samples\n",
    "start_testing": "Start testing with checkpoint epoch_12.pth\n",
    "bar_desc_word": "Epoch 3 validation:  42%|████▏     | 21/50 [00:07<00:09,  3.10it/s]\n",
    # a bar of a smaller total drawn inside the unfinished training bar: the evaluation loop inside training
    "nested_bar": "  5%|▌         | 500/10000 [10:00<3:10:00,  1.20s/it]\n"
                  " 12%|█▏        | 30/250 [00:05<00:40,  5.40it/s]\n",
}
SAVE_FRAMES = {
    "trainer_checkpoint": plain(
        TRAIN_TOP, frame(SITE + "transformers/trainer.py", "_inner_training_loop",
                         "self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch)"),
        frame(SITE + "transformers/trainer.py", "_maybe_log_save_evaluate", "self._save_checkpoint(model, trial)"),
        frame(SITE + "transformers/trainer.py", "_save_checkpoint", "self.save_model(output_dir, _internal_call=True)"),
        frame(SITE + "transformers/trainer.py", "save_model", "self._save(output_dir, state_dict=state_dict)"),
        frame(SITE + "safetensors/torch.py", "save_file", "serialize_file(_flatten(tensors), filename)")),
    "merge_and_unload": plain(
        frame("/home/me/export.py", "<module>", "model = model.merge_and_unload()"),
        frame(SITE + "peft/tuners/tuners_utils.py", "merge_and_unload", "return self._unload_and_optionally_merge("),
        frame(SITE + "peft/tuners/lora/layer.py", "get_delta_weight", "output_tensor = transpose(w_b @ w_a)")),
    "push_to_hub": plain(
        frame("/home/me/sft.py", "<module>", "model.push_to_hub('me/llama-lora', private=True)"),
        frame(SITE + "transformers/utils/hub.py", "push_to_hub", "self.save_pretrained(work_dir)"),
        frame(SITE + "transformers/modeling_utils.py", "save_pretrained", "shard = {k: v.contiguous() for ...}")),
    "torch_save": plain(
        frame("/home/me/train.py", "main", "torch.save(model.state_dict(), f'ckpt/epoch{epoch}.pt')"),
        frame(SITE + "torch/nn/modules/module.py", "state_dict", "module.state_dict(destination=destination)")),
    "fsdp_full_state_dict": plain(
        frame(SITE + "accelerate/accelerator.py", "get_state_dict", "state_dict = model.state_dict()"),
        frame(SITE + "torch/distributed/fsdp/_state_dict_utils.py", "_full_post_state_dict_hook",
              "return _common_unshard_post_state_dict_hook("),
        frame(SITE + "torch/distributed/fsdp/_unshard_param_utils.py", "_unshard_fsdp_state_params",
              "_unshard(state, handle, computation_stream, computation_stream)")),
    "deepspeed_16bit": plain(
        frame(SITE + "deepspeed/runtime/engine.py", "save_16bit_model",
              "state_dict = self._zero3_consolidated_16bit_state_dict()"),
        frame(SITE + "deepspeed/runtime/engine.py", "_zero3_consolidated_16bit_state_dict",
              "get_layer_state_dict(self.module, prefix='')")),
    "lightning_checkpoint": plain(
        frame(SITE + "lightning/pytorch/callbacks/model_checkpoint.py", "on_train_epoch_end",
              "self._save_topk_checkpoint(trainer, monitor_candidates)"),
        frame(SITE + "lightning/pytorch/trainer/trainer.py", "save_checkpoint",
              "checkpoint = self._checkpoint_connector.dump_checkpoint(weights_only)")),
    "jupyter_unsloth_merged": (
        "OutOfMemoryError                          Traceback (most recent call last)\n"
        "Cell In[31], line 2\n"
        "      1 # write the merged 16-bit model\n"
        "----> 2 model.save_pretrained_merged('out16', tokenizer, save_method='merged_16bit')\n\n"
        "File /usr/local/lib/python3.10/dist-packages/unsloth/save.py:1223, in unsloth_save_pretrained_merged(self, "
        "save_directory, tokenizer)\n"
        "-> 1223 unsloth_save_model(**arguments)\n"),
}
SAVE_BANNERS = {
    "trainer_saving": "[INFO|trainer.py:3705] 2025-02-10 10:11:12,131 >> Saving model checkpoint to "
                      "out/qwen-lora/checkpoint-1500\n",
    "unsloth_merging": "Unsloth: Merging 4bit and LoRA weights to 16bit...\nUnsloth: Will use up to 31.2 out of "
                       "50.99 RAM for saving.\n",
    "pushing": "Pushing the merged model to the hub: me/mistral-7b-sft ...\n",
    "export_gguf": "Exporting the model to GGUF (q4_k_m) ...\n",
    "zh_saving": "正在保存模型到 output/checkpoint-800 ...\n",
    "saving_final": "Training completed. Saving the final model to ./final\n",
    "keras_checkpoint": "Epoch 3: val_loss improved from 0.51234 to 0.49876, saving model to ckpt/best.keras\n",
    "deepspeed_about_to_save": "[2025-01-02 03:04:05,678] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] "
                               "Checkpoint global_step1200 is about to be saved!\n",
    "writing_bar": "Writing model shards:  40%|████      | 2/5 [00:21<00:31, 10.52s/it]\n",
}


@pytest.mark.parametrize("message", PHASE_MESSAGES)
@pytest.mark.parametrize("where", EVAL_FRAMES)
def test_evaluation_frames(where: str, message: str) -> None:
    assert first_id(EVAL_FRAMES[where] + message + "\n") == "oom_at_eval"


@pytest.mark.parametrize("message", PHASE_MESSAGES)
@pytest.mark.parametrize("where", EVAL_BANNERS)
def test_evaluation_banners(where: str, message: str) -> None:
    assert first_id(EVAL_BANNERS[where] + message + "\n") == "oom_at_eval"


@pytest.mark.parametrize("message", PHASE_MESSAGES)
@pytest.mark.parametrize("where", SAVE_FRAMES)
def test_save_frames(where: str, message: str) -> None:
    assert first_id(SAVE_FRAMES[where] + message + "\n") == "oom_at_save"


@pytest.mark.parametrize("message", PHASE_MESSAGES)
@pytest.mark.parametrize("where", SAVE_BANNERS)
def test_save_banners(where: str, message: str) -> None:
    assert first_id(SAVE_BANNERS[where] + message + "\n") == "oom_at_save"


# -- negatives: a phase that ended, or was only named ---------------------------------------------------

TRAIN_FRAMES = plain(TRAIN_TOP,
                     frame(SITE + "transformers/trainer.py", "_inner_training_loop",
                           "tr_loss_step = self.training_step(model, inputs)"),
                     frame(SITE + "transformers/trainer.py", "training_step", "self.accelerator.backward(loss)"))
AFTER_EVAL = {
    "eval_then_train_log": "***** Running Evaluation *****\n  Num examples = 500\n"
                           "{'eval_loss': 1.234, 'eval_runtime': 20.1, 'eval_samples_per_second': 24.9, 'epoch': 1.0}\n"
                           "{'loss': 1.101, 'grad_norm': 0.52, 'learning_rate': 0.0001, 'epoch': 1.02}\n",
    "lightning_back_to_train": "Validation DataLoader 0: 100%|██████████| 100/100 [00:20<00:00,  4.90it/s]\n"
                               "Epoch 1:   4%|▍         | 33/812 [00:12<04:51,  2.67it/s, v_num=3, train_loss=1.81]\n",
    "tqdm_eval_done_then_train": "Evaluating: 100%|██████████| 250/250 [00:41<00:00,  6.01it/s]\n"
                                 "eval accuracy: 0.8123\n"
                                 "Training epoch 2:   3%|▎         | 40/1250 [00:15<07:40,  2.63it/s]\n",
    "eval_metrics_printed": "eval accuracy: 0.8123\neval f1 = 0.77\n",
    "config_dump": "TrainingArguments(\n_n_gpu=1,\ndo_eval=True,\neval_steps=500,\neval_strategy=steps,\n"
                   "evaluation_strategy=steps,\nper_device_eval_batch_size=8,\nprediction_loss_only=False,\n)\n"
                   "val_size: 0.1\nevaluate: true\nvalidation_file: data/dev.json\n"
                   "  3%|▎         | 30/1000 [00:40<21:33,  1.33s/it]\n",
    "save_done_then_train": "Saving model checkpoint to out/checkpoint-500\n"
                            "Configuration saved in out/checkpoint-500/config.json\n"
                            "Model weights saved in out/checkpoint-500/model.safetensors\n"
                            " 50%|█████     | 503/1000 [41:10<40:12,  4.85s/it]\n",
    "train_desc_bar": "Epoch 3 train (val every 500):  42%|████▏     | 210/500 [01:07<01:29,  3.10it/s]\n",
    # an outer epoch bar and the steps' bar inside it: the larger bar inside is training
    "epoch_then_steps": "  0%|          | 0/3 [00:00<?, ?it/s]\n"
                        "  5%|▌         | 50/1000 [00:40<12:40,  1.25it/s]\n",
    # the tokenisation's bar finished before the training bar began
    "map_then_train": "100%|██████████| 52000/52000 [00:31<00:00, 1650.22ex/s]\n"
                      "  2%|▏         | 20/1000 [00:40<32:40,  2.00s/it]\n",
    # Lightning saved at an epoch's end; the next epoch's bar (the same total, counting again) is training
    "lightning_next_epoch": "Epoch 1: 100%|██████████| 812/812 [05:11<00:00,  2.61it/s, v_num=3]\n"
                            "Saving latest checkpoint...\n"
                            "Epoch 2:  10%|█         | 81/812 [00:30<04:31,  2.69it/s, v_num=3]\n",
    "plain_next_epoch": "100%|██████████| 500/500 [03:00<00:00,  2.77it/s]\nsaving checkpoint to ckpt/epoch_1.pt\n"
                        "  0%|          | 0/500 [00:00<?, ?it/s]\n",
    "save_done_then_log": "Saving model checkpoint to out/checkpoint-500\n"
                          "{'loss': 0.8812, 'grad_norm': 0.31, 'learning_rate': 5e-05, 'epoch': 1.5}\n",
}


@pytest.mark.parametrize("message", PHASE_MESSAGES[:2])
@pytest.mark.parametrize("before", AFTER_EVAL)
def test_a_phase_that_ended_before_a_training_ooms(before: str, message: str) -> None:
    assert first_id(AFTER_EVAL[before] + message + "\n") == "oom_full"
    assert first_id(AFTER_EVAL[before] + TRAIN_FRAMES + message + "\n") == "oom_full"


@pytest.mark.parametrize("text", [
    "***** Running Evaluation *****\n  Num examples = 500\n  Batch size = 8\n"
    "100%|██████████| 63/63 [00:12<00:00,  5.02it/s]\n{'eval_loss': 0.91, 'eval_runtime': 12.6, 'epoch': 1.0}\n",
    "Saving model checkpoint to out/checkpoint-500\nConfiguration saved in out/checkpoint-500/config.json\n",
    "Unsloth: Merging 4bit and LoRA weights to 16bit...\nUnsloth: Saving model... Done.\n",
])
def test_healthy_phases_are_no_oom(text: str) -> None:
    assert not first_id(text).startswith("oom")


# -- TensorFlow's and XLA's allocator report: its pool's numbers say full or fragmented ------------------

def bfc(requested: str, limit: int, in_use: int, largest: int | None = None, xla: bool = False) -> str:
    """The BFC allocator's failure: the request, its chunk summary, then its stats (one per line)."""
    where = "external/local_xla/xla/tsl/framework/bfc_allocator.cc" if xla else \
        "tensorflow/core/common_runtime/bfc_allocator.cc"
    stats = f"Limit:        {limit:>14}\nInUse:        {in_use:>14}\nMaxInUse:     {in_use + 1024:>14}\n" \
            f"NumAllocs:    {'9182':>14}\nMaxAllocSize: {'536870912':>14}\n"
    if largest is not None:
        stats += f"Reserved:     {'0':>14}\nPeakReserved: {'0':>14}\nLargestFreeBlock: {largest:>10}\n"
    return (f"2024-02-03 04:05:06.789012: W {where}:485] Allocator (GPU_0_bfc) ran out of memory trying to allocate "
            f"{requested} (rounded to 1)requested by op model/conv2d_7/Conv2D\n"
            "If the cause is memory fragmentation maybe the environment variable 'TF_GPU_ALLOCATOR=cuda_malloc_async' "
            "will improve the situation. \nCurrent allocation summary follows.\n"
            f"2024-02-03 04:05:06.790000: I {where}:1107] Sum Total of in-use chunks: 1.00GiB\n"
            f"2024-02-03 04:05:06.790010: I {where}:1114] Stats: \n{stats}\n"
            "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
            "shape[64,256,56,56] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc")


@pytest.mark.parametrize("text", [
    # 2.7 GB free in a 3.5 GB pool, a 450 MiB request found no block
    bfc("450.00MiB", 3502964736, 589212672),
    bfc("1.50GiB", 15545312871, 11912008192, xla=True),
    # newer TensorFlow prints the largest free block: smaller than the request, though the pool had room
    bfc("2.00GiB", 40231108608, 33000000000, largest=1200000000),
])
def test_a_pool_with_room_but_no_block_is_fragmentation(text: str) -> None:
    assert first_id(text) == "oom_fragmentation"


@pytest.mark.parametrize("text", [
    bfc("29.91MiB", 1490198528, 1477023232),
    bfc("256.00MiB", 7365066752, 7151588096, xla=True),
    bfc("3.00GiB", 15545312871, 13912008192),  # 1.5 GB free in the pool, short of a 3 GiB request
])
def test_a_pool_without_room_is_full(text: str) -> None:
    assert first_id(text) == "oom_full"


def test_the_allocators_warning_alone_is_an_oom() -> None:
    line = ("2024-02-03 04:05:06.789012: W tensorflow/core/common_runtime/bfc_allocator.cc:485] Allocator (GPU_0_bfc) "
            "ran out of memory trying to allocate 1.17GiB (rounded to 1258291200)requested by op Adam/update")
    assert oom.is_oom_line(line)
    not_failure = ("W tensorflow/core/common_runtime/bfc_allocator.cc:310] Allocator (GPU_0_bfc) ran out of memory "
                   "trying to allocate 2.10GiB with freed_by_count=0. The caller indicates that this is not a failure, "
                   "but this may mean that there could be performance gains if more memory were available.")
    assert not oom.is_oom_line(not_failure)


_TF_OOM = ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: Graph execution error:\n\n"
           "Detected at node 'model/dense_3/MatMul' defined at (most recent call last):\n"
           "Node: 'model/dense_3/MatMul'\n"
           "OOM when allocating tensor with shape[512,50257] and type float on /job:localhost/replica:0/task:0/"
           "device:GPU:0 by allocator GPU_0_bfc\n\t [[{{node model/dense_3/MatMul}}]]\n"
           "Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom "
           "to RunOptions for current allocation info.\n [Op:__inference_{}_function_18823]\n")


@pytest.mark.parametrize(("function", "expected"), [
    ("test", "oom_at_eval"), ("predict", "oom_at_eval"), ("train", "oom_full")])
def test_tensorflow_names_the_function_the_op_ran_in(function: str, expected: str) -> None:
    """Keras compiles its train, test and predict steps as functions; the OOM names the one it struck in."""
    before = "Epoch 1/20\n812/812 [==============================] - 301s 370ms/step - loss: 0.4121\n"
    assert first_id(before + _TF_OOM.replace("{}", function)) == expected


# -- nvidia-smi pasted beside the OOM: the processes it lists on the card --------------------------------

def smi(rows: list[tuple[int, int, str, int]], new: bool = True) -> str:
    """nvidia-smi's process table: (gpu, pid, name, MiB) rows, in the layout of drivers since 450 or before."""
    head = ("+---------------------------------------------------------------------------------------+\n"
            "| Processes:                                                                            |\n")
    if new:
        head += ("|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |\n"
                 "|        ID   ID                                                             Usage      |\n"
                 "|=======================================================================================|\n")
        body = "".join(f"|    {g}   N/A  N/A    {pid:>6}      C   {name:<38}{mib:>8}MiB |\n" for g, pid, name, mib in rows)
    else:
        head += ("|  GPU       PID   Type   Process name                             Usage      |\n"
                 "|=============================================================================|\n")
        body = "".join(f"|    {g}     {pid:>6}      C   {name:<38}{mib:>8}MiB |\n" for g, pid, name, mib in rows)
    return head + body + "+---------------------------------------------------------------------------------------+\n"


BARE_FULL = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"


@pytest.mark.parametrize("table", [
    smi([(0, 41234, "python train.py", 9800), (0, 51234, "/usr/bin/python3", 13800)]),
    smi([(0, 1771, "python", 20100), (0, 2288, "ollama_llama_server", 3900), (1, 2290, "python", 400)], new=False),
    # every rank on the first card (a launcher that did not set the device)
    smi([(0, 301, "python", 6100), (0, 302, "python", 6100), (0, 303, "python", 6100), (0, 304, "python", 6100)]),
])
def test_nvidia_smi_lists_others_on_the_card(table: str) -> None:
    assert first_id(BARE_FULL + "\nnvidia-smi:\n" + table) == "oom_other_process"
    assert first_id(table + BARE_FULL) == "oom_other_process"


@pytest.mark.parametrize("table", [
    # one process per card (a DDP run), a desktop's small ones beside it
    smi([(0, 4101, "python", 22900), (1, 4102, "python", 22900)]),
    smi([(0, 1201, "/usr/lib/xorg/Xorg", 310), (0, 1402, "/usr/bin/gnome-shell", 120), (0, 5005, "python", 11200)]),
])
def test_nvidia_smi_with_this_run_alone_is_no_neighbour(table: str) -> None:
    assert first_id(BARE_FULL + table) == "oom_full"


def test_nvidia_smi_does_not_outweigh_the_messages_numbers() -> None:
    """The message says the card had the memory free and the cache held it: fragmentation, whatever else runs."""
    table = smi([(0, 41234, "python", 9800), (0, 51234, "python", 3800)])
    assert first_id(FRAGMENTED_MESSAGES[0] + "\n" + table) == "oom_fragmentation"


# -- the step the run stopped at, against its eval and save intervals --------------------------------------

def bar(step: int, total: int = 2000) -> str:
    return f" {100 * step // total:>2}%|█         | {step}/{total} [12:00<1:48:00,  1.20s/it]\n"


@pytest.mark.parametrize(("config", "step", "expected"), [
    ("python train.py --eval_strategy steps --eval_steps 200 --save_steps 1000\n", 400, "oom_at_eval"),
    ("TrainingArguments(\neval_steps=250,\neval_strategy=IntervalStrategy.STEPS,\nsave_steps=5000,\n)\n", 750,
     "oom_at_eval"),
    ("eval_steps: 300\nsave_steps: 700\nevaluation_strategy: steps\n", 1400, "oom_at_save"),
    ("{'save_steps': 100, 'eval_steps': 1000, 'eval_strategy': 'steps'}\n", 300, "oom_at_save"),
    # the Trainer evaluates first, then saves, at a step both divide: no eval results yet says the evaluation
    ("--eval_steps 500 --save_steps 500\n", 1000, "oom_at_eval"),
    # a step between the intervals, or evaluation switched off
    ("--eval_steps 200 --save_steps 1000\n", 437, "oom_full"),
    ("--eval_strategy no --eval_steps 200 --save_steps 1000\n", 400, "oom_full"),
    ("--do_eval False --eval_steps 200 --save_steps 1000\n", 600, "oom_full"),
])
def test_the_step_it_stopped_at_against_the_intervals(config: str, step: int, expected: str) -> None:
    message = PHASE_MESSAGES[1]
    assert first_id(config + bar(step - 1) + bar(step) + message + "\n") == expected


def test_eval_results_at_that_step_say_the_save_came_next() -> None:
    text = ("--eval_steps 500 --save_steps 500\n" + bar(999) + bar(1000) +
            "{'eval_loss': 1.0423, 'eval_runtime': 61.2, 'eval_samples_per_second': 16.3, 'epoch': 0.5}\n" +
            PHASE_MESSAGES[1] + "\n")
    assert first_id(text) == "oom_at_save"


# -- the message hard-wrapped by an issue's editor or a console, at any width -----------------------------

_KINDS = [(m, "oom_full") for m in FULL_MESSAGES] + [(m, "oom_fragmentation") for m in FRAGMENTED_MESSAGES] + \
    [(m, "oom_other_process") for m in OTHER_PROCESS_MESSAGES]


@pytest.mark.parametrize("width", [72, 80, 100, 120])
@pytest.mark.parametrize(("message", "expected"), _KINDS)
def test_a_wrapped_message_keeps_its_kind(message: str, expected: str, width: int) -> None:
    import textwrap

    wrapped = "\n".join(textwrap.wrap(message, width, break_long_words=False))
    assert first_id(wrapped + "\n") == expected


# -- more status lines and the person's words with more than one phase ------------------------------------

@pytest.mark.parametrize(("before", "expected"), [
    ("***** Evaluating perplexity, Epoch 2/3 *****\n", "oom_at_eval"),
    ("2025-01-02 03:04:05 INFO Checkpointing model at step 1500 ...\n", "oom_at_save"),
    ("$ python convert_hf_to_gguf.py out/merged --outtype f16\n", "oom_at_save"),
    ("python scripts/convert_lora_to_hf.py --base llama --lora out/adapter\n", "oom_at_save"),
    # metrics printed as results, gradient checkpointing's notice, a dataset converted: no phase
    ("eval perplexity: 8.31\nvalidation accuracy = 0.77\n", "oom_full"),
    ("Gradient checkpointing enabled.\n", "oom_full"),
    ("python convert_dataset.py --in raw.json --out data.jsonl\n", "oom_full"),
    # xtuner writes the trained .pth out as a Hugging Face adapter; its training and git's merge write no model
    ("xtuner convert pth_to_hf qwen_7b_qlora.py ./work_dirs/iter_900.pth ./hf_adapter\n", "oom_at_save"),
    ("NPROC_PER_NODE=8 xtuner train internlm2_chat_7b_qlora_oasst1_e3 --deepspeed deepspeed_zero2\n", "oom_full"),
    ("$ git merge origin/main\n", "oom_full"),
    ("mlx_lm.fuse --model mistralai/Mistral-7B-v0.1 --adapter-path adapters --save-path fused\n", "oom_at_save"),
])
def test_status_lines_of_other_tools(before: str, expected: str) -> None:
    assert first_id(before + PHASE_MESSAGES[1] + "\n") == expected


@pytest.mark.parametrize(("words", "expected"), [
    ("Training and evaluation work fine, but saving the merged model runs out of memory.", "oom_at_save"),
    ("Saving checkpoints works, the OOM only happens during evaluation.", "oom_at_eval"),
    ("Evaluation runs without any problem; training itself OOMs at step 30.", "oom_full"),
    ("The merge works fine but the evaluation afterwards goes out of memory.", "oom_at_eval"),
    ("训练和保存都正常，验证的时候显存不足", "oom_at_eval"),
])
def test_the_phase_nearest_the_oom_in_the_persons_words(words: str, expected: str) -> None:
    assert first_id(words + "\n" + PHASE_MESSAGES[2] + "\n") == expected


@pytest.mark.parametrize("words", [
    "I am evaluating my fine-tuned model, but it runs out of memory.",
    "Testing the fine-tuned checkpoint on the held-out set; then I hit an OOM after a few batches.",
])
def test_fine_tuning_is_no_fine(words: str) -> None:
    """`fine-tuned` says nothing about a phase working."""
    assert first_id(words + "\n" + PHASE_MESSAGES[2] + "\n") == "oom_at_eval"


# -- an OOM while CUDA itself starts: the card was full before the program held anything ---------------------

@pytest.mark.parametrize("text", [
    plain(frame("/home/me/train.py", "<module>", "model = model.to('cuda')"),
          frame(SITE + "torch/nn/modules/module.py", "to", "return self._apply(convert)"),
          frame(SITE + "torch/cuda/__init__.py", "_lazy_init", "torch._C._cuda_init()"))
    + "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some other "
      "API call, so the stacktrace below might be incorrect.\n",
    "---------------------------------------------------------------------------\n"
    "RuntimeError                              Traceback (most recent call last)\n"
    "Cell In[3], line 1\n----> 1 torch.cuda.set_device(0)\n\n"
    "File /opt/conda/lib/python3.10/site-packages/torch/cuda/__init__.py:302, in _lazy_init()\n"
    "--> 302     torch._C._cuda_init()\n\n"
    "RuntimeError: CUDA error: out of memory\n",
])
def test_an_oom_while_cuda_starts_is_another_process(text: str) -> None:
    assert first_id(text) == "oom_other_process"


def test_an_oom_in_a_models_move_to_the_gpu_is_no_neighbour() -> None:
    text = plain(frame("/home/me/train.py", "<module>", "model = model.to('cuda')"),
                 frame(SITE + "torch/nn/modules/module.py", "convert", "return t.to(device)")) + \
        "RuntimeError: CUDA error: out of memory\n"
    assert first_id(text) == "oom_full"


# -- the person names an OOM in a phase other than training: a training log pasted beside it is context ------

_FLAT_LOGS = "\n".join("{'loss': %.4f, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': %.2f}"
                       % (1.2 + 0.001 * (i % 3), 0.01 * i) for i in range(1, 30)) + "\n"


@pytest.mark.parametrize(("words", "expected"), [
    ("Training goes well but when saving the model it goes OOM.", "oom_at_save"),
    ("The merge after training OOMs on my T4.", "oom_at_save"),
    ("It OOMs as soon as the validation starts.", "oom_at_eval"),
])
def test_a_phase_named_with_the_oom_outweighs_the_training_log(words: str, expected: str) -> None:
    assert first_id(words + "\n" + _FLAT_LOGS) == expected
    assert first_id(_FLAT_LOGS + words + "\n") == expected


def test_an_oom_in_the_persons_history_still_yields_to_the_log() -> None:
    """No phase named: `I got OOM, lowered the batch, now ...` tells the run's history; the log shows the problem."""
    words = "At first I got OOM with batch 16, so I lowered it to 4. Now the loss does not move at all.\n"
    assert first_id(words + _FLAT_LOGS) == "loss_flat"


def test_the_other_ranks_timeouts_after_an_oom_said_in_evaluation() -> None:
    text = ("One rank runs out of memory in validation, then the others time out:\n"
            "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800083 "
            "milliseconds before timing out.\n")
    assert first_id(text) == "oom_at_eval"
    assert first_id(text.replace("runs out of memory in validation", "crashes")) == "nccl_timeout"


# -- the host's memory running out while the model is written out or evaluated --------------------------------

HOST_DEATHS = [
    "Killed\n",
    "Process finished with exit code 137 (interrupted by signal 9: SIGKILL)\n",
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 41234) of binary: "
    "/usr/bin/python3\n",
    "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'merge.py']' died with <Signals.SIGKILL: 9>.\n",
    "RuntimeError: [enforce fail at alloc_cpu.cpp:83] . DefaultCPUAllocator: can't allocate memory: you tried to "
    "allocate 26843545600 bytes. Error code 12 (Cannot allocate memory)\n",
    "OSError: [WinError 1455] The paging file is too small for this operation to complete\n",
    "Your session crashed after using all available RAM.\n",
]


@pytest.mark.parametrize("death", HOST_DEATHS)
@pytest.mark.parametrize(("before", "expected"), [
    ("Unsloth: Merging 4bit and LoRA weights to 16bit...\nUnsloth: Will use up to 5.34 out of 12.67 RAM for saving.\n"
     " 50%|█████     | 16/32 [00:10<00:10,  1.52it/s]\n", "oom_at_save"),
    ("[INFO|trainer.py:3705] >> Saving model checkpoint to out/checkpoint-2000\n", "oom_at_save"),
    ("***** Running Evaluation *****\n  Num examples = 40000\n  Batch size = 64\n", "oom_at_eval"),
])
def test_the_hosts_memory_in_a_phase(before: str, death: str, expected: str) -> None:
    assert first_id(before + death) == expected


def test_the_kernels_oom_killer_is_no_gpu_oom() -> None:
    line = "[12345.678901] Out of memory: Killed process 41234 (python3) total-vm:98765432kB, anon-rss:65432100kB"
    assert not oom.is_oom_line(line)


# -- a notebook's progress (transformers' NotebookProgressCallback, pasted as text) -----------------------------

_NB_TRAIN = " [ 500/1000 10:00 < 10:00, 0.83 it/s, Epoch 0.50/1]\nStep\tTraining Loss\tValidation Loss\n" \
            "100\t1.234500\t1.345600\n"


@pytest.mark.parametrize(("after", "expected"), [
    (" [ 23/125 00:05 < 00:24]\n", "oom_at_eval"),
    (" [ 23/125 00:05 < 00:24, 4.20 it/s]\n", "oom_at_eval"),
    # the training's own progress drawn again: back in training
    (" [125/125 00:30]\n [ 501/1000 10:02 < 10:00, 0.83 it/s, Epoch 0.50/1]\n", "oom_full"),
    ("", "oom_full"),
])
def test_a_notebooks_progress_without_an_epoch_is_the_evaluation(after: str, expected: str) -> None:
    assert first_id(_NB_TRAIN + after + PHASE_MESSAGES[0] + "\n") == expected


@pytest.mark.parametrize(("words", "expected"), [
    ("RuntimeError: CUDA error: out of memory\nSetting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True fixed it.",
     "oom_fragmentation"),
    ("RuntimeError: CUDA error: out of memory\nWith max_split_size_mb:128 the OOM is gone.", "oom_fragmentation"),
    ("RuntimeError: CUDA error: out of memory\nexpandable_segments:True did not help, still OOM.", "oom_full"),
    ("RuntimeError: CUDA error: out of memory\nI tried PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True but it doesn't "
     "work.", "oom_full"),
])
def test_the_fragmentation_fix_that_worked_names_the_kind(words: str, expected: str) -> None:
    assert first_id(words + "\n") == expected


# -- the person's words: a failure placed in a phase, the host's memory in words ----------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("The following error occurred when saving the checkpoint.\n"
     "  5%|▍         | 200/4000 [1:11:27<22:23:04, 21.68s/it]\n"
     "E0613 07:54:22.195000 1802 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed "
     "(exitcode: -9) local_rank: 3 (pid: 18049) of binary: /usr/bin/python3\n", "oom_at_save"),
    ("Training finishes, but the process got killed when it tries to save the model.\n", "oom_at_save"),
    ("Full fine-tuning trains, but the script crashes when saving the first checkpoint due to insufficient CPU RAM.\n",
     "oom_at_save"),
    ("保存模型时内存一直涨，最后超出最大内存报错\n", "oom_at_save"),
    ("The error happens during evaluation:\n" + "RuntimeError: CUDA error: out of memory\n", "oom_at_eval"),
    ("It always crashes at the validation step with this:\n" + "torch.cuda.OutOfMemoryError: CUDA out of memory.\n",
     "oom_at_eval"),
])
def test_a_failure_the_person_places_in_a_phase(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize("text", [
    "The job was killed by the scheduler when it hit the time limit while saving.\n",
    "I killed the process while it was saving, by mistake.\n",
    "Saving works, but training crashes with:\nRuntimeError: CUDA error: out of memory\n",
])
def test_failures_that_are_no_host_oom_in_a_phase(text: str) -> None:
    assert first_id(text) not in ("oom_at_save", "oom_at_eval")


@pytest.mark.parametrize(("text", "expected"), [
    # the person's sentence names the error inside it
    ("When computing the BLEU score of the eval predictions I run into a CUDA OutOfMemoryError.\n", "oom_at_eval"),
    ("While exporting the merged model we hit torch.cuda.OutOfMemoryError every time.\n", "oom_at_save"),
    # the test script, the evaluation that went wrong
    ("I just run the test script, but get this error:\n" + PHASE_MESSAGES[0] + "\n", "oom_at_eval"),
    ("Training is done, but the evaluation step goes wrong with:\n" + NO_NUMBERS[6] + "\n", "oom_at_eval"),
    # Apple's GPU (MLX on Metal)
    ("Running the benchmark's evaluation fails with `[METAL] Command buffer execution failed: Insufficient Memory "
     "(00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)`.\n", "oom_at_eval"),
    # ROCm's TensorFlow driver
    ("E tensorflow/stream_executor/rocm/rocm_driver.cc:601] failed to allocate 7.35G (7889485824 bytes) from device: "
     "hipError_t(1002)\n", "oom_full"),
    # the person's words: holes, two jobs on one card
    (NO_NUMBERS[0] + "\nThe allocator cannot find a large enough contiguous block although plenty is free.\n",
     "oom_fragmentation"),
    (NO_NUMBERS[0] + "\nBoth jobs were scheduled onto the same two GPUs.\n", "oom_other_process"),
    (NO_NUMBERS[0] + "\nThe two servers share the same GPU.\n", "oom_other_process"),
])
def test_more_wordings_of_phase_and_kind(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize("text", [
    NO_NUMBERS[0] + "\nI run training and evaluation on the same GPU.\n",
    NO_NUMBERS[0] + "\nThe tensors are contiguous, I checked.\n",
])
def test_same_gpu_and_contiguous_alone_say_no_kind(text: str) -> None:
    assert first_id(text) == "oom_full"


@pytest.mark.parametrize(("text", "expected"), [
    # a notebook's earlier attempt still holds the memory until the process restarts
    ("After one OOM with a big batch, even the small batch that worked before runs out of memory, until I restart "
     "the kernel.\n", "oom_other_process"),
    # a server that died at start because another job filled the card
    ("The second server came up on a card another job had already filled and died with `RuntimeError: Not enough "
     "memory`.\n", "oom_other_process"),
    # resuming from a checkpoint is no save
    ("Resuming from the step-4000 checkpoint OOMs at once with a contiguous-allocation failure: heap fragmentation.\n",
     "oom_fragmentation"),
    # checkpointing (not gradient checkpointing) as the phase
    ("With FSDP, model checkpointing gathers everything on rank 0; it causes OOM after the first epoch, and with "
     "checkpointing disabled the memory error goes away.\n", "oom_at_save"),
    ("Saving the checkpoint takes so much RAM that the notebook dies.\n", "oom_at_save"),
])
def test_still_more_wordings(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize("text", [
    "Restarting the kernel does not help, it still runs out of memory at the first step.\n",
    # a restart tried without effect (neurips2019_intrus#2): the memory was not another process's
    "ResourceExhaustedError: OOM when allocating tensor with shape[512,769954]\nI have tried restarting the runtime "
    "many times without change.\n",
    "CUDA out of memory. I tried restarting the kernel, it still fails.\n",
    "RuntimeError: [enforce fail at alloc_cpu.cpp:83] DefaultCPUAllocator: not enough memory: you tried to allocate "
    "8589934592 bytes.\n",
    "With gradient checkpointing enabled it still goes OOM in the first step.\n",
])
def test_still_more_wordings_that_say_no_phase_nor_neighbour(text: str) -> None:
    assert first_id(text) not in ("oom_other_process", "oom_at_save", "oom_at_eval")


@pytest.mark.parametrize(("text", "expected"), [
    ("The card OOMs even though plenty of memory is cached by the allocator.\n", "oom_fragmentation"),
    ("It failed to allocate 1 GB although there was 2.3 GB free in the memory pool.\n", "oom_fragmentation"),
    ("Resuming from a **mid-run** checkpoint OOMs; the root cause is fragmentation seeded by the checkpoint load.\n",
     "oom_fragmentation"),
    # free on the card is no cache: the request may simply be larger than it
    ("It OOMs although nvidia-smi shows 6 GB free.\n", "oom_full"),
])
def test_memory_held_by_the_allocator_but_unusable(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    (NO_NUMBERS[0] + "\nIt turned out GPU 0 was already occupied by a colleague's notebook.\n", "oom_other_process"),
    (NO_NUMBERS[0] + "\nThe card is busy with an inference server.\n", "oom_other_process"),
    (NO_NUMBERS[0] + "\nThe GPU is in use by another container.\n", "oom_other_process"),
    (NO_NUMBERS[0] + "\nThe GPU is not used by anything else.\n", "oom_full"),
])
def test_a_card_said_to_be_taken(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize(("line", "kind"), [
    # the paste lost the card's total; the cache alone held the request
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. Of the allocated memory 30.10 GiB is "
     "allocated by PyTorch, and 3.50 GiB is reserved by PyTorch but unallocated.", oom.FRAGMENTATION),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. Of the allocated memory 30.10 GiB is "
     "allocated by PyTorch, and 300.00 MiB is reserved by PyTorch but unallocated.", oom.UNKNOWN),
])
def test_a_cache_that_held_the_request_without_the_cards_total(line: str, kind: str) -> None:
    report = oom.parse_oom(line)
    assert report is not None and report.kind == kind


@pytest.mark.parametrize(("text", "expected"), [
    ("I get CUDA out of memory because another process is using the GPU.\n", "oom_other_process"),
    ("We hit CUDA error: out of memory, caused by memory fragmentation after long sequences.\n", "oom_fragmentation"),
    ("RuntimeError: CUDA error: out of memory (another process?)\n", "oom_full"),
])
def test_the_cause_in_the_sentence_that_names_the_oom(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    # sample images generated during training: the run's evaluation
    ("\ngenerating sample images at step / サンプル画像生成 ステップ: 500\n" + PHASE_MESSAGES[1] + "\n", "oom_at_eval"),
    (plain(frame("/home/me/sd-scripts/train_network.py", "train", "self.sample_images(accelerator, args, epoch)"),
           frame("/home/me/sd-scripts/library/train_util.py", "sample_images_common", "image = pipeline(prompt)"))
     + PHASE_MESSAGES[3] + "\n", "oom_at_eval"),
    (plain(frame("/home/me/train_dreambooth_lora.py", "main", "images = log_validation(pipeline, args, accelerator)"),
           frame(SITE + "diffusers/pipelines/pipeline_utils.py", "__call__", "latents = self.vae.decode(latents)"))
     + PHASE_MESSAGES[3] + "\n", "oom_at_eval"),
    # vLLM could not fit its KV cache: the card was short of memory
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
     "the engine.\n", "oom_full"),
])
def test_samples_during_training_and_a_kv_cache_that_does_not_fit(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize(("words", "expected"), [
    ("Before I even start the script, nvidia-smi shows 10 GB used on GPU 0.", "oom_other_process"),
    ("nvidia-smi says 23 GB is in use and nothing is running.", "oom_other_process"),
    ("Before training I checked the batch size twice.", "oom_full"),
    ("Nothing else is running and my script uses all 24 GB by itself.", "oom_full"),
])
def test_memory_held_before_the_run_starts(words: str, expected: str) -> None:
    assert first_id(_BARE + words + "\n") == expected


_KERAS = ("Epoch 1/10\n1875/1875 [==============================] - 41s 21ms/step - loss: 0.4121 - accuracy: 0.8712 - "
          "val_loss: 0.3012 - val_accuracy: 0.9011\nEpoch 2/10\n")


@pytest.mark.parametrize(("text", "expected"), [
    # the epoch's steps all done, its closing line not printed yet: Keras is validating
    (_KERAS + "1875/1875 [==============================] - ETA: 0s - loss: 0.2817 - accuracy: 0.9120\n", "oom_at_eval"),
    # mid-epoch
    (_KERAS + " 912/1875 [=============>................] - ETA: 19s - loss: 0.2817 - accuracy: 0.9120\n", "oom_full"),
    # no validation configured: the epoch's end is no evaluation
    ("Epoch 1/10\n1875/1875 [==============================] - ETA: 0s - loss: 0.2817 - accuracy: 0.9120\n",
     "oom_full"),
])
def test_keras_validating_at_the_epochs_end(text: str, expected: str) -> None:
    assert first_id(text + NO_NUMBERS[6] + "\n") == expected


@pytest.mark.parametrize(("config", "step", "expected"), [
    ("--eval_strategy epoch --save_strategy no --num_train_epochs 4\n", 500, "oom_at_eval"),
    ("evaluation_strategy: epoch\nsave_strategy: epoch\nnum_train_epochs: 4\n", 1000, "oom_at_eval"),
    ("save_strategy=epoch,\neval_strategy=no,\nnum_train_epochs=4,\n", 1500, "oom_at_save"),
    ("--eval_strategy epoch --num_train_epochs 4\n", 730, "oom_full"),
])
def test_the_step_it_stopped_at_against_an_epochs_length(config: str, step: int, expected: str) -> None:
    assert first_id(config + bar(step - 1) + bar(step) + PHASE_MESSAGES[1] + "\n") == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("Saving model checkpoint to out/checkpoint-500\nOSError: [Errno 12] Cannot allocate memory\n", "oom_at_save"),
    ("OSError: [Errno 12] Cannot allocate memory\n", "exception"),
])
def test_the_hosts_cannot_allocate_is_no_gpu_oom(text: str, expected: str) -> None:
    assert first_id(text) == expected


def summary(allocated: int, reserved: int, non_releasable: int) -> str:
    """torch.cuda.memory_summary()'s table, its current usage column in MiB."""
    return ("|===========================================================================|\n"
            "|                  PyTorch CUDA memory summary, device ID 0                 |\n"
            "|---------------------------------------------------------------------------|\n"
            "|            CUDA OOMs: 1            |        cudaMalloc retries: 4         |\n"
            "|===========================================================================|\n"
            "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n"
            "|---------------------------------------------------------------------------|\n"
            f"| Allocated memory      | {allocated:>6} MiB | {allocated + 900:>6} MiB |  12345 GiB |  12330 GiB |\n"
            f"| Active memory         | {allocated:>6} MiB | {allocated + 900:>6} MiB |  12345 GiB |  12330 GiB |\n"
            f"| GPU reserved memory   | {reserved:>6} MiB | {reserved:>6} MiB |  40960 MiB |      0 B   |\n"
            f"| Non-releasable memory | {non_releasable:>6} MiB | {non_releasable + 100:>6} MiB |   9999 GiB |   9990 GiB |\n")


@pytest.mark.parametrize(("table", "expected"), [
    (summary(14100, 22800, 7900), "oom_fragmentation"),
    (summary(21900, 22800, 600), "oom_full"),
])
def test_pytorchs_memory_summary_names_the_kind(table: str, expected: str) -> None:
    assert first_id("torch.cuda.OutOfMemoryError: CUDA out of memory.\n" + table) == expected


def test_a_metrics_path_is_no_status() -> None:
    text = "wandb: eval/runtime 20.1\nwandb: eval/samples_per_second 24.9\n" + bar(400) + PHASE_MESSAGES[1] + "\n"
    assert first_id(text) == "oom_full"


_COLAB_TOP = (
    "OutOfMemoryError                          Traceback (most recent call last)\n"
    "<ipython-input-14-3435b262f1ae> in <cell line: 1>()\n----> 1 trainer.train()\n\n"
    "/usr/local/lib/python3.10/dist-packages/transformers/trainer.py in train(self, resume_from_checkpoint, trial, "
    "ignore_keys_for_eval, **kwargs)\n"
    "   1553             hf_hub_utils.enable_progress_bars()\n   1554         else:\n"
    "-> 1555             return inner_training_loop(\n   1556                 args=args,\n\n"
    "/usr/local/lib/python3.10/dist-packages/transformers/trainer.py in _inner_training_loop(self, batch_size, args, "
    "resume_from_checkpoint, trial, ignore_keys_for_eval)\n"
    "   1928 \n-> 1929                 self._maybe_log_save_evaluate(tr_loss, model, trial, epoch, ignore_keys_for_eval)\n"
    "   1930             else:\n\n"
    "/usr/local/lib/python3.10/dist-packages/transformers/trainer.py in _maybe_log_save_evaluate(self, tr_loss, model, "
    "trial, epoch, ignore_keys_for_eval)\n")


@pytest.mark.parametrize(("inner", "expected"), [
    ("   2290         if self.control.should_save:\n-> 2291             self._save_checkpoint(model, trial, "
     "metrics=metrics)\n   2292             self.control = self.callback_handler.on_save(self.args, self.state)\n\n"
     "11 frames\n", "oom_at_save"),
    ("   2252         if self.control.should_evaluate:\n-> 2253             metrics = self.evaluate(ignore_keys="
     "ignore_keys_for_eval)\n\n9 frames\n", "oom_at_eval"),
])
def test_colabs_collapsed_frames(inner: str, expected: str) -> None:
    """Colab folds the inner frames (`11 frames`): the last frame shown calls into the phase."""
    assert first_id(_COLAB_TOP + inner + "/usr/local/lib/python3.10/dist-packages/torch/serialization.py in "
                    "_save(obj, zip_file, pickle_module, pickle_protocol)\n\nOutOfMemoryError: CUDA out of memory. "
                    "Tried to allocate 64.00 MiB (GPU 0; 14.75 GiB total capacity; 13.62 GiB already allocated; "
                    "10.81 MiB free; 13.86 GiB reserved in total by PyTorch)\n"
                    if expected == "oom_at_save" else
                    _COLAB_TOP + inner + "OutOfMemoryError: CUDA out of memory.\n") == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("在验证阶段报错 CUDA out of memory\n", "oom_at_eval"),
    ("保存模型的时候出现 torch.cuda.OutOfMemoryError\n", "oom_at_save"),
])
def test_a_chinese_sentence_that_names_the_error(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("INFO:tensorflow:Saving checkpoints for 22000 into /tmp/model/model.ckpt.\n"
     "but the evaluation that follows goes wrong with this:\n" + NO_NUMBERS[6] + "\n", "oom_at_eval"),
    ("***** Running Evaluation *****\n  Num examples = 500\n"
     "The eval finishes; it is the checkpoint save right after it that runs out of memory:\n" + PHASE_MESSAGES[2] + "\n",
     "oom_at_save"),
    # words before the log do not overrule the log's last status
    ("It fails during evaluation, I think.\nSaving model checkpoint to out/checkpoint-500\n" + PHASE_MESSAGES[2] + "\n",
     "oom_at_save"),
])
def test_the_persons_words_after_the_logs_status(text: str, expected: str) -> None:
    assert first_id(text) == expected


def test_a_phase_named_in_a_path_is_no_phase() -> None:
    text = ("When I run the evaluation script:\nmodel_path=../checkpoints/ar-en_last\n"
            "python test.py --model_path $model_path\n"
            "with model_path=../checkpoints/ar-en_last it always says \"RuntimeError: CUDA out of memory. Tried to "
            "allocate 2.10 GiB (GPU 0; 31.75 GiB total capacity; 28.10 GiB already allocated; 1.20 GiB free; 28.20 GiB "
            "reserved in total by PyTorch)\"\n")
    assert first_id(text) == "oom_at_eval"


@pytest.mark.parametrize("text", [
    "E local_client.cc:672] Execution of replica 0 failed: Resource exhausted: Out\nof memory while trying to allocate "
    "5520758552 bytes.\n",
    "RuntimeError: CUDA out\nof memory. Tried to allocate 20.00 MiB\n",
    "torch.cuda.OutOfMemory\nError: CUDA out of memory.\n",
])
def test_an_oom_phrase_cut_by_a_wrap_is_read(text: str) -> None:
    assert first_id(text) == "oom_full"


def test_two_unrelated_lines_make_no_oom() -> None:
    assert not first_id("We ran out\nof patience with the slow loader.\n").startswith("oom")


@pytest.mark.parametrize(("text", "expected"), [
    (_BARE + "Setting per_device_eval_batch_size=1 and eval_accumulation_steps=4 fixed the OOM.\n", "oom_at_eval"),
    (_BARE + "save_only_model=True made the OOM go away.\n", "oom_at_save"),
])
def test_the_phases_own_setting_named_in_the_fix(text: str, expected: str) -> None:
    assert first_id(text) == expected


def test_an_oom_while_the_process_group_starts_is_another_process() -> None:
    """Every rank makes its CUDA context on the first card when none set its device: the siblings fill it."""
    text = plain(frame("/home/me/train.py", "main", "dist.init_process_group(backend='nccl')"),
                 frame(SITE + "torch/distributed/distributed_c10d.py", "init_process_group",
                       "default_pg, _ = _new_process_group_helper("),
                 frame(SITE + "torch/distributed/distributed_c10d.py", "_new_process_group_helper",
                       "backend_class = ProcessGroupNCCL(backend_prefix_store, group_rank, group_size, pg_options)")) + \
        "RuntimeError: CUDA error: out of memory\n"
    assert first_id(text) == "oom_other_process"
