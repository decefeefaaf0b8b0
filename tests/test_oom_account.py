"""Issue 23: an OOM's kind from the text's memory account, numbers outside the OOM's own message: what the
framework could get at start, and what the card's tables say is held and by whom.

Quoted lines come from dev-learn records of tests/data/real (source in a comment); the others are built from the
same pattern with other cards, sizes and frameworks' wordings, to show the reading is general; the negatives are
the program's own growth and healthy logs.
"""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def first_id(text: str) -> str:
    """The id of the doctor's first item for a pasted text ('' when it finds nothing)."""
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


def tf_device(mib: int, name: str = "GeForce RTX 2080 Ti") -> str:
    return ("2021-03-02 10:00:00.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1418] Created TensorFlow "
            f"device (/job:localhost/replica:0/task:0/device:GPU:0 with {mib} MB memory) -> physical GPU (device: 0, "
            f"name: {name}, pci bus id: 0000:01:00.0, compute capability: 7.5)\n")


def refused(size: str, count: int, driver: str = "cuda", error: str = "CUDA_ERROR_OUT_OF_MEMORY: out of memory") -> str:
    return (f"2021-03-02 10:00:01.000000: E tensorflow/stream_executor/{driver}/{driver}_driver.cc:806] failed to "
            f"allocate {size} ({count} bytes) from device: {error}\n")


# -- the pool TensorFlow sized at start, refused ---------------------------------------------------------


@pytest.mark.parametrize("text", [
    # https://github.com/ROCm/tensorflow-upstream/issues/82: ROCm, the pool and its shrinking retries refused
    ("2019-01-08 19:06:10.822532: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1189] Created TensorFlow device "
    "(/job:localhost/replica:0/task:0/device:GPU:0 with 7524 MB memory) -> physical GPU (device: 0, name: Vega 10 "
    "XL/XT [Radeon RX Vega 56/64], pci bus id: 0000:03:00.0)\n"
    "2019-01-08 19:06:11.303639: E tensorflow/stream_executor/rocm/rocm_driver.cc:601] failed to allocate 7.35G "
    "(7889485824 bytes) from device: hipError_t(1002)\n"
    "2019-01-08 19:06:11.303736: E tensorflow/stream_executor/rocm/rocm_driver.cc:601] failed to allocate 6.61G "
    "(7100536832 bytes) from device: hipError_t(1002)\n"),
    # CUDA, another card: the first allocation is the whole pool
    tf_device(10413) + refused("10.17G", 10918821888),
    # a pool a little smaller than the device's figure (TensorFlow rounds it), then training never starts
    tf_device(30512, "Tesla V100-SXM2-32GB") + refused("29.50G", 31675383808) + refused("26.55G", 28507845427) +
    "Traceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n    model.fit(x, y)\n"
    "tensorflow.python.framework.errors_impl.InternalError: Failed copying input tensor to GPU",
])
def test_the_pool_sized_at_start_refused_is_another_process(text: str) -> None:
    assert first_id(text) == "oom_other_process"


@pytest.mark.parametrize("text", [
    # allow_growth: a later, smaller allocation refused is the program's own growth filling the card
    tf_device(10413) + "Epoch 1/10\n 12/500 [..............................] - ETA: 2:01 - loss: 2.3012\n" +
    refused("256.00M", 268435456),
    # the driver's line with no pool report before it
    refused("7.35G", 7889485824),
])
def test_a_refused_allocation_that_is_not_the_pool_is_no_neighbour(text: str) -> None:
    assert first_id(text) == "oom_full"


def test_a_device_report_alone_is_healthy() -> None:
    text = tf_device(10413) + "Epoch 1/2\n500/500 [==============================] - 41s 82ms/step - loss: 0.4120\n" \
        "Epoch 2/2\n500/500 [==============================] - 40s 80ms/step - loss: 0.3011\n"
    assert first_id(text) != "oom_other_process" and not first_id(text).startswith("oom")


# -- the phase the person's words name, read as they mean it -----------------------------------------------

_MESSAGE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.20 GiB. GPU 0 has a total capacity of "
            "23.65 GiB of which 800.00 MiB is free. Including non-PyTorch memory, this process has 22.85 GiB memory in "
            "use. Of the allocated memory 22.10 GiB is allocated by PyTorch, and 300.00 MiB is reserved by PyTorch but "
            "unallocated.")


