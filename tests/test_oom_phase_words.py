"""Issue 23: an OOM's phase and cause in words a reader has not seen before. Each rule names the mechanism it reads;
the dev lines that motivated it are quoted with their source, and wordings of our own (other verbs, tools, numbers,
Chinese) show it reads the mechanism, not the excerpt; negatives show healthy text and other failures keep their
answer."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic.advisor import phase_words


def first_id(text: str) -> str:
    """The id of the doctor's first item for a pasted text ('' when it finds nothing)."""
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    return items[0].id if items else ""


JAX_OOM = "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2147483648 bytes."


@pytest.mark.parametrize("words", [
    "Setting XLA_PYTHON_CLIENT_ALLOCATOR=platform fixed the OOM for me.",
    "With XLA_PYTHON_CLIENT_ALLOCATOR=platform the OOM is gone.",
    "os.environ['XLA_PYTHON_CLIENT_ALLOCATOR'] = 'platform' solved this OOM.",
])
def test_xlas_allocator_remedy_is_read_in_any_case(words: str) -> None:
    """The cheap test before the cause's words compares lowered text: a hint in capitals (`XLA_PYTHON`) never
    matched, so XLA's platform allocator, the JAX remedy for fragmentation, was never read as one."""
    assert first_id(JAX_OOM + "\n" + words) == "oom_fragmentation"


def test_every_cause_hint_is_lower_case() -> None:
    """The hints are checked against lowered text: one with a capital letter could never match."""
    assert all(hint == hint.lower() for hint in phase_words._CAUSE_HINTS)


# -- an OOM said in words, and the phase it names ---------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    # https://github.com/huggingface/transformers/issues/23386: the remedy's `cpu`, a later sentence, is no host OOM
    ("I'm running train.py on 32GB GPUs to finetune LLaMA-7B with FSDP turned on. The training process goes well but I "
     "get cuda oom when saving the final checkpoint. The entire fp32 state dict cannot fit in my gpu memory. A possible "
     "solution is to offload state dict to cpu mentioned in the pytorch issue? Is there any better way to handle this?",
     "oom_at_save"),
    ("Training is fine, but evaluation hits a CUDA OOM. Would moving the logits to the CPU help?", "oom_at_eval"),
    ("The model OOMs when merging the LoRA. I have 64 GB of RAM if that matters.", "oom_at_save"),
    ("保存模型的时候显存不足。我试过把 state dict 先放到 CPU 上。", "oom_at_save"),
    # the host's memory said to be what filled, in another sentence of the line: the host's
    ("During evaluation it runs out of memory. The host RAM is full at 64 GB.", "oom_at_eval"),
])
def test_host_words_count_in_the_ooms_own_sentence(text: str, expected: str) -> None:
    """Mechanism: which memory ran out is said in the sentence that names the OOM; a host word in another sentence
    (a remedy that offloads to the CPU, the RAM the machine has) does not make a GPU OOM the host's."""
    assert first_id(text) == expected


def host_title(text: str) -> str:
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    return items[0].title if items else ""


def test_host_ram_said_full_stays_the_hosts() -> None:
    """The negative of the rule above: a line whose other sentence says the host's RAM filled is the host's OOM."""
    assert "host memory" in host_title("During evaluation it runs out of memory. The host RAM is full at 64 GB.")


