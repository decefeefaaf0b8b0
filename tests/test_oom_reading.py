"""Issue 23: an OOM read the way a maintainer reads it: its numbers, wherever a paste wrapped them, say what held
the memory; where in the program it struck (frames, banners, the user's words) says which setting to change.

The quoted lines come from dev-split records of tests/data/real (source in a comment); the others are built
from the same pattern with other models, cards and numbers, to show the reading is general, and negatives
show that healthy text and other failures do not read as it.
"""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic import oom


def first_id(text: str) -> str:
    """The id of the doctor's first item for a pasted text ('' when it finds nothing)."""
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


def old_oom(requested: str, total: str, allocated: str, free: str, reserved: str) -> str:
    """PyTorch 1.x's message (before 2.1)."""
    return (f"RuntimeError: CUDA out of memory. Tried to allocate {requested} (GPU 0; {total} total capacity; "
            f"{allocated} already allocated; {free} free; {reserved} reserved in total by PyTorch)")


def new_oom(requested: str, total: str, free: str, allocated: str, spare: str) -> str:
    """PyTorch 2.x's message."""
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {requested}. GPU 0 has a total capacity "
            f"of {total} of which {free} is free. Of the allocated memory {allocated} is allocated by PyTorch, and "
            f"{spare} is reserved by PyTorch but unallocated.")


# -- the kind, from the numbers ------------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    # https://github.com/openai/jukebox/issues/145: 1.74 GiB unused in the cache of a 16 GB card, 1.94 GiB free,
    # a 2.02 GiB request
    "CUDA out of memory. Tried to allocate 2.02 GiB (GPU 0; 15.90 GiB total capacity; 11.43 GiB already "
    "allocated; 1.94 GiB free; 13.17 GiB reserved in total by PyTorch)",
    old_oom("8.80 GiB", "39.39 GiB", "30.10 GiB", "1.50 GiB", "37.50 GiB"),  # 7.40 GiB spare on 40 GB
    new_oom("9.50 GiB", "79.15 GiB", "1.50 GiB", "67.00 GiB", "8.50 GiB"),  # 8.50 GiB spare on 80 GB
])
def test_a_tenth_of_the_card_unused_in_the_cache_is_fragmentation(line: str) -> None:
    """The request is larger than the cache's unused blocks, but they are a tenth of the card (a full card's
    cache keeps under 5% unused) and with the free memory they held it: fragmentation, not a full card."""
    report = oom.parse_oom(line)
    assert report is not None and report.kind == oom.FRAGMENTATION
    assert first_id(line) == "oom_fragmentation"


@pytest.mark.parametrize("line", [
    # https://github.com/kaito-project/kaito/issues/976: 736.86 MiB unused in the cache, a 546 MiB request
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 546.00 MiB. GPU 0 has a total capacity of 15.77 GiB "
    "of which 514.19 MiB is free. Process 562167 has 15.25 GiB memory in use. Of the allocated memory 13.73 GiB is "
    "allocated by PyTorch, with 46.00 MiB allocated in private pools (e.g., CUDA Graphs), and 736.86 MiB is reserved "
    "by PyTorch but unallocated.",
    new_oom("300.00 MiB", "23.65 GiB", "60.00 MiB", "22.30 GiB", "800.00 MiB"),
    old_oom("200.00 MiB", "15.90 GiB", "14.20 GiB", "30.00 MiB", "14.80 GiB"),  # 614 MiB spare
])
def test_a_cache_that_held_a_sizable_request_is_fragmentation(line: str) -> None:
    """Under 5% of the card unused in the cache, but more than the request and under four times it: the block
    that failed was a big one the cache's holes could have held."""
    report = oom.parse_oom(line)
    assert report is not None and report.kind == oom.FRAGMENTATION


@pytest.mark.parametrize("line", [
    old_oom("3.00 GiB", "39.39 GiB", "35.00 GiB", "1.20 GiB", "37.00 GiB"),  # 2 GiB spare: 5% of the card
    old_oom("40.00 MiB", "15.90 GiB", "14.20 GiB", "30.00 MiB", "14.80 GiB"),  # a tiny request: the holes are tiny
    new_oom("200.00 MiB", "23.65 GiB", "60.00 MiB", "22.80 GiB", "300.00 MiB"),  # a small cache slack
    new_oom("9.50 GiB", "79.15 GiB", "0.50 GiB", "70.00 GiB", "8.50 GiB"),  # spare + free short of the request
    new_oom("40.00 GiB", "23.65 GiB", "12.00 GiB", "8.00 GiB", "3.00 GiB"),  # a request beyond the card
    # https://github.com/lxe/simple-llm-finetuner/issues/46: a full T4
    old_oom("44.00 MiB", "14.56 GiB", "13.25 GiB", "10.44 MiB", "13.83 GiB"),
])
def test_a_full_cards_slack_is_not_fragmentation(line: str) -> None:
    report = oom.parse_oom(line)
    assert report is not None and report.kind == oom.FULL


# -- a message wrapped over lines ----------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    # https://github.com/152334H/DL-Art-School/issues/56: hard-wrapped in the issue, mid-parenthesis
    "`OutOfMemoryError: CUDA out of memory. Tried to allocate 1.55 GiB (GPU 0; 23.99 GiB total capacity; 20.44 GiB "
    "already\nallocated; 0 bytes free; 22.59 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
    "memory try setting\nmax_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
    "PYTORCH_CUDA_ALLOC_CONF\nDrücken Sie eine beliebige Taste . . .`",
    # a console's width cutting the new format in the middle of a word, over three lines
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB. GPU 1 has a total capacity of 47.5\n"
    "4 GiB of which 1.10 GiB is free. Of the allocated memory 38.00 GiB is allocated by PyTorch, and 7.20 GiB\n"
    " is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting",
    # the request on one line, the numbers on the next
    "RuntimeError: CUDA out of memory. Tried to allocate 1.50 GiB\n(GPU 0; 10.76 GiB total capacity; 6.20 GiB "
    "already allocated; 300.00 MiB free; 8.90 GiB reserved in total by PyTorch)",
])
def test_a_wrapped_message_is_read_whole(text: str) -> None:
    assert first_id(text) == "oom_fragmentation"