@pytest.mark.parametrize("words", [
    "Training crashes after 200 steps. I don't run any evaluation.",
    "The run crashes at step 3000, without evaluation or saving in between.",
    "It fails in the first epoch; evaluation is disabled (eval_strategy=no).",
    "Training errors out, it never even gets to the evaluation.",
    "I load the checkpoint to resume training and it fails:",
    "The job crashed while resuming from checkpoint-1500.",
    "OOM in the training loop, we do not save checkpoints at all.",
])
def test_a_phase_named_as_not_reached_is_not_the_phase(words: str) -> None:
    assert first_id(words + "\n" + _MESSAGE) == "oom_full"


@pytest.mark.parametrize(("words", "expected"), [
    # the sentence that introduces the pasted error names where it struck
    ("Running the evaluation script gives me:", "oom_at_eval"),
    ("Training runs fine but as soon as the first evaluation starts I get:", "oom_at_eval"),
    ("When trainer.predict() runs on the test split, this is what I see:", "oom_at_eval"),
    ("After the last epoch, while it writes the final checkpoint, I get:", "oom_at_save"),
    ("训练没问题，但是开始验证的时候出现:", "oom_at_eval"),
    # a failure and a phase in one sentence still count, a negated one beside them does not
    ("It crashes during the validation step of epoch 1.", "oom_at_eval"),
    ("Saving works fine, but it crashes in evaluation.", "oom_at_eval"),
])
def test_the_sentence_before_the_error_names_its_phase(words: str, expected: str) -> None:
    assert first_id(words + "\n" + _MESSAGE) == expected


@pytest.mark.parametrize("words", [
    # a colon that introduces something other than the error: a config, a command, the training script
    "My evaluation config:\neval_steps: 500\nper_device_eval_batch_size: 8",
    "Here is how I save the model:\nmodel.save_pretrained('out')",
    "Evaluation settings:\n\nThe training then crashes after 300 steps with",
])
def test_a_colon_that_introduces_something_else_names_no_phase(words: str) -> None:
    assert first_id(words + "\n" + _MESSAGE) == "oom_full"


# -- who else holds the card, in the person's words ---------------------------------------------------------

_BARE = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB\n"


@pytest.mark.parametrize("words", [
    "Turns out my jupyter notebook was still holding the memory.",
    "The Colab runtime still holds 14 GB from the previous cell that failed.",
    "It was Xorg and chrome taking 3GB of my 8GB card.",
    "Firefox with hardware acceleration was hogging 2 GB of VRAM.",
    "There's another training running on the same GPU.",
])
def test_a_holder_outside_the_run_is_another_process(words: str) -> None:
    assert first_id(_BARE + words) == "oom_other_process"
    assert first_id(words + "\n" + _BARE) == "oom_other_process"


@pytest.mark.parametrize("words", [
    "My desktop uses a 3090 with 24GB of memory.",
    "My notebook uses 20GB of GPU memory during training.",
    "The kernel still crashes with the same error when I lower the batch.",
    "I closed chrome but it still runs out of memory.",
    "No browser or other program is using the GPU.",
    "The session still uses gradient checkpointing and the memory is full.",
    "It's not chrome taking the memory, I checked.",
    "No other training is running on this GPU.",
])
def test_the_run_itself_or_a_holder_ruled_out_is_no_neighbour(words: str) -> None:
    assert first_id(_BARE + words) == "oom_full"


# -- the phase from where the failing call is ----------------------------------------------------------------


def frames(*calls: tuple[str, str, str]) -> str:
    """A traceback with frames (path, function, the line's code), the OOM message after them."""
    lines = ["Traceback (most recent call last):"]
    for path, func, code in calls:
        lines += [f'  File "{path}", line 10, in {func}', f"    {code}"]
    return "\n".join(lines) + "\n" + _MESSAGE


_HF = "/opt/conda/lib/python3.10/site-packages/transformers/trainer.py"
_TORCH = "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py"