@pytest.mark.parametrize("text, expected", [
    # https://github.com/meta-llama/llama-cookbook/issues/45
    ("When training with FSDP without LORA, training finishes successfully but while saving the model, it runs out of "
     "CUDA memory.", "oom_at_save"),
    # https://github.com/Jittor/JNeRF/issues/32: Jittor's allocator, and the person's words for the phase
    ("The memory-usage when training is about 5400M/ 12G. But it fills up the memory when validate, and the whole "
     "training is suspended therefore.\n[w 0718 17:48:56.120434 88 cuda_device_allocator.cc:29] Unable to alloc cuda "
     "device memory, use unify memory instead. This may cause low performance.", "oom_at_eval"),
    ("It ran out of device memory during predict.", "oom_at_eval"),
    ("Failed to alloc 2GB on the GPU when saving the checkpoint.", "oom_at_save"),
    ("The eval loop goes out of video memory on my 4060.", "oom_at_eval"),
])
def test_out_of_memory_in_any_devices_words(text: str, expected: str) -> None:
    """Mechanism: the device's memory ran out, whatever the device is called (GPU, CUDA, device, video memory) and
    however the allocator's failure is spelled (`allocate`, `alloc`)."""
    assert first_id(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("The LoRA trains in 9 GB of my 24 GB card, yet accelerator.save_state(out_dir) runs out of memory.", "oom_at_save"),
    ("Training is fine, then trainer.save_state() dies with CUDA out of memory.", "oom_at_save"),
    ("显存不足，报错在 save_state 这一步", "oom_at_save"),
    # a save_state the run never reached
    ("It runs out of memory at step 3; save_state is never reached.", "oom_full"),
])
def test_save_state_named_is_the_save(text: str, expected: str) -> None:
    """Mechanism: the save named by its call, accelerate's and the Trainer's `save_state` (it saves the model, the
    optimizer and the RNG states): an OOM said to happen there was read as a training step's, `save_` followed by
    `state` being in no name the save's words knew."""
    assert first_id(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("每次评估的时候显存就会溢出。", "oom_at_eval"),  # words between the memory and its running short
    ("我用了两张卡，为什么显存还是不够？", "oom_full"),
    ("保存模型时显存直接爆了", "oom_at_save"),
    ("When I run the evaluation, 24GB of GPU memory is not enough.", "oom_at_eval"),
    ("The card's memory is insufficient for the merge.", "oom_at_save"),
    ("Every rank loads the weights, causing cuda:0 memory to explode.", "oom_full"),
    ("I keep running out of VRAM on my 48 GB card when I train the LoRA.", "oom_full"),
    ("用deepspeed zero2训练会超显存", "oom_full"),
    ("保存模型的时候超出显存了", "oom_at_save"),
])
def test_memory_said_to_run_short_in_other_words(text: str, expected: str) -> None:
    """Mechanism: a person says the card's memory ran short with words between the memory and the shortfall
    (`显存会溢出`, `memory is not enough`, `memory to explode`): an OOM, as `显存溢出` and `not enough memory` are."""
    assert first_id(text) == expected


@pytest.mark.parametrize("text, expected", [
    # https://github.com/unslothai/unsloth/issues/1585 (the local 3090's run)
    ("I also tryed locally with 24 GB VRAM 3090 RTX and getting the same memory crash when I merge the model:",
     "oom_at_save"),
    ("Evaluation keeps failing due to insufficient GPU memory.", "oom_at_eval"),
    ("The merge step dies because of VRAM.", "oom_at_save"),
    # https://github.com/hiyouga/LlamaFactory/issues/2705: a card's space ran short, in the export's merge
    ("我通过LF+deepspeed zero-v2 + qlora ，微调 sqlcoder2-34B-alpha 模型，微调顺利完成。\n\n在 export 合并模型阶段报错显示某张卡空间不足。",
     "oom_at_save"),
    ("保存的时候单卡空间不够。", "oom_at_save"),
])
def test_a_failure_put_down_to_the_cards_memory(text: str, expected: str) -> None:
    """Mechanism: the person says a failure came from the card's memory (a crash `due to` or `for` memory, a `memory
    crash`, a card whose space ran short) without the program's message: an OOM, in the phase they name."""
    assert first_id(text) == expected