@pytest.mark.parametrize(("text", "expected"), [
    # the numbers end the message: the next line (a frame, a log line, a bar) is not read into it
    (old_oom("20.00 MiB", "8.00 GiB", "6.06 GiB", "0 bytes", "6.38 GiB") + "\n  7.00 GiB free on the host",
     oom.FULL),
    # an unfinished message followed by a line that adds no number
    ("RuntimeError: CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; 10.76 GiB total capacity;\n"
     '  File "train.py", line 3, in <module>', oom.UNKNOWN),
])
def test_only_a_line_that_goes_on_with_the_numbers_is_joined(text: str, expected: str) -> None:
    first, second = text.split("\n")
    joined = oom.continued(first, second)
    report = oom.parse_oom(joined if joined is not None else first)
    assert report is not None and report.kind == expected
    assert (joined is None) == (not oom.message_open(first) or expected == oom.UNKNOWN)


# -- an OOM in the person's words ----------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    # https://github.com/gentaiscool/end2end-asr-pytorch/issues/29
    ("I set the barch size to 4 and finally can train normally. But after one epoch, i also met the OOM error in "
     "validation.", "oom_at_eval"),
    # https://github.com/unslothai/unsloth/issues/432: the sentence runs over three lines
    ("If you train very big model with 4bit it will be able to fit\n\nBut during Lora merging with \n"
     "`model.save_pretrained_merged(\"model\", tokenizer, save_method = \"merged_16bit\",)`\n"
     "It need to be dequqntized so immidiately gives OOM\n", "oom_at_save"),
    # https://github.com/Lightning-AI/pytorch-lightning/issues/7432
    ("Testing after tuning and fitting raise a CUDA out of memory error.", "oom_at_eval"),
    ("Fitting works; when I test the model on the held-out split it OOMs on my 3060.", "oom_at_eval"),
    ("Training finishes, then exporting the merged model\nto safetensors hits CUDA OOM on the A10G.", "oom_at_save"),
    ("训练正常，但是在验证的时候显存不足", "oom_at_eval"),
    ("还没开始训练就OOM了", "oom_full"),  # `没` alone denies nothing: before training even began, it did
    ("Llama-3-8B with batch 8 on a 4090 goes OOM after 20 steps", "oom_full"),
])
def test_an_oom_in_the_persons_words(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize("text", [
    "I set auto_find_batch_size=True to avoid OOM on smaller cards.",
    "Training runs fine without OOM now, but the loss never goes down.",
    "if it OOMs, lower the batch size",
    "[ 1234.567] Out of memory: Killed process 4242 (python) total-vm:12345kB, oom-killer",
    "{'loss': 1.23, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.1}\nNo OOM so far at batch 16.",
    "def test_model_does_not_oom(): pass",
    # wave 28's dev half (mmdetection#10738), its clause: an OOM that other frameworks would raise, denied
    "两GPU显存剩余不同时，并不会像大多数训练框架一样出现out of memory的错误",
    "训练时没有出现显存不足，但是速度很慢",
    "如果batch size再大就会OOM",
])
def test_words_that_do_not_report_an_oom(text: str) -> None:
    assert not first_id(text).startswith("oom")


def test_the_programs_message_replaces_the_persons_words() -> None:
    """The person's words come first in most pastes; the message under them, with its frames, says more."""
    text = ("I always get OOM when training, please help\n"
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3/site-packages/transformers/trainer.py", line 2010, in evaluate\n'
            "    output = eval_loop(\n"
            "torch.cuda.OutOfMemoryError: CUDA out of memory.\n")
    assert first_id(text) == "oom_at_eval"


@pytest.mark.parametrize(("text", "expected"), [
    # https://github.com/tinygrad/tinygrad/pull/3323
    ("the current ops_torch.py backend ooms because of memory fragmentation on a 4090 on: \n"
     "examples/beautiful_mnist.py\n\nsetting the envvar PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True fixes it",
     "oom_fragmentation"),
    ("RuntimeError: CUDA error: out of memory\nnvidia-smi shows another user's process holding 20 GB of the GPU",
     "oom_other_process"),
    # PyTorch's own hint under its message names fragmentation as a possibility: the numbers decide
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 8.00 GiB total capacity; "
     "6.06 GiB already allocated; 0 bytes free; 6.38 GiB reserved in total by PyTorch) If reserved memory is >> "
     "allocated memory try setting\nmax_split_size_mb to avoid fragmentation.  See documentation for Memory "
     "Management and PYTORCH_CUDA_ALLOC_CONF", "oom_full"),
    ("RuntimeError: CUDA error: out of memory\nWe tried to avoid fragmentation with smaller buckets.", "oom_full"),
])
def test_the_cause_in_the_persons_words_when_the_message_has_no_numbers(text: str, expected: str) -> None:
    assert first_id(text) == expected


# -- an OOM before the program held memory -------------------------------------------------------------