@pytest.mark.parametrize("text", [
    # a model's input check inside the Trainer's training step
    frames(("train.py", "<module>", "trainer.train()"),
           (_HF, "_inner_training_loop", "tr_loss_step = self.training_step(model, inputs)"),
           (_HF, "training_step", "loss = self.compute_loss(model, inputs)"),
           ("/opt/conda/lib/python3.10/site-packages/mymodel/modeling.py", "forward", "self._validate_inputs(ids)"),
           ("/opt/conda/lib/python3.10/site-packages/mymodel/modeling.py", "_validate_inputs", "mask = ids.ne(0)")),
    # a diffusion step's noise prediction
    frames(("train.py", "<module>", "loss = train_step(model, batch)"),
           ("train.py", "train_step", "pred = model.predict_noise(x_t, t)"),
           ("model.py", "predict_noise", "return self.unet(x_t, t)")),
    # an autograd function keeping its inputs for the backward pass
    frames(("train.py", "<module>", "loss = train_step(model, batch)"),
           ("train.py", "train_step", "out = Fn.apply(x)"),
           ("ops.py", "forward", "ctx.save_for_backward(x, y)")),
])
def test_a_helper_inside_a_training_step_is_the_training(text: str) -> None:
    assert first_id(text) == "oom_full"


@pytest.mark.parametrize(("text", "expected"), [
    # the training loop runs the evaluation beside its steps
    (frames(("train.py", "<module>", "trainer.train()"),
            (_HF, "_inner_training_loop", "self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch)"),
            (_HF, "_maybe_log_save_evaluate", "metrics = self.evaluate(ignore_keys=ignore_keys_for_eval)"),
            (_HF, "evaluate", "output = eval_loop(eval_dataloader)"),
            (_TORCH, "_call_impl", "return forward_call(*args, **kwargs)")), "oom_at_eval"),
    # and its saves
    (frames(("train.py", "<module>", "trainer.train()"),
            (_HF, "_inner_training_loop", "self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch)"),
            (_HF, "_maybe_log_save_evaluate", "self._save_checkpoint(model, trial)"),
            (_HF, "_save_checkpoint", "self.save_model(output_dir, _internal_call=True)")), "oom_at_save"),
])
def test_the_loops_evaluation_and_save_stay_theirs(text: str, expected: str) -> None:
    assert first_id(text) == expected


def test_an_evaluation_that_printed_its_results_is_over() -> None:
    text = ("***** Running Evaluation *****\n  Num examples = 500\n  Batch size = 8\n"
            "100%|██████████| 63/63 [00:20<00:00,  3.1it/s]\n"
            "{'eval_loss': 1.2, 'eval_runtime': 20.1, 'eval_samples_per_second': 24.8, 'epoch': 1.0}\n"
            " 51%|█████     | 510/1000 [10:00<09:00,  1.1s/it]\n" + _MESSAGE)
    assert first_id(text) == "oom_full"
    running = text.split("{'eval_loss'")[0] + " 40%|████      | 25/63 [00:08<00:12,  3.1it/s]\n" + _MESSAGE
    assert first_id(running) == "oom_at_eval"


# -- the phase's words inside Chinese text; the shell's export --------------------------------------------------


@pytest.mark.parametrize(("words", "expected"), [
    # https://github.com/SAI990323/TALLRec/issues/51: an English word inside Chinese, no space around it
    ("作者你好，我运行你的evaluate，使用的是你提供的book test的数据，我发现会出现显存爆掉的问题", "oom_at_eval"),
    ("用do_predict跑测试集的时候显存不足", "oom_at_eval"),
    ("模型merge的时候显存不够", "oom_at_save"),
    ("跑validation时爆显存", "oom_at_eval"),
    # the same words with spaces, as before
    ("I run evaluate on the test data and the GPU runs out of memory", "oom_at_eval"),
])
def test_english_phase_words_inside_chinese(words: str, expected: str) -> None:
    assert first_id(words) == expected