@pytest.mark.parametrize("text, expected", [
    # https://github.com/MIC-DKFZ/nnUNet/issues/1758
    ("During the validation after each epoch training, the computer will crash due to the memory being full (64G).",
     "oom_at_eval"),
    # https://github.com/unslothai/unsloth/issues/1585 (the Colab runs)
    ("They all crash the session for memory problem when I try to merge models at this line:", "oom_at_save"),
    ("My PC freezes because the memory fills up when the validation starts.", "oom_at_eval"),
    ("Kaggle crashes the session due to memory while saving the merged model.", "oom_at_save"),
    ("验证的时候服务器死机，内存满了。", "oom_at_eval"),
])
def test_the_machine_going_down_from_memory_is_the_hosts(text: str, expected: str) -> None:
    """Mechanism: a GPU out of memory raises an error inside the program; only the host's memory running out takes
    the machine (or a notebook's session) down with it: the host's OOM, in the phase named."""
    assert first_id(text) == expected
    assert "host memory" in host_title(text)


@pytest.mark.parametrize("text, expected", [
    ("Single 24G card, LoRA on chatglm2, after a few hours: OOM\ncommand: python train.py --do_train --save_steps 1000 "
     "--output_dir sft_checkpoint --per_device_train_batch_size 4", "oom_full"),
    ("单卡，微调了几个小时，OOM\n训练指令：python train.py --save_steps 1000 --output_dir path_to_sft_checkpoint",
     "oom_full"),
    ("It runs out of memory when saving, my flags: --save_steps 500 --fp16", "oom_at_save"),
])
def test_a_commands_flags_name_no_phase(text: str, expected: str) -> None:
    """Mechanism: a command's flags inside the person's sentence (`--save_steps 1000`, `--output_dir
    path_to_sft_checkpoint`) are the run's settings, not the phase it failed in; the person's own words still are."""
    assert first_id(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("Training runs fine for one epoch, and after the end of the first epoch it runs out of CUDA memory.",
     "oom_at_eval"),
    ("After the first epoch I get CUDA out of memory every time.", "oom_at_eval"),
    ("It runs out of CUDA memory in the middle of the first epoch.", "oom_full"),
    ("After the first epoch of warm-up the batch grows and it runs out of CUDA memory.", "oom_full"),
])
def test_an_oom_at_the_first_epochs_end_is_its_first_evaluation(text: str, expected: str) -> None:
    """Mechanism: a run that trained a whole epoch and fails at its end did not fail in a training step; the first
    epoch's end is where it first evaluates."""
    assert first_id(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("I was facing memory issues while running validation on the full dev set.", "oom_at_eval"),
    ("We ran into GPU memory problems when saving the merged model.", "oom_at_save"),
    ("After the first epoch I got CUDA memory issues during evaluation.", "oom_at_eval"),
    # FastChat#407: the GPU's memory said to run out
    ("Hi, I used the training script in the readme, but my gpu memory still run out.", "oom_full"),
    ("The VRAM quickly runs out when the eval loop starts.", "oom_at_eval"),
    ("加载到第18个分片已经让双卡4090显存饱和了。", "oom_full"),  # VRAM saturated (LlamaFactory#1878)
])
def test_memory_issues_one_ran_into_are_an_oom(text: str, expected: str) -> None:
    """Mechanism: memory issues or problems the person ran into (`facing memory issues`, `CUDA memory problem`) are
    an OOM in their words, in the phase they name."""
    assert first_id(text) == expected


@pytest.mark.parametrize("text", [
    "The server crashed yesterday, memory usage looked fine.",
    "I restarted the machine and the memory was freed.",
    "xformers fails with memory_efficient_attention on this card.",
    "Training crashes with a shape mismatch; memory usage is at 20GB of 24GB.",
    "To avoid running out of CUDA memory during evaluation I set eval_accumulation_steps.",
    "改了batch size之后显存不爆了，但是loss不降。",
    "If the GPU memory is not enough, lower the batch size.",
    "With 4-bit loading the card never runs out of VRAM now, but the loss is NaN after an error in the collator.",
    "只要不超显存就行，现在报错KeyError",
    "显存没饱和，但是报错KeyError",
    "I reduced the layers due to memory issues and now the loss jumps after an error in the config.",
    "There are no memory issues at all, but training fails with a KeyError.",
    "The GPU memory never runs out, but training fails with a KeyError.",
    "To keep the GPU memory from running out I use batch 1; now it fails with a KeyError.",
])
def test_memory_beside_a_failure_is_no_oom(text: str) -> None:
    """Memory named beside a failure that is not its cause, a remedy, or a negation: no OOM."""
    assert not first_id(text).startswith("oom")