@pytest.mark.parametrize("line", [
    # https://github.com/tensorflow/tensorflow/issues/30594
    "2019-07-11 12:42:11.226602: W tensorflow/compiler/xla/service/platform_util.cc:240] unable to create "
    "StreamExecutor for CUDA:0: failed initializing StreamExecutor for CUDA device ordinal 0: Internal: failed call "
    "to cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY: out of memory; total memory reported: 11523260416",
    "E external/xla/xla/stream_executor/cuda/cuda_driver.cc:282] failed call to cuCtxCreate: "
    "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
])
def test_no_context_for_want_of_memory_is_another_process(line: str) -> None:
    report = oom.parse_oom(line)
    assert report is not None and report.kind == oom.OTHER_PROCESS
    assert first_id(line) == "oom_other_process"


def test_a_bare_oom_is_not_another_process() -> None:
    report = oom.parse_oom("RuntimeError: CUDA error: out of memory")
    assert report is not None and report.kind == oom.UNKNOWN


# -- the phase, from frames printed after the message --------------------------------------------------

_EVAL_FRAMES = (
    "Traceback (most recent call last):\n"
    '  File "/home/u/train.py", line 88, in main\n'
    "    trainer.train()\n"
    '  File "/usr/lib/python3.10/site-packages/transformers/trainer.py", line 2356, in _inner_training_loop\n'
    "    self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch, ignore_keys_for_eval)\n"
    '  File "/usr/lib/python3.10/site-packages/transformers/trainer.py", line 2761, in _evaluate\n'
    "    metrics = self.evaluate(ignore_keys=ignore_keys_for_eval)\n"
    '  File "/usr/lib/python3.10/site-packages/torch/nn/functional.py", line 2100, in softmax\n'
    "    ret = input.softmax(dim)\n")
_MESSAGE = new_oom("1.20 GiB", "23.65 GiB", "900.00 MiB", "21.50 GiB", "300.00 MiB")


@pytest.mark.parametrize("text", [
    # a logger's record first, its traceback after it: the training loop's frame comes before the evaluation's
    "2024-03-02 10:11:12 | ERROR | train:main:88 - " + _MESSAGE + "\n" + _EVAL_FRAMES,
    # the message pasted above its traceback, and again at its end
    "I get this after the first epoch:\n" + _MESSAGE + "\n\n" + _EVAL_FRAMES + _MESSAGE,
    # the person's words, then a traceback cut before its exception line
    "Evaluation is fine on the small set but on the full one it goes OOM.\n" + _EVAL_FRAMES,
])
def test_frames_after_the_message_say_where_it_struck(text: str) -> None:
    assert first_id(text) == "oom_at_eval"


def test_a_later_traceback_does_not_move_the_oom() -> None:
    """Frames after the OOM's own exception belong to another failure (the next rank's, a cleanup)."""
    text = _MESSAGE + "\n[rank1]: RuntimeError: NCCL communicator was aborted on rank 1.\n" + _EVAL_FRAMES + \
        "ValueError: something else\n"
    assert first_id(text) == "oom_full"


# -- loading a model to write it out -------------------------------------------------------------------

_LOAD_FRAMES = (
    '  File "/usr/lib/python3.10/site-packages/transformers/modeling_utils.py", line 3500, in from_pretrained\n'
    "    model = cls(config, *model_args, **model_kwargs)\n"
    '  File "/usr/lib/python3.10/site-packages/accelerate/utils/modeling.py", line 298, in set_module_tensor_to_device\n'
    "    new_value = value.to(device)\n"
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB. GPU 0 has a total capacity of "
    "14.75 GiB of which 100.00 MiB is free. Of the allocated memory 14.40 GiB is allocated by PyTorch, and 50.00 MiB "
    "is reserved by PyTorch but unallocated.\n")


@pytest.mark.parametrize("text", [
    # https://github.com/mshumer/gpt-llm-trainer/issues/15: the cell's comment says the load is for the merge
    "OutOfMemoryError                          Traceback (most recent call last)\n"
    "[<ipython-input-19-30423dea3f7e>](https://localhost:8080/#) in <cell line: 8>()\n"
    "      6 \n"
    "      7 # Reload model in FP16 and merge it with LoRA weights\n"
    "----> 8 base_model = AutoModelForCausalLM.from_pretrained(\n"
    "      9     model_name,\n\n"
    "4 frames\n"
    "[/usr/local/lib/python3.10/dist-packages/accelerate/utils/modeling.py](https://localhost:8080/#) in "
    "set_module_tensor_to_device(module, tensor_name, device, value, dtype, fp16_statistics)\n"
    "--> 298             new_value = value.to(device)\n",
    # Jupyter's dialect, the merge a line after the load
    "Cell In[7], line 3\n"
    "      1 base = AutoModelForCausalLM.from_pretrained(base_id, torch_dtype=torch.float16)\n"
    "----> 2 model = PeftModel.from_pretrained(base, adapter_dir)\n"
    "      3 model = model.merge_and_unload()\n" + _LOAD_FRAMES,
    # a plain traceback from a script named for the merge
    "Traceback (most recent call last):\n"
    '  File "/work/scripts/merge_lora_weights.py", line 21, in <module>\n'
    "    base = AutoModelForCausalLM.from_pretrained(args.base, torch_dtype=torch.float16, device_map='auto')\n"
    + _LOAD_FRAMES,
    # a tool's own merge script is the program run (`xtuner convert merge` runs its model_converters/merge.py from
    # site-packages): a library's frame, but the entry of the program
    "Traceback (most recent call last):\n"
    '  File "/opt/venv/lib/python3.11/site-packages/xtuner/tools/model_converters/merge.py", line 80, in <module>\n'
    "    main()\n"
    '  File "/opt/venv/lib/python3.11/site-packages/xtuner/tools/model_converters/merge.py", line 47, in main\n'
    "    model = AutoModelForCausalLM.from_pretrained(\n" + _LOAD_FRAMES,
    # the same run as a module, under runpy's frames
    "Traceback (most recent call last):\n"
    '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
    '  File "<frozen runpy>", line 88, in _run_code\n'
    '  File "/opt/venv/lib/python3.11/site-packages/sometool/export_merged.py", line 30, in <module>\n'
    "    base = load_base(args)\n" + _LOAD_FRAMES,
])
def test_loading_a_model_to_merge_it_is_the_save(text: str) -> None:
    assert first_id(text) == "oom_at_save"