@pytest.mark.parametrize(("words", "expected"), [
    # https://github.com/PeterGriffinJin/Search-R1/issues/112: the shell's export sets the allocator, it writes no model
    (("After a few training steps, specifically at step 4 during `loss.backward()` for the actor, I encounter a CUDA "
     "out-of-memory error. When I enable expandable segments by setting `export PYTORCH_CUDA_ALLOC_CONF="
     "\"expandable_segments:True\"`, the code runs fine without errors.\nIt seems that something in the code is "
     "causing memory fragmentation, but I'm not sure where this happens."), "oom_fragmentation"),
    ("I run `export CUDA_VISIBLE_DEVICES=1` first and it still goes out of memory in the first step.", "oom_full"),
    ("export HF_HOME=/data/hf and then training runs out of memory", "oom_full"),
    # a model's export stays a save
    ("Exporting the merged model runs out of GPU memory.", "oom_at_save"),
    ("When I export to GGUF the card goes OOM.", "oom_at_save"),
])
def test_the_shells_export_is_no_save(words: str, expected: str) -> None:
    assert first_id(words) == expected


# -- a request beyond all the memory the allocator could reach ---------------------------------------------------


def old_message(requested: str, total: str, allocated: str, free: str, reserved: str) -> str:
    return (f"RuntimeError: CUDA out of memory. Tried to allocate {requested} (GPU 0; {total} total capacity; "
            f"{allocated} already allocated; {free} free; {reserved} reserved in total by PyTorch) If reserved memory "
            "is >> allocated memory try setting max_split_size_mb to avoid fragmentation.")


@pytest.mark.parametrize("line", [
    # https://github.com/hpcaitech/FastFold/issues/37: 77 GiB asked of a 39 GiB card, 13.7 GiB of the cache unused
    old_message("77.40 GiB", "38.61 GiB", "13.21 GiB", "8.81 GiB", "26.90 GiB"),
    old_message("30.00 GiB", "23.69 GiB", "10.00 GiB", "5.00 GiB", "17.00 GiB"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 120.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
    "of which 20.00 GiB is free. Including non-PyTorch memory, this process has 59.10 GiB memory in use. Of the "
    "allocated memory 30.00 GiB is allocated by PyTorch, and 28.50 GiB is reserved by PyTorch but unallocated."),
])
def test_a_request_beyond_the_cache_and_the_free_memory_is_full(line: str) -> None:
    assert first_id(line) == "oom_full"


@pytest.mark.parametrize("line", [
    # the unused cache held the request (a dev record: 40.69 GiB unused, 35.60 GiB asked)
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 35.60 GiB. GPU 0 has a total capacity of 79.33 GiB "
    "of which 26.16 GiB is free. Of the allocated memory 11.97 GiB is allocated by PyTorch, and 40.69 GiB is reserved "
    "by PyTorch but unallocated."),
    # the unused cache and the free memory together nearly held it
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. GPU 0 has a total capacity of 31.47 GiB "
    "of which 12.73 GiB is free. Including non-PyTorch memory, this process has 18.73 GiB memory in use. Of the "
    "allocated memory 9.08 GiB is allocated by PyTorch, and 9.35 GiB is reserved by PyTorch but unallocated."),
])
def test_a_request_the_cache_could_nearly_serve_stays_fragmentation(line: str) -> None:
    assert first_id(line) == "oom_fragmentation"


# -- the person's own numbers, and every naming of the OOM in a line ----------------------------------------------


@pytest.mark.parametrize("words", [
    # https://github.com/nvidia-cosmos/cosmos-rl/pull/562: the fix's title is negated, the OOM it fixes is not; the
    # cache's numbers in words
    ("**Fix CUDA memory fragmentation OOM after checkpoint resume**: `optimizer.load_state_dict()` creates temporary GPU "
    "tensors during loading, causing CUDA's caching allocator to reserve significantly more memory than actually needed "
    "(~83 GB reserved vs ~49 GB allocated). This left insufficient free memory for the first training step, causing OOM "
    "during FSDP all-gather."),
    "When it goes OOM, torch.cuda.memory_reserved() says 22 GB reserved but only 10.5 GB allocated.",
    "The profiler shows reserved: 31.2G and allocated: 18.0G right before the out of memory error.",
])
def test_the_persons_numbers_for_an_unused_cache_are_fragmentation(words: str) -> None:
    assert first_id(words) == "oom_fragmentation"