# -- the sentence that introduces the pasted error ---------------------------------------------------------------

NEW_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 "
           "GiB of which 1.20 GiB is free. Of the allocated memory 20.10 GiB is allocated by PyTorch, and 300.00 MiB "
           "is reserved by PyTorch but unallocated.")


@pytest.mark.parametrize("intro, expected", [
    ("Every time the trainer saves a checkpoint I get", "oom_at_save"),
    ("As soon as evaluation starts it throws", "oom_at_eval"),
    ("Calling merge_and_unload() gives", "oom_at_save"),
    ("When I run trainer.predict on the test set I get", "oom_at_eval"),
    ("Each validation epoch ends with", "oom_at_eval"),
])
def test_a_sentence_that_introduces_the_error_without_a_colon(intro: str, expected: str) -> None:
    """Mechanism: the person's sentence right before the pasted error names where it failed, whether it ends with a
    colon or with the words one introduces a paste with (`I get`, `it throws`, `gives`); the full card's numbers
    then say nothing of the phase."""
    assert first_id(intro + "\n" + NEW_OOM) == expected


@pytest.mark.parametrize("intro", [
    "Training goes fine and evaluation works too, but then I get",  # the phases named work
    "I run the training script with deepspeed and get",  # no phase but training named
])
def test_an_introduction_naming_no_failing_phase_leaves_the_card_full(intro: str) -> None:
    assert first_id(intro + "\n" + NEW_OOM) == "oom_full"


# -- a status that does the phase's work, in other verbs -----------------------------------------------------------

TRAINING = ("{'loss': 1.2, 'grad_norm': 0.5, 'learning_rate': 1e-4, 'epoch': 0.9}\n"
            " 90%|█████████ | 900/1000 [10:00<01:00, 1.5it/s]\n")


@pytest.mark.parametrize("status, expected", [
    ("Computing metrics...", "oom_at_eval"),
    ("INFO:root:Computing BLEU", "oom_at_eval"),
    ("Calculating perplexity on the eval split...", "oom_at_eval"),
    ("Running inference on the validation set", "oom_at_eval"),
    ("Generating predictions for the test set", "oom_at_eval"),
    ("Test:  [  0/313]  eta: 0:10:00", "oom_at_eval"),
    ("Doing evaluation...", "oom_at_eval"),
    ("Begin to eval", "oom_at_eval"),
    ("Sampling 4 images from the model", "oom_at_eval"),
    ("Writing the merged weights to out/merged", "oom_at_save"),
    ("Starting the merge of adapter into base", "oom_at_save"),
    ("合并模型中...", "oom_at_save"),
])
def test_a_status_that_does_the_phases_work(status: str, expected: str) -> None:
    """Mechanism: the last status before the OOM says what the run was doing, by the phase's work and not only its
    name: work on the validation, test or dev set, computing its metrics, a metric logger's evaluation header, drawing
    samples, writing the weights out, a merge begun, a Chinese `...中` (in progress)."""
    assert first_id(TRAINING + status + "\n" + NEW_OOM) == expected


@pytest.mark.parametrize("status", [
    "Running tokenizer on the validation set",  # the data's preparation, before training
    "Generating train split: 100%|██████████| 500/500 [00:00<00:00, 5000.00 examples/s]",
    "I was computing metrics on my laptop",  # the person's sentence
    "Computing metrics done in 3.2 s",  # over
    "Writing logs to runs/exp1",
])
def test_preparation_sentences_and_finished_work_are_no_status(status: str) -> None:
    assert first_id(TRAINING + status + "\n" + NEW_OOM) == "oom_full"