def test_a_tools_merge_script_is_told_as_a_merge() -> None:
    """xtuner's merge OOM was read as loading (and, told in words, as a training step): the script named for the
    merge counted only in the user's own code, and xtuner's lives in site-packages."""
    text = ("Traceback (most recent call last):\n"
            '  File "/opt/venv/lib/python3.11/site-packages/xtuner/tools/model_converters/merge.py", line 80, in main\n'
            "    model_unmerged = PeftModel.from_pretrained(\n" + _LOAD_FRAMES)
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    assert items[0].id == "oom_at_save" and "merging" in items[0].title
    assert "while merging the adapter in" in items[0].evidence and "while saving a checkpoint" not in items[0].evidence


@pytest.mark.parametrize("text", [
    # loading to train, in a script and a cell that say nothing of writing the model out
    "Traceback (most recent call last):\n"
    '  File "/work/scripts/train_lora.py", line 21, in <module>\n'
    "    base = AutoModelForCausalLM.from_pretrained(args.base, torch_dtype=torch.float16, device_map='auto')\n"
    + _LOAD_FRAMES,
    "Cell In[7], line 2\n"
    "      1 # load the base model in 16 bit\n"
    "----> 2 base = AutoModelForCausalLM.from_pretrained(base_id, torch_dtype=torch.float16)\n"
    "      3 trainer = SFTTrainer(model=base, args=args)\n" + _LOAD_FRAMES,
    # a tool's training script as the program; a library's file named for a conversion deeper in, not the program
    "Traceback (most recent call last):\n"
    '  File "/opt/venv/lib/python3.11/site-packages/xtuner/tools/train.py", line 360, in main\n'
    "    runner = Runner.from_cfg(cfg)\n" + _LOAD_FRAMES,
    "Traceback (most recent call last):\n"
    '  File "/work/scripts/train_lora.py", line 21, in <module>\n'
    "    base = build(args)\n"
    '  File "/opt/venv/lib/python3.11/site-packages/somelib/convert_utils.py", line 12, in build\n'
    "    return AutoModelForCausalLM.from_pretrained(args.base)\n" + _LOAD_FRAMES,
])
def test_loading_a_model_to_train_it_is_no_save(text: str) -> None:
    assert first_id(text) == "oom_full"


# -- the host's memory while the model is written out --------------------------------------------------


@pytest.mark.parametrize("text", [
    # unsloth's merge, killed by the kernel's OOM killer (the shell prints `Killed`)
    "Unsloth: Merging 4bit and LoRA weights to 16bit...\nUnsloth: Will use up to 5.34 out of 12.67 RAM for saving.\n"
    " 47%|████▋     | 15/32 [00:20<00:25,  1.49s/it]\nKilled\n",
    # peft's merge on the CPU, PyTorch 2's wording
    "Traceback (most recent call last):\n"
    '  File "/home/u/tools/fuse.py", line 12, in <module>\n'
    "    model = model.merge_and_unload()\n"
    '  File "/usr/lib/python3.10/site-packages/peft/tuners/lora/layer.py", line 400, in get_delta_weight\n'
    "    output_tensor = transpose(weight_B @ weight_A, self.fan_in_fan_out) * self.scaling[adapter]\n"
    "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to "
    "allocate 939524096 bytes.\n",
    # PyTorch 1's wording, in the Trainer's checkpoint save
    "Saving model checkpoint to out/checkpoint-500\n"
    "RuntimeError: [enforce fail at CPUAllocator.cpp:64] . DefaultCPUAllocator: can't allocate memory: you tried to "
    "allocate 2097152000 bytes. Error code 12 (Cannot allocate memory)\n",
    # an export command, and the launcher's report of its SIGKILL
    "$ llamafactory-cli export examples/merge_lora/qwen2_lora_sft.yaml\n"
    "subprocess.CalledProcessError: Command '['python', 'export.py']' died with <Signals.SIGKILL: 9>.\n",
])
def test_the_host_running_out_of_ram_while_saving_is_the_save(text: str) -> None:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    assert items[0].id == "oom_at_save" and "RAM" in items[0].title


@pytest.mark.parametrize("text", [
    # killed in training: the host's memory, but no save
    "{'loss': 1.2, 'grad_norm': 0.4, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
    " 12%|█▏        | 120/1000 [02:00<14:40,  1.00s/it]\nKilled\n",
    # the CPU allocator while loading data
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 630, in __next__\n'
    "    data = self._next_data()\n"
    "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to "
    "allocate 939524096 bytes.\n",
])
def test_the_host_running_out_of_ram_elsewhere_is_no_save(text: str) -> None:
    assert first_id(text) != "oom_at_save"