@pytest.mark.parametrize("words", [
    "It runs out of memory with 20 GB reserved and 19 GB allocated on the card.",
    "I reserved 2 GPUs with 80 GB each and it still runs out of memory.",
])
def test_the_persons_numbers_for_a_used_cache_say_no_fragmentation(words: str) -> None:
    assert first_id(words) == "oom_full"


@pytest.mark.parametrize(("words", "expected"), [
    ("To avoid OOM I lowered the batch size to 1, but it still goes OOM at the first step.", "oom_full"),
    ("To avoid OOM I use gradient checkpointing.", ""),
    # loading a state dict is no save
    ("optimizer.load_state_dict() runs out of GPU memory when I resume training.", "oom_full"),
])
def test_every_naming_of_the_oom_counts(words: str, expected: str) -> None:
    assert first_id(words) == expected


# -- the host's OOM killer in Chinese, and a step the person tried --------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    # https://github.com/hiyouga/LlamaFactory/issues/1631
    (("1. 下载ChatGLM3 6B模型，运行模型，确保模型文件无问题。\n2. 使用这个项目对上述模型做QLora微调（4bit）, 微调成功完成\n"
     "3. 使用export_model.py尝试导出模型。\n在模型载入进度条100%后不久，程序OOM被系统kill"), "oom_at_save"),
    ("训练完成后尝试合并权重，进程OOM被系统杀掉了", "oom_at_save"),
    ("尝试验证模型的时候，程序OOM被系统kill", "oom_at_eval"),
    ("Training went fine; when I tried to merge the adapter the process was OOM, killed by the system.", "oom_at_save"),
])
def test_the_systems_oom_killer_in_a_phase(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize("text", [
    "尝试了很多方法，训练时显存不足",
    "我尝试了调小batch size，还是显存不足",
])
def test_tried_fixes_name_no_phase(text: str) -> None:
    assert first_id(text) == "oom_full"


# -- the remedy that worked names the kind ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    (_BARE + "I fixed it by setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.", "oom_fragmentation"),
    (_BARE + "Solved by adding max_split_size_mb:512 to PYTORCH_CUDA_ALLOC_CONF.", "oom_fragmentation"),
    (_BARE + "With expandable_segments:True there is no OOM anymore.", "oom_fragmentation"),
    (_BARE + "After setting expandable_segments the training succeeded.", "oom_fragmentation"),
    (("W tensorflow/core/common_runtime/bfc_allocator.cc:501] Allocator (GPU_0_bfc) ran out of memory trying to allocate "
     "34.10MiB (rounded to 35758080)\nPassing TF_GPU_ALLOCATOR=cuda_malloc_async made the error go away."),
     "oom_fragmentation"),
    (_BARE + "Rebooting the machine fixed it.", "oom_other_process"),
    (_BARE + "After a reboot it runs fine.", "oom_other_process"),
    (_BARE + "I killed the old process and now it works.", "oom_other_process"),
    (_BARE + "Adding torch.cuda.set_device(local_rank) before creating the model fixed it.", "oom_other_process"),
])
def test_the_remedy_that_worked_names_the_kind(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize("words", [
    "I tried expandable_segments:True but it still fails.",
    "expandable_segments didn't fix it.",
    "Rebooting did not help.",
    "Reducing the batch size to 4 fixed it.",
    "I killed the old process, it still runs out of memory.",
])
def test_a_remedy_that_failed_or_a_plain_one_names_no_kind(words: str) -> None:
    assert first_id(_BARE + words) == "oom_full"


# -- an inference server's memory check at start ----------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    # vLLM's check before it allocates: 19.8 GiB of the card held by others
    ("ValueError: Free memory on device (59.32/79.15 GiB) on startup is less than desired GPU memory utilization (0.9, "
    "71.24 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."),
    ("(EngineCore_DP0 pid=6940) ValueError: Free memory on device cuda:0 (12.10/22.05 GiB) on startup is less than "
    "desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
    "processes."),
    # SGLang's
    ("RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
    "min_per_gpu_memory=10.5, local_gpu_memory=70.2, local_gpu_memory * 0.9 = 63.2"),
])
def test_a_servers_start_check_that_found_memory_held_is_another_process(text: str) -> None:
    assert first_id(text) == "oom_other_process"