# -- memory rising to its end, and the run failing with it ---------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("Memory usage spikes to 80GB during eval and the job dies.", "oom_at_eval"),
    ("During validation the GPU memory maxes out and training stops.", "oom_at_eval"),
    ("When saving the model, VRAM usage jumps to 24GB and it crashes.", "oom_at_save"),
    ("The validation step blows up the GPU memory.", "oom_at_eval"),
    ("The evaluation runs out of GPU RAM.", "oom_at_eval"),
    ("保存checkpoint的时候显存直接占满然后报错", "oom_at_save"),
    ("验证阶段显存一直涨，最后挂了", "oom_at_eval"),
])
def test_memory_rising_to_its_end_then_a_failure(text: str, expected: str) -> None:
    """Mechanism: the person tells the card's memory rising to its end (spikes, maxes out, jumps, blows up, 占满,
    一直涨) and the run failing with it, in one sentence: an OOM told without the program's message."""
    assert first_id(text) == expected


@pytest.mark.parametrize("text", [
    "GPU memory usage grows to 20GB and stays there; training runs fine.",
    "Memory usage jumps at step 100 but nothing crashes.",
    "VRAM usage rises during eval, which is expected, and no errors appear.",
])
def test_memory_rising_with_no_failure_is_no_oom(text: str) -> None:
    assert not first_id(text).startswith("oom")


@pytest.mark.parametrize("text, expected", [
    ("It runs out of memory during the sanity check.", "oom_at_eval"),  # Lightning's sanity check is validation
    ("OOM on the first val batch.", "oom_at_eval"),
    ("CUDA OOM in the val loop every time.", "oom_at_eval"),
    ("Out of memory when computing the ROUGE scores", "oom_at_eval"),
    ("OOM in on_validation_epoch_end", "oom_at_eval"),
    ("The validation_step OOMs on the second batch.", "oom_at_eval"),
])
def test_the_evaluation_named_by_its_parts(text: str, expected: str) -> None:
    """Mechanism: the person names the evaluation by one of its parts: its loop, batch or step (`val batch`,
    `validation_step`), a hook that runs it (`on_validation_epoch_end`), Lightning's sanity check (validation steps
    before training), or the metrics it computes (`computing the ROUGE scores`)."""
    assert first_id(text) == expected


@pytest.mark.parametrize("text", [
    "My training OOMs at step 40; validation_split=0.1 is set in the config.",  # a setting, not the failing phase
    "Training OOMs at step 40 even with a small val split in the config, and the validation is never reached.",
])
def test_a_setting_named_for_evaluation_is_no_phase(text: str) -> None:
    assert first_id(text) != "oom_at_eval"


@pytest.mark.parametrize("text, expected", [
    ("--save_steps 1000 --eval_steps 300\nIt always crashes right at step 1000:\n" + NEW_OOM, "oom_at_save"),
    ("save_steps: 500\neval_steps: 300\n训练到第1000步的时候显存爆了\n" + NEW_OOM, "oom_at_save"),
    ("eval_steps=250, save_steps=1000\nThe OOM hits at step 750 every run:\n" + NEW_OOM, "oom_at_eval"),
])
def test_the_step_the_person_names_against_the_intervals(text: str, expected: str) -> None:
    """Mechanism: the step the person says the run failed at, against the settings' eval and save intervals: the
    phase whose interval divides it is the one that ran there (as for the step a progress bar shows)."""
    assert first_id(text) == expected


def test_a_step_no_interval_divides_names_no_phase() -> None:
    assert first_id("--save_steps 1000 --eval_steps 300\nIt crashes at step 1234:\n" + NEW_OOM) == "oom_full"