@pytest.mark.parametrize("before", [
    "Unsloth: Merging 4bit and LoRA weights to 16bit...",
    # https://github.com/hiyouga/LlamaFactory/issues/3277: exporting a model with its adapter merges it
    "`CUDA_VISIBLE_DEVICES=0 python src/export_model.py --model_name_or_path /models/Qwen-14B-Chat "
    "--adapter_name_or_path saves/lora/checkpoint-1000 --export_dir /models/merged`",
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.10/site-packages/peft/tuners/lora/model.py", line 784, in merge_and_unload\n'
    "    return self._unload_and_optimize_model(",
    # the merge commands of tools, run before the message (a subcommand under `convert` too)
    "$ xtuner convert merge /models/internlm2-7b ./work_dirs/iter_900_hf ./merged --max-shard-size 2GB",
    "litgpt merge_lora checkpoints/out/lora/final",
])
def test_a_merge_gets_the_merge_move(before: str) -> None:
    items, _ = diagnose_stream(io.BytesIO((before + "\n" + _MESSAGE).encode("utf-8")), "pasted")
    assert items[0].id == "oom_at_save" and "merging" in items[0].title and "device_map='cpu'" in items[0].title


def test_a_checkpoint_save_keeps_the_save_move() -> None:
    items, _ = diagnose_stream(io.BytesIO(("Saving model checkpoint to out/checkpoint-500\n" + _MESSAGE).encode()),
                               "pasted")
    assert items[0].id == "oom_at_save" and "merging" not in items[0].title


# -- more of the program's own words -------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[32,512,512]"
    " and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 "
    "bytes.",
])
def test_tensorflow_and_xla_ooms_are_ooms(line: str) -> None:
    assert oom.is_oom_line(line)
    assert first_id(line) == "oom_full"


_TPU_COMPILE = (  # young-geng/EasyLM#98: XLA compiles a program larger than the TPU's memory, and prints its statistics
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in "
    "memory space hbm. Used 87.08G of 30.75G hbm. Exceeded hbm capacity by 56.33G.\n"
    "Total hbm usage >= 88.33G:\n    reserved          1.25G\n    program          87.08G\n"
    "    HLO temp         87.06G (100.0% utilization: Unpadded (86.24G) Padded (86.24G), 0.9% fragmentation (841.66M))\n")


def test_a_tpu_program_larger_than_its_memory_is_a_full_tpu() -> None:
    report = oom.parse_oom(_TPU_COMPILE.splitlines()[0])
    assert report is not None and report.device == "tpu" and report.kind == oom.FULL
    assert report.requested == oom.parse_size("87.08", "G") and report.total == oom.parse_size("30.75", "G")
    items, _ = diagnose_stream(io.BytesIO(_TPU_COMPILE.encode()), "pasted")
    assert items[0].id == "oom_full" and items[0].title.startswith("TPU out of memory"), items[0]
    assert "CUDA" not in items[0].title and "fragmentation" not in items[0].title


_XLA_BUFFERS = (  # the shape of JAX's GPU OOM with its BufferAssignment statistics (numbers of another program)
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 12884901888 "
    "bytes.\nBufferAssignment OOM Debugging.\nBufferAssignment stats:\n"
    "             parameter allocation:    1.20GiB\n              constant allocation:   12.00MiB\n"
    "        maybe_live_out allocation:    6.50GiB\n     preallocated temp allocation:   12.00GiB\n"
    "  preallocated temp fragmentation:  512.00MiB (4.17%)\n                 total allocation:   19.71GiB\n"
    "              total fragmentation:  524.00MiB (2.66%)\n")


def test_xlas_fragmentation_statistic_is_no_fragmentation_said() -> None:
    """XLA prints a `fragmentation:` figure of its own buffer packing beside every OOM: not the allocator fragmented,
    so the program that needs more than the card is a full card; a person's words saying fragmentation still count."""
    assert first_id(_XLA_BUFFERS) == "oom_full"
    said = _XLA_BUFFERS + "The run fails from fragmentation; XLA_PYTHON_CLIENT_ALLOCATOR=platform fixed it.\n"
    assert first_id(said) == "oom_fragmentation"


@pytest.mark.parametrize("line", [
    # TensorFlow's allocator warns and goes on
    "W tensorflow/core/common_runtime/bfc_allocator.cc:275] Allocator (GPU_0_bfc) ran out of memory trying to allocate "
    "2.00GiB with freed_by_count=0. The caller indicates that this is not a failure, but may mean that there could be "
    "performance gains if more memory were available.",
    "ResourceExhaustedError: OOM when allocating tensor with shape[1000,1000] on "
    "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu",
])
def test_tensorflow_warnings_and_host_allocations_are_no_gpu_oom(line: str) -> None:
    assert not oom.is_oom_line(line)


def _frame(path: str, func: str, code: str) -> str:
    return f'  File "{path}", line 10, in {func}\n    {code}\n'


_SITE = "/usr/lib/python3.10/site-packages/"