def test_a_servers_start_check_on_a_free_card_is_no_neighbour() -> None:
    text = ("ValueError: Free memory on device (78.90/79.15 GiB) on startup is less than desired GPU memory utilization "
            "(0.999, 79.07 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    assert first_id(text) == "oom_full"


# -- the cause in Chinese, and English words inside it ---------------------------------------------------------------


@pytest.mark.parametrize(("words", "expected"), [
    ("感觉是显存fragmentation的问题", "oom_fragmentation"),
    ("设置PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True之后就解决了", "oom_fragmentation"),
    ("加了max_split_size_mb:128后正常运行", "oom_fragmentation"),
    ("重启服务器后就好了", "oom_other_process"),
    ("原来是显卡被another process占用了", "oom_other_process"),
    ("把之前的僵尸进程kill掉之后就正常了", "oom_other_process"),
    ("GPU0上有其他人在跑程序", "oom_other_process"),
    # several processes on every card: each rank made a context on each card (wave 22's LlamaFactory#5750, shortened)
    ("每张卡上面进程的数量=用了多少卡", "oom_other_process"),
    ("每张卡上都有8个进程", "oom_other_process"),
    ("每张卡一个进程，没有别的", "oom_full"),
    # a remedy that failed, or a plain one
    ("重启之后还是报错", "oom_full"),
    ("设置expandable_segments也没有解决", "oom_full"),
    ("把batch size调小之后就解决了", "oom_full"),
])
def test_the_cause_in_chinese(words: str, expected: str) -> None:
    assert first_id(_BARE + words) == expected


@pytest.mark.parametrize(("words", "expected"), [
    ("跑eval的时候memory不够了", "oom_at_eval"),
    ("训练正常，但是做evaluation的时候GPU memory不够", "oom_at_eval"),
    ("save checkpoint的时候OOM了", "oom_at_save"),
    ("训练的时候GPU memory不足", "oom_full"),
])
def test_memory_in_english_inside_chinese(words: str, expected: str) -> None:
    assert first_id(words) == expected


@pytest.mark.parametrize(("words", "expected"), [
    ("做evaluation时报error，日志如下", "oom_at_eval"),
    ("保存checkpoint的时候crash了", "oom_at_save"),
    ("训练到第200步crash了", "oom_full"),
])
def test_a_failure_in_english_inside_chinese(words: str, expected: str) -> None:
    assert first_id(words + "\n" + _MESSAGE) == expected


@pytest.mark.parametrize("words", [
    # not knowing why, a change before 'and', 'not only': no negation of the phase
    "I have no idea why the evaluation runs out of memory.",
    "I disabled gradient checkpointing and the evaluation runs out of memory.",
    "I have not changed anything and evaluation still runs out of memory.",
    "Not only training, the evaluation runs out of memory too.",
    "I don't know why the validation step goes OOM.",
])
def test_words_near_a_phase_that_do_not_negate_it(words: str) -> None:
    assert first_id(words + "\n" + _MESSAGE) == "oom_at_eval"


def test_a_skipped_evaluation_is_no_phase() -> None:
    assert first_id("I skip the evaluation and it still goes out of memory in training.\n" + _MESSAGE) == "oom_full"


def test_a_phase_said_never_reached_is_no_status() -> None:
    text = "During training I get this error, evaluation is never reached:\n" + _MESSAGE
    assert first_id(text) == "oom_full"


@pytest.mark.parametrize(("words", "expected"), [
    ("Chrome uses 300MB of VRAM, not much.", "oom_full"),
    ("Chrome was using 3.5 GB of VRAM.", "oom_other_process"),
])
def test_a_holder_of_little_is_no_neighbour(words: str, expected: str) -> None:
    assert first_id(_BARE + words) == expected


@pytest.mark.parametrize("words", [
    "Rebooting fixed the driver issue but now I get OOM.",
    "I call torch.cuda.set_device(rank) which works, but it goes OOM at step 5.",
    "重启之后驱动好了，但是还是显存不足",
])
def test_a_remedy_that_fixed_something_else_names_no_kind(words: str) -> None:
    assert first_id(_BARE + words) == "oom_full"


# -- nvidia-smi: stray contexts of the other ranks on the first card -------------------------------------------------


def smi(*rows: tuple[int, int, str, int]) -> str:
    head = ("+-----------------------------------------------------------------------------+\n"
            "| Processes:                                                                  |\n"
            "|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |\n"
            "|=============================================================================|\n")
    body = "".join(f"|    {gpu}   N/A  N/A     {pid:5d}      C   {name:<30}{mib:>6d}MiB |\n" for gpu, pid, name, mib in rows)
    return head + body + "+-----------------------------------------------------------------------------+\n"


_SHORT = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB"


def test_the_other_ranks_stray_contexts_on_the_first_card_are_other_processes() -> None:
    table = smi((0, 4101, "python", 30211), (0, 4102, "python", 517), (0, 4103, "python", 517), (0, 4104, "python", 517),
                (1, 4102, "python", 29800), (2, 4103, "python", 29800), (3, 4104, "python", 29800))
    assert first_id(table + _SHORT) == "oom_other_process"


@pytest.mark.parametrize("table", [
    # a desktop's few hundred MiB beside the run
    smi((0, 1201, "/usr/lib/xorg/Xorg", 310), (0, 1377, "/usr/bin/gnome-shell", 52), (0, 4101, "python", 22211)),
    # one process a card
    smi((0, 4101, "python", 30211), (1, 4102, "python", 29800)),
    # one stray context only
    smi((0, 4101, "python", 30211), (0, 4102, "python", 517), (1, 4102, "python", 29800)),
])
def test_the_run_beside_little_is_no_neighbour(table: str) -> None:
    assert first_id(table + _SHORT) == "oom_full"


@pytest.mark.parametrize(("text", "expected"), [
    # a custom step that runs a whole evaluation or save by name: that phase, inside the step too
    (frames(("train.py", "<module>", "train_step(model, batch, step)"),
            ("train.py", "train_step", "evaluate(model, val_loader)"),
            ("train.py", "evaluate", "out = model(x)")), "oom_at_eval"),
    (frames(("train.py", "<module>", "train_step(model, batch, step)"),
            ("train.py", "train_step", "save_checkpoint(model, path)"),
            ("train.py", "save_checkpoint", "torch.save(model.state_dict(), path)")), "oom_at_save"),
])
def test_a_whole_phase_called_inside_a_step_stays_that_phase(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize(("words", "expected"), [
    ("When I compute the metrics at the end of each epoch the GPU runs out of memory.", "oom_at_eval"),
    ("The OOM happens in compute_metrics, the logits are huge.", "oom_at_eval"),
    ("I log the training metrics every step and it runs out of memory at step 30.", "oom_full"),
])
def test_computing_the_metrics_is_the_evaluation(words: str, expected: str) -> None:
    assert first_id(words + "\n" + _MESSAGE) == expected


# -- fixing an OOM presupposes one ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("words", "expected"), [
    # https://github.com/tensorflow/tensorflow/pull/43850: a change that fixes OOMs the clients reported
    (("This change provide the capability to XLA to generate multiple heaps\n(i.e., temp buffers) with a size "
     "constraint on each heap to avoid Out-of-Memory\ndue to memory fragmentation. Note that larger allocations are "
     "more subject to\nthe effect of fragmentation.\n\nThis fixes some TF/XLA OOM issue our clients constantly "
     "reported without significant memory use size increase."), "oom_fragmentation"),
    ("How do I fix the OOM in the first training step?", "oom_full"),
    ("To avoid OOM I use gradient checkpointing.", ""),
])
def test_fixing_an_oom_says_it_happened(words: str, expected: str) -> None:
    assert first_id(words) == expected