@pytest.mark.parametrize("text", [
    'At the save_shards line it fails with "DefaultCPUAllocator: not enough memory"; the PC has 16G of RAM.',
    "在save_shards那一行报DefaultCPUAllocator: not enough memory",
    "save_checkpoint() dies with DefaultCPUAllocator: can't allocate memory",
])
def test_a_save_function_named_places_a_host_oom_in_the_save(text: str) -> None:
    """Mechanism: a save function's name (`save_shards`, `save_checkpoint`) names the save as `save_pretrained`
    does; the host's allocator running out there is the save's host OOM."""
    assert first_id(text) == "oom_at_save"


@pytest.mark.parametrize("text", [
    'When training I get "DefaultCPUAllocator: not enough memory".',
    "My Colab session crashed after using all available RAM while loading the model.",
    "训练一开始就内存不足，被系统kill了",
])
def test_a_host_oom_in_no_phase_is_told(text: str) -> None:
    """Mechanism: the host's RAM running out where no save or evaluation is named was told as nothing ("no problems
    found"); it is the run's own host OOM (loading, workers, a dataset in memory)."""
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    assert items and items[0].title.startswith("Out of host memory: the host ran out of RAM")


def test_a_host_oom_raised_keeps_the_exceptions_advice() -> None:
    text = ("RuntimeError: [enforce fail at alloc_cpu.cpp:72] . DefaultCPUAllocator: not enough memory: you tried to "
            "allocate 1048576 bytes.")
    items = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")[0]
    assert items[0].title.startswith("The run failed on RuntimeError") and "host ran out of RAM" in items[0].title


@pytest.mark.parametrize("text, expected", [
    # the model's task, not the predict phase (video_prediction#6)
    ("I set context_frames to 2 in order to predict 8 frames. When I train with batch size 1 it runs out of memory "
     "after a while.", "oom_full"),
    ("The model predicts the next token; training with batch size 8 gives CUDA out of memory.", "oom_full"),
    # an inference run (推理) is no evaluation of a training run (LlamaFactory#2190)
    ("原来模型使用32G V100 推理，显存勉强够；现在替换为v2.0模型，显存不够。", "oom_full"),
    # the Trainer's predict phase by its flag, in Chinese text (LlamaFactory#1346) and in English
    ("用您代码启推理服务，占用显存很正常，但是跑do_predict，显存占用达到了70G，会爆显存。", "oom_at_eval"),
    ("When I use the above command to predict, even 8 H100, there is still a cuda out of memory problem.",
     "oom_at_eval"),
])
def test_predict_as_the_models_task_or_inference_is_no_evaluation(text: str, expected: str) -> None:
    """Mechanism: the eval phase is the run predicting or evaluating (`do_predict`, `to predict` with the trained
    model); not what the model is for (`predict 8 frames`, `predicts the next token`) nor a separate inference run."""
    assert first_id(text) == expected


def test_memory_said_not_to_be_short_is_no_host_oom() -> None:
    """`看显存和内存，不像是不够的样子` says the memory does NOT look short (wave 20's dev half read it as the host's RAM);
    `内存不够` itself still is."""
    assert first_id("训练卡住了，看显存和内存，不像是不够的样子\n") != "exception"
    assert first_id("训练到一半就挂了，内存不够\n") == "exception"


@pytest.mark.parametrize("text", [
    "我的GPU是RTX 3090，但是依然出现cuda内存不够的情况。\n",  # the words of wave 22's TPLinker thread, shortened
    "训练的时候GPU内存不足，batch改成1也不行\n",
    "显卡内存不够，换了小模型就好了\n",
])
def test_memory_of_cuda_or_the_card_is_no_host_oom(text: str) -> None:
    """内存 qualified by CUDA, a GPU or the card (`cuda内存不够`, `GPU内存不足`, `显卡内存`) is the card's memory: a CUDA OOM
    in the person's words, not the host's RAM (wave 22's dev half read `cuda内存不够` as the host running out)."""
    assert first_id(text) == "oom_full"
    assert first_id("跑到一半内存不够了，进程被杀\n") == "exception"  # the host's own still is