@pytest.mark.parametrize("frames", [
    # Lightning: the validation loop run from the training epoch's end, by a generic `run`
    _frame(_SITE + "lightning/pytorch/loops/training_epoch_loop.py", "on_advance_end", "self.val_loop.run()")
    + _frame(_SITE + "lightning/pytorch/utilities/_functions.py", "_decorator", "return loop_run(self, *a, **kw)"),
    # mmengine's runner, its loops by name
    _frame(_SITE + "mmengine/runner/runner.py", "train", "model = self.train_loop.run()")
    + _frame(_SITE + "mmengine/runner/loops.py", "run", "self.runner.val_loop.run()")
    + _frame(_SITE + "mmengine/runner/loops.py", "run", "self.run_iter(idx, data_batch)")
    + _frame(_SITE + "mmengine/runner/loops.py", "run_iter", "outputs = self.runner.model.val_step(data_batch)"),
    # a library's evaluation module with generic function names
    _frame(_SITE + "detectron2/engine/defaults.py", "train", "super().train(self.start_iter, self.max_iter)")
    + _frame(_SITE + "detectron2/evaluation/evaluator.py", "run_model", "outputs = model(inputs)"),
    # ultralytics' validator, run by a generic __call__
    _frame(_SITE + "ultralytics/engine/trainer.py", "_do_train", "self.run_callbacks('on_train_epoch_end')")
    + _frame(_SITE + "ultralytics/engine/validator.py", "__call__", "preds = model(batch['img'])"),
    # accelerate's gather in a custom evaluation
    _frame("/home/u/finetune.py", "main", "preds = accelerator.gather_for_metrics(logits)")
    + _frame(_SITE + "accelerate/accelerator.py", "gather_for_metrics", "data = self.gather(input_data)"),
])
def test_evaluation_frames_with_generic_names(frames: str) -> None:
    text = "Traceback (most recent call last):\n" + frames + "torch.cuda.OutOfMemoryError: CUDA out of memory.\n"
    assert first_id(text) == "oom_at_eval"


def test_a_training_loop_run_by_a_generic_name_is_no_evaluation() -> None:
    text = ("Traceback (most recent call last):\n"
            + _frame(_SITE + "mmengine/runner/runner.py", "train", "model = self.train_loop.run()")
            + _frame(_SITE + "mmengine/runner/loops.py", "run", "self.run_iter(data_batch)")
            + _frame(_SITE + "mmengine/runner/loops.py", "run_iter", "outputs = self.runner.model.train_step(data)")
            + "torch.cuda.OutOfMemoryError: CUDA out of memory.\n")
    assert first_id(text) == "oom_full"


@pytest.mark.parametrize(("text", "expected"), [
    ("I use LoRA to save memory, but training still goes OOM on a 12 GB card.", "oom_full"),
    ("Even with gradient checkpoint enabled I get CUDA out of memory at step 1.", "oom_full"),
    ("Saving some VRAM with 8-bit Adam did not help: still OOM.", "oom_full"),
    ("Training is fine but pushing it to the hub runs out of memory.", "oom_at_save"),
    ("OOM when testing the model on the held-out prompts after fine-tuning.", "oom_at_eval"),
    # an inference script's OOM is no evaluation during training (https://github.com/Tianhao-Qi/Mask2DiT/issues/4)
    ("I'm using the examples provided in the GitHub repository for inference, but I'm encountering out-of-memory "
     "(OOM) issues.", "oom_full"),
])
def test_the_phase_words_mean_the_phase(text: str, expected: str) -> None:
    assert first_id(text) == expected


def test_a_metric_function_is_evaluation() -> None:
    text = ("Traceback (most recent call last):\n"
            + _frame("/home/u/run.py", "main", "scores = calc_bleu_metrics(model, val_prompts)")
            + _frame("/home/u/run.py", "calc_bleu_metrics", "out = model.generate(**batch, max_new_tokens=256)")
            + "torch.cuda.OutOfMemoryError: CUDA out of memory.\n")
    assert first_id(text) == "oom_at_eval"


def test_a_lora_layers_merge_is_the_save() -> None:
    """A traceback cut to its inner frames: peft's LoRA layer merge is only called to merge the adapter in."""
    text = (_frame(_SITE + "peft/tuners/lora/bnb.py", "merge", "w_data = output.to(lora_data.dtype) + lora_data")
            + "torch.cuda.OutOfMemoryError: CUDA out of memory.\n")
    assert first_id("Traceback (most recent call last):\n" + text) == "oom_at_save"
    assert first_id("Traceback (most recent call last):\n" + text.replace("peft/tuners/lora", "mylib/ops")) == \
        "oom_full"


@pytest.mark.parametrize(("text", "expected"), [
    ("At first I got OOM with batch 16, so I lowered it to 4. Now it fails with:\n"
     "RuntimeError: CUDA error: device-side assert triggered\n"
     "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
     "incorrect.", "cuda_error"),
    ("Batch 16 gave me OOM, so I use 8 now, and it crashes:\n"
     "Traceback (most recent call last):\n"
     '  File "/home/u/train.py", line 3, in <module>\n'
     "    tokenizer = AutoTokenizer.from_pretrained(path)\n"
     "ValueError: Tokenizer class LlamaTokenizerFast does not exist or is not currently imported.", "exception"),
])
def test_an_oom_only_named_yields_to_what_the_text_shows(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    # https://github.com/hiyouga/LlamaFactory/issues/5419: no word boundary between Chinese and `OOM`
    ("训练时显存还是够用的，但是一到eval_step设置的步数就爆OOM了，这个问题持续很久了。", "oom_at_eval"),
    # https://github.com/unslothai/unsloth/pull/5168
    ("The training was going fine (~15 GB of VRAM used), until it was hitting OOM all of the sudden when eval would "
     "start.", "oom_at_eval"),
    # https://github.com/huggingface/transformers/issues/7232: the phase in one sentence, the OOM in the next
    ("1. Use the Trainer for evaluation (`.evaluate()`, `.predict()`) on the GPU with BERT with a large evaluation "
     "DataSet where the size of the returned prediction Tensors + Model exceed GPU RAM.\n"
     "2. Trainer will crash with a CUDA Memory Exception", "oom_at_eval"),
    # https://github.com/kwea123/ngp_pl/issues/44 (its spelling)
    ("On training phase, the gpu memory used is ~6G, but when on validatation phase, I will get an OOM error.",
     "oom_at_eval"),
    # https://github.com/NovaSky-AI/SkyRL/pull/1768: `Validated on` is no validation phase; the cause in words
    ("Validated on 8xB200 (GLM-4.7-Flash, TP2/EP4, 64K ctx): with the optimizer on GPU the baseline OOMs at step 2 "
     "(~20 GiB reserved-but-unallocated); the trainer flag makes all 5 steps pass.", "oom_fragmentation"),
    ("我的模型在第3个epoch就爆显存了，显存碎片太多", "oom_fragmentation"),
])
def test_more_of_the_persons_words(text: str, expected: str) -> None:
    assert first_id(text) == expected