# -- the person's account of the memory stands for the OOM no sentence names -------------------------------------------


@pytest.mark.parametrize(("words", "expected"), [
    ("After killing the training script, nvidia-smi still shows 15 GB used on GPU 0 even though nothing is running.",
     "oom_other_process"),
    (("torch.cuda.memory_reserved() reports 70 GB reserved while only 30 GB are allocated; memory fragmentation makes it "
     "grow every step."), "oom_fragmentation"),
    ("I fixed it by setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.", "oom_fragmentation"),
])
def test_an_account_of_the_memory_is_the_ooms_story(words: str, expected: str) -> None:
    assert first_id(words) == expected


_HEALTHY_LOG = ("{'loss': 1.2, 'learning_rate': 2e-05, 'epoch': 0.1}\n{'loss': 1.0, 'learning_rate': 2e-05, 'epoch': 0.2}\n"
                "{'loss': 0.8, 'learning_rate': 2e-05, 'epoch': 0.3}\n")


@pytest.mark.parametrize("words", [
    "Training runs on a shared cluster with other users.",
    "I set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
])
def test_words_beside_a_healthy_log_are_no_oom(words: str) -> None:
    assert not first_id(words + "\n" + _HEALTHY_LOG).startswith("oom")


@pytest.mark.parametrize("words", [
    "The GPU memory stays occupied after the process exits.",
    "After the crash the memory is never freed until I reboot.",
    "GPU memory is not released after I stop the training with Ctrl+C; nvidia-smi shows 20GB still in use.",
])
def test_memory_held_after_the_run_ended_is_another_process(words: str) -> None:
    assert first_id(words) == "oom_other_process"