def test_a_projects_evaluation_package_is_evaluation() -> None:
    # https://github.com/roboflow/rf-detr/issues/1084: relative paths, the message wrapped over three lines
    text = ('File "rfdetr/evaluation/matching.py", line 90, in _match_single_class\n'
            "iou_matrix = _compute_mask_iou(pred_sorted, gt_items)\n"
            'File "rfdetr/evaluation/matching.py", line 44, in _compute_mask_iou\n'
            "gt_flat = gt_masks.bool().view(m, -1).float()  # [M, HW]\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.22 GiB.\n"
            "GPU 0 has a total capacity of 23.56 GiB of which 1.61 GiB is free.\n"
            "Including non-PyTorch memory, this process has 21.67 GiB memory in use.\n")
    assert first_id(text) == "oom_at_eval"


@pytest.mark.parametrize("line", [
    "Out of memory error on GPU 0. Cannot allocate 25.002197MB memory on GPU 0, available memory is only 15.187500MB.",
    "E external/org_tensorflow/tensorflow/compiler/xla/python/local_client.cc:672] Execution of replica 0 failed: "
    "Resource exhausted: Out of memory while trying to allocate 5520758552 bytes.",
])
def test_paddle_and_old_xla_ooms_are_ooms(line: str) -> None:
    assert oom.is_oom_line(line)


# -- status lines, scripts, and the host's memory in words ---------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    # https://github.com/TheLastBen/fast-stable-diffusion/issues/1113: the status printed after the bar
    ("Progress:|██████                   | 25% 1999/8000 [1:02:25<3:07:25,  1.87s/it, loss=0.296, lr=7.75e-7] "
     "SAVING CHECKPOINT...\nConverting to CKPT ...\nKilled\nDone, resuming training ...", "oom_at_save"),
    # https://github.com/LambdaLabsML/examples/issues/41: a checkpoint written in any verb
    ("Epoch 0: 100%|█| 209/209 [06:12<00:00,  1.78s/it, loss=0.0685, v_num=0]\nSummoning checkpoint.\nKilled",
     "oom_at_save"),
    ("Writing the final checkpoint to /ckpt/last.pt\n" + _MESSAGE, "oom_at_save"),
    # https://github.com/layumi/Person_reID_baseline_pytorch/issues/5: a banner that is the phase's name
    ("-------test-----------\n64\nTHCudaCheck FAIL file=/opt/conda/conda-bld/pytorch/work/torch/lib/THC/generic/"
     "THCStorage.cu line=58 error=2 : out of memory", "oom_at_eval"),
    ("=== Validation ===\n" + _MESSAGE, "oom_at_eval"),
    # https://github.com/zjpbinary/CSCBLI/issues/1 and https://github.com/wmcnally/golfdb/issues/10: the script run
    ("CUDA_VISIBLE_DEVICES=0,1 python test.py  --model_path $model_path \\\n"
     "it always tell me that \"RuntimeError: CUDA out of memory. Tried to allocate 2.82 GiB (GPU 0; 31.75 GiB total "
     "capacity; 28.74 GiB already allocated; 1.84 GiB free; 28.75 GiB reserved in total by PyTorch)\"", "oom_at_eval"),
    ("it works with train.py.. but the problem now is in running eval.py (is showing the same error) :\n"
     "RuntimeError: CUDA out of memory. Tried to allocate 58.00 MiB (GPU 0; 4.00 GiB total capacity; 2.49 GiB already "
     "allocated; 44.45 MiB free; 2.57 GiB reserved in total by PyTorch)", "oom_at_eval"),
    # https://github.com/mhamilton723/STEGO/issues/1: the host's RAM, in a script named for the evaluation
    ("Traceback (most recent call last):\n"
     '  File "eval_segmentation.py", line 144, in my_app\n'
     "    outputs = {k: torch.cat(v, dim=0) for k, v in outputs.items()}\n"
     "RuntimeError: [enforce fail at CPUAllocator.cpp:68] . DefaultCPUAllocator: can't allocate memory: you tried to "
     "allocate 24053760000 bytes. Error code 12 (Cannot allocate memory)", "oom_at_eval"),
    # https://github.com/TheLastBen/fast-stable-diffusion/issues/1337 and PaddleDetection#3277: RAM in words
    ("Can't even merge 4gb models because out of ram, should I use colab pro or any solutions?", "oom_at_save"),
    ("训练完第一个epoch,保存模型的时候提示 memory error,查看了下保存路径", "oom_at_save"),
])
def test_where_the_text_says_the_run_was(text: str, expected: str) -> None:
    assert first_id(text) == expected


@pytest.mark.parametrize("text", [
    "Loading checkpoint shards: 100%|██████████| 4/4 [00:10<00:00,  2.50s/it]\nResuming from checkpoint\n" + _MESSAGE,
    "python train.py --config configs/test_config.yaml\n" + _MESSAGE,
    "Test set: 10000 images\n{'loss': 1.2, 'grad_norm': 0.3, 'learning_rate': 1e-05, 'epoch': 0.2}\n" + _MESSAGE,
    "Loading checkpoint shards: 100%|██████████| 4/4 [00:10<00:00,  2.50s/it]\nKilled",
])
def test_reading_a_checkpoint_and_training_scripts_are_no_phase(text: str) -> None:
    assert first_id(text) not in ("oom_at_save", "oom_at_eval")


def test_a_comment_in_a_notebooks_code_is_no_status() -> None:
    # https://github.com/ROCm/legacy-rocm-build/issues/4468: bitsandbytes' forward, its comment `# 3. Save state`
    text = ("--> 520 output = torch.nn.functional.linear(A, F.dequantize_4bit(B, quant_state).to(A.dtype).t(), bias)\n"
            "    522 # 3. Save state\n"
            "    523 ctx.state = quant_state\n\n"
            "OutOfMemoryError: HIP out of memory. Tried to allocate 224.00 MiB. GPU ")
    assert first_id(text) == "oom_full"


@pytest.mark.parametrize(("line", "kind"), [
    # https://github.com/BaberMuyu/2020CCF-NER/issues/6 and sentence-transformers#57: PyTorch 1.0's "cached" slack
    ("RuntimeError: CUDA out of memory. Tried to allocate 294.00 MiB (GPU 0; 7.79 GiB total capacity; 6.27 GiB already "
     "allocated; 61.62 MiB free; 617.88 MiB cached)", oom.FULL),
    ("RuntimeError: CUDA out of memory. Tried to allocate 34.00 MiB (GPU 0; 10.91 GiB total capacity; 9.52 GiB already "
     "allocated; 17.56 MiB free; 776.30 MiB cached)", oom.FULL),
    # a tenth of the card unused in that era's cache is still the cache's doing
    ("RuntimeError: CUDA out of memory. Tried to allocate 1.00 GiB (GPU 0; 11.17 GiB total capacity; 8.90 GiB already "
     "allocated; 40.00 MiB free; 1.80 GiB cached)", oom.FRAGMENTATION),
])
def test_the_cached_era_slack(line: str, kind: str) -> None:
    report = oom.parse_oom(line)
    assert report is not None and report.kind == kind


# -- other processes, seen from outside the message ----------------------------------------------------


@pytest.mark.parametrize("text", [
    # https://github.com/tensorflow/tensorflow/issues/8170: TensorFlow's device report at start
    "I tensorflow/core/common_runtime/gpu/gpu_device.cc:885] Found device 0 with properties:\n"
    "name: GeForce GTX 1080\nTotal memory: 7.92GiB\nFree memory: 190.31MiB\n"
    "E tensorflow/stream_executor/cuda/cuda_driver.cc:1002] failed to allocate 190.31M (199557120 bytes) from device: "
    "CUDA_ERROR_OUT_OF_MEMORY",
    # https://github.com/wencolani/CrossE/issues/2: the later wording, the driver's line cut short
    "totalMemory: 15.90GiB freeMemory: 3.12GiB\ninitializing raw training data...\n"
    "2019-07-31 12:26:59.036369: E tensorflow/stream_executor/cuda/cuda_driver.cc:806] failed to allocate 7.63",
    # https://github.com/donaldlab/OSPREY3/issues/67: the driver's stack below the exception names the context
    "14 jpype._jexception.CudaExceptionPyRaisable: jcuda.CudaException: CUDA_ERROR_OUT_OF_MEMORY\n15\n"
    "16 jcuda.CudaException: CUDA_ERROR_OUT_OF_MEMORY\n"
    "17     at jcuda.driver.JCudaDriver.checkResult(JCudaDriver.java:337)\n"
    "18     at jcuda.driver.JCudaDriver.cuCtxCreate(JCudaDriver.java:1514)",
])
def test_memory_held_before_the_program_allocated(text: str) -> None:
    assert first_id(text) == "oom_other_process"


@pytest.mark.parametrize("text", [
    # most of the card free at start: the program filled it itself
    "totalMemory: 15.90GiB freeMemory: 15.43GiB\n"
    "E tensorflow/stream_executor/cuda/cuda_driver.cc:806] failed to allocate 7.63G (8192000000 bytes) from device: "
    "CUDA_ERROR_OUT_OF_MEMORY",
    # a context mentioned far from the OOM, after another exception, is not its cause
    "RuntimeError: CUDA error: out of memory\nValueError: bad shape\nValueError: again\n"
    "note: cuCtxCreate is called once per process",
])
def test_memory_free_at_start_is_no_neighbour(text: str) -> None:
    assert first_id(text) == "oom_full"


@pytest.mark.parametrize(("before", "expected"), [
    # ultralytics' validation bar names its metrics, not its phase
    ("                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95):  35%|███▌      | "
     "7/20 [00:03<00:06,  2.01it/s]", "oom_at_eval"),
    # mmcv's test loop and mmengine's validation log
    ("[>>>>>>>>>>>>                  ] 2000/5000, 22.4 task/s, elapsed: 89s, ETA:   134s", "oom_at_eval"),
    ("12/04 10:00:00 - mmengine - INFO - Epoch(val) [1][ 50/500]    eta: 0:01:10  time: 0.1530  data_time: 0.0100",
     "oom_at_eval"),
    ("12/04 10:00:00 - mmengine - INFO - Epoch(train) [1][ 50/500]  lr: 1.0e-02  eta: 0:11:10  loss: 1.2345",
     "oom_full"),
    # a conversion writes the model out
    ("==((====))==  Unsloth: Conversion from QLoRA to GGUF information", "oom_at_save"),
    ("Converting to CKPT ...", "oom_at_save"),
    ("Converting the dataset to the chat format", "oom_full"),
])
def test_more_status_lines(before: str, expected: str) -> None:
    assert first_id(before + "\n" + _MESSAGE) == expected