def test_memory_used_after_a_restart_is_no_neighbour() -> None:
    text = _BARE + "After the crash the training restarted and the memory used is 20GB."
    assert first_id(text) == "oom_full"


@pytest.mark.parametrize("text", [
    _BARE + "nvidia-smi shows 15 GB used even though\nnothing is running on the GPU.",
    "nvidia-smi shows 15 GB used on GPU 0 even though\nnothing is running.",
])
def test_a_cause_hard_wrapped_over_lines_is_read_whole(text: str) -> None:
    assert first_id(text) == "oom_other_process"


def test_a_wrapped_sentence_that_is_no_account_of_memory_is_no_oom() -> None:
    assert first_id("Training runs on a cluster and\nwe share it with other users.") == ""


# -- memory running out in plain words -------------------------------------------------------------------------------


@pytest.mark.parametrize(("words", "expected"), [
    ("Saving the model after training crashes the Colab session (RAM fills up).", "oom_at_save"),
    ("merge_and_unload() eats all my RAM and the kernel dies.", "oom_at_save"),
    ("When I call model.save_pretrained the GPU memory spikes to 80GB and it crashes.", "oom_at_save"),
    ("Exporting to GGUF needs more memory than my machine has.", "oom_at_save"),
    ("Evaluation uses far more memory than training and the job dies at the first eval step.", "oom_at_eval"),
])
def test_memory_running_out_in_plain_words(words: str, expected: str) -> None:
    assert first_id(words) == expected


@pytest.mark.parametrize("words", [
    "The model uses more memory than I expected but training runs fine.",
    "GPU memory spikes at the start of each epoch and then settles.",
])
def test_memory_use_that_ends_in_no_failure_is_no_oom(words: str) -> None:
    assert not first_id(words + "\n" + _HEALTHY_LOG).startswith("oom")


# -- ranks and servers on the same card, in words ----------------------------------------------------------------------


@pytest.mark.parametrize("words", [
    "Every rank creates a CUDA context on cuda:0 and the first GPU goes OOM.",
    "GPU 0 has extra processes from the other ranks, each taking about 500MB, so it runs out of memory first.",
    "vLLM takes 90% of the GPU memory so the trainer on the same GPU runs out of memory.",
])
def test_ranks_and_servers_on_the_card_are_other_processes(words: str) -> None:
    assert first_id(words) == "oom_other_process"


@pytest.mark.parametrize("words", [
    "Each rank loads the model on its own GPU and every GPU runs out of memory.",
    "The two models share the same GPU in my script and it runs out of memory.",
])
def test_ranks_on_their_own_cards_or_one_scripts_models_are_no_neighbours(words: str) -> None:
    assert first_id(words) == "oom_full"


@pytest.mark.parametrize(("words", "expected"), [
    ("nvidia-smi shows 8 processes on every GPU.", "oom_other_process"),
    ("Each GPU has several python processes.", "oom_other_process"),
    ("nvidia-smi shows 1 process per GPU.", "oom_full"),
])
def test_several_processes_on_every_card_are_each_ranks_context_on_the_others(words: str, expected: str) -> None:
    """Every rank made a CUDA context on every card (no device set per rank): each card holds the others' processes."""
    assert first_id(_BARE + words) == expected
